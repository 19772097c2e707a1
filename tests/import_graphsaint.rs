//! The GraphSAINT importer: the real datasets (ignored `shared_data_*` tests, run where
//! ../shared/data is) and every kind of malformed input, each an error naming the file, with
//! no store left behind.

mod common;

use std::path::Path;

use common::{err_text, graphsaint_dir, ring_rows, write_csr_npz, write_npy_f32, write_roles};
use saintflow::progress::Progress;
use saintflow::store::import::{import_graphsaint, GraphSaintOptions, Resplit, TrainGraphMode};
use saintflow::store::info::info;
use saintflow::store::{check, GraphStore, LabelKind, Labels, Role, TrainGraph};

fn import(
    dir: &Path,
    out: &Path,
    opts: &GraphSaintOptions,
) -> Result<GraphStore, saintflow::StoreError> {
    import_graphsaint(dir, out, opts, false, &Progress::hidden())?;
    Ok(GraphStore::open(out).unwrap())
}

#[test]
#[ignore = "needs ../shared/data/cora: cargo test -- --ignored shared_data_"]
fn shared_data_cora_matches_its_readme() {
    let dir = common::require_shared_dataset("cora");
    let tmp = tempfile::tempdir().unwrap();
    let s = import(
        &dir,
        &tmp.path().join("cora.sf"),
        &GraphSaintOptions::default(),
    )
    .unwrap();
    check(&s).unwrap();
    let i = info(&s);
    assert_eq!((i.nodes, i.features, i.classes), (2708, 1433, 7));
    assert_eq!(i.label_kind, LabelKind::Single);
    assert_eq!(
        (i.split.train, i.split.val, i.split.test, i.split.none),
        (140, 500, 1000, 1068)
    );
    assert_eq!(i.edges.undirected, 5278);
    assert_eq!((i.degree.min, i.degree.max), (1, 168));
    let Labels::Single(l) = s.labels() else {
        panic!()
    };
    let mut counts = [0u32; 7];
    l.iter().for_each(|&c| counts[c as usize] += 1);
    assert_eq!(counts, [351, 217, 418, 818, 426, 298, 180]);
    assert_eq!(l[0], 3, "README: node 0 has label 3");
    // feats.npy rows are normalised to sum 1.
    let row_sum: f32 = s.feature_row(0).unwrap().iter().sum();
    assert!((row_sum - 1.0).abs() < 1e-5);
}

#[test]
#[ignore = "needs ../shared/data/blogcatalog: cargo test -- --ignored shared_data_"]
fn shared_data_blogcatalog_is_multilabel() {
    let dir = common::require_shared_dataset("blogcatalog");
    let tmp = tempfile::tempdir().unwrap();
    let s = import(
        &dir,
        &tmp.path().join("bc.sf"),
        &GraphSaintOptions::default(),
    )
    .unwrap();
    check(&s).unwrap();
    let i = info(&s);
    assert_eq!(
        (i.nodes, i.features, i.classes, i.edges.undirected),
        (10312, 1, 39, 333983)
    );
    assert_eq!(i.label_kind, LabelKind::Multi);
    assert_eq!(
        (i.split.train, i.split.val, i.split.test),
        (1031, 1031, 8250)
    );
    let labels = s.labels();
    let per_node: Vec<u32> = (0..10312u32)
        .map(|v| (0..39).filter(|&c| labels.has_class(v, c)).count() as u32)
        .collect();
    assert_eq!(*per_node.iter().min().unwrap(), 1);
    assert_eq!(*per_node.iter().max().unwrap(), 11);
    let label_38 = (0..10312u32).filter(|&v| labels.has_class(v, 38)).count();
    assert_eq!(label_38, 8, "README per-label counts end in 8");
}

