//! The `saintflow` command as a user runs it: exit codes, messages, JSON.

mod common;

use common::saintflow;

use std::path::Path;
use std::process::Output;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The shipped GCN plan's path.
fn gcn_plan() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plans/gcn.toml")
        .display()
        .to_string()
}

/// `train PLAN --graph STORE` followed by `extra`.
fn train_args<'a>(plan: &'a str, store: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["train", plan, "--graph", store];
    args.extend_from_slice(extra);
    args
}

#[test]
fn demo_generates_checks_and_prints_info() {
    let tmp = tempfile::tempdir().unwrap();
    let o = saintflow(&["demo", "--output", "d.sf"], tmp.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("check: ok") && out.contains("nodes          16384"),
        "{out}"
    );
    // The last line is the trained GraphSAGE's test accuracy: far above chance (0.25) on
    // the planted graph.
    let last = out.lines().last().unwrap();
    let acc: f64 = last
        .strip_prefix("test accuracy ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no test accuracy in {last:?}"));
    assert!(acc > 0.6, "{last}");
}

#[test]
fn gen_info_json_and_check() {
    let tmp = tempfile::tempdir().unwrap();
    let o = saintflow(
        &[
            "gen",
            "kronecker",
            "--scale",
            "10",
            "--degree",
            "8",
            "--features",
            "4",
            "--classes",
            "3",
            "--planted",
            "-o",
            "g.sf",
            "-q",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let o = saintflow(&["info", "g.sf", "--json"], tmp.path());
    assert!(o.status.success());
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "saintflow.info/1");
    assert_eq!(j["nodes"], 1024);
    assert_eq!(j["features"], 4);
    assert_eq!(j["classes"], 3);
    assert_eq!(j["label_kind"], "single");
    assert_eq!(j["train_graph"], "induced");
    let directed = j["edges"]["directed"].as_u64().unwrap();
    assert_eq!(j["edges"]["undirected"].as_u64().unwrap() * 2, directed);
    let split = &j["split"];
    let total: u64 = ["train", "val", "test", "none"]
        .iter()
        .map(|k| split[k].as_u64().unwrap())
        .sum();
    assert_eq!(total, 1024);
    for k in [
        "min", "mean", "max", "p50", "p90", "p99", "p999", "isolated",
    ] {
        assert!(j["degree"][k].is_number(), "degree.{k}");
    }
    assert!(
        j["bytes"]["total"].as_u64().unwrap()
            > j["bytes"]["sections"]["features"].as_u64().unwrap()
    );
    let o = saintflow(&["check", "g.sf"], tmp.path());
    assert!(o.status.success() && text(&o).0.contains("passed every check"));

    // Existing output: refused without --force, replaced with it.
    let o = saintflow(
        &["gen", "kronecker", "--scale", "9", "-o", "g.sf", "-q"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("already exists (pass --force"));
    let o = saintflow(
        &[
            "gen",
            "kronecker",
            "--scale",
            "9",
            "-o",
            "g.sf",
            "-q",
            "--force",
        ],
        tmp.path(),
    );
    assert!(o.status.success());
}

/// Issue 15: `demo` and `gen --force` never delete what saintflow did not write.
#[test]
fn demo_and_forced_gen_refuse_a_directory_that_is_not_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("thesis.tex"), b"years of work").unwrap();
    for args in [
        &["demo", "--output", "mine", "--epochs", "0"][..],
        &[
            "gen",
            "kronecker",
            "--scale",
            "9",
            "-o",
            "mine",
            "-q",
            "--force",
        ][..],
    ] {
        let o = saintflow(args, tmp.path());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("mine: exists and is not a saintflow store"),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read(mine.join("thesis.tex")).unwrap(),
            b"years of work"
        );
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "something was left beside it: {names:?}");
    }
}

