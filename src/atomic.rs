//! Atomic file output, the one way saintflow publishes a file: write a temporary file
//! beside the destination (`.NAME.tmp-PID`), fsync it, rename it over the destination,
//! fsync the directory. A crash or an error at any point leaves either the old file or the
//! new one, never a half-written file under the final name; on error the temporary file is
//! removed. Errors are plain `io::Error`s: each layer names the path in its own error.
//!
//! A killed writer cannot remove its temporary. Each writer holds an exclusive `flock` on
//! its temporary (the file, or the store writer's directory) for as long as it writes, and
//! the next writer of the same destination removes [`stale_temps`]: names of exactly the
//! form `.NAME.tmp-PID` (or `.NAME.tmp-PID.old`, a replaced store moved aside) whose
//! process no longer runs *and* whose lock nobody holds. The PID test alone could be
//! fooled by a reused PID or by a writer in another PID namespace sharing the directory;
//! the lock alone by a writer that has created its temporary but not yet locked it. Both
//! together remove only what a dead saintflow left.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The directory of `path` and a temporary name beside it (`.NAME.tmp-PID`), where an
/// atomic write prepares the file it then renames over `path`.
pub fn temp_beside(path: &Path) -> (PathBuf, PathBuf) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    (dir, tmp)
}

/// A temporary of a destination, left by a process that is gone (see the module's
/// documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleTemp {
    /// The temporary file or directory.
    pub path: PathBuf,
    /// The process that wrote it.
    pub pid: u32,
    /// A replaced store moved aside (`.old`) rather than a half-written output.
    pub moved_aside: bool,
}

