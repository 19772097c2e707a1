//! `gen kronecker`: R-MAT / stochastic-Kronecker graphs as in JPDC §7.6, streamed to disk.
//!
//! * Edges: M = round(N·D/2) draws; each draw descends `scale` levels of the 2×2 initiator
//!   (default ∝ [[0.9, 0.5], [0.5, 0.1]], i.e. quadrant probabilities 0.45/0.25/0.25/0.05),
//!   picking a quadrant from 16 random bits per level. Ids are then relabelled by a keyed
//!   pseudo-random permutation, so hubs are spread over the id range (which also balances
//!   the CSR builder's buckets). Both directions are stored; self loops and duplicates are
//!   dropped, so the realised mean degree is a little below D (`info` reports it).
//! * Labels: class(v) = v mod C, a uniform labelling after the permutation.
//! * `--planted h`: with probability h a draw's second end is moved to the node of the
//!   first end's class within its own block of C consecutive ids, so the intra-class edge
//!   fraction is about h + (1−h)/C while degrees stay heavy-tailed; features are
//!   `separation · μ_class + N(0, I)` with unit class centroids μ_c, so features alone are
//!   weakly informative and neighbourhoods strongly so. Without it, features are N(0, I).
//! * Roles: independent per node with probabilities `split` (train/val/test, the rest none).
//! * `--types T` (issue 57): a typed store. The permuted id range is cut into T equal
//!   contiguous node types `t0..t{T-1}`; each draw's edge (u, v) belongs to the relation of
//!   its ends' types: `r{a}_{b}` from type a to type b for a ≤ b (symmetric when a = b) and
//!   its reverse `rev_r{a}_{b}` for a < b, T² relations in all, together exactly the full
//!   graph. Type t has its own feature width (`--type-features`, default F for t0 and none
//!   for the others); only t0 carries labels and roles (the target type, as ogbn-mag's
//!   papers), the planted classes still shaping every edge, so the other types carry the
//!   class signal through the structure. The relations are cut from the full graph once it
//!   is written (rows sorted, types contiguous: a row's part in type b is one slice).
//! * Determinism: every random value is a function of (seed, stream, index); chunks of draws
//!   and blocks of nodes may run on any thread in any order.

use std::time::Instant;

use rand::SeedableRng;
use rand_core::RngCore;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use crate::machine::{human, MemoryLimit};
use crate::progress::Progress;
use crate::seed::{hash3, stream};
use crate::store::build::{self, Meta};
use crate::store::csr_build::{pack, CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{
    relation_sections, type_features_section, Dtype, LabelKind, NodeTypeMeta, RelationMeta, Role,
    SectionEntry, SectionId, SplitCounts, TrainGraph, TypesMeta, MAX_CLASSES, NO_LABEL,
};
use crate::store::gen::{random_role, Permutation};
use crate::store::writer::{SectionWriter, StoreWriter};
use crate::store::StoreError;

/// Draws per chunk: 2^18 draws → 4 MiB of keys, enough to amortise per-bucket appends.
const CHUNK_DRAWS: u64 = 1 << 18;
/// Nodes per block when writing node sections.
const NODE_BLOCK: u64 = 1 << 15;

/// Planted-partition parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planted {
    /// Probability that a draw is rewired to stay inside the first end's class.
    pub homophily: f64,
    /// Distance of each class centroid from the origin, in noise standard deviations.
    pub separation: f32,
}

