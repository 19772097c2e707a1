//! Issue 55, items 2, 4 and 5 (the command line's part): outputs that never destroy
//! inputs (one guard, `saintflow::atomic::OutputGuard`, for every command), writes to
//! stdout and stderr that fail without a panic, and counts with bounds.

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{saintflow, saintflow_ok, small_store};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every file under `dir` (recursively) with its bytes; symbolic links as their target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let t = p.symlink_metadata().unwrap().file_type();
            if t.is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                m.insert(p, format!("-> {}", target.display()).into_bytes());
            } else if t.is_dir() {
                stack.push(p);
            } else if !t.is_file() {
                // A FIFO (never opened: that would wait for a writer).
                m.insert(p, b"not a regular file".to_vec());
            } else {
                m.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    m
}

/// The files every command below reads, made once: a store, a plan, a run's checkpoint and
/// log, exported weights, an embedding.
struct Fixture {
    tmp: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        small_store(d, "g.sf", 8, 1);
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gcn.toml"),
            d.join("gcn.toml"),
        )
        .unwrap();
        saintflow_ok(
            &[
                "train",
                "gcn.toml",
                "--graph",
                "g.sf",
                "--epochs",
                "1",
                "--threads",
                "1",
                "--checkpoint",
                "run/",
                "--log",
                "run.jsonl",
                "-q",
            ],
            d,
        );
        saintflow_ok(&["export", "run", "-o", "w.safetensors"], d);
        saintflow_ok(
            &[
                "embed",
                "gcn.toml",
                "--graph",
                "g.sf",
                "--checkpoint",
                "run",
                "-o",
                "emb.npy",
                "--threads",
                "1",
                "-q",
            ],
            d,
        );
        Fixture { tmp }
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }
}

/// A command, its inputs (files; a store is named by a file inside it too) and its
/// single-file outputs, each as (flag, default path).
struct Cmd {
    args: Vec<&'static str>,
    inputs: Vec<&'static str>,
    outputs: Vec<(&'static str, &'static str)>,
}

fn commands() -> Vec<Cmd> {
    vec![
        Cmd {
            args: vec![
                "export",
                "run/checkpoint.bin",
                "--plan",
                "gcn.toml",
                "--force",
            ],
            inputs: vec!["run/checkpoint.bin", "gcn.toml"],
            outputs: vec![("-o", "out.safetensors")],
        },
        Cmd {
            args: vec![
                "embed",
                "gcn.toml",
                "--graph",
                "g.sf",
                "--checkpoint",
                "run",
                "--force",
                "--threads",
                "1",
                "-q",
            ],
            inputs: vec!["gcn.toml", "run/checkpoint.bin"],
            outputs: vec![("-o", "out.npy")],
        },
        Cmd {
            args: vec!["plot", "run.jsonl", "--force"],
            inputs: vec!["run.jsonl"],
            outputs: vec![("-o", "out.svg")],
        },
        Cmd {
            args: vec![
                "train",
                "gcn.toml",
                "--graph",
                "g.sf",
                "--init-from",
                "w.safetensors",
                "--epochs",
                "1",
                "--threads",
                "1",
                "--force",
                "-q",
            ],
            inputs: vec!["gcn.toml", "w.safetensors"],
            outputs: vec![
                ("--checkpoint", "new.ck"),
                ("--log", "new.jsonl"),
                ("--plot", "new.svg"),
            ],
        },
        Cmd {
            args: vec!["sample", "g.sf", "--count", "2", "--force", "-q"],
            inputs: vec![],
            outputs: vec![("--save-norm", "out.norm")],
        },
        Cmd {
            args: vec![
                "partition",
                "g.sf",
                "-k",
                "2",
                "-o",
                "parts",
                "--plan",
                "gcn.toml",
                "--force",
                "-q",
            ],
            inputs: vec!["gcn.toml"],
            outputs: vec![("--metis-out", "out.metis")],
        },
        Cmd {
            args: vec![
                "eval-embedding",
                "emb.npy",
                "--graph",
                "g.sf",
                "--repeats",
                "1",
                "--force",
            ],
            inputs: vec!["emb.npy"],
            outputs: vec![("--plot", "out.svg")],
        },
    ]
}

