//! GraphSAINT's samplers over typed graphs (issue 57 item 4): each typed sampler's draws
//! against its stated distribution (chi-square at p = 0.001 on fixed seeds, the helpers of
//! tests/samplers.rs), the subgraph's relations against brute force, the normalisation
//! counts against probabilities enumerated exactly on a tiny typed graph, determinism
//! whatever the threads, and the homogeneous store as the one-type case (exactly today's
//! subgraphs).

mod common;

use common::{gz, ogb_relations};

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use saintflow::sample::naive::{chi_square, chi_square_critical};
use saintflow::sample::*;
use saintflow::store::{check, GraphStore};

/// A relation as the files list it: (src, rel, dst, edges in local ids).
type Listed = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(u32, u32)],
);

/// A tiny typed graph in ogbn-mag's layout, imported: paper 0..4 (labelled, train 0 and
/// 1), author 0..3, field 0..2 (the importer orders the types by name: author, field,
/// paper); `author writes paper`, `paper cites paper` (made symmetric), `paper has_topic field`, and the
/// importer's reverses `rev_writes`, `rev_has_topic`.
fn tiny(dir: &Path) -> PathBuf {
    let raw = dir.join("raw");
    gz(
        &raw.join("num-node-dict.csv.gz"),
        ["paper,author,field", "4,3,2"],
    );
    let rels: [Listed; 3] = [
        (
            "author",
            "writes",
            "paper",
            &[(0, 0), (0, 1), (1, 1), (1, 2), (2, 3), (0, 3)],
        ),
        ("paper", "cites", "paper", &[(0, 1), (1, 2), (2, 0), (2, 3)]),
        (
            "paper",
            "has_topic",
            "field",
            &[(0, 0), (1, 0), (2, 1), (3, 1)],
        ),
    ];
    ogb_relations(&raw, &rels);
    common::ogb_papers_and_import(
        dir,
        "paper,author,field",
        &["1.0", "2.0", "3.0", "4.0"],
        &["0", "1", "0", "1"],
        [&["0", "1"], &["2"], &["3"]],
    )
}

fn open_tiny(dir: &Path) -> GraphStore {
    let s = GraphStore::open(tiny(dir)).unwrap();
    check(&s).unwrap();
    assert_eq!((s.n_node_types(), s.n_relations()), (3, 5));
    s
}

/// A typed Kronecker graph: 3 types, 9 relations, skewed degrees.
fn kron_typed(dir: &Path) -> GraphStore {
    GraphStore::open(common::typed_kronecker(dir, 9)).unwrap()
}

fn rng(seed: u64) -> SampleRng {
    SampleRng::seed_from_u64(seed)
}

/// A relation's entries as global pairs with their positions.
fn rel_entries(s: &GraphStore, r: usize) -> Vec<(u32, u32, u64)> {
    let csr = s.relation(r).csr;
    csr.rows()
        .flat_map(|u| {
            let base = csr.offsets()[(u - csr.src_start) as usize];
            csr.row(u)
                .iter()
                .enumerate()
                .map(move |(j, &v)| (u, v, base + j as u64))
        })
        .collect()
}

fn assert_chi2(counts: &[u64], expected: &[f64], what: &str) {
    let stat = chi_square(counts, expected);
    let crit = chi_square_critical(counts.len() - 1);
    assert!(stat < crit, "{what}: chi2 = {stat} ≥ {crit}");
}

