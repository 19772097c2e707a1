//! `saintflow sample`: draw subgraphs and report sizes, degrees, timing and coverage.

use std::path::PathBuf;
use std::time::Instant;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, ValueEnum};
use serde::Serialize;

use crate::compile::memory::sampler_bytes;
use crate::error::Result;
use crate::machine::{human, MemoryLimit};
use crate::progress::Progress;
use crate::sample::config::{self, KINDS};
use crate::sample::params::{Field, FieldError, FieldType, Input};
use crate::sample::{sample_subgraph, NormCounts, SamplerConfig, Subgraph};
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
    /// `--sampler` and the sampler's own flags.
    #[command(flatten)]
    sampler: SamplerArgs,
    /// Graph to sample from.
    #[arg(long, value_enum, default_value = "train")]
    graph: GraphArg,
    /// Number of subgraphs, ≥ 1 (checked against memory, with the sampler's sizes).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Seed: subgraph i depends only on (seed, i).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Clip |V_s| down to a multiple of this (16 f32 per cache line; 1 = off; full: off).
    #[arg(long, default_value_t = 16, value_parser = super::at_least_one)]
    clip: usize,
    /// Also estimate GraphSAINT normalisation from these subgraphs and write it here.
    #[arg(long)]
    save_norm: Option<PathBuf>,
    /// Replace an existing file of normalisation counts at `--save-norm` (never a file of
    /// the user's, a file inside the store, a link or a device: refused even with it).
    #[arg(long)]
    force: bool,
    /// One JSON object per subgraph, then a summary object.
    #[arg(long)]
    json: bool,
    /// Skip the memory check of the sampler's sizes (a machine with swap, or a deliberate
    /// try).
    #[arg(long)]
    no_memory_check: bool,
    #[command(flatten)]
    verify: super::check::VerifyArgs,
}

#[derive(Serialize)]
struct Record {
    index: u64,
    nodes: usize,
    edges: usize,
    mean_degree: f64,
    max_degree: usize,
    ms: f64,
    /// A typed store's subgraph: nodes per type, in type order.
    #[serde(skip_serializing_if = "Option::is_none")]
    types: Option<Vec<TypeCount>>,
    /// A typed store's subgraph: entries per relation, by relation id.
    #[serde(skip_serializing_if = "Option::is_none")]
    relations: Option<Vec<RelationCount>>,
}

#[derive(Serialize)]
struct TypeCount {
    name: String,
    nodes: usize,
}

