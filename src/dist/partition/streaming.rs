//! A streaming first level for graphs whose multilevel partition does not fit in memory
//! (issue 56 item 5): one Fennel pass (Tsourakakis et al., WSDM 2014) over the nodes in id
//! order, then a few streaming refinement passes, each reading the CSR once, in order, over
//! an [`Adjacency`] (the store's mapped CSR: [`super::graph::StoreGraph`]). Anonymous memory:
//! a part id per node (4 B·N), the part sizes and O(k) scratch; the CSR pages are the
//! kernel's, read sequentially and reclaimable.
//!
//! * Fennel: node u goes to the part i with room maximising
//!   |N(u) ∩ P_i| − α·γ·|P_i|^(γ−1), γ = 1.5, α = √k·m/N^1.5 (m undirected edges; the
//!   paper's choice), counting only neighbours placed before u. Ties: a seeded hash of
//!   (u, i), so the seed is the only source of choice. Room: |P_i| < the balance bound
//!   max(⌊(1+ε)·N/k⌋, ⌈N/k⌉), the multilevel partitioner's rule; since k bounds ≥ N a part
//!   with room always exists, and when the nodes left are as many as the parts still empty
//!   each goes to an empty part, so no part is empty (k ≤ N).
//! * Refinement pass (restreaming, as Nishimura and Ugander's ReFennel, KDD 2013): every
//!   node in id order, taken out of its part, is placed again by the same score, now with
//!   every neighbour's current part known: it moves to the part holding most of its
//!   neighbours unless the balance term outweighs the difference, only to a part with room,
//!   and never empties its own part; a tie keeps it where it is. Stops after `passes`
//!   passes or at a pass without a move. Why not plain greedy moves under the hard bound
//!   alone: with every part near the bound the few free places fill within a pass and the
//!   communities the first pass mixed stay mixed (a planted 2-community graph kept 68% of a
//!   random assignment's cut); the balance term lets nodes flow both ways. A pass may raise
//!   the cut a little (a move for balance); the cut is tracked exactly either way on a
//!   symmetric graph: Fennel's is the edges to earlier nodes in other parts, and a move
//!   changes it by the neighbours left behind less those joined (the partition's cut is
//!   counted over the rows once more at the end, in parallel).
//! * Node order: id order, which is what makes a pass a sequential read of the CSR. For
//!   `gen kronecker`'s stores it is a random order (the generator relabels nodes by a keyed
//!   pseudo-random permutation), the order Fennel's analysis assumes; a store whose ids
//!   follow its structure (a BFS or crawl order) streams in a friendly order too, but one
//!   whose ids alternate between communities would give the first pass a poor start that
//!   refinement only partly repairs.
//!
//! Sequential by design: the result is a function of the graph, k, ε, the seed and the
//! passes, whatever the thread count (the cut counts and the graph check are integer sums
//! and first-finds over rows in parallel).

use super::graph::{part_sizes, Adjacency};
use super::multilevel::{check_options, max_weight, Partition, PartitionOptions};
use super::PartitionError;
use crate::progress::{Progress, Ticker};
use crate::seed::{hash3, stream};

/// γ of Fennel's objective.
pub const GAMMA: f64 = 1.5;
/// Refinement passes `saintflow partition --method streaming` makes by default: each reads
/// the CSR once (docs/bench/partition.md has the cut after each at Kronecker scale 22).
pub const DEFAULT_PASSES: usize = 4;

/// Nodes a progress ticker advances by at once.
const TICK: usize = 1 << 16;

/// What [`partition_streaming`] returns: the partition (its `initial_cut` is Fennel's, its
/// `levels` 0, its `cut` counted over the rows after the last pass) and the cut after each
/// pass as tracked (the same on a symmetric graph).
#[derive(Debug, Clone)]
pub struct Streamed {
    /// The partition.
    pub partition: Partition,
    /// The cut after the Fennel pass, then after each refinement pass made.
    pub pass_cuts: Vec<u64>,
    /// Nodes moved by each refinement pass made.
    pub pass_moves: Vec<u64>,
}

