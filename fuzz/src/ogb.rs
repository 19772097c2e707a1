//! `ogb`: `import ogb` on a small valid dataset (a 6-node ring, 2 features, one split) with
//! one of its files replaced by the input (issue 55: the fuzz targets cover the OGB
//! importer's csv and npz paths). The first byte picks the file and how the rest becomes
//! it:
//!
//! | byte % 16 | replaced by the rest |
//! |---|---|
//! | 0..=7 | csv.gz layout: file [`CSV_FILES`]`[k]`, the rest as its text, gzip-compressed here (bit 4 set: the rest as the file's raw bytes, gzip or not) |
//! | 8..=11 | binary layout: member [`DATA_MEMBERS`]`[k - 8]` of `raw/data.npz`, the rest as its `.npy` bytes |
//! | 12 | binary layout: `raw/node-label.npz`'s `node_label`, the rest as its `.npy` bytes |
//! | 13 | binary layout: `raw/data.npz`, the rest as the whole archive |
//! | 14 | binary layout: `raw/node-label.npz`, the rest as the whole archive |
//! | 15 | csv.gz layout: `split/only/train.csv.gz` replaced by a directory (the rest unused) |
//!
//! Bit 5 of the first byte asks for `--train-graph induce` (default: full).
//!
//! Property: the import returns; an import that succeeds gives a store that passes
//! `open_verified` (so nothing `check` refuses is ever written: inf features, classes out
//! of range), with at least one training node.

use std::io::Write;
use std::path::Path;

use saintflow::progress::Progress;
use saintflow::store::format::Role;
use saintflow::store::import::{import_ogb, OgbOptions, TrainGraphMode};
use saintflow::store::GraphStore;

use crate::input::Input;

/// The csv.gz layout's files, as byte % 8 picks them.
pub const CSV_FILES: [&str; 8] = [
    "raw/num-node-list.csv.gz",
    "raw/num-edge-list.csv.gz",
    "raw/edge.csv.gz",
    "raw/node-feat.csv.gz",
    "raw/node-label.csv.gz",
    "split/only/train.csv.gz",
    "split/only/valid.csv.gz",
    "split/only/test.csv.gz",
];

/// `raw/data.npz`'s members.
pub const DATA_MEMBERS: [&str; 4] = [
    "edge_index",
    "node_feat",
    "num_nodes_list",
    "num_edges_list",
];

/// The valid text of each of [`CSV_FILES`].
pub fn csv_text(k: usize) -> &'static str {
    [
        "6\n",
        "8\n",
        "0,1\n1,2\n2,3\n3,4\n4,5\n5,0\n2,2\n1,0\n",
        "0.5,1\n1.5,2\n2.5,3\n3.5,4\n4.5,5\n5.5,6\n",
        "0\n2\n1\n0\n1\nnan\n",
        "0\n1\n2\n",
        "3\n",
        "4\n",
    ][k]
}

/// Little-endian f64 `.npy` bytes of `shape` holding `x`.
pub fn npy_f64(shape: &[u64], x: &[f64]) -> Vec<u8> {
    let h = saintflow::npy::NpyHeader {
        descr: "<f8".into(),
        fortran_order: false,
        shape: shape.to_vec(),
    };
    let mut out = h.canonical();
    out.extend(x.iter().flat_map(|v| v.to_le_bytes()));
    out
}

/// The valid `.npy` bytes of [`DATA_MEMBERS`]`[k]` (k < 4) or of `node_label` (k = 4).
pub fn member_npy(k: usize) -> Vec<u8> {
    match k {
        0 => {
            let src = [0., 1., 2., 3., 4., 5., 2., 1.];
            let dst = [1., 2., 3., 4., 5., 0., 2., 0.];
            npy_f64(&[2, 8], &[src, dst].concat())
        }
        1 => npy_f64(
            &[6, 2],
            &[0.5, 1., 1.5, 2., 2.5, 3., 3.5, 4., 4.5, 5., 5.5, 6.],
        ),
        2 => npy_f64(&[1], &[6.]),
        3 => npy_f64(&[1], &[8.]),
        _ => npy_f64(&[6, 1], &[0., 2., 1., 0., 1., f64::NAN]),
    }
}

