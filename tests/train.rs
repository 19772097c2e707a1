//! Training end to end: every shipped plan learns what a features-only MLP cannot on a
//! planted graph whose classes show in the structure more than in the features; a resumed
//! run reproduces an uninterrupted one bit for bit (also after SIGKILL of the binary);
//! damaged or foreign checkpoints are refused with the file's name; metrics against a
//! brute-force definition; the CLI's JSON log and `embed`.

mod common;

use common::saintflow;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use saintflow::compile::lower_for;
use saintflow::exec::Interpreter;
use saintflow::exec::StepInput;
use saintflow::infer::{FullGraph, InferOptions, Output};
use saintflow::op::Registry;
use saintflow::plan::Plan;
use saintflow::train::{Counts, Metrics, Record, TrainOptions, TrainOutcome};
use saintflow::GraphStore;

fn plan_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plans")
        .join(format!("{name}.toml"))
}

fn load(name: &str, set: &[&str]) -> Plan {
    let path = plan_file(name);
    let text = std::fs::read_to_string(&path).unwrap();
    Plan::parse_with_overrides(&text, &path.display().to_string(), set).unwrap()
}

/// Trains on a two-thread pool (results are reproducible for a thread count).
fn run(opts: &TrainOptions) -> saintflow::Result<TrainOutcome> {
    Ok(opts.train()?)
}

/// The reference interpreter on two threads, `seed`, `epochs`.
fn opts<'a>(store: &'a GraphStore, plan: &'a Plan, seed: u64, epochs: usize) -> TrainOptions<'a> {
    TrainOptions::new(plan, store)
        .runner(&Interpreter)
        .threads(2)
        .seed(seed)
        .epochs(epochs)
}

/// Small sizes for each shipped plan, so the whole comparison trains in seconds.
fn shipped(name: &str) -> (Vec<&'static str>, usize) {
    match name {
        "gcn" => (vec!["dims.hidden=16"], 100),
        "graphsage" => (
            vec![
                "dims.hidden=32",
                "sampler.roots=100",
                "phase.1.sampler.roots=200",
            ],
            10,
        ),
        "graphsage_max" => (
            vec![
                "dims.hidden=32",
                "sampler.roots=100",
                "phase.1.sampler.roots=200",
            ],
            10,
        ),
        "sage_pna" => (
            vec![
                "dims.hidden=32",
                "sampler.roots=100",
                "phase.1.sampler.roots=200",
            ],
            10,
        ),
        "mixhop" => (vec!["dims.w0=8", "dims.w1=6", "dims.w2=6"], 100),
        // The authors' three dropouts learn slowly at this width: 1000 epochs, and no early
        // stop (the paper's patience halts on the small validation set's first plateau).
        "gat" => (
            vec!["dims.hidden=16", "dims.heads=2", "eval.patience=100000"],
            1000,
        ),
        "gin" => (vec!["dims.hidden=32", "sampler.roots=100"], 10),
        "mlp" => (vec!["dims.hidden=32", "sampler.budget=300"], 10),
        "sgc" => (vec![], 100),
        "tagcn" => (vec!["dims.hidden=8"], 100),
        "appnp" => (vec!["dims.hidden=16"], 100),
        "jknet" => (vec!["dims.hidden=16"], 100),
        // Four of GCNII's 64 copies: the same structure, a test's time.
        "gcnii" => (vec!["dims.hidden=16", "layer.1.repeat=4"], 300),
        "gcn_batchnorm" => (vec!["dims.hidden=16"], 100),
        "gcnii_pairnorm" => (vec!["dims.hidden=16", "layer.1.repeat=4"], 300),
        // Its 50 epochs as shipped (full-batch: one step each) are few for this graph's
        // weak signal at Adam's 0.01.
        "rgcn" => (vec!["dims.hidden=16"], 100),
        "rgat" => (vec!["dims.hidden=16"], 100),
        // Link plans (tests/link_train.rs trains them; here only their inference).
        "gae" => (vec!["dims.hidden=8"], 10),
        "graphsage_link" => (vec!["dims.hidden=16", "task.decoder_hidden=8"], 10),
        "rgcn_link" => (vec!["dims.hidden=16"], 10),
        other => panic!("no sizes for plan {other}"),
    }
}

#[test]
fn every_shipped_plan_beats_the_features_only_mlp_on_a_planted_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 11)).unwrap();
    let test_acc = |name: &str| {
        let (set, epochs) = shipped(name);
        let plan = load(name, &set);
        let out = run(&opts(&store, &plan, 1, epochs)).unwrap();
        out.test.unwrap().accuracy
    };
    let mlp = test_acc("mlp");
    // Four classes: chance is 0.25; the MLP sees only weak feature signal.
    assert!(mlp < 0.4, "the MLP should be near chance, got {mlp}");
    let plans = common::gnn_plans();
    assert!(plans.len() >= 6, "{plans:?}");
    // Link plans classify no node (tests/link_train.rs and BENCHMARKS.md measure them).
    let link = |name: &str| {
        let p = Plan::load(format!("{}/plans/{name}.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
        p.task.link().is_some()
    };
    for name in plans.iter().filter(|p| *p != "mlp" && !link(p)) {
        let acc = test_acc(name);
        assert!(
            acc > mlp + 0.15,
            "{name}: test accuracy {acc:.3} should beat the MLP's {mlp:.3} by 0.15"
        );
    }
}

use common::step_losses;

#[test]
fn resumed_run_equals_uninterrupted_run_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 10)).unwrap();
    // A sampler (several steps per epoch), dropout, two phases, weight decay.
    let plan = load(
        "graphsage",
        &[
            "dims.hidden=16",
            "sampler.roots=60",
            "phase.0.epochs=3",
            "phase.1.epochs=3",
            "phase.1.sampler.roots=120",
            "phase.1.lr_factor=0.3",
            "layer.0.dropout=0.2",
            "optimizer.weight_decay=1e-4",
        ],
    );
    let whole = run(&opts(&store, &plan, 3, 0)
        .epochs(None)
        .log(tmp.path().join("whole.log")))
    .unwrap();
    let ck = tmp.path().join("ck.bin");
    let log = tmp.path().join("split.log");
    let part = opts(&store, &plan, 3, 0)
        .epochs(None)
        .checkpoint(&ck)
        .resume(true)
        .log(&log)
        .stop_after(4);
    let first = run(&part).unwrap();
    assert!(first.test.is_none() && first.epochs == 4);
    let rest = run(&part.stop_after(None)).unwrap();
    let (a, b) = (step_losses(&whole.records), step_losses(&rest.records));
    assert!(
        a.len() > 6,
        "several steps per epoch expected, got {}",
        a.len()
    );
    assert_eq!(a.len(), b.len());
    for ((sa, la), (sb, lb)) in a.iter().zip(&b) {
        assert_eq!(sa, sb);
        assert_eq!(la.to_bits(), lb.to_bits(), "step {sa}: {la} vs {lb}");
    }
    assert_eq!(whole.test, rest.test);
    assert_eq!(whole.best_epoch, rest.best_epoch);
    assert_eq!(whole.params, rest.params);
    // The log file was cut back to the checkpoint and continued: same records as the
    // uninterrupted log, timings aside.
    let read = |p: &Path| -> Vec<Record> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (lw, ls) = (read(&tmp.path().join("whole.log")), read(&log));
    assert_eq!(step_losses(&lw), step_losses(&ls));
    assert_eq!(lw.len(), ls.len());
    assert!(matches!(ls.first(), Some(Record::Run { .. })));
    assert!(matches!(ls.last(), Some(Record::Test { .. })));
}

