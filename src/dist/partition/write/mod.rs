//! `saintflow partition`'s output: a directory of part stores and `partition.json`,
//! published as a whole. Part i's store holds its own nodes and its replicas (in global-id
//! order), the full graph's edges among them, their features and labels, and the roles of
//! its own nodes only (replicas have none, so the loss never sees them). Its training graph
//! (`train_graph: given`) is the original training graph's edges among own nodes plus the
//! edges between replicas and training nodes or other replicas, so samplers reach the
//! replicas. `part.tsv` inside each store maps local ids to global ids, home parts and
//! own/replica. The directory is written beside the destination under a temporary name
//! (`.NAME.tmp-PID`, locked) and renamed into place; `force` replaces only an earlier
//! partition directory (one whose `partition.json` has [`PARTITION_FORMAT`]).
//!
//! Beside the stores, `assignment.txt` holds every node's part (line v+1: node v's part,
//! METIS's partition-file format); with `assignment_only` it and `partition.json` are all
//! that is written (a graph whose part stores would not fit the disk).
//!
//! Memory (issue 56 item 5): past the first level everything reads the store's mapped CSR
//! in place ([`StoreGraph`]): augmentation, the counts, and each part store's sections,
//! streamed row by row to their files; anonymous memory is O(N) (the assignment, a part's
//! node list and roles, batches of 64 Ki entries), never O(nnz). Only the multilevel first
//! level loads the graph ([`load_graph`]), and drops it before augmentation.
//!
//! Here the partition's steps, its report and its readers; one rank's store in
//! part_store.rs.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::gad::{augment, AugmentOptions, Augmentation};
use super::graph::{balance, Adjacency, StoreGraph};
use super::method::{choose, Choice, Method};
use super::multilevel::{partition, Partition, PartitionOptions, WGraph};
use super::streaming::{partition_streaming, DEFAULT_PASSES};
use super::PartitionError;
use crate::atomic::AtomicDir;
use crate::machine::MemoryLimit;
use crate::progress::Progress;
use crate::store::format::{Role, SectionId};
use crate::store::{Access, GraphStore};

mod part_store;

use part_store::write_store;

/// The `format` tag of `partition.json`.
pub const PARTITION_FORMAT: &str = "saintflow.partition/1";
/// The summary file of a partition directory.
pub const PARTITION_JSON: &str = "partition.json";
/// The id map inside each part store.
pub use crate::store::format::PART_MAP_FILE;
/// Every node's part, one a line (METIS's partition-file format), in a partition directory.
pub const ASSIGNMENT_FILE: &str = "assignment.txt";

/// What to partition and how.
#[derive(Debug, Clone, Copy)]
pub struct PartitionSpec {
    /// k, ε and the seed.
    pub partition: PartitionOptions,
    /// L, α (their seed is `partition.seed`).
    pub augment: AugmentOptions,
    /// P, the ranks of the training job (None: k, one part per rank). With P < k the parts
    /// are assigned to ranks by GAD's greedy load balance ([`assign_parts`]) and each rank
    /// gets one store holding all its parts.
    pub ranks: Option<usize>,
    /// The first level ([`Method`]; `Auto` resolved against `memory_limit`).
    pub method: Method,
    /// Refinement passes of the streaming first level.
    pub passes: usize,
    /// What `Method::Auto` compares the multilevel partitioner's estimate with.
    pub memory_limit: MemoryLimit,
    /// Write `partition.json` and [`ASSIGNMENT_FILE`] only, no part stores.
    pub assignment_only: bool,
}

impl Default for PartitionSpec {
    fn default() -> Self {
        PartitionSpec {
            partition: PartitionOptions::default(),
            augment: AugmentOptions::default(),
            ranks: None,
            method: Method::default(),
            passes: DEFAULT_PASSES,
            memory_limit: MemoryLimit::Detect,
            assignment_only: false,
        }
    }
}

