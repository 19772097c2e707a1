//! The edge-list importer.

mod common;

use std::path::Path;

use common::{err_text, write_npy_f32, write_npy_i64};
use saintflow::progress::Progress;
use saintflow::store::import::{import_edgelist, EdgeListOptions};
use saintflow::store::{check, GraphStore, LabelKind, Role};

fn import(
    file: &Path,
    out: &Path,
    opts: &EdgeListOptions,
) -> Result<GraphStore, saintflow::StoreError> {
    import_edgelist(file, out, opts, false, &Progress::hidden())?;
    Ok(GraphStore::open(out).unwrap())
}

#[test]
fn comments_duplicates_self_loops_and_symmetrisation() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    std::fs::write(
        &f,
        "# a comment\n% another\n\n0 1\n1 2 0.5\n2 2\n0 1\n  3\t0  \n4 4\n",
    )
    .unwrap();
    let s = import(
        &f,
        &tmp.path().join("a.sf"),
        &EdgeListOptions {
            symmetrize: true,
            ..Default::default()
        },
    )
    .unwrap();
    check(&s).unwrap();
    assert_eq!(s.n_nodes(), 5);
    let nb: Vec<Vec<u32>> = (0..5).map(|v| s.full().neighbors(v).to_vec()).collect();
    assert_eq!(nb, vec![vec![1, 3], vec![0, 2], vec![1], vec![0], vec![]]);
    // No labels: C = 0 and no node in the split.
    assert_eq!(s.n_classes(), 0);
    assert_eq!(s.nodes_with_role(Role::None).len(), 5);
}

#[test]
fn asymmetric_input_without_symmetrize_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    std::fs::write(&f, "0 1\n1 0\n1 2\n").unwrap();
    let out = tmp.path().join("a.sf");
    let msg = err_text(import(&f, &out, &EdgeListOptions::default()));
    assert!(
        msg.contains("g.txt")
            && msg.contains("1 2 is listed but 2 1 is not")
            && msg.contains("--symmetrize"),
        "{msg}"
    );
    assert!(!out.exists());
    // Already symmetric input needs no flag.
    std::fs::write(&f, "0 1\n1 0\n1 2\n2 1\n").unwrap();
    let s = import(&f, &out, &EdgeListOptions::default()).unwrap();
    assert_eq!(s.header().n_entries, 4);
}

#[test]
fn malformed_lines_name_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    for (text, what) in [
        ("0 1\n2\n", "line 2: expected two node ids"),
        (
            "0 1\n1 -3\n",
            "line 2: second node id \"-3\" is not a non-negative integer",
        ),
        ("x 1\n", "line 1: first node id \"x\""),
        (
            "0 99999999999\n",
            "line 1: node id 99999999999 is far beyond",
        ),
    ] {
        std::fs::write(&f, text).unwrap();
        let msg = err_text(import(
            &f,
            &tmp.path().join("a.sf"),
            &EdgeListOptions {
                symmetrize: true,
                ..Default::default()
            },
        ));
        assert!(
            msg.contains("g.txt") && msg.contains(what),
            "{msg} lacks {what}"
        );
    }
    std::fs::write(&f, b"0 1\n\xff\xfe 2\n").unwrap();
    let msg = err_text(import(
        &f,
        &tmp.path().join("a.sf"),
        &EdgeListOptions {
            symmetrize: true,
            ..Default::default()
        },
    ));
    assert!(msg.contains("line 2: not valid UTF-8"), "{msg}");
    std::fs::write(&f, "0 5\n").unwrap();
    let msg = err_text(import(
        &f,
        &tmp.path().join("a.sf"),
        &EdgeListOptions {
            symmetrize: true,
            n_nodes: Some(4),
            ..Default::default()
        },
    ));
    assert!(
        msg.contains("node id 5 out of range for --nodes 4"),
        "{msg}"
    );
}