#[test]
fn synthetic_dataset_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = graphsaint_dir(&tmp.path().join("ds"), 40);
    let s = import(
        &dir,
        &tmp.path().join("a.sf"),
        &GraphSaintOptions::default(),
    )
    .unwrap();
    check(&s).unwrap();
    assert_eq!(s.header().train_graph, TrainGraph::Given);
    let rows = ring_rows(40);
    for (u, r) in rows.iter().enumerate() {
        let got: Vec<i64> = s
            .full()
            .neighbors(u as u32)
            .iter()
            .map(|&v| i64::from(v))
            .collect();
        assert_eq!(&got, r);
    }
    // adj_train (edges among the first 20 nodes) equals the induced training graph.
    let induced = import(
        &dir,
        &tmp.path().join("b.sf"),
        &GraphSaintOptions {
            train_graph: TrainGraphMode::Induce,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(induced.header().train_graph, TrainGraph::Induced);
    assert_eq!(s.train().indices(), induced.train().indices());
    assert_eq!(s.train().offsets(), induced.train().offsets());
    check(&induced).unwrap();
    assert_eq!(s.role(0), Role::Train);
    assert_eq!(s.role(39), Role::Test);
    assert_eq!(
        s.feature_row(2).unwrap(),
        &[6.0 + 1.0, 0.0 + 1.0, 1.0 + 1.0][..]
    );
}

#[test]
fn standardisation_uses_training_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = graphsaint_dir(&tmp.path().join("ds"), 40);
    let s = import(
        &dir,
        &tmp.path().join("a.sf"),
        &GraphSaintOptions {
            standardize: true,
            ..Default::default()
        },
    )
    .unwrap();
    let f = s.n_features();
    let train = s.nodes_with_role(Role::Train);
    for j in 0..f {
        let col: Vec<f64> = train
            .iter()
            .map(|&v| f64::from(s.feature_row(v).unwrap()[j]))
            .collect();
        let m = col.iter().sum::<f64>() / col.len() as f64;
        let var = col.iter().map(|x| (x - m).powi(2)).sum::<f64>() / col.len() as f64;
        assert!(
            m.abs() < 1e-5 && (var - 1.0).abs() < 1e-4,
            "column {j}: mean {m} var {var}"
        );
    }
    // Test rows are transformed with the training statistics, not their own.
    let test = s.nodes_with_role(Role::Test);
    let m: f64 = test
        .iter()
        .map(|&v| f64::from(s.feature_row(v).unwrap()[0]))
        .sum::<f64>()
        / test.len() as f64;
    assert!(
        m > 1.0,
        "test rows have larger raw values, so their standardised mean is positive: {m}"
    );
}

/// Runs the importer on a damaged copy and checks the error names `file` and says `what`.
fn assert_import_fails(tmp: &Path, name: &str, damage: impl FnOnce(&Path), file: &str, what: &str) {
    let dir = graphsaint_dir(&tmp.join(name), 24);
    damage(&dir);
    let out = tmp.join(format!("{name}.sf"));
    let msg = err_text(import(&dir, &out, &GraphSaintOptions::default()));
    assert!(
        msg.contains(file),
        "{name}: error {msg:?} does not name {file:?}"
    );
    assert!(
        msg.contains(what),
        "{name}: error {msg:?} does not say {what:?}"
    );
    assert!(!out.exists(), "{name}: a store was left behind");
    let leftovers: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "{name}: temporary directory left behind"
    );
}

