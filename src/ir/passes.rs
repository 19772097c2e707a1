//! What the planner's passes ask of an op, as capabilities of [`Op`](super::op::Op) (each a small trait,
//! default off for a user's op): feature partitions, chain roles, source kinds, column
//! slices and views, a choice of precision; and the types they answer with ([`ChainRole`],
//! [`SourceKind`] with the adjacency flavours [`AdjKind`]). Re-exported by [`super::op`]
//! and `saintflow::op`; the protocol is in [`super::op`]'s header.

use std::ops::Range;

/// Capability: what the matrix-chain pass sees in an op (see "Chain roles" in
/// [`super::op`]'s protocol). Returned by [`Op::as_chain`](super::op::Op::as_chain).
pub trait ChainLink {
    /// A chain to order, a binary product, or a transpose copy.
    fn role(&self) -> ChainRole;
}

/// Capability: a source op (see "Source kinds" in [`super::op`]'s protocol). Returned by
/// [`Op::as_source`](super::op::Op::as_source).
pub trait SourceOp {
    /// What it reads.
    fn kind(&self) -> SourceKind;
}

/// Capability: a column slice (`slice`). Returned by [`Op::as_column_slice`](super::op::Op::as_column_slice).
pub trait ColumnSlice {
    /// The columns of its one input it passes on whole and unchanged.
    fn columns(&self) -> Range<usize>;
}

/// What the matrix-chain pass sees in an op (see [`Op::as_chain`](super::op::Op::as_chain)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainRole {
    /// An unordered chain M₁·…·M_k of its inputs, operand i used transposed when flag i
    /// is set: the pass replaces it by binary products in the best order.
    Chain(Vec<bool>),
    /// The binary product op(input 0)·op(input 1), the flags saying which is transposed.
    Product(bool, bool),
    /// A row-major copy of input 0's transpose.
    Transpose,
}

/// Adjacency flavours of a subgraph (the plan names `A`, `A_mean`, `A_sym`, `A_saint`, and
/// the variants with or without self-loops and by columns: `A_sym_noloop`, `A_mean_loop`,
/// `A_col`, `A_col_loop`). D is the degree in the adjacency itself: with self-loops, the
/// subgraph degree + 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdjKind {
    /// A: 1 per edge.
    Raw,
    /// D⁻¹A, D the subgraph degrees (mean aggregation; rows normalised).
    Mean,
    /// (I+D)^-½ (I+A) (I+D)^-½ (Kipf & Welling), self loops added.
    Sym,
    /// GraphSAINT's normalisation: entry (u, v) = (C_u / C_uv) / deg(u), deg the degree in
    /// the graph sampled from, C the sampler's counts (1 when not estimated).
    Saint,
    /// D^-½ A D^-½ without self-loops: PyG's `gcn_norm(add_self_loops=False)`, the
    /// normalisation of its `TAGConv` (and of `SGConv` with self-loops turned off).
    SymNoLoops,
    /// (I+D)⁻¹(I+A): the mean over the neighbours and the node itself (rows normalised).
    MeanLoops,
    /// A D⁻¹: columns normalised, entry (u, v) = 1/deg(v) (the transpose of `A_mean`: what a
    /// node sends is split among its neighbours, a random walk's transition matrix Pᵀ).
    Col,
    /// (I+A)(I+D)⁻¹: `A_col` with self-loops.
    ColLoops,
}

/// How an [`AdjKind`] normalises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdjNorm {
    /// Values 1.
    None,
    /// 1/d(u) for entry (u, v).
    Rows,
    /// 1/d(v).
    Cols,
    /// 1/√(d(u)·d(v)).
    Sym,
}

impl AdjNorm {
    /// The value of entry (u, v), d(u) and d(v) the degrees in the flavour (at least 1):
    /// the one formula of the step's adjacency and of full-graph inference's (`Sym` as the
    /// product of the two reciprocal roots, the bits `A_sym` always had).
    pub fn value(self, du: f32, dv: f32) -> f32 {
        match self {
            AdjNorm::None => 1.0,
            AdjNorm::Rows => 1.0 / du,
            AdjNorm::Cols => 1.0 / dv,
            AdjNorm::Sym => (1.0 / du.sqrt()) * (1.0 / dv.sqrt()),
        }
    }
}

impl AdjKind {
    /// The name a plan file uses.
    pub fn plan_name(self) -> &'static str {
        match self {
            AdjKind::Raw => "A",
            AdjKind::Mean => "A_mean",
            AdjKind::Sym => "A_sym",
            AdjKind::Saint => "A_saint",
            AdjKind::SymNoLoops => "A_sym_noloop",
            AdjKind::MeanLoops => "A_mean_loop",
            AdjKind::Col => "A_col",
            AdjKind::ColLoops => "A_col_loop",
        }
    }

    /// Whether the flavour adds a self-loop to every row.
    pub fn self_loops(self) -> bool {
        matches!(self, AdjKind::Sym | AdjKind::MeanLoops | AdjKind::ColLoops)
    }

    /// How the flavour normalises (`A_saint`: by rows, with its own degrees and weights).
    pub fn norm(self) -> AdjNorm {
        match self {
            AdjKind::Raw => AdjNorm::None,
            AdjKind::Mean | AdjKind::MeanLoops | AdjKind::Saint => AdjNorm::Rows,
            AdjKind::Col | AdjKind::ColLoops => AdjNorm::Cols,
            AdjKind::Sym | AdjKind::SymNoLoops => AdjNorm::Sym,
        }
    }

    /// Every flavour.
    pub const ALL: [AdjKind; 8] = [
        AdjKind::Raw,
        AdjKind::Mean,
        AdjKind::Sym,
        AdjKind::Saint,
        AdjKind::SymNoLoops,
        AdjKind::MeanLoops,
        AdjKind::Col,
        AdjKind::ColLoops,
    ];
}

/// What a source op reads (see [`Op::as_source`](super::op::Op::as_source)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// The step's subgraph (the whole graph in full-graph inference).
    Subgraph,
    /// The subgraph nodes' feature rows.
    Features,
    /// The subgraph nodes' targets.
    Targets,
    /// The subgraph's adjacency in a flavour.
    Adjacency(AdjKind),
    /// One relation's adjacency of a typed store in a flavour (issue 57: `A_mean[r]`):
    /// rows of every node, nonzero only at the relation's entries.
    RelAdjacency {
        /// The flavour (`A` or `A_mean`).
        kind: AdjKind,
        /// The relation's id in the store.
        relation: u32,
    },
    /// One node type's feature rows over the subgraph's nodes (issue 57's `[input]`):
    /// zeros at the rows of other types.
    TypeFeatures {
        /// The type's index in the store.
        ty: u32,
        /// Its first global id.
        start: u32,
        /// One past its last.
        end: u32,
    },
    /// The seed gradient (the number 1) autodiff starts from.
    Seed,
}
