//! Issue 28: the `train` path's protections around every other command — closed pipes,
//! absurd sizes refused before allocating, imports that refuse what `gen` refuses, late
//! outputs checked early. Each test is named after the issue's item it reproduces.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::small_store;

/// SIGPIPE's number (13 on every Linux architecture).
const SIGPIPE: i32 = 13;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn plan(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plans")
        .join(name)
        .display()
        .to_string()
}

/// Runs `saintflow args` with a stdout whose reading end is already closed (what
/// `| head -0` would give, without the race): the first write gets EPIPE/SIGPIPE.
fn with_closed_stdout(args: &[&str], cwd: &Path) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Item 3: every command that prints (JSON or text) ends quietly on a closed stdout, the
/// way `cat` does (SIGPIPE), never with a panic (exit 101 and a backtrace).
#[test]
fn issue_28_item_3_a_closed_stdout_ends_every_printing_command_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 9, 1);
    let g = g.to_str().unwrap();
    let gcn = plan("gcn.toml");
    let cases: Vec<Vec<&str>> = vec![
        vec!["train", &gcn, "--graph", g, "--json", "--epochs", "2", "-q"],
        vec!["sample", g, "--json", "--count", "4", "-q"],
        vec!["sample", g, "-q"],
        vec!["info", g, "--json"],
        vec!["info", g],
        vec!["ops", "--json"],
        vec!["check", g, "-q"],
        vec!["explain", &gcn, "--graph", g],
    ];
    for args in &cases {
        let o = with_closed_stdout(args, tmp.path());
        let (_, err) = text(&o);
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "saintflow {}: {err}",
            args.join(" ")
        );
        assert!(
            o.status.success() || o.status.signal() == Some(SIGPIPE),
            "saintflow {}: {:?} {err}",
            args.join(" "),
            o.status
        );
    }
    // And the plain pipe a user writes: one line read, then the reader gone.
    let mut child = Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(["train", &gcn, "--graph", g, "--json", "--epochs", "3", "-q"])
        .current_dir(tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.starts_with('{'), "{first}");
    let o = child.wait_with_output().unwrap();
    let (_, err) = text(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        o.status.success() || o.status.signal() == Some(SIGPIPE),
        "{:?}",
        o.status
    );
}
