//! GraphSAINT's samplers over typed graphs (issue 57 item 4), and the relations of an
//! induced subgraph.
//!
//! A typed store's global CSR is the union of its relations over all node types
//! (docs/FORMAT.md, "Typed stores"), so a typed sampler draws a node multiset from the
//! union graph like a homogeneous one, and the subgraph is induced on it as before
//! ([`crate::sample::sample_subgraph`]); what is typed is *where* the draws go, and what
//! the subgraph keeps besides ([`attach_relations`]). The distributions (with the
//! normalisation they imply: docs/SAMPLING.md):
//!
//! * [`TypedNodeSampler`]: `b_t` draws from each node type t (per-type budgets, some may
//!   be 0), each ∝ the node's degree in the sampled graph among type t's nodes,
//!   P(v) = deg(v) / Σ_{u of type t} deg(u) (or uniform over type t's nodes that have a
//!   neighbour). The entries of type t's rows are one run of the global CSR (types are
//!   contiguous id ranges), so a draw is a uniform entry position in that run and a binary
//!   search of the row, as for the homogeneous node sampler.
//! * [`TypedEdgeSampler`]: `E_g` draws from each relation group g — a relation r and its
//!   reverse r′ (one group when r is its own reverse) — each drawing the entry (u, v) of r
//!   with P = (1/deg_r(u) + 1/deg_{r′}(v)) / (n_r + n_{r′}), n_r the nodes with a
//!   neighbour through r: GraphSAINT's edge distribution on the relation's own bipartite
//!   graph. For a symmetric relation an undirected edge {u, v} comes out with
//!   (1/deg_r(u) + 1/deg_r(v)) / n_r, the homogeneous sampler's. Drawn as the homogeneous
//!   sampler does: a uniform node among the group's n_r + n_{r′} rows with a neighbour, a
//!   uniform neighbour of it through the relation of its row. The relations are the full
//!   graph's, so this sampler samples the full graph (a transductive typed store's
//!   training graph, `import ogb`'s default).
//! * [`typed_walk_sampler`]: walks over the union graph (a uniform neighbour whatever its
//!   relation), roots drawn uniformly from a root set: the nodes of the root types
//!   (default: the labelled types), optionally only training nodes, that have a neighbour.
//!
//! A homogeneous store is the one-type case: one budget, the one relation (symmetric),
//! every node a root — and each sampler then draws exactly the homogeneous sampler's
//! nodes, random number for random number (tests/typed_samplers.rs).

use std::ops::Range;
use std::sync::Arc;

use crate::sample::{below, scale, RandomWalkSampler, SampleError, SampleRng, Sampler, Subgraph};
use crate::store::{Csr, GraphStore, Role, StoreError};

/// One node type's share of a [`TypedNodeSampler`]'s draws.
struct TypePart {
    ty: usize,
    /// The type's global ids.
    nodes: Range<u32>,
    /// Draws per subgraph.
    budget: usize,
    /// Uniform draws: the type's nodes with a neighbour.
    candidates: Vec<u32>,
}

/// Node sampler with per-type budgets (module documentation).
pub struct TypedNodeSampler<'g> {
    graph: Csr<'g>,
    parts: Vec<TypePart>,
    by_degree: bool,
    names: Vec<String>,
}