/// Per-type budgets: each type's draws are ∝ its nodes' degrees in the sampled graph
/// (or uniform over its nodes with a neighbour), and each type gets its budget.
#[test]
fn typed_node_sampler_draws_each_type_by_degree() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open_tiny(tmp.path());
    let g = s.full();
    let budgets = [3usize, 2, 1];
    for by_degree in [true, false] {
        let sm = TypedNodeSampler::new(&s, g, &budgets, by_degree).unwrap();
        let mut counts = vec![0u64; s.n_nodes()];
        let mut r = rng(7);
        let draws = 20_000;
        for _ in 0..draws {
            let mut out = Vec::new();
            sm.sample_nodes(&mut r, &mut out).unwrap();
            assert_eq!(out.len(), 6);
            // Parts in type order: 3 papers, 2 authors, 1 field.
            let types: Vec<usize> = out.iter().map(|&v| s.node_type(v)).collect();
            assert_eq!(types, [0, 0, 0, 1, 1, 2]);
            for &v in &out {
                counts[v as usize] += 1;
            }
        }
        for (t, &b) in budgets.iter().enumerate() {
            let range = s.type_range(t);
            let w: Vec<f64> = range
                .clone()
                .map(|v| if by_degree { g.degree(v) as f64 } else { 1.0 })
                .collect();
            let total: f64 = w.iter().sum();
            let n = (draws * b) as f64;
            let expected: Vec<f64> = w.iter().map(|x| n * x / total).collect();
            let observed = &counts[range.start as usize..range.end as usize];
            assert_chi2(
                observed,
                &expected,
                &format!("type {t} by_degree={by_degree}"),
            );
        }
    }
    // A budget on a type without edges, or budgets of the wrong length, are errors.
    assert!(TypedNodeSampler::new(&s, g, &[1, 1], true).is_err());
    assert!(TypedNodeSampler::new(&s, g, &[0, 0, 0], true).is_err());
}

/// Per relation group: entry (u, v) of r with (1/deg_r(u) + 1/deg_r′(v)) / (n_r + n_r′);
/// a symmetric relation's undirected edge with (1/deg u + 1/deg v) / n_r.
#[test]
fn typed_edge_sampler_matches_inverse_relation_degrees() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open_tiny(tmp.path());
    for name in ["writes", "cites", "rev_has_topic"] {
        let r = (0..s.n_relations())
            .find(|&r| s.relation(r).name == name)
            .unwrap();
        let rel = s.relation(r);
        let rev = s.relation(rel.reverse);
        let rows_with =
            |c: saintflow::store::RelCsr<'_>| c.rows().filter(|&u| c.degree(u) > 0).count();
        // Expected probability of each unordered pair.
        let mut want: HashMap<(u32, u32), f64> = HashMap::new();
        if rel.reverse == r {
            let n_r = rows_with(rel.csr) as f64;
            for (u, v, _) in rel_entries(&s, r) {
                if u < v {
                    let p = (1.0 / rel.csr.degree(u) as f64 + 1.0 / rel.csr.degree(v) as f64) / n_r;
                    want.insert((u, v), p);
                }
            }
        } else {
            let n = (rows_with(rel.csr) + rows_with(rev.csr)) as f64;
            for (u, v, _) in rel_entries(&s, r) {
                let p = (1.0 / rel.csr.degree(u) as f64 + 1.0 / rev.csr.degree(v) as f64) / n;
                *want.entry((u.min(v), u.max(v))).or_default() += p;
            }
        }
        let total: f64 = want.values().sum();
        assert!(
            (total - 1.0).abs() < 1e-12,
            "{name}: probabilities sum to {total}"
        );
        let sm = TypedEdgeSampler::new(&s, &[(r, 1)]).unwrap();
        let mut r_ = rng(11);
        let draws = 30_000u64;
        let mut counts: HashMap<(u32, u32), u64> = HashMap::new();
        for _ in 0..draws {
            let mut out = Vec::new();
            sm.sample_nodes(&mut r_, &mut out).unwrap();
            *counts.entry((out[0], out[1])).or_default() += 1;
        }
        let keys: Vec<(u32, u32)> = {
            let mut k: Vec<_> = want.keys().copied().collect();
            k.sort_unstable();
            k
        };
        assert!(
            counts.keys().all(|k| want.contains_key(k)),
            "{name}: a pair outside the relation"
        );
        let observed: Vec<u64> = keys
            .iter()
            .map(|k| counts.get(k).copied().unwrap_or(0))
            .collect();
        let expected: Vec<f64> = keys.iter().map(|k| want[k] * draws as f64).collect();
        assert_chi2(&observed, &expected, name);
    }
    // A relation and its reverse in one list are one group: an error.
    let w = (0..s.n_relations())
        .find(|&r| s.relation(r).name == "writes")
        .unwrap();
    assert!(TypedEdgeSampler::new(&s, &[(w, 1), (s.relation(w).reverse, 1)]).is_err());
}

