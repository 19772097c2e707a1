//! The seed corpus: small valid (and a few nearly valid) inputs per target, from which
//! libFuzzer mutates. `cargo run -p saintflow-fuzz --example seeds` writes them under
//! `fuzz/corpus/<target>/`; the replay test runs whatever is committed there.

use std::path::Path;

use saintflow::store::format::Role;
use saintflow::train::TrainOptions;

use crate::{base, checkpoint};

/// `(file name, bytes)` seeds of target `target`; `repo` is the repository root (the
/// `plan` seeds are the shipped plan files).
pub fn seeds(target: &str, repo: &Path) -> Vec<(String, Vec<u8>)> {
    match target {
        "plan" => plan_seeds(repo),
        "store_step" => store_step_seeds(),
        "readers" => reader_seeds(),
        "edgelist" => edgelist_seeds(),
        "checkpoint" => [checkpoint_seeds(), crafted_checkpoint_seeds()].concat(),
        "embedding_plan" => embedding_plan_seeds(repo),
        "partition" => partition_seeds(),
        "safetensors" => safetensors_seeds(),
        "ogb" => ogb_seeds(),
        "torch_pt" => crate::torch_pt::seeds(repo),
        t => panic!("unknown fuzz target {t:?}"),
    }
}

fn plan_seeds(repo: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo.join("plans"))
        .expect("plans/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    for p in files {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((name, std::fs::read(&p).expect("plan file")));
    }
    for i in 0..base::N_PLANS {
        out.push((
            format!("fuzz{i}"),
            base::plan(i).effective_text().as_bytes().to_vec(),
        ));
    }
    let mut gcn = std::fs::read(repo.join("plans/gcn.toml")).expect("gcn.toml");
    gcn.extend_from_slice(b"\0dims.hidden=4\0sampler.kind=\"rw\"\0layer.0.dropout=0.1");
    out.push(("gcn_overrides".into(), gcn));
    out
}

/// The shipped `[embedding]` plans as they are and with overrides.
fn embedding_plan_seeds(repo: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in ["deepwalk", "line", "node2vec"] {
        let text = std::fs::read(repo.join(format!("plans/{name}.toml"))).expect("plan file");
        let mut small = text.clone();
        small.extend_from_slice(b"\0embedding.dim=8\0embedding.window=3\0embedding.walk_length=6");
        out.push((name.to_string(), text));
        out.push((format!("{name}_overrides"), small));
    }
    out
}

/// Options of `partition`: k, ranks (0: none), ε and α (f64 bits), L (u16), seed.
fn partition_seeds() -> Vec<(String, Vec<u8>)> {
    let case = |k: u8, ranks: u8, eps: f64, alpha: f64, layers: u16, seed: u64| {
        let mut b = vec![k, ranks];
        b.extend_from_slice(&eps.to_bits().to_le_bytes());
        b.extend_from_slice(&alpha.to_bits().to_le_bytes());
        b.extend_from_slice(&layers.to_le_bytes());
        b.extend_from_slice(&seed.to_le_bytes());
        b
    };
    vec![
        ("k2".into(), case(2, 0, 0.03, 0.01, 2, 0)),
        ("k4_ranks2".into(), case(4, 2, 0.03, 0.5, 3, 7)),
        ("k1".into(), case(1, 0, 0.0, 0.01, 2, 1)),
        ("k_n".into(), case(64, 0, 0.03, 0.01, 2, 2)),
        ("k_beyond_n".into(), case(70, 0, 0.03, 0.01, 2, 3)),
        ("eps_nan".into(), case(3, 0, f64::NAN, 0.01, 2, 4)),
        ("alpha_negative".into(), case(3, 0, 0.03, -1.0, 2, 5)),
        ("no_walks".into(), case(5, 3, 0.1, 0.01, 0, 6)),
    ]
}

