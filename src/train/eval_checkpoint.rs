//! A checkpoint evaluated again (`saintflow eval`, issue 54 item 8): the parameters the
//! run tested (its best-validation ones, or with `last` the last epoch's) through the same
//! full-graph pass ([`crate::infer::FullGraph`]) and the same counting as training's
//! validation and test, so the figures are the run's, bit for bit; optionally every
//! node's predicted class written as `.npy` on the way (one pass for all three).

use std::path::{Path, PathBuf};

use super::checkpoint::{checkpoint_file, load_params, Checkpoint};
use super::export::Which;
use super::{Result, TrainError};
use crate::exec::StepRunner;
use crate::infer::link::{link_metrics, no_split, representations, PairScorer};
use crate::infer::metrics::add_node;
use crate::infer::{FullGraph, InferOptions, Output};
use crate::ir::{Params, Tensor};
use crate::metrics::{argmax, Counts, Metrics};
use crate::op::Registry;
use crate::plan::Plan;
use crate::store::{GraphStore, Labels, LinkSet, Role};

/// What [`evaluate_checkpoint`] reads and writes.
pub struct EvalCheckpoint<'a> {
    /// The plan the checkpoint was trained with (with the run's overrides).
    pub plan: &'a Plan,
    /// How errors name the plan (its file, or the shipped name).
    pub plan_label: String,
    /// The store to evaluate on (the run's, or another of the same header).
    pub store: &'a GraphStore,
    /// The checkpoint file, or the directory given to `train --checkpoint`.
    pub checkpoint: PathBuf,
    /// The last epoch's parameters instead of the best-validation ones.
    pub last: bool,
    /// Blocked evaluation's memory, buffer and scratch directory.
    pub infer: InferOptions,
    /// Where to write every node's prediction (`.npy`), if anywhere.
    pub predictions: Option<PathBuf>,
}

/// The figures of a checkpoint (None where the store has no labelled node of the role).
#[derive(Clone, Debug)]
pub struct CheckpointEval {
    /// The checkpoint file read.
    pub checkpoint: PathBuf,
    /// The epoch of the parameters evaluated.
    pub epoch: usize,
    /// `best` (the best-validation parameters, those the run tested) or `last`.
    pub which: &'static str,
    /// The validation metrics.
    pub val: Option<Metrics>,
    /// The test metrics.
    pub test: Option<Metrics>,
    /// The shape of the predictions written (`[N]` single-label, `[N, C]` multi-label).
    pub predictions: Option<Vec<usize>>,
}

/// Evaluates `e.checkpoint` (of `e.plan`, on a store like `e.store`) with `registry`'s ops
/// through `runner`: the validation and test figures of the run's kept parameters, as
/// training measured them.
pub fn evaluate_checkpoint(
    e: &EvalCheckpoint<'_>,
    registry: &Registry,
    runner: &dyn StepRunner,
) -> Result<CheckpointEval> {
    let path = checkpoint_file(&e.checkpoint);
    let ck = Checkpoint::load(&path)?;
    let hash = crate::compile::plan_hash(e.plan);
    if ck.plan_hash != hash {
        return Err(TrainError::Checkpoint {
            path,
            what: format!(
                "written for another plan (plan hash {:016x}, {} with these overrides hashes to {hash:016x}): pass the plan and the --set overrides the run was trained with",
                ck.plan_hash, e.plan_label
            ),
        });
    }
    ck.check_graph(&path, e.store)?;
    let which = if e.last { Which::Last } else { Which::Best };
    let (saved, epoch, which) = which.pick(&ck);
    let params = load_params(saved);
    let lowered = crate::compile::lower_for(e.plan, e.store, registry)?;
    if let Some((limit, source)) = e.infer.memory_limit.resolve() {
        let est = crate::compile::memory::estimate(&lowered, None, e.store, &[])?;
        crate::compile::memory::check(e.plan, &lowered, &est, limit, &source)?;
    }
    let threads =
        std::num::NonZeroUsize::new(runner.threads()).unwrap_or(std::num::NonZeroUsize::MIN);
    let graph = FullGraph::new(e.store, &lowered, threads)?.with_options(e.infer.clone());
    let (val, test, predictions) = match lowered.link.as_ref().map(|l| l.decoder) {
        Some(decoder) => {
            if let Some(p) = &e.predictions {
                return Err(TrainError::Run(format!(
                    "{}: a link plan predicts pairs, not node classes: `saintflow embed` writes its node representations, `saintflow eval-link` scores them",
                    p.display()
                )));
            }
            if e.store.link_split().is_none() {
                return Err(no_split(e.store).into());
            }
            let z = representations(&graph, runner, &params)?;
            let scorer = PairScorer::over(z.values(), z.cols(), decoder, &params)?;
            let val = link_metrics(e.store, &scorer, LinkSet::Val)?;
            let test = link_metrics(e.store, &scorer, LinkSet::Test)?;
            (val, test, None)
        }
        None => node_figures(e.store, &graph, runner, &params, e.predictions.as_deref())?,
    };
    Ok(CheckpointEval {
        checkpoint: path,
        epoch,
        which,
        val,
        test,
        predictions,
    })
}

