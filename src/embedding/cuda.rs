//! GraphVite's hybrid system on one NVIDIA GPU (issue 30, `--device cuda`, the `cuda`
//! feature): the CPU cores fill a pool of positive samples by random walks while the GPU
//! trains the other pool (the double pools of GraphVite §3.3), block by block on the n × n
//! grid (§3.2), with the kernel in `sgns.cu` (one half-warp per sample, Hogwild across
//! half-warps, the negatives drawn on the device from the block's context part).
//!
//! The device holds the rows of the blocks in flight only: the vertex rows of part i and
//! the context rows of part j, indexed within their part ([`DeviceTables`]). When both
//! matrices fit the GPU (n = 1, the usual case: 139 GiB hold 130 M rows at d = 128) they are
//! uploaded once and read back once; otherwise a block whose parts are not on the device
//! swaps them in through the host matrices (the mapped files), and with one GPU the grid's
//! rounds run one block after another.
//!
//! Through cudarc with dynamic loading: the build needs no CUDA, the run needs the NVIDIA
//! driver (libcuda) and NVRTC (libnvrtc), which compiles the kernel for the GPU at hand
//! with the embedding width as a constant.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

use super::device::{DeviceTables, GpuRun};
use super::grid::{block_clock, block_seed, pool_seed, EpisodeStats, Sgd, Touch};
use super::partition::Parts;
use super::pool::{Pool, Sampler, CHUNK};
use super::{EmbedError, Result};

/// The kernel's source (compiled at run time by NVRTC).
const KERNEL: &str = include_str!("sgns.cu");

/// Threads per CUDA block: 16 half-warps, 16 samples in flight per block.
const BLOCK_THREADS: u32 = 256;

fn driver(what: &'static str) -> impl Fn(DriverError) -> EmbedError {
    move |e| EmbedError::Device(format!("cuda: {what}: {e:?}"))
}

/// The SGNS kernel for embedding width `dim`, compiled by NVRTC to PTX for compute
/// capability `cc` (needs libnvrtc, not a GPU). Products and sums are not fused
/// (`--fmad=false`), so they round as the CPU kernel's do.
pub fn compile_kernel(dim: usize, cc: (i32, i32)) -> Result<cudarc::nvrtc::Ptx> {
    // SAFETY: `dlopen` of CUDA's run-time compiler; its initialisers are NVIDIA's.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(EmbedError::Device(
            "--device cuda: cannot load libnvrtc.so, CUDA's run-time compiler (the CUDA toolkit's lib64, or pip's nvidia-cuda-nvrtc): add its directory to LD_LIBRARY_PATH".into(),
        ));
    }
    let opts = CompileOptions {
        fmad: Some(false),
        options: vec![
            format!("-DDIM={dim}"),
            format!("--gpu-architecture=compute_{}{}", cc.0, cc.1),
        ],
        name: Some("sgns.cu".into()),
        ..Default::default()
    };
    compile_ptx_with_opts(KERNEL, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => EmbedError::Device(format!(
            "cuda: compile the SGNS kernel: {}",
            log.to_string_lossy()
        )),
        e => EmbedError::Device(format!("cuda: compile the SGNS kernel: {e:?}")),
    })
}

/// One GPU, its stream and what the kernel's launch needs to know of it.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    name: String,
    total: usize,
    sms: u32,
    cc: (i32, i32),
}