/// `[[phase]] lr_factor`: the phase trains at the optimizer's learning rate times it, the
/// phases before it at the optimizer's. A factor 1 changes nothing, bit for bit; the run
/// with factor 10 on the second phase equals, bit for bit, the run whose optimizer lr is 10
/// times larger and whose first phase has factor 0.1; its first phase's steps are those of
/// the run without a factor and its second's differ; a factor ≤ 0 is refused at the key.
#[test]
fn a_phase_trains_at_its_own_learning_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 10)).unwrap();
    let base = [
        "dims.hidden=16",
        "sampler.roots=60",
        "phase.0.epochs=2",
        "phase.1.epochs=2",
        "phase.1.sampler.roots=60",
        "optimizer.lr=0.01",
    ];
    let with = |extra: &str| {
        let mut set = base.to_vec();
        set.push(extra);
        let plan = load("graphsage", &set);
        run(&opts(&store, &plan, 5, 0).epochs(None)).unwrap()
    };
    let plain = run(&opts(&store, &load("graphsage", &base), 5, 0).epochs(None)).unwrap();
    let same = with("phase.1.lr_factor=1.0");
    assert_eq!(plain.params, same.params, "a phase lr_factor of 1");
    let other = with("phase.1.lr_factor=10");
    let mut scaled = base.to_vec();
    scaled.retain(|s| !s.starts_with("optimizer.lr"));
    scaled.extend(["optimizer.lr=0.1", "phase.0.lr_factor=0.1"]);
    let swapped = run(&opts(&store, &load("graphsage", &scaled), 5, 0).epochs(None)).unwrap();
    assert_eq!(other.params, swapped.params, "0.01 × 10 is 0.1 × 1");
    let (a, b) = (step_losses(&plain.records), step_losses(&other.records));
    let first_phase = a.len() / 2;
    assert!(first_phase >= 2, "steps per epoch: {}", a.len());
    assert_eq!(
        a[..first_phase],
        b[..first_phase],
        "the first phase, before the phase lr"
    );
    assert_ne!(
        a[first_phase + 1..],
        b[first_phase + 1..],
        "the second phase, at lr 0.1"
    );
    assert_ne!(plain.params, other.params);
    let path = plan_file("graphsage");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut set = base.to_vec();
    set.push("phase.1.lr_factor=0.0");
    let e = Plan::parse_with_overrides(&text, "graphsage.toml", &set)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a phase's lr_factor must be a number > 0, got 0"),
        "{e}"
    );
}

#[test]
fn damaged_and_foreign_checkpoints_are_refused_with_the_file_name() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let plan = load("gcn", &["dims.hidden=8"]);
    let ck = tmp.path().join("ck.bin");
    let o = opts(&store, &plan, 1, 3).checkpoint(&ck).resume(true);
    run(&o).unwrap();
    let good = std::fs::read(&ck).unwrap();
    let name = ck.display().to_string();
    let resume_err = |o: &TrainOptions| match run(o) {
        Ok(_) => panic!("resume should fail"),
        Err(e) => e.to_string(),
    };

    // Truncated (as a torn write without the atomic rename would leave it).
    std::fs::write(&ck, &good[..good.len() / 2]).unwrap();
    let e = resume_err(&o);
    assert!(e.contains(&name) && e.contains("checksum"), "{e}");
    // Too short to be one.
    std::fs::write(&ck, &good[..5]).unwrap();
    let e = resume_err(&o);
    assert!(
        e.contains(&name) && e.contains("not a saintflow checkpoint"),
        "{e}"
    );
    // One flipped bit in a parameter value.
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x10;
    std::fs::write(&ck, &bad).unwrap();
    let e = resume_err(&o);
    assert!(e.contains(&name) && e.contains("checksum mismatch"), "{e}");
    // Another plan (an override changes the effective plan).
    std::fs::write(&ck, &good).unwrap();
    let other = load("gcn", &["dims.hidden=9"]);
    let e = resume_err(&opts(&store, &other, 1, 3).checkpoint(&ck).resume(true));
    assert!(e.contains(&name) && e.contains("another plan"), "{e}");
    // Another seed.
    let e = resume_err(&o.clone().seed(2));
    assert!(e.contains(&name) && e.contains("--seed 1"), "{e}");
    // The intact file still resumes (to the same 3 epochs: it only re-tests).
    let again = run(&o).unwrap();
    assert_eq!(again.epochs, 3);
    assert!(again.test.is_some());
}