#[test]
fn features_labels_and_random_split() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 200usize;
    let f = tmp.path().join("g.txt");
    let text: String = (0..n).map(|i| format!("{i} {}\n", (i + 1) % n)).collect();
    std::fs::write(&f, text).unwrap();
    let x: Vec<f32> = (0..n * 2).map(|i| i as f32).collect();
    write_npy_f32(&tmp.path().join("x.npy"), n as u64, 2, &x);
    // Node 7 unlabelled (negative id).
    let y: Vec<i64> = (0..n as i64)
        .map(|i| if i == 7 { -1 } else { i % 5 })
        .collect();
    write_npy_i64(&tmp.path().join("y.npy"), &y);
    let opts = EdgeListOptions {
        symmetrize: true,
        features: Some(tmp.path().join("x.npy")),
        labels: Some(tmp.path().join("y.npy")),
        ..Default::default()
    };
    let s = import(&f, &tmp.path().join("a.sf"), &opts).unwrap();
    check(&s).unwrap();
    assert_eq!((s.n_features(), s.n_classes()), (2, 5));
    assert_eq!(s.header().label_kind, LabelKind::Single);
    assert_eq!(s.feature_row(10).unwrap(), &[20.0, 21.0][..]);
    assert_eq!(
        s.role(7),
        Role::None,
        "unlabelled nodes stay out of the split"
    );
    let tr = s.nodes_with_role(Role::Train).len() as f64 / n as f64;
    assert!((0.45..0.75).contains(&tr), "train fraction {tr}");
    // Labels of the wrong length are an error naming the labels file.
    write_npy_i64(&tmp.path().join("y.npy"), &[0, 1, 2]);
    let msg = err_text(import(&f, &tmp.path().join("b.sf"), &opts));
    assert!(
        msg.contains("y.npy") && msg.contains("labels shape expected (200,)"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------
// Issue 15: node ids.

#[test]
fn issue_15_an_id_far_beyond_the_edges_is_refused_before_allocating() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    let out = tmp.path().join("a.sf");
    let opts = EdgeListOptions {
        symmetrize: true,
        ..Default::default()
    };
    for big in ["4000000000", "100000000", "18446744073709551615"] {
        std::fs::write(&f, format!("0 1\n# comment\n1 {big}\n")).unwrap();
        let msg = err_text(import(&f, &out, &opts));
        assert!(
            msg.contains(&format!(
                "line 3: node id {big} is far beyond the 2 edge lines"
            )) && msg.contains("--remap"),
            "{msg}"
        );
        assert!(msg.starts_with(&f.display().to_string()), "{msg}");
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "nothing left"
        );
    }
    // Ids 1..N with every node on an edge are fine (N + 1 rows, node 0 isolated), and so
    // is an id at the bound's edge: 16 × 2 lines + 1024 − 1.
    std::fs::write(&f, "0 1\n1 1055\n").unwrap();
    assert_eq!(import(&f, &out, &opts).unwrap().n_nodes(), 1056);
    std::fs::write(&f, "0 1\n1 1056\n").unwrap();
    assert!(err_text(import(&f, &tmp.path().join("b.sf"), &opts)).contains("far beyond"));
}

#[test]
fn issue_15_string_ids_need_remap() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    std::fs::write(&f, "0 1\nalice 1\n").unwrap();
    let msg = err_text(import(
        &f,
        &tmp.path().join("a.sf"),
        &EdgeListOptions::default(),
    ));
    assert!(
        msg.contains("line 2: first node id \"alice\" is not a non-negative integer (pass --remap"),
        "{msg}"
    );
}

