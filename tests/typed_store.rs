//! Typed stores (issue 57 items 1, 2 and 5): a tiny dataset in ogbn-mag's layout imported
//! through `import ogb`, its types, relations (reverses added), features per type, labels
//! and split against what the files say, worked out independently here; `check` and `info`
//! on it; damaged stores `check` refuses; every bad input an error naming the file, with
//! nothing written; homogeneous stores unchanged and seen through the typed API as the
//! one-type case.

mod common;

use common::{gz, ogb_relations};

use std::collections::BTreeSet;
use std::path::Path;

use saintflow::progress::Progress;
use saintflow::store::format::NO_LABEL;
use saintflow::store::import::{import_ogb, OgbLayout, OgbOptions, OgbReport};
use saintflow::store::{check, info, GraphStore, Role};

/// A relation as the files list it: (src, rel, dst, edges in local ids).
type Listed = (&'static str, &'static str, &'static str, Vec<(u32, u32)>);

/// The tiny dataset's relations as its files list them.
fn relations() -> Vec<Listed> {
    vec![
        // A duplicate line.
        (
            "author",
            "writes",
            "paper",
            vec![(0, 0), (0, 1), (1, 1), (2, 3), (2, 3)],
        ),
        // A self loop and an edge listed both ways.
        (
            "paper",
            "cites",
            "paper",
            vec![(0, 1), (1, 2), (2, 0), (3, 3), (1, 0)],
        ),
        (
            "paper",
            "has_topic",
            "field_of_study",
            vec![(0, 0), (1, 0), (2, 1), (3, 1)],
        ),
    ]
}

const PAPER_FEATS: [[f32; 3]; 4] = [
    [0.5, 1.0, -1.0],
    [2.0, 0.0, 0.25],
    [1.5, -2.0, 3.0],
    [0.0, 0.0, 1.0],
];
const AUTHOR_FEATS: [[f32; 2]; 3] = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]];
const PAPER_LABELS: [u32; 4] = [0, 1, 2, 1];

/// ogbn-mag's layout, in miniature: types paper (4, features of width 3, labels, split),
/// author (3, features of width 2), field_of_study (2, no features).
fn tiny(dir: &Path) {
    let raw = dir.join("raw");
    gz(
        &raw.join("num-node-dict.csv.gz"),
        ["paper,author,field_of_study", "4,3,2"],
    );
    let rels = relations();
    let listed: Vec<common::OgbRelation<'_>> = rels
        .iter()
        .map(|(s, r, d, e)| (*s, *r, *d, &e[..]))
        .collect();
    ogb_relations(&raw, &listed);
    for (s, r, d, e) in &rels {
        let rd = raw.join("relations").join(format!("{s}___{r}___{d}"));
        gz(&rd.join("edge_reltype.csv.gz"), e.iter().map(|_| "0"));
    }
    gz(
        &raw.join("node-feat/paper/node-feat.csv.gz"),
        PAPER_FEATS.iter().map(|r| {
            r.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }),
    );
    gz(
        &raw.join("node-feat/paper/node_year.csv.gz"),
        ["2010", "2011", "2012", "2013"],
    );
    gz(
        &raw.join("node-feat/author/node-feat.csv.gz"),
        AUTHOR_FEATS.iter().map(|r| format!("{},{}", r[0], r[1])),
    );
    gz(
        &raw.join("nodetype-has-label.csv.gz"),
        ["paper,author,field_of_study", "True,False,False"],
    );
    gz(
        &raw.join("node-label/paper/node-label.csv.gz"),
        PAPER_LABELS.iter().map(|c| c.to_string()),
    );
    let sp = dir.join("split/time");
    gz(
        &sp.join("nodetype-has-split.csv.gz"),
        ["paper,author,field_of_study", "True,False,False"],
    );
    gz(&sp.join("paper/train.csv.gz"), ["0", "1"]);
    gz(&sp.join("paper/valid.csv.gz"), ["2"]);
    gz(&sp.join("paper/test.csv.gz"), ["3"]);
}

fn import(dir: &Path, out: &Path) -> Result<(OgbReport, GraphStore), String> {
    let r = import_ogb(dir, out, &OgbOptions::default(), false, &Progress::hidden())
        .map_err(|e| e.to_string())?;
    let s = GraphStore::open(out).map_err(|e| e.to_string())?;
    check(&s).map_err(|e| e.to_string())?;
    Ok((r, s))
}

/// The entries of relation `r` as (global u, global v), row by row.
fn entries(s: &GraphStore, r: usize) -> Vec<(u32, u32)> {
    let csr = s.relation(r).csr;
    csr.rows()
        .flat_map(|u| csr.row(u).iter().map(move |&v| (u, v)))
        .collect()
}