/// The temporaries beside `path` (`.NAME.tmp-PID`, `.NAME.tmp-PID.old` for `path`'s NAME,
/// another process's PID) whose process is not running, whose lock is free and that `ours`
/// recognises (the writer's own test of what it writes there). Anything else — another
/// name, a PID that runs, a held lock, a symlink, content it does not write — is left
/// alone.
pub fn stale_temps(path: &Path, ours: &dyn Fn(&Path) -> bool) -> Vec<StaleTemp> {
    let (dir, _) = temp_beside(path);
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<StaleTemp> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let fname = e.file_name().into_string().ok()?;
            let rest = fname.strip_prefix(&prefix)?;
            let (digits, moved_aside) = match rest.strip_suffix(".old") {
                Some(d) => (d, true),
                None => (rest, false),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let pid: u32 = digits.parse().ok()?;
            let kind = e.path().symlink_metadata().ok()?.file_type();
            if !(kind.is_file() || kind.is_dir())
                || pid == std::process::id()
                || process_may_run(pid)
                || lock_held(&e.path())
                || !ours(&e.path())
            {
                return None;
            }
            Some(StaleTemp {
                path: e.path(),
                pid,
                moved_aside,
            })
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Whether process `pid` may be running: `kill(pid, 0)` succeeds or is refused for
/// permission. PIDs that are not positive `pid_t`s are assumed to run (never touched).
fn process_may_run(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if p <= 0 {
        return true;
    }
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    if unsafe { libc::kill(p, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Whether another open file holds the `flock` of `path` (a file or a directory); also
/// true when it cannot be opened or asked, so that doubt keeps the file.
fn lock_held(path: &Path) -> bool {
    match File::open(path) {
        Ok(f) => match f.try_lock() {
            Ok(()) => false,
            Err(std::fs::TryLockError::WouldBlock) => true,
            Err(std::fs::TryLockError::Error(_)) => true,
        },
        Err(_) => true,
    }
}

/// Takes the exclusive `flock` of `f` (a writer's temporary), which tells [`stale_temps`]
/// that its writer is alive; released when the last descriptor of `f` closes. A file
/// system without locks only loses that protection, so its error is ignored.
pub fn hold_lock(f: &File) {
    let _ = f.try_lock();
}

/// An exclusive claim on an output path for the life of a run (issue 28, item 10): the
/// `flock` of `.NAME.lock` beside it, which holds the claimant's PID. Dropped (the run
/// ends, or dies), the lock goes with the last descriptor; with
/// [`OutputLock::removed_on_drop`] (a run's checkpoint and log) the small file is removed
/// first, which [`claim_output`]'s check of the file it locked makes safe; a run that dies
/// leaves it, unlocked, for the next claimant.
#[derive(Debug)]
pub struct OutputLock {
    _file: File,
    /// The lock file, removed when the claim ends ([`OutputLock::removed_on_drop`]).
    remove: Option<PathBuf>,
}

impl OutputLock {
    /// The claim whose `.NAME.lock` file is removed when it ends (nothing of it stays
    /// beside the output). Safe against a claimant waiting on
    /// the removed file: [`claim_output`] keeps a lock only on the file the path names.
    pub fn removed_on_drop(mut self, path: &Path) -> OutputLock {
        self.remove = Some(claim_file(path));
        self
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Unlinked while still locked; the lock goes when the file is closed after this.
        if let Some(p) = self.remove.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The file whose `flock` claims `path`: `.NAME.lock` beside it.
pub fn claim_file(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.lock"))
}

/// Claims `path` for writing ([`OutputLock`]). `Ok(Err(pid))` when another open file holds
/// the claim: `pid` is what its holder wrote (None if unreadable). A file system without
/// locks only loses that protection: the claim then succeeds.
pub fn claim_output(path: &Path) -> io::Result<Result<OutputLock, Option<u32>>> {
    let lock = claim_file(path);
    loop {
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)?;
        match f.try_lock() {
            Ok(()) => {
                // A holder that removes its lock file on release ([`OutputLock::removed_on_drop`])
                // may have unlinked this one after we opened it: then the claim is on a file
                // nobody else will find, so start again on the one the path names now.
                use std::os::unix::fs::MetadataExt;
                let same = std::fs::metadata(&lock)
                    .ok()
                    .zip(f.metadata().ok())
                    .is_some_and(|(a, b)| a.ino() == b.ino() && a.dev() == b.dev());
                if !same {
                    continue;
                }
                use std::io::Write;
                f.set_len(0)?;
                f.write_all(std::process::id().to_string().as_bytes())?;
                return Ok(Ok(OutputLock {
                    _file: f,
                    remove: None,
                }));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                let pid = std::fs::read_to_string(&lock)
                    .ok()
                    .and_then(|t| t.trim().parse().ok());
                return Ok(Err(pid));
            }
            Err(std::fs::TryLockError::Error(_)) => {
                return Ok(Ok(OutputLock {
                    _file: f,
                    remove: None,
                }))
            }
        }
    }
}

/// Disk space that could not be reserved for a file: the error of [`reserve`], which each
/// layer's error carries whole.
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot reserve {bytes} bytes ({:.1} GiB) of disk space for {what}: {source}", path.display(), *bytes as f64 / (1u64 << 30) as f64)]
pub struct NoSpace {
    /// The file.
    pub path: PathBuf,
    /// Bytes asked for.
    pub bytes: u64,
    /// What the file is for.
    pub what: &'static str,
    /// The OS error.
    pub source: io::Error,
}

/// Reserves `bytes` of disk blocks for `file` (at `path`, which is `what`), so that a full
/// disk is an error before any work rather than half-way through it (or a SIGBUS in a
/// map).
pub fn reserve(file: &File, path: &Path, bytes: u64, what: &'static str) -> Result<(), NoSpace> {
    fs4::fs_std::FileExt::allocate(file, bytes).map_err(|source| NoSpace {
        path: path.to_path_buf(),
        bytes,
        what,
        source,
    })
}

/// An I/O error with the path and the operation it happened in, for each layer to turn
/// into its own error naming the path.
#[derive(Debug)]
pub struct IoAt {
    /// The path the operation was on.
    pub path: PathBuf,
    /// The operation (`"create directory"`, `"rename into place"`, ...).
    pub op: &'static str,
    /// The error.
    pub source: io::Error,
}

fn at(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> IoAt {
    let path = path.to_path_buf();
    move |source| IoAt { path, op, source }
}

/// A directory published whole or not at all (a store, a partition): written as the
/// temporary `.NAME.tmp-PID` beside the destination, `flock`ed while this lives (so a
/// later writer's [`remove_stale_temps`] leaves it alone), then [`AtomicDir::commit`]:
/// fsync, an existing destination moved aside as `.NAME.tmp-PID.old` (a kill here leaves
/// it for the next writer to put back), rename into place, fsync the parent, the old one
/// removed. Dropped uncommitted, the temporary is removed. Whether an existing destination
/// may be replaced is the caller's decision, taken before [`AtomicDir::create`].
#[derive(Debug)]
pub struct AtomicDir {
    dest: PathBuf,
    tmp: PathBuf,
    _lock: File,
    _claim: OutputLock,
    replace: bool,
    committed: bool,
}

impl AtomicDir {
    /// Creates and locks the temporary directory of `dest` (this process's earlier one,
    /// if any, is removed first); missing directories above `dest` are created. `dest` is
    /// claimed for this writer's life ([`claim_output`]: a second writer of it, in this
    /// process or another, is refused naming the holder's PID), and `replace` says whether
    /// [`commit`](Self::commit) may replace what is at `dest` then: without it, a `dest`
    /// that appeared while this writer wrote is an error, not overwritten (issue 28, item
    /// 10: "exists" checked at publication, not only at the start).
    pub fn create(dest: &Path, replace: bool) -> Result<AtomicDir, IoAt> {
        create_parent_dirs(dest).map_err(at(dest, "create parent directories"))?;
        let claim = match claim_output(dest).map_err(at(dest, "claim (its .lock file)"))? {
            Ok(claim) => claim.removed_on_drop(dest),
            Err(pid) => {
                return Err(IoAt {
                    path: dest.to_path_buf(),
                    op: "write",
                    source: io::Error::other(format!(
                        "another writer{} is writing it now",
                        pid.map_or(String::new(), |p| format!(" (PID {p})"))
                    )),
                })
            }
        };
        let (_, tmp) = temp_beside(dest);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(at(&tmp, "remove stale"))?;
        }
        std::fs::create_dir(&tmp).map_err(at(&tmp, "create directory"))?;
        let lock = File::open(&tmp).map_err(at(&tmp, "open directory"))?;
        hold_lock(&lock);
        Ok(AtomicDir {
            dest: dest.to_path_buf(),
            tmp,
            _lock: lock,
            _claim: claim,
            replace,
            committed: false,
        })
    }

    /// The temporary directory, where the content is written.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Publishes the directory at the destination (see the type's documentation).
    pub fn commit(mut self) -> Result<PathBuf, IoAt> {
        sync_dir(&self.tmp).map_err(at(&self.tmp, "fsync directory"))?;
        let mut old = None;
        if self.dest.symlink_metadata().is_ok() {
            if !self.replace {
                return Err(IoAt {
                    path: self.dest.clone(),
                    op: "publish",
                    source: io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "it appeared while this run wrote it (another program made it); not replaced without --force",
                    ),
                });
            }
            let mut trash = self.tmp.clone().into_os_string();
            trash.push(".old");
            let trash = PathBuf::from(trash);
            std::fs::rename(&self.dest, &trash).map_err(at(&self.dest, "move aside"))?;
            old = Some(trash);
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(at(&self.dest, "rename into place"))?;
        self.committed = true;
        if let Some(parent) = self.dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent).map_err(at(parent, "fsync directory"))?;
        }
        if let Some(trash) = old {
            let _ = if trash.is_dir() {
                std::fs::remove_dir_all(&trash)
            } else {
                std::fs::remove_file(&trash)
            };
        }
        Ok(self.dest.clone())
    }
}

impl Drop for AtomicDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Whether `path` is a directory, not a symlink, whose every entry has a UTF-8 name that
/// `known` accepts: the shape of a writer's own temporary, for the `ours` of
/// [`stale_temps`] (the store writer's and `partition`'s).
pub fn dir_holds_only(path: &Path, known: impl Fn(&str) -> bool) -> bool {
    path.symlink_metadata().is_ok_and(|m| m.is_dir())
        && std::fs::read_dir(path).is_ok_and(|entries| {
            entries.into_iter().all(|e| {
                e.ok()
                    .and_then(|e| e.file_name().into_string().ok())
                    .is_some_and(|n| known(&n))
            })
        })
}

/// Removes [`stale_temps`] of `path` and says on stderr what it removed. A `.old` store
/// moved aside by a replace that was killed before the new store took its place is put
/// back at `path` instead, when nothing is there. Returns what it removed or restored;
/// errors removing one are reported and skipped (the new write does not depend on it).
pub fn remove_stale_temps(path: &Path, ours: &dyn Fn(&Path) -> bool) -> Vec<StaleTemp> {
    let mut done = Vec::new();
    for t in stale_temps(path, ours) {
        let what = if t.moved_aside {
            "replaced store"
        } else {
            "temporary"
        };
        if t.moved_aside && !path.exists() {
            match std::fs::rename(&t.path, path) {
                Ok(()) => stderr_line(&format!(
                    "note: restored {} from {} (moved aside by process {}, which was killed before its replacement was in place)",
                    path.display(),
                    t.path.display(),
                    t.pid
                )),
                Err(e) => {
                    stderr_line(&format!("warning: cannot restore {} from {}: {e}", path.display(), t.path.display()));
                    continue;
                }
            }
            done.push(t);
            continue;
        }
        let r = if t.path.is_dir() {
            std::fs::remove_dir_all(&t.path)
        } else {
            std::fs::remove_file(&t.path)
        };
        match r {
            Ok(()) => {
                stderr_line(&format!(
                    "note: removed stale {what} {} (left by process {}, which is no longer running)",
                    t.path.display(),
                    t.pid
                ));
                done.push(t);
            }
            Err(e) => stderr_line(&format!(
                "warning: cannot remove stale {what} {}: {e}",
                t.path.display()
            )),
        }
    }
    done
}

/// Fsyncs a directory, which makes a rename inside it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates the missing directories above `path` (a file to be written), like
/// `mkdir -p "$(dirname path)"`, and fsyncs the directory holding the first one created,
/// so the new directories survive a crash with the files later written into them. Nothing
/// to do when the parent exists.
pub fn create_parent_dirs(path: &Path) -> io::Result<()> {
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    if parent.is_dir() {
        return Ok(());
    }
    // An ancestor that is a file: say so, rather than the OS's "File exists" / "Not a
    // directory" (issue 28's messages).
    if let Some(file) = parent
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && a.symlink_metadata().is_ok() && !a.is_dir())
    {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is a file, not a directory", file.display()),
        ));
    }
    // The deepest ancestor that exists: its entry for the first new directory is what a
    // crash could lose.
    let existing = parent
        .ancestors()
        .skip(1)
        .find(|a| a.as_os_str().is_empty() || a.is_dir())
        .map(|a| {
            if a.as_os_str().is_empty() {
                Path::new(".")
            } else {
                a
            }
        })
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(parent)?;
    for dir in parent
        .ancestors()
        .take_while(|a| *a != existing && !a.as_os_str().is_empty())
    {
        sync_dir(dir)?;
    }
    sync_dir(&existing)
}

/// Writes `bytes` to `path` atomically (see the module's documentation).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.file().write_all(bytes)?;
    f.commit()
}

