//! One rank's store of its parts: own nodes and replicas, the CSR streamed row by row
//! into its four section files (`Batched` writes), features, labels and roles, and
//! `part.tsv`.

use std::io::{BufWriter, Write};
use std::path::Path;

use super::super::graph::Adjacency;
use super::super::PartitionError;
use crate::store::build::split_counts;
use crate::store::format::{Dtype, Header, Role, SectionEntry, SectionId, TrainGraph};
use crate::store::writer::{SectionWriter, StoreWriter};
use crate::store::{check, GraphStore};

use super::{Source, PART_MAP_FILE};

/// Writes the store of the parts `mine` (one rank's) at `dest`: their own nodes and the
/// replicas of each that are not own. Returns (own nodes, replicas).
pub(super) fn write_store(
    src: &Source,
    mine: &[usize],
    dest: &Path,
) -> Result<(usize, usize), PartitionError> {
    let (store, part, k) = (src.store, &src.p.part, src.p.k);
    let is_replica = |v: u32| !mine.contains(&(part[v as usize] as usize));
    let mut replicas: Vec<u32> = mine
        .iter()
        .flat_map(|&i| src.aug.parts[i].replicas.iter().copied())
        .filter(|&v| is_replica(v))
        .collect();
    replicas.sort_unstable();
    replicas.dedup();
    let mut nodes: Vec<u32> = (0..src.g.n() as u32).filter(|&v| !is_replica(v)).collect();
    let own = nodes.len();
    nodes.extend_from_slice(&replicas);
    nodes.sort_unstable();
    let what = match mine {
        [i] => format!("part {i}"),
        _ => format!("parts {mine:?}"),
    };
    let roles: Vec<u8> = nodes
        .iter()
        .map(|&v| {
            if is_replica(v) {
                Role::None as u8
            } else {
                store.role(v) as u8
            }
        })
        .collect();
    let w = StoreWriter::create(dest, false)?;
    let (csr_sections, n_entries, n_train_entries) =
        write_csr(&w, src, &nodes, &roles, &is_replica)?;
    let mut sections = csr_sections.to_vec();
    sections.extend(write_node_rows(&w, store, &nodes, &roles)?);
    let h = store.header();
    let header = Header {
        n_nodes: nodes.len() as u64,
        n_entries,
        n_train_entries,
        n_features: h.n_features,
        n_classes: h.n_classes,
        label_kind: h.label_kind,
        train_graph: TrainGraph::Given,
        split: split_counts(&roles),
        sections,
        source: format!("saintflow partition {} -k {k}: {what}", src.input.display()),
        // A part store holds no link split: its positives and negatives are the whole
        // graph's (issue 52 leaves partitioned link prediction for later).
        link: None,
        // Nor the edge times: a part store is for node-level training, which reads none.
        edge_time: None,
        // Refused above for a typed store: a part store is homogeneous.
        types: None,
    };
    write_part_map(&w, &nodes, part, k, &what, &is_replica)?;
    w.commit(&header, check)?;
    Ok((own, replicas.len()))
}

/// Entries a CSR section's writer batches before a write.
const BATCH: usize = 1 << 16;

/// A section written in batches of [`BATCH`] elements.
struct Batched<T: bytemuck::Pod> {
    section: SectionWriter,
    buf: Vec<T>,
}

impl<T: bytemuck::Pod> Batched<T> {
    fn new(section: SectionWriter) -> Self {
        Batched {
            section,
            buf: Vec::with_capacity(BATCH),
        }
    }