#[test]
fn mag_layout_imports_to_a_typed_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    let out = tmp.path().join("mag.sf");
    let (r, s) = import(&dir, &out).unwrap();
    assert_eq!(r.layout, OgbLayout::Hetero);
    assert_eq!(r.split, "time");
    let notes = r.notes.join("\n");
    assert!(notes.contains("edge_reltype.csv.gz ignored"), "{notes}");
    assert!(notes.contains("node_year.csv.gz ignored"), "{notes}");
    assert!(
        notes.contains("1 self-loop and 3 duplicate entries"),
        "{notes}"
    );

    // Types in name order, contiguous ids.
    assert!(s.is_typed());
    assert_eq!(s.n_node_types(), 3);
    let names: Vec<&str> = (0..3).map(|t| s.node_type_name(t)).collect();
    assert_eq!(names, ["author", "field_of_study", "paper"]);
    assert_eq!(s.type_range(0), 0..3);
    assert_eq!(s.type_range(1), 3..5);
    assert_eq!(s.type_range(2), 5..9);
    assert_eq!(s.n_nodes(), 9);
    let types: Vec<usize> = (0..9).map(|v| s.node_type(v)).collect();
    assert_eq!(types, [0, 0, 0, 1, 1, 2, 2, 2, 2]);
    let start = |name: &str| s.type_range(s.node_type_index(name).unwrap()).start;

    // Relations: the listed ones in name order, then the reverses of the two between
    // types; cites made symmetric in place.
    let rels: Vec<(String, String, String)> = (0..s.n_relations())
        .map(|r| {
            let rel = s.relation(r);
            (
                s.node_type_name(rel.src).to_string(),
                rel.name.to_string(),
                s.node_type_name(rel.dst).to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = [
        ("author", "writes", "paper"),
        ("paper", "cites", "paper"),
        ("paper", "has_topic", "field_of_study"),
        ("paper", "rev_writes", "author"),
        ("field_of_study", "rev_has_topic", "paper"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(rels, want);
    let reverses: Vec<usize> = (0..5).map(|r| s.relation(r).reverse).collect();
    assert_eq!(reverses, [3, 1, 4, 0, 2]);
    assert_eq!(s.relation_index("paper", "rev_writes", "author"), Some(3));
    assert_eq!(s.relation_index("paper", "writes", "author"), None);
    assert_eq!(s.relations_between(2, 2), [1]);

    // Each relation's entries against the files, worked out here: global ids, duplicates
    // and self loops gone, a same-type relation symmetric, a cross-type one reversed.
    let mut union = BTreeSet::new();
    for (s_name, r_name, d_name, e) in relations() {
        let (a, b) = (start(s_name), start(d_name));
        let mut fwd = BTreeSet::new();
        let mut rev = BTreeSet::new();
        for (x, y) in e {
            let (u, v) = (a + x, b + y);
            if u == v {
                continue;
            }
            fwd.insert((u, v));
            if s_name == d_name {
                fwd.insert((v, u));
            } else {
                rev.insert((v, u));
            }
        }
        let r = s.relation_index(s_name, r_name, d_name).unwrap();
        assert_eq!(
            entries(&s, r),
            fwd.iter().copied().collect::<Vec<_>>(),
            "{r_name}"
        );
        if s_name != d_name {
            let rr = s.relation(r).reverse;
            assert_eq!(
                entries(&s, rr),
                rev.iter().copied().collect::<Vec<_>>(),
                "rev_{r_name}"
            );
        }
        union.extend(fwd.iter().flat_map(|&(u, v)| [(u, v), (v, u)]));
    }
    // The full graph is their union, homogeneous, sorted; the training graph is full.
    let full = s.full();
    let got: Vec<(u32, u32)> = (0..9u32)
        .flat_map(|u| full.neighbors(u).iter().map(move |&v| (u, v)))
        .collect();
    assert_eq!(got, union.iter().copied().collect::<Vec<_>>());
    assert_eq!(got.len(), 22);
    assert_eq!(s.train().n_entries(), 22);
    // A row of one relation through the API: paper 1 (global 6) cites papers 0 and 2.
    assert_eq!(s.relation(1).csr.row(6), [5, 7]);
    assert_eq!(
        s.relation(1).csr.row(0),
        [] as [u32; 0],
        "an author has no cites row"
    );

    // Features per type, their own widths; none for field_of_study (and no file).
    assert_eq!(s.n_features(), 0);
    let pf = s.type_features(2);
    assert_eq!(pf.width, 3);
    assert_eq!(pf.data, PAPER_FEATS.concat());
    assert_eq!(pf.row(7), Some(&PAPER_FEATS[2][..]));
    assert_eq!(pf.row(2), None);
    let af = s.type_features(0);
    assert_eq!((af.width, af.data), (2, &AUTHOR_FEATS.concat()[..]));
    let ff = s.type_features(1);
    assert_eq!((ff.width, ff.data.len()), (0, 0));
    assert!(!out.join("type1.features.f32").exists());
    assert!(out.join("type2.features.f32").exists());

    // Labels on papers only; the split.
    let labels = s.labels();
    for v in 0..9u32 {
        let want = if v >= 5 {
            PAPER_LABELS[(v - 5) as usize]
        } else {
            NO_LABEL
        };
        let saintflow::store::Labels::Single(l) = labels else {
            panic!("single-label")
        };
        assert_eq!(l[v as usize], want, "node {v}");
    }
    assert_eq!(s.n_classes(), 3);
    assert!(s.type_labelled(2) && !s.type_labelled(0) && !s.type_labelled(1));
    assert_eq!(s.nodes_with_role(Role::Train), [5, 6]);
    assert_eq!(s.nodes_with_role(Role::Val), [7]);
    assert_eq!(s.nodes_with_role(Role::Test), [8]);

    // info --json's counts per type and per relation.
    let j = serde_json::to_value(info(&s)).unwrap();
    let t = &j["types"];
    assert_eq!(t["node_types"][2]["name"], "paper");
    assert_eq!(t["node_types"][2]["nodes"], 4);
    assert_eq!(t["node_types"][2]["features"], 3);
    assert_eq!(t["node_types"][2]["split"]["train"], 2);
    assert_eq!(t["node_types"][0]["ids"], serde_json::json!([0, 3]));
    assert_eq!(t["relations"][1]["name"], "cites");
    assert_eq!(t["relations"][1]["entries"], 6);
    assert_eq!(t["relations"][3]["reverse"], "writes");
    assert_eq!(t["relations"][0]["entries"], 4);
}

/// The store, its relations and features from the same input twice: byte-identical.
#[test]
fn typed_import_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    import(&dir, &tmp.path().join("a.sf")).unwrap();
    import(&dir, &tmp.path().join("b.sf")).unwrap();
    let files = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let (a, b) = (tmp.path().join("a.sf"), tmp.path().join("b.sf"));
    assert_eq!(files(&a), files(&b));
    for f in files(&a) {
        assert_eq!(
            std::fs::read(a.join(&f)).unwrap(),
            std::fs::read(b.join(&f)).unwrap(),
            "{f:?}"
        );
    }
}

/// A directory listing instead of `triplet-type-list.csv.gz`, flags files absent (the
/// labelled and split types from their directories): the same store.
#[test]
fn relations_from_directories_without_the_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    import(&dir, &tmp.path().join("a.sf")).unwrap();
    for f in [
        "raw/triplet-type-list.csv.gz",
        "raw/nodetype-has-label.csv.gz",
        "split/time/nodetype-has-split.csv.gz",
    ] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let (_, b) = import(&dir, &tmp.path().join("b.sf")).unwrap();
    let a = GraphStore::open(tmp.path().join("a.sf")).unwrap();
    assert_eq!(a.header().sections, b.header().sections);
    assert_eq!(a.header().types, b.header().types);
}

/// An import that must fail: its message, and nothing at the destination or beside it.
fn fails(dir: &Path, out: &Path) -> String {
    let e = match import(dir, out) {
        Ok(_) => panic!("expected an error, got a store"),
        Err(e) => e,
    };
    assert!(
        !out.exists(),
        "{} written by a failed import",
        out.display()
    );
    let left: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
    e
}

/// Item 5: each bad input is an error naming the file and what is wrong, and nothing is
/// written.
#[test]
fn bad_typed_inputs_name_the_file_and_write_nothing() {
    type Damage = fn(&Path);
    let cases: [(&str, Damage, &str, &str); 10] = [
        (
            "relation directory the list does not name",
            |d| {
                gz(
                    &d.join("raw/relations/author___cites___author/edge.csv.gz"),
                    ["0,1"],
                )
            },
            "raw/relations/author___cites___author",
            "a relation directory raw/triplet-type-list.csv.gz does not list",
        ),
        (
            "relation naming an unknown type (listed)",
            |d| {
                gz(
                    &d.join("raw/triplet-type-list.csv.gz"),
                    [
                        "author,writes,paper",
                        "paper,cites,paper",
                        "paper,has_topic,field_of_study",
                        "paper,published_in,venue",
                    ],
                );
                gz(
                    &d.join("raw/relations/paper___published_in___venue/edge.csv.gz"),
                    ["0,0"],
                );
            },
            "triplet-type-list.csv.gz",
            "relation (paper, published_in, venue) names node type \"venue\", which raw/num-node-dict.csv.gz does not list (it has: author, field_of_study, paper)",
        ),
        (
            "relation naming an unknown type (directory)",
            |d| {
                std::fs::remove_file(d.join("raw/triplet-type-list.csv.gz")).unwrap();
                gz(
                    &d.join("raw/relations/venue___has___paper/edge.csv.gz"),
                    ["0,0"],
                );
            },
            "venue___has___paper",
            "names node type \"venue\"",
        ),
        (
            "source id beyond its type's count",
            |d| {
                gz(
                    &d.join("raw/relations/author___writes___paper/edge.csv.gz"),
                    ["0,0", "3,1", "1,1", "2,3", "2,3"],
                )
            },
            "author___writes___paper/edge.csv.gz",
            "line 2: source node 3 out of range: node type \"author\" has 3 nodes (num-node-dict), expected < 3",
        ),
        (
            "destination id beyond its type's count",
            |d| {
                gz(
                    &d.join("raw/relations/paper___has_topic___field_of_study/edge.csv.gz"),
                    ["0,0", "1,0", "2,2", "3,1"],
                )
            },
            "has_topic___field_of_study/edge.csv.gz",
            "line 3: destination node 2 out of range: node type \"field_of_study\" has 2 nodes",
        ),
        (
            "feature row of the wrong width",
            |d| {
                gz(
                    &d.join("raw/node-feat/paper/node-feat.csv.gz"),
                    ["1,2,3", "1,2,3", "1,2", "1,2,3"],
                )
            },
            "node-feat/paper/node-feat.csv.gz",
            "line 3: 2 features, expected 3: node type \"paper\" has width 3",
        ),
        (
            "feature file with a row per node of another type",
            |d| {
                gz(
                    &d.join("raw/node-feat/author/node-feat.csv.gz"),
                    ["1,2", "1,2", "1,2", "1,2"],
                )
            },
            "node-feat/author/node-feat.csv.gz",
            "line 4: more feature rows than the 3 nodes of type \"author\"",
        ),
        (
            "split naming an out-of-range node",
            |d| gz(&d.join("split/time/paper/test.csv.gz"), ["4"]),
            "split/time/paper/test.csv.gz",
            "line 1: node 4 out of range: node type \"paper\" has 4 nodes (num-node-dict), expected < 4",
        ),
        (
            "split of a type without labels",
            |d| {
                gz(
                    &d.join("split/time/nodetype-has-split.csv.gz"),
                    ["paper,author,field_of_study", "True,True,False"],
                );
                gz(&d.join("split/time/author/train.csv.gz"), ["0"]);
                gz(&d.join("split/time/author/valid.csv.gz"), ["1"]);
                gz(&d.join("split/time/author/test.csv.gz"), ["2"]);
            },
            "split/time/author",
            "a split of node type \"author\", which has no labels",
        ),
        (
            "edge count disagreeing with num-edge-list",
            |d| {
                gz(
                    &d.join("raw/relations/paper___cites___paper/num-edge-list.csv.gz"),
                    ["6"],
                )
            },
            "paper___cites___paper/edge.csv.gz",
            "5 edges, expected 6 as num-edge-list.csv.gz says",
        ),
    ];
    for (what, damage, file, msg) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("mag");
        tiny(&dir);
        damage(&dir);
        let e = fails(&dir, &tmp.path().join("out.sf"));
        assert!(e.contains(file), "{what}: {e:?} should name {file:?}");
        assert!(e.contains(msg), "{what}: {e:?} should say {msg:?}");
    }
}

/// Through the command line: a non-zero exit and the message on stderr.
#[test]
fn cli_bad_typed_input_exits_non_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    gz(&dir.join("split/time/paper/valid.csv.gz"), ["7"]);
    let o = common::saintflow(
        &["import", "ogb", "mag", "-o", "mag.sf", "--quiet"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("valid.csv.gz") && err.contains("node 7 out of range"),
        "{err}"
    );
    assert!(!tmp.path().join("mag.sf").exists());
    // Repaired, it imports, and info --json reports the types.
    gz(&dir.join("split/time/paper/valid.csv.gz"), ["2"]);
    common::saintflow_ok(
        &["import", "ogb", "mag", "-o", "mag.sf", "--quiet"],
        tmp.path(),
    );
    let o = common::saintflow_ok(&["info", "mag.sf", "--json"], tmp.path());
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["types"]["relations"].as_array().unwrap().len(), 5);
    assert_eq!(j["types"]["node_types"][1]["name"], "field_of_study");
    common::saintflow_ok(&["check", "mag.sf"], tmp.path());
}

