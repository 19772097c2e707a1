//! `saintflow._native`: the Rust half of the Python package (issue 29). Thin: every
//! function converts arguments, releases the GIL, calls the library and converts the
//! result; what the package adds in Python (argument shapes, masks, PyG/torch adapters)
//! is in `python/saintflow/`. No panic crosses into Python: every entry point runs under
//! `guard`, which turns one into `SaintflowError`.
//!
//! One module per concept, as the Python side is split: `error` (exceptions, `guard`),
//! `runtime` (thread counts, pools, size checks, Ctrl-C), `store`, `sampler` and `batch`
//! (a batch's arrays lent to numpy), `plan`, `training` (train, embed, eval-embedding),
//! `ops` (ops in Python). This file registers what the module exports.

mod batch;
mod error;
mod ops;
mod plan;
mod runtime;
mod sampler;
mod store;
mod training;

use pyo3::prelude::*;

use crate::error::{PlanError, SaintflowError, SampleError, StoreError, TrainError};

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SaintflowError", py.get_type::<SaintflowError>())?;
    m.add("PlanError", py.get_type::<PlanError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("SampleError", py.get_type::<SampleError>())?;
    m.add("TrainError", py.get_type::<TrainError>())?;
    m.add_class::<store::Store>()?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<sampler::BatchIter>()?;
    m.add_class::<store::SectionMap>()?;
    m.add_class::<plan::Plan>()?;
    m.add_function(wrap_pyfunction!(plan::shipped_plans, m)?)?;
    m.add_function(wrap_pyfunction!(training::_train, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_register_op, m)?)?;
    m.add_function(wrap_pyfunction!(ops::registered_ops, m)?)?;
    m.add_function(wrap_pyfunction!(ops::_check_op_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(training::_embed, m)?)?;
    m.add_function(wrap_pyfunction!(training::_train_embedding, m)?)?;
    m.add_function(wrap_pyfunction!(training::_eval_embedding, m)?)?;
    m.add_function(wrap_pyfunction!(error::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(sampler::sampler_kinds, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
