//! `saintflow sample`: draw subgraphs and report sizes, degrees, timing and coverage.

use std::path::PathBuf;
use std::time::Instant;

use clap::builder::PossibleValuesParser;
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::error::Result;
use crate::progress::Progress;
use crate::sample::spec::{self, SamplerKind, Value};
use crate::sample::{sample_subgraph, NormCounts, SampleError};
use crate::store::GraphStore;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum GraphArg {
    /// The training graph (inductive training).
    Train,
    /// The full graph (transductive training, e.g. Planetoid Cora).
    Full,
}

#[derive(Debug, Args)]
pub(super) struct SampleArgs {
    /// Store directory.
    store: PathBuf,
    /// Sampler (a kind of the sampler table).
    #[arg(long, default_value = "frontier", value_parser = sampler_names())]
    sampler: String,
    /// Graph to sample from.
    #[arg(long, value_enum, default_value = "train")]
    graph: GraphArg,
    /// Number of subgraphs, ≥ 1.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Seed: subgraph i depends only on (seed, i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    // The sampler keys: help (doc, kinds, default) from the sampler table.
    #[arg(long, help = key_help("frontier"))]
    frontier: Option<usize>,
    #[arg(long, help = key_help("budget"))]
    budget: Option<usize>,
    #[arg(long, help = key_help("eta"))]
    eta: Option<f64>,
    #[arg(long, help = key_help("pin_cap"))]
    pin_cap: Option<usize>,
    #[arg(long, help = key_help("roots"))]
    roots: Option<usize>,
    #[arg(long, help = key_help("depth"))]
    depth: Option<usize>,
    #[arg(long, help = key_help("edges"))]
    edges: Option<usize>,
    #[arg(long, help = key_help("uniform"))]
    uniform: bool,
    /// Clip |V_s| down to a multiple of this (16 f32 per cache line; 1 = off; full: off).
    #[arg(long, default_value_t = 16, value_parser = super::at_least_one)]
    clip: usize,
    /// Also estimate GraphSAINT normalisation from these subgraphs and write it here.
    #[arg(long)]
    save_norm: Option<PathBuf>,
    /// One JSON object per subgraph, then a summary object.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Record {
    index: u64,
    nodes: usize,
    edges: usize,
    mean_degree: f64,
    max_degree: usize,
    ms: f64,
}

#[derive(Serialize)]
struct Summary {
    summary: bool,
    sampler: String,
    graph: &'static str,
    count: u64,
    mean_nodes: f64,
    mean_edges: f64,
    mean_degree: f64,
    median_ms: f64,
    subgraphs_per_s: f64,
    coverage: f64,
    threads: usize,
}

/// A key flag's help from the table: the first row's doc, the kinds that have the key, and
/// the defaults (`"Walk roots r (rw) [default: 3000]"`).
fn key_help(name: &str) -> String {
    let rows: Vec<_> = spec::SAMPLERS
        .iter()
        .filter_map(|s| s.key(name).map(|(_, k)| (s.name, k)))
        .collect();
    let doc = rows.first().map_or("", |(_, k)| k.doc);
    let kinds: Vec<&str> = rows.iter().map(|(s, _)| *s).collect();
    let mut defaults: Vec<String> = rows
        .iter()
        .filter(|(_, k)| k.ty != spec::KeyType::Flag)
        .filter_map(|(_, k)| k.default.map(|d| d.to_string()))
        .collect();
    defaults.dedup();
    let default = match defaults.as_slice() {
        [] => String::new(),
        [d] => format!(" [default: {d}]"),
        many => format!(" [defaults: {}]", many.join(", ")),
    };
    format!("{doc} ({}){default}", kinds.join(", "))
}

/// `--sampler`'s values: the table's kinds, with their docs.
fn sampler_names() -> PossibleValuesParser {
    PossibleValuesParser::new(
        spec::SAMPLERS
            .iter()
            .map(|s| clap::builder::PossibleValue::new(s.name).help(s.doc)),
    )
}

/// The sampler the flags name: each flag given sets the table key of its name when the kind
/// has one (flags of other kinds are ignored, as they always were); unset keys keep the
/// table's defaults.
fn sampler_kind(a: &SampleArgs) -> std::result::Result<SamplerKind, SampleError> {
    let flags = [
        ("frontier", a.frontier.map(Value::Count)),
        ("budget", a.budget.map(Value::Count)),
        ("eta", a.eta.map(Value::Number)),
        ("pin_cap", a.pin_cap.map(Value::Count)),
        ("roots", a.roots.map(Value::Count)),
        ("depth", a.depth.map(Value::Count)),
        ("edges", a.edges.map(Value::Count)),
        ("uniform", a.uniform.then_some(Value::Flag(true))),
    ];
    let mut kind = SamplerKind::new(&a.sampler).expect("clap checked the name");
    for (key, v) in flags {
        if let Some(v) = v.filter(|_| kind.spec().key(key).is_some()) {
            kind.set(key, v)?;
        }
    }
    Ok(kind)
}