/// Issue 54 item 6: the safetensors checkpoint (`SFCKPT07`) damaged behind a valid
/// checksum — a cut or garbled body, a header that is not JSON, that names tensors the
/// body lacks, or a tensor of another dtype or rank — is refused with the file's name and
/// what is wrong, never a panic.
#[test]
fn issue_54_a_damaged_safetensors_checkpoint_is_refused_with_the_file_name() {
    use saintflow::train::checkpoint::seal;
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let plan = load("gcn", &["dims.hidden=8"]);
    let ck = tmp.path().join("ck.bin");
    run(&opts(&store, &plan, 1, 1).checkpoint(&ck)).unwrap();
    let good = std::fs::read(&ck).unwrap();
    assert_eq!(&good[..8], b"SFCKPT07");
    let body = &good[8..good.len() - 8];
    let name = ck.display().to_string();
    let load_err = |bytes: &[u8]| {
        std::fs::write(&ck, bytes).unwrap();
        saintflow::train::Checkpoint::load(&ck)
            .unwrap_err()
            .to_string()
    };
    // The safetensors header and JSON as text, to edit.
    let n = u64::from_le_bytes(body[..8].try_into().unwrap()) as usize;
    let json = std::str::from_utf8(&body[8..8 + n]).unwrap().to_string();
    let with_json = |json: &str| {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b.extend_from_slice(&body[8 + n..]);
        seal(&b)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "body cut",
            seal(&body[..body.len() / 2]),
            "not a safetensors body",
        ),
        ("empty body", seal(&[]), "not a safetensors body"),
        ("garbage", seal(&[0xff; 64]), "not a safetensors body"),
        (
            "header not JSON",
            with_json(&json.replacen(r#"\"plan_hash\""#, r#"\"plan_hash"#, 1)),
            "decoding the header",
        ),
        (
            "a tensor the body lacks",
            with_json(&json.replacen(r#"\"params\":[["#, r#"\"params\":[[\"extra\",1,1],["#, 1)),
            "tensors: the header names",
        ),
        (
            "another dtype",
            with_json(&json.replacen(r#""dtype":"F32""#, r#""dtype":"I32""#, 1)),
            "expected F32",
        ),
        (
            "no header",
            with_json(&json.replacen(r#""checkpoint":"#, r#""other":"#, 1)),
            "no `checkpoint` header",
        ),
    ];
    for (what, bytes, want) in cases {
        let e = load_err(&bytes);
        assert!(e.contains(&name) && e.contains(want), "{what}: {e}");
    }
    // The file as written still loads, and a re-encoding is the same bytes.
    let c = saintflow::train::Checkpoint::load(&{
        std::fs::write(&ck, &good).unwrap();
        ck.clone()
    })
    .unwrap();
    assert_eq!(c.encode_unchecked(), good);
}

/// Issue 15: a checkpoint of another graph with the same F and C (same generator, another
/// seed) was resumed silently with stale metrics; it is refused, by the library, by
/// `train --resume` and by `embed`, naming the checkpoint and the store. A checkpoint of the
/// format before graph identities is refused with a message saying why.
#[test]
fn issue_15_checkpoint_of_another_graph_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let a_path = common::small_store(tmp.path(), "a.sf", 8, 3);
    let b_path = common::small_store(tmp.path(), "b.sf", 8, 4);
    let (a, b) = (
        GraphStore::open(&a_path).unwrap(),
        GraphStore::open(&b_path).unwrap(),
    );
    assert_eq!(
        (a.n_nodes(), a.n_features(), a.n_classes()),
        (b.n_nodes(), b.n_features(), b.n_classes())
    );
    assert_ne!(a.identity(), b.identity());
    // A copy of a (another path, same content) is the same graph.
    let a2_path = tmp.path().join("a2.sf");
    common::copy_store(&a_path, &a2_path);
    assert_eq!(GraphStore::open(&a2_path).unwrap().identity(), a.identity());

    let plan = load("gcn", &["dims.hidden=8"]);
    let ck = tmp.path().join("ck.bin");
    run(&opts(&a, &plan, 1, 2).checkpoint(&ck).resume(true)).unwrap();
    let e = common::err_text(run(&opts(&b, &plan, 1, 3).checkpoint(&ck).resume(true)));
    assert!(
        e.contains(&ck.display().to_string())
            && e.contains("another graph")
            && e.contains(&b_path.display().to_string()),
        "{e}"
    );
    // The same content elsewhere resumes.
    let a2 = GraphStore::open(&a2_path).unwrap();
    assert_eq!(
        run(&opts(&a2, &plan, 1, 3).checkpoint(&ck).resume(true))
            .unwrap()
            .epochs,
        3
    );

    // The binary: train --resume and embed, exit code 1, the two files named.
    let plan_path = plan_file("gcn");
    let plan_arg = plan_path.to_str().unwrap();
    for args in [
        vec![
            "train",
            plan_arg,
            "--graph",
            "b.sf",
            "--set",
            "dims.hidden=8",
            "--seed",
            "1",
            "--epochs",
            "4",
            "--threads",
            "1",
            "--checkpoint",
            "ck.bin",
            "--resume",
        ],
        vec![
            "embed",
            plan_arg,
            "--graph",
            "b.sf",
            "--set",
            "dims.hidden=8",
            "--checkpoint",
            "ck.bin",
            "-o",
            "e.npy",
        ],
    ] {
        let o = saintflow(&args, tmp.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("ck.bin") && err.contains("another graph") && err.contains("b.sf"),
            "{args:?}: {err}"
        );
    }
    assert!(!tmp.path().join("e.npy").exists());

    // The format before graph identities.
    let mut old = std::fs::read(&ck).unwrap();
    old[..8].copy_from_slice(b"SFCKPT01");
    std::fs::write(&ck, &old).unwrap();
    let e = common::err_text(run(&opts(&a, &plan, 1, 4).checkpoint(&ck).resume(true)));
    assert!(
        e.contains(&ck.display().to_string()) && e.contains("SFCKPT01"),
        "{e}"
    );
}

/// Brute-force metrics from their set definitions: per class, precision = |P∩T|/|P|,
/// recall = |P∩T|/|T|, F1 = 2PR/(P+R) (0 when P∩T is empty); micro over the pooled
/// (node, class) pairs; macro over classes in P ∪ T; accuracy = exact matches / nodes.
fn brute(pred: &[Vec<bool>], truth: &[Vec<bool>], classes: usize) -> Metrics {
    let f1 = |p: &BTreeSet<(usize, usize)>, t: &BTreeSet<(usize, usize)>| {
        let both = p.intersection(t).count() as f64;
        if both == 0.0 {
            return 0.0;
        }
        let (pr, rc) = (both / p.len() as f64, both / t.len() as f64);
        2.0 * pr * rc / (pr + rc)
    };
    let pairs = |m: &[Vec<bool>], k: Option<usize>| -> BTreeSet<(usize, usize)> {
        let mut s = BTreeSet::new();
        for (i, row) in m.iter().enumerate() {
            for (c, &x) in row.iter().enumerate() {
                if x && k.is_none_or(|k| k == c) {
                    s.insert((i, c));
                }
            }
        }
        s
    };
    let micro = f1(&pairs(pred, None), &pairs(truth, None));
    let mut per = Vec::new();
    for c in 0..classes {
        let (p, t) = (pairs(pred, Some(c)), pairs(truth, Some(c)));
        if !p.is_empty() || !t.is_empty() {
            per.push(f1(&p, &t));
        }
    }
    let exact = pred.iter().zip(truth).filter(|(p, t)| p == t).count();
    Metrics {
        accuracy: exact as f64 / pred.len() as f64,
        f1_micro: micro,
        f1_macro: per.iter().sum::<f64>() / per.len().max(1) as f64,
        link: None,
        loss: None,
        roc_auc: None,
    }
}

fn close(a: &Metrics, b: &Metrics) -> bool {
    (a.accuracy - b.accuracy).abs() < 1e-12
        && (a.f1_micro - b.f1_micro).abs() < 1e-12
        && (a.f1_macro - b.f1_macro).abs() < 1e-12
}

#[test]
fn metrics_match_hand_computed_cases_and_the_brute_force_definition() {
    // Hand-computed: truth [0, 0, 1, 2], predicted [0, 1, 1, 1]. Class 0: TP 1, FN 1 →
    // F1 2/3; class 1: TP 1, FP 2 → F1 2/4; class 2: FN 1 → 0. Macro = (2/3 + 1/2 + 0)/3.
    let mut c = Counts::new(4);
    for (p, t) in [(0, 0), (1, 0), (1, 1), (1, 2)] {
        c.add_single(p, t);
    }
    let m = c.metrics();
    assert!((m.accuracy - 0.5).abs() < 1e-12);
    assert!((m.f1_micro - 0.5).abs() < 1e-12);
    assert!(
        (m.f1_macro - (2.0 / 3.0 + 0.5) / 3.0).abs() < 1e-12,
        "{m:?}"
    );
    // Multi-label, 2 nodes × 3 classes: truth {0,1}, {2}; predicted {0}, {2}. TP 2, FN 1,
    // FP 0 → micro 4/5; per class F1 1, 0, 1 → macro 2/3; exact matches 1 of 2.
    let mut c = Counts::new(3);
    c.add_multi(|k| k == 0, |k| k < 2);
    c.add_multi(|k| k == 2, |k| k == 2);
    let m = c.metrics();
    assert!((m.accuracy - 0.5).abs() < 1e-12 && (m.f1_micro - 0.8).abs() < 1e-12);
    assert!((m.f1_macro - 2.0 / 3.0).abs() < 1e-12, "{m:?}");
    assert_eq!(Counts::new(3).metrics(), Metrics::default());

    // Random cases against the brute force.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |k: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % k
    };
    for case in 0..200 {
        let classes = 1 + next(6) as usize;
        let n = 1 + next(40) as usize;
        if case % 2 == 0 {
            let (mut c, mut p, mut t) = (Counts::new(classes), Vec::new(), Vec::new());
            for _ in 0..n {
                let (a, b) = (next(classes as u64) as usize, next(classes as u64) as usize);
                c.add_single(a, b);
                p.push((0..classes).map(|k| k == a).collect());
                t.push((0..classes).map(|k| k == b).collect());
            }
            let (got, want) = (c.metrics(), brute(&p, &t, classes));
            assert!(close(&got, &want), "single {case}: {got:?} vs {want:?}");
            assert!((got.accuracy - got.f1_micro).abs() < 1e-12);
        } else {
            let (mut c, mut p, mut t) = (Counts::new(classes), Vec::new(), Vec::new());
            for _ in 0..n {
                let a: Vec<bool> = (0..classes).map(|_| next(2) == 1).collect();
                let b: Vec<bool> = (0..classes).map(|_| next(3) == 0).collect();
                c.add_multi(|k| a[k], |k| b[k]);
                p.push(a);
                t.push(b);
            }
            let (got, want) = (c.metrics(), brute(&p, &t, classes));
            assert!(close(&got, &want), "multi {case}: {got:?} vs {want:?}");
        }
    }
}

/// Issue 54 item 8: a multi-label store's ROC-AUC is OGB's ogbn-proteins figure, the mean
/// over classes with both a positive and a negative of P(positive > negative) + ½·P(tie),
/// here counted pair by pair; a class of one kind only is left out of the mean.
#[test]
fn roc_auc_is_the_mean_over_two_class_columns_of_the_brute_force_pair_count() {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |k: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % k
    };
    let mut skipped = 0;
    for case in 0..300 {
        let classes = 1 + next(5) as usize;
        let n = 1 + next(30) as usize;
        // Few distinct scores, so ties are common.
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|_| (0..classes).map(|_| next(7) as f32 - 3.0).collect())
            .collect();
        // Class 0 of every third case has no positive: it must be left out.
        let truth: Vec<Vec<bool>> = (0..n)
            .map(|_| {
                (0..classes)
                    .map(|k| !(k == 0 && case % 3 == 0) && next(3) == 0)
                    .collect()
            })
            .collect();
        let mut c = Counts::new(classes);
        for (row, t) in rows.iter().zip(&truth) {
            c.add_multi(|k| row[k] > 0.0, |k| t[k]);
            c.add_scores(row, |k| t[k]);
        }
        let mut per_class = Vec::new();
        for k in 0..classes {
            let (mut wins, mut pairs) = (0f64, 0u64);
            for (a, ta) in rows.iter().zip(&truth) {
                for (b, tb) in rows.iter().zip(&truth) {
                    if ta[k] && !tb[k] {
                        pairs += 1;
                        wins += if a[k] > b[k] {
                            1.0
                        } else if a[k] == b[k] {
                            0.5
                        } else {
                            0.0
                        };
                    }
                }
            }
            if pairs > 0 {
                per_class.push(wins / pairs as f64);
            } else {
                skipped += 1;
            }
        }
        let want =
            (!per_class.is_empty()).then(|| per_class.iter().sum::<f64>() / per_class.len() as f64);
        let got = c.metrics().roc_auc;
        match (got, want) {
            (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "case {case}: {g} vs {w}"),
            (None, None) => {}
            _ => panic!("case {case}: {got:?} vs {want:?}"),
        }
    }
    assert!(
        skipped > 50,
        "the cases must exercise one-class columns: {skipped}"
    );

    // By hand: class 0 all positive (skipped); class 1 positives {2, 1} against negative
    // {1}: (1 + ½)/2 = 0.75.
    let mut c = Counts::new(2);
    for (row, t) in [
        ([0.5f32, 2.0], [true, true]),
        ([0.1, 1.0], [true, true]),
        ([0.3, 1.0], [true, false]),
    ] {
        c.add_scores(&row, |k| t[k]);
        c.add_multi(|k| row[k] > 0.0, |k| t[k]);
    }
    let m = c.metrics();
    assert_eq!(m.roc_auc, Some(0.75), "{m:?}");
    assert!(m.text().ends_with("ROC-AUC 0.7500"), "{}", m.text());
    // Counts without scores (single-label, or summed from flat vectors) have none, and the
    // record leaves the field out.
    let summed = Counts::from_flat(&c.flat()).metrics();
    assert_eq!(summed.roc_auc, None);
    assert_eq!((summed.accuracy, summed.f1_micro), (m.accuracy, m.f1_micro));
    let json = serde_json::to_value(summed).unwrap();
    assert!(json.get("roc_auc").is_none(), "{json}");
    assert_eq!(serde_json::to_value(m).unwrap()["roc_auc"], 0.75);
}

#[test]
fn cli_train_json_log_and_embed() {
    let tmp = tempfile::tempdir().unwrap();
    common::planted(tmp.path(), 9);
    let plan = plan_file("graphsage").display().to_string();
    let common = [
        "--graph",
        "planted9.sf",
        "--set",
        "model.hidden=8",
        "--set",
        "sampler.roots=50",
        "--epochs",
        "3",
        "--threads",
        "2",
        "--seed",
        "5",
    ];
    // Evaluation's kept values in scratch files (`--memory 0`), unlinked at once.
    let mut args = vec![
        "train",
        plan.as_str(),
        "--json",
        "--checkpoint",
        "ck",
        "--memory",
        "0",
        "--scratch-dir",
        "scratch",
    ];
    args.extend(common);
    std::fs::create_dir(tmp.path().join("ck")).unwrap();
    std::fs::create_dir(tmp.path().join("scratch")).unwrap();
    let o = saintflow(&args, tmp.path());
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    let recs: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs[0]["kind"], "run");
    assert_eq!(
        std::fs::read_dir(tmp.path().join("scratch"))
            .unwrap()
            .count(),
        0,
        "no scratch file is left behind"
    );
    assert_eq!(recs[0]["seed"], 5);
    assert_eq!(recs[0]["threads"], 2);
    assert!(recs[0]["effective_plan"]
        .as_str()
        .unwrap()
        .contains("hidden = 8"));
    let steps = recs.iter().filter(|r| r["kind"] == "step").count();
    let epochs: Vec<_> = recs.iter().filter(|r| r["kind"] == "epoch").collect();
    assert_eq!(epochs.len(), 3);
    assert!(steps >= 3);
    for k in [
        "sampling",
        "aggregation",
        "transformation",
        "other",
        "optimizer",
        "wall",
    ] {
        assert!(recs[1]["ms"][k].as_f64().is_some(), "ms.{k} in {}", recs[1]);
    }
    let last = recs.last().unwrap();
    assert_eq!(last["kind"], "test");
    let acc = last["test"]["accuracy"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&acc));
    assert!(last["test"]["f1_micro"].is_f64() && last["test"]["f1_macro"].is_f64());
    assert!(
        err.contains(&format!("test accuracy {acc:.4}")),
        "the summary line goes to stderr with --json: {err}"
    );

    // embed: the checkpoint's best parameters, the [output] input of every node.
    let mut args = vec![
        "embed",
        plan.as_str(),
        "--memory",
        "0",
        "--checkpoint",
        "ck",
        "-o",
        "emb.npy",
    ];
    args.extend(&common[..6]);
    let o = saintflow(&args, tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(tmp.path().join("emb.npy")).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    let data: Vec<f32> = npy.into_vec().unwrap();
    let store = GraphStore::open(tmp.path().join("planted9.sf")).unwrap();
    // GraphSAGE's embedding is concat(self, neighbours) of the last layer: 2 × hidden.
    assert_eq!(shape, vec![store.n_nodes() as u64, 16]);
    let plan_ = load("graphsage", &["dims.hidden=8", "sampler.roots=50"]);
    let ck = saintflow::train::Checkpoint::load(&tmp.path().join("ck/checkpoint.bin")).unwrap();
    let params = saintflow::train::checkpoint::load_params(ck.best_params.as_ref().unwrap());
    let lowered = lower_for(&plan_, &store, &Registry::with_builtins()).unwrap();
    // Against the in-memory pass (the CLI ran blocked, its kept values in scratch files).
    let want = FullGraph::new(&store, &lowered, saintflow::machine::cores())
        .unwrap()
        .in_memory(&Interpreter, &params, Output::Embedding)
        .unwrap();
    assert_close(&want.data, &data, "embed vs in-memory");
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "no scratch or temporary file is left behind"
    );

    // A wrong plan for the checkpoint: a clear error naming it, exit code 1.
    let mut args = vec!["embed", plan.as_str(), "--checkpoint", "ck", "-o", "e2.npy"];
    args.extend(&common[..4]);
    let o = saintflow(&args, tmp.path());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ck/checkpoint.bin") && err.contains("another plan"),
        "{err}"
    );
    assert!(!tmp.path().join("e2.npy").exists());
}

