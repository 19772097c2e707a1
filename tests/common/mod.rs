//! Helpers shared by the integration tests: small stores, damaged files, GraphSAINT inputs.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;
use saintflow::progress::Progress;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};

/// The shipped GNN plans' files, sorted: `plans/*.toml` but the `[embedding]` family
/// (no GNN: tests/embedding.rs covers it).
pub fn gnn_plan_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| {
            !matches!(
                saintflow::plan::AnyPlan::load(p, &[] as &[&str]),
                Ok(saintflow::plan::AnyPlan::Embedding(_))
            )
        })
        .collect();
    v.sort();
    v
}

/// The shipped GNN plans' names (file stems), sorted.
pub fn gnn_plans() -> Vec<String> {
    gnn_plan_files()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// `base`, with the link targets of the plan at `path` when it is a link plan.
#[allow(dead_code)]
pub fn source_for_plan(
    path: &Path,
    base: &saintflow::op::MemorySource,
) -> saintflow::op::MemorySource {
    let plan = saintflow::plan::Plan::load(path).unwrap();
    match plan.task.link() {
        Some(task) => base.clone().with_link(task.sampling),
        None => base.clone(),
    }
}

/// A small planted Kronecker store at `dir/name`.
pub fn small_store(dir: &Path, name: &str, scale: u32, seed: u64) -> PathBuf {
    let out = dir.join(name);
    let spec = KroneckerSpec {
        scale,
        degree: 8.0,
        n_features: 6,
        n_classes: 3,
        seed,
        planted: Some(Planted::default()),
        ..KroneckerSpec::default()
    };
    generate_kronecker(&spec, &out, false, &Progress::hidden()).expect("generate");
    out
}

/// A planted graph where structure carries the class (homophily 0.9) and features barely
/// do (centroids 0.3 noise deviations from the origin).
pub fn planted(dir: &Path, scale: u32) -> PathBuf {
    let path = dir.join(format!("planted{scale}.sf"));
    let spec = KroneckerSpec {
        scale,
        degree: 8.0,
        n_features: 8,
        n_classes: 4,
        seed: 7,
        planted: Some(Planted {
            homophily: 0.9,
            separation: 0.3,
        }),
        ..KroneckerSpec::default()
    };
    generate_kronecker(&spec, &path, true, &Progress::hidden()).unwrap();
    path
}

/// Runs the `saintflow` binary with `args` in `cwd`.
pub fn saintflow(args: &[&str], cwd: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// [`saintflow`], asserting that it succeeded (its stderr in the message otherwise).
pub fn saintflow_ok(args: &[&str], cwd: &Path) -> std::process::Output {
    let out = saintflow(args, cwd);
    assert!(
        out.status.success(),
        "saintflow {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `saintflow gen kronecker` of a planted store at `scale` (degree 8, 8 features, 3
/// classes) written to `out` in `cwd`: the small graph the CLI tests train on.
pub fn gen_planted_cli(scale: u32, out: &str, cwd: &Path) {
    let scale = scale.to_string();
    saintflow_ok(
        &[
            "gen",
            "kronecker",
            "--scale",
            &scale,
            "--degree",
            "8",
            "--features",
            "8",
            "--classes",
            "3",
            "--planted",
            "-o",
            out,
            "-q",
        ],
        cwd,
    );
}

/// Overwrites bytes of a file at `offset`.
pub fn poke(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

/// Copies a store directory.
pub fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Writes a scipy-style CSR npz for an N×N matrix from per-row neighbour lists.
pub fn write_csr_npz(path: &Path, n: u64, rows: &[Vec<i64>]) {
    let mut indptr = vec![0usize];
    let mut indices = Vec::new();
    for r in rows {
        indices.extend(r.iter().map(|&x| x as u64));
        indptr.push(indices.len());
    }
    let m = npyz::sparse::Csr {
        data: vec![1.0f32; indices.len()],
        indices,
        indptr,
        shape: [n, n],
    };
    let mut w = npyz::npz::NpzWriter::create(path).unwrap();
    m.write_npz(&mut w).unwrap();
}

/// Symmetric neighbour lists of a ring of `n` nodes plus chords i–(i+3).
pub fn ring_rows(n: usize) -> Vec<Vec<i64>> {
    let mut rows = vec![Vec::new(); n];
    for i in 0..n {
        for d in [1, 3] {
            let j = (i + d) % n;
            if i != j {
                rows[i].push(j as i64);
                rows[j].push(i as i64);
            }
        }
    }
    for r in &mut rows {
        r.sort();
        r.dedup();
    }
    rows
}

/// Writes an (n, f) f32 .npy file.
pub fn write_npy_f32(path: &Path, n: u64, f: u64, data: &[f32]) {
    let file = BufWriter::new(File::create(path).unwrap());
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[n, f])
        .writer(file)
        .begin_nd()
        .unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// Writes a 1-D i64 .npy file.
pub fn write_npy_i64(path: &Path, data: &[i64]) {
    let file = BufWriter::new(File::create(path).unwrap());
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[data.len() as u64])
        .writer(file)
        .begin_nd()
        .unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// A complete, valid GraphSAINT dataset directory of `n` nodes (ring + chords), F = 3,
/// 3 classes (single-label), roles tr = first half, va = next quarter, te = rest.
pub fn graphsaint_dir(dir: &Path, n: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let rows = ring_rows(n);
    write_csr_npz(&dir.join("adj_full.npz"), n as u64, &rows);
    // GraphSAINT's adj_train: only edges between training nodes.
    let tr = n / 2;
    let train_rows: Vec<Vec<i64>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if i < tr {
                r.iter().copied().filter(|&j| (j as usize) < tr).collect()
            } else {
                vec![]
            }
        })
        .collect();
    write_csr_npz(&dir.join("adj_train.npz"), n as u64, &train_rows);
    let feats: Vec<f32> = (0..n * 3)
        .map(|i| (i % 7) as f32 + (i / 3) as f32 * 0.5)
        .collect();
    write_npy_f32(&dir.join("feats.npy"), n as u64, 3, &feats);
    let class_map: Vec<String> = (0..n).map(|i| format!("\"{i}\":{}", i % 3)).collect();
    std::fs::write(
        dir.join("class_map.json"),
        format!("{{{}}}", class_map.join(",")),
    )
    .unwrap();
    write_roles(
        dir,
        &(0..tr).collect::<Vec<_>>(),
        &(tr..tr + n / 4).collect::<Vec<_>>(),
        &(tr + n / 4..n).collect::<Vec<_>>(),
    );
    dir.to_path_buf()
}

/// Writes role.json.
pub fn write_roles(dir: &Path, tr: &[usize], va: &[usize], te: &[usize]) {
    let j = |v: &[usize]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    std::fs::write(
        dir.join("role.json"),
        format!(
            "{{\"tr\":[{}],\"va\":[{}],\"te\":[{}]}}",
            j(tr),
            j(va),
            j(te)
        ),
    )
    .unwrap();
}

/// Path to a shared real dataset, if this checkout has ../shared/data beside it.
pub fn shared_dataset(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(name);
    p.join("adj_full.npz").exists().then_some(p)
}

/// Path to a shared real dataset for a test that needs it. Such a test is
/// `#[ignore = "needs ../shared/data/NAME ..."]` and named `shared_data_*`, so the default
/// suite passes on a machine with only the clone; `.ci/run` runs them with `--ignored
/// shared_data_` where `../shared/data` is present. Run by hand without the data, it fails
/// saying what is missing (never a silent pass).
pub fn require_shared_dataset(name: &str) -> PathBuf {
    shared_dataset(name).unwrap_or_else(|| {
        panic!(
            "../shared/data/{name} is missing beside the checkout: this test reads the \
             shared dataset (GraphSAINT format) and cannot run without it"
        )
    })
}

/// The error message of a result, panicking if it is Ok.
pub fn err_text<T, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(_) => panic!("expected an error, got Ok"),
        Err(e) => e.to_string(),
    }
}

/// Symmetric CSR arrays (sorted, deduplicated, loop-free) of an undirected edge list.
pub fn symmetric_csr(n: usize, edges: &[(u32, u32)]) -> (Vec<u64>, Vec<u32>) {
    let mut pairs: Vec<(u32, u32)> = edges
        .iter()
        .flat_map(|&(u, v)| [(u, v), (v, u)])
        .filter(|(u, v)| u != v)
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut offsets = vec![0u64; n + 1];
    for &(u, _) in &pairs {
        offsets[u as usize + 1] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    (offsets, pairs.into_iter().map(|(_, v)| v).collect())
}

/// [`planted`] at `scale` in `dir` and its `k`-way partition with GAD augmentation of
/// budget `alpha` (partition seed `seed`) at `dir/pK`: (the full store, the partition).
pub fn partitioned(dir: &Path, scale: u32, k: usize, alpha: f64, seed: u64) -> (PathBuf, PathBuf) {
    partitioned_for(dir, scale, k, None, alpha, seed)
}

/// [`partitioned`] for `ranks` ranks (None: k) at `dir/pK` or `dir/pKrP`.
pub fn partitioned_for(
    dir: &Path,
    scale: u32,
    k: usize,
    ranks: Option<usize>,
    alpha: f64,
    seed: u64,
) -> (PathBuf, PathBuf) {
    use saintflow::dist::partition::{
        partition_store, AugmentOptions, PartitionOptions, PartitionSpec,
    };
    let full = planted(dir, scale);
    let out = match ranks {
        Some(p) => dir.join(format!("p{k}r{p}")),
        None => dir.join(format!("p{k}")),
    };
    let spec = PartitionSpec {
        ranks,
        partition: PartitionOptions {
            k,
            epsilon: 0.03,
            seed,
        },
        augment: AugmentOptions {
            alpha,
            ..AugmentOptions::default()
        },
        ..PartitionSpec::default()
    };
    partition_store(&full, &out, &spec, false, &Progress::hidden()).unwrap();
    (full, out)
}

/// Asserts that `observed` counts fit `expected` ones: the chi-square statistic below its
/// critical value at p = 0.001 for `df` degrees of freedom; `what` names the case.
pub fn assert_chi_square(observed: &[u64], expected: &[f64], df: usize, what: &str) {
    use saintflow::sample::naive::{chi_square, chi_square_critical};
    let x2 = chi_square(observed, expected);
    assert!(
        x2 < chi_square_critical(df),
        "{what}: χ² {x2} (df {df}): {observed:?} vs {expected:?}"
    );
}

/// (global step, loss) of every `step` record.
pub fn step_losses(records: &[saintflow::log::Record]) -> Vec<(u64, f64)> {
    records
        .iter()
        .filter_map(|r| match r {
            saintflow::log::Record::Step { step, loss, .. } => Some((*step, *loss)),
            _ => None,
        })
        .collect()
}

/// A two-layer full-batch GCN with no dropout, no `[eval]` and no weight decay: what a test
/// overrides (`--set`) rather than the shipped plan, whose settings follow its paper.
pub const FULL_GCN: &str = r#"
name = "gcn_no_dropout"
[dims]
hidden = 16
[sampler]
kind = "full"
graph = "full"
[[layer]]
params = { W0 = ["in", "hidden"] }
out = "relu(A_sym @ x @ W0)"
[output]
params = { W1 = ["in", "classes"] }
out = "A_sym @ x @ W1"
[optimizer]
kind = "adam"
lr = 0.01
"#;

/// A full-batch plan of one layer `out` (parameter `W`, hidden 4) and a dense classifier.
pub fn one_layer_plan(out: &str) -> String {
    format!(
        "[sampler]\nkind = \"full\"\ngraph = \"full\"\n\n[dims]\nhidden = 4\n\n[[layer]]\nparams = {{ W = [\"in\", \"hidden\"] }}\nout = \"{out}\"\n\n[output]\nparams = {{ W_out = [\"in\", \"classes\"] }}\nout = \"x @ W_out\"\n"
    )
}

/// The logits of [`one_layer_plan`]`(out)`'s forward on `src` (2 classes), parameters from
/// seed 3; `W`'s rows may be a `[dims]` expression through `w_rows` (default `in`).
pub fn one_layer_logits(out: &str, src: &saintflow::op::MemorySource) -> Vec<f32> {
    one_layer_logits_with(&one_layer_plan(out), src)
}

/// The logits of a plan's forward on `src` (2 classes), parameters from seed 3.
pub fn one_layer_logits_with(text: &str, src: &saintflow::op::MemorySource) -> Vec<f32> {
    use saintflow::plan::{LowerEnv, Plan};
    let reg = saintflow::op::Registry::with_builtins();
    let lowered = Plan::parse(text, "t.toml")
        .unwrap()
        .lower(&LowerEnv {
            n_features: src.n_features,
            n_classes: 2,
            multilabel: false,
            registry: &reg,
            types: None,
        })
        .unwrap();
    let params = saintflow::ir::Params::init(&lowered.params, 3);
    let values = saintflow::exec::run(
        &lowered.graph,
        &[lowered.logits],
        Some(src),
        &params,
        0,
        1,
        false,
    )
    .unwrap();
    values
        .get(lowered.logits)
        .unwrap()
        .as_dense()
        .unwrap()
        .data
        .clone()
}

/// The error of lowering `text` (5 features, 2 classes), as text.
pub fn lowering_error(text: &str) -> String {
    use saintflow::plan::{LowerEnv, Plan};
    let reg = saintflow::op::Registry::with_builtins();
    Plan::parse(text, "t.toml")
        .and_then(|p| {
            p.lower(&LowerEnv {
                n_features: 5,
                n_classes: 2,
                multilabel: false,
                registry: &reg,
                types: None,
            })
        })
        .err()
        .unwrap_or_else(|| panic!("accepted:\n{text}"))
        .to_string()
}

/// The context of an op called directly in a test: `params`, `source`, step 0, seed 1,
/// training.
pub fn op_ctx<'a>(
    params: &'a saintflow::ir::Params,
    source: Option<&'a dyn saintflow::op::GraphSource>,
) -> saintflow::op::Ctx<'a> {
    saintflow::op::Ctx {
        source,
        params,
        step: 0,
        seed: 1,
        training: true,
        node: saintflow::ir::NodeId::new(0),
        bindings: saintflow::ir::Bindings {
            nodes: 0,
            entries: 0,
            pairs: 0,
        },
    }
}

