//! The typed samplers as sampler kinds (issue 57 item 4): `typed_node`, `typed_edge` and
//! `typed_rw` in a plan's `[sampler]`, `saintflow sample --sampler` and the Python
//! `Sampler`, with their budgets per node type or relation *by name*. Names are resolved
//! against the graph in one place ([`NameTable`]): when a plan is lowered against a store
//! (the error then points at the plan's value, `FILE:LINE:COL`), and when the sampler is
//! built (library callers, `saintflow sample`). What each sampler draws and how its
//! subgraphs are normalised: src/sample/typed.rs and docs/SAMPLING.md.

use crate::sample::params::{GraphFieldError, NamedCounts, Names, SamplerParams};
use crate::sample::typed::{typed_walk_sampler, TypedEdgeSampler, TypedNodeSampler, WalkRoots};
use crate::sample::{EdgeParams, NodeParams, RandomWalkSampler, SampleError};
use crate::store::format::{TypesMeta, DEFAULT_NODE_TYPE, DEFAULT_RELATION};
use crate::store::{Csr, GraphStore};
use crate::suggest::did_you_mean;

/// The node type and relation names of a graph: a typed store's, or a homogeneous graph's
/// one type `node` and one relation `to` (`node___to___node`).
pub struct NameTable<'a> {
    node_types: Vec<&'a str>,
    /// (source type, name, destination type).
    relations: Vec<(&'a str, &'a str, &'a str)>,
}