#[test]
fn malformed_inputs_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    assert_import_fails(
        t,
        "garbage-npz",
        |d| std::fs::write(d.join("adj_full.npz"), b"PK\x03\x04 not really").unwrap(),
        "adj_full.npz",
        "not a valid npz",
    );
    assert_import_fails(
        t,
        "empty-npz",
        |d| std::fs::write(d.join("adj_full.npz"), b"").unwrap(),
        "adj_full.npz",
        "not a valid npz",
    );
    assert_import_fails(
        t,
        "missing-feats",
        |d| std::fs::remove_file(d.join("feats.npy")).unwrap(),
        "feats.npy",
        "No such file",
    );
    assert_import_fails(
        t,
        "missing-adj",
        |d| std::fs::remove_file(d.join("adj_full.npz")).unwrap(),
        "adj_full.npz",
        "No such file",
    );
    assert_import_fails(
        t,
        "csc",
        |d| {
            let m = npyz::sparse::Csc {
                data: vec![1.0f32; 2],
                indices: vec![1, 0],
                indptr: vec![0, 1, 2],
                shape: [2, 2],
            };
            m.write_npz(&mut npyz::npz::NpzWriter::create(d.join("adj_full.npz")).unwrap())
                .unwrap();
        },
        "adj_full.npz",
        "sparse format expected \"csr\", got \"csc\"",
    );
    assert_import_fails(
        t,
        "index-range",
        |d| {
            let mut rows = ring_rows(24);
            rows[5].push(99);
            write_csr_npz(&d.join("adj_full.npz"), 24, &rows);
        },
        "adj_full.npz",
        "= 99, expected 0..24",
    );
    assert_import_fails(
        t,
        "asymmetric",
        |d| {
            let mut rows = ring_rows(24);
            rows[0].push(12);
            write_csr_npz(&d.join("adj_full.npz"), 24, &rows);
        },
        "adj_full.npz",
        "not symmetric",
    );
    assert_import_fails(
        t,
        "train-not-subset",
        |d| {
            let mut rows = vec![Vec::new(); 24];
            rows[0].push(12);
            rows[12].push(0);
            write_csr_npz(&d.join("adj_train.npz"), 24, &rows);
        },
        "adj_train.npz",
        "absent from adj_full.npz",
    );
    assert_import_fails(
        t,
        "train-shape",
        |d| write_csr_npz(&d.join("adj_train.npz"), 23, &ring_rows(23)),
        "adj_train.npz",
        "shape expected (24, 24)",
    );
    assert_import_fails(
        t,
        "feats-shape",
        |d| write_npy_f32(&d.join("feats.npy"), 23, 3, &[0.0; 69]),
        "feats.npy",
        "shape expected (24, F), got [23, 3]",
    );
    assert_import_fails(
        t,
        "feats-nan",
        |d| {
            let mut x = vec![0.5f32; 72];
            x[10] = f32::NAN;
            write_npy_f32(&d.join("feats.npy"), 24, 3, &x);
        },
        "feats.npy",
        "not finite",
    );
    assert_import_fails(
        t,
        "feats-not-npy",
        |d| std::fs::write(d.join("feats.npy"), b"\x93NUMPY garbage").unwrap(),
        "feats.npy",
        "not a valid NPY",
    );
    assert_import_fails(
        t,
        "classmap-not-object",
        |d| std::fs::write(d.join("class_map.json"), b"[1, 2, 3]").unwrap(),
        "class_map.json",
        "invalid class map",
    );
    assert_import_fails(
        t,
        "classmap-string",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": "cat"}"#).unwrap(),
        "class_map.json",
        "invalid class map",
    );
    assert_import_fails(
        t,
        "classmap-negative",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": -1}"#).unwrap(),
        "class_map.json",
        "class id -1 is negative",
    );
    assert_import_fails(
        t,
        "classmap-range",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": 1, "24": 0}"#).unwrap(),
        "class_map.json",
        "node id 24 out of range",
    );
    assert_import_fails(
        t,
        "classmap-missing-label",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": 1}"#).unwrap(),
        "class_map.json",
        "node 1 is in the split (Train) but has no label",
    );
    assert_import_fails(
        t,
        "classmap-mixed",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": 1, "1": [0, 1]}"#).unwrap(),
        "class_map.json",
        "mixes single-label",
    );
    assert_import_fails(
        t,
        "classmap-ragged",
        |d| {
            std::fs::write(
                d.join("class_map.json"),
                br#"{"0": [1, 0], "1": [0, 1, 1]}"#,
            )
            .unwrap()
        },
        "class_map.json",
        "expected length 2",
    );
    assert_import_fails(
        t,
        "classmap-bits",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": [2, 0]}"#).unwrap(),
        "class_map.json",
        "expected 0 or 1",
    );
    assert_import_fails(
        t,
        "classmap-dup",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": 1, "0": 2}"#).unwrap(),
        "class_map.json",
        "appears twice",
    );
    assert_import_fails(
        t,
        "classmap-truncated",
        |d| std::fs::write(d.join("class_map.json"), br#"{"0": 1, "1": "#).unwrap(),
        "class_map.json",
        "invalid class map",
    );
    assert_import_fails(
        t,
        "roles-overlap",
        |d| write_roles(d, &[0, 1, 2], &[2, 3], &[4]),
        "role.json",
        "node 2 is in both \"tr\" and \"va\"",
    );
    assert_import_fails(
        t,
        "roles-range",
        |d| write_roles(d, &[0, 1, 30], &[], &[]),
        "role.json",
        "node id 30 out of range",
    );
    assert_import_fails(
        t,
        "roles-shape",
        |d| std::fs::write(d.join("role.json"), br#"{"tr": [0], "va": [1]}"#).unwrap(),
        "role.json",
        "missing field `te`",
    );
    assert_import_fails(
        t,
        "roles-twice",
        |d| write_roles(d, &[0, 0], &[], &[]),
        "role.json",
        "listed twice",
    );
}

#[test]
fn existing_output_is_kept_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = graphsaint_dir(&tmp.path().join("ds"), 24);
    let out = tmp.path().join("x.sf");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("precious"), b"keep me").unwrap();
    let msg = err_text(import_graphsaint(
        &dir,
        &out,
        &GraphSaintOptions::default(),
        false,
        &Progress::hidden(),
    ));
    assert!(msg.contains("already exists"), "{msg}");
    assert_eq!(std::fs::read(out.join("precious")).unwrap(), b"keep me");
    // A forced import that fails keeps the old content too.
    std::fs::remove_file(dir.join("role.json")).unwrap();
    assert!(import_graphsaint(
        &dir,
        &out,
        &GraphSaintOptions::default(),
        true,
        &Progress::hidden()
    )
    .is_err());
    assert_eq!(std::fs::read(out.join("precious")).unwrap(), b"keep me");
    // Issue 15: --force replaces a store only; a directory of the user's is never deleted.
    let dir = graphsaint_dir(&tmp.path().join("ds2"), 24);
    let import = |force| {
        import_graphsaint(
            &dir,
            &out,
            &GraphSaintOptions::default(),
            force,
            &Progress::hidden(),
        )
    };
    let msg = err_text(import(true));
    assert!(
        msg.contains("x.sf: exists and is not a saintflow store") && msg.contains("refusing"),
        "{msg}"
    );
    assert_eq!(std::fs::read(out.join("precious")).unwrap(), b"keep me");
    // A store is replaced with --force.
    std::fs::remove_dir_all(&out).unwrap();
    import(false).unwrap();
    import(true).unwrap();
    GraphStore::open(&out).unwrap();
    // A plain file is not a store either.
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, b"mine").unwrap();
    let msg = err_text(import_graphsaint(
        &dir,
        &file,
        &GraphSaintOptions::default(),
        true,
        &Progress::hidden(),
    ));
    assert!(msg.contains("is not a saintflow store"), "{msg}");
    assert_eq!(std::fs::read(&file).unwrap(), b"mine");
}

