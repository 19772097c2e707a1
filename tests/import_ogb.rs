//! `import ogb`: the shared Cora written in OGB's csv.gz and binary layouts imports to the
//! store the GraphSAINT import gives; tiny hand-written directories cover multi-label,
//! NaN labels, several splits and every error (issue 32).

mod common;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use npyz::WriterBuilder;
use saintflow::progress::Progress;
use saintflow::store::format::NO_LABEL;
use saintflow::store::import::{
    import_graphsaint, import_ogb, GraphSaintOptions, OgbLayout, OgbOptions, OgbReport,
    TrainGraphMode,
};
use saintflow::store::{check, GraphStore, LabelKind, Labels, Role};

/// Writes `lines` (each followed by a newline) gzip-compressed to `path`.
fn gz(path: &Path, lines: impl IntoIterator<Item = impl AsRef<str>>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = BufWriter::new(File::create(path).unwrap());
    let mut z = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    for l in lines {
        writeln!(z, "{}", l.as_ref()).unwrap();
    }
    z.finish().unwrap().flush().unwrap();
}

fn ogb(dir: &Path, out: &Path, split: Option<&str>) -> Result<(OgbReport, GraphStore), String> {
    let opts = OgbOptions {
        split: split.map(str::to_string),
    };
    let r = import_ogb(dir, out, &opts, false, &Progress::hidden()).map_err(|e| e.to_string())?;
    let s = GraphStore::open(out).map_err(|e| e.to_string())?;
    check(&s).map_err(|e| e.to_string())?;
    Ok((r, s))
}

/// The error of an import that must fail.
fn fails(dir: &Path, out: &Path, split: Option<&str>) -> String {
    match ogb(dir, out, split) {
        Ok(_) => panic!("expected an error, got a store"),
        Err(e) => e,
    }
}

/// The undirected edges `u < v` of a store's full graph.
fn undirected(s: &GraphStore) -> Vec<(u32, u32)> {
    let g = s.full();
    (0..s.n_nodes() as u32)
        .flat_map(|u| {
            g.neighbors(u)
                .iter()
                .filter(move |&&v| u < v)
                .map(move |&v| (u, v))
        })
        .collect()
}

/// The ids of the nodes with role `r`.
fn with_role(s: &GraphStore, r: Role) -> Vec<String> {
    s.nodes_with_role(r).iter().map(|v| v.to_string()).collect()
}

/// Writes the split of `s` as `split/<name>/{train,valid,test}.csv.gz` under `dir`.
fn write_split(dir: &Path, name: &str, s: &GraphStore) {
    let d = dir.join("split").join(name);
    gz(&d.join("train.csv.gz"), with_role(s, Role::Train));
    gz(&d.join("valid.csv.gz"), with_role(s, Role::Val));
    gz(&d.join("test.csv.gz"), with_role(s, Role::Test));
}

/// Single-label class of `v` as OGB writes it (`nan` for none).
fn class_text(s: &GraphStore, v: usize) -> String {
    match s.labels() {
        Labels::Single(l) if l[v] != NO_LABEL => l[v].to_string(),
        _ => "nan".into(),
    }
}

/// `s` in OGB's csv.gz layout.
fn write_csv_layout(dir: &Path, s: &GraphStore) {
    let raw = dir.join("raw");
    let (n, f) = (s.n_nodes(), s.n_features());
    let edges = undirected(s);
    gz(&raw.join("num-node-list.csv.gz"), [n.to_string()]);
    gz(&raw.join("num-edge-list.csv.gz"), [edges.len().to_string()]);
    gz(
        &raw.join("edge.csv.gz"),
        edges.iter().map(|(u, v)| format!("{u},{v}")),
    );
    gz(
        &raw.join("node-feat.csv.gz"),
        s.features().chunks(f).map(|row| {
            row.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }),
    );
    gz(
        &raw.join("node-label.csv.gz"),
        (0..n).map(|v| class_text(s, v)),
    );
    gz(&raw.join("node_year.csv.gz"), (0..n).map(|_| "2020"));
    write_split(dir, "planetoid", s);
}

