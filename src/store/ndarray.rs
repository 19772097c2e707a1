//! The store's features as an ndarray view over the map (issue 32): no copy, the N × F
//! section as it lies in the page cache. The `Tensor` conversions are `ir/ndarray.rs`.

use ndarray::ArrayView2;

use super::mmap::GraphStore;

impl GraphStore {
    /// The features, N × F, as an [`ArrayView2`] over the mapped section (no copy; pages
    /// are read as the view is).
    ///
    /// ```
    /// use saintflow::progress::Progress;
    /// use saintflow::store::import::{import_edgelist, EdgeListOptions};
    /// use saintflow::GraphStore;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let (edges, feats) = (dir.path().join("e.txt"), dir.path().join("x.npy"));
    /// std::fs::write(&edges, "0 1\n1 2\n")?;
    /// saintflow::npy::write_npy_atomic(&feats, 3, 2, |i, row| row.fill(i as f32))?;
    /// let opts = EdgeListOptions { symmetrize: true, features: Some(feats), ..Default::default() };
    /// let out = dir.path().join("g.sf");
    /// import_edgelist(&edges, &out, &opts, false, &Progress::hidden())?;
    /// let store = GraphStore::open(&out)?;
    /// let x = store.features_view();
    /// assert_eq!(x.shape(), &[3, 2]);
    /// assert_eq!(x.sum_axis(ndarray::Axis(0)).to_vec(), vec![3.0, 3.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn features_view(&self) -> ArrayView2<'_, f32> {
        ArrayView2::from_shape((self.n_nodes(), self.n_features()), self.features())
            .expect("open checked the features section's length against N × F")
    }
}
