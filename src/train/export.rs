//! `saintflow export`: a checkpoint's parameters as a `.safetensors` file, the weight format
//! PyTorch, Hugging Face, candle and burn read (issue 32). Every parameter is an F32
//! tensor of shape `[rows, cols]` under its plan name (the names `explain` prints, e.g.
//! `W0`, `b0`); the header's `__metadata__` holds `format` (`saintflow`), `plan_hash`
//! (hex), `seed`, `epoch` (the epoch the exported weights are from), `epochs_trained` and
//! `step` (the run's, at the checkpoint), `which` (`best` or `last`), `dims` (a JSON object
//! of name → `[rows, cols]`) and, when given, `plan` (the plan file's text, as the caller
//! read it: the checkpoint records only the plan's hash, which is not checked against it).
//! The file is written atomically ([`crate::atomic`]).
//!
//! State that is not a parameter goes beside the parameters, as F32 tensors under its own
//! names, and `__metadata__`'s `state` lists them (a JSON array; `[]` without any): each
//! `batchnorm`'s running statistics as `NAME.running_mean` and `NAME.running_var`, `[1, f]`
//! (NAME the call's `name=`, else `batchnorm.K`, K counting the plan's `batchnorm` calls
//! from 0 in plan order, a repeated layer's copies one by one) — PyTorch's
//! `BatchNorm1d` buffer names after the module's — the ones that went with the exported
//! parameters (the best validation's with the best parameters).
//!
//! Which weights (issue 55 item 10, one rule for every reader of a checkpoint: `export`,
//! `embed`, [`super::checkpoint::params_for`]): the best-validation parameters — those the
//! run's test metrics were measured with — when the run evaluated, else the last epoch's;
//! [`Which::Last`] (`--last`) takes the last epoch's.
//!
//! [`load_safetensors`] is the way in (`train --init-from`): F32 tensors under the plan's
//! parameter names, every one the plan declares and no other, each of its declared shape
//! (a file of PyTorch's `nn.Linear` weights, `[out, in]`, must be transposed first).

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};

use super::checkpoint::{write_atomic, Checkpoint};
use super::TrainError;
use crate::ir::{ParamDecl, Params, Tensor};

/// Which parameters of a checkpoint to read: defined beside the checkpoint (its readers,
/// `params_for` among them, pick through it), named here too for the export's callers.
pub use super::checkpoint::Which;

/// The `.safetensors` bytes of `ckpt`'s parameters (see the module header); `checkpoint`
/// names the file in errors.
pub fn safetensors_bytes(
    ckpt: &Checkpoint,
    which: Which,
    plan_text: Option<&str>,
    checkpoint: &Path,
) -> Result<Vec<u8>, TrainError> {
    let bad = |what: String| TrainError::Checkpoint {
        path: checkpoint.to_path_buf(),
        what,
    };
    // Issue 55 items 7 and 8: a checkpoint built in memory gets the loader's checks too
    // (duplicate names made the safetensors crate panic; NaN weights were exported).
    ckpt.validate().map_err(&bad)?;
    let (params, epoch, which_name) = which.pick(ckpt);
    let state = which.pick_state(ckpt);
    let mut views = Vec::with_capacity(params.len() + state.len());
    let mut dims = serde_json::Map::new();
    for p in params.iter().chain(state) {
        if p.data.len() != p.rows * p.cols {
            return Err(bad(format!(
                "parameter {}: {} values, expected {} × {}",
                p.name,
                p.data.len(),
                p.rows,
                p.cols
            )));
        }
        let view = TensorView::new(
            Dtype::F32,
            vec![p.rows, p.cols],
            bytemuck::cast_slice(&p.data),
        )
        .map_err(|e| bad(format!("parameter {}: {e:?}", p.name)))?;
        views.push((p.name.clone(), view));
        dims.insert(p.name.clone(), serde_json::json!([p.rows, p.cols]));
    }
    let mut meta = HashMap::from([
        ("format".to_string(), "saintflow".to_string()),
        ("plan_hash".to_string(), format!("{:016x}", ckpt.plan_hash)),
        ("seed".to_string(), ckpt.seed.to_string()),
        ("epoch".to_string(), epoch.to_string()),
        ("epochs_trained".to_string(), ckpt.epoch.to_string()),
        ("step".to_string(), ckpt.step.to_string()),
        ("which".to_string(), which_name.to_string()),
        (
            "dims".to_string(),
            serde_json::Value::Object(dims).to_string(),
        ),
        (
            "state".to_string(),
            serde_json::Value::from(state.iter().map(|t| t.name.clone()).collect::<Vec<_>>())
                .to_string(),
        ),
    ]);
    if let Some(text) = plan_text {
        meta.insert("plan".to_string(), text.to_string());
    }
    safetensors::serialize(views, &Some(meta)).map_err(|e| bad(format!("serialising: {e:?}")))
}