/// Overwrites `len` bytes at `at` of a store's file.
fn poke(path: &Path, at: usize, bytes: &[u8]) {
    let mut b = std::fs::read(path).unwrap();
    b[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, b).unwrap();
}

/// `check` refuses a typed store whose relations are damaged, saying which and how.
#[test]
fn check_finds_damaged_relations() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    let out = tmp.path().join("mag.sf");
    let (_, s) = import(&dir, &out).unwrap();
    let writes = s.relation_index("author", "writes", "paper").unwrap();
    let has_topic = s
        .relation_index("paper", "has_topic", "field_of_study")
        .unwrap();
    drop(s);
    let fresh = || {
        let d = tmp.path().join("copy.sf");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        for e in std::fs::read_dir(&out).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
        d
    };
    let check_of = |d: &Path| match check(&GraphStore::open(d).unwrap()) {
        Ok(()) => panic!("check passed a damaged store"),
        Err(e) => e.to_string(),
    };
    // writes: author 0 → paper 5 becomes → author 1 (not a paper).
    let d = fresh();
    poke(
        &d.join(format!("rel{writes}.indices.u32")),
        0,
        &1u32.to_le_bytes(),
    );
    let e = check_of(&d);
    assert!(e.contains("checksum mismatch"), "{e}");
    assert!(
        e.contains("relation (author, writes, paper): a destination not of type \"paper\" (expected ids 5..9): 1 entries, first: (0, 1)"),
        "{e}"
    );
    // has_topic: paper 0 → field 3 becomes → field 4: its reverse lacks it, the full
    // graph lacks it, and the full graph's (5, 3) is in no relation.
    let d = fresh();
    poke(
        &d.join(format!("rel{has_topic}.indices.u32")),
        0,
        &4u32.to_le_bytes(),
    );
    let e = check_of(&d);
    assert!(
        e.contains("relation \"has_topic\": entries whose reverse is missing from its reverse relation \"rev_has_topic\": 1 entries, first: (5, 4)"),
        "{e}"
    );
    assert!(
        e.contains(
            "relation \"has_topic\": entries absent from the full graph: 1 entries, first: (5, 4)"
        ),
        "{e}"
    );
    assert!(
        e.contains(
            "full-graph entries in no relation between their ends' types: 1 entries, first: (5, 3)"
        ),
        "{e}"
    );
}

