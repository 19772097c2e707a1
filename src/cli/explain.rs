//! `saintflow explain`: lowers a plan file, plans the step for expected subgraph sizes and
//! prints the planned graph with its costs (canonical text, or Graphviz DOT with `--dot`).

use std::path::PathBuf;

use clap::Args;

use crate::compile::lower_and_plan;
use crate::error::Result;
use crate::ir::Bindings;
use crate::op::Registry;
use crate::plan::LowerEnv;
use crate::planner::{explain_dot, explain_text, PlanOptions};
use crate::store::{GraphStore, Labels};

#[derive(Debug, Args)]
pub(super) struct ExplainArgs {
    /// The plan: a file, or a shipped plan's name (`gcn`).
    plan: PathBuf,
    /// A graph store: F, C, single/multi-label, its mean degree and (for `full`) n.
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Print Graphviz DOT instead of text.
    #[arg(long)]
    dot: bool,
    /// Feature width F, ≥ 1 (default: the store's).
    #[arg(long, value_parser = super::at_least_one)]
    features: Option<usize>,
    /// Classes C, ≥ 1 (default: the store's).
    #[arg(long, value_parser = super::at_least_one)]
    classes: Option<usize>,
    /// Multi-label targets (default: the store's labels; single-label without a store).
    #[arg(long)]
    multilabel: bool,
    /// Expected subgraph nodes n, ≥ 1 (default: from the plan's sampler).
    #[arg(long, value_parser = super::at_least_one)]
    nodes: Option<usize>,
    /// Expected mean degree of a subgraph, nnz = n·D (default: the store's mean degree,
    /// else 16); a finite number ≥ 0.
    #[arg(long, value_parser = degree)]
    degree: Option<f64>,
    /// Executor threads p, 1 to 256 (default: the rayon pool's).
    #[arg(long, value_parser = super::threads())]
    threads: Option<std::num::NonZeroUsize>,
    /// Cache bytes a feature block should fit (default: the detected L2).
    #[arg(long)]
    cache_bytes: Option<usize>,
}

/// `--degree`: a finite mean degree ≥ 0 (a negative or NaN degree plans nonsense).
fn degree(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(d) if d.is_finite() && d >= 0.0 => Ok(d),
        Ok(d) => Err(format!("expected a finite number ≥ 0, got {d}")),
        Err(_) => Err(format!("{s:?} is not a number")),
    }
}

/// A missing size: a usage error (exit code 2), as clap reports its own.
fn usage(what: String) -> ! {
    clap::Error::raw(clap::error::ErrorKind::MissingRequiredArgument, what + "\n").exit()
}

pub(super) fn run(a: ExplainArgs, registry: &Registry) -> Result<()> {
    let p = super::train::load_plan(&a.plan, &[])?;
    let store = a.graph.as_ref().map(GraphStore::open).transpose()?;
    let need = |v: Option<usize>, from_store: Option<usize>, flag: &str| {
        v.or(from_store).unwrap_or_else(|| {
            usage(format!(
                "explain {}: give --graph STORE or --{flag}",
                a.plan.display()
            ))
        })
    };
    let n_features = need(
        a.features,
        store.as_ref().map(|s| s.n_features()),
        "features",
    );
    let n_classes = need(a.classes, store.as_ref().map(|s| s.n_classes()), "classes");
    let multilabel = a.multilabel
        || store
            .as_ref()
            .is_some_and(|s| matches!(s.labels(), Labels::Multi { .. }));
    // The sampler's expected size, capped by the graph's when there is one (issue 58: 9,000
    // nodes on a 3,327-node graph), as training plans it.
    let nodes = need(
        a.nodes.or(match &store {
            Some(s) => Some(crate::compile::expected_nodes(&p.sampler.kind, s.n_nodes())),
            None => p.sampler.kind.expected_nodes(),
        }),
        store.as_ref().map(|s| s.n_nodes()),
        "nodes",
    );
    let degree = a.degree.unwrap_or_else(|| {
        store.as_ref().map_or(16.0, |s| {
            s.full().n_entries() as f64 / s.n_nodes().max(1) as f64
        })
    });
    let mut opts = PlanOptions::new(
        Bindings {
            nodes,
            entries: store
                .as_ref()
                .map_or(usize::MAX, |s| s.full().n_entries())
                .min((nodes as f64 * degree).round() as usize),
            pairs: 0,
        },
        crate::machine::threads_or_cores(a.threads),
    );
    if let Some(c) = a.cache_bytes {
        opts.cache_bytes = c.max(1);
    }
    if let Some(s) = &store {
        opts = opts.with_store_densities(s);
    }
    let env = LowerEnv {
        n_features,
        n_classes,
        multilabel,
        registry,
        types: store.as_ref().and_then(|s| s.types()),
    };
    let (graph, report) = lower_and_plan(&p, &env, &opts)?;
    if a.dot {
        super::out(&explain_dot(&graph, &report))?;
    } else {
        super::out(&format!(
            "# {} ({}): F = {n_features}, C = {n_classes}, {}\n",
            p.name,
            a.plan.display(),
            if multilabel {
                "multi-label"
            } else {
                "single-label"
            }
        ))?;
        super::out(&explain_text(&graph, &report))?;
    }
    Ok(())
}
