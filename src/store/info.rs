//! `saintflow info`: summary statistics of a store, as text or as stable JSON
//! (schema `saintflow.info/1`, documented in docs/FORMAT.md).

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;

use crate::store::format::{
    LabelKind, LinkSectionId, Role, SectionId, TimeSplit, TrainGraph, TypesMeta, HEADER_FILE,
    VERSION,
};
use crate::store::mmap::{Csr, GraphStore};

/// Schema tag of the JSON.
pub const INFO_SCHEMA: &str = "saintflow.info/1";

/// Edge counts of one graph.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EdgeCounts {
    /// CSR entries (each undirected edge twice).
    pub directed: u64,
    /// Undirected edges.
    pub undirected: u64,
}

/// Degree distribution of the full graph (nearest-rank percentiles).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DegreeStats {
    /// Smallest degree.
    pub min: u64,
    /// Mean degree (directed entries / N).
    pub mean: f64,
    /// Largest degree.
    pub max: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Nodes of degree 0.
    pub isolated: u64,
}

/// Role counts, including nodes in no role.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SplitInfo {
    /// Training nodes.
    pub train: u64,
    /// Validation nodes.
    pub val: u64,
    /// Test nodes.
    pub test: u64,
    /// Nodes in no role.
    pub none: u64,
}

/// File sizes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Bytes {
    /// All files.
    pub total: u64,
    /// header.sf.
    pub header: u64,
    /// Per section name.
    pub sections: BTreeMap<String, u64>,
}

/// Everything `info` reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Info {
    /// Always [`INFO_SCHEMA`].
    pub schema: &'static str,
    /// Store path as given.
    pub path: String,
    /// Store format version.
    pub format_version: u32,
    /// N.
    pub nodes: u64,
    /// Full graph.
    pub edges: EdgeCounts,
    /// Training graph.
    pub train_edges: EdgeCounts,
    /// How the training graph was made.
    pub train_graph: TrainGraph,
    /// F.
    pub features: u64,
    /// C.
    pub classes: u64,
    /// Label layout.
    pub label_kind: LabelKind,
    /// Role counts.
    pub split: SplitInfo,
    /// Degrees in the full graph.
    pub degree: DegreeStats,
    /// File sizes.
    pub bytes: Bytes,
    /// Provenance from the header.
    pub source: String,
    /// The link-prediction split (`split-edges`); absent (not written) without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkInfo>,
    /// The edge times (`full.time`); absent (not written) without them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge_time: Option<TimeInfo>,
    /// A typed store's node types and relations (issue 57); absent (not written) for a
    /// homogeneous store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<TypesInfo>,
}

/// A typed store's types, as `info` reports them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TypesInfo {
    /// The node types, in id order.
    pub node_types: Vec<NodeTypeInfo>,
    /// The relations, by relation id.
    pub relations: Vec<RelationInfo>,
}

/// One node type's counts.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeTypeInfo {
    /// Its name.
    pub name: String,
    /// Its nodes.
    pub nodes: u64,
    /// Its global ids: `[first, end)`.
    pub ids: [u64; 2],
    /// Its feature width (0: no features).
    pub features: u64,
    /// Whether its nodes carry labels.
    pub labelled: bool,
    /// Its nodes per role.
    pub split: SplitInfo,
}

/// One relation's counts.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RelationInfo {
    /// Its name.
    pub name: String,
    /// Source node type's name.
    pub src: String,
    /// Destination node type's name.
    pub dst: String,
    /// Its directed entries.
    pub entries: u64,
    /// The name of its reverse relation (its own for a symmetric one).
    pub reverse: String,
}

/// A store's edge times, as `info` reports them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimeInfo {
    /// What a time counts (`year`), when the importer knew it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Earliest time.
    pub min: i64,
    /// Latest time.
    pub max: i64,
}

/// A store's link split, as `info` reports it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkInfo {
    /// Validation positives (held-out undirected edges).
    pub val: u64,
    /// Test positives.
    pub test: u64,
    /// Tail negatives per positive K (MRR / Hits@K as ogbl-citation2).
    pub negatives_per_positive: u64,
    /// Negative pairs per positive (AUC / AP as GAE, the Hits@K pool as ogbl-collab): 1
    /// from `split-edges`; absent (not written) for a given split's pools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negative_pairs_per_positive: Option<u64>,
    /// Negative pairs of the validation set (a given split's pool, or one per positive).
    pub val_negative_pairs: u64,
    /// Negative pairs of the test set.
    pub test_negative_pairs: u64,
    /// The split and its negatives are a dataset's own, stored as given (`import
    /// ogb-link`): seed and allow_isolated do not apply.
    pub given: bool,
    /// The seed of the split and the negatives.
    pub seed: u64,
    /// Whether held-out edges could leave a node without edges.
    pub allow_isolated: bool,
    /// Undirected edges of the store the split was made from.
    pub input_edges: u64,
    /// `"time"` for a time split (`split-edges --by-time`), `"random"` for a drawn one,
    /// `"given"` for a dataset's own.
    pub kind: &'static str,
    /// A time split's record: edges kept by the never-isolate rule and the sets' time
    /// ranges; absent (not written) otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_time: Option<TimeSplit>,
}

