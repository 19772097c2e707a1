//! The relations, one at a time: each one's edges through its own builder (and its
//! reverse's: `rev_<rel>` between two types, symmetric in place within one) beside the full
//! graph's, its two sections written.

use std::collections::BTreeSet;
use std::path::Path;

use crate::progress::Ticker;
use crate::store::csr_build::{BuildStats, CsrBuilder, CsrSink};
use crate::store::format::{relation_sections, Dtype, RelationMeta, SectionEntry};
use crate::store::import::ogb::{GzLines, PROGRESS_EVERY};
use crate::store::writer::StoreWriter;
use crate::store::StoreError;

use super::layout::{local_id, NodeType, Triplet};

/// Bytes of memory one relation's builder keeps before spilling to its bucket files.
const RELATION_BUCKET_BYTES: u64 = 256 << 20;

/// The relations' records by id, and the self-loop and duplicate entries dropped.
type WrittenRelations = (Vec<Option<RelationMeta>>, (u64, u64));

/// The relation ids: (triplet, is reverse), the originals first, then the reverses of
/// relations between two types in order; a reverse must not repeat a listed relation.
pub(super) fn relation_order(
    triplets: &[Triplet],
    types: &[NodeType],
) -> Result<Vec<(usize, bool)>, StoreError> {
    // (triplet, is reverse): relation ids, originals first, then the reverses in order.
    let mut order: Vec<(usize, bool)> = (0..triplets.len()).map(|i| (i, false)).collect();
    order.extend(
        triplets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.src != t.dst)
            .map(|(i, _)| (i, true)),
    );
    let mut names = BTreeSet::new();
    for &(i, rev) in &order {
        let t = &triplets[i];
        let (s, name, d) = if rev {
            (t.dst, format!("rev_{}", t.name), t.src)
        } else {
            (t.src, t.name.clone(), t.dst)
        };
        if !names.insert((s, name.clone(), d)) {
            return Err(StoreError::input(
                &t.dir,
                format!(
                    "the reverse relation ({}, {name}, {}) is also listed as a relation: rename one",
                    types[s].name, types[d].name
                ),
            ));
        }
    }
    Ok(order)
}

/// The relations, one at a time: each one's edges (and its reverse's) through its own
/// builders beside `full`, its sections written; the relations' metadata by id and the
/// self loops and duplicates dropped.
pub(super) fn write_relations(
    (w, scratch): (&StoreWriter, &Path),
    n: u64,
    (types, triplets, counts): (&[NodeType], &[Triplet], &[u64]),
    full: &mut CsrBuilder,
    bar: &Ticker,
) -> Result<WrittenRelations, StoreError> {
    let order = relation_order(triplets, types)?;
    let rel_id = |i: usize, rev: bool| order.iter().position(|&o| o == (i, rev)).unwrap();
    let mut metas: Vec<Option<RelationMeta>> = vec![None; order.len()];
    let mut dropped = (0u64, 0u64);
    for (i, t) in triplets.iter().enumerate() {
        let (src, dst) = (&types[t.src], &types[t.dst]);
        let mut fwd = CsrBuilder::new(
            scratch,
            n,
            counts[i].saturating_mul(2),
            RELATION_BUCKET_BYTES,
        )?;
        let mut back = (t.src != t.dst)
            .then(|| CsrBuilder::new(scratch, n, counts[i], RELATION_BUCKET_BYTES))
            .transpose()?;
        push_relation_edges(
            t,
            (src, dst),
            counts[i],
            (&mut fwd, back.as_mut()),
            full,
            bar,
        )?;
        let r = rel_id(i, false);
        let rr = if back.is_some() { rel_id(i, true) } else { r };
        let (o, x, e, st) = write_relation(w, fwd, r, src)?;
        dropped.0 += st.self_loops;
        dropped.1 += st.duplicates;
        metas[r] = Some(RelationMeta {
            name: t.name.clone(),
            src: t.src as u32,
            dst: t.dst as u32,
            n_entries: e,
            reverse: rr as u32,
            offsets: o,
            indices: x,
        });
        if let Some(back) = back {
            let (o, x, e, _) = write_relation(w, back, rr, dst)?;
            metas[rr] = Some(RelationMeta {
                name: format!("rev_{}", t.name),
                src: t.dst as u32,
                dst: t.src as u32,
                n_entries: e,
                reverse: r as u32,
                offsets: o,
                indices: x,
            });
        }
    }
    Ok((metas, dropped))
}

/// One relation's `edge.csv.gz`: each edge into `fwd` (and its reverse into `back`, or
/// into `fwd` within one type) and both ways into `full`; the count checked.
pub(super) fn push_relation_edges(
    t: &Triplet,
    (src, dst): (&NodeType, &NodeType),
    count: u64,
    (fwd, mut back): (&mut CsrBuilder, Option<&mut CsrBuilder>),
    full: &mut CsrBuilder,
    bar: &Ticker,
) -> Result<(), StoreError> {
    let path = t.dir.join("edge.csv.gz");
    let mut lines = GzLines::open(&path)?;
    let mut seen = 0u64;
    while lines.advance()? {
        let l = lines.line();
        let mut it = l.split(',');
        let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
            return Err(lines.err(format!("expected \"src,dst\", got {l:?}")));
        };
        let u = local_id(&lines, a.trim(), src, "source node")?;
        let v = local_id(&lines, b.trim(), dst, "destination node")?;
        fwd.push(u, v)?;
        match &mut back {
            Some(back) => back.push(v, u)?,
            None if u != v => fwd.push(v, u)?,
            None => {}
        }
        full.push(u, v)?;
        if u != v {
            full.push(v, u)?;
        }
        seen += 1;
        if seen.is_multiple_of(PROGRESS_EVERY) {
            bar.inc(PROGRESS_EVERY);
        }
    }
    bar.inc(seen % PROGRESS_EVERY);
    if seen != count {
        return Err(StoreError::input(
            &path,
            format!(
                "{seen} edges, expected {} as num-edge-list.csv.gz says",
                count
            ),
        ));
    }
    Ok(())
}

/// A relation's builder's CSR as the relation's two sections; (offsets, indices,
/// entries, what the builder dropped).
pub(super) fn write_relation(
    w: &StoreWriter,
    builder: CsrBuilder,
    r: usize,
    src: &NodeType,
) -> Result<(SectionEntry, SectionEntry, u64, BuildStats), StoreError> {
    let [(on, of), (iname, ifile)] = relation_sections(r);
    let mut offsets = w.named_section((&on, &of), Dtype::U64)?;
    let mut indices = w.named_section((&iname, &ifile), Dtype::U32)?;
    let mut sinks = [CsrSink {
        offsets: &mut offsets,
        indices: &mut indices,
        keep: None,
        rows: Some(src.start..src.start + src.count),
        entries: 0,
    }];
    let stats = builder.finish(&mut sinks, || {})?;
    let entries = sinks[0].entries;
    Ok((offsets.finish()?, indices.finish()?, entries, stats))
}