/// Partitions `g` into `opts.k` parts by a Fennel pass and up to `passes` refinement passes
/// (see the module's documentation).
pub fn partition_streaming<G: Adjacency + ?Sized>(
    g: &G,
    opts: &PartitionOptions,
    passes: usize,
    progress: &Progress,
) -> Result<Streamed, PartitionError> {
    check_options(opts)?;
    let (n, k) = (g.n(), opts.k);
    if k > n.max(1) {
        return Err(PartitionError::argument(format!(
            "k = {k}: more parts than the graph's {n} nodes"
        )));
    }
    let cap = max_weight(n as u64, k, opts.epsilon);
    let ticker = progress.ticker(n as u64, "streaming: Fennel pass", "nodes");
    let (mut part, first_cut) = fennel(g, k, cap, opts.seed, &ticker);
    ticker.finish();
    let mut sizes = part_sizes(&part, k);
    // Signed: exact on a symmetric graph, where it never goes below 0; a damaged store's
    // asymmetric rows could take it there, so the partition's cut is counted at the end.
    let mut cut = first_cut as i64;
    let (mut pass_cuts, mut pass_moves) = (vec![first_cut], Vec::new());
    for pass in 0..passes {
        let label = format!("streaming: refinement pass {}/{passes}", pass + 1);
        let ticker = progress.ticker(n as u64, label, "nodes");
        let alpha = fennel_alpha(g, k);
        let (moves, change) = refine_pass(g, &mut part, &mut sizes, cap, alpha, &ticker);
        ticker.finish();
        cut += change;
        pass_cuts.push(cut.max(0) as u64);
        pass_moves.push(moves);
        if moves == 0 {
            break;
        }
    }
    let cut = super::graph::cut(g, &part);
    Ok(Streamed {
        partition: Partition {
            part,
            k,
            cut,
            initial_cut: first_cut,
            initial_balanced: true,
            levels: 0,
            coarsest_nodes: n,
            max_weight: cap,
        },
        pass_cuts,
        pass_moves,
    })
}

/// Fennel's α = √k·m/N^1.5 (0 for an empty graph).
fn fennel_alpha<G: Adjacency + ?Sized>(g: &G, k: usize) -> f64 {
    let (n, m) = (g.n(), g.entries() as f64 / 2.0);
    if n == 0 {
        0.0
    } else {
        (k as f64).sqrt() * m / (n as f64).powf(1.5)
    }
}

/// Fennel's one pass (see the module's documentation): every node's part and the cut.
fn fennel<G: Adjacency + ?Sized>(
    g: &G,
    k: usize,
    cap: u64,
    seed: u64,
    ticker: &Ticker,
) -> (Vec<u32>, u64) {
    const UNSET: u32 = u32::MAX;
    let n = g.n();
    let alpha = fennel_alpha(g, k);
    // penalty[i] = α·γ·|P_i|^(γ−1), updated when |P_i| changes.
    let penalty = |size: u64| alpha * GAMMA * (size as f64).powf(GAMMA - 1.0);
    let key = hash3(seed, stream::PARTITION, 0x4645_4E4E); // "FENN"
    let mut part = vec![UNSET; n];
    let mut sizes = vec![0u64; k];
    let mut pen = vec![0.0f64; k];
    let mut count = vec![0u64; k];
    let (mut empty, mut cut) = (k, 0u64);
    for u in 0..n {
        let mut placed = 0u64;
        for &v in g.row(u) {
            let p = part[v as usize];
            if p != UNSET {
                count[p as usize] += 1;
                placed += 1;
            }
        }
        // As many nodes left as empty parts: each of them opens one.
        let must_open = empty == n - u;
        let mut best: Option<(f64, u64, usize)> = None;
        for i in 0..k {
            if sizes[i] >= cap || (must_open && sizes[i] > 0) {
                continue;
            }
            let score = count[i] as f64 - pen[i];
            let tie = hash3(key, u as u64, i as u64);
            if best.is_none_or(|(s, t, _)| score > s || (score == s && tie < t)) {
                best = Some((score, tie, i));
            }
        }
        // k bounds of at least ⌈N/k⌉ hold N nodes: some part has room.
        let i = best.expect("a part with room").2;
        part[u] = i as u32;
        sizes[i] += 1;
        pen[i] = penalty(sizes[i]);
        if sizes[i] == 1 {
            empty -= 1;
        }
        cut += placed - count[i];
        count.iter_mut().for_each(|c| *c = 0);
        if (u + 1) % TICK == 0 {
            ticker.inc(TICK as u64);
        }
    }
    ticker.set_position(n as u64);
    (part, cut)
}