/// `saintflow train` killed with SIGKILL mid-run, then resumed: the checkpoint is intact
/// and the final metrics and every step's loss equal an uninterrupted run's.
#[cfg(unix)]
#[test]
fn sigkill_mid_run_then_resume_gives_the_uninterrupted_result() {
    let tmp = tempfile::tempdir().unwrap();
    common::planted(tmp.path(), 10);
    let plan = plan_file("gcn").display().to_string();
    let args = |log: &str, ck: &str| -> Vec<String> {
        [
            "train",
            &plan,
            "--graph",
            "planted10.sf",
            "--set",
            "dims.hidden=16",
            // All 400 epochs: long enough to be killed mid-run (the plan's own early
            // stop is checked with resumes in tests/early_stop.rs).
            "--set",
            "eval.patience=1000",
            "--epochs",
            "400",
            "--threads",
            "2",
            "--seed",
            "4",
            "-q",
            "--log",
            log,
            "--checkpoint",
            ck,
            "--resume",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let whole = saintflow(
        &args("whole.log", "whole.ck")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        tmp.path(),
    );
    assert!(whole.status.success());
    let killed_args = args("k.log", "k.ck");
    let mut child = Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(&killed_args)
        .current_dir(tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for a few epochs' checkpoints, then kill without warning.
    let ck = tmp.path().join("k.ck");
    let t0 = std::time::Instant::now();
    loop {
        if let Ok(c) = saintflow::train::Checkpoint::load(&ck) {
            if c.epoch >= 5 {
                break;
            }
        }
        assert!(t0.elapsed().as_secs() < 60, "no checkpoint after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    let at_kill = saintflow::train::Checkpoint::load(&ck).expect("intact after SIGKILL");
    assert!(at_kill.epoch < 400, "the run was killed before its end");
    let resumed = saintflow(
        &killed_args.iter().map(String::as_str).collect::<Vec<_>>(),
        tmp.path(),
    );
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let read = |p: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(tmp.path().join(p))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (a, b) = (read("whole.log"), read("k.log"));
    let losses = |v: &[serde_json::Value]| -> Vec<f64> {
        v.iter()
            .filter(|r| r["kind"] == "step")
            .map(|r| r["loss"].as_f64().unwrap())
            .collect()
    };
    assert_eq!(losses(&a).len(), 400);
    assert_eq!(losses(&a), losses(&b));
    assert_eq!(a.last().unwrap()["test"], b.last().unwrap()["test"]);
    assert_eq!(a.last().unwrap()["epoch"], b.last().unwrap()["epoch"]);
    let out = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        out(&whole).lines().last().unwrap(),
        out(&resumed).lines().last().unwrap()
    );
}

/// The work-stealing executor with its subgraph pool (the epoch's subgraphs sampled ahead
/// on the workers) trains exactly as the reference interpreter: same per-step losses,
/// same subgraph sizes, same test metrics, bit for bit, on 1 and 3 workers.
#[test]
fn executor_with_prefetching_trains_exactly_as_the_interpreter() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 10)).unwrap();
    // Frontier sampling: several steps per epoch, so subgraphs are prefetched.
    let plan = load(
        "mixhop",
        &[
            "dims.w0=8",
            "sampler.kind=frontier",
            "sampler.frontier=20",
            "sampler.budget=120",
        ],
    );
    let reference = run(&opts(&store, &plan, 3, 3)).unwrap();
    let sizes = |o: &TrainOutcome| -> Vec<(usize, usize)> {
        o.records
            .iter()
            .filter_map(|r| match r {
                Record::Step { nodes, entries, .. } => Some((*nodes, *entries)),
                _ => None,
            })
            .collect()
    };
    let steps = step_losses(&reference.records);
    assert!(
        steps.len() >= 6,
        "{} steps: too few to prefetch",
        steps.len()
    );
    for threads in [1, 3] {
        let exec = saintflow::exec::Executor::new(threads.try_into().unwrap());
        // On the test thread's own pool, as the command line runs (no two-thread pool).
        let got = TrainOptions::new(&plan, &store)
            .runner(&exec)
            .seed(3)
            .epochs(3)
            .train()
            .unwrap();
        assert_eq!(step_losses(&got.records), steps, "{threads} workers");
        assert_eq!(sizes(&got), sizes(&reference), "{threads} workers");
        assert_eq!(got.test, reference.test, "{threads} workers");
    }
}

/// Equal up to f32 rounding of differently blocked products: |a − b| ≤ 1e-5·(1 + |a|).
fn assert_close(want: &[f32], got: &[f32], what: &str) {
    assert_eq!(want.len(), got.len(), "{what}: lengths");
    for (i, (a, b)) in want.iter().zip(got).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
            "{what}: element {i}: {a} vs {b}"
        );
    }
}

