//! The exception hierarchy (`SaintflowError` → `PlanError`, `StoreError`, `SampleError`,
//! `TrainError`) and the conversions every entry point uses: `to_py` maps a library error to
//! its exception with the message the CLI prints (a plan error with `.file`, `.line`,
//! `.col`, `.what`), `lib` applies it to a result, and `guard` turns a Rust panic into
//! `SaintflowError`, so that none crosses into Python.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use saintflow::train::TrainError as RustTrainError;

create_exception!(
    _native,
    SaintflowError,
    PyException,
    "Every error saintflow raises."
);
create_exception!(
    _native,
    PlanError,
    SaintflowError,
    "A plan file or override that cannot be used: `.file`, `.line`, `.col` say where."
);
create_exception!(
    _native,
    StoreError,
    SaintflowError,
    "A store that cannot be opened, read or written."
);
create_exception!(
    _native,
    SampleError,
    SaintflowError,
    "A sampler that cannot be built or run."
);
create_exception!(
    _native,
    TrainError,
    SaintflowError,
    "Training or inference that failed."
);

/// The Python exception of a library error, with the message the CLI prints.
fn to_py(e: saintflow::Error) -> PyErr {
    use saintflow::Error as E;
    match e {
        E::Plan(p) | E::Train(RustTrainError::Plan(p)) => plan_error(p),
        E::Store(s) | E::Train(RustTrainError::Store(s)) => StoreError::new_err(s.to_string()),
        E::Sample(s) | E::Train(RustTrainError::Sample(s)) => SampleError::new_err(s.to_string()),
        e @ (E::Train(_) | E::Ir(_) | E::Op(_) | E::Embed(_)) => TrainError::new_err(e.to_string()),
        e => SaintflowError::new_err(e.to_string()),
    }
}

fn plan_error(p: saintflow::plan::PlanError) -> PyErr {
    Python::attach(|py| {
        let err = PlanError::new_err(p.to_string());
        let v = err.value(py);
        // Attributes on a fresh exception object cannot fail short of memory.
        let _ = v.setattr("file", p.file.clone());
        let _ = v.setattr("line", p.line);
        let _ = v.setattr("col", p.col);
        let _ = v.setattr("what", p.what.clone());
        err
    })
}

/// Runs `f`, turning a Rust panic into `SaintflowError` (the interpreter survives).
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(SaintflowError::new_err(format!(
                "internal error (a bug in saintflow, please report it): {what}"
            )))
        }
    }
}

/// A library result as a Python one: the error as `to_py` raises it.
pub(crate) fn lib<T, E: Into<saintflow::Error>>(r: Result<T, E>) -> PyResult<T> {
    r.map_err(|e| to_py(e.into()))
}

/// Panics on purpose: the test that a Rust panic reaches Python as `SaintflowError`.
#[pyfunction]
pub(crate) fn _panic_for_tests() -> PyResult<()> {
    guard(|| panic!("deliberate panic from saintflow._native._panic_for_tests"))
}
