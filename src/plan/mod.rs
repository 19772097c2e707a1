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
//!
//! Limits (issue 15: no input may exhaust memory or the stack), each checked before the
//! work it bounds and reported as a [`PlanErrorKind::Limit`] at the offending value: the
//! file and each override at most [`MAX_PLAN_BYTES`]; arrays and tables nested at most
//! [`MAX_TOML_DEPTH`] deep (checked on the text before toml parses it); at most
//! [`MAX_LAYERS`] layer copies (the `repeat`s of all `[[layer]]`s); a dim or a shape entry
//! at most [`MAX_DIM`]; an `out` string at most [`expr::MAX_EXPR_BYTES`] bytes and
//! [`expr::MAX_EXPR_DEPTH`] levels deep. What the parameters and a step need in memory
//! is checked against the machine when training starts (`compile::memory`).

pub mod aggregations;
mod any;
pub mod embedding;
pub mod expr;
pub mod lower;
mod outpos;
mod overrides;
mod sampler;
pub mod schema;
pub mod shipped;
mod spanned;
mod typing;

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

pub use any::AnyPlan;
pub use lower::{LowerEnv, Lowered, RunningStats};
pub use shipped::{PlanSource, ShippedPlan};

/// The largest plan file (and override), in bytes: 1 MiB, a thousand times a shipped plan.
pub const MAX_PLAN_BYTES: usize = 1 << 20;

/// The deepest nesting of TOML arrays and inline tables (`[[[…]]]`, `{a = {b = …}}`), 32:
/// toml's parser, its deserialiser and the override editor recurse per level, and no plan
/// key needs more than 3.
pub const MAX_TOML_DEPTH: usize = 32;

/// The most layer copies in a plan, 1024: the sum of the `[[layer]]`s' `repeat`s (the
/// `[output]` aside). Lowering builds each copy's nodes and their backward, so the count
/// bounds the step graph; the deepest GNNs in the literature have about a thousand layers.
pub const MAX_LAYERS: usize = 1024;

/// The largest dim or numeric shape entry, u32::MAX: a row count of a store is a u32, and
/// beyond it sizes in bytes could overflow. Smaller sizes that do not fit the machine are
/// refused by the memory check when training starts.
pub const MAX_DIM: usize = u32::MAX as usize;
pub(crate) use schema::WrittenCount;
pub use schema::{
    Consensus, Decoder, DimFormula, DimRef, Distributed, Eval, InitSpec, InputSpec, Keep, Layer,
    LinkMetric, LinkTask, Optimizer, ParamSpec, Phase, Plan, SampleGraph, SamplerConfig,
    SamplerPlan, Task, Watch,
};

/// The text of the plan file at `path`, refused before reading when it is larger than
/// [`MAX_PLAN_BYTES`] (a plan path pointing at a huge file must not be read whole). Every
/// plan family reads its file through this.
pub(crate) fn read_plan_file(path: &Path) -> Result<String, PlanError> {
    let error = |kind, what: String| PlanError {
        file: path.display().to_string(),
        line: 0,
        col: 0,
        kind,
        what,
        source_line: String::new(),
    };
    if let Ok(m) = std::fs::metadata(path) {
        if m.is_file() && m.len() > MAX_PLAN_BYTES as u64 {
            return Err(error(
                PlanErrorKind::Limit,
                format!(
                    "the plan file is {} bytes, the limit is {MAX_PLAN_BYTES}",
                    m.len()
                ),
            ));
        }
    }
    std::fs::read_to_string(path).map_err(|e| error(PlanErrorKind::Io, format!("cannot read: {e}")))
}

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
    /// A limit: the plan's size, nesting or layer count, a dim too large, or more memory
    /// than the machine has.
    Limit,
    /// A plan of the family the command does not take (an `[embedding]` plan given to
    /// `explain`).
    Family,
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

impl Source {
    /// The size and nesting limits on the raw text, checked before toml sees it (see the
    /// module's documentation): the file and each override at most [`MAX_PLAN_BYTES`],
    /// brackets and braces outside strings and comments at most [`MAX_TOML_DEPTH`] deep.
    pub(crate) fn check_limits(&self) -> Result<(), PlanError> {
        let file = std::iter::once(0..self.file_len);
        for r in file.chain(self.overrides.iter().cloned()) {
            if r.len() > MAX_PLAN_BYTES {
                let what = if r.start == 0 {
                    "the plan"
                } else {
                    "the override"
                };
                return Err(self.error(
                    r.start,
                    PlanErrorKind::Limit,
                    format!("{what} is {} bytes, the limit is {MAX_PLAN_BYTES}", r.len()),
                ));
            }
            if let Some(at) = toml_too_deep(&self.text[r.clone()], MAX_TOML_DEPTH) {
                return Err(self.error(
                    r.start + at,
                    PlanErrorKind::Limit,
                    format!("arrays and tables nest deeper than {MAX_TOML_DEPTH} levels"),
                ));
            }
        }
        Ok(())
    }
}

/// The offset of the first `[` or `{` that opens level `limit + 1` of `text`'s TOML
/// nesting, skipping strings (basic, literal, multi-line) and comments; None if none does.
/// A table header `[[a]]` is two levels, closed on its line, as toml reads it.
fn toml_too_deep(text: &str, limit: usize) -> Option<usize> {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0, 0usize);
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'"' | b'\'') => {
                let triple = b[i..].starts_with(if q == b'"' { b"\"\"\"" } else { b"'''" });
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if q == b'"' && b[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if b[i] == q && (!triple || b[i..].starts_with(&[q, q, q])) {
                        i += if triple { 3 } else { 1 };
                        // A multi-line string may end with up to two more quotes.
                        while triple && i < b.len() && b[i] == q {
                            i += 1;
                        }
                        break;
                    }
                    if !triple && b[i] == b'\n' {
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
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
        let text = read_plan_file(path)?;
        Plan::parse_with_overrides(&text, &path.display().to_string(), overrides)
    }

    /// Parses a plan after applying `overrides`, each `key.path=value` with a TOML value
    /// (`dims.hidden=256`, `sampler.kind="rw"`, `layer.0.dropout=0.2`; a bare word is taken
    /// as a string: `sampler.kind=rw`). Keys are edited in the TOML tree before it is typed,
    /// so an override is checked like the file; errors in it name the override. A numeric
    /// path part indexes an array (`phase.1.epochs=10`); a missing table on the way is
    /// created; `dims.<name>` must name a dim the file declares, and `model.<name>` is an
    /// alias of it (PyG's vocabulary: `model.hidden=64`).
    pub fn parse_with_overrides(
        text: &str,
        file: &str,
        overrides: &[&str],
    ) -> Result<Plan, PlanError> {
        let overrides: Vec<String> = overrides
            .iter()
            .map(|s| match s.strip_prefix("model.") {
                Some(rest) => format!("dims.{rest}"),
                None => s.to_string(),
            })
            .collect();
        let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
        let src = Arc::new(Source::new(text, file, &overrides));
        typing::parse(src)
    }
}
