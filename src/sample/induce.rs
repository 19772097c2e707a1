//! Induce, clip and transpose (JPDC §5.2 Algorithm 6, §6.2).
//!
//! * `induce`: the subgraph of a CSR on a sorted node set, with local ids (the rank of each
//!   node in the set), sorted neighbour lists, and each entry's position in the parent CSR
//!   (so per-edge quantities of the parent, e.g. normalisation counts, can be looked up).
//!   Membership is a bitmap of N bits reused per thread, so the cost is O(Σ deg(v) over the
//!   set) plus a binary search per kept entry, independent of N after the first call.
//! * `clip`: drop random nodes so |V_s| is a multiple of a word count (16 f32 per 64-byte
//!   cache line), before inducing.
//! * `transpose_permutation`: for a symmetric pattern the index arrays are their own
//!   transpose; only the data array moves. One pass computes where each entry goes.

use std::cell::RefCell;

use rand_core::RngCore;

use crate::store::Csr;
use crate::store::StoreError;

/// An induced subgraph: local CSR + original ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subgraph {
    /// Original ids of the nodes, ascending; local id `i` is `nodes[i]`.
    pub nodes: Vec<u32>,
    /// Row offsets, |V_s| + 1 entries.
    pub offsets: Vec<u32>,
    /// Local column ids, sorted within each row.
    pub indices: Vec<u32>,
    /// For each entry, its position in the parent graph's CSR.
    pub parent_entries: Vec<u64>,
    /// A link plan's scored pairs of this step (targets and negatives,
    /// [`super::link::attach_targets`]); None for node classification.
    pub link: Option<std::sync::Arc<super::link::LinkBatch>>,
    /// On a typed store ([`super::typed::attach_relations`]): the nodes' types and each
    /// relation's entries among the nodes; None for the homogeneous path.
    pub typed: Option<std::sync::Arc<super::typed::SubgraphTypes>>,
}

impl Subgraph {
    /// |V_s|.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Directed entries.
    pub fn n_entries(&self) -> usize {
        self.indices.len()
    }