impl Default for Planted {
    fn default() -> Self {
        Planted {
            homophily: 0.8,
            separation: 1.0,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct KroneckerSpec {
    /// N = 2^scale nodes (1..=31).
    pub scale: u32,
    /// Target mean degree D (edge draws = N·D/2).
    pub degree: f64,
    /// Feature width F.
    pub n_features: u32,
    /// Number of classes C (≥ 1).
    pub n_classes: u32,
    /// Seed of everything random.
    pub seed: u64,
    /// Initiator matrix [a, b; c, d] (normalised to sum 1).
    pub initiator: [f64; 4],
    /// Planted-partition mode.
    pub planted: Option<Planted>,
    /// Train / val / test probabilities (sum ≤ 1).
    pub split: [f64; 3],
    /// Memory for one CSR bucket.
    pub bucket_bytes: u64,
    /// A typed store (issue 57); `None`: homogeneous, as before.
    pub typed: Option<TypedGen>,
}

/// The typed option of the generator (`gen kronecker --types T`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedGen {
    /// Feature width of each node type, one per type (T = its length, 2..=[`MAX_GEN_TYPES`]).
    pub features: Vec<u32>,
}

/// Most node types the generator makes (T² relations).
pub const MAX_GEN_TYPES: usize = 16;

impl TypedGen {
    /// Number of node types T.
    pub fn n_types(&self) -> usize {
        self.features.len()
    }

    /// The first id of type t (t = T: N), types of equal size up to the last's remainder.
    pub fn start(&self, n: u64, t: usize) -> u64 {
        let per = n / self.n_types() as u64;
        if t >= self.n_types() {
            n
        } else {
            per * t as u64
        }
    }

    /// The type of node v.
    pub fn type_of(&self, n: u64, v: u64) -> usize {
        let per = n / self.n_types() as u64;
        ((v / per.max(1)) as usize).min(self.n_types() - 1)
    }

    /// The relations in id order: (name, src, dst, reverse): r{a}_{b} for a ≤ b, then
    /// rev_r{a}_{b} for a < b.
    pub fn relations(&self) -> Vec<(String, usize, usize, usize)> {
        let t = self.n_types();
        let mut fwd = Vec::new();
        for a in 0..t {
            for b in a..t {
                fwd.push((a, b));
            }
        }
        let revs: Vec<(usize, usize)> = fwd.iter().copied().filter(|(a, b)| a < b).collect();
        let mut out = Vec::with_capacity(fwd.len() + revs.len());
        for (i, &(a, b)) in fwd.iter().enumerate() {
            let rev = match revs.iter().position(|&p| p == (a, b)) {
                Some(k) => fwd.len() + k,
                None => i,
            };
            out.push((format!("r{a}_{b}"), a, b, rev));
        }
        for &(a, b) in &revs {
            let i = fwd.iter().position(|&p| p == (a, b)).expect("listed above");
            out.push((format!("rev_r{a}_{b}"), b, a, i));
        }
        out
    }
}

impl Default for KroneckerSpec {
    fn default() -> Self {
        KroneckerSpec {
            scale: 14,
            degree: 16.0,
            n_features: 32,
            n_classes: 4,
            seed: 1,
            initiator: [0.9, 0.5, 0.5, 0.1],
            planted: None,
            split: [0.6, 0.2, 0.2],
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            typed: None,
        }
    }
}

/// What a generation did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenReport {
    /// N.
    pub n_nodes: u64,
    /// Edge draws made.
    pub draws: u64,
    /// Directed entries in the full graph.
    pub entries: u64,
    /// Directed entries in the training graph.
    pub train_entries: u64,
    /// Draws that were self loops.
    pub self_loops: u64,
    /// Directed entries dropped as duplicates.
    pub duplicates: u64,
    /// Wall time.
    pub seconds: f64,
}

impl KroneckerSpec {
    fn validate(&self) -> Result<(), StoreError> {
        let arg = |w: String| Err(StoreError::argument(w));
        if !(1..=31).contains(&self.scale) {
            return arg(format!(
                "--scale expected 1..=31 (u32 node ids), got {}",
                self.scale
            ));
        }
        // Issue 55: a degree of 0 gave a store without edges. The upper bound is the disk
        // check of `check_resources` (32 bytes per draw).
        if !(self.degree.is_finite() && self.degree > 0.0) {
            return arg(format!("--degree expected > 0, got {}", self.degree));
        }
        if self.draws() == 0 {
            return arg(format!(
                "--degree {} at --scale {}: N·degree/2 rounds to 0 edge draws, expected at least 1 (degree ≥ {})",
                self.degree,
                self.scale,
                1.0 / self.n_nodes() as f64
            ));
        }
        if self.bucket_bytes == 0 {
            return arg("--bucket-mib expected ≥ 1, got 0".into());
        }
        if self.n_classes == 0 || u64::from(self.n_classes) >= MAX_CLASSES {
            return arg(format!(
                "--classes expected 1..{MAX_CLASSES} (exclusive), got {}",
                self.n_classes
            ));
        }
        if self.initiator.iter().any(|&x| !(x.is_finite() && x >= 0.0))
            || self.initiator.iter().sum::<f64>() <= 0.0
        {
            return arg(format!(
                "initiator expected non-negative entries with a positive sum, got {:?}",
                self.initiator
            ));
        }
        super::check_split(self.split)?;
        if let Some(p) = self.planted {
            if !(0.0..=1.0).contains(&p.homophily) {
                return arg(format!("--homophily expected 0..=1, got {}", p.homophily));
            }
            if !(p.separation.is_finite() && p.separation >= 0.0) {
                return arg(format!("--separation expected ≥ 0, got {}", p.separation));
            }
        }
        if let Some(t) = &self.typed {
            if !(2..=MAX_GEN_TYPES).contains(&t.n_types()) {
                return arg(format!(
                    "--types expected 2..={MAX_GEN_TYPES}, got {}",
                    t.n_types()
                ));
            }
            if self.n_nodes() < t.n_types() as u64 {
                return arg(format!(
                    "--types {} at --scale {}: fewer nodes than types",
                    t.n_types(),
                    self.scale
                ));
            }
        }
        let n = 1u64 << self.scale;
        let feat_bytes = (n as f64) * f64::from(self.max_features()) * 4.0;
        if feat_bytes > 1e15 {
            return arg(format!("features would take {feat_bytes:.3e} bytes"));
        }
        Ok(())
    }