/// Reads the checkpoint at `checkpoint` and writes its parameters to `out` as
/// `.safetensors`, atomically. Returns the number of tensors written.
///
/// ```
/// use saintflow::train::checkpoint::{Checkpoint, SavedTensor};
/// use saintflow::train::export::{export_safetensors, Which};
///
/// let dir = tempfile::tempdir()?;
/// let w = SavedTensor { name: "W0".into(), rows: 2, cols: 3, data: vec![1., 2., 3., 4., 5., 6.] };
/// let ckpt = Checkpoint {
///     plan_hash: 7, seed: 1, epoch: 3, step: 30, params: vec![w],
///     opt_m: vec![], opt_v: vec![], opt_t: 30, best_params: None, best_epoch: 0,
///     best_val: None, elapsed: 1.0, log_pos: None, graph_id: 9, dist: None, best_link: None,
///     early: None, best_loss: None, state: vec![], best_state: None,
/// };
/// let (cp, out) = (dir.path().join("checkpoint.bin"), dir.path().join("model.safetensors"));
/// ckpt.save(&cp)?;
/// assert_eq!(export_safetensors(&cp, &out, Which::Best, Some("[model]\n"))?, 1);
/// let bytes = std::fs::read(&out)?;
/// let st = safetensors::SafeTensors::deserialize(&bytes)?;
/// assert_eq!(st.tensor("W0")?.shape(), &[2, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn export_safetensors(
    checkpoint: &Path,
    out: &Path,
    which: Which,
    plan_text: Option<&str>,
) -> Result<usize, TrainError> {
    let ckpt = Checkpoint::load(checkpoint)?;
    let bytes = safetensors_bytes(&ckpt, which, plan_text, checkpoint)?;
    write_atomic(out, &bytes)?;
    Ok(which.pick(&ckpt).0.len() + which.pick_state(&ckpt).len())
}

/// Reads a `.safetensors` file as the values of the parameters `decls` declares (the
/// plan's, lowered for the graph), for `train --init-from`. Every declared name must be
/// there as F32 of the declared `[rows, cols]`, and the file must hold nothing else; the
/// error lists every mismatch at once, with what the plan declares.
pub fn load_safetensors(path: &Path, decls: &[ParamDecl]) -> Result<Params, TrainError> {
    let bad = |what: String| TrainError::Init {
        path: path.to_path_buf(),
        what,
    };
    let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, "read", e))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| bad(format!("not a safetensors file: {e}")))?;
    let mut problems = Vec::new();
    let mut params = Params::default();
    for d in decls {
        match st.tensor(&d.name) {
            Err(_) => problems.push(format!("`{}` is missing", d.name)),
            Ok(t) if t.dtype() != Dtype::F32 => {
                problems.push(format!("`{}` is {:?}, expected F32", d.name, t.dtype()))
            }
            Ok(t) if t.shape() != [d.rows, d.cols] => problems.push(format!(
                "`{}` has shape {:?}, the plan declares [{}, {}]",
                d.name,
                t.shape(),
                d.rows,
                d.cols
            )),
            Ok(t) => {
                let data: Vec<f32> = t
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                    .collect();
                // Issue 55 item 7: NaN or ±inf weights would be trained on (and ReLU
                // once hid NaN): refused, naming the first.
                if let Some(i) = data.iter().position(|x| !x.is_finite()) {
                    problems.push(format!(
                        "`{}` value {i} (row {}, column {}) is {}, expected a finite number",
                        d.name,
                        i / d.cols.max(1),
                        i % d.cols.max(1),
                        data[i]
                    ));
                    continue;
                }
                params.insert(
                    d.name.clone(),
                    Tensor {
                        rows: d.rows,
                        cols: d.cols,
                        data,
                    },
                );
            }
        }
    }
    let mut extra: Vec<String> = st
        .names()
        .into_iter()
        .filter(|n| !decls.iter().any(|d| &d.name == *n))
        .cloned()
        .collect();
    extra.sort();
    if !extra.is_empty() {
        problems.push(format!("not parameters of the plan: {}", extra.join(", ")));
    }
    if problems.is_empty() {
        return Ok(params);
    }
    let declared: Vec<String> = decls
        .iter()
        .map(|d| format!("{} [{}, {}]", d.name, d.rows, d.cols))
        .collect();
    Err(bad(format!(
        "{}; the plan declares {}",
        problems.join("; "),
        declared.join(", ")
    )))
}