fn store_step_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..base::N_PLANS as u8 {
        out.push((format!("clean_plan{i}"), vec![i]));
        out.push((format!("clean_plan{i}_eval"), vec![i | 0x20]));
    }
    // file indices: 0 full.offsets, 1 full.indices, 2 train.offsets, 3 train.indices,
    // 4 features, 5 labels, 6 roles, 7 header.
    let ops: [(&str, Vec<u8>); 8] = [
        ("index_out_of_range", vec![0, 1, 8, 0, 4, 0xff, 0xff, 0, 0]),
        (
            "offsets_overwrite",
            vec![0, 0, 16, 0, 8, 0xff, 0, 0, 0, 0, 0, 0, 0],
        ),
        ("features_truncated", vec![1, 4, 100, 0]),
        ("train_indices_zeroed", vec![2, 3, 0, 0, 64, 0]),
        ("labels_appended", vec![3, 5, 4, 1, 2, 3, 4]),
        ("header_n_nodes", vec![4, 0, 65, 0, 0, 0, 0, 0, 0, 0]),
        ("header_n_classes", vec![4, 4, 1, 0, 0, 0, 0, 0, 0, 0]),
        ("role_byte", vec![0, 6, 3, 0, 1, 9]),
    ];
    for (k, (name, op)) in ops.into_iter().enumerate() {
        for reseal in [0u8, 0x10] {
            let mut data = vec![(k as u8 % base::N_PLANS as u8) | reseal];
            data.extend_from_slice(&op);
            out.push((
                format!("{name}{}", if reseal != 0 { "_resealed" } else { "" }),
                data,
            ));
        }
    }
    out
}

fn npy<T: npyz::Serialize + npyz::AutoSerialize + Copy>(shape: &[u64], data: &[T]) -> Vec<u8> {
    use npyz::WriterBuilder;
    let mut buf = Vec::new();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut buf)
        .begin_nd()
        .expect("npy writer");
    w.extend(data.iter().copied()).expect("npy elements");
    w.finish().expect("npy finished");
    buf
}