/// One rank's store in `partition.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankReport {
    /// r.
    pub rank: usize,
    /// Its parts, in increasing order.
    pub parts: Vec<usize>,
    /// The store's directory name inside the partition directory.
    pub store: String,
    /// Own nodes (of its parts).
    pub own: usize,
    /// Replicas (nodes of other ranks' parts the store holds).
    pub replicas: usize,
    /// The load the assignment balanced: own nodes + replicas of its parts.
    pub load: u64,
    /// The store's identity ([`GraphStore::identity`], hex): training refuses a rank store
    /// that is not this one (issue 28, item 8). Absent in partitions written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

/// GAD's greedy load balance of parts onto `ranks` ranks: parts in decreasing `load` (ties:
/// lower part first), each to the rank with the least load so far (ties: lower rank).
/// Returns each rank's parts in increasing order. With as many ranks as parts, part i goes
/// to rank i.
pub fn assign_parts(load: &[u64], ranks: usize) -> Vec<Vec<usize>> {
    if ranks == load.len() {
        return (0..ranks).map(|i| vec![i]).collect();
    }
    let mut order: Vec<usize> = (0..load.len()).collect();
    order.sort_by_key(|&p| (std::cmp::Reverse(load[p]), p));
    let mut total = vec![0u64; ranks];
    let mut out = vec![Vec::new(); ranks];
    for p in order {
        let r = (0..ranks)
            .min_by_key(|&r| (total[r], r))
            .expect("at least one rank");
        total[r] += load[p];
        out[r].push(p);
    }
    for parts in &mut out {
        parts.sort_unstable();
    }
    out
}

/// One part in `partition.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartReport {
    /// i.
    pub part: usize,
    /// The store's directory name inside the partition directory (empty when only the
    /// assignment was written).
    pub store: String,
    /// Own nodes |V_i|.
    pub own: usize,
    /// Replicas.
    pub replicas: usize,
    /// |B_i|.
    pub boundary: usize,
    /// Walks drawn (n).
    pub walks: usize,
    /// Walks taken whole.
    pub walks_taken: usize,
    /// x̄ and σ of the pilot.
    pub pilot_mean: f64,
    /// σ of the pilot.
    pub pilot_std: f64,
    /// ρ_i.
    pub density: f64,
    /// ⌊α(1+ρ_i)|V_i|⌋.
    pub budget: usize,
    /// Edges from own nodes to other parts.
    pub edge_cut: u64,
    /// |V_i| / (N/k).
    pub balance: f64,
    /// Own nodes by role.
    pub train: u64,
    /// Validation nodes.
    pub val: u64,
    /// Test nodes.
    pub test: u64,
}

/// `partition.json` and the `--json` output of `saintflow partition`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionReport {
    /// [`PARTITION_FORMAT`].
    pub format: String,
    /// The partitioned store as given.
    pub source: String,
    /// N.
    pub n_nodes: u64,
    /// Undirected edges (self loops excluded).
    pub n_edges: u64,
    /// k.
    pub k: usize,
    /// ε.
    pub epsilon: f64,
    /// α.
    pub alpha: f64,
    /// L.
    pub layers: usize,
    /// Seed.
    pub seed: u64,
    /// Edges between parts.
    pub edge_cut: u64,
    /// edge_cut / n_edges.
    pub cut_ratio: f64,
    /// Cut of the initial (unrefined) partition.
    pub initial_cut: u64,
    /// max part / (N/k).
    pub balance: f64,
    /// (Σ own + replicas) / N.
    pub replication_factor: f64,
    /// Coarsening levels (0 for the streaming first level).
    pub levels: usize,
    /// The first level that ran: `multilevel` or `streaming` (absent in partitions written
    /// before issue 56: multilevel).
    #[serde(default = "multilevel_name")]
    pub method: String,
    /// Why that one (asked for, or `auto`'s memory comparison).
    #[serde(default)]
    pub method_reason: String,
    /// Streaming: the cut after the Fennel pass, then after each refinement pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_cuts: Vec<u64>,
    /// Only `partition.json` and [`ASSIGNMENT_FILE`] were written: no part stores, no
    /// ranks; the parts' replicas are counted, not stored.
    #[serde(default)]
    pub assignment_only: bool,
    /// Seconds spent partitioning (coarsen, initial, refine).
    pub partition_seconds: f64,
    /// Seconds in all.
    pub total_seconds: f64,
    /// Each part.
    pub parts: Vec<PartReport>,
    /// Each rank's store (absent in partitions written before ranks: one per part, read
    /// back as such by [`read_report`]).
    #[serde(default)]
    pub ranks: Vec<RankReport>,
    /// The partitioned store's identity (hex): the evaluation graph of a distributed run
    /// must be this store, whose split the parts carry (issue 28, item 8). Absent in
    /// partitions written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_identity: Option<String>,
}