/// `open` refuses a header whose types disagree with the counts (the validation).
#[test]
fn open_refuses_inconsistent_types() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    let out = tmp.path().join("mag.sf");
    let (_, s) = import(&dir, &out).unwrap();
    let h = s.header().clone();
    drop(s);
    let write = |h: &saintflow::store::Header| {
        std::fs::write(
            out.join("header.sf"),
            saintflow::store::format::encode_header(h),
        )
        .unwrap();
        match GraphStore::open(&out) {
            Ok(_) => panic!("opened"),
            Err(e) => e.to_string(),
        }
    };
    let mut bad = h.clone();
    bad.types.as_mut().unwrap().node_types[1].count = 3;
    assert!(write(&bad).contains("node counts sum to 10, expected n_nodes = 9"));
    let mut bad = h.clone();
    bad.types.as_mut().unwrap().relations[0].reverse = 1;
    assert!(write(&bad).contains("relation \"writes\" and its reverse \"cites\" disagree"));
    let mut bad = h.clone();
    bad.types.as_mut().unwrap().relations[2].dst = 7;
    assert!(write(&bad).contains("relation \"has_topic\": node types 2 → 7, expected < 3"));
    let mut bad = h.clone();
    bad.types.as_mut().unwrap().node_types[0].name = "a___b".into();
    assert!(write(&bad).contains("the separator"));
    // A label on a node of an unlabelled type.
    let mut bad = h.clone();
    bad.types.as_mut().unwrap().node_types[2].labelled = false;
    assert!(write(&bad).contains("no labelled node type, but n_classes = 3"));
    bad.types.as_mut().unwrap().node_types[0].labelled = true;
    let e = write(&bad);
    assert!(
        e.contains("labels.bin")
            && e.contains("node 5 is of type \"paper\", which has no labels, but carries one"),
        "{e}"
    );
}

