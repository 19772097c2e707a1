//! The memory check (issue 15): what a plan's parameters and one training step need,
//! estimated before any parameter is allocated and compared with the machine's memory, so
//! that `dims.hidden = 100000000` is a clear error naming the dim instead of an allocation
//! abort.
//!
//! The estimate is parameters + optimiser state (Adam: two more copies, SGD: one) + the
//! peak live bytes of one step ([`crate::planner::memory::schedule`] over the lowered,
//! unplanned step graph, with n the sampler table's expected node draw clamped to the
//! sampled graph, or the whole graph for `full`, and nnz = n × its mean degree). The
//! store's sections are memory-mapped and paged in on demand, so they are not counted:
//! a store larger than memory trains. The step's estimate counts the parameters it reads
//! once more, and the sampler's own buffers not at all; both are small beside the
//! activations of any plan that comes near the limit.
//!
//! The machine's memory is `MemTotal` from `/proc/meminfo`, or the limit of this process's
//! cgroup (or an ancestor's) when lower: v2's `memory.max`, v1's `memory.limit_in_bytes`; where neither can be read the
//! check is skipped. [`MemoryLimit`] overrides it: a fixed number of bytes (tests, or a
//! machine with swap) or `Off` (`--no-memory-check`). The environment variable
//! `SAINTFLOW_MEMORY_LIMIT` replaces the detected number for [`MemoryLimit::Detect`]:
//! bytes with an optional binary suffix (`64G`, `512M`), or `off`.

use std::fmt::Write as _;

use crate::ir::{Bindings, ParamDecl};
use crate::plan::{Lowered, Optimizer, Plan, PlanError, SampleGraph, SamplerPlan};
use crate::store::GraphStore;

/// What the memory check compares the estimate with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The machine's memory ([`machine_memory`]); no check where it cannot be read.
    #[default]
    Detect,
    /// This many bytes.
    Bytes(u64),
    /// No check (`--no-memory-check`: a machine with swap, or a deliberate try).
    Off,
}

impl MemoryLimit {
    /// The bytes to check against and where the number comes from; None: no check.
    pub fn resolve(self) -> Option<(u64, String)> {
        match self {
            MemoryLimit::Detect => match std::env::var(ENV) {
                Ok(v) if v.trim().eq_ignore_ascii_case("off") => None,
                Ok(v) => match parse_bytes(&v) {
                    Some(b) => Some((b, format!("{ENV}={}", v.trim()))),
                    None => {
                        eprintln!("warning: {ENV}={v:?} is not a byte count (like 64G) or `off`; using the machine's memory");
                        machine_memory()
                    }
                },
                Err(_) => machine_memory(),
            },
            MemoryLimit::Bytes(b) => Some((b, "the given limit".into())),
            MemoryLimit::Off => None,
        }
    }
}

/// The environment variable that replaces the detected memory (see the module's
/// documentation).
pub const ENV: &str = "SAINTFLOW_MEMORY_LIMIT";

/// `4096`, `512K`, `64M`, `16G`, `1T` (binary units, an optional trailing `B`/`iB`).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (num, shift) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 10),
        'M' | 'm' => (&s[..s.len() - 1], 20),
        'G' | 'g' => (&s[..s.len() - 1], 30),
        'T' | 't' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// The machine's memory in bytes and its source (`MemTotal`, or the cgroup's limit when
/// lower: v2's `memory.max`, or v1's `memory.limit_in_bytes` of the memory controller's
/// group, every ancestor's included); None when neither can be read.
pub fn machine_memory() -> Option<(u64, String)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let limits: Vec<String> = cgroup_limit_files(&cgroup)
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    let limits: Vec<&str> = limits.iter().map(String::as_str).collect();
    memory_from(meminfo.as_deref(), &limits)
}

