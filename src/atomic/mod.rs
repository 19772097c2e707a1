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
//!
//! Here the writers, the temporaries and the locks; what a command may write
//! ([`OutputGuard`], the recognisers in [`written`], stdout and stderr) in guard.rs, the
//! tests in tests.rs.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

mod guard;

pub use guard::{
    stderr_line, stdout_write, written, OutputError, OutputGuard, Recognise, HEAD_BYTES,
    STORE_MARKER,
};

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

#[cfg(test)]
mod tests;
