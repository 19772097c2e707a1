//! Plan files: a GNN variant, its sampler, loss, optimiser and schedule as one TOML file
//! whose layers are written as expressions (`relu(concat(x @ W_self, A_mean @ x @ W_neigh))`).
//! [`Plan::parse`] types the file (`spanned` reads it, `overrides` edits it, `typing` and
//! `sampler` check it into a [`schema`] plan), [`Plan::lower`] turns it into an IR graph
//! with its backward ([`lower`]); expressions are parsed by [`expr`].
//!
//! Every error is a [`PlanError`] that names `FILE:LINE:COL`. Positions are byte offsets
//! into one "virtual text": the file, then each `--set`-style override on a line of its
//! own; a position past the file names the override instead of the file. Positions inside
//! an `out` string are the string's span (from toml) plus the offset inside the decoded
//! string, mapped back through the opening quote, the newline trimmed after a triple quote
//! and every escape sequence, so columns are exact even in basic strings with escapes.
//! Columns count characters (Unicode scalar values), starting at 1.

pub mod expr;
pub mod lower;
mod outpos;
mod overrides;
mod sampler;
pub mod schema;
mod spanned;
mod typing;

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

pub use lower::{LowerEnv, Lowered};
pub use schema::{
    DimRef, Eval, Layer, Optimizer, ParamSpec, Phase, Plan, SampleGraph, SamplerKind, SamplerPlan,
};

/// What kind of mistake a [`PlanError`] reports (for callers that branch on it; the
/// message says the same in words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanErrorKind {
    /// The file cannot be read.
    Io,
    /// TOML syntax.
    Syntax,
    /// A key, a value or a type the schema does not accept.
    Schema,
    /// An `out` expression that does not parse.
    Expr,
    /// A name that is not defined (parameter, binding, adjacency, dim, op).
    Name,
    /// An op refused its arguments: arity, kinds, attributes, shapes.
    Op,
    /// A plan that does not fit the graph it is lowered for (classes, labels).
    Graph,
    /// An override (`dims.hidden=256`) that does not apply.
    Override,
}

/// An error in a plan file: `FILE:LINE:COL: what`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    /// The plan file's name, or `override `…`` for an error in an override.
    pub file: String,
    /// 1-based line; 0 when the error has no position (the file cannot be read).
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// What kind of error.
    pub kind: PlanErrorKind,
    /// What is wrong, naming the offending name or expression.
    pub what: String,
    /// The source line the position is on (empty when none), for [`PlanError::render`].
    pub source_line: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.what)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.what)
        }
    }
}

impl std::error::Error for PlanError {}

impl PlanError {
    /// The message, then the source line with a caret under the column (what a command
    /// line tool prints).
    pub fn render(&self) -> String {
        if self.line == 0 || self.source_line.is_empty() {
            return self.to_string();
        }
        let gutter = self.line.to_string();
        let pad = " ".repeat(gutter.len());
        format!(
            "{self}\n{pad} |\n{gutter} | {}\n{pad} | {}^",
            self.source_line,
            " ".repeat(self.col.saturating_sub(1))
        )
    }
}

/// The text errors point into: the file, then one line per override.
#[derive(Debug)]
pub(crate) struct Source {
    file: String,
    text: String,
    file_len: usize,
    overrides: Vec<Range<usize>>,
}

impl Source {
    pub(crate) fn new(text: &str, file: &str, overrides: &[&str]) -> Source {
        let mut all = text.to_string();
        let mut ranges = Vec::new();
        for o in overrides {
            all.push('\n');
            let start = all.len();
            // An override is one line: a newline in it would break the line numbering.
            all.push_str(&o.replace('\n', " "));
            ranges.push(start..all.len());
        }
        Source {
            file: file.to_string(),
            text: all,
            file_len: text.len(),
            overrides: ranges,
        }
    }

    /// The whole virtual text.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The file's own text.
    pub(crate) fn file_text(&self) -> &str {
        &self.text[..self.file_len]
    }

    /// The byte range of override `k` in the virtual text.
    pub(crate) fn override_range(&self, k: usize) -> Range<usize> {
        self.overrides[k].clone()
    }

    /// An error at byte `offset` of the virtual text.
    pub(crate) fn error(
        &self,
        offset: usize,
        kind: PlanErrorKind,
        what: impl Into<String>,
    ) -> PlanError {
        let offset = offset.min(self.text.len());
        let (file, base, text) = if offset > self.file_len && !self.overrides.is_empty() {
            let r = self
                .overrides
                .iter()
                .rev()
                .find(|r| offset >= r.start)
                .unwrap_or(&self.overrides[0]);
            let o = &self.text[r.clone()];
            (format!("override `{o}`"), r.start, o)
        } else {
            (self.file.clone(), 0, self.file_text())
        };
        let rel = floor_char(text, offset.saturating_sub(base).min(text.len()));
        let line_start = text[..rel].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[rel..].find('\n').map_or(text.len(), |i| rel + i);
        PlanError {
            file,
            line: text[..rel].matches('\n').count() + 1,
            col: text[line_start..rel].chars().count() + 1,
            kind,
            what: what.into(),
            source_line: text[line_start..line_end]
                .trim_end_matches('\r')
                .to_string(),
        }
    }
}

/// The largest char boundary ≤ `i`.
fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl Plan {
    /// Parses and types a plan; `file` names it in error messages.
    pub fn parse(text: &str, file: &str) -> Result<Plan, PlanError> {
        Plan::parse_with_overrides(text, file, &[])
    }

    /// Reads and parses the plan file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Plan, PlanError> {
        Plan::load_with_overrides(path, &[])
    }

    /// Reads the plan file at `path` and parses it with `overrides` (as
    /// [`Plan::parse_with_overrides`]).
    pub fn load_with_overrides(
        path: impl AsRef<Path>,
        overrides: &[&str],
    ) -> Result<Plan, PlanError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| PlanError {
            file: path.display().to_string(),
            line: 0,
            col: 0,
            kind: PlanErrorKind::Io,
            what: format!("cannot read: {e}"),
            source_line: String::new(),
        })?;
        Plan::parse_with_overrides(&text, &path.display().to_string(), overrides)
    }

    /// Parses a plan after applying `overrides`, each `key.path=value` with a TOML value
    /// (`dims.hidden=256`, `sampler.kind="rw"`, `layer.0.dropout=0.2`; a bare word is taken
    /// as a string: `sampler.kind=rw`). Keys are edited in the TOML tree before it is typed,
    /// so an override is checked like the file; errors in it name the override. A numeric
    /// path part indexes an array (`phase.1.epochs=10`); a missing table on the way is
    /// created; `dims.<name>` must name a dim the file declares.
    pub fn parse_with_overrides(
        text: &str,
        file: &str,
        overrides: &[&str],
    ) -> Result<Plan, PlanError> {
        let src = Arc::new(Source::new(text, file, overrides));
        typing::parse(src)
    }
}
