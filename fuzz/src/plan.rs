//! `plan`: plan text → `Plan::parse_with_overrides` → `lower` → `planner::plan`, with the
//! built-in registry and a fixed graph (F = 5, C = 3; single- and multi-label), planned for
//! n = 100 nodes and nnz = 800 entries. No training.
//!
//! Input: the plan's text up to the first NUL byte, then NUL-separated `--set` overrides
//! (at most 4). Not UTF-8: nothing to do (the CLI reads a plan as a `String`).
//!
//! Property: every step returns; a parsed plan renders its errors and its effective text;
//! a lowered plan plans without error (a lowered graph is valid, so a planner error is a
//! planner bug), and its explain text renders.

use saintflow::ir::Bindings;
use saintflow::op::Registry;
use saintflow::plan::{LowerEnv, Plan};
use saintflow::planner::{explain_text, plan as plan_graph, PlanOptions};

/// The fuzz target's body (see the module documentation).
pub fn plan(data: &[u8]) {
    let Some((file, overrides)) = crate::input::plan_text(data) else {
        return;
    };
    let parsed = match Plan::parse_with_overrides(file, "fuzz.toml", &overrides) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.render();
            return;
        }
    };
    let _ = parsed.effective_text();
    let _ = parsed.ops_used();
    let registry = Registry::with_builtins();
    for multilabel in [false, true] {
        let env = LowerEnv {
            n_features: 5,
            n_classes: 3,
            multilabel,
            registry: &registry,
            types: None,
        };
        let mut lowered = match parsed.lower(&env) {
            Ok(l) => l,
            Err(e) => {
                let _ = e.render();
                continue;
            }
        };
        // One thread, as the fuzz processes run (`RAYON_NUM_THREADS=1`).
        let opts = PlanOptions::new(
            Bindings {
                nodes: 100,
                entries: 800,
                pairs: 0,
            },
            std::num::NonZeroUsize::MIN,
        );
        match plan_graph(&mut lowered.graph, &opts) {
            Ok(report) => {
                let _ = explain_text(&lowered.graph, &report);
            }
            Err(e) => panic!("a lowered plan failed to plan: {e}\n--- plan:\n{file}"),
        }
    }
}