/// A homogeneous store's header has no `types` and reads through the typed API as one
/// node type and one relation, the full graph.
#[test]
fn homogeneous_store_is_the_one_type_case() {
    let tmp = tempfile::tempdir().unwrap();
    let p = common::planted(tmp.path(), 6);
    let s = GraphStore::open(&p).unwrap();
    let body = std::fs::read(p.join("header.sf")).unwrap();
    assert!(!String::from_utf8_lossy(&body).contains("\"types\""));
    assert!(!s.is_typed());
    assert_eq!((s.n_node_types(), s.n_relations()), (1, 1));
    assert_eq!(s.node_type_name(0), "node");
    assert_eq!(s.type_range(0), 0..s.n_nodes() as u32);
    let rel = s.relation(0);
    assert_eq!((rel.name, rel.src, rel.dst, rel.reverse), ("to", 0, 0, 0));
    for v in 0..s.n_nodes() as u32 {
        assert_eq!(rel.csr.row(v), s.full().neighbors(v));
        assert_eq!(s.node_type(v), 0);
    }
    let f = s.type_features(0);
    assert_eq!((f.width, f.data), (s.n_features(), s.features()));
    assert!(serde_json::to_value(info(&s))
        .unwrap()
        .get("types")
        .is_none());
}

/// Issue 57's acceptance graph: `scripts/cora_typed.py` writes the shared Cora in
/// ogbn-mag's layout (papers with features, labels and split; a featureless `word` node per
/// vocabulary word; `paper cites paper`, `paper has word`), and `import ogb` of it has
/// Cora's counts: the papers' features, labels and split those of the GraphSAINT import,
/// `cites` its graph, `has` one entry per non-zero feature, `rev_has` added.
#[test]
#[ignore = "needs ../shared/data/cora: cargo test -- --ignored shared_data_"]
fn shared_data_cora_typed_script_imports_with_coras_counts() {
    use saintflow::store::import::{import_graphsaint, GraphSaintOptions};
    let cora = common::require_shared_dataset("cora");
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cora_typed.py");
    let dir = tmp.path().join("cora_typed");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .arg(&cora)
        .arg("-o")
        .arg(&dir)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (r, s) = import(&dir, &tmp.path().join("typed.sf")).unwrap();
    assert_eq!(r.split, "planetoid");
    import_graphsaint(
        &cora,
        &tmp.path().join("plain.sf"),
        &GraphSaintOptions::default(),
        false,
        &Progress::hidden(),
    )
    .unwrap();
    let plain = GraphStore::open(tmp.path().join("plain.sf")).unwrap();
    let (n, f) = (plain.n_nodes(), plain.n_features());
    assert_eq!((n, f), (2708, 1433));

    let paper = s.node_type_index("paper").unwrap();
    let word = s.node_type_index("word").unwrap();
    assert_eq!(s.type_range(paper), 0..2708);
    assert_eq!(s.type_range(word), 2708..2708 + 1433);
    assert_eq!(s.type_features(paper).width, f);
    assert_eq!(
        s.type_features(paper).data,
        plain.features(),
        "features bit for bit"
    );
    assert_eq!(s.type_features(word).width, 0);
    assert!(!s.type_labelled(word));
    // Labels and split of the papers: Cora's.
    let (saintflow::store::Labels::Single(a), saintflow::store::Labels::Single(b)) =
        (s.labels(), plain.labels())
    else {
        panic!("single-label")
    };
    assert_eq!(&a[..n], b);
    assert!(a[n..].iter().all(|&c| c == NO_LABEL));
    assert_eq!(s.n_classes(), 7);
    assert_eq!(&s.roles()[..n], plain.roles());
    assert_eq!(
        (
            s.role_count(Role::Train),
            s.role_count(Role::Val),
            s.role_count(Role::Test)
        ),
        (140, 500, 1000)
    );
    // cites: Cora's graph, row for row.
    let cites = s.relation(s.relation_index("paper", "cites", "paper").unwrap());
    assert_eq!(cites.csr.n_entries(), 10556);
    for v in 0..n as u32 {
        assert_eq!(cites.csr.row(v), plain.full().neighbors(v), "paper {v}");
    }
    // has: one entry per non-zero feature; rev_has its transpose.
    let has = s.relation(s.relation_index("paper", "has", "word").unwrap());
    let nonzero = plain.features().iter().filter(|&&x| x != 0.0).count();
    assert_eq!(has.csr.n_entries(), nonzero);
    for v in 0..n as u32 {
        let words: Vec<u32> = plain
            .feature_row(v)
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, &x)| x != 0.0)
            .map(|(w, _)| 2708 + w as u32)
            .collect();
        assert_eq!(has.csr.row(v), words, "paper {v}");
    }
    let rev = s.relation(has.reverse);
    assert_eq!(rev.name, "rev_has");
    assert_eq!(rev.csr.n_entries(), nonzero);
    assert_eq!(s.full().n_entries(), 10556 + 2 * nonzero);
}

