//! The training log's records: one JSON object per line, `kind` first (docs/LOG.md is the
//! reference). [`Record`] is the schema, once: the trainer writes it
//! (`train::log::LogSink`), and the trainer on resume and the plotter (`plot::read_log`)
//! read it back through [`Record::from_line`].
//!
//! Reading is serde's, with messages that say where: a line that is not JSON, not an
//! object, without a string `kind` or with an unknown one is named as such; otherwise
//! serde's error is given with the record's kind and the path of the field at fault
//! (`epoch record: field "val": missing field "f1_micro"`). serde does not name the field
//! of a type error, so [`Record::from_line`] finds it by asking serde again: the field
//! whose removal changes the error is the one at fault (a derived visitor stops at the
//! first bad value in map order, and reports missing fields only after the last entry),
//! and a missing field is inside the object into which adding it changes the error. That
//! costs a few more parses of a bad line only.
//!
//! A loss is written `null` when it is not finite (serde_json writes NaN so) and read back
//! as NaN. Fields the schema does not know are ignored.
//!
//! A leaf above [`crate::metrics`] (whose [`Metrics`] records carry).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::metrics::Metrics;

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
    /// `gad`, `loss_variance` or `mean` (older logs: `weighted`, today's `loss_variance`).
    pub consensus: String,
    /// β of the consensus (Eq. 14's constant for `gad`).
    pub beta: f64,
    /// Bytes of every rank's replicas (features and labels), summed.
    pub replica_bytes: u64,
    /// `gad`: each rank's ζ (Eq. 14), by rank (empty for the other consensus kinds and in
    /// older logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zeta: Vec<f64>,
}

/// One line of the log.
// An epoch record with its metrics is the largest; a run has one per step and epoch, a few
// hundred bytes each beside a step's milliseconds, so boxing them would buy nothing.
#[allow(clippy::large_enum_variant)]
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
        /// The step's loss (NaN, written `null`, when it was not finite).
        #[serde(deserialize_with = "nan_if_null")]
        loss: f64,
        /// Subgraph nodes.
        nodes: usize,
        /// Subgraph adjacency entries.
        entries: usize,
        /// A link plan's scored pairs of the step: its P positives and their P·K
        /// negatives (absent for node classification, and in older logs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pairs: Option<usize>,
        /// Where the time went.
        ms: StepMs,
        /// Bytes each rank sent into the step's gradient allreduce (absent for one
        /// process).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allreduce_bytes: Option<u64>,
        /// The plain mean of the loss over the subgraph's training nodes (each weighted
        /// alike, where `loss` weights node v by GraphSAINT's 1/λ_v); this process's
        /// subgraph in a job. Absent for a plan whose loss is not a built-in one, and in
        /// older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mean_loss: Option<f64>,
    },
    /// The end of an epoch.
    Epoch {
        /// Epoch, from 1.
        epoch: usize,
        /// Global index of the epoch's last step.
        step: u64,
        /// Wall seconds since the start of training (evaluation included).
        time: f64,
        /// Mean step loss of the epoch (NaN, written `null`, when it was not finite).
        #[serde(deserialize_with = "nan_if_null")]
        train_loss: f64,
        /// Mean of the steps' `mean_loss` (absent where they have none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        train_mean_loss: Option<f64>,
        /// Validation metrics (absent in epochs without evaluation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        val: Option<Metrics>,
        /// Whether this epoch's parameters are the best on validation so far.
        best: bool,
        /// Milliseconds the epoch's training took: its steps, from the first one's start
        /// to the last one's update and record (absent in older logs). Beside `eval_ms`,
        /// what an epoch's evaluation costs against its training (issue 53 item 7).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        train_ms: Option<f64>,
        /// Milliseconds the evaluation took (absent without evaluation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        eval_ms: Option<f64>,
    },
    /// Early stopping ended the run (`[eval] patience`), before the `test` record.
    Stop {
        /// The epoch after which it stopped.
        epoch: usize,
        /// Wall seconds since the start of training.
        time: f64,
        /// The evaluations in a row without progress that stopped it.
        patience: usize,
        /// The figures watched (`[eval] watch`; empty: the selection figure, F1-micro or a
        /// link plan's `[task] metric`).
        watch: Vec<String>,
        /// The epoch whose parameters the run keeps (`null` with `[eval] keep = "last"`:
        /// the last epoch's).
        kept: Option<usize>,
    },
    /// The last line: the best-validation parameters on the test set.
    Test {
        /// The epoch of the parameters evaluated.
        epoch: usize,
        /// Wall seconds since the start of training.
        time: f64,
        /// Their validation metrics; `null` when the graph has no labelled validation
        /// node (the parameters are then the last epoch's).
        val: Option<Metrics>,
        /// Their test metrics; `null` when the graph has no labelled test node (never a 0
        /// measured over nothing, issue 55 item 1).
        test: Option<Metrics>,
    },
}

