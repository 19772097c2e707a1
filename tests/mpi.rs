//! Issue 17 through `mpirun` (the `mpi` feature; `.ci/run` installs OpenMPI and runs these
//! with `cargo test --features mpi --test mpi`): ranks as processes, the same results as
//! ranks as threads, a killed rank ending the job, and `--resume` afterwards.
#![cfg(feature = "mpi")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use saintflow::dist::{Collective, Dist, DistEval, ThreadGroup};
use saintflow::plan::Plan;
use saintflow::store::GraphStore;
use saintflow::train::TrainOptions;

const PLAN: &str = "plans/gcn.toml";

fn mpirun(np: usize, args: &[&str], cwd: &Path) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &np.to_string(),
    ])
    .arg(env!("CARGO_BIN_EXE_saintflow"))
    .args(args)
    .current_dir(cwd)
    .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    c
}

fn parts(dir: &Path, k: usize) -> (PathBuf, PathBuf) {
    common::partitioned(dir, 10, k, 0.01, 1)
}

/// `train PLAN --partitions DIR --graph FULL --log LOG` and `extra`.
fn train_args(dir: &Path, full: &Path, log: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["train".into(), plan_file().display().to_string()];
    for (flag, p) in [("--partitions", dir), ("--graph", full), ("--log", log)] {
        v.push(flag.into());
        v.push(p.display().to_string());
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn plan_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(PLAN)
}

fn ok(o: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    text
}

/// The last `test` record's accuracy in a log.
fn test_accuracy(log: &Path) -> f64 {
    let text = std::fs::read_to_string(log).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "test", "{last}");
    last["test"]["accuracy"].as_f64().unwrap()
}

#[test]
fn issue_17_two_mpi_ranks_train_like_two_thread_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let (full, dir) = parts(tmp.path(), 2);
    let log = tmp.path().join("mpi.jsonl");
    let args = train_args(
        &dir,
        &full,
        &log,
        &["--epochs", "20", "--seed", "3", "--threads", "1"],
    );
    let out = ok(&mpirun(2, &strs(&args), tmp.path()).output().unwrap());
    assert!(out.contains("test accuracy"), "{out}");
    let mpi_acc = test_accuracy(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    let run: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(run["dist"]["ranks"], 2);
    assert_eq!(run["dist"]["transport"], "mpi");
    assert!(text.contains("\"allreduce_bytes\""));

    // The same job with ranks as threads: a sum of two values is the same in any order,
    // so the metrics match exactly.
    let plan = Plan::load(plan_file()).unwrap();
    let full = GraphStore::open(&full).unwrap();
    let threads = ThreadGroup::run(2, |c| {
        let store = GraphStore::open(dir.join(format!("part-{}.sf", c.rank()))).unwrap();
        TrainOptions::new(&plan, &store)
            .seed(3)
            .threads(1)
            .epochs(20)
            .distributed(Dist {
                comm: Arc::new(c),
                eval: DistEval::Rank0(Some(&full)),
                replica_bytes: 0,
            })
            .train()
    });
    let t = threads[0].as_ref().unwrap().test.unwrap();
    assert_eq!(t.accuracy, mpi_acc);
}

#[test]
fn issue_17_four_mpi_ranks_train_and_report_their_communication() {
    let tmp = tempfile::tempdir().unwrap();
    let (full, dir) = parts(tmp.path(), 4);
    let log = tmp.path().join("four.jsonl");
    let args = train_args(
        &dir,
        &full,
        &log,
        &["--epochs", "40", "--set", "optimizer.lr=0.05"],
    );
    ok(&mpirun(4, &strs(&args), tmp.path()).output().unwrap());
    // 4 planted classes: chance is 0.25.
    let acc = test_accuracy(&log);
    assert!(acc > 0.5, "test accuracy {acc}");
    let text = std::fs::read_to_string(&log).unwrap();
    let run: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(run["dist"]["ranks"], 4);
    let report = saintflow::dist::partition::read_report(&dir).unwrap();
    let replicas: u64 = report.parts.iter().map(|p| p.replicas as u64).sum();
    let store = GraphStore::open(dir.join("part-0.sf")).unwrap();
    // Single-label: F floats and one u32 label per replica.
    let want = replicas * (store.n_features() as u64 * 4 + 4);
    assert_eq!(run["dist"]["replica_bytes"], want);
}

