//! The plan-file schema: serde structs of the TOML (`Raw*`, every value that can be wrong
//! kept with its span), and the typed [`Plan`] they are checked into. Overrides edit the
//! spanned TOML tree (`toml::de::DeTable`) before it is deserialised, so an overridden
//! value is checked like a written one and errors point at the override.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use saintflow_ops::optim::{Adam, Sgd};

use crate::ir::Init;
use crate::op::builtin::LossKind;
use crate::sample::FrontierParams;
use crate::suggest::did_you_mean;

use super::expr::{self, Statement};
use super::{PlanError, PlanErrorKind, Source};

type S<T> = Spanned<T>;

/// A TOML scalar where a shape entry or an initialiser may be a number or a name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Lit {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lit::Int(i) => write!(f, "{i}"),
            Lit::Float(x) => write!(f, "{x}"),
            Lit::Str(s) => write!(f, "{s:?}"),
            Lit::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl<'de> Deserialize<'de> for Lit {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Lit, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Lit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Lit, E> {
                Ok(Lit::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lit, E> {
                i64::try_from(v)
                    .map(Lit::Int)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Lit, E> {
                Ok(Lit::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Lit, E> {
                Ok(Lit::Bool(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Lit, E> {
                Ok(Lit::Str(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A parameter declaration: `[rows, cols]` or `{ shape = [rows, cols], init = … }`.
#[derive(Debug)]
pub(crate) struct RawParam {
    shape: Vec<S<Lit>>,
    init: Option<S<Lit>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParamTable {
    shape: Vec<S<Lit>>,
    init: Option<S<Lit>>,
}

impl<'de> Deserialize<'de> for RawParam {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<RawParam, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawParam;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a shape `[rows, cols]` or a table `{ shape = [rows, cols], init = \"glorot\" }`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawParam, A::Error> {
                let mut shape = Vec::new();
                while let Some(x) = seq.next_element()? {
                    shape.push(x);
                }
                Ok(RawParam { shape, init: None })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawParam, A::Error> {
                let t = RawParamTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawParam {
                    shape: t.shape,
                    init: t.init,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A `[[layer]]` or the `[output]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLayer {
    repeat: Option<S<i64>>,
    dropout: Option<S<f64>>,
    weight_decay: Option<S<f64>>,
    #[serde(default)]
    params: BTreeMap<S<String>, S<RawParam>>,
    out: S<String>,
}

/// `[layer]` (one table) or `[[layer]]` (an array of tables).
#[derive(Debug, Default)]
struct OneOrMany(Vec<RawLayer>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<OneOrMany, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a [layer] table or [[layer]] tables")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = seq.next_element()? {
                    v.push(x);
                }
                Ok(OneOrMany(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<OneOrMany, A::Error> {
                Ok(OneOrMany(vec![RawLayer::deserialize(
                    de::value::MapAccessDeserializer::new(map),
                )?]))
            }
        }
        d.deserialize_any(V)
    }
}

type RawTable = BTreeMap<S<String>, S<toml::Value>>;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawLoss {
    kind: Option<S<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawOptimizer {
    kind: Option<S<String>>,
    lr: Option<S<f64>>,
    weight_decay: Option<S<f64>>,
    beta1: Option<S<f64>>,
    beta2: Option<S<f64>>,
    eps: Option<S<f64>>,
    momentum: Option<S<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    epochs: S<i64>,
    sampler: Option<S<RawTable>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawEval {
    every: Option<S<i64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    name: Option<S<String>>,
    description: Option<String>,
    #[serde(default)]
    dims: BTreeMap<S<String>, S<i64>>,
    sampler: Option<S<RawTable>>,
    layer: Option<OneOrMany>,
    output: Option<RawLayer>,
    loss: Option<RawLoss>,
    optimizer: Option<RawOptimizer>,
    #[serde(default)]
    phase: Vec<RawPhase>,
    eval: Option<RawEval>,
}

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "dims",
    "sampler",
    "layer",
    "output",
    "loss",
    "optimizer",
    "phase",
    "eval",
];

// ---------------------------------------------------------------------------------------
// The typed plan.

/// A dimension in a parameter shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimRef {
    /// `"in"`: the width of the layer's input `x` in this repetition.
    In,
    /// `"features"`: the graph's feature width F.
    Features,
    /// `"classes"`: the graph's class count C.
    Classes,
    /// A number (written, or a `[dims]` name resolved when the plan is parsed).
    Known(usize),
}

/// One parameter of a layer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    /// Its name in the layer (`W_self`; a repeated layer's copies become `W_self.0`, …).
    pub name: String,
    /// `[rows, cols]`.
    pub shape: [DimRef; 2],
    /// Its initialiser; `None`: glorot, or zeros for a `[1, k]` row (a bias).
    pub init: Option<Init>,
    pub(crate) span: Range<usize>,
}

/// Where an `out` string is: its decoded text maps back to the virtual source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OutMap {
    /// `map[i]` = source offset of decoded byte `i` (one extra entry: the end).
    map: Vec<usize>,
}

impl OutMap {
    pub(crate) fn at(&self, i: usize) -> usize {
        self.map[i.min(self.map.len() - 1)]
    }
}

/// A `[[layer]]`, or the `[output]` (whose `repeat` is 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    /// Copies of the layer, in sequence.
    pub repeat: usize,
    /// Dropout rate applied to the layer's input first.
    pub dropout: Option<f32>,
    /// L2 weight decay of its parameters (else the optimizer's).
    pub weight_decay: Option<f32>,
    /// Its parameters, by name.
    pub params: Vec<ParamSpec>,
    /// The expression program.
    pub out: String,
    pub(crate) out_map: OutMap,
    /// `out`, parsed (never empty; the last statement is an expression).
    pub(crate) program: Vec<Statement>,
    pub(crate) dropout_span: usize,
}

/// Which graph a sampler draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleGraph {
    /// The training graph (inductive; GraphSAINT's default).
    Train,
    /// The full graph (transductive, e.g. Planetoid splits).
    Full,
}

/// Which sampler, with its own parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SamplerKind {
    /// Frontier sampling (`frontier`, `budget`, `eta`, `pin_cap`).
    Frontier(FrontierParams),
    /// Random walks (`roots`, `depth`).
    RandomWalk {
        /// Walk roots r.
        roots: usize,
        /// Walk length h.
        depth: usize,
    },
    /// Edge sampling (`edges`).
    Edge {
        /// Edges per subgraph.
        edges: usize,
    },
    /// Node sampling (`budget`, `uniform`).
    Node {
        /// Nodes drawn.
        budget: usize,
        /// Uniform instead of ∝ degree.
        uniform: bool,
    },
    /// The whole graph every step.
    Full,
}

impl SamplerKind {
    /// The name plan files use.
    pub fn plan_name(&self) -> &'static str {
        match self {
            SamplerKind::Frontier(_) => "frontier",
            SamplerKind::RandomWalk { .. } => "rw",
            SamplerKind::Edge { .. } => "edge",
            SamplerKind::Node { .. } => "node",
            SamplerKind::Full => "full",
        }
    }
}

/// The `[sampler]` table, typed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerPlan {
    /// Which sampler.
    pub kind: SamplerKind,
    /// The graph sampled from.
    pub graph: SampleGraph,
    /// Subgraph node counts clipped down to a multiple of this (1: off).
    pub clip: usize,
}

/// The optimiser and its hyper-parameters (`weight_decay` is the default of every
/// parameter; see [`Lowered::weight_decay`](super::Lowered) for the per-parameter values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    /// Adam.
    Adam(Adam),
    /// SGD with optional momentum.
    Sgd(Sgd),
}

impl Optimizer {
    /// The default weight decay.
    pub fn weight_decay(&self) -> f64 {
        match self {
            Optimizer::Adam(a) => a.weight_decay,
            Optimizer::Sgd(s) => s.weight_decay,
        }
    }
}

/// One `[[phase]]` of the schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    /// Epochs in it.
    pub epochs: usize,
    /// The sampler during it (the `[sampler]` with the phase's keys over it).
    pub sampler: SamplerPlan,
}

/// `[eval]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eval {
    /// Validation every this many epochs.
    pub every: usize,
}

/// A parsed, typed plan. Build one with [`Plan::parse`], [`Plan::load`] or
/// [`Plan::parse_with_overrides`]; lower it with [`Plan::lower`].
#[derive(Clone, Debug)]
pub struct Plan {
    /// `name` (the file's stem when absent).
    pub name: String,
    /// `description`.
    pub description: String,
    /// `[dims]`: named sizes.
    pub dims: BTreeMap<String, usize>,
    /// `[sampler]` (`full` on the training graph when absent).
    pub sampler: SamplerPlan,
    /// The `[[layer]]`s, in order (each possibly repeated).
    pub layers: Vec<Layer>,
    /// `[output]`: the classifier producing the logits.
    pub output: Layer,
    /// `[loss] kind`; `None` for `auto` (from the graph's labels).
    pub loss: Option<LossKind>,
    /// `[optimizer]` (Adam, lr 0.01, when absent).
    pub optimizer: Optimizer,
    /// `[[phase]]`s, in order (none: the trainer's defaults).
    pub phases: Vec<Phase>,
    /// `[eval]`.
    pub eval: Eval,
    pub(crate) src: Arc<Source>,
    pub(crate) loss_span: usize,
    /// The TOML after overrides, re-serialised (see [`Plan::effective_text`]).
    pub(crate) effective: String,
}

impl Plan {
    /// The effective plan: the file's TOML tree with every override applied, serialised
    /// again (comments and layout are not kept). Training logs it and hashes it: two runs
    /// with the same effective text train the same model.
    pub fn effective_text(&self) -> &str {
        &self.effective
    }
}

// ---------------------------------------------------------------------------------------
// Parsing.

fn err(src: &Source, at: usize, what: impl Into<String>) -> PlanError {
    src.error(at, PlanErrorKind::Schema, what)
}

/// Rewrites serde's messages into the plan vocabulary, with suggestions.
fn toml_error(src: &Source, e: &toml::de::Error, kind: PlanErrorKind) -> PlanError {
    let at = e.span().map_or(0, |s| s.start);
    let msg = e.message().trim_end().to_string();
    let what = if let Some(rest) = msg.strip_prefix("unknown field `") {
        let (name, tail) = rest.split_once('`').unwrap_or((rest, ""));
        let known: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
        let hint = did_you_mean(name, known.iter().copied());
        if hint.is_empty() && !known.is_empty() {
            format!(
                "unknown key `{name}`, expected one of {}",
                known
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!("unknown key `{name}`{hint}")
        }
    } else if let Some(rest) = msg.strip_prefix("missing field `") {
        format!("missing key `{rest}")
    } else {
        msg.replace("invalid type: ", "wrong type: ")
            .replace("expected i64", "expected a whole number")
            .replace("expected f64", "expected a number")
    };
    src.error(at, kind, what)
}

pub(crate) fn parse(src: Arc<Source>) -> Result<Plan, PlanError> {
    let text = src.text();
    let doc =
        DeTable::parse(src.file_text()).map_err(|e| toml_error(&src, &e, PlanErrorKind::Syntax))?;
    let (span, mut root) = (doc.span(), doc.into_inner());
    for k in 0..src.overrides.len() {
        apply_override(&src, text, k, &mut root)?;
    }
    let effective = toml::Table::deserialize(toml::de::Deserializer::from(Spanned::new(
        span.clone(),
        root.clone(),
    )))
    .ok()
    .and_then(|t| toml::to_string(&t).ok())
    .unwrap_or_default();
    let de = toml::de::Deserializer::from(Spanned::new(span, root));
    let raw = RawPlan::deserialize(de).map_err(|e| toml_error(&src, &e, PlanErrorKind::Schema))?;
    let mut plan = typed(raw, src.clone())?;
    plan.effective = effective;
    Ok(plan)
}

/// Shifts every span of a value parsed from a slice starting at `by`.
fn shift(v: Spanned<DeValue<'_>>, by: usize) -> Spanned<DeValue<'_>> {
    let s = v.span();
    let inner = match v.into_inner() {
        DeValue::Array(a) => DeValue::Array(a.into_iter().map(|x| shift(x, by)).collect()),
        DeValue::Table(t) => DeValue::Table(
            t.into_iter()
                .map(|(k, x)| {
                    let ks = k.span();
                    (
                        Spanned::new(ks.start + by..ks.end + by, k.into_inner()),
                        shift(x, by),
                    )
                })
                .collect(),
        ),
        other => other,
    };
    Spanned::new(s.start + by..s.end + by, inner)
}

fn apply_override<'i>(
    src: &Source,
    text: &'i str,
    k: usize,
    root: &mut DeTable<'i>,
) -> Result<(), PlanError> {
    let r = src.override_range(k);
    let line = &text[r.clone()];
    let oerr = |at: usize, what: String| src.error(at, PlanErrorKind::Override, what);
    let Some(eq) = line.find('=') else {
        return Err(oerr(
            r.start,
            "expected `key.path=value` (for example `dims.hidden=256`)".into(),
        ));
    };
    let vstart = r.start + eq + 1 + (line[eq + 1..].len() - line[eq + 1..].trim_start().len());
    let vtext = text[vstart..r.end].trim_end();
    let value = match DeValue::parse(vtext) {
        Ok(v) => shift(v, vstart),
        Err(_)
            if !vtext.is_empty()
                && vtext
                    .chars()
                    .all(|c| c.is_alphanumeric() || "_-.".contains(c)) =>
        {
            // A bare word is a string: `sampler.kind=rw`.
            Spanned::new(
                vstart..vstart + vtext.len(),
                DeValue::String(Cow::Borrowed(vtext)),
            )
        }
        Err(e) => {
            return Err(oerr(
                vstart + e.span().map_or(0, |s| s.start),
                format!("the value `{vtext}` is not a TOML value: {}", e.message()),
            ))
        }
    };
    // Parts of the path with their offsets.
    let mut parts = Vec::new();
    let mut at = r.start;
    for p in text[r.start..r.start + eq].split('.') {
        let lead = p.len() - p.trim_start().len();
        parts.push((p.trim(), at + lead));
        at += p.len() + 1;
    }
    if parts.iter().any(|(p, _)| p.is_empty()) {
        return Err(oerr(
            r.start,
            format!("empty key in the path `{}`", &line[..eq]),
        ));
    }
    let new_kind = match (&parts[..], value.get_ref()) {
        ([("sampler", _), ("kind", _)], DeValue::String(k)) => Some(k.to_string()),
        _ => None,
    };
    let mut top = DeValue::Table(std::mem::take(root));
    let result = set_path(src, &mut top, &parts, value);
    if let DeValue::Table(t) = top {
        *root = t;
    }
    if let (Ok(()), Some(kind)) = (&result, new_kind) {
        drop_foreign_sampler_keys(root, &kind);
    }
    result
}

/// After `sampler.kind` is overridden: the keys of another kind's sampler (in `[sampler]`
/// and in the phases' `sampler` tables without a `kind` of their own) no longer mean
/// anything, so they are dropped and the new kind's keys take their defaults unless set.
/// `--set sampler.kind=rw` thus switches a frontier plan to random walks.
fn drop_foreign_sampler_keys(root: &mut DeTable<'_>, kind: &str) {
    let keep = |k: &str| COMMON_SAMPLER_KEYS.contains(&k) || sampler_keys(kind).contains(&k);
    let prune = |t: &mut DeTable<'_>| {
        let foreign: Vec<_> = t.keys().filter(|k| !keep(k.get_ref())).cloned().collect();
        for k in foreign {
            t.remove(&k);
        }
    };
    if let Some(DeValue::Table(t)) = root.get_mut("sampler").map(|v| v.get_mut()) {
        prune(t);
    }
    if let Some(DeValue::Array(phases)) = root.get_mut("phase").map(|v| v.get_mut()) {
        for ph in phases.iter_mut() {
            if let DeValue::Table(pt) = ph.get_mut() {
                if let Some(DeValue::Table(st)) = pt.get_mut("sampler").map(|v| v.get_mut()) {
                    if !st.contains_key("kind") {
                        prune(st);
                    }
                }
            }
        }
    }
}

/// Sets `parts` (path parts with their offsets) in `top` to `value`.
fn set_path<'i>(
    src: &Source,
    top: &mut DeValue<'i>,
    parts: &[(&'i str, usize)],
    value: Spanned<DeValue<'i>>,
) -> Result<(), PlanError> {
    let oerr = |at: usize, what: String| src.error(at, PlanErrorKind::Override, what);
    let path = |i: usize| {
        parts[..=i]
            .iter()
            .map(|p| p.0)
            .collect::<Vec<_>>()
            .join(".")
    };
    let unknown_top = |p: &str, at: usize| {
        oerr(
            at,
            format!(
                "unknown key `{p}`{}",
                did_you_mean(p, TOP_KEYS.iter().copied())
            ),
        )
    };
    let (&(last, last_at), walk) = parts.split_last().expect("one part at least");
    let mut here = top;
    for (i, &(p, at)) in walk.iter().enumerate() {
        here = match here {
            DeValue::Table(t) => {
                if i == 0 && !TOP_KEYS.contains(&p) {
                    return Err(unknown_top(p, at));
                }
                if !t.contains_key(p) {
                    t.insert(
                        Spanned::new(at..at + p.len(), Cow::Borrowed(p)),
                        Spanned::new(at..at + p.len(), DeValue::Table(DeTable::new())),
                    );
                }
                t.get_mut(p).expect("inserted").get_mut()
            }
            DeValue::Array(a) => {
                let len = a.len();
                let idx = p
                    .parse::<usize>()
                    .ok()
                    .filter(|&j| j < len)
                    .ok_or_else(|| {
                        oerr(
                            at,
                            format!(
                            "`{}` is an array of {len}: expected an index below {len}, got `{p}`",
                            path(i - 1)
                        ),
                        )
                    })?;
                a.as_mut()[idx].get_mut()
            }
            _ => return Err(oerr(at, format!("`{}` is not a table", path(i - 1)))),
        };
    }
    match here {
        DeValue::Table(t) => {
            if walk.is_empty() && !TOP_KEYS.contains(&last) {
                return Err(unknown_top(last, last_at));
            }
            if walk.len() == 1 && walk[0].0 == "dims" && !t.contains_key(last) {
                let known: Vec<String> = t.keys().map(|k| k.get_ref().to_string()).collect();
                return Err(oerr(
                    last_at,
                    format!(
                        "unknown dim `{last}`{}",
                        did_you_mean(last, known.iter().map(String::as_str))
                    ),
                ));
            }
            t.insert(
                Spanned::new(last_at..last_at + last.len(), Cow::Borrowed(last)),
                value,
            );
            Ok(())
        }
        DeValue::Array(a) => {
            let len = a.len();
            let idx = last
                .parse::<usize>()
                .ok()
                .filter(|&j| j < len)
                .ok_or_else(|| {
                    oerr(
                        last_at,
                        format!(
                            "`{}` is an array of {len}: index `{last}` is out of range",
                            path(walk.len() - 1)
                        ),
                    )
                })?;
            a.as_mut()[idx] = value;
            Ok(())
        }
        _ => Err(oerr(
            last_at,
            format!("`{}` is not a table", path(walk.len() - 1)),
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Typing.

/// The source offsets of an `out` string's decoded bytes: past the opening quote (and the
/// newline trimmed after a triple quote), through every escape and line-ending backslash.
pub(crate) fn out_map(raw: &str, base: usize, decoded: &str) -> OutMap {
    let (open, basic) = if raw.starts_with("\"\"\"") {
        (3, true)
    } else if raw.starts_with("'''") {
        (3, false)
    } else if raw.starts_with('"') {
        (1, true)
    } else if raw.starts_with('\'') {
        (1, false)
    } else {
        (0, false)
    };
    let rb = raw.as_bytes();
    let mut j = open;
    if open == 3 {
        if raw[j..].starts_with("\r\n") {
            j += 2;
        } else if raw[j..].starts_with('\n') {
            j += 1;
        }
    }
    let mut map = Vec::with_capacity(decoded.len() + 1);
    for ch in decoded.chars() {
        // A line-ending backslash swallows the newline and the whitespace after it.
        while basic && rb.get(j) == Some(&b'\\') {
            let mut k = j + 1;
            while k < rb.len() && (rb[k] == b' ' || rb[k] == b'\t') {
                k += 1;
            }
            if k < rb.len() && (rb[k] == b'\n' || rb[k] == b'\r') {
                while k < rb.len() && rb[k].is_ascii_whitespace() {
                    k += 1;
                }
                j = k;
            } else {
                break;
            }
        }
        let adv = if basic && rb.get(j) == Some(&b'\\') {
            match rb.get(j + 1) {
                Some(b'u') => 6,
                Some(b'U') => 10,
                Some(b'x') => 4,
                _ => 2,
            }
        } else if ch == '\n' && rb.get(j) == Some(&b'\r') {
            2
        } else {
            ch.len_utf8()
        };
        map.extend(std::iter::repeat_n(base + j, ch.len_utf8()));
        j = (j + adv).min(raw.len());
    }
    map.push(base + j);
    OutMap { map }
}

/// Names that expressions define themselves; parameters may not take them.
pub(crate) const RESERVED: &[&str] = &["x", "A", "A_mean", "A_sym", "A_saint"];

fn count(src: &Source, v: &S<i64>, what: &str, min: i64) -> Result<usize, PlanError> {
    let x = *v.get_ref();
    if x < min {
        return Err(err(
            src,
            v.span().start,
            format!("{what} must be ≥ {min}, got {x}"),
        ));
    }
    Ok(x as usize)
}

fn dim_ref(
    src: &Source,
    lit: &S<Lit>,
    param: &str,
    dims: &BTreeMap<String, usize>,
) -> Result<DimRef, PlanError> {
    let at = lit.span().start;
    match lit.get_ref() {
        Lit::Int(k) if *k >= 1 => Ok(DimRef::Known(*k as usize)),
        Lit::Str(s) => match s.as_str() {
            "in" => Ok(DimRef::In),
            "features" => Ok(DimRef::Features),
            "classes" => Ok(DimRef::Classes),
            name => dims.get(name).map(|&k| DimRef::Known(k)).ok_or_else(|| {
                let known = ["in", "features", "classes"]
                    .into_iter()
                    .chain(dims.keys().map(String::as_str));
                src.error(
                    at,
                    PlanErrorKind::Name,
                    format!(
                        "unknown dim `{name}` in the shape of `{param}`{}",
                        did_you_mean(name, known)
                    ),
                )
            }),
        },
        other => Err(err(
            src,
            at,
            format!(
                "the shape of `{param}` holds {other}: expected a whole number ≥ 1, `in`, `features`, `classes` or a [dims] name"
            ),
        )),
    }
}

fn init_of(src: &Source, lit: &S<Lit>, param: &str) -> Result<Init, PlanError> {
    let at = lit.span().start;
    match lit.get_ref() {
        Lit::Int(k) => Ok(Init::Const(*k as f32)),
        Lit::Float(x) => Ok(Init::Const(*x as f32)),
        Lit::Str(s) => match s.as_str() {
            "glorot" => Ok(Init::Glorot),
            "zeros" => Ok(Init::Zeros),
            "ones" => Ok(Init::Const(1.0)),
            other => Err(err(
                src,
                at,
                format!(
                    "unknown init `{other}` of `{param}`{}",
                    did_you_mean(other, ["glorot", "zeros", "ones"].into_iter())
                ),
            )),
        },
        Lit::Bool(b) => Err(err(
            src,
            at,
            format!(
                "init of `{param}` is {b}: expected \"glorot\", \"zeros\", \"ones\" or a number"
            ),
        )),
    }
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

fn layer(
    src: &Source,
    raw: RawLayer,
    dims: &BTreeMap<String, usize>,
    output: bool,
) -> Result<Layer, PlanError> {
    let repeat = match &raw.repeat {
        Some(r) if output => {
            return Err(err(
                src,
                r.span().start,
                "the [output] takes no `repeat`: repeat a [[layer]] instead",
            ))
        }
        Some(r) => count(src, r, "repeat", 1)?,
        None => 1,
    };
    let dropout = match &raw.dropout {
        Some(d) if !(0.0..1.0).contains(d.get_ref()) => {
            return Err(err(
                src,
                d.span().start,
                format!("dropout must be in [0, 1), got {}", d.get_ref()),
            ))
        }
        d => d.as_ref().map(|d| *d.get_ref() as f32),
    };
    let weight_decay = match &raw.weight_decay {
        Some(w) if *w.get_ref() < 0.0 || !w.get_ref().is_finite() => {
            return Err(err(
                src,
                w.span().start,
                format!("weight_decay must be ≥ 0, got {}", w.get_ref()),
            ))
        }
        w => w.as_ref().map(|w| *w.get_ref() as f32),
    };
    let mut params = Vec::new();
    for (name, p) in &raw.params {
        let (n, at) = (name.get_ref().as_str(), name.span().start);
        if !is_ident(n) {
            return Err(err(
                src,
                at,
                format!("parameter name `{n}`: expected letters, digits and `_`"),
            ));
        }
        if RESERVED.contains(&n) {
            return Err(err(
                src,
                at,
                format!("`{n}` is a built-in name (the layer input or an adjacency): name the parameter otherwise"),
            ));
        }
        let p = p.get_ref();
        if p.shape.len() != 2 {
            return Err(err(
                src,
                at,
                format!(
                    "the shape of `{n}` has {} entries: expected [rows, cols]",
                    p.shape.len()
                ),
            ));
        }
        let shape = [
            dim_ref(src, &p.shape[0], n, dims)?,
            dim_ref(src, &p.shape[1], n, dims)?,
        ];
        let init = p.init.as_ref().map(|i| init_of(src, i, n)).transpose()?;
        params.push(ParamSpec {
            name: n.to_string(),
            shape,
            init,
            span: name.span(),
        });
    }
    let out_span = raw.out.span();
    let out = raw.out.into_inner();
    let out_map = out_map(&src.text()[out_span.clone()], out_span.start, &out);
    let program =
        expr::parse(&out).map_err(|e| src.error(out_map.at(e.at), PlanErrorKind::Expr, e.what))?;
    let Some(last) = program.last() else {
        return Err(src.error(
            out_map.at(0),
            PlanErrorKind::Expr,
            "`out` is empty: write the layer's result, for example `relu(A_sym @ x @ W)`",
        ));
    };
    if let Some((n, span)) = &last.target {
        return Err(src.error(
            out_map.at(span.start),
            PlanErrorKind::Expr,
            format!("`out` ends with the binding `{n} = …`: its last line must be the layer's result (write `{n}` on a line of its own)"),
        ));
    }
    Ok(Layer {
        repeat,
        dropout,
        weight_decay,
        params,
        out,
        out_map,
        program,
        dropout_span: raw
            .dropout
            .as_ref()
            .map_or(out_span.start, |d| d.span().start),
    })
}

const SAMPLER_KINDS: &[&str] = &["frontier", "rw", "edge", "node", "full"];
const COMMON_SAMPLER_KEYS: &[&str] = &["kind", "graph", "clip"];

fn sampler_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "frontier" => &["frontier", "budget", "eta", "pin_cap"],
        "rw" => &["roots", "depth"],
        "edge" => &["edges"],
        "node" => &["budget", "uniform"],
        _ => &[],
    }
}

/// The sampler of a merged `[sampler]` table (`table_at`: where to point when `kind` is
/// missing).
fn sampler(src: &Source, t: &RawTable, table_at: usize) -> Result<SamplerPlan, PlanError> {
    let get = |k: &str| t.get(k);
    let kind_v = get("kind").ok_or_else(|| {
        err(
            src,
            table_at,
            format!(
                "the sampler has no `kind`: expected one of {}",
                SAMPLER_KINDS.join(", ")
            ),
        )
    })?;
    let kind = kind_v
        .get_ref()
        .as_str()
        .ok_or_else(|| err(src, kind_v.span().start, "sampler kind: expected a string"))?;
    if !SAMPLER_KINDS.contains(&kind) {
        return Err(src.error(
            kind_v.span().start,
            PlanErrorKind::Name,
            format!(
                "unknown sampler kind `{kind}`{}",
                match did_you_mean(kind, SAMPLER_KINDS.iter().copied()) {
                    h if h.is_empty() => format!(" (known: {})", SAMPLER_KINDS.join(", ")),
                    h => h,
                }
            ),
        ));
    }
    let own = sampler_keys(kind);
    for (k, v) in t {
        let k = k.get_ref().as_str();
        if !COMMON_SAMPLER_KEYS.contains(&k) && !own.contains(&k) {
            let all: Vec<&str> = COMMON_SAMPLER_KEYS.iter().chain(own).copied().collect();
            let hint = did_you_mean(k, all.iter().copied());
            let other = SAMPLER_KINDS
                .iter()
                .find(|s| sampler_keys(s).contains(&k))
                .map(|s| format!(" (`{k}` belongs to the `{s}` sampler)"))
                .unwrap_or_default();
            return Err(err(
                src,
                v.span().start,
                format!(
                    "the `{kind}` sampler has no key `{k}`{hint}{other}; its keys: {}",
                    all.join(", ")
                ),
            ));
        }
    }
    let uint = |k: &str, default: usize| -> Result<usize, PlanError> {
        match get(k) {
            None => Ok(default),
            Some(v) => match v.get_ref() {
                toml::Value::Integer(i) if *i >= 1 => Ok(*i as usize),
                other => Err(err(
                    src,
                    v.span().start,
                    format!("sampler `{k}`: expected a whole number ≥ 1, got {other}"),
                )),
            },
        }
    };
    let float = |k: &str, default: f64| -> Result<f64, PlanError> {
        match get(k) {
            None => Ok(default),
            Some(v) => match v.get_ref() {
                toml::Value::Integer(i) if *i > 0 => Ok(*i as f64),
                toml::Value::Float(x) if *x > 0.0 => Ok(*x),
                other => Err(err(
                    src,
                    v.span().start,
                    format!("sampler `{k}`: expected a number > 0, got {other}"),
                )),
            },
        }
    };
    let kind = match kind {
        "frontier" => {
            let d = FrontierParams::default();
            SamplerKind::Frontier(FrontierParams {
                frontier: uint("frontier", d.frontier)?,
                budget: uint("budget", d.budget)?,
                eta: float("eta", d.eta)?,
                pin_cap: get("pin_cap").map(|_| uint("pin_cap", 1)).transpose()?,
            })
        }
        "rw" => SamplerKind::RandomWalk {
            roots: uint("roots", 3000)?,
            depth: uint("depth", 2)?,
        },
        "edge" => SamplerKind::Edge {
            edges: uint("edges", 4000)?,
        },
        "node" => SamplerKind::Node {
            budget: uint("budget", 8000)?,
            uniform: match get("uniform") {
                None => false,
                Some(v) => v.get_ref().as_bool().ok_or_else(|| {
                    err(
                        src,
                        v.span().start,
                        "sampler `uniform`: expected true or false",
                    )
                })?,
            },
        },
        _ => SamplerKind::Full,
    };
    let graph = match get("graph") {
        None => SampleGraph::Train,
        Some(v) => match v.get_ref().as_str() {
            Some("train") => SampleGraph::Train,
            Some("full") => SampleGraph::Full,
            _ => {
                return Err(err(
                    src,
                    v.span().start,
                    format!(
                        "sampler `graph`: expected \"train\" or \"full\", got {}",
                        v.get_ref()
                    ),
                ))
            }
        },
    };
    let clip = uint("clip", if kind == SamplerKind::Full { 1 } else { 16 })?;
    Ok(SamplerPlan { kind, graph, clip })
}

fn positive(src: &Source, v: &Option<S<f64>>, what: &str, default: f64) -> Result<f64, PlanError> {
    match v {
        None => Ok(default),
        Some(x) if *x.get_ref() > 0.0 && x.get_ref().is_finite() => Ok(*x.get_ref()),
        Some(x) => Err(err(
            src,
            x.span().start,
            format!("{what} must be > 0, got {}", x.get_ref()),
        )),
    }
}

fn optimizer(src: &Source, raw: Option<RawOptimizer>) -> Result<Optimizer, PlanError> {
    let Some(o) = raw else {
        return Ok(Optimizer::Adam(Adam::default()));
    };
    let kind = o.kind.as_ref().map_or("adam", |k| k.get_ref().as_str());
    let wd = match &o.weight_decay {
        None => 0.0,
        Some(w) if *w.get_ref() >= 0.0 => *w.get_ref(),
        Some(w) => {
            return Err(err(
                src,
                w.span().start,
                format!("weight_decay must be ≥ 0, got {}", w.get_ref()),
            ))
        }
    };
    let refuse = |v: &Option<S<f64>>, key: &str| match v {
        Some(v) => Err(err(
            src,
            v.span().start,
            format!("the `{kind}` optimizer has no `{key}`"),
        )),
        None => Ok(()),
    };
    match kind {
        "adam" => {
            refuse(&o.momentum, "momentum")?;
            let d = Adam::default();
            Ok(Optimizer::Adam(Adam {
                lr: positive(src, &o.lr, "lr", d.lr)?,
                beta1: positive(src, &o.beta1, "beta1", d.beta1)?,
                beta2: positive(src, &o.beta2, "beta2", d.beta2)?,
                eps: positive(src, &o.eps, "eps", d.eps)?,
                weight_decay: wd,
            }))
        }
        "sgd" => {
            refuse(&o.beta1, "beta1")?;
            refuse(&o.beta2, "beta2")?;
            refuse(&o.eps, "eps")?;
            let momentum = match &o.momentum {
                None => 0.0,
                Some(m) if (0.0..1.0).contains(m.get_ref()) => *m.get_ref(),
                Some(m) => {
                    return Err(err(
                        src,
                        m.span().start,
                        format!("momentum must be in [0, 1), got {}", m.get_ref()),
                    ))
                }
            };
            Ok(Optimizer::Sgd(Sgd {
                lr: positive(src, &o.lr, "lr", 0.01)?,
                momentum,
                weight_decay: wd,
            }))
        }
        other => Err(src.error(
            o.kind.as_ref().map_or(0, |k| k.span().start),
            PlanErrorKind::Name,
            format!(
                "unknown optimizer kind `{other}`{}",
                match did_you_mean(other, ["adam", "sgd"].into_iter()) {
                    h if h.is_empty() => " (known: adam, sgd)".to_string(),
                    h => h,
                }
            ),
        )),
    }
}

fn typed(raw: RawPlan, src: Arc<Source>) -> Result<Plan, PlanError> {
    let s = src.as_ref();
    let mut dims = BTreeMap::new();
    for (k, v) in &raw.dims {
        let name = k.get_ref();
        if ["in", "features", "classes"].contains(&name.as_str()) || !is_ident(name) {
            return Err(err(
                s,
                k.span().start,
                format!("`{name}` cannot name a dim (`in`, `features` and `classes` are built in; a dim name is letters, digits and `_`)"),
            ));
        }
        dims.insert(name.clone(), count(s, v, &format!("dim `{name}`"), 1)?);
    }
    let (base_table, base_at) = match &raw.sampler {
        Some(t) => (t.get_ref().clone(), t.span().start),
        None => {
            let mut t = RawTable::new();
            t.insert(
                Spanned::new(0..0, "kind".to_string()),
                Spanned::new(0..0, toml::Value::String("full".into())),
            );
            (t, 0)
        }
    };
    let sampler_plan = sampler(s, &base_table, base_at)?;
    let layers = raw
        .layer
        .unwrap_or_default()
        .0
        .into_iter()
        .map(|l| layer(s, l, &dims, false))
        .collect::<Result<Vec<_>, _>>()?;
    let output = match raw.output {
        Some(o) => layer(s, o, &dims, true)?,
        None => {
            return Err(err(
                s,
                s.file_text().len(),
                "the plan has no [output]: add one whose `out` gives the logits [n, classes]",
            ))
        }
    };
    let (loss, loss_span) = match raw.loss.and_then(|l| l.kind) {
        None => (None, 0),
        Some(k) => {
            let at = k.span().start;
            let kind = match k.get_ref().as_str() {
                "auto" => None,
                "softmax_ce" => Some(LossKind::SoftmaxCe),
                "sigmoid_bce" => Some(LossKind::SigmoidBce),
                other => {
                    let known = ["auto", "softmax_ce", "sigmoid_bce"];
                    return Err(s.error(
                        at,
                        PlanErrorKind::Name,
                        format!(
                            "unknown loss kind `{other}`{}",
                            match did_you_mean(other, known.into_iter()) {
                                h if h.is_empty() => format!(" (known: {})", known.join(", ")),
                                h => h,
                            }
                        ),
                    ));
                }
            };
            (kind, at)
        }
    };
    let optimizer = optimizer(s, raw.optimizer)?;
    let mut phases = Vec::new();
    for p in &raw.phase {
        let epochs = count(s, &p.epochs, "epochs", 1)?;
        let sampler = match &p.sampler {
            None => sampler_plan,
            Some(o) => {
                let mut merged = base_table.clone();
                let new_kind = o.get_ref().get("kind").map(|k| k.get_ref().clone());
                if new_kind.is_some()
                    && new_kind.as_ref() != base_table.get("kind").map(|k| k.get_ref())
                {
                    // Another sampler: keep only the keys every sampler has.
                    merged.retain(|k, _| k.get_ref() == "graph" || k.get_ref() == "clip");
                }
                for (k, v) in o.get_ref() {
                    merged.insert(k.clone(), v.clone());
                }
                sampler(s, &merged, o.span().start)?
            }
        };
        phases.push(Phase { epochs, sampler });
    }
    let eval = Eval {
        every: match raw.eval.and_then(|e| e.every) {
            None => 1,
            Some(e) => count(s, &e, "eval every", 1)?,
        },
    };
    let name = match raw.name {
        Some(n) => n.into_inner(),
        None => std::path::Path::new(&s.file)
            .file_stem()
            .map_or_else(|| s.file.clone(), |f| f.to_string_lossy().into_owned()),
    };
    Ok(Plan {
        name,
        description: raw.description.unwrap_or_default(),
        dims,
        sampler: sampler_plan,
        layers,
        output,
        loss,
        optimizer,
        phases,
        eval,
        src,
        loss_span,
        effective: String::new(),
    })
}