/// An npz archive (deflated members) of `(name, .npy bytes)`.
pub fn npz(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut z = npyz::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = npyz::zip::write::FileOptions::default()
        .compression_method(npyz::zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        z.start_file(format!("{name}.npy"), opts)
            .expect("zip member");
        z.write_all(bytes).expect("zip member written");
    }
    z.finish().expect("zip finished").into_inner()
}

/// `text` gzip-compressed.
pub fn gzip(text: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(text).expect("gzip in memory");
    z.finish().expect("gzip in memory")
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("dataset directory");
    std::fs::write(path, bytes).expect("dataset file written");
}

/// The split files, shared by both layouts.
fn split(dir: &Path) {
    for (k, f) in CSV_FILES.iter().enumerate().skip(5) {
        write(&dir.join(f), &gzip(csv_text(k).as_bytes()));
    }
}

/// The fuzz target's body (see the module documentation).
pub fn ogb(data: &[u8]) {
    run(data);
}

/// The body; whether the import succeeded.
fn run(data: &[u8]) -> bool {
    let mut input = Input::new(data);
    let which = input.u8();
    let rest = input.rest();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("ds");
    let k = usize::from(which % 16);
    match k {
        0..=7 | 15 => {
            for (j, f) in CSV_FILES.iter().enumerate() {
                write(&dir.join(f), &gzip(csv_text(j).as_bytes()));
            }
            if k == 15 {
                let p = dir.join(CSV_FILES[5]);
                std::fs::remove_file(&p).expect("split file removed");
                std::fs::create_dir(&p).expect("directory in its place");
            } else if which & 0x10 != 0 {
                write(&dir.join(CSV_FILES[k]), rest);
            } else {
                write(&dir.join(CSV_FILES[k]), &gzip(rest));
            }
        }
        _ => {
            let mut members: Vec<(&str, Vec<u8>)> = DATA_MEMBERS
                .iter()
                .enumerate()
                .map(|(j, m)| (*m, member_npy(j)))
                .collect();
            let mut label = member_npy(4);
            match k {
                8..=11 => members[k - 8].1 = rest.to_vec(),
                12 => label = rest.to_vec(),
                _ => {}
            }
            let data_npz = if k == 13 {
                rest.to_vec()
            } else {
                npz(&members)
            };
            let label_npz = if k == 14 {
                rest.to_vec()
            } else {
                npz(&[("node_label", label)])
            };
            write(&dir.join("raw/data.npz"), &data_npz);
            write(&dir.join("raw/node-label.npz"), &label_npz);
            split(&dir);
        }
    }
    let opts = OgbOptions {
        split: None,
        train_graph: if which & 0x20 != 0 {
            TrainGraphMode::Induce
        } else {
            TrainGraphMode::Full
        },
    };
    let out = tmp.path().join("out.sf");
    if import_ogb(&dir, &out, &opts, false, &Progress::hidden()).is_err() {
        return false;
    }
    match GraphStore::open_verified(&out) {
        Ok(s) => assert!(
            s.role_count(Role::Train) > 0,
            "a store without training nodes"
        ),
        Err(e) => panic!("an imported store fails verification: {e}"),
    }
    true
}

#[cfg(test)]
mod tests {
    /// The `valid_*` seeds import (each selector starts from a store, so a mutation that
    /// breaks its file is what the fuzzer measures); the `broken_*` ones are refused.
    #[test]
    fn valid_seeds_import_and_broken_ones_are_refused() {
        let seeds = crate::seeds::seeds("ogb", std::path::Path::new("."));
        assert!(seeds.len() > 20);
        for (name, bytes) in seeds {
            let ok = super::run(&bytes);
            assert_eq!(ok, name.starts_with("valid_"), "seed {name}");
        }
    }
}