impl Gpu {
    /// Opens GPU `ordinal`, with clear errors for a machine without the driver, NVRTC or
    /// that GPU.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        // SAFETY: `dlopen` of NVIDIA's driver library; its initialisers are the driver's.
        if !unsafe { sys::is_culib_present() } {
            return Err(EmbedError::Device(
                "--device cuda: cannot load libcuda.so, the NVIDIA driver's library: this machine has no NVIDIA driver (or it is not on the loader's path)".into(),
            ));
        }
        let count = CudaContext::device_count().map_err(driver("count the GPUs"))?;
        if ordinal >= count.max(0) as usize {
            return Err(EmbedError::Device(format!(
                "--device cuda:{ordinal}: this machine has {count} GPU(s){}",
                if count > 0 {
                    format!(" (cuda:0 to cuda:{})", count - 1)
                } else {
                    String::new()
                }
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("open the GPU"))?;
        let attr = |a| {
            ctx.attribute(a)
                .map_err(driver("read the GPU's attributes"))
        };
        use sys::CUdevice_attribute_enum::*;
        let sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let cc = (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let name = ctx.name().map_err(driver("read the GPU's name"))?;
        let total = ctx.total_mem().map_err(driver("read the GPU's memory"))?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            ordinal,
            name,
            total,
            sms,
            cc,
        })
    }

    /// "cuda:0 (NVIDIA H200, 132 SMs, 140.0 GiB)".
    pub fn describe(&self) -> String {
        format!(
            "cuda:{} ({}, {} SMs, {:.1} GiB)",
            self.ordinal,
            self.name,
            self.sms,
            self.total as f64 / (1u64 << 30) as f64
        )
    }

    fn free_memory(&self) -> Result<usize> {
        Ok(self
            .ctx
            .mem_get_info()
            .map_err(driver("read the GPU's free memory"))?
            .0)
    }

    /// The grid's parts n for an [nodes, dim] embedding trained from pools of
    /// `pool_samples`: 1 when both matrices, a pool and the tables fit 90 % of the GPU's
    /// free memory (each row then crosses the bus twice in the whole run), else the
    /// smallest n whose two parts in flight fit.
    pub fn grid_parts(&self, nodes: usize, dim: usize, pool_samples: usize) -> Result<usize> {
        let free = self.free_memory()? as u128 * 9 / 10;
        let fixed = pool_samples as u128 * 8 + nodes as u128 * 16 + (1 << 20);
        for n in 1..=1024usize {
            let rows = nodes.div_ceil(n) as u128;
            if fixed + 2 * rows * dim as u128 * 4 <= free {
                return Ok(n);
            }
        }
        Err(EmbedError::Device(format!(
            "{}: {} free, too little for the sample pool and two 1/1024 parts of a {nodes} × {dim} embedding",
            self.describe(),
            crate::machine::human(free * 10 / 9)
        )))
    }
}

/// The SGD of one run on the GPU: the kernel, the tables and the rows of the blocks in
/// flight.
pub struct Trainer<'a> {
    gpu: &'a Gpu,
    kernel: CudaFunction,
    tables: &'a DeviceTables,
    n: usize,
    dim: usize,
    sgd: Sgd,
    seed: u64,
    /// One half-warp in all: the samples one after another, as [`super::device::reference_pool`].
    serial: bool,
    /// CUDA blocks per launch (16 samples in flight each) set by `SAINTFLOW_CUDA_BLOCKS`
    /// (measurements), instead of the default: 8 per SM, and in flight at most a quarter of
    /// the rows of the block's smaller part.
    fixed_blocks: Option<u64>,
    local_of: CudaSlice<u32>,
    threshold: CudaSlice<u32>,
    alias: CudaSlice<u32>,
    members: CudaSlice<u32>,
    vertex: CudaSlice<f32>,
    context: CudaSlice<f32>,
    /// The parts whose vertex and context rows the device holds.
    loaded: [Option<usize>; 2],
    pairs: CudaSlice<u64>,
    seg_start: CudaSlice<u64>,
    prefix: CudaSlice<u64>,
    loss_sum: CudaSlice<f64>,
    loss_count: CudaSlice<u64>,
    touch_rows: Option<(CudaSlice<u32>, CudaSlice<u32>)>,
    staging: Vec<f32>,
}