/// `s` in OGB's binary layout (`raw/data.npz`, `raw/node-label.npz`).
fn write_binary_layout(dir: &Path, s: &GraphStore) {
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw).unwrap();
    let (n, f) = (s.n_nodes() as u64, s.n_features() as u64);
    let edges = undirected(s);
    let e = edges.len() as u64;
    let mut npz = npyz::npz::NpzWriter::create(raw.join("data.npz")).unwrap();
    let mut w = npz
        .array::<i64>("edge_index", Default::default())
        .unwrap()
        .default_dtype()
        .shape(&[2, e])
        .begin_nd()
        .unwrap();
    w.extend(edges.iter().map(|&(u, _)| i64::from(u))).unwrap();
    w.extend(edges.iter().map(|&(_, v)| i64::from(v))).unwrap();
    w.finish().unwrap();
    let mut w = npz
        .array::<f32>("node_feat", Default::default())
        .unwrap()
        .default_dtype()
        .shape(&[n, f])
        .begin_nd()
        .unwrap();
    w.extend(s.features().iter().copied()).unwrap();
    w.finish().unwrap();
    for (name, c) in [("num_nodes_list", n), ("num_edges_list", e)] {
        let mut w = npz
            .array::<i64>(name, Default::default())
            .unwrap()
            .default_dtype()
            .shape(&[1])
            .begin_nd()
            .unwrap();
        w.push(&(c as i64)).unwrap();
        w.finish().unwrap();
    }
    drop(npz);
    let mut npz = npyz::npz::NpzWriter::create(raw.join("node-label.npz")).unwrap();
    let mut w = npz
        .array::<f64>("node_label", Default::default())
        .unwrap()
        .default_dtype()
        .shape(&[n, 1])
        .begin_nd()
        .unwrap();
    let Labels::Single(l) = s.labels() else {
        panic!("Cora is single-label")
    };
    w.extend(l.iter().map(|&c| match c {
        NO_LABEL => f64::NAN,
        c => f64::from(c),
    }))
    .unwrap();
    w.finish().unwrap();
    drop(npz);
    write_split(dir, "planetoid", s);
}

fn assert_same_store(a: &GraphStore, b: &GraphStore) {
    let (ha, hb) = (a.header(), b.header());
    assert_eq!(
        (ha.n_nodes, ha.n_entries, ha.n_train_entries),
        (hb.n_nodes, hb.n_entries, hb.n_train_entries)
    );
    assert_eq!(
        (ha.n_features, ha.n_classes, ha.label_kind),
        (hb.n_features, hb.n_classes, hb.label_kind)
    );
    assert_eq!(a.full().offsets(), b.full().offsets());
    assert_eq!(a.full().indices(), b.full().indices());
    assert_eq!(a.train().offsets(), b.train().offsets());
    assert_eq!(a.train().indices(), b.train().indices());
    let bits = |s: &GraphStore| s.features().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(bits(a) == bits(b), "features differ bit for bit");
    assert_eq!(
        a.section_bytes(saintflow::store::SectionId::Labels),
        b.section_bytes(saintflow::store::SectionId::Labels)
    );
    assert_eq!(a.roles(), b.roles());
}

#[test]
#[ignore = "needs ../shared/data/cora: cargo test -- --ignored shared_data_"]
fn shared_data_cora_in_both_ogb_layouts_matches_the_graphsaint_import() {
    let dir = common::require_shared_dataset("cora");
    let tmp = tempfile::tempdir().unwrap();
    let gs_out = tmp.path().join("gs.sf");
    // The OGB import induces the training graph on the training nodes: compare with the
    // GraphSAINT import that does the same.
    let opts = GraphSaintOptions {
        train_graph: TrainGraphMode::Induce,
        ..GraphSaintOptions::default()
    };
    import_graphsaint(&dir, &gs_out, &opts, false, &Progress::hidden()).unwrap();
    let gs = GraphStore::open(&gs_out).unwrap();
    assert_eq!(gs.n_nodes(), 2708);

    let csv_dir = tmp.path().join("ogbn-cora");
    write_csv_layout(&csv_dir, &gs);
    let (r, s) = ogb(&csv_dir, &tmp.path().join("csv.sf"), None).unwrap();
    assert_eq!(r.layout, OgbLayout::Csv);
    assert_eq!(r.split, "planetoid");
    assert_eq!(r.report.entries, 2 * 5278);
    assert!(
        r.notes.iter().any(|n| n.contains("node_year.csv.gz")),
        "{:?}",
        r.notes
    );
    assert_same_store(&gs, &s);

    let bin_dir = tmp.path().join("ogbn-cora-bin");
    write_binary_layout(&bin_dir, &gs);
    let (r, s) = ogb(&bin_dir, &tmp.path().join("bin.sf"), None).unwrap();
    assert_eq!(r.layout, OgbLayout::Binary);
    assert_same_store(&gs, &s);
}

