//! The machine this process runs on: its memory, as the memory checks of training and
//! of embedding see it (issue 15), and byte counts written for people.
//!
//! The machine's memory is `MemTotal` from `/proc/meminfo`, or the limit of this process's
//! cgroup (or an ancestor's) when lower: v2's `memory.max`, v1's `memory.limit_in_bytes`;
//! where neither can be read there is no number (and no check). [`MemoryLimit`] overrides
//! it: a fixed number of bytes (tests, or a machine with swap) or `Off`
//! (`--no-memory-check`). The environment variable `SAINTFLOW_MEMORY_LIMIT` replaces the
//! detected number for [`MemoryLimit::Detect`]: bytes with an optional binary suffix
//! (`64G`, `512M`), or `off`.
//!
//! A leaf: it reads `/proc` and `/sys` and imports nothing from the crate.

/// What a memory check compares its estimate with.
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
                        // Not eprintln!: a full stderr must not panic (issue 55, item 4).
                        use std::io::Write;
                        let _ = writeln!(std::io::stderr(), "warning: {ENV}={v:?} is not a byte count (like 64G) or `off`; using the machine's memory");
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

/// What a run may plan to fill of a memory limit: three quarters, the rest left to the
/// process's own memory (a step's buffers, the rows in flight). The partitioner's choice
/// of method and the sampled CSR kept resident (`GraphStore::advise_sampling`) use it.
pub fn working_share(limit: u64) -> u64 {
    limit / 4 * 3
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

/// Anonymous resident bytes of process `pid` (`RssAnon`; 0 when it cannot be read): what
/// it holds in memory beyond the pages of files it maps.
pub fn anon_resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// The most worker threads a run may ask for (the CLI's `--threads`, the Python package's
/// `threads=`): enough to oversubscribe any machine saintflow runs on; more only stalls it
/// (issue 55, item 5: `--threads 100000` spawned ~590 threads and hung).
pub const MAX_THREADS: usize = 256;

/// The machine's cores as the OS reports them (`available_parallelism`: the affinity mask
/// and cgroup quota included), at least 1.
pub fn cores() -> std::num::NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(std::num::NonZeroUsize::MIN)
}

/// A thread count as every API of the crate takes it (issue 54, item 2): `Some(n)` is
/// exactly n workers, `None` one per core. There is no 0: a caller that has one (a count
/// from outside) refuses it, as the CLI's `--threads` and the Python `threads=` do.
pub fn threads_or_cores(threads: Option<std::num::NonZeroUsize>) -> std::num::NonZeroUsize {
    threads.unwrap_or_else(cores)
}

/// The bytes this process may still allocate, and where the figure comes from: the least of
/// the machine's memory as `train`'s memory check sees it ([`MemoryLimit::Detect`]) and what
/// the address-space limit (`ulimit -v`, `RLIMIT_AS`) leaves beside what the process has
/// mapped already; None when neither is known. Sizes read from inputs or given as
/// arguments are checked against it before anything is allocated (issue 55 item 3: the
/// importers and the Python package aborted on `memory allocation of N bytes failed`).
pub fn allocatable() -> Option<(u64, String)> {
    let rlimit = address_space_left().map(|b| {
        (
            b,
            "the address-space limit (ulimit -v) less what is mapped".to_string(),
        )
    });
    match (MemoryLimit::Detect.resolve(), rlimit) {
        (Some(m), Some(a)) => Some(if a.0 < m.0 { a } else { m }),
        (m, a) => m.or(a),
    }
}

/// `RLIMIT_AS`'s soft limit less the process's mapped size (`VmSize` in /proc/self/status;
/// 0 where unreadable), or None when unlimited.
fn address_space_left() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } == 0;
    if !ok || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    // rlim_t is u64 here, narrower or signed on other platforms.
    #[allow(clippy::unnecessary_cast)]
    let soft = r.rlim_cur as u64;
    let mapped_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmSize:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    Some(soft.saturating_sub(mapped_kib.saturating_mul(1024)))
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

/// Returns the allocator's free pages to the system: glibc's `malloc_trim(0)`, which
/// releases every whole free page of every arena (an evaluation's block buffers, freed by
/// threads whose arenas keep them, held hundreds of MB of a `memcap 2G` run's memory that
/// the mapped z then lacked); nothing on other C libraries.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
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

    #[test]
    fn cgroup_limit_files_cover_v2_and_v1_and_every_ancestor() {
        let p = |s: &str| std::path::PathBuf::from(s);
        assert_eq!(
            cgroup_limit_files("0::/a/b\n"),
            [
                p("/sys/fs/cgroup/a/b/memory.max"),
                p("/sys/fs/cgroup/a/memory.max"),
                p("/sys/fs/cgroup/memory.max")
            ]
        );
        // v1 (what `memcap` uses on such a machine): only the memory controller's line.
        let v1 = "9:name=systemd:/\n4:memory:/x/memcap.1\n3:cpu,cpuacct:/y\n0::/\n";
        assert_eq!(
            cgroup_limit_files(v1),
            [
                p("/sys/fs/cgroup/memory/x/memcap.1/memory.limit_in_bytes"),
                p("/sys/fs/cgroup/memory/x/memory.limit_in_bytes"),
                p("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                p("/sys/fs/cgroup/memory.max")
            ]
        );
        assert!(cgroup_limit_files("").is_empty());
    }

    #[test]
    fn issue_15_machine_memory_is_memtotal_or_a_lower_cgroup_limit() {
        let meminfo = "MemTotal:       16384000 kB\nMemFree: 1 kB\n";
        assert_eq!(memory_from(Some(meminfo), &[]).unwrap().0, 16384000 * 1024);
        let (b, src) = memory_from(Some(meminfo), &["max\n", "4294967296\n"]).unwrap();
        assert_eq!((b, src.contains("cgroup")), (4 << 30, true));
        // A cgroup limit above MemTotal does not raise it.
        assert_eq!(
            memory_from(Some(meminfo), &["99999999999999"]).unwrap().0,
            16384000 * 1024
        );
        assert_eq!(memory_from(None, &["max"]), None);
        assert_eq!(memory_from(Some("garbage"), &[]), None);
    }
}