#[test]
fn damaged_store_fails_check_and_open_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let s = common::small_store(tmp.path(), "s.sf", 9, 1);
    common::poke(&s.join("features.f32"), 0, &[1, 2, 3, 4]);
    let o = saintflow(&["check", "s.sf"], tmp.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.starts_with("error: ")
            && err.contains("features.f32")
            && err.contains("checksum mismatch"),
        "{err}"
    );
    std::fs::remove_file(s.join("labels.bin")).unwrap();
    for cmd in ["check", "info"] {
        let o = saintflow(&[cmd, "s.sf"], tmp.path());
        assert_eq!(o.status.code(), Some(1));
        assert!(text(&o).1.contains("labels.bin"), "{cmd}: {:?}", text(&o));
    }
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let o = saintflow(&["gen", "kronecker", "--scale", "x", "-o", "a"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    let o = saintflow(
        &[
            "gen",
            "kronecker",
            "--scale",
            "4",
            "--split",
            "0.5,0.5",
            "-o",
            "a",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("three comma-separated fractions"));
    let o = saintflow(&["frobnicate"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    // `explain` refuses sizes that plan nonsense (issue 28's messages).
    let plan = gcn_plan();
    for bad in [
        &["--degree", "-1"][..],
        &["--degree", "nan"],
        &["--classes", "0"],
        &["--features", "0"],
    ] {
        let mut args = vec![
            "explain",
            plan.as_str(),
            "--features",
            "8",
            "--classes",
            "3",
        ];
        args.extend_from_slice(&["--nodes", "100"]);
        args.extend_from_slice(bad);
        let o = saintflow(&args, tmp.path());
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {:?}", text(&o));
    }
    let o = saintflow(
        &[
            "explain",
            plan.as_str(),
            "--features",
            "8",
            "--classes",
            "3",
            "--nodes",
            "100",
            "--degree",
            "4",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}

/// `saintflow ops`: every op a plan may call by name is listed with its attributes and
/// one line (the registry is the source: the list is the registry's names), `ops NAME`
/// one op, `--json` the same as JSON, and an unknown name is a usage error with a
/// suggestion.
#[test]
fn ops_lists_the_catalogue_of_plan_callable_ops() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = saintflow::op::Registry::with_builtins();
    let o = saintflow(&["ops"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let out = text(&o).0;
    for name in registry.names() {
        let spec = registry.spec(name).unwrap();
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{out}"));
        assert!(line.contains(&spec.doc), "{line}");
        assert!(
            line.contains(&format!("[{}]", spec.attrs.join(", "))),
            "{line}"
        );
    }
    let o = saintflow(&["ops", "dropout", "--json"], tmp.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["name"], "dropout");
    assert_eq!(v[0]["attributes"], serde_json::json!(["p"]));
    let o = saintflow(&["ops", "droput"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("did you mean `dropout`?"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn import_error_exits_1_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let o = saintflow(
        &["import", "graphsaint", "nowhere", "-o", "x.sf"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("nowhere"));
    assert!(!tmp.path().join("x.sf").exists());
}

#[test]
fn sample_prints_json_records_and_a_summary() {
    let tmp = tempfile::tempdir().unwrap();
    common::small_store(tmp.path(), "s.sf", 10, 2);
    let o = saintflow(
        &[
            "sample",
            "s.sf",
            "--sampler",
            "frontier",
            "--frontier",
            "20",
            "--budget",
            "200",
            "--count",
            "4",
            "--json",
            "--save-norm",
            "n.bin",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let lines: Vec<serde_json::Value> = text(&o)
        .0
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    for l in &lines[..4] {
        assert!(l["nodes"].as_u64().unwrap() > 0 && l["nodes"].as_u64().unwrap() % 16 == 0);
        assert!(l["edges"].is_u64());
    }
    assert_eq!(lines[4]["summary"], true);
    assert_eq!(lines[4]["count"], 4);
    let norm = saintflow::sample::NormCounts::load(&tmp.path().join("n.bin")).unwrap();
    assert_eq!(norm.meta.subgraphs, 4);
    // Each sampler with its own flags (another sampler's flag is refused: tests/reliability.rs).
    for (s, own) in [
        ("rw", ["--roots", "10"]),
        ("edge", ["--edges", "30"]),
        ("node", ["--budget", "40"]),
        ("full", ["--seed", "1"]),
    ] {
        let mut args = vec![
            "sample",
            "s.sf",
            "--graph",
            "full",
            "--sampler",
            s,
            "--count",
            "2",
        ];
        args.extend(own);
        let o = saintflow(&args, tmp.path());
        assert!(o.status.success(), "{s}: {:?}", text(&o));
        assert!(text(&o).0.contains("subgraphs, mean"), "{s}");
    }
    // Regression: the full sampler covers exactly the nodes with edges (isolated nodes are
    // in its subgraph but not in the denominator; it once reported 124%).
    let o = saintflow(
        &[
            "sample",
            "s.sf",
            "--graph",
            "full",
            "--sampler",
            "full",
            "--count",
            "1",
            "--json",
        ],
        tmp.path(),
    );
    let last: serde_json::Value = serde_json::from_str(text(&o).0.lines().last().unwrap()).unwrap();
    assert_eq!(last["coverage"], 1.0);
    // A frontier larger than the budget is the sampler's own check, when it is built.
    let o = saintflow(
        &["sample", "s.sf", "--frontier", "300", "--budget", "200"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("expected 1 ≤ m ≤ n"));
}

/// The plain binary has only the built-in ops: the custom-op example's plan is refused,
/// naming the op and where the plan uses it (its own binary, `saintflow-custom-op`, trains
/// it: examples/custom_op/tests/train.rs).
#[test]
fn plain_binary_refuses_a_plan_with_an_unknown_custom_op() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "s.sf", 6, 1);
    let plan = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/custom_op/swish_gcn.toml")
        .display()
        .to_string();
    let store = store.display().to_string();
    let o = saintflow(
        &[
            "train", &plan, "--graph", &store, "--epochs", "1", "--quiet",
        ],
        tmp.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("swish_gcn.toml:15:") && err.contains("unknown op `user.swish`"),
        "{err}"
    );
    let o = saintflow(&["explain", &plan, "--graph", &store], tmp.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("user.swish"), "{err}");
}

/// Issue 27: piped, a long run is never silent. With the line interval at 0 (every update
/// due; 10 s by default, `progress::tests` checks that schedule), training reports its steps
/// against a total that `--steps` caps (so the ETA counts to it), and the evaluation's
/// full-graph pass reports its rows layer by layer.
#[test]
fn piped_train_reports_steps_to_the_steps_cap_and_the_evaluation_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "s.sf", 10, 1);
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args([
            "train",
            plan.to_str().unwrap(),
            "--graph",
            store.to_str().unwrap(),
            "--epochs",
            "50",
            "--steps",
            "7",
            "--threads",
            "1",
            "--set",
            "dims.hidden=16",
            "--set",
            "sampler.roots=30",
        ])
        .env("SAINTFLOW_PROGRESS_SECS", "0")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let steps: Vec<&str> = err.lines().filter(|l| l.starts_with("train: ")).collect();
    // One line per step, each against the 7 steps `--steps` allows (not 50 epochs' worth).
    assert_eq!(steps.len(), 7, "{err}");
    for (i, l) in steps.iter().enumerate() {
        assert!(l.starts_with(&format!("train: {}/7 steps (", i + 1)), "{l}");
        assert!(l.contains(" steps/s") && l.contains("  epoch "), "{l}");
        if i < 6 {
            assert!(l.contains(", eta "), "{l}");
        }
    }
    // The evaluation's pass over every node, by layer, ending at all rows of the last.
    let n = saintflow::GraphStore::open(&store).unwrap().n_nodes();
    let pass: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("full-graph pass: "))
        .collect();
    assert!(!pass.is_empty(), "{err}");
    // Its last line: every row of every level (k of them, k ≥ 2 for GraphSAGE's two hops)
    // done, at layer k of k.
    let done = pass
        .iter()
        .find(|l| l.contains(" rows (100 %)"))
        .unwrap_or_else(|| panic!("no finished pass in {err}"));
    let total: usize = done["full-graph pass: ".len()..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Every row once per level, and once more for a level whose input streams past in
    // parts (GraphSAGE's first A·X: X·W computed from the features' parts).
    let k: usize = done.rsplit('/').next().unwrap().parse().unwrap();
    assert!(
        total.is_multiple_of(n) && k >= 2 && total / n >= k,
        "{done}"
    );
    assert!(done.ends_with(&format!("layer {k}/{k}")), "{done}");
    assert!(
        pass.iter().any(|l| l.ends_with(&format!("layer 1/{k}"))),
        "{err}"
    );
}

/// Issue 27: an evaluation that streams its layers' inputs (`--buffer 1`: a 1 MiB buffer,
/// so GraphSAGE's 1024 × 256 X·W of layer 2 goes past in parts) and keeps its values in
/// scratch files (`--memory 0`) says so in one line before its first pass, reports each
/// pass's reads when it ends, and gives the metrics of a run that does neither, to the
/// printed digit; the epoch line says what its loss is and gives the plain mean beside it.
#[test]
fn an_out_of_core_evaluation_prints_its_plan_once_and_gives_the_same_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "s.sf", 10, 1);
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "train",
            plan.to_str().unwrap(),
            "--graph",
            store.to_str().unwrap(),
            "--epochs",
            "2",
            "--threads",
            "2",
            "--set",
            "sampler.roots=100",
        ];
        args.extend_from_slice(extra);
        let o = saintflow(&args, tmp.path());
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        (out, err)
    };
    let (want, quiet) = run(&[]);
    assert!(
        !quiet.contains("full-graph pass over"),
        "in memory, no plan line: {quiet}"
    );
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let (got, err) = run(&["--buffer", "1", "--memory", "0", "--scratch-dir", "scratch"]);
    assert_eq!(got, want, "streamed and in place: the same metrics");
    let plans: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("full-graph pass over "))
        .collect();
    assert_eq!(
        plans.len(),
        1,
        "the plan once, not at every evaluation: {err}"
    );
    let line = plans[0];
    assert!(
        line.contains("in scratch files in scratch")
            && line.contains("buffer 1.0 MiB")
            && line.contains("streams X in parts of")
            && line.contains("expected reads"),
        "{line}"
    );
    // Two validations and the test.
    let done = err
        .lines()
        .filter(|l| l.starts_with("full-graph pass done: 1024 nodes in "))
        .count();
    assert_eq!(done, 3, "{err}");
    let epochs: Vec<&str> = err.lines().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(epochs.len(), 2, "{err}");
    for l in epochs {
        assert!(
            l.contains("(GraphSAINT-normalised; mean per training node "),
            "{l}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&scratch).unwrap().count(),
        0,
        "scratch files unlinked"
    );
}

/// Issue 15: where no progress bar can be drawn (stderr is a pipe here), `train` prints one
/// line per epoch on stderr, with the epoch, the step, the epoch's mean loss, the validation
/// metrics and the time; the numbers are the log's. `--quiet` silences them, and with
/// `--json` stdout stays pure JSON lines.
#[test]
fn piped_train_prints_one_line_per_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "s.sf", 8, 1);
    let store = store.display().to_string();
    let plan = gcn_plan();
    let args = train_args(
        &plan,
        &store,
        &["--epochs", "3", "--threads", "1", "--log", "log.jsonl"],
    );
    let o = saintflow(&args, tmp.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(lines.len(), 3, "{err}");
    let log = std::fs::read_to_string(tmp.path().join("log.jsonl")).unwrap();
    let epochs: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "epoch")
        .collect();
    assert_eq!(epochs.len(), 3);
    for (i, (line, rec)) in lines.iter().zip(&epochs).enumerate() {
        let (loss, mean) = (
            rec["train_loss"].as_f64().unwrap(),
            rec["train_mean_loss"].as_f64().unwrap(),
        );
        // GCN's plan trains on the whole graph: every training node is in the subgraph,
        // so the normalised loss is the plain mean.
        assert!((loss - mean).abs() <= 1e-6 * loss.abs(), "{loss} vs {mean}");
        // Issue 53 item 7: the epoch's training and evaluation milliseconds, the log's.
        let want = format!(
            "epoch {}/3  step {}  loss {loss:.4} (GraphSAINT-normalised; mean per training node {mean:.4})  val accuracy {:.4} F1-micro {:.4} loss {:.4}  train {:.1} ms  eval {:.1} ms  time ",
            i + 1,
            rec["step"].as_u64().unwrap() + 1,
            rec["val"]["accuracy"].as_f64().unwrap(),
            rec["val"]["f1_micro"].as_f64().unwrap(),
            rec["val"]["loss"].as_f64().unwrap(),
            rec["train_ms"].as_f64().unwrap(),
            rec["eval_ms"].as_f64().unwrap(),
        );
        assert!(line.starts_with(&want), "{line:?} vs {want:?}");
        let secs: f64 = line[want.len()..]
            .strip_suffix('s')
            .unwrap()
            .parse()
            .unwrap();
        assert!((0.0..600.0).contains(&secs), "{line}");
    }
    // The summary is still the last line of stdout, and stdout has nothing else.
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("gcn on "), "{out}");

    let mut quiet = args.clone();
    // The log exists now: a fresh run replaces it only with --force (issue 55, item 2).
    quiet.extend(["--quiet", "--force"]);
    let o = saintflow(&quiet, tmp.path());
    let (_, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(!err.lines().any(|l| l.starts_with("epoch ")), "{err}");

    let json = train_args(
        &plan,
        &store,
        &["--epochs", "3", "--threads", "1", "--json"],
    );
    let o = saintflow(&json, tmp.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("epoch ")).count(),
        3,
        "{err}"
    );
    for l in out.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}"));
    }
}

/// Runs the `saintflow` binary with `args` in `cwd`, the environment variable `var` set to
/// `value`.
fn saintflow_with_env(
    args: &[&str],
    cwd: &std::path::Path,
    var: &str,
    value: &str,
) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(args)
        .env(var, value)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// Issue 53: `SAINTFLOW_AMX` takes on or off; anything else is a usage error naming the
/// variable, the value and the accepted ones, before any work (no output written).
#[test]
fn issue_53_an_unknown_saintflow_amx_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::planted(tmp.path(), 9).display().to_string();
    let plan = gcn_plan();
    let args = train_args(&plan, &store, &["--epochs", "1", "--json"]);
    let run = |v: &str| saintflow_with_env(&args, tmp.path(), "SAINTFLOW_AMX", v);
    let bad = run("of");
    let (out, err) = text(&bad);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains("SAINTFLOW_AMX") && err.contains("\"of\"") && err.contains("on or off"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    for ok in ["off", "ON", "0", ""] {
        let o = run(ok);
        assert!(o.status.success(), "SAINTFLOW_AMX={ok:?}: {}", text(&o).1);
    }
}

/// Issue 33: `SAINTFLOW_ISA` forces the kernels' instruction set. An unknown value is a
/// usage error naming the variable and the accepted values; the AVX2 and AVX-512 paths
/// train to the same losses and metrics, bit for bit (GEMM, SpMM and the elementwise loops
/// sum in the same order on both), and the generic path trains too.
#[test]
fn issue_33_saintflow_isa_forces_a_path_and_the_fma_paths_train_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::planted(tmp.path(), 9).display().to_string();
    let plan = gcn_plan();
    let args = train_args(
        &plan,
        &store,
        &["--epochs", "2", "--threads", "2", "--seed", "3", "--json"],
    );
    let run = |isa: &str| saintflow_with_env(&args, tmp.path(), "SAINTFLOW_ISA", isa);
    let bad = run("avx3");
    let (_, err) = text(&bad);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains("SAINTFLOW_ISA")
            && err.contains("\"avx3\"")
            && err.contains("avx512, avx2 or generic"),
        "{err}"
    );
    // Losses and metrics of every record, without the timings.
    let results = |isa: &str| -> Vec<String> {
        let o = run(isa);
        let (out, err) = text(&o);
        assert!(o.status.success(), "SAINTFLOW_ISA={isa}: {err}");
        out.lines()
            .map(|l| {
                let j: serde_json::Value = serde_json::from_str(l).unwrap();
                ["kind", "epoch", "step", "loss", "train_loss", "val", "test"]
                    .iter()
                    .map(|k| format!("{k}={}", j.get(k).unwrap_or(&serde_json::Value::Null)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    let generic = results("generic");
    assert!(
        generic.iter().any(|r| r.contains("kind=\"test\"")),
        "{generic:?}"
    );
    let saintflow_ops::isa::Isa::Avx512 = saintflow_ops::isa::Isa::detected() else {
        return; // one FMA path at most on this CPU: nothing to compare
    };
    assert_eq!(results("avx2"), results("avx512"));
}

/// Issue 15: zeros that mean nothing are usage errors (exit 2) naming the flag, before
/// any store or plan is read.
#[test]
fn issue_15_zero_counts_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = &gcn_plan();
    for args in [
        &["train", plan, "--graph", "g.sf", "--threads", "0"][..],
        &["train", plan, "--graph", "g.sf", "--epochs", "0"],
        &["train", plan, "--graph", "g.sf", "--steps", "0"],
        &[
            "embed",
            plan,
            "--graph",
            "g.sf",
            "--checkpoint",
            "c",
            "-o",
            "e.npy",
            "--threads",
            "0",
        ],
        &["sample", "g.sf", "--count", "0"],
        &["sample", "g.sf", "--clip", "0"],
        // A sampler field's range is its parameter struct's, checked when parsed.
        &["sample", "g.sf", "--frontier", "0"],
        &["sample", "g.sf", "--sampler", "rw", "--roots", "0"],
        &["explain", plan, "--threads", "0"],
    ] {
        let o = saintflow(args, tmp.path());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let flag = args[args.len() - 2];
        assert!(err.contains(flag) && err.contains('0'), "{args:?}: {err}");
    }
}

/// Issue 15: a plan whose parameters cannot fit is refused before allocating, naming the
/// dim at its place (the override), exit 1; `--no-memory-check` is what lets it through.
#[test]
fn issue_15_a_huge_hidden_dim_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "g.sf", 6, 1);
    let plan = gcn_plan();
    let args = train_args(
        &plan,
        store.to_str().unwrap(),
        &[
            "--set",
            // (6 + 3) × 10⁸ f32: 3.6 GB of parameters.
            "dims.hidden=100000000",
            "--checkpoint",
            "ck",
        ],
    );
    // The machine's memory set to 1 GiB, so the test means the same on any machine.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(args)
        .current_dir(tmp.path())
        .env("SAINTFLOW_MEMORY_LIMIT", "1G")
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("override `dims.hidden=100000000`:1:13: dims.hidden = 100000000: the parameters alone need 3.4 GiB (W0: 6 × 100000000 f32, W1: 100000000 × 3 f32)"),
        "{err}"
    );
    assert!(
        err.contains("this machine has 1.0 GiB (SAINTFLOW_MEMORY_LIMIT=1G)"),
        "{err}"
    );
    assert!(err.contains("--no-memory-check"), "{err}");
    assert!(!tmp.path().join("ck").exists(), "nothing written");
}

