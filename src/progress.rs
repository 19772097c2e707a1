//! Progress bars for long operations (indicatif), silenced by `--quiet` and when stderr is
//! not a terminal; then [`Progress::line`] writes plain lines to stderr instead (training
//! prints one per epoch), so a log of a piped run still shows progress. Lines never go to
//! stdout: `--json` output there stays pure JSON.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Off a terminal, a [`Ticker`] prints a line at least this often while work goes on
/// (issue 27: a piped run is never silent for longer); `SAINTFLOW_PROGRESS_SECS` sets it.
pub const LINE_EVERY: Duration = Duration::from_secs(10);

/// [`LINE_EVERY`], or `SAINTFLOW_PROGRESS_SECS` (seconds, ≥ 0) when set to a number.
pub fn line_every() -> Duration {
    std::env::var("SAINTFLOW_PROGRESS_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(LINE_EVERY, Duration::from_secs_f64)
}

/// Bytes this process has read from storage so far (`read_bytes` of `/proc/self/io`; 0
/// where the kernel does not say): what progress lines report as read.
pub fn bytes_read() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("read_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Makes progress bars, or hidden ones when quiet.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    quiet: bool,
}

impl Progress {
    /// Bars drawn on stderr (when it is a terminal).
    pub fn new(quiet: bool) -> Self {
        Progress { quiet }
    }

    /// No bars at all (library use, tests).
    pub fn hidden() -> Self {
        Progress { quiet: true }
    }

    /// Whether [`line`](Self::line) prints: not quiet, and stderr is not a terminal (where the
    /// bars are drawn instead).
    pub fn lines(&self) -> bool {
        !self.quiet && !std::io::stderr().is_terminal()
    }

    /// Writes `text` and a newline to stderr when [`lines`](Self::lines) says so: the
    /// progress of a run whose bars cannot be drawn (output piped to a file or a pipe).
    pub fn line(&self, text: impl std::fmt::Display) {
        if self.lines() {
            stderr_line(&format!("{text}"));
        }
    }

    /// A spinner with elapsed time for work of unknown length; finish it with
    /// `finish_and_clear`.
    pub fn spinner(&self, msg: &'static str) -> ProgressBar {
        if self.quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("static template"),
        );
        bar.set_message(msg);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    }

    /// A [`Ticker`] over `total` units of `unit`, labelled `label`.
    pub fn ticker(&self, total: u64, label: impl Into<String>, unit: &'static str) -> Ticker {
        let lines = self.lines();
        let bar = if self.quiet || lines {
            ProgressBar::hidden()
        } else {
            styled_bar(
                total,
                &format!("{{prefix}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit} ({{per_sec}}, eta {{eta}}) {{msg}}"),
            )
        };
        let label = label.into();
        bar.set_prefix(label.clone());
        let now = Instant::now();
        Ticker {
            bar,
            lines,
            state: Mutex::new(TickState {
                label,
                unit,
                total,
                done: 0,
                message: String::new(),
                start: now,
                last_line: now,
                read0: if lines { bytes_read() } else { 0 },
            }),
            every: line_every(),
            clock: None,
        }
    }
}