#[test]
fn issue_15_remap_numbers_ids_by_first_appearance_and_maps_labels_and_roles() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    // Sparse numbers and strings mixed; `7` and `07` are different ids.
    std::fs::write(
        &f,
        "# a triangle and a pendant\n4000000000 bob\nbob 7\n7 4000000000\n07 bob 0.5\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("class_map.json"),
        r#"{"bob": 1, "4000000000": 0, "7": 2, "07": 1}"#,
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("role.json"),
        r#"{"tr": [4000000000, "bob"], "va": [7], "te": ["07"]}"#,
    )
    .unwrap();
    let out = tmp.path().join("a.sf");
    let opts = EdgeListOptions {
        symmetrize: true,
        remap: true,
        labels: Some(tmp.path().join("class_map.json")),
        roles: Some(tmp.path().join("role.json")),
        ..Default::default()
    };
    let s = import(&f, &out, &opts).unwrap();
    check(&s).unwrap();
    assert_eq!(s.n_nodes(), 4);
    let ids = std::fs::read_to_string(out.join("ids.tsv")).unwrap();
    let rows: Vec<&str> = ids.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows, ["0\t4000000000", "1\tbob", "2\t7", "3\t07"]);
    // Edges follow the mapping: 3 (07) hangs off 1 (bob).
    assert_eq!(s.full().neighbors(3), &[1][..]);
    assert_eq!(s.full().neighbors(0), &[1, 2][..]);
    let roles: Vec<Role> = (0..4).map(|v| s.role(v)).collect();
    assert_eq!(roles, [Role::Train, Role::Train, Role::Val, Role::Test]);
    let saintflow::store::Labels::Single(l) = s.labels() else {
        panic!("single labels")
    };
    assert_eq!(l, &[0, 1, 2, 1][..]);
}

#[test]
fn issue_15_remap_refuses_what_it_cannot_map() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    std::fs::write(&f, "a b\nb a\n").unwrap();
    write_npy_f32(&tmp.path().join("x.npy"), 2, 1, &[1.0, 2.0]);
    std::fs::write(tmp.path().join("class_map.json"), r#"{"a": 0, "zed": 1}"#).unwrap();
    let out = tmp.path().join("a.sf");
    let msg = err_text(import(
        &f,
        &out,
        &EdgeListOptions {
            remap: true,
            features: Some(tmp.path().join("x.npy")),
            ..Default::default()
        },
    ));
    assert!(
        msg.contains("x.npy") && msg.contains("--features with --remap"),
        "{msg}"
    );
    let msg = err_text(import(
        &f,
        &out,
        &EdgeListOptions {
            remap: true,
            labels: Some(tmp.path().join("class_map.json")),
            ..Default::default()
        },
    ));
    assert!(
        msg.contains("\"zed\" does not appear in the edge list"),
        "{msg}"
    );
    assert!(!out.exists());
}

/// Raw .npy bytes: a header of `descr` and `shape`, then `data` (a liar's too).
fn npy_raw(path: &Path, descr: &str, shape: &[u64], data: &[u8]) {
    let h = saintflow::npy::NpyHeader {
        descr: descr.into(),
        fortran_order: false,
        shape: shape.to_vec(),
    };
    std::fs::write(path, [h.canonical(), data.to_vec()].concat()).unwrap();
}