/// Issue 15: an edge list with an id far beyond its lines is refused naming the line and
/// `--remap`; with `--remap` it imports and the mapping is in the store.
#[test]
fn issue_15_import_edgelist_far_ids_and_remap() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("e.txt"), "0 1\n1 4000000000\n").unwrap();
    let o = saintflow(
        &["import", "edgelist", "e.txt", "-o", "x.sf", "--symmetrize"],
        tmp.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("e.txt: line 2: node id 4000000000") && err.contains("--remap"),
        "{err}"
    );
    assert!(!tmp.path().join("x.sf").exists());
    let o = saintflow(
        &[
            "import",
            "edgelist",
            "e.txt",
            "-o",
            "x.sf",
            "--symmetrize",
            "--remap",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    assert!(text(&o).0.contains("3 nodes"));
    let ids = std::fs::read_to_string(tmp.path().join("x.sf/ids.tsv")).unwrap();
    assert!(ids.ends_with("2\t4000000000\n"), "{ids}");
    let o = saintflow(&["check", "x.sf"], tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
}

/// A PID that ran and has exited (a child reaped here), so no process has it now (reuse
/// within the test is possible in principle but needs the PID space to wrap).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// Issue 15: a killed `gen` left `.X.sf.tmp-PID/` forever. The next write of X removes
/// what a dead writer left (saying so on stderr) and nothing else: a temporary whose
/// process runs, one whose lock is held (a live writer in another PID namespace), one with
/// content saintflow does not write, other names. A `.old` store moved aside by a killed
/// replace is put back. The same for atomic files' temporaries.
#[test]
fn issue_15_stale_temporaries_of_killed_writers_are_removed_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mkdir = |name: &str, files: &[&str]| {
        let p = d.join(name);
        std::fs::create_dir(&p).unwrap();
        for f in files {
            std::fs::write(p.join(f), b"partial").unwrap();
        }
        p
    };
    let dead = dead_pid();
    let mut live = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let stale = mkdir(
        &format!(".g.sf.tmp-{dead}"),
        &["features.f32", "full.offsets.u64"],
    );
    std::fs::create_dir(stale.join("scratch")).unwrap();
    std::fs::write(stale.join("scratch/bucket-0"), b"x").unwrap();
    let running = mkdir(&format!(".g.sf.tmp-{}", live.id()), &["features.f32"]);
    let locked = mkdir(&format!(".g.sf.tmp-{}", dead_pid()), &["roles.u8"]);
    let lock = std::fs::File::open(&locked).unwrap();
    lock.try_lock().unwrap();
    let foreign = mkdir(&format!(".g.sf.tmp-{}", dead_pid()), &["notes.txt"]);
    let not_pid = mkdir(".g.sf.tmp-12ab", &["features.f32"]);
    let other = mkdir(&format!(".h.sf.tmp-{dead}"), &["features.f32"]);

    let gen = |extra: &[&str]| {
        let base = [
            "gen",
            "kronecker",
            "--scale",
            "5",
            "--degree",
            "4",
            "-o",
            "g.sf",
        ];
        saintflow(&[&base[..], extra].concat(), d)
    };
    let o = gen(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("removed stale temporary")
            && err.contains(&format!(".g.sf.tmp-{dead}"))
            && err.contains(&format!("process {dead}")),
        "{err}"
    );
    assert!(!stale.exists());
    for kept in [&running, &locked, &foreign, &not_pid, &other] {
        assert!(kept.exists(), "{} was removed", kept.display());
    }
    assert_eq!(err.matches("removed stale").count(), 1, "{err}");
    saintflow::GraphStore::open(d.join("g.sf")).unwrap();

    // Once its writer is gone, the locked one goes too; the running one stays while its
    // process runs.
    drop(lock);
    let o = gen(&[]); // refused (exists, no --force), after the clean-up
    assert_eq!(o.status.code(), Some(1));
    assert!(!locked.exists() && running.exists() && foreign.exists());
    live.kill().unwrap();
    live.wait().unwrap();
    let o = gen(&["--force"]);
    assert!(o.status.success());
    assert!(!running.exists() && foreign.exists() && not_pid.exists() && other.exists());

    // A replace killed between moving the old store aside and renaming the new one in:
    // the old store comes back, then the refusal to overwrite it without --force.
    let id = saintflow::GraphStore::open(d.join("g.sf"))
        .unwrap()
        .identity();
    let aside = d.join(format!(".g.sf.tmp-{}.old", dead_pid()));
    std::fs::rename(d.join("g.sf"), &aside).unwrap();
    let o = gen(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("restored") && err.contains("already exists"),
        "{err}"
    );
    assert!(!aside.exists());
    assert_eq!(
        saintflow::GraphStore::open(d.join("g.sf"))
            .unwrap()
            .identity(),
        id
    );

    // Atomic files: a dead writer's temporary goes, a locked one stays.
    let ck = d.join("out.bin");
    let stale_file = d.join(format!(".out.bin.tmp-{}", dead_pid()));
    let held_file = d.join(format!(".out.bin.tmp-{}", dead_pid()));
    std::fs::write(&stale_file, b"half").unwrap();
    std::fs::write(&held_file, b"half").unwrap();
    let hold = std::fs::File::open(&held_file).unwrap();
    hold.try_lock().unwrap();
    saintflow::atomic::write_atomic(&ck, b"new").unwrap();
    assert!(!stale_file.exists() && held_file.exists());
    assert_eq!(std::fs::read(&ck).unwrap(), b"new");
}

/// Issue 15: `train` runs the store's full check first on a small store by default, so a
/// changed feature value (valid, but not the bytes the header's checksum was taken over)
/// is refused naming the section; `--verify` refuses it too, and `--no-verify` trains on it.
#[test]
fn issue_15_train_checks_a_small_store_in_full_unless_told_not_to() {
    use saintflow::store::format::SectionId;
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "g.sf", 7, 1);
    let plan = gcn_plan();
    let run = |extra: &[&str]| {
        let base = ["--epochs", "1", "--threads", "1", "--quiet"];
        let args = train_args(&plan, store.to_str().unwrap(), &[&base[..], extra].concat());
        saintflow(&args, tmp.path())
    };
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o).1);

    let features = store.join(SectionId::Features.file_name());
    let mut bytes = std::fs::read(&features).unwrap();
    bytes[4..8].copy_from_slice(&0.5f32.to_le_bytes());
    std::fs::write(&features, &bytes).unwrap();
    for extra in [&[][..], &["--verify"]] {
        let o = run(extra);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {err}");
        assert!(
            err.contains(SectionId::Features.file_name()) && err.contains("checksum"),
            "{extra:?}: {err}"
        );
    }
    let o = run(&["--no-verify"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = run(&["--verify", "--no-verify"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Issue 58: `explain` with a store plans for the sampler's expected subgraph capped by the
/// graph (graphsage's 3,000 roots × 2 steps is 9,000 nodes; a 1,024-node store has fewer),
/// its adjacency entries by the graph's; without a store, the sampler's size as written.
#[test]
fn explain_caps_the_expected_subgraph_by_the_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let store = common::small_store(tmp.path(), "s.sf", 10, 1);
    let g = saintflow::GraphStore::open(&store).unwrap();
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
    let plan = plan.to_str().unwrap();
    let o = saintflow(
        &["explain", plan, "--graph", store.to_str().unwrap()],
        tmp.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let want = format!(
        "# planned for n = {}, nnz = {},",
        g.n_nodes(),
        g.full().n_entries()
    );
    assert!(out.contains(&want), "{out}");
    let o = saintflow(
        &["explain", plan, "--features", "8", "--classes", "3"],
        tmp.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("# planned for n = 9000,"), "{out}");
}
