//! Ops written in Python (`saintflow.register_op`): `PyOpDef` (forward, optional backward,
//! arity, attribute names) kept in `PY_OPS` in registration order; `PyRowOp`, a `RowWise`
//! op calling the Python callable on each row block with the GIL (its backward one
//! `PyRowOp` per input); `registry()`, the built-ins and every Python op, which training
//! and inference use; and `_check_op_gradients`, the finite-difference check every Rust op
//! passes.

use std::sync::{Arc, Mutex, MutexGuard};

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use saintflow::ir::NodeId;
use saintflow::op::{row_wise, Attr, GradBuilder, MatMut, MatRef, OpError, Registry, RowWise};

use crate::error::{guard, SaintflowError, TrainError};
use crate::runtime::on_pool;

/// An op written in Python (`saintflow.register_op`): forward and backward are callables
/// on float32 numpy row blocks.
struct PyOpDef {
    name: String,
    forward: Py<PyAny>,
    backward: Option<Py<PyAny>>,
    arity: usize,
    attrs: Vec<String>,
    doc: String,
}

/// The Python ops registered in this process, in registration order.
static PY_OPS: Mutex<Vec<Arc<PyOpDef>>> = Mutex::new(Vec::new());

/// `PY_OPS` locked, for every reader and writer of the table.
fn py_ops() -> PyResult<MutexGuard<'static, Vec<Arc<PyOpDef>>>> {
    PY_OPS
        .lock()
        .map_err(|_| SaintflowError::new_err("the op table was poisoned"))
}

/// A Python op (or, with `grad_of = Some(i)`, its gradient with respect to input i) as a
/// row-wise op: row block in, row block out, the GIL taken for the call.
struct PyRowOp {
    def: Arc<PyOpDef>,
    attrs: Vec<(String, Attr)>,
    grad_of: Option<usize>,
    label: String,
}

impl std::fmt::Debug for PyRowOp {
    // The CSE key: the name, the attributes and which gradient (not the callables' ids).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PyRowOp({}, {:?}, {:?})",
            self.label, self.attrs, self.grad_of
        )
    }
}

impl RowWise for PyRowOp {
    fn name(&self) -> &str {
        &self.label
    }

    fn attrs(&self) -> String {
        self.attrs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn arity(&self) -> usize {
        self.def.arity + usize::from(self.grad_of.is_some())
    }

    fn flops_per_element(&self) -> f64 {
        // A call into Python per block: costed high, so the planner never prefers it.
        100.0
    }

    fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
        let (rows, cols) = (y.n_rows(), y.n_cols());
        let mut call = |py: Python<'_>| -> PyResult<()> {
            let args: Vec<Bound<'_, PyAny>> = x
                .iter()
                .map(|m| {
                    let v = Array2::from_shape_vec((m.n_rows(), m.n_cols()), m.to_vec())
                        .expect("a block's rows × cols");
                    v.into_pyarray(py).into_any()
                })
                .collect();
            let kwargs = PyDict::new(py);
            for (k, v) in &self.attrs {
                match v {
                    Attr::Num(n) => kwargs.set_item(k, n)?,
                    Attr::Str(s) => kwargs.set_item(k, s)?,
                    Attr::Bool(b) => kwargs.set_item(k, b)?,
                }
            }
            let f = match self.grad_of {
                None => &self.def.forward,
                Some(_) => self
                    .def
                    .backward
                    .as_ref()
                    .expect("a gradient op has a backward"),
            };
            let args = pyo3::types::PyTuple::new(py, args)?;
            let mut out = f.bind(py).call(args, Some(&kwargs))?;
            if let Some(i) = self.grad_of {
                if self.def.arity > 1 || out.is_instance_of::<pyo3::types::PyTuple>() {
                    out = out.get_item(i)?;
                }
            }
            let np = py.import("numpy")?;
            let arr = np.call_method1("ascontiguousarray", (out, "float32"))?;
            let arr: numpy::PyReadonlyArray2<'_, f32> = arr.extract().map_err(|_| {
                PyException::new_err(format!(
                    "returned an array that is not 2-D, expected ({rows}, {cols})"
                ))
            })?;
            if arr.shape() != [rows, cols] {
                let got = arr.shape();
                return Err(PyException::new_err(format!(
                    "returned shape ({}, {}), expected ({rows}, {cols})",
                    got[0], got[1]
                )));
            }
            let src = arr.as_slice()?;
            for r in 0..rows {
                y.row_mut(r).copy_from_slice(&src[r * cols..(r + 1) * cols]);
            }
            Ok(())
        };
        Python::attach(&mut call).map_err(|e| {
            OpError::Source(format!(
                "{}: the Python {} raised {e}",
                self.label,
                if self.grad_of.is_some() {
                    "backward"
                } else {
                    "forward"
                }
            ))
        })
    }

    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.grad_of.is_some() {
            return Err(OpError::NoBackward {
                op: self.label.clone(),
            });
        }
        if self.def.backward.is_none() {
            return Err(OpError::NoBackward {
                op: self.label.clone(),
            });
        }
        let k = self.def.arity;
        let mut inputs: Vec<NodeId> = (0..k).map(|i| g.input(i)).collect();
        inputs.push(grad);
        let mut out = Vec::with_capacity(k);
        for i in 0..k {
            if !g.needs_grad(i) {
                out.push(None);
                continue;
            }
            let label = if k == 1 {
                format!("{}_backward", self.def.name)
            } else {
                format!("{}_backward{i}", self.def.name)
            };
            let op = row_wise(PyRowOp {
                def: self.def.clone(),
                attrs: self.attrs.clone(),
                grad_of: Some(i),
                label,
            });
            out.push(Some(g.add_arc(op, &inputs)?));
        }
        Ok(out)
    }
}

