//! Which first level partitions a store (`saintflow partition --method`, issue 56 item 5):
//! the multilevel partitioner ([`super::multilevel`], the better cut, memory ∝ N + nnz) or
//! the streaming one ([`super::streaming`], O(N) anonymous memory over the mapped CSR).
//! `auto` takes the multilevel one when its estimated memory fits in three quarters of the
//! memory the machine or its cgroup gives ([`crate::machine::MemoryLimit`]; the rest is for
//! the mapped pages the later passes read, which count in a cgroup's limit too), and
//! the streaming one otherwise; the choice and its reason are written in `partition.json`.

use serde::{Deserialize, Serialize};

use super::PartitionError;
use crate::machine::{human, MemoryLimit};

/// A first level, as `--method` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Multilevel k-way in RAM (the library's default: what `partition_store` always did).
    #[default]
    Multilevel,
    /// Fennel + streaming refinement over the mapped CSR.
    Streaming,
    /// Multilevel when it fits the memory, streaming otherwise (the command's default).
    Auto,
}

impl Method {
    /// Every name `--method` takes.
    pub const NAMES: [&'static str; 3] = ["multilevel", "streaming", "auto"];

    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Multilevel => "multilevel",
            Method::Streaming => "streaming",
            Method::Auto => "auto",
        }
    }

    /// `multilevel`, `streaming` or `auto`; anything else is an error naming the nearest.
    pub fn parse(s: &str) -> Result<Method, PartitionError> {
        s.parse().map_err(PartitionError::argument)
    }
}

impl std::str::FromStr for Method {
    type Err = String;

    /// [`Method::parse`] with the message alone (the CLI's `--method`).
    fn from_str(s: &str) -> Result<Method, String> {
        match s {
            "multilevel" => Ok(Method::Multilevel),
            "streaming" => Ok(Method::Streaming),
            "auto" => Ok(Method::Auto),
            other => Err(format!(
                "--method `{other}`: unknown, expected one of multilevel, streaming, auto{}",
                crate::suggest::did_you_mean(other, Method::NAMES.into_iter())
            )),
        }
    }
}

/// Peak bytes of the multilevel partitioner per (N, directed entries): its input graph
/// (`WGraph`: 8 B offsets + 4 B weight a node, 4 B id + 4 B weight an entry: 12N + 8E)
/// times [`MULTILEVEL_FACTOR`], for the coarse levels it holds until the end.
pub fn multilevel_bytes(n_nodes: u64, entries: u64) -> u64 {
    12u64
        .saturating_mul(n_nodes)
        .saturating_add(8u64.saturating_mul(entries))
        .saturating_mul(MULTILEVEL_FACTOR)
}

/// The multilevel partitioner's peak over its input graph's 12N + 8E bytes. Coarse levels
/// do not halve the entries of a power-law graph: a hub matches one neighbour a level, so
/// its star shrinks by a node a level, and the Kronecker stores coarsen through 25 levels
/// of nearly the same size. Measured (peak resident, `/usr/bin/time -v`, k = 4,
/// docs/bench/partition.md): 12.1× at Kronecker scale 20 (2.46 GiB), 13.6× at scale 21
/// (5.55 GiB), over 14.4× at scale 22 (killed at 12 GiB); 16 leaves room for the growth.
pub const MULTILEVEL_FACTOR: u64 = 16;

/// The first level a run takes and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// `Multilevel` or `Streaming`, never `Auto`.
    pub method: Method,
    /// Why, for `partition.json` and the summary.
    pub reason: String,
}

/// Resolves `method` for a graph of `n_nodes` and `entries` directed entries against
/// `limit` (see the module's documentation).
pub fn choose(method: Method, n_nodes: u64, entries: u64, limit: MemoryLimit) -> Choice {
    let need = multilevel_bytes(n_nodes, entries);
    let (bytes, source) = match method {
        Method::Multilevel | Method::Streaming => {
            return Choice {
                method,
                reason: "asked for (--method)".into(),
            }
        }
        Method::Auto => match limit.resolve() {
            None => {
                return Choice {
                    method: Method::Multilevel,
                    reason: format!(
                    "auto: no memory limit known; the multilevel partitioner's ~{} assumed to fit",
                    human(need.into())
                ),
                }
            }
            Some(limit) => limit,
        },
    };
    let fits = need <= crate::machine::working_share(bytes);
    let (method, verb) = if fits {
        (Method::Multilevel, "fits in")
    } else {
        (Method::Streaming, "exceeds")
    };
    Choice {
        method,
        reason: format!(
            "auto: the multilevel partitioner's ~{} {verb} 3/4 of {} ({source})",
            human(need.into()),
            human(bytes.into())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_typos_are_named() {
        for name in Method::NAMES {
            assert_eq!(Method::parse(name).unwrap().name(), name);
        }
        let e = Method::parse("streamin").unwrap_err().to_string();
        assert!(
            e.contains("`streamin`") && e.contains("did you mean `streaming`"),
            "{e}"
        );
    }

    #[test]
    fn auto_compares_the_estimate_with_the_limit() {
        let (n, e) = (1 << 20, 1 << 24);
        let need = multilevel_bytes(n, e);
        let big = choose(Method::Auto, n, e, MemoryLimit::Bytes(2 * need));
        assert_eq!(big.method, Method::Multilevel, "{}", big.reason);
        let small = choose(Method::Auto, n, e, MemoryLimit::Bytes(need));
        assert_eq!(small.method, Method::Streaming, "{}", small.reason);
        assert!(small.reason.contains("exceeds"), "{}", small.reason);
        let asked = choose(Method::Multilevel, n, e, MemoryLimit::Bytes(1));
        assert_eq!(asked.method, Method::Multilevel);
        assert_eq!(
            choose(Method::Auto, n, e, MemoryLimit::Off).method,
            Method::Multilevel
        );
    }
}
