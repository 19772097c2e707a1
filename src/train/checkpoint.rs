//! Checkpoints: everything a run needs to continue exactly where it stopped — parameters,
//! the best-validation parameters, the optimiser's state (Adam's m, v and step count, or
//! SGD's momentum), the epoch and step reached, the best validation metrics, the elapsed
//! time and the log position — tied to the plan by the hash of its effective text and to
//! the graph by its identity ([`GraphStore::identity`]: the xxh3-64 of the store's header,
//! which holds the counts and every section's checksum).
//!
//! File format (`SFCKPT07`, docs/FORMAT.md): magic `SFCKPT07`, a safetensors body, then
//! the xxh3-64 of everything before it (little-endian), so a truncated or damaged file is
//! refused with its name rather than half-loaded. The body holds every tensor as F32
//! `[rows, cols]` under `GROUP.INDEX` (`params.0`, `opt_m.3`, `best_state.1`, …) and, in
//! its metadata under `checkpoint`, a JSON header (`Header`): the scalar fields and each
//! group's tensors in order, as `[name, rows, cols]`. serde_json writes f64 as the shortest text that reads
//! back to the same bits (`float_roundtrip`), so a resume is bit-identical. Older
//! checkpoints (`SFCKPT06` and before: bincode, dropped for RUSTSEC-2025-0141) are refused
//! with a message naming the file and saying to train again or finish the run with the
//! release that wrote it. Written atomically: a temporary file in the same directory,
//! fsync, rename over the old one, fsync of the directory — a kill at any moment leaves the
//! old checkpoint or the new one, never a mix.
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

use std::collections::HashMap;

use safetensors::tensor::{Dtype, TensorView};
use serde::{Deserialize, Serialize};

use crate::dist::DistState;
use crate::ir::{Params, Tensor};
use crate::store::GraphStore;

use super::TrainError;
use crate::metrics::{LinkMetrics, Metrics};

/// This format's magic.
pub const MAGIC: &[u8; 8] = b"SFCKPT07";
/// Every checkpoint's magic begins so; the two digits after are its version.
const MAGIC_STEM: &[u8; 6] = b"SFCKPT";
/// The safetensors metadata key of the JSON header.
const HEADER_KEY: &str = "checkpoint";

/// The most steps an epoch can have: ⌈|V_train| / |V_s|⌉ with node ids of 32 bits and
/// |V_s| ≥ 1. A checkpoint claiming more steps than `epoch` times this is refused.
pub const MAX_STEPS_PER_EPOCH: u64 = 1 << 32;

/// A parameter's value, serialisable.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
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
    /// `best_link`).
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
    /// Where early stopping stands (None in a run without early stopping's state).
    pub early: Option<EarlyState>,
    /// The best validation's loss (`best_val`'s `loss`, which `load` puts back there).
    pub best_loss: Option<f64>,
    /// State that is not a parameter (no gradient, no optimiser): each `batchnorm`'s
    /// `NAME.running_mean` and `NAME.running_var`, `[1, f]`, after the last step (empty
    /// for plans without any).
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
    /// figure alone without `watch`; empty before the first validation; −∞ for a figure
    /// never given, which JSON has no number for: written `"-inf"`).
    #[serde(with = "f64s_named")]
    pub bests: Vec<f64>,
    /// Evaluations in a row without progress.
    pub since: u64,
    /// The epoch the run stopped after, early.
    pub stopped_at: Option<usize>,
}

/// An f64 in the JSON header: a number, or the name of a value JSON has no number for
/// (`"-inf"`, `"inf"`, `"NaN"`), so that early stopping's −∞ survives the header and a
/// crafted NaN is read back as NaN (and refused by [`Checkpoint::validate`] naming the
/// field), not as a decoding error or as something else.
#[derive(Clone, Copy)]
struct Float(f64);

impl Serialize for Float {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            x if x.is_finite() => s.serialize_f64(x),
            x if x.is_nan() => s.serialize_str("NaN"),
            x if x > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }
}

