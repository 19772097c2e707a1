//! `saintflow import graphsaint|edgelist|ogb|ogb-link`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::error::Result;
use crate::progress::Progress;
use crate::store::import::{
    import_edgelist, import_graphsaint, EdgeListOptions, GraphSaintOptions, ImportReport, Resplit,
    TrainGraphMode,
};

#[derive(Debug, Subcommand)]
pub(super) enum Import {
    /// A GraphSAINT dataset directory (adj_full.npz, adj_train.npz, feats.npy, class_map.json, role.json).
    Graphsaint(GraphSaintArgs),
    /// A whitespace edge list ("u v" per line; # and % comments).
    Edgelist(EdgeListArgs),
    /// An OGB node-property dataset directory (raw/*.csv.gz or raw/data.npz, split/NAME/);
    /// a heterogeneous one (ogbn-mag's raw/num-node-dict.csv.gz, raw/relations/) becomes a
    /// typed store.
    Ogb(OgbArgs),
    /// An OGB link-property dataset directory (ogbl-collab, ogbl-citation2, ppa, ddi) with
    /// its own split and negatives: raw/*.csv.gz, split/NAME/{train,valid,test}.pt.
    #[command(long_about = OGB_LINK_ABOUT)]
    OgbLink(OgbLinkArgs),
}

const OGB_LINK_ABOUT: &str = "An OGB link-property dataset directory with its own split and negatives.

The stored graph is raw/edge.csv.gz (the training edges, as OGB's loaders give it; made undirected), with raw/node-feat.csv.gz as features when present. The split's valid.pt and test.pt (torch.save files, read by a strict reader: zip of a protocol-2 pickle of int64 tensors or numpy arrays) become the store's link split, read by eval-link, check and info:

  ogbl-collab / ppa / ddi: edge (E x 2) the positives, edge_neg (P x 2) a pool of negative pairs (AUC, AP, pool Hits@K; no tails: K = 0)
  ogbl-citation2: source_node, target_node (E) the positives, target_node_neg (E x K) the tails (MRR, Hits@K; no pairs)

Positives must be no edge of the graph, no self pair and held out once, else the import is refused naming the file and the pair. Negatives are kept as OGB gives them (a few may be true edges or repeats: OGB's evaluators count them as negatives, so the figures stay comparable with OGB's); the header marks the split as given.";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TrainGraphArg {
    /// adj_train.npz as given.
    Given,
    /// Induced from adj_full.npz on the training nodes.
    Induce,
    /// The full graph (transductive).
    Full,
}

/// `--train-graph` of the importers whose datasets give no training graph.
#[derive(Debug, Clone, Copy, ValueEnum, Default)]
enum BuiltTrainGraphArg {
    /// The full graph: every edge, training labels only (transductive, OGB's protocol).
    #[default]
    Full,
    /// Induced on the training nodes: edges with both ends in training (inductive).
    Induce,
}

