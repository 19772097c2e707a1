//! The training log: one JSON object per line, `kind` first (schema in docs/LOG.md,
//! shared with the plotter). [`LogSink`] appends records to a file and/or stdout and keeps
//! them, so plotting a run is one call on [`LogSink::records`].
//!
//! Resuming: a checkpoint stores the log file's length when it was written; on resume the
//! file is cut back to that length (dropping records of steps that are run again) and the
//! records before it are read back.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metrics::Metrics;
use super::TrainError;

/// Milliseconds of one step, by stage (op times summed over the step's tasks) plus the
/// optimiser update and the step's wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepMs {
    /// Source ops: sample, features, targets, adjacency.
    pub sampling: f64,
    /// SpMM, SDDMM, attention.
    pub aggregation: f64,
    /// GEMM.
    pub transformation: f64,
    /// Every other op.
    pub other: f64,
    /// The optimiser's update of every parameter.
    pub optimizer: f64,
    /// The whole step, start to end.
    pub wall: f64,
    /// The gradient allreduce of a distributed run (absent for one process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allreduce: Option<f64>,
}

/// A distributed run, in its `run` record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDist {
    /// Ranks.
    pub ranks: usize,
    /// The transport (`mpi`, `threads`).
    pub transport: String,
    /// `weighted` or `mean`.
    pub consensus: String,
    /// β of the weighted consensus.
    pub beta: f64,
    /// Bytes of every rank's replicas (features and labels), summed.
    pub replica_bytes: u64,
}

/// One line of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// The first line: what is trained, on what.
    Run {
        /// The plan's name.
        plan: String,
        /// xxh3-64 of the effective plan text, hex.
        plan_hash: String,
        /// The plan's TOML after `--set` overrides.
        effective_plan: String,
        /// The store's path.
        graph: String,
        /// `--seed`.
        seed: u64,
        /// Worker threads.
        threads: usize,
        /// `interpreter` or `executor`.
        runner: String,
        /// The ranks of a distributed run (absent for one process).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dist: Option<RunDist>,
    },
    /// One training step.
    Step {
        /// Epoch, from 1.
        epoch: usize,
        /// Global step index, from 0.
        step: u64,
        /// Wall seconds since the start of training.
        time: f64,
        /// The step's loss.
        loss: f64,
        /// Subgraph nodes.
        nodes: usize,
        /// Subgraph adjacency entries.
        entries: usize,
        /// Where the time went.
        ms: StepMs,
        /// Bytes each rank sent into the step's gradient allreduce (absent for one
        /// process).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allreduce_bytes: Option<u64>,
    },
    /// The end of an epoch.
    Epoch {
        /// Epoch, from 1.
        epoch: usize,
        /// Global index of the epoch's last step.
        step: u64,
        /// Wall seconds since the start of training (evaluation included).
        time: f64,
        /// Mean step loss of the epoch.
        train_loss: f64,
        /// Validation metrics (absent in epochs without evaluation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        val: Option<Metrics>,
        /// Whether this epoch's parameters are the best on validation so far.
        best: bool,
        /// Milliseconds the evaluation took (absent without evaluation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        eval_ms: Option<f64>,
    },
    /// The last line: the best-validation parameters on the test set.
    Test {
        /// The epoch of the parameters evaluated.
        epoch: usize,
        /// Wall seconds since the start of training.
        time: f64,
        /// Their validation metrics.
        val: Metrics,
        /// Their test metrics.
        test: Metrics,
    },
}

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
            let r: Record = serde_json::from_str(&line).map_err(|e| TrainError::Log {
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
            print!("{line}");
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
            let _ = std::io::stdout().flush();
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