impl Record {
    /// The record's `kind`: `run`, `step`, `epoch`, `stop` or `test`.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Run { .. } => "run",
            Record::Step { .. } => "step",
            Record::Epoch { .. } => "epoch",
            Record::Stop { .. } => "stop",
            Record::Test { .. } => "test",
        }
    }

    /// Wall seconds since the start of training (a `run` record has none).
    pub fn time(&self) -> Option<f64> {
        match self {
            Record::Run { .. } => None,
            Record::Step { time, .. }
            | Record::Epoch { time, .. }
            | Record::Stop { time, .. }
            | Record::Test { time, .. } => Some(*time),
        }
    }

    /// One line of a log, read through serde; the error says what is wrong and names the
    /// record's kind and the field (see the module's documentation). The caller adds the
    /// file and line.
    pub fn from_line(line: &str) -> Result<Record, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
        let Value::Object(obj) = &v else {
            return Err(format!("expected a JSON object, got {}", kind_of(&v)));
        };
        let kind = match obj.get("kind") {
            Some(Value::String(k)) => k.as_str(),
            Some(k) => {
                return Err(format!(
                    "field \"kind\" is {}, expected a string",
                    kind_of(k)
                ))
            }
            None => return Err("missing field \"kind\"".into()),
        };
        if !KINDS.contains(&kind) {
            return Err(format!(
                "unknown record kind {kind:?}, expected run, step, epoch, stop or test"
            ));
        }
        Record::deserialize(&v)
            .map_err(|e| format!("{kind} record: {}", explain(obj, &e.to_string())))
    }
}

/// The record kinds, as `kind` spells them.
const KINDS: [&str; 5] = ["run", "step", "epoch", "stop", "test"];

/// serde's error for record `obj` after `edit` of its object at `path`, or None.
fn error_of(
    obj: &Map<String, Value>,
    path: &[&str],
    edit: impl FnOnce(&mut Map<String, Value>),
) -> Option<String> {
    let mut root = obj.clone();
    let mut at = &mut root;
    for k in path {
        at = at
            .get_mut(*k)
            .and_then(Value::as_object_mut)
            .expect("a path to an object");
    }
    edit(at);
    Record::deserialize(&Value::Object(root))
        .err()
        .map(|e| e.to_string())
}

/// The object at `path` (keys of nested objects) in `obj`.
fn object_at<'a>(obj: &'a Map<String, Value>, path: &[&str]) -> &'a Map<String, Value> {
    path.iter()
        .fold(obj, |o, k| o[*k].as_object().expect("a path to an object"))
}

/// serde's message `err` about record `obj`, with the path of the field at fault.
fn explain(obj: &Map<String, Value>, err: &str) -> String {
    let mut path: Vec<&str> = Vec::new();
    let described = if let Some(name) = err
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        // Into which object does adding the field change the error?
        'down: loop {
            for (k, v) in object_at(obj, &path) {
                if k == "kind" || !v.is_object() {
                    continue;
                }
                let mut sub = path.clone();
                sub.push(k.as_str());
                let changed = error_of(obj, &sub, |m| {
                    m.insert(name.to_string(), Value::Null);
                });
                if changed.as_deref() != Some(err) {
                    path = sub;
                    continue 'down;
                }
            }
            break format!("missing field {name:?}");
        }
    } else {
        // The field whose removal changes the error, then within it while it is an object.
        let mut culprit: Option<&Value> = None;
        'down: loop {
            for (k, v) in object_at(obj, &path) {
                if k == "kind" {
                    continue;
                }
                let changed = error_of(obj, &path, |m| {
                    m.remove(k);
                });
                if changed.as_deref() != Some(err) {
                    culprit = Some(v);
                    path.push(k.as_str());
                    if v.is_object() {
                        continue 'down;
                    }
                    break 'down;
                }
            }
            break;
        }
        match (culprit, path.pop()) {
            (Some(v), Some(name)) => {
                format!(
                    "field {name:?} is {}, expected {}",
                    kind_of(v),
                    expected(err)
                )
            }
            _ => err.to_string(),
        }
    };
    let mut out = String::new();
    for k in path {
        out.push_str(&format!("field {k:?}: "));
    }
    out + &described
}

