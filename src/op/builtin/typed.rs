//! Issue 57 item 3: the ops of plans over a typed store's relations and node types.
//!
//! * [`RelAdjacency`] (`A_mean[r]`, `A[r]`, `A_sym_noloop[r]`, `A_col[r]`): relation r's
//!   adjacency over the subgraph's rows of every node, with r's entries alone: rows of r's
//!   source type hold their r-neighbours, other rows are empty. Its transpose (the
//!   backward SpMM's) has the reverse relation's pattern, kept beside it with the
//!   permutation between the two ([`crate::sample::transpose_between`]); a relation that
//!   is its own reverse is symmetric and keeps none. The fact's nnz is the relation's
//!   entry count `nnz_r`, checked as at most the step's entries (the per-relation counts
//!   are not bound per step). R relations cost one pass over the union's entries in all,
//!   where the union's pattern with 0 off r (up to 6b8763b) cost one per relation.
//!   Normalisation: d(u) = |N_u^r| (R-GCN's c_{u,r}), d(v) = |N_v^{r⁻¹}|, both at least 1,
//!   through the one formula [`AdjNorm`](super::source::AdjNorm)`::value`; `A_saint[r]`
//!   GraphSAINT's per relation (the sampler's weights over the sampled graph's relation
//!   degrees, [`saint_values`]). A full-graph
//!   sampler hands out the same relations at every step, so the matrix is built once.
//! * [`TypeInput`] (`[input]`, a type with features): the subgraph nodes' features of one
//!   node type, `[n, F_t]`, rows of the other types 0.
//! * [`TypeRows`] (`[input]`, a type without features): rows of a learned `[count(t), d]`
//!   table at the subgraph's nodes of type t, other rows 0; its backward (the same op,
//!   `scatter`) scatters ∇y into the table's rows (the rows the step touched; the optimiser updates
//!   only rows with a gradient, see `Lowered::sparse_rows`).
//! * [`BasisWeight`] (`basis(a, V, r)`): R-GCN's basis decomposition
//!   W_r = Σ_b a[r, b] · V_b (Schlichtkrull et al. 2018, Eq. 3), V the B blocks of rows
//!   `[B·in, out]` stacked, a `[R, B]`; backward [`BasisWeightGrad`]:
//!   ∂a[r, b] = ⟨∇W_r, V_b⟩ (row r only), ∂V_b = a[r, b] · ∇W_r.
//! * [`RelationBlock`] (`q[r]`): relation r's block of a value stacked one block of rows
//!   per relation, `[R·k, c]` → `[k, c]` (RGAT's per-relation attention vectors, k = 1;
//!   per-relation weights without bases, k = in); its backward (the same op, `scatter`)
//!   puts ∇ into block r of zeros.

use std::sync::{Arc, Mutex, Weak};

use crate::ir::GraphSource;
use crate::ir::{Dim, Fact, Kind, NodeId, SparseMat, Structure, Tensor, Value};
use crate::op::{Arity, Ctx, GradBuilder, Op, OpError, RowLocal, SourceKind, SourceOp, Stage};
use crate::sample::typed::{SubRelation, SubgraphTypes};
use crate::sample::Subgraph;

use super::dense;
use super::source::AdjKind;

fn subgraph<'v>(inputs: &[&'v Value], i: usize, op: &str) -> Result<&'v Arc<Subgraph>, OpError> {
    inputs[i]
        .as_subgraph()
        .ok_or_else(|| OpError::args(format!("{op}: argument {} is not a subgraph", i + 1)))
}

/// Whether `kind` can be a relation's adjacency (no self loops).
pub fn relation_flavour(kind: AdjKind) -> bool {
    matches!(
        kind,
        AdjKind::Raw | AdjKind::Mean | AdjKind::SymNoLoops | AdjKind::Col | AdjKind::Saint
    )
}

/// For each entry of one row (`row`, sorted column ids), whether it is in `rel` (a sorted
/// subset of `row`): the flags, and how many.
pub fn member_flags(row: &[u32], rel: &[u32], flags: &mut Vec<bool>) -> usize {
    flags.clear();
    let mut k = 0usize;
    for &v in row {
        while k < rel.len() && rel[k] < v {
            k += 1;
        }
        flags.push(k < rel.len() && rel[k] == v);
    }
    rel.len()
}

