//! `embedding_plan`: an `[embedding]` plan's text up to the first NUL byte, then
//! NUL-separated `--set` overrides (at most 4) → `EmbeddingPlan::parse_with_overrides`;
//! a plan that types is trained on the base store (64 nodes) for at most 2 epochs on one
//! thread, with 1 MiB of sample pools and 512 MiB of memory for the check, and its
//! embedding published to a `.npy`.
//!
//! Property: parsing returns and renders its errors; a typed plan trains in bounded time
//! and memory or refuses with an error (its width past the memory, say); a finished run's
//! `.npy` is N × dim f32, as the outcome says.

use saintflow::embedding::{train, EmbedOptions};
use saintflow::machine::MemoryLimit;
use saintflow::plan::embedding::EmbeddingPlan;
use saintflow::store::GraphStore;

use crate::base;

/// Memory the check allows a fuzzed plan (the matrices and pools).
pub const MEMORY: u64 = 512 << 20;

/// The fuzz target's body (see the module documentation).
pub fn embedding_plan(data: &[u8]) {
    let Some((file, overrides)) = crate::input::plan_text(data) else {
        return;
    };
    let plan = match EmbeddingPlan::parse_with_overrides(file, "fuzz.toml", "fuzz", &overrides) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.render();
            return;
        }
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let store = GraphStore::open(base::write_store(tmp.path(), "g.sf")).expect("base store");
    let output = tmp.path().join("emb.npy");
    let opts = EmbedOptions {
        seed: 1,
        threads: std::num::NonZeroUsize::new(1),
        memory_bytes: 1 << 20,
        output: Some(output.clone()),
        scratch_dir: tmp.path().to_path_buf(),
        epochs: Some(plan.epochs.min(2.0)),
        memory_limit: MemoryLimit::Bytes(MEMORY),
        ..EmbedOptions::default()
    };
    let outcome = match train(&plan, &store, &opts) {
        Ok(o) => o,
        Err(e) => {
            let _ = e.to_string();
            assert!(
                !output.exists(),
                "a refused run published {}",
                output.display()
            );
            return;
        }
    };
    assert_eq!((outcome.nodes, outcome.dim), (store.n_nodes(), plan.dim));
    let bytes = std::fs::metadata(&output)
        .unwrap_or_else(|e| panic!("a finished run published no embedding: {e}"))
        .len();
    let body = (outcome.nodes * outcome.dim * 4) as u64;
    assert!(
        bytes >= body && bytes <= body + 4096,
        "{bytes} bytes for {} × {}",
        outcome.nodes,
        outcome.dim
    );
}