    /// Issue 28: what generating this spec takes, estimated before anything is allocated
    /// or written (f64: `--degree 1e30` does not overflow): memory, the node blocks in
    /// flight (`threads` × 2 blocks of ≤ 32 Ki rows × F f32) and the planted centroids
    /// (C × F f32), against the machine's memory ([`MemoryLimit::Detect`],
    /// `SAINTFLOW_MEMORY_LIMIT=off` to skip); disk, [`KroneckerSpec::disk_peak`] against
    /// the free space where `out` goes. The error names the flag behind the larger part
    /// with the estimate.
    pub fn check_resources(&self, out: &std::path::Path) -> Result<(), StoreError> {
        let n = self.n_nodes() as f64;
        let f = f64::from(self.max_features());
        let rows = n.min(NODE_BLOCK as f64);
        let in_flight = (rayon::current_num_threads() as f64 * 2.0).min((n / rows).ceil());
        let blocks = in_flight * rows * f * 4.0;
        let centroids = match self.planted {
            Some(_) => f64::from(self.n_classes) * f * 4.0,
            None => 0.0,
        };
        let bytes = |x: f64| human(x.min(u128::MAX as f64) as u128);
        if let Some((limit, source)) = MemoryLimit::Detect.resolve() {
            let memory = blocks + centroids + self.bucket_bytes as f64;
            if memory > limit as f64 {
                let flag = if centroids > blocks {
                    format!("--classes {} with --planted", self.n_classes)
                } else {
                    format!("--features {}", self.n_features)
                };
                return Err(StoreError::argument(format!(
                    "{flag}: generating needs about {} of memory (feature blocks {}, class centroids {}); this machine has {} ({source})",
                    bytes(memory),
                    bytes(blocks),
                    bytes(centroids),
                    human(u128::from(limit))
                )));
            }
        }
        let (edges, features, disk) = self.disk_peak();
        let dir = existing_ancestor(out);
        if let Ok(free) = fs4::available_space(&dir) {
            if disk > free as f64 {
                let flag = if edges > features {
                    format!("--degree {} (--scale {})", self.degree, self.scale)
                } else {
                    format!("--features {}", self.n_features)
                };
                return Err(StoreError::argument(format!(
                    "{flag}: the store needs about {} of disk while written (edges {}, features {}); {} has {} free",
                    bytes(disk),
                    bytes(edges),
                    bytes(features),
                    dir.display(),
                    human(u128::from(free))
                )));
            }
        }
        Ok(())
    }

