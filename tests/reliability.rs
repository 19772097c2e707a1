//! Issue 28: the `train` path's protections around every other command — closed pipes,
//! absurd sizes refused before allocating, imports that refuse what `gen` refuses, late
//! outputs checked early. Each test is named after the issue's item it reproduces.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{saintflow, saintflow_ok, small_store};

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

/// `saintflow args` in `cwd` with the machine's memory set to `limit`, so a test means
/// the same on any machine.
fn with_memory(args: &[&str], cwd: &Path, limit: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(args)
        .current_dir(cwd)
        .env("SAINTFLOW_MEMORY_LIMIT", limit)
        .output()
        .unwrap()
}

/// Item 1: sampler sizes go through the memory check (train: at the plan key's position;
/// `sample`: naming the flag) instead of aborting in the allocator (exit 134) or being
/// killed for memory.
#[test]
fn issue_28_item_1_absurd_sampler_sizes_are_refused_before_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 9, 1);
    let g = g.to_str().unwrap();
    let sage = plan("graphsage.toml");
    let cases: [(&[&str], &str); 5] = [
        (
            &["sampler.depth=1000000000"],
            "override `sampler.depth=1000000000`:1:15: sampler depth = 1000000000: each subgraph draws 3000000003000 nodes before dedup",
        ),
        (&["sampler.roots=4000000000"], "sampler roots = 4000000000: each subgraph draws 12000000000 nodes"),
        (
            &["sampler.kind=edge", "sampler.edges=4000000000"],
            "sampler edges = 4000000000: each subgraph draws 8000000000 nodes",
        ),
        (
            &["sampler.kind=node", "sampler.budget=4000000000"],
            "sampler budget = 4000000000: each subgraph draws 4000000000 nodes",
        ),
        // Overflowing products saturate instead of panicking.
        (
            &["sampler.depth=9223372036854775807", "sampler.roots=3"],
            "sampler depth = 9223372036854775807",
        ),
    ];
    for (sets, want) in cases {
        let mut args = vec!["train", &sage, "--graph", g, "--epochs", "1", "-q"];
        for s in sets {
            args.extend(["--set", s]);
        }
        let o = with_memory(&args, tmp.path(), "4G");
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{sets:?}: {err}");
        assert!(err.contains(want), "{sets:?}: {err}");
        assert!(
            err.contains("this machine has 4.0 GiB (SAINTFLOW_MEMORY_LIMIT=4G)")
                && err.contains("--no-memory-check"),
            "{err}"
        );
    }
    // In the plan file: the position is the value's.
    std::fs::write(
        tmp.path().join("deep.toml"),
        std::fs::read_to_string(&sage)
            .unwrap()
            .replace("depth = 2", "depth = 1000000000"),
    )
    .unwrap();
    let o = with_memory(
        &["train", "deep.toml", "--graph", g, "-q"],
        tmp.path(),
        "4G",
    );
    let (_, err) = text(&o);
    assert!(
        err.contains("deep.toml:10:9: sampler depth = 1000000000"),
        "{err}"
    );

    let o = with_memory(
        &[
            "sample",
            g,
            "--sampler",
            "rw",
            "--roots",
            "4000000000",
            "--count",
            "1",
        ],
        tmp.path(),
        "4G",
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "--roots 4000000000: each subgraph draws 12000000000 nodes before dedup, 44.7 GiB"
        ),
        "{err}"
    );
    let o = with_memory(
        &["sample", g, "--sampler", "node", "--budget", "4000000000"],
        tmp.path(),
        "4G",
    );
    assert!(
        text(&o).1.contains("--budget 4000000000: "),
        "{:?}",
        text(&o)
    );
    let o = with_memory(&["sample", g, "--count", "1000000000000"], tmp.path(), "4G");
    assert!(
        text(&o)
            .1
            .contains("--count 1000000000000: 7.3 TiB of per-subgraph timings"),
        "{:?}",
        text(&o)
    );
    // Ordinary sizes still sample, and the override lets a deliberate try through.
    saintflow_ok(&["sample", g, "--count", "2", "-q"], tmp.path());
}