fn multilevel_name() -> String {
    Method::Multilevel.name().into()
}

/// A store's identity as `partition.json` writes it.
pub fn identity_text(store: &GraphStore) -> String {
    format!("{:016x}", store.identity())
}

/// Issue 28, item 8: `store`, opened from rank `rank`'s entry of `report` (in `dir`), is
/// the store the partition wrote for it, not one of another partition or an edited copy.
pub fn check_rank_store(
    report: &PartitionReport,
    dir: &Path,
    rank: usize,
    store: &GraphStore,
) -> Result<(), PartitionError> {
    let Some(want) = report.ranks.get(rank).and_then(|r| r.identity.as_ref()) else {
        return Ok(()); // written before identities were recorded
    };
    let got = identity_text(store);
    if &got != want {
        return Err(PartitionError::argument(format!(
            "{}: rank {rank}'s store is not the one {} lists (identity {got}, expected {want}): a store of another partition, or changed since; partition again",
            store.path().display(),
            dir.join(PARTITION_JSON).display()
        )));
    }
    Ok(())
}

/// Issue 28, item 8: `full`, the graph rank 0 evaluates on, is the store the parts were cut
/// from: another store (another split above all) would let validation and test nodes be
/// some rank's training nodes.
pub fn check_source(
    report: &PartitionReport,
    dir: &Path,
    full: &GraphStore,
) -> Result<(), PartitionError> {
    let Some(want) = report.source_identity.as_ref() else {
        return Ok(());
    };
    let got = identity_text(full);
    if &got != want {
        return Err(PartitionError::argument(format!(
            "{}: not the store the parts in {} were cut from ({}; identity {got}, expected {want}): its split or graph may differ, so its validation and test nodes could be training nodes of the parts; evaluate on the partitioned store",
            full.path().display(),
            dir.display(),
            report.source
        )));
    }
    Ok(())
}

/// Loads the full graph of `store` as a [`WGraph`] (unit weights, self loops dropped).
pub fn load_graph(store: &GraphStore) -> Result<WGraph, PartitionError> {
    let csr = store.full();
    WGraph::from_csr(csr.offsets(), csr.indices())
}

/// Writes `g` in METIS's graph format (`n m`, then each node's 1-based neighbours).
pub fn write_metis(g: &WGraph, path: &Path) -> Result<(), PartitionError> {
    let mut text = String::with_capacity(g.adj.len() * 7 + 32);
    text.push_str(&format!("{} {}\n", g.n(), g.adj.len() / 2));
    for u in 0..g.n() {
        let row: Vec<String> = g.edges(u).map(|(v, _)| (v + 1).to_string()).collect();
        text.push_str(&row.join(" "));
        text.push('\n');
    }
    crate::atomic::create_parent_dirs(path)
        .and_then(|_| crate::atomic::write_atomic(path, text.as_bytes()))
        .map_err(|e| PartitionError::io(path, "write", e))
}

/// Issue 28: k parts of a store need k nodes, and a rank trains on its parts' training
/// nodes, so more parts than training nodes are refused before anything is loaded
/// (k = N made hundreds of empty parts, each its own fsynced store).
fn check_k(store: &GraphStore, k: usize) -> Result<(), PartitionError> {
    let (n, n_train) = (store.n_nodes(), store.role_count(Role::Train));
    if k > n {
        return Err(PartitionError::argument(format!(
            "-k {k}: more parts than the store's {n} nodes (every part needs one), expected k ≤ {n}"
        )));
    }
    if n_train > 0 && k > n_train {
        return Err(PartitionError::argument(format!(
            "-k {k}: more parts than the store's {n_train} training nodes (a part without one gives its rank nothing to train), expected k ≤ {n_train}"
        )));
    }
    Ok(())
}

