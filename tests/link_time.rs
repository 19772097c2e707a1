//! Issue 52 item 1, the time split: edge times in the store (`full.time`, filled by `import
//! edgelist --time-column` and by `import ogb-link` from `raw/edge_year.csv.gz`), checked by
//! `check`, shown by `info --json`, and `split-edges --by-time` holding out the latest
//! edges (test the latest, validation the next), computed here by hand.

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use common::{copy_store, err_text, poke, saintflow, saintflow_ok, small_store};
use saintflow::store::format::{decode_header, encode_header, HEADER_FILE, TIME_SECTION};
use saintflow::store::link::split::{split_edges, SplitEdgesSpec};
use saintflow::store::{check, GraphStore, LinkSet};

fn key(u: u32, v: u32) -> (u32, u32) {
    (u.min(v), u.max(v))
}

/// The positives of a set as unordered pairs.
fn positives(s: &GraphStore, set: LinkSet) -> HashSet<(u32, u32)> {
    let e = s.link_split().unwrap().set(set);
    (0..e.len()).map(|i| key(e.pos(i).0, e.pos(i).1)).collect()
}

/// The stored undirected edges of a store.
fn edges(s: &GraphStore) -> HashSet<(u32, u32)> {
    let full = s.full();
    (0..s.n_nodes() as u32)
        .flat_map(|u| full.neighbors(u).iter().map(move |&v| key(u, v)))
        .collect()
}

fn spec(val: f64, test: f64, seed: u64, by_time: bool) -> SplitEdgesSpec {
    SplitEdgesSpec {
        val,
        test,
        negatives: 1,
        seed,
        allow_isolated: false,
        by_time,
    }
}

/// The hand-made temporal edge list: `u v weight time`, each edge once (`--symmetrize`),
/// plus two repeats that must not change the earliest time rule's answer by hand: {0, 1}
/// again at 0 (earlier: it wins), {2, 3} again at 20 (later: ignored).
///
/// ```text
/// edge   time   degrees: 0:4 1:4 2:4 3:4 4:5 5:1
/// {0,1}  1 → 0
/// {1,2}  2
/// {2,3}  3
/// {0,3}  4
/// {0,2}  5
/// {1,3}  6
/// {0,4}  7
/// {1,4}  8
/// {4,5}  9     node 5's only edge
/// {2,4}  10
/// {3,4}  11
/// ```
const TEMPORAL: &str = "# u v weight time
0 1 1.0 1
1 2 1.0 2
2 3 1.0 3
3 0 1.0 4
0 2 1.0 5
1 3 1.0 6
4 0 1.0 7
4 1 1.0 8
5 4 1.0 9
2 4 1.0 10
3 4 1.0 11
1 0 0.5 0
3 2 0.5 20
";

/// Imports [`TEMPORAL`] with times into `dir/name` through the CLI.
fn temporal_store(dir: &Path, name: &str) -> PathBuf {
    std::fs::write(dir.join("temporal.txt"), TEMPORAL).unwrap();
    saintflow_ok(
        &[
            "import",
            "edgelist",
            "temporal.txt",
            "-o",
            name,
            "--symmetrize",
            "--time-column",
            "4",
            // Nodes 6 and 7 without edges, so that node 4 (degree 5) has tail negatives.
            "--nodes",
            "8",
        ],
        dir,
    );
    dir.join(name)
}

