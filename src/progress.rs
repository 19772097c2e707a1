//! Progress bars for long operations (indicatif), silenced by `--quiet` and when stderr is
//! not a terminal; then [`Progress::line`] writes plain lines to stderr instead (training
//! prints one per epoch), so a log of a piped run still shows progress. Lines never go to
//! stdout: `--json` output there stays pure JSON.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
            eprintln!("{text}");
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

    /// A bar of `len` units labelled `msg`.
    pub fn bar(&self, len: u64, msg: &'static str, unit: &'static str) -> ProgressBar {
        if self.quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let template = format!(
            "{{msg:>10}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit} ({{per_sec}}, eta {{eta}})"
        );
        bar.set_style(
            ProgressStyle::with_template(&template)
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_message(msg);
        bar
    }
}