/// Roots uniform over the target type's training nodes, each step a uniform neighbour
/// in the union graph: the (root, first step) pairs against 1/|R| · 1/deg(root).
#[test]
fn typed_walks_start_at_target_training_nodes_and_follow_the_union_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open_tiny(tmp.path());
    let g = s.full();
    let roots = WalkRoots {
        types: vec![],
        train_only: true,
    };
    let sm = typed_walk_sampler(&s, g, &roots, 1, 2).unwrap();
    let paper = s.node_type_index("paper").unwrap();
    let root_set: Vec<u32> = s
        .type_range(paper)
        .filter(|&v| s.role(v) == saintflow::store::Role::Train)
        .collect();
    assert_eq!(root_set.len(), 2);
    let mut pairs = Vec::new();
    for &u in &root_set {
        for &v in g.neighbors(u) {
            pairs.push((u, v));
        }
    }
    let draws = 20_000u64;
    let mut counts = vec![0u64; pairs.len()];
    let mut r = rng(5);
    for _ in 0..draws {
        let mut out = Vec::new();
        sm.sample_nodes(&mut r, &mut out).unwrap();
        assert_eq!(out.len(), 3);
        assert!(g.neighbors(out[1]).contains(&out[2]));
        let i = pairs
            .iter()
            .position(|&p| p == (out[0], out[1]))
            .expect("a root's edge");
        counts[i] += 1;
    }
    let expected: Vec<f64> = pairs
        .iter()
        .map(|&(u, _)| draws as f64 / root_set.len() as f64 / g.degree(u) as f64)
        .collect();
    assert_chi2(&counts, &expected, "root and first step");
    // Every paper with a neighbour when not restricted to training nodes; every type named.
    let all = typed_walk_sampler(
        &s,
        g,
        &WalkRoots {
            types: vec![1],
            train_only: false,
        },
        1,
        0,
    )
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut r = rng(6);
    for _ in 0..2000 {
        let mut out = Vec::new();
        all.sample_nodes(&mut r, &mut out).unwrap();
        seen.insert(out[0]);
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        s.type_range(1).collect::<Vec<_>>()
    );
}

/// The subgraph's relations against brute force: every pair of its nodes in relation r
/// is an entry of its local CSR of r, at the right position, and nothing else is; the
/// nodes' types are the store's. On the tiny graph and a typed Kronecker graph (long
/// relation rows against few subgraph neighbours: the binary-search path).
/// Authors who write and review papers: two relations from `author` to `paper` (and their
/// reverses two from `paper` to `author`), overlapping in one entry, so a relation's row is
/// not the union's run between the two types.
fn two_relations(dir: &Path) -> GraphStore {
    let raw = dir.join("raw");
    gz(&raw.join("num-node-dict.csv.gz"), ["paper,author", "4,3"]);
    let rels: [Listed; 3] = [
        (
            "author",
            "writes",
            "paper",
            &[(0, 0), (0, 1), (1, 2), (2, 3)],
        ),
        ("author", "reviews", "paper", &[(0, 1), (1, 3), (2, 0)]),
        ("paper", "cites", "paper", &[(0, 1), (1, 2), (2, 3)]),
    ];
    ogb_relations(&raw, &rels);
    let p = common::ogb_papers_and_import(
        dir,
        "paper,author",
        &["1.0", "2.0", "3.0", "4.0"],
        &["0", "1", "0", "1"],
        [&["0", "1"], &["2"], &["3"]],
    );
    let s = GraphStore::open(p).unwrap();
    check(&s).unwrap();
    let (a, p) = (
        s.node_type_index("author").unwrap(),
        s.node_type_index("paper").unwrap(),
    );
    assert_eq!(s.relations_between(a, p).len(), 2);
    s
}

