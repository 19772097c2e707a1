//! Typing: the spanned TOML ([`super::spanned`]) checked into a [`Plan`] (dims, layers
//! with their parameters and parsed `out`, loss, optimizer, phases, eval); `parse` is the
//! whole road from the virtual source to a plan.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use toml::de::DeTable;
use toml::Spanned;

use saintflow_ops::gemm::Precision;
use saintflow_ops::optim::{Adam, Sgd};

use crate::ir::Init;
use crate::op::builtin::{LinkLossKind, LossKind};
use crate::sample::{LinkSampling, NegativeDist, NegativeEnds};
use crate::suggest::did_you_mean;

use super::expr::{self, ExprKind};
use super::outpos::out_map;
use super::overrides::apply_override;
use super::sampler::{phase_sampler, sampler};
use super::schema::{
    Compute, Consensus, Decoder, DimFormula, DimRef, Distributed, Eval, InitSpec, InputSpec, Keep,
    Layer, LinkMetric, LinkTask, Optimizer, ParamSpec, Phase, Plan, Task, Watch,
};
use super::spanned::{
    err, toml_error, Lit, RawCompute, RawDistributed, RawEval, RawLayer, RawOptimizer, RawPlan,
    RawTable, RawTask, S,
};
use super::{PlanError, PlanErrorKind, Source, MAX_DIM, MAX_LAYERS};

pub(crate) fn parse(src: Arc<Source>) -> Result<Plan, PlanError> {
    let (raw, effective) = deserialize_with_overrides::<RawPlan>(&src)?;
    let mut plan = typed(raw, src.clone())?;
    plan.effective = effective;
    Ok(plan)
}

/// `src`'s file checked against the limits, parsed as TOML with its overrides applied and
/// deserialised as `T` (errors placed in the source), with the effective text (the tree
/// after overrides, serialised again): the front half of every plan family's parse.
pub(super) fn deserialize_with_overrides<T: serde::de::DeserializeOwned>(
    src: &Source,
) -> Result<(T, String), PlanError> {
    src.check_limits()?;
    let text = src.text();
    let doc =
        DeTable::parse(src.file_text()).map_err(|e| toml_error(src, &e, PlanErrorKind::Syntax))?;
    let (span, mut root) = (doc.span(), doc.into_inner());
    for k in 0..src.overrides.len() {
        apply_override(src, text, k, &mut root)?;
    }
    let effective = toml::Table::deserialize(toml::de::Deserializer::from(Spanned::new(
        span.clone(),
        root.clone(),
    )))
    .ok()
    .and_then(|t| toml::to_string(&t).ok())
    .unwrap_or_default();
    let de = toml::de::Deserializer::from(Spanned::new(span, root));
    let raw = T::deserialize(de).map_err(|e| toml_error(src, &e, PlanErrorKind::Schema))?;
    Ok((raw, effective))
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
        Lit::Int(k) if *k >= 1 => Ok(DimRef::Known(at_most_max_dim(src, at, *k as usize, &format!("a shape entry of `{param}`"))?)),
        Lit::Str(s) if !is_ident(s) => dim_formula(src, at, s, param, dims),
        Lit::Str(name) => named_dim(name, dims).map_err(|hint| {
            src.error(
                at,
                PlanErrorKind::Name,
                format!("unknown dim `{name}` in the shape of `{param}`{hint}"),
            )
        }),
        other => Err(err(
            src,
            at,
            format!(
                "the shape of `{param}` holds {other}: expected a whole number ≥ 1, `in`, `features`, `classes`, a [dims] name or arithmetic over them (\"3 * hidden\")"
            ),
        )),
    }
}

/// `in`, `features`, `classes` or a [dims] name; else the nearest names, as a suffix for
/// the caller's "unknown dim" message.
fn named_dim(name: &str, dims: &BTreeMap<String, usize>) -> Result<DimRef, String> {
    Ok(match name {
        "in" => DimRef::In,
        "features" => DimRef::Features,
        "classes" => DimRef::Classes,
        "relations" => DimRef::Relations,
        d => DimRef::Known(*dims.get(d).ok_or_else(|| {
            let known = ["in", "features", "classes", "relations"]
                .into_iter()
                .chain(dims.keys().map(String::as_str));
            did_you_mean(d, known)
        })?),
    })
}

