//! `Plan`: a plan file (GNN or `[embedding]`) with its overrides, parsed and typed when
//! loaded, so that a plan error is raised by `Plan.load` with its position, not by `train`.

use std::path::PathBuf;

use pyo3::prelude::*;

use saintflow::plan::embedding::EmbeddingPlan;
use saintflow::plan::{AnyPlan, Plan as RustPlan};

use crate::error::{guard, lib};

/// A plan (GNN or `[embedding]`), parsed and typed once by the library's one plan entry
/// (`AnyPlan::load`: the family is told there, `model.X` is an alias of `dims.X`).
#[pyclass(module = "saintflow._native", frozen)]
pub(crate) struct Plan {
    pub(crate) path: PathBuf,
    pub(crate) overrides: Vec<String>,
    pub(crate) plan: AnyPlan,
}

impl Plan {
    /// The GNN plan, or None for an `[embedding]` plan.
    pub(crate) fn gnn(&self) -> Option<&RustPlan> {
        match &self.plan {
            AnyPlan::Gnn(p) => Some(p),
            AnyPlan::Embedding(_) => None,
        }
    }

    /// The `[embedding]` plan, or None for a GNN plan.
    pub(crate) fn embedding(&self) -> Option<&EmbeddingPlan> {
        match &self.plan {
            AnyPlan::Embedding(p) => Some(p),
            AnyPlan::Gnn(_) => None,
        }
    }
}

#[pymethods]
impl Plan {
    #[staticmethod]
    #[pyo3(signature = (path, overrides = Vec::new()))]
    fn load(path: PathBuf, overrides: Vec<String>) -> PyResult<Plan> {
        guard(|| {
            let plan = lib(AnyPlan::load(&path, &overrides))?;
            Ok(Plan {
                path,
                overrides,
                plan,
            })
        })
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }
    #[getter]
    fn is_embedding(&self) -> bool {
        self.gnn().is_none()
    }
    #[getter]
    fn overrides(&self) -> Vec<String> {
        self.overrides.clone()
    }
}

/// The shipped plans, built into the extension as into the `saintflow` binary (issue 54,
/// item 8): one dict per plan, `name`, `task` (`node`, `link`, `embedding`), `cora` (the
/// figure of plans/README.md's table, or None) and `description`. A name is what
/// `Plan.load` and `train` take.
#[pyfunction]
pub(crate) fn shipped_plans(py: Python<'_>) -> PyResult<Vec<Bound<'_, pyo3::types::PyDict>>> {
    saintflow::plan::shipped::shipped()
        .iter()
        .map(|p| {
            let d = pyo3::types::PyDict::new(py);
            d.set_item("name", p.name)?;
            d.set_item("task", p.task())?;
            d.set_item("cora", p.cora())?;
            d.set_item("description", p.description())?;
            Ok(d)
        })
        .collect()
}