/// Each relation's entries among a subgraph's nodes against a scan of the relation's CSR:
/// on the full graph where every relation is the only one between its types (positions
/// read off the union's), where two relations join the same types and on a training graph
/// that is a part of the full graph (the merge).
#[test]
fn subgraph_relations_equal_brute_force() {
    let tmp = tempfile::tempdir().unwrap();
    let tiny = open_tiny(tmp.path());
    let kron = kron_typed(tmp.path());
    let two_dir = tmp.path().join("two");
    let two = two_relations(&two_dir);
    for s in [&tiny, &kron, &two] {
        let g = s.full();
        let n_types = s.n_node_types();
        let small = TypedNodeSampler::new(s, g, &vec![2; n_types], true).unwrap();
        let big = TypedNodeSampler::new(s, g, &vec![s.n_nodes() / 4; n_types], false).unwrap();
        let train = RandomWalkSampler::new(s.train(), 3, 2).unwrap();
        let samplers: [(&dyn Sampler, u64); 3] = [(&small, 40), (&big, 6), (&train, 10)];
        for (sm, count) in samplers {
            for i in 0..count {
                let sub = sample_typed_subgraph(sm, s, 3, i, 1).unwrap();
                let t = sub.typed.as_ref().unwrap();
                for (k, &v) in sub.nodes.iter().enumerate() {
                    assert_eq!(t.node_type(k as u32), s.node_type(v));
                }
                assert_eq!(t.relations.len(), s.n_relations());
                for (r, rel) in t.relations.iter().enumerate() {
                    let sr = s.relation(r);
                    assert_eq!((rel.relation, rel.src, rel.dst), (r, sr.src, sr.dst));
                    let mut want = Vec::new();
                    for (u, v, p) in rel_entries(s, r) {
                        if let (Ok(a), Ok(b)) =
                            (sub.nodes.binary_search(&u), sub.nodes.binary_search(&v))
                        {
                            want.push((a as u32, b as u32, p));
                        }
                    }
                    let start = t.type_starts[rel.src];
                    let mut got = Vec::new();
                    assert_eq!(
                        rel.offsets.len() as u32,
                        t.type_starts[rel.src + 1] - start + 1
                    );
                    for k in 0..rel.offsets.len() - 1 {
                        for e in rel.offsets[k]..rel.offsets[k + 1] {
                            got.push((
                                start + k as u32,
                                rel.indices[e as usize],
                                rel.parent_entries[e as usize],
                            ));
                        }
                    }
                    assert_eq!(got, want, "relation {r} of subgraph {i}");
                }
            }
        }
    }
}

/// Every node set the sampler can draw with its probability (per-type independent
/// draws: the product over types of each type's sequences of draws).
fn exact_inclusion(s: &GraphStore, budgets: &[usize]) -> (Vec<f64>, HashMap<(u32, u32), f64>) {
    let g = s.full();
    // Per type: the distribution of its drawn set.
    let mut dist: Vec<(Vec<u32>, f64)> = vec![(Vec::new(), 1.0)];
    for (t, &b) in budgets.iter().enumerate() {
        let range: Vec<u32> = s.type_range(t).collect();
        let total: f64 = range.iter().map(|&v| g.degree(v) as f64).sum();
        let mut seqs: Vec<(Vec<u32>, f64)> = vec![(Vec::new(), 1.0)];
        for _ in 0..b {
            seqs = seqs
                .into_iter()
                .flat_map(|(set, p)| {
                    range.iter().map(move |&v| {
                        let mut set = set.clone();
                        set.push(v);
                        (set, p * g.degree(v) as f64 / total)
                    })
                })
                .collect();
        }
        dist = dist
            .into_iter()
            .flat_map(|(a, pa)| {
                seqs.iter().map(move |(b, pb)| {
                    let mut set = a.clone();
                    set.extend(b);
                    (set, pa * pb)
                })
            })
            .collect();
    }
    let mut node = vec![0.0; s.n_nodes()];
    let mut pair: HashMap<(u32, u32), f64> = HashMap::new();
    for (mut set, p) in dist {
        set.sort_unstable();
        set.dedup();
        for &u in &set {
            node[u as usize] += p;
            for &v in &set {
                *pair.entry((u, v)).or_default() += p;
            }
        }
    }
    (node, pair)
}