/// Item 2: `gen`'s counts are estimated (memory and disk) before anything is allocated or
/// written, and refused naming the flag; nothing is left behind; 10⁹ classes are refused
/// by `gen` and by an import whose labels hold such an id.
#[test]
fn issue_28_item_2_gen_counts_are_estimated_and_absurd_ones_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let gen = |extra: &[&str]| {
        let mut args = vec!["gen", "kronecker", "--scale", "10", "-o", "f.sf", "-q"];
        args.extend_from_slice(extra);
        with_memory(&args, tmp.path(), "4G")
    };
    let o = gen(&["--features", "1000000000"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--features 1000000000: generating needs about")
            && err.contains("this machine has 4.0 GiB"),
        "{err}"
    );
    let o = gen(&["--degree", "1000000000000"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--degree 1000000000000 (--scale 10): the store needs about 7.3 PiB of disk"),
        "{err}"
    );
    let o = gen(&["--classes", "1000000000"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--classes expected 1..1000000000 (exclusive), got 1000000000"),
        "{err}"
    );
    let o = gen(&["--classes", "100000000", "--features", "64", "--planted"]);
    assert!(
        text(&o)
            .1
            .contains("--classes 100000000 with --planted: generating needs about"),
        "{:?}",
        text(&o)
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing written: {left:?}");
    // An ordinary spec still generates.
    saintflow_ok(
        &["gen", "kronecker", "--scale", "8", "-o", "ok.sf", "-q"],
        tmp.path(),
    );

    // Import: a label id of 10⁹ in a class map.
    let dir = tmp.path().join("in");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("edges.txt"), "0 1\n1 2\n2 0\n").unwrap();
    std::fs::write(
        dir.join("labels.json"),
        r#"{"0": 1, "1": 1000000000, "2": 0}"#,
    )
    .unwrap();
    let o = saintflow(
        &[
            "import",
            "edgelist",
            dir.join("edges.txt").to_str().unwrap(),
            "--symmetrize",
            "--labels",
            dir.join("labels.json").to_str().unwrap(),
            "-o",
            "e.sf",
            "-q",
        ],
        tmp.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("class id 1000000000 too large, expected < 1000000000"),
        "{err}"
    );
}

/// Item 4: an `[embedding]` plan's matrices and pools are checked against the machine's
/// memory before anything is allocated, naming `embedding.dim`, in `train` and `embed`.
#[test]
fn issue_28_item_4_embedding_memory_is_checked_before_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 9, 1);
    let g = g.to_str().unwrap();
    let dw = plan("deepwalk.toml");
    for args in [
        vec![
            "train",
            &dw,
            "--graph",
            g,
            "--set",
            "embedding.dim=65536",
            "-q",
        ],
        vec![
            "embed",
            &dw,
            "--graph",
            g,
            "--set",
            "embedding.dim=65536",
            "-o",
            "x.npy",
            "-q",
        ],
    ] {
        let o = with_memory(&args, tmp.path(), "256M");
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("embedding.dim = 65536: the vertex and context matrices need 256.0 MiB (2 × 512 × 65536 f32)")
                && err.contains("this machine has 256.0 MiB (SAINTFLOW_MEMORY_LIMIT=256M)")
                && err.contains("--no-memory-check"),
            "{args:?}: {err}"
        );
        assert!(!tmp.path().join("x.npy").exists());
    }
    // `--no-memory-check` is taken by an embedding plan (it was refused as GNN-only).
    let o = with_memory(
        &[
            "embed",
            &dw,
            "--graph",
            g,
            "--epochs",
            "1",
            "--no-memory-check",
            "-o",
            "y.npy",
            "-q",
        ],
        tmp.path(),
        "1M",
    );
    assert!(o.status.success(), "{:?}", text(&o));
}

