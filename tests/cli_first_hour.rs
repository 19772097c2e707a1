//! Issue 54, item 8: the errors of a new user's first hour name the file and say what to
//! do: a dataset given where a store goes names its importer, a store without labels or
//! without a split names the import flag, a featureless one `--features`.

mod common;

use std::path::Path;

use common::{saintflow, saintflow_ok};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `saintflow train gcn --graph GRAPH` in `dir`: its stderr, after checking it failed with
/// exit 1.
fn train_fails(dir: &Path, graph: &str) -> String {
    let out = saintflow(&["train", "gcn", "--graph", graph, "--epochs", "1"], dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    text(&out.stderr)
}

#[test]
fn a_graphsaint_directory_given_as_the_store_names_import_graphsaint() {
    let tmp = tempfile::tempdir().unwrap();
    common::graphsaint_dir(&tmp.path().join("cora"), 40);
    let err = train_fails(tmp.path(), "cora");
    assert!(
        err.contains("error: cora: is a GraphSAINT dataset directory (adj_full.npz, feats.npy, class_map.json, role.json), not a saintflow store: import it once with `saintflow import graphsaint cora -o cora.sf`, then pass `--graph cora.sf`"),
        "{err}"
    );
    assert!(!err.contains("header.sf: cannot open"), "{err}");
    // The command it names works, and so does training on its output.
    saintflow_ok(
        &["import", "graphsaint", "cora", "-o", "cora.sf", "-q"],
        tmp.path(),
    );
    saintflow_ok(
        &["train", "gcn", "--graph", "cora.sf", "--epochs", "1"],
        tmp.path(),
    );
}

#[test]
fn an_ogb_directory_given_as_the_store_names_its_importer() {
    let tmp = tempfile::tempdir().unwrap();
    let collab = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ogbl/collab");
    let err = train_fails(tmp.path(), collab.to_str().unwrap());
    assert!(
        err.contains("is an OGB dataset directory (raw/, split/), not a saintflow store: import it once with `saintflow import ogb-link ")
            && err.contains(" -o collab.sf`"),
        "{err}"
    );
    // A node-property dataset's split is csv.gz files: `import ogb`.
    let arxiv = tmp.path().join("ogbn-arxiv");
    std::fs::create_dir_all(arxiv.join("raw")).unwrap();
    std::fs::create_dir_all(arxiv.join("split/time")).unwrap();
    std::fs::write(arxiv.join("raw/edge.csv.gz"), b"").unwrap();
    std::fs::write(arxiv.join("split/time/train.csv.gz"), b"").unwrap();
    let err = train_fails(tmp.path(), "ogbn-arxiv");
    assert!(
        err.contains("error: ogbn-arxiv: is an OGB dataset directory (raw/, split/), not a saintflow store: import it once with `saintflow import ogb ogbn-arxiv -o ogbn-arxiv.sf`"),
        "{err}"
    );
}

#[test]
fn an_edge_list_or_an_array_given_as_the_store_names_import_edgelist() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("edges.txt"), "0 1\n1 2\n").unwrap();
    let err = train_fails(tmp.path(), "edges.txt");
    assert!(
        err.contains("error: edges.txt: is a text file, not a saintflow store (a directory): for an edge list (`u v` per line), import it once with `saintflow import edgelist edges.txt -o edges.sf --symmetrize`"),
        "{err}"
    );
    common::write_npy_i64(&tmp.path().join("y.npy"), &[0, 1]);
    let err = train_fails(tmp.path(), "y.npy");
    assert!(
        err.contains("error: y.npy: is a file (an .npy or .npz array), not a saintflow store"),
        "{err}"
    );
}

#[test]
fn a_missing_or_empty_store_says_how_to_make_one() {
    let tmp = tempfile::tempdir().unwrap();
    let err = train_fails(tmp.path(), "own.sf");
    assert!(
        err.contains("error: own.sf: does not exist: make a store with `saintflow import` (edge lists, GraphSAINT and OGB datasets) or `saintflow gen kronecker`"),
        "{err}"
    );
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let err = train_fails(tmp.path(), "empty");
    assert!(
        err.contains("error: empty: is an empty directory, not a saintflow store (no header.sf)"),
        "{err}"
    );
    // A directory of something else.
    std::fs::create_dir(tmp.path().join("photos")).unwrap();
    std::fs::write(tmp.path().join("photos/a.jpg"), b"x").unwrap();
    let err = train_fails(tmp.path(), "photos");
    assert!(
        err.contains("error: photos: is not a saintflow store (no header.sf): a store is the directory `saintflow import`"),
        "{err}"
    );
}

