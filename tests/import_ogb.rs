//! `import ogb`: the shared Cora written in OGB's csv.gz and binary layouts imports to the
//! store the GraphSAINT import gives; tiny hand-written directories cover multi-label,
//! NaN labels, several splits and every error (issue 32).

mod common;

use common::gz;

use std::fs::File;
use std::io::Write;
use std::path::Path;

use npyz::WriterBuilder;
use saintflow::progress::Progress;
use saintflow::store::format::NO_LABEL;
use saintflow::store::import::{
    import_graphsaint, import_ogb, GraphSaintOptions, OgbLayout, OgbOptions, OgbReport,
    TrainGraphMode,
};
use saintflow::store::{check, GraphStore, LabelKind, Labels, Role};

fn ogb(dir: &Path, out: &Path, split: Option<&str>) -> Result<(OgbReport, GraphStore), String> {
    let opts = OgbOptions {
        split: split.map(str::to_string),
        ..OgbOptions::default()
    };
    ogb_with(dir, out, &opts)
}

fn ogb_with(dir: &Path, out: &Path, opts: &OgbOptions) -> Result<(OgbReport, GraphStore), String> {
    let r = import_ogb(dir, out, opts, false, &Progress::hidden()).map_err(|e| e.to_string())?;
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
    // The OGB import's training graph is the full graph by default (transductive, issue
    // 55): compare with the GraphSAINT import that does the same, and the OGB import with
    // --train-graph induce with GraphSAINT's induced one below.
    let opts = GraphSaintOptions {
        train_graph: TrainGraphMode::Full,
        ..GraphSaintOptions::default()
    };
    import_graphsaint(&dir, &gs_out, &opts, false, &Progress::hidden()).unwrap();
    let gs = GraphStore::open(&gs_out).unwrap();
    assert_eq!(gs.n_nodes(), 2708);
    assert_eq!(gs.train().n_entries(), gs.full().n_entries());

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

    // Induced on both sides: the same store again.
    let induced_out = tmp.path().join("gs-induced.sf");
    let opts = GraphSaintOptions {
        train_graph: TrainGraphMode::Induce,
        ..GraphSaintOptions::default()
    };
    import_graphsaint(&dir, &induced_out, &opts, false, &Progress::hidden()).unwrap();
    let gs = GraphStore::open(&induced_out).unwrap();
    let induce = OgbOptions {
        train_graph: TrainGraphMode::Induce,
        ..OgbOptions::default()
    };
    let (_, s) = ogb_with(&csv_dir, &tmp.path().join("csv-induced.sf"), &induce).unwrap();
    assert_same_store(&gs, &s);
    assert!(s.train().n_entries() < s.full().n_entries());
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

/// A damaged copy of [`tiny`]: what it is, how it breaks the directory, the file the error
/// must name and the words it must say.
type Refusal = (&'static str, fn(&Path), &'static str, &'static str);

/// Each case breaks its own copy of [`tiny`]; the import must be refused naming the file and
/// saying the words, and publish nothing.
fn each_refused(cases: &[Refusal]) {
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
    // The training graph is the full graph by default (issue 55: transductive).
    assert_eq!(s.train().offsets(), s.full().offsets());
    assert_eq!(s.train().indices(), s.full().indices());
}

#[test]
fn issue55_train_graph_is_full_by_default_and_induced_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    let (_, s) = ogb(tmp.path(), &tmp.path().join("full.sf"), None).unwrap();
    assert_eq!(s.train().n_entries(), 12);
    assert_eq!(s.header().train_graph, saintflow::store::TrainGraph::Given);
    assert!(
        s.header().source.contains("--train-graph full"),
        "{}",
        s.header().source
    );
    assert!(saintflow::store::import::warnings(&s).is_empty());
    let induce = OgbOptions {
        train_graph: TrainGraphMode::Induce,
        ..OgbOptions::default()
    };
    let (_, s) = ogb_with(tmp.path(), &tmp.path().join("induced.sf"), &induce).unwrap();
    // Induced on 0 1 2: edges 0-1 and 1-2.
    assert_eq!(s.train().n_entries(), 4);
    assert_eq!(
        s.header().train_graph,
        saintflow::store::TrainGraph::Induced
    );
    // 2 of 6 edges: a third, above the 10 % warning threshold.
    assert!(saintflow::store::import::warnings(&s).is_empty());
    let given = OgbOptions {
        train_graph: TrainGraphMode::Given,
        ..OgbOptions::default()
    };
    let Err(e) = ogb_with(tmp.path(), &tmp.path().join("given.sf"), &given) else {
        panic!("--train-graph given imported")
    };
    assert!(e.contains("gives no training graph"), "{e}");
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
    let cases: [Refusal; 10] = [
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
    each_refused(&cases);
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

// ---------------------------------------------------------------- issue 55

/// Every gzip file `tiny` writes, relative to its directory.
const TINY_FILES: [&str; 8] = [
    "raw/num-node-list.csv.gz",
    "raw/num-edge-list.csv.gz",
    "raw/edge.csv.gz",
    "raw/node-feat.csv.gz",
    "raw/node-label.csv.gz",
    "split/only/train.csv.gz",
    "split/only/valid.csv.gz",
    "split/only/test.csv.gz",
];

/// The bytes of `lines` as one gzip member.
fn gz_bytes(lines: &[&str]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for l in lines {
        writeln!(z, "{l}").unwrap();
    }
    z.finish().unwrap()
}

/// Issue 55 item 1: a read error is never the end of the input. Every gzip file of a
/// dataset, cut at every offset (0 included: an empty file), is an error naming that
/// file, and nothing is published; the whole file imports. A single-member stream cut
/// anywhere lacks its trailer (CRC-32 and length), so no cut can pass for a whole file.
#[test]
fn issue55_every_gzip_file_cut_at_every_offset_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("ds");
    tiny(&d, &SINGLE);
    let out = tmp.path().join("o.sf");
    let mut cuts = 0;
    for f in TINY_FILES {
        let path = d.join(f);
        let whole = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        for cut in 0..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            let e = fails(&d, &out, None);
            assert!(
                e.contains(name),
                "{f} cut at {cut} of {} bytes: the error must name it: {e}",
                whole.len()
            );
            assert!(!out.exists(), "{f} cut at {cut}: nothing published");
            cuts += 1;
        }
        std::fs::write(&path, &whole).unwrap();
    }
    assert!(cuts > 200, "{cuts} cuts");
    ogb(&d, &out, None).unwrap();
}

/// Concatenated gzip members are one stream (as `gzip -d` and pandas read them); bytes
/// after the last member are an error. A cut exactly at a member boundary leaves a valid
/// gzip file of the first member's lines: gzip records no total length, so nothing can
/// tell it from a file written that way, and it is read as one (the only cut that passes).
#[test]
fn issue55_concatenated_members_trailing_garbage_and_cuts_between_members() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("ds");
    tiny(&d, &SINGLE);
    let train = d.join("split/only/train.csv.gz");
    let first = gz_bytes(&["0", "1"]);
    let whole = [first.clone(), gz_bytes(&["2"])].concat();
    std::fs::write(&train, &whole).unwrap();
    let out = tmp.path().join("o.sf");
    let (_, s) = ogb(&d, &out, None).unwrap();
    assert_eq!(s.nodes_with_role(Role::Train), [0, 1, 2]);
    for cut in 0..whole.len() {
        std::fs::remove_dir_all(&out).ok();
        std::fs::write(&train, &whole[..cut]).unwrap();
        match ogb(&d, &out, None) {
            Ok((_, s)) => {
                assert_eq!(cut, first.len(), "only the member boundary passes");
                assert_eq!(s.nodes_with_role(Role::Train), [0, 1]);
            }
            Err(e) => {
                assert_ne!(cut, first.len());
                assert!(e.contains("train.csv.gz"), "cut at {cut}: {e}");
            }
        }
    }
    for tail in [&b"garbage"[..], &[0u8; 8], &[0x1f, 0x8b]] {
        std::fs::remove_dir_all(&out).ok();
        std::fs::write(&train, [whole.as_slice(), tail].concat()).unwrap();
        let e = fails(&d, &out, None);
        assert!(
            e.contains("train.csv.gz") && e.contains("gzip"),
            "{tail:?}: {e}"
        );
    }
}

