//! Values: what flows along the IR's edges at run time. Dense matrices are row-major f32;
//! sparse matrices share their structure (CSR + transpose permutation) by `Arc` and carry
//! their own per-entry values, so an adjacency flavour or an attention layer is a new value
//! array over the same pattern.

use std::sync::Arc;

use crate::sample::Subgraph;

use super::fact::{Bindings, Dim, Fact};

/// A row-major f32 matrix. New and cloned matrices draw their buffers from the
/// [`recycle`](super::recycle) free-list when it holds one that fits.
#[derive(Debug, PartialEq)]
pub struct Tensor {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `rows × cols` values, row-major.
    pub data: Vec<f32>,
}

impl Tensor {
    /// A zero matrix.
    pub fn zeros(rows: usize, cols: usize) -> Tensor {
        Tensor {
            rows,
            cols,
            data: super::recycle::zeroed(rows * cols),
        }
    }

    /// A matrix from its values; `None` when the length disagrees with the shape.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Option<Tensor> {
        (data.len() == rows * cols).then_some(Tensor { rows, cols, data })
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

impl Clone for Tensor {
    fn clone(&self) -> Tensor {
        Tensor {
            rows: self.rows,
            cols: self.cols,
            data: super::recycle::copied(&self.data),
        }
    }
}

/// The pattern of a sparse matrix on a subgraph: square CSR with sorted rows, and the
/// Algorithm-6 permutation that transposes a value array. The pattern is symmetric, except
/// a relation's adjacency on a typed store: its transpose has the reverse relation's
/// entries, kept in `transposed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Structure {
    /// Row offsets, n + 1.
    pub offsets: Vec<u32>,
    /// Column ids, sorted within each row.
    pub indices: Vec<u32>,
    /// `transpose[k]` = position in this pattern of the reverse of the transposed
    /// pattern's entry k (for a symmetric pattern, of the reverse of entry k).
    pub transpose: Vec<u32>,
    /// The transposed matrix's pattern (row offsets, column ids) when it is not this one.
    pub transposed: Option<Box<(Vec<u32>, Vec<u32>)>>,
}

impl Structure {
    /// The structure of a subgraph (computes the transpose permutation: O(nnz)); an error
    /// if the subgraph is not symmetric (a corrupt store).
    pub fn of(sub: &Subgraph) -> Result<Structure, crate::store::StoreError> {
        Ok(Structure {
            offsets: sub.offsets.clone(),
            indices: sub.indices.clone(),
            transpose: sub.transpose_permutation()?,
            transposed: None,
        })
    }

    /// The transposed matrix's pattern: (row offsets, column ids).
    pub fn transposed_pattern(&self) -> (&[u32], &[u32]) {
        match &self.transposed {
            Some(t) => (&t.0, &t.1),
            None => (&self.offsets, &self.indices),
        }
    }

    /// The pattern of the matrix used plain or `transposed`: (row offsets, column ids).
    pub fn pattern(&self, transposed: bool) -> (&[u32], &[u32]) {
        if transposed {
            self.transposed_pattern()
        } else {
            (&self.offsets, &self.indices)
        }
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Entries of row `i`.
    pub fn row(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i] as usize..self.offsets[i + 1] as usize
    }
}

/// A sparse matrix: a structure and `heads` values per entry (entry-major: value of entry
/// k, head h at `values.data[k·heads + h]`).
#[derive(Clone, Debug)]
pub struct SparseMat {
    /// The shared pattern.
    pub structure: Arc<Structure>,
    /// `nnz × heads` values.
    pub values: Arc<Tensor>,
}

impl SparseMat {
    /// Values per entry.
    pub fn heads(&self) -> usize {
        self.values.cols
    }

    /// The values of the transposed matrix in its pattern's order (Algorithm 6; a
    /// symmetric pattern's own).
    pub fn transposed_values(&self) -> Tensor {
        let h = self.heads();
        let perm = &self.structure.transpose;
        if h == 1 {
            // A gather: the general loop's one-value copies were a `memmove` call per
            // entry (a tenth of a full-batch R-GCN step).
            let v = &self.values.data;
            let mut t = Tensor::scratch(self.values.rows, 1);
            for (o, &p) in t.data.iter_mut().zip(perm.iter()) {
                *o = v[p as usize];
            }
            return t;
        }
        let mut t = Tensor::scratch(self.values.rows, h);
        for (out, &p) in t.data.chunks_exact_mut(h).zip(perm.iter()) {
            for (o, &x) in out.iter_mut().zip(self.values.row(p as usize)) {
                *o = x;
            }
        }
        t
    }

