//! Issue 52: `import ogb-link` of OGB's link-property layouts with their own splits and
//! negatives. The datasets under tests/data/ogbl/ were written by scripts/ogbl_fixture.py
//! with real torch.save (collab's split as torch tensors, citation2's as numpy arrays);
//! the hostile `.pt` files here are assembled byte by byte as torch lays them out.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use common::{err_text, saintflow, saintflow_ok};
use saintflow::link::{evaluate, Heuristic};
use saintflow::progress::Progress;
use saintflow::store::import::{import_ogb_link, OgbLinkLayout, OgbLinkOptions};
use saintflow::store::{check, GraphStore, LinkSet};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ogbl")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// A writable copy of fixture `name` under `tmp`.
fn fixture(tmp: &Path, name: &str) -> PathBuf {
    let d = tmp.join(name);
    copy_dir(&data(name), &d);
    d
}

fn import(dir: &Path, out: &Path) -> Result<saintflow::store::import::OgbLinkReport, String> {
    import_ogb_link(
        dir,
        out,
        &OgbLinkOptions::default(),
        false,
        &Progress::hidden(),
    )
    .map_err(|e| e.to_string())
}

#[test]
fn collab_layout_imports_checks_and_eval_link_gives_the_hand_computed_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let out = saintflow_ok(
        &[
            "import",
            "ogb-link",
            data("collab").to_str().unwrap(),
            "-o",
            "collab.sf",
        ],
        d,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("validation 2 positives, 3 negative pairs"),
        "{text}"
    );
    let notes = String::from_utf8_lossy(&out.stderr);
    // raw/edge_year.csv.gz is read now (the edge times; tests/link_time.rs), the weights not.
    assert!(notes.contains("raw/edge_weight.csv.gz ignored"), "{notes}");
    assert!(!notes.contains("raw/edge_year.csv.gz ignored"), "{notes}");
    assert!(
        notes.contains("keys [\"weight\", \"year\"] ignored"),
        "{notes}"
    );
    saintflow_ok(&["check", "collab.sf"], d);

    let s = GraphStore::open(d.join("collab.sf")).unwrap();
    check(&s).unwrap();
    // The training edges, the repeated pair once.
    assert_eq!(s.full().n_entries(), 20);
    assert_eq!(s.train().n_entries(), 20);
    let split = s.link_split().unwrap();
    assert!(split.meta.given);
    assert_eq!(split.meta.negatives, 0);
    let t = split.set(LinkSet::Test);
    assert_eq!((t.len(), t.k(), t.n_negpairs()), (2, 0, 4));
    assert_eq!(t.positives(), [2, 4, 4, 7]);
    // (7, 3) oriented; (3, 4), a true edge, kept as OGB gives it.
    assert_eq!(t.negative_pairs(), [0, 5, 3, 7, 3, 4, 1, 4]);

    let info = saintflow_ok(&["info", "collab.sf", "--json"], d);
    let j: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let l = &j["link"];
    assert_eq!((l["val"].as_u64(), l["test"].as_u64()), (Some(2), Some(2)));
    assert_eq!(l["negatives_per_positive"], 0);
    assert_eq!(l["val_negative_pairs"], 3);
    assert_eq!(l["test_negative_pairs"], 4);
    assert_eq!(l["given"], true);
    assert!(l.get("negative_pairs_per_positive").is_none(), "{l}");

    // Common neighbours over the training graph, by hand: positives (2,4) → {3}, (4,7) →
    // {6}: 1 and 1; negatives (0,5) 0, (3,7) 0, (3,4) 0, (1,4) → {3}: 1. AUC = (6 wins +
    // ½·2 ties) / 8 = 0.875; AP: both positives and one negative at the top score,
    // precision 2/3 at recall 1: 2/3; pool Hits@1: the top negative scores 1, no positive
    // strictly above: 0; Hits@2: the 2nd negative scores 0: 1.
    let r = saintflow_ok(
        &[
            "eval-link",
            "--graph",
            "collab.sf",
            "--heuristics",
            "cn",
            "--hits",
            "1,2",
            "--json",
        ],
        d,
    );
    let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(j["given"], true);
    let cn = &j["results"][0];
    assert_eq!(cn["method"], "cn");
    assert!((cn["auc"].as_f64().unwrap() - 0.875).abs() < 1e-12, "{cn}");
    assert!(
        (cn["ap"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12,
        "{cn}"
    );
    assert_eq!(cn["hits_pool"], serde_json::json!([[1, 0.0], [2, 1.0]]));
    assert!(cn["mrr"].is_null(), "no tails, no MRR: {cn}");
    assert_eq!(cn["hits"], serde_json::json!([]));
    assert_eq!(cn["negative_pairs"], 4);
    let text =
        String::from_utf8_lossy(&saintflow_ok(&["eval-link", "--graph", "collab.sf"], d).stdout)
            .into_owned();
    assert!(
        text.contains("no tail negatives: MRR and Hits@K per positive not measured"),
        "{text}"
    );
}

#[test]
fn citation2_layout_of_numpy_arrays_imports_with_its_tails_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c2.sf");
    let r = import(&data("citation2"), &out).unwrap();
    assert_eq!(r.layout, OgbLinkLayout::Tails);
    assert_eq!(
        (r.positives, r.negatives, r.negative_pairs),
        ([2, 2], 3, [0, 0])
    );
    assert!(
        r.notes.iter().any(|n| n.contains("node_year")),
        "{:?}",
        r.notes
    );
    let s = GraphStore::open(&out).unwrap();
    check(&s).unwrap();
    assert_eq!(s.n_features(), 2);
    let split = s.link_split().unwrap();
    let t = split.set(LinkSet::Test);
    assert_eq!(t.positives(), [2, 4, 4, 7]);
    // Rows as given: row 1 holds 3, a true edge of its source 4 (OGB counts it a negative).
    assert_eq!(t.checked_tails(0).unwrap(), [5, 7, 6]);
    assert_eq!(t.checked_tails(1).unwrap(), [1, 3, 0]);
    assert_eq!(split.set(LinkSet::Val).checked_tails(1).unwrap(), [0, 1, 2]);

    // CN by hand: source 2 → target 4: 1 ({3}); tails 5, 7, 6: 0 each → rank 1. Source 4 →
    // target 7: 1 ({6}); tails 1 → {3}: 1 (a tie), 3 → 0, 0 → 0 → rank 1 + ½·(0 + 1) =
    // 1.5. MRR = (1 + 1/1.5) / 2; Hits@1 = ½, Hits@2 = 1.
    let g = s.train();
    let score = move |u, v| Heuristic::CommonNeighbours.score(g, u, v);
    let m = evaluate("cn", t, &score, &[1, 2]).unwrap();
    assert!(
        (m.mrr.unwrap() - (1.0 + 1.0 / 1.5) / 2.0).abs() < 1e-12,
        "{m:?}"
    );
    assert_eq!(m.hits, [(1, 0.5), (2, 1.0)]);
    assert_eq!((m.auc, m.ap), (None, None), "no pairs, no AUC");
    assert!(m.hits_pool.is_empty());
}