/// Item 4, the rest: an absurd `--epochs` is told how long it would take as soon as the
/// first pool has measured the rate (and every episode line says what is left).
#[test]
fn issue_28_item_4_an_absurd_run_length_is_estimated_after_the_first_pool() {
    use std::io::{BufRead, BufReader};
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 9, 1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(["embed", &plan("deepwalk.toml"), "--graph"])
        .arg(&g)
        .args(["--epochs", "1000000000", "--memory", "1", "-o", "x.npy"])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let (mut estimate, mut episode) = (None, None);
    while estimate.is_none() || episode.is_none() {
        let Some(Ok(line)) = lines.next() else { break };
        if line.starts_with("estimate: ") {
            estimate = Some(line.clone());
        } else if line.starts_with("episode 1/") {
            episode = Some(line.clone());
        }
        seen.push(line);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let estimate = estimate.unwrap_or_else(|| panic!("no estimate line in {seen:?}"));
    // Hours at least: "34 h 52 min" on a quiet Zen 5, days on a loaded machine.
    let long = |l: &str| {
        l.contains(" days ") || l.contains(" h ") || l.ends_with(" h") || l.contains(" years")
    };
    assert!(
        estimate.contains("samples in") && estimate.contains("at the first pool's rate"),
        "{estimate}"
    );
    let about = estimate.split(" about ").nth(1).unwrap_or("");
    assert!(long(about.split(" (").next().unwrap()), "{estimate}");
    let episode = episode.unwrap_or_else(|| panic!("no episode line in {seen:?}"));
    let left = episode.split("  left ").nth(1).unwrap_or("");
    assert!(long(left), "{episode}");
    assert!(
        !tmp.path().join("x.npy").exists(),
        "a killed run published its output"
    );
}

/// Item 5: `partition -k` beyond the nodes, or beyond the training nodes (parts a rank
/// could not train on), is refused at once, before any part is written.
#[test]
fn issue_28_item_5_partition_k_beyond_the_nodes_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 9, 1);
    let g = g.to_str().unwrap();
    let o = saintflow(&["partition", g, "-k", "600", "-o", "p", "-q"], tmp.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("-k 600: more parts than the store's 512 nodes"),
        "{err}"
    );
    let o = saintflow(&["partition", g, "-k", "512", "-o", "p", "-q"], tmp.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("-k 512: more parts than the store's") && err.contains("training nodes"),
        "{err}"
    );
    assert!(!tmp.path().join("p").exists());
}

/// Item 7: an edge list's `--split` is checked as `gen`'s is, an edge list with no edges
/// is refused rather than made into a 0-node store, and a UTF-8 BOM is not an id.
#[test]
fn issue_28_item_7_edgelist_split_empty_graph_and_bom() {
    let tmp = tempfile::tempdir().unwrap();
    let import = |file: &str, text: &str, extra: &[&str]| {
        let path = tmp.path().join(file);
        std::fs::write(&path, text).unwrap();
        let mut args = vec![
            "import",
            "edgelist",
            path.to_str().unwrap(),
            "--symmetrize",
            "-q",
        ];
        args.extend_from_slice(extra);
        saintflow(&args, tmp.path())
    };
    std::fs::write(
        tmp.path().join("labels.json"),
        r#"{"0": 0, "1": 1, "2": 0, "3": 1}"#,
    )
    .unwrap();
    for bad in ["0.5,0.5,0.5", "-1,1,1", "nan,0.5,0.5"] {
        let split = format!("--split={bad}");
        let o = import(
            "e.txt",
            "0 1\n1 2\n2 3\n",
            &["--labels", "labels.json", &split, "-o", "s.sf"],
        );
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{bad}: {err}");
        assert!(
            err.contains("--split expected three fractions summing to ≤ 1"),
            "{bad}: {err}"
        );
        // The same words as `gen`'s.
        let o = saintflow(
            &["gen", "kronecker", "--scale", "4", &split, "-o", "k.sf"],
            tmp.path(),
        );
        assert!(
            text(&o)
                .1
                .contains("--split expected three fractions summing to ≤ 1"),
            "{:?}",
            text(&o)
        );
    }
    for (name, empty) in [("empty.txt", ""), ("comments.txt", "# nothing\n% here\n\n")] {
        for extra in [&[][..], &["--remap"][..]] {
            let mut args = vec!["-o", "z.sf"];
            args.extend_from_slice(extra);
            let o = import(name, empty, &args);
            let (_, err) = text(&o);
            assert_eq!(o.status.code(), Some(1), "{name}: {err}");
            assert!(err.contains("no edge lines"), "{name}: {err}");
            assert!(!tmp.path().join("z.sf").exists());
        }
    }
    // A BOM before the first id: numeric ids read, and --remap makes no phantom node.
    std::fs::write(tmp.path().join("bom.txt"), "\u{feff}0 1\n1 2\n").unwrap();
    for (out, extra) in [("b.sf", None), ("r.sf", Some("--remap"))] {
        let mut args = vec![
            "import",
            "edgelist",
            "bom.txt",
            "--symmetrize",
            "-o",
            out,
            "-q",
        ];
        args.extend(extra);
        saintflow_ok(&args, tmp.path());
    }
    for store in ["b.sf", "r.sf"] {
        let o = saintflow_ok(&["info", store, "--json"], tmp.path());
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["nodes"], 3, "{store}");
    }
    let ids = std::fs::read_to_string(tmp.path().join("r.sf/ids.tsv")).unwrap();
    assert!(!ids.contains('\u{feff}'), "{ids:?}");
}