#[test]
fn edgelist_times_keep_the_earliest_and_both_directions_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let s = GraphStore::open(temporal_store(tmp.path(), "t.sf")).unwrap();
    check(&s).unwrap();
    assert_eq!(s.full().n_entries(), 22);
    let want = [
        ((0, 1), 0),
        ((1, 2), 2),
        ((2, 3), 3),
        ((0, 3), 4),
        ((0, 2), 5),
        ((1, 3), 6),
        ((0, 4), 7),
        ((1, 4), 8),
        ((4, 5), 9),
        ((2, 4), 10),
        ((3, 4), 11),
    ];
    for ((u, v), t) in want {
        assert_eq!(s.edge_time(u, v), Some(t), "({u}, {v})");
        assert_eq!(s.edge_time(v, u), Some(t), "({v}, {u})");
    }
    let meta = s.header().edge_time.as_ref().unwrap();
    assert_eq!((meta.min, meta.max, meta.unit.as_deref()), (0, 11, None));
    // The entries' order is the CSR's: row 0 is 1, 2, 3, 4.
    assert_eq!(&s.edge_times().unwrap()[..4], [0, 5, 4, 7]);

    let j: serde_json::Value =
        serde_json::from_slice(&saintflow_ok(&["info", "t.sf", "--json"], tmp.path()).stdout)
            .unwrap();
    assert_eq!(j["edge_time"]["min"], 0);
    assert_eq!(j["edge_time"]["max"], 11);
    assert_eq!(j["bytes"]["sections"][TIME_SECTION.0], 22 * 8);

    // Any i64 is a time, the extremes included.
    std::fs::write(
        tmp.path().join("extreme.txt"),
        format!("0 1 {}\n1 2 {}\n", i64::MIN, i64::MAX),
    )
    .unwrap();
    saintflow_ok(
        &[
            "import",
            "edgelist",
            "extreme.txt",
            "-o",
            "x.sf",
            "--symmetrize",
            "--time-column",
            "3",
        ],
        tmp.path(),
    );
    let x = GraphStore::open(tmp.path().join("x.sf")).unwrap();
    check(&x).unwrap();
    assert_eq!(
        (x.edge_time(1, 0), x.edge_time(2, 1)),
        (Some(i64::MIN), Some(i64::MAX))
    );

    // The column must exist and hold integers, on every edge line.
    std::fs::write(tmp.path().join("bad.txt"), "0 1 5\n1 2 x\n").unwrap();
    let out = saintflow(
        &[
            "import",
            "edgelist",
            "bad.txt",
            "-o",
            "bad.sf",
            "--symmetrize",
            "--time-column",
            "3",
        ],
        tmp.path(),
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("bad.txt") && e.contains("line 2"),
        "{e}"
    );
    assert!(e.contains("not an integer time"), "{e}");
    std::fs::write(tmp.path().join("short.txt"), "0 1 5\n1 2\n").unwrap();
    let out = saintflow(
        &[
            "import",
            "edgelist",
            "short.txt",
            "-o",
            "bad.sf",
            "--symmetrize",
            "--time-column",
            "3",
        ],
        tmp.path(),
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("line 2: no column 3"),
        "{e}"
    );
    assert!(!tmp.path().join("bad.sf").exists(), "nothing written");
    // Columns 1 and 2 are the ids: a usage error.
    let out = saintflow(
        &[
            "import",
            "edgelist",
            "short.txt",
            "-o",
            "bad.sf",
            "--time-column",
            "2",
        ],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn by_time_holds_out_the_latest_edges_computed_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    temporal_store(d, "t.sf");
    // M = 11 edges: ⌊0.2·11⌋ = 2 test and 2 validation edges. Latest first: {3,4} (11) and
    // {2,4} (10) go to test; {4,5} (9) would leave node 5 without an edge, so it stays
    // (kept 1); {1,4} (8) and {0,4} (7) go to validation.
    let out = saintflow_ok(
        &[
            "split-edges",
            "t.sf",
            "-o",
            "split.sf",
            "--val",
            "0.2",
            "--test",
            "0.2",
            "--negatives",
            "1",
            "--seed",
            "3",
            "--by-time",
        ],
        d,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("test times 10..11, validation times 7..8; 1 later edges kept"),
        "{text}"
    );
    let s = GraphStore::open(d.join("split.sf")).unwrap();
    check(&s).unwrap();
    assert_eq!(
        positives(&s, LinkSet::Test),
        HashSet::from([(3, 4), (2, 4)])
    );
    assert_eq!(positives(&s, LinkSet::Val), HashSet::from([(1, 4), (0, 4)]));
    let ts = s.header().link.as_ref().unwrap().by_time.unwrap();
    assert_eq!(
        (ts.kept, ts.val_time, ts.test_time),
        (1, Some([7, 8]), Some([10, 11]))
    );
    // The stored graph is the rest, with its times: {4,5} at 9 kept.
    assert_eq!(edges(&s).len(), 7);
    assert_eq!(s.edge_time(5, 4), Some(9));
    assert_eq!(s.edge_time(0, 1), Some(0));
    assert_eq!(s.edge_time(3, 4), None, "held out");

    let j: serde_json::Value =
        serde_json::from_slice(&saintflow_ok(&["info", "split.sf", "--json"], d).stdout).unwrap();
    let l = &j["link"];
    assert_eq!(l["kind"], "time");
    assert_eq!(l["by_time"]["kept"], 1);
    assert_eq!(l["by_time"]["val_time"], serde_json::json!([7, 8]));
    assert_eq!(l["by_time"]["test_time"], serde_json::json!([10, 11]));
    assert_eq!(j["edge_time"]["max"], 9);
    let text = String::from_utf8_lossy(&saintflow_ok(&["info", "split.sf"], d).stdout).into_owned();
    assert!(text.contains("time split: test 10..11, val 7..8"), "{text}");

    // With --allow-isolated nothing is kept: {4,5} goes to validation with {1,4}.
    saintflow_ok(
        &[
            "split-edges",
            "t.sf",
            "-o",
            "iso.sf",
            "--val",
            "0.2",
            "--test",
            "0.2",
            "--negatives",
            "1",
            "--by-time",
            "--allow-isolated",
        ],
        d,
    );
    let s = GraphStore::open(d.join("iso.sf")).unwrap();
    assert_eq!(positives(&s, LinkSet::Val), HashSet::from([(4, 5), (1, 4)]));
    assert_eq!(s.header().link.as_ref().unwrap().by_time.unwrap().kept, 0);

    // A random split of the same store is not a time split, and keeps the times too.
    saintflow_ok(
        &[
            "split-edges",
            "t.sf",
            "-o",
            "rnd.sf",
            "--val",
            "0.2",
            "--test",
            "0.2",
            "--negatives",
            "1",
        ],
        d,
    );
    let r = GraphStore::open(d.join("rnd.sf")).unwrap();
    check(&r).unwrap();
    assert!(r.header().link.as_ref().unwrap().by_time.is_none());
    let input = GraphStore::open(d.join("t.sf")).unwrap();
    for (u, v) in edges(&r) {
        assert_eq!(r.edge_time(u, v), input.edge_time(u, v), "({u}, {v})");
    }
    let j: serde_json::Value =
        serde_json::from_slice(&saintflow_ok(&["info", "rnd.sf", "--json"], d).stdout).unwrap();
    assert_eq!(j["link"]["kind"], "random");
    assert!(j["link"].get("by_time").is_none());
}

