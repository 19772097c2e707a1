//! Issue 56 item 8: a store past 2³² CSR entries is read without 32-bit truncation. A
//! sparse file stands in for the indices (its hole reads as zeros and takes no disk), so
//! the test takes milliseconds: node 0's full-graph row grows by 2³² + 7 entries.

mod common;

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use rand::SeedableRng;
use saintflow::sample::{EdgeSampler, NodeSampler, SampleRng};
use saintflow::store::format::{decode_header, encode_header, SectionId, HEADER_FILE};
use saintflow::store::info::{degree_stats, info};
use saintflow::store::GraphStore;

/// Entries added to node 0's row: past 2³², so a count held in 32 bits wraps to 7.
const EXTRA: u64 = (1 << 32) + 7;

fn xxh3_hex(bytes: &[u8]) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))
}

/// Grows node 0's row of the full graph by [`EXTRA`] entries (a hole in the indices file
/// after the row's own entries) and rewrites the offsets and the header to match.
fn grow_first_row(store: &Path) {
    let hpath = store.join(HEADER_FILE);
    let mut header = decode_header(&std::fs::read(&hpath).unwrap(), &hpath).unwrap();
    let opath = store.join(SectionId::FullOffsets.file_name());
    let ipath = store.join(SectionId::FullIndices.file_name());
    let mut offsets: Vec<u64> = std::fs::read(&opath)
        .unwrap()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let indices = std::fs::read(&ipath).unwrap();
    let row0_end = offsets[1] as usize * 4;
    for o in offsets.iter_mut().skip(1) {
        *o += EXTRA;
    }
    let obytes: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
    std::fs::write(&opath, &obytes).unwrap();
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&ipath)
        .unwrap();
    f.write_all(&indices[..row0_end]).unwrap();
    f.seek(SeekFrom::Current(EXTRA as i64 * 4)).unwrap();
    f.write_all(&indices[row0_end..]).unwrap();
    drop(f);
    header.n_entries += EXTRA;
    let sections = &mut header.sections;
    let e = &mut sections[SectionId::FullIndices.index()];
    e.len += EXTRA;
    e.bytes += EXTRA * 4;
    // The hole's checksum is never read by `open` (only `check` reads the indices); the
    // offsets' is kept true.
    sections[SectionId::FullOffsets.index()].xxh3 = xxh3_hex(&obytes);
    std::fs::write(&hpath, encode_header(&header)).unwrap();
}

#[test]
fn a_store_past_2_32_entries_opens_counts_and_samples_without_truncation() {
    let tmp = tempfile::tempdir().unwrap();
    let path = common::small_store(tmp.path(), "g", 6, 3);
    let (entries, degree0) = {
        let st = GraphStore::open(&path).unwrap();
        (st.full().n_entries() as u64, st.full().degree(0) as u64)
    };
    grow_first_row(&path);
    let st = GraphStore::open(&path).expect("a consistent store past 2^32 entries opens");
    let full = st.full();
    assert_eq!(full.n_entries() as u64, entries + EXTRA);
    assert_eq!(full.degree(0) as u64, degree0 + EXTRA);
    assert_eq!(full.neighbors(0).len() as u64, degree0 + EXTRA);
    assert_eq!(
        full.neighbors(0)[degree0 as usize + 5],
        0,
        "the hole reads as zeros"
    );
    assert_eq!(st.header().n_entries, entries + EXTRA);
    // `info`: the entry count and the degree statistics in 64 bits.
    let i = info(&st);
    let text = i.to_text();
    assert!(text.contains(&(entries + EXTRA).to_string()), "{text}");
    let d = degree_stats(full);
    assert_eq!(d.max, degree0 + EXTRA);
    assert!((d.mean - (entries + EXTRA) as f64 / 64.0).abs() < 1e-3);
    // Nodes ∝ degree: a draw is an entry position below 2³² + …, so node 0 (all but a
    // 10⁻⁷ share of the entries) is every draw; a count wrapped to 32 bits would spread
    // the draws over the other rows.
    let nodes = NodeSampler::new(full, 1, true).unwrap();
    let mut rng = SampleRng::seed_from_u64(5);
    let zeros = (0..200)
        .filter(|_| nodes.sample_node(&mut rng) == 0)
        .count();
    assert_eq!(zeros, 200);
    // Edges: a uniform node with neighbours, then a uniform neighbour — node 0's draws
    // land in its hole (a self-loop, drawn again), the others' in their own rows.
    let edges = EdgeSampler::new(full, 1).unwrap();
    for _ in 0..200 {
        let (u, v) = edges.sample_edge(&mut rng).unwrap();
        assert!(u < v && (v as usize) < full.n_nodes());
    }
}
