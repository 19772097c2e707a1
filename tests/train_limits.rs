//! `--steps N` and `--no-eval`: a run cut after N steps trains exactly the first N steps of
//! the uninterrupted run (bit for bit), is evaluated and tested at the cut, checkpoints only
//! whole epochs (a resume from it reproduces the uninterrupted run); without evaluation no
//! full-graph pass runs, the losses are unchanged and the log ends with an `epoch` record.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use saintflow::exec::Interpreter;
use saintflow::plan::Plan;
use saintflow::train::{Record, TrainOptions, TrainOutcome};
use saintflow::GraphStore;

fn plan_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml")
}

/// GraphSAGE with small random-walk subgraphs: several steps per epoch.
fn plan() -> Plan {
    let path = plan_path();
    let text = std::fs::read_to_string(&path).unwrap();
    Plan::parse_with_overrides(
        &text,
        &path.display().to_string(),
        &[
            "dims.hidden=8",
            "sampler.roots=40",
            "phase.1.sampler.roots=60",
        ],
    )
    .unwrap()
}

fn run(opts: &TrainOptions) -> TrainOutcome {
    opts.train().unwrap()
}

/// The reference interpreter on two threads, seed 4, 4 epochs.
fn opts<'a>(store: &'a GraphStore, plan: &'a Plan) -> TrainOptions<'a> {
    TrainOptions::new(plan, store)
        .runner(&Interpreter)
        .threads(2)
        .seed(4)
        .epochs(4)
}

fn step_losses(records: &[Record]) -> Vec<(u64, u64)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Step { step, loss, .. } => Some((*step, loss.to_bits())),
            _ => None,
        })
        .collect()
}

/// Steps per epoch of a finished run, from its records.
fn steps_of_epoch(records: &[Record], e: usize) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, Record::Step { epoch, .. } if *epoch == e))
        .count()
}

#[test]
fn steps_cut_the_run_and_checkpoints_stay_at_whole_epochs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let plan = plan();
    let whole = run(&opts(&store, &plan));
    let per_epoch = steps_of_epoch(&whole.records, 1);
    assert!(per_epoch >= 3, "several steps per epoch expected");
    // Cut in the middle of epoch 2.
    let n = per_epoch as u64 + 2;
    let ck = tmp.path().join("ck.bin");
    let cut_opts = opts(&store, &plan)
        .max_steps(n)
        .checkpoint(&ck)
        .resume(true)
        .log(tmp.path().join("cut.log"));
    let cut = run(&cut_opts);
    let losses = step_losses(&cut.records);
    assert_eq!(losses.len() as u64, n, "exactly N steps");
    assert_eq!(cut.steps, n);
    assert_eq!(cut.epochs, 2);
    assert_eq!(
        losses,
        step_losses(&whole.records)[..n as usize],
        "the first N steps of the uninterrupted run"
    );
    // The cut epoch has its epoch record (mean of its 2 steps, evaluated), then the test.
    let n_rec = cut.records.len();
    match &cut.records[n_rec - 2] {
        Record::Epoch {
            epoch,
            step,
            val,
            train_loss,
            ..
        } => {
            assert_eq!((*epoch, *step), (2, n - 1));
            assert!(val.is_some(), "the cut epoch is evaluated as the last one");
            let mean = (f64::from_bits(losses[n as usize - 2].1)
                + f64::from_bits(losses[n as usize - 1].1))
                / 2.0;
            assert!((train_loss - mean).abs() < 1e-12, "{train_loss} vs {mean}");
        }
        r => panic!("expected the cut epoch's record, got {r:?}"),
    }
    assert!(matches!(cut.records[n_rec - 1], Record::Test { .. }));
    assert!(cut.test.is_some());
    // The checkpoint holds epoch 1 (the last whole one): resuming without the cap repeats
    // epoch 2 from its start and ends exactly as the uninterrupted run.
    let rest = run(&cut_opts.max_steps(None));
    // The log was cut back to epoch 1's end: the cut epoch's records are gone.
    assert_eq!(step_losses(&rest.records), step_losses(&whole.records));
    let in_file = std::fs::read_to_string(tmp.path().join("cut.log")).unwrap();
    assert_eq!(
        in_file
            .lines()
            .filter(|l| l.contains("\"kind\":\"test\""))
            .count(),
        1
    );
    assert_eq!(rest.params, whole.params);
    assert_eq!(rest.test, whole.test);
}

