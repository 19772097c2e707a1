//! Checkpoints: everything a run needs to continue exactly where it stopped — parameters,
//! the best-validation parameters, the optimiser's state (Adam's m, v and step count, or
//! SGD's momentum), the epoch and step reached, the best validation metrics, the elapsed
//! time and the log position — tied to the plan by the hash of its effective text and to
//! the graph by its identity ([`GraphStore::identity`]: the xxh3-64 of the store's header,
//! which holds the counts and every section's checksum).
//!
//! File format: magic `SFCKPT06`, the bincode encoding of [`Checkpoint`], then the
//! xxh3-64 of everything before it (little-endian), so a truncated or damaged file is
//! refused with its name rather than half-loaded. `SFCKPT05` (before state that is not a
//! parameter: `batchnorm`'s running statistics, the last two fields) is read with none;
//! `SFCKPT04` (before early stopping, also the two fields before those) with neither; `SFCKPT03` (before link plans kept their best
//! validation figures) also without those; `SFCKPT02` (before
//! distributed training kept its consensus state here) as a single-process checkpoint. A
//! `SFCKPT01` file (before graph identities) is refused with a message saying so: it cannot
//! show which graph it was trained on, and resuming on another one is the silent failure
//! the identity exists to stop; such files came only from pre-release builds. Written atomically: a temporary file in
//! the same directory, fsync, rename over the old one, fsync of the directory — a kill at
//! any moment leaves the old checkpoint or the new one, never a mix.
//!
//! Every field read is checked before use ([`Checkpoint::validate`], issue 55 items 7 and
//! 8), on load and before a save, so saintflow never writes a checkpoint it would refuse:
//! parameter names unique and non-empty, values = rows × cols, every value finite (Adam's
//! v also ≥ 0), the best-validation parameters of the same names and shapes as the current
//! ones, metrics finite in [0, 1], `1 ≤ best_epoch ≤ epoch ≤ step ≤ epoch ×`
//! [`MAX_STEPS_PER_EPOCH`], `opt_t ≤ step`, `elapsed` finite and ≥ 0, a job's consensus
//! state finite (variances ≥ 0). A resumed run also
//! refuses a checkpoint past its last epoch (`TrainState::start`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dist::DistState;
use crate::ir::{Params, Tensor};
use crate::store::GraphStore;

use super::TrainError;
use crate::metrics::{LinkMetrics, Metrics};

const MAGIC: &[u8; 8] = b"SFCKPT06";
/// The format before state: the same encoding without the last two fields, read as
/// `state: []`, `best_state: None`.
const MAGIC_V5: &[u8; 8] = b"SFCKPT05";
/// The format before early stopping: the same encoding without the last two fields, read
/// as `early: None, best_loss: None`.
const MAGIC_V4: &[u8; 8] = b"SFCKPT04";
/// The format before link plans: the same encoding without the last field, read as
/// `best_link: None` (bincode writes `None` as one zero byte).
const MAGIC_V3: &[u8; 8] = b"SFCKPT03";
/// The format before the distributed state: without the last two fields.
const MAGIC_V2: &[u8; 8] = b"SFCKPT02";
/// The format before the graph's identity was recorded.
const MAGIC_V1: &[u8; 8] = b"SFCKPT01";

/// The most steps an epoch can have: ⌈|V_train| / |V_s|⌉ with node ids of 32 bits and
/// |V_s| ≥ 1. A checkpoint claiming more steps than `epoch` times this is refused.
pub const MAX_STEPS_PER_EPOCH: u64 = 1 << 32;

/// A parameter's value, serialisable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedTensor {
    /// Its name.
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row-major values.
    pub data: Vec<f32>,
}

/// Saves every parameter, by name.
pub fn save_params(p: &Params) -> Vec<SavedTensor> {
    p.iter()
        .map(|(name, t)| SavedTensor {
            name: name.clone(),
            rows: t.rows,
            cols: t.cols,
            data: t.data.clone(),
        })
        .collect()
}

/// The parameters back.
pub fn load_params(saved: &[SavedTensor]) -> Params {
    let mut p = Params::default();
    for s in saved {
        p.insert(
            s.name.clone(),
            Tensor {
                rows: s.rows,
                cols: s.cols,
                data: s.data.clone(),
            },
        );
    }
    p
}