/// Every shipped plan's logits and embedding computed row-blocked and layer by layer —
/// odd block sizes, kept values in memory or in scratch files — equal the in-memory pass
/// over the whole graph; blocks come in order and cover every row once. With X streamed
/// in parts of rows (issue 27: parts of 1 and 13 rows, chunks of 45 output rows, so
/// every chunk reads every part), the pass gives the unstreamed pass's bits. Keeping the
/// parameter-free values between passes (issue 53 item 7) changes no bit.
#[test]
fn blocked_inference_equals_the_in_memory_pass_for_every_shipped_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let blocks =
        |full: &FullGraph, params: &saintflow::ir::Params, which: Output, rows: Option<usize>| {
            let mut starts = Vec::new();
            let mut got = Vec::new();
            full.for_each_block(&Interpreter, params, which, &mut |r0, t| {
                starts.push((r0, t.rows));
                got.extend_from_slice(&t.data);
                Ok(())
            })
            .unwrap();
            let mut next = 0;
            for &(r0, n) in &starts {
                assert_eq!(r0, next, "blocks in order");
                if let Some(b) = rows {
                    assert!(n <= b);
                }
                next += n;
            }
            assert_eq!(next, store.n_nodes());
            got
        };
    let mut streamed_ops = 0;
    let mut cached_passes = 0;
    for name in common::gnn_plans() {
        let name = name.as_str();
        let (set, _) = shipped(name);
        let lowered = lower_for(&load(name, &set), &store, &Registry::with_builtins()).unwrap();
        let mut params = saintflow::ir::Params::init(&lowered.params, 3);
        // Running statistics away from their initial 0 and 1 (a batchnorm's evaluation
        // reads them).
        for d in lowered.state_decls() {
            let v = (0..d.cols).map(|j| 0.5 + 0.1 * j as f32).collect();
            params.insert(
                d.name,
                saintflow::ir::Tensor::from_vec(1, d.cols, v).unwrap(),
            );
        }
        for (rows, memory) in [(Some(37), usize::MAX), (Some(100), 0), (None, 0)] {
            let opts = InferOptions {
                block_rows: rows,
                memory_bytes: memory,
                scratch_dir: scratch.clone(),
                ..InferOptions::default()
            };
            let full = FullGraph::new(&store, &lowered, saintflow::machine::cores())
                .unwrap()
                .with_options(opts.clone());
            for which in [Output::Logits, Output::Embedding] {
                assert_eq!(full.in_memory_reason(which), None, "{name} {which:?}");
                let want = full.in_memory(&Interpreter, &params, which).unwrap();
                let got = blocks(&full, &params, which, rows);
                let what = format!("{name} {which:?} rows {rows:?} memory {memory}");
                assert_close(&want.data, &got, &what);
                // At chosen rows (the nodes an evaluation scores): those rows of the pass
                // of every row, bit for bit, in order.
                let n = store.n_nodes();
                let ids: Vec<u32> = (0..n as u32)
                    .filter(|&v| v % 3 == 1 || v as usize == n - 1)
                    .collect();
                let (mut seen, mut at) = (Vec::new(), Vec::new());
                full.for_each_block_at(&Interpreter, &params, which, &ids, &mut |chunk, t| {
                    seen.extend_from_slice(chunk);
                    at.extend(t.data.iter().map(|x| x.to_bits()));
                    Ok(())
                })
                .unwrap();
                assert_eq!(seen, ids, "{what}: chosen rows in order, once");
                let cols = got.len() / n;
                let those: Vec<u32> = ids
                    .iter()
                    .flat_map(|&v| &got[v as usize * cols..(v as usize + 1) * cols])
                    .map(|x| x.to_bits())
                    .collect();
                assert!(
                    at == those,
                    "{what}: chosen rows differ from the pass of every row"
                );
                // Issue 53 item 7: the parameter-free values kept by the first pass and
                // read by the next ones give the bits of computing them every time, also
                // under other parameters (a cache of anything that reads one would not).
                let keeping = FullGraph::new(&store, &lowered, saintflow::machine::cores())
                    .unwrap()
                    .with_options(opts.clone())
                    .keep_constants(true);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let other = saintflow::ir::Params::init(&lowered.params, 4);
                let other_want = bits(&blocks(&full, &other, which, rows));
                let fits = keeping.constant_bytes(which) > 0
                    && keeping.constant_bytes(which) <= memory / 2;
                for pass in 0..3 {
                    assert_eq!(
                        keeping.reads_cached(which),
                        fits && pass > 0,
                        "{what}: pass {pass} reads the cache"
                    );
                    let (p, want) = if pass == 2 {
                        (&other, &other_want)
                    } else {
                        (&params, &bits(&got))
                    };
                    assert!(
                        &bits(&blocks(&keeping, p, which, rows)) == want,
                        "{what}: pass {pass} keeping constants: not the bits of computing them"
                    );
                }
                cached_passes += usize::from(fits);
                for (part, chunk) in [(13, 45), (1, 500)] {
                    let streaming = FullGraph::new(&store, &lowered, saintflow::machine::cores())
                        .unwrap()
                        .with_options(InferOptions {
                            part_rows: Some(part),
                            chunk_rows: Some(chunk),
                            ..opts.clone()
                        });
                    let plan = streaming.pass_plan(which).unwrap();
                    let chunks = plan.chunks();
                    streamed_ops += chunks.len();
                    assert!(chunks
                        .iter()
                        .all(|&(_, c)| c == store.n_nodes().div_ceil(chunk)));
                    let streamed = blocks(&streaming, &params, which, rows);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert!(
                        bits(&got) == bits(&streamed),
                        "{what}: X streamed in parts of {part} rows, chunks of {chunk}: not the unstreamed bits"
                    );
                }
            }
        }
        assert_eq!(
            std::fs::read_dir(&scratch).unwrap().count(),
            0,
            "scratch files unlinked"
        );
    }
    // Every plan but the MLP (no neighbour op) streams at least one level.
    assert!(
        streamed_ops >= 9 * 3 * 2 * 2,
        "{streamed_ops} streamed levels"
    );
    // SGC's Â²X, for both outputs, where the memory allows.
    assert!(cached_passes >= 2, "{cached_passes} outputs read a cache");
    // Most plans' last layer computed at the chosen rows alone (not those keeping a value
    // of their last level for a later pass, nor a streamed one).
    let chosen = saintflow::infer::chosen_row_levels();
    assert!(chosen >= 9 * 3 * 2, "{chosen} last layers at chosen rows");
    // GraphSAGE's last self term (and what it needs of its level) at least, per output and
    // configuration: computed again at the chosen rows, not kept for every row.
    let deferred = saintflow::infer::deferred_values();
    assert!(
        deferred >= 3 * 2 * 3,
        "{deferred} values deferred to chosen rows"
    );
}