impl<'a> Trainer<'a> {
    /// Compiles the kernel for `dim` and allocates the device's buffers: the rows of one
    /// vertex and one context part, a pool of `pool_samples`, the tables; and, when
    /// `record` (tests), one touch mask per row of each matrix.
    pub fn new(
        gpu: &'a Gpu,
        tables: &'a DeviceTables,
        (dim, pool_samples): (usize, usize),
        sgd: Sgd,
        seed: u64,
        record: bool,
    ) -> Result<Trainer<'a>> {
        let n = tables.noise_len.len();
        let nodes = tables.local_of.len();
        let ptx = compile_kernel(dim, gpu.cc)?;
        let module = gpu
            .ctx
            .load_module(ptx)
            .map_err(driver("load the SGNS kernel"))?;
        let kernel = module
            .load_function("sgns_block")
            .map_err(driver("load the SGNS kernel"))?;
        let s = &gpu.stream;
        let up = |v: &[u32]| s.clone_htod(v).map_err(driver("copy the grid's tables"));
        let rows = (0..n)
            .map(|j| (tables.offsets[j + 1] - tables.offsets[j]) as usize)
            .max()
            .unwrap_or(0)
            .max(1);
        let alloc_f32 = |k: usize| s.alloc_zeros::<f32>(k).map_err(driver("allocate the rows"));
        let chunks = pool_samples.div_ceil(CHUNK) + 1;
        let alloc_u64 = |k: usize| s.alloc_zeros::<u64>(k).map_err(driver("allocate the pool"));
        let touch_rows = if record {
            let z = |k| {
                s.alloc_zeros::<u32>(k)
                    .map_err(driver("allocate the touch masks"))
            };
            assert!(n <= 32, "touch masks hold 32 parts");
            Some((z(nodes)?, z(nodes)?))
        } else {
            None
        };
        Ok(Trainer {
            gpu,
            kernel,
            tables,
            n,
            dim,
            sgd,
            seed,
            serial: false,
            fixed_blocks: std::env::var("SAINTFLOW_CUDA_BLOCKS")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&b: &u64| b > 0),
            local_of: up(&tables.local_of)?,
            threshold: up(&tables.threshold)?,
            alias: up(&tables.alias)?,
            members: up(&tables.members)?,
            vertex: alloc_f32(rows * dim)?,
            context: alloc_f32(rows * dim)?,
            loaded: [None, None],
            pairs: alloc_u64(pool_samples.max(1))?,
            seg_start: alloc_u64(chunks)?,
            prefix: alloc_u64(chunks + 1)?,
            loss_sum: s.alloc_zeros::<f64>(1).map_err(driver("allocate"))?,
            loss_count: alloc_u64(1)?,
            touch_rows,
            staging: Vec::new(),
        })
    }

    /// Launches `blocks` CUDA blocks of 256 threads per grid block instead of the default
    /// (measurements and tests; None: the default).
    pub fn blocks(mut self, blocks: Option<u64>) -> Self {
        if blocks.is_some() {
            self.fixed_blocks = blocks;
        }
        self
    }

    /// Runs every block with one half-warp (the samples in order: the CPU twin's order).
    pub fn serial(mut self, serial: bool) -> Self {
        self.serial = serial;
        self
    }

    /// Makes the device hold vertex part i and context part j, writing back the parts it
    /// held before into the host matrices (global rows).
    fn load(&mut self, (i, j): (usize, usize), host: (&mut [f32], &mut [f32])) -> Result<()> {
        let (hv, hc) = host;
        self.swap(0, i, hv)?;
        self.swap(1, j, hc)
    }

    fn swap(&mut self, which: usize, part: usize, host: &mut [f32]) -> Result<()> {
        if self.loaded[which] == Some(part) {
            return Ok(());
        }
        self.store(which, host)?;
        if host.is_empty() && self.n == 1 {
            // A context matrix that lives on the device only: zeros from the allocation.
            self.loaded[which] = Some(part);
            return Ok(());
        }
        let members = self.tables.part(&self.tables.members, part);
        let s = self.gpu.stream.clone();
        let dev = if which == 0 {
            &mut self.vertex
        } else {
            &mut self.context
        };
        if self.n == 1 {
            s.memcpy_htod(host, dev)
                .map_err(driver("copy rows to the GPU"))?;
        } else {
            let d = self.dim;
            self.staging.clear();
            for &v in members {
                self.staging
                    .extend_from_slice(&host[v as usize * d..(v as usize + 1) * d]);
            }
            let mut view = dev.slice_mut(0..self.staging.len());
            s.memcpy_htod(&self.staging, &mut view)
                .map_err(driver("copy rows to the GPU"))?;
            // The staging buffer is pageable: the copy has read it once this returns.
        }
        self.loaded[which] = Some(part);
        Ok(())
    }

    /// Writes the rows the device holds for matrix `which` back to the host matrix.
    fn store(&mut self, which: usize, host: &mut [f32]) -> Result<()> {
        let Some(part) = self.loaded[which] else {
            return Ok(());
        };
        if host.is_empty() && self.n == 1 {
            self.loaded[which] = None;
            return Ok(());
        }
        let s = self.gpu.stream.clone();
        let dev = if which == 0 {
            &self.vertex
        } else {
            &self.context
        };
        if self.n == 1 {
            s.memcpy_dtoh(&dev.slice(0..host.len()), host)
                .map_err(driver("copy rows from the GPU"))?;
        } else {
            let members = self.tables.part(&self.tables.members, part);
            let d = self.dim;
            self.staging.resize(members.len() * d, 0.0);
            s.memcpy_dtoh(&dev.slice(0..members.len() * d), &mut self.staging)
                .map_err(driver("copy rows from the GPU"))?;
            s.synchronize().map_err(driver("copy rows from the GPU"))?;
            for (k, &v) in members.iter().enumerate() {
                host[v as usize * d..(v as usize + 1) * d]
                    .copy_from_slice(&self.staging[k * d..(k + 1) * d]);
            }
        }
        self.loaded[which] = None;
        Ok(())
    }

    /// Writes every row the device holds back to the host matrices (an empty host context
    /// matrix with one part: the context rows stay on the device).
    pub fn finish(&mut self, (hv, hc): (&mut [f32], &mut [f32])) -> Result<()> {
        self.store(0, hv)?;
        self.store(1, hc)?;
        self.gpu
            .stream
            .synchronize()
            .map_err(driver("copy rows from the GPU"))
    }

    /// Trains pool `index` (after `done` samples of the run): n rounds of the n blocks
    /// (i, (i + r) mod n), each block's samples once. Blocks whose rows are on the device
    /// run back to back without waiting; the call returns when the pool is trained.
    pub fn train_pool(
        &mut self,
        pool: &Pool,
        (index, done): (u64, u64),
        (hv, hc): (&mut [f32], &mut [f32]),
        touch: &impl Touch,
    ) -> Result<EpisodeStats> {
        let s = self.gpu.stream.clone();
        let len = pool.len();
        {
            let mut dst = self.pairs.slice_mut(0..len);
            s.memcpy_htod(pool.pairs(), &mut dst)
                .map_err(driver("copy the pool to the GPU"))?;
        }
        s.memset_zeros(&mut self.loss_sum)
            .map_err(driver("reset"))?;
        s.memset_zeros(&mut self.loss_count)
            .map_err(driver("reset"))?;
        let n = self.n;
        let pseed = pool_seed(self.seed, index);
        for r in 0..n {
            if let Some((tv, tc)) = &mut self.touch_rows {
                s.memset_zeros(tv).map_err(driver("reset"))?;
                s.memset_zeros(tc).map_err(driver("reset"))?;
            }
            for i in 0..n {
                let j = (i + r) % n;
                let count = pool.block_len(i, j);
                if count == 0 {
                    continue;
                }
                self.load((i, j), (&mut *hv, &mut *hc))?;
                let clock = block_clock(done, len, (n, 1), (0, r), count);
                self.launch(pool, (i, j), count, clock, block_seed(pseed, 0, i, j, n))?;
            }
            if self.touch_rows.is_some() {
                self.report_touches(r, touch)?;
            }
        }
        let mut sum = [0f64];
        let mut cnt = [0u64];
        s.memcpy_dtoh(&self.loss_sum, &mut sum)
            .map_err(driver("read the loss"))?;
        s.memcpy_dtoh(&self.loss_count, &mut cnt)
            .map_err(driver("read the loss"))?;
        s.synchronize().map_err(driver("train a pool"))?;
        Ok(EpisodeStats {
            loss_sum: sum[0],
            loss_count: cnt[0],
            samples: len as u64,
        })
    }

    fn launch(
        &mut self,
        pool: &Pool,
        (i, j): (usize, usize),
        count: usize,
        (at, step): (f64, f64),
        seed: u64,
    ) -> Result<()> {
        let s = self.gpu.stream.clone();
        let mut starts = Vec::new();
        let mut prefix = vec![0u64];
        for (start, l) in pool.segments(i, j) {
            if l > 0 {
                starts.push(start as u64);
                prefix.push(prefix.last().unwrap() + l as u64);
            }
        }
        let nseg = starts.len() as u32;
        s.memcpy_htod(&starts, &mut self.seg_start.slice_mut(0..starts.len()))
            .map_err(driver("copy the block's segments"))?;
        s.memcpy_htod(&prefix, &mut self.prefix.slice_mut(0..prefix.len()))
            .map_err(driver("copy the block's segments"))?;
        let t = self.tables;
        let (o, e) = (t.offsets[j] as usize, t.offsets[j + 1] as usize);
        let thr = self.threshold.slice(o..e);
        let alias = self.alias.slice(o..e);
        let members_j = self.members.slice(o..e);
        let (count, lo) = (count as u64, 0u64);
        let (noise_len, touch_bit) = (t.noise_len[j], 1u32 << (i % 32));
        let (lr, total) = (self.sgd.lr, self.sgd.total);
        let (negatives, neg_weight) = (self.sgd.negatives as u32, self.sgd.negative_weight);
        let cfg = if self.serial {
            LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (16, 1, 1),
                shared_mem_bytes: 0,
            }
        } else {
            // Hogwild stays close to the serial SGD while samples in flight rarely share a
            // row: at most a quarter as many as the smaller part has rows (a 512-node graph
            // with 16 896 samples in flight lost nearly every update and did not train).
            let rows = (t.offsets[i + 1] - t.offsets[i]).min(t.offsets[j + 1] - t.offsets[j]);
            let in_flight = (u64::from(rows) / 4).max(16);
            let per_block = u64::from(BLOCK_THREADS / 16);
            let blocks = match self.fixed_blocks {
                Some(b) => count.div_ceil(per_block).min(b),
                None => count
                    .min(in_flight)
                    .div_ceil(per_block)
                    .min(u64::from(self.gpu.sms) * 8),
            };
            LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (BLOCK_THREADS, 1, 1),
                shared_mem_bytes: 0,
            }
        };
        let null = 0u64;
        let mut b = s.launch_builder(&self.kernel);
        b.arg(&mut self.vertex)
            .arg(&mut self.context)
            .arg(&self.pairs)
            .arg(&self.local_of)
            .arg(&self.seg_start)
            .arg(&self.prefix)
            .arg(&nseg)
            .arg(&count)
            .arg(&lo)
            .arg(&thr)
            .arg(&alias)
            .arg(&noise_len)
            .arg(&members_j);
        match &mut self.touch_rows {
            Some((tv, tc)) => b.arg(tv).arg(tc),
            None => b.arg(&null).arg(&null),
        };
        b.arg(&touch_bit)
            .arg(&seed)
            .arg(&lr)
            .arg(&at)
            .arg(&step)
            .arg(&total)
            .arg(&negatives)
            .arg(&neg_weight)
            .arg(&mut self.loss_sum)
            .arg(&mut self.loss_count);
        // SAFETY: the arguments match `sgns_block`'s parameters in order and type; every
        // buffer is at least as long as the kernel reads: the pool (count samples in the
        // segments), the part's rows (local indices < the part's size) and tables.
        unsafe { b.launch(cfg) }.map_err(driver("launch the SGNS kernel"))?;
        Ok(())
    }

    /// Reports round r's touch masks to `touch`: every row with a block's bit set.
    fn report_touches(&mut self, r: usize, touch: &impl Touch) -> Result<()> {
        let s = self.gpu.stream.clone();
        let Some((tv, tc)) = &self.touch_rows else {
            return Ok(());
        };
        let n = self.n;
        for (context, dev) in [(false, tv), (true, tc)] {
            let host = s.clone_dtoh(dev).map_err(driver("read the touch masks"))?;
            s.synchronize().map_err(driver("read the touch masks"))?;
            for (row, &mask) in host.iter().enumerate() {
                for i in (0..n).filter(|&i| mask & (1 << i) != 0) {
                    touch.touch(r, i, (i + r) % n, context, row as u32);
                }
            }
        }
        Ok(())
    }
}