/// A training run's state after an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// xxh3-64 of the effective plan text.
    pub plan_hash: u64,
    /// The run's seed.
    pub seed: u64,
    /// Epochs completed.
    pub epoch: usize,
    /// Steps completed (the next step's global index).
    pub step: u64,
    /// Current parameters.
    pub params: Vec<SavedTensor>,
    /// Optimiser buffers per parameter: Adam's m and v (SGD: its momentum buffer, v
    /// empty).
    pub opt_m: Vec<SavedTensor>,
    /// Adam's v.
    pub opt_v: Vec<SavedTensor>,
    /// Adam's step count t.
    pub opt_t: u64,
    /// The best-validation parameters so far (None before the first evaluation).
    pub best_params: Option<Vec<SavedTensor>>,
    /// Their epoch.
    pub best_epoch: usize,
    /// Their validation metrics (accuracy and F1s here; a link plan's ranking figures in
    /// `best_link`, the format's last field).
    #[serde(with = "node_metrics")]
    pub best_val: Option<Metrics>,
    /// Seconds of training so far.
    pub elapsed: f64,
    /// Length of the log file when the checkpoint was written (None without a log file).
    pub log_pos: Option<u64>,
    /// The identity of the graph trained on ([`GraphStore::identity`]; in a distributed run,
    /// every part's identity combined, [`crate::dist`]).
    pub graph_id: u64,
    /// A distributed run's consensus state, every part's (None for one process).
    pub dist: Option<DistState>,
    /// A link plan's best validation ranking figures (`best_val`'s `link`, which `load`
    /// puts back there).
    pub best_link: Option<LinkMetrics>,
    /// Where early stopping stands (None in checkpoints from before it).
    pub early: Option<EarlyState>,
    /// The best validation's loss (`best_val`'s `loss`, which `load` puts back there).
    pub best_loss: Option<f64>,
    /// State that is not a parameter (no gradient, no optimiser): each `batchnorm`'s
    /// `NAME.running_mean` and `NAME.running_var`, `[1, f]`, after the last step (empty
    /// in checkpoints from before it, `SFCKPT05` and older, and for plans without any).
    pub state: Vec<SavedTensor>,
    /// The state that went with the best-validation parameters (None when they are None).
    pub best_state: Option<Vec<SavedTensor>>,
}

/// Where a run's early stopping stands ([`crate::plan::Eval`]): the best of each watched
/// figure so far (more is better: a loss is negated), the evaluations since the last
/// progress, and the epoch after which the run stopped, if it has.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EarlyState {
    /// The best value of each watched figure so far, in `watch` order (the selection
    /// figure alone without `watch`; empty before the first validation).
    pub bests: Vec<f64>,
    /// Evaluations in a row without progress.
    pub since: u64,
    /// The epoch the run stopped after, early.
    pub stopped_at: Option<usize>,
}

/// `best_val` as the format has always held it: accuracy, F1-micro and F1-macro.
mod node_metrics {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::metrics::Metrics;

    pub(super) fn serialize<S: Serializer>(m: &Option<Metrics>, s: S) -> Result<S::Ok, S::Error> {
        m.map(|m| (m.accuracy, m.f1_micro, m.f1_macro)).serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Metrics>, D::Error> {
        Ok(
            Option::<(f64, f64, f64)>::deserialize(d)?.map(|(accuracy, f1_micro, f1_macro)| {
                Metrics {
                    accuracy,
                    f1_micro,
                    f1_macro,
                    link: None,
                    loss: None,
                    roc_auc: None,
                }
            }),
        )
    }
}

impl Checkpoint {
    /// Writes the checkpoint to `path` atomically; refused (nothing written) when it would
    /// not load back ([`Checkpoint::validate`]), e.g. a parameter that became NaN.
    pub fn save(&self, path: &Path) -> Result<(), TrainError> {
        self.validate().map_err(|what| TrainError::Checkpoint {
            path: path.to_path_buf(),
            what: format!("not written: {what}"),
        })?;
        write_atomic(path, &self.encode_unchecked())
    }

    /// The file's bytes (magic, encoding, checksum) without [`Checkpoint::validate`]: what
    /// tests and the fuzz targets use to make files the loader must refuse. [`save`]
    /// validates first.
    ///
    /// [`save`]: Checkpoint::save
    pub fn encode_unchecked(&self) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bincode::serialize_into(&mut bytes, self).expect("checkpoints serialise");
        let sum = xxhash_rust::xxh3::xxh3_64(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        bytes
    }