/// What one partition's part stores are written from.
struct Source<'a> {
    store: &'a GraphStore,
    g: &'a StoreGraph<'a>,
    p: &'a Partition,
    aug: &'a Augmentation,
    input: &'a Path,
}

/// Partitions the store at `input`, augments the parts and writes them to `out` (see the
/// module's documentation). Returns what `partition.json` holds.
pub fn partition_store(
    input: &Path,
    out: &Path,
    spec: &PartitionSpec,
    force: bool,
    progress: &Progress,
) -> Result<PartitionReport, PartitionError> {
    let start = Instant::now();
    let store = GraphStore::open(input)?;
    if store.is_typed() {
        return Err(crate::store::StoreError::input(
            input,
            "a typed store (node and edge types, issue 57): partition writes homogeneous part stores and would drop the relations and the per-type features; not supported yet",
        )
        .into());
    }
    let k = spec.partition.k;
    check_k(&store, k)?;
    let n_ranks = spec.ranks.unwrap_or(k);
    if n_ranks == 0 || n_ranks > k {
        return Err(PartitionError::argument(format!(
            "{n_ranks} ranks for {k} parts: each rank needs at least one part (1 ≤ ranks ≤ k)"
        )));
    }
    let g = StoreGraph::new(&store)?;
    let choice = choose(spec.method, g.n() as u64, g.entries(), spec.memory_limit);
    let (p, pass_cuts) = first_level(&store, &g, spec, &choice, progress)?;
    let partition_seconds = start.elapsed().as_secs_f64();
    let aug = augment(
        &g,
        &p.part,
        p.k,
        &AugmentOptions {
            seed: spec.partition.seed,
            ..spec.augment
        },
    )?;
    let counts = part_counts(&store, &g, &p);
    let dir = create_out_dir(out, force)?;
    write_assignment(&dir.path().join(ASSIGNMENT_FILE), &p.part)?;
    let src = Source {
        store: &store,
        g: &g,
        p: &p,
        aug: &aug,
        input,
    };
    let ranks = if spec.assignment_only {
        Vec::new()
    } else {
        write_ranks(&src, &counts, n_ranks, dir.path(), progress)?
    };
    let mut report = summary(&src, spec, &counts, ranks);
    report.method = choice.method.name().into();
    report.method_reason = choice.reason;
    report.pass_cuts = pass_cuts;
    report.partition_seconds = partition_seconds;
    report.total_seconds = start.elapsed().as_secs_f64();
    let mut json = serde_json::to_vec_pretty(&report).expect("a report serialises");
    json.push(b'\n');
    let jpath = dir.path().join(PARTITION_JSON);
    crate::atomic::write_atomic(&jpath, &json)
        .map_err(|e| PartitionError::io(&jpath, "write", e))?;
    dir.commit()?;
    Ok(report)
}

/// The first level `choice` names: the streaming one over the mapped CSR (read in order:
/// advised sequential while it runs), or the multilevel one over the graph loaded into RAM
/// and dropped on return. Returns the partition and the streaming passes' cuts.
fn first_level(
    store: &GraphStore,
    g: &StoreGraph,
    spec: &PartitionSpec,
    choice: &Choice,
    progress: &Progress,
) -> Result<(Partition, Vec<u64>), PartitionError> {
    if choice.method == Method::Streaming {
        let csr = [SectionId::FullOffsets, SectionId::FullIndices];
        store.advise(&csr, Access::Sequential);
        let s = partition_streaming(g, &spec.partition, spec.passes, progress)?;
        store.advise(&csr, Access::Normal);
        return Ok((s.partition, s.pass_cuts));
    }
    let w = load_graph(store)?;
    let spinner = progress.spinner("partitioning");
    let p = partition(&w, &spec.partition)?;
    spinner.finish_and_clear();
    Ok((p, Vec::new()))
}