/// A file being written atomically: written (sequentially or at positions) through
/// [`AtomicFile::file`], published by [`AtomicFile::commit`], removed if dropped before.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    dir: PathBuf,
    tmp: PathBuf,
    file: File,
    done: bool,
}

impl AtomicFile {
    /// Creates the temporary file for `path` (truncating a stale one of this process),
    /// locked while it lives, after removing the [`stale_temps`] of killed writers.
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        // Ours: a plain file (an atomic write's temporary is never anything else).
        remove_stale_temps(path, &|p| p.symlink_metadata().is_ok_and(|m| m.is_file()));
        let (dir, tmp) = temp_beside(path);
        // Readable too: a writer may map it (`MmapMut` needs a read-write descriptor).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        hold_lock(&file);
        Ok(AtomicFile {
            path: path.to_path_buf(),
            dir,
            tmp,
            file,
            done: false,
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file, to write into.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Writes `bytes` at byte offset `at`.
    pub fn write_at(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(at))?;
        self.file.write_all(bytes)
    }

    /// Fsyncs the file, renames it over the destination and fsyncs the directory.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.done = true;
        sync_dir(&self.dir)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The file that marks a graph store's directory (`store::format::HEADER_FILE`, named here
/// because this module is a leaf below the store layer; a test checks they agree).
pub const STORE_MARKER: &str = "header.sf";

/// Why a command's output was refused before anything was written (issue 55, item 2), or
/// a standard stream that could not be written (item 4). The messages name the flag and
/// the path: `<flag> <path>: <what>, expected <x>, got <y>`.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output names a file the same command reads.
    #[error("{flag} {}: is the file {input_flag} {} this command reads; an output never replaces an input, expected another path, got the input itself", path.display(), input.display())]
    IsInput {
        /// The output's flag (`-o`, `--log`, …).
        flag: String,
        /// The output's path as given.
        path: PathBuf,
        /// The input's flag or argument name.
        input_flag: String,
        /// The input's path as given.
        input: PathBuf,
    },
    /// Two outputs of one command name the same file.
    #[error("{flag} {}: is also {other_flag} {}; two outputs of one command never share a file, expected two different paths, got one", path.display(), other.display())]
    SameFile {
        /// The later output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// The earlier output's flag.
        other_flag: String,
        /// Its path.
        other: PathBuf,
    },
    /// The output lies inside a graph store's directory.
    #[error("{flag} {}: is inside the graph store {}; saintflow never writes into a store, expected a path outside it", path.display(), store.display())]
    InStore {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// The store's directory.
        store: PathBuf,
    },
    /// Something other than a regular file is at the output path.
    #[error("{flag} {}: exists and is {kind}, which saintflow never replaces or writes through (not even with --force); expected {expected}, got {kind}", path.display())]
    NotRegular {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// What is there (`a symbolic link`, `a character device`, …).
        kind: &'static str,
        /// What may be there (`a regular file or no file`).
        expected: &'static str,
    },
    /// A regular file is at the output path that saintflow does not write there (the
    /// user's notes, a file of another program): not replaced, even with `--force`.
    #[error("{flag} {}: exists and is not {what} (not a file saintflow writes there); not replaced, even with --force: expected {what} or no file, got other content", path.display())]
    Foreign {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// What saintflow writes there (`a .safetensors file`).
        what: &'static str,
    },
    /// A regular file is at the output path and replacing it was not asked for.
    #[error("{flag} {}: exists; {hint}", path.display())]
    Exists {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// What replaces (or continues) it: `pass --force to replace it`.
        hint: String,
    },
    /// An output's path could not be examined.
    #[error("{flag} {}: cannot examine it: {source}", path.display())]
    Stat {
        /// The output's flag.
        flag: String,
        /// Its path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// stdout or stderr could not be written (a full disk behind a redirection, `/dev/full`);
    /// a closed pipe is not this: SIGPIPE ends the command quietly, as it ends `cat`.
    #[error("{stream}: cannot write the command's output: {source}")]
    Stream {
        /// `stdout` or `stderr`.
        stream: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// The one check of a command's outputs before it writes any (issue 55, item 2). Every
/// command names its inputs and its outputs; [`OutputGuard::check`] then refuses an output
/// that
///
/// * is one of the inputs (the same `(device, inode)`, or for a path that does not exist
///   yet, the same canonical path),
/// * is the same file as another output of the command,
/// * lies inside a graph store's directory (one holding [`STORE_MARKER`]),
/// * exists and is not a regular file: a symbolic link, a directory, a device, a FIFO or a
///   socket. saintflow publishes a file by renaming a temporary over its path, which would
///   replace the link or the device node rather than write through it, so these are
///   refused, never written through (redirect stdout for a stream: `--json > FILE`),
/// * exists as a regular file, unless the command was asked to replace it (`--force`) or
///   to continue it (`train --resume` for its checkpoint and log).
///
/// A directory output (a partition, a store) is checked for the first three only; its
/// writer decides whether an existing directory may be replaced.
#[derive(Debug, Default)]
pub struct OutputGuard {
    inputs: Vec<(String, PathBuf)>,
    outputs: Vec<GuardedOutput>,
}

#[derive(Debug)]
struct GuardedOutput {
    flag: String,
    path: PathBuf,
    dir: bool,
    /// None: an existing regular file may be replaced; Some(hint): refused, saying how.
    refuse_existing: Option<String>,
    /// What saintflow writes at this output and how to recognise it from a file's first
    /// bytes: an existing file that is not one is never replaced.
    ours: Option<(&'static str, Recognise)>,
}

/// Recognisers of the files saintflow writes at each single-file output
/// ([`OutputGuard::ours`]): `--force` replaces one of these, never a file
/// of the user's (issue 55, item 2).
pub mod written {
    /// A `.safetensors` file: an 8-byte little-endian header length, then a JSON object.
    pub fn safetensors(head: &[u8]) -> bool {
        head.len() > 8 && head[8] == b'{'
    }

    /// A `.npy` file.
    pub fn npy(head: &[u8]) -> bool {
        head.starts_with(b"\x93NUMPY")
    }

    /// A PNG or SVG image (`plot`, `--plot`).
    pub fn image(head: &[u8]) -> bool {
        let text = head.trim_ascii_start();
        head.starts_with(b"\x89PNG\r\n\x1a\n")
            || text.starts_with(b"<svg")
            || text.starts_with(b"<?xml")
    }

    /// A training log: its first record is the run's.
    pub fn log(head: &[u8]) -> bool {
        head.starts_with(b"{\"kind\":\"run\"")
    }

    /// A checkpoint (any version: a newer saintflow's too).
    pub fn checkpoint(head: &[u8]) -> bool {
        head.starts_with(b"SFCKPT")
    }

    /// Normalisation counts (`sample --save-norm`).
    pub fn norm(head: &[u8]) -> bool {
        head.starts_with(b"SFNORM")
    }

    /// A METIS graph file: its first line is two or three whole numbers.
    pub fn metis(head: &[u8]) -> bool {
        let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
        let fields: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty())
            .collect();
        (2..=3).contains(&fields.len()) && fields.iter().all(|f| f.iter().all(u8::is_ascii_digit))
    }
}

/// Recognises a file saintflow writes from its first bytes (at most [`HEAD_BYTES`]).
pub type Recognise = fn(&[u8]) -> bool;

/// How many bytes of an existing output a [`Recognise`] sees.
pub const HEAD_BYTES: usize = 4096;

impl OutputGuard {
    /// A guard with no inputs and no outputs yet.
    pub fn new() -> OutputGuard {
        OutputGuard::default()
    }

    /// An input of the command, named by its flag or argument (`--plan`, `CHECKPOINT`). A
    /// directory input (a store) covers every file inside it.
    pub fn input(&mut self, flag: &str, path: &Path) -> &mut Self {
        self.inputs.push((flag.to_string(), path.to_path_buf()));
        self
    }

    /// A single-file output that an existing regular file may be replaced at only with
    /// `force` (the message says "pass --force to replace it").
    pub fn file(&mut self, flag: &str, path: &Path, force: bool) -> &mut Self {
        self.file_or(flag, path, force, "pass --force to replace it")
    }

    /// A single-file output that may replace an existing regular file when `replace` is
    /// true; otherwise one is refused with `hint` (how to replace or continue it).
    pub fn file_or(&mut self, flag: &str, path: &Path, replace: bool, hint: &str) -> &mut Self {
        self.outputs.push(GuardedOutput {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            dir: false,
            refuse_existing: (!replace).then(|| hint.to_string()),
            ours: None,
        });
        self
    }

    /// The last output added holds `what` (`"a .safetensors file"`), which `recognise`
    /// tells from a file's first bytes: an existing file it does not recognise is refused
    /// even when replacing was asked for (issue 55, item 2: `--force` replaces what
    /// saintflow wrote, never a file of the user's). An empty file is anyone's.
    pub fn ours(&mut self, what: &'static str, recognise: Recognise) -> &mut Self {
        if let Some(out) = self.outputs.last_mut() {
            out.ours = Some((what, recognise));
        }
        self
    }

    /// A directory output (its writer decides about an existing directory).
    pub fn dir(&mut self, flag: &str, path: &Path) -> &mut Self {
        self.outputs.push(GuardedOutput {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            dir: true,
            refuse_existing: None,
            ours: None,
        });
        self
    }

    /// Checks every output (see the type's documentation); the first refusal is the error.
    pub fn check(&self) -> Result<(), OutputError> {
        let inputs: Vec<(&str, &Path, Option<Ident>)> = self
            .inputs
            .iter()
            .map(|(f, p)| (f.as_str(), p.as_path(), Ident::of(p)))
            .collect();
        let mut seen: Vec<(&GuardedOutput, Option<Ident>)> = Vec::new();
        for out in &self.outputs {
            let id = Ident::of(&out.path);
            for (flag, path, input) in &inputs {
                if let (Some(a), Some(b)) = (&id, input) {
                    if a.same(b) {
                        return Err(OutputError::IsInput {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            input_flag: flag.to_string(),
                            input: path.to_path_buf(),
                        });
                    }
                }
            }
            for (other, other_id) in &seen {
                if let (Some(a), Some(b)) = (&id, other_id) {
                    if a.same(b) {
                        return Err(OutputError::SameFile {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            other_flag: other.flag.clone(),
                            other: other.path.clone(),
                        });
                    }
                }
            }
            if let Some(store) = id.as_ref().and_then(|i| enclosing_store(&i.canonical)) {
                return Err(OutputError::InStore {
                    flag: out.flag.clone(),
                    path: out.path.clone(),
                    store,
                });
            }
            match out.path.symlink_metadata() {
                Ok(m) => {
                    let t = m.file_type();
                    let kind = file_kind(&t);
                    if !(t.is_file() || (out.dir && t.is_dir())) {
                        return Err(OutputError::NotRegular {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            kind,
                            expected: if out.dir {
                                "a directory or no file"
                            } else {
                                "a regular file or no file"
                            },
                        });
                    }
                    if let (Some(hint), false) = (&out.refuse_existing, out.dir) {
                        return Err(OutputError::Exists {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            hint: hint.clone(),
                        });
                    }
                    if let Some((what, recognise)) = out.ours.filter(|_| m.len() > 0) {
                        let head = read_head(&out.path).map_err(|source| OutputError::Stat {
                            flag: out.flag.clone(),
                            path: out.path.clone(),
                            source,
                        })?;
                        if !recognise(&head) {
                            return Err(OutputError::Foreign {
                                flag: out.flag.clone(),
                                path: out.path.clone(),
                                what,
                            });
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(OutputError::Stat {
                        flag: out.flag.clone(),
                        path: out.path.clone(),
                        source,
                    })
                }
            }
            seen.push((out, id));
        }
        Ok(())
    }
}

/// The first [`HEAD_BYTES`] of a regular file (opened without following a link: the
/// caller has seen a regular file there).
fn read_head(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(HEAD_BYTES);
    File::open(path)?
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// What an existing path is, in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// A path's identity: its `(device, inode)` when it exists (followed through links), and
/// its canonical path (the parent's, joined with the name, when it does not exist).
#[derive(Debug)]
struct Ident {
    node: Option<(u64, u64)>,
    canonical: PathBuf,
}

impl Ident {
    fn of(path: &Path) -> Option<Ident> {
        use std::os::unix::fs::MetadataExt;
        let node = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let canonical = match std::fs::canonicalize(path) {
            Ok(c) => c,
            Err(_) => {
                // Not there (yet): the nearest existing ancestor's canonical path and the
                // rest as written, `.` and `..` resolved lexically.
                let abs = if path.is_absolute() {
                    path.to_path_buf()
                } else {
                    std::env::current_dir().ok()?.join(path)
                };
                let mut rest = Vec::new();
                let mut base = abs.as_path();
                let found = loop {
                    if let Ok(c) = std::fs::canonicalize(base) {
                        break c;
                    }
                    rest.push(base.file_name()?.to_os_string());
                    base = base.parent()?;
                };
                let mut c = found;
                for part in rest.iter().rev() {
                    match part.to_str() {
                        Some(".") => {}
                        Some("..") => {
                            c.pop();
                        }
                        _ => c.push(part),
                    }
                }
                c
            }
        };
        Some(Ident { node, canonical })
    }

    fn same(&self, other: &Ident) -> bool {
        match (self.node, other.node) {
            (Some(a), Some(b)) => a == b,
            _ => self.canonical == other.canonical,
        }
    }
}

/// The graph store whose directory holds `path` (canonical), if any.
fn enclosing_store(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|d| d.join(STORE_MARKER).is_file())
        .map(Path::to_path_buf)
}

/// Writes `text` to stdout, flushed: a failure (a full disk behind `> FILE`, `/dev/full`)
/// is an error for the command to end with (exit 1), never a panic (issue 55, item 4). A
/// closed pipe never gets here: SIGPIPE ends the process quietly first (the CLI restores
/// its default action).
pub fn stdout_write(text: &str) -> Result<(), OutputError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| OutputError::Stream {
            stream: "stdout",
            source,
        })
}

/// Writes `text` and a newline to stderr, ignoring a failure: a note or a warning that
/// cannot be shown must not end (or panic) the command whose result it comments on.
pub fn stderr_line(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
    let _ = err.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        std::fs::write(&p, b"old").unwrap();
        write_atomic(&p, b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a temporary file was left: {names:?}");
    }

    #[test]
    fn an_uncommitted_file_leaves_the_old_one_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.npy");
        std::fs::write(&p, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_at(4, b"tail").unwrap();
            f.write_at(0, b"head").unwrap();
            // Dropped: an error happened before commit.
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_at(4, b"tail").unwrap();
        f.write_at(0, b"head").unwrap();
        f.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"headtail");
    }

    #[test]
    fn create_parent_dirs_makes_the_missing_ones_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/c.bin");
        create_parent_dirs(&p).unwrap();
        assert!(dir.path().join("a/b").is_dir() && !p.exists());
        write_atomic(&p, b"x").unwrap();
        create_parent_dirs(&p).unwrap(); // exists: nothing to do
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
        // A file where a directory should be is an error.
        assert!(create_parent_dirs(&p.join("d.bin")).is_err());
        create_parent_dirs(Path::new("bare-name.bin")).unwrap();
    }

    /// Issue 55, item 2: the guard over every kind of path an output may name.
    #[test]
    fn issue55_the_output_guard_refuses_inputs_links_devices_stores_and_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let input = d.join("plan.toml");
        std::fs::write(&input, b"plan").unwrap();
        std::fs::hard_link(&input, d.join("hard")).unwrap();
        std::os::unix::fs::symlink(&input, d.join("soft")).unwrap();
        std::fs::create_dir_all(d.join("g.sf/sub")).unwrap();
        std::fs::write(d.join("g.sf").join(STORE_MARKER), b"h").unwrap();
        std::fs::write(d.join("mine"), b"user").unwrap();
        let check = |out: &Path, force: bool| {
            let mut g = OutputGuard::new();
            g.input("PLAN", &input).file("-o", out, force);
            g.check()
        };
        // The input under every name: itself, a hard link, a `..` path; a symbolic link
        // to it is refused as the input too.
        for p in [
            input.clone(),
            d.join("hard"),
            d.join("g.sf/../plan.toml"),
            d.join("soft"),
        ] {
            assert!(
                matches!(check(&p, true), Err(OutputError::IsInput { .. })),
                "{}",
                p.display()
            );
        }
        // Inside a store, at any depth, existing or not.
        for p in [
            "g.sf/header.sf",
            "g.sf/new.bin",
            "g.sf/sub/x",
            "g.sf/sub/../y",
        ] {
            assert!(
                matches!(check(&d.join(p), true), Err(OutputError::InStore { .. })),
                "{p}"
            );
        }
        // Not a regular file, even with force.
        for (p, kind) in [
            (d.join("g.sf"), "a directory"),
            (PathBuf::from("/dev/null"), "a character device"),
        ] {
            match check(&p, true) {
                Err(OutputError::NotRegular { kind: k, .. }) => assert_eq!(k, kind),
                other => panic!("{}: {other:?}", p.display()),
            }
        }
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            check(&dangling, true),
            Err(OutputError::NotRegular {
                kind: "a symbolic link",
                ..
            })
        ));
        // An existing regular file needs force; a new path does not.
        assert!(matches!(
            check(&d.join("mine"), false),
            Err(OutputError::Exists { .. })
        ));
        check(&d.join("mine"), true).unwrap();
        check(&d.join("new"), false).unwrap();
        check(&d.join("a/b/new"), false).unwrap();
        // Two outputs of one command: the same path however spelt, existing or not.
        for (a, b) in [
            ("x.svg", "x.svg"),
            ("x.svg", "sub/../x.svg"),
            ("mine", "hard2"),
        ] {
            if b == "hard2" {
                let _ = std::fs::hard_link(d.join("mine"), d.join("hard2"));
            }
            let mut g = OutputGuard::new();
            std::fs::create_dir_all(d.join("sub")).unwrap();
            g.file("--log", &d.join(a), true)
                .file("--plot", &d.join(b), true);
            assert!(
                matches!(g.check(), Err(OutputError::SameFile { .. })),
                "{a} {b}"
            );
        }
        // A directory output: an existing directory is its writer's decision.
        let mut g = OutputGuard::new();
        g.input("STORE", &d.join("g.sf")).dir("-o", &d.join("sub"));
        g.check().unwrap();
        let mut g = OutputGuard::new();
        g.input("STORE", &d.join("g.sf")).dir("-o", &d.join("g.sf"));
        assert!(matches!(g.check(), Err(OutputError::IsInput { .. })));
        // Nothing was written by any check.
        assert_eq!(std::fs::read(&input).unwrap(), b"plan");
        assert_eq!(std::fs::read(d.join("mine")).unwrap(), b"user");
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no/such/dir/out");
        assert!(write_atomic(&p, b"x").is_err());
    }
}