/// One relation's adjacency over a subgraph's rows (see the module header).
#[derive(Debug)]
pub struct RelAdjacency {
    /// The flavour (see [`relation_flavour`]).
    pub kind: AdjKind,
    /// The relation's id in the store.
    pub relation: usize,
    /// Its reverse's id (the transposed pattern; the column side's degrees).
    pub reverse: usize,
    /// The relation as a plan names it (`paper cites paper`), for `explain`.
    pub name: String,
    /// The matrix built on the source's fixed subgraph
    /// ([`GraphSource::fixed_sample`](crate::ir::GraphSource::fixed_sample): a
    /// full-graph sampler's, the same at every step), keyed by its relations: built once.
    /// Held weakly: a dropped subgraph never matches again.
    built: Mutex<Option<(Weak<SubgraphTypes>, SparseMat)>>,
}

impl RelAdjacency {
    /// Relation `relation` (reverse `reverse`) in flavour `kind`.
    pub fn new(kind: AdjKind, relation: usize, reverse: usize, name: String) -> RelAdjacency {
        RelAdjacency {
            kind,
            relation,
            reverse,
            name,
            built: Mutex::new(None),
        }
    }

    /// The matrix on `sub`'s relations (`typed`): r's entries as an n-row CSR, its
    /// transpose's pattern the reverse's entries (none kept when r is its own reverse) and
    /// the permutation between them; d(u) = |N_u^r|, d(v) = |N_v^{r⁻¹}|, both at least 1
    /// — or, for `A_saint[r]`, the sampler's weights over the degrees in the graph sampled
    /// from (`source`'s; [`saint_values`]).
    fn build(
        &self,
        sub: &Subgraph,
        typed: &SubgraphTypes,
        source: Option<&dyn GraphSource>,
    ) -> Result<SparseMat, OpError> {
        let n = sub.n_nodes();
        let rel = |r: usize| {
            typed.relations.get(r).ok_or_else(|| {
                OpError::Source(format!(
                    "rel_adj ({}): relation {r} of a subgraph with {} relations",
                    self.name,
                    typed.relations.len()
                ))
            })
        };
        let (fwd, rev) = (rel(self.relation)?, rel(self.reverse)?);
        let starts = &typed.type_starts;
        let (offsets, indices) = rows_of_every_node(starts, fwd, n)?;
        let transposed = (self.reverse != self.relation)
            .then(|| rows_of_every_node(starts, rev, n))
            .transpose()?;
        let (t_offsets, t_indices) = transposed
            .as_ref()
            .map_or((&offsets, &indices), |(o, i)| (o, i));
        let transpose = crate::sample::transpose_between(&offsets, &indices, t_offsets, t_indices)
            .map_err(|(u, v)| {
                OpError::Source(format!(
                    "rel_adj ({}): the subgraph's entry ({u}, {v}) of the relation has no reverse \
                     among relation {}'s",
                    self.name, self.reverse
                ))
            })?;
        let values = if self.kind == AdjKind::Saint {
            let source = source.ok_or_else(|| {
                OpError::Source(format!(
                    "rel_adj ({}): A_saint[r] reads its source",
                    self.name
                ))
            })?;
            saint_values(self, sub, source, (&offsets, &indices))?
        } else {
            let norm = self.kind.norm();
            let degree = |o: &[u32], u: usize| ((o[u + 1] - o[u]) as f32).max(1.0);
            let mut values = Vec::with_capacity(indices.len());
            for u in 0..n {
                let du = degree(&offsets, u);
                let row = &indices[offsets[u] as usize..offsets[u + 1] as usize];
                values.extend(
                    row.iter()
                        .map(|&v| norm.value(du, degree(t_offsets, v as usize))),
                );
            }
            values
        };
        let nnz = values.len();
        Ok(SparseMat {
            structure: Arc::new(Structure {
                offsets,
                indices,
                transpose,
                transposed: transposed.map(Box::new),
            }),
            values: Arc::new(Tensor::from_vec(nnz, 1, values).expect("one value per entry")),
        })
    }
}