/// A shape entry written as arithmetic (`"3 * hidden"`), parsed with the expression
/// language: numbers, `in`, `features`, `classes`, [dims] names, `+ - * /`, parentheses.
fn dim_formula(
    src: &Source,
    at: usize,
    text: &str,
    param: &str,
    dims: &BTreeMap<String, usize>,
) -> Result<DimRef, PlanError> {
    let bad = |what: String| {
        src.error(
            at,
            PlanErrorKind::Expr,
            format!("the shape entry {text:?} of `{param}`: {what}"),
        )
    };
    let program = expr::parse(text).map_err(|e| bad(e.what))?;
    let [stmt] = program.as_slice() else {
        return Err(bad("expected one expression".into()));
    };
    if stmt.target.is_some() {
        return Err(bad("expected an expression, not a binding".into()));
    }
    fn tree(e: &expr::Expr, dims: &BTreeMap<String, usize>) -> Result<DimFormula, String> {
        Ok(match &e.kind {
            ExprKind::Number(x) if x.fract() == 0.0 && *x >= 1.0 && *x <= MAX_DIM as f64 => {
                DimFormula::Leaf(DimRef::Known(*x as usize))
            }
            ExprKind::Name(n) => DimFormula::Leaf(
                named_dim(n, dims).map_err(|hint| format!("unknown dim `{n}`{hint}"))?,
            ),
            ExprKind::Paren(a) => tree(a, dims)?,
            ExprKind::Binary { op, lhs, rhs } => DimFormula::Op(
                op.symbol().chars().next().expect("one character"),
                Box::new(tree(lhs, dims)?),
                Box::new(tree(rhs, dims)?),
            ),
            _ => {
                return Err(
                    "expected whole numbers ≥ 1, dims and `+ - * /` with parentheses".into(),
                )
            }
        })
    }
    Ok(DimRef::Formula(Box::new(
        tree(&stmt.expr, dims).map_err(bad)?,
    )))
}

/// `[input]`: `dim` a whole number or a [dims] name, `weight_decay` ≥ 0.
fn input_spec(
    src: &Source,
    raw: &S<super::spanned::RawInput>,
    dims: &BTreeMap<String, usize>,
) -> Result<InputSpec, PlanError> {
    let i = raw.get_ref();
    let at = i.dim.span().start;
    let dim = match i.dim.get_ref() {
        Lit::Int(k) if *k >= 1 => at_most_max_dim(src, at, *k as usize, "[input] dim")?,
        Lit::Str(name) => *dims.get(name).ok_or_else(|| {
            src.error(
                at,
                PlanErrorKind::Name,
                format!(
                    "[input] dim: unknown dim `{name}`{}",
                    did_you_mean(name, dims.keys().map(String::as_str))
                ),
            )
        })?,
        other => {
            return Err(err(
                src,
                at,
                format!("[input] dim is {other}: expected a whole number ≥ 1 or a [dims] name"),
            ))
        }
    };
    let weight_decay = match &i.weight_decay {
        Some(w) if !(w.get_ref().is_finite() && *w.get_ref() >= 0.0) => {
            return Err(err(
                src,
                w.span().start,
                format!(
                    "[input] weight_decay must be a number ≥ 0, got {}",
                    w.get_ref()
                ),
            ))
        }
        w => w.as_ref().map(|w| *w.get_ref() as f32),
    };
    Ok(InputSpec {
        dim,
        weight_decay,
        at: raw.span().start,
    })
}

/// `k` if at most [`MAX_DIM`], else a limit error at `at`.
fn at_most_max_dim(src: &Source, at: usize, k: usize, what: &str) -> Result<usize, PlanError> {
    if k > MAX_DIM {
        return Err(src.error(
            at,
            PlanErrorKind::Limit,
            format!("{what} is {k}, the limit is {MAX_DIM}"),
        ));
    }
    Ok(k)
}

fn init_of(
    src: &Source,
    lit: &S<Lit>,
    param: &str,
    dims: &BTreeMap<String, usize>,
) -> Result<InitSpec, PlanError> {
    let at = lit.span().start;
    let fixed = |i| Ok(InitSpec::Fixed(i));
    match lit.get_ref() {
        Lit::Int(k) => fixed(Init::Const(*k as f32)),
        Lit::Float(x) => fixed(Init::Const(*x as f32)),
        Lit::Str(s) if s.starts_with("glorot(") => glorot_fans(src, at, s, param, dims),
        Lit::Str(s) => match s.as_str() {
            "glorot" => fixed(Init::Glorot),
            "zeros" => fixed(Init::Zeros),
            "ones" => fixed(Init::Const(1.0)),
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
                "init of `{param}` is {b}: expected \"glorot\", \"glorot(FAN_IN, FAN_OUT)\", \"zeros\", \"ones\" or a number"
            ),
        )),
    }
}