impl<'g> TypedNodeSampler<'g> {
    /// `budgets[t]` draws from type t per subgraph (one per node type of `store`), ∝
    /// degree in `graph` (the store's full or training graph) if `by_degree`, else uniform
    /// over the type's nodes with a neighbour.
    pub fn new(
        store: &GraphStore,
        graph: Csr<'g>,
        budgets: &[usize],
        by_degree: bool,
    ) -> Result<Self, SampleError> {
        check_graph(store, graph)?;
        if budgets.len() != store.n_node_types() {
            return Err(SampleError::Param(format!(
                "typed node: budgets expected one per node type ({}), got {}",
                store.n_node_types(),
                budgets.len()
            )));
        }
        if budgets.iter().all(|&b| b == 0) {
            return Err(SampleError::Param(
                "typed node: budgets expected one ≥ 1, got all 0".into(),
            ));
        }
        let offsets = graph.offsets();
        let mut parts = Vec::new();
        for (ty, &budget) in budgets.iter().enumerate().filter(|(_, &b)| b > 0) {
            let nodes = store.type_range(ty);
            let entries = offsets[nodes.end as usize] - offsets[nodes.start as usize];
            if entries == 0 {
                return Err(SampleError::Param(format!(
                    "typed node: type `{}` has budget {budget} but no node of it has a \
                     neighbour in the sampled graph",
                    store.node_type_name(ty)
                )));
            }
            let candidates = if by_degree {
                Vec::new()
            } else {
                nodes
                    .clone()
                    .filter(|&v| offsets[v as usize + 1] > offsets[v as usize])
                    .collect()
            };
            parts.push(TypePart {
                ty,
                nodes,
                budget,
                candidates,
            });
        }
        let names = (0..store.n_node_types())
            .map(|t| store.node_type_name(t).to_string())
            .collect();
        Ok(TypedNodeSampler {
            graph,
            parts,
            by_degree,
            names,
        })
    }

    /// One draw from `part`.
    #[inline]
    fn draw(&self, part: &TypePart, rng: &mut SampleRng) -> u32 {
        if self.by_degree {
            let offsets = self.graph.offsets();
            let (lo, hi) = (part.nodes.start as usize, part.nodes.end as usize);
            let k = offsets[lo] + below(rng, offsets[hi] - offsets[lo]);
            (lo + offsets[lo..=hi].partition_point(|&o| o <= k) - 1) as u32
        } else {
            part.candidates[below(rng, part.candidates.len() as u64) as usize]
        }
    }
}

impl Sampler for TypedNodeSampler<'_> {
    fn name(&self) -> String {
        let budgets: Vec<String> = self
            .parts
            .iter()
            .map(|p| format!("{}={}", self.names[p.ty], p.budget))
            .collect();
        format!(
            "typed-node({}, {})",
            budgets.join(", "),
            if self.by_degree { "degree" } else { "uniform" }
        )
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        for part in &self.parts {
            out.extend((0..part.budget).map(|_| self.draw(part, rng)));
        }
        Ok(())
    }
}

/// One relation group of a [`TypedEdgeSampler`]: a relation and its reverse.
struct EdgeGroup<'g> {
    name: String,
    /// The relation's rows with a neighbour, then its reverse's (none when symmetric).
    rows: Vec<(u32, crate::store::typed::RelCsr<'g>)>,
    edges: usize,
}

/// Edge sampler per relation group (module documentation).
pub struct TypedEdgeSampler<'g> {
    graph: Csr<'g>,
    groups: Vec<EdgeGroup<'g>>,
}

impl<'g> TypedEdgeSampler<'g> {
    /// `budgets`: (relation id, edges per subgraph) for each group to draw from; a
    /// relation stands for itself and its reverse (naming both is an error). Samples the
    /// store's full graph.
    pub fn new(store: &'g GraphStore, budgets: &[(usize, usize)]) -> Result<Self, SampleError> {
        let graph = store.full();
        let mut seen = vec![false; store.n_relations()];
        let mut groups = Vec::new();
        for &(r, edges) in budgets {
            if r >= store.n_relations() {
                return Err(SampleError::Param(format!(
                    "typed edge: relation {r} expected < {}",
                    store.n_relations()
                )));
            }
            let rel = store.relation(r);
            if seen[r] || seen[rel.reverse] {
                return Err(SampleError::Param(format!(
                    "typed edge: relation `{}` named twice (a relation and its reverse are \
                     one group)",
                    rel.name
                )));
            }
            seen[r] = true;
            seen[rel.reverse] = true;
            if edges == 0 {
                continue;
            }
            let mut rows = Vec::new();
            let mut push_rows = |id: usize| {
                let csr = store.relation(id).csr;
                let offsets = csr.offsets();
                rows.extend(
                    csr.rows()
                        .filter(|&u| {
                            let k = (u - csr.src_start) as usize;
                            offsets[k + 1] > offsets[k]
                        })
                        .map(|u| (u, csr)),
                );
            };
            push_rows(r);
            if rel.reverse != r {
                push_rows(rel.reverse);
            }
            if rows.is_empty() {
                return Err(SampleError::Param(format!(
                    "typed edge: relation `{}` has no entries",
                    rel.name
                )));
            }
            groups.push(EdgeGroup {
                name: rel.name.to_string(),
                rows,
                edges,
            });
        }
        if groups.is_empty() {
            return Err(SampleError::Param(
                "typed edge: budgets expected one ≥ 1, got none".into(),
            ));
        }
        Ok(TypedEdgeSampler { graph, groups })
    }

