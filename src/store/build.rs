//! Assembling a store from its parts: the shared tail of every importer and the generator.
//! Producers push edges into [`CsrBuilder`]s and stream features, labels and roles into
//! section writers; this module turns the builders into the four CSR sections and the
//! entries into a header.

use crate::progress::Progress;
use crate::store::csr_build::{BuildStats, CsrBuilder, CsrSink, NodeSet};
use crate::store::format::{
    Dtype, Header, LabelKind, SectionEntry, SectionId, SplitCounts, TrainGraph,
};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

/// The four CSR sections of a store once written.
pub struct GraphSections {
    /// full.offsets, full.indices, train.offsets, train.indices.
    pub entries: [SectionEntry; 4],
    /// Directed entries of the full graph.
    pub n_entries: u64,
    /// Directed entries of the training graph.
    pub n_train_entries: u64,
    /// What the full graph's builder dropped.
    pub stats: BuildStats,
}

/// Writes the full graph from `full` and the training graph from `train` or, when `train`
/// is `None`, by keeping the full graph's entries whose two ends satisfy `is_train`
/// (GraphSAINT's induced training graph, in the same pass).
pub fn write_graph(
    w: &StoreWriter,
    full: CsrBuilder,
    train: Option<CsrBuilder>,
    is_train: &(dyn Fn(u32) -> bool + Sync),
    progress: &Progress,
) -> Result<GraphSections, StoreError> {
    let mut fo = w.section(SectionId::FullOffsets, Dtype::U64)?;
    let mut fi = w.section(SectionId::FullIndices, Dtype::U32)?;
    let mut to = w.section(SectionId::TrainOffsets, Dtype::U64)?;
    let mut ti = w.section(SectionId::TrainIndices, Dtype::U32)?;
    let buckets = full.n_buckets() as u64 + train.as_ref().map_or(0, |t| t.n_buckets() as u64);
    let bar = progress.ticker(buckets, "build CSR", "buckets");
    let (stats, n_entries, n_train_entries) = match train {
        None => {
            let train_set = NodeSet::from_fn(full.n_nodes(), is_train);
            let mut sinks = [
                CsrSink {
                    offsets: &mut fo,
                    indices: &mut fi,
                    keep: None,
                    rows: None,
                    entries: 0,
                },
                CsrSink {
                    offsets: &mut to,
                    indices: &mut ti,
                    keep: Some(&train_set),
                    rows: None,
                    entries: 0,
                },
            ];
            let stats = full.finish(&mut sinks, || {
                bar.inc(1);
            })?;
            (stats, sinks[0].entries, sinks[1].entries)
        }
        Some(train) => {
            let mut sinks = [CsrSink {
                offsets: &mut fo,
                indices: &mut fi,
                keep: None,
                rows: None,
                entries: 0,
            }];
            let stats = full.finish(&mut sinks, || {
                bar.inc(1);
            })?;
            let n_entries = sinks[0].entries;
            let mut sinks = [CsrSink {
                offsets: &mut to,
                indices: &mut ti,
                keep: None,
                rows: None,
                entries: 0,
            }];
            train.finish(&mut sinks, || {
                bar.inc(1);
            })?;
            (stats, n_entries, sinks[0].entries)
        }
    };
    bar.finish();
    Ok(GraphSections {
        entries: [fo.finish()?, fi.finish()?, to.finish()?, ti.finish()?],
        n_entries,
        n_train_entries,
        stats,
    })
}

/// What a producer knows about the store besides its sections.
pub struct Meta {
    /// N.
    pub n_nodes: u64,
    /// F.
    pub n_features: u64,
    /// C.
    pub n_classes: u64,
    /// Label layout.
    pub label_kind: LabelKind,
    /// Provenance of the training graph.
    pub train_graph: TrainGraph,
    /// Role counts.
    pub split: SplitCounts,
    /// Free-form provenance (no timestamps).
    pub source: String,
}

/// Puts the header together from the metadata and the seven section entries.
pub fn header(
    meta: Meta,
    graph: GraphSections,
    features: SectionEntry,
    labels: SectionEntry,
    roles: SectionEntry,
) -> Header {
    let [fo, fi, to, ti] = graph.entries;
    Header {
        n_nodes: meta.n_nodes,
        n_entries: graph.n_entries,
        n_train_entries: graph.n_train_entries,
        n_features: meta.n_features,
        n_classes: meta.n_classes,
        label_kind: meta.label_kind,
        train_graph: meta.train_graph,
        split: meta.split,
        sections: vec![fo, fi, to, ti, features, labels, roles],
        source: meta.source,
        link: None,
        edge_time: None,
        types: None,
    }
}

/// Counts the roles in a role-byte array.
pub fn split_counts(roles: &[u8]) -> SplitCounts {
    let mut c = [0u64; 4];
    for &r in roles {
        c[usize::from(r.min(3))] += 1;
    }
    SplitCounts {
        train: c[1],
        val: c[2],
        test: c[3],
    }
}