impl BuiltTrainGraphArg {
    fn mode(self) -> TrainGraphMode {
        match self {
            BuiltTrainGraphArg::Full => TrainGraphMode::Full,
            BuiltTrainGraphArg::Induce => TrainGraphMode::Induce,
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct GraphSaintArgs {
    /// Dataset directory.
    dir: PathBuf,
    /// Output store directory.
    #[arg(short, long)]
    output: PathBuf,
    /// Standardise features with the training nodes' mean and standard deviation (as GraphSAINT's loader does).
    #[arg(long)]
    standardize: bool,
    /// Which training graph to store (default: given; induce with --resplit, which refuses
    /// given; full: the whole graph, transductive).
    #[arg(long, value_enum)]
    train_graph: Option<TrainGraphArg>,
    /// Replace role.json's split by a seeded random split of the labelled nodes with these
    /// exact train,val,test fractions (GAD's Cora: 0.45,0.18,0.37); the training graph is
    /// induced on the new training nodes.
    #[arg(long, value_parser = super::parse_split)]
    resplit: Option<[f64; 3]>,
    /// Seed of --resplit's split.
    #[arg(long, default_value_t = 1, requires = "resplit")]
    split_seed: u64,
    /// Replace an existing store.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub(super) struct EdgeListArgs {
    /// Edge-list file.
    file: PathBuf,
    /// Output store directory.
    #[arg(short, long)]
    output: PathBuf,
    /// Add the reverse of every edge (the input lists each undirected edge once, or is directed).
    #[arg(long)]
    symmetrize: bool,
    /// Number of nodes (default: largest id + 1; ids far beyond the number of lines need
    /// --remap or this).
    #[arg(long, conflicts_with = "remap")]
    nodes: Option<u64>,
    /// Number the node ids (any tokens: sparse numbers, strings) 0..N in order of first
    /// appearance; the mapping is written to STORE/ids.tsv. Labels and roles must then be
    /// class_map.json / role.json keyed by the original ids (.npy inputs are refused).
    #[arg(long)]
    remap: bool,
    /// The column (1-based; 3 or more) holding each edge's time, an integer (seconds,
    /// days, years): stored as the edge times, which `split-edges --by-time` splits on.
    /// An edge listed more than once (both directions, duplicates) keeps the earliest.
    #[arg(long, value_parser = clap::value_parser!(u64).range(3..=1_000_000))]
    time_column: Option<u64>,
    /// Node features, an (N, F) .npy file.
    #[arg(long)]
    features: Option<PathBuf>,
    /// Standardise features on the training nodes.
    #[arg(long, requires = "features")]
    standardize: bool,
    /// Labels: a class_map.json or a .npy (1-D class ids, negative = none; 2-D 0/1 multi-label).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Split: a GraphSAINT role.json (default: a random split of the labelled nodes).
    #[arg(long)]
    roles: Option<PathBuf>,
    /// Train,val,test fractions of the random split.
    #[arg(long, default_value = "0.6,0.2,0.2", value_parser = super::parse_split)]
    split: [f64; 3],
    /// Seed of the random split.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The training graph: full (every edge; transductive) or induce (edges with both
    /// ends in training; inductive).
    #[arg(long, value_enum, default_value = "full")]
    train_graph: BuiltTrainGraphArg,
    /// Replace an existing store.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub(super) struct OgbArgs {
    /// Dataset directory (as the ogb package downloads it: raw/, split/).
    dir: PathBuf,
    /// Output store directory.
    #[arg(short, long)]
    output: PathBuf,
    /// The split's name under split/ (default: the only one).
    #[arg(long)]
    split: Option<String>,
    /// The training graph: full (every edge; OGB's transductive protocol) or induce
    /// (edges with both ends in training; inductive).
    #[arg(long, value_enum, default_value = "full")]
    train_graph: BuiltTrainGraphArg,
    /// Replace an existing store.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub(super) struct OgbLinkArgs {
    /// Dataset directory (as the ogb package downloads it: raw/, split/).
    dir: PathBuf,
    /// Output store directory.
    #[arg(short, long)]
    output: PathBuf,
    /// The split's name under split/ (default: the only one; collab: time, citation2: time).
    /// raw/edge_year.csv.gz, when present (collab), becomes the store's edge times (a pair
    /// listed in several years keeps the earliest).
    #[arg(long)]
    split: Option<String>,
    /// Replace an existing store.
    #[arg(long)]
    force: bool,
}

/// Prints the import's report, then the [`warnings`](crate::store::import::warnings) about
/// the store it wrote.
fn report(out: &std::path::Path, r: &ImportReport) -> Result<()> {
    super::out(&format!(
        "wrote {}: {} nodes, {} undirected edges ({} in the training graph; {} self loops and {} duplicate entries dropped) in {:.2} s\n",
        out.display(),
        r.n_nodes,
        r.entries / 2,
        r.train_entries / 2,
        r.self_loops,
        r.duplicates,
        r.seconds
    ))?;
    let store = crate::store::GraphStore::open(out)?;
    for w in crate::store::import::warnings(&store) {
        crate::atomic::stderr_line(&format!("warning: {w}"));
    }
    Ok(())
}

pub(super) fn run(i: Import, progress: &Progress) -> Result<()> {
    // The store writer decides whether an existing directory may be replaced (only a store,
    // only with --force); the guard refuses an input as the output and a store inside a
    // store, before anything is read.
    let mut guard = crate::atomic::OutputGuard::new();
    match &i {
        Import::Graphsaint(a) => guard.input("DIR", &a.dir).dir("--output", &a.output),
        Import::Edgelist(a) => {
            guard.input("FILE", &a.file);
            for (flag, p) in [
                ("--features", &a.features),
                ("--labels", &a.labels),
                ("--roles", &a.roles),
            ] {
                if let Some(p) = p {
                    guard.input(flag, p);
                }
            }
            guard.dir("--output", &a.output)
        }
        Import::Ogb(a) => guard.input("DIR", &a.dir).dir("--output", &a.output),
        Import::OgbLink(a) => guard.input("DIR", &a.dir).dir("--output", &a.output),
    };
    guard.check()?;
    match i {
        Import::Graphsaint(a) => {
            let opts = GraphSaintOptions {
                standardize: a.standardize,
                train_graph: match (a.train_graph, a.resplit) {
                    (Some(TrainGraphArg::Given), _) | (None, None) => TrainGraphMode::Given,
                    (Some(TrainGraphArg::Induce), _) | (None, Some(_)) => TrainGraphMode::Induce,
                    (Some(TrainGraphArg::Full), _) => TrainGraphMode::Full,
                },
                resplit: a.resplit.map(|fractions| Resplit {
                    fractions,
                    seed: a.split_seed,
                }),
            };
            let r = import_graphsaint(&a.dir, &a.output, &opts, a.force, progress)?;
            report(&a.output, &r)?;
        }
        Import::Edgelist(a) => {
            let opts = EdgeListOptions {
                symmetrize: a.symmetrize,
                n_nodes: a.nodes,
                features: a.features,
                standardize: a.standardize,
                labels: a.labels,
                roles: a.roles,
                split: a.split,
                seed: a.seed,
                train_graph: a.train_graph.mode(),
                remap: a.remap,
                time_column: a.time_column.map(|c| c as usize),
            };
            let r = import_edgelist(&a.file, &a.output, &opts, a.force, progress)?;
            report(&a.output, &r)?;
        }
        Import::Ogb(a) => {
            let opts = crate::store::import::OgbOptions {
                split: a.split,
                train_graph: a.train_graph.mode(),
            };
            let r = crate::store::import::import_ogb(&a.dir, &a.output, &opts, a.force, progress)?;
            for note in &r.notes {
                crate::atomic::stderr_line(&format!("note: {note}"));
            }
            report(&a.output, &r.report)?;
        }
        Import::OgbLink(a) => {
            let opts = crate::store::import::OgbLinkOptions { split: a.split };
            let r =
                crate::store::import::import_ogb_link(&a.dir, &a.output, &opts, a.force, progress)?;
            for note in &r.notes {
                crate::atomic::stderr_line(&format!("note: {note}"));
            }
            report(&a.output, &r.report)?;
            let pairs = |p: u64| {
                if p == 0 {
                    "no negative pairs".to_string()
                } else {
                    format!("{p} negative pairs")
                }
            };
            super::out(&format!(
                "link split {:?} ({:?} layout): validation {} positives, {}; test {} positives, {}; {} negatives per positive (tails)\n",
                r.split,
                r.layout,
                r.positives[0],
                pairs(r.negative_pairs[0]),
                r.positives[1],
                pairs(r.negative_pairs[1]),
                r.negatives
            ))?;
        }
    }
    Ok(())
}