/// `partition.json` of `src` but for the method and the times, which the caller sets.
fn summary(
    src: &Source,
    spec: &PartitionSpec,
    counts: &[PartCounts],
    ranks: Vec<RankReport>,
) -> PartitionReport {
    let p = src.p;
    let mut store_of = vec![String::new(); p.k];
    for rk in &ranks {
        for &i in &rk.parts {
            store_of[i] = rk.store.clone();
        }
    }
    let parts: Vec<PartReport> = (0..p.k)
        .map(|i| part_report(src, i, &counts[i], &store_of[i]))
        .collect();
    let n = src.g.n() as u64;
    // With stores: what they hold (a rank's replicas counted once); without: each part's.
    let stored: usize = if ranks.is_empty() {
        parts.iter().map(|q| q.own + q.replicas).sum()
    } else {
        ranks.iter().map(|r| r.own + r.replicas).sum()
    };
    let n_edges = src.g.entries() / 2;
    PartitionReport {
        format: PARTITION_FORMAT.into(),
        source: src.input.display().to_string(),
        source_identity: Some(identity_text(src.store)),
        n_nodes: n,
        n_edges,
        k: p.k,
        epsilon: spec.partition.epsilon,
        alpha: spec.augment.alpha,
        layers: spec.augment.layers,
        seed: spec.partition.seed,
        edge_cut: p.cut,
        cut_ratio: if n_edges == 0 {
            0.0
        } else {
            p.cut as f64 / n_edges as f64
        },
        initial_cut: p.initial_cut,
        balance: balance(&p.part, p.k),
        replication_factor: if n == 0 {
            1.0
        } else {
            stored as f64 / n as f64
        },
        levels: p.levels,
        method: multilevel_name(),
        method_reason: String::new(),
        pass_cuts: Vec::new(),
        assignment_only: spec.assignment_only,
        partition_seconds: 0.0,
        total_seconds: 0.0,
        parts,
        ranks,
    }
}

/// Assigns the parts to `n_ranks` ranks ([`assign_parts`]) and writes each rank's store
/// into `dir`.
fn write_ranks(
    src: &Source,
    counts: &[PartCounts],
    n_ranks: usize,
    dir: &Path,
    progress: &Progress,
) -> Result<Vec<RankReport>, PartitionError> {
    let k = src.p.k;
    let load: Vec<u64> = (0..k)
        .map(|i| (counts[i].own + src.aug.parts[i].replicas.len()) as u64)
        .collect();
    let assignment = assign_parts(&load, n_ranks);
    let bar = progress.ticker(n_ranks as u64, "write parts", "stores");
    let mut ranks = Vec::with_capacity(n_ranks);
    for (r, mine) in assignment.iter().enumerate() {
        let name = if n_ranks == k {
            format!("part-{r}.sf")
        } else {
            format!("rank-{r}.sf")
        };
        let (own, replicas) = write_store(src, mine, &dir.join(&name))?;
        let identity = Some(identity_text(&GraphStore::open(dir.join(&name))?));
        ranks.push(RankReport {
            rank: r,
            parts: mine.clone(),
            store: name,
            own,
            replicas,
            load: mine.iter().map(|&i| load[i]).sum(),
            identity,
        });
        bar.inc(1);
    }
    bar.finish();
    Ok(ranks)
}

/// Writes every node's part to `path`, one a line ([`ASSIGNMENT_FILE`]), and fsyncs it.
fn write_assignment(path: &Path, part: &[u32]) -> Result<(), PartitionError> {
    let io = |e| PartitionError::io(path, "write", e);
    let f = fs::File::create(path).map_err(io)?;
    let mut out = BufWriter::with_capacity(1 << 20, f);
    let mut line = String::new();
    for &p in part {
        line.clear();
        // Infallible: a String's fmt::Write.
        let _ = std::fmt::Write::write_fmt(&mut line, format_args!("{p}\n"));
        out.write_all(line.as_bytes()).map_err(io)?;
    }
    let f = out.into_inner().map_err(|e| io(e.into_error()))?;
    f.sync_all()
        .map_err(|e| PartitionError::io(path, "fsync", e))
}