impl<'de> Deserialize<'de> for Float {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Float, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Named {
            Number(f64),
            Name(String),
        }
        match Named::deserialize(d)? {
            Named::Number(x) => Ok(Float(x)),
            Named::Name(s) => match s.as_str() {
                "-inf" => Ok(Float(f64::NEG_INFINITY)),
                "inf" => Ok(Float(f64::INFINITY)),
                "NaN" => Ok(Float(f64::NAN)),
                _ => Err(serde::de::Error::custom(format!(
                    "expected a number, \"-inf\", \"inf\" or \"NaN\", got \"{s}\""
                ))),
            },
        }
    }
}

/// [`EarlyState::bests`] as a list of [`Float`].
mod f64s_named {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Float;

    pub(super) fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        v.iter().map(|&x| Float(x)).collect::<Vec<_>>().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Ok(Vec::<Float>::deserialize(d)?
            .into_iter()
            .map(|f| f.0)
            .collect())
    }
}

/// The checkpoint's fields other than the tensors, and the tensors' names per group in
/// order, as the JSON in the safetensors metadata (`checkpoint`). The tensors themselves
/// are the body's `GROUP.INDEX`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    plan_hash: u64,
    seed: u64,
    epoch: usize,
    step: u64,
    opt_t: u64,
    best_epoch: usize,
    /// `best_val`'s accuracy, F1-micro and F1-macro (its link figures in `best_link`, its
    /// loss in `best_loss`).
    best_val: Option<[Float; 3]>,
    elapsed: Float,
    log_pos: Option<u64>,
    graph_id: u64,
    dist: Option<DistHeader>,
    best_link: Option<LinkMetrics>,
    early: Option<EarlyState>,
    best_loss: Option<Float>,
    params: Vec<Entry>,
    opt_m: Vec<Entry>,
    opt_v: Vec<Entry>,
    best_params: Option<Vec<Entry>>,
    state: Vec<Entry>,
    best_state: Option<Vec<Entry>>,
}

/// [`DistState`] in the header: each rank's `(mean, variance, seen)`, then `var_bar`.
type DistHeader = (Vec<(Float, Float, bool)>, Float);

/// A tensor in the header: its name, rows and columns. The body's `GROUP.INDEX` holds its
/// values as `[rows, cols]` (as a flat list when they are not rows × cols, which only
/// [`Checkpoint::encode_unchecked`] writes and [`Checkpoint::validate`] refuses).
type Entry = (String, usize, usize);