#[derive(Serialize)]
struct RelationCount {
    src: String,
    name: String,
    dst: String,
    entries: usize,
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

/// `--sampler KIND` and one flag per field of every kind's parameter struct
/// ([`config::KINDS`]): `--pin-cap N` for `pin_cap`, a switch for a `bool`. A flag shared
/// by kinds (`--budget`: frontier and node) is one flag. Values are checked by the field's
/// own `set` when parsed; the chosen kind takes the flags of its fields, and flags of other
/// kinds are ignored, as they always were.
#[derive(Debug)]
struct SamplerArgs {
    config: SamplerConfig,
    /// The counts given as flags (field name, value): what the memory check names.
    given: Vec<(&'static str, u64)>,
}

/// The flags: each field name once, with the first kind (in [`KINDS`] order) that has it.
fn flags() -> Vec<(&'static config::Kind, &'static Field)> {
    let mut out: Vec<(&config::Kind, &Field)> = Vec::new();
    for k in KINDS {
        for f in k.fields {
            if out.iter().all(|(_, g)| g.name != f.name) {
                out.push((k, f));
            }
        }
    }
    out
}

/// A field flag's help: the first kind's doc line, the kinds that have the field, and the
/// defaults (`"Walk roots r (rw) [default: 3000]"`).
fn flag_help(name: &str) -> String {
    let having: Vec<(&str, &Field)> = KINDS
        .iter()
        .filter_map(|k| k.field(name).map(|f| (k.name, f)))
        .collect();
    let doc = having.first().map_or("", |(_, f)| f.help());
    let kinds: Vec<&str> = having.iter().map(|(k, _)| *k).collect();
    let mut defaults: Vec<String> = having
        .iter()
        .filter(|(_, f)| f.ty != FieldType::Flag)
        .filter_map(|(_, f)| (f.default)())
        .collect();
    defaults.dedup();
    let default = match defaults.as_slice() {
        [] => String::new(),
        [d] => format!(" [default: {d}]"),
        many => format!(" [defaults: {}]", many.join(", ")),
    };
    format!("{doc} ({}){default}", kinds.join(", "))
}

/// `train --set`'s long help: the override syntax and the `sampler.` keys, per kind its
/// parameter struct's fields.
pub(super) fn set_help() -> String {
    let kinds: Vec<String> = KINDS
        .iter()
        .map(|k| {
            let fields: Vec<&str> = k.fields.iter().map(|f| f.name).collect();
            match fields.as_slice() {
                [] => format!("{}: none", k.name),
                f => format!("{}: {}", k.name, f.join(", ")),
            }
        })
        .collect();
    format!(
        "Override a plan key: `--set dims.hidden=256 --set sampler.kind=rw` (repeatable; \
         `model.X` is an alias of `dims.X`).\n\nSampler keys: `sampler.kind`, `sampler.graph`, \
         `sampler.clip`, and the kind's own ({}); switching `sampler.kind` drops the old \
         kind's keys.",
        kinds.join("; ")
    )
}

/// A flag's text as its field's value: parsed as a plan scalar, then checked by setting it
/// on the owning kind's defaults (the same `set` the plan and the chosen kind use).
fn check_flag(
    kind: &'static config::Kind,
    field: &'static Field,
    s: &str,
) -> Result<Input, String> {
    let v = Input::parse(s);
    match (kind.default)().set(field.name, v.clone()) {
        Ok(()) => Ok(v),
        Err(FieldError::Invalid(ty)) => Err(format!("expected {}, got {s}", ty.expected())),
        Err(FieldError::Unknown) => unreachable!("`{}` is a field of `{}`", field.name, kind.name),
    }
}

impl Args for SamplerArgs {
    fn augment_args(cmd: Command) -> Command {
        let kinds =
            PossibleValuesParser::new(KINDS.iter().map(|k| PossibleValue::new(k.name).help(k.doc)));
        let mut cmd = cmd.arg(
            Arg::new("sampler")
                .long("sampler")
                .value_name("SAMPLER")
                .default_value("frontier")
                .value_parser(kinds)
                .help("Sampler kind"),
        );
        for (kind, field) in flags() {
            let arg = Arg::new(field.name)
                .long(field.name.replace('_', "-"))
                .help(flag_help(field.name));
            cmd = cmd.arg(match field.ty {
                FieldType::Flag => arg.action(ArgAction::SetTrue),
                FieldType::Count | FieldType::Positive | FieldType::Counts | FieldType::Names => {
                    arg.value_name(field.name.to_uppercase())
                        // `--eta -1` is a value out of range, not an unknown flag.
                        .allow_negative_numbers(true)
                        .value_parser(move |s: &str| check_flag(kind, field, s))
                }
            });
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        SamplerArgs::augment_args(cmd)
    }
}

impl FromArgMatches for SamplerArgs {
    fn from_arg_matches(m: &ArgMatches) -> std::result::Result<SamplerArgs, clap::Error> {
        let name = m
            .get_one::<String>("sampler")
            .expect("`--sampler` has a default");
        let mut config = SamplerConfig::default_of(name).expect("clap checked the name");
        let mut given = Vec::new();
        for field in config.fields() {
            let v = match field.ty {
                FieldType::Flag => m.get_flag(field.name).then_some(Input::Bool(true)),
                _ => m.get_one::<Input>(field.name).cloned(),
            };
            if let (FieldType::Count, Some(Input::Int(n))) = (field.ty, &v) {
                given.push((field.name, *n as u64));
            }
            if let Some(v) = v {
                // Checked by the flag's parser against the first kind with the field; kinds
                // sharing a field share its type (tested below).
                config
                    .set(field.name, v)
                    .expect("a flag's parser checked its value");
            }
        }
        // Issue 28: a flag of another sampler is a mistake, not something to ignore (the
        // plan parser refuses the key the same way).
        let own: Vec<&str> = config.fields().iter().map(|f| f.name).collect();
        for (_, field) in flags() {
            if own.contains(&field.name)
                || m.value_source(field.name) != Some(clap::parser::ValueSource::CommandLine)
            {
                continue;
            }
            let owners: Vec<&str> = KINDS
                .iter()
                .filter(|k| k.field(field.name).is_some())
                .map(|k| k.name)
                .collect();
            let takes: Vec<String> = own
                .iter()
                .map(|f| format!("--{}", f.replace('_', "-")))
                .collect();
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--{} belongs to the {} sampler{}; --sampler {name} takes {}\n",
                    field.name.replace('_', "-"),
                    owners.join(" and "),
                    if owners.len() > 1 { "s" } else { "" },
                    if takes.is_empty() {
                        "none of the sampler flags".to_string()
                    } else {
                        takes.join(", ")
                    }
                ),
            ));
        }
        Ok(SamplerArgs { config, given })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> std::result::Result<(), clap::Error> {
        *self = SamplerArgs::from_arg_matches(m)?;
        Ok(())
    }
}

/// Issue 28: what the command allocates in proportion to its numbers (the sampler's draw
/// buffer, [`sampler_bytes`], and 8 bytes of timing per subgraph) against the machine's
/// memory, before the sampler is built; the error names the flag given largest.
fn check_memory(a: &SampleArgs) -> Result<()> {
    let Some((limit, source)) = MemoryLimit::Detect.resolve() else {
        return Ok(());
    };
    let draws = sampler_bytes(&a.sampler.config);
    let timing = 8 * u128::from(a.count);
    if draws + timing <= u128::from(limit) {
        return Ok(());
    }
    let machine = format!(
        "this machine has {} ({source}); pass --no-memory-check to try anyway",
        human(u128::from(limit))
    );
    let what = if timing > draws {
        format!(
            "--count {}: {} of per-subgraph timings; {machine}",
            a.count,
            human(timing)
        )
    } else {
        let lead = match a.sampler.given.iter().max_by_key(|g| g.1) {
            Some((name, v)) => format!("--{} {v}: ", name.replace('_', "-")),
            None => String::new(),
        };
        format!(
            "{lead}each subgraph draws {} nodes before dedup, {} for the sampler's draw buffer alone; {machine}",
            draws / 4,
            human(draws)
        )
    };
    Err(crate::sample::SampleError::Param(what).into())
}

pub(super) fn run(a: SampleArgs, progress: &Progress) -> Result<()> {
    if let Some(path) = &a.save_norm {
        crate::atomic::OutputGuard::new()
            .input("STORE", &a.store)
            .file("--save-norm", path, a.force)
            .ours("saintflow's normalisation counts", super::written::norm)
            .check()?;
    }
    let store = GraphStore::open(&a.store)?;
    a.verify.apply(&store)?;
    let (g, graph_name) = match a.graph {
        GraphArg::Train => (store.train(), "train"),
        GraphArg::Full => (store.full(), "full"),
    };
    // Samplers read rows at random (issue 56: with the default read-ahead, 8 MiB a page
    // fault on the VM measured, ten subgraphs of a store past RAM read 6.5 GB).
    store.advise_sampling(matches!(a.graph, GraphArg::Train));
    let kind = &a.sampler.config;
    if !a.no_memory_check {
        check_memory(&a)?;
    }
    let sampler = kind.build(&store, g)?;
    let clip = if kind.whole_graph() { 1 } else { a.clip.max(1) };
    // Timing is per subgraph on one thread; subgraphs/s is for the whole pool below.
    let bar = progress.ticker(a.count, "sample", "subgraphs");
    let mut seen = vec![false; g.n_nodes()];
    let mut ms = Vec::with_capacity(a.count as usize);
    let (mut sum_nodes, mut sum_edges) = (0usize, 0usize);
    let start = Instant::now();
    for i in 0..a.count {
        let t = Instant::now();
        let mut s = sample_subgraph(sampler.as_ref(), a.seed, i, clip)?;
        // A typed store's subgraph carries its types and relations (issue 57 item 4),
        // timed with the draw: what a typed plan's step pays.
        if store.is_typed() {
            crate::sample::attach_relations(&store, &mut s)?;
        }
        let dt = t.elapsed().as_secs_f64() * 1e3;
        let (types, relations) = typed_counts(&store, &s);
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
            types,
            relations,
        };
        if a.json {
            super::out(&format!(
                "{}\n",
                serde_json::to_string(&rec).expect("record serialises")
            ))?;
        } else if a.count <= 20 {
            bar.suspend(|| print_record(&rec))?;
        }
        bar.inc(1);
    }
    let elapsed = start.elapsed().as_secs_f64();
    bar.finish();
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
    print_summary(&summary, a.json)?;
    if let Some(path) = &a.save_norm {
        let counts = NormCounts::estimate(sampler.as_ref(), a.count, a.seed, clip)?;
        counts.save(path)?;
        if !a.json {
            super::out(&format!(
                "normalisation counts over {} subgraphs written to {}\n",
                a.count,
                path.display()
            ))?;
        }
    }
    Ok(())
}