/// Reads [`ASSIGNMENT_FILE`] of the partition directory `dir`: every node's part.
pub fn read_assignment(dir: &Path) -> Result<Vec<u32>, PartitionError> {
    let path = dir.join(ASSIGNMENT_FILE);
    let text = fs::read_to_string(&path).map_err(|e| PartitionError::io(&path, "read", e))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            l.parse().map_err(|_| {
                PartitionError::argument(format!(
                    "{}:{}: `{l}` is not a part number",
                    path.display(),
                    i + 1
                ))
            })
        })
        .collect()
}

/// What one pass over the nodes counts of each part.
#[derive(Default)]
struct PartCounts {
    own: usize,
    edge_cut: u64,
    train: u64,
    val: u64,
    test: u64,
}

/// Every part's own nodes, cut edges and role counts, in one pass over the rows.
fn part_counts(store: &GraphStore, g: &StoreGraph, p: &Partition) -> Vec<PartCounts> {
    let mut c: Vec<PartCounts> = (0..p.k).map(|_| PartCounts::default()).collect();
    for u in 0..g.n() {
        let i = p.part[u];
        let pc = &mut c[i as usize];
        pc.own += 1;
        pc.edge_cut += g
            .row(u)
            .iter()
            .filter(|&&v| p.part[v as usize] != i)
            .count() as u64;
        match store.role(u as u32) {
            Role::Train => pc.train += 1,
            Role::Val => pc.val += 1,
            Role::Test => pc.test += 1,
            Role::None => {}
        }
    }
    c
}

/// Part `i`'s figures (counted by [`part_counts`], held by the store `store_name`).
fn part_report(src: &Source, i: usize, c: &PartCounts, store_name: &str) -> PartReport {
    let a = &src.aug.parts[i];
    PartReport {
        part: i,
        store: store_name.to_string(),
        own: c.own,
        replicas: a.replicas.len(),
        boundary: a.boundary,
        walks: a.walks,
        walks_taken: a.walks_taken,
        pilot_mean: a.pilot_mean,
        pilot_std: a.pilot_std,
        density: a.density,
        budget: a.budget,
        edge_cut: c.edge_cut,
        balance: c.own as f64 * src.p.k as f64 / src.g.n().max(1) as f64,
        train: c.train,
        val: c.val,
        test: c.test,
    }
}

/// A part store's `part.tsv`, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartMap {
    /// Global id of each local node.
    pub global: Vec<u32>,
    /// Home part of each local node.
    pub home: Vec<u32>,
    /// Whether each local node is a replica.
    pub replica: Vec<bool>,
}