#[test]
fn no_eval_runs_no_full_graph_pass_and_trains_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let plan = plan();
    let with = run(&opts(&store, &plan));
    let without = run(&opts(&store, &plan).no_eval(true).max_steps(5));
    assert!(without.val.is_none() && without.test.is_none());
    assert_eq!(
        step_losses(&without.records),
        step_losses(&with.records)[..5]
    );
    for r in &without.records {
        match r {
            Record::Epoch { val, eval_ms, .. } => assert!(val.is_none() && eval_ms.is_none()),
            Record::Test { .. } => panic!("a test record without evaluation"),
            _ => {}
        }
    }
    assert!(matches!(
        without.records.last(),
        Some(Record::Epoch { step: 4, .. })
    ));
}

#[test]
fn cli_steps_and_no_eval() {
    let tmp = tempfile::tempdir().unwrap();
    common::planted(tmp.path(), 9);
    let plan = plan_path().display().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args([
            "train",
            &plan,
            "--graph",
            "planted9.sf",
            "--set",
            "model.hidden=8",
            "--set",
            "sampler.roots=40",
            "--threads",
            "2",
            "--steps",
            "3",
            "--no-eval",
            "--json",
        ])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let recs: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = recs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run", "step", "step", "step", "epoch"], "{kinds:?}");
    assert!(recs[4].get("val").is_none());
    assert!(err.contains("3 steps in 1 epochs, not evaluated"), "{err}");
    // N = 0 is a usage error.
    let o = Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(["train", &plan, "--graph", "planted9.sf", "--steps", "0"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

// ---------------------------------------------------------------------------------------
// Issue 15: the memory check, with the machine's memory injected (MemoryLimit::Bytes), so
// the assertions hold on any machine.

use saintflow::compile::memory::estimate;
use saintflow::compile::{lower_for, schedule};
use saintflow::plan::PlanErrorKind;
use saintflow::train::{MemoryLimit, TrainError};

#[test]
fn issue_15_memory_check_refuses_a_plan_one_byte_over_and_names_the_dim() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let path = plan_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let file = path.display().to_string();
    // A wide hidden layer: the parameters dominate the estimate.
    let plan = Plan::parse_with_overrides(&text, &file, &["dims.hidden=4096", "sampler.roots=40"])
        .unwrap();
    let reg = saintflow::op::Registry::with_builtins();
    let lowered = lower_for(&plan, &store, &reg).unwrap();
    let samplers: Vec<_> = schedule(&plan, Some(1)).into_iter().map(|p| p.1).collect();
    let est = estimate(&lowered, Some(&plan.optimizer), &store, &samplers).unwrap();
    // Adam: two more copies; the parameters are the declared shapes' f32s.
    let p: u128 = lowered
        .params
        .iter()
        .map(|d| 4 * (d.rows * d.cols) as u128)
        .sum();
    assert_eq!((est.params, est.optimizer), (p, 2 * p));
    assert!(est.step > 0 && est.params * 3 > est.step, "{est:?}");
    let total = est.total() as u64;
    let opts = |limit| {
        TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .threads(1)
            .epochs(1)
            .max_steps(1)
            .no_eval(true)
            .memory_limit(limit)
    };
    let e = match opts(MemoryLimit::Bytes(total - 1)).train() {
        Err(TrainError::Plan(e)) => e,
        other => panic!("expected a plan error, got {other:?}"),
    };
    let msg = e.to_string();
    assert_eq!(e.kind, PlanErrorKind::Limit);
    // The override that set the dim, at its value.
    assert!(
        msg.starts_with("override `dims.hidden=4096`:1:13: dims.hidden = 4096: training needs"),
        "{msg}"
    );
    assert!(
        msg.contains("Adam's state") && msg.contains("--no-memory-check"),
        "{msg}"
    );
    // Exactly the estimate fits; so does no check at all.
    opts(MemoryLimit::Bytes(total)).train().unwrap();
    opts(MemoryLimit::Off).train().unwrap();
}

#[test]
fn issue_15_parameters_alone_too_large_name_the_dim_in_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let text = std::fs::read_to_string(plan_path())
        .unwrap()
        .replace("hidden = 256", "hidden = 100000000");
    let plan = Plan::parse(&text, "g.toml").unwrap();
    let line = text
        .lines()
        .position(|l| l.starts_with("hidden = "))
        .unwrap()
        + 1;
    // 1 GiB: less than the first layer alone (8 features × 10⁸ × 4 bytes = 3.2 GB).
    let e = TrainOptions::new(&plan, &store)
        .epochs(1)
        .memory_limit(MemoryLimit::Bytes(1 << 30))
        .train()
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "g.toml:{line}:10: dims.hidden = 100000000: the parameters alone need"
        )),
        "{e}"
    );
    assert!(
        e.contains("× 100000000 f32") && e.contains("this machine has 1.0 GiB"),
        "{e}"
    );
}