/// The fans of `glorot(FAN_IN, FAN_OUT)` (text `s` at `at`), each a whole number, `in`,
/// `features`, `classes`, a [dims] name or arithmetic over them, as a shape entry is.
fn glorot_fans(
    src: &Source,
    at: usize,
    s: &str,
    param: &str,
    dims: &BTreeMap<String, usize>,
) -> Result<InitSpec, PlanError> {
    let bad = |why: String| {
        err(
            src,
            at,
            format!("init `{s}` of `{param}`: expected glorot(FAN_IN, FAN_OUT), each fan a whole number ≥ 1, a dim or arithmetic over dims, e.g. glorot(16, 1) or glorot(in, hidden / heads){why}"),
        )
    };
    let Some((i, o)) = s
        .strip_prefix("glorot(")
        .and_then(|t| t.strip_suffix(')'))
        .and_then(|t| t.split_once(','))
    else {
        return Err(bad(String::new()));
    };
    let fan = |t: &str| -> Result<DimRef, PlanError> {
        let t = t.trim();
        let d = match t.parse::<i64>() {
            Ok(k) if (1..=MAX_DIM as i64).contains(&k) => DimRef::Known(k as usize),
            Ok(k) => return Err(bad(format!(": the fan {k} is outside 1 ..= {MAX_DIM}"))),
            Err(_) if is_ident(t) => {
                named_dim(t, dims).map_err(|hint| bad(format!(": unknown dim `{t}`{hint}")))?
            }
            Err(_) => dim_formula(src, at, t, param, dims)
                .map_err(|e| bad(format!(": the fan {t:?}: {}", e.what)))?,
        };
        Ok(d)
    };
    Ok(InitSpec::GlorotFans(fan(i)?, fan(o)?))
}