/// The tensor groups in the body, by their key prefix.
fn groups(c: &Checkpoint) -> [(&'static str, Option<&[SavedTensor]>); 6] {
    [
        ("params", Some(c.params.as_slice())),
        ("opt_m", Some(c.opt_m.as_slice())),
        ("opt_v", Some(c.opt_v.as_slice())),
        ("best_params", c.best_params.as_deref()),
        ("state", Some(c.state.as_slice())),
        ("best_state", c.best_state.as_deref()),
    ]
}

impl Checkpoint {
    /// The safetensors body (see the module's documentation); `Err` only when the
    /// safetensors crate refuses a view (which cannot happen for F32 values of their own
    /// length).
    fn body(&self) -> Result<Vec<u8>, String> {
        let names = |t: &[SavedTensor]| {
            t.iter()
                .map(|s| (s.name.clone(), s.rows, s.cols))
                .collect::<Vec<Entry>>()
        };
        let header = Header {
            plan_hash: self.plan_hash,
            seed: self.seed,
            epoch: self.epoch,
            step: self.step,
            opt_t: self.opt_t,
            best_epoch: self.best_epoch,
            best_val: self
                .best_val
                .map(|m| [m.accuracy, m.f1_micro, m.f1_macro].map(Float)),
            elapsed: Float(self.elapsed),
            log_pos: self.log_pos,
            graph_id: self.graph_id,
            dist: self.dist.as_ref().map(|d| {
                let ranks = d.ranks.iter().map(|r| (Float(r.0), Float(r.1), r.2));
                (ranks.collect(), Float(d.var_bar))
            }),
            best_link: self.best_link,
            early: self.early.clone(),
            best_loss: self.best_loss.map(Float),
            params: names(&self.params),
            opt_m: names(&self.opt_m),
            opt_v: names(&self.opt_v),
            best_params: self.best_params.as_deref().map(names),
            state: names(&self.state),
            best_state: self.best_state.as_deref().map(names),
        };
        let mut views = Vec::new();
        for (group, tensors) in groups(self) {
            for (i, t) in tensors.unwrap_or_default().iter().enumerate() {
                let shape = if t.rows.checked_mul(t.cols) == Some(t.data.len()) {
                    vec![t.rows, t.cols]
                } else {
                    vec![t.data.len()]
                };
                let view = TensorView::new(Dtype::F32, shape, bytemuck::cast_slice(&t.data))
                    .map_err(|e| format!("{group}: `{}`: {e:?}", t.name))?;
                views.push((format!("{group}.{i}"), view));
            }
        }
        let json = serde_json::to_string(&header).expect("the header serialises");
        let meta = HashMap::from([(HEADER_KEY.to_string(), json)]);
        safetensors::serialize(views, &Some(meta)).map_err(|e| format!("serialising: {e:?}"))
    }

    /// The checkpoint in `body` (the safetensors part of the file), not yet validated;
    /// `best_val` gets back its link figures and loss from `best_link` and `best_loss`.
    fn from_body(body: &[u8]) -> Result<Checkpoint, String> {
        let st = safetensors::SafeTensors::deserialize(body)
            .map_err(|e| format!("not a safetensors body: {e}"))?;
        let (_, meta) = safetensors::SafeTensors::read_metadata(body)
            .map_err(|e| format!("not a safetensors body: {e}"))?;
        let json = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get(HEADER_KEY))
            .ok_or_else(|| format!("no `{HEADER_KEY}` header in the metadata"))?;
        let h: Header =
            serde_json::from_str(json).map_err(|e| format!("decoding the header: {e}"))?;
        let expected: usize = [&h.params, &h.opt_m, &h.opt_v, &h.state]
            .into_iter()
            .chain(h.best_params.iter())
            .chain(h.best_state.iter())
            .map(Vec::len)
            .sum();
        if st.len() != expected {
            return Err(format!(
                "tensors: the header names {expected}, expected as many in the body, got {}",
                st.len()
            ));
        }
        let read = |group: &str, entries: &[Entry]| -> Result<Vec<SavedTensor>, String> {
            entries
                .iter()
                .enumerate()
                .map(|(i, (name, rows, cols))| {
                    let key = format!("{group}.{i}");
                    let t = st
                        .tensor(&key)
                        .map_err(|_| format!("{group}: `{name}` ({key}) missing from the body"))?;
                    if t.dtype() != Dtype::F32 {
                        return Err(format!(
                            "{group}: `{name}` of {:?}, expected F32",
                            t.dtype()
                        ));
                    }
                    // The shape is the header's; `validate` checks it against the values.
                    let data = t
                        .data()
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                        .collect();
                    Ok(SavedTensor {
                        name: name.clone(),
                        rows: *rows,
                        cols: *cols,
                        data,
                    })
                })
                .collect()
        };
        let best_loss = h.best_loss.map(|f| f.0);
        let best_val = h.best_val.map(|[a, mi, ma]| Metrics {
            accuracy: a.0,
            f1_micro: mi.0,
            f1_macro: ma.0,
            link: h.best_link,
            loss: best_loss,
            roc_auc: None,
        });
        Ok(Checkpoint {
            plan_hash: h.plan_hash,
            seed: h.seed,
            epoch: h.epoch,
            step: h.step,
            params: read("params", &h.params)?,
            opt_m: read("opt_m", &h.opt_m)?,
            opt_v: read("opt_v", &h.opt_v)?,
            opt_t: h.opt_t,
            best_params: h
                .best_params
                .as_deref()
                .map(|n| read("best_params", n))
                .transpose()?,
            best_epoch: h.best_epoch,
            best_val,
            elapsed: h.elapsed.0,
            log_pos: h.log_pos,
            graph_id: h.graph_id,
            dist: h.dist.map(|(ranks, var_bar)| DistState {
                ranks: ranks.into_iter().map(|(m, v, s)| (m.0, v.0, s)).collect(),
                var_bar: var_bar.0,
            }),
            best_link: h.best_link,
            early: h.early,
            best_loss,
            state: read("state", &h.state)?,
            best_state: h
                .best_state
                .as_deref()
                .map(|n| read("best_state", n))
                .transpose()?,
        })
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

    /// The file's bytes (magic, safetensors body, checksum) without
    /// [`Checkpoint::validate`]: what tests and the fuzz targets use to make files the
    /// loader must refuse. [`save`] validates first.
    ///
    /// [`save`]: Checkpoint::save
    pub fn encode_unchecked(&self) -> Vec<u8> {
        let body = self
            .body()
            .unwrap_or_else(|e| panic!("encode_unchecked: {e}"));
        seal(&body)
    }

    /// Reads a checkpoint, verifying magic and checksum, then every field
    /// ([`Checkpoint::validate`]).
    pub fn load(path: &Path) -> Result<Checkpoint, TrainError> {
        let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, "read", e))?;
        let bad = |what: String| TrainError::Checkpoint {
            path: path.to_path_buf(),
            what,
        };
        let body = unseal(&bytes).map_err(bad)?;
        let c = Checkpoint::from_body(body).map_err(|e| bad(format!("decoding: {e}")))?;
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

/// Magic + `body` + the xxh3-64 of both: a checkpoint file around a safetensors body.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + body.len() + 8);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(body);
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    bytes
}