/// x − the mean of x's rows: every output row depends on every input row, so it is not
/// row-local (the default) and inference cannot block it.
#[derive(Debug)]
struct Center;

impl saintflow::op::Op for Center {
    fn name(&self) -> &str {
        "test.center"
    }
    fn args(&self) -> saintflow::op::Arity {
        saintflow::op::Arity::Exact(vec![saintflow::ir::Kind::Dense])
    }
    fn infer(
        &self,
        inputs: &[&saintflow::ir::Fact],
    ) -> Result<saintflow::ir::Fact, saintflow::op::OpError> {
        Ok(inputs[0].clone())
    }
    fn forward(
        &self,
        inputs: &[&saintflow::ir::Value],
        _: &saintflow::op::Ctx<'_>,
    ) -> Result<saintflow::ir::Value, saintflow::op::OpError> {
        let x = inputs[0].as_dense().unwrap();
        let mut y = x.clone();
        for c in 0..x.cols {
            let mean = (0..x.rows).map(|r| x.data[r * x.cols + c]).sum::<f32>() / x.rows as f32;
            for r in 0..x.rows {
                y.data[r * x.cols + c] -= mean;
            }
        }
        Ok(saintflow::ir::Value::dense(y))
    }
    /// Centering is linear and symmetric: ∂x = center(∇y).
    fn backward(
        &self,
        g: &mut saintflow::op::GradBuilder<'_>,
        grad: saintflow::ir::NodeId,
    ) -> Result<Vec<Option<saintflow::ir::NodeId>>, saintflow::op::OpError> {
        Ok(vec![Some(g.add(Center, &[grad])?)])
    }
}