    /// Reads a checkpoint, verifying magic and checksum.
    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, "read", e))?;
        let bad = |what: String| TrainError::Checkpoint {
            path: path.to_path_buf(),
            what,
        };
        if bytes.len() >= MAGIC_V1.len() && &bytes[..MAGIC_V1.len()] == MAGIC_V1 {
            return Err(bad(
                "written by an older saintflow (format SFCKPT01) that did not record which graph it was trained on, so it cannot be checked against this one: train again without --resume (or finish that run with the saintflow that wrote it)".into(),
            ));
        }
        let is = |magic: &[u8; 8]| bytes.len() >= magic.len() && &bytes[..magic.len()] == magic;
        let (v2, v3, v4, v5) = (is(MAGIC_V2), is(MAGIC_V3), is(MAGIC_V4), is(MAGIC_V5));
        if bytes.len() < MAGIC.len() + 8 || (!is(MAGIC) && !v2 && !v3 && !v4 && !v5) {
            return Err(bad(format!(
                "not a saintflow checkpoint (wrong magic or too short: {} bytes)",
                bytes.len()
            )));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let want = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
        let got = xxhash_rust::xxh3::xxh3_64(body);
        if want != got {
            return Err(bad(format!(
                "checksum mismatch (truncated or damaged), expected {want:016x}, got {got:016x}"
            )));
        }
        let decoded = if v2 || v3 || v4 || v5 {
            let mut b = body[MAGIC.len()..].to_vec();
            // Each field the older format lacks is None, one zero byte: dist (v2),
            // best_link (v3), early and best_loss (v4); then (v5 and older) `state`, an
            // empty list (its length, a zero u64: 8 bytes), and `best_state` None.
            let missing = if v2 {
                4
            } else if v3 {
                3
            } else if v4 {
                2
            } else {
                0
            };
            b.extend(std::iter::repeat_n(0u8, missing + 8 + 1));
            bincode::deserialize(&b)
        } else {
            bincode::deserialize(&body[MAGIC.len()..])
        };
        let mut c: Checkpoint = decoded.map_err(|e| bad(format!("decoding: {e}")))?;
        if let Some(v) = c.best_val.as_mut() {
            v.link = c.best_link;
            v.loss = c.best_loss;
        }
        c.validate().map_err(bad)?;
        Ok(c)
    }

    /// Checks every field against what a run can write (see the module's documentation):
    /// the first problem, worded `<field>: <what>, expected <x>, got <y>`.
    pub fn validate(&self) -> Result<(), String> {
        check_tensors("params", &self.params, false)?;
        check_tensors("state", &self.state, false)?;
        if let Some(t) = self
            .state
            .iter()
            .find(|t| self.params.iter().any(|p| p.name == t.name))
        {
            return Err(format!(
                "state: `{}` is also a parameter, expected state and parameters apart",
                t.name
            ));
        }
        match (&self.best_state, &self.best_params) {
            (Some(_), None) => {
                return Err("best_state: without best_params, expected neither".into())
            }
            (Some(best), Some(_)) => {
                check_tensors("best_state", best, false)?;
                let names = |t: &[SavedTensor]| {
                    let mut v: Vec<(String, usize, usize)> =
                        t.iter().map(|s| (s.name.clone(), s.rows, s.cols)).collect();
                    v.sort();
                    v
                };
                if names(best) != names(&self.state) {
                    return Err(format!(
                        "best_state: names and shapes differ from state's, expected {:?}, got {:?}",
                        names(&self.state),
                        names(best)
                    ));
                }
            }
            (None, Some(_)) if !self.state.is_empty() => {
                return Err("best_state: missing beside best_params and state".into())
            }
            _ => {}
        }
        check_tensors("opt_m", &self.opt_m, false)?;
        check_tensors("opt_v", &self.opt_v, true)?;
        if let Some(best) = &self.best_params {
            check_tensors("best_params", best, false)?;
            let shapes = |t: &[SavedTensor]| {
                let mut v: Vec<(String, usize, usize)> =
                    t.iter().map(|s| (s.name.clone(), s.rows, s.cols)).collect();
                v.sort();
                v
            };
            if shapes(best) != shapes(&self.params) {
                return Err(format!(
                    "best_params: names and shapes differ from params', expected {:?}, got {:?}",
                    shapes(&self.params),
                    shapes(best)
                ));
            }
        }
        match (&self.best_params, &self.best_val) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(
                    "best_params and best_val: one without the other, expected both or neither"
                        .into(),
                )
            }
            (Some(_), Some(m)) => {
                for (name, v) in [
                    ("accuracy", m.accuracy),
                    ("f1_micro", m.f1_micro),
                    ("f1_macro", m.f1_macro),
                ]
                .into_iter()
                .chain(
                    self.best_link
                        .iter()
                        .flat_map(|l| l.figures())
                        .filter_map(|(n, v)| v.map(|v| (n, v))),
                ) {
                    if !(0.0..=1.0).contains(&v) {
                        return Err(format!(
                            "best_val.{name}: not a metric, expected a number in [0, 1], got {v}"
                        ));
                    }
                }
                if !(1..=self.epoch).contains(&self.best_epoch) {
                    return Err(format!(
                        "best_epoch: not an epoch of the run, expected 1 ..= {} (epoch), got {}",
                        self.epoch, self.best_epoch
                    ));
                }
            }
            (None, None) if self.best_link.is_some() => {
                return Err("best_link: link figures without best_val, expected neither".into())
            }
            (None, None) => {}
        }
        let epoch = self.epoch as u64;
        let most = epoch.saturating_mul(MAX_STEPS_PER_EPOCH);
        if self.step < epoch || self.step > most {
            return Err(format!(
                "step: not reachable in {} epochs (each at least 1 and at most {MAX_STEPS_PER_EPOCH} steps), expected {} ..= {most}, got {}",
                self.epoch, epoch, self.step
            ));
        }
        if self.opt_t > self.step {
            return Err(format!(
                "opt_t: more optimiser steps than steps, expected at most {}, got {}",
                self.step, self.opt_t
            ));
        }
        if let Some(d) = &self.dist {
            let variances = d.ranks.iter().map(|r| r.1).chain([d.var_bar]);
            let means_finite = d.ranks.iter().all(|r| r.0.is_finite());
            if !means_finite || !variances.clone().all(|v| v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "dist: a rank's loss mean or variance, expected finite (variances ≥ 0), got means {:?}, variances {:?}",
                    d.ranks.iter().map(|r| r.0).collect::<Vec<_>>(),
                    variances.collect::<Vec<_>>()
                ));
            }
        }
        if let Some(e) = &self.early {
            if let Some(x) = e.bests.iter().find(|x| x.is_nan() || **x == f64::INFINITY) {
                return Err(format!(
                    "early.bests: expected numbers (or −∞ for a figure never given), got {x}"
                ));
            }
            if e.since > epoch {
                return Err(format!(
                    "early.since: more evaluations than epochs, expected at most {epoch}, got {}",
                    e.since
                ));
            }
            if let Some(at) = e.stopped_at.filter(|&at| !(1..=self.epoch).contains(&at)) {
                return Err(format!(
                    "early.stopped_at: not an epoch of the run, expected 1 ..= {} (epoch), got {at}",
                    self.epoch
                ));
            }
        }
        if let Some(l) = self.best_loss.filter(|l| !(l.is_finite() && *l >= 0.0)) {
            return Err(format!("best_loss: expected a finite loss ≥ 0, got {l}"));
        }
        if !(self.elapsed.is_finite() && self.elapsed >= 0.0) {
            return Err(format!(
                "elapsed: expected finite seconds ≥ 0, got {}",
                self.elapsed
            ));
        }
        Ok(())
    }
}

