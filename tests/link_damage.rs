//! Damaged link sections (issue 52), in the style of tests/store_damage.rs: every damage is
//! refused naming the file and the section, by `open` where O(E) reads see it (the
//! positives and negative pairs) and by `check` always; nothing panics.

mod common;

use std::path::{Path, PathBuf};

use common::{copy_store, err_text, poke, small_store};
use saintflow::store::format::{decode_header, encode_header, LinkSectionId, HEADER_FILE};
use saintflow::store::link::split::{split_edges, SplitEdgesSpec};
use saintflow::store::{check, GraphStore};

const K: u64 = 8;

fn fresh(tmp: &Path, name: &str) -> PathBuf {
    let base = tmp.join("base");
    if !base.exists() {
        let input = small_store(tmp, "input", 8, 3);
        let spec = SplitEdgesSpec {
            val: 0.05,
            test: 0.1,
            negatives: K,
            seed: 1,
            allow_isolated: false,
            by_time: false,
        };
        split_edges(
            &GraphStore::open(&input).unwrap(),
            &base,
            &spec,
            false,
            saintflow::store::check,
        )
        .unwrap();
    }
    let dst = tmp.join(name);
    copy_store(&base, &dst);
    dst
}

/// Recomputes the link sections' checksums so that only the content's damage remains.
fn reseal(store: &Path) {
    let hpath = store.join(HEADER_FILE);
    let mut h = decode_header(&std::fs::read(&hpath).unwrap(), &hpath).unwrap();
    let link = h.link.as_mut().unwrap();
    for id in LinkSectionId::ALL {
        let bytes = std::fs::read(store.join(id.file_name())).unwrap();
        link.sections[id.index()].xxh3 = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
    }
    std::fs::write(&hpath, encode_header(&h)).unwrap();
}

fn u32s(path: &Path) -> Vec<u32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn assert_open_fails(store: &Path, needles: &[&str]) {
    let msg = err_text(GraphStore::open(store));
    for n in needles {
        assert!(msg.contains(n), "open error {msg:?} lacks {n:?}");
    }
}

fn assert_check_fails(store: &Path, needles: &[&str]) {
    let s = GraphStore::open(store).expect("cheap open passes");
    let msg = err_text(check(&s));
    for n in needles {
        assert!(msg.contains(n), "check error {msg:?} lacks {n:?}");
    }
}

#[test]
fn a_valid_split_passes_and_a_store_without_one_opens_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let s = fresh(tmp.path(), "ok");
    check(&GraphStore::open(&s).unwrap()).unwrap();
    let input = GraphStore::open(tmp.path().join("input")).unwrap();
    assert!(input.link_split().is_none());
    let header = String::from_utf8_lossy(
        &std::fs::read(tmp.path().join("input").join(HEADER_FILE)).unwrap(),
    )
    .into_owned();
    assert!(
        !header.contains("\"link\""),
        "no link field written without a split"
    );
}

#[test]
fn truncated_missing_and_checksummed_sections_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    for id in LinkSectionId::ALL {
        let s = fresh(tmp.path(), &format!("trunc-{}", id.name()));
        let f = s.join(id.file_name());
        let len = std::fs::metadata(&f).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(len - 4)
            .unwrap();
        assert_open_fails(&s, &[id.file_name(), id.name(), "truncated"]);

        let s = fresh(tmp.path(), &format!("missing-{}", id.name()));
        std::fs::remove_file(s.join(id.file_name())).unwrap();
        assert_open_fails(&s, &[id.file_name(), "No such file"]);

        // A bit flipped in range: the checksum (at open for the O(E) sections, by check
        // for the tail negatives).
        let s = fresh(tmp.path(), &format!("flip-{}", id.name()));
        let f = s.join(id.file_name());
        let first = u32s(&f)[0];
        poke(&f, 0, &(first ^ 1).to_le_bytes());
        let needles = [id.file_name(), id.name(), "checksum mismatch"];
        if id.is_small() {
            assert_open_fails(&s, &needles);
        } else {
            assert_check_fails(&s, &needles);
        }
    }
}

#[test]
fn header_damage_of_the_link_record() {
    let tmp = tempfile::tempdir().unwrap();
    let edit = |name: &str, f: &dyn Fn(&mut saintflow::store::format::LinkMeta)| {
        let s = fresh(tmp.path(), name);
        let hp = s.join(HEADER_FILE);
        let mut h = decode_header(&std::fs::read(&hp).unwrap(), &hp).unwrap();
        f(h.link.as_mut().unwrap());
        std::fs::write(&hp, encode_header(&h)).unwrap();
        s
    };
    let s = edit("k0", &|l| l.negatives = 0);
    assert_open_fails(&s, &[HEADER_FILE, "negatives expected ≥ 1"]);
    let s = edit("count", &|l| l.n_test += 1);
    assert_open_fails(&s, &[HEADER_FILE, "input_edges"]);
    let s = edit("count2", &|l| {
        l.n_test += 1;
        l.input_edges += 1
    });
    assert_open_fails(&s, &[HEADER_FILE, "link.test.pos", "expected"]);
    let s = edit("sections", &|l| {
        l.sections.pop();
    });
    assert_open_fails(&s, &[HEADER_FILE, "expected 6 sections, got 5"]);
}

