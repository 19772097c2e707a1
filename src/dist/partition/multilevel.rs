//! Multilevel k-way partitioning (the METIS scheme, our own code): coarsen by heavy-edge
//! matching until the graph is small, partition the coarsest graph by recursive bisection
//! with greedy graph growing, then project back level by level, refining each level with a
//! greedy boundary k-way pass under the balance constraint. Deterministic for a seed: every
//! visiting order is a seeded hash order. Memory ∝ the graph (every level is held; each is
//! at most the size of the one below).
//!
//! Balance: part weights ≤ `max_weight` = max(⌊(1+ε)·W/k⌋, ⌈W/k⌉) (W the total node
//! weight); the second term keeps the bound feasible when (1+ε)·W/k < ⌈W/k⌉. On the input
//! graph (unit weights) a final balancing pass enforces it, so it always holds there.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::PartitionError;
use crate::seed::{hash3, stream};

/// An undirected graph with node and edge weights, as a symmetric CSR without self loops.
#[derive(Debug, Clone)]
pub struct WGraph {
    /// Row offsets, N + 1.
    pub xadj: Vec<usize>,
    /// Neighbours.
    pub adj: Vec<u32>,
    /// Edge weights, parallel to `adj` (symmetric).
    pub ew: Vec<u32>,
    /// Node weights.
    pub vw: Vec<u32>,
}

impl WGraph {
    /// Unit weights over a symmetric CSR; self loops dropped. Errors on a neighbour id
    /// out of range or offsets that are not monotone (a corrupt store).
    pub fn from_csr(offsets: &[u64], indices: &[u32]) -> Result<WGraph, PartitionError> {
        let n = offsets.len().saturating_sub(1);
        let mut xadj = Vec::with_capacity(n + 1);
        let mut adj = Vec::with_capacity(indices.len());
        xadj.push(0);
        for u in 0..n {
            let (a, b) = (offsets[u] as usize, offsets[u + 1] as usize);
            if a > b || b > indices.len() {
                return Err(PartitionError::argument(format!(
                    "row {u}: offsets {a}..{b} out of order or beyond {} entries",
                    indices.len()
                )));
            }
            for &v in &indices[a..b] {
                if v as usize >= n {
                    return Err(PartitionError::argument(format!(
                        "neighbour {v} of node {u} out of range, expected < {n}"
                    )));
                }
                if v as usize != u {
                    adj.push(v);
                }
            }
            xadj.push(adj.len());
        }
        let ew = vec![1; adj.len()];
        Ok(WGraph {
            xadj,
            adj,
            ew,
            vw: vec![1; n],
        })
    }

    /// N.
    pub fn n(&self) -> usize {
        self.vw.len()
    }

    /// Neighbours of `u` with edge weights.
    pub fn edges(&self, u: usize) -> impl Iterator<Item = (usize, u32)> + '_ {
        let r = self.xadj[u]..self.xadj[u + 1];
        self.adj[r.clone()]
            .iter()
            .zip(&self.ew[r])
            .map(|(&v, &w)| (v as usize, w))
    }

    /// Total node weight W.
    pub fn total_weight(&self) -> u64 {
        self.vw.iter().map(|&w| u64::from(w)).sum()
    }
}

/// Parameters of [`partition`].
#[derive(Debug, Clone, Copy)]
pub struct PartitionOptions {
    /// Number of parts k ≥ 1.
    pub k: usize,
    /// Imbalance ε ≥ 0: parts weigh at most (1+ε)·W/k (see the module's documentation).
    pub epsilon: f64,
    /// Seed of every visiting order.
    pub seed: u64,
}

impl Default for PartitionOptions {
    fn default() -> Self {
        PartitionOptions {
            k: 2,
            epsilon: 0.03,
            seed: 0,
        }
    }
}

