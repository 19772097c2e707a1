//! `saintflow split-edges` and `saintflow eval-link` (issue 52): a link-prediction split
//! with fixed negatives, and its scoring by heuristics or an embedding.

use std::path::PathBuf;

use clap::Args;

use crate::embedding::eval::Embedding;
use crate::error::Result;
use crate::link::{evaluate, Heuristic, LinkScores};
use crate::store::link::split::{split_edges, SplitEdgesSpec};
use crate::store::{GraphStore, LinkSet, StoreError};

#[derive(Debug, Args)]
pub(super) struct SplitEdgesArgs {
    /// Input store (never modified).
    input: PathBuf,
    /// Output store: the input's nodes, features, labels and roles; its graph without the
    /// held-out edges; the link sections.
    #[arg(short, long)]
    output: PathBuf,
    /// Fraction of the input's undirected edges held out for validation, in [0, 1).
    #[arg(long, default_value_t = 0.05, value_parser = fraction)]
    val: f64,
    /// Fraction held out for testing, in [0, 1); --val + --test < 1.
    #[arg(long, default_value_t = 0.1, value_parser = fraction)]
    test: f64,
    /// Tail negatives per positive K ≥ 1 (ogbl-citation2: 1000), for MRR and Hits@K.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=u64::from(u32::MAX)))]
    negatives: u64,
    /// Seed of the split and of every negative: equal seeds give byte-identical stores.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Hold out edges even when that leaves a node without edges (by default an edge is
    /// held out only while both its ends keep one).
    #[arg(long)]
    allow_isolated: bool,
    /// A time split (the store must have edge times): the latest edges go to test, the
    /// next latest to validation, by the same fractions; equal times in the seed's order.
    /// An edge the never-isolate rule keeps stays in the graph although it is late (the
    /// count is reported and recorded).
    #[arg(long)]
    by_time: bool,
    /// Replace an existing store at the output.
    #[arg(long)]
    force: bool,
    /// The split is made only from a verified input (issue 28).
    #[command(flatten)]
    verify: super::check::VerifyArgs,
}

/// A fraction in [0, 1) (usage error otherwise, exit 2).
fn fraction(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if (0.0..1.0).contains(&x) => Ok(x),
        Ok(x) => Err(format!("expected a fraction in [0, 1), got {x}")),
        Err(_) => Err(format!("{s:?} is not a number")),
    }
}

pub(super) fn split(a: SplitEdgesArgs) -> Result<()> {
    crate::atomic::OutputGuard::new()
        .input("INPUT", &a.input)
        .dir("--output", &a.output)
        .check()?;
    let input = GraphStore::open(&a.input)?;
    a.verify.apply(&input)?;
    let spec = SplitEdgesSpec {
        val: a.val,
        test: a.test,
        negatives: a.negatives,
        seed: a.seed,
        allow_isolated: a.allow_isolated,
        by_time: a.by_time,
    };
    let r = split_edges(&input, &a.output, &spec, a.force, crate::store::check)?;
    super::out(&format!(
        "wrote {}: held out {} validation and {} test edges of {} undirected edges ({} remain for message passing); {} negatives per positive and one negative pair per positive; {:.2} s\n",
        a.output.display(),
        r.n_val,
        r.n_test,
        r.input_edges,
        r.input_edges - r.n_val - r.n_test,
        r.negatives,
        r.seconds
    ))?;
    if let Some(ts) = &r.by_time {
        let range =
            |t: Option<[i64; 2]>| t.map_or("none".to_string(), |[a, b]| format!("{a}..{b}"));
        super::out(&format!(
            "time split: test times {}, validation times {}; {} later edges kept in the graph by the never-isolate rule\n",
            range(ts.test_time),
            range(ts.val_time),
            ts.kept
        ))?;
    }
    Ok(())
}

#[derive(Debug, Args)]
pub(super) struct EvalLinkArgs {
    /// A store with a link split (`saintflow split-edges`).
    #[arg(long)]
    graph: PathBuf,
    /// Score pairs by the dot product of their rows of this `[N, d]` `.npy`.
    #[arg(long)]
    embedding: Option<PathBuf>,
    /// Heuristics over the stored (training) graph, comma-separated: cn (common
    /// neighbours), aa (Adamic-Adar), ra (resource allocation). Default: all three without
    /// --embedding, none with it.
    #[arg(long, value_delimiter = ',', value_parser = Heuristic::parse)]
    heuristics: Vec<Heuristic>,
    /// The set scored.
    #[arg(long, default_value = "test", value_parser = ["val", "test"])]
    split: String,
    /// Hits@K cut-offs, comma-separated, each ≥ 1.
    #[arg(long, value_delimiter = ',', default_value = "20,50,100", value_parser = super::at_least_one)]
    hits: Vec<usize>,
    /// Print JSON (schema saintflow.eval-link/1).
    #[arg(long)]
    json: bool,
}

pub(super) fn eval(a: EvalLinkArgs) -> Result<()> {
    let store = GraphStore::open(&a.graph)?;
    let split = store.link_split().ok_or_else(|| {
        StoreError::argument(format!(
            "{}: the store has no link split; make one with `saintflow split-edges {} -o SPLIT.sf`",
            a.graph.display(),
            a.graph.display()
        ))
    })?;
    let set = if a.split == "val" {
        LinkSet::Val
    } else {
        LinkSet::Test
    };
    let edges = split.set(set);
    let heuristics = match (a.heuristics.is_empty(), &a.embedding) {
        (true, None) => Heuristic::ALL.to_vec(),
        _ => a.heuristics.clone(),
    };
    let mut results: Vec<LinkScores> = Vec::new();
    let graph = store.train();
    for h in heuristics {
        let score = move |u, v| h.score(graph, u, v);
        results.push(evaluate(h.name(), edges, &score, &a.hits)?);
    }
    if let Some(path) = &a.embedding {
        let emb = Embedding::load(path)?;
        if emb.rows != store.n_nodes() {
            return Err(StoreError::argument(format!(
                "{}: {} rows, expected one per node of {} ({})",
                path.display(),
                emb.rows,
                a.graph.display(),
                store.n_nodes()
            ))
            .into());
        }
        let score = |u: u32, v: u32| -> std::result::Result<f64, StoreError> {
            let (x, y) = (emb.row(u as usize), emb.row(v as usize));
            Ok(x.iter()
                .zip(y)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum())
        };
        results.push(evaluate("embedding", edges, &score, &a.hits)?);
    }
    if a.json {
        let json = serde_json::json!({
            "schema": "saintflow.eval-link/1",
            "graph": a.graph.display().to_string(),
            "split": set.name(),
            "seed": split.meta.seed,
            "given": split.meta.given,
            "results": results,
        });
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&json).expect("serialises")
        ))?;
    } else {
        let mut text = format!(
            "{}: {} set, {} held-out edges{}; the stored graph (what the heuristics read) has {} undirected edges\n",
            a.graph.display(),
            set.name(),
            edges.len(),
            if split.meta.given {
                " (the dataset's own split and negatives, as given)"
            } else {
                ""
            },
            graph.n_entries() / 2
        );
        for r in &results {
            text.push_str(&r.to_text());
        }
        super::out(&text)?;
    }
    Ok(())
}