// ---------------------------------------------------------------- tiny directories

/// A 6-node ring 0-1-2-3-4-5-0 with one self loop and one duplicate, 2 features, the
/// given label rows and one split `only` (train 0 1 2, valid 3, test 4).
fn tiny(dir: &Path, labels: &[&str]) {
    let raw = dir.join("raw");
    gz(&raw.join("num-node-list.csv.gz"), ["6"]);
    gz(&raw.join("num-edge-list.csv.gz"), ["8"]);
    gz(
        &raw.join("edge.csv.gz"),
        ["0,1", "1,2", "2,3", "3,4", "4,5", "5,0", "2,2", "1,0"],
    );
    gz(
        &raw.join("node-feat.csv.gz"),
        ["0.5,1", "1.5,2", "2.5,3", "3.5,4", "4.5,5", "5.5,6"],
    );
    gz(&raw.join("node-label.csv.gz"), labels);
    let d = dir.join("split/only");
    gz(&d.join("train.csv.gz"), ["0", "1", "2"]);
    gz(&d.join("valid.csv.gz"), ["3"]);
    gz(&d.join("test.csv.gz"), ["4"]);
}

const SINGLE: [&str; 6] = ["0", "2", "1", "0", "1", "nan"];

#[test]
fn tiny_single_label_with_nan_loops_and_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    let (r, s) = ogb(tmp.path(), &tmp.path().join("o.sf"), None).unwrap();
    assert_eq!(r.report.entries, 12, "6 undirected edges both ways");
    assert_eq!((r.report.self_loops, r.report.duplicates), (1, 2));
    assert_eq!(s.full().neighbors(0), &[1, 5]);
    assert_eq!(s.n_features(), 2);
    assert_eq!(s.feature_row(5).unwrap(), &[5.5, 6.0]);
    assert_eq!(s.n_classes(), 3);
    let Labels::Single(l) = s.labels() else {
        panic!()
    };
    assert_eq!(l, &[0, 2, 1, 0, 1, NO_LABEL]);
    assert_eq!(s.role(5), Role::None);
    assert_eq!(s.role(3), Role::Val);
    // Training graph induced on 0 1 2: edges 0-1 and 1-2.
    assert_eq!(s.train().n_entries(), 4);
}

#[test]
fn tiny_multi_label_with_nan_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(
        tmp.path(),
        &["1,0,1", "0,1,nan", "1,1,1", "0,0,1", "0,0,0", "nan,nan,nan"],
    );
    let (r, s) = ogb(tmp.path(), &tmp.path().join("o.sf"), None).unwrap();
    let h = s.header();
    assert_eq!((h.label_kind, h.n_classes), (LabelKind::Multi, 3));
    let labels = s.labels();
    assert!(labels.has_class(0, 0) && !labels.has_class(0, 1) && labels.has_class(0, 2));
    assert!(
        labels.has_class(1, 1) && !labels.has_class(1, 2),
        "nan task stored as 0"
    );
    // Node 4 is in the test part with no positive task: left out, with a note.
    assert_eq!(s.role(4), Role::None);
    assert_eq!(s.role_count(Role::Test), 0);
    assert!(
        r.notes.iter().any(|n| n.contains("1 nodes have some")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("1 split nodes have no positive")),
        "{:?}",
        r.notes
    );
}

#[test]
fn several_splits_need_a_name() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    let d = tmp.path().join("split/other");
    gz(&d.join("train.csv.gz"), ["4"]);
    gz(&d.join("valid.csv.gz"), ["0"]);
    gz(&d.join("test.csv.gz"), ["1", "2"]);
    let e = fails(tmp.path(), &tmp.path().join("a.sf"), None);
    assert!(
        e.contains("several splits") && e.contains("only, other"),
        "{e}"
    );
    let e = fails(tmp.path(), &tmp.path().join("b.sf"), Some("nope"));
    assert!(
        e.contains("no split named \"nope\"") && e.contains("only, other"),
        "{e}"
    );
    let (r, s) = ogb(tmp.path(), &tmp.path().join("c.sf"), Some("other")).unwrap();
    assert_eq!(r.split, "other");
    assert_eq!(
        (s.role(4), s.role(0), s.role(2), s.role(3)),
        (Role::Train, Role::Val, Role::Test, Role::None)
    );
}