/// The tensors of checkpoint field `field`: names unique and non-empty, `rows × cols`
/// values, every one finite (and ≥ 0 with `non_negative`).
fn check_tensors(field: &str, ts: &[SavedTensor], non_negative: bool) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for t in ts {
        if t.name.is_empty() {
            return Err(format!(
                "{field}: a tensor without a name, expected a parameter name, got \"\""
            ));
        }
        if !seen.insert(t.name.as_str()) {
            return Err(format!(
                "{field}: parameter `{}` twice, expected each name once",
                t.name
            ));
        }
        let want = t.rows.checked_mul(t.cols);
        if want != Some(t.data.len()) {
            return Err(format!(
                "{field}: parameter `{}` of {} × {}, expected that many values, got {}",
                t.name,
                t.rows,
                t.cols,
                t.data.len()
            ));
        }
        if let Some(i) = t
            .data
            .iter()
            .position(|x| !x.is_finite() || (non_negative && *x < 0.0))
        {
            return Err(format!(
                "{field}: parameter `{}` value {i} (row {}, column {}), expected a finite number{}, got {}",
                t.name,
                i / t.cols.max(1),
                i % t.cols.max(1),
                if non_negative { " ≥ 0" } else { "" },
                t.data[i]
            ));
        }
    }
    Ok(())
}

impl Checkpoint {
    /// Refuses a checkpoint of another graph: `path` is the checkpoint, `store` the graph
    /// of this run; the message names both.
    pub fn check_graph(&self, path: &Path, store: &GraphStore) -> Result<(), TrainError> {
        self.check_graph_id(path, store.identity(), &store.path().display().to_string())
    }