/// `A_saint[r]`'s values: GraphSAINT's normalisation of relation r (docs/SAMPLING.md,
/// "Typed graphs: the normalisation"): entry (u, v) of r is
/// (C_u / C_{u,v,r}) / deg_r(u), the sampler's aggregator weight of the entry (for an
/// induced subgraph C_{u,v,r} is the union entry's C_{u,v}: the source's weight of the
/// union subgraph's entry, 1 without counts) over u's degree through r in the graph
/// sampled from (`GraphSource::relation_degree`): the full graph's Ã_r = D_r⁻¹A_r
/// estimated without bias on the subgraph. On the whole graph without counts it is
/// `A_mean[r]`.
fn saint_values(
    adj: &RelAdjacency,
    sub: &Subgraph,
    source: &dyn GraphSource,
    (offsets, indices): (&[u32], &[u32]),
) -> Result<Vec<f32>, OpError> {
    let weights = source.aggregator_weights(sub);
    let mut values = Vec::with_capacity(indices.len());
    for u in 0..sub.n_nodes() {
        let row = &indices[offsets[u] as usize..offsets[u + 1] as usize];
        if row.is_empty() {
            continue;
        }
        let d = source
            .relation_degree(adj.relation, sub.nodes[u])
            .ok_or_else(|| {
                OpError::Source(format!(
                "A_saint[\"{}\"]: the relation's degrees in the graph sampled from are a typed \
                 store's full graph's: sample graph = \"full\"",
                adj.name.replace(' ', "\", \"")
            ))
            })?;
        let d = d.max(1) as f32;
        // The relation's columns are a sorted subset of the union row's: a merge finds each
        // one's union entry (its weight's index).
        let base = sub.offsets[u] as usize;
        let union = &sub.indices[base..sub.offsets[u + 1] as usize];
        let mut k = 0usize;
        for &v in row {
            k += union[k..].partition_point(|&w| w < v);
            let w = weights.as_ref().map_or(1.0, |w| w[base + k]);
            values.push(w / d);
        }
    }
    Ok(values)
}

/// A relation's entries among a subgraph's `n` nodes as an n-row CSR: the rows of its
/// source type's nodes (`starts`, the types' first local ids), every other row empty.
fn rows_of_every_node(
    starts: &[u32],
    r: &SubRelation,
    n: usize,
) -> Result<(Vec<u32>, Vec<u32>), OpError> {
    let (t0, t1) = (starts[r.src] as usize, starts[r.src + 1] as usize);
    if r.offsets.len() != t1 - t0 + 1 || t1 > n {
        return Err(OpError::Source(format!(
            "rel_adj: relation {} has {} row offsets for {} nodes of its source type",
            r.relation,
            r.offsets.len(),
            t1 - t0
        )));
    }
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.resize(t0 + 1, 0u32);
    offsets.extend_from_slice(&r.offsets[1..]);
    let last = *offsets.last().expect("a leading 0");
    offsets.resize(n + 1, last);
    Ok((offsets, r.indices.clone()))
}

impl Op for RelAdjacency {
    fn stage(&self) -> Stage {
        Stage::Sampling
    }
    fn name(&self) -> &str {
        "rel_adj"
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn attrs(&self) -> String {
        format!(
            "kind={} relation={} ({})",
            self.kind.plan_name(),
            self.relation,
            self.name
        )
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Subgraph])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::Sparse {
            rows: Dim::NODES,
            nnz: Dim::relation_entries(self.relation as u32),
            heads: 1,
        })
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let sub = subgraph(inputs, 0, "rel_adj")?;
        let typed = sub.typed.as_ref().ok_or_else(|| {
            OpError::Source(format!(
                "rel_adj ({}): the subgraph carries no relations (a typed store's source attaches them)",
                self.name
            ))
        })?;
        // Kept only for the source's fixed subgraph: a sampled one is not seen again, and
        // a kept matrix would hold its buffers back from the free-list.
        let fixed = ctx
            .source
            .and_then(|s| s.fixed_sample().ok().flatten())
            .is_some_and(|f| Arc::ptr_eq(&f, sub));
        if !fixed {
            return self.build(sub, typed, ctx.source).map(Value::Sparse);
        }
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((key, a)) = built.as_ref() {
            if key.upgrade().is_some_and(|k| Arc::ptr_eq(&k, typed)) {
                return Ok(Value::Sparse(a.clone()));
            }
        }
        let a = self.build(sub, typed, ctx.source)?;
        *built = Some((Arc::downgrade(typed), a.clone()));
        Ok(Value::Sparse(a))
    }
}