/// A plan with an op that is not row-local is evaluated in memory, says why, and still
/// gives the in-memory result through the block interface (one block).
#[test]
fn a_plan_with_an_op_that_is_not_row_local_is_evaluated_in_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 8)).unwrap();
    let mut registry = Registry::with_builtins();
    registry
        .register("test.center", &[], "x minus its column means", |_| {
            Ok(std::sync::Arc::new(Center))
        })
        .unwrap();
    let plan = load(
        "gcn",
        &[
            "dims.hidden=8",
            "layer.0.out=\"relu(test.center(A_sym @ x @ W0))\"",
        ],
    );
    let lowered = lower_for(&plan, &store, &registry).unwrap();
    let params = saintflow::ir::Params::init(&lowered.params, 1);
    let full = FullGraph::new(&store, &lowered, saintflow::machine::cores()).unwrap();
    let why = full.in_memory_reason(Output::Logits).unwrap();
    assert!(why.contains("test.center"), "{why}");
    let want = full
        .in_memory(&Interpreter, &params, Output::Logits)
        .unwrap();
    let mut calls = 0;
    full.for_each_block(&Interpreter, &params, Output::Logits, &mut |r0, t| {
        calls += 1;
        assert_eq!((r0, t.rows), (0, store.n_nodes()));
        assert_eq!(t.data, want.data);
        Ok(())
    })
    .unwrap();
    assert_eq!(calls, 1);
}