    /// The entries whose columns are in `p0..p1`, columns renumbered from `p0`: one part of
    /// a [`NeighbourFold`](crate::ir::op::NeighbourFold)'s X. Rows must be sorted and the
    /// parts taken in ascending order: `cursor[i]` (row i's first entry not yet taken, all
    /// rows' starts at first) moves past the entries taken.
    pub fn column_part(&self, cursor: &mut [u32], p0: u32, p1: u32) -> SparseMat {
        self.column_part_reusing(cursor, p0, p1, None)
    }

    /// [`SparseMat::column_part`] into the buffers of `spare` (an earlier part no one else
    /// holds any more; otherwise new ones): a streamed evaluation takes a part of every
    /// chunk's adjacency for each part of X, and fresh buffers for each were most of its
    /// time (the kernel zeroing their pages).
    pub fn column_part_reusing(
        &self,
        cursor: &mut [u32],
        p0: u32,
        p1: u32,
        spare: Option<SparseMat>,
    ) -> SparseMat {
        let st = &self.structure;
        let h = self.heads();
        let (mut offsets, mut indices, mut values) = SparseMat::buffers(spare, cursor.len());
        for (i, c) in cursor.iter_mut().enumerate() {
            let (lo, hi) = (*c as usize, st.offsets[i + 1] as usize);
            let take = st.indices[lo..hi].partition_point(|&j| j < p1);
            indices.extend(
                st.indices[lo..lo + take]
                    .iter()
                    .map(|&j| j.wrapping_sub(p0)),
            );
            values.extend_from_slice(&self.values.data[lo * h..(lo + take) * h]);
            *c += take as u32;
            offsets.push(indices.len() as u32);
        }
        SparseMat::csr(offsets, indices, values, h)
    }

    /// The emptied buffers of `spare` when no one else holds them (otherwise new ones),
    /// the offsets holding the leading 0 of a CSR of `rows` rows: what a part cut refills.
    pub fn buffers(spare: Option<SparseMat>, rows: usize) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        let (mut offsets, mut indices, mut values) = spare
            .and_then(|s| {
                let structure = Arc::try_unwrap(s.structure).ok()?;
                let values = Arc::try_unwrap(s.values).ok()?;
                Some((structure.offsets, structure.indices, values.data))
            })
            .unwrap_or_default();
        offsets.clear();
        indices.clear();
        values.clear();
        offsets.reserve(rows + 1);
        offsets.push(0u32);
        (offsets, indices, values)
    }

    /// A CSR matrix without a transpose permutation (nothing multiplies it transposed):
    /// `heads` values per entry.
    pub fn csr(offsets: Vec<u32>, indices: Vec<u32>, values: Vec<f32>, heads: usize) -> SparseMat {
        let nnz = indices.len();
        SparseMat {
            structure: Arc::new(Structure {
                offsets,
                indices,
                transpose: Vec::new(),
                transposed: None,
            }),
            values: Arc::new(Tensor::from_vec(nnz, heads, values).expect("heads values per entry")),
        }
    }
}

/// Per-node training targets of a subgraph and their loss weights (GraphSAINT's 1/λ_v for
/// training nodes, 0 for every other node, which masks them out).
#[derive(Clone, Debug, PartialEq)]
pub struct Targets {
    /// Classes.
    pub classes: usize,
    /// The labels.
    pub labels: TargetLabels,
    /// One weight per node.
    pub weights: Vec<f32>,
}

/// Labels of [`Targets`].
#[derive(Clone, Debug, PartialEq)]
pub enum TargetLabels {
    /// One class per node (`u32::MAX`: none).
    Single(Vec<u32>),
    /// n × classes 0/1 values, row-major.
    Multi(Vec<f32>),
}

/// A value of the IR.
#[derive(Clone, Debug)]
pub enum Value {
    /// A dense matrix.
    Dense(Arc<Tensor>),
    /// A sparse matrix on a subgraph's pattern.
    Sparse(SparseMat),
    /// A sampled subgraph.
    Subgraph(Arc<Subgraph>),
    /// Training targets.
    Targets(Arc<Targets>),
    /// A number.
    Scalar(f64),
}

impl Value {
    /// A dense value.
    pub fn dense(t: Tensor) -> Value {
        Value::Dense(Arc::new(t))
    }