/// The subgraph nodes' features of one node type, `[n, F_t]`: row i is node i's features
/// when node i is of type t (global ids `start..end`), else zeros.
#[derive(Debug)]
pub struct TypeInput {
    /// The node type.
    pub ty: usize,
    /// Its name, for `explain`.
    pub name: String,
    /// Its global ids.
    pub start: u32,
    /// One past its last global id.
    pub end: u32,
    /// F_t.
    pub width: usize,
}

impl Op for TypeInput {
    fn stage(&self) -> Stage {
        Stage::Sampling
    }
    fn name(&self) -> &str {
        "type_features"
    }
    fn attrs(&self) -> String {
        format!("type={} width={}", self.name, self.width)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Subgraph])
    }
    fn infer(&self, _: &[&Fact]) -> Result<Fact, OpError> {
        Ok(Fact::dense(Dim::NODES, Dim::known(self.width)))
    }
    fn as_source(&self) -> Option<&dyn SourceOp> {
        Some(self)
    }
    fn forward(&self, inputs: &[&Value], ctx: &Ctx<'_>) -> Result<Value, OpError> {
        let sub = subgraph(inputs, 0, "type_features")?;
        let (lo, hi) = type_span(&sub.nodes, self.start, self.end);
        let mut t = Tensor::zeros(sub.n_nodes(), self.width);
        ctx.source("type_features")?.type_features(
            self.ty,
            &sub.nodes[lo..hi],
            &mut t.data[lo * self.width..hi * self.width],
        )?;
        Ok(Value::dense(t))
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        Some(self)
    }
}

impl RowLocal for TypeInput {}

/// The positions of `nodes` (ascending) in `start..end`.
pub(crate) fn type_span(nodes: &[u32], start: u32, end: u32) -> (usize, usize) {
    let lo = nodes.partition_point(|&v| v < start);
    (lo, lo + nodes[lo..].partition_point(|&v| v < end))
}

/// Rows of a `[count, d]` table at the subgraph's nodes of one type (`type_rows(E,
/// sample)`: rows of other types 0), or, as its backward (`scatter`), ∇y's rows at the
/// type's nodes added into a `[count, d]` gradient (each node once in a subgraph; rows no
/// node touched stay 0): inputs (∇y, sample).
#[derive(Clone, Debug)]
pub struct TypeRows {
    /// The type's name, for `explain`.
    pub name: String,
    /// Its global ids.
    pub start: u32,
    /// One past its last.
    pub end: u32,
    /// The backward: scatter into the table's shape.
    pub scatter: bool,
}

impl TypeRows {
    fn count(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Each (subgraph position, table row) of the subgraph's nodes of the type.
    fn pairs<'s>(&self, sub: &'s Subgraph) -> impl Iterator<Item = (usize, usize)> + 's {
        let (lo, hi) = type_span(&sub.nodes, self.start, self.end);
        let start = self.start;
        (lo..hi).map(move |i| (i, (sub.nodes[i] - start) as usize))
    }
}

impl Op for TypeRows {
    fn name(&self) -> &str {
        if self.scatter {
            "type_rows_backward"
        } else {
            "type_rows"
        }
    }
    fn attrs(&self) -> String {
        format!("type={}", self.name)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Subgraph])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (name, count) = (self.name(), self.count());
        match (inputs[0].matrix(), self.scatter) {
            (Some((_, c)), true) if c.as_known().is_some() => Ok(Fact::dense(Dim::known(count), c)),
            (Some((r, c)), false) if r.as_known() == Some(count) && c.as_known().is_some() => {
                Ok(Fact::dense(Dim::NODES, c))
            }
            _ => Err(OpError::args(format!(
                "{name} ({}): argument 1 is {}, expected {}",
                self.name,
                inputs[0],
                if self.scatter {
                    "∇y [n, d]".to_string()
                } else {
                    format!("the table [{count}, d] (one row per node of the type)")
                }
            ))),
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let name = self.name();
        let x = dense(inputs, 0, name)?;
        let sub = subgraph(inputs, 1, name)?;
        let d = x.cols;
        if self.scatter {
            let mut t = Tensor::zeros(self.count(), d);
            for (i, k) in self.pairs(sub) {
                t.data[k * d..(k + 1) * d]
                    .iter_mut()
                    .zip(x.row(i))
                    .for_each(|(a, &b)| *a += b);
            }
            return Ok(Value::dense(t));
        }
        if x.rows != self.count() {
            return Err(OpError::args(format!(
                "{name} ({}): the table has {} rows, the type {}",
                self.name,
                x.rows,
                self.count()
            )));
        }
        let mut t = Tensor::zeros(sub.n_nodes(), d);
        for (i, k) in self.pairs(sub) {
            t.data[i * d..(i + 1) * d].copy_from_slice(x.row(k));
        }
        Ok(Value::dense(t))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        if self.scatter {
            return Err(OpError::NoBackward {
                op: self.name().to_string(),
            });
        }
        let sample = g.input(1);
        let de = match g.needs_grad(0) {
            true => Some(g.add(
                TypeRows {
                    scatter: true,
                    ..self.clone()
                },
                &[grad, sample],
            )?),
            false => None,
        };
        Ok(vec![de, None])
    }
    fn as_row_local(&self) -> Option<&dyn RowLocal> {
        (!self.scatter).then_some(self as &dyn RowLocal)
    }
}