    /// Refuses a checkpoint whose graph identity is not `id` (that of `what`, named in the
    /// message).
    pub fn check_graph_id(&self, path: &Path, id: u64, what: &str) -> Result<(), TrainError> {
        if self.graph_id != id {
            return Err(TrainError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "written for another graph (graph identity {:016x}), {} is {:016x}: its header (counts or section checksums) differs, so the parameters and metrics would be stale; use the store it was trained on, or train again without --resume",
                    self.graph_id,
                    what,
                    id
                ),
            });
        }
        Ok(())
    }

    /// Refuses a checkpoint of another plan or seed.
    pub fn check_matches(&self, path: &Path, plan_hash: u64, seed: u64) -> Result<(), TrainError> {
        if self.plan_hash != plan_hash {
            return Err(TrainError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "written for another plan (plan hash {:016x}, this plan's effective text hashes to {plan_hash:016x}): same plan file and the same --set overrides are needed",
                    self.plan_hash
                ),
            });
        }
        if self.seed != seed {
            return Err(TrainError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "written by a run with --seed {}, this run has --seed {seed}",
                    self.seed
                ),
            });
        }
        Ok(())
    }
}

/// Issue 28, item 12: a finished (or interrupted) run's checkpoint at `ck` is not replaced
/// silently by a fresh run. An error naming what is there, and how to continue it
/// (`resume_how`: `--resume`, `resume=True`) or replace it (`force_how`), when `ck` exists;
/// the caller skips this with its resume or force flag.
pub fn refuse_replacing(ck: &Path, resume_how: &str, force_how: &str) -> Result<(), TrainError> {
    if !ck.exists() {
        return Ok(());
    }
    let what = match Checkpoint::load(ck) {
        Ok(c) => format!("a run's checkpoint (epoch {}, seed {})", c.epoch, c.seed),
        Err(_) => "a file that is not a readable checkpoint".to_string(),
    };
    Err(TrainError::Checkpoint {
        path: ck.to_path_buf(),
        what: format!(
            "exists, {what}: {resume_how} continues it, {force_how} starts afresh and replaces it"
        ),
    })
}

/// The parameters a forward pass (`embed`, the Python package's `embed`) uses from the
/// checkpoint at `arg` (a file, or a run directory: [`checkpoint_file`]), by the rule every
/// reader of weights follows ([`super::export::Which`]): the best-validation ones, or the
/// last with `last` (or when the run never evaluated). Refused
/// when written for another plan (its hash; `plan_label` names the plan in the message) or
/// another graph.
pub fn params_for(
    arg: &Path,
    plan: &crate::plan::Plan,
    plan_label: &str,
    store: &GraphStore,
    last: bool,
) -> Result<Params, TrainError> {
    let path = checkpoint_file(arg);
    let ck = Checkpoint::load(&path)?;
    let hash = crate::compile::plan_hash(plan);
    if ck.plan_hash != hash {
        return Err(TrainError::Checkpoint {
            path,
            what: format!(
                "written for another plan (plan hash {:016x}, {plan_label} with these overrides hashes to {hash:016x})",
                ck.plan_hash
            ),
        });
    }
    ck.check_graph(&path, store)?;
    let which = if last {
        super::export::Which::Last
    } else {
        super::export::Which::Best
    };
    let mut params = load_params(which.pick(&ck).0);
    for t in which.pick_state(&ck) {
        params.insert(
            t.name.clone(),
            Tensor::from_vec(t.rows, t.cols, t.data.clone()).ok_or_else(|| {
                TrainError::Checkpoint {
                    path: path.clone(),
                    what: format!("state `{}`: not {} × {} values", t.name, t.rows, t.cols),
                }
            })?,
        );
    }
    Ok(params)
}

/// Where a `--checkpoint` argument puts the file: inside it when it is a directory or is
/// written as one (`run/`, existing or not): `checkpoint.bin`; else the path itself.
pub fn checkpoint_file(arg: &Path) -> PathBuf {
    // `run/` names a directory even before it exists (train creates it).
    let dir_syntax = arg
        .as_os_str()
        .to_string_lossy()
        .ends_with(std::path::is_separator);
    if arg.is_dir() || dir_syntax {
        arg.join("checkpoint.bin")
    } else {
        arg.to_path_buf()
    }
}

/// Writes `bytes` to `path` atomically ([`crate::atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    crate::atomic::write_atomic(path, bytes).map_err(|e| TrainError::io(path, "write", e))
}