impl<'a> NameTable<'a> {
    /// The names of `types` (`None`: a homogeneous graph).
    pub fn of(types: Option<&'a TypesMeta>) -> NameTable<'a> {
        match types {
            Some(t) => NameTable {
                node_types: t.node_types.iter().map(|n| n.name.as_str()).collect(),
                relations: t
                    .relations
                    .iter()
                    .map(|r| {
                        (
                            t.node_types[r.src as usize].name.as_str(),
                            r.name.as_str(),
                            t.node_types[r.dst as usize].name.as_str(),
                        )
                    })
                    .collect(),
            },
            None => NameTable {
                node_types: vec![DEFAULT_NODE_TYPE],
                relations: vec![(DEFAULT_NODE_TYPE, DEFAULT_RELATION, DEFAULT_NODE_TYPE)],
            },
        }
    }

    /// The node type named `name`.
    pub fn node_type(&self, name: &str) -> Result<usize, String> {
        self.node_types
            .iter()
            .position(|&t| t == name)
            .ok_or_else(|| {
                format!(
                    "the graph has no node type `{name}`{}; its node types: {}",
                    did_you_mean(name, self.node_types.iter().copied()),
                    self.node_types.join(", ")
                )
            })
    }

    /// The relation named `name`: its own name when no other relation has it, or OGB's
    /// `source___name___destination` (ogbn-mag's directory names).
    pub fn relation(&self, name: &str) -> Result<usize, String> {
        let triple = |(s, n, d): &(&str, &str, &str)| format!("{s}___{n}___{d}");
        let hits: Vec<usize> = (0..self.relations.len())
            .filter(|&r| self.relations[r].1 == name || triple(&self.relations[r]) == name)
            .collect();
        match hits.as_slice() {
            [r] => Ok(*r),
            [] => {
                let known: Vec<String> = self.relations.iter().map(|r| r.1.to_string()).collect();
                Err(format!(
                    "the graph has no relation `{name}`{}; its relations: {}",
                    did_you_mean(name, known.iter().map(String::as_str)),
                    self.relations
                        .iter()
                        .map(triple)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
            many => Err(format!(
                "{} relations are named `{name}`: write the types too, one of {}",
                many.len(),
                many.iter()
                    .map(|&r| triple(&self.relations[r]))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// A name of the graph's: a node type's or a relation's ([`NameTable::node_type`],
/// [`NameTable::relation`]).
type Resolve = fn(&NameTable<'_>, &str) -> Result<usize, String>;

/// `names` (of field `field`) resolved against `types`: one id per name, in order.
fn resolved<'n>(
    field: &'static str,
    names: impl IntoIterator<Item = &'n str>,
    types: Option<&TypesMeta>,
    resolve: Resolve,
) -> Result<Vec<usize>, GraphFieldError> {
    let table = NameTable::of(types);
    names
        .into_iter()
        .map(|n| resolve(&table, n).map_err(|what| GraphFieldError { field, what }))
        .collect()
}

/// The ids `budgets` names, in its order (`per`: what a name is), refused when a total
/// (field `total.1`) is given too.
fn named_budgets(
    budgets: &NamedCounts,
    total: (Option<usize>, &str),
    per: &str,
    types: Option<&TypesMeta>,
    resolve: Resolve,
) -> Result<Vec<usize>, GraphFieldError> {
    if let (Some(_), false) = (total.0, budgets.is_empty()) {
        let key = total.1;
        return Err(GraphFieldError {
            field: "budgets",
            what: format!(
                "`{key}` is given too: `budgets` names each {per}'s draws, `{key}` splits a \
                 total over them; give one"
            ),
        });
    }
    resolved(
        "budgets",
        budgets.0.iter().map(|b| b.0.as_str()),
        types,
        resolve,
    )
}

/// `total` split over parts ∝ `weights` (largest remainder: the parts sum to `total` when
/// some weight is not 0; ties to the lower index).
pub fn split_budget(total: usize, weights: &[u64]) -> Vec<usize> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<u128> = weights
        .iter()
        .map(|&w| total as u128 * u128::from(w))
        .collect();
    let mut parts: Vec<usize> = exact.iter().map(|&e| (e / sum) as usize).collect();
    let mut left = total - parts.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(exact[i] % sum));
    for i in order {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    parts
}

sampler_params! {
    /// Parameters of the typed node sampler (plan `kind = "typed_node"`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TypedNodeParams {
        /// Nodes drawn in all, split over the node types ∝ their share of the draws of `node` (default 8000; not with `budgets`).
        pub budget: Option<usize> = None,
        /// Nodes drawn per node type, by name (`{ paper = 500, author = 200 }`; a type not named draws none).
        pub budgets: NamedCounts = NamedCounts::default(),
        /// Uniform over each type's nodes with a neighbour instead of ∝ degree.
        pub uniform: bool = false,
    }
}

impl TypedNodeParams {
    /// `budget`, or the node sampler's default.
    fn total(&self) -> usize {
        self.budget.unwrap_or(NodeParams::default().budget)
    }

    /// The node types `budgets` names, in its order.
    fn named(&self, types: Option<&TypesMeta>) -> Result<Vec<usize>, GraphFieldError> {
        let total = (self.budget, "budget");
        named_budgets(&self.budgets, total, "node type", types, |t, n| {
            t.node_type(n)
        })
    }

    /// The draws per node type of `store` from `graph`.
    fn per_type(&self, store: &GraphStore, graph: Csr<'_>) -> Result<Vec<usize>, SampleError> {
        let types = self
            .named(store.types())
            .map_err(GraphFieldError::of(Self::KIND))?;
        let n_types = store.n_node_types();
        if !self.budgets.is_empty() {
            let mut per = vec![0; n_types];
            for (&t, (_, b)) in types.iter().zip(&self.budgets.0) {
                per[t] = *b;
            }
            return Ok(per);
        }
        // The node sampler's expected draws per type: entries (∝ degree) or nodes with a
        // neighbour (uniform).
        let offsets = graph.offsets();
        let weights: Vec<u64> = (0..n_types)
            .map(|t| {
                let r = store.type_range(t);
                if self.uniform {
                    r.filter(|&v| offsets[v as usize + 1] > offsets[v as usize])
                        .count() as u64
                } else {
                    offsets[r.end as usize] - offsets[r.start as usize]
                }
            })
            .collect();
        Ok(split_budget(self.total(), &weights))
    }
}

impl SamplerParams for TypedNodeParams {
    const KIND: &'static str = "typed_node";
    const DOC: &'static str = "Nodes per node type (∝ degree, or uniform), budgets by type name";
    type Sampler<'g> = TypedNodeSampler<'g>;

    fn build<'g>(
        &self,
        store: &'g GraphStore,
        graph: Csr<'g>,
    ) -> Result<TypedNodeSampler<'g>, SampleError> {
        TypedNodeSampler::new(store, graph, &self.per_type(store, graph)?, !self.uniform)
    }

    fn expected_nodes(&self) -> Option<usize> {
        Some(match self.budgets.is_empty() {
            true => self.total(),
            false => self.budgets.total(),
        })
    }

    fn check_graph_fields(&self, types: Option<&TypesMeta>) -> Result<(), GraphFieldError> {
        self.named(types).map(drop)
    }
}

sampler_params! {
    /// Parameters of the typed edge sampler (plan `kind = "typed_edge"`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TypedEdgeParams {
        /// Edges drawn in all, split over the relation groups ∝ their rows with a neighbour (default 4000; not with `budgets`).
        pub edges: Option<usize> = None,
        /// Edges drawn per relation group, by relation name (`{ cites = 2000, writes = 1000 }`; a relation stands for itself and its reverse; one not named draws none).
        pub budgets: NamedCounts = NamedCounts::default(),
    }
}

impl TypedEdgeParams {
    /// `edges`, or the edge sampler's default.
    fn total(&self) -> usize {
        self.edges.unwrap_or(EdgeParams::default().edges)
    }

    /// The relations `budgets` names, in its order.
    fn named(&self, types: Option<&TypesMeta>) -> Result<Vec<usize>, GraphFieldError> {
        let total = (self.edges, "edges");
        named_budgets(&self.budgets, total, "relation", types, |t, n| {
            t.relation(n)
        })
    }

    /// (relation, edges) per group drawn from.
    fn per_group(&self, store: &GraphStore) -> Result<Vec<(usize, usize)>, SampleError> {
        let rels = self
            .named(store.types())
            .map_err(GraphFieldError::of(Self::KIND))?;
        if !self.budgets.is_empty() {
            // In relation order: the draws do not depend on the order the names came in
            // (a plan's table, a Python dict).
            let mut groups: Vec<(usize, usize)> = rels
                .into_iter()
                .zip(&self.budgets.0)
                .map(|(r, (_, e))| (r, *e))
                .collect();
            groups.sort_by_key(|g| g.0);
            return Ok(groups);
        }
        // One group per relation and its reverse, weighted as the edge sampler's first
        // draw (a uniform row with a neighbour among the group's).
        let rows = |r: usize| {
            let csr = store.relation(r).csr;
            let o = csr.offsets();
            o.windows(2).filter(|w| w[1] > w[0]).count() as u64
        };
        let reverse = |r: usize| store.relation(r).reverse;
        let groups: Vec<usize> = (0..store.n_relations())
            .filter(|&r| reverse(r) >= r)
            .collect();
        let weights: Vec<u64> = groups
            .iter()
            .map(|&r| match reverse(r) {
                rev if rev == r => rows(r),
                rev => rows(r) + rows(rev),
            })
            .collect();
        let split = split_budget(self.total(), &weights);
        Ok(groups.into_iter().zip(split).collect())
    }
}

impl SamplerParams for TypedEdgeParams {
    const KIND: &'static str = "typed_edge";
    const DOC: &'static str =
        "Edges per relation (∝ 1/deg(u) + 1/deg(v) within it), budgets by relation name";
    type Sampler<'g> = TypedEdgeSampler<'g>;

    fn build<'g>(
        &self,
        store: &'g GraphStore,
        graph: Csr<'g>,
    ) -> Result<TypedEdgeSampler<'g>, SampleError> {
        // It draws the relations, which are the full graph's: a training graph that is a
        // part of the full graph would be left silently.
        if graph.n_entries() != store.full().n_entries() {
            return Err(SampleError::Param(format!(
                "typed_edge draws the relations of the full graph, and this store's training \
                 graph is a part of it ({} of {} entries): sample graph = \"full\"",
                graph.n_entries(),
                store.full().n_entries()
            )));
        }
        TypedEdgeSampler::new(store, &self.per_group(store)?)
    }

    /// Two endpoints per edge drawn.
    fn expected_nodes(&self) -> Option<usize> {
        let edges = match self.budgets.is_empty() {
            true => self.total(),
            false => self.budgets.total(),
        };
        Some(edges.saturating_mul(2))
    }

    fn check_graph_fields(&self, types: Option<&TypesMeta>) -> Result<(), GraphFieldError> {
        self.named(types).map(drop)
    }
}

sampler_params! {
    /// Parameters of the typed random-walk sampler (plan `kind = "typed_rw"`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TypedWalkParams {
        /// Walk roots r.
        pub roots: usize = 3000,
        /// Walk length h.
        pub depth: usize = 2,
        /// Node types the roots are drawn from, by name (default: the labelled types).
        pub root_types: Names = Names::default(),
        /// Roots among the training nodes only.
        pub train_roots: bool = false,
    }
}

impl TypedWalkParams {
    /// The node types `root_types` names.
    fn root_types(&self, types: Option<&TypesMeta>) -> Result<Vec<usize>, GraphFieldError> {
        let names = self.root_types.0.iter().map(String::as_str);
        resolved("root_types", names, types, |t, n| t.node_type(n))
    }
}

impl SamplerParams for TypedWalkParams {
    const KIND: &'static str = "typed_rw";
    const DOC: &'static str = "Random walks over every relation from roots of chosen node types";
    type Sampler<'g> = RandomWalkSampler<'g, Vec<u32>>;

