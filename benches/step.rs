//! Whole training steps in the JPDC Table-3 setup: a Kronecker graph (scale 17, degree 16,
//! F = 50, C = 2), frontier sampler m = 1000, n = 8000, GraphSAGE with hidden 512
//! (plans/graphsage.toml: SAGE(50→512‖512, ReLU) → SAGE(1024→512‖512) → L2 norm → dense
//! 1024→2), planned. A step = forward + backward + Adam on every parameter.
//!
//! Variants, in the same run, on 1 and 2 threads: the interpreter (on a rayon pool of p
//! threads) vs the executor (p workers); compute only (subgraphs pre-sampled) vs sampling
//! inline vs the prefetching subgraph pool; and the executor on 1–4 GraphSAGE layers.
//! Before criterion's groups a summary prints the median step time per 1000 subgraph nodes
//! and the stage breakdown (from `StepValues::times`, CPU time summed over tasks), and the
//! executor's step in f32 and in bf16 (`[compute] precision`, where the CPU has
//! AVX512_BF16), interleaved.
//!
//! Run: `cargo bench --bench step` (`STEP_BENCH_QUICK=1`: only the f32/bf16 line per thread
//! count, what `scripts/step_floor.sh` reads; `STEP_BENCH_F32=1`: f32 alone, for a profile;
//! `STEP_BENCH_THREADS=1`: those thread counts; `STEP_BENCH_TIMELINE=1`: CPU time by node of
//! the median of 7 steps, with each GEMM's rate; `STEP_BENCH_TIMELINE=bf16`: the same for
//! the bf16 model).

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use saintflow::exec::StepInput;
use saintflow::exec::{Executor, Interpreter, Prefetch, StageTimes, StepRunner};
use saintflow::ir::{recycle, Bindings, Graph, NodeId, Params, Tensor};
use saintflow::op::{GraphSource, Registry, StoreSource, WithSampler};
use saintflow::plan::{LowerEnv, Plan};
use saintflow::planner::{plan, PlanOptions, Precision};
use saintflow::progress::Progress;
use saintflow::sample::{FrontierParams, FrontierSampler, Subgraph};
use saintflow::store::gen::{generate_kronecker, KroneckerSpec};
use saintflow::store::{GraphStore, Role};
use saintflow_ops::optim::Adam;

fn store(dir: &Path) -> GraphStore {
    let out = dir.join("kron17.sf");
    let spec = KroneckerSpec {
        scale: 17,
        degree: 16.0,
        n_features: 50,
        n_classes: 2,
        ..Default::default()
    };
    generate_kronecker(&spec, &out, true, &Progress::hidden()).unwrap();
    GraphStore::open(&out).unwrap()
}

fn source(store: &GraphStore) -> StoreSource<'_> {
    let sampler = FrontierSampler::new(
        store.train(),
        FrontierParams {
            frontier: 1000,
            budget: 8000,
            ..Default::default()
        },
    )
    .unwrap();
    StoreSource::new(store, Box::new(sampler), 1, 1, None, Role::Train)
}

/// The planned model and its training state.
struct Model {
    graph: Graph,
    wanted: Vec<NodeId>,
    names: Vec<String>,
    params: Params,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    t: u64,
}

impl Model {
    fn new(src: &dyn GraphSource, layers: usize, threads: usize, b: Bindings) -> Model {
        Model::with_precision(src, layers, threads, b, Precision::F32)
    }