    /// One draw from group `g`: (x, y) with x the row drawn, y its neighbour.
    #[inline]
    fn draw(&self, g: &EdgeGroup<'_>, rng: &mut SampleRng) -> Result<(u32, u32), SampleError> {
        let (x, csr) = g.rows[below(rng, g.rows.len() as u64) as usize];
        let row = csr.row(x);
        let y = row[scale(rand_core::RngCore::next_u64(rng), row.len() as u64) as usize];
        let n = self.graph.n_nodes() as u64;
        if u64::from(y) >= n {
            return Err(StoreError::neighbor_out_of_range(x, y, n).into());
        }
        Ok((x, y))
    }
}

impl Sampler for TypedEdgeSampler<'_> {
    fn name(&self) -> String {
        let budgets: Vec<String> = self
            .groups
            .iter()
            .map(|g| format!("{}={}", g.name, g.edges))
            .collect();
        format!("typed-edge({})", budgets.join(", "))
    }

    fn graph(&self) -> Csr<'_> {
        self.graph
    }

    fn sample_nodes(&self, rng: &mut SampleRng, out: &mut Vec<u32>) -> Result<(), SampleError> {
        for g in &self.groups {
            out.reserve(g.edges.saturating_mul(2));
            for _ in 0..g.edges {
                let (x, y) = self.draw(g, rng)?;
                out.push(x.min(y));
                out.push(x.max(y));
            }
        }
        Ok(())
    }
}

/// Which nodes a typed random walk starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkRoots {
    /// Root node types; empty: the labelled types.
    pub types: Vec<usize>,
    /// Only training nodes (role train).
    pub train_only: bool,
}

/// The random-walk sampler over the union graph `graph` with roots drawn uniformly from
/// the nodes of `roots.types` (training nodes only if asked) that have a neighbour.
pub fn typed_walk_sampler<'g>(
    store: &GraphStore,
    graph: Csr<'g>,
    roots: &WalkRoots,
    walks: usize,
    depth: usize,
) -> Result<RandomWalkSampler<'g, Vec<u32>>, SampleError> {
    check_graph(store, graph)?;
    let types: Vec<usize> = if roots.types.is_empty() {
        (0..store.n_node_types())
            .filter(|&t| store.type_labelled(t))
            .collect()
    } else {
        roots.types.clone()
    };
    let mut list = Vec::new();
    for &t in &types {
        if t >= store.n_node_types() {
            return Err(SampleError::Param(format!(
                "typed rw: root type {t} expected < {}",
                store.n_node_types()
            )));
        }
        list.extend(store.type_range(t).filter(|&v| {
            graph.degree(v) > 0 && (!roots.train_only || store.role(v) == Role::Train)
        }));
    }
    list.sort_unstable();
    list.dedup();
    if list.is_empty() {
        return Err(SampleError::Param(
            "typed rw: no root (no node of the root types has a neighbour in the sampled \
             graph, or none is a training node)"
                .into(),
        ));
    }
    RandomWalkSampler::with_roots(graph, list, walks, depth)
}

/// The sampled graph must be one of the store's (its node count).
fn check_graph(store: &GraphStore, graph: Csr<'_>) -> Result<(), SampleError> {
    if graph.n_nodes() != store.n_nodes() {
        return Err(SampleError::Param(format!(
            "typed sampler: graph of {} nodes expected, got {}",
            store.n_nodes(),
            graph.n_nodes()
        )));
    }
    Ok(())
}