    fn push(&mut self, x: T) -> Result<(), PartitionError> {
        self.buf.push(x);
        if self.buf.len() == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), PartitionError> {
        self.section.write_bytes(bytemuck::cast_slice(&self.buf))?;
        self.buf.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<SectionEntry, PartitionError> {
        self.flush()?;
        Ok(self.section.finish()?)
    }
}

/// The full and training CSR of the part store of `nodes` (sorted global ids), streamed
/// row by row from the source's mapped rows into the four sections' files. The training
/// graph: the source's training edges among own training nodes, and every edge between a
/// replica and a training node or another replica (see the module's documentation).
/// Returns the sections' entries and the two graphs' entry counts.
fn write_csr(
    w: &StoreWriter,
    src: &Source,
    nodes: &[u32],
    roles: &[u8],
    is_replica: &dyn Fn(u32) -> bool,
) -> Result<([SectionEntry; 4], u64, u64), PartitionError> {
    let local = |v: u32| nodes.binary_search(&v).ok();
    let in_train = |l: usize| roles[l] == Role::Train as u8 || is_replica(nodes[l]);
    let train = src.store.train();
    let mut fo = Batched::<u64>::new(w.section(SectionId::FullOffsets, Dtype::U64)?);
    let mut fi = Batched::<u32>::new(w.section(SectionId::FullIndices, Dtype::U32)?);
    let mut to = Batched::<u64>::new(w.section(SectionId::TrainOffsets, Dtype::U64)?);
    let mut ti = Batched::<u32>::new(w.section(SectionId::TrainIndices, Dtype::U32)?);
    let (mut n_full, mut n_train) = (0u64, 0u64);
    fo.push(0)?;
    to.push(0)?;
    for (lu, &u) in nodes.iter().enumerate() {
        let train_row = if in_train(lu) {
            train.try_neighbors(u)?
        } else {
            &[]
        };
        for &v in src.g.row(u as usize) {
            let Some(lv) = local(v) else { continue };
            fi.push(lv as u32)?;
            n_full += 1;
            let keep = in_train(lu)
                && in_train(lv)
                && (is_replica(u) || is_replica(v) || train_row.binary_search(&v).is_ok());
            if keep {
                ti.push(lv as u32)?;
                n_train += 1;
            }
        }
        fo.push(n_full)?;
        to.push(n_train)?;
    }
    let sections = [fo.finish()?, fi.finish()?, to.finish()?, ti.finish()?];
    Ok((sections, n_full, n_train))
}

/// The features, labels and roles of `nodes` (sorted global ids) from the source's rows.
fn write_node_rows(
    w: &StoreWriter,
    store: &GraphStore,
    nodes: &[u32],
    roles: &[u8],
) -> Result<[SectionEntry; 3], PartitionError> {
    let mut s = w.section(SectionId::Features, Dtype::F32)?;
    for &v in nodes {
        s.write_f32s(store.feature_row(v)?)?;
    }
    let e_feat = s.finish()?;
    let h = store.header();
    let row = h.label_row_bytes() as usize;
    let labels = store.section_bytes(SectionId::Labels);
    let mut s = w.section(
        SectionId::Labels,
        match h.label_kind {
            crate::store::LabelKind::Single => Dtype::U32,
            crate::store::LabelKind::Multi => Dtype::U8,
        },
    )?;
    for &v in nodes {
        let at = v as usize * row;
        let bytes = labels.get(at..at + row).ok_or_else(|| {
            PartitionError::argument(format!("labels of node {v} beyond the labels section"))
        })?;
        s.write_bytes(bytes)?;
    }
    let e_labels = s.finish()?;
    let mut s = w.section(SectionId::Roles, Dtype::U8)?;
    s.write_bytes(roles)?;
    let e_roles = s.finish()?;
    Ok([e_feat, e_labels, e_roles])
}

/// `part.tsv` of a part store: local id, global id, home part, own or replica.
fn write_part_map(
    w: &StoreWriter,
    nodes: &[u32],
    part: &[u32],
    k: usize,
    what: &str,
    is_replica: &dyn Fn(u32) -> bool,
) -> Result<(), PartitionError> {
    let (path, f) = w.aux_file(PART_MAP_FILE)?;
    let io = |e| PartitionError::io(&path, "write", e);
    let mut out = BufWriter::new(f);
    writeln!(
        out,
        "# local\tglobal\thome part\town|replica (saintflow partition: {what} of {k})"
    )
    .map_err(io)?;
    for (l, &v) in nodes.iter().enumerate() {
        let kind = if is_replica(v) { "replica" } else { "own" };
        writeln!(out, "{l}\t{v}\t{}\t{kind}", part[v as usize]).map_err(io)?;
    }
    let f = out.into_inner().map_err(|e| io(e.into_error()))?;
    f.sync_all()
        .map_err(|e| PartitionError::io(&path, "fsync", e))
}