// ---------------------------------------------------------------- hostile files

/// A tensor as torch.save lays it out: a storage of `class` (`LongStorage`, ...) with
/// `numel` elements under key `skey`, viewed with `size` and `stride`.
struct T<'a> {
    key: &'a str,
    class: &'a str,
    skey: &'a str,
    numel: u64,
    size: &'a [u64],
    stride: &'a [u64],
}

fn uni(p: &mut Vec<u8>, s: &str) {
    p.push(b'X');
    p.extend_from_slice(&(s.len() as u32).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}

fn int(p: &mut Vec<u8>, x: u64) {
    p.push(b'J');
    p.extend_from_slice(&(x as i32).to_le_bytes());
}

/// The pickle torch.save writes for a dict of these tensors (protocol 2, no memo).
fn tensor_pickle(ts: &[T]) -> Vec<u8> {
    let mut p = vec![0x80, 2, b'}', b'('];
    for t in ts {
        uni(&mut p, t.key);
        p.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        uni(&mut p, "storage");
        p.extend_from_slice(format!("ctorch\n{}\n", t.class).as_bytes());
        uni(&mut p, t.skey);
        uni(&mut p, "cpu");
        int(&mut p, t.numel);
        p.extend_from_slice(b"tQ");
        int(&mut p, 0);
        for dims in [t.size, t.stride] {
            p.push(b'(');
            for &d in dims {
                int(&mut p, d);
            }
            p.push(b't');
        }
        p.push(0x89);
        p.extend_from_slice(b"ccollections\nOrderedDict\n)Rt");
        p.push(b'R');
    }
    p.extend_from_slice(b"u.");
    p
}

/// A zip of stored members, as torch.save writes it.
fn write_zip(path: &Path, members: &[(String, Vec<u8>)]) {
    use npyz::zip::{write::FileOptions, CompressionMethod, ZipWriter};
    let mut z = ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = FileOptions::default().compression_method(CompressionMethod::Stored);
    for (name, bytes) in members {
        z.start_file(name.as_str(), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// Writes a `.pt` of `ts` with storages `data` (key, bytes).
fn write_pt(path: &Path, ts: &[T], data: &[(&str, Vec<u8>)]) {
    let mut m = vec![
        ("archive/data.pkl".to_string(), tensor_pickle(ts)),
        ("archive/version".to_string(), b"3\n".to_vec()),
    ];
    for (k, b) in data {
        m.push((format!("archive/data/{k}"), b.clone()));
    }
    write_zip(path, &m);
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Rewrites the zip at `path`, each member through `f`.
fn rezip(path: &Path, mut f: impl FnMut(&str, Vec<u8>) -> Vec<u8>) {
    let mut z = npyz::zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut members = Vec::new();
    for i in 0..z.len() {
        let mut m = z.by_index(i).unwrap();
        let mut b = Vec::new();
        m.read_to_end(&mut b).unwrap();
        let name = m.name().to_string();
        let b = f(&name, b);
        members.push((name, b));
    }
    drop(z);
    write_zip(path, &members);
}

/// Imports `dir`, expecting an error naming `file` and saying `needle`; nothing written.
fn refused(dir: &Path, file: &str, needle: &str) {
    let out = dir.parent().unwrap().join("out.sf");
    let e = import(dir, &out).expect_err("an error");
    assert!(e.contains(file), "names {file}: {e}");
    assert!(e.contains(needle), "says {needle:?}: {e}");
    assert!(!out.exists(), "nothing written: {e}");
}

/// A collab-style valid.pt with `edge` and `edge_neg` of these rows.
fn collab_valid(path: &Path, edge: &[i64], neg: &[i64]) {
    let t = |key, skey, n: usize| T {
        key,
        class: "LongStorage",
        skey,
        numel: n as u64,
        size: Box::leak(vec![n as u64 / 2, 2].into_boxed_slice()),
        stride: &[2, 1],
    };
    write_pt(
        path,
        &[t("edge", "0", edge.len()), t("edge_neg", "1", neg.len())],
        &[("0", i64s(edge)), ("1", i64s(neg))],
    );
}

#[test]
fn hand_assembled_tensors_read_as_torch_writes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let d = fixture(tmp.path(), "collab");
    collab_valid(&d.join("split/time/valid.pt"), &[0, 3, 5, 7], &[0, 7, 2, 5]);
    let r = import(&d, &tmp.path().join("ok.sf")).unwrap();
    assert_eq!(r.negative_pairs, [2, 4]);
}

#[test]
fn hostile_pt_files_are_refused_naming_the_file_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = |name: &str| {
        let d = tmp.path().join(name);
        copy_dir(&data("collab"), &d.join("collab"));
        d.join("collab")
    };

    // An opcode torch.save never writes (POP), before STOP.
    let d = fresh("opcode");
    rezip(&d.join("split/time/valid.pt"), |name, mut b| {
        if name.ends_with("data.pkl") {
            let stop = b.pop().unwrap();
            b.extend_from_slice(&[b'0', stop]);
        }
        b
    });
    refused(&d, "valid.pt", "opcode 0x30 (POP)");

    // A truncated archive.
    let d = fresh("truncated");
    let p = d.join("split/time/test.pt");
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    refused(&d, "test.pt", "not a valid zip archive");

    // Not a zip at all (an old torch file, or a pickle).
    let d = fresh("plain");
    std::fs::write(d.join("split/time/valid.pt"), [0x80, 2, b'}', b'.']).unwrap();
    refused(&d, "valid.pt", "not a zip archive");

    // A shape larger than its storage: 3 × 2 over 4 elements.
    let d = fresh("shape");
    write_pt(
        &d.join("split/time/valid.pt"),
        &[T {
            key: "edge",
            class: "LongStorage",
            skey: "0",
            numel: 4,
            size: &[3, 2],
            stride: &[2, 1],
        }],
        &[("0", i64s(&[0, 3, 5, 7]))],
    );
    refused(&d, "valid.pt", "but its storage holds 4");

    // A storage shorter than its declared elements.
    let d = fresh("short");
    write_pt(
        &d.join("split/time/valid.pt"),
        &[T {
            key: "edge",
            class: "LongStorage",
            skey: "0",
            numel: 4,
            size: &[2, 2],
            stride: &[2, 1],
        }],
        &[("0", i64s(&[0, 3, 5]))],
    );
    refused(&d, "valid.pt", "expected 4 elements × 8 bytes");

    // Floats where node ids are expected.
    let d = fresh("float");
    let floats: Vec<u8> = [0f32, 3.0, 5.0, 7.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    write_pt(
        &d.join("split/time/valid.pt"),
        &[T {
            key: "edge",
            class: "FloatStorage",
            skey: "0",
            numel: 4,
            size: &[2, 2],
            stride: &[2, 1],
        }],
        &[("0", floats)],
    );
    refused(&d, "valid.pt", "dtype float32, expected an integer array");

    // A node id ≥ N = 8, in the negatives.
    let d = fresh("range");
    collab_valid(&d.join("split/time/valid.pt"), &[0, 3, 5, 7], &[0, 7, 8, 5]);
    refused(
        &d,
        "valid.pt",
        "key \"edge_neg\"[1, 0] = 8: node id out of range",
    );

    // A positive that is a training edge: a leak, refused naming the pair.
    let d = fresh("leak");
    collab_valid(&d.join("split/time/valid.pt"), &[0, 3, 1, 0], &[0, 7]);
    refused(&d, "valid.pt", "positive 1 (1, 0) is an edge of the graph");

    // A positive held out twice (in valid and test).
    let d = fresh("twice");
    collab_valid(&d.join("split/time/valid.pt"), &[0, 3, 4, 2], &[0, 7]);
    refused(
        &d,
        "test.pt",
        "positive 0 (2, 4) is positive 1 of valid.pt again",
    );

    // A global that is no tensor or array: never called, refused by name.
    let d = fresh("global");
    let mut p = vec![0x80, 2, b'}', b'('];
    uni(&mut p, "edge");
    p.extend_from_slice(b"cos\nsystem\n(");
    uni(&mut p, "true");
    p.extend_from_slice(b"tRu.");
    write_zip(
        &d.join("split/time/valid.pt"),
        &[("archive/data.pkl".to_string(), p)],
    );
    refused(&d, "valid.pt", "an object built by os.system");

    // Tuples nested a hundred thousand deep (dropping them would overflow the stack).
    let d = fresh("deep");
    let mut p = vec![0x80, 2, b')'];
    p.extend(std::iter::repeat_n(0x85u8, 100_000));
    p.push(b'.');
    write_zip(
        &d.join("split/time/valid.pt"),
        &[("archive/data.pkl".to_string(), p)],
    );
    refused(&d, "valid.pt", "nested more than 32 deep");

    // Tails of the wrong width: 3 rows for 2 positives, and a K unlike valid.pt's.
    let tmp2 = tempfile::tempdir().unwrap();
    let c2 = fixture(tmp2.path(), "citation2");
    let tails = |path: &Path, rows: u64, k: u64| {
        let n = (rows * k) as usize;
        let l = |key, skey, size: &'static [u64], numel| T {
            key,
            class: "LongStorage",
            skey,
            numel,
            size,
            stride: if size.len() == 1 {
                &[1]
            } else {
                Box::leak(vec![size[1], 1].into_boxed_slice())
            },
        };
        write_pt(
            path,
            &[
                l("source_node", "0", &[2], 2),
                l("target_node", "1", &[2], 2),
                l(
                    "target_node_neg",
                    "2",
                    Box::leak(vec![rows, k].into_boxed_slice()),
                    n as u64,
                ),
            ],
            &[
                ("0", i64s(&[2, 4])),
                ("1", i64s(&[4, 7])),
                ("2", i64s(&vec![5; n])),
            ],
        );
    };
    tails(&c2.join("split/time/test.pt"), 3, 3);
    refused(
        &c2,
        "test.pt",
        "expected (2, K): one row of negatives per positive",
    );
    tails(&c2.join("split/time/test.pt"), 2, 4);
    refused(
        &c2,
        "test.pt",
        "4 negatives per positive, expected 3 as valid.pt",
    );
    tails(&c2.join("split/time/test.pt"), 2, 3);
    import(&c2, &tmp2.path().join("fine.sf")).unwrap();
}

#[test]
fn the_command_refuses_a_missing_split_file_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let d = fixture(tmp.path(), "collab");
    std::fs::remove_file(d.join("split/time/train.pt")).unwrap();
    let out = saintflow(
        &["import", "ogb-link", d.to_str().unwrap(), "-o", "x.sf"],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("train.pt: not found"), "{e}");
    assert!(!tmp.path().join("x.sf").exists());
    let e = err_text(import(&tmp.path().join("nope"), &tmp.path().join("y.sf")));
    assert!(e.contains("not a directory"), "{e}");
    std::fs::remove_dir_all(d.join("split")).unwrap();
    let e = err_text(import(&d, &tmp.path().join("y.sf")));
    assert!(
        e.contains("no split: expected split/<name>/{train,valid,test}.pt"),
        "{e}"
    );
}

// ---------------------------------------------------------------- a given split's checks

/// Rewrites link section `id` of `store` with `f` and reseals its checksum (and the
/// header's record with `meta`), so that only the content's damage remains.
fn damage(
    store: &Path,
    id: saintflow::store::format::LinkSectionId,
    f: impl Fn(&mut Vec<u32>),
    meta: impl Fn(&mut saintflow::store::format::LinkMeta),
) {
    use saintflow::store::format::{decode_header, encode_header, HEADER_FILE};
    let p = store.join(id.file_name());
    let mut v: Vec<u32> = std::fs::read(&p)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    f(&mut v);
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(&p, &bytes).unwrap();
    let hp = store.join(HEADER_FILE);
    let mut h = decode_header(&std::fs::read(&hp).unwrap(), &hp).unwrap();
    let link = h.link.as_mut().unwrap();
    link.sections[id.index()].xxh3 = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
    meta(link);
    std::fs::write(&hp, encode_header(&h)).unwrap();
}

#[test]
fn check_holds_a_given_split_to_its_rules() {
    use saintflow::store::format::LinkSectionId as L;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("c2.sf");
    import(&data("citation2"), &base).unwrap();
    let copy = |name: &str| {
        let d = tmp.path().join(name);
        common::copy_store(&base, &d);
        d
    };
    let check_err = |s: &Path| err_text(check(&GraphStore::open(s).unwrap()));

    // The range of its tails.
    let s = copy("tail");
    damage(&s, L::TestNeg, |v| v[4] = 8, |_| {});
    let e = check_err(&s);
    assert!(
        e.contains("link.test.neg") && e.contains("(4, 8) is out of range"),
        "{e}"
    );

    // Its positives as any split's: not in the graph.
    let s = copy("pos");
    damage(&s, L::ValPos, |v| v[..2].copy_from_slice(&[0, 1]), |_| {});
    let e = check_err(&s);
    assert!(
        e.contains("positive 0 (0, 1) is in the stored graph"),
        "{e}"
    );

    // Without `given`, its tails (as OGB gave them) break a drawn split's rules.
    let s = copy("not_given");
    damage(&s, L::TestNeg, |_| {}, |l| l.given = false);
    let e = check_err(&s);
    assert!(
        e.contains("link.test.neg") && e.contains("is a stored edge"),
        "{e}"
    );

    // K = 0 only in a given split; a pair count that does not match its section.
    let tmp2 = tempfile::tempdir().unwrap();
    let collab = tmp2.path().join("collab.sf");
    import(&data("collab"), &collab).unwrap();
    let s = tmp2.path().join("k0");
    common::copy_store(&collab, &s);
    damage(&s, L::TestNeg, |_| {}, |l| l.given = false);
    assert!(err_text(GraphStore::open(&s)).contains("only a given split may lack tail negatives"));
    let s = tmp2.path().join("pairs");
    common::copy_store(&collab, &s);
    damage(&s, L::TestNegPairs, |_| {}, |l| l.test_negpairs = Some(3));
    let e = err_text(GraphStore::open(&s));
    assert!(
        e.contains("link.test.negpairs: expected 6 × U32, got 8"),
        "{e}"
    );
    // Pairs stay oriented a ≤ b, checked at open.
    let s = tmp2.path().join("order");
    common::copy_store(&collab, &s);
    damage(&s, L::TestNegPairs, |v| v.swap(0, 1), |_| {});
    let e = err_text(GraphStore::open(&s));
    assert!(
        e.contains("pair 0 (5, 0): expected the smaller id first"),
        "{e}"
    );
}

#[test]
fn the_readers_other_paths_read_what_torch_wrote() {
    use saintflow::store::import::torch_pt::{PtDtype, PtFile};
    let read = |name: &str| {
        let mut pt = PtFile::open(&data("pt").join(name)).unwrap();
        let a = pt.get("a").unwrap().clone();
        (a.dtype, a.shape.clone(), pt.ints("a").unwrap())
    };
    // A numpy array long enough to stay in the pickle as latin-1 text (bytes ≥ 0x80 are two
    // UTF-8 bytes there).
    let (t, shape, v) = read("numpy_big.pt");
    assert_eq!((t, shape), (PtDtype::I64, vec![700]));
    assert!(v
        .iter()
        .enumerate()
        .all(|(i, &x)| x == (i as i64 * 977) % 70001));
    // Pickle protocol 3: numpy's bytes as BINBYTES; a tensor beside it.
    let mut pt = PtFile::open(&data("pt").join("proto3.pt")).unwrap();
    assert_eq!(pt.ints("a").unwrap(), (0..10).collect::<Vec<i64>>());
    assert_eq!(pt.ints("b").unwrap(), [0, 1, 2, 3]);
    // A transposed view: (3, 2) with stride (1, 3) over 0..6, read in C order.
    assert_eq!(read("strided.pt").2, [0, 3, 1, 4, 2, 5]);
    // A view at offset 3 of a storage of 10.
    assert_eq!(read("offset.pt").2, [3, 4, 5, 6]);
    let (t, _, v) = read("int32.pt");
    assert_eq!((t, v), (PtDtype::I32, vec![-1, 0, i64::from(i32::MAX)]));
}