/// One relation's entries among a subgraph's nodes: a local CSR whose rows are the
/// subgraph's nodes of the relation's source type, in order (row k is local node
/// `type_starts[src] + k`), columns local ids of the subgraph (of the destination type),
/// ascending, and each entry's position in the relation's CSR.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubRelation {
    /// Relation id in the store.
    pub relation: usize,
    /// Source node type.
    pub src: usize,
    /// Destination node type.
    pub dst: usize,
    /// Row offsets: the subgraph's nodes of type `src` + 1.
    pub offsets: Vec<u32>,
    /// Local column ids.
    pub indices: Vec<u32>,
    /// Each entry's position in the relation's CSR (`RelCsr::indices`).
    pub parent_entries: Vec<u64>,
}

impl SubRelation {
    /// Entries.
    pub fn n_entries(&self) -> usize {
        self.indices.len()
    }
}

/// What a subgraph of a typed store keeps besides its union CSR.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubgraphTypes {
    /// Local ids of type t are `type_starts[t]..type_starts[t + 1]` (nodes ascending,
    /// types contiguous id ranges): the nodes' types, node types + 1 entries.
    pub type_starts: Vec<u32>,
    /// Per relation of the store, by id.
    pub relations: Vec<SubRelation>,
}

impl SubgraphTypes {
    /// The type of local node `i`.
    pub fn node_type(&self, i: u32) -> usize {
        self.type_starts.partition_point(|&s| s <= i) - 1
    }

    /// The local ids of type `t`.
    pub fn type_range(&self, t: usize) -> Range<u32> {
        self.type_starts[t]..self.type_starts[t + 1]
    }
}

/// Adds the nodes' types and each relation's entries among them to `sub` (drawn from
/// the store's full or training graph). An entry (u, v) of relation r is kept when u and v
/// are in the subgraph and (u, v) is an entry of the sampled graph: for the full graph and
/// for the training graph induced on the training nodes, every entry of r between two of
/// the subgraph's nodes. Cost: where r is the only relation from its source type to its
/// destination type (ogbn-mag's relations, the typed Cora's, the generator's) and `sub`
/// was drawn from the full graph, r's row of u is the run of u's full row between the
/// destination type's ids, so an entry's position in r follows from its position in the
/// full graph (`parent_entries`) and the run's start, one binary search per row
/// (`positions_from_the_union`); otherwise u's relation row merged with its subgraph row
/// (a binary search per subgraph neighbour where the relation's row is long).
pub fn attach_relations(store: &GraphStore, sub: &mut Subgraph) -> Result<(), SampleError> {
    let n_types = store.n_node_types();
    let full = store.full();
    let mut type_starts = Vec::with_capacity(n_types + 1);
    for t in 0..n_types {
        let start = store.type_range(t).start;
        type_starts.push(sub.nodes.partition_point(|&v| v < start) as u32);
    }
    type_starts.push(sub.nodes.len() as u32);
    let mut relations = Vec::with_capacity(store.n_relations());
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for r in 0..store.n_relations() {
        let rel = store.relation(r);
        let csr = rel.csr;
        let (rows, cols) = (
            type_starts[rel.src] as usize..type_starts[rel.src + 1] as usize,
            type_starts[rel.dst]..type_starts[rel.dst + 1],
        );
        let cols_global = store.type_range(rel.dst);
        let alone = store.relations_between(rel.src, rel.dst).len() == 1;
        let mut out = SubRelation {
            relation: r,
            src: rel.src,
            dst: rel.dst,
            offsets: Vec::with_capacity(rows.len() + 1),
            ..SubRelation::default()
        };
        out.offsets.push(0);
        // Each row's neighbours of the destination type in the subgraph row (local ids
        // ascending, so global ids ascending too), and room for all of them at once: grown
        // entry by entry, the buffers were copied and their fresh pages faulted in on each
        // doubling (as `induce` found).
        spans.clear();
        let mut room = 0usize;
        for i in rows.clone() {
            let local = sub.neighbors(i);
            let lo = local.partition_point(|&j| j < cols.start);
            let hi = lo + local[lo..].partition_point(|&j| j < cols.end);
            spans.push((lo, hi));
            room += hi - lo;
        }
        out.indices.reserve(room);
        out.parent_entries.reserve(room);
        for (i, &(lo, hi)) in rows.zip(spans.iter()) {
            let u = sub.nodes[i];
            let base = csr.offsets()[(u - csr.src_start) as usize];
            let k0 = sub.offsets[i] as usize;
            if alone
                && positions_from_the_union(
                    (full, u, csr.degree(u)),
                    &cols_global,
                    sub,
                    k0 + lo..k0 + hi,
                    base,
                    &mut out,
                )
            {
                out.offsets
                    .push(crate::sample::subgraph_offset(out.indices.len())?);
                continue;
            }
            let row = csr.row(u);
            let local = &sub.neighbors(i)[lo..hi];
            if row.len() > 8 * local.len() {
                let mut from = 0usize;
                for &j in local {
                    let v = sub.nodes[j as usize];
                    from += row[from..].partition_point(|&w| w < v);
                    if row.get(from) == Some(&v) {
                        out.indices.push(j);
                        out.parent_entries.push(base + from as u64);
                    }
                }
            } else {
                let mut k = 0usize;
                for &j in local {
                    let v = sub.nodes[j as usize];
                    while k < row.len() && row[k] < v {
                        k += 1;
                    }
                    if row.get(k) == Some(&v) {
                        out.indices.push(j);
                        out.parent_entries.push(base + k as u64);
                    }
                }
            }
            out.offsets
                .push(crate::sample::subgraph_offset(out.indices.len())?);
        }
        relations.push(out);
    }
    sub.typed = Some(Arc::new(SubgraphTypes {
        type_starts,
        relations,
    }));
    Ok(())
}

