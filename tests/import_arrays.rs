//! A store from arrays in memory (`store::import::arrays`, what the Python package's
//! `Store.create` calls): the same store as the file importers write for the same graph,
//! and every bad argument refused by name with nothing left behind.

mod common;

use std::path::Path;

use common::err_text;
use saintflow::progress::Progress;
use saintflow::store::import::{
    import_arrays, import_edgelist, ArrayGraph, ArrayLabels, EdgeListOptions, Edges,
};
use saintflow::store::{check, GraphStore, Labels, Role};

const SRC: [i64; 7] = [0, 1, 2, 2, 3, 0, 4];
const DST: [i64; 7] = [1, 2, 2, 0, 4, 1, 0];

fn graph<'a>(edges: Edges<'a>) -> ArrayGraph<'a> {
    ArrayGraph {
        n_nodes: None,
        edges,
        symmetrize: true,
        features: None,
        labels: None,
        roles: None,
        source: "test",
        edge_time: None,
    }
}

fn write(g: &ArrayGraph<'_>, out: &Path) -> Result<GraphStore, String> {
    import_arrays(g, out, false, &Progress::hidden()).map_err(|e| e.to_string())?;
    Ok(GraphStore::open(out).unwrap())
}

#[test]
fn coo_and_csr_give_the_edge_list_importers_store() {
    let tmp = tempfile::tempdir().unwrap();
    let txt: String = SRC
        .iter()
        .zip(DST)
        .map(|(u, v)| format!("{u} {v}\n"))
        .collect();
    std::fs::write(tmp.path().join("g.txt"), txt).unwrap();
    import_edgelist(
        &tmp.path().join("g.txt"),
        &tmp.path().join("e.sf"),
        &EdgeListOptions {
            symmetrize: true,
            ..Default::default()
        },
        false,
        &Progress::hidden(),
    )
    .unwrap();
    let want = GraphStore::open(tmp.path().join("e.sf")).unwrap();
    let coo = write(
        &graph(Edges::Coo {
            src: &SRC,
            dst: &DST,
        }),
        &tmp.path().join("a.sf"),
    )
    .unwrap();
    check(&coo).unwrap();
    assert_eq!(coo.full().offsets(), want.full().offsets());
    assert_eq!(coo.full().indices(), want.full().indices());
    // The same graph as scipy's CSR (asymmetric rows, symmetrised by the writer).
    let indptr = [0i64, 1, 2, 4, 5, 6];
    let indices = [1i64, 2, 2, 0, 4, 0];
    let csr = write(
        &graph(Edges::Csr {
            indptr: &indptr,
            indices: &indices,
        }),
        &tmp.path().join("b.sf"),
    )
    .unwrap();
    assert_eq!(csr.full().offsets(), want.full().offsets());
    assert_eq!(csr.full().indices(), want.full().indices());
}

#[test]
fn features_labels_and_roles_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let x: Vec<f32> = (0..15).map(|i| i as f32 * 0.5).collect();
    let y = [0i64, 2, -1, 1, 0];
    let roles = [1u8, 1, 0, 2, 3];
    let g = ArrayGraph {
        features: Some((&x, 3)),
        labels: Some(ArrayLabels::Single(&y)),
        roles: Some(&roles),
        ..graph(Edges::Coo {
            src: &SRC,
            dst: &DST,
        })
    };
    let s = write(&g, &tmp.path().join("a.sf")).unwrap();
    check(&s).unwrap();
    assert_eq!(s.features(), &x[..]);
    assert_eq!((s.n_features(), s.n_classes()), (3, 3));
    let Labels::Single(l) = s.labels() else {
        panic!("single-label")
    };
    assert_eq!(l[..2], [0, 2]);
    assert!(!s.labels().is_labelled(2));
    assert_eq!(s.role(3), Role::Val);
    // The training graph is induced on nodes 0 and 1 (edge 0–1 only).
    assert_eq!(s.train().indices(), &[1, 0]);
    let bits = [1u8, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0];
    let m = write(
        &ArrayGraph {
            labels: Some(ArrayLabels::Multi {
                bits: &bits,
                classes: 3,
            }),
            ..graph(Edges::Coo {
                src: &SRC,
                dst: &DST,
            })
        },
        &tmp.path().join("m.sf"),
    )
    .unwrap();
    assert!(m.labels().has_class(0, 2) && !m.labels().has_class(0, 1));
    assert!(m.labels().has_class(2, 1) && m.labels().has_class(3, 2));
}

