//! What the GPU path of node embedding (issue 30, `--device cuda`) shares with the CPU,
//! compiled in every build so CI tests it without a GPU: the [`Device`] choice, the grid's
//! noise tables in the flat part-local form the device holds ([`DeviceTables`]), the
//! negatives as counter-based draws ([`DeviceTables::negative`]: a pure function of (block
//! seed, term, sample), so the GPU kernel and the CPU twin draw the same ones whatever the
//! thread schedule), and [`reference_pool`], the CPU kernel run over a pool in the order a
//! single GPU half-warp trains it — the oracle the GPU is tested against.
//!
//! The CPU path keeps its own negatives (a xoshiro stream per block): its results are the
//! same as before this module existed.

use saintflow_ops::sgns::{sgns_apply, sgns_loss, sgns_term};

use crate::seed::hash3;

use super::grid::{block_clock, block_seed, learning_rate, pool_seed, EpisodeStats, Sgd};
use super::partition::Parts;
use super::pool::{unpack, Pool};

/// Where the SGD of an `[embedding]` plan runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The CPU cores (rayon workers on the partition grid).
    #[default]
    Cpu,
    /// NVIDIA GPU number k (`cuda` or `cuda:k`; needs the `cuda` feature), fed by the CPU
    /// cores' samplers.
    Cuda(usize),
}

impl std::str::FromStr for Device {
    type Err = String;

    fn from_str(s: &str) -> Result<Device, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|k| k.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| {
                    format!("`{s}` is not a device: cpu, cuda or cuda:K (K the GPU's number)")
                }),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(k) => write!(f, "cuda:{k}"),
        }
    }
}

/// What a run on the GPU reports beside the loss (`cuda::train_pools`).
#[derive(Clone, Copy, Debug)]
pub struct GpuRun {
    /// Mean loss of the last pool.
    pub last_loss: f64,
    /// Seconds the GPU had no pool to train (the first pool's filling included).
    pub wait: f64,
}

/// The grid's parts as the device holds them: each node's index within its part, and per
/// part (at `offsets[j]..offsets[j + 1]`) its members and its noise alias table over them
/// (part-local outcomes; a column keeps itself when the draw's low 32 bits are below its
/// threshold).
#[derive(Clone, Debug)]
pub struct DeviceTables {
    /// Index of each node within its part.
    pub local_of: Vec<u32>,
    /// Part j's rows are `offsets[j]..offsets[j + 1]` of the flat arrays.
    pub offsets: Vec<u32>,
    /// The global id of each part-local row, part after part.
    pub members: Vec<u32>,
    /// Per column: keep the column when the draw's low 32 bits are below this.
    pub threshold: Vec<u32>,
    /// Per column: the other outcome (part-local).
    pub alias: Vec<u32>,
    /// Columns of part j's table (0: no node of the part has an edge, so no negatives).
    pub noise_len: Vec<u32>,
}

impl DeviceTables {
    /// The tables of `parts`.
    pub fn new(parts: &Parts) -> DeviceTables {
        let nodes = parts.part_of.len();
        let mut t = DeviceTables {
            local_of: vec![0; nodes],
            offsets: vec![0],
            members: Vec::with_capacity(nodes),
            threshold: Vec::with_capacity(nodes),
            alias: Vec::with_capacity(nodes),
            noise_len: Vec::with_capacity(parts.n()),
        };
        for (j, members) in parts.members.iter().enumerate() {
            for (k, &v) in members.iter().enumerate() {
                t.local_of[v as usize] = k as u32;
            }
            t.members.extend_from_slice(members);
            match parts.noise(j) {
                Some(table) => {
                    for (prob, alias) in table.columns() {
                        t.threshold
                            .push((prob * 4_294_967_296.0).min(4_294_967_295.0) as u32);
                        t.alias.push(alias);
                    }
                    t.noise_len.push(table.len() as u32);
                }
                None => {
                    t.threshold.resize(t.members.len(), 0);
                    t.alias.resize(t.members.len(), 0);
                    t.noise_len.push(0);
                }
            }
            t.offsets.push(t.members.len() as u32);
        }
        t
    }