/// What serde's message says was expected, in the log's words.
fn expected(err: &str) -> String {
    let want = err.rsplit_once(", expected ").map_or("", |(_, w)| w);
    match want {
        "f64" | "f32" => "a number".into(),
        "u64" | "usize" | "u32" | "u16" | "u8" => "an integer ≥ 0".into(),
        "i64" | "isize" | "i32" => "an integer".into(),
        "" => err.to_string(),
        w => w.to_string(),
    }
}

/// A short description of a JSON value for messages: its type and, when short, its text.
fn kind_of(v: &Value) -> String {
    let ty = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let text = v.to_string();
    if matches!(v, Value::Null) {
        ty.to_string()
    } else if text.len() <= 40 {
        format!("{ty} ({text})")
    } else {
        ty.to_string()
    }
}

/// An f64 that may be written `null` (serde_json writes NaN and infinities so): NaN.
fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(loss: f64) -> Record {
        Record::Step {
            epoch: 1,
            step: 0,
            time: 0.5,
            loss,
            nodes: 10,
            entries: 40,
            pairs: None,
            ms: StepMs {
                wall: 3.0,
                ..StepMs::default()
            },
            allreduce_bytes: None,
            mean_loss: Some(0.75),
        }
    }

    #[test]
    fn records_read_back_as_written_a_diverged_loss_as_nan() {
        let r = step(1.25);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"kind":"step","#), "{line}");
        assert_eq!(Record::from_line(&line), Ok(r));
        let line = serde_json::to_string(&step(f64::NAN)).unwrap();
        assert!(line.contains(r#""loss":null"#), "{line}");
        match Record::from_line(&line).unwrap() {
            Record::Step { loss, .. } => assert!(loss.is_nan()),
            other => panic!("{other:?}"),
        }
        // Fields the schema does not know are ignored.
        let extra = line.replacen('{', r#"{"note":"x","#, 1);
        assert_eq!(Record::from_line(&extra).unwrap().kind(), "step");
    }

    #[test]
    fn errors_name_the_kind_and_the_field_path() {
        let good = serde_json::to_value(step(1.0)).unwrap();
        let with = |path: &[&str], v: Option<Value>| {
            let mut r = good.clone();
            let mut at = &mut r;
            for k in &path[..path.len() - 1] {
                at = &mut at[*k];
            }
            let m = at.as_object_mut().unwrap();
            match v {
                Some(v) => m.insert(path[path.len() - 1].to_string(), v),
                None => m.remove(path[path.len() - 1]),
            };
            Record::from_line(&r.to_string()).unwrap_err()
        };
        assert_eq!(
            with(&["ms", "wall"], Some(Value::from("slow"))),
            r#"step record: field "ms": field "wall" is a string ("slow"), expected a number"#
        );
        assert_eq!(
            with(&["ms", "wall"], None),
            r#"step record: field "ms": missing field "wall""#
        );
        assert_eq!(
            with(&["nodes"], Some(Value::from(-3))),
            r#"step record: field "nodes" is a number (-3), expected an integer ≥ 0"#
        );
        assert_eq!(
            with(&["entries"], None),
            r#"step record: missing field "entries""#
        );
        assert_eq!(
            with(&["ms"], Some(Value::from(7))),
            r#"step record: field "ms" is a number (7), expected struct StepMs"#
        );
        assert_eq!(
            with(&["kind"], Some(Value::from("stpe"))),
            r#"unknown record kind "stpe", expected run, step, epoch, stop or test"#
        );
        assert_eq!(
            with(&["kind"], Some(Value::from(1))),
            r#"field "kind" is a number (1), expected a string"#
        );
        assert_eq!(with(&["kind"], None), r#"missing field "kind""#);
        assert!(Record::from_line("[1]")
            .unwrap_err()
            .contains("got an array"));
        assert!(Record::from_line("{")
            .unwrap_err()
            .starts_with("not a JSON object"));
    }
}
