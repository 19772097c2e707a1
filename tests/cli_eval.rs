//! Issue 54, item 8: `saintflow eval` evaluates a checkpoint again and gives the run's own
//! validation and test figures, bit for bit (the same parameters through the same
//! full-graph pass and counting), and writes every node's prediction as `.npy`.

mod common;

use std::path::Path;

use common::{saintflow, saintflow_ok};
use saintflow::store::{GraphStore, Labels, Role};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A planted store and a GCN trained on it with a checkpoint and a log in `dir/run/`;
/// returns train's stdout.
fn trained(dir: &Path, plan: &str, extra: &[&str]) -> String {
    saintflow_ok(
        &[
            "gen",
            "kronecker",
            "--scale",
            "9",
            "--degree",
            "8",
            "--features",
            "8",
            "--classes",
            "3",
            "--planted",
            "-o",
            "g.sf",
            "-q",
        ],
        dir,
    );
    let mut args = vec![
        "train",
        plan,
        "--graph",
        "g.sf",
        "--threads",
        "2",
        "--checkpoint",
        "run/",
        "--log",
        "run/log.jsonl",
    ];
    args.extend_from_slice(extra);
    text(&saintflow_ok(&args, dir).stdout)
}

/// The log's last record: the run's `test` record.
fn test_record(dir: &Path) -> serde_json::Value {
    let log = std::fs::read_to_string(dir.join("run/log.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "test", "{last}");
    last
}

#[test]
fn eval_of_a_checkpoint_gives_the_runs_test_figures_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let train_out = trained(dir, "gcn", &[]);
    let record = test_record(dir);
    let out = saintflow_ok(
        &[
            "eval",
            "gcn",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run/",
            "--threads",
            "2",
            "--json",
        ],
        dir,
    );
    let e: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    // f64 figures as the log writes them (round-trip), compared whole: accuracy, both F1s
    // and the loss.
    assert_eq!(e["test"], record["test"], "eval {e}\nlog {record}");
    assert_eq!(e["val"], record["val"], "eval {e}\nlog {record}");
    assert_eq!(e["epoch"], record["epoch"]);
    assert_eq!(e["which"], "best");
    // The text line: the same test figure as train's last line.
    let out = saintflow_ok(
        &[
            "eval",
            "plans/gcn.toml",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run/checkpoint.bin",
            "--threads",
            "1",
        ],
        dir,
    );
    let line = text(&out.stdout);
    let figure = |s: &str| {
        s[s.find("; test ").expect("a test figure") + 7..]
            .trim()
            .to_string()
    };
    assert_eq!(
        figure(&line),
        figure(train_out.lines().last().unwrap()),
        "{line}"
    );
    assert!(
        line.starts_with(&format!(
            "gcn on g.sf: run/checkpoint.bin (best validation epoch {}): val accuracy ",
            record["epoch"]
        )),
        "{line}"
    );
}

#[test]
fn eval_writes_every_nodes_predicted_class_and_they_score_the_test_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    trained(dir, "gcn", &[]);
    let record = test_record(dir);
    // The output's directory is made, as train makes its log's.
    let out = saintflow_ok(
        &[
            "eval",
            "gcn",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run/",
            "-o",
            "out/pred.npy",
        ],
        dir,
    );
    let store = GraphStore::open(dir.join("g.sf")).unwrap();
    let n = store.n_nodes();
    assert!(
        text(&out.stdout).contains(&format!("wrote out/pred.npy ([{n}] int64 class ids)")),
        "{}",
        text(&out.stdout)
    );
    let bytes = std::fs::read(dir.join("out/pred.npy")).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    assert_eq!(npy.shape(), &[n as u64]);
    let pred: Vec<i64> = npy.into_vec().unwrap();
    let Labels::Single(labels) = store.labels() else {
        panic!("single-label store")
    };
    let test: Vec<u32> = store.nodes_with_role(Role::Test);
    let right = test
        .iter()
        .filter(|&&v| pred[v as usize] == i64::from(labels[v as usize]))
        .count();
    let acc = right as f64 / test.len() as f64;
    assert_eq!(acc, record["test"]["accuracy"].as_f64().unwrap());
    assert!(pred.iter().all(|&c| (0..3).contains(&c)));
    // An existing output is replaced only with --force.
    let again = saintflow(
        &[
            "eval",
            "gcn",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run/",
            "-o",
            "out/pred.npy",
        ],
        dir,
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn eval_with_another_plan_or_overrides_than_the_run_is_refused_saying_what_to_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    trained(dir, "gcn", &["--set", "dims.hidden=8", "--epochs", "3"]);
    let out = saintflow(
        &["eval", "gcn", "--graph", "g.sf", "--checkpoint", "run/"],
        dir,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("run/checkpoint.bin: checkpoint: written for another plan")
            && err.contains("pass the plan and the --set overrides the run was trained with"),
        "{err}"
    );
    saintflow_ok(
        &[
            "eval",
            "gcn",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run/",
            "--set",
            "dims.hidden=8",
        ],
        dir,
    );
}

/// `--last` evaluates the last epoch's parameters, which the log's last epoch record
/// validated.
#[test]
fn eval_last_gives_the_last_epochs_validation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    trained(dir, "gcn", &["--epochs", "4"]);
    let log = std::fs::read_to_string(dir.join("run/log.jsonl")).unwrap();
    let last_epoch: serde_json::Value = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|r| r["kind"] == "epoch")
        .unwrap();
    let out = saintflow_ok(
        &[
            "eval",
            "gcn",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run/",
            "--last",
            "--json",
            "--threads",
            "2",
        ],
        dir,
    );
    let e: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(e["which"], "last");
    assert_eq!(e["epoch"], 4);
    assert_eq!(e["val"], last_epoch["val"], "eval {e}\nlog {last_epoch}");
}

#[test]
#[ignore = "needs ../shared/data/cora beside the checkout"]
fn shared_data_eval_reproduces_the_cora_gcn_test_figure() {
    let cora = common::require_shared_dataset("cora");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    saintflow_ok(
        &[
            "import",
            "graphsaint",
            cora.to_str().unwrap(),
            "-o",
            "cora.sf",
            "-q",
        ],
        dir,
    );
    saintflow_ok(
        &[
            "train",
            "gcn",
            "--graph",
            "cora.sf",
            "--seed",
            "1",
            "--threads",
            "2",
            "--checkpoint",
            "run/",
            "--log",
            "run/log.jsonl",
        ],
        dir,
    );
    let record = test_record(dir);
    let out = saintflow_ok(
        &[
            "eval",
            "gcn",
            "--graph",
            "cora.sf",
            "--checkpoint",
            "run/",
            "--json",
            "-o",
            "pred.npy",
        ],
        dir,
    );
    let e: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(e["test"], record["test"]);
    assert!(
        record["test"]["accuracy"].as_f64().unwrap() > 0.78,
        "{record}"
    );
}