impl RowLocal for TypeRows {}

/// `basis(a, V, r)`: W_r = Σ_b a[r, b] · V_b, V's B blocks of `in` rows stacked.
#[derive(Clone, Debug)]
pub struct BasisWeight {
    /// r.
    pub relation: usize,
    /// The relation as the plan names it, for `explain`.
    pub name: String,
}

/// Which gradient a [`BasisWeightGrad`] computes: inputs (∇W, a, V).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BasisWrt {
    /// ∂a (`[R, B]`, row r only).
    A,
    /// ∂V (`[B·in, out]`).
    V,
}

/// The backward of [`BasisWeight`].
#[derive(Clone, Debug)]
pub struct BasisWeightGrad {
    /// As the forward's.
    pub relation: usize,
    /// Which input.
    pub wrt: BasisWrt,
}

/// (R, B, in, out) of `a` `[R, B]` and `V` `[B·in, out]`, or an error naming `op`.
fn basis_dims(op: &str, r: usize, a: &Fact, v: &Fact) -> Result<[usize; 4], OpError> {
    let known = |f: &Fact| {
        f.matrix()
            .and_then(|(x, y)| Some((x.as_known()?, y.as_known()?)))
    };
    match (known(a), known(v)) {
        (Some((rr, b)), Some((vr, out))) if b > 0 && vr % b == 0 && vr > 0 && r < rr => {
            Ok([rr, b, vr / b, out])
        }
        _ => Err(OpError::args(format!(
            "{op}: a is {a} and V {v}: expected a [relations, B] (relation {r} a row of it) and V [B·in, out] (B blocks of `in` rows)"
        ))),
    }
}

impl Op for BasisWeight {
    fn name(&self) -> &str {
        "basis"
    }
    fn attrs(&self) -> String {
        format!("relation={} ({})", self.relation, self.name)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let [_, _, i, o] = basis_dims("basis", self.relation, inputs[0], inputs[1])?;
        Ok(Fact::dense(Dim::known(i), Dim::known(o)))
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let (a, v) = (dense(inputs, 0, "basis")?, dense(inputs, 1, "basis")?);
        let b = a.cols;
        let block = v.data.len() / b;
        let mut w = Tensor::zeros(v.rows / b, v.cols);
        for (k, &c) in a.row(self.relation).iter().enumerate() {
            w.data
                .iter_mut()
                .zip(&v.data[k * block..(k + 1) * block])
                .for_each(|(w, &x)| *w += c * x);
        }
        Ok(Value::dense(w))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let (a, v) = (g.input(0), g.input(1));
        let mut out = Vec::with_capacity(2);
        for (i, wrt) in [(0, BasisWrt::A), (1, BasisWrt::V)] {
            out.push(match g.needs_grad(i) {
                true => Some(g.add(
                    BasisWeightGrad {
                        relation: self.relation,
                        wrt,
                    },
                    &[grad, a, v],
                )?),
                false => None,
            });
        }
        Ok(out)
    }
}