pub(super) fn run(a: SampleArgs, progress: &Progress) -> Result<()> {
    let store = GraphStore::open(&a.store)?;
    let (g, graph_name) = match a.graph {
        GraphArg::Train => (store.train(), "train"),
        GraphArg::Full => (store.full(), "full"),
    };
    let kind = sampler_kind(&a)?;
    let sampler = kind.build(g)?;
    let clip = if kind.whole_graph() { 1 } else { a.clip.max(1) };
    // Timing is per subgraph on one thread; subgraphs/s is for the whole pool below.
    let bar = progress.bar(a.count, "sample", "subgraphs");
    let mut seen = vec![false; g.n_nodes()];
    let mut ms = Vec::with_capacity(a.count as usize);
    let (mut sum_nodes, mut sum_edges) = (0usize, 0usize);
    let start = Instant::now();
    for i in 0..a.count {
        let t = Instant::now();
        let s = sample_subgraph(sampler.as_ref(), a.seed, i, clip)?;
        let dt = t.elapsed().as_secs_f64() * 1e3;
        ms.push(dt);
        for &v in &s.nodes {
            seen[v as usize] = true;
        }
        sum_nodes += s.n_nodes();
        sum_edges += s.n_entries() / 2;
        let max_degree = (0..s.n_nodes())
            .map(|k| s.neighbors(k).len())
            .max()
            .unwrap_or(0);
        let rec = Record {
            index: i,
            nodes: s.n_nodes(),
            edges: s.n_entries() / 2,
            mean_degree: s.n_entries() as f64 / s.n_nodes().max(1) as f64,
            max_degree,
            ms: dt,
        };
        if a.json {
            println!(
                "{}",
                serde_json::to_string(&rec).expect("record serialises")
            );
        } else if a.count <= 20 {
            bar.suspend(|| {
                println!(
                    "subgraph {:>4}: {:>8} nodes {:>10} edges  mean degree {:>7.2}  max {:>6}  {:>8.2} ms",
                    i, rec.nodes, rec.edges, rec.mean_degree, rec.max_degree, dt
                )
            });
        }
        bar.inc(1);
    }
    let elapsed = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    ms.sort_by(f64::total_cmp);
    // Coverage is over the nodes a sampler can reach: those with at least one neighbour.
    let has_edges = |v: usize| g.offsets()[v + 1] > g.offsets()[v];
    let candidates = (0..g.n_nodes()).filter(|&v| has_edges(v)).count().max(1);
    let covered = (0..g.n_nodes())
        .filter(|&v| seen[v] && has_edges(v))
        .count();
    let k = a.count.max(1) as f64;
    let summary = Summary {
        summary: true,
        sampler: sampler.name(),
        graph: graph_name,
        count: a.count,
        mean_nodes: sum_nodes as f64 / k,
        mean_edges: sum_edges as f64 / k,
        mean_degree: 2.0 * sum_edges as f64 / sum_nodes.max(1) as f64,
        median_ms: ms.get(ms.len() / 2).copied().unwrap_or(0.0),
        subgraphs_per_s: a.count as f64 / elapsed.max(1e-9),
        coverage: covered as f64 / candidates as f64,
        threads: 1,
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&summary).expect("summary serialises")
        );
    } else {
        println!(
            "{} on the {} graph: {} subgraphs, mean {:.1} nodes / {:.1} edges (mean degree {:.2}), median {:.2} ms per subgraph (1 thread), {:.1} subgraphs/s; {:.1}% of the nodes with edges covered",
            summary.sampler, graph_name, a.count, summary.mean_nodes, summary.mean_edges, summary.mean_degree,
            summary.median_ms, summary.subgraphs_per_s, summary.coverage * 100.0
        );
    }
    if let Some(path) = &a.save_norm {
        let counts = NormCounts::estimate(sampler.as_ref(), a.count, a.seed, clip)?;
        counts.save(path)?;
        if !a.json {
            println!(
                "normalisation counts over {} subgraphs written to {}",
                a.count,
                path.display()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SampleArgs,
    }

    /// Every key of every row of the sampler table has its flag (`--pin-cap` for
    /// `pin_cap`) and the flag sets that key; flags of other kinds are ignored.
    #[test]
    fn every_table_key_has_a_flag() {
        for row in spec::SAMPLERS {
            for key in row.keys {
                let flag = format!("--{}", key.name.replace('_', "-"));
                // A flag of another kind, ignored.
                let foreign = if row.key("edges").is_some() {
                    "--roots"
                } else {
                    "--edges"
                };
                let (mut argv, want) = (
                    vec!["sample", "store", "--sampler", row.name, foreign, "9"],
                    match key.ty {
                        spec::KeyType::Count => Value::Count(7),
                        spec::KeyType::Positive => Value::Number(2.5),
                        spec::KeyType::Flag => Value::Flag(true),
                    },
                );
                argv.push(&flag);
                let text = want.to_string();
                if key.ty != spec::KeyType::Flag {
                    argv.push(&text);
                }
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                let kind = sampler_kind(&cli.args).unwrap();
                assert_eq!(kind.get(key.name), Some(want), "{argv:?}");
                for (other, v) in kind.values() {
                    if other != key.name {
                        assert_eq!(v, row.key(other).unwrap().1.default, "{argv:?}");
                    }
                }
            }
        }
    }
}