/// Item 11: a `--plot` that cannot be written is refused before training (not after the
/// run, throwing it away); a plot that fails late still comes after the run's result.
#[test]
fn issue_28_item_11_plot_checked_before_training_and_result_printed_first() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 9, 1);
    let g = g.to_str().unwrap();
    let gcn = plan("gcn.toml");
    for bad in ["/proc/x.png", "curves.pdf"] {
        let o = saintflow(
            &[
                "train", &gcn, "--graph", g, "--epochs", "1", "--plot", bad, "--log", "l.jsonl",
                "-q",
            ],
            tmp.path(),
        );
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains(bad.trim_start_matches('/')), "{bad}: {err}");
        assert!(out.is_empty(), "{bad}: nothing trained: {out}");
        let log = std::fs::read_to_string(tmp.path().join("l.jsonl")).unwrap_or_default();
        assert!(
            !log.contains("\"kind\":\"step\""),
            "{bad}: no step ran: {log}"
        );
    }
    // A directory that holds the plot's name is refused before training too (issue 55,
    // item 2: an output is never anything but a regular file), and left as it was.
    std::fs::create_dir_all(tmp.path().join("late.svg/inside")).unwrap();
    let o = saintflow(
        &[
            "train", &gcn, "--graph", g, "--epochs", "1", "--plot", "late.svg", "-q",
        ],
        tmp.path(),
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(out.is_empty(), "nothing trained: {out}");
    assert!(
        err.contains("late.svg") && err.contains("a directory"),
        "{err}"
    );
    assert!(tmp.path().join("late.svg/inside").is_dir());
}

/// Item 6: `embed` and `train` of an `[embedding]` plan, `sample`, `partition` and
/// `eval-embedding` check the store the way `train` does (a small store in full) and
/// refuse a damaged one; `--no-verify` skips the check.
#[test]
fn issue_28_item_6_every_store_reader_refuses_a_damaged_store() {
    let tmp = tempfile::tempdir().unwrap();
    let good = small_store(tmp.path(), "g.sf", 9, 1);
    let bad = tmp.path().join("bad.sf");
    common::copy_store(&good, &bad);
    // A page of zeros in the middle of the adjacency, as `dd … conv=notrunc` makes it.
    common::poke(&bad.join("full.indices.u32"), 4096, &[0u8; 4096]);
    let g = good.to_str().unwrap();
    let b = bad.to_str().unwrap();
    let dw = plan("deepwalk.toml");
    saintflow_ok(
        &[
            "embed", &dw, "--graph", g, "--epochs", "1", "-o", "e.npy", "-q",
        ],
        tmp.path(),
    );
    let cases: Vec<Vec<&str>> = vec![
        vec![
            "embed", &dw, "--graph", b, "--epochs", "1", "-o", "x.npy", "-q",
        ],
        vec!["train", &dw, "--graph", b, "--epochs", "1", "-q"],
        vec!["sample", b, "--count", "2", "-q"],
        vec!["partition", b, "-k", "2", "-o", "parts", "-q"],
        vec!["eval-embedding", "e.npy", "--graph", b, "--repeats", "1"],
    ];
    for args in &cases {
        let o = saintflow(args, tmp.path());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("full.indices"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!tmp.path().join("x.npy").exists() && !tmp.path().join("parts").exists());
    // `--no-verify` is the same switch as train's: the full check is skipped.
    let o = saintflow(
        &["sample", b, "--count", "2", "-q", "--no-verify"],
        tmp.path(),
    );
    assert!(!text(&o).1.contains("panicked"), "{:?}", text(&o));
}

/// Item 9: an embedding with nothing in it (width 0, or every value 0) is refused by
/// `eval-embedding` with the file's name, not scored.
#[test]
fn issue_28_item_9_empty_and_all_zero_embeddings_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 8, 1);
    let g = g.to_str().unwrap();
    let n = 256u64;
    common::write_npy_f32(&tmp.path().join("w0.npy"), n, 0, &[]);
    common::write_npy_f32(&tmp.path().join("z.npy"), n, 4, &vec![0.0; n as usize * 4]);
    for (file, want) in [("w0.npy", "width 0"), ("z.npy", "every value is 0")] {
        let o = saintflow(
            &["eval-embedding", file, "--graph", g, "--repeats", "1"],
            tmp.path(),
        );
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{file}: {out} {err}");
        assert!(err.contains(file) && err.contains(want), "{file}: {err}");
        assert!(!out.contains("Micro-F1"), "{file}: scored anyway: {out}");
    }
}