/// A k-way partition and how it was reached.
#[derive(Debug, Clone)]
pub struct Partition {
    /// The part of each node, < k.
    pub part: Vec<u32>,
    /// k.
    pub k: usize,
    /// Edge cut (total weight of edges between parts) of `part`.
    pub cut: u64,
    /// Cut of the initial partition of the coarsest graph, which is the cut of its
    /// projection onto the input graph (coarse edge weights sum the fine edges): what
    /// refinement started from.
    pub initial_cut: u64,
    /// Whether that initial partition, projected, already met the balance bound. When it
    /// did, `cut ≤ initial_cut` (refinement's result is kept only if no worse); when it did
    /// not, balancing may have had to raise the cut.
    pub initial_balanced: bool,
    /// Levels of coarsening (0: the input was partitioned directly).
    pub levels: usize,
    /// Nodes of the coarsest graph.
    pub coarsest_nodes: usize,
    /// The balance bound on part weights.
    pub max_weight: u64,
}

impl Partition {
    /// Weight of each part.
    pub fn weights(&self, g: &WGraph) -> Vec<u64> {
        part_weights(g, &self.part, self.k)
    }

    /// max part weight / (W/k): 1.0 is perfect balance.
    pub fn balance(&self, g: &WGraph) -> f64 {
        let w = self.weights(g);
        let total: u64 = w.iter().sum();
        if total == 0 {
            return 1.0;
        }
        *w.iter().max().unwrap_or(&0) as f64 * self.k as f64 / total as f64
    }
}

/// Total weight of the edges whose ends are in different parts (each undirected edge once).
pub fn edge_cut(g: &WGraph, part: &[u32]) -> u64 {
    let twice: u64 = (0..g.n())
        .into_par_iter()
        .map(|u| {
            g.edges(u)
                .filter(|&(v, _)| part[u] != part[v])
                .map(|(_, w)| u64::from(w))
                .sum::<u64>()
        })
        .sum();
    twice / 2
}

fn part_weights(g: &WGraph, part: &[u32], k: usize) -> Vec<u64> {
    let mut w = vec![0u64; k];
    for (u, &p) in part.iter().enumerate() {
        w[p as usize] += u64::from(g.vw[u]);
    }
    w
}

/// k and ε in range: 1 ≤ k < 2^32, ε finite and ≥ 0 (both first levels check them).
pub(crate) fn check_options(opts: &PartitionOptions) -> Result<(), PartitionError> {
    let k = opts.k;
    if k == 0 || k > u32::MAX as usize {
        return Err(PartitionError::argument(format!(
            "k = {k}, expected 1 ≤ k < 2^32"
        )));
    }
    if !(opts.epsilon >= 0.0 && opts.epsilon.is_finite()) {
        return Err(PartitionError::argument(format!(
            "epsilon = {}, expected a finite ε ≥ 0",
            opts.epsilon
        )));
    }
    Ok(())
}

/// The balance bound on a part's weight, max(⌊(1+ε)·W/k⌋, ⌈W/k⌉), for total weight W.
pub(crate) fn max_weight(total: u64, k: usize, epsilon: f64) -> u64 {
    ((1.0 + epsilon) * total as f64 / k as f64)
        .floor()
        .max(total.div_ceil(k as u64) as f64) as u64
}

