//! Source ops: the step's sampled subgraph, its feature rows and targets, its adjacency in
//! each normalisation flavour, parameters, and the seed gradient. They read the
//! [`GraphSource`](crate::op::GraphSource) or the parameter store, not other nodes' data.

use std::sync::Arc;

use crate::ir::{Bindings, Dim, Fact, Kind, Structure, Tensor, Value};
use crate::op::{Arity, Cost, Ctx, Op, OpError, SourceKind, SourceOp, Stage};
use crate::sample::Subgraph;
use crate::store::StoreError;

/// The step's subgraph (sample → dedup → clip → induce, by the source's sampler).
#[derive(Debug)]
pub struct Sample;

impl Op for Sample {
    fn stage(&self) -> Stage {
        Stage::Sampling
    }

    fn name(&self) -> &str {
        "sample"
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::Subgraph)
    }
    fn cost(&self, _: &[&Fact], _: &Fact, b: &Bindings) -> Cost {
        // Induction writes the CSR: 4 bytes per offset and per index, 8 per parent entry.
        Cost {
            flops: 0.0,
            bytes_read: (8 * b.entries) as f64,
            bytes_written: (4 * b.nodes + 16 * b.entries) as f64,
        }
    }
    fn forward(&self, _: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let source = ctx.source("sample")?;
        Ok(Value::Subgraph(match source.fixed_sample()? {
            Some(sub) => sub,
            None => Arc::new(source.sample(ctx.step)?),
        }))
    }
}

fn subgraph<'v>(inputs: &[&'v Value], op: &str) -> Result<&'v Arc<Subgraph>, OpError> {
    inputs[0]
        .as_subgraph()
        .ok_or_else(|| OpError::args(format!("{op}: argument 1 is not a subgraph")))
}

/// The feature rows of the subgraph's nodes, gathered from the (mapped) store: n × F.
#[derive(Debug)]
pub struct Features {
    /// F.
    pub width: usize,
}

impl Op for Features {
    fn stage(&self) -> Stage {
        Stage::Sampling
    }

    fn name(&self) -> &str {
        "features"
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn attrs(&self) -> String {
        format!("width={}", self.width)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Subgraph])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::dense(Dim::NODES, Dim::known(self.width)))
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let sub = subgraph(inputs, "features")?;
        let source = ctx.source("features")?;
        if source.n_features() != self.width {
            return Err(OpError::Source(format!(
                "features: the graph has {} features, the plan was lowered for {}",
                source.n_features(),
                self.width
            )));
        }
        let mut t = Tensor::zeros(sub.n_nodes(), self.width);
        source.features(&sub.nodes, &mut t.data)?;
        Ok(Value::dense(t))
    }
}

/// The subgraph nodes' targets and loss weights.
#[derive(Debug)]
pub struct TargetsOp {
    /// C.
    pub classes: usize,
}

impl Op for TargetsOp {
    fn stage(&self) -> Stage {
        Stage::Sampling
    }

    fn name(&self) -> &str {
        "targets"
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn attrs(&self) -> String {
        format!("classes={}", self.classes)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Subgraph])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::Targets {
            classes: self.classes,
        })
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let sub = subgraph(inputs, "targets")?;
        let t = ctx.source("targets")?.targets(sub)?;
        if t.classes != self.classes {
            return Err(OpError::Source(format!(
                "targets: the graph has {} classes, the plan was lowered for {}",
                t.classes, self.classes
            )));
        }
        Ok(Value::Targets(Arc::new(t)))
    }
}

pub use crate::ir::op::{AdjKind, AdjNorm};

/// A subgraph's adjacency matrix in one flavour.
#[derive(Debug)]
pub struct Adjacency {
    /// The flavour.
    pub kind: AdjKind,
}

/// Inserts the diagonal into every row (rows stay sorted).
fn with_self_loops(sub: &Subgraph) -> (Vec<u32>, Vec<u32>) {
    let n = sub.n_nodes();
    let mut offsets = Vec::with_capacity(n + 1);
    let mut indices = Vec::with_capacity(sub.n_entries() + n);
    offsets.push(0u32);
    for u in 0..n {
        let row = sub.neighbors(u);
        let at = row.partition_point(|&v| (v as usize) < u);
        indices.extend_from_slice(&row[..at]);
        indices.push(u as u32);
        indices.extend_from_slice(&row[at..]);
        offsets.push(indices.len() as u32);
    }
    (offsets, indices)
}

impl Op for Adjacency {
    fn stage(&self) -> Stage {
        Stage::Sampling
    }