/// Validation metrics, test metrics, the shape of the predictions written.
type Figures = (Option<Metrics>, Option<Metrics>, Option<Vec<usize>>);

/// The validation and test metrics of a node plan (as training's evaluator counts them:
/// None for a role without labelled nodes), and the predictions written to `out`.
fn node_figures(
    store: &GraphStore,
    graph: &FullGraph<'_>,
    runner: &dyn StepRunner,
    params: &Params,
    out: Option<&Path>,
) -> Result<Figures> {
    let classes = graph.width(Output::Logits);
    let labels = store.labels();
    let multi = matches!(labels, Labels::Multi { .. });
    let mut writer = out
        .map(|p| Predictions::create(p, store.n_nodes(), classes, multi))
        .transpose()?;
    let roles = [Role::Val, Role::Test];
    let mut counts = [Counts::new(classes), Counts::new(classes)];
    let mut count = |ids: &mut dyn Iterator<Item = u32>, t: &Tensor| {
        for (i, v) in ids.enumerate() {
            if let Some(k) = roles.iter().position(|&r| r == store.role(v)) {
                add_node(&mut counts[k], &labels, v, t.row(i));
            }
        }
    };
    match writer.as_mut() {
        // Every node's prediction: every row.
        Some(w) => graph.for_each_block(runner, params, Output::Logits, &mut |r0, t| {
            count(&mut (r0 as u32..(r0 + t.rows) as u32), t);
            w.write_block(r0, t.rows, |i| t.row(i)).map_err(|e| {
                crate::infer::InferError::io(out.unwrap_or(Path::new("")), "write", e)
            })?;
            Ok(())
        })?,
        // The figures only: the last layer at the scored nodes alone.
        None => {
            let ids = store.nodes_with_roles(&roles);
            graph.for_each_block_at(runner, params, Output::Logits, &ids, &mut |ids, t| {
                count(&mut ids.iter().copied(), t);
                Ok(())
            })?
        }
    }
    let shape = match writer {
        Some(w) => Some(w.finish()?),
        None => None,
    };
    let [val, test] = counts.map(|c| (c.nodes() > 0).then(|| c.metrics()));
    Ok((val, test, shape))
}

/// Every node's prediction as `.npy`, written by row blocks into an atomic file:
/// single-label `[N]` int64 class ids (the logits' argmax, as accuracy counts them),
/// multi-label `[N, C]` uint8 0/1 (a logit above 0, as F1 counts them).
struct Predictions {
    out: crate::atomic::AtomicFile,
    header: usize,
    nodes: usize,
    classes: usize,
    multi: bool,
}

impl Predictions {
    fn create(path: &Path, nodes: usize, classes: usize, multi: bool) -> Result<Predictions> {
        let header = crate::npy::NpyHeader {
            descr: if multi { "|u1" } else { "<i8" }.into(),
            fortran_order: false,
            shape: if multi {
                vec![nodes as u64, classes as u64]
            } else {
                vec![nodes as u64]
            },
        }
        .canonical();
        let body = if multi { nodes * classes } else { nodes * 8 };
        let mut out = crate::atomic::AtomicFile::create(path)
            .map_err(|e| TrainError::io(path, "create", e))?;
        crate::atomic::reserve(
            out.file(),
            path,
            (header.len() + body) as u64,
            "the predictions",
        )?;
        out.write_at(0, &header)
            .map_err(|e| TrainError::io(path, "write", e))?;
        Ok(Predictions {
            out,
            header: header.len(),
            nodes,
            classes,
            multi,
        })
    }

    /// Writes the predictions of rows `r0..r0 + rows`, row i's logits from `row(i)`.
    fn write_block<'r>(
        &mut self,
        r0: usize,
        rows: usize,
        row: impl Fn(usize) -> &'r [f32],
    ) -> std::io::Result<()> {
        let (bytes, at) = if self.multi {
            let b: Vec<u8> = (0..rows)
                .flat_map(|i| row(i).iter().map(|&z| u8::from(z > 0.0)))
                .collect();
            (b, r0 * self.classes)
        } else {
            let b: Vec<u8> = (0..rows)
                .flat_map(|i| (argmax(row(i)) as i64).to_le_bytes())
                .collect();
            (b, r0 * 8)
        };
        self.out.write_at((self.header + at) as u64, &bytes)
    }

    /// Fsyncs and renames the file into place; the shape written.
    fn finish(self) -> Result<Vec<usize>> {
        let path = self.out.path().to_path_buf();
        let shape = if self.multi {
            vec![self.nodes, self.classes]
        } else {
            vec![self.nodes]
        };
        self.out
            .commit()
            .map_err(|e| TrainError::io(&path, "write", e))?;
        Ok(shape)
    }
}