/// Reads `part.tsv` of the part store at `dir`.
pub fn read_part_map(dir: &Path) -> Result<PartMap, PartitionError> {
    let path = dir.join(PART_MAP_FILE);
    let text = fs::read_to_string(&path).map_err(|e| PartitionError::io(&path, "read", e))?;
    let mut m = PartMap {
        global: Vec::new(),
        home: Vec::new(),
        replica: Vec::new(),
    };
    for (no, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#'))
    {
        let f: Vec<&str> = line.split('\t').collect();
        let bad =
            || PartitionError::argument(format!("{}:{}: malformed line", path.display(), no + 1));
        let [l, g, h, kind] = f.as_slice() else {
            return Err(bad());
        };
        if l.parse::<usize>().ok() != Some(m.global.len()) {
            return Err(bad());
        }
        m.global.push(g.parse().map_err(|_| bad())?);
        m.home.push(h.parse().map_err(|_| bad())?);
        m.replica.push(match *kind {
            "own" => false,
            "replica" => true,
            _ => return Err(bad()),
        });
    }
    Ok(m)
}

/// Reads `partition.json` of the partition directory `dir`, checking its format tag and
/// that every part's store is named inside `dir`.
pub fn read_report(dir: &Path) -> Result<PartitionReport, PartitionError> {
    let path = dir.join(PARTITION_JSON);
    let bytes = fs::read(&path).map_err(|e| PartitionError::io(&path, "read", e))?;
    let bad = |what: String| PartitionError::argument(format!("{}: {what}", path.display()));
    let mut r: PartitionReport =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a partition summary: {e}")))?;
    if r.format != PARTITION_FORMAT {
        return Err(bad(format!(
            "format `{}`, expected `{PARTITION_FORMAT}`",
            r.format
        )));
    }
    if r.assignment_only {
        return Err(bad(format!(
            "written with --assignment-only: only {ASSIGNMENT_FILE}, no part stores to train on; partition again without it"
        )));
    }
    for (i, p) in r.parts.iter().enumerate() {
        let plain = Path::new(&p.store)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if p.part != i || !plain || p.store.is_empty() {
            return Err(bad(format!(
                "part {i} is listed as part {} in `{}`, expected part {i} in a directory inside {}",
                p.part,
                p.store,
                dir.display()
            )));
        }
    }
    if r.parts.len() != r.k {
        return Err(bad(format!(
            "k = {} but {} parts are listed",
            r.k,
            r.parts.len()
        )));
    }
    if r.ranks.is_empty() {
        // Written before ranks: one store per part.
        r.ranks = r
            .parts
            .iter()
            .map(|p| RankReport {
                rank: p.part,
                parts: vec![p.part],
                store: p.store.clone(),
                own: p.own,
                replicas: p.replicas,
                load: (p.own + p.replicas) as u64,
                identity: None,
            })
            .collect();
    }
    let mut seen = vec![false; r.k];
    for (i, rk) in r.ranks.iter().enumerate() {
        let plain = Path::new(&rk.store)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        let fresh = rk
            .parts
            .iter()
            .all(|&q| q < r.k && !std::mem::replace(&mut seen[q], true));
        if rk.rank != i || !plain || rk.store.is_empty() || rk.parts.is_empty() || !fresh {
            return Err(bad(format!(
                "rank {i} is listed as rank {} with parts {:?} in `{}`: expected rank {i}, parts of no other rank, a store inside {}",
                rk.rank,
                rk.parts,
                rk.store,
                dir.display()
            )));
        }
    }
    if seen.contains(&false) {
        return Err(bad("a part is assigned to no rank".into()));
    }
    Ok(r)
}

/// Whether `path` is a partition directory (its `partition.json` has our format tag).
fn is_partition_dir(path: &Path) -> bool {
    fs::read(path.join(PARTITION_JSON))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v.get("format").and_then(|f| f.as_str()) == Some(PARTITION_FORMAT))
}

/// Whether `path` is what a killed partition writer leaves: a directory holding only part
/// stores, their temporaries and `partition.json` (or its temporary).
fn is_partition_temp(path: &Path) -> bool {
    let known = |n: &str| {
        n.starts_with("part-")
            || n.starts_with(".part-")
            || n.starts_with("rank-")
            || n.starts_with(".rank-")
            || n == ASSIGNMENT_FILE
            || n.starts_with(PARTITION_JSON)
            || n.starts_with(".partition.json")
    };
    crate::atomic::dir_holds_only(path, known)
}

/// The output directory to write: an [`AtomicDir`] whose destination may be replaced only
/// when it is an earlier partition (and `force`).
fn create_out_dir(dest: &Path, force: bool) -> Result<AtomicDir, PartitionError> {
    crate::atomic::remove_stale_temps(dest, &is_partition_temp);
    let refuse = |what: &str| PartitionError::Output {
        path: dest.to_path_buf(),
        what: what.into(),
    };
    if dest.exists() && !force {
        return Err(refuse(
            "exists (pass --force to replace an earlier partition)",
        ));
    }
    if dest.exists() && !is_partition_dir(dest) {
        return Err(refuse(&format!("exists and is not a partition directory (no {PARTITION_JSON} of {PARTITION_FORMAT}); not replaced")));
    }
    if dest.file_name().is_none() {
        return Err(refuse("not a valid output directory name"));
    }
    AtomicDir::create(dest, force).map_err(PartitionError::from)
}