/// Issue 15 (fuzzing, `readers` target): npyz allocates an NPY header's declared length
/// before reading it and parses the text with a backtracking parser (a header 16 brackets
/// deep took 30 s); such headers are refused up front, in `.npy` files and npz members.
#[test]
fn issue15_hostile_npy_headers_are_refused_quickly() {
    use std::io::Write;
    let npy = |version: u8, len: u32, text: &[u8]| {
        let mut b = b"\x93NUMPY".to_vec();
        b.push(version);
        b.push(0);
        match version {
            1 => b.extend_from_slice(&(len as u16).to_le_bytes()),
            _ => b.extend_from_slice(&len.to_le_bytes()),
        }
        b.extend_from_slice(text);
        b
    };
    let nested = [
        b"{'descr': '<f4', 'fortran_order': False, 'shape': ".as_slice(),
        &[b'['; 24],
        b"\n",
    ]
    .concat();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let start = std::time::Instant::now();
    let deep = npy(1, nested.len() as u32, &nested);
    assert_import_fails(
        t,
        "deep-feats",
        |d| std::fs::write(d.join("feats.npy"), &deep).unwrap(),
        "feats.npy",
        "not a valid NPY file: header: expected `(`",
    );
    assert_import_fails(
        t,
        "long-header",
        |d| std::fs::write(d.join("feats.npy"), npy(2, u32::MAX, b"{")).unwrap(),
        "feats.npy",
        "header of 4294967295 bytes, expected at most 10000",
    );
    assert_import_fails(
        t,
        "deep-npz-member",
        |d| {
            let f = std::fs::File::create(d.join("adj_full.npz")).unwrap();
            let mut w = npyz::npz::NpzWriter::new(f);
            let z = w.zip_writer();
            z.start_file("format.npy", Default::default()).unwrap();
            z.write_all(&deep).unwrap();
        },
        "adj_full.npz",
        "member format: not a valid NPY file: header: expected `(`",
    );
    assert!(start.elapsed().as_secs() < 5, "took {:?}", start.elapsed());
}