    /// The dense matrix, if this is one.
    pub fn as_dense(&self) -> Option<&Tensor> {
        match self {
            Value::Dense(t) => Some(t),
            _ => None,
        }
    }

    /// The sparse matrix, if this is one.
    pub fn as_sparse(&self) -> Option<&SparseMat> {
        match self {
            Value::Sparse(s) => Some(s),
            _ => None,
        }
    }

    /// The subgraph, if this is one.
    pub fn as_subgraph(&self) -> Option<&Arc<Subgraph>> {
        match self {
            Value::Subgraph(s) => Some(s),
            _ => None,
        }
    }

    /// The targets, if these are.
    pub fn as_targets(&self) -> Option<&Targets> {
        match self {
            Value::Targets(t) => Some(t),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_scalar(&self) -> Option<f64> {
        match self {
            Value::Scalar(x) => Some(*x),
            _ => None,
        }
    }

    /// Whether the value matches `fact` under `b` (the interpreter checks every output).
    pub fn matches(&self, fact: &Fact, b: &Bindings) -> bool {
        let eq = |d: Dim, v: usize| d.admits(v, b);
        match (self, fact) {
            (Value::Dense(t), Fact::Dense { rows, cols }) => eq(*rows, t.rows) && eq(*cols, t.cols),
            (Value::Sparse(s), Fact::Sparse { rows, nnz, heads }) => {
                eq(*rows, s.structure.n_rows())
                    && eq(*nnz, s.structure.nnz())
                    && *heads == s.heads()
            }
            (Value::Subgraph(_), Fact::Subgraph) | (Value::Scalar(_), Fact::Scalar) => true,
            (Value::Targets(t), Fact::Targets { classes }) => t.classes == *classes,
            _ => false,
        }
    }
}

impl super::recycle::Recyclable for Value {
    fn into_buffer(self) -> Option<Vec<f32>> {
        let t = match self {
            Value::Dense(t) => t,
            Value::Sparse(s) => s.values,
            _ => return None,
        };
        Arc::try_unwrap(t).ok().map(|t| t.data)
    }
}

impl Tensor {
    /// A `rows × cols` matrix whose contents are unspecified (stale values of a recycled
    /// buffer, or zeros): only for ops that overwrite every element.
    pub fn scratch(rows: usize, cols: usize) -> Tensor {
        Tensor {
            rows,
            cols,
            data: super::recycle::scratch(rows * cols),
        }
    }
}

/// The free-list through values (`recycle.rs` below knows no value type).
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::recycle::{copied, give, recycle_value, take, MIN_LEN};
    use super::{Tensor, Value};

    // The free-list is process-wide and tests run in parallel: each test uses lengths
    // no other test (and no other code in this test binary) requests.

    #[test]
    fn zeros_from_a_dirty_buffer_are_zero() {
        let len = MIN_LEN + 17;
        give(vec![7.5; len]);
        let t = Tensor::zeros(1, len);
        assert_eq!(t.data.len(), len);
        assert!(t.data.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn take_reuses_a_close_capacity_and_not_a_far_one() {
        let len = MIN_LEN * 3 + 5;
        let buf = vec![1.0f32; len];
        let ptr = buf.as_ptr();
        give(buf);
        // 25 % larger request does not fit; a slightly smaller one reuses the buffer.
        assert!(take(len + 1).is_none());
        let t = Tensor::scratch(1, len - 3);
        assert_eq!(t.data.len(), len - 3);
        assert_eq!(t.data.as_ptr(), ptr, "the kept buffer was reused");
        assert!(take(len).is_none(), "taken once only");
    }

    #[test]
    fn copy_and_clone_equal_the_source() {
        let len = MIN_LEN * 5 + 1;
        give(vec![3.0; len]);
        let src: Vec<f32> = (0..len).map(|i| i as f32 * 0.5).collect();
        assert_eq!(copied(&src), src);
        let t = Tensor::from_vec(1, len, src.clone()).unwrap();
        assert_eq!(t.clone(), t);
    }

    #[test]
    fn recycle_value_only_takes_unshared_buffers() {
        let len = MIN_LEN * 7 + 3;
        let shared = Arc::new(Tensor::zeros(1, len));
        recycle_value(Value::Dense(shared.clone()));
        assert!(take(len).is_none(), "a buffer still shared is not kept");
        recycle_value(Value::Dense(shared));
        assert_eq!(take(len).map(|b| b.capacity() >= len), Some(true));
    }
}