#[test]
fn equal_times_are_broken_by_the_seeded_order_deterministically() {
    // Every edge at one time: the time split visits them in the random split's seeded
    // order, so its test set (taken first) is the random split's validation set when the
    // two counts are equal; the same seed gives the same store byte for byte.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let base = small_store(d, "base.sf", 7, 5);
    let mut list = String::new();
    let b = GraphStore::open(&base).unwrap();
    for u in 0..b.n_nodes() as u32 {
        for &v in b.full().neighbors(u) {
            list.push_str(&format!("{u} {v} 42\n"));
        }
    }
    std::fs::write(d.join("flat.txt"), list).unwrap();
    saintflow_ok(
        &[
            "import",
            "edgelist",
            "flat.txt",
            "-o",
            "flat.sf",
            "--time-column",
            "3",
        ],
        d,
    );
    let flat = GraphStore::open(d.join("flat.sf")).unwrap();
    for seed in [1, 2] {
        let (t, r) = (d.join(format!("t{seed}.sf")), d.join(format!("r{seed}.sf")));
        for (out, by_time) in [(&t, true), (&r, false)] {
            let spec = spec(0.1, 0.1, seed, by_time);
            split_edges(&flat, out, &spec, false, saintflow::store::check).unwrap();
        }
        let (t, r) = (GraphStore::open(&t).unwrap(), GraphStore::open(&r).unwrap());
        assert_eq!(positives(&t, LinkSet::Test), positives(&r, LinkSet::Val));
        assert_eq!(positives(&t, LinkSet::Val), positives(&r, LinkSet::Test));
        let ts = t.header().link.as_ref().unwrap().by_time.unwrap();
        assert_eq!(
            (ts.val_time, ts.test_time),
            (Some([42, 42]), Some([42, 42]))
        );
    }
    let again = d.join("t1-again.sf");
    split_edges(
        &flat,
        &again,
        &spec(0.1, 0.1, 1, true),
        false,
        saintflow::store::check,
    )
    .unwrap();
    for f in std::fs::read_dir(d.join("t1.sf")).unwrap() {
        let name = f.unwrap().file_name();
        assert_eq!(
            std::fs::read(d.join("t1.sf").join(&name)).unwrap(),
            std::fs::read(again.join(&name)).unwrap(),
            "{name:?}"
        );
    }
    let (a, b) = (
        GraphStore::open(d.join("t1.sf")).unwrap(),
        GraphStore::open(d.join("t2.sf")).unwrap(),
    );
    assert_ne!(positives(&a, LinkSet::Test), positives(&b, LinkSet::Test));
}

