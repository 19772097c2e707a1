//! The README's shell examples run as written (issue 15): every line of every ```sh block of
//! README.md, in order, through `sh -c` in one working directory laid out like a checkout
//! (`plans/`, `examples/`, `tests/data/` and `../shared/data/cora` beside it), with the built `saintflow`
//! first on `PATH`, so files written by one block (k20.sf, cora.sf, run/, the logs) are
//! read by the later ones exactly as a user following the README would. Each must exit 0.
//!
//! What is changed is listed below, each change with its reason, and each must apply (a
//! README edit that makes one stale fails the test): graph sizes, epochs and `bench scale`
//! grids cut so the test takes seconds, not hours. Six commands are skipped by name:
//! `scripts/test.sh` (this very suite), the custom-op binary's `cargo run` (which
//! `examples/custom_op/tests/train.rs` runs as its own binary), the MPI build and its
//! `mpirun` (tests/mpi.rs, in `.ci/run`), the embedding peers' script (PyPI, minutes) and
//! `memcap` (a workplace tool). Other Markdown files: docs/ (but docs/bench/)
//! and plans/README.md have no shell blocks; python/README.md's one line is
//! `pip install ./python`, which `scripts/test-python.sh` runs (PyPI, minutes: not here);
//! docs/bench/'s are the measurements themselves (minutes to hours each, on scale-20..25
//! graphs), whose headline figures BENCHMARKS.md names a script for; neither is run here.
//!
//! Without `../shared/data/cora` beside the checkout, a small GraphSAINT-format stand-in
//! takes its place (and says so), so the other blocks still run.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// (why, README text, what runs instead). Each must occur in the README.
const SUBSTITUTIONS: &[(&str, &str, &str)] = &[
    (
        "`cargo run --release --` is the `saintflow` binary (the package's default-run)",
        "cargo run --release -- ",
        "saintflow ",
    ),
    (
        "k20.sf at scale 14 (16 Ki nodes, above the samplers' 8000-node budget), not 20",
        "--scale 20 ",
        "--scale 14 ",
    ),
    (
        "GraphSAGE on k20.sf (train and --resume alike): 2 epochs, not the plan's 50",
        "--threads 2",
        "--threads 2 --epochs 2",
    ),
    (
        "GCN on Cora (both seeds): 30 epochs, not the plan's 200",
        "--graph cora.sf --seed",
        "--graph cora.sf --epochs 30 --seed",
    ),
    (
        "bench scale: its stores in the working directory, not /work/scale",
        "--dir /work/scale",
        "--dir scale",
    ),
    (
        "bench scale (first example): one tiny graph per axis, a tiny plan, 3 steps",
        "--steps 200 -o bench-scale",
        "--steps 3 --warmup 1 --scales 8 --degrees 4 --degree-scale 8 --threads 1 \
         --set sampler.frontier=20 --set sampler.budget=120 --set dims.hidden=8 -o bench-scale",
    ),
    (
        "bench scale (second example): scales 8 and 9 instead of 20 and 25, a tiny plan",
        "--scales 20,25 --degrees 16",
        "--scales 8,9 --degrees 4 --degree-scale 8 --steps 3 --warmup 1 --threads 1 \
         --set sampler.frontier=20 --set sampler.budget=120 --set dims.hidden=8",
    ),
    (
        "the embedding section's BlogCatalog lines read Cora (only Cora stands beside the \
         test's checkout); its DeepWalk run gets 2 epochs by the --threads substitution above",
        "../shared/data/blogcatalog",
        "../shared/data/cora",
    ),
    (
        "the BlogCatalog evaluation: 2 shuffles, not 40",
        "--repeats 40",
        "--repeats 2",
    ),
    (
        "the link split: 100 negatives per positive, not 1000 (the 400-node stand-in for \
         Cora has fewer non-neighbours than 1000 per node; a faster test either way)",
        "--negatives 1000",
        "--negatives 100",
    ),
    (
        "the embedding section's Kronecker graph at scale 10, not 22",
        "--scale 22 ",
        "--scale 10 ",
    ),
];

/// (the start of a command, why it is not run). Each must occur in the README.
const SKIPPED: &[(&str, &str)] = &[
    (
        "scripts/test.sh",
        "the test suite itself (it would run this test again)",
    ),
    (
        "cargo run --release -p saintflow-example-custom-op",
        "examples/custom_op/tests/train.rs runs that binary on a small graph",
    ),
    (
        "cargo build --release --features mpi",
        "the MPI build needs OpenMPI and libclang; .ci/run installs them and builds it",
    ),
    (
        "EPOCHS=",
        "scripts/embedding_vs_peers.sh installs gensim and pecanpy from PyPI into a venv and \
         runs minutes; a measurement for BENCHMARKS.md, run by hand",
    ),
    (
        "../shared/tools/memcap",
        "memcap is a workplace tool (a cgroup, as root), not beside the test's checkout",
    ),
    (
        "mpirun ",
        "needs the MPI build; tests/mpi.rs runs `mpirun -np P saintflow train --partitions` in .ci/run",
    ),
];

/// The commands of the ```sh blocks of `md`: (line number, command), lines ending in `\`
/// joined with the next.
fn sh_commands(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in md.lines().enumerate() {
        let t = line.trim();
        if !in_sh {
            in_sh = t == "```sh";
            continue;
        }
        if t.starts_with("```") {
            assert!(pending.is_none(), "README.md:{}: block ends in `\\`", i + 1);
            in_sh = false;
            continue;
        }
        let (start, mut text) = pending.take().unwrap_or((i + 1, String::new()));
        match line.trim_end().strip_suffix('\\') {
            Some(head) => {
                text.push_str(head);
                pending = Some((start, text));
            }
            None => {
                text.push_str(line);
                if !text.trim().is_empty() && !text.trim_start().starts_with('#') {
                    out.push((start, text.trim().to_string()));
                }
            }
        }
    }
    assert!(!in_sh, "README.md: a ```sh block is not closed");
    out
}