    /// [`Model::new`] with the dense products at `precision` (the plan's
    /// `[compute] precision`).
    fn with_precision(
        src: &dyn GraphSource,
        layers: usize,
        threads: usize,
        b: Bindings,
        precision: Precision,
    ) -> Model {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
        let path = if path.exists() {
            path
        } else {
            Path::new("plans/graphsage.toml").to_path_buf()
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let repeat = format!("layer.0.repeat={layers}");
        let plan_file = Plan::parse_with_overrides(
            &text,
            "graphsage.toml",
            // The seed C++'s model: no dropout (the shipped plan has 0.2).
            &[
                "dims.hidden=512",
                repeat.as_str(),
                "layer.0.dropout=0",
                "output.dropout=0",
            ],
        )
        .unwrap_or_else(|e| panic!("{}", e.render()));
        let reg = Registry::with_builtins();
        let lowered = plan_file.lower(&LowerEnv::of(src, &reg)).unwrap();
        let mut graph = lowered.graph;
        plan(
            &mut graph,
            &PlanOptions {
                bindings: b,
                threads,
                cache_bytes: saintflow_ops::cache::l2_bytes(),
                precision,
                feature_density: None,
                type_feature_density: None,
            },
        )
        .unwrap();
        let mut wanted = vec![graph.output("loss").unwrap()];
        let mut names = Vec::new();
        for (name, _) in &lowered.grads {
            wanted.push(graph.output(&format!("grad/{name}")).unwrap());
            names.push(name.clone());
        }
        let params = Params::init(&lowered.params, 1);
        let zeros: Vec<Tensor> = names
            .iter()
            .map(|n| {
                let p = params.get(n).unwrap();
                Tensor::zeros(p.rows, p.cols)
            })
            .collect();
        Model {
            graph,
            wanted,
            names,
            params,
            m: zeros.clone(),
            v: zeros,
            t: 0,
        }
    }

    /// One full step; returns (subgraph nodes, stage times, optimizer time).
    fn step(
        &mut self,
        runner: &dyn StepRunner,
        src: &dyn GraphSource,
        step: u64,
    ) -> (usize, StageTimes, Duration) {
        let mut out = runner
            .run_step(
                StepInput::new(&self.graph, &self.wanted, &self.params)
                    .source(src)
                    .step(step, 1)
                    .training(true),
            )
            .unwrap();
        let started = Instant::now();
        self.t += 1;
        let adam = Adam::default();
        for (k, name) in self.names.iter().enumerate() {
            let g = out.take(self.wanted[k + 1]).unwrap();
            let g = g.as_dense().unwrap();
            let p = self.params.get_mut(name).unwrap();
            adam.step(
                self.t,
                &mut p.data,
                &g.data,
                &mut self.m[k].data,
                &mut self.v[k].data,
            )
            .unwrap();
        }
        (out.bindings.nodes, out.times, started.elapsed())
    }
}

/// The executor's per-worker timeline (`STEP_BENCH_TIMELINE=1`): 7 pre-sampled steps on a
/// recording executor, the summary of the median-length one (busy time per worker, time by
/// how many workers were busy, the ops that ran alone), then its nodes by CPU time (spans
/// summed over parts and workers) with each product's GFLOP/s.
fn timeline(model: &Model, src: &dyn GraphSource, threads: usize) {
    let ex = Executor::new(threads.try_into().unwrap()).with_timeline(true);
    let mut runs: Vec<(saintflow::exec::Timeline, Bindings)> = (0..7)
        .map(|step| {
            let out = ex
                .run_step(
                    StepInput::new(&model.graph, &model.wanted, &model.params)
                        .source(src)
                        .step(step, 1)
                        .training(true),
                )
                .unwrap();
            (out.timeline.expect("recorded"), out.bindings)
        })
        .collect();
    runs.sort_by_key(|t| t.0.length());
    let (t, b) = &runs[3];
    eprintln!("timeline, executor, pre-sampled, {threads}t (the median of 7 steps):");
    eprint!("{}", t.summary(12));
    let mut by_node: std::collections::BTreeMap<NodeId, Duration> = Default::default();
    for s in &t.spans {
        *by_node.entry(s.node).or_default() += s.end.saturating_sub(s.start);
    }
    let mut rows: Vec<(NodeId, Duration)> = by_node.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    eprintln!("  by node, CPU time (n = {}):", b.nodes);
    for (id, d) in rows.into_iter().take(40) {
        let node = model.graph.node(id);
        let flops = saintflow::planner::node_cost(&model.graph, id, b).flops;
        let rate = if node.op.name() == "gemm" {
            format!("  {:6.1} GF/s", flops / d.as_secs_f64() / 1e9)
        } else {
            String::new()
        };
        eprintln!(
            "    %{:<4} {:8.2} ms  {}[{}] {:?}{rate}",
            id.index(),
            ms(d),
            node.op.name(),
            node.op.attrs(),
            model.graph.fact(id)
        );
    }
}

/// Time per op name over one step, by the interpreter's order, on the current rayon pool
/// (`STEP_BENCH_OPS=1`): where "other" goes.
fn per_op(model: &Model, src: &dyn GraphSource) {
    use saintflow::ir::Value;
    use saintflow::op::Ctx;
    let g = &model.graph;
    let needed = g.ancestors(&model.wanted);
    let mut values: std::collections::HashMap<NodeId, Value> = Default::default();
    let mut by_op: std::collections::BTreeMap<String, (Duration, usize)> = Default::default();
    let mut bindings = Bindings {
        nodes: 0,
        entries: 0,
        pairs: 0,
    };
    for v in g
        .topo_order()
        .unwrap()
        .into_iter()
        .filter(|v| needed.contains(v))
    {
        let node = g.node(v);
        let inputs: Vec<&Value> = node.inputs.iter().map(|i| &values[i]).collect();
        let ctx = Ctx {
            source: Some(src),
            params: &model.params,
            step: 3,
            seed: 1,
            training: true,
            node: v,
            bindings,
        };
        let started = Instant::now();
        let out = node.op.forward(&inputs, &ctx).unwrap();
        let e = by_op
            .entry(format!("{} {}", node.op.name(), node.op.attrs()))
            .or_default();
        e.0 += started.elapsed();
        e.1 += 1;
        if let Value::Subgraph(s) = &out {
            bindings = Bindings {
                nodes: s.n_nodes(),
                entries: s.n_entries(),
                pairs: 0,
            };
        }
        values.insert(v, out);
    }
    let mut rows: Vec<_> = by_op.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .0));
    for (name, (d, k)) in rows {
        eprintln!("  {:>8.1} ms  {k:3}×  {name}", ms(d));
    }
}