/// One refinement pass (see the module's documentation): (nodes moved, cut change).
fn refine_pass<G: Adjacency + ?Sized>(
    g: &G,
    part: &mut [u32],
    sizes: &mut [u64],
    cap: u64,
    alpha: f64,
    ticker: &Ticker,
) -> (u64, i64) {
    let k = sizes.len();
    let mut count = vec![0u64; k];
    let (mut moves, mut change) = (0u64, 0i64);
    for u in 0..part.len() {
        for &v in g.row(u) {
            count[part[v as usize] as usize] += 1;
        }
        let pu = part[u] as usize;
        if sizes[pu] > 1 {
            // Fennel's score with u taken out of its part.
            let mut best = (f64::NEG_INFINITY, pu);
            for i in 0..k {
                let size = sizes[i] - u64::from(i == pu);
                if size >= cap {
                    continue;
                }
                let score = count[i] as f64 - alpha * GAMMA * (size as f64).powf(GAMMA - 1.0);
                if score > best.0 || (score == best.0 && i == pu) {
                    best = (score, i);
                }
            }
            let q = best.1;
            if q != pu {
                change += count[pu] as i64 - count[q] as i64;
                sizes[pu] -= 1;
                sizes[q] += 1;
                part[u] = q as u32;
                moves += 1;
            }
        }
        count.iter_mut().for_each(|c| *c = 0);
        if (u + 1) % TICK == 0 {
            ticker.inc(TICK as u64);
        }
    }
    ticker.set_position(part.len() as u64);
    (moves, change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::partition::graph::cut;
    use crate::dist::partition::multilevel::tests::ring;
    use crate::dist::partition::WGraph;

    #[test]
    fn tracked_cut_is_the_cut_and_parts_are_full() {
        let g = ring(1000);
        for k in [1, 2, 3, 7] {
            let o = PartitionOptions {
                k,
                epsilon: 0.0,
                seed: 5,
            };
            let s = partition_streaming(&g, &o, 3, &Progress::hidden()).unwrap();
            let p = &s.partition;
            assert_eq!(p.cut, cut(&g, &p.part), "k={k}");
            assert_eq!(s.pass_cuts[0], p.initial_cut);
            assert_eq!(*s.pass_cuts.last().unwrap(), p.cut);
            let sizes = part_sizes(&p.part, k);
            assert!(
                sizes.iter().all(|&s| s >= 1 && s <= p.max_weight),
                "{sizes:?}"
            );
            // In id order a ring streams as a path: Fennel keeps long arcs.
            assert!(p.cut <= 4 * k as u64, "k={k}: cut {}", p.cut);
        }
    }

    #[test]
    fn every_part_gets_a_node_even_when_k_is_n() {
        let g = WGraph::from_csr(&[0; 6], &[]).unwrap();
        let o = PartitionOptions {
            k: 5,
            epsilon: 1e9,
            seed: 0,
        };
        let s = partition_streaming(&g, &o, 2, &Progress::hidden()).unwrap();
        assert_eq!(part_sizes(&s.partition.part, 5), vec![1; 5]);
        let six = PartitionOptions { k: 6, ..o };
        assert!(partition_streaming(&g, &six, 2, &Progress::hidden()).is_err());
    }
}