    /// Issue 56: the most disk the store takes while it is written, as (edge part, feature
    /// part, peak) in bytes, f64. Two moments can be the peak: when the last draw is
    /// bucketed (16 bytes of scratch per draw, one key each way, and nothing else yet), and
    /// the end (every bucket file is removed as soon as it is read, before its rows are
    /// written, so the scratch and the CSR never add up past the scratch): the full graph's
    /// 8 bytes per draw, the induced training graph's share of them (p², p the training
    /// fraction, roles being independent of edges; +1 % for chance), a typed store's
    /// relation sections (a second copy of the full graph's, T·N rows), 16·N of offsets, 5·N of labels
    /// and roles, 4·N·F of features. Duplicates and self loops only make it smaller. At
    /// scale 27, degree 24, F = 32: 37.7 GB (the store 37.5 GB), where the old sum of both
    /// moments (32 bytes per draw) said 71.5 GB.
    pub fn disk_peak(&self) -> (f64, f64, f64) {
        let n = self.n_nodes() as f64;
        let draws = self.draws() as f64;
        let features = 4.0 * n * f64::from(self.max_features());
        let train_share = (self.split[0] * self.split[0] + 0.01).min(1.0);
        // A typed store's T² relations each have their source type's N/T rows.
        let (relations, relation_rows) = match &self.typed {
            Some(t) => (1.0, n * t.n_types() as f64),
            None => (0.0, 0.0),
        };
        let csr = 8.0 * draws * (1.0 + train_share + relations);
        let offsets = 16.0 * n + 8.0 * relation_rows;
        // While buckets are turned into rows, each removed bucket's 16 bytes a draw give way
        // to its rows and offsets: a mix of the two moments, never above the larger.
        let scratch = 16.0 * draws;
        let end = csr + offsets + 5.0 * n + features;
        (csr.max(16.0 * draws), features, scratch.max(end))
    }

    /// The widest feature row (F, or the widest type's in a typed store).
    pub fn max_features(&self) -> u32 {
        match &self.typed {
            Some(t) => t.features.iter().copied().max().unwrap_or(0),
            None => self.n_features,
        }
    }

    /// Number of nodes.
    pub fn n_nodes(&self) -> u64 {
        1u64 << self.scale
    }

    /// Number of edge draws.
    pub fn draws(&self) -> u64 {
        (self.n_nodes() as f64 * self.degree / 2.0).round() as u64
    }

    /// Class of node `v`.
    pub fn class_of(&self, v: u64) -> u32 {
        (v % u64::from(self.n_classes)) as u32
    }

    /// Role of node `v`.
    pub fn role_of(&self, v: u64) -> Role {
        random_role(self.seed, self.split, v)
    }

