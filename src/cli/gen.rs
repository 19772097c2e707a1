//! `saintflow gen kronecker`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::Result;
use crate::progress::Progress;
use crate::store::gen::{generate_kronecker, KroneckerSpec, Planted, TypedGen};

#[derive(Debug, Subcommand)]
pub(super) enum Gen {
    /// R-MAT / Kronecker graph (JPDC §7.6), streamed to disk with bounded memory.
    Kronecker(KroneckerArgs),
}

#[derive(Debug, Args)]
pub(super) struct KroneckerArgs {
    /// N = 2^scale nodes.
    #[arg(long)]
    scale: u32,
    /// Target mean degree, > 0 (N·degree/2 edge draws, at least one; duplicates and self
    /// loops are dropped; bounded above by the disk the store needs while written: about 16 bytes per draw).
    #[arg(long, default_value_t = 16.0)]
    degree: f64,
    /// Feature width F.
    #[arg(long, default_value_t = 32)]
    features: u32,
    /// Number of classes C.
    #[arg(long, default_value_t = 4)]
    classes: u32,
    /// Seed: equal seeds give byte-identical stores.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Initiator matrix a,b,c,d (normalised).
    #[arg(long, default_value = "0.9,0.5,0.5,0.1", value_parser = parse_initiator)]
    initiator: [f64; 4],
    /// Labels follow a planted partition and features are noisy class signals.
    #[arg(long)]
    planted: bool,
    /// Planted mode: probability that an edge is kept inside its first end's class.
    #[arg(long, default_value_t = 0.8, requires = "planted")]
    homophily: f64,
    /// Planted mode: class-centroid distance from the origin in noise standard deviations.
    #[arg(long, default_value_t = 1.0, requires = "planted")]
    separation: f32,
    /// A typed store (issue 57) of T node types t0..t{T-1} (equal id ranges) and T²
    /// relations (r{a}_{b} for a ≤ b, rev_r{a}_{b} for a < b); labels and roles on t0 only.
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=16))]
    types: Option<u32>,
    /// With --types: each type's feature width, T numbers (0: no features); default
    /// --features for t0 and 0 for the others.
    #[arg(long, requires = "types", value_delimiter = ',')]
    type_features: Option<Vec<u32>>,
    /// Train,val,test fractions of the random split.
    #[arg(long, default_value = "0.6,0.2,0.2", value_parser = super::parse_split)]
    split: [f64; 3],
    /// Memory for one CSR bucket while building, in MiB: 1..=65536 (64 GiB), and within the
    /// machine's memory.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=MAX_BUCKET_MIB))]
    bucket_mib: u64,
    /// Output store directory.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing store.
    #[arg(long)]
    force: bool,
}

/// Largest `--bucket-mib` (64 GiB): a bucket beyond the memory of any machine we build on.
const MAX_BUCKET_MIB: u64 = 1 << 16;

fn parse_initiator(s: &str) -> std::result::Result<[f64; 4], String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .map_err(|_| format!("{x:?} is not a number"))
        })
        .collect::<std::result::Result<_, _>>()?;
    v.try_into()
        .map_err(|v: Vec<f64>| format!("expected 4 numbers a,b,c,d, got {}", v.len()))
}

pub(super) fn run(g: Gen, progress: &Progress) -> Result<()> {
    let Gen::Kronecker(a) = g;
    let spec = KroneckerSpec {
        scale: a.scale,
        degree: a.degree,
        n_features: a.features,
        n_classes: a.classes,
        seed: a.seed,
        initiator: a.initiator,
        planted: a.planted.then_some(Planted {
            homophily: a.homophily,
            separation: a.separation,
        }),
        split: a.split,
        bucket_bytes: a.bucket_mib << 20,
        typed: match (a.types, a.type_features) {
            (None, _) => None,
            (Some(t), Some(f)) if f.len() != t as usize => {
                return Err(crate::store::StoreError::argument(format!(
                    "--type-features: {} widths, expected one per type (--types {t})",
                    f.len()
                ))
                .into())
            }
            (Some(_), Some(f)) => Some(TypedGen { features: f }),
            (Some(t), None) => Some(TypedGen {
                features: (0..t)
                    .map(|k| if k == 0 { a.features } else { 0 })
                    .collect(),
            }),
        },
    };
    // Never a file, a link or a device, nor a path inside a store (the store writer
    // replaces only a store, only with --force).
    crate::atomic::OutputGuard::new()
        .dir("--output", &a.output)
        .check()?;
    let r = generate_kronecker(&spec, &a.output, a.force, progress)?;
    super::out(&format!(
        "wrote {}: {} nodes, {} undirected edges ({} draws, {} self loops and {} duplicate entries dropped) in {:.2} s, {:.3e} draws/s\n",
        a.output.display(),
        r.n_nodes,
        r.entries / 2,
        r.draws,
        r.self_loops,
        r.duplicates,
        r.seconds,
        r.draws as f64 / r.seconds.max(1e-9)
    ))?;
    Ok(())
}