/// The typed Kronecker generator (`gen kronecker --types`): T contiguous types, T²
/// relations that together are the full graph (each entry in exactly the relation of its
/// ends' types), features per type with their own widths, labels and roles on t0 only;
/// `check` passes and equal seeds give equal stores.
#[test]
fn typed_kronecker_generator() {
    use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted, TypedGen};
    let tmp = tempfile::tempdir().unwrap();
    let spec = KroneckerSpec {
        scale: 10,
        degree: 8.0,
        n_classes: 3,
        planted: Some(Planted::default()),
        typed: Some(TypedGen {
            features: vec![6, 0, 3],
        }),
        ..KroneckerSpec::default()
    };
    let p = tmp.path().join("t.sf");
    generate_kronecker(&spec, &p, false, &Progress::hidden()).unwrap();
    let s = GraphStore::open(&p).unwrap();
    check(&s).unwrap();
    assert_eq!((s.n_node_types(), s.n_relations()), (3, 9));
    assert_eq!(s.type_range(0), 0..341);
    assert_eq!(s.type_range(2), 682..1024);
    assert_eq!(
        (0..3).map(|t| s.type_features(t).width).collect::<Vec<_>>(),
        [6, 0, 3]
    );
    assert_eq!(s.type_features(2).data.len(), 342 * 3);
    assert_eq!(s.n_features(), 0);
    // Every full-graph entry in exactly one relation: the one of its ends' types.
    let mut in_relations = 0;
    for r in 0..9 {
        let rel = s.relation(r);
        for u in rel.csr.rows() {
            for &v in rel.csr.row(u) {
                assert_eq!((s.node_type(u), s.node_type(v)), (rel.src, rel.dst));
                in_relations += 1;
            }
        }
    }
    assert_eq!(in_relations, s.full().n_entries());
    assert!(s.full().n_entries() > 5000);
    // Labels and roles on t0 only; the relations between types carry edges.
    let saintflow::store::Labels::Single(l) = s.labels() else {
        panic!()
    };
    for v in 0..1024u32 {
        let t0 = s.node_type(v) == 0;
        assert_eq!(l[v as usize] != NO_LABEL, t0, "node {v}");
        if !t0 {
            assert_eq!(s.role(v), Role::None);
        }
    }
    assert!(s.role_count(Role::Train) > 100);
    let cross = s.relation_index("t0", "r0_2", "t2").unwrap();
    assert!(s.relation(cross).csr.n_entries() > 500);
    // The training graph is induced on t0's training nodes.
    let train = s.train();
    for u in 0..1024u32 {
        for &v in train.neighbors(u) {
            assert!(s.role(u) == Role::Train && s.role(v) == Role::Train);
        }
    }
    // Deterministic.
    let q = tmp.path().join("u.sf");
    generate_kronecker(&spec, &q, false, &Progress::hidden()).unwrap();
    assert_eq!(
        std::fs::read(p.join("header.sf")).unwrap(),
        std::fs::read(q.join("header.sf")).unwrap()
    );
    // The command line, with its errors.
    let o = common::saintflow(
        &[
            "gen",
            "kronecker",
            "--scale",
            "8",
            "--types",
            "3",
            "--type-features",
            "4,4",
            "-o",
            "x.sf",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("--type-features: 2 widths, expected one per type (--types 3)"));
    common::saintflow_ok(
        &[
            "gen",
            "kronecker",
            "--scale",
            "8",
            "--types",
            "2",
            "--planted",
            "-o",
            "x.sf",
            "--quiet",
        ],
        tmp.path(),
    );
    let x = GraphStore::open(tmp.path().join("x.sf")).unwrap();
    assert_eq!(
        (x.type_features(0).width, x.type_features(1).width),
        (32, 0)
    );
    assert_eq!(x.n_relations(), 4);
}