/// The entries `span` of `sub` (row u's neighbours of the relation's destination type,
/// ids `dst`) pushed onto `out` with their positions in the relation (`base`: u's first),
/// read off their full-graph positions: u's relation row, of `degree` entries, is the run
/// of u's full row within `dst` when the relation is the only one between the two types.
/// Checked, not assumed: every entry's parent position must hold that neighbour in u's
/// full row (`sub` drawn from the full graph) and the run must be as long as the
/// relation's row; `false` (nothing pushed) sends the row to the merge.
fn positions_from_the_union(
    (full, u, degree): (Csr<'_>, u32, usize),
    dst: &Range<u32>,
    sub: &Subgraph,
    span: Range<usize>,
    base: u64,
    out: &mut SubRelation,
) -> bool {
    let (f0, f1) = (full.offsets()[u as usize], full.offsets()[u as usize + 1]);
    let frow = &full.indices()[f0 as usize..f1 as usize];
    let run = frow.partition_point(|&w| w < dst.start);
    // The run within `dst` is `degree` long: its last entry inside, the next outside.
    if run + degree > frow.len()
        || (degree > 0 && frow[run + degree - 1] >= dst.end)
        || frow.get(run + degree).is_some_and(|&w| w < dst.end)
    {
        return false;
    }
    let ok = span.clone().all(|k| {
        let p = sub.parent_entries[k];
        (f0..f1).contains(&p) && frow[(p - f0) as usize] == sub.nodes[sub.indices[k] as usize]
    });
    if !ok {
        return false;
    }
    for k in span {
        out.indices.push(sub.indices[k]);
        out.parent_entries
            .push(base + (sub.parent_entries[k] - f0) - run as u64);
    }
    true
}

/// Draws subgraph `index` ([`crate::sample::sample_subgraph`]) and attaches its relations.
pub fn sample_typed_subgraph(
    sampler: &(impl Sampler + ?Sized),
    store: &GraphStore,
    seed: u64,
    index: u64,
    clip_to: usize,
) -> Result<Subgraph, SampleError> {
    let mut sub = crate::sample::sample_subgraph(sampler, seed, index, clip_to)?;
    attach_relations(store, &mut sub)?;
    Ok(sub)
}

/// Subgraphs `first..first + count` with their relations, in parallel, in index order.
pub fn sample_typed_pool(
    sampler: &(impl Sampler + ?Sized),
    store: &GraphStore,
    seed: u64,
    first: u64,
    count: u64,
    clip_to: usize,
) -> Result<Vec<Subgraph>, SampleError> {
    use rayon::prelude::*;
    crate::sample::sample_pool(sampler, seed, first, count, clip_to)?
        .into_par_iter()
        .map(|mut sub| {
            attach_relations(store, &mut sub)?;
            Ok(sub)
        })
        .collect()
}