/// An edge list with features: the store is made, with a warning, and training names the
/// missing `--labels`.
#[test]
fn a_store_without_labels_says_to_pass_labels_at_import() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("edges.txt"),
        "0 1\n1 2\n2 3\n3 0\n0 2\n4 5\n5 6\n6 4\n",
    )
    .unwrap();
    let x: Vec<f32> = (0..7 * 4).map(|i| (i % 5) as f32).collect();
    common::write_npy_f32(&d.join("x.npy"), 7, 4, &x);
    for split in [None, Some("0.5,0.25,0.25")] {
        let mut args = vec![
            "import",
            "edgelist",
            "edges.txt",
            "-o",
            "own.sf",
            "--symmetrize",
            "--features",
            "x.npy",
            "--force",
        ];
        if let Some(s) = split {
            args.extend(["--split", s]);
        }
        let out = saintflow_ok(&args, d);
        assert!(
            text(&out.stderr).contains("warning: no labels: GNN plans (`saintflow train gcn`) need labelled training nodes, so re-import with `--labels Y.npy`"),
            "{}",
            text(&out.stderr)
        );
        let err = train_fails(d, "own.sf");
        assert!(
            err.contains("error: training: own.sf: no labels, so no training nodes: a GNN plan learns node classes from labelled training nodes; import the graph with its labels and a split, `saintflow import edgelist EDGES -o own.sf --features X.npy --labels Y.npy --split 0.6,0.2,0.2`"),
            "{err}"
        );
        assert!(
            err.contains("`saintflow train deepwalk --graph own.sf`"),
            "{err}"
        );
    }
    // With the labels it names, the same graph trains.
    common::write_npy_i64(&d.join("y.npy"), &[0, 0, 0, 0, 1, 1, 1]);
    saintflow_ok(
        &[
            "import",
            "edgelist",
            "edges.txt",
            "-o",
            "own.sf",
            "--symmetrize",
            "--features",
            "x.npy",
            "--labels",
            "y.npy",
            "--split",
            "0.5,0.25,0.25",
            "--force",
        ],
        d,
    );
    saintflow_ok(&["train", "gcn", "--graph", "own.sf", "--epochs", "2"], d);
}

#[test]
fn a_labelled_store_without_training_nodes_says_to_pass_a_split() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("edges.txt"), "0 1\n1 2\n2 3\n3 0\n").unwrap();
    common::write_npy_f32(&d.join("x.npy"), 4, 2, &[1.0; 8]);
    common::write_npy_i64(&d.join("y.npy"), &[0, 1, 0, 1]);
    std::fs::write(d.join("role.json"), r#"{"tr":[],"va":[0,1],"te":[2,3]}"#).unwrap();
    saintflow_ok(
        &[
            "import",
            "edgelist",
            "edges.txt",
            "-o",
            "own.sf",
            "--symmetrize",
            "--features",
            "x.npy",
            "--labels",
            "y.npy",
            "--roles",
            "role.json",
        ],
        d,
    );
    let err = train_fails(d, "own.sf");
    assert!(
        err.contains("error: training: own.sf: no training nodes (role `train`; the store has labels of 2 classes): import the graph with a split that has training nodes, `--split 0.6,0.2,0.2`"),
        "{err}"
    );
}

#[test]
fn a_store_without_features_names_import_features() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("edges.txt"), "0 1\n1 2\n2 3\n3 0\n").unwrap();
    common::write_npy_i64(&d.join("y.npy"), &[0, 1, 0, 1]);
    saintflow_ok(
        &[
            "import",
            "edgelist",
            "edges.txt",
            "-o",
            "own.sf",
            "--symmetrize",
            "--labels",
            "y.npy",
            "--split",
            "0.5,0.25,0.25",
        ],
        d,
    );
    let err = train_fails(d, "own.sf");
    assert!(
        err.contains("own.sf: no node features")
            && err.contains("`saintflow import edgelist EDGES -o STORE --features X.npy`"),
        "{err}"
    );
}