/// `TrainOptions::interrupt`: a set flag stops the run at the next step boundary with
/// `Interrupted`, leaving the checkpoint of the last whole epoch, from which a resumed run
/// goes on to the uninterrupted run's bits.
#[test]
fn an_interrupted_run_keeps_its_last_whole_epoch() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::small_store(tmp.path(), "g.sf", 8, 3)).unwrap();
    let plan = load("gcn", &["dims.hidden=8"]);
    let ck = tmp.path().join("ck.bin");
    let whole = run(&opts(&store, &plan, 5, 4)).unwrap();
    // Full-batch GCN: one step per epoch. The flag is set during step 1 (epoch 2), so
    // epoch 2 ends whole (checkpointed) and epoch 3 stops before its step 2.
    let flag = AtomicBool::new(false);
    struct SetAt<'a>(&'a AtomicBool);
    impl saintflow::exec::StepRunner for SetAt<'_> {
        fn run_step(
            &self,
            input: StepInput<'_>,
        ) -> std::result::Result<saintflow::exec::StepValues, saintflow::ir::IrError> {
            if input.step == 1 {
                self.0.store(true, Ordering::Relaxed);
            }
            Interpreter.run_step(input)
        }

        fn threads(&self) -> usize {
            Interpreter.threads()
        }
    }
    let runner = SetAt(&flag);
    let err = opts(&store, &plan, 5, 4)
        .runner(&runner)
        .checkpoint(&ck)
        .interrupt(&flag)
        .train()
        .unwrap_err();
    assert!(
        matches!(
            err,
            saintflow::train::TrainError::Interrupted { epoch: 3, step: 2 }
        ),
        "{err}"
    );
    assert!(err
        .to_string()
        .contains("interrupted in epoch 3 before step 2"));
    let resumed = run(&opts(&store, &plan, 5, 4).checkpoint(&ck).resume(true)).unwrap();
    // Without a log, a resumed run's records are its own steps: epochs 3 and 4.
    assert_eq!(
        step_losses(&resumed.records),
        step_losses(&whole.records)[2..]
    );
    assert_eq!(resumed.test, whole.test);
}

/// Issue 55 item 6: a store without node features (`gen --features 0`; an OGB dataset
/// without `node-feat`) is refused by every shipped GNN plan before any work, with a
/// message about the features and what to do instead — it failed inside a kernel with
/// `spmm_accumulate: indices[0] = 21 out of range, expected < 0`. Through the CLI (`train`,
/// exit 1) and the library, for `train` and `embed`'s lowering alike.
#[test]
fn issue55_a_featureless_store_is_refused_at_load_naming_the_features() {
    let dir = tempfile::tempdir().unwrap();
    common::saintflow_ok(
        &[
            "gen",
            "kronecker",
            "--scale",
            "6",
            "--degree",
            "4",
            "--features",
            "0",
            "-o",
            "bare.sf",
        ],
        dir.path(),
    );
    let store = GraphStore::open(dir.path().join("bare.sf")).unwrap();
    assert_eq!(store.n_features(), 0);
    let registry = Registry::with_builtins();
    for path in common::gnn_plan_files() {
        let plan = Plan::load(&path).unwrap();
        let e = lower_for(&plan, &store, &registry).unwrap_err().to_string();
        assert!(
            e.contains("bare.sf: no node features, expected at least 1 feature column")
                && e.contains("got 0")
                && e.contains("[embedding] plan"),
            "{}: {e}",
            path.display()
        );
        let e = TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .epochs(1)
            .train()
            .unwrap_err()
            .to_string();
        assert!(e.contains("no node features"), "{}: {e}", path.display());
    }
    for plan in ["gcn", "graphsage"] {
        let file = plan_file(plan);
        let out = saintflow(
            &[
                "train",
                file.to_str().unwrap(),
                "--graph",
                "bare.sf",
                "--epochs",
                "1",
            ],
            dir.path(),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{plan}: {err}");
        assert!(
            err.contains("no node features") && !err.contains("spmm"),
            "{plan}: {err}"
        );
    }
}