/// Runs `cmd` with its outputs at their defaults except `flag`, which is at `path`.
fn run_with(f: &Fixture, cmd: &Cmd, flag: &str, path: &str) -> Output {
    let mut args = cmd.args.clone();
    for (fl, default) in &cmd.outputs {
        args.push(fl);
        args.push(if *fl == flag { path } else { default });
    }
    saintflow(&args, f.dir())
}

/// Item 2's acceptance: every output of every command pointed at every input of the same
/// command (a store's file included), and at each other output, even with `--force`: the
/// command is refused with exit 1 and a message naming both, and nothing in the working
/// directory changes.
#[test]
fn issue55_item2_every_output_pointed_at_every_input_and_other_output_is_refused() {
    let f = Fixture::new();
    let before = snapshot(f.dir());
    let mut cases = 0;
    for cmd in commands() {
        for (flag, _) in &cmd.outputs {
            let mut targets: Vec<(&str, &str)> = cmd.inputs.iter().map(|i| ("input", *i)).collect();
            // A store's files: every command here reads g.sf.
            targets.push(("store file", "g.sf/header.sf"));
            for (other, default) in &cmd.outputs {
                if other != flag {
                    targets.push(("other output", default));
                }
            }
            for (what, target) in targets {
                // The other output must exist for the two to be one file before the run:
                // pointing at its default path, which the command has not written yet,
                // is compared by path.
                let o = run_with(&f, &cmd, flag, target);
                let err = stderr(&o);
                let args = cmd.args.join(" ");
                assert_eq!(
                    o.status.code(),
                    Some(1),
                    "saintflow {args} {flag} {target} ({what}): {err}"
                );
                assert!(
                    err.contains(flag) && err.contains(target),
                    "saintflow {args} {flag} {target}: the message names neither: {err}"
                );
                let expected = match what {
                    "input" => "an output never replaces an input",
                    "store file" => "inside the graph store",
                    _ => "two outputs of one command never share a file",
                };
                assert!(err.contains(expected), "{args} {flag} {target}: {err}");
                assert_eq!(
                    snapshot(f.dir()),
                    before,
                    "saintflow {args} {flag} {target} changed the directory"
                );
                cases += 1;
            }
        }
    }
    assert!(cases >= 20, "{cases} cases");
}

