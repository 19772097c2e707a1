//! Facts: what the IR knows about a value before it exists — its kind and its symbolic
//! shape. Dimensions are either known when the plan is loaded (feature widths, classes,
//! hidden sizes) or symbols resolved per step once the subgraph is sampled (its node count
//! `n` and its entry count `nnz`, and a link plan's scored pairs `e`).

use std::fmt;

/// One dimension of a value: a linear form `known + nodes·n + entries·nnz + pairs·e` in the
/// per-step symbols (`nnz + n` is the entry count of an adjacency with self loops added; `e`
/// the pairs a link plan scores: targets and negatives).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Dim {
    /// The constant part.
    pub known: usize,
    /// Coefficient of the subgraph's node count `n`.
    pub nodes: usize,
    /// Coefficient of the subgraph's entry count `nnz`.
    pub entries: usize,
    /// Coefficient of the step's scored pairs `e` (link plans).
    pub pairs: usize,
    /// Set on a relation's adjacency (`A[r]` on a typed store holds relation r's entries
    /// alone): the dimension is then at most its resolved value (`nnz_r ≤ nnz`), a bound
    /// rather than a count, since the per-relation counts are not bound per step.
    pub relation: Option<u32>,
}

impl Dim {
    /// The subgraph's node count, `n`.
    pub const NODES: Dim = Dim {
        known: 0,
        nodes: 1,
        entries: 0,
        pairs: 0,
        relation: None,
    };
    /// The subgraph's entry count (directed edges), `nnz`.
    pub const ENTRIES: Dim = Dim {
        known: 0,
        nodes: 0,
        entries: 1,
        pairs: 0,
        relation: None,
    };
    /// The step's scored pairs (a link plan's targets and their negatives), `e`.
    pub const PAIRS: Dim = Dim {
        known: 0,
        nodes: 0,
        entries: 0,
        pairs: 1,
        relation: None,
    };

    /// A dimension known when the plan is loaded.
    pub const fn known(k: usize) -> Dim {
        Dim {
            known: k,
            nodes: 0,
            entries: 0,
            pairs: 0,
            relation: None,
        }
    }

    /// Relation r's entries among the subgraph's nodes, `nnz_r` (at most `nnz`).
    pub const fn relation_entries(r: u32) -> Dim {
        Dim {
            known: 0,
            nodes: 0,
            entries: 1,
            pairs: 0,
            relation: Some(r),
        }
    }

    /// The dimension's value for one step (for a relation's entries, its bound `nnz`).
    pub fn resolve(self, b: &Bindings) -> usize {
        self.known + self.nodes * b.nodes + self.entries * b.entries + self.pairs * b.pairs
    }

    /// Whether a value's actual extent `v` fits the dimension under `b`: equal to it, or
    /// for a relation's entries at most it.
    pub fn admits(self, v: usize, b: &Bindings) -> bool {
        match self.relation {
            None => v == self.resolve(b),
            Some(_) => v <= self.resolve(b),
        }
    }

    /// The value when known at load time.
    pub fn as_known(self) -> Option<usize> {
        (self.nodes == 0 && self.entries == 0 && self.pairs == 0).then_some(self.known)
    }

    /// The sum of two dimensions (concatenated widths).
    pub fn plus(self, o: Dim) -> Dim {
        Dim {
            known: self.known + o.known,
            nodes: self.nodes + o.nodes,
            entries: self.entries + o.entries,
            pairs: self.pairs + o.pairs,
            relation: self.relation.or(o.relation),
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let nnz = match self.relation {
            Some(r) => format!("nnz_r{r}"),
            None => "nnz".to_string(),
        };
        for (c, sym) in [
            (self.entries, nnz.as_str()),
            (self.nodes, "n"),
            (self.pairs, "e"),
        ] {
            match c {
                0 => {}
                1 => parts.push(sym.to_string()),
                c => parts.push(format!("{c}·{sym}")),
            }
        }
        if self.known != 0 || parts.is_empty() {
            parts.push(self.known.to_string());
        }
        f.write_str(&parts.join("+"))
    }
}

/// Values of the per-step symbols: known once a subgraph is sampled, or estimated (the
/// sampler's budget and the graph's mean degree) for the planner's static decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bindings {
    /// Subgraph nodes, `n`.
    pub nodes: usize,
    /// Subgraph entries, `nnz`.
    pub entries: usize,
    /// Scored pairs of a link plan's step, `e` (0 for node classification).
    pub pairs: usize,
}

impl Bindings {
    /// A subgraph of `nodes` nodes and `entries` entries, no pairs.
    pub fn new(nodes: usize, entries: usize) -> Bindings {
        Bindings {
            nodes,
            entries,
            pairs: 0,
        }
    }
}