#[test]
fn issue_15_zero_epochs_or_steps_are_refused_by_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let plan = plan();
    for (o, what) in [
        (opts(&store, &plan).epochs(0), "epochs(0)"),
        (opts(&store, &plan).max_steps(0), "max_steps(0)"),
        (opts(&store, &plan).stop_after(0), "stop_after(0)"),
        (opts(&store, &plan).threads(0), "threads(0)"),
    ] {
        let e = o.train().unwrap_err().to_string();
        assert!(e.contains(what) && e.contains("at least 1"), "{e}");
    }
}

/// Issue 55 item 1 (training's part): a store with no test (or no validation) nodes is
/// trained without a metric measured over nothing: the summary says so in words, the
/// `--json` log's `test` record has `null` there (docs/LOG.md), and the library's outcome
/// has None. Without validation nodes the parameters are the last epoch's.
#[test]
fn issue55_a_role_without_nodes_is_never_reported_as_a_number() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gcn.toml");
    let plan = plan.to_str().unwrap();
    for (split, role) in [("0.7,0.3,0", "test"), ("0.7,0,0.3", "validation")] {
        let store = format!("no-{role}.sf");
        common::saintflow_ok(
            &[
                "gen",
                "kronecker",
                "--scale",
                "7",
                "--degree",
                "6",
                "--features",
                "8",
                "--split",
                split,
                "-o",
                &store,
            ],
            dir.path(),
        );
        let out = common::saintflow_ok(
            &["train", plan, "--graph", &store, "--epochs", "2", "--json"],
            dir.path(),
        );
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let last: serde_json::Value =
            serde_json::from_str(stdout.lines().last().expect("a log")).unwrap();
        assert_eq!(last["kind"], "test", "{stdout}");
        let (key, other) = if role == "test" {
            ("test", "val")
        } else {
            ("val", "test")
        };
        assert!(last[key].is_null(), "{split}: {last}");
        assert!(last[other]["accuracy"].is_number(), "{split}: {last}");
        assert!(
            stderr.contains(&format!("no labelled {role} nodes")),
            "{split}: {stderr}"
        );
        if role == "test" {
            assert!(!stderr.contains("; test accuracy"), "{stderr}");
        } else {
            assert!(!stderr.contains("val accuracy"), "{stderr}");
        }
        let store = GraphStore::open(dir.path().join(&store)).unwrap();
        let plan = Plan::load(plan).unwrap();
        let outcome = TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .threads(1)
            .epochs(2)
            .train()
            .unwrap();
        if role == "test" {
            assert!(outcome.test.is_none() && outcome.val.is_some());
        } else {
            assert!(outcome.val.is_none() && outcome.test.is_some());
            assert_eq!(outcome.best_epoch, 2, "the last epoch's parameters");
        }
    }
}

/// Issue 54, item 2: the thread count is passed down, never read back from the pool the
/// caller happens to be in: inside a one-thread rayon pool, a run without `threads` still
/// trains on one worker per core (its executor, its planner and its log say so), and one
/// with `threads(3)` on exactly three.
#[test]
fn threads_are_passed_down_not_read_from_the_callers_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(tmp.path(), 9)).unwrap();
    let plan = plan();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let logged = |o: TrainOptions<'_>| {
        let out = one.install(|| o.epochs(1).train()).unwrap();
        match out.records.first() {
            Some(Record::Run {
                threads, runner, ..
            }) => (*threads, runner.clone()),
            r => panic!("the first record is not the run's: {r:?}"),
        }
    };
    let cores = saintflow::machine::cores().get();
    let (t, runner) = logged(TrainOptions::new(&plan, &store).seed(4));
    assert_eq!((t, runner.as_str()), (cores, "executor"));
    let (t, _) = logged(TrainOptions::new(&plan, &store).seed(4).threads(3));
    assert_eq!(t, 3);
}