#[test]
fn bad_arguments_are_named_and_nothing_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad.sf");
    let bad_id = [0i64, 1, 2, 9];
    let cases: Vec<(ArrayGraph<'_>, &str)> = vec![
        (
            ArrayGraph {
                n_nodes: Some(5),
                ..graph(Edges::Coo {
                    src: &bad_id,
                    dst: &DST[..4],
                })
            },
            "edge_index[0][3] = 9 is out of range for 5 nodes",
        ),
        (
            graph(Edges::Coo {
                src: &SRC[..3],
                dst: &DST,
            }),
            "edge_index: 3 sources but 7 destinations",
        ),
        (
            graph(Edges::Csr {
                indptr: &[0, 2, 1],
                indices: &[1, 0],
            }),
            "indptr decreases at 2: 2 then 1",
        ),
        (
            graph(Edges::Csr {
                indptr: &[0, 1, 2],
                indices: &[1, 5],
            }),
            "indices[1] = 5 is out of range for 2 nodes",
        ),
        (
            ArrayGraph {
                symmetrize: false,
                ..graph(Edges::Coo {
                    src: &SRC,
                    dst: &DST,
                })
            },
            "not symmetric",
        ),
        (
            ArrayGraph {
                features: Some((&[1.0, f32::NAN, 0.0, 0.0, 0.0], 1)),
                ..graph(Edges::Coo {
                    src: &SRC,
                    dst: &DST,
                })
            },
            "x: row 1, column 0 is not finite",
        ),
        (
            ArrayGraph {
                labels: Some(ArrayLabels::Single(&[0, -1, 0, 0, 0])),
                roles: Some(&[1, 1, 0, 0, 0]),
                ..graph(Edges::Coo {
                    src: &SRC,
                    dst: &DST,
                })
            },
            "node 1 is in the split (Train) but has no label",
        ),
        (
            ArrayGraph {
                roles: Some(&[1, 7, 0, 0, 0]),
                ..graph(Edges::Coo {
                    src: &SRC,
                    dst: &DST,
                })
            },
            "roles: node 1 has role 7",
        ),
        (
            ArrayGraph {
                labels: Some(ArrayLabels::Multi {
                    bits: &[0, 2, 0, 0, 0],
                    classes: 1,
                }),
                ..graph(Edges::Coo {
                    src: &SRC,
                    dst: &DST,
                })
            },
            "y[1, 0] = 2, expected 0 or 1",
        ),
    ];
    for (g, want) in cases {
        let e = err_text(write(&g, &out));
        assert!(
            e.contains(want) && e.contains("bad.sf"),
            "{e:?} lacks {want:?}"
        );
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "{want}: left {left:?}");
    }
}

/// Issue 55 item 10: `import_arrays_with` takes the training graph as the file importers
/// do: `Full` keeps every edge (transductive), `Induce` the edges between training nodes
/// (what `import_arrays` keeps doing), `Given` is refused.
#[test]
fn issue55_arrays_take_the_training_graph_mode() {
    use saintflow::store::import::{import_arrays_with, TrainGraphMode};
    let tmp = tempfile::tempdir().unwrap();
    let y: [i64; 5] = [0, 1, 0, 1, 0];
    let roles: [u8; 5] = [1, 1, 2, 3, 0];
    let g = ArrayGraph {
        labels: Some(ArrayLabels::Single(&y)),
        roles: Some(&roles),
        ..graph(Edges::Coo {
            src: &SRC,
            dst: &DST,
        })
    };
    let open = |name: &str, mode| {
        let out = tmp.path().join(name);
        import_arrays_with(&g, mode, &out, false, &Progress::hidden(), None).map(|_| {
            let s = GraphStore::open(&out).unwrap();
            check(&s).unwrap();
            s
        })
    };
    let full = open("full.sf", TrainGraphMode::Full).unwrap();
    assert_eq!(full.train().indices(), full.full().indices());
    assert_eq!(full.train().offsets(), full.full().offsets());
    let induced = open("induced.sf", TrainGraphMode::Induce).unwrap();
    // Training nodes 0 and 1: the edge 0-1 only.
    assert_eq!(induced.train().n_entries(), 2);
    assert_eq!(induced.train().neighbors(0), &[1]);
    let e = err_text(open("given.sf", TrainGraphMode::Given));
    assert!(e.contains("arrays give no training graph"), "{e}");
    assert!(!tmp.path().join("given.sf").exists());
}

#[test]
fn edge_times_from_arrays_keep_the_earliest_and_follow_csr_entries() {
    // SRC/DST: (0,1) twice, at 7 and 3: the edge keeps 3; (2,2) a self loop, dropped.
    let tmp = tempfile::tempdir().unwrap();
    let times = [7i64, 20, 99, 30, 40, 3, 50];
    let s = write(
        &ArrayGraph {
            edge_time: Some(&times),
            ..graph(Edges::Coo {
                src: &SRC,
                dst: &DST,
            })
        },
        &tmp.path().join("coo.sf"),
    )
    .unwrap();
    check(&s).unwrap();
    for ((u, v), t) in [
        ((0, 1), 3),
        ((1, 2), 20),
        ((2, 0), 30),
        ((3, 4), 40),
        ((4, 0), 50),
    ] {
        assert_eq!(
            (s.edge_time(u, v), s.edge_time(v, u)),
            (Some(t), Some(t)),
            "({u}, {v})"
        );
    }
    let meta = s.header().edge_time.as_ref().unwrap();
    assert_eq!((meta.min, meta.max), (3, 50));

    // CSR: the times of `indices`' entries, in that order.
    let (indptr, indices) = ([0i64, 2, 3, 4], [1i64, 2, 0, 0]);
    let s = write(
        &ArrayGraph {
            edge_time: Some(&[5, 6, 8, 9]),
            ..graph(Edges::Csr {
                indptr: &indptr,
                indices: &indices,
            })
        },
        &tmp.path().join("csr.sf"),
    )
    .unwrap();
    check(&s).unwrap();
    assert_eq!((s.edge_time(0, 1), s.edge_time(0, 2)), (Some(5), Some(6)));
    assert_eq!((s.edge_time(1, 0), s.edge_time(2, 0)), (Some(5), Some(6)));

    let e = err_text(write(
        &ArrayGraph {
            edge_time: Some(&[1, 2]),
            ..graph(Edges::Coo {
                src: &SRC,
                dst: &DST,
            })
        },
        &tmp.path().join("bad.sf"),
    ));
    assert!(e.contains("edge_time: 2 values for 7 entries"), "{e}");
    assert!(!tmp.path().join("bad.sf").exists());
}
