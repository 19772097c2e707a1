//! `Plan`: a plan file (GNN or `[embedding]`) with its overrides, parsed and typed when
//! loaded, so that a plan error is raised by `Plan.load` with its position, not by `train`.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;

use saintflow::plan::embedding::EmbeddingPlan;
use saintflow::plan::Plan as RustPlan;

use crate::error::{guard, lib};

/// A plan (GNN or `[embedding]`), parsed and typed.
#[pyclass(module = "saintflow._native", frozen)]
pub(crate) struct Plan {
    pub(crate) path: PathBuf,
    pub(crate) overrides: Vec<String>,
    pub(crate) gnn: Option<RustPlan>,
}

#[pymethods]
impl Plan {
    #[staticmethod]
    #[pyo3(signature = (path, overrides = Vec::new()))]
    fn load(path: PathBuf, overrides: Vec<String>) -> PyResult<Plan> {
        guard(|| {
            let gnn = if saintflow::plan::embedding::is_embedding_plan(&path) {
                embedding_plan(&path, &overrides)?;
                None
            } else {
                let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
                Some(lib(RustPlan::load_with_overrides(&path, &o))?)
            };
            Ok(Plan {
                path,
                overrides,
                gnn,
            })
        })
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }
    #[getter]
    fn is_embedding(&self) -> bool {
        self.gnn.is_none()
    }
    #[getter]
    fn overrides(&self) -> Vec<String> {
        self.overrides.clone()
    }
}

/// The `[embedding]` plan at `path` with `overrides`: checked by `Plan.load`, loaded for
/// the run by `_train_embedding`.
pub(crate) fn embedding_plan(path: &Path, overrides: &[String]) -> PyResult<EmbeddingPlan> {
    let o: Vec<&str> = overrides.iter().map(String::as_str).collect();
    lib(EmbeddingPlan::load_with_overrides(path, &o))
}
