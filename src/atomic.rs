//! Atomic file output, the one way saintflow publishes a file: write a temporary file
//! beside the destination (`.NAME.tmp-PID`), fsync it, rename it over the destination,
//! fsync the directory. A crash or an error at any point leaves either the old file or the
//! new one, never a half-written file under the final name; on error the temporary file is
//! removed. Errors are plain `io::Error`s: each layer names the path in its own error.

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
    /// Creates the temporary file for `path` (truncating a stale one of this process).
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        let (dir, tmp) = temp_beside(path);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
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

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no/such/dir/out");
        assert!(write_atomic(&p, b"x").is_err());
    }
}