/// Damaged typed stores never panic `open`, `check` or the typed readers: every byte of
/// every typed section (and the labels and roles) flipped in turn on a copy; `open` and
/// `check` return, and a store both accept reads through the whole typed API.
#[test]
fn damaged_typed_stores_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    let out = tmp.path().join("mag.sf");
    import(&dir, &out).unwrap();
    let copy = tmp.path().join("copy.sf");
    std::fs::create_dir(&copy).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("rel")
                || n.starts_with("type")
                || n.starts_with("labels")
                || n.starts_with("roles")
        })
        .collect();
    files.sort();
    let mut refused = 0;
    let mut tried = 0;
    for e in std::fs::read_dir(&out).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    for f in &files {
        let bytes = std::fs::read(out.join(f)).unwrap();
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x5a;
            std::fs::write(copy.join(f), &b).unwrap();
            tried += 1;
            let result = std::panic::catch_unwind(|| {
                let Ok(s) = GraphStore::open(&copy) else {
                    return false;
                };
                if check(&s).is_err() {
                    return false;
                }
                for r in 0..s.n_relations() {
                    let csr = s.relation(r).csr;
                    for u in csr.rows() {
                        let _ = csr.row(u);
                    }
                }
                for v in 0..s.n_nodes() as u32 {
                    let _ = s.type_features(s.node_type(v)).row(v);
                }
                let _ = info(&s);
                true
            });
            match result {
                Ok(accepted) => refused += usize::from(!accepted),
                Err(_) => panic!("{f}: byte {at} flipped: a panic"),
            }
        }
        std::fs::write(copy.join(f), &bytes).unwrap();
    }
    // Every damage is refused (each section is checksummed).
    assert_eq!(refused, tried, "{files:?}");
    assert!(tried > 300);
}

