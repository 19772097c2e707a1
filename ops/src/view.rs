//! Strided row-major matrix views: `MatRef` (shared, `Copy`) and `MatMut` (unique), so a
//! kernel can read or write a column block of a wider matrix in place (the blocks of a
//! column concatenation) without copying.
//!
//! Layout: element (i, j) lives at `i·row_stride + j` from the view's start, with
//! `row_stride ≥ cols`; the slice behind a view holds at least
//! `(rows − 1)·row_stride + cols` elements (0 when `rows = 0`). Constructors check both and
//! return [`KernelError::View`], never panic. Sub-views (`cols`, `rows`, `split_cols_mut`)
//! keep the stride and move the start, so they cost nothing.
//!
//! Invariant behind the `unsafe`: a view never forms a Rust reference to elements outside
//! its own rows × cols. Two column blocks of one buffer interleave in memory, so `MatMut`
//! holds a raw pointer rather than a `&mut [f32]` spanning its rows (which would cover the
//! other block's elements too), and a row is handed out as a slice of exactly `cols`
//! elements. Disjoint blocks may therefore be written at the same time, by different
//! threads, while others read disjoint blocks of the same buffer.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use crate::KernelError;

/// Elements a `rows × cols` view with `row_stride` spans; `None` on overflow.
fn span(rows: usize, cols: usize, row_stride: usize) -> Option<usize> {
    if rows == 0 {
        return Some(0);
    }
    (rows - 1).checked_mul(row_stride)?.checked_add(cols)
}

fn check_shape(
    kernel: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
) -> Result<(), KernelError> {
    let bad = |what: String| Err(KernelError::View { kernel, what });
    if row_stride < cols {
        return bad(format!(
            "row stride of a {rows}×{cols} view, expected ≥ {cols}, got {row_stride}"
        ));
    }
    match span(rows, cols, row_stride) {
        Some(need) if need <= len => Ok(()),
        Some(need) => bad(format!(
            "data of a {rows}×{cols} view with row stride {row_stride}, expected ≥ {need} \
             elements, got {len}"
        )),
        None => bad(format!(
            "a {rows}×{cols} view with row stride {row_stride} overflows usize"
        )),
    }
}

fn check_range(
    kernel: &'static str,
    what: &'static str,
    range: &Range<usize>,
    len: usize,
) -> Result<(), KernelError> {
    if range.start <= range.end && range.end <= len {
        Ok(())
    } else {
        Err(KernelError::View {
            kernel,
            what: format!(
                "{what} {}..{}, expected within 0..{len}",
                range.start, range.end
            ),
        })
    }
}

/// A shared strided view of a row-major f32 matrix (see the module header for the layout).
#[derive(Clone, Copy)]
pub struct MatRef<'a> {
    ptr: *const f32,
    rows: usize,
    cols: usize,
    row_stride: usize,
    _data: PhantomData<&'a [f32]>,
}

// SAFETY: a MatRef is a shared borrow of f32s, as `&[f32]` is (Send + Sync).
unsafe impl Send for MatRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for MatRef<'_> {}

impl<'a> MatRef<'a> {
    /// A `rows × cols` view of `data` with rows `row_stride` elements apart. Errors when
    /// `row_stride < cols` or `data` is shorter than `(rows − 1)·row_stride + cols`.
    pub fn new(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
    ) -> Result<Self, KernelError> {
        check_shape("MatRef::new", data.len(), rows, cols, row_stride)?;
        Ok(MatRef {
            ptr: data.as_ptr(),
            rows,
            cols,
            row_stride,
            _data: PhantomData,
        })
    }

    /// A contiguous `rows × cols` view (row stride = cols) of `data`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::new(data, rows, cols, cols)
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn n_cols(&self) -> usize {
        self.cols
    }

    /// Elements from the start of one row to the start of the next (≥ `n_cols`).
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Pointer to element (0, 0); element (i, j) is at `i·row_stride + j` from it.
    pub fn as_ptr(&self) -> *const f32 {
        self.ptr
    }

