//! Helpers shared by the example crate's tests.

use std::path::{Path, PathBuf};

use saintflow::progress::Progress;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};

/// A planted Kronecker graph of 2^scale nodes in `dir`: degree 8, 8 features, 4 classes
/// (chance 0.25), labels following communities (`planted`), and its path.
pub fn planted(dir: &Path, scale: u32, seed: u64, planted: Planted) -> PathBuf {
    let path = dir.join(format!("planted{scale}.sf"));
    let spec = KroneckerSpec {
        scale,
        degree: 8.0,
        n_features: 8,
        n_classes: 4,
        seed,
        planted: Some(planted),
        ..KroneckerSpec::default()
    };
    generate_kronecker(&spec, &path, true, &Progress::hidden()).unwrap();
    path
}