/// A typed store's subgraph's nodes per type and entries per relation (None, None on a
/// homogeneous store).
fn typed_counts(
    store: &GraphStore,
    s: &Subgraph,
) -> (Option<Vec<TypeCount>>, Option<Vec<RelationCount>>) {
    match &s.typed {
        Some(t) => (
            Some(
                (0..store.n_node_types())
                    .map(|ty| TypeCount {
                        name: store.node_type_name(ty).to_string(),
                        nodes: t.type_range(ty).len(),
                    })
                    .collect::<Vec<_>>(),
            ),
            Some(
                t.relations
                    .iter()
                    .map(|r| RelationCount {
                        src: store.node_type_name(r.src).to_string(),
                        name: store.relation(r.relation).name.to_string(),
                        dst: store.node_type_name(r.dst).to_string(),
                        entries: r.n_entries(),
                    })
                    .collect::<Vec<_>>(),
            ),
        ),
        None => (None, None),
    }
}

/// A subgraph's line (and its types' and relations' line on a typed store).
fn print_record(rec: &Record) -> Result<()> {
    super::out(&format!(
        "subgraph {:>4}: {:>8} nodes {:>10} edges  mean degree {:>7.2}  max {:>6}  {:>8.2} ms\n",
        rec.index, rec.nodes, rec.edges, rec.mean_degree, rec.max_degree, rec.ms
    ))?;
    if let (Some(ty), Some(rel)) = (&rec.types, &rec.relations) {
        let ty: Vec<String> = ty
            .iter()
            .map(|t| format!("{} {}", t.name, t.nodes))
            .collect();
        let rel: Vec<String> = rel
            .iter()
            .map(|r| format!("{} {} {} {}", r.src, r.name, r.dst, r.entries))
            .collect();
        super::out(&format!(
            "      types: {}\n      relations (entries): {}\n",
            ty.join(", "),
            rel.join(", ")
        ))?;
    }
    Ok(())
}