    /// Row `i` (exactly `n_cols` elements). Panics if `i ≥ n_rows`, as slice indexing does.
    pub fn row(&self, i: usize) -> &'a [f32] {
        assert!(i < self.rows, "row {i} of a view with {} rows", self.rows);
        // SAFETY: i < rows, and the constructor checked the span.
        unsafe { self.row_unchecked(i) }
    }

    /// Row `i` without the bounds check. Safety: `i < n_rows`.
    #[inline(always)]
    pub(crate) unsafe fn row_unchecked(&self, i: usize) -> &'a [f32] {
        // SAFETY: (caller) i < rows, so i·row_stride + cols ≤ the span the constructor
        // checked; the row's elements belong to this view (module invariant).
        unsafe { std::slice::from_raw_parts(self.ptr.add(i * self.row_stride), self.cols) }
    }

    /// Columns `range` of every row: a column block, same stride, no copy.
    pub fn cols(&self, range: Range<usize>) -> Result<MatRef<'a>, KernelError> {
        check_range("MatRef::cols", "columns", &range, self.cols)?;
        Ok(MatRef {
            // wrapping_add: with 0 rows the view spans nothing, and the start may lie past
            // the slice; it is then never dereferenced.
            ptr: self.ptr.wrapping_add(range.start),
            cols: range.end - range.start,
            ..*self
        })
    }

    /// Rows `range`: a row block, no copy.
    pub fn rows(&self, range: Range<usize>) -> Result<MatRef<'a>, KernelError> {
        check_range("MatRef::rows", "rows", &range, self.rows)?;
        Ok(MatRef {
            ptr: self.ptr.wrapping_add(range.start * self.row_stride),
            rows: range.end - range.start,
            ..*self
        })
    }

    /// The elements as one row-major slice, when the rows are contiguous (row stride =
    /// columns, or at most one row); `None` for a column block of a wider matrix.
    pub fn as_slice(&self) -> Option<&'a [f32]> {
        if self.rows <= 1 || self.row_stride == self.cols {
            // SAFETY: contiguous rows, so the span the constructor checked is exactly
            // rows·cols elements from `ptr` (0 when a dimension is 0).
            Some(unsafe { std::slice::from_raw_parts(self.ptr, self.rows * self.cols) })
        } else {
            None
        }
    }

    /// The view's elements as a contiguous row-major vector.
    pub fn to_vec(&self) -> Vec<f32> {
        let mut v = Vec::with_capacity(self.rows * self.cols);
        for i in 0..self.rows {
            v.extend_from_slice(self.row(i));
        }
        v
    }
}

impl fmt::Debug for MatRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MatRef({}×{}, row stride {})",
            self.rows, self.cols, self.row_stride
        )
    }
}

/// A unique strided view of a row-major f32 matrix. Not `Copy`: reborrow with
/// [`MatMut::rb_mut`], read through [`MatMut::as_ref`], cut with [`MatMut::split_cols_mut`].
pub struct MatMut<'a> {
    ptr: *mut f32,
    rows: usize,
    cols: usize,
    row_stride: usize,
    _data: PhantomData<&'a mut [f32]>,
}

// SAFETY: a MatMut is a unique borrow of its elements, as `&mut [f32]` is (Send); through
// `&MatMut` only reads are possible (`as_ref`, `row`), so sharing it is sound (Sync).
unsafe impl Send for MatMut<'_> {}
// SAFETY: as above.
unsafe impl Sync for MatMut<'_> {}

impl<'a> MatMut<'a> {
    /// A `rows × cols` view of `data` with rows `row_stride` elements apart. Errors as
    /// [`MatRef::new`].
    pub fn new(
        data: &'a mut [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
    ) -> Result<Self, KernelError> {
        check_shape("MatMut::new", data.len(), rows, cols, row_stride)?;
        Ok(MatMut {
            ptr: data.as_mut_ptr(),
            rows,
            cols,
            row_stride,
            _data: PhantomData,
        })
    }

    /// A contiguous `rows × cols` view (row stride = cols) of `data`.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Result<Self, KernelError> {
        Self::new(data, rows, cols, cols)
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn n_cols(&self) -> usize {
        self.cols
    }

    /// Elements from the start of one row to the start of the next (≥ `n_cols`).
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Pointer to element (0, 0).
    pub fn as_mut_ptr(&mut self) -> *mut f32 {
        self.ptr
    }

