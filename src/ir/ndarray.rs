//! `ndarray` at the library's edge: [`Tensor`] to and from [`Array2<f32>`] (moves, no copy,
//! where the layout allows), [`Tensor::view`] / [`Tensor::view_mut`] as ndarray views, and
//! the kernels' strided [`MatRef`] / [`MatMut`] blocks as views ([`mat_view`],
//! [`mat_view_mut`]), so a custom op can be written with ndarray's `Zip` and `mapv`.
//! Kernels stay on slices; this is for library users. The store's features as an
//! [`ArrayView2`] over the map is `GraphStore::features_view` (`store/ndarray.rs`).
//!
//! A row-wise op written with ndarray (softsign, y = x / (1 + |x|)), checked against
//! finite differences:
//!
//! ```
//! use ndarray::Zip;
//! use saintflow::ir::ndarray::{mat_view, mat_view_mut};
//! use saintflow::op::{row_wise, GradBuilder, MatMut, MatRef, NodeId, OpError, RowWise};
//! use saintflow::testing::{check_op_gradients, Arg};
//!
//! /// y = x / (1 + |x|), row by row.
//! #[derive(Debug)]
//! struct Softsign;
//!
//! impl RowWise for Softsign {
//!     fn name(&self) -> &str {
//!         "user.softsign"
//!     }
//!     fn rows(&self, x: &[MatRef<'_>], mut y: MatMut<'_>) -> Result<(), OpError> {
//!         let x = mat_view(&x[0]);
//!         Zip::from(&mut mat_view_mut(&mut y))
//!             .and(&x)
//!             .for_each(|y, &x| *y = x / (1.0 + x.abs()));
//!         Ok(())
//!     }
//!     /// ∂x = ∇y / (1 + |x|)², from x and ∇y.
//!     fn backward(
//!         &self,
//!         g: &mut GradBuilder<'_>,
//!         grad: NodeId,
//!     ) -> Result<Vec<Option<NodeId>>, OpError> {
//!         let x = g.input(0);
//!         Ok(vec![Some(g.add_arc(row_wise(SoftsignGrad), &[x, grad])?)])
//!     }
//! }
//!
//! /// ∂x of [`Softsign`]: inputs x and ∇y.
//! #[derive(Debug)]
//! struct SoftsignGrad;
//!
//! impl RowWise for SoftsignGrad {
//!     fn name(&self) -> &str {
//!         "user.softsign_grad"
//!     }
//!     fn arity(&self) -> usize {
//!         2
//!     }
//!     fn rows(&self, x: &[MatRef<'_>], mut dx: MatMut<'_>) -> Result<(), OpError> {
//!         // 1 / (1 + |x|)² with mapv, times ∇y with Zip.
//!         let scale = mat_view(&x[0]).mapv(|x| 1.0 / ((1.0 + x.abs()) * (1.0 + x.abs())));
//!         Zip::from(&mut mat_view_mut(&mut dx))
//!             .and(&scale)
//!             .and(&mat_view(&x[1]))
//!             .for_each(|d, &s, &gy| *d = s * gy);
//!         Ok(())
//!     }
//! }
//!
//! check_op_gradients(row_wise(Softsign), &[Arg::Nodes(3)]).unwrap();
//! ```

use ndarray::{Array2, ArrayView2, ArrayViewMut2, ShapeBuilder};

use super::op::{MatMut, MatRef};
use super::value::Tensor;

