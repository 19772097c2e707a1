//! Early stopping (`[eval] patience`, `watch`, `keep`; issue 58 item 4) and the validation
//! loss it watches: the rules on runs whose validation never moves (a learning rate too
//! small to change an f32 weight), the stop in the log, the checkpoint and a resumed run,
//! the loss against the logits, and the plan's errors.

mod common;

use std::path::{Path, PathBuf};

use saintflow::exec::Interpreter;
use saintflow::infer::{FullGraph, Output};
use saintflow::op::Registry;
use saintflow::plan::Plan;
use saintflow::store::Role;
use saintflow::train::{Checkpoint, Record, TrainOptions, TrainOutcome};
use saintflow::GraphStore;

/// GCN, hidden 8 with dropout 0.5, and no `[eval]` of its own (the shipped one stops as its
/// paper does), with `set` over it.
fn plan(set: &[&str]) -> Plan {
    let mut all = vec!["dims.hidden=8", "layer.0.dropout=0.5"];
    all.extend(set);
    Plan::parse_with_overrides(common::FULL_GCN, "gcn.toml", &all).unwrap()
}

/// GCN with hidden 8 whose updates change no weight: Adam moves each by about lr, and
/// 1e-30 is far below an f32 ulp of a Glorot weight, so every validation is the same.
fn frozen(extra: &[&str]) -> Plan {
    let mut set = vec!["optimizer.lr=1e-30"];
    set.extend(extra);
    plan(&set)
}

fn train(store: &GraphStore, plan: &Plan, epochs: usize) -> TrainOutcome {
    TrainOptions::new(plan, store)
        .runner(&Interpreter)
        .threads(2)
        .seed(3)
        .epochs(epochs)
        .train()
        .unwrap()
}

fn store(dir: &Path) -> (PathBuf, GraphStore) {
    let p = common::planted(dir, 8);
    let s = GraphStore::open(&p).unwrap();
    (p, s)
}

fn stops(records: &[Record]) -> Vec<&Record> {
    records
        .iter()
        .filter(|r| matches!(r, Record::Stop { .. }))
        .collect()
}

#[test]
fn without_watch_a_run_stops_after_patience_evaluations_without_a_strictly_better_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, store) = store(tmp.path());
    let out = train(&store, &frozen(&["eval.patience=3"]), 50);
    // Epoch 1 is the best; 2, 3 and 4 tie it, which is no progress under the default rule.
    assert_eq!(out.stopped_at, Some(4));
    assert_eq!(out.epochs, 4);
    assert_eq!(out.best_epoch, 1);
    assert!(out.test.is_some(), "a stopped run is complete and tested");
    let s = stops(&out.records);
    assert_eq!(s.len(), 1);
    match s[0] {
        Record::Stop {
            epoch,
            patience,
            watch,
            kept,
            ..
        } => {
            assert_eq!((*epoch, *patience, *kept), (4, 3, Some(1)));
            assert!(watch.is_empty());
        }
        _ => unreachable!(),
    }
    // The stop comes after the last epoch's record and before the test.
    let kinds: Vec<&str> = out.records.iter().map(|r| r.kind()).collect();
    assert_eq!(&kinds[kinds.len() - 3..], ["epoch", "stop", "test"]);
    // every = 2: patience counts evaluations (epochs 2, 4, 6, 8), not epochs.
    let out = train(&store, &frozen(&["eval.patience=3", "eval.every=2"]), 50);
    assert_eq!((out.stopped_at, out.best_epoch), (Some(8), 2));
}