/// Partitions `g` into `opts.k` parts (see the module's documentation).
pub fn partition(g: &WGraph, opts: &PartitionOptions) -> Result<Partition, PartitionError> {
    check_options(opts)?;
    let k = opts.k;
    let total = g.total_weight();
    let max_weight = max_weight(total, k, opts.epsilon);
    // Coarsen to ~20 nodes per part (METIS's order of magnitude), at least 100.
    let coarsen_to = (20 * k).max(100);
    let max_vw = ((1.5 * total as f64 / coarsen_to as f64).ceil() as u64).max(1);
    let mut levels: Vec<(WGraph, Vec<u32>)> = Vec::new();
    loop {
        let cur = levels.last().map_or(g, |l| &l.0);
        if cur.n() <= coarsen_to {
            break;
        }
        let (coarse, cmap) = coarsen(cur, opts.seed, levels.len() as u64, max_vw);
        // Matching stalled (a star, many isolated hubs): stop rather than loop.
        if coarse.n() as f64 > 0.95 * cur.n() as f64 {
            break;
        }
        levels.push((coarse, cmap));
    }
    let coarsest = levels.last().map_or(g, |l| &l.0);
    let mut part = vec![0u32; coarsest.n()];
    let nodes: Vec<u32> = (0..coarsest.n() as u32).collect();
    recursive_bisect(coarsest, &nodes, k, 0, &mut part, opts.seed);
    let initial_cut = edge_cut(coarsest, &part);
    let coarsest_nodes = coarsest.n();
    let n_levels = levels.len();
    // The initial partition projected onto the input graph (same cut): the fallback if
    // refinement ends worse on a feasible start.
    let mut initial = part.clone();
    for (_, cmap) in levels.iter().rev() {
        initial = cmap.iter().map(|&c| initial[c as usize]).collect();
    }
    refine(
        coarsest,
        &mut part,
        k,
        max_weight,
        opts.seed,
        n_levels as u64,
    );
    // Project level by level: the fine graph of level i is level i-1's coarse graph.
    for i in (0..n_levels).rev() {
        let fine = if i == 0 { g } else { &levels[i - 1].0 };
        let cmap = &levels[i].1;
        part = cmap.iter().map(|&c| part[c as usize]).collect();
        refine(fine, &mut part, k, max_weight, opts.seed, i as u64);
    }
    force_balance(g, &mut part, k, max_weight);
    let mut cut = edge_cut(g, &part);
    debug_assert_eq!(
        edge_cut(g, &initial),
        initial_cut,
        "projection keeps the cut"
    );
    let feasible = part_weights(g, &initial, k)
        .iter()
        .all(|&w| w <= max_weight);
    if cut > initial_cut && feasible {
        (part, cut) = (initial, initial_cut);
    }
    // Refinement keeps every part's last node; an empty part could still come from the
    // initial bisection of a lumpy coarse graph: say so rather than hand on a rank with
    // nothing to train.
    if let Some(empty) = part_weights(g, &part, k).iter().position(|&w| w == 0) {
        return Err(PartitionError::argument(format!(
            "k = {k}: part {empty} got no node ({} nodes, ε = {:?}); ask for fewer parts",
            g.n(),
            opts.epsilon
        )));
    }
    Ok(Partition {
        part,
        k,
        cut,
        initial_cut,
        initial_balanced: feasible,
        levels: n_levels,
        coarsest_nodes,
        max_weight,
    })
}

/// `0..n` in the seeded hash order of (seed, salt).
fn hash_order(n: usize, seed: u64, salt: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let key = hash3(seed, stream::PARTITION, salt);
    order.sort_unstable_by_key(|&v| hash3(key, stream::PARTITION, u64::from(v)));
    order
}

