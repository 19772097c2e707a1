//! The training log: one JSON object per line, `kind` first; the schema, [`Record`], is
//! [`crate::log`]'s (docs/LOG.md), shared with the plotter. [`LogSink`] appends records to
//! a file and/or stdout and keeps them, so plotting a run is one call on
//! [`LogSink::records`].
//!
//! Resuming: a checkpoint stores the log file's length when it was written; on resume the
//! file is cut back to that length (dropping records of steps that are run again) and the
//! records before it are read back.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

pub use crate::log::{Record, RunDist, StepMs};

use super::TrainError;

/// Where records go: a file (`--log`), stdout (`--json`), and memory.
#[derive(Debug)]
pub struct LogSink {
    file: Option<(PathBuf, File)>,
    stdout: bool,
    bytes: u64,
    records: Vec<Record>,
}

impl LogSink {
    /// A sink writing to `path` (created or truncated) and/or stdout.
    pub fn create(path: Option<&Path>, stdout: bool) -> Result<LogSink, TrainError> {
        let file = match path {
            Some(p) => Some((
                p.to_path_buf(),
                File::create(p).map_err(|e| TrainError::io(p, "create", e))?,
            )),
            None => None,
        };
        Ok(LogSink {
            file,
            stdout,
            bytes: 0,
            records: Vec::new(),
        })
    }

    /// A sink continuing the log at `path` from byte `at` (a checkpoint's log position):
    /// the file is cut there and the records before it are read back.
    pub fn resume(path: Option<&Path>, at: u64, stdout: bool) -> Result<LogSink, TrainError> {
        let Some(p) = path else {
            return LogSink::create(None, stdout);
        };
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(p)
            .map_err(|e| TrainError::io(p, "open", e))?;
        let len = f
            .metadata()
            .map_err(|e| TrainError::io(p, "stat", e))?
            .len();
        if len < at {
            return Err(TrainError::Log {
                path: p.to_path_buf(),
                what: format!(
                    "shorter than the checkpoint's log position, expected ≥ {at} bytes, got {len}"
                ),
            });
        }
        f.set_len(at)
            .map_err(|e| TrainError::io(p, "truncate", e))?;
        let mut records = Vec::new();
        let reader = BufReader::new(&f);
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(|e| TrainError::io(p, "read", e))?;
            let r = Record::from_line(&line).map_err(|e| TrainError::Log {
                path: p.to_path_buf(),
                what: format!("line {}: {e}", i + 1),
            })?;
            records.push(r);
        }
        let f = OpenOptions::new()
            .append(true)
            .open(p)
            .map_err(|e| TrainError::io(p, "open", e))?;
        Ok(LogSink {
            file: Some((p.to_path_buf(), f)),
            stdout,
            bytes: at,
            records,
        })
    }

    /// Appends a record.
    pub fn push(&mut self, r: Record) -> Result<(), TrainError> {
        let line = serde_json::to_string(&r).expect("records serialise") + "\n";
        if let Some((p, f)) = &mut self.file {
            f.write_all(line.as_bytes())
                .map_err(|e| TrainError::io(p, "write", e))?;
        }
        self.bytes += line.len() as u64;
        if self.stdout {
            // Issue 55, item 4: `--json > FILE` on a full disk ends the run with an error,
            // not a panic (a closed pipe is SIGPIPE's, before this).
            let mut out = std::io::stdout().lock();
            out.write_all(line.as_bytes())
                .map_err(|e| TrainError::io(Path::new("stdout"), "write (the --json log)", e))?;
        }
        self.records.push(r);
        Ok(())
    }

    /// Flushes the file to disk and returns its length (the position a checkpoint stores).
    pub fn sync(&mut self) -> Result<u64, TrainError> {
        if let Some((p, f)) = &mut self.file {
            f.sync_data().map_err(|e| TrainError::io(p, "fsync", e))?;
        }
        if self.stdout {
            std::io::stdout()
                .flush()
                .map_err(|e| TrainError::io(Path::new("stdout"), "write (the --json log)", e))?;
        }
        Ok(self.bytes)
    }

    /// Every record of the run (those read back on resume included).
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Takes the records out.
    pub fn into_records(self) -> Vec<Record> {
        self.records
    }
}
