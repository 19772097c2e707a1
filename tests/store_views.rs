//! What the Python package hands out of a store (issue 55 item 11): sections mapped
//! copy-on-write (`GraphStore::map_private`), which a writer can scribble on without
//! faulting and without changing the store, and a store from arrays whose training graph
//! is the full graph (transductive, `Store.create`'s default) or induced.

mod common;

use saintflow::progress::Progress;
use saintflow::store::import::{import_arrays_with, ArrayGraph, Edges, TrainGraphMode};
use saintflow::store::{check, GraphStore, Role, SectionId};

const SECTIONS: [SectionId; 6] = [
    SectionId::FullOffsets,
    SectionId::FullIndices,
    SectionId::TrainOffsets,
    SectionId::TrainIndices,
    SectionId::Features,
    SectionId::Roles,
];

#[test]
fn issue55_writes_to_a_private_map_of_every_section_stay_in_the_process() {
    let tmp = tempfile::tempdir().unwrap();
    let path = common::small_store(tmp.path(), "g.sf", 8, 3);
    let store = GraphStore::open(&path).unwrap();
    for id in SECTIONS {
        let want = store.section_bytes(id).to_vec();
        let mut private = store.map_private(id).unwrap();
        assert_eq!(
            private.bytes(),
            &want[..],
            "{id:?}: the same bytes as the store's map"
        );
        // Write every byte: a read-only map would fault here.
        for b in private.bytes_mut() {
            *b = !*b;
        }
        assert!(private.bytes().iter().zip(&want).all(|(a, b)| *a == !*b));
        assert_eq!(
            store.section_bytes(id),
            &want[..],
            "{id:?}: the store's own map"
        );
        drop(private);
        let again = GraphStore::open(&path).unwrap();
        assert_eq!(again.section_bytes(id), &want[..], "{id:?}: the file");
    }
    check::check(&GraphStore::open(&path).unwrap()).unwrap();
    let f = store.map_private(SectionId::Features).unwrap();
    assert_eq!(f.as_slice::<f32>().unwrap(), store.features());
}

#[test]
fn issue55_an_empty_section_maps_to_an_empty_slice() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("nofeat.sf");
    let g = ArrayGraph {
        n_nodes: None,
        edges: Edges::Coo {
            src: &[0, 1],
            dst: &[1, 2],
        },
        symmetrize: true,
        features: None,
        labels: None,
        roles: None,
        source: "test",
        edge_time: None,
    };
    import_arrays_with(
        &g,
        TrainGraphMode::Induce,
        &out,
        false,
        &Progress::hidden(),
        None,
    )
    .unwrap();
    let store = GraphStore::open(&out).unwrap();
    let m = store.map_private(SectionId::Features).unwrap();
    assert!(m.bytes().is_empty() && m.as_slice::<f32>().unwrap().is_empty());
}

#[test]
fn issue55_a_store_from_arrays_trains_on_the_full_graph_unless_induction_is_asked() {
    let tmp = tempfile::tempdir().unwrap();
    // A path 0-1-2-3-4-5 with a split of two training nodes (0 and 3): induced, the
    // training graph has no edge at all.
    let src = [0i64, 1, 2, 3, 4];
    let dst = [1i64, 2, 3, 4, 5];
    let roles = [1u8, 0, 2, 1, 3, 0];
    let labels = [0i64, -1, 1, 0, 1, -1];
    let g = ArrayGraph {
        n_nodes: None,
        edges: Edges::Coo {
            src: &src,
            dst: &dst,
        },
        symmetrize: true,
        features: None,
        labels: Some(saintflow::store::import::ArrayLabels::Single(&labels)),
        roles: Some(&roles),
        source: "test",
        edge_time: None,
    };
    let full = tmp.path().join("full.sf");
    import_arrays_with(
        &g,
        TrainGraphMode::Full,
        &full,
        false,
        &Progress::hidden(),
        None,
    )
    .unwrap();
    let s = GraphStore::open(&full).unwrap();
    assert_eq!(s.train().offsets(), s.full().offsets());
    assert_eq!(s.train().indices(), s.full().indices());
    assert_eq!(s.full().n_entries(), 10);
    assert_eq!(s.role(3), Role::Train);
    check::check(&s).unwrap();

    let induced = tmp.path().join("induced.sf");
    import_arrays_with(
        &g,
        TrainGraphMode::Induce,
        &induced,
        false,
        &Progress::hidden(),
        None,
    )
    .unwrap();
    let s = GraphStore::open(&induced).unwrap();
    assert_eq!(s.train().n_entries(), 0);
    assert_eq!(s.full().n_entries(), 10);
    check::check(&s).unwrap();
}

#[test]
fn issue55_a_stopped_import_publishes_nothing_and_leaves_no_temporary_store() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("g.sf");
    let src: Vec<i64> = (0..3_000_000).map(|k| k % 1000).collect();
    let dst: Vec<i64> = (0..3_000_000).map(|k| (k * 7 + 1) % 1000).collect();
    let g = ArrayGraph {
        n_nodes: None,
        edges: Edges::Coo {
            src: &src,
            dst: &dst,
        },
        symmetrize: true,
        features: None,
        labels: None,
        roles: None,
        source: "test",
        edge_time: None,
    };
    let stop = std::sync::atomic::AtomicBool::new(true);
    let e = import_arrays_with(
        &g,
        TrainGraphMode::Induce,
        &out,
        false,
        &Progress::hidden(),
        Some(&stop),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("interrupted; nothing was written"), "{e}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // Not stopped, the same call writes the store.
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    import_arrays_with(
        &g,
        TrainGraphMode::Induce,
        &out,
        false,
        &Progress::hidden(),
        Some(&stop),
    )
    .unwrap();
    check::check(&GraphStore::open(&out).unwrap()).unwrap();
}