/// One level of heavy-edge matching: each node, in a seeded order, is matched with its
/// unmatched neighbour of heaviest edge whose combined weight stays ≤ `max_vw`; isolated
/// nodes are paired with each other (they would never shrink otherwise). Returns the
/// coarse graph and the fine → coarse map.
fn coarsen(g: &WGraph, seed: u64, level: u64, max_vw: u64) -> (WGraph, Vec<u32>) {
    const NONE: u32 = u32::MAX;
    let n = g.n();
    let mut mate = vec![NONE; n];
    let mut lone: Option<usize> = None;
    for u in hash_order(n, seed, level) {
        let u = u as usize;
        if mate[u] != NONE {
            continue;
        }
        if g.xadj[u] == g.xadj[u + 1] {
            match lone.take() {
                Some(v) if u64::from(g.vw[u]) + u64::from(g.vw[v]) <= max_vw => {
                    mate[u] = v as u32;
                    mate[v] = u as u32;
                }
                _ => {
                    mate[u] = u as u32;
                    lone = Some(u);
                }
            }
            continue;
        }
        let mut best: Option<(u32, usize)> = None;
        for (v, w) in g.edges(u) {
            if mate[v] == NONE
                && u64::from(g.vw[u]) + u64::from(g.vw[v]) <= max_vw
                && best.is_none_or(|(bw, _)| w > bw)
            {
                best = Some((w, v));
            }
        }
        let v = best.map_or(u, |b| b.1);
        mate[u] = v as u32;
        mate[v] = u as u32;
    }
    // A lone isolated node left matched to itself waiting for a partner stays a singleton.
    let mut cmap = vec![NONE; n];
    let mut nc = 0u32;
    for u in 0..n {
        let m = mate[u] as usize;
        if u <= m {
            cmap[u] = nc;
            cmap[m] = nc;
            nc += 1;
        }
    }
    let nc = nc as usize;
    let mut xadj = Vec::with_capacity(nc + 1);
    let mut adj = Vec::with_capacity(g.adj.len() / 2);
    let mut ew: Vec<u32> = Vec::with_capacity(g.adj.len() / 2);
    let mut vw = Vec::with_capacity(nc);
    // slot[c] = position of coarse neighbour c in the row being built (NONE: absent).
    let mut slot = vec![NONE as usize; nc];
    xadj.push(0);
    for u in 0..n {
        let m = mate[u] as usize;
        if u > m {
            continue;
        }
        let c = cmap[u] as usize;
        let row = adj.len();
        let mut weight = g.vw[u];
        let members: &[usize] = if m == u { &[u][..] } else { &[u, m][..] };
        if m != u {
            weight = weight.saturating_add(g.vw[m]);
        }
        for &x in members {
            for (v, w) in g.edges(x) {
                let cv = cmap[v] as usize;
                if cv == c {
                    continue;
                }
                if slot[cv] == NONE as usize {
                    slot[cv] = adj.len();
                    adj.push(cv as u32);
                    ew.push(w);
                } else {
                    ew[slot[cv]] = ew[slot[cv]].saturating_add(w);
                }
            }
        }
        for &cv in &adj[row..] {
            slot[cv as usize] = NONE as usize;
        }
        vw.push(weight);
        xadj.push(adj.len());
    }
    (WGraph { xadj, adj, ew, vw }, cmap)
}

/// Splits `nodes` into `k` parts numbered from `first` by recursive bisection: each side
/// gets a share of the weight proportional to its number of parts.
fn recursive_bisect(g: &WGraph, nodes: &[u32], k: usize, first: u32, part: &mut [u32], seed: u64) {
    if k == 1 || nodes.is_empty() {
        for &v in nodes {
            part[v as usize] = first;
        }
        return;
    }
    let k1 = k / 2;
    let total: u64 = nodes.iter().map(|&v| u64::from(g.vw[v as usize])).sum();
    let target = total * k1 as u64 / k as u64;
    let salt = (u64::from(first) << 32) ^ k as u64;
    let side = grow_bisect(g, nodes, target, seed, salt);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (&v, &s) in nodes.iter().zip(&side) {
        if s {
            a.push(v);
        } else {
            b.push(v);
        }
    }
    recursive_bisect(g, &a, k1, first, part, seed);
    recursive_bisect(g, &b, k - k1, first + k1 as u32, part, seed);
}