/// `--resplit`: role.json replaced by a seeded split with exact fractions (GAD's Cora
/// 45/18/37), the training graph induced on the new training nodes, `given` refused.
#[test]
fn resplit_has_exact_fractions_and_an_induced_training_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 200;
    let dir = graphsaint_dir(&tmp.path().join("ds"), n);
    let gad = [0.45, 0.18, 0.37];
    let opts = |seed: u64| GraphSaintOptions {
        train_graph: TrainGraphMode::Induce,
        resplit: Some(Resplit {
            fractions: gad,
            seed,
        }),
        ..Default::default()
    };
    let roles = |s: &GraphStore| (0..n as u32).map(|v| s.role(v)).collect::<Vec<_>>();
    let a = import(&dir, &tmp.path().join("a.sf"), &opts(1)).unwrap();
    check(&a).unwrap();
    let i = info(&a);
    // Exact up to rounding, every (labelled) node one role.
    assert_eq!(
        (i.split.train, i.split.val, i.split.test, i.split.none),
        (90, 36, 74, 0)
    );
    assert!(a
        .header()
        .source
        .contains("--resplit 0.45,0.18,0.37 --split-seed 1"));
    assert_eq!(a.header().train_graph, TrainGraph::Induced);
    // Not role.json's split (its training nodes are 0..100).
    assert_ne!(
        a.nodes_with_role(Role::Train),
        (0..100).collect::<Vec<u32>>()
    );
    // Deterministic for a seed, another split for another seed.
    let b = import(&dir, &tmp.path().join("b.sf"), &opts(1)).unwrap();
    assert_eq!(roles(&a), roles(&b));
    let c = import(&dir, &tmp.path().join("c.sf"), &opts(2)).unwrap();
    assert_ne!(roles(&a), roles(&c));
    assert_eq!(info(&c).split.train, 90);
    // The training graph: the full graph's edges among the new training nodes, only those.
    let tr = |v: u32| a.role(v) == Role::Train;
    for u in 0..n as u32 {
        let want: Vec<u32> = match tr(u) {
            true => a
                .full()
                .neighbors(u)
                .iter()
                .copied()
                .filter(|&v| tr(v))
                .collect(),
            false => vec![],
        };
        assert_eq!(a.train().neighbors(u), &want[..], "node {u}");
    }
    assert!(a.train().n_entries() > 0);
    // It trains.
    let plan = saintflow::plan::Plan::load(concat!(env!("CARGO_MANIFEST_DIR"), "/plans/gcn.toml"))
        .unwrap();
    let out = saintflow::train::TrainOptions::new(&plan, &a)
        .seed(1)
        .threads(1)
        .epochs(2)
        .train()
        .unwrap();
    assert!(out.losses().iter().all(|l| l.is_finite()));
    // `given` (role.json's adj_train) is refused, as are fractions beyond 1.
    let given = GraphSaintOptions {
        train_graph: TrainGraphMode::Given,
        ..opts(1)
    };
    let e = err_text(import(&dir, &tmp.path().join("d.sf"), &given));
    assert!(
        e.contains("--train-graph given") && e.contains("induce"),
        "{e}"
    );
    let over = GraphSaintOptions {
        resplit: Some(Resplit {
            fractions: [0.6, 0.3, 0.2],
            seed: 1,
        }),
        ..opts(1)
    };
    let e = err_text(import(&dir, &tmp.path().join("e.sf"), &over));
    assert!(e.contains("sum of at most 1"), "{e}");
    assert!(!tmp.path().join("d.sf").exists() && !tmp.path().join("e.sf").exists());
}