/// What a value is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Fact {
    /// A row-major f32 matrix (a bias or a row vector has one row).
    Dense {
        /// Rows.
        rows: Dim,
        /// Columns.
        cols: Dim,
    },
    /// A sparse matrix on a sampled subgraph's pattern: CSR structure (with the Algorithm-6
    /// transpose permutation) plus `heads` f32 values per entry. Its gradient is the dense
    /// `nnz × heads` matrix of per-entry value gradients.
    Sparse {
        /// Rows (= columns: adjacencies are square).
        rows: Dim,
        /// Stored entries.
        nnz: Dim,
        /// Values per entry (attention heads; 1 for a plain adjacency).
        heads: usize,
    },
    /// A sampled subgraph: original node ids + induced CSR.
    Subgraph,
    /// Per-node training targets of a subgraph with their loss weights.
    Targets {
        /// Classes (columns of the logits the targets are compared with).
        classes: usize,
    },
    /// One f64 number (a loss).
    Scalar,
}

impl Fact {
    /// Whether the value's shape is the same in every step: a dense matrix or sparse
    /// pattern not sized by n or nnz, or a scalar (parameters and what is computed from
    /// them alone).
    pub fn is_static(&self) -> bool {
        match *self {
            Fact::Dense { rows, cols } => rows.as_known().is_some() && cols.as_known().is_some(),
            Fact::Scalar => true,
            Fact::Sparse { .. } | Fact::Subgraph | Fact::Targets { .. } => false,
        }
    }

    /// A dense matrix fact.
    pub fn dense(rows: Dim, cols: Dim) -> Fact {
        Fact::Dense { rows, cols }
    }

    /// `(rows, cols)` of a dense or sparse matrix.
    pub fn matrix(&self) -> Option<(Dim, Dim)> {
        match *self {
            Fact::Dense { rows, cols } => Some((rows, cols)),
            Fact::Sparse { rows, .. } => Some((rows, rows)),
            _ => None,
        }
    }

    /// The kind, for argument checks and messages.
    pub fn kind(&self) -> Kind {
        match self {
            Fact::Dense { .. } => Kind::Dense,
            Fact::Sparse { .. } => Kind::Sparse,
            Fact::Subgraph => Kind::Subgraph,
            Fact::Targets { .. } => Kind::Targets,
            Fact::Scalar => Kind::Scalar,
        }
    }

    /// Bytes of the value for one step (0 for subgraphs and targets, which the sampler
    /// owns); saturating at `usize::MAX`, so an estimate for absurd sizes (the memory
    /// check's) never overflows.
    pub fn bytes(&self, b: &Bindings) -> usize {
        match *self {
            Fact::Dense { rows, cols } => 4usize
                .saturating_mul(rows.resolve(b))
                .saturating_mul(cols.resolve(b)),
            Fact::Sparse { nnz, heads, .. } => {
                4usize.saturating_mul(heads).saturating_mul(nnz.resolve(b))
            }
            Fact::Scalar => 8,
            Fact::Subgraph | Fact::Targets { .. } => 0,
        }
    }

    /// The fact of this value's gradient: the same for dense and scalar values, per-entry
    /// values for sparse ones; none for subgraphs and targets.
    pub fn grad(&self) -> Option<Fact> {
        match *self {
            Fact::Dense { .. } | Fact::Scalar => Some(self.clone()),
            Fact::Sparse { nnz, heads, .. } => Some(Fact::dense(nnz, Dim::known(heads))),
            Fact::Subgraph | Fact::Targets { .. } => None,
        }
    }
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fact::Dense { rows, cols } => write!(f, "[{rows}, {cols}]"),
            Fact::Sparse { rows, nnz, heads } => {
                write!(f, "sparse[{rows}, {rows}; {nnz}")?;
                if *heads != 1 {
                    write!(f, "; heads={heads}")?;
                }
                f.write_str("]")
            }
            Fact::Subgraph => f.write_str("subgraph"),
            Fact::Targets { classes } => write!(f, "targets[n; {classes}]"),
            Fact::Scalar => f.write_str("scalar"),
        }
    }
}

/// The kind of a value, as op signatures state it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A dense matrix.
    Dense,
    /// A sparse matrix on a subgraph's pattern.
    Sparse,
    /// A sampled subgraph.
    Subgraph,
    /// Training targets.
    Targets,
    /// A number.
    Scalar,
    /// Dense or sparse (matrix products).
    Matrix,
}

impl Kind {
    /// Whether a value of kind `k` fits where `self` is expected.
    pub fn accepts(self, k: Kind) -> bool {
        self == k || (self == Kind::Matrix && matches!(k, Kind::Dense | Kind::Sparse))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Dense => "a dense matrix",
            Kind::Sparse => "a sparse adjacency",
            Kind::Subgraph => "a subgraph",
            Kind::Targets => "targets",
            Kind::Scalar => "a scalar",
            Kind::Matrix => "a matrix",
        })
    }
}