/// Labels on two target types share one class space (C = the largest class + 1 over
/// both); each type's split lands on its own id range.
#[test]
fn labels_and_splits_on_two_types() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    gz(
        &dir.join("raw/nodetype-has-label.csv.gz"),
        ["paper,author,field_of_study", "True,True,False"],
    );
    gz(
        &dir.join("raw/node-label/author/node-label.csv.gz"),
        ["4", "nan", "0"],
    );
    gz(
        &dir.join("split/time/nodetype-has-split.csv.gz"),
        ["paper,author,field_of_study", "True,True,False"],
    );
    gz(&dir.join("split/time/author/train.csv.gz"), ["2"]);
    gz(&dir.join("split/time/author/valid.csv.gz"), [""; 0]);
    gz(&dir.join("split/time/author/test.csv.gz"), ["0"]);
    let (_, s) = import(&dir, &tmp.path().join("two.sf")).unwrap();
    assert_eq!(s.n_classes(), 5);
    let saintflow::store::Labels::Single(l) = s.labels() else {
        panic!()
    };
    assert_eq!(&l[..3], [4, NO_LABEL, 0]);
    assert_eq!(&l[5..], PAPER_LABELS);
    assert!(s.type_labelled(0) && s.type_labelled(2) && !s.type_labelled(1));
    assert_eq!(s.nodes_with_role(Role::Train), [2, 5, 6]);
    assert_eq!(s.nodes_with_role(Role::Test), [0, 8]);
    let j = serde_json::to_value(info(&s)).unwrap();
    assert_eq!(j["types"]["node_types"][0]["split"]["test"], 1);
    // A split node of the second type without a label is an error naming its file.
    gz(&dir.join("split/time/author/valid.csv.gz"), ["1"]);
    let e = fails(&dir, &tmp.path().join("bad.sf"));
    assert!(
        e.contains("node-label/author/node-label.csv.gz")
            && e.contains(
                "node 1 of type \"author\" is in split \"time\" (Val) but its label is nan"
            ),
        "{e}"
    );
}

/// A homogeneous plan on a typed store is refused before anything runs, saying why.
#[test]
fn training_a_homogeneous_plan_on_a_typed_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    import(&dir, &tmp.path().join("mag.sf")).unwrap();
    let o = common::saintflow(
        &[
            "train", "gcn", "--graph", "mag.sf", "--epochs", "1", "--quiet",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("a typed store") && err.contains("author 2, field_of_study 0, paper 3"),
        "{err}"
    );
}

/// `partition` and `split-edges` refuse a typed store (their outputs would lose the
/// relations), saying so, and write nothing.
#[test]
fn partition_and_split_edges_refuse_a_typed_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mag");
    tiny(&dir);
    import(&dir, &tmp.path().join("mag.sf")).unwrap();
    for (args, out) in [
        (
            &["partition", "mag.sf", "-k", "2", "-o", "parts", "--quiet"][..],
            "parts",
        ),
        (
            &["split-edges", "mag.sf", "-o", "link.sf", "--quiet"][..],
            "link.sf",
        ),
    ] {
        let o = common::saintflow(args, tmp.path());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("a typed store") && err.contains("not supported yet"),
            "{err}"
        );
        assert!(!tmp.path().join(out).exists());
    }
}