    /// Part j's slice of a flat array.
    pub fn part<'a, T>(&self, flat: &'a [T], j: usize) -> &'a [T] {
        &flat[self.offsets[j] as usize..self.offsets[j + 1] as usize]
    }

    /// The `k`-th negative of sample `index` of a block whose negatives are drawn from
    /// part `j` with `seed`: a part-local row, ∝ deg^power within the part (None: the part
    /// has no edge). What the GPU kernel computes, bit for bit.
    #[inline]
    pub fn negative(&self, j: usize, seed: u64, k: u32, index: u64) -> Option<u32> {
        let len = self.noise_len[j];
        if len == 0 {
            return None;
        }
        let h = hash3(seed, u64::from(k), index);
        let col = ((h >> 32) * u64::from(len)) >> 32;
        let at = self.offsets[j] as usize + col as usize;
        Some(if (h as u32) < self.threshold[at] {
            col as u32
        } else {
            self.alias[at]
        })
    }
}

/// Trains `pool` on the CPU exactly as one GPU half-warp does: one episode, rounds r in
/// order, blocks (i, (i + r) mod n) for i in order, each block's samples in pool order,
/// negatives from [`DeviceTables::negative`], the CPU SGNS kernel for every term.
/// `vertex` and `context` are the whole [N, dim] matrices (global rows).
#[allow(clippy::too_many_arguments)]
pub fn reference_pool(
    pool: &Pool,
    parts: &Parts,
    tables: &DeviceTables,
    (vertex, context): (&mut [f32], &mut [f32]),
    dim: usize,
    sgd: &Sgd,
    seed: u64,
    (index, done): (u64, u64),
) -> EpisodeStats {
    let n = parts.n();
    let pseed = pool_seed(seed, index);
    let mut acc = vec![0f32; dim];
    let mut stats = EpisodeStats::default();
    for r in 0..n {
        for i in 0..n {
            let j = (i + r) % n;
            let len = pool.block_len(i, j);
            let (at, step) = block_clock(done, pool.len(), (n, 1), (0, r), len);
            let bseed = block_seed(pseed, 0, i, j, n);
            let members = tables.part(&tables.members, j);
            for (t, &x) in pool.block(i, j).flatten().enumerate() {
                let (u, v) = unpack(x);
                let lr = learning_rate(sgd, at + t as f64 * step);
                let (u, v) = (u as usize * dim, v as usize * dim);
                let urow = &mut vertex[u..u + dim];
                let s = sgns_term(urow, &mut context[v..v + dim], &mut acc, true, 1.0, lr);
                let sample_loss = t % 16 == 0;
                let mut loss = if sample_loss {
                    sgns_loss(s, true, 1.0)
                } else {
                    0.0
                };
                for k in 0..sgd.negatives as u32 {
                    let Some(neg) = tables.negative(j, bseed, k, t as u64) else {
                        break;
                    };
                    let c = members[neg as usize] as usize * dim;
                    let w = sgd.negative_weight;
                    let s = sgns_term(urow, &mut context[c..c + dim], &mut acc, false, w, lr);
                    if sample_loss {
                        loss += sgns_loss(s, false, w);
                    }
                }
                sgns_apply(urow, &mut acc);
                if sample_loss {
                    stats.loss_sum += loss;
                    stats.loss_count += 1;
                }
                stats.samples += 1;
            }
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        assert_eq!("cpu".parse::<Device>(), Ok(Device::Cpu));
        assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda(0)));
        assert_eq!("cuda:3".parse::<Device>(), Ok(Device::Cuda(3)));
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
        for bad in ["gpu", "cuda:", "cuda:x", "CUDA"] {
            let e = bad.parse::<Device>().unwrap_err();
            assert!(e.contains(bad) && e.contains("cuda:K"), "{e}");
        }
    }

    #[test]
    fn the_clock_covers_the_pool_once_in_order() {
        // n = 3, m = 2: the blocks of episode e, round r start at done + len·(e + r/n)/m,
        // and a block's last sample ends where the next round's blocks begin.
        let (done, len) = (1000u64, 600usize);
        let (at, step) = block_clock(done, len, (3, 2), (1, 2), 50);
        assert!((at - (1000.0 + 600.0 * (1.0 + 2.0 / 3.0) / 2.0)).abs() < 1e-9);
        assert!((at + 50.0 * step - 1600.0).abs() < 1e-9, "{at} {step}");
    }
}