/// Trains `total` samples in pools of `cap` on `gpu` while the CPU cores fill the next
/// pool; `report(k, stats)` after pool k. The host matrices receive the trained rows.
#[allow(clippy::too_many_arguments)]
pub fn train_pools(
    gpu: &Gpu,
    parts: &Parts,
    sampler: &Sampler<'_>,
    (hv, hc): (&mut [f32], &mut [f32]),
    (dim, sgd, seed): (usize, Sgd, u64),
    (total, cap): (u64, usize),
    report: &mut dyn FnMut(u64, &EpisodeStats) -> Result<()>,
    touch: &impl Touch,
) -> Result<GpuRun> {
    let tables = DeviceTables::new(parts);
    let mut trainer = Trainer::new(gpu, &tables, (dim, cap), sgd, seed, touch.enabled())?;
    let episodes = total.div_ceil(cap as u64);
    let len_of = |k: u64| (total - k * cap as u64).min(cap as u64) as usize;
    let start = Instant::now();
    let (mut cur, mut next) = (Pool::default(), Pool::default());
    cur.fill(sampler, 0, len_of(0))?;
    let mut wait = start.elapsed().as_secs_f64();
    let mut last_loss = f64::NAN;
    for k in 0..episodes {
        let trainer = &mut trainer;
        let (hv, hc) = (&mut *hv, &mut *hc);
        let (trained, filled, gpu_end, fill_end) = std::thread::scope(|s| {
            let cur = &cur;
            let gpu_side = s.spawn(move || {
                let r = trainer.train_pool(cur, (k, k * cap as u64), (hv, hc), touch);
                (r, Instant::now())
            });
            let filled = if k + 1 < episodes {
                next.fill(sampler, (k + 1) * cap as u64, len_of(k + 1))
            } else {
                Ok(())
            };
            let fill_end = Instant::now();
            let (trained, gpu_end) = gpu_side
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            (trained, filled, gpu_end, fill_end)
        });
        let stats = trained?;
        filled?;
        if k + 1 < episodes {
            wait += fill_end.saturating_duration_since(gpu_end).as_secs_f64();
        }
        last_loss = stats.loss_sum / stats.loss_count.max(1) as f64;
        report(k, &stats)?;
        std::mem::swap(&mut cur, &mut next);
    }
    trainer.finish((hv, hc))?;
    Ok(GpuRun { last_loss, wait })
}