#[test]
fn by_time_without_times_is_an_error_naming_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    small_store(d, "plain.sf", 6, 1);
    let out = saintflow(
        &[
            "split-edges",
            "plain.sf",
            "-o",
            "out.sf",
            "--by-time",
            "--negatives",
            "1",
        ],
        d,
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("plain.sf") && e.contains("no edge times"), "{e}");
    assert!(!d.join("out.sf").exists(), "nothing written");
}

#[test]
fn stores_without_times_keep_the_header_they_always_had() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let plain = small_store(d, "plain.sf", 6, 1);
    split_edges(
        &GraphStore::open(&plain).unwrap(),
        &d.join("split.sf"),
        &spec(0.1, 0.1, 1, false),
        false,
        saintflow::store::check,
    )
    .unwrap();
    for s in ["plain.sf", "split.sf"] {
        let header = String::from_utf8_lossy(&std::fs::read(d.join(s).join(HEADER_FILE)).unwrap())
            .into_owned();
        assert!(!header.contains("edge_time"), "{s}: {header}");
        assert!(!header.contains("by_time"), "{s}: {header}");
        let g = GraphStore::open(d.join(s)).unwrap();
        assert!(g.edge_times().is_none() && g.edge_time(0, 1).is_none());
        check(&g).unwrap();
        let j: serde_json::Value =
            serde_json::from_slice(&saintflow_ok(&["info", s, "--json"], d).stdout).unwrap();
        assert!(j.get("edge_time").is_none(), "{j}");
    }
    // A header written before times existed (the fields absent, as above) reads as a
    // store without them; one naming an unknown field is still refused.
    let hp = d.join("plain.sf").join(HEADER_FILE);
    let bytes = std::fs::read(&hp).unwrap();
    let h = decode_header(&bytes, &hp).unwrap();
    assert!(h.edge_time.is_none());
    assert_eq!(encode_header(&h), bytes, "the header round-trips unchanged");
}

/// Recomputes the time section's checksum in the header so only the content damage stays.
fn reseal_times(store: &Path) {
    let hp = store.join(HEADER_FILE);
    let mut h = decode_header(&std::fs::read(&hp).unwrap(), &hp).unwrap();
    let bytes = std::fs::read(store.join(TIME_SECTION.1)).unwrap();
    h.edge_time.as_mut().unwrap().section.xxh3 =
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
    std::fs::write(&hp, encode_header(&h)).unwrap();
}