/// Greedy graph growing: a region grows from a seeded start node, always taking the
/// frontier node whose move cuts least (gain = edges into the region − edges out of it,
/// within `nodes`), until it weighs `target`; a disconnected remainder restarts from
/// another node. Four starts; the one of least cut wins. `true` = in the region.
fn grow_bisect(g: &WGraph, nodes: &[u32], target: u64, seed: u64, salt: u64) -> Vec<bool> {
    const TRIALS: u64 = 4;
    let n = nodes.len();
    let mut local = std::collections::HashMap::with_capacity(n);
    for (i, &v) in nodes.iter().enumerate() {
        local.insert(v, i);
    }
    let mut best: Option<(u64, Vec<bool>)> = None;
    for t in 0..TRIALS {
        let order = hash_order(n, seed, salt.wrapping_mul(31).wrapping_add(t));
        let mut inside = vec![false; n];
        // gain[i]: weight to the region − weight to the rest, for frontier nodes.
        let mut gain = vec![0i64; n];
        let mut touched = vec![false; n];
        let mut heap: BinaryHeap<(i64, Reverse<usize>)> = BinaryHeap::new();
        let mut weight = 0u64;
        let mut next_start = 0usize;
        while weight < target {
            let i = loop {
                match heap.pop() {
                    Some((gi, Reverse(i))) if !inside[i] && gi == gain[i] => break Some(i),
                    Some(_) => continue,
                    None => break None,
                }
            };
            let i = match i {
                Some(i) => i,
                None => {
                    while next_start < n && inside[order[next_start] as usize] {
                        next_start += 1;
                    }
                    if next_start == n {
                        break;
                    }
                    order[next_start] as usize
                }
            };
            inside[i] = true;
            weight += u64::from(g.vw[nodes[i] as usize]);
            for (v, w) in g.edges(nodes[i] as usize) {
                if let Some(&j) = local.get(&(v as u32)) {
                    if !inside[j] {
                        if !touched[j] {
                            touched[j] = true;
                            // First touch: start from −(its weight to everything in `nodes`).
                            gain[j] = -(g
                                .edges(v)
                                .filter(|(x, _)| local.contains_key(&(*x as u32)))
                                .map(|(_, w)| i64::from(w))
                                .sum::<i64>());
                        }
                        gain[j] += 2 * i64::from(w);
                        heap.push((gain[j], Reverse(j)));
                    }
                }
            }
        }
        let mut cut = 0u64;
        for (i, &v) in nodes.iter().enumerate() {
            for (x, w) in g.edges(v as usize) {
                if let Some(&j) = local.get(&(x as u32)) {
                    if inside[i] && !inside[j] {
                        cut += u64::from(w);
                    }
                }
            }
        }
        if best.as_ref().is_none_or(|(c, _)| cut < *c) {
            best = Some((cut, inside));
        }
    }
    best.map(|b| b.1).unwrap_or_default()
}

/// Greedy boundary k-way refinement: up to 10 passes over the nodes in a seeded order; a
/// boundary node moves to the neighbouring part it is most connected to when that lowers
/// the cut (or keeps it and evens the weights) and the target stays ≤ `max_weight`; a node
/// of an overweight part moves to the best part with room even at a loss. Stops at a pass
/// without moves.
fn refine(g: &WGraph, part: &mut [u32], k: usize, max_weight: u64, seed: u64, level: u64) {
    let mut pw = part_weights(g, part, k);
    let mut conn: Vec<(u32, i64)> = Vec::new();
    for pass in 0..10u64 {
        let mut moved = 0usize;
        for u in hash_order(g.n(), seed, (level << 8) ^ pass ^ 0x5245_4649) {
            let u = u as usize;
            let pu = part[u];
            conn.clear();
            let mut internal = 0i64;
            for (v, w) in g.edges(u) {
                let p = part[v];
                if p == pu {
                    internal += i64::from(w);
                } else if let Some(c) = conn.iter_mut().find(|c| c.0 == p) {
                    c.1 += i64::from(w);
                } else {
                    conn.push((p, i64::from(w)));
                }
            }
            let wu = u64::from(g.vw[u]);
            // A part's last node stays: k parts are asked for, and an empty one would be a
            // rank with nothing to train (a large ε once let refinement empty parts).
            if pw[pu as usize] == wu {
                continue;
            }
            let over = pw[pu as usize] > max_weight;
            // Only boundary nodes move here (an overweight part sheds its boundary first);
            // what is left overweight is `force_balance`'s.
            if conn.is_empty() {
                continue;
            }
            // Best target with room: highest connection, then lightest, then lowest id.
            let mut best: Option<(i64, u64, u32)> = None;
            for &(p, c) in &conn {
                if pw[p as usize] + wu <= max_weight {
                    let key = (c, pw[p as usize], p);
                    if best.is_none_or(|b| {
                        key.0 > b.0 || (key.0 == b.0 && (key.1, key.2) < (b.1, b.2))
                    }) {
                        best = Some(key);
                    }
                }
            }
            let Some((c, w_to, to)) = best else { continue };
            let gain = c - internal;
            let evens = w_to + wu < pw[pu as usize];
            if gain > 0 || (gain == 0 && evens) || over {
                pw[pu as usize] -= wu;
                pw[to as usize] += wu;
                part[u] = to;
                moved += 1;
            }
        }
        if moved == 0 {
            break;
        }
    }
}