/// Issue 55 item 1's examples: a split file in plain text or a directory in its place
/// gave a store with zero test (or training) nodes and exit 0.
#[test]
fn issue55_plain_text_directories_and_empty_parts_are_errors_or_notes() {
    let cases: [Refusal; 6] = [
        (
            "plain-text split",
            |d| std::fs::write(d.join("split/only/train.csv.gz"), "0\n1\n2\n").unwrap(),
            "train.csv.gz",
            "not gzip-compressed",
        ),
        (
            "directory as split file",
            |d| {
                let p = d.join("split/only/test.csv.gz");
                std::fs::remove_file(&p).unwrap();
                std::fs::create_dir(&p).unwrap();
            },
            "test.csv.gz",
            "a directory, expected a gzip-compressed file",
        ),
        (
            "directory as optional features",
            |d| {
                let p = d.join("raw/node-feat.csv.gz");
                std::fs::remove_file(&p).unwrap();
                std::fs::create_dir(&p).unwrap();
            },
            "node-feat.csv.gz",
            "a directory",
        ),
        (
            "empty label file",
            |d| std::fs::write(d.join("raw/node-label.csv.gz"), "").unwrap(),
            "node-label.csv.gz",
            "an empty file",
        ),
        (
            "empty training part",
            |d| gz(&d.join("split/only/train.csv.gz"), [""; 0]),
            "train.csv.gz",
            "no training nodes",
        ),
        (
            "plain-text count",
            |d| std::fs::write(d.join("raw/num-node-list.csv.gz"), "6\n").unwrap(),
            "num-node-list.csv.gz",
            "not gzip-compressed (starts with \"6\\n\"",
        ),
    ];
    each_refused(&cases);
    // An empty test part and no features import, each with a note.
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    gz(&tmp.path().join("split/only/test.csv.gz"), [""; 0]);
    std::fs::remove_file(tmp.path().join("raw/node-feat.csv.gz")).unwrap();
    let (r, s) = ogb(tmp.path(), &tmp.path().join("o.sf"), None).unwrap();
    assert_eq!((s.role_count(Role::Test), s.n_features()), (0, 0));
    let notes = r.notes.join("\n");
    assert!(notes.contains("no node features (F = 0)"), "{notes}");
    let warnings = saintflow::store::import::warnings(&s).join("\n");
    assert!(
        warnings.contains("no test nodes: test metrics will not be measured"),
        "{warnings}"
    );
}

