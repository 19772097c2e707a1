//! Replays every committed fuzz input on stable, under `cargo test`: the seed corpus
//! (`fuzz/corpus/<target>/`) and each crash the fuzzers found (`fuzz/regressions/<target>/`,
//! named after the fix). A regression input that panics again fails its target's test with
//! the file's name. `fuzz/pending/` (crashes whose fix is another branch's) is not replayed.

use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for kind in ["corpus", "regressions"] {
        let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        for e in dir {
            let p = e.expect("directory entry").path();
            if p.is_file() && p.extension().is_none_or(|e| e != "md") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

fn replay(target: &str) {
    let body = saintflow_fuzz::TARGETS
        .iter()
        .find(|t| t.0 == target)
        .expect("a known target")
        .1;
    let files = inputs(target);
    assert!(!files.is_empty(), "no corpus for {target}");
    let mut failed = Vec::new();
    for f in &files {
        let data = std::fs::read(f).expect("input readable");
        if std::panic::catch_unwind(|| body(&data)).is_err() {
            failed.push(f.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs panic:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn plan() {
    replay("plan");
}

#[test]
fn store_step() {
    replay("store_step");
}

#[test]
fn readers() {
    replay("readers");
}

#[test]
fn edgelist() {
    replay("edgelist");
}

#[test]
fn checkpoint() {
    replay("checkpoint");
}

#[test]
fn embedding_plan() {
    replay("embedding_plan");
}

#[test]
fn partition() {
    replay("partition");
}

#[test]
fn every_target_has_a_test_and_a_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let this = std::fs::read_to_string(root.join("tests/replay.rs")).expect("replay.rs");
    for (t, _) in saintflow_fuzz::TARGETS {
        assert!(
            root.join(format!("fuzz_targets/{t}.rs")).is_file(),
            "{t}: binary"
        );
        assert!(
            manifest.contains(&format!("name = \"{t}\"")),
            "{t}: [[bin]]"
        );
        assert!(this.contains(&format!("fn {t}()")), "{t}: replay test");
    }
}

#[test]
fn safetensors() {
    replay("safetensors");
}

#[test]
fn ogb() {
    replay("ogb");
}

#[test]
fn torch_pt() {
    replay("torch_pt");
}
