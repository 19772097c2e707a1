//! Validation and test during training: full-graph inference of the run's parameters
//! ([`crate::infer::FullGraph`]) on the graph the run evaluates, node metrics from its
//! labels or, for a link plan, the decoder's figures on the store's link split
//! ([`crate::infer::link`]); the figure that picks the best epoch.

use super::{Result, TrainError, TrainOptions};
use crate::dist::{evaluation, EvalOn, StepSync};
use crate::exec::StepRunner;
use crate::infer::link::{link_metrics, no_split, representations, PairScorer};
use crate::infer::{FullGraph, InferOptions};
use crate::ir::Params;
use crate::metrics::{Counts, Metrics};
use crate::plan::{Decoder, LinkMetric, Lowered};
use crate::store::{GraphStore, Labels, LinkSet, Role};

/// Validation and test metrics: full-graph inference on the graph the run evaluates
/// ([`crate::dist::evaluation`]), with the per-class counts summed over a job's parts where
/// each part evaluates its own.
pub(super) struct Evaluator<'g> {
    graph: FullGraph<'g>,
    /// The store evaluated on.
    on: &'g GraphStore,
    summed: bool,
    /// A link plan's decoder: its sets are scored on the split's pairs.
    decoder: Option<Decoder>,
}

impl<'g> Evaluator<'g> {
    /// None with `no_eval`, and where another part of a job evaluates.
    pub(super) fn new(
        opts: &TrainOptions<'g>,
        lowered: &Lowered,
        threads: std::num::NonZeroUsize,
    ) -> Result<Option<Evaluator<'g>>> {
        if opts.no_eval {
            return Ok(None);
        }
        let (on, summed) = match evaluation(opts.dist.as_ref(), opts.store) {
            EvalOn::Elsewhere => return Ok(None),
            EvalOn::Whole(g) => {
                check_same_schema(g, opts.store)?;
                (g, false)
            }
            EvalOn::Part(g) => (g, true),
        };
        // Evaluated every epoch: what depends on the store alone is computed once.
        let graph = FullGraph::new(on, lowered, threads)?
            .with_options(InferOptions {
                progress: opts.progress,
                ..opts.infer.clone()
            })
            .keep_constants(true);
        let decoder = lowered.link.as_ref().map(|l| l.decoder);
        if decoder.is_some() && summed {
            return Err(TrainError::Run(
                "a link plan trains in one process: distributed link prediction (each part scoring its own pairs) is not built yet".into(),
            ));
        }
        Ok(Some(Evaluator {
            graph,
            on,
            summed,
            decoder,
        }))
    }

    /// The metrics of `role` under `params`; None when the role has no labelled node
    /// (in a job: on no part), without a pass where the store shows it.
    pub(super) fn measure(
        &self,
        sync: &dyn StepSync,
        runner: &dyn StepRunner,
        params: &Params,
        role: Role,
    ) -> Result<Option<Metrics>> {
        if let Some(decoder) = self.decoder {
            let set = match role {
                Role::Val => LinkSet::Val,
                Role::Test => LinkSet::Test,
                other => {
                    return Err(TrainError::Run(format!(
                    "a link plan is evaluated on the split's val and test edges, not on {other:?}"
                )))
                }
            };
            let z = representations(&self.graph, runner, params)?;
            let scorer = PairScorer::over(z.values(), z.cols(), decoder, params)?;
            return Ok(link_metrics(self.on, &scorer, set)?);
        }
        let counts = if self.summed {
            let mut flat = self.graph.counts(runner, params, &[role])?[0].flat();
            sync.sum_counts(&mut flat)?;
            Counts::from_flat(&flat)
        } else if self.on.role_count(role) == 0 {
            return Ok(None);
        } else {
            self.graph.counts(runner, params, &[role])?.swap_remove(0)
        };
        Ok((counts.nodes() > 0).then(|| counts.metrics()))
    }
}

/// The figure that picks the best epoch: a link plan's `[task] metric`, else F1-micro.
pub(super) fn selection(m: &Metrics, lowered: &Lowered) -> f64 {
    match (&lowered.link, &m.link) {
        // The split was checked to give the figure (`link_split_gives`).
        (Some(task), Some(l)) => task.metric.value(l).unwrap_or(f64::NEG_INFINITY),
        _ => m.f1_micro,
    }
}

/// Refuses a best-epoch metric the store's validation set cannot give: MRR or Hits@K
/// without per-positive tails, AUC, AP or pool Hits@K without negative pairs (a given
/// split: `import ogb-link`).
pub(super) fn link_split_gives(store: &GraphStore, metric: LinkMetric) -> Result<()> {
    let split = store.link_split().ok_or_else(|| no_split(store))?;
    let val = split.set(LinkSet::Val);
    let (tails, pairs) = (val.k() > 0, !val.negative_pairs().is_empty());
    let (has, what) = if metric.needs_tails() {
        (tails, "per-positive negatives (tails)")
    } else {
        (pairs, "negative pairs")
    };
    if has {
        return Ok(());
    }
    Err(TrainError::Run(format!(
        "{}: [task] metric = \"{}\" needs the validation set's {what}, and the store's split has none: choose {}",
        store.path().display(),
        metric.name(),
        if tails { "mrr or hits@K" } else { "auc, ap or pool_hits@K" }
    )))
}

/// Refuses an evaluation graph whose features or labels differ in shape from the part's.
fn check_same_schema(full: &GraphStore, part: &GraphStore) -> Result<()> {
    let shape = |s: &GraphStore| {
        (
            s.n_features(),
            s.n_classes(),
            matches!(s.labels(), Labels::Multi { .. }),
        )
    };
    if shape(full) != shape(part) {
        return Err(TrainError::Run(format!(
            "{}: the evaluation graph has F = {}, C = {} ({}), the part {} has F = {}, C = {} ({}): not the graph it was cut from",
            full.path().display(),
            full.n_features(),
            full.n_classes(),
            if shape(full).2 { "multi-label" } else { "single-label" },
            part.path().display(),
            part.n_features(),
            part.n_classes(),
            if shape(part).2 { "multi-label" } else { "single-label" },
        )));
    }
    Ok(())
}