/// The normalisation against an exhaustive computation: every node's C_v / N_pre and every
/// relation entry's C_{u,v,r} / N_pre against P(v ∈ V_s) and P(u, v ∈ V_s) enumerated
/// exactly, within 5 binomial standard deviations; α's weights C_v / C_{u,v,r} and λ's
/// from those counts; and C_{u,v,r} equal to the union graph's C_{u,v} of the same
/// subgraphs (the homogeneous counts).
#[test]
fn typed_normalisation_matches_exhaustive_probabilities() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open_tiny(tmp.path());
    // Two papers (so `cites` entries can be drawn), one author, one field.
    let mut budgets = [1usize; 3];
    budgets[s.node_type_index("paper").unwrap()] = 2;
    let sm = TypedNodeSampler::new(&s, s.full(), &budgets, true).unwrap();
    let n_pre = 20_000u64;
    let c = TypedNormCounts::estimate(&sm, &s, n_pre, 9, 1).unwrap();
    let (p_node, p_pair) = exact_inclusion(&s, &budgets);
    let within = |count: u32, p: f64, what: &str| {
        let sd = (p * (1.0 - p) / n_pre as f64).sqrt();
        let got = f64::from(count) / n_pre as f64;
        assert!(
            (got - p).abs() <= 5.0 * sd + 1e-12,
            "{what}: {got} against exact {p} (sd {sd})"
        );
    };
    for v in 0..s.n_nodes() as u32 {
        within(c.node_count(v), p_node[v as usize], &format!("C_{v}"));
    }
    let mut checked = 0;
    for r in 0..s.n_relations() {
        for (u, v, p) in rel_entries(&s, r) {
            let exact = p_pair.get(&(u, v)).copied().unwrap_or(0.0);
            assert!(exact > 0.0, "({u},{v}) can be drawn");
            within(c.entry_count(r, p), exact, &format!("C_({u},{v},{r})"));
            checked += 1;
        }
    }
    assert_eq!(checked, 6 * 2 + 8 + 4 * 2);
    // The union graph's counts of the same subgraphs.
    let homo = NormCounts::estimate_with(&sm, n_pre, 9, 1, Layout::Dense).unwrap();
    let g = s.full();
    for r in 0..s.n_relations() {
        for (u, v, p) in rel_entries(&s, r) {
            let k = g.offsets()[u as usize] + g.neighbors(u).binary_search(&v).unwrap() as u64;
            assert_eq!(c.entry_count(r, p), homo.edge_count(k), "({u},{v}) of {r}");
        }
    }
    for v in 0..s.n_nodes() as u32 {
        assert_eq!(c.node_count(v), homo.node_count(v));
    }
    // Weights of a subgraph read the counts as stated.
    let sub = sample_typed_subgraph(&sm, &s, 1, 0, 1).unwrap();
    let w = c.aggregator_weights(&sub);
    let t = sub.typed.as_ref().unwrap();
    for (rel, w) in t.relations.iter().zip(&w) {
        assert_eq!(w.len(), rel.n_entries());
        for k in 0..rel.offsets.len() - 1 {
            let row = sub.nodes[t.type_starts[rel.src] as usize + k];
            for e in rel.offsets[k]..rel.offsets[k + 1] {
                let want = f64::from(c.node_count(row).max(1))
                    / f64::from(
                        c.entry_count(rel.relation, rel.parent_entries[e as usize])
                            .max(1),
                    );
                assert_eq!(w[e as usize], want as f32);
            }
        }
    }
    let lw = c.loss_weights(&sub, 2);
    for (i, &v) in sub.nodes.iter().enumerate() {
        let cv = f64::from(c.node_count(v)).max(0.1);
        assert_eq!(lw[i], (n_pre as f64 / (cv * 2.0)) as f32);
    }
}

/// Subgraph i depends only on (seed, i): equal pools (relations included) on 1, 2 and 3
/// threads, each equal to the subgraph drawn alone.
#[test]
fn typed_subgraphs_are_deterministic_whatever_the_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let s = kron_typed(tmp.path());
    let g = s.full();
    let node = TypedNodeSampler::new(&s, g, &[40, 20, 10], true).unwrap();
    let edge = TypedEdgeSampler::new(&s, &[(0, 30), (1, 20), (4, 10)]).unwrap();
    let rw = typed_walk_sampler(
        &s,
        g,
        &WalkRoots {
            types: vec![],
            train_only: true,
        },
        20,
        2,
    )
    .unwrap();
    let samplers: [&dyn Sampler; 3] = [&node, &edge, &rw];
    for sm in samplers {
        let pools: Vec<Vec<Subgraph>> = [1, 2, 3]
            .iter()
            .map(|&t| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .unwrap()
                    .install(|| sample_typed_pool(sm, &s, 42, 0, 12, 1).unwrap())
            })
            .collect();
        assert_eq!(pools[0], pools[1], "{}", sm.name());
        assert_eq!(pools[0], pools[2], "{}", sm.name());
        assert!(pools[0][0].typed.is_some());
        assert_ne!(pools[0][0].nodes, pools[0][1].nodes);
        assert_eq!(
            sample_typed_subgraph(sm, &s, 42, 7, 1).unwrap(),
            pools[0][7]
        );
    }
}