/// Issue 55 item 10: an edge list's training graph is the full graph by default
/// (transductive); `--train-graph induce` keeps the edges between training nodes.
#[test]
fn issue55_train_graph_is_full_by_default_and_induced_on_request() {
    use saintflow::store::import::TrainGraphMode;
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    // A 10-node ring.
    let ring: String = (0..10).map(|v| format!("{v} {}\n", (v + 1) % 10)).collect();
    std::fs::write(&f, ring).unwrap();
    write_npy_i64(&tmp.path().join("y.npy"), &[0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
    let opts = EdgeListOptions {
        symmetrize: true,
        labels: Some(tmp.path().join("y.npy")),
        ..Default::default()
    };
    let s = import(&f, &tmp.path().join("full.sf"), &opts).unwrap();
    check(&s).unwrap();
    assert!(s.role_count(Role::Train) < 10);
    assert_eq!(s.train().indices(), s.full().indices());
    assert!(s.header().source.contains("--train-graph full"));
    let induce = EdgeListOptions {
        train_graph: TrainGraphMode::Induce,
        ..opts.clone()
    };
    let s = import(&f, &tmp.path().join("induced.sf"), &induce).unwrap();
    check(&s).unwrap();
    let train: Vec<u32> = s.nodes_with_role(Role::Train);
    let expected = (0..10u32)
        .filter(|&v| train.contains(&v) && train.contains(&((v + 1) % 10)))
        .count();
    assert_eq!(s.train().n_entries(), 2 * expected);
    let given = EdgeListOptions {
        train_graph: TrainGraphMode::Given,
        ..opts
    };
    let msg = err_text(import(&f, &tmp.path().join("given.sf"), &given));
    assert!(msg.contains("gives no training graph"), "{msg}");
}

/// Issue 55 items 1, 3 and 8 for edge lists and their .npy inputs: a count the input
/// cannot back, a line beyond the bound, a header declaring more data than the file
/// holds (or less), a directory where a file belongs and float64 values beyond float32
/// are errors naming the file, with nothing published.
#[test]
fn issue55_sizes_and_values_are_checked_before_they_are_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("g.txt");
    std::fs::write(&f, "0 1\n1 2\n2 0\n").unwrap();
    let p = |name: &str| tmp.path().join(name);
    npy_raw(&p("huge.npy"), "<f4", &[20, 1 << 40], &[0; 24]);
    npy_raw(&p("long.npy"), "<f4", &[3, 2], &[0; 28]);
    npy_raw(
        &p("big.npy"),
        "<f8",
        &[3, 1],
        &[1.0f64, 1e300, 2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    std::fs::create_dir(p("dir.npy")).unwrap();
    let dir_list = p("edges.d");
    std::fs::create_dir(&dir_list).unwrap();
    let long_line = p("long.txt");
    std::fs::write(
        &long_line,
        format!(
            "0 1\n{}\n",
            "7".repeat(saintflow::store::import::limits::MAX_LINE_BYTES + 1)
        ),
    )
    .unwrap();
    let with = |features: &str| EdgeListOptions {
        symmetrize: true,
        features: Some(p(features)),
        ..Default::default()
    };
    let cases: Vec<(&str, &Path, EdgeListOptions, &str, &str)> = vec![
        (
            "a line beyond the bound",
            &long_line,
            EdgeListOptions::default(),
            "long.txt",
            "line 2: longer than 67108864 bytes",
        ),
        (
            "a header declaring (20, 2^40)",
            &f,
            with("huge.npy"),
            "huge.npy",
            "truncated: the header declares shape [20, 1099511627776]",
        ),
        (
            "bytes after the data",
            &f,
            with("long.npy"),
            "long.npy",
            "4 bytes after the data",
        ),
        (
            "float64 beyond float32",
            &f,
            with("big.npy"),
            "big.npy",
            "row 1, column 0): 1e300 is beyond float32's range",
        ),
        (
            "float64 beyond float32, standardised (the column's variance would be inf)",
            &f,
            EdgeListOptions {
                standardize: true,
                ..with("big.npy")
            },
            "big.npy",
            "row 1, column 0): 1e300 is beyond float32's range",
        ),
        (
            "a directory as features",
            &f,
            with("dir.npy"),
            "dir.npy",
            "a directory",
        ),
        (
            "a directory as the edge list",
            &dir_list,
            EdgeListOptions::default(),
            "edges.d",
            "cannot read",
        ),
    ];
    for (what, file, opts, name, words) in cases {
        let out = p("o.sf");
        let msg = err_text(import(file, &out, &opts));
        assert!(msg.contains(name) && msg.contains(words), "{what}: {msg}");
        assert!(!out.exists(), "{what}: nothing published");
    }
    // `--nodes 4e9` beside a tiny list: exit 1 and a message, not an abort (the memory
    // limit set to 8 GiB, the campaign's, whatever this machine has).
    let out = p("n.sf");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args([
            "-q",
            "import",
            "edgelist",
            "--symmetrize",
            "--nodes",
            "4000000000",
        ])
        .arg(&f)
        .arg("-o")
        .arg(&out)
        .env(saintflow::machine::ENV, "8G")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("g.txt: the label and role tables of N = 4000000000 nodes need 44.7 GiB of memory, expected at most"),
        "{err}"
    );
    assert!(!out.exists());
}