/// The summary line (or its JSON).
fn print_summary(summary: &Summary, json: bool) -> Result<()> {
    if json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string(summary).expect("summary serialises")
        ))?;
    } else {
        super::out(&format!(
            "{} on the {} graph: {} subgraphs, mean {:.1} nodes / {:.1} edges (mean degree {:.2}), median {:.2} ms per subgraph (1 thread), {:.1} subgraphs/s; {:.1}% of the nodes with edges covered\n",
            summary.sampler, summary.graph, summary.count, summary.mean_nodes, summary.mean_edges, summary.mean_degree,
            summary.median_ms, summary.subgraphs_per_s, summary.coverage * 100.0
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::plan::Plan;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SampleArgs,
    }

    fn parse(argv: &[&str]) -> std::result::Result<SamplerConfig, clap::Error> {
        Cli::try_parse_from(argv).map(|c| c.args.sampler.config)
    }

    /// The flags are generated from the parameter structs, so every field has its flag by
    /// construction; this checks the wiring: for every field of every kind, `--flag V`
    /// lands in that field and nowhere else — the config equals the one a plan's
    /// `[sampler]` with `field = V` types into, and differs from the defaults — while a flag
    /// of another kind is refused, naming both; kinds sharing a flag share its type;
    /// out-of-range values are refused naming the flag and the field's range.
    #[test]
    fn every_field_has_its_flag_and_means_its_plan_key() {
        for k in KINDS {
            for f in k.fields {
                let (value, plan_value) = match f.ty {
                    FieldType::Count => (Some("7"), "7"),
                    FieldType::Positive => (Some("2.5"), "2.5"),
                    FieldType::Flag => (None, "true"),
                    FieldType::Counts => (Some("a=3,b=0"), "{ a = 3, b = 0 }"),
                    FieldType::Names => (Some("a,b"), "[\"a\", \"b\"]"),
                };
                // A flag of another kind is refused.
                let foreign = if k.field("edges").is_some() {
                    "--roots"
                } else {
                    "--edges"
                };
                let flag = f.flag();
                let mut with_foreign =
                    vec!["sample", "store", "--sampler", k.name, foreign, "9", &flag];
                with_foreign.extend(value);
                let e = parse(&with_foreign)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                assert!(
                    e.contains(&format!("{foreign} belongs to the"))
                        && e.contains(&format!("--sampler {}", k.name)),
                    "{with_foreign:?}: {e}"
                );
                let mut argv = vec!["sample", "store", "--sampler", k.name, &flag];
                argv.extend(value);
                let got = parse(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                let plan = format!(
                    "[sampler]\nkind = \"{}\"\n{} = {plan_value}\n\n[output]\nparams = {{ W = [\"in\", \"classes\"] }}\nout = \"x @ W\"\n",
                    k.name, f.name
                );
                let want = Plan::parse(&plan, "t.toml").unwrap().sampler.kind;
                assert_eq!(got, want, "{argv:?}");
                assert_ne!(got, (k.default)(), "{argv:?}: the value is not the default");
            }
            assert_eq!(
                parse(&["sample", "store", "--sampler", k.name]).unwrap(),
                (k.default)()
            );
        }
        for (owner, f) in flags() {
            for k in KINDS {
                if let Some(g) = k.field(f.name) {
                    assert_eq!(g.ty, f.ty, "`{}` of {} and {}", f.name, owner.name, k.name);
                }
            }
        }
        for bad in [
            ["--budget", "0"],
            ["--eta", "-1"],
            ["--pin-cap", "2.5"],
            ["--budgets", "paper=-1"],
            ["--budgets", "paper"],
            ["--root-types", "a,a"],
        ] {
            let e = parse(&["sample", "store", bad[0], bad[1]]).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(bad[0]) && text.contains("expected a"),
                "{text}"
            );
        }
    }
}