impl Tensor {
    /// The matrix as an ndarray view (no copy).
    ///
    /// ```
    /// use saintflow::ir::Tensor;
    /// let t = Tensor::from_vec(2, 3, vec![1., 2., 3., 4., 5., 6.]).unwrap();
    /// let v = t.view();
    /// assert_eq!(v.shape(), &[2, 3]);
    /// assert_eq!(v[[1, 0]], 4.0);
    /// assert_eq!(v.sum_axis(ndarray::Axis(0)).to_vec(), vec![5., 7., 9.]);
    /// ```
    pub fn view(&self) -> ArrayView2<'_, f32> {
        ArrayView2::from_shape((self.rows, self.cols), &self.data)
            .expect("a Tensor's data has rows × cols elements")
    }

    /// The matrix as a mutable ndarray view (no copy).
    ///
    /// ```
    /// use saintflow::ir::Tensor;
    /// let mut t = Tensor::zeros(2, 2);
    /// t.view_mut().row_mut(1).fill(3.0);
    /// assert_eq!(t.data, vec![0., 0., 3., 3.]);
    /// ```
    pub fn view_mut(&mut self) -> ArrayViewMut2<'_, f32> {
        ArrayViewMut2::from_shape((self.rows, self.cols), &mut self.data)
            .expect("a Tensor's data has rows × cols elements")
    }

    /// The matrix as an owned [`Array2`]: its buffer is moved, not copied.
    ///
    /// ```
    /// use saintflow::ir::Tensor;
    /// let t = Tensor::from_vec(1, 2, vec![1.0, 2.0]).unwrap();
    /// let a = t.into_array();
    /// assert_eq!(a, ndarray::array![[1.0f32, 2.0]]);
    /// ```
    pub fn into_array(self) -> Array2<f32> {
        Array2::from_shape_vec((self.rows, self.cols), self.data)
            .expect("a Tensor's data has rows × cols elements")
    }

    /// A matrix from an [`Array2`]: its buffer is moved when the array is in standard
    /// (row-major, contiguous, offset 0) layout, copied into row-major order otherwise
    /// (a transposed or sliced array).
    ///
    /// ```
    /// use saintflow::ir::Tensor;
    /// let a = ndarray::array![[1.0f32, 2.0], [3.0, 4.0]];
    /// let t = Tensor::from_array(a.clone());
    /// assert_eq!((t.rows, t.cols, t.data.clone()), (2, 2, vec![1., 2., 3., 4.]));
    /// // A transposed (column-major) array is laid out row-major on the way in.
    /// let t = Tensor::from_array(a.reversed_axes());
    /// assert_eq!(t.data, vec![1., 3., 2., 4.]);
    /// assert_eq!(Tensor::from_array(t.clone().into_array()), t);
    /// ```
    pub fn from_array(a: Array2<f32>) -> Tensor {
        let (rows, cols) = a.dim();
        let a = if a.is_standard_layout() {
            a
        } else {
            a.as_standard_layout().into_owned()
        };
        let (data, offset) = a.into_raw_vec_and_offset();
        match offset {
            Some(0) | None if data.len() == rows * cols => Tensor { rows, cols, data },
            // A standard-layout array whose buffer holds more than its elements (a slice
            // of a larger owned array): copy the elements out.
            offset => {
                let start = offset.unwrap_or(0);
                Tensor {
                    rows,
                    cols,
                    data: data[start..start + rows * cols].to_vec(),
                }
            }
        }
    }

    /// A matrix copied from any 2-D view (any strides).
    ///
    /// ```
    /// use saintflow::ir::Tensor;
    /// let a = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// let t = Tensor::from_view(a.slice(ndarray::s![.., 1..]));
    /// assert_eq!((t.rows, t.cols, t.data), (2, 2, vec![2., 3., 5., 6.]));
    /// ```
    pub fn from_view(v: ArrayView2<'_, f32>) -> Tensor {
        let (rows, cols) = v.dim();
        let mut t = Tensor::zeros(rows, cols);
        t.view_mut().assign(&v);
        t
    }
}

impl From<Tensor> for Array2<f32> {
    /// [`Tensor::into_array`].
    fn from(t: Tensor) -> Self {
        t.into_array()
    }
}

impl From<Array2<f32>> for Tensor {
    /// [`Tensor::from_array`].
    fn from(a: Array2<f32>) -> Self {
        Tensor::from_array(a)
    }
}

/// A kernel block (rows `row_stride` apart) as an ndarray view, no copy.
///
/// ```
/// use saintflow::ir::ndarray::mat_view;
/// use saintflow::op::MatRef;
/// let data = [1.0f32, 2.0, 9.0, 3.0, 4.0, 9.0];
/// let m = MatRef::new(&data, 2, 2, 3).unwrap(); // 2 × 2, rows 3 apart
/// assert_eq!(mat_view(&m), ndarray::array![[1.0f32, 2.0], [3.0, 4.0]]);
/// ```
pub fn mat_view<'a>(m: &MatRef<'a>) -> ArrayView2<'a, f32> {
    let shape = (m.n_rows(), m.n_cols()).strides((m.row_stride(), 1));
    // SAFETY: a MatRef borrows, for 'a, `(rows − 1)·row_stride + cols` initialised f32s from
    // its pointer (checked when it was made), exactly the elements this shape addresses;
    // the view is shared, as the MatRef is.
    unsafe { ArrayView2::from_shape_ptr(shape, m.as_ptr()) }
}

/// A mutable kernel block as an ndarray view, for as long as this borrow of it.
///
/// ```
/// use saintflow::ir::ndarray::mat_view_mut;
/// use saintflow::op::MatMut;
/// let mut data = [0.0f32; 6];
/// let mut m = MatMut::new(&mut data, 2, 2, 3).unwrap();
/// mat_view_mut(&mut m).fill(1.0);
/// assert_eq!(data, [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]);
/// ```
pub fn mat_view_mut<'a>(m: &'a mut MatMut<'_>) -> ArrayViewMut2<'a, f32> {
    let shape = (m.n_rows(), m.n_cols()).strides((m.row_stride(), 1));
    // SAFETY: the MatMut borrows its elements exclusively (checked extent, as for
    // `mat_view`), and this view borrows the MatMut mutably for 'a, so nothing else
    // reaches them while the view lives; rows are disjoint (row_stride ≥ cols).
    unsafe { ArrayViewMut2::from_shape_ptr(shape, m.as_mut_ptr()) }
}