/// The memory-limit files that apply to a process whose `/proc/self/cgroup` reads `text`:
/// for a v2 line `0::/path`, `memory.max` in /sys/fs/cgroup/path and each ancestor; for the
/// v1 memory controller's line `N:…memory…:/path`, `memory.limit_in_bytes` in
/// /sys/fs/cgroup/memory/path and each ancestor. (Files that do not exist are skipped by
/// the reader.)
pub fn cgroup_limit_files(text: &str) -> Vec<std::path::PathBuf> {
    use std::path::{Path, PathBuf};
    let mut files = Vec::new();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (root, file) = if controllers.is_empty() {
            (PathBuf::from("/sys/fs/cgroup"), "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                PathBuf::from("/sys/fs/cgroup/memory"),
                "memory.limit_in_bytes",
            )
        } else {
            continue;
        };
        let dir = root.join(path.trim().trim_start_matches('/'));
        let mut at: Option<&Path> = Some(&dir);
        while let Some(d) = at.filter(|d| d.starts_with(&root)) {
            files.push(d.join(file));
            at = d.parent();
        }
    }
    files
}

/// [`machine_memory`] from the texts of `/proc/meminfo` and of the cgroups' limit files
/// (`max` means none): the least of them.
pub fn memory_from(meminfo: Option<&str>, cgroup_max: &[&str]) -> Option<(u64, String)> {
    let total = meminfo.and_then(|m| {
        m.lines().find_map(|l| {
            let kb = l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?;
            kb.trim().parse::<u64>().ok().map(|k| k * 1024)
        })
    });
    let cgroup = cgroup_max
        .iter()
        .filter_map(|m| m.trim().parse::<u64>().ok())
        .min();
    match (total, cgroup) {
        (Some(t), Some(c)) if c < t => Some((c, "the cgroup's memory limit".into())),
        (Some(t), _) => Some((t, "MemTotal".into())),
        (None, Some(c)) => Some((c, "the cgroup's memory limit".into())),
        (None, None) => None,
    }
}

/// `12.3 GiB`, `512.0 MiB`, `3.0 KiB`, `17 B`.
pub fn human(bytes: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut x = bytes as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{x:.1} {}", units[u])
    }
}

/// What a training needs, in bytes (u128: no product of plan sizes overflows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// The parameters.
    pub params: u128,
    /// The optimiser's state (copies of the parameters).
    pub optimizer: u128,
    /// Copies of the parameters the optimiser keeps (2 for Adam, 1 for SGD; 0 for
    /// inference).
    pub optimizer_copies: u128,
    /// The peak live bytes of one step, over the phases (0 for inference).
    pub step: u128,
    /// The bindings of the phase with that peak.
    pub step_bindings: Option<Bindings>,
}

impl Estimate {
    /// The total.
    pub fn total(&self) -> u128 {
        self.params + self.optimizer + self.step
    }
}

fn param_bytes(d: &ParamDecl) -> u128 {
    4 * d.rows as u128 * d.cols as u128
}

/// The expected subgraph of `sp` on `store`: n and nnz.
fn step_bindings(store: &GraphStore, sp: &SamplerPlan) -> Bindings {
    let g = match sp.graph {
        SampleGraph::Train => store.train(),
        SampleGraph::Full => store.full(),
    };
    let n = g.n_nodes();
    let nodes = if sp.kind.whole_graph() {
        n
    } else {
        super::trainer::expected_nodes(&sp.kind, n)
    };
    let degree = g.n_entries() as f64 / n.max(1) as f64;
    Bindings {
        nodes,
        entries: (nodes as f64 * degree).round() as usize,
    }
}