/// The homogeneous store is the one-type case: each typed sampler draws exactly the
/// homogeneous sampler's subgraphs, and the one relation's entries are the union CSR's.
#[test]
fn homogeneous_store_gives_todays_subgraphs() {
    let tmp = tempfile::tempdir().unwrap();
    let p = common::planted(tmp.path(), 8);
    let s = GraphStore::open(&p).unwrap();
    let g = s.full();
    let pairs: Vec<(Box<dyn Sampler + '_>, Box<dyn Sampler + '_>)> = vec![
        (
            Box::new(TypedNodeSampler::new(&s, g, &[300], true).unwrap()),
            Box::new(NodeSampler::new(g, 300, true).unwrap()),
        ),
        (
            Box::new(TypedNodeSampler::new(&s, g, &[300], false).unwrap()),
            Box::new(NodeSampler::new(g, 300, false).unwrap()),
        ),
        (
            Box::new(TypedEdgeSampler::new(&s, &[(0, 150)]).unwrap()),
            Box::new(EdgeSampler::new(g, 150).unwrap()),
        ),
        (
            Box::new(
                typed_walk_sampler(
                    &s,
                    g,
                    &WalkRoots {
                        types: vec![],
                        train_only: false,
                    },
                    100,
                    2,
                )
                .unwrap(),
            ),
            Box::new(RandomWalkSampler::new(g, 100, 2).unwrap()),
        ),
    ];
    for (typed, homo) in &pairs {
        for i in 0..8 {
            let a = sample_typed_subgraph(typed.as_ref(), &s, 3, i, 1).unwrap();
            let b = sample_subgraph(homo.as_ref(), 3, i, 1).unwrap();
            assert!(b.typed.is_none());
            assert_eq!(a.nodes, b.nodes, "{} against {}", typed.name(), homo.name());
            assert_eq!(
                (&a.offsets, &a.indices, &a.parent_entries),
                (&b.offsets, &b.indices, &b.parent_entries)
            );
            let t = a.typed.as_ref().unwrap();
            assert_eq!(t.type_starts, [0, a.nodes.len() as u32]);
            let rel = &t.relations[0];
            assert_eq!(
                (&rel.offsets, &rel.indices, &rel.parent_entries),
                (&b.offsets, &b.indices, &b.parent_entries)
            );
        }
    }
}

/// `saintflow sample` on a typed store shows each subgraph's nodes per type and entries
/// per relation (they add up to its nodes and entries: the generator's relations partition
/// the full graph); a homogeneous store's records have neither.
#[test]
fn cli_sample_shows_types_and_relations_of_a_typed_store() {
    let tmp = tempfile::tempdir().unwrap();
    let s = kron_typed(tmp.path());
    let run = |store: &Path| -> Vec<serde_json::Value> {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
            .args(["sample", "--sampler", "rw", "--roots", "50", "--count", "3"])
            .args(["--graph", "full", "--json", "-q"])
            .arg(store)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v.get("index").is_some())
            .collect()
    };
    let recs = run(s.path());
    assert_eq!(recs.len(), 3);
    for (i, rec) in recs.iter().enumerate() {
        let sub = sample_typed_subgraph(
            &RandomWalkSampler::new(s.full(), 50, 2).unwrap(),
            &s,
            1,
            i as u64,
            16,
        );
        let types = rec["types"].as_array().unwrap();
        assert_eq!(types.len(), 3);
        let nodes: u64 = types.iter().map(|t| t["nodes"].as_u64().unwrap()).sum();
        assert_eq!(nodes, rec["nodes"].as_u64().unwrap());
        let rels = rec["relations"].as_array().unwrap();
        assert_eq!(rels.len(), s.n_relations());
        let entries: u64 = rels.iter().map(|r| r["entries"].as_u64().unwrap()).sum();
        assert_eq!(entries, 2 * rec["edges"].as_u64().unwrap());
        // The same subgraph as the library draws with the CLI's defaults (seed 1, clip 16).
        let sub = sub.unwrap();
        let t = sub.typed.as_ref().unwrap();
        for (r, rel) in rels.iter().enumerate() {
            assert_eq!(
                rel["entries"].as_u64().unwrap() as usize,
                t.relations[r].n_entries()
            );
            assert_eq!(rel["name"], s.relation(r).name);
        }
    }
    let homo = common::planted(tmp.path(), 7);
    for rec in run(&homo) {
        assert!(rec.get("types").is_none() && rec.get("relations").is_none());
    }
}