/// Writes `lines` (each followed by a newline) gzip-compressed to `path`, making its
/// directory: the OGB importers' test inputs.
pub fn gz(path: &Path, lines: impl IntoIterator<Item = impl AsRef<str>>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = BufWriter::new(File::create(path).unwrap());
    let mut z = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    for l in lines {
        writeln!(z, "{}", l.as_ref()).unwrap();
    }
    z.finish().unwrap().flush().unwrap();
}

/// A relation as ogbn-mag's files list it: (src, rel, dst, edges in local ids).
pub type OgbRelation<'a> = (&'a str, &'a str, &'a str, &'a [(u32, u32)]);

/// Relations in ogbn-mag's raw layout under `raw`: `triplet-type-list.csv.gz` and, per
/// relation (src, rel, dst, edges in local ids), `relations/src___rel___dst/` with
/// `edge.csv.gz` and `num-edge-list.csv.gz`.
pub fn ogb_relations(raw: &Path, rels: &[OgbRelation<'_>]) {
    gz(
        &raw.join("triplet-type-list.csv.gz"),
        rels.iter().map(|(s, r, d, _)| format!("{s},{r},{d}")),
    );
    for (s, r, d, e) in rels {
        let rd = raw.join("relations").join(format!("{s}___{r}___{d}"));
        gz(
            &rd.join("edge.csv.gz"),
            e.iter().map(|(a, b)| format!("{a},{b}")),
        );
        gz(&rd.join("num-edge-list.csv.gz"), [e.len().to_string()]);
    }
}

/// Below `dir` (whose `raw/` holds the types and relations already): the `paper` type's
/// features (`feats`, one CSV row per paper), the only labelled type among `types` (the
/// header of `num-node-dict.csv.gz`, e.g. `paper,author,field`, paper first), its
/// `labels` and the split `time` (`[train, valid, test]` paper ids); then `import ogb` of
/// it all into `dir/tiny.sf`, returned.
pub fn ogb_papers_and_import(
    dir: &Path,
    types: &str,
    feats: &[&str],
    labels: &[&str],
    split: [&[&str]; 3],
) -> PathBuf {
    let raw = dir.join("raw");
    let others = types.split(',').count() - 1;
    let flags = format!("True{}", ",False".repeat(others));
    gz(&raw.join("node-feat/paper/node-feat.csv.gz"), feats);
    gz(
        &raw.join("nodetype-has-label.csv.gz"),
        [types, flags.as_str()],
    );
    gz(&raw.join("node-label/paper/node-label.csv.gz"), labels);
    let sp = dir.join("split/time");
    gz(
        &sp.join("nodetype-has-split.csv.gz"),
        [types, flags.as_str()],
    );
    for (set, ids) in ["train", "valid", "test"].into_iter().zip(split) {
        gz(&sp.join(format!("paper/{set}.csv.gz")), ids);
    }
    let out = dir.join("tiny.sf");
    saintflow::store::import::import_ogb(
        dir,
        &out,
        &saintflow::store::import::OgbOptions::default(),
        false,
        &Progress::hidden(),
    )
    .unwrap();
    out
}

/// The whole-step gradient check at ε = 1e-2 and, where it finds a discrepancy, again at
/// ε/3: only those left at the smaller step count. A wrong gradient is off at both steps; a
/// kink (ReLU's, LeakyReLU's) within ε of a parameter's value moves the central difference
/// by an amount that grows with ε and vanishes below the kink's distance (GAT's `a_l_out`
/// with its attention vectors' Glorot range over the paper's fans: 7.9 % off at 1e-2, 24 %
/// at 3e-2, within tolerance at 3e-3).
pub fn check_off_kinks(
    graph: &saintflow::ir::Graph,
    loss: saintflow::ir::NodeId,
    grads: &[(String, saintflow::ir::NodeId)],
    src: &dyn saintflow::ir::GraphSource,
    params: &saintflow::ir::Params,
) -> Vec<saintflow::exec::Discrepancy> {
    use saintflow::exec::{check_gradients, GradCheck};
    let wide = GradCheck::default();
    let bad = check_gradients(graph, loss, grads, src, params, wide).unwrap();
    if bad.is_empty() {
        return bad;
    }
    let narrow = GradCheck {
        eps: wide.eps / 3.0,
        ..wide
    };
    check_gradients(graph, loss, grads, src, params, narrow).unwrap()
}

/// A typed planted Kronecker store of 2^`scale` nodes (`gen kronecker --types 3`): types
/// t0, t1, t2 (features of width 2, none, 1), 9 relations `r{a}_{b}` and their reverses,
/// skewed degrees, 3 planted classes on t0 (its training graph is induced on t0's
/// training nodes: typed plans sample `graph = "full"`).
pub fn typed_kronecker(dir: &Path, scale: u32) -> PathBuf {
    use saintflow::store::gen::TypedGen;
    let spec = KroneckerSpec {
        scale,
        degree: 8.0,
        n_classes: 3,
        planted: Some(Planted::default()),
        typed: Some(TypedGen {
            features: vec![2, 0, 1],
        }),
        ..KroneckerSpec::default()
    };
    let p = dir.join(format!("typed{scale}.sf"));
    generate_kronecker(&spec, &p, false, &Progress::hidden()).unwrap();
    p
}