#[test]
#[ignore = "needs ../shared/data/cora: cargo test -- --ignored shared_data_"]
fn shared_data_cora_resplit_is_gads_45_18_37() {
    let dir = common::require_shared_dataset("cora");
    let tmp = tempfile::tempdir().unwrap();
    let s = import(
        &dir,
        &tmp.path().join("cora.sf"),
        &GraphSaintOptions {
            train_graph: TrainGraphMode::Induce,
            resplit: Some(Resplit {
                fractions: [0.45, 0.18, 0.37],
                seed: 7,
            }),
            ..Default::default()
        },
    )
    .unwrap();
    check(&s).unwrap();
    let i = info(&s);
    // 2708 labelled nodes: round(1218.6) = 1219, round(1706.04) − 1219 = 487, the rest 1002.
    assert_eq!(
        (i.split.train, i.split.val, i.split.test, i.split.none),
        (1219, 487, 1002, 0)
    );
}

/// The command: `--resplit` implies `--train-graph induce`, refuses `given`, and
/// `--split-seed` needs it.
#[test]
fn resplit_on_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = graphsaint_dir(&tmp.path().join("ds"), 40);
    let run = |out: &str, extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
            .args(["import", "graphsaint"])
            .arg(&dir)
            .arg("-o")
            .arg(tmp.path().join(out))
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(
        "a.sf",
        &["--resplit", "0.45,0.18,0.37", "--split-seed", "3"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = GraphStore::open(tmp.path().join("a.sf")).unwrap();
    assert_eq!(s.header().train_graph, TrainGraph::Induced);
    let i = info(&s);
    assert_eq!((i.split.train, i.split.val, i.split.test), (18, 7, 15));
    let o = run(
        "b.sf",
        &["--resplit", "0.45,0.18,0.37", "--train-graph", "given"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--train-graph given"));
    let o = run("c.sf", &["--split-seed", "3"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Issue 55 item 1 for GraphSAINT directories: every input file in turn replaced by a
/// directory, by an empty file, or cut to half its length is an error naming that file,
/// with nothing published; `--train-graph full` stores the full graph as the training one.
#[test]
fn issue55_every_input_file_damaged_is_an_error_naming_it() {
    let files = [
        "adj_full.npz",
        "adj_train.npz",
        "feats.npy",
        "class_map.json",
        "role.json",
    ];
    for f in files {
        for damage in ["directory", "empty", "half"] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = graphsaint_dir(&tmp.path().join("ds"), 16);
            let p = dir.join(f);
            let whole = std::fs::read(&p).unwrap();
            match damage {
                "directory" => {
                    std::fs::remove_file(&p).unwrap();
                    std::fs::create_dir(&p).unwrap();
                }
                "empty" => std::fs::write(&p, b"").unwrap(),
                _ => std::fs::write(&p, &whole[..whole.len() / 2]).unwrap(),
            }
            let out = tmp.path().join("o.sf");
            let msg = err_text(import(&dir, &out, &GraphSaintOptions::default()));
            assert!(msg.contains(f), "{f} {damage}: {msg}");
            assert!(!out.exists(), "{f} {damage}: nothing published");
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = graphsaint_dir(&tmp.path().join("ds"), 16);
    let opts = GraphSaintOptions {
        train_graph: TrainGraphMode::Full,
        ..GraphSaintOptions::default()
    };
    let s = import(&dir, &tmp.path().join("full.sf"), &opts).unwrap();
    check(&s).unwrap();
    assert_eq!(s.train().indices(), s.full().indices());
    assert_eq!(s.header().train_graph, TrainGraph::Given);
    assert!(s.header().source.contains("--train-graph full"));
}