#[test]
fn with_watch_ties_are_progress_and_the_best_moves_to_the_latest_tie() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, store) = store(tmp.path());
    // GAT's rule: at least as good counts, so a run whose figures never move never stops,
    // and every epoch's parameters become the best.
    let p = frozen(&["eval.patience=3", r#"eval.watch=["loss", "accuracy"]"#]);
    let out = train(&store, &p, 8);
    assert_eq!(out.stopped_at, None);
    assert_eq!(out.best_epoch, 8);
    assert!(stops(&out.records).is_empty());
    let bests = out
        .records
        .iter()
        .filter(|r| matches!(r, Record::Epoch { best: true, .. }))
        .count();
    assert_eq!(bests, 8);
}

#[test]
fn keep_last_ends_with_the_last_parameters() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, store) = store(tmp.path());
    // A real run (lr as shipped), which keeps moving.
    let p = plan(&[r#"eval.keep="last""#]);
    let last = train(&store, &p, 12);
    assert_eq!(last.best_epoch, 12);
    let best = train(&store, &plan(&[]), 12);
    // Same training, the kept parameters differ only in which epoch's they are.
    let losses =
        |o: &TrainOutcome| -> Vec<u64> { o.losses().iter().map(|l| l.to_bits()).collect() };
    assert_eq!(losses(&last), losses(&best));
    if best.best_epoch != 12 {
        assert_ne!(last.params, best.params);
    }
}

/// The stop is saved: a resumed run of a stopped checkpoint trains no further step and ends
/// as the uninterrupted run did; and a run cut before its stop, resumed, stops where the
/// uninterrupted run stopped (the count of evaluations without progress is in the
/// checkpoint).
#[test]
fn the_stop_and_the_count_survive_a_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, store) = store(tmp.path());
    let p = frozen(&["eval.patience=3"]);
    let ck = tmp.path().join("ck.bin");
    let log = tmp.path().join("run.log");
    let base = TrainOptions::new(&p, &store)
        .runner(&Interpreter)
        .threads(2)
        .seed(3)
        .epochs(50)
        .checkpoint(&ck)
        .resume(true)
        .log(&log);
    // Cut after epoch 3 (two evaluations without progress so far).
    let first = base.clone().stop_after(3).train().unwrap();
    assert_eq!((first.epochs, first.stopped_at), (3, None));
    let c = Checkpoint::load(&ck).unwrap();
    let early = c.early.as_ref().unwrap();
    assert_eq!((early.since, early.stopped_at), (2, None));
    let rest = base.clone().train().unwrap();
    assert_eq!(
        (rest.epochs, rest.stopped_at, rest.best_epoch),
        (4, Some(4), 1)
    );
    let c = Checkpoint::load(&ck).unwrap();
    assert_eq!(c.early.as_ref().unwrap().stopped_at, Some(4));
    // Resumed once stopped: no step, the same ending.
    let again = base.clone().train().unwrap();
    assert_eq!(again.steps, rest.steps);
    assert_eq!((again.stopped_at, again.best_epoch), (Some(4), 1));
    assert_eq!(again.test, rest.test);
    assert_eq!(again.params, rest.params);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches(r#""kind":"stop""#).count(), 1, "{text}");
}

/// The validation loss is the mean softmax cross entropy of the validation nodes' logits
/// (no dropout), recomputed here from the kept parameters' logits.
#[test]
fn the_validation_loss_is_the_mean_cross_entropy_of_the_logits() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, store) = store(tmp.path());
    let p = plan(&[]);
    let out = train(&store, &p, 5);
    let val = out.val.unwrap();
    let lowered = saintflow::compile::lower_for(&p, &store, &Registry::with_builtins()).unwrap();
    let logits = FullGraph::new(&store, &lowered, saintflow::machine::cores())
        .unwrap()
        .in_memory(&Interpreter, &out.params, Output::Logits)
        .unwrap();
    let labels = match store.labels() {
        saintflow::store::Labels::Single(l) => l.to_vec(),
        _ => panic!("single-label store expected"),
    };
    let c = logits.cols;
    let (mut sum, mut n) = (0.0f64, 0usize);
    for v in 0..store.n_nodes() {
        if store.role(v as u32) != Role::Val {
            continue;
        }
        let row: Vec<f64> = logits.data[v * c..(v + 1) * c]
            .iter()
            .map(|&x| f64::from(x))
            .collect();
        let lse = row.iter().map(|x| x.exp()).sum::<f64>().ln();
        sum += lse - row[labels[v] as usize];
        n += 1;
    }
    assert!(n > 10);
    let want = sum / n as f64;
    let got = val.loss.unwrap();
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    // And it is in the epoch records, beside the accuracy.
    let best = out
        .records
        .iter()
        .find_map(|r| match r {
            Record::Epoch { epoch, val, .. } if *epoch == out.best_epoch => *val,
            _ => None,
        })
        .unwrap();
    assert_eq!(best.loss, val.loss);
}

#[test]
fn eval_keys_are_checked_with_the_place_and_what_would_work() {
    let err = |set: &[&str]| -> String {
        Plan::parse_with_overrides(common::FULL_GCN, "gcn.toml", set)
            .unwrap_err()
            .to_string()
    };
    let e = err(&["eval.patience=0"]);
    assert!(e.contains("patience must be ≥ 1, got 0"), "{e}");
    let e = err(&[r#"eval.watch=["los"]"#]);
    assert!(
        e.contains("unknown watch `los`") && e.contains("loss"),
        "{e}"
    );
    let e = err(&[r#"eval.watch=["loss", "loss"]"#]);
    assert!(e.contains("named twice"), "{e}");
    let e = err(&["eval.watch=[]"]);
    assert!(e.contains("watch is empty"), "{e}");
    let e = err(&[r#"eval.watch=["mrr"]"#]);
    assert!(e.contains("unknown watch `mrr`"), "{e}");
    let e = err(&[r#"eval.keep="first""#]);
    assert!(
        e.contains("unknown keep `first`") && e.contains("best"),
        "{e}"
    );
    // A link plan watches ranking figures, not the node loss.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gae.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let e = Plan::parse_with_overrides(&text, "gae.toml", &[r#"eval.watch=["loss"]"#])
        .unwrap_err()
        .to_string();
    assert!(e.contains("ranking figures"), "{e}");
    let ok = Plan::parse_with_overrides(&text, "gae.toml", &[r#"eval.watch=["auc", "hits@50"]"#]);
    assert!(ok.is_ok(), "{:?}", ok.err());
}