/// The executor's pre-sampled step, the line `scripts/step_floor.sh` reads: f32, and bf16
/// where the CPU has AVX512_BF16 (issue 33, item 4), interleaved: 7 rounds of 3 steps each
/// after a warm-up round, the median round in ms per 1000 subgraph nodes.
fn executor_f32_and_bf16(
    f32_model: &mut Model,
    bf16_model: Option<&mut Model>,
    ex: &Executor,
    pre: &dyn GraphSource,
    threads: usize,
) {
    let (rounds, steps) = (7, 3);
    let mut models: Vec<&mut Model> = vec![f32_model];
    models.extend(bf16_model);
    let mut per = vec![Vec::new(); models.len()];
    let mut nodes = 0usize;
    for round in 0..=rounds {
        for (i, m) in models.iter_mut().enumerate() {
            let started = Instant::now();
            let mut n = 0;
            for s in 0..steps {
                n += m.step(ex, pre, (round * steps + s) as u64).0;
            }
            if round > 0 {
                per[i].push(started.elapsed().as_secs_f64() * 1e6 / n as f64);
                nodes += n;
            }
        }
    }
    let med: Vec<f64> = per
        .iter_mut()
        .map(|v| {
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        })
        .collect();
    let per_step = nodes as f64 / (med.len() * rounds * steps) as f64;
    match med[..] {
        [f, h] => eprintln!(
            "executor, pre-sampled, {threads}t: f32 {f:.1} ms per 1000 nodes, bf16 {h:.1} \
             (bf16 {:.2}x f32; {per_step:.0} nodes per step)",
            h / f
        ),
        _ => eprintln!(
            "executor, pre-sampled, {threads}t: f32 {:.1} ms per 1000 nodes ({per_step:.0} \
             nodes per step; bf16 not run: {})",
            med[0],
            Precision::Bf16.check().err().unwrap_or_default()
        ),
    }
}

fn rayon_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// One variant of the summary: a name, a runner, a source and its own step counter.
struct Variant<'a> {
    name: &'a str,
    runner: &'a dyn StepRunner,
    src: &'a dyn GraphSource,
    next: u64,
    per_round: Vec<f64>,
    nodes: usize,
    times: StageTimes,
    opt: Duration,
    /// Whether dead buffers are recycled (`ir::recycle`) during this variant's steps.
    reuse: bool,
}