/// The estimate for training `lowered` with `optimizer` over the phases' samplers
/// (`phases` empty: inference, parameters only).
pub fn estimate(
    lowered: &Lowered,
    optimizer: Option<&Optimizer>,
    store: &GraphStore,
    phases: &[SamplerPlan],
) -> Result<Estimate, crate::ir::IrError> {
    let params: u128 = lowered.params.iter().map(param_bytes).sum();
    let copies = match optimizer {
        Some(Optimizer::Adam(_)) => 2,
        Some(Optimizer::Sgd(_)) => 1,
        None => 0,
    };
    let (mut step, mut step_bindings_) = (0u128, None);
    for sp in phases {
        let b = step_bindings(store, sp);
        let peak = crate::planner::schedule(&lowered.graph, &b)?.peak as u128;
        if peak > step || step_bindings_.is_none() {
            (step, step_bindings_) = (peak, Some(b));
        }
    }
    Ok(Estimate {
        params,
        optimizer: params * copies,
        optimizer_copies: copies,
        step,
        step_bindings: step_bindings_,
    })
}

/// The `[dims]` names a parameter's shape was written with (`W1.0` is `W1` of a repeated
/// layer).
fn dim_names<'p>(plan: &'p Plan, param: &str) -> Vec<&'p str> {
    let base = param.split('.').next().unwrap_or(param);
    plan.layers
        .iter()
        .chain(std::iter::once(&plan.output))
        .flat_map(|l| &l.params)
        .filter(|p| p.name == base)
        .flat_map(|p| p.dim_names.iter().flatten().map(String::as_str))
        .collect()
}

/// Compares `est` with `limit` bytes (`source` says where that number comes from); the
/// error names the plan's dim behind the largest parameter, at its value, and the largest
/// parameters with their shapes.
pub fn check(
    plan: &Plan,
    lowered: &Lowered,
    est: &Estimate,
    limit: u64,
    source: &str,
) -> Result<(), PlanError> {
    if est.total() <= u128::from(limit) {
        return Ok(());
    }
    let mut big: Vec<&ParamDecl> = lowered.params.iter().collect();
    big.sort_by_key(|d| std::cmp::Reverse(param_bytes(d)));
    let mut list = String::new();
    for (i, d) in big.iter().take(3).enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(list, "{sep}{}: {} × {} f32", d.name, d.rows, d.cols);
    }
    if big.len() > 3 {
        let _ = write!(list, ", … {} more", big.len() - 3);
    }
    // The dim behind the largest parameter, if it was written with one, when the
    // parameters are what does not fit (alone, or as the larger part with their state).
    let params_part = est.params * (1 + est.optimizer_copies);
    let dim = big
        .first()
        .and_then(|d| {
            let names = dim_names(plan, &d.name);
            // The larger side when both are dims.
            names
                .into_iter()
                .max_by_key(|n| plan.dims.get(*n).copied().unwrap_or(0))
        })
        .filter(|_| est.params > u128::from(limit) || params_part > est.step);
    let lead = match dim {
        Some(d) => format!("dims.{d} = {}: ", plan.dims[d]),
        None => String::new(),
    };
    let machine = format!(
        "this machine has {} ({source}); pass --no-memory-check (MemoryLimit::Off) to try anyway",
        human(u128::from(limit))
    );
    let what = if est.params > u128::from(limit) {
        format!(
            "{lead}the parameters alone need {} ({list}), {machine}",
            human(est.params)
        )
    } else {
        let opt = match est.optimizer_copies {
            0 => String::new(),
            2 => format!(" + Adam's state {}", human(est.optimizer)),
            _ => format!(" + the optimiser's state {}", human(est.optimizer)),
        };
        let step = match est.step_bindings {
            Some(b) => format!(
                " + one step's values {} (n = {} sampled nodes, nnz = {})",
                human(est.step),
                b.nodes,
                b.entries
            ),
            None => String::new(),
        };
        format!(
            "{lead}training needs {}: parameters {} ({list}){opt}{step}; {machine}",
            human(est.total()),
            human(est.params),
        )
    };
    Err(plan.limit_error(dim, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes(" 64G "), Some(64 << 30));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes("1T"), Some(1 << 40));
        assert_eq!(parse_bytes("2kB"), Some(2048));
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("99999999999T"), None);
        assert_eq!(human(17), "17 B");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }
}