/// A scipy CSR npz of a ring of `n` nodes (both directions).
fn ring_npz(n: u64) -> Vec<u8> {
    let mut indices = Vec::new();
    let mut indptr = vec![0usize];
    for i in 0..n {
        let mut row = vec![(i + n - 1) % n, (i + 1) % n];
        row.sort();
        row.dedup();
        row.retain(|&j| j != i);
        indices.extend(row);
        indptr.push(indices.len());
    }
    let m = npyz::sparse::Csr {
        data: vec![1.0f32; indices.len()],
        indices,
        indptr,
        shape: [n, n],
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let path = tmp.path().join("a.npz");
    let mut w = npyz::npz::NpzWriter::create(&path).expect("npz writer");
    m.write_npz(&mut w).expect("npz written");
    drop(w);
    std::fs::read(&path).expect("npz read")
}

fn reader_seeds() -> Vec<(String, Vec<u8>)> {
    let with = |which: u8, n: u8, file: Vec<u8>| {
        let mut d = vec![which, n];
        d.extend(file);
        d
    };
    let feats: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
    let classes: Vec<i64> = (0..8).map(|i| i % 3 - (i == 5) as i64).collect();
    let multi: Vec<u8> = (0..8 * 4).map(|i| (i % 3 == 0) as u8).collect();
    vec![
        ("features_f32".into(), with(0, 8, npy(&[8, 3], &feats))),
        ("features_std".into(), with(8, 8, npy(&[8, 3], &feats))),
        ("features_i64_1d".into(), with(0, 8, npy(&[8], &classes))),
        ("labels_single".into(), with(1, 8, npy(&[8], &classes))),
        ("labels_multi".into(), with(1, 8, npy(&[8, 4], &multi))),
        (
            "class_map_single".into(),
            with(2, 4, br#"{"0": 1, "1": 0, "3": 2}"#.to_vec()),
        ),
        (
            "class_map_multi".into(),
            with(2, 3, br#"{"0": [0, 1, 1], "2": [1, 0, 0]}"#.to_vec()),
        ),
        (
            "roles".into(),
            with(3, 6, br#"{"tr": [0, 1, 2], "va": [3], "te": [5]}"#.to_vec()),
        ),
        ("npz_ring_induce".into(), with(4, 0, ring_npz(6))),
        ("npz_ring_given".into(), with(5, 0, ring_npz(5))),
    ]
}

fn edgelist_seeds() -> Vec<(String, Vec<u8>)> {
    let with = |flags: u8, extra: &[u8], text: &str| {
        let mut d = vec![flags];
        d.extend_from_slice(extra);
        d.extend_from_slice(text.as_bytes());
        d
    };
    vec![
        (
            "symmetric".into(),
            with(
                0,
                &[],
                "# a triangle and a tail\n0 1\n1 0\n1 2\n2 1\n0 2\n2 0\n2 3\n3 2\n",
            ),
        ),
        (
            "symmetrize".into(),
            with(1, &[], "% comment\n0 1 0.5\n1 2 7\n\n2 3\n3 3\n0 1\n"),
        ),
        ("asymmetric".into(), with(0, &[], "0 1\n1 2\n2 1\n")),
        ("nodes_given".into(), with(3, &[10], "0 1\n4 2\n")),
        ("bad_token".into(), with(1, &[], "0 1\n1 x\n")),
        ("crlf_tabs".into(), with(1, &[], "0\t1\r\n1\t2\r\n")),
    ]
}

/// Checkpoint encodings (without magic and checksum) of each fixed plan after one epoch
/// on the base store, with the mode byte that seals them and sets their identity.
fn checkpoint_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..base::N_PLANS {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let dir = base::write_store(tmp.path(), "s.sf");
        let store = saintflow::GraphStore::open(&dir).expect("base store");
        assert!(store.role_count(Role::Train) > 0);
        let path = tmp.path().join("checkpoint.bin");
        TrainOptions::new(base::plan(i), &store)
            .seed(checkpoint::SEED)
            .checkpoint(&path)
            .epochs(2)
            .stop_after(1)
            .train()
            .expect("a checkpointed epoch");
        let bytes = std::fs::read(&path).expect("checkpoint written");
        let body = &bytes[checkpoint::MAGIC.len()..bytes.len() - 8];
        for (suffix, mode) in [("", 0x10), ("_eval", 0x30)] {
            let mut d = vec![i as u8 | mode];
            d.extend_from_slice(body);
            out.push((format!("plan{i}_epoch1{suffix}"), d));
        }
        let mut raw = vec![i as u8];
        raw.extend_from_slice(&bytes);
        out.push((format!("plan{i}_raw_file"), raw));
    }
    out
}

/// `safetensors` seeds: each fixed plan's exported weights after one epoch on the base
/// store (as is, and with a step from them), and the well-formed mode's payloads: plain
/// values, a NaN, an infinity, an F64 header.
fn safetensors_seeds() -> Vec<(String, Vec<u8>)> {
    use saintflow::train::export::{export_safetensors, Which};
    let mut out = Vec::new();
    for i in 0..base::N_PLANS {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let dir = base::write_store(tmp.path(), "s.sf");
        let store = saintflow::GraphStore::open(&dir).expect("base store");
        let path = tmp.path().join("checkpoint.bin");
        TrainOptions::new(base::plan(i), &store)
            .seed(crate::safetensors::SEED)
            .checkpoint(&path)
            .epochs(1)
            .no_eval(true)
            .train()
            .expect("a checkpointed epoch");
        let st = tmp.path().join("w.safetensors");
        export_safetensors(&path, &st, Which::Last, None).expect("exported");
        let bytes = std::fs::read(&st).expect("export read");
        for (suffix, mode) in [("", 0u8), ("_step", 0x20)] {
            let mut d = vec![i as u8 | mode];
            d.extend_from_slice(&bytes);
            out.push((format!("plan{i}_export{suffix}"), d));
        }
        let one = 0.25f32.to_le_bytes();
        for (name, mode, payload) in [
            ("values", 0x28u8, one.to_vec()),
            ("nan", 0x08, f32::NAN.to_le_bytes().to_vec()),
            ("inf", 0x08, [one, f32::INFINITY.to_le_bytes()].concat()),
            ("f64", 0x18, one.to_vec()),
        ] {
            let mut d = vec![i as u8 | mode];
            d.extend_from_slice(&payload);
            out.push((format!("plan{i}_{name}"), d));
        }
    }
    out
}

/// Issue 55 item 8: checkpoints of plan 0 after one evaluated epoch with one field made
/// impossible each (the cases the loader once took: a duplicated parameter name, which
/// made `export` panic in the safetensors crate; an epoch of 10¹⁸ or a step of u64::MAX,
/// resumed as finished; NaN weights, trained on), sealed by the target (mode 0x30).
fn crafted_checkpoint_seeds() -> Vec<(String, Vec<u8>)> {
    use saintflow::train::Checkpoint;
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = base::write_store(tmp.path(), "s.sf");
    let store = saintflow::GraphStore::open(&dir).expect("base store");
    let path = tmp.path().join("checkpoint.bin");
    TrainOptions::new(base::plan(0), &store)
        .seed(checkpoint::SEED)
        .checkpoint(&path)
        .epochs(2)
        .stop_after(1)
        .train()
        .expect("a checkpointed epoch");
    let good = Checkpoint::load(&path).expect("checkpoint written");
    type Craft = fn(&mut Checkpoint);
    let crafts: [(&str, Craft); 6] = [
        ("duplicate_name", |c| {
            let first = c.params[0].clone();
            c.params.push(first)
        }),
        ("epoch_1e18", |c| c.epoch = 1_000_000_000_000_000_000),
        ("step_u64_max", |c| {
            c.step = u64::MAX;
            c.opt_t = u64::MAX
        }),
        ("nan_weight", |c| c.params[0].data[0] = f32::NAN),
        ("inf_best_weight", |c| {
            if let Some(b) = c.best_params.as_mut() {
                b[0].data[0] = f32::INFINITY
            }
        }),
        ("elapsed_nan", |c| c.elapsed = f64::NAN),
    ];
    crafts
        .into_iter()
        .map(|(name, craft)| {
            let mut c = good.clone();
            craft(&mut c);
            let bytes = c.encode_unchecked();
            let mut d = vec![0x30];
            d.extend_from_slice(&bytes[checkpoint::MAGIC.len()..bytes.len() - 8]);
            (format!("crafted_{name}"), d)
        })
        .collect()
}
/// `ogb`: every selector with its file as the valid dataset has it (the fuzzer mutates
/// from there), and the damage of issue 55 (plain-text and cut gzip, a directory, a
/// header declaring more than its member holds, float64 beyond float32, 4e9 nodes).
fn ogb_seeds() -> Vec<(String, Vec<u8>)> {
    use crate::ogb::{csv_text, gzip, member_npy, npy_f64, npz, CSV_FILES, DATA_MEMBERS};
    let with = |which: u8, rest: Vec<u8>| [vec![which], rest].concat();
    let name = |f: &str| {
        f.rsplit('/')
            .next()
            .unwrap()
            .trim_end_matches(".csv.gz")
            .replace('-', "_")
    };
    let mut out = Vec::new();
    for (k, f) in CSV_FILES.iter().enumerate() {
        let text = csv_text(k).as_bytes().to_vec();
        out.push((
            format!("valid_csv_{}", name(f)),
            with(k as u8, text.clone()),
        ));
        out.push((
            format!("valid_raw_{}", name(f)),
            with(k as u8 | 0x10, gzip(&text)),
        ));
        let cut = gzip(&text);
        out.push((
            format!("broken_cut_{}", name(f)),
            with(k as u8 | 0x10, cut[..cut.len() - 3].to_vec()),
        ));
    }
    out.push(("valid_csv_induce".into(), with(0x20, b"6\n".to_vec())));
    out.push((
        "broken_plain_train".into(),
        with(5 | 0x10, b"0\n1\n2\n".to_vec()),
    ));
    out.push(("broken_train_dir".into(), with(15, Vec::new())));
    out.push(("broken_nodes_4e9".into(), with(0, b"4000000000\n".to_vec())));
    out.push((
        "broken_feat_1e300".into(),
        with(3, b"0,1\n1,2\n2,1e300\n3,4\n4,5\n5,6\n".to_vec()),
    ));
    for (k, m) in DATA_MEMBERS.iter().enumerate() {
        out.push((format!("valid_npz_{m}"), with(8 + k as u8, member_npy(k))));
    }
    out.push(("valid_npz_node_label".into(), with(12, member_npy(4))));
    let members: Vec<(&str, Vec<u8>)> = DATA_MEMBERS
        .iter()
        .enumerate()
        .map(|(k, m)| (*m, member_npy(k)))
        .collect();
    out.push(("valid_npz_data_archive".into(), with(13, npz(&members))));
    out.push((
        "valid_npz_label_archive".into(),
        with(14, npz(&[("node_label", member_npy(4))])),
    ));
    out.push((
        "broken_npz_label_2_40".into(),
        with(12, npy_f64(&[6, 1 << 40], &[0.0; 6])),
    ));
    let mut feat = vec![0.5; 12];
    feat[4] = 1e300;
    out.push((
        "broken_npz_feat_1e300".into(),
        with(9, npy_f64(&[6, 2], &feat)),
    ));
    out.push((
        "broken_npz_trailing".into(),
        with(9, npy_f64(&[6, 2], &[0.5; 13])),
    ));
    out
}