/// Writes an npz of the given members (name, raw .npy bytes), deflated.
fn raw_npz(path: &Path, members: &[(&str, Vec<u8>)]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut z = npyz::zip::ZipWriter::new(File::create(path).unwrap());
    let opts = npyz::zip::write::FileOptions::default()
        .compression_method(npyz::zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        z.start_file(format!("{name}.npy"), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// A little-endian .npy of `descr` and `shape` holding `data` (any length: a liar's
/// header too).
fn npy_bytes(descr: &str, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let h = saintflow::npy::NpyHeader {
        descr: descr.into(),
        fortran_order: false,
        shape: shape.to_vec(),
    };
    [h.canonical(), data.to_vec()].concat()
}

fn f64s(x: &[f64]) -> Vec<u8> {
    x.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `tiny`'s graph in the binary layout, with `feat` as node_feat (6 × 2 f64) and
/// `label` as node-label.npz's member.
fn tiny_binary(dir: &Path, feat: Vec<u8>, label: Vec<u8>) {
    let edges: [(f64, f64); 8] = [
        (0., 1.),
        (1., 2.),
        (2., 3.),
        (3., 4.),
        (4., 5.),
        (5., 0.),
        (2., 2.),
        (1., 0.),
    ];
    let ei: Vec<f64> = edges
        .iter()
        .map(|e| e.0)
        .chain(edges.iter().map(|e| e.1))
        .collect();
    raw_npz(
        &dir.join("raw/data.npz"),
        &[
            ("edge_index", npy_bytes("<f8", &[2, 8], &f64s(&ei))),
            ("node_feat", feat),
            ("num_nodes_list", npy_bytes("<f8", &[1], &f64s(&[6.0]))),
            ("num_edges_list", npy_bytes("<f8", &[1], &f64s(&[8.0]))),
        ],
    );
    raw_npz(&dir.join("raw/node-label.npz"), &[("node_label", label)]);
    let d = dir.join("split/only");
    gz(&d.join("train.csv.gz"), ["0", "1", "2"]);
    gz(&d.join("valid.csv.gz"), ["3"]);
    gz(&d.join("test.csv.gz"), ["4"]);
}

fn good_feat() -> Vec<u8> {
    npy_bytes("<f8", &[6, 2], &f64s(&[0.5; 12]))
}

fn good_label() -> Vec<u8> {
    npy_bytes("<f8", &[6, 1], &f64s(&[0., 2., 1., 0., 1., f64::NAN]))
}

/// Issue 55 items 3 and 8: counts and values are checked before they are trusted.
#[test]
fn issue55_counts_beyond_the_input_and_values_beyond_the_store_are_refused() {
    // The binary layout as written imports.
    let tmp = tempfile::tempdir().unwrap();
    tiny_binary(tmp.path(), good_feat(), good_label());
    let (r, s) = ogb(tmp.path(), &tmp.path().join("ok.sf"), None).unwrap();
    assert_eq!(
        (r.layout, s.n_nodes(), s.n_features()),
        (OgbLayout::Binary, 6, 2)
    );

    type Case = (&'static str, Vec<u8>, Vec<u8>, &'static str, &'static str);
    let cases: Vec<Case> = vec![
        (
            "npz header declaring (6, 2^40) labels",
            good_feat(),
            npy_bytes("<f8", &[6, 1 << 40], &f64s(&[0.0; 6])),
            "node-label.npz",
            "member node_label: truncated: the header declares shape [6, 1099511627776]",
        ),
        (
            "npz header declaring (20, 2^40) features",
            npy_bytes("<f8", &[20, 1 << 40], &f64s(&[0.0; 12])),
            good_label(),
            "data.npz",
            "member node_feat: truncated",
        ),
        (
            "bytes after a member's data",
            npy_bytes("<f8", &[6, 2], &f64s(&[0.5; 13])),
            good_label(),
            "data.npz",
            "8 bytes after the data",
        ),
        (
            "float64 features of 1e300",
            npy_bytes(
                "<f8",
                &[6, 2],
                &f64s(&[1.0, 2.0, 1e300, 0., 0., 0., 0., 0., 0., 0., 0., 0.]),
            ),
            good_label(),
            "data.npz",
            "row 1, column 0: 1e300 is beyond float32's range",
        ),
        (
            "a class beyond the store's limit",
            good_feat(),
            npy_bytes("<f8", &[6, 1], &f64s(&[0., 2e9, 1., 0., 1., 0.])),
            "node-label.npz",
            "class 2000000000 too large",
        ),
    ];
    for (what, feat, label, file, words) in cases {
        let tmp = tempfile::tempdir().unwrap();
        tiny_binary(tmp.path(), feat, label);
        let out = tmp.path().join("o.sf");
        let e = fails(tmp.path(), &out, None);
        assert!(e.contains(file) && e.contains(words), "{what}: {e}");
        assert!(!out.exists(), "{what}: nothing published");
    }

    // csv.gz: a node count beyond what the label file can hold, a line beyond the bound,
    // features and classes the store cannot hold.
    let cases: [Refusal; 4] = [
        (
            "num-node-list of 4e9 beside tiny files",
            |d| gz(&d.join("raw/num-node-list.csv.gz"), ["4000000000"]),
            "num-node-list.csv.gz",
            "N = 4000000000 nodes, but",
        ),
        (
            "a line longer than the bound",
            |d| {
                let long = "1".repeat(saintflow::store::import::limits::MAX_LINE_BYTES + 1);
                gz(&d.join("raw/node-label.csv.gz"), [long.as_str()])
            },
            "node-label.csv.gz",
            "line 1: a line longer than 67108864 bytes",
        ),
        (
            "text features beyond float32",
            |d| {
                gz(
                    &d.join("raw/node-feat.csv.gz"),
                    ["0,1", "1,2", "2,1e300", "3,4", "4,5", "5,6"],
                )
            },
            "node-feat.csv.gz",
            "line 3: column 1: 1e300 is not finite",
        ),
        (
            "a class beyond the store's limit",
            |d| {
                gz(
                    &d.join("raw/node-label.csv.gz"),
                    ["0", "2", "1", "1e10", "1", "0"],
                )
            },
            "node-label.csv.gz",
            "line 4: class 10000000000 too large",
        ),
    ];
    each_refused(&cases);
}

/// The command: `--train-graph induce` on a split whose training graph is a small part of
/// the full one warns (issue 55 item 10), a stray class is reported, `given` is a usage
/// error, and a count too large for the memory limit is an error (exit 1), not an abort.
#[test]
fn issue55_the_command_warns_about_small_training_graphs_and_stray_classes() {
    let tmp = tempfile::tempdir().unwrap();
    // A 40-node ring, training nodes 0 and 1 only: induced, 1 of 40 edges.
    let raw = tmp.path().join("raw");
    gz(&raw.join("num-node-list.csv.gz"), ["40"]);
    gz(&raw.join("num-edge-list.csv.gz"), ["40"]);
    let ring: Vec<String> = (0..40).map(|v| format!("{v},{}", (v + 1) % 40)).collect();
    gz(&raw.join("edge.csv.gz"), &ring);
    // Classes 0..2, and one stray 9.
    let labels: Vec<String> = (0..40)
        .map(|v| {
            if v == 7 {
                "9".into()
            } else {
                (v % 3).to_string()
            }
        })
        .collect();
    gz(&raw.join("node-label.csv.gz"), &labels);
    let d = tmp.path().join("split/only");
    gz(&d.join("train.csv.gz"), ["0", "1"]);
    gz(&d.join("valid.csv.gz"), ["2"]);
    gz(&d.join("test.csv.gz"), ["3"]);
    let bin = env!("CARGO_BIN_EXE_saintflow");
    let run = |out: &str, extra: &[&str], memory: Option<&str>| {
        let mut c = std::process::Command::new(bin);
        c.args(["-q", "import", "ogb"])
            .arg(tmp.path())
            .arg("-o")
            .arg(tmp.path().join(out))
            .args(extra);
        if let Some(m) = memory {
            c.env("SAINTFLOW_MEMORY_LIMIT", m);
        }
        c.output().unwrap()
    };
    let r = run("induced.sf", &["--train-graph", "induce"], None);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(
        err.contains("warning: the training graph holds 1 of the full graph's 40 undirected edges (2.50 %, under 10 %)")
            && err.contains("--train-graph full"),
        "{err}"
    );
    assert!(
        err.contains(
            "warning: labels: 6 of the C = 10 classes (0..9) have no node: 3, 4, 5, 6, 7, 8"
        ) && err.contains("class 9 has 1 node(s)"),
        "{err}"
    );
    let r = run("full.sf", &[], None);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(!err.contains("training graph holds"), "{err}");
    assert!(err.contains("C = 10 classes"), "{err}");
    let r = run("given.sf", &["--train-graph", "given"], None);
    assert_eq!(
        r.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    // 40 nodes × 12 bytes of tables do not fit in 100 bytes.
    let r = run("small.sf", &[], Some("100"));
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "num-node-list.csv.gz: the label and role tables of N = 40 nodes need 480 B of memory"
        ),
        "{err}"
    );
    assert!(!tmp.path().join("small.sf").exists());
}

/// A count file of many counts is refused without holding them (issue 55: no table
/// sized by the input), in both layouts.
#[test]
fn issue55_many_counts_are_refused_without_a_table() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), &SINGLE);
    let many: Vec<&str> = vec!["1"; 100_000];
    gz(&tmp.path().join("raw/num-edge-list.csv.gz"), &many);
    let e = fails(tmp.path(), &tmp.path().join("o.sf"), None);
    assert!(
        e.contains("num-edge-list.csv.gz") && e.contains("100000 counts: a graph-property dataset"),
        "{e}"
    );
    let tmp = tempfile::tempdir().unwrap();
    tiny_binary(tmp.path(), good_feat(), good_label());
    // num_nodes_list replaced by 3 counts: data.npz rewritten with it.
    let members = [(
        "num_nodes_list",
        npy_bytes("<f8", &[3], &f64s(&[6.0, 2.0, 2.0])),
    )];
    let dir = tempfile::tempdir().unwrap();
    let rebuilt = dir.path().join("data.npz");
    let mut all: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut zip =
        npyz::zip::ZipArchive::new(File::open(tmp.path().join("raw/data.npz")).unwrap()).unwrap();
    for name in ["edge_index", "node_feat", "num_edges_list"] {
        let mut m = zip.by_name(&format!("{name}.npy")).unwrap();
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut m, &mut b).unwrap();
        all.push((name, b));
    }
    all.extend(members.iter().cloned());
    raw_npz(&rebuilt, &all);
    std::fs::copy(&rebuilt, tmp.path().join("raw/data.npz")).unwrap();
    let e = fails(tmp.path(), &tmp.path().join("o.sf"), None);
    assert!(
        e.contains("data.npz") && e.contains("member num_nodes_list: 3 counts"),
        "{e}"
    );
}
