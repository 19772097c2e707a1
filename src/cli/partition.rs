//! `saintflow partition`: k-way partition + GAD augmentation into one store per part.

use std::path::PathBuf;

use clap::Args;

use crate::dist::partition::{partition_store, AugmentOptions, PartitionOptions, PartitionSpec};
use crate::error::Result;
use crate::op::Registry;
use crate::progress::Progress;

#[derive(Debug, Args)]
pub(super) struct PartitionArgs {
    /// Store directory to partition.
    store: PathBuf,
    /// Number of parts k (`-k`, `--parts`; `--k` also accepted).
    #[arg(short, long = "parts", visible_alias = "k", value_parser = super::at_least_one)]
    k: usize,
    /// Output directory: part-0.sf … part-{k-1}.sf (with `--ranks P` < k: rank-0.sf …
    /// rank-{P-1}.sf) and partition.json (`-o`, `--output` as every command spells it;
    /// `--out` also accepted).
    #[arg(short, long = "output", visible_alias = "out")]
    out: PathBuf,
    /// Ranks P of the training job (default k): with P < k the k parts are assigned to P
    /// ranks by GAD's greedy load balance (largest part first, to the least-loaded rank;
    /// load = own nodes + replicas) and each rank gets one store holding its parts.
    #[arg(long, value_parser = super::at_least_one)]
    ranks: Option<usize>,
    /// Imbalance ε: every part has at most max(⌊(1+ε)·N/k⌋, ⌈N/k⌉) own nodes.
    #[arg(long, default_value_t = 0.03)]
    epsilon: f64,
    /// α of the replication budget ⌊α(1+ρ_i)|V_i|⌋.
    #[arg(long, default_value_t = 0.01)]
    alpha: f64,
    /// Walk length L: the message-passing layers of the plan to be trained (default 2, the
    /// shipped GCN/GraphSAGE plans'); 0 turns augmentation off.
    #[arg(long, conflicts_with = "plan")]
    layers: Option<usize>,
    /// Take L from this plan: its receptive-field radius (message-passing hops from the
    /// features to the logits; MixHop's A² counts 2), planned with the store's sizes.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Seed of the partitioner's orders and of the walks.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also write the graph in METIS format (for `gpmetis`; scripts/partition_vs_metis.sh).
    #[arg(long)]
    metis_out: Option<PathBuf>,
    /// Replace an earlier partition directory at the output, and an earlier METIS file at
    /// `--metis-out` (never the source store, a file of the user's, a file inside a store, a
    /// link or a device).
    #[arg(long)]
    force: bool,
    /// Print the summary as JSON (partition.json's content).
    #[arg(long)]
    json: bool,
    /// Parts are written only from a verified source (issue 28).
    #[command(flatten)]
    verify: super::check::VerifyArgs,
}

pub(super) fn run(a: PartitionArgs, registry: &Registry, progress: &Progress) -> Result<()> {
    let mut guard = crate::atomic::OutputGuard::new();
    guard.input("STORE", &a.store);
    if let Some(p) = &a.plan {
        guard.input("--plan", p);
    }
    guard.dir("--output", &a.out);
    if let Some(m) = &a.metis_out {
        guard
            .file("--metis-out", m, a.force)
            .ours("a METIS graph file", super::written::metis);
    }
    guard.check()?;
    a.verify.apply(&crate::store::GraphStore::open(&a.store)?)?;
    let layers = match (&a.plan, a.layers) {
        (Some(path), _) => {
            let store = crate::store::GraphStore::open(&a.store)?;
            let l =
                crate::infer::plan_hops(&super::train::load_plan(path, &[])?, &store, registry)?;
            if l == 0 {
                crate::atomic::stderr_line(&format!(
                    "note: {}: no message passing (L = 0): no walks, augmentation off, parts get no replicas",
                    path.display()
                ));
            }
            l
        }
        (None, l) => l.unwrap_or(2),
    };
    if let Some(path) = &a.metis_out {
        let store = crate::store::GraphStore::open(&a.store)?;
        let g = crate::dist::partition::write::load_graph(&store)?;
        crate::dist::partition::write::write_metis(&g, path)?;
    }
    let spec = PartitionSpec {
        partition: PartitionOptions {
            k: a.k,
            epsilon: a.epsilon,
            seed: a.seed,
        },
        augment: AugmentOptions {
            layers,
            alpha: a.alpha,
            seed: a.seed,
            ..AugmentOptions::default()
        },
        ranks: a.ranks,
    };
    let r = partition_store(&a.store, &a.out, &spec, a.force, progress)?;
    if a.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&r).expect("a report serialises")
        ))?;
        return Ok(());
    }
    super::out(&format!(
        "{}: {} nodes, {} edges into {} parts (ε {}, seed {}) in {:.2} s\n",
        a.out.display(),
        r.n_nodes,
        r.n_edges,
        r.k,
        r.epsilon,
        r.seed,
        r.total_seconds
    ))?;
    super::out(&format!(
        "edge cut {} ({:.2}% of edges; initial {}), balance {:.3}, replication factor {:.4} (α {}, L {})\n",
        r.edge_cut,
        100.0 * r.cut_ratio,
        r.initial_cut,
        r.balance,
        r.replication_factor,
        r.alpha,
        r.layers
    ))?;
    super::out("part      own  replicas  budget  boundary    walks  edge cut  balance\n")?;
    for p in &r.parts {
        super::out(&format!(
            "{:>4} {:>8} {:>9} {:>7} {:>9} {:>8} {:>9} {:>8.3}\n",
            p.part, p.own, p.replicas, p.budget, p.boundary, p.walks, p.edge_cut, p.balance
        ))?;
    }
    if r.ranks.len() < r.k {
        super::out("rank  parts            own  replicas      load  store\n")?;
        for rk in &r.ranks {
            let parts: Vec<String> = rk.parts.iter().map(usize::to_string).collect();
            super::out(&format!(
                "{:>4}  {:<12} {:>8} {:>9} {:>9}  {}\n",
                rk.rank,
                parts.join(","),
                rk.own,
                rk.replicas,
                rk.load,
                rk.store
            ))?;
        }
    }
    Ok(())
}