/// The safetensors body of checkpoint file `bytes`, after its magic and checksum are
/// checked; an older format's magic is refused with what to do.
fn unseal(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() >= MAGIC.len() && bytes.starts_with(MAGIC_STEM) && !bytes.starts_with(MAGIC) {
        let version = String::from_utf8_lossy(&bytes[MAGIC_STEM.len()..MAGIC.len()]);
        let older = bytes[MAGIC_STEM.len()..MAGIC.len()] < MAGIC[MAGIC_STEM.len()..];
        return Err(if older {
            format!(
                "written by an older saintflow (format SFCKPT{version}, bincode), which this release no longer reads (the bincode crate is unmaintained, RUSTSEC-2025-0141; checkpoints are SFCKPT07, safetensors, since): train again without --resume, or finish that run with the release that wrote it"
            )
        } else {
            format!(
                "written by a newer saintflow (format SFCKPT{version}; this one reads SFCKPT07): use that release"
            )
        });
    }
    if bytes.len() < MAGIC.len() + 8 || !bytes.starts_with(MAGIC) {
        return Err(format!(
            "not a saintflow checkpoint (wrong magic or too short: {} bytes)",
            bytes.len()
        ));
    }
    let (sealed, sum) = bytes.split_at(bytes.len() - 8);
    let want = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
    let got = xxhash_rust::xxh3::xxh3_64(sealed);
    if want != got {
        return Err(format!(
            "checksum mismatch (truncated or damaged), expected {want:016x}, got {got:016x}"
        ));
    }
    Ok(&sealed[MAGIC.len()..])
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

/// Which parameters of a checkpoint to read (the rule of `saintflow export`'s module documentation,
/// [`super::export`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Which {
    /// The best-validation parameters (those the run's test was measured with), or the last
    /// epoch's when the run never evaluated.
    #[default]
    Best,
    /// The parameters after the last completed epoch.
    Last,
}

impl Which {
    /// The parameters of `ckpt` this picks, with the epoch they are from and the name the
    /// export's `which` records (`best`, or `last`, also when `Best` fell back).
    pub fn pick(self, ckpt: &Checkpoint) -> (&[SavedTensor], usize, &'static str) {
        match (self, &ckpt.best_params) {
            (Which::Best, Some(b)) => (b, ckpt.best_epoch, "best"),
            _ => (&ckpt.params, ckpt.epoch, "last"),
        }
    }

    /// The state (running statistics) that goes with [`Which::pick`]'s parameters.
    pub fn pick_state(self, ckpt: &Checkpoint) -> &[SavedTensor] {
        match (self, &ckpt.best_params, &ckpt.best_state) {
            (Which::Best, Some(_), Some(s)) => s,
            (Which::Best, Some(_), None) => &[],
            _ => &ckpt.state,
        }
    }
}

/// The parameters a forward pass (`embed`, the Python package's `embed`) uses from the
/// checkpoint at `arg` (a file, or a run directory: [`checkpoint_file`]), by the rule every
/// reader of weights follows ([`Which`]): the best-validation ones, or the
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
    let which = if last { Which::Last } else { Which::Best };
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