/// `h0`, `h1`, …: the names of the layer copies' outputs in sequence.
pub(crate) fn is_sequence_name(s: &str) -> bool {
    s.strip_prefix('h')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// `msg` at `key` when the layer is the [output] and has it: keys only a [[layer]] takes.
fn output_refuses<T>(
    src: &Source,
    output: bool,
    key: &Option<S<T>>,
    msg: &str,
) -> Result<(), PlanError> {
    match key {
        Some(k) if output => Err(err(src, k.span().start, msg)),
        _ => Ok(()),
    }
}

fn layer(
    src: &Source,
    raw: RawLayer,
    dims: &BTreeMap<String, usize>,
    output: bool,
) -> Result<Layer, PlanError> {
    output_refuses(
        src,
        output,
        &raw.repeat,
        "the [output] takes no `repeat`: repeat a [[layer]] instead",
    )?;
    output_refuses(
        src,
        output,
        &raw.share,
        "the [output] takes no `share`: it has one copy",
    )?;
    output_refuses(
        src,
        output,
        &raw.name,
        "the [output] takes no `name`: nothing reads it",
    )?;
    let repeat = match &raw.repeat {
        Some(r) => count(src, r, "repeat", 1)?,
        None => 1,
    };
    let share = raw.share.as_ref().is_some_and(|b| *b.get_ref());
    let name = match &raw.name {
        Some(n) => {
            let v = n.get_ref();
            if !is_ident(v) || RESERVED.contains(&v.as_str()) || is_sequence_name(v) {
                return Err(err(
                    src,
                    n.span().start,
                    format!("layer name `{v}`: expected letters, digits and `_`, not a built-in name (x, the adjacencies, h0, h1, …)"),
                ));
            }
            Some(v.clone())
        }
        None => None,
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
    let lasso = match &raw.lasso {
        Some(w) if *w.get_ref() < 0.0 || !w.get_ref().is_finite() => {
            return Err(err(
                src,
                w.span().start,
                format!("lasso must be ≥ 0, got {}", w.get_ref()),
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
        let init = p
            .init
            .as_ref()
            .map(|i| init_of(src, i, n, dims))
            .transpose()?;
        let dim_name = |lit: &S<Lit>| match lit.get_ref() {
            Lit::Str(s) if dims.contains_key(s) => Some(s.clone()),
            _ => None,
        };
        let weight_decay = match &p.weight_decay {
            Some(w) if *w.get_ref() < 0.0 || !w.get_ref().is_finite() => {
                return Err(err(
                    src,
                    w.span().start,
                    format!("weight_decay of `{n}` must be ≥ 0, got {}", w.get_ref()),
                ))
            }
            w => w.as_ref().map(|w| *w.get_ref() as f32),
        };
        params.push(ParamSpec {
            name: n.to_string(),
            shape,
            init,
            weight_decay,
            span: name.span(),
            dim_names: [dim_name(&p.shape[0]), dim_name(&p.shape[1])],
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
        name,
        repeat,
        share,
        dropout,
        weight_decay,
        lasso,
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

/// The value `name` stands for in `table`, or an error at `at` naming the `what` with a
/// suggestion (or the known names).
fn pick<T: Clone>(
    src: &Source,
    at: usize,
    what: &str,
    name: &str,
    table: &[(&str, T)],
) -> Result<T, PlanError> {
    if let Some((_, v)) = table.iter().find(|(n, _)| *n == name) {
        return Ok(v.clone());
    }
    let known = table.iter().map(|(n, _)| *n);
    Err(src.error(
        at,
        PlanErrorKind::Name,
        format!(
            "unknown {what} `{name}`{}",
            match did_you_mean(name, known.clone()) {
                h if h.is_empty() => format!(" (known: {})", known.collect::<Vec<_>>().join(", ")),
                h => h,
            }
        ),
    ))
}

/// The link figure named `name` (`[task] metric`, an `[eval] watch` entry: `what`), at
/// `at`: mrr, auc, ap, hits@K or pool_hits@K with K a cut-off evaluation reports.
fn link_metric(src: &Source, at: usize, name: &str, what: &str) -> Result<LinkMetric, PlanError> {
    let cut = |prefix: &str, allowed: &[usize]| -> Option<Result<usize, PlanError>> {
        let k = name.strip_prefix(prefix)?;
        Some(match k.parse::<usize>() {
            Ok(k) if allowed.contains(&k) => Ok(k),
            _ => Err(err(
                src,
                at,
                format!(
                    "{what} `{name}`: expected {prefix}K with K one of {allowed:?} (the cut-offs evaluation reports), e.g. {prefix}50"
                ),
            )),
        })
    };
    if let Some(k) = cut("pool_hits@", &crate::metrics::LINK_POOL_HITS) {
        return Ok(LinkMetric::PoolHits(k?));
    }
    if let Some(k) = cut("hits@", &crate::metrics::LINK_HITS) {
        return Ok(LinkMetric::Hits(k?));
    }
    pick(
        src,
        at,
        what,
        name,
        &[
            ("mrr", LinkMetric::Mrr),
            ("auc", LinkMetric::Auc),
            ("ap", LinkMetric::Ap),
            ("hits@50", LinkMetric::Hits(50)),
            ("pool_hits@50", LinkMetric::PoolHits(50)),
        ],
    )
}

/// `[eval]` of a plan whose task is `task`: `every`, and early stopping's `patience`,
/// `watch` (figures the task gives: the loss, accuracy and F1s of node classification, a
/// link plan's ranking figures) and `keep`.
fn eval(src: &Source, raw: Option<RawEval>, task: &Task) -> Result<Eval, PlanError> {
    let Some(raw) = raw else {
        return Ok(Eval::default());
    };
    let every = match &raw.every {
        None => 1,
        Some(e) => count(src, e, "eval every", 1)?,
    };
    let patience = match &raw.patience {
        None => None,
        Some(p) => Some(count(src, p, "eval patience", 1)?),
    };
    let link = matches!(task, Task::Link(_));
    let mut watch = Vec::new();
    for w in raw.watch.iter().flat_map(|w| w.get_ref()) {
        let (at, name) = (w.span().start, w.get_ref().as_str());
        let node = [
            ("loss", Watch::Loss),
            ("accuracy", Watch::Accuracy),
            ("f1_micro", Watch::F1Micro),
            ("f1_macro", Watch::F1Macro),
        ];
        let figure = match node.iter().find(|(n, _)| *n == name) {
            Some((_, f)) if link => {
                return Err(err(
                    src,
                    at,
                    format!(
                        "watch `{}`: a link plan is evaluated by its ranking figures (mrr, auc, ap, hits@K, pool_hits@K), not by a node figure",
                        f.name()
                    ),
                ))
            }
            Some((_, f)) => *f,
            None if link => Watch::Link(link_metric(src, at, name, "watch")?),
            None => pick(src, at, "watch", name, &node)?,
        };
        if watch.contains(&figure) {
            return Err(err(src, at, format!("watch `{name}` is named twice")));
        }
        watch.push(figure);
    }
    if let Some(w) = raw.watch.as_ref().filter(|_| watch.is_empty()) {
        return Err(err(
            src,
            w.span().start,
            "watch is empty: name the figures that count as progress (e.g. [\"loss\", \"accuracy\"]), or leave it out for the selection figure",
        ));
    }
    let keep = match &raw.keep {
        None => Keep::Best,
        Some(k) => pick(
            src,
            k.span().start,
            "keep",
            k.get_ref(),
            &[("best", Keep::Best), ("last", Keep::Last)],
        )?,
    };
    Ok(Eval {
        every,
        patience,
        watch,
        keep,
    })
}

/// `[task]`: node classification when absent or `kind = "node"` (then no other key may be
/// written: they would silently do nothing).
fn task(src: &Source, raw: Option<RawTask>) -> Result<Task, PlanError> {
    let Some(t) = raw else { return Ok(Task::Node) };
    let (kind, at) = match &t.kind {
        None => ("node", 0),
        Some(k) => (k.get_ref().as_str(), k.span().start),
    };
    let is_link = pick(
        src,
        at,
        "task kind",
        kind,
        &[("node", false), ("link", true)],
    )?;
    if !is_link {
        let written = [
            ("decoder", t.decoder.as_ref().map(|v| v.span().start)),
            (
                "decoder_hidden",
                t.decoder_hidden.as_ref().map(|v| v.span().start),
            ),
            ("loss", t.loss.as_ref().map(|v| v.span().start)),
            ("targets", t.targets.as_ref().map(|v| v.span().start)),
            ("negatives", t.negatives.as_ref().map(|v| v.span().start)),
            (
                "negative_sampler",
                t.negative_sampler.as_ref().map(|v| v.span().start),
            ),
            (
                "negative_ends",
                t.negative_ends.as_ref().map(|v| v.span().start),
            ),
            (
                "exclude_true",
                t.exclude_true.as_ref().map(|v| v.span().start),
            ),
            (
                "exclude_targets",
                t.exclude_targets.as_ref().map(|v| v.span().start),
            ),
            ("metric", t.metric.as_ref().map(|v| v.span().start)),
        ];
        if let Some((key, Some(at))) = written.iter().find(|(_, a)| a.is_some()) {
            return Err(err(
                src,
                *at,
                format!(
                    "[task] {key} belongs to link prediction: add kind = \"link\" or remove it"
                ),
            ));
        }
        return Ok(Task::Node);
    }
    let hidden = match &t.decoder_hidden {
        None => None,
        Some(h) => Some(count(src, h, "decoder_hidden", 1)?),
    };
    let decoder = match &t.decoder {
        None => Decoder::Dot,
        Some(d) => {
            let at = d.span().start;
            let name = pick(
                src,
                at,
                "decoder",
                d.get_ref(),
                &[("dot", 0), ("distmult", 1), ("mlp", 2)],
            )?;
            match name {
                0 => Decoder::Dot,
                1 => Decoder::DistMult,
                _ => Decoder::Mlp {
                    hidden: hidden.unwrap_or(256),
                },
            }
        }
    };
    if let (Some(h), false) = (&t.decoder_hidden, matches!(decoder, Decoder::Mlp { .. })) {
        return Err(err(
            src,
            h.span().start,
            format!(
                "decoder_hidden sizes the mlp decoder, the decoder is `{}`",
                decoder.name()
            ),
        ));
    }
    let loss = match &t.loss {
        None => LinkLossKind::Bce,
        Some(l) => pick(
            src,
            l.span().start,
            "link loss",
            l.get_ref(),
            &LinkLossKind::ALL,
        )?,
    };
    let fraction = match &t.targets {
        None => 1.0,
        Some(f) if *f.get_ref() > 0.0 && *f.get_ref() <= 1.0 => *f.get_ref(),
        Some(f) => {
            return Err(err(
                src,
                f.span().start,
                format!(
                    "targets is the share of a subgraph's edges scored in a step, expected a number in (0, 1], got {}",
                    f.get_ref()
                ),
            ))
        }
    };
    let negatives = match &t.negatives {
        None => 1,
        Some(k) => {
            let k_at = k.span().start;
            let k = count(src, k, "negatives", 1)?;
            if k > 1 << 16 {
                return Err(err(
                    src,
                    k_at,
                    format!("negatives per target must be ≤ 65536, got {k}"),
                ));
            }
            k
        }
    };
    let dist = match &t.negative_sampler {
        None => NegativeDist::Uniform,
        Some(d) => pick(
            src,
            d.span().start,
            "negative_sampler",
            d.get_ref(),
            &NegativeDist::ALL,
        )?,
    };
    let ends = match &t.negative_ends {
        None => NegativeEnds::Tail,
        Some(e) => pick(
            src,
            e.span().start,
            "negative_ends",
            e.get_ref(),
            &NegativeEnds::ALL,
        )?,
    };
    let exclude_targets = t.exclude_targets.as_ref().is_some_and(|b| *b.get_ref());
    if let (Some(e), true) = (&t.exclude_targets, exclude_targets && fraction >= 1.0) {
        return Err(err(
            src,
            e.span().start,
            "exclude_targets with targets = 1 leaves no edge to pass messages over: score a share of the edges (targets = 0.5) or keep them (exclude_targets = false)",
        ));
    }
    let metric = match &t.metric {
        None => LinkMetric::Mrr,
        Some(m) => link_metric(src, m.span().start, m.get_ref(), "metric")?,
    };
    Ok(Task::Link(LinkTask {
        decoder,
        loss,
        sampling: LinkSampling {
            fraction,
            negatives,
            dist,
            ends,
            exclude_true: t.exclude_true.as_ref().is_some_and(|b| *b.get_ref()),
            exclude_targets,
        },
        metric,
        at,
    }))
}

fn compute(src: &Source, raw: Option<RawCompute>) -> Result<Compute, PlanError> {
    let Some(p) = raw.and_then(|r| r.precision) else {
        return Ok(Compute::default());
    };
    let at = p.span().start;
    let table = [("f32", Precision::F32), ("bf16", Precision::Bf16)];
    Ok(Compute {
        precision: pick(src, at, "precision", p.get_ref(), &table)?,
        at: Some(at),
    })
}

fn distributed(src: &Source, raw: Option<RawDistributed>) -> Result<Distributed, PlanError> {
    let d = Distributed::default();
    let Some(r) = raw else { return Ok(d) };
    let consensus = match &r.consensus {
        None => d.consensus,
        Some(c) if c.get_ref() == "weighted" => {
            return Err(err(
                src,
                c.span().start,
                "`weighted` was saintflow's loss-variance weighting, which is not GAD's: it is now `loss_variance`; GAD's subgraph importance (Eq. 14) is `gad`, the default",
            ))
        }
        Some(c) => pick(
            src,
            c.span().start,
            "consensus",
            c.get_ref(),
            &[
                ("gad", Consensus::Gad),
                ("loss_variance", Consensus::LossVariance),
                ("mean", Consensus::Mean),
            ],
        )?,
    };
    let floor_ok = |b: f64| match consensus {
        Consensus::Gad => b > 0.0,
        _ => b >= 0.0,
    };
    let beta = match &r.beta {
        None => d.beta,
        Some(b) if b.get_ref().is_finite() && floor_ok(*b.get_ref()) => *b.get_ref(),
        Some(b) => {
            return Err(err(
                src,
                b.span().start,
                format!(
                    "beta must be a finite number {} 0, got {}",
                    if consensus == Consensus::Gad {
                        ">"
                    } else {
                        "≥"
                    },
                    b.get_ref()
                ),
            ))
        }
    };
    if let (Consensus::Mean, Some(b)) = (consensus, &r.beta) {
        return Err(err(
            src,
            b.span().start,
            "`beta` belongs to `consensus = \"gad\"` (Eq. 14's constant) and `\"loss_variance\"`; the mean consensus has none",
        ));
    }
    Ok(Distributed { consensus, beta })
}

fn typed(raw: RawPlan, src: Arc<Source>) -> Result<Plan, PlanError> {
    let s = src.as_ref();
    let mut dims = BTreeMap::new();
    let mut dim_spans = BTreeMap::new();
    for (k, v) in &raw.dims {
        let name = k.get_ref();
        if ["in", "features", "classes", "relations"].contains(&name.as_str()) || !is_ident(name) {
            return Err(err(
                s,
                k.span().start,
                format!("`{name}` cannot name a dim (`in`, `features`, `classes` and `relations` are built in; a dim name is letters, digits and `_`)"),
            ));
        }
        let what = format!("dim `{name}`");
        let value = at_most_max_dim(s, v.span().start, count(s, v, &what, 1)?, &what)?;
        dims.insert(name.clone(), value);
        dim_spans.insert(name.clone(), v.span().start);
    }
    let mut constants = BTreeMap::new();
    for (k, v) in &raw.constants {
        let name = k.get_ref();
        let at = k.span().start;
        if !is_ident(name)
            || RESERVED.contains(&name.as_str())
            || is_sequence_name(name)
            || name == "l"
            || dims.contains_key(name)
        {
            return Err(err(
                s,
                at,
                format!("`{name}` cannot name a constant: letters, digits and `_`, not a dim, `l` (the copy index), `x`, an adjacency or h0, h1, …"),
            ));
        }
        if !v.get_ref().is_finite() {
            return Err(err(
                s,
                v.span().start,
                format!(
                    "constant `{name}` is {}: expected a finite number",
                    v.get_ref()
                ),
            ));
        }
        constants.insert(name.clone(), *v.get_ref());
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
    let input = match &raw.input {
        None => None,
        Some(i) => Some(input_spec(s, i, &dims)?),
    };
    let mut layers: Vec<Layer> = Vec::new();
    let mut copies = 0usize;
    for l in raw.layer.unwrap_or_default().0 {
        let at = l
            .repeat
            .as_ref()
            .map_or(l.out.span().start, |r| r.span().start);
        let name_at = l.name.as_ref().map(|n| n.span().start);
        let l = layer(s, l, &dims, false)?;
        if let (Some(n), Some(name_at)) = (&l.name, name_at) {
            if layers.iter().any(|e| e.name.as_ref() == Some(n)) {
                return Err(err(s, name_at, format!("two layers are named `{n}`")));
            }
        }
        // Checked before lowering, which builds every copy.
        copies = copies.saturating_add(l.repeat);
        if copies > MAX_LAYERS {
            return Err(s.error(
                at,
                PlanErrorKind::Limit,
                format!(
                    "the plan has {copies} layer copies up to here (the `repeat`s of its [[layer]]s), the limit is {MAX_LAYERS}"
                ),
            ));
        }
        layers.push(l);
    }
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
            let kind = pick(
                s,
                at,
                "loss kind",
                k.get_ref(),
                &[
                    ("auto", None),
                    ("softmax_ce", Some(LossKind::SoftmaxCe)),
                    ("sigmoid_bce", Some(LossKind::SigmoidBce)),
                ],
            )?;
            (kind, at)
        }
    };
    let optimizer = optimizer(s, raw.optimizer)?;
    let mut phases = Vec::new();
    for p in &raw.phase {
        let epochs = count(s, &p.epochs, "epochs", 1)?;
        let sampler = match &p.sampler {
            None => sampler_plan.clone(),
            Some(o) => phase_sampler(s, &base_table, o)?,
        };
        let lr_factor = match &p.lr_factor {
            Some(v) if !(v.get_ref().is_finite() && *v.get_ref() > 0.0) => {
                return Err(err(
                    s,
                    v.span().start,
                    format!(
                        "a phase's lr_factor must be a number > 0, got {}",
                        v.get_ref()
                    ),
                ))
            }
            v => v.as_ref().map(|v| *v.get_ref()),
        };
        phases.push(Phase {
            epochs,
            sampler,
            lr_factor,
        });
    }
    let distributed = distributed(s, raw.distributed)?;
    let compute = compute(s, raw.compute)?;
    let task = task(s, raw.task)?;
    let eval = eval(s, raw.eval, &task)?;
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
        constants,
        dim_spans,
        sampler: sampler_plan,
        input,
        layers,
        output,
        loss,
        optimizer,
        phases,
        eval,
        distributed,
        compute,
        task,
        src,
        loss_span,
        effective: String::new(),
    })
}
