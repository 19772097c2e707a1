//! Fuzz targets of saintflow, one body per target, shared by the libFuzzer binaries
//! (`fuzz_targets/*.rs`, `cargo +nightly fuzz run --features libfuzzer TARGET`) and the
//! stable replay test (`tests/replay.rs`), which runs every committed corpus and
//! regression input under `cargo test`. The property every body checks is the crate's
//! rule for untrusted input: an error, never a panic, an abort, unbounded memory or a hang;
//! where an operation succeeds, the body also checks what success promises (an imported
//! store passes `open_verified`, a parsed plan lowers and plans or says why).
//!
//! Each execution works in its own temporary directory, removed when it returns, so a long
//! run does not fill the disk. The valid inputs the bodies start from (the base store, the
//! fixed plans) are built once per process and held in memory.
#![warn(missing_docs)]

mod base;
mod checkpoint;
mod edgelist;
mod embedding_plan;
mod input;
mod ogb;
mod partition;
mod plan;
mod readers;
mod safetensors;
pub mod seeds;
mod store_step;
mod torch_pt;

pub use checkpoint::checkpoint;
pub use edgelist::edgelist;
pub use embedding_plan::embedding_plan;
pub use ogb::ogb;
pub use partition::partition;
pub use plan::plan;
pub use readers::readers;
pub use safetensors::safetensors;
pub use store_step::store_step;
pub use torch_pt::torch_pt;

/// A target's body: one execution on one input.
pub type Body = fn(&[u8]);

/// Every target by name, as `fuzz/corpus/<name>/` and `fuzz/regressions/<name>/` name them.
pub const TARGETS: &[(&str, Body)] = &[
    ("plan", plan),
    ("store_step", store_step),
    ("readers", readers),
    ("edgelist", edgelist),
    ("checkpoint", checkpoint),
    ("embedding_plan", embedding_plan),
    ("partition", partition),
    ("safetensors", safetensors),
    ("ogb", ogb),
    ("torch_pt", torch_pt),
];
