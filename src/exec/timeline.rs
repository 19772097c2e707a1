//! The executor's per-worker timeline of one step (`Executor::with_timeline`): every task
//! and part as a [`Span`] (worker, node, op, start, end), and [`Timeline::summary`], which
//! tabulates each worker's busy and idle time and the *serial* sections — time when only
//! one worker computes while another has nothing to do — by the op that ran alone. That
//! is where a step stops scaling with workers (issue 33: a serial zero-fill before a
//! split node's parts could start showed up exactly there).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::ir::NodeId;

/// What a span of a worker's time was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpanKind {
    /// A node's whole forward (one task).
    Task,
    /// A split node's preparation: the split itself and the output's allocation.
    Prepare,
    /// Part k of a split node.
    Part(usize),
    /// A split node's completion after its parts ([`Partitioned::finish`](crate::op::Partitioned::finish)).
    Finish,
}

/// One task or part on one worker.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// The worker (0..p), or `usize::MAX` off the pool.
    pub worker: usize,
    /// The node.
    pub node: NodeId,
    /// Its op's name.
    pub op: String,
    /// What the span was.
    pub kind: SpanKind,
    /// From the step's start.
    pub start: Duration,
    /// From the step's start.
    pub end: Duration,
}

/// The spans of one step on `workers` workers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Every span, in no particular order.
    pub spans: Vec<Span>,
    /// The pool's workers.
    pub workers: usize,
}

impl Timeline {
    /// The step's length: the last span's end.
    pub fn length(&self) -> Duration {
        self.spans.iter().map(|s| s.end).max().unwrap_or_default()
    }

    /// Busy time per worker (spans on one worker never overlap).
    pub fn busy(&self) -> Vec<Duration> {
        let mut busy = vec![Duration::ZERO; self.workers];
        for s in &self.spans {
            if let Some(b) = busy.get_mut(s.worker) {
                *b += s.end.saturating_sub(s.start);
            }
        }
        busy
    }

    /// Time during which exactly `k` workers were busy, for k = 0..=p (a sweep over the
    /// spans' ends).
    pub fn concurrency(&self) -> Vec<Duration> {
        let mut events: Vec<(Duration, i32)> = Vec::with_capacity(2 * self.spans.len());
        for s in self.spans.iter().filter(|s| s.worker < self.workers) {
            events.push((s.start, 1));
            events.push((s.end, -1));
        }
        events.sort();
        let mut at = vec![Duration::ZERO; self.workers + 1];
        let (mut busy, mut last) = (0i32, Duration::ZERO);
        for (t, d) in events {
            let k = busy.clamp(0, self.workers as i32) as usize;
            at[k] += t.saturating_sub(last);
            busy += d;
            last = t;
        }
        at
    }

    /// Serial time by op: the time each op's spans ran while every other worker was idle
    /// (with p ≥ 2), largest first.
    pub fn serial_by_op(&self) -> Vec<(String, Duration)> {
        let mut by: BTreeMap<String, Duration> = BTreeMap::new();
        if self.workers < 2 {
            return Vec::new();
        }
        let spans: Vec<&Span> = self
            .spans
            .iter()
            .filter(|s| s.worker < self.workers)
            .collect();
        for s in &spans {
            // The parts of s's interval covered by no span of another worker.
            let mut others: Vec<(Duration, Duration)> = spans
                .iter()
                .filter(|o| o.worker != s.worker && o.end > s.start && o.start < s.end)
                .map(|o| (o.start.max(s.start), o.end.min(s.end)))
                .collect();
            others.sort();
            let (mut covered, mut reach) = (Duration::ZERO, s.start);
            for (a, b) in others {
                let a = a.max(reach);
                if b > a {
                    covered += b - a;
                    reach = b;
                }
            }
            let alone = s.end.saturating_sub(s.start).saturating_sub(covered);
            let label = match s.kind {
                SpanKind::Prepare => format!("{} (prepare)", s.op),
                SpanKind::Finish => format!("{} (finish)", s.op),
                _ => s.op.clone(),
            };
            *by.entry(label).or_default() += alone;
        }
        let mut v: Vec<(String, Duration)> = by.into_iter().filter(|(_, d)| !d.is_zero()).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The table: the step's length, each worker's busy time, time by how many workers
    /// were busy, and the ops that ran alone (the first `top`).
    pub fn summary(&self, top: usize) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let len = self.length();
        let mut out = String::new();
        let _ = writeln!(out, "step {:.1} ms on {} workers", ms(len), self.workers);
        for (w, b) in self.busy().iter().enumerate() {
            let pct = if len.is_zero() {
                0.0
            } else {
                100.0 * ms(*b) / ms(len)
            };
            let _ = writeln!(out, "  worker {w}: busy {:.1} ms ({pct:.0} %)", ms(*b));
        }
        for (k, d) in self.concurrency().iter().enumerate() {
            let _ = writeln!(out, "  {k} busy: {:.1} ms", ms(*d));
        }
        let serial = self.serial_by_op();
        if !serial.is_empty() {
            let _ = writeln!(out, "  alone (one worker busy, the others idle), by op:");
            for (op, d) in serial.iter().take(top) {
                let _ = writeln!(out, "    {op:<28} {:.2} ms", ms(*d));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(worker: usize, op: &str, a: u64, b: u64) -> Span {
        Span {
            worker,
            node: NodeId::new(0),
            op: op.into(),
            kind: SpanKind::Task,
            start: Duration::from_millis(a),
            end: Duration::from_millis(b),
        }
    }

    /// Worker 0: gemm 0–10, relu 10–14; worker 1: spmm 2–8. Alone: gemm 0–2 and 8–10
    /// (4 ms), relu 10–14 (4 ms); both busy 2–8 (6 ms); nobody idle-both.
    #[test]
    fn serial_sections_and_concurrency_of_a_small_timeline() {
        let t = Timeline {
            spans: vec![
                span(0, "gemm", 0, 10),
                span(0, "relu", 10, 14),
                span(1, "spmm", 2, 8),
            ],
            workers: 2,
        };
        assert_eq!(t.length(), Duration::from_millis(14));
        assert_eq!(
            t.busy(),
            vec![Duration::from_millis(14), Duration::from_millis(6)]
        );
        assert_eq!(
            t.concurrency(),
            vec![
                Duration::ZERO,
                Duration::from_millis(8),
                Duration::from_millis(6)
            ]
        );
        assert_eq!(
            t.serial_by_op(),
            vec![
                ("gemm".to_string(), Duration::from_millis(4)),
                ("relu".to_string(), Duration::from_millis(4)),
            ]
        );
        let s = t.summary(5);
        assert!(s.contains("worker 1: busy 6.0 ms (43 %)"), "{s}");
        assert!(s.contains("2 busy: 6.0 ms"), "{s}");
    }
}