#[test]
fn check_catches_a_damaged_time_section() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let good = temporal_store(d, "t.sf");
    let fresh = |name: &str| {
        let s = d.join(name);
        copy_store(&good, &s);
        s
    };
    let check_err = |s: &Path| err_text(check(&GraphStore::open(s).expect("open passes")));
    let file = TIME_SECTION.1;

    // A flipped bit: open does not read the O(nnz) section, check finds the checksum.
    let s = fresh("flip");
    poke(&s.join(file), 8, &[0xff]);
    let e = check_err(&s);
    assert!(e.contains(file) && e.contains("checksum mismatch"), "{e}");

    // Truncated or extended: open refuses the length, naming the file.
    let s = fresh("trunc");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(s.join(file))
        .unwrap();
    f.set_len(21 * 8).unwrap();
    let e = err_text(GraphStore::open(&s));
    assert!(e.contains(file) && e.contains("truncated"), "{e}");
    let s = fresh("extended");
    std::fs::OpenOptions::new()
        .append(true)
        .open(s.join(file))
        .unwrap()
        .write_all(&[0; 8])
        .unwrap();
    let e = err_text(GraphStore::open(&s));
    assert!(e.contains(file) && e.contains("extended"), "{e}");
    let s = fresh("missing");
    std::fs::remove_file(s.join(file)).unwrap();
    let e = err_text(GraphStore::open(&s));
    assert!(e.contains(file), "{e}");

    // The header's length for the section is the graph's entries, or open refuses it.
    let s = fresh("len");
    let hp = s.join(HEADER_FILE);
    let mut h = decode_header(&std::fs::read(&hp).unwrap(), &hp).unwrap();
    let t = h.edge_time.as_mut().unwrap();
    t.section.len -= 1;
    t.section.bytes -= 8;
    std::fs::write(&hp, encode_header(&h)).unwrap();
    let e = err_text(GraphStore::open(&s));
    assert!(e.contains("full.time") && e.contains("expected 22"), "{e}");

    // One direction of an edge changed, checksum resealed: the two entries differ.
    let s = fresh("asym");
    poke(&s.join(file), 0, &77i64.to_le_bytes()); // entry (0, 1)
    reseal_times(&s);
    let e = check_err(&s);
    assert!(
        e.contains("different times") && e.contains("(0, 1) at 77"),
        "{e}"
    );
    assert!(e.contains("the header says [0, 11]"), "{e}");

    // The header's span must be the section's.
    let s = fresh("span");
    let mut h = decode_header(&std::fs::read(s.join(HEADER_FILE)).unwrap(), &hp).unwrap();
    h.edge_time.as_mut().unwrap().max = 12;
    std::fs::write(s.join(HEADER_FILE), encode_header(&h)).unwrap();
    let e = check_err(&s);
    assert!(
        e.contains("times span [0, 11], the header says [0, 12]"),
        "{e}"
    );
}

#[test]
fn check_verifies_a_time_split_record_against_the_stored_times() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let input = GraphStore::open(temporal_store(d, "t.sf")).unwrap();
    let good = d.join("split.sf");
    split_edges(
        &input,
        &good,
        &spec(0.2, 0.2, 3, true),
        false,
        saintflow::store::check,
    )
    .unwrap();
    check(&GraphStore::open(&good).unwrap()).unwrap();
    let edit = |name: &str, f: &dyn Fn(&mut saintflow::store::format::TimeSplit)| {
        let s = d.join(name);
        copy_store(&good, &s);
        let hp = s.join(HEADER_FILE);
        let mut h = decode_header(&std::fs::read(&hp).unwrap(), &hp).unwrap();
        f(h.link.as_mut().unwrap().by_time.as_mut().unwrap());
        std::fs::write(&hp, encode_header(&h)).unwrap();
        s
    };
    // {4,5} at 9 is stored and later than the earliest held-out time 7: kept ≥ 1.
    let s = edit("kept0", &|t| t.kept = 0);
    let e = err_text(check(&GraphStore::open(&s).unwrap()));
    assert!(
        e.contains("time split") && e.contains("records 0 kept"),
        "{e}"
    );
    // Test later than validation, or open refuses the header.
    let s = edit("order", &|t| t.test_time = Some([5, 6]));
    let e = err_text(GraphStore::open(&s));
    assert!(e.contains("test_time starts at 5"), "{e}");
    let s = edit("empty", &|t| t.val_time = None);
    let e = err_text(GraphStore::open(&s));
    assert!(e.contains("val_time missing"), "{e}");
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ogbl")
        .join(name)
}