    fn name(&self) -> &str {
        "adj"
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn attrs(&self) -> String {
        format!("kind={}", self.kind.plan_name())
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Subgraph])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        let nnz = match self.kind.self_loops() {
            true => Dim::ENTRIES.plus(Dim::NODES),
            false => Dim::ENTRIES,
        };
        Ok(Fact::Sparse {
            rows: Dim::NODES,
            nnz,
            heads: 1,
        })
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let sub = subgraph(inputs, "adj")?;
        let n = sub.n_nodes();
        let deg = |u: usize| (sub.offsets[u + 1] - sub.offsets[u]) as f32;
        let (structure, values) = match self.kind {
            AdjKind::Saint => {
                let s = Structure::of(sub).map_err(|e| OpError::Source(e.to_string()))?;
                let mut v = vec![1.0f32; s.nnz()];
                {
                    let source = ctx.source("adj(kind=A_saint)")?;
                    if let Some(w) = source.aggregator_weights(sub) {
                        v.copy_from_slice(&w);
                    }
                    for u in 0..n {
                        let d = source.degree(sub.nodes[u]).max(1) as f32;
                        v[s.row(u)].iter_mut().for_each(|x| *x /= d);
                    }
                }
                (s, v)
            }
            kind => {
                let s = if kind.self_loops() {
                    let (offsets, indices) = with_self_loops(sub);
                    let transpose = crate::sample::transpose_permutation(&offsets, &indices)
                        .map_err(|(u, v)| {
                            let id = |i: u32| sub.nodes.get(i as usize).copied().unwrap_or(i);
                            OpError::Source(StoreError::not_symmetric(id(u), id(v)).to_string())
                        })?;
                    Structure {
                        offsets,
                        indices,
                        transpose,
                        transposed: None,
                    }
                } else {
                    Structure::of(sub).map_err(|e| OpError::Source(e.to_string()))?
                };
                // The degree in this adjacency: a self-loop counts.
                let loops = f32::from(u8::from(kind.self_loops()));
                let d: Vec<f32> = (0..n).map(|u| (deg(u) + loops).max(1.0)).collect();
                let mut v = Vec::with_capacity(s.nnz());
                for u in 0..n {
                    for k in s.row(u) {
                        v.push(kind.norm().value(d[u], d[s.indices[k] as usize]));
                    }
                }
                (s, v)
            }
        };
        let nnz = values.len();
        Ok(Value::Sparse(crate::ir::SparseMat {
            structure: Arc::new(structure),
            values: Arc::new(Tensor::from_vec(nnz, 1, values).expect("one value per entry")),
        }))
    }
}

/// A trainable parameter: reads its current value from the parameter store.
#[derive(Debug)]
pub struct Param {
    /// Its name in the store.
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

impl Op for Param {
    fn name(&self) -> &str {
        "param"
    }
    fn attrs(&self) -> String {
        format!("name={}", self.name)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::dense(Dim::known(self.rows), Dim::known(self.cols)))
    }
    fn cost(&self, _: &[&Fact], _: &Fact, _: &Bindings) -> Cost {
        Cost::default()
    }
    fn forward(&self, _: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let t = ctx
            .params
            .get(&self.name)
            .ok_or_else(|| OpError::Missing(format!("parameter {} has no value", self.name)))?;
        if (t.rows, t.cols) != (self.rows, self.cols) {
            return Err(OpError::Missing(format!(
                "parameter {} is {}×{}, expected {}×{}",
                self.name, t.rows, t.cols, self.rows, self.cols
            )));
        }
        // A copy into a recycled buffer: a fresh one of a 1024×512 weight cost a step 2 MiB
        // of page faults (1 ms), the copy itself 0.1.
        let mut y = Tensor::scratch(t.rows, t.cols);
        y.data.copy_from_slice(&t.data);
        Ok(Value::dense(y))
    }
}

/// The number 1: the gradient of the loss with respect to itself.
#[derive(Debug)]
pub struct One;

impl Op for One {
    fn name(&self) -> &str {
        "one"
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::Scalar)
    }
    fn forward(&self, _: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        Ok(Value::Scalar(1.0))
    }
}

impl SourceOp for Sample {
    fn kind(&self) -> SourceKind {
        SourceKind::Subgraph
    }
}

impl SourceOp for Features {
    fn kind(&self) -> SourceKind {
        SourceKind::Features
    }
}

impl SourceOp for TargetsOp {
    fn kind(&self) -> SourceKind {
        SourceKind::Targets
    }
}

impl SourceOp for Adjacency {
    fn kind(&self) -> SourceKind {
        SourceKind::Adjacency(self.kind)
    }
}

impl SourceOp for One {
    fn kind(&self) -> SourceKind {
        SourceKind::Seed
    }
}