    /// A shared view of the same elements, for as long as this borrow.
    pub fn as_ref(&self) -> MatRef<'_> {
        MatRef {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            _data: PhantomData,
        }
    }

    /// A shorter-lived `MatMut` of the same elements (to pass on without giving this up).
    pub fn rb_mut(&mut self) -> MatMut<'_> {
        MatMut {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            _data: PhantomData,
        }
    }

    /// Row `i`, shared. Panics if `i ≥ n_rows`.
    pub fn row(&self, i: usize) -> &[f32] {
        self.as_ref().row(i)
    }

    /// Row `i` (exactly `n_cols` elements). Panics if `i ≥ n_rows`, as slice indexing does.
    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        assert!(i < self.rows, "row {i} of a view with {} rows", self.rows);
        // SAFETY: i < rows; the row lies within the checked span and belongs to this view
        // alone (module invariant), and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(i * self.row_stride), self.cols) }
    }

    /// The elements as one row-major slice, when the rows are contiguous (see
    /// [`MatRef::as_slice`]).
    pub fn as_mut_slice(&mut self) -> Option<&mut [f32]> {
        if self.rows <= 1 || self.row_stride == self.cols {
            // SAFETY: as in `MatRef::as_slice`; `&mut self` makes the borrow unique.
            Some(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.rows * self.cols) })
        } else {
            None
        }
    }

    /// Sets every element to `v`.
    pub fn fill(&mut self, v: f32) {
        for i in 0..self.rows {
            self.row_mut(i).fill(v);
        }
    }

    /// Columns `range` of every row, consuming this view (use `rb_mut()` first to keep it).
    pub fn cols_mut(self, range: Range<usize>) -> Result<MatMut<'a>, KernelError> {
        check_range("MatMut::cols_mut", "columns", &range, self.cols)?;
        Ok(MatMut {
            ptr: self.ptr.wrapping_add(range.start),
            cols: range.end - range.start,
            ..self
        })
    }

    /// Rows `range`, consuming this view.
    pub fn rows_mut(self, range: Range<usize>) -> Result<MatMut<'a>, KernelError> {
        check_range("MatMut::rows_mut", "rows", &range, self.rows)?;
        Ok(MatMut {
            ptr: self.ptr.wrapping_add(range.start * self.row_stride),
            rows: range.end - range.start,
            ..self
        })
    }

    /// Splits into columns `0..at` and `at..n_cols`: two disjoint column blocks that can be
    /// written independently (e.g. the two halves of a concatenation, each by its kernel).
    pub fn split_cols_mut(self, at: usize) -> Result<(MatMut<'a>, MatMut<'a>), KernelError> {
        check_range(
            "MatMut::split_cols_mut",
            "split column",
            &(at..at),
            self.cols,
        )?;
        let right = MatMut {
            ptr: self.ptr.wrapping_add(at),
            cols: self.cols - at,
            ..self
        };
        Ok((MatMut { cols: at, ..self }, right))
    }

    /// Splits into rows `0..at` and `at..n_rows`.
    pub fn split_rows_mut(self, at: usize) -> Result<(MatMut<'a>, MatMut<'a>), KernelError> {
        check_range("MatMut::split_rows_mut", "split row", &(at..at), self.rows)?;
        let bottom = MatMut {
            ptr: self.ptr.wrapping_add(at * self.row_stride),
            rows: self.rows - at,
            ..self
        };
        Ok((MatMut { rows: at, ..self }, bottom))
    }

    /// Rows `r0..r1` as a new view from a shared borrow. Safety: `r0 ≤ r1 ≤ n_rows`, and no
    /// two views alive at once from this call cover the same rows (each parallel task takes
    /// its own row block), nor does any other access to those rows happen meanwhile.
    #[inline]
    pub(crate) unsafe fn row_block_unchecked(&self, r0: usize, r1: usize) -> MatMut<'_> {
        MatMut {
            ptr: self.ptr.wrapping_add(r0 * self.row_stride),
            rows: r1 - r0,
            ..*self
        }
    }
}

impl fmt::Debug for MatMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MatMut({}×{}, row stride {})",
            self.rows, self.cols, self.row_stride
        )
    }
}