impl Op for BasisWeightGrad {
    fn name(&self) -> &str {
        match self.wrt {
            BasisWrt::A => "basis_backward_a",
            BasisWrt::V => "basis_backward_v",
        }
    }
    fn attrs(&self) -> String {
        format!("relation={}", self.relation)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense, Kind::Dense, Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let [_, _, i, o] = basis_dims(self.name(), self.relation, inputs[1], inputs[2])?;
        if inputs[0] != &Fact::dense(Dim::known(i), Dim::known(o)) {
            return Err(OpError::args(format!(
                "{}: ∇W is {}, expected [{i}, {o}]",
                self.name(),
                inputs[0]
            )));
        }
        Ok(match self.wrt {
            BasisWrt::A => inputs[1].clone(),
            BasisWrt::V => inputs[2].clone(),
        })
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let name = self.name();
        let (dw, a, v) = (
            dense(inputs, 0, name)?,
            dense(inputs, 1, name)?,
            dense(inputs, 2, name)?,
        );
        let block = dw.data.len();
        let r = self.relation;
        Ok(Value::dense(match self.wrt {
            BasisWrt::A => {
                let mut da = Tensor::zeros(a.rows, a.cols);
                for k in 0..a.cols {
                    let dot: f64 = dw
                        .data
                        .iter()
                        .zip(&v.data[k * block..(k + 1) * block])
                        .map(|(&g, &x)| f64::from(g) * f64::from(x))
                        .sum();
                    da.data[r * a.cols + k] = dot as f32;
                }
                da
            }
            BasisWrt::V => {
                let mut dv = Tensor::zeros(v.rows, v.cols);
                for (k, &c) in a.row(r).iter().enumerate() {
                    dv.data[k * block..(k + 1) * block]
                        .iter_mut()
                        .zip(&dw.data)
                        .for_each(|(d, &g)| *d = c * g);
                }
                dv
            }
        }))
    }
}

/// `q[r]`: block `relation` of `relations` equal blocks of rows; `scatter`: the backward,
/// `[k, c]` into block `relation` of a `[R·k, c]` zero matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationBlock {
    /// r.
    pub relation: usize,
    /// R.
    pub relations: usize,
    /// The backward.
    pub scatter: bool,
}

impl Op for RelationBlock {
    fn name(&self) -> &str {
        match self.scatter {
            false => "relation_block",
            true => "relation_block_backward",
        }
    }
    fn attrs(&self) -> String {
        format!("relation={} of {}", self.relation, self.relations)
    }
    fn args(&self) -> Arity {
        Arity::Exact(vec![Kind::Dense])
    }
    fn infer(&self, inputs: &[&Fact]) -> Result<Fact, OpError> {
        let (rows, cols) = inputs[0].matrix().expect("dense");
        let r = self.relations;
        match (rows.as_known(), self.scatter) {
            (Some(n), false) if n % r == 0 && n > 0 && self.relation < r => {
                Ok(Fact::dense(Dim::known(n / r), cols))
            }
            (Some(n), true) if n > 0 && self.relation < r => {
                Ok(Fact::dense(Dim::known(n * r), cols))
            }
            _ => Err(OpError::args(format!(
                "{}: {} has no block {} of {r} equal blocks of rows",
                self.name(),
                inputs[0],
                self.relation
            ))),
        }
    }
    fn forward(&self, inputs: &[&Value], _: &Ctx<'_>) -> Result<Value, OpError> {
        let x = dense(inputs, 0, self.name())?;
        let r = self.relation;
        Ok(Value::dense(match self.scatter {
            false => {
                let k = x.rows / self.relations;
                let span = k * x.cols;
                Tensor {
                    rows: k,
                    cols: x.cols,
                    data: x.data[r * span..(r + 1) * span].to_vec(),
                }
            }
            true => {
                let mut out = Tensor::zeros(x.rows * self.relations, x.cols);
                let span = x.data.len();
                out.data[r * span..(r + 1) * span].copy_from_slice(&x.data);
                out
            }
        }))
    }
    fn backward(
        &self,
        g: &mut GradBuilder<'_>,
        grad: NodeId,
    ) -> Result<Vec<Option<NodeId>>, OpError> {
        let back = RelationBlock {
            scatter: !self.scatter,
            ..self.clone()
        };
        Ok(vec![Some(g.add(back, &[grad])?)])
    }
}

impl SourceOp for RelAdjacency {
    fn kind(&self) -> SourceKind {
        SourceKind::RelAdjacency {
            kind: self.kind,
            relation: self.relation as u32,
        }
    }
}

impl SourceOp for TypeInput {
    fn kind(&self) -> SourceKind {
        SourceKind::TypeFeatures {
            ty: self.ty as u32,
            start: self.start,
            end: self.end,
        }
    }
}
