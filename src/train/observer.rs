//! What a training run tells its user, as an observer of the loop: the JSON-lines log
//! (file and/or stdout) and the progress ticker, on one clock that goes on across resumed
//! sessions. The loop reports steps, epochs and the test; this turns them into records,
//! the ticker's total and ETA (which respect `--steps` and `--epochs`), and the line
//! printed after each epoch.

use std::path::Path;
use std::time::Instant;

use super::log::{LogSink, Record};
use super::Result;
use crate::metrics::Metrics;
use crate::plan::Eval;
use crate::progress::{Progress, Ticker};

/// The log and the ticker of one run.
pub(super) struct Observer {
    log: LogSink,
    ticker: Ticker,
    start: Instant,
    /// Seconds of earlier sessions.
    before: f64,
    /// The step this session began at.
    first_step: u64,
    /// Epochs of the whole run.
    total: usize,
}

/// An epoch's training loss: the mean of its steps' GraphSAINT-normalised losses, and of
/// their plain means over the subgraphs' training nodes (None without a built-in loss).
#[derive(Clone, Copy, Debug)]
pub(super) struct EpochLoss {
    pub(super) normalised: f64,
    pub(super) mean: Option<f64>,
}

/// A validation pass after an epoch: its metrics, whether they were the best so far, and
/// its milliseconds.
pub(super) struct Validation {
    pub(super) val: Metrics,
    pub(super) best: bool,
    pub(super) ms: f64,
}

impl Observer {
    /// Opens the log, the file `path` (None: none) and with `json` the records on stdout
    /// too (both None and false where the run does not write its outputs): continued at
    /// the checkpoint's position when `resumed` has one, else new, starting with the `run`
    /// record; and `progress`'s ticker. `step` and `elapsed` are where the run stands;
    /// `total` its epochs.
    pub(super) fn open(
        (path, json): (Option<&Path>, bool),
        progress: &Progress,
        resumed: Option<Option<u64>>,
        run: Record,
        (step, elapsed): (u64, f64),
        total: usize,
    ) -> Result<Observer> {
        let log = match resumed {
            Some(Some(pos)) => LogSink::resume(path, pos, json)?,
            _ => {
                let mut log = LogSink::create(path, json)?;
                log.push(run)?;
                log
            }
        };
        Ok(Observer {
            log,
            start: Instant::now(),
            before: elapsed,
            ticker: progress.ticker(0, "train", "steps"),
            first_step: step,
            total,
        })
    }

    /// Seconds into the run, earlier sessions included.
    pub(super) fn now(&self) -> f64 {
        self.before + self.start.elapsed().as_secs_f64()
    }

    /// Epoch `epoch` begins at `step`, of `steps_per_epoch` steps; the run stops after
    /// epoch `stop` or step `max_steps`: the ticker's total (the steps left, capped by
    /// `--steps`) and message.
    pub(super) fn epoch_begins(
        &self,
        epoch: usize,
        step: u64,
        steps_per_epoch: u64,
        stop: usize,
        max_steps: u64,
    ) {
        let epochs_left = (self.total.min(stop) - epoch + 1) as u64;
        self.ticker.set_total(
            (step - self.first_step + epochs_left * steps_per_epoch)
                .min(max_steps.saturating_sub(self.first_step)),
        );
        self.ticker
            .set_message(format!("epoch {epoch}/{}", self.total));
    }

    /// A step's record.
    pub(super) fn step(&mut self, record: Record) -> Result<()> {
        self.log.push(record)?;
        self.ticker.inc(1);
        Ok(())
    }

    /// Epoch `epoch` ended, `steps` steps into the run, with training loss `loss` after
    /// `train_ms` milliseconds of training, and its validation if it had one: the record
    /// (of its last step), flushed, and the epoch's line (above the bar on a terminal, so
    /// the history stays; on stderr off one). Returns the log's position.
    pub(super) fn epoch_ends(
        &mut self,
        epoch: usize,
        steps: u64,
        (loss, train_ms): (EpochLoss, f64),
        val: Option<Validation>,
    ) -> Result<u64> {
        let time = self.now();
        self.log.push(Record::Epoch {
            epoch,
            step: steps - 1,
            time,
            train_loss: loss.normalised,
            train_mean_loss: loss.mean,
            val: val.as_ref().map(|v| v.val),
            best: val.as_ref().is_some_and(|v| v.best),
            train_ms: Some(train_ms),
            eval_ms: val.as_ref().map(|v| v.ms),
        })?;
        let pos = self.log.sync()?;
        self.ticker.println(format_args!(
            "epoch {epoch}/{}  step {steps}  loss {:.4} (GraphSAINT-normalised{}){}  train {train_ms:.1} ms{}  time {time:.1}s",
            self.total,
            loss.normalised,
            loss.mean
                .map_or(String::new(), |m| format!("; mean per training node {m:.4}")),
            val.as_ref().map_or(String::new(), |v| format!("  val {}", v.val.brief())),
            val.as_ref().map_or(String::new(), |v| format!("  eval {:.1} ms", v.ms)),
        ));
        Ok(pos)
    }

    /// `[eval] patience` (of `eval`) stopped the run after `epoch`, keeping `kept`'s
    /// parameters (None: the last): the record, flushed, and a line. Returns the log's
    /// position.
    pub(super) fn stopped(
        &mut self,
        epoch: usize,
        kept: Option<usize>,
        eval: &Eval,
    ) -> Result<u64> {
        let patience = eval.patience.unwrap_or(0);
        let watch: Vec<String> = eval.watch.iter().map(|w| w.name()).collect();
        self.log.push(Record::Stop {
            epoch,
            time: self.now(),
            patience,
            watch: watch.clone(),
            kept,
        })?;
        let pos = self.log.sync()?;
        self.ticker.println(format_args!(
            "stopped early after epoch {epoch}: no progress of val {} in {patience} evaluations; {}",
            match watch.is_empty() {
                true => "the selection figure".to_string(),
                false => watch.join(" or "),
            },
            kept.map_or("keeping the last parameters".into(), |e| format!("keeping epoch {e}'s parameters"))
        ));
        Ok(pos)
    }

    /// Training is over (the evaluation that follows reports on its own).
    pub(super) fn training_ends(&self) {
        self.ticker.finish();
    }

    /// The test of the best parameters (those of `epoch`, validated at `val`); None where
    /// the role has no labelled node.
    pub(super) fn test(
        &mut self,
        epoch: usize,
        val: Option<Metrics>,
        test: Option<Metrics>,
    ) -> Result<()> {
        let time = self.now();
        self.log.push(Record::Test {
            epoch,
            time,
            val,
            test,
        })?;
        self.log.sync()?;
        Ok(())
    }

    /// Every record of the run.
    pub(super) fn records(self) -> Vec<Record> {
        self.log.into_records()
    }
}