    fn source(&self) -> String {
        let mut s = format!(
            "saintflow gen kronecker --scale {} --degree {} --features {} --classes {} --seed {} --initiator {},{},{},{} --split {},{},{}",
            self.scale, self.degree, self.n_features, self.n_classes, self.seed,
            self.initiator[0], self.initiator[1], self.initiator[2], self.initiator[3],
            self.split[0], self.split[1], self.split[2]
        );
        if let Some(p) = self.planted {
            s += &format!(
                " --planted --homophily {} --separation {}",
                p.homophily, p.separation
            );
        }
        if let Some(t) = &self.typed {
            let widths: Vec<String> = t.features.iter().map(u32::to_string).collect();
            s += &format!(
                " --types {} --type-features {}",
                t.n_types(),
                widths.join(",")
            );
        }
        s
    }
}

/// Quadrant thresholds on 16-bit uniforms: q = #{t : r ≥ t}, quadrant q ∈ 0..4 is
/// (row bit, col bit) = (q >> 1, q & 1).
fn thresholds(init: [f64; 4]) -> [u32; 3] {
    let sum: f64 = init.iter().sum();
    let mut acc = 0.0;
    std::array::from_fn(|i| {
        acc += init[i] / sum;
        (acc * 65536.0).round().min(65536.0) as u32
    })
}

/// One R-MAT draw over `scale` levels.
#[inline]
fn rmat(rng: &mut Xoshiro256PlusPlus, scale: u32, t: [u32; 3]) -> (u64, u64) {
    let (mut u, mut v) = (0u64, 0u64);
    let mut bits = 0u64;
    for level in 0..scale {
        if level % 4 == 0 {
            bits = rng.next_u64();
        }
        let r = (bits & 0xffff) as u32;
        bits >>= 16;
        let q = u64::from(r >= t[0]) + u64::from(r >= t[1]) + u64::from(r >= t[2]);
        u = (u << 1) | (q >> 1);
        v = (v << 1) | (q & 1);
    }
    (u, v)
}

/// Generates the store described by `spec` at `out`.
pub fn generate_kronecker(
    spec: &KroneckerSpec,
    out: &std::path::Path,
    force: bool,
    progress: &Progress,
) -> Result<GenReport, StoreError> {
    spec.validate()?;
    spec.check_resources(out)?;
    let start = Instant::now();
    let n = spec.n_nodes();
    let draws = spec.draws();
    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let mut builder = CsrBuilder::new(&scratch, n, draws * 2, spec.bucket_bytes)?;
    let c = u64::from(spec.n_classes);
    let batch = (rayon::current_num_threads() as u64 * 2).max(1);
    let self_loops = draw_edges(spec, (n, draws), batch, &mut builder, progress)?;

    // Only the target type t0 of a typed store has roles.
    let is_train = |v: u32| {
        let v = u64::from(v);
        spec.typed.as_ref().is_none_or(|t| t.type_of(n, v) == 0) && spec.role_of(v) == Role::Train
    };
    let graph = build::write_graph(&w, builder, None, &is_train, progress)?;

    let nodes = write_nodes(spec, &w, batch, progress)?;
    let typed = spec.typed.as_ref();

    let stats = graph.stats;
    let (entries, train_entries) = (graph.n_entries, graph.n_train_entries);
    let meta = Meta {
        n_nodes: n,
        n_features: if typed.is_some() {
            0
        } else {
            u64::from(spec.n_features)
        },
        n_classes: c,
        label_kind: LabelKind::Single,
        train_graph: TrainGraph::Induced,
        split: nodes.split,
        source: spec.source(),
    };
    let mut header = build::header(meta, graph, nodes.features, nodes.labels, nodes.roles);
    if let Some(t) = typed {
        let mut node_types = Vec::with_capacity(t.n_types());
        for (k, s) in nodes.type_features.into_iter().enumerate() {
            node_types.push(NodeTypeMeta {
                name: format!("t{k}"),
                count: t.start(n, k + 1) - t.start(n, k),
                n_features: u64::from(t.features[k]),
                features: s.map(SectionWriter::finish).transpose()?,
                labelled: k == 0,
            });
        }
        let relations = write_typed_relations(&w, t, n)?;
        header.types = Some(TypesMeta {
            node_types,
            relations,
        });
    }
    w.commit(&header, |store| {
        // A typed store's relations against the full graph, as `check` verifies them.
        StoreError::from_problems(store.path(), crate::store::typed::check_full(store, true))
    })?;
    Ok(GenReport {
        n_nodes: n,
        draws,
        entries,
        train_entries,
        self_loops,
        duplicates: stats.duplicates,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Cuts the written full graph into the typed generator's relations: relation (a → b) of
/// row u is the part of u's row in type b's id range (rows are sorted and types
/// contiguous, so one slice found by two binary searches); one pass over the full graph
/// per source type, O(1) memory beyond the mapped sections.
fn write_typed_relations(
    w: &StoreWriter,
    t: &TypedGen,
    n: u64,
) -> Result<Vec<RelationMeta>, StoreError> {
    let map = |id: SectionId| -> Result<Option<memmap2::Mmap>, StoreError> {
        let path = w.file_path(id.file_name());
        let f = std::fs::File::open(&path).map_err(|e| StoreError::io(&path, "open", e))?;
        let len = f
            .metadata()
            .map_err(|e| StoreError::io(&path, "stat", e))?
            .len();
        if len == 0 {
            return Ok(None);
        }
        // SAFETY: a section this writer wrote and finished (fsynced), in its own temporary
        // directory that nothing else writes; mapped read-only.
        unsafe { memmap2::Mmap::map(&f) }
            .map(Some)
            .map_err(|e| StoreError::io(&path, "mmap", e))
    };
    let (om, im) = (map(SectionId::FullOffsets)?, map(SectionId::FullIndices)?);
    let offsets: &[u64] = om.as_deref().map_or(&[], bytemuck::cast_slice);
    let indices: &[u32] = im.as_deref().map_or(&[], bytemuck::cast_slice);
    let mut out = Vec::new();
    for (r, (name, a, b, reverse)) in t.relations().into_iter().enumerate() {
        let [(on, of), (iname, ifile)] = relation_sections(r);
        let mut os = w.named_section((&on, &of), Dtype::U64)?;
        let mut is = w.named_section((&iname, &ifile), Dtype::U32)?;
        let (lo, hi) = (t.start(n, b) as u32, t.start(n, b + 1) as u32);
        let mut entries = 0u64;
        let mut obuf = Vec::with_capacity(1 << 14);
        let mut ibuf: Vec<u32> = Vec::with_capacity(1 << 16);
        for u in t.start(n, a)..t.start(n, a + 1) {
            obuf.push(entries);
            let row = &indices[offsets[u as usize] as usize..offsets[u as usize + 1] as usize];
            let (x, y) = (
                row.partition_point(|&v| v < lo),
                row.partition_point(|&v| v < hi),
            );
            ibuf.extend_from_slice(&row[x..y]);
            entries += (y - x) as u64;
            if obuf.len() == obuf.capacity() {
                os.write_u64s(&obuf)?;
                obuf.clear();
            }
            if ibuf.len() >= 1 << 16 {
                is.write_u32s(&ibuf)?;
                ibuf.clear();
            }
        }
        obuf.push(entries);
        os.write_u64s(&obuf)?;
        is.write_u32s(&ibuf)?;
        out.push(RelationMeta {
            name,
            src: a as u32,
            dst: b as u32,
            n_entries: entries,
            reverse: reverse as u32,
            offsets: os.finish()?,
            indices: is.finish()?,
        });
    }
    Ok(out)
}

/// C centroids of norm `separation` in F dimensions, uniformly oriented.
fn unit_centroids(c: usize, f: usize, seed: u64, separation: f32) -> Vec<f32> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(hash3(seed, stream::CENTROIDS, 0));
    let mut mu: Vec<f32> = (0..c * f)
        .map(|_| StandardNormal.sample(&mut rng))
        .collect();
    for row in mu.chunks_exact_mut(f.max(1)) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            row.iter_mut().for_each(|x| *x *= separation / norm);
        }
    }
    mu
}

/// The nearest existing directory at or above `path`'s parent (where a new output's
/// blocks will come from).
fn existing_ancestor(path: &std::path::Path) -> std::path::PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    abs.ancestors().skip(1).find(|p| p.is_dir()).map_or_else(
        || std::path::PathBuf::from("."),
        std::path::Path::to_path_buf,
    )
}