#[test]
fn issue_17_wrong_rank_count_and_missing_full_graph_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (full, dir) = parts(tmp.path(), 2);
    let p = plan_file();
    let d = dir.display().to_string();
    let args = [
        "train",
        p.to_str().unwrap(),
        "--partitions",
        &d,
        "--epochs",
        "1",
    ];
    let o = mpirun(4, &args, tmp.path()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("stores for 2 ranks, but the job has 4 ranks"),
        "{err}"
    );
    // The command's remedy: 4 parts for 2 ranks, assigned by load, trains on 2 ranks.
    let f = full.display().to_string();
    let o = common::saintflow(
        &["partition", &f, "-k", "4", "--ranks", "2", "-o", "p4r2"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("rank-0.sf") && table.contains("rank-1.sf"),
        "{table}"
    );
    let args4 = [
        "train",
        p.to_str().unwrap(),
        "--partitions",
        "p4r2",
        "--epochs",
        "2",
    ];
    ok(&mpirun(2, &args4, tmp.path()).output().unwrap());
    // Rank 0 evaluates on the source partition.json names; gone, it says what to pass.
    std::fs::remove_dir_all(&full).unwrap();
    let o = mpirun(2, &args, tmp.path()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("pass --graph"), "{err}");
}

/// The PID of rank `rank` among the processes `mpirun` (`parent`) started.
fn rank_pid(parent: u32, rank: usize) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Field 4, after the parenthesised command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(parent) {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

fn wait_with_deadline(mut child: Child, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), start.elapsed());
        }
        if start.elapsed() > limit {
            child.kill().ok();
            let o = child.wait_with_output().unwrap();
            panic!(
                "mpirun still running after {limit:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn issue_17_a_killed_rank_ends_the_job_and_resume_gives_the_uninterrupted_result() {
    let tmp = tempfile::tempdir().unwrap();
    let (full, dir) = parts(tmp.path(), 2);
    let run = |log: &Path, ck: &Path| {
        let c = ck.display().to_string();
        let extra = [
            "--epochs",
            "60",
            "--threads",
            "1",
            "--checkpoint",
            &c,
            "--resume",
        ];
        mpirun(2, &strs(&train_args(&dir, &full, log, &extra)), tmp.path())
    };
    let whole_log = tmp.path().join("whole.jsonl");
    ok(&run(&whole_log, &tmp.path().join("whole.ckpt"))
        .output()
        .unwrap());
    let whole = test_accuracy(&whole_log);

    let log = tmp.path().join("cut.jsonl");
    let ck = tmp.path().join("cut.ckpt");
    let child = run(&log, &ck)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill rank 1 once rank 0 has checkpointed a few epochs.
    let start = Instant::now();
    let pid = loop {
        let epochs = std::fs::read_to_string(&log)
            .map(|t| t.matches("\"kind\":\"epoch\"").count())
            .unwrap_or(0);
        if epochs >= 3 && ck.exists() {
            if let Some(pid) = rank_pid(child.id(), 1) {
                break pid;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    };
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (o, took) = wait_with_deadline(child, Duration::from_secs(30));
    assert!(!o.status.success(), "the job ended well after a kill");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("signal 9") || err.contains("Killed") || err.contains("killed"),
        "{err}"
    );
    eprintln!("the job ended {took:?} after rank 1 was killed");
    let at = saintflow::train::Checkpoint::load(&ck).unwrap().epoch;
    assert!((1..60).contains(&at), "checkpoint of epoch {at}");

    // Resume: the same test accuracy as the uninterrupted run.
    ok(&run(&log, &ck).output().unwrap());
    assert_eq!(test_accuracy(&log), whole);
}