    /// Local neighbours of local node `i`.
    pub fn neighbors(&self, i: usize) -> &[u32] {
        &self.indices[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// For each entry `k` = (u, v), the position of (v, u): apply it to an edge-value array
    /// to transpose the matrix (Algorithm 6). Induced subgraphs of a symmetric graph are
    /// symmetric; a pattern that is not (a corrupt store's neighbour lists) is an error
    /// naming the entry by its original node ids.
    pub fn transpose_permutation(&self) -> Result<Vec<u32>, StoreError> {
        transpose_permutation(&self.offsets, &self.indices).map_err(|(u, v)| {
            let id = |i: u32| self.nodes.get(i as usize).copied().unwrap_or(i);
            StoreError::not_symmetric(id(u), id(v))
        })
    }
}

/// Algorithm 6: `perm[k]` is the position of the reverse of entry `k`, so that
/// `data_t[k] = data[perm[k]]` is the transposed matrix's data on the same index arrays.
/// Requires sorted rows, column ids < n and a symmetric pattern: where they fail (a corrupt
/// store), `Err((u, v))` names the first entry whose reverse was not where it belonged.
pub fn transpose_permutation(offsets: &[u32], indices: &[u32]) -> Result<Vec<u32>, (u32, u32)> {
    // A symmetric pattern is its own transpose, and the permutation an involution.
    transpose_between(offsets, indices, offsets, indices)
}

/// Algorithm 6 between a pattern and its transpose's (`t_offsets`, `t_indices`, the
/// same n rows): `perm[k]` is the position in the first pattern of the reverse of the
/// transposed pattern's entry k, so that `data_t[k] = data[perm[k]]` is the transposed
/// matrix's data in its own CSR order.
///
/// Rows are visited in increasing order u; the entries (v, u) of the transposed pattern's
/// row v are sorted by u, so its next unclaimed slot (a cursor) is exactly (v, u). One
/// pass, O(nnz). Requires sorted rows, column ids < n and the two patterns each other's
/// transpose: where they are not, `Err((u, v))` names the first entry whose reverse was
/// not where the cursor stood (or (n, 0) when the transposed pattern has entries to
/// spare). The check is one comparison per entry, so it is always on.
pub fn transpose_between(
    offsets: &[u32],
    indices: &[u32],
    t_offsets: &[u32],
    t_indices: &[u32],
) -> Result<Vec<u32>, (u32, u32)> {
    let n = offsets.len().saturating_sub(1);
    if t_offsets.len() != offsets.len() {
        return Err((n as u32, 0));
    }
    let mut cursor: Vec<u32> = t_offsets[..n].to_vec();
    let mut perm = vec![0u32; t_indices.len()];
    for u in 0..n {
        for k in offsets[u]..offsets[u + 1] {
            let v = indices[k as usize];
            let t = match cursor.get(v as usize) {
                Some(&t)
                    if t < t_offsets[v as usize + 1] && t_indices[t as usize] as usize == u =>
                {
                    t
                }
                _ => return Err((u as u32, v)),
            };
            cursor[v as usize] += 1;
            perm[t as usize] = k;
        }
    }
    if indices.len() != t_indices.len() {
        return Err((n as u32, 0));
    }
    Ok(perm)
}

/// Per-thread membership index over N nodes: a bitmap, and for each 64-node word that holds
/// a member, the local id of its first member. The local id of member v is then
/// `first[v / 64] + popcount(bits[v / 64] & below(v % 64))`: O(1), no search. Only words
/// holding members are written and read, so nothing is cleared but those words.
#[derive(Default)]
struct Members {
    bits: Vec<u64>,
    first: Vec<u32>,
}

impl Members {
    /// Room for `words` words of the bitmap (new words clear).
    fn grow(&mut self, words: usize) {
        if self.bits.len() < words {
            self.bits.resize(words, 0);
            self.first.resize(words, 0);
        }
    }

    /// Whether `v` is a member (1 or 0), and its local id if it is (a meaningless number
    /// if not): both without a branch.
    ///
    /// # Safety
    /// `v / 64` must be below the length of `bits` (and so of `first`): `v` below the N the
    /// index was grown to.
    #[inline]
    unsafe fn probe_unchecked(&self, v: u32) -> (usize, u32) {
        let w = v as usize / 64;
        debug_assert!(w < self.bits.len() && w < self.first.len());
        // SAFETY: w < bits.len() = first.len(), by the caller's promise.
        let (word, first) = unsafe { (*self.bits.get_unchecked(w), *self.first.get_unchecked(w)) };
        let bit = (word >> (v % 64) & 1) as usize;
        (bit, first + (word & ((1u64 << (v % 64)) - 1)).count_ones())
    }
}

thread_local! {
    /// Grown to the largest N seen; clear between uses.
    static MEMBERS: RefCell<Members> = RefCell::new(Members::default());
}

/// Sorts `nodes` ascending and drops repeats: what `sort_unstable` + `dedup` give. Where the
/// graph's N bits are few against the nodes (at most 4 words of 64 bits per node, as for
/// 9 000 draws on a graph of up to 2.3 M nodes), through the member bitmap that induction
/// uses next: each node's bit set, then the set bits read in order, O(draws + N/64) against
/// the sort's O(draws · log draws). 11 % of the random-walk sampler's time on a Kronecker
/// scale-17 graph went to the sort (BENCHMARKS.md). Ids ≥ `n` (a sampler's bug) take the
/// sort, and induction then refuses them.
pub fn sort_dedup(nodes: &mut Vec<u32>, n: usize) {
    let words = n.div_ceil(64);
    let fits = words <= nodes.len().saturating_mul(4)
        && nodes
            .iter()
            .copied()
            .max()
            .is_some_and(|m| (m as usize) < n);
    if !fits {
        nodes.sort_unstable();
        nodes.dedup();
        return;
    }
    MEMBERS.with(|cell| {
        let mut m = cell.borrow_mut();
        m.grow(words);
        let bits = &mut m.bits[..words];
        for &v in nodes.iter() {
            bits[v as usize / 64] |= 1 << (v % 64);
        }
        nodes.clear();
        for (w, word) in bits.iter_mut().enumerate() {
            let mut x = std::mem::take(word);
            while x != 0 {
                nodes.push((w * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
    });
}

/// Induces `graph` on `nodes` (ascending, distinct, each < N). Neighbour ids ≥ N in a
/// corrupt store are an error, not a panic.
pub fn induce(graph: Csr<'_>, nodes: Vec<u32>) -> Result<Subgraph, StoreError> {
    let mut sub = Subgraph {
        nodes,
        ..Subgraph::default()
    };
    induce_into(graph, &mut sub)?;
    Ok(sub)
}

/// [`induce`] on `sub.nodes`, into `sub`'s other vectors, whose room is reused: a
/// caller that draws many subgraphs on one thread and frees them on another (the Python
/// sampler's consumer) gives the vectors back rather than have each batch's pages fault in
/// afresh. On error the vectors hold nothing meaningful.
pub fn induce_into(graph: Csr<'_>, sub: &mut Subgraph) -> Result<(), StoreError> {
    let nodes = &sub.nodes;
    debug_assert!(
        nodes.windows(2).all(|w| w[0] < w[1]),
        "node set not sorted and distinct"
    );
    let n_graph = graph.n_nodes();
    MEMBERS.with(|cell| {
        let mut m = cell.borrow_mut();
        m.grow(n_graph.div_ceil(64));
        for (i, &v) in nodes.iter().enumerate().rev() {
            let w = v as usize / 64;
            m.bits[w] |= 1 << (v % 64);
            m.first[w] = i as u32; // the last write, in reverse order, is the word's first member
        }
        let parts = (&mut sub.offsets, &mut sub.indices, &mut sub.parent_entries);
        let result = induce_marked(graph, nodes, &m, parts);
        for &v in nodes {
            m.bits[v as usize / 64] = 0;
        }
        result
    })
}

type Parts<'s> = (&'s mut Vec<u32>, &'s mut Vec<u32>, &'s mut Vec<u64>);

fn induce_marked(
    graph: Csr<'_>,
    nodes: &[u32],
    members: &Members,
    (offsets, indices, parent): Parts<'_>,
) -> Result<(), StoreError> {
    offsets.clear();
    indices.clear();
    parent.clear();
    offsets.reserve(nodes.len() + 1);
    // Room for every entry of the rows at once: grown row by row, the buffers were copied
    // on each doubling (a fifth of the sampler's time went to those copies and to faulting
    // in their fresh pages).
    let span: u64 = nodes.iter().map(|&u| graph.degree(u) as u64).sum();
    let span = usize::try_from(span).unwrap_or(usize::MAX);
    indices.reserve(span);
    parent.reserve(span);
    offsets.push(0u32);
    let n_graph = graph.n_nodes() as u64;
    for &u in nodes {
        let row = graph.try_neighbors(u)?;
        // One check of the row's ids (a corrupt store's), not one per entry: a maximum,
        // which vectorises where a search for the first bad id does not.
        if row
            .iter()
            .copied()
            .max()
            .is_some_and(|m| u64::from(m) >= n_graph)
        {
            let v = row.iter().copied().find(|&v| u64::from(v) >= n_graph);
            return Err(StoreError::neighbor_out_of_range(
                u,
                v.unwrap_or(0),
                n_graph,
            ));
        }
        let base = graph.offsets()[u as usize];
        // Branch-free: every entry is written at the end, and the length advances only for
        // members, so a non-member's slot is overwritten by the next entry. Whether a
        // neighbour is in the subgraph is close to a coin toss on skewed graphs, a branch
        // the predictor misses; this has none.
        let len = indices.len();
        indices.reserve(row.len());
        parent.reserve(row.len());
        let (ip, pp) = (
            indices.spare_capacity_mut().as_mut_ptr(),
            parent.spare_capacity_mut().as_mut_ptr(),
        );
        let mut k = 0usize;
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: v < N (the row was checked above) and the bitmap covers N nodes.
            let (member, local) = unsafe { members.probe_unchecked(v) };
            // SAFETY: k ≤ j < row.len(), within the capacity reserved above.
            unsafe {
                ip.add(k).write(std::mem::MaybeUninit::new(local));
                pp.add(k).write(std::mem::MaybeUninit::new(base + j as u64));
            }
            k += member;
        }
        // SAFETY: the first k slots past len were written (members' entries, in order).
        unsafe {
            indices.set_len(len + k);
            parent.set_len(len + k);
        }
        offsets.push(subgraph_offset(indices.len())?);
    }
    Ok(())
}

/// A subgraph's CSR offset: its entries are counted in u32 (what its kernels index by),
/// so a subgraph of more than 2³² − 1 entries (the "full" sampler on a graph past 2³²
/// entries) is an error saying so, never a wrapped offset.
pub fn subgraph_offset(entries: usize) -> Result<u32, StoreError> {
    u32::try_from(entries).map_err(|_| {
        StoreError::argument(format!(
            "a subgraph of more than {} entries ({entries} so far): subgraphs index their \
             entries in 32 bits; sample smaller subgraphs (the `full` sampler takes the whole \
             graph)",
            u32::MAX
        ))
    })
}

/// Drops `nodes.len() % multiple` random nodes (keeping ascending order) so the count is a
/// multiple of `multiple`; a set smaller than `multiple` is kept whole.
pub fn clip(nodes: &mut Vec<u32>, multiple: usize, rng: &mut impl RngCore) {
    if multiple <= 1 || nodes.len() < multiple {
        return;
    }
    let drop = nodes.len() % multiple;
    for _ in 0..drop {
        let i = (rng.next_u64() % nodes.len() as u64) as usize;
        nodes.remove(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subgraph_offset_past_32_bits_is_an_error_not_a_wrap() {
        assert_eq!(subgraph_offset(u32::MAX as usize).unwrap(), u32::MAX);
        let err = subgraph_offset(u32::MAX as usize + 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("32 bits") && err.contains("4294967296"),
            "{err}"
        );
    }
    use crate::store::csr_build::pack;
    use proptest::prelude::*;
    use rand::SeedableRng;

    fn symmetric_csr(n: usize, edges: &[(u32, u32)]) -> (Vec<u64>, Vec<u32>) {
        let mut keys: Vec<u64> = edges
            .iter()
            .flat_map(|&(u, v)| {
                [
                    pack(u % n as u32, v % n as u32),
                    pack(v % n as u32, u % n as u32),
                ]
            })
            .filter(|&k| k >> 32 != k & 0xffff_ffff)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut offsets = vec![0u64; n + 1];
        for &k in &keys {
            offsets[(k >> 32) as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        (offsets, keys.iter().map(|&k| k as u32).collect())
    }

    proptest! {
        #[test]
        fn induce_equals_brute_force(
            n in 1usize..60,
            edges in prop::collection::vec((0u32..60, 0u32..60), 0..300),
            pick in prop::collection::vec(any::<bool>(), 60),
        ) {
            let (offsets, indices) = symmetric_csr(n, &edges);
            let g = Csr::new(&offsets, &indices).unwrap();
            let nodes: Vec<u32> = (0..n as u32).filter(|&v| pick[v as usize]).collect();
            let s = induce(g, nodes.clone()).unwrap();
            // Brute force: every pair (a, b) of the set, edge iff in the parent.
            for (i, &a) in nodes.iter().enumerate() {
                let want: Vec<u32> = nodes.iter().enumerate()
                    .filter(|&(_, &b)| g.neighbors(a).contains(&b))
                    .map(|(j, _)| j as u32).collect();
                prop_assert_eq!(s.neighbors(i), &want[..]);
            }
            for (k, &p) in s.parent_entries.iter().enumerate() {
                let row = s.offsets.partition_point(|&o| o as usize <= k) - 1;
                prop_assert_eq!(indices[p as usize], nodes[s.indices[k] as usize]);
                prop_assert!(offsets[nodes[row] as usize] <= p && p < offsets[nodes[row] as usize + 1]);
            }
        }

        #[test]
        fn transpose_equals_naive_transpose(
            n in 1usize..40,
            edges in prop::collection::vec((0u32..40, 0u32..40), 0..200),
            seed in any::<u64>(),
        ) {
            let (offsets, indices) = symmetric_csr(n, &edges);
            let offsets: Vec<u32> = offsets.iter().map(|&o| o as u32).collect();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            let data: Vec<f64> = (0..indices.len()).map(|_| (rand_core::RngCore::next_u64(&mut rng) % 1000) as f64).collect();
            let perm = transpose_permutation(&offsets, &indices).unwrap();
            let fast: Vec<f64> = perm.iter().map(|&p| data[p as usize]).collect();
            // Naive: dense matrix, transposed, read back on the same pattern.
            let mut dense = vec![0f64; n * n];
            for u in 0..n {
                for k in offsets[u]..offsets[u + 1] {
                    dense[u * n + indices[k as usize] as usize] = data[k as usize];
                }
            }
            for u in 0..n {
                for k in offsets[u]..offsets[u + 1] {
                    let v = indices[k as usize] as usize;
                    prop_assert_eq!(fast[k as usize], dense[v * n + u]);
                }
            }
            // Transposing twice is the identity.
            let twice: Vec<f64> = perm.iter().map(|&p| fast[p as usize]).collect();
            prop_assert_eq!(twice, data);
        }

        /// Both paths of `sort_dedup` (the bitmap where N is small against the draws, the
        /// sort where not) give sort + dedup, and leave the bitmap clear: an induction on
        /// the same thread afterwards is still the brute force's.
        #[test]
        fn sort_dedup_equals_sort_then_dedup(
            n in 1usize..5000,
            raw in prop::collection::vec(any::<u32>(), 0..400),
        ) {
            let mut nodes: Vec<u32> = raw.iter().map(|&v| v % n as u32).collect();
            let mut want = nodes.clone();
            want.sort_unstable();
            want.dedup();
            sort_dedup(&mut nodes, n);
            prop_assert_eq!(&nodes, &want);
            let (offsets, indices) = symmetric_csr(3, &[(0, 1), (1, 2)]);
            let s = induce(Csr::new(&offsets, &indices).unwrap(), vec![0, 2]).unwrap();
            prop_assert!(s.indices.is_empty(), "a bit left set: {:?}", s.indices);
        }

        #[test]
        fn clipped_sizes_are_multiples(len in 0usize..200, multiple in 1usize..40, seed in any::<u64>()) {
            let mut nodes: Vec<u32> = (0..len as u32).map(|v| v * 3).collect();
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            clip(&mut nodes, multiple, &mut rng);
            if len >= multiple {
                prop_assert_eq!(nodes.len() % multiple, 0);
                prop_assert_eq!(nodes.len(), len - len % multiple);
            } else {
                prop_assert_eq!(nodes.len(), len);
            }
            prop_assert!(nodes.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(nodes.iter().all(|v| v % 3 == 0));
        }
    }
}
