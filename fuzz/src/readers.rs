//! `readers`: the importers' file readers on arbitrary bytes. The first byte picks the
//! reader, the second is the node count N (0..=255) it is given, the rest is the file:
//!
//! | byte % 6 | reader |
//! |---|---|
//! | 0 | `write_features_npy` (an `.npy` of shape (N, F), into an uncommitted store; bit 3: standardise on the even nodes) |
//! | 1 | `read_labels` on an `.npy` (1-D class ids or 2-D 0/1) |
//! | 2 | `read_labels` on a `.json` (GraphSAINT `class_map.json`) |
//! | 3 | `read_roles` (GraphSAINT `role.json`) |
//! | 4 | `import_graphsaint` with the bytes as `adj_full.npz` (scipy CSR), the training graph induced |
//! | 5 | the same with the bytes as `adj_train.npz` too (the given training graph) |
//!
//! For the npz readers the other files of the dataset are made to fit: empty `role.json`
//! and `class_map.json`, and `feats.npy` of shape (N, 1) when the archive's `shape` member
//! reads as (N, N) with N ≤ 4096, so that a valid adjacency reaches the end of the import.
//!
//! Property: each reader returns; what it returns has the promised size (N roles, N label
//! rows), and an import that succeeds gives a store that passes `open_verified`.

use std::path::Path;

use saintflow::progress::Progress;
use saintflow::store::format::{LabelKind, Role};
use saintflow::store::import::{
    import_graphsaint, read_labels, read_roles, write_features_npy, GraphSaintOptions,
    TrainGraphMode,
};
use saintflow::store::writer::StoreWriter;
use saintflow::store::GraphStore;

use crate::input::Input;

/// The fuzz target's body (see the module documentation).
pub fn readers(data: &[u8]) {
    let mut input = Input::new(data);
    let which = input.u8();
    let n = usize::from(input.u8());
    let file = input.rest();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path();
    match which % 6 {
        0 => features(dir, file, n, which & 8 != 0),
        1 => labels(dir, "labels.npy", file, n),
        2 => labels(dir, "class_map.json", file, n),
        3 => {
            let path = dir.join("role.json");
            std::fs::write(&path, file).expect("input written");
            if let Ok(roles) = read_roles(&path, n) {
                assert_eq!(roles.len(), n, "one role per node");
                assert!(roles.iter().all(|&r| Role::from_byte(r).is_some()));
            }
        }
        k => graphsaint(dir, file, k == 5),
    }
}

fn features(dir: &Path, file: &[u8], n: usize, standardize: bool) {
    let path = dir.join("feats.npy");
    std::fs::write(&path, file).expect("input written");
    let roles: Vec<u8> = (0..n)
        .map(|v| if v % 2 == 0 { Role::Train } else { Role::Test } as u8)
        .collect();
    let w = StoreWriter::create(&dir.join("out.sf"), false).expect("store writer");
    if let Ok((f, entry)) = write_features_npy(&w, &path, n, standardize, &roles) {
        assert_eq!(entry.len, n as u64 * f, "N × F features written");
    }
}

fn labels(dir: &Path, name: &str, file: &[u8], n: usize) {
    let path = dir.join(name);
    std::fs::write(&path, file).expect("input written");
    if let Ok(t) = read_labels(&path, n) {
        let row = match t.kind {
            LabelKind::Single => 4,
            LabelKind::Multi => t.n_classes.div_ceil(8) as usize,
        };
        assert_eq!(t.data.len(), n * row, "N label rows");
        for v in 0..n {
            let _ = t.is_labelled(v);
        }
    }
}

fn graphsaint(dir: &Path, file: &[u8], given: bool) {
    let data = dir.join("data");
    std::fs::create_dir(&data).expect("dataset directory");
    std::fs::write(data.join("adj_full.npz"), file).expect("input written");
    if given {
        std::fs::write(data.join("adj_train.npz"), file).expect("input written");
    }
    std::fs::write(data.join("role.json"), r#"{"tr": [], "va": [], "te": []}"#)
        .expect("roles written");
    std::fs::write(data.join("class_map.json"), "{}").expect("class map written");
    if let Some(n) = npz_nodes(&data.join("adj_full.npz")).filter(|&n| n <= 4096) {
        write_feats(&data.join("feats.npy"), n);
    }
    let opts = GraphSaintOptions {
        standardize: false,
        train_graph: if given {
            TrainGraphMode::Given
        } else {
            TrainGraphMode::Induce
        },
        resplit: None,
    };
    let out = dir.join("out.sf");
    if import_graphsaint(&data, &out, &opts, false, &Progress::hidden()).is_ok() {
        if let Err(e) = GraphStore::open_verified(&out) {
            panic!("an imported store fails verification: {e}");
        }
    }
}

/// N of a scipy npz whose `shape` member reads as (N, N).
fn npz_nodes(path: &Path) -> Option<u64> {
    // Through the importers' vetted opening: npyz's own header parser takes hostile
    // headers exponentially long.
    let mut zip = npyz::zip::ZipArchive::new(std::fs::File::open(path).ok()?).ok()?;
    let shape = saintflow::npy::open_npy(zip.by_name("shape.npy").ok()?, None).ok()?;
    let v: Vec<i64> = match shape.dtype() {
        npyz::DType::Plain(t) if t.to_string() == "<i4" => shape
            .into_vec::<i32>()
            .ok()?
            .into_iter()
            .map(i64::from)
            .collect(),
        _ => shape.into_vec().ok()?,
    };
    match v.as_slice() {
        [r, c] if r == c && *r >= 0 => Some(*r as u64),
        _ => None,
    }
}

/// Zero features of shape (n, 1).
fn write_feats(path: &Path, n: u64) {
    use npyz::WriterBuilder;
    let mut f = std::fs::File::create(path).expect("feats.npy");
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[n, 1])
        .writer(&mut f)
        .begin_nd()
        .expect("npy writer");
    for _ in 0..n {
        w.push(&0f32).expect("npy element");
    }
    w.finish().expect("npy finished");
}
