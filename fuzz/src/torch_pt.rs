//! `torch_pt`: the strict `.pt` reader (`store::import::torch_pt`, issue 52) on arbitrary
//! bytes as the file: `PtFile::open`, then `ints` of every key.
//!
//! Property: each call returns (an error, never a panic, an abort, unbounded memory or a
//! hang); an array read whole has as many elements as its shape says.

use saintflow::store::import::torch_pt::PtFile;

/// The fuzz target's body (see the module documentation).
pub fn torch_pt(data: &[u8]) {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = tmp.path().join("x.pt");
    std::fs::write(&path, data).expect("input written");
    let Ok(mut pt) = PtFile::open(&path) else {
        return;
    };
    let keys: Vec<String> = pt.keys().into_iter().map(str::to_string).collect();
    for k in keys {
        let want = pt.get(&k).expect("a listed key").len();
        if let Ok(v) = pt.ints(&k) {
            assert_eq!(v.len() as u64, want, "key {k}: one value per element");
        }
    }
}

/// The seeds: the `.pt` files of `tests/data/ogbl/` (written by real `torch.save`: torch
/// tensors in collab's, numpy arrays in citation2's, the reader's other paths in `pt/`).
pub fn seeds(repo: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for d in ["collab", "citation2"] {
        for f in ["train", "valid", "test"] {
            let p = repo.join(format!("tests/data/ogbl/{d}/split/time/{f}.pt"));
            out.push((
                format!("{d}_{f}"),
                std::fs::read(&p).expect("tests/data/ogbl fixture"),
            ));
        }
    }
    for f in ["numpy_big", "proto3", "strided", "offset", "int32"] {
        let p = repo.join(format!("tests/data/ogbl/pt/{f}.pt"));
        out.push((
            f.to_string(),
            std::fs::read(&p).expect("tests/data/ogbl/pt fixture"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_seeds_read_whole() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (name, bytes) in super::seeds(&repo) {
            let tmp = tempfile::tempdir().unwrap();
            let p = tmp.path().join("x.pt");
            std::fs::write(&p, bytes).unwrap();
            let mut pt = saintflow::store::import::torch_pt::PtFile::open(&p).unwrap();
            let keys: Vec<String> = pt.keys().into_iter().map(str::to_string).collect();
            assert!(!keys.is_empty(), "{name}");
            for k in keys {
                pt.ints(&k).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}