/// Item 12: a checkpoint is never written into a store, and `gen --force` does not delete
/// a file of the user's kept inside the store it replaces.
#[test]
fn issue_28_item_12_checkpoints_and_force_leave_the_users_files_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 8, 1);
    let gs = g.to_str().unwrap();
    let before: Vec<_> = std::fs::read_dir(&g)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let o = saintflow(
        &[
            "train",
            &plan("gcn.toml"),
            "--graph",
            gs,
            "--epochs",
            "1",
            "--checkpoint",
            gs,
            "-q",
        ],
        tmp.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // Issue 55, item 2: refused by the output guard, before anything is written.
    assert!(
        err.contains("--checkpoint") && err.contains("is inside the graph store"),
        "{err}"
    );
    let after: Vec<_> = std::fs::read_dir(&g)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        before.len(),
        after.len(),
        "the store gained a file: {after:?}"
    );
    // A note of the user's inside the store: --force refuses to delete it, naming it.
    let gen_force = || {
        saintflow(
            &[
                "gen",
                "kronecker",
                "--scale",
                "8",
                "--features",
                "4",
                "--classes",
                "2",
                "-o",
                gs,
                "--force",
                "-q",
            ],
            tmp.path(),
        )
    };
    std::fs::write(g.join("notes.txt"), "mine").unwrap();
    let o = gen_force();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("notes.txt") && err.contains("--force would delete"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(g.join("notes.txt")).unwrap(),
        "mine"
    );
    // Without it, --force replaces the store as before.
    std::fs::remove_file(g.join("notes.txt")).unwrap();
    let o = gen_force();
    assert!(o.status.success(), "{:?}", text(&o));
}

/// Issue 55, item 2: the store writers (`gen`, `import`) take the same output guard as the
/// file writers: no store is written inside another store (a later `--force` on the outer
/// store would delete it), and an import's output is never one of its inputs.
#[test]
fn issue55_store_outputs_never_land_inside_a_store_or_on_an_input() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 8, 1);
    let inner = g.join("inner.sf");
    let o = saintflow(
        &[
            "gen",
            "kronecker",
            "--scale",
            "6",
            "-o",
            inner.to_str().unwrap(),
            "-q",
        ],
        tmp.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is inside the graph store"), "{err}");
    assert!(!inner.exists(), "a store was written inside g.sf");
    let edges = tmp.path().join("edges.txt");
    std::fs::write(&edges, "0 1\n1 0\n").unwrap();
    for out in [inner.to_str().unwrap(), edges.to_str().unwrap()] {
        let o = saintflow(
            &[
                "import",
                "edgelist",
                edges.to_str().unwrap(),
                "-o",
                out,
                "--force",
                "-q",
            ],
            tmp.path(),
        );
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{out}: {err}");
        assert!(
            err.contains("is inside the graph store") || err.contains("this command reads"),
            "{out}: {err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&edges).unwrap(), "0 1\n1 0\n");
    assert!(!inner.exists());
}

/// Item 10: two runs sharing a checkpoint or a log: the second is refused before it reads
/// or truncates anything, naming the first's PID; the first's files are untouched.
#[test]
fn issue_28_item_10_a_second_writer_of_a_checkpoint_or_log_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 8, 1);
    let gs = g.to_str().unwrap();
    let gcn = plan("gcn.toml");
    let first = [
        "train",
        &gcn,
        "--graph",
        gs,
        "--epochs",
        "2",
        "--checkpoint",
        "run/",
        "--log",
        "l.jsonl",
        "-q",
    ];
    saintflow_ok(&first, tmp.path());
    // A run that ended leaves no claim file beside its outputs.
    for lock in [".l.jsonl.lock", "run/.checkpoint.bin.lock"] {
        assert!(!tmp.path().join(lock).exists(), "{lock} left behind");
    }
    let log_before = std::fs::read(tmp.path().join("l.jsonl")).unwrap();
    let ck_before = std::fs::read(tmp.path().join("run/checkpoint.bin")).unwrap();
    // The same run continued (the checkpoint exists; item 12 refuses a fresh run over it).
    let mut again = first.to_vec();
    again.push("--resume");
    // This process holds the claims, as a run in progress would.
    for (held, flag) in [("run/checkpoint.bin", "--checkpoint"), ("l.jsonl", "--log")] {
        let lock = saintflow::atomic::claim_output(&tmp.path().join(held))
            .unwrap()
            .expect("free");
        let o = saintflow(&again, tmp.path());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{held}: {err}");
        let pid = format!("PID {}", std::process::id());
        assert!(
            err.contains(held)
                && err.contains("another run is writing it")
                && err.contains(&pid)
                && err.contains(flag),
            "{held}: {err}"
        );
        drop(lock);
    }
    assert_eq!(
        std::fs::read(tmp.path().join("l.jsonl")).unwrap(),
        log_before
    );
    assert_eq!(
        std::fs::read(tmp.path().join("run/checkpoint.bin")).unwrap(),
        ck_before
    );
    // Released, the run continues.
    saintflow_ok(&again, tmp.path());
    // Item 12: a fresh run over the finished one is refused, naming what is there, and
    // `--force` starts afresh.
    let o = saintflow(&first, tmp.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("checkpoint.bin")
            && err.contains("a run's checkpoint (epoch 2")
            && err.contains("--resume")
            && err.contains("--force"),
        "{err}"
    );
    let mut forced = first.to_vec();
    forced.push("--force");
    saintflow_ok(&forced, tmp.path());
}