#[test]
fn content_damage_is_found_by_check_naming_the_section() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fresh(tmp.path(), "probe");
    let store = GraphStore::open(&base).unwrap();
    let (u, v) = store.link_split().unwrap().test.pos(0);
    let nbr = store.full().neighbors(u)[0];
    drop(store);

    // A positive that is a stored edge.
    let s = fresh(tmp.path(), "pos-edge");
    poke(&s.join("link.test.pos.u32"), 4, &nbr.to_le_bytes());
    reseal(&s);
    assert_check_fails(
        &s,
        &["link.test.pos.u32", "link.test.pos", "in the stored graph"],
    );

    // A positive out of range: open refuses it.
    let s = fresh(tmp.path(), "pos-range");
    poke(&s.join("link.val.pos.u32"), 0, &u32::MAX.to_le_bytes());
    reseal(&s);
    assert_open_fails(&s, &["link.val.pos", "out of range"]);

    // A self pair.
    let s = fresh(tmp.path(), "pos-self");
    poke(&s.join("link.test.pos.u32"), 4, &u.to_le_bytes());
    reseal(&s);
    assert_open_fails(&s, &["link.test.pos", "self pair"]);

    // A tail negative that is a stored edge of the source, or the held-out positive.
    for (name, t, what) in [
        ("neg-edge", nbr, "a stored edge"),
        ("neg-pos", v, "a held-out positive"),
    ] {
        let s = fresh(tmp.path(), name);
        let f = s.join("link.test.neg.u32");
        let mut row: Vec<u32> = u32s(&f)[..K as usize].to_vec();
        row[0] = t;
        row.sort_unstable();
        let bytes: Vec<u8> = row.iter().flat_map(|x| x.to_le_bytes()).collect();
        poke(&f, 0, &bytes);
        reseal(&s);
        assert_check_fails(&s, &["link.test.neg.u32", "link.test.neg", what]);
    }

    // A tail negative out of range: check names it, and the checked view refuses it.
    let s = fresh(tmp.path(), "neg-range");
    poke(
        &s.join("link.val.neg.u32"),
        4 * (K - 1),
        &u32::MAX.to_le_bytes(),
    );
    reseal(&s);
    assert_check_fails(&s, &["link.val.neg", "out of range"]);
    let opened = GraphStore::open(&s).unwrap();
    let e = err_text(opened.link_split().unwrap().val.checked_tails(0));
    assert!(
        e.contains("link.val.neg") && e.contains("out of range"),
        "{e}"
    );
    let o = common::saintflow(
        &[
            "eval-link",
            "--graph",
            s.to_str().unwrap(),
            "--split",
            "val",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("link.val.neg"));

    // A negative pair that is a stored edge; one out of order.
    let s = fresh(tmp.path(), "pair-edge");
    let (a, b) = (u.min(nbr), u.max(nbr));
    let pair: Vec<u8> = [a, b].iter().flat_map(|x| x.to_le_bytes()).collect();
    poke(&s.join("link.test.negpairs.u32"), 0, &pair);
    reseal(&s);
    assert_check_fails(&s, &["link.test.negpairs", "is an edge"]);
    let s = fresh(tmp.path(), "pair-order");
    let pair: Vec<u8> = [b, a].iter().flat_map(|x| x.to_le_bytes()).collect();
    poke(&s.join("link.test.negpairs.u32"), 0, &pair);
    reseal(&s);
    assert_open_fails(&s, &["link.test.negpairs", "smaller id first"]);

    // The same positive in both sets.
    let s = fresh(tmp.path(), "twice");
    let first: Vec<u8> = u32s(&s.join("link.test.pos.u32"))[..2]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    poke(&s.join("link.val.pos.u32"), 0, &first);
    reseal(&s);
    assert_check_fails(&s, &["link.test.pos", "held out twice"]);

    // A negative pair drawn twice.
    let s = fresh(tmp.path(), "pair-twice");
    let f = s.join("link.test.negpairs.u32");
    let first: Vec<u8> = u32s(&f)[..2].iter().flat_map(|x| x.to_le_bytes()).collect();
    poke(&f, 8, &first);
    reseal(&s);
    assert_check_fails(&s, &["link.test.negpairs", "1 negative pairs drawn twice"]);
}

#[test]
fn split_edges_refuses_an_input_with_unsorted_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let input = small_store(tmp.path(), "input", 8, 3);
    let store = GraphStore::open(&input).unwrap();
    let u = (0..store.n_nodes() as u32)
        .find(|&u| store.full().degree(u) >= 2)
        .unwrap();
    let at = store.full().offsets()[u as usize];
    let row = store.full().neighbors(u)[..2].to_vec();
    drop(store);
    let f = input.join("full.indices.u32");
    poke(&f, 4 * at, &row[1].to_le_bytes());
    poke(&f, 4 * at + 4, &row[0].to_le_bytes());
    // `open` does not read the indices; the split does, and refuses.
    let store = GraphStore::open(&input).unwrap();
    let spec = SplitEdgesSpec {
        val: 0.05,
        test: 0.1,
        negatives: 4,
        seed: 1,
        allow_isolated: false,
        by_time: false,
    };
    let out = tmp.path().join("out.sf");
    let e = err_text(split_edges(
        &store,
        &out,
        &spec,
        false,
        saintflow::store::check,
    ));
    assert!(
        e.contains(&format!("neighbours of node {u} not in increasing order")),
        "{e}"
    );
    assert!(!out.exists());
}