fn gz(path: &Path, text: &str) {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    std::fs::write(path, e.finish().unwrap()).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn ogb_link_edge_year_becomes_the_edge_times_earliest_year_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // The fixture's edge.csv.gz lists (0,1) in 2010 and again as (1,0) in 2012.
    let out = saintflow_ok(
        &[
            "import",
            "ogb-link",
            data("collab").to_str().unwrap(),
            "-o",
            "c.sf",
        ],
        d,
    );
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(
        notes.contains("edge times from raw/edge_year.csv.gz: years 2010 to 2017"),
        "{notes}"
    );
    let s = GraphStore::open(d.join("c.sf")).unwrap();
    check(&s).unwrap();
    let t = s.header().edge_time.as_ref().unwrap();
    assert_eq!(
        (t.min, t.max, t.unit.as_deref()),
        (2010, 2017, Some("year"))
    );
    for ((u, v), y) in [
        ((0, 1), 2010),
        ((1, 2), 2012),
        ((5, 6), 2017),
        ((6, 7), 2010),
        ((4, 6), 2011),
    ] {
        assert_eq!(
            (s.edge_time(u, v), s.edge_time(v, u)),
            (Some(y), Some(y)),
            "({u}, {v})"
        );
    }
    let j: serde_json::Value =
        serde_json::from_slice(&saintflow_ok(&["info", "c.sf", "--json"], d).stdout).unwrap();
    assert_eq!(j["edge_time"]["unit"], "year");

    // Written by the test: a year file of another length, or with a non-integer, is refused
    // naming it; without one the store has no times (citation2's fixture).
    let bad = d.join("collab-bad");
    copy_dir(&data("collab"), &bad);
    let years = bad.join("raw/edge_year.csv.gz");
    gz(&years, "2010\n2011\n");
    let out = saintflow(
        &["import", "ogb-link", bad.to_str().unwrap(), "-o", "bad.sf"],
        d,
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("edge_year.csv.gz") && e.contains("one year per edge"),
        "{e}"
    );
    gz(&years, &"2010\n".repeat(12));
    let e = String::from_utf8_lossy(
        &saintflow(
            &["import", "ogb-link", bad.to_str().unwrap(), "-o", "bad.sf"],
            d,
        )
        .stderr,
    )
    .into_owned();
    assert!(e.contains("more years than the 11 edges"), "{e}");
    gz(
        &years,
        &"2010\n"
            .repeat(10)
            .replace("2010\n2010\n2010\n", "2010\n2010.5\n2010\n"),
    );
    let e = String::from_utf8_lossy(
        &saintflow(
            &["import", "ogb-link", bad.to_str().unwrap(), "-o", "bad.sf"],
            d,
        )
        .stderr,
    )
    .into_owned();
    assert!(
        e.contains("line 2") && e.contains("not an integer year"),
        "{e}"
    );
    assert!(!d.join("bad.sf").exists());

    saintflow_ok(
        &[
            "import",
            "ogb-link",
            data("citation2").to_str().unwrap(),
            "-o",
            "c2.sf",
        ],
        d,
    );
    assert!(GraphStore::open(d.join("c2.sf"))
        .unwrap()
        .edge_times()
        .is_none());
}