/// The edge draws, in parallel batches of chunks (each chunk's keys grouped by bucket;
/// batch k + 1 drawn while batch k is appended to the bucket files); the self loops met.
fn draw_edges(
    spec: &KroneckerSpec,
    (n, draws): (u64, u64),
    batch: u64,
    builder: &mut CsrBuilder,
    progress: &Progress,
) -> Result<u64, StoreError> {
    let perm = Permutation::new(n, hash3(spec.seed, stream::PERMUTATION, 0));
    let t = thresholds(spec.initiator);
    let c = u64::from(spec.n_classes);
    let rewire = spec
        .planted
        .map(|p| (p.homophily * (1u64 << 32) as f64) as u64);

    let n_chunks = draws.div_ceil(CHUNK_DRAWS);
    let bar = progress.ticker(draws, "edges", "draws");
    let mut self_loops = 0u64;
    let n_buckets = builder.n_buckets();
    let map = builder.bucket_map();
    let bucket_of = |src: u64| map.bucket_of(src as u32);
    let generate = |first: u64| -> Vec<(Vec<Vec<u64>>, u64)> {
        (first..(first + batch).min(n_chunks))
            .into_par_iter()
            .map(|chunk| {
                let mut rng =
                    Xoshiro256PlusPlus::seed_from_u64(hash3(spec.seed, stream::EDGES, chunk));
                let lo = chunk * CHUNK_DRAWS;
                let hi = (lo + CHUNK_DRAWS).min(draws);
                let mut per_bucket: Vec<Vec<u64>> = vec![Vec::new(); n_buckets];
                let mut loops = 0u64;
                for _ in lo..hi {
                    let (a, b) = rmat(&mut rng, spec.scale, t);
                    let u = perm.apply(a);
                    let mut v = perm.apply(b);
                    if let Some(p) = rewire {
                        let r = rng.next_u64();
                        if (r >> 32) < p {
                            let moved = v - v % c + u % c;
                            if moved < n {
                                v = moved;
                            }
                        }
                    }
                    if u == v {
                        loops += 1;
                        continue;
                    }
                    per_bucket[bucket_of(u)].push(pack(u as u32, v as u32));
                    per_bucket[bucket_of(v)].push(pack(v as u32, u as u32));
                }
                (per_bucket, loops)
            })
            .collect()
    };
    // Batch k+1 is generated while batch k is appended to the bucket files.
    let mut pending: Vec<(Vec<Vec<u64>>, u64)> = Vec::new();
    let mut first = 0;
    loop {
        let more = first < n_chunks;
        let (next, written) = rayon::join(
            || if more { generate(first) } else { Vec::new() },
            || -> Result<u64, StoreError> {
                let mut loops_done = 0;
                for (per_bucket, loops) in pending.drain(..) {
                    loops_done += loops;
                    for (b, keys) in per_bucket.iter().enumerate() {
                        if !keys.is_empty() {
                            builder.push_bucket(b, keys)?;
                        }
                    }
                }
                Ok(loops_done)
            },
        );
        self_loops += written?;
        bar.set_position((first * CHUNK_DRAWS).min(draws));
        if !more {
            break;
        }
        pending = next;
        first += batch;
    }
    bar.finish();
    Ok(self_loops)
}

