//! `--device cuda` in a build without the `cuda` feature: the same items as `cuda.rs`, with
//! a [`Gpu`] that cannot exist, so opening one is the error that says how to build it.

use super::device::GpuRun;
use super::grid::{EpisodeStats, Sgd, Touch};
use super::partition::Parts;
use super::pool::Sampler;
use super::{EmbedError, Result};

/// No GPU in this build.
pub enum Gpu {}

impl Gpu {
    /// Always the error naming the feature.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        Err(EmbedError::Device(format!(
            "--device cuda:{ordinal}: this saintflow was built without the `cuda` feature; rebuild with `cargo build --release --features cuda` (the build needs no CUDA; the run needs the NVIDIA driver and libnvrtc)"
        )))
    }

    /// Never called.
    pub fn describe(&self) -> String {
        match *self {}
    }

    /// Never called.
    pub fn grid_parts(&self, _: usize, _: usize, _: usize) -> Result<usize> {
        match *self {}
    }
}

/// Never called.
#[allow(clippy::too_many_arguments)]
pub fn train_pools(
    gpu: &Gpu,
    _: &Parts,
    _: &Sampler<'_>,
    _: (&mut [f32], &mut [f32]),
    _: (usize, Sgd, u64),
    _: (u64, usize),
    _: &mut dyn FnMut(u64, &EpisodeStats) -> Result<()>,
    _: &impl Touch,
) -> Result<GpuRun> {
    match *gpu {}
}