/// Degree statistics of a CSR.
pub fn degree_stats(csr: Csr<'_>) -> DegreeStats {
    let n = csr.n_nodes();
    if n == 0 {
        return DegreeStats {
            min: 0,
            mean: 0.0,
            max: 0,
            p50: 0,
            p90: 0,
            p99: 0,
            p999: 0,
            isolated: 0,
        };
    }
    let offsets = csr.offsets();
    let mut deg: Vec<u64> = offsets.par_windows(2).map(|w| w[1] - w[0]).collect();
    deg.par_sort_unstable();
    let rank = |p: f64| deg[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    DegreeStats {
        min: deg[0],
        mean: csr.n_entries() as f64 / n as f64,
        max: deg[n - 1],
        p50: rank(0.5),
        p90: rank(0.9),
        p99: rank(0.99),
        p999: rank(0.999),
        isolated: deg.partition_point(|&d| d == 0) as u64,
    }
}

/// Collects the info of an open store.
pub fn info(store: &GraphStore) -> Info {
    let h = store.header();
    let mut sections = BTreeMap::new();
    for id in SectionId::ALL {
        sections.insert(id.name().to_string(), h.section(id).bytes);
    }
    if let Some(link) = &h.link {
        for id in LinkSectionId::ALL {
            sections.insert(id.name().to_string(), link.section(id).bytes);
        }
    }
    if let Some(t) = &h.edge_time {
        sections.insert(t.section.name.clone(), t.section.bytes);
    }
    if let Some(types) = &h.types {
        for e in types.node_types.iter().filter_map(|t| t.features.as_ref()) {
            sections.insert(e.name.clone(), e.bytes);
        }
        for r in &types.relations {
            sections.insert(r.offsets.name.clone(), r.offsets.bytes);
            sections.insert(r.indices.name.clone(), r.indices.bytes);
        }
    }
    let header_bytes = std::fs::metadata(store.path().join(HEADER_FILE)).map_or(0, |m| m.len());
    let total = header_bytes + sections.values().sum::<u64>();
    let none = store
        .roles()
        .par_iter()
        .filter(|&&r| r == Role::None as u8)
        .count() as u64;
    Info {
        schema: INFO_SCHEMA,
        path: store.path().display().to_string(),
        format_version: VERSION,
        nodes: h.n_nodes,
        edges: EdgeCounts {
            directed: h.n_entries,
            undirected: h.n_entries / 2,
        },
        train_edges: EdgeCounts {
            directed: h.n_train_entries,
            undirected: h.n_train_entries / 2,
        },
        train_graph: h.train_graph,
        features: h.n_features,
        classes: h.n_classes,
        label_kind: h.label_kind,
        split: SplitInfo {
            train: h.split.train,
            val: h.split.val,
            test: h.split.test,
            none,
        },
        degree: degree_stats(store.full()),
        bytes: Bytes {
            total,
            header: header_bytes,
            sections,
        },
        source: h.source.clone(),
        link: h.link.as_ref().map(|l| LinkInfo {
            val: l.n_val,
            test: l.n_test,
            negatives_per_positive: l.negatives,
            negative_pairs_per_positive: (l.val_negpairs.is_none() && l.test_negpairs.is_none())
                .then_some(1),
            val_negative_pairs: l.n_val_negpairs(),
            test_negative_pairs: l.n_test_negpairs(),
            given: l.given,
            seed: l.seed,
            allow_isolated: l.allow_isolated,
            input_edges: l.input_edges,
            kind: match (l.given, l.by_time.is_some()) {
                (true, _) => "given",
                (false, true) => "time",
                (false, false) => "random",
            },
            by_time: l.by_time,
        }),
        edge_time: h.edge_time.as_ref().map(|t| TimeInfo {
            unit: t.unit.clone(),
            min: t.min,
            max: t.max,
        }),
        types: h.types.as_ref().map(|m| types_info(store, m)),
    }
}

/// The per-type and per-relation counts of a typed store.
fn types_info(store: &GraphStore, m: &TypesMeta) -> TypesInfo {
    let roles = store.roles();
    let node_types = m
        .node_types
        .iter()
        .enumerate()
        .map(|(t, ty)| {
            let range = store.type_range(t);
            let mut c = [0u64; 4];
            for &r in &roles[range.start as usize..range.end as usize] {
                c[usize::from(r.min(3))] += 1;
            }
            NodeTypeInfo {
                name: ty.name.clone(),
                nodes: ty.count,
                ids: [u64::from(range.start), u64::from(range.end)],
                features: ty.n_features,
                labelled: ty.labelled,
                split: SplitInfo {
                    train: c[1],
                    val: c[2],
                    test: c[3],
                    none: c[0],
                },
            }
        })
        .collect();
    let relations = m
        .relations
        .iter()
        .map(|r| RelationInfo {
            name: r.name.clone(),
            src: m.node_types[r.src as usize].name.clone(),
            dst: m.node_types[r.dst as usize].name.clone(),
            entries: r.n_entries,
            reverse: m.relations[r.reverse as usize].name.clone(),
        })
        .collect();
    TypesInfo {
        node_types,
        relations,
    }
}

impl Info {
    /// Human-readable summary.
    pub fn to_text(&self) -> String {
        let d = &self.degree;
        let mut s = String::new();
        let mut line = |k: &str, v: String| s.push_str(&format!("{k:<14} {v}\n"));
        line(
            "store",
            format!("{} (format v{})", self.path, self.format_version),
        );
        line("nodes", self.nodes.to_string());
        line(
            "edges",
            format!(
                "{} undirected ({} directed entries)",
                self.edges.undirected, self.edges.directed
            ),
        );
        line(
            "train edges",
            format!(
                "{} undirected ({:?} training graph)",
                self.train_edges.undirected, self.train_graph
            )
            .to_lowercase(),
        );
        line("features", self.features.to_string());
        line(
            "classes",
            format!(
                "{} ({}-label)",
                self.classes,
                match self.label_kind {
                    LabelKind::Single => "single",
                    LabelKind::Multi => "multi",
                }
            ),
        );
        line(
            "split",
            format!(
                "train {} / val {} / test {} / none {}",
                self.split.train, self.split.val, self.split.test, self.split.none
            ),
        );
        line(
            "degree",
            format!(
                "min {} / mean {:.2} / max {}; p50 {} p90 {} p99 {} p99.9 {}; isolated {}",
                d.min, d.mean, d.max, d.p50, d.p90, d.p99, d.p999, d.isolated
            ),
        );
        if let Some(l) = &self.link {
            let text = if l.given {
                format!(
                    "val {} / test {} held-out edges of {} (the dataset's own split); {} negatives per positive; {} / {} negative pairs (the dataset's negatives, as given)",
                    l.val,
                    l.test,
                    l.input_edges,
                    l.negatives_per_positive,
                    l.val_negative_pairs,
                    l.test_negative_pairs
                )
            } else {
                let by_time = l.by_time.map_or(String::new(), |ts| {
                    let range =
                        |t: Option<[i64; 2]>| t.map_or("none".into(), |[a, b]| format!("{a}..{b}"));
                    format!(
                        "; time split: test {}, val {}, {} later edges kept in the graph (never-isolate rule)",
                        range(ts.test_time),
                        range(ts.val_time),
                        ts.kept
                    )
                });
                format!(
                    "val {} / test {} held-out edges of {}; {} negatives per positive, {} negative pair per positive; seed {}{}{by_time}",
                    l.val,
                    l.test,
                    l.input_edges,
                    l.negatives_per_positive,
                    l.negative_pairs_per_positive.unwrap_or(1),
                    l.seed,
                    if l.allow_isolated { " (--allow-isolated)" } else { "" }
                )
            };
            line("link split", text);
        }
        if let Some(t) = &self.edge_time {
            line(
                "edge times",
                format!(
                    "{} to {}{}",
                    t.min,
                    t.max,
                    t.unit.as_ref().map_or(String::new(), |u| format!(" ({u})"))
                ),
            );
        }
        if let Some(t) = &self.types {
            for ty in &t.node_types {
                line(
                    "node type",
                    format!(
                        "{}: {} nodes (ids {}..{}), {} features{}; train {} / val {} / test {}",
                        ty.name,
                        ty.nodes,
                        ty.ids[0],
                        ty.ids[1],
                        ty.features,
                        if ty.labelled { ", labelled" } else { "" },
                        ty.split.train,
                        ty.split.val,
                        ty.split.test
                    ),
                );
            }
            for r in &t.relations {
                line(
                    "relation",
                    format!(
                        "({}, {}, {}): {} entries, reverse {}",
                        r.src, r.name, r.dst, r.entries, r.reverse
                    ),
                );
            }
        }
        line("size", format!("{} bytes", self.bytes.total));
        for (name, b) in &self.bytes.sections {
            line("", format!("{name}: {b} bytes"));
        }
        line("source", self.source.clone());
        s
    }
}