/// A bar of `len` on stderr drawn by `template` (indicatif's syntax).
fn styled_bar(len: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

/// The progress of one long pass (training steps, an evaluation's row blocks): a bar on a
/// terminal, whose history lines ([`Ticker::println`]) stay above it; off a terminal, a
/// plain line on stderr at most and at least every [`line_every`] while work goes on
/// (`train: 120/400 steps (30 %), 12.3 steps/s, eta 23 s, read 1.2 GB  epoch 3/10`); hidden
/// when quiet. Safe to share between threads.
pub struct Ticker {
    bar: ProgressBar,
    lines: bool,
    state: Mutex<TickState>,
    every: Duration,
    /// A fake clock for tests (seconds since the ticker's start).
    clock: Option<Box<dyn Fn() -> Duration + Send + Sync>>,
}

struct TickState {
    label: String,
    unit: &'static str,
    total: u64,
    done: u64,
    message: String,
    start: Instant,
    last_line: Instant,
    read0: u64,
}

impl Ticker {
    /// Off-terminal lines, every `every`, timed by `clock` (time since the start), into
    /// nothing but [`Ticker::line_now`]'s return: for tests of the line schedule.
    pub fn simulated(
        total: u64,
        label: &str,
        unit: &'static str,
        every: Duration,
        clock: impl Fn() -> Duration + Send + Sync + 'static,
    ) -> Ticker {
        let t = Progress::hidden().ticker(total, label, unit);
        Ticker {
            lines: true,
            every,
            clock: Some(Box::new(clock)),
            ..t
        }
    }

    fn elapsed(&self, st: &TickState) -> Duration {
        match &self.clock {
            Some(c) => c(),
            None => st.start.elapsed(),
        }
    }

    /// `n` more units done; prints a line when one is due. Returns the line printed (or,
    /// for a simulated ticker, the one that would be).
    pub fn inc(&self, n: u64) -> Option<String> {
        self.bar.inc(n);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.done += n;
        self.maybe_line(&mut st)
    }

    /// `pos` units done in all (a phase that counts its position rather than steps).
    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.done = pos;
        self.maybe_line(&mut st);
    }

    /// The total (an estimate that firms up, e.g. steps once every phase is known).
    pub fn set_total(&self, total: u64) {
        self.bar.set_length(total);
        self.state.lock().unwrap_or_else(|e| e.into_inner()).total = total;
    }

    /// Text after the counts (the epoch, the running loss, the layer).
    pub fn set_message(&self, msg: impl Into<String>) {
        let msg = msg.into();
        self.bar.set_message(msg.clone());
        self.state.lock().unwrap_or_else(|e| e.into_inner()).message = msg;
    }

    /// A history line: above the bar on a terminal (it stays), on stderr off one.
    pub fn println(&self, line: impl std::fmt::Display) {
        if self.lines {
            if self.clock.is_none() {
                stderr_line(&line.to_string());
            }
        } else if !self.bar.is_hidden() {
            self.bar.println(line.to_string());
        }
    }

    /// Runs `f` with the bar (a terminal's) hidden, so what `f` prints to stdout is not
    /// drawn over.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar (a terminal's) when the pass ends.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    fn maybe_line(&self, st: &mut TickState) -> Option<String> {
        if !self.lines {
            return None;
        }
        let now = self.elapsed(st);
        let since = match &self.clock {
            Some(_) => now.saturating_sub(st.last_line.duration_since(st.start)),
            None => st.last_line.elapsed(),
        };
        if since < self.every || st.done == 0 {
            return None;
        }
        st.last_line = st.start + now;
        let line = self.line_text(st, now);
        if self.clock.is_none() {
            stderr_line(&line.to_string());
        }
        Some(line)
    }

    /// The line as it reads now.
    pub fn line_now(&self) -> String {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.line_text(&st, self.elapsed(&st))
    }

    /// Seconds left at the rate so far (0 before anything is done or once all is): the
    /// ETA the lines show.
    pub fn remaining_seconds(&self) -> f64 {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Self::left(&st, self.elapsed(&st)).unwrap_or(0.0)
    }

    fn left(st: &TickState, now: Duration) -> Option<f64> {
        let rate = st.done as f64 / now.as_secs_f64().max(1e-9);
        (rate > 0.0 && st.total > st.done).then(|| (st.total - st.done) as f64 / rate)
    }

    fn line_text(&self, st: &TickState, now: Duration) -> String {
        let secs = now.as_secs_f64().max(1e-9);
        let rate = st.done as f64 / secs;
        let pct = if st.total > 0 {
            format!(" ({:.0} %)", 100.0 * st.done as f64 / st.total as f64)
        } else {
            String::new()
        };
        let eta =
            Self::left(st, now).map_or(String::new(), |s| format!(", eta {}", duration_text(s)));
        let read = if self.clock.is_none() {
            let r = bytes_read().saturating_sub(st.read0);
            if r > 0 {
                format!(", read {}", bytes_text(r))
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        let msg = if st.message.is_empty() {
            String::new()
        } else {
            format!("  {}", st.message)
        };
        format!(
            "{}: {}/{} {}{pct}, {} {}/s{eta}{read}{msg}",
            st.label,
            st.done,
            st.total,
            st.unit,
            rate_text(rate),
            st.unit
        )
    }
}

fn rate_text(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.3}")
    }
}