#[test]
fn the_block_parser_joins_continuations_and_skips_other_blocks() {
    let md =
        "x\n```sh\na b \\\n    c   # note\n\n# comment\nd\n```\n```rust\nno\n```\n```sh\ne\n```\n";
    assert_eq!(
        sh_commands(md),
        vec![
            (3, "a b     c   # note".to_string()),
            (7, "d".to_string()),
            (13, "e".to_string())
        ]
    );
}

/// Issue 54, item 5: the README in the order a user needs it, set-up first and the
/// repository last, with the shipped plans and the three-command recipe in the training
/// section, before sampling and import.
#[test]
fn readme_sections_come_in_the_order_a_user_needs_them() {
    let md =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let order = [
        "## Set-up: two commands",
        "## Training",
        "### The shipped plans",
        "<!-- plans: begin -->",
        "### Your own data in three commands",
        "saintflow import edgelist examples/own_data/edges.txt",
        "### Plan files and `explain`",
        "## Sampling and import",
        "## As a library",
        "## Node embedding",
        "## Distributed training",
        "## From Python",
        "## Repository",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|h| {
            md.find(h)
                .unwrap_or_else(|| panic!("README.md lacks {h:?}"))
        })
        .collect();
    for (w, pair) in at.windows(2).enumerate() {
        assert!(
            pair[0] < pair[1],
            "README.md: {:?} should come before {:?}",
            order[w],
            order[w + 1]
        );
    }
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) {
    std::os::unix::fs::symlink(target, at).unwrap();
}

/// Makes `tmp/repo` (the working directory) with the checkout's `plans/`, `examples/` and
/// `tests/data/`, and `tmp/shared/data/cora` beside it: the real dataset or a stand-in.
fn layout(tmp: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = tmp.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for d in ["plans", "examples"] {
        link(&root.join(d), &repo.join(d));
    }
    // The OGB link fixtures the import example reads (tests/data/ogbl/).
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    link(&root.join("tests/data"), &repo.join("tests/data"));
    let data = tmp.join("shared/data");
    std::fs::create_dir_all(&data).unwrap();
    match common::shared_dataset("cora") {
        Some(cora) => link(&cora, &data.join("cora")),
        None => {
            eprintln!("../shared/data/cora is absent: the README's Cora lines read a stand-in");
            common::graphsaint_dir(&data.join("cora"), 400);
        }
    }
    repo
}

#[cfg(unix)]
#[test]
fn readme_shell_examples_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let md = std::fs::read_to_string(root.join("README.md")).unwrap();
    let commands = sh_commands(&md);
    assert!(commands.len() > 20, "{} commands found", commands.len());
    let tmp = tempfile::tempdir().unwrap();
    let repo = layout(tmp.path());
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_saintflow")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut applied = vec![0usize; SUBSTITUTIONS.len()];
    let mut skipped = vec![0usize; SKIPPED.len()];
    let mut ran = 0;
    let t0 = Instant::now();
    for (line, text) in &commands {
        if let Some(k) = SKIPPED.iter().position(|(s, _)| text.starts_with(s)) {
            eprintln!("README.md:{line}: skipped ({}): {text}", SKIPPED[k].1);
            skipped[k] += 1;
            continue;
        }
        let mut cmd = text.clone();
        for (k, (_, from, to)) in SUBSTITUTIONS.iter().enumerate() {
            if cmd.contains(from) {
                cmd = cmd.replace(from, to);
                applied[k] += 1;
            }
        }
        assert!(
            cmd.starts_with("saintflow ") || cmd.starts_with("printf "),
            "README.md:{line}: a command this test does not know how to run: {cmd}"
        );
        let t = Instant::now();
        let o = Command::new("sh")
            .args(["-c", &cmd])
            .current_dir(&repo)
            .env("PATH", &path)
            .output()
            .unwrap();
        eprintln!("README.md:{line}: {:.1}s: {cmd}", t.elapsed().as_secs_f64());
        assert!(
            o.status.success(),
            "README.md:{line}: `{cmd}` failed ({}):\nstdout:\n{}\nstderr:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        ran += 1;
    }
    eprintln!(
        "{ran} README commands in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    for (k, n) in applied.iter().enumerate() {
        assert!(
            *n > 0,
            "substitution {:?} → {:?} ({}) no longer applies to README.md",
            SUBSTITUTIONS[k].1,
            SUBSTITUTIONS[k].2,
            SUBSTITUTIONS[k].0
        );
    }
    for (k, n) in skipped.iter().enumerate() {
        assert!(
            *n > 0,
            "skipped command {:?} is no longer in README.md",
            SKIPPED[k].0
        );
    }
    // What the blocks promise to leave behind, read by later ones.
    for f in [
        "target/demo.sf",
        "my_gcn.toml",
        "own.sf",
        "own/checkpoint.bin",
        "own-predictions.npy",
        "k20.sf",
        "cora.sf",
        "g.sf",
        "k20.norm",
        "cora/checkpoint.bin",
        "run/checkpoint.bin",
        "run/log.jsonl",
        "gcn-seed1.jsonl",
        "gcn-seed2.png",
        "emb.npy",
        "fig2.svg",
        "graphsage.png",
        "gcn.dot",
        "bench-scale/scale.md",
        "k20-vs-k25/scale.md",
    ] {
        assert!(repo.join(f).exists(), "{f} was not written");
    }
}