/// Each broken directory: (what to break, the file the error must name, words it must hold).
#[test]
fn each_error_names_file_and_line() {
    type Break = fn(&Path);
    let cases: [(&str, Break, &str, &str); 10] = [
        (
            "ragged feature row",
            |d| {
                gz(
                    &d.join("raw/node-feat.csv.gz"),
                    ["0,1", "1,2", "2", "3,4", "4,5", "5,6"],
                )
            },
            "node-feat.csv.gz",
            "line 3: ragged row: 1 features, expected 2",
        ),
        (
            "edge id out of range",
            |d| {
                gz(
                    &d.join("raw/edge.csv.gz"),
                    ["0,1", "1,2", "2,3", "3,4", "4,6", "5,0", "2,2", "1,0"],
                )
            },
            "edge.csv.gz",
            "line 5: destination node 6 out of range",
        ),
        (
            "edge count mismatch",
            |d| gz(&d.join("raw/num-edge-list.csv.gz"), ["9"]),
            "edge.csv.gz",
            "8 edges, expected 9",
        ),
        (
            "node count mismatch (labels)",
            |d| gz(&d.join("raw/node-label.csv.gz"), ["0", "1", "0", "1", "0"]),
            "node-label.csv.gz",
            "5 label rows, expected one per node, N = 6",
        ),
        (
            "feature rows beyond N",
            |d| {
                gz(
                    &d.join("raw/node-feat.csv.gz"),
                    ["0,1", "1,2", "2,3", "3,4", "4,5", "5,6", "6,7"],
                )
            },
            "node-feat.csv.gz",
            "line 7: more feature rows than the N = 6 nodes",
        ),
        (
            "split names a missing node",
            |d| gz(&d.join("split/only/test.csv.gz"), ["4", "6"]),
            "test.csv.gz",
            "line 2: node 6 out of range",
        ),
        (
            "split parts overlap",
            |d| gz(&d.join("split/only/valid.csv.gz"), ["3", "1"]),
            "valid.csv.gz",
            "line 2: node 1 is also in train.csv.gz",
        ),
        (
            "split node without a label",
            |d| gz(&d.join("split/only/test.csv.gz"), ["5"]),
            "node-label.csv.gz",
            "node 5 is in split \"only\" (Test) but its label is nan",
        ),
        (
            "heterogeneous layout",
            |d| {
                gz(
                    &d.join("raw/relations/author___writes___paper/edge.csv.gz"),
                    ["0,0"],
                )
            },
            "relations",
            "heterogeneous dataset",
        ),
        (
            "bad label",
            |d| {
                gz(
                    &d.join("raw/node-label.csv.gz"),
                    ["0", "x", "0", "1", "0", "1"],
                )
            },
            "node-label.csv.gz",
            "line 2: label \"x\" is not a number",
        ),
    ];
    for (what, brk, file, words) in cases {
        let tmp = tempfile::tempdir().unwrap();
        tiny(tmp.path(), &SINGLE);
        brk(tmp.path());
        let out = tmp.path().join("o.sf");
        let e = fails(tmp.path(), &out, None);
        assert!(e.contains(file) && e.contains(words), "{what}: {e}");
        assert!(!out.exists(), "{what}: nothing published");
    }
}

#[test]
fn graph_property_datasets_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    gz(&tmp.path().join("raw/num-node-list.csv.gz"), ["3", "3"]);
    let e = fails(tmp.path(), &tmp.path().join("o.sf"), None);
    assert!(
        e.contains("num-node-list.csv.gz") && e.contains("graph-property"),
        "{e}"
    );
}

#[test]
fn the_command_lists_splits_notes_extra_files_and_writes_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    let d = tmp.path().join("split/other");
    gz(&d.join("train.csv.gz"), ["4"]);
    gz(&d.join("valid.csv.gz"), ["0"]);
    gz(&d.join("test.csv.gz"), ["1"]);
    gz(&tmp.path().join("raw/node_year.csv.gz"), ["1"; 6]);
    let bin = env!("CARGO_BIN_EXE_saintflow");
    let out = tmp.path().join("o.sf");
    let run = |extra: &[&str]| {
        std::process::Command::new(bin)
            .args(["-q", "import", "ogb"])
            .arg(tmp.path())
            .arg("-o")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let r = run(&[]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("choose one with --split: only, other"),
        "{err}"
    );
    assert!(!out.exists());
    let r = run(&["--split", "only"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(err.contains("note: raw/node_year.csv.gz ignored"), "{err}");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.contains("6 nodes, 6 undirected edges"), "{stdout}");
    check(&GraphStore::open(&out).unwrap()).unwrap();
}