    fn build<'g>(
        &self,
        store: &'g GraphStore,
        graph: Csr<'g>,
    ) -> Result<RandomWalkSampler<'g, Vec<u32>>, SampleError> {
        let types = self
            .root_types(store.types())
            .map_err(GraphFieldError::of(Self::KIND))?;
        let roots = WalkRoots {
            types,
            train_only: self.train_roots,
        };
        typed_walk_sampler(store, graph, &roots, self.roots, self.depth)
    }

    fn expected_nodes(&self) -> Option<usize> {
        Some(self.roots.saturating_mul(self.depth.saturating_add(1)))
    }

    fn check_graph_fields(&self, types: Option<&TypesMeta>) -> Result<(), GraphFieldError> {
        self.root_types(types).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_budget_sums_to_the_total_in_proportion() {
        assert_eq!(split_budget(10, &[1, 1, 2]), [3, 2, 5]);
        assert_eq!(split_budget(7, &[0, 5, 0]), [0, 7, 0]);
        assert_eq!(split_budget(5, &[0, 0]), [0, 0]);
        assert_eq!(split_budget(3, &[1, 1, 1, 1]), [1, 1, 1, 0]);
        let p = split_budget(8000, &[123_456, 7, 98_765]);
        assert_eq!(p.iter().sum::<usize>(), 8000);
        assert!(p[1] <= 1 && p[0] > p[2]);
    }

    #[test]
    fn names_resolve_with_the_nearest_in_the_error() {
        let h = NameTable::of(None);
        assert_eq!(h.node_type("node"), Ok(0));
        assert_eq!(h.relation("to"), Ok(0));
        assert_eq!(h.relation("node___to___node"), Ok(0));
        let e = h.node_type("nodes").unwrap_err();
        assert!(
            e.contains("no node type `nodes`") && e.contains("`node`"),
            "{e}"
        );
        assert!(h.relation("from").unwrap_err().contains("node___to___node"));
    }
}