/// The messages: an `[embedding]` plan given to a GNN-only command is named for what it is;
/// a flag of another sampler is refused (exit 2), not ignored.
#[test]
fn issue_28_messages_embedding_plans_and_foreign_sampler_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let g = small_store(tmp.path(), "g.sf", 8, 1);
    let gs = g.to_str().unwrap();
    let dw = plan("deepwalk.toml");
    for args in [
        vec!["explain", dw.as_str(), "--features", "10"],
        vec![
            "partition",
            gs,
            "-k",
            "2",
            "-o",
            "parts",
            "--plan",
            dw.as_str(),
            "-q",
        ],
    ] {
        let o = saintflow(&args, tmp.path());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("is an [embedding] plan")
                && err.contains("saintflow embed")
                && !err.contains("unknown key"),
            "{args:?}: {err}"
        );
    }
    let o = saintflow(
        &["sample", gs, "--sampler", "frontier", "--roots", "5", "-q"],
        tmp.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--roots belongs to the rw and typed_rw samplers")
            && err.contains("--frontier"),
        "{err}"
    );
    // The sampler's own flags still pass.
    saintflow_ok(
        &[
            "sample",
            gs,
            "--sampler",
            "rw",
            "--roots",
            "5",
            "--count",
            "1",
            "-q",
        ],
        tmp.path(),
    );
}

/// Issue 28, item 10 (the rest): two writers of one store. The second is refused while the
/// first writes (naming its PID) and nothing of either is damaged; a destination made by
/// someone else while a writer ran is not replaced at publication; a finished writer leaves
/// nothing beside its output.
#[test]
fn issue_28_item_10_one_writer_per_store_and_exists_checked_at_publication() {
    use saintflow::atomic::AtomicDir;
    use saintflow::store::writer::StoreWriter;
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("g.sf");
    let first = StoreWriter::create(&dest, false).unwrap();
    let e = StoreWriter::create(&dest, false).err().unwrap().to_string();
    let pid = std::process::id();
    assert!(
        e.contains("g.sf") && e.contains(&format!("another writer (PID {pid}) is writing it now")),
        "{e}"
    );
    drop(first);
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");

    // Made by another program while this writer ran: refused at publication, kept.
    let dir = AtomicDir::create(&dest, false).unwrap();
    std::fs::write(dir.path().join("x"), b"new").unwrap();
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("mine"), b"user's").unwrap();
    let e = format!("{}", saintflow::StoreError::from(dir.commit().unwrap_err()));
    assert!(e.contains("appeared while this run wrote it"), "{e}");
    assert_eq!(std::fs::read(dest.join("mine")).unwrap(), b"user's");
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["g.sf"]);

    // Two `gen` runs to one output at once: one writes, the other is refused (or, if it
    // started after the first published, refused as existing); one store, and it checks.
    let out = tmp.path().join("k.sf");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_saintflow"))
            .args(["gen", "kronecker", "--scale", "14", "-o"])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (run(), run());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let ok = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "{:?}", outs.iter().map(text).collect::<Vec<_>>());
    let refused = outs.iter().find(|o| !o.status.success()).unwrap();
    let (_, err) = text(refused);
    assert!(
        err.contains("is writing it now") || err.contains("already exists"),
        "{err}"
    );
    saintflow_ok(&["check", out.to_str().unwrap()], tmp.path());
}