/// The built-in ops and every Python op registered so far.
pub(crate) fn registry() -> PyResult<Registry> {
    let mut r = Registry::with_builtins();
    let defs = py_ops()?.clone();
    for def in defs {
        let names: Vec<&str> = def.attrs.iter().map(String::as_str).collect();
        let d = def.clone();
        r.register(&def.name, &names, &def.doc, move |attrs| {
            Ok(row_wise(PyRowOp {
                def: d.clone(),
                attrs: attrs
                    .0
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                grad_of: None,
                label: d.name.clone(),
            }))
        })
        .map_err(|e| SaintflowError::new_err(e.to_string()))?;
    }
    Ok(r)
}

/// The widest input `check_op_gradients` takes: its central differences perturb every
/// entry of inputs of a few dozen rows, so a width is a handful, not millions (issue 55
/// item 3: `cols=10**12` aborted on allocation; `cols=0` passed without checking anything).
const MAX_CHECK_COLS: usize = 256;

/// Registers a Python op under `name` (see `saintflow.register_op`).
#[pyfunction]
#[pyo3(signature = (name, forward, backward, arity, attrs, doc))]
pub(crate) fn _register_op(
    name: String,
    forward: Py<PyAny>,
    backward: Option<Py<PyAny>>,
    arity: usize,
    attrs: Vec<String>,
    doc: String,
) -> PyResult<()> {
    if arity == 0 {
        return Err(SaintflowError::new_err(format!(
            "{name}: arity 0: an op takes at least one input"
        )));
    }
    if Registry::with_builtins().contains(&name) {
        return Err(SaintflowError::new_err(format!(
            "{name} is a built-in op: give the Python op another name (e.g. py.{name})"
        )));
    }
    let mut ops = py_ops()?;
    // Registering a name again replaces it (a notebook cell run twice).
    ops.retain(|d| d.name != name);
    ops.push(Arc::new(PyOpDef {
        name,
        forward,
        backward,
        arity,
        attrs,
        doc,
    }));
    Ok(())
}

/// The registered Python ops' names.
#[pyfunction]
pub(crate) fn registered_ops() -> PyResult<Vec<String>> {
    Ok(py_ops()?.iter().map(|d| d.name.clone()).collect())
}

/// The finite-difference gradient check every Rust op passes (`testing::check_op_gradients`),
/// on a registered op with `cols` columns per input and the given attributes.
#[pyfunction]
#[pyo3(signature = (name, cols, attrs))]
pub(crate) fn _check_op_gradients(
    py: Python<'_>,
    name: String,
    cols: usize,
    attrs: &Bound<'_, PyDict>,
) -> PyResult<()> {
    guard(|| {
        if !(1..=MAX_CHECK_COLS).contains(&cols) {
            return Err(PyValueError::new_err(format!(
                "{name}: cols = {cols}: expected 1 ..= {MAX_CHECK_COLS} (the check perturbs \
                 every entry of its small inputs, so its work grows with cols²)"
            )));
        }
        let reg = registry()?;
        let mut a = saintflow::op::Attrs::new();
        for (k, v) in attrs.iter() {
            let k: String = k.extract()?;
            let v = if let Ok(b) = v.extract::<bool>() {
                Attr::Bool(b)
            } else if let Ok(x) = v.extract::<f64>() {
                Attr::Num(x)
            } else {
                Attr::Str(v.extract::<String>()?)
            };
            a = a.with(&k, v);
        }
        let op = reg
            .make(&name, &a)
            .map_err(|e| SaintflowError::new_err(e.to_string()))?;
        let arity = py_ops()?
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.arity)
            .ok_or_else(|| {
                SaintflowError::new_err(format!(
                    "{name}: no Python op of that name (saintflow.register_op registers one)"
                ))
            })?;
        let args: Vec<saintflow::testing::Arg> = (0..arity)
            .map(|_| saintflow::testing::Arg::Nodes(cols))
            .collect();
        on_pool(py, || saintflow::testing::check_op_gradients(op, &args))?
            .map_err(|e| TrainError::new_err(format!("{name}: gradient check failed: {e}")))
    })
}
