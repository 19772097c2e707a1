//! The custom op trains end to end: `swish_gcn.toml` through the library (`TrainOptions`
//! with the crate's registry) and through the crate's binary (`saintflow::cli::run_with`),
//! on a small planted graph whose classes a GCN can learn.

use std::path::{Path, PathBuf};

use saintflow::plan::Plan;
use saintflow::store::gen::Planted;
use saintflow::train::TrainOptions;
use saintflow::GraphStore;

mod common;

/// 512 nodes, 4 planted classes (chance: 0.25).
fn planted(dir: &Path) -> PathBuf {
    common::planted(dir, 9, 3, Planted::default())
}

fn plan_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("swish_gcn.toml")
}

#[test]
fn swish_gcn_trains_through_the_library_with_the_user_registry() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(planted(tmp.path())).unwrap();
    let plan = Plan::load(plan_path()).unwrap();
    // The built-ins alone refuse the plan, naming the op.
    let err = TrainOptions::new(&plan, &store)
        .epochs(1)
        .threads(2)
        .train()
        .unwrap_err()
        .to_string();
    assert!(err.contains("user.swish"), "{err}");

    let out = TrainOptions::new(&plan, &store)
        .registry(saintflow_example_custom_op::registry())
        .threads(2)
        .seed(1)
        .epochs(40)
        .train()
        .unwrap();
    let test = out.test.expect("a finished run is tested");
    assert!(
        test.accuracy > 0.5,
        "test accuracy {} (chance 0.25)",
        test.accuracy
    );
    let losses = out.losses();
    assert!(
        losses.last().unwrap() < &(0.8 * losses[0]),
        "the loss falls: {losses:?}"
    );
}

/// The user neighbour op through `train()`: sampled training steps, then validation and
/// test by blocked full-graph inference (`user.max_agg` is a neighbour op, so evaluation
/// runs in row blocks through its `forward_block`).
#[test]
fn max_sage_trains_through_the_library_and_evaluates_blocked() {
    let tmp = tempfile::tempdir().unwrap();
    let store = GraphStore::open(planted(tmp.path())).unwrap();
    let plan = Plan::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("max_sage.toml")).unwrap();
    let out = TrainOptions::new(&plan, &store)
        .registry(saintflow_example_custom_op::registry())
        .threads(2)
        .seed(1)
        .epochs(30)
        .train()
        .unwrap();
    let test = out.test.expect("a finished run is tested");
    assert!(
        test.accuracy > 0.5,
        "test accuracy {} (chance 0.25)",
        test.accuracy
    );
}

#[test]
fn the_example_binary_trains_the_plan_from_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let store = planted(tmp.path());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow-custom-op"))
        .arg("train")
        .arg(plan_path())
        .arg("--graph")
        .arg(&store)
        .args(["--epochs", "40", "--threads", "2", "--quiet"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stdout}\n{stderr}");
    let line = stdout.lines().last().unwrap_or_default();
    let acc: f64 = line
        .split("test accuracy ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no test accuracy in {line:?}"));
    assert!(acc > 0.5, "{line}");
}