impl<'a> Variant<'a> {
    fn new(
        name: &'a str,
        runner: &'a dyn StepRunner,
        src: &'a dyn GraphSource,
        first: u64,
    ) -> Self {
        Variant {
            name,
            runner,
            src,
            next: first,
            per_round: Vec::new(),
            nodes: 0,
            times: StageTimes::default(),
            opt: Duration::ZERO,
            reuse: true,
        }
    }

    /// The same variant with buffer recycling off (the baseline of the free-list).
    fn without_reuse(mut self) -> Self {
        self.reuse = false;
        self
    }
}

/// Turns buffer recycling on (default cap) or off (cap 0, the free-list emptied).
fn set_reuse(on: bool) {
    recycle::set_capacity(if on { recycle::DEFAULT_CAPACITY } else { 0 });
}

/// Interleaved measurement (the machine is shared and its load drifts): `rounds` rounds,
/// each running `steps` steps of every variant in turn; per variant the median over rounds
/// of the mean step time, with mean nodes, stage times and optimizer time per step. Each
/// variant counts its own steps, so the prefetcher sees consecutive steps.
fn interleaved(model: &mut Model, variants: &mut [Variant<'_>], threads: usize) {
    let (rounds, steps) = (5, 3);
    for v in variants.iter_mut() {
        set_reuse(v.reuse);
        model.step(v.runner, v.src, v.next); // warm-up
        v.next += 1;
    }
    for _ in 0..rounds {
        for v in variants.iter_mut() {
            set_reuse(v.reuse);
            let started = Instant::now();
            for _ in 0..steps {
                let (n, t, o) = model.step(v.runner, v.src, v.next);
                v.next += 1;
                v.nodes += n;
                v.times.sampling += t.sampling;
                v.times.aggregation += t.aggregation;
                v.times.transformation += t.transformation;
                v.times.other += t.other;
                v.opt += o;
            }
            v.per_round
                .push(started.elapsed().as_secs_f64() * 1e3 / steps as f64);
        }
    }
    set_reuse(true);
    let k = (rounds * steps) as u32;
    for v in variants.iter_mut() {
        v.per_round.sort_by(|a, b| a.total_cmp(b));
        let mean = StageTimes {
            sampling: v.times.sampling / k,
            aggregation: v.times.aggregation / k,
            transformation: v.times.transformation / k,
            other: v.times.other / k,
        };
        print_line(
            v.name,
            threads,
            (
                v.per_round[rounds / 2],
                v.nodes as f64 / k as f64,
                mean,
                v.opt / k,
            ),
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_line(name: &str, threads: usize, r: (f64, f64, StageTimes, Duration)) {
    let (step_ms, nodes, t, opt) = r;
    eprintln!(
        "{name:<28} {threads}t  {step_ms:8.1} ms/step  {nodes:6.0} nodes  {:6.1} ms/1000 nodes  \
         [sampling {:6.1}  aggregation {:6.1}  transformation {:6.1}  other {:6.1}  optimizer {:5.1}] ms",
        step_ms / nodes * 1000.0,
        ms(t.sampling),
        ms(t.aggregation),
        ms(t.transformation),
        ms(t.other),
        ms(opt)
    );
}

/// `STEP_BENCH_EXPORT=DIR`: the pre-sampled subgraphs as `.npy` files for
/// `scripts/torch_step.py`, so torch and PyG train on the very same subgraphs: per
/// subgraph k, `sub{k}.offsets.npy` and `sub{k}.indices.npy` (the induced CSR, i64),
/// `sub{k}.x.npy` (features, f32 [n, F]) and `sub{k}.y.npy` (class ids, i64).
fn export(st: &GraphStore, subs: &[Subgraph], dir: &Path) {
    use npyz::WriterBuilder;
    std::fs::create_dir_all(dir).unwrap();
    let f = st.n_features();
    let labels = st.labels();
    let write_i64 = |name: String, data: &[i64]| {
        let file = std::io::BufWriter::new(std::fs::File::create(dir.join(name)).unwrap());
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[data.len() as u64])
            .writer(file)
            .begin_nd()
            .unwrap();
        w.extend(data.iter().copied()).unwrap();
        w.finish().unwrap();
    };
    for (k, s) in subs.iter().enumerate() {
        write_i64(
            format!("sub{k}.offsets.npy"),
            &s.offsets.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(),
        );
        write_i64(
            format!("sub{k}.indices.npy"),
            &s.indices.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(),
        );
        let y: Vec<i64> = s
            .nodes
            .iter()
            .map(|&v| {
                (0..st.n_classes() as u32)
                    .find(|&c| labels.has_class(v, c))
                    .unwrap_or(0) as i64
            })
            .collect();
        write_i64(format!("sub{k}.y.npy"), &y);
        let x: Vec<f32> = s
            .nodes
            .iter()
            .flat_map(|&v| st.feature_row(v).unwrap().to_vec())
            .collect();
        let file = std::io::BufWriter::new(
            std::fs::File::create(dir.join(format!("sub{k}.x.npy"))).unwrap(),
        );
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[s.n_nodes() as u64, f as u64])
            .writer(file)
            .begin_nd()
            .unwrap();
        w.extend(x.iter().copied()).unwrap();
        w.finish().unwrap();
    }
}

/// Thread counts to measure: `STEP_BENCH_THREADS=2` (default "1,2").
fn thread_counts() -> Vec<usize> {
    std::env::var("STEP_BENCH_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .map(|t| {
            t.trim()
                .parse()
                .expect("STEP_BENCH_THREADS: comma-separated counts")
        })
        .collect()
}

fn steps(c: &mut Criterion) {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let st = store(tmp.path());
    let src = source(&st);
    let subs: Vec<Subgraph> = (1000..1008).map(|i| src.sample(i).unwrap()).collect();
    let b = Bindings {
        nodes: subs.iter().map(|s| s.n_nodes()).sum::<usize>() / subs.len(),
        entries: subs.iter().map(|s| s.n_entries()).sum::<usize>() / subs.len(),
        pairs: 0,
    };
    eprintln!(
        "subgraphs: {} nodes, {} entries on average",
        b.nodes, b.entries
    );
    if let Some(dir) = std::env::var_os("STEP_BENCH_EXPORT") {
        export(&st, &subs, Path::new(&dir));
        eprintln!(
            "wrote the {} subgraphs to {}",
            subs.len(),
            Path::new(&dir).display()
        );
    }
    // Subgraphs drawn once and served in turn: compute-only steps.
    let pre = WithSampler::new(&src, |step| Ok(subs[step as usize % subs.len()].clone()));
    let mut group = c.benchmark_group("step_graphsage512");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.warm_up_time(Duration::from_secs(2));
    // `STEP_BENCH_QUICK=1`: only the executor's f32 (and bf16) line per thread count.
    let quick = std::env::var_os("STEP_BENCH_QUICK").is_some();
    for threads in thread_counts() {
        let pool = rayon_pool(threads);
        let ex = Executor::new(threads.try_into().unwrap());
        let mut next = 0u64;
        let mut model = Model::new(&src, 2, threads, b);
        // `STEP_BENCH_OPS=1` (or `=bf16`: the bf16 model's ops).
        match std::env::var("STEP_BENCH_OPS").as_deref() {
            Ok("bf16") => {
                let m16 = Model::with_precision(&src, 2, threads, b, Precision::Bf16);
                pool.install(|| per_op(&m16, &pre));
            }
            Ok(_) => pool.install(|| per_op(&model, &pre)),
            Err(_) => {}
        }
        // `STEP_BENCH_TIMELINE=1` (or `=bf16`: the bf16 model's).
        match std::env::var("STEP_BENCH_TIMELINE").as_deref() {
            Ok("bf16") => {
                let m16 = Model::with_precision(&src, 2, threads, b, Precision::Bf16);
                timeline(&m16, &pre, threads);
            }
            Ok(_) => timeline(&model, &pre, threads),
            Err(_) => {}
        }
        // `STEP_BENCH_F32=1`: the f32 step alone (a profile of it, without bf16's kernels).
        let mut bf16 = (Precision::Bf16.check().is_ok()
            && std::env::var_os("STEP_BENCH_F32").is_none())
        .then(|| Model::with_precision(&src, 2, threads, b, Precision::Bf16));
        pool.install(|| executor_f32_and_bf16(&mut model, bf16.as_mut(), &ex, &pre, threads));
        if quick {
            continue;
        }
        pool.install(|| {
            Prefetch::scope(ex.pool(), &src, 2, |fetch| {
                let mut variants = [
                    Variant::new("interpreter, pre-sampled", &Interpreter, &pre, 0),
                    Variant::new("executor, pre-sampled", &ex, &pre, 0),
                    Variant::new("executor, pre-sampled, no reuse", &ex, &pre, 0).without_reuse(),
                    Variant::new("interpreter, sampling inline", &Interpreter, &src, 1 << 20),
                    Variant::new("executor, sampling inline", &ex, &src, 2 << 20),
                    Variant::new("executor, prefetch pool k=2", &ex, fetch, 3 << 20),
                ];
                interleaved(&mut model, &mut variants, threads);
            });
        });
        let mut bench = |name: &str, runner: &dyn StepRunner, s: &dyn GraphSource| {
            group.bench_function(BenchmarkId::new(name, format!("{threads}t")), |bn| {
                bn.iter_custom(|iters| {
                    pool.install(|| {
                        let started = Instant::now();
                        for _ in 0..iters {
                            model.step(runner, s, next);
                            next += 1;
                        }
                        started.elapsed()
                    })
                })
            });
        };
        bench("interpreter_presampled", &Interpreter, &pre);
        bench("executor_presampled", &ex, &pre);
        bench("executor_inline_sampling", &ex, &src);
        Prefetch::scope(ex.pool(), &src, 2, |fetch| {
            bench("executor_prefetch", &ex, fetch);
        });
    }
    group.finish();
    if quick {
        return;
    }

    // Depth: 1..4 GraphSAGE layers on the executor, compute only.
    let mut group = c.benchmark_group("step_depth");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(6));
    group.warm_up_time(Duration::from_secs(1));
    for threads in thread_counts() {
        let pool = rayon_pool(threads);
        let ex = Executor::new(threads.try_into().unwrap());
        let mut models: Vec<Model> = (1..=4).map(|l| Model::new(&src, l, threads, b)).collect();
        // Interleaved over depths: round-robin one variant per model.
        pool.install(|| {
            let names = [
                "executor, 1 layer",
                "executor, 2 layers",
                "executor, 3 layers",
                "executor, 4 layers",
            ];
            let mut per: Vec<Vec<f64>> = vec![Vec::new(); 4];
            let mut nodes = 0usize;
            let mut next = 0u64;
            for round in 0..6 {
                for (l, m) in models.iter_mut().enumerate() {
                    let started = Instant::now();
                    for _ in 0..2 {
                        let (n, _, _) = m.step(&ex, &pre, next);
                        next += 1;
                        nodes += n;
                    }
                    if round > 0 {
                        per[l].push(started.elapsed().as_secs_f64() * 1e3 / 2.0);
                    }
                }
            }
            let avg_nodes = nodes as f64 / (6 * 4 * 2) as f64;
            for (l, mut v) in per.into_iter().enumerate() {
                v.sort_by(|a, b| a.total_cmp(b));
                let med = v[v.len() / 2];
                eprintln!(
                    "{:<28} {threads}t  {med:8.1} ms/step  {:6.1} ms/1000 nodes",
                    names[l],
                    med / avg_nodes * 1000.0
                );
            }
        });
        for (l, model) in models.iter_mut().enumerate() {
            let layers = l + 1;
            let mut next = 0u64;
            group.bench_function(
                BenchmarkId::new(format!("executor_{layers}_layers"), format!("{threads}t")),
                |bn| {
                    bn.iter_custom(|iters| {
                        pool.install(|| {
                            let started = Instant::now();
                            for _ in 0..iters {
                                model.step(&ex, &pre, next);
                                next += 1;
                            }
                            started.elapsed()
                        })
                    })
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, steps);
criterion_main!(benches);
