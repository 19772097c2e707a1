//! `saintflow partition`: k-way partition (multilevel, or streaming when the graph does not
//! fit the memory) + GAD augmentation into one store per part.

use std::path::PathBuf;

use clap::Args;

use crate::dist::partition::streaming::DEFAULT_PASSES;
use crate::dist::partition::{
    partition_store, AugmentOptions, Method, PartitionOptions, PartitionReport, PartitionSpec,
};
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
    /// The first level: `multilevel` (the better cut; loads the graph into RAM, memory ∝
    /// nodes + edges), `streaming` (a Fennel pass and refinement passes over the store's
    /// mapped CSR, O(nodes) memory: for graphs whose multilevel partition does not fit), or
    /// `auto`: multilevel when its estimated memory fits in 3/4 of the machine's or the
    /// cgroup's (`SAINTFLOW_MEMORY_LIMIT` overrides), streaming otherwise. The summary and
    /// partition.json say which ran and why.
    #[arg(long, default_value = "auto")]
    method: Method,
    /// Refinement passes of the streaming first level (each reads the CSR once, in order;
    /// stops early at a pass without a move).
    #[arg(long, default_value_t = DEFAULT_PASSES)]
    passes: usize,
    /// Write only partition.json and assignment.txt (every node's part, one a line, METIS's
    /// partition-file format): the part stores are NOT written, so the directory cannot be
    /// trained on (`train --partitions` refuses it). For a graph whose k part stores would
    /// not fit the disk; augmentation still runs and its replicas are counted.
    #[arg(long, conflicts_with = "ranks")]
    assignment_only: bool,
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
        method: a.method,
        passes: a.passes,
        assignment_only: a.assignment_only,
        ..PartitionSpec::default()
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
    summary_method(&r)?;
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
    if !r.ranks.is_empty() && r.ranks.len() < r.k {
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

/// The summary's line naming the first level, why, and (streaming) the cut after each pass;
/// with `--assignment-only`, that no store was written.
fn summary_method(r: &PartitionReport) -> Result<()> {
    let cuts: Vec<String> = r.pass_cuts.iter().map(u64::to_string).collect();
    let passes = if cuts.is_empty() {
        String::new()
    } else {
        format!("; cut after each pass: {}", cuts.join(" → "))
    };
    super::out(&format!(
        "first level: {} ({}){passes}\n",
        r.method, r.method_reason
    ))?;
    if r.assignment_only {
        super::out(&format!(
            "--assignment-only: wrote {} and {} only, no part stores\n",
            crate::dist::partition::PARTITION_JSON,
            crate::dist::partition::ASSIGNMENT_FILE
        ))?;
    }
    Ok(())
}