/// The node sections: features, labels, roles, and a typed store's features per type
/// (still open: the header's types record finishes them).
struct NodeSections {
    features: SectionEntry,
    type_features: Vec<Option<SectionWriter>>,
    labels: SectionEntry,
    roles: SectionEntry,
    split: SplitCounts,
}

/// One block of nodes' rows: (features, the (type, floats) runs of them, labels, roles).
type Block = (Vec<f32>, Vec<(usize, usize)>, Vec<u32>, Vec<u8>);

/// Node sections, block by block. A typed store writes each type's features to its own
/// section (the types are contiguous id ranges, so in id order a block's rows go to one
/// or two of them) and labels and roles for the target type t0 only.
fn write_nodes(
    spec: &KroneckerSpec,
    w: &StoreWriter,
    batch: u64,
    progress: &Progress,
) -> Result<NodeSections, StoreError> {
    let n = spec.n_nodes();
    let typed = spec.typed.as_ref();
    let f0 = typed.map_or(spec.n_features, |t| t.features[0]) as usize;
    let centroids: Vec<f32> = match spec.planted {
        Some(p) => unit_centroids(spec.n_classes as usize, f0, spec.seed, p.separation),
        None => Vec::new(),
    };
    let mut feats = w.section(SectionId::Features, Dtype::F32)?;
    let mut type_feats: Vec<Option<SectionWriter>> = Vec::new();
    if let Some(t) = typed {
        for (k, &f) in t.features.iter().enumerate() {
            type_feats.push(if f > 0 {
                let (name, file) = type_features_section(k);
                Some(w.named_section((&name, &file), Dtype::F32)?)
            } else {
                None
            });
        }
    }
    let mut labels = w.section(SectionId::Labels, Dtype::U32)?;
    let mut roles = w.section(SectionId::Roles, Dtype::U8)?;
    let mut split = SplitCounts::default();
    let n_blocks = n.div_ceil(NODE_BLOCK);
    let bar = progress.ticker(n, "nodes", "nodes");
    for first in (0..n_blocks).step_by(batch as usize) {
        let blocks: Vec<Block> = (first..(first + batch).min(n_blocks))
            .into_par_iter()
            .map(|b| node_block(spec, n, b, &centroids))
            .collect();
        for (x, runs, l, r) in blocks {
            if typed.is_some() {
                let mut at = 0;
                for (t, len) in runs {
                    if let Some(s) = &mut type_feats[t] {
                        s.write_f32s(&x[at..at + len])?;
                    }
                    at += len;
                }
            } else {
                feats.write_f32s(&x)?;
            }
            labels.write_u32s(&l)?;
            roles.write_bytes(&r)?;
            let s = build::split_counts(&r);
            split.train += s.train;
            split.val += s.val;
            split.test += s.test;
            bar.inc(l.len() as u64);
        }
    }
    bar.finish();
    Ok(NodeSections {
        features: feats.finish()?,
        type_features: type_feats,
        labels: labels.finish()?,
        roles: roles.finish()?,
        split,
    })
}

