//! Link prediction over a store's link split (issue 52): the classic neighbourhood
//! heuristics ([`heuristics`]) and the evaluation of any pair scorer against the split's
//! fixed negatives ([`eval`]), what `saintflow eval-link` runs. The split itself (sections,
//! views, `split-edges`) is the store's: `crate::store::link`.
//!
//! Beside `sample` in the layering: over `store` and the leaves (`metrics`), so training
//! may score its decoder here later.

pub mod eval;
pub mod heuristics;

pub use eval::{evaluate, LinkScores, ScorePairs};
pub use heuristics::Heuristic;