/// `812 KB`, `1.2 GB` (decimal units, as `iostat` counts).
fn bytes_text(b: u64) -> String {
    let b = b as f64;
    match b {
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b => format!("{:.0} KB", b / 1e3),
    }
}

/// `83 s`, `4 min 10 s`, `2 h 05 min`, `87 days 04 h`, `31 years`: a length of time as a
/// person reads it.
pub fn duration_text(s: f64) -> String {
    const DAY: u64 = 86_400;
    const YEAR: u64 = 365 * DAY;
    if !s.is_finite() || s >= 1e15 {
        return "more than 30 million years".into();
    }
    let s = s.max(0.0).round() as u64;
    match s {
        0..=99 => format!("{s} s"),
        100..=5999 => format!("{} min {:02} s", s / 60, s % 60),
        6000..=172_799 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        _ if s < 2 * YEAR => format!("{} days {:02} h", s / DAY, s % DAY / 3600),
        _ => format!("{} years", s / YEAR),
    }
}

/// Writes `text` and a newline to stderr, ignoring a failure: progress that cannot be shown
/// (stderr on a full disk, `2>/dev/full`) must not end or panic the work it reports on
/// (issue 55, item 4).
fn stderr_line(text: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
    let _ = err.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// 100 s of work in uneven ticks: a line at least every 10 s of it and never more
    /// often, each with the counts, the rate and an ETA from the total.
    #[test]
    fn off_a_terminal_a_line_every_ten_seconds_of_work() {
        let now = Arc::new(AtomicU64::new(0));
        let clock = {
            let now = now.clone();
            move || Duration::from_millis(now.load(Ordering::Relaxed))
        };
        let t = Ticker::simulated(400, "train", "steps", LINE_EVERY, clock);
        let mut at = Vec::new();
        let mut step = 0;
        while now.load(Ordering::Relaxed) < 100_000 {
            // 0.7 s or 2.9 s per unit, alternately.
            let dt = if step % 2 == 0 { 700 } else { 2900 };
            now.fetch_add(dt, Ordering::Relaxed);
            step += 1;
            if let Some(line) = t.inc(1) {
                at.push((now.load(Ordering::Relaxed), line));
            }
        }
        let times: Vec<u64> = at.iter().map(|a| a.0).collect();
        assert!(times[0] <= 10_000 + 2900, "{times:?}");
        for w in times.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                (10_000..10_000 + 2900).contains(&gap),
                "gap {gap} ms: {times:?}"
            );
        }
        let (ms, line) = &at[0];
        let done = line.split('/').next().unwrap().rsplit(' ').next().unwrap();
        let done: f64 = done.parse().unwrap();
        let rate = done / (*ms as f64 / 1e3);
        assert!(
            line.starts_with("train: ") && line.contains("/400 steps ("),
            "{line}"
        );
        let eta = duration_text((400.0 - done) / rate);
        assert!(
            line.contains(&format!("eta {eta}")),
            "{line} lacks eta {eta}"
        );
        t.set_message("epoch 3/10");
        assert!(t.line_now().ends_with("  epoch 3/10"));
    }

    #[test]
    fn durations_read_as_a_person_writes_them() {
        assert_eq!(duration_text(42.4), "42 s");
        assert_eq!(duration_text(250.0), "4 min 10 s");
        assert_eq!(duration_text(7500.0), "2 h 05 min");
        assert_eq!(duration_text(47.0 * 3600.0), "47 h 00 min");
        // Issue 28's 87-day run.
        assert_eq!(
            duration_text(87.0 * 86_400.0 + 4.5 * 3600.0),
            "87 days 04 h"
        );
        assert_eq!(duration_text(31.2 * 365.0 * 86_400.0), "31 years");
        assert_eq!(duration_text(f64::INFINITY), "more than 30 million years");
        assert_eq!(duration_text(-3.0), "0 s");
    }
}