/// Item 2: an existing file that is no input is replaced only with `--force`; a symbolic
/// link, a device, a FIFO and a directory are refused even with it, and left as they were.
#[test]
fn issue55_item2_existing_files_links_and_devices_are_left_alone() {
    let f = Fixture::new();
    let d = f.dir();
    std::fs::write(d.join("mine.txt"), b"the user's notes").unwrap();
    std::os::unix::fs::symlink("mine.txt", d.join("link")).unwrap();
    std::os::unix::fs::symlink("/dev/stdout", d.join("stdout-link")).unwrap();
    std::fs::create_dir(d.join("adir")).unwrap();
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let before = snapshot(d);
    for cmd in commands() {
        for (flag, _) in &cmd.outputs {
            // Without --force: the user's file is refused.
            let mut plain = Cmd {
                args: cmd
                    .args
                    .iter()
                    .copied()
                    .filter(|a| *a != "--force")
                    .collect(),
                inputs: cmd.inputs.clone(),
                outputs: cmd.outputs.clone(),
            };
            let o = run_with(&f, &plain, flag, "mine.txt");
            assert_eq!(o.status.code(), Some(1), "{flag} mine.txt: {}", stderr(&o));
            assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
            // With --force, never a file saintflow does not write there, a link, a device,
            // a FIFO or a directory.
            plain.args = cmd.args.clone();
            for (target, kind) in [
                ("mine.txt", "not a file saintflow writes there"),
                ("link", "a symbolic link"),
                ("stdout-link", "a symbolic link"),
                ("/dev/null", "a character device"),
                ("fifo", "a FIFO"),
                ("adir", "a directory"),
            ] {
                if *flag == "--checkpoint" && target == "adir" {
                    // A directory is where `--checkpoint DIR` writes DIR/checkpoint.bin.
                    continue;
                }
                let o = run_with(&f, &plain, flag, target);
                assert_eq!(o.status.code(), Some(1), "{flag} {target}: {}", stderr(&o));
                assert!(stderr(&o).contains(kind), "{flag} {target}: {}", stderr(&o));
            }
            assert_eq!(snapshot(d), before, "{} {flag}", cmd.args.join(" "));
        }
    }
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_symlink()
            || {
                use std::os::unix::fs::FileTypeExt;
                std::fs::metadata("/dev/null")
                    .unwrap()
                    .file_type()
                    .is_char_device()
            }
    );
    // And with --force a file saintflow wrote there (an earlier export, an earlier plot),
    // or an empty one, is replaced.
    std::fs::write(d.join("old.safetensors"), {
        let mut b = std::fs::read(d.join("w.safetensors")).unwrap();
        b.truncate(b.len() - 4);
        b
    })
    .unwrap();
    let o = saintflow(&["export", "run", "-o", "old.safetensors", "--force"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    // Replaced whole (the metadata's key order may differ from one export to the next).
    assert_eq!(
        std::fs::metadata(d.join("old.safetensors")).unwrap().len(),
        std::fs::metadata(d.join("w.safetensors")).unwrap().len()
    );
    std::fs::write(d.join("empty.svg"), b"").unwrap();
    let o = saintflow(&["plot", "run.jsonl", "-o", "empty.svg", "--force"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = saintflow(&["plot", "run.jsonl", "-o", "empty.svg", "--force"], d);
    assert!(
        o.status.success(),
        "a plot replaces its own: {}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(d.join("mine.txt")).unwrap(),
        b"the user's notes"
    );
}

/// Item 2: a fresh run never truncates an existing log; `--resume` continues it and
/// `--force` replaces it.
#[test]
fn issue55_item2_a_fresh_run_does_not_truncate_an_existing_log() {
    let f = Fixture::new();
    let d = f.dir();
    let log = std::fs::read(d.join("run.jsonl")).unwrap();
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "gcn.toml",
            "--graph",
            "g.sf",
            "--threads",
            "1",
            "-q",
            "--log",
            "run.jsonl",
        ];
        args.extend_from_slice(extra);
        saintflow(&args, d)
    };
    // No checkpoint: a fresh run.
    let o = train(&["--epochs", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--log run.jsonl: exists"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(d.join("run.jsonl")).unwrap(), log);
    // --resume with a checkpoint that does not exist is a fresh run too.
    let o = train(&["--epochs", "1", "--checkpoint", "none.ck", "--resume"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(std::fs::read(d.join("run.jsonl")).unwrap(), log);
    // --resume of the run that wrote it continues it.
    let o = train(&["--epochs", "2", "--checkpoint", "run", "--resume"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let after = std::fs::read(d.join("run.jsonl")).unwrap();
    assert!(after.len() > log.len() && after.starts_with(&log[..log.len() / 2]));
    // --force replaces it.
    let o = train(&["--epochs", "1", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A `saintflow` with stdout or stderr on `/dev/full` (every write: ENOSPC).
fn onto_full(args: &[&str], cwd: &Path, stream: &str) -> Output {
    let full = || {
        Stdio::from(
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
    };
    let mut c = Command::new(env!("CARGO_BIN_EXE_saintflow"));
    c.args(args).current_dir(cwd);
    if stream == "stdout" {
        c.stdout(full()).stderr(Stdio::piped());
    } else {
        c.stdout(Stdio::piped()).stderr(full());
    }
    c.output().unwrap()
}

/// Item 4: every command that prints, with stdout on a full device, ends with exit 1 and a
/// message on stderr, never a panic (101); with stderr on a full device, an error ends
/// with exit 1 and a successful command still succeeds.
#[test]
fn issue55_item4_a_full_stdout_or_stderr_is_an_error_not_a_panic() {
    if !Path::new("/dev/full").exists() {
        panic!("this test needs /dev/full (Linux)");
    }
    let f = Fixture::new();
    let d = f.dir();
    let printing: Vec<Vec<&str>> = vec![
        vec!["info", "g.sf"],
        vec!["info", "g.sf", "--json"],
        vec!["check", "g.sf", "-q"],
        vec!["sample", "g.sf", "--count", "2", "-q"],
        vec!["sample", "g.sf", "--count", "2", "--json", "-q"],
        vec!["explain", "gcn.toml", "--graph", "g.sf"],
        vec!["explain", "gcn.toml", "--graph", "g.sf", "--dot"],
        vec!["ops"],
        vec!["ops", "--json"],
        vec![
            "train",
            "gcn.toml",
            "--graph",
            "g.sf",
            "--epochs",
            "1",
            "--threads",
            "1",
            "-q",
        ],
        vec![
            "train",
            "gcn.toml",
            "--graph",
            "g.sf",
            "--epochs",
            "1",
            "--threads",
            "1",
            "-q",
            "--json",
        ],
        vec!["export", "run", "-o", "x.safetensors", "--force"],
        vec![
            "embed",
            "gcn.toml",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run",
            "-o",
            "x.npy",
            "--force",
            "--threads",
            "1",
            "-q",
        ],
        vec!["plot", "run.jsonl", "-o", "x.svg", "--force"],
        vec![
            "partition",
            "g.sf",
            "-k",
            "2",
            "-o",
            "xparts",
            "--force",
            "-q",
        ],
        vec![
            "partition",
            "g.sf",
            "-k",
            "2",
            "-o",
            "xparts",
            "--force",
            "--json",
            "-q",
        ],
        vec![
            "eval-embedding",
            "emb.npy",
            "--graph",
            "g.sf",
            "--repeats",
            "1",
        ],
        vec![
            "eval-embedding",
            "emb.npy",
            "--graph",
            "g.sf",
            "--repeats",
            "1",
            "--json",
        ],
        vec![
            "gen",
            "kronecker",
            "--scale",
            "6",
            "-o",
            "xg.sf",
            "--force",
            "-q",
        ],
        vec![
            "import",
            "edgelist",
            "edges.txt",
            "--symmetrize",
            "-o",
            "xe.sf",
            "--force",
            "-q",
        ],
        vec!["--help"],
        vec!["train", "--help"],
        vec!["--version"],
    ];
    std::fs::write(d.join("edges.txt"), "0 1\n1 2\n2 0\n").unwrap();
    for args in &printing {
        let o = onto_full(args, d, "stdout");
        let err = stderr(&o);
        assert_eq!(
            o.status.code(),
            Some(1),
            "saintflow {} > /dev/full: {:?} {err}",
            args.join(" "),
            o.status
        );
        assert!(
            err.contains("stdout") && err.contains("No space left") && !err.contains("panicked"),
            "saintflow {}: {err}",
            args.join(" ")
        );
        // stderr full: the command's own work is not affected.
        let o = onto_full(args, d, "stderr");
        assert_eq!(
            o.status.code(),
            Some(0),
            "saintflow {} 2> /dev/full",
            args.join(" ")
        );
        assert!(o.status.signal().is_none());
    }
    // Errors with a full stderr: exit 1 (a usage error: 2), never 101.
    for (args, code) in [
        (vec!["info", "no-such.sf"], 1),
        (vec!["export", "run", "-o", "g.sf/header.sf"], 1),
        (
            vec!["train", "gcn.toml", "--graph", "g.sf", "--threads", "0"],
            2,
        ),
        (vec!["no-such-command"], 2),
    ] {
        let o = onto_full(&args, d, "stderr");
        assert_eq!(
            o.status.code(),
            Some(code),
            "saintflow {} 2> /dev/full",
            args.join(" ")
        );
    }
}

/// Item 5: `--threads` is 1 ..= 256 in every command that takes it (0 a usage error
/// everywhere), and the other counts have bounds: usage errors (exit 2) naming the range,
/// before any work.
#[test]
fn issue55_item5_threads_and_counts_are_bounded() {
    let f = Fixture::new();
    let d = f.dir();
    let threaded: Vec<Vec<&str>> = vec![
        vec!["train", "gcn.toml", "--graph", "g.sf"],
        vec![
            "embed",
            "gcn.toml",
            "--graph",
            "g.sf",
            "--checkpoint",
            "run",
            "-o",
            "e.npy",
        ],
        vec!["eval-embedding", "emb.npy", "--graph", "g.sf"],
        vec!["explain", "gcn.toml"],
        vec!["bench", "scale", "--dir", "b", "-o", "bo"],
    ];
    for base in &threaded {
        for t in ["0", "257", "100000", "x"] {
            let mut args = base.clone();
            args.extend_from_slice(&["--threads", t]);
            let o = saintflow(&args, d);
            assert_eq!(
                o.status.code(),
                Some(2),
                "saintflow {}: {}",
                args.join(" "),
                stderr(&o)
            );
            assert!(stderr(&o).contains("--threads"), "{}", stderr(&o));
        }
    }
    let over: Vec<Vec<&str>> = vec![
        vec![
            "train", "gcn.toml", "--graph", "g.sf", "--epochs", "1000001",
        ],
        vec![
            "train",
            "gcn.toml",
            "--graph",
            "g.sf",
            "--steps",
            "1000000000001",
        ],
        vec![
            "train", "gcn.toml", "--graph", "g.sf", "--memory", "16777217",
        ],
        vec![
            "train", "gcn.toml", "--graph", "g.sf", "--buffer", "16777217",
        ],
        vec![
            "embed",
            "gcn.toml",
            "--graph",
            "g.sf",
            "-o",
            "e.npy",
            "--memory",
            "99999999999999",
        ],
        vec![
            "eval-embedding",
            "emb.npy",
            "--graph",
            "g.sf",
            "--repeats",
            "1001",
        ],
        vec!["demo", "--epochs", "1000001"],
        vec![
            "bench", "scale", "--dir", "b", "-o", "bo", "--repeat", "1001",
        ],
    ];
    for args in &over {
        let o = saintflow(args, d);
        assert_eq!(
            o.status.code(),
            Some(2),
            "saintflow {}: {}",
            args.join(" "),
            stderr(&o)
        );
        assert!(stderr(&o).contains("is not in"), "{}", stderr(&o));
    }
    // The bounds themselves are accepted (checked by a run that stops at once after
    // parsing: a missing store).
    for args in [
        vec![
            "train",
            "gcn.toml",
            "--graph",
            "none.sf",
            "--threads",
            "256",
        ],
        vec![
            "train", "gcn.toml", "--graph", "none.sf", "--memory", "16777216",
        ],
    ] {
        let o = saintflow(&args, d);
        assert_eq!(
            o.status.code(),
            Some(1),
            "saintflow {}: {}",
            args.join(" "),
            stderr(&o)
        );
    }
}

/// The guard's store test names the store's marker file by value (it sits below the store
/// layer); it must be the store's.
#[test]
fn issue55_the_guards_store_marker_is_the_stores_header_file() {
    assert_eq!(
        saintflow::atomic::STORE_MARKER,
        saintflow::store::format::HEADER_FILE
    );
}

/// Item 2: `--force` replaces each command's own earlier output (recognised by its first
/// bytes), run twice into the same path; without it the second run is refused and the
/// first output stays byte for byte.
#[test]
fn issue55_item2_force_replaces_the_commands_own_earlier_output() {
    let f = Fixture::new();
    let d = f.dir();
    let runs: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "sample",
                "g.sf",
                "--count",
                "2",
                "-q",
                "--save-norm",
                "n.bin",
            ],
            "n.bin",
        ),
        (
            vec![
                "partition",
                "g.sf",
                "-k",
                "2",
                "-o",
                "p",
                "-q",
                "--metis-out",
                "m.graph",
            ],
            "m.graph",
        ),
        (
            vec!["export", "run", "-o", "x.safetensors"],
            "x.safetensors",
        ),
        (
            vec![
                "embed",
                "gcn.toml",
                "--graph",
                "g.sf",
                "--checkpoint",
                "run",
                "-o",
                "x.npy",
                "--threads",
                "1",
                "-q",
            ],
            "x.npy",
        ),
        (vec!["plot", "run.jsonl", "-o", "x.png"], "x.png"),
        (
            vec![
                "eval-embedding",
                "emb.npy",
                "--graph",
                "g.sf",
                "--repeats",
                "1",
                "--plot",
                "f.svg",
            ],
            "f.svg",
        ),
    ];
    for (args, out) in runs {
        saintflow_ok(&args, d);
        let first = std::fs::read(d.join(out)).unwrap();
        let o = saintflow(&args, d);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}: {}",
            args.join(" "),
            stderr(&o)
        );
        assert!(stderr(&o).contains("pass --force"), "{}", stderr(&o));
        assert_eq!(std::fs::read(d.join(out)).unwrap(), first);
        let mut forced = args.clone();
        forced.push("--force");
        saintflow_ok(&forced, d);
    }
}