/// Moves nodes out of parts heavier than `max_weight` into the lightest part, least cut
/// increase first, until none is (always reached on unit weights, since max_weight ≥ ⌈W/k⌉).
fn force_balance(g: &WGraph, part: &mut [u32], k: usize, max_weight: u64) {
    let mut pw = part_weights(g, part, k);
    for p in 0..k {
        if pw[p] <= max_weight {
            continue;
        }
        // Candidates by (internal − external) connection: boundary nodes first.
        let mut cand: Vec<(i64, usize)> = (0..g.n())
            .filter(|&u| part[u] as usize == p)
            .map(|u| {
                let s: i64 = g
                    .edges(u)
                    .map(|(v, w)| {
                        if part[v] as usize == p {
                            i64::from(w)
                        } else {
                            -i64::from(w)
                        }
                    })
                    .sum();
                (s, u)
            })
            .collect();
        cand.sort_unstable();
        for (_, u) in cand {
            if pw[p] <= max_weight {
                break;
            }
            let wu = u64::from(g.vw[u]);
            // A neighbouring part with room (least loaded), else the lightest part.
            let near = g
                .edges(u)
                .map(|(v, _)| part[v] as usize)
                .filter(|&q| q != p && pw[q] + wu <= max_weight)
                .min_by_key(|&q| (pw[q], q));
            let to = near.unwrap_or_else(|| {
                pw.iter()
                    .enumerate()
                    .min_by_key(|&(q, &w)| (w, q))
                    .unwrap()
                    .0
            });
            if to == p || pw[to] + wu > max_weight {
                continue;
            }
            pw[p] -= wu;
            pw[to] += wu;
            part[u] = to as u32;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ring of `n` nodes (the streaming partitioner's tests use it too).
    pub(crate) fn ring(n: usize) -> WGraph {
        let mut off = vec![0u64];
        let mut idx = Vec::new();
        for u in 0..n {
            let mut nb = [(u + n - 1) % n, (u + 1) % n];
            nb.sort();
            idx.extend(nb.iter().map(|&v| v as u32));
            off.push(idx.len() as u64);
        }
        WGraph::from_csr(&off, &idx).unwrap()
    }

    #[test]
    fn ring_is_cut_into_arcs() {
        let g = ring(1000);
        for k in [2, 4, 8] {
            let p = partition(
                &g,
                &PartitionOptions {
                    k,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(p.cut, edge_cut(&g, &p.part));
            assert!(
                p.balance(&g) <= 1.03 + 1e-9,
                "k={k} balance {}",
                p.balance(&g)
            );
            // k arcs cut k edges; allow a little slack for the greedy heuristic.
            assert!(p.cut <= 2 * k as u64, "k={k} cut {}", p.cut);
            assert!(
                p.cut <= p.initial_cut,
                "k={k} cut {} initial {} balance {}",
                p.cut,
                p.initial_cut,
                p.balance(&g)
            );
        }
    }

    #[test]
    fn coarsening_keeps_weights_and_cut() {
        let g = ring(64);
        let (c, cmap) = coarsen(&g, 1, 0, 4);
        assert_eq!(c.total_weight(), g.total_weight());
        assert!(c.n() < g.n());
        let cpart: Vec<u32> = (0..c.n() as u32).map(|i| i % 3).collect();
        let fpart: Vec<u32> = cmap.iter().map(|&x| cpart[x as usize]).collect();
        assert_eq!(edge_cut(&c, &cpart), edge_cut(&g, &fpart));
    }

    #[test]
    fn deterministic_and_edgeless_graphs() {
        let g = ring(500);
        let o = PartitionOptions {
            k: 3,
            epsilon: 0.0,
            seed: 9,
        };
        assert_eq!(
            partition(&g, &o).unwrap().part,
            partition(&g, &o).unwrap().part
        );
        let empty = WGraph::from_csr(&[0; 11], &[]).unwrap();
        let p = partition(&empty, &o).unwrap();
        assert_eq!(p.cut, 0);
        assert!(p.weights(&empty).iter().all(|&w| w <= 4));
        assert!(partition(&g, &PartitionOptions { k: 0, ..o }).is_err());
    }
}
