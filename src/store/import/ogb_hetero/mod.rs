//! `import ogb DIR` of a heterogeneous dataset (ogbn-mag's layout; issue 57): a typed
//! store (docs/FORMAT.md, "Typed stores").
//!
//! The layout, as OGB's `read_csv_heterograph_raw` and `NodePropPredDataset` read it:
//!
//! * `raw/num-node-dict.csv.gz`: a header line of node-type names, one line of counts
//!   (several lines: several graphs, refused). Types get ids in name order, as OGB sorts
//!   them; a type's nodes are the global ids `start(t)..start(t) + count(t)`.
//! * `raw/triplet-type-list.csv.gz` (`src,rel,dst` per line), else the directories of
//!   `raw/relations/`; each relation in `raw/relations/<src>___<rel>___<dst>/`:
//!   `edge.csv.gz` (`s,d` per line: ids local to the source and destination types) and
//!   `num-edge-list.csv.gz` (its one count). `edge_reltype.csv.gz` (ogbn-mag's relation
//!   id per edge, which the directory already says) and `edge-feat.csv.gz` are ignored,
//!   with a note.
//! * `raw/node-feat/<type>/node-feat.csv.gz`: the type's features, one row per node, its
//!   own width (a type without the file has none: no bytes stored); other files there
//!   (ogbn-mag's `node_year.csv.gz`) are ignored with a note.
//! * `raw/node-label/<type>/node-label.csv.gz`: one class per node (`nan` or empty: no
//!   label); the labelled types are those `raw/nodetype-has-label.csv.gz` marks (else
//!   those with the directory). Single-task labels only: several columns are refused.
//! * `split/<name>/<type>/{train,valid,test}.csv.gz`: local ids of the type's nodes (the
//!   types `split/<name>/nodetype-has-split.csv.gz` marks, else those with a directory).
//!
//! Reverse relations are added as PyG's `ToUndirected` and the OGB R-GCN example do: a
//! relation between two types (`author writes paper`) gets a reverse `rev_<rel>`
//! (`paper rev_writes author`); a relation within one type (`paper cites paper`) is made
//! symmetric in place (its own reverse). The full graph is the union of all relations,
//! symmetric. Self loops and duplicates are dropped per relation and counted in a note.
//!
//! Streaming as the homogeneous importer: gzip decoded as a stream, each relation's
//! entries through an external [`CsrBuilder`] (one relation at a time, beside the full
//! graph's builder), features row by row; what is held is O(N) (labels, roles).
//!
//! Every error names the file (and line) and what is wrong; nothing is published unless
//! the whole import succeeds (the store writer's directory rename).
//!
//! Here the import's stages in order; what the directory lists (types, relations, their
//! counts) in layout.rs, per-type labels, split and features in nodes.rs, the relations'
//! edges and sections in relations.rs.

use std::path::Path;
use std::time::Instant;

use crate::progress::Progress;
use crate::store::build::{self, Meta};
use crate::store::csr_build::{CsrBuilder, DEFAULT_BUCKET_BYTES};
use crate::store::format::{LabelKind, TypesMeta};
use crate::store::import::ogb::{OgbLayout, OgbOptions, OgbReport};
use crate::store::import::{limits, write_no_features, write_roles, ImportReport, LabelTable};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

mod layout;
mod nodes;
mod relations;

use layout::{check_feature_dirs, read_node_dict, read_triplets, relation_counts, survey};
use nodes::{read_labels, read_roles, write_features};
use relations::write_relations;

/// The file whose presence makes a dataset directory heterogeneous.
pub const NUM_NODE_DICT: &str = "num-node-dict.csv.gz";

/// Imports a heterogeneous OGB node-property dataset (ogbn-mag's layout) in `dir` into a
/// new typed store at `out`.
pub(super) fn import_ogb_hetero(
    dir: &Path,
    out: &Path,
    opts: &OgbOptions,
    force: bool,
    progress: &Progress,
) -> Result<OgbReport, StoreError> {
    let start = Instant::now();
    let raw = dir.join("raw");
    let mut notes = survey(&raw)?;
    let types = read_node_dict(&raw.join(NUM_NODE_DICT))?;
    let n: u64 = types.iter().map(|t| t.count).sum();
    let triplets = read_triplets(&raw, &types)?;
    let counts = relation_counts(&triplets, &mut notes)?;

    limits::check_memory(
        &raw.join(NUM_NODE_DICT),
        &format!("the label and role tables of N = {n} nodes"),
        u128::from(n) * limits::TABLE_BYTES_PER_NODE,
    )?;
    let (labelled, labels, max_class) = read_labels(&raw, &types, n)?;
    let (split_name, roles) = read_roles(dir, opts, &types, (&labelled, &labels), n)?;
    let feat_root = raw.join("node-feat");
    check_feature_dirs(&feat_root, &types, &mut notes)?;

    // The relations, one at a time, each beside the full graph's builder.
    let w = StoreWriter::create(out, force)?;
    let scratch = w.scratch_dir()?;
    let total = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
    let mut full = CsrBuilder::new(&scratch, n, total.saturating_mul(2), DEFAULT_BUCKET_BYTES)?;
    let bar = progress.ticker(total, "edges", "edges");
    let (metas, dropped) = write_relations(
        (&w, &scratch),
        n,
        (&types, &triplets, &counts),
        &mut full,
        &bar,
    )?;
    bar.finish();
    if dropped.0 + dropped.1 > 0 {
        notes.push(format!(
            "{} self-loop and {} duplicate entries dropped from the relations",
            dropped.0, dropped.1
        ));
    }
    let mode = opts.train_graph;
    let is_train = |v: u32| mode.keeps(roles[v as usize]);
    let graph = build::write_graph(&w, full, None, &is_train, progress)?;
    let node_types = write_features(&w, &feat_root, &types, &labelled, &mut notes)?;

    let report = ImportReport::new(n, &graph, start);
    let table = LabelTable {
        kind: LabelKind::Single,
        n_classes: max_class.map_or(0, |m| m + 1),
        data: bytemuck::cast_slice(&labels).to_vec(),
    };
    let meta = Meta {
        n_nodes: n,
        n_features: 0,
        n_classes: table.n_classes,
        label_kind: LabelKind::Single,
        train_graph: mode.stored(),
        split: build::split_counts(&roles),
        source: format!(
            "saintflow import ogb {} --split {split_name} --train-graph {}",
            dir.display(),
            mode.word()
        ),
    };
    let mut header = build::header(
        meta,
        graph,
        write_no_features(&w)?,
        table.write(&w)?,
        write_roles(&w, &roles)?,
    );
    header.types = Some(TypesMeta {
        node_types,
        relations: metas
            .into_iter()
            .map(|m| m.expect("every relation written"))
            .collect(),
    });
    w.commit(&header, |store| {
        // The relations against the full graph as `check` verifies them (a writer bug is
        // refused here, never published).
        StoreError::from_problems(store.path(), crate::store::typed::check_full(store, true))
    })?;
    Ok(OgbReport {
        report: ImportReport {
            seconds: start.elapsed().as_secs_f64(),
            ..report
        },
        layout: OgbLayout::Hetero,
        split: split_name,
        notes,
    })
}