/// Block `b`'s rows: each node's class (target type only) and role, and its features (a
/// standard normal draw seeded by the node, plus its class's centroid when planted).
fn node_block(spec: &KroneckerSpec, n: u64, b: u64, centroids: &[f32]) -> Block {
    let typed = spec.typed.as_ref();
    let width = |v: u64| match typed {
        Some(t) => t.features[t.type_of(n, v)] as usize,
        None => spec.n_features as usize,
    };
    let target = |v: u64| typed.is_none_or(|t| t.type_of(n, v) == 0);
    let (lo, hi) = (b * NODE_BLOCK, ((b + 1) * NODE_BLOCK).min(n));
    let rows = (hi - lo) as usize;
    let mut x = Vec::with_capacity(rows * width(lo).max(width(hi - 1)));
    // (type, floats) runs of x, in order: which section each part goes to.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut l = Vec::with_capacity(rows);
    let mut r = Vec::with_capacity(rows);
    for v in lo..hi {
        let class = spec.class_of(v);
        let is_target = target(v);
        l.push(if is_target { class } else { NO_LABEL });
        r.push(if is_target { spec.role_of(v) as u8 } else { 0 });
        let f = width(v);
        let t = typed.map_or(0, |t| t.type_of(n, v));
        match runs.last_mut() {
            Some((rt, len)) if *rt == t => *len += f,
            _ => runs.push((t, f)),
        }
        if f > 0 {
            let at = x.len();
            x.resize(at + f, 0.0);
            let row = &mut x[at..];
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(hash3(spec.seed, stream::FEATURES, v));
            for xj in row.iter_mut() {
                *xj = StandardNormal.sample(&mut rng);
            }
            if !centroids.is_empty() && is_target {
                let mu = &centroids[class as usize * f..(class as usize + 1) * f];
                for (xj, m) in row.iter_mut().zip(mu) {
                    *xj += m;
                }
            }
        }
    }
    (x, runs, l, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_match_the_paper_initiator() {
        // [[0.9,0.5],[0.5,0.1]] / 2.0 → cumulative 0.45, 0.70, 0.95 of 65536.
        assert_eq!(thresholds([0.9, 0.5, 0.5, 0.1]), [29491, 45875, 62259]);
    }

    #[test]
    fn rmat_quadrant_frequencies_follow_the_initiator() {
        // One level: P(row bit 0) = a + b = 0.70, P(col bit 0) = a + c = 0.70.
        let t = thresholds([0.9, 0.5, 0.5, 0.1]);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut counts = [0u64; 4];
        let n = 400_000;
        for _ in 0..n {
            let (u, v) = rmat(&mut rng, 1, t);
            counts[(u * 2 + v) as usize] += 1;
        }
        for (q, p) in [0.45, 0.25, 0.25, 0.05].iter().enumerate() {
            let got = counts[q] as f64 / n as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((got - p).abs() < 5.0 * sd, "quadrant {q}: {got} vs {p}");
        }
    }
}
