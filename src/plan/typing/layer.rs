//! Typing of a layer table (`[[layer]]`, `[output]`) and of `[input]`: its keys, its
//! parameters' shapes (dims, numbers, formulas) and initialisations, its `out` parsed.

use std::collections::BTreeMap;

use crate::ir::Init;
use crate::suggest::did_you_mean;

use super::super::expr::{self, ExprKind};
use super::super::outpos::out_map;
use super::super::schema::{DimFormula, DimRef, InitSpec, InputSpec, Layer, ParamSpec};
use super::super::spanned::{err, Lit, RawLayer, RawParam, S};
use super::super::{PlanError, PlanErrorKind, Source, MAX_DIM};
use super::{at_most_max_dim, count, is_ident, is_sequence_name, RESERVED};

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
pub(super) fn input_spec(
    src: &Source,
    raw: &S<super::super::spanned::RawInput>,
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

pub(super) fn layer(
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
    let params = param_specs(src, &raw.params, dims)?;
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

/// A layer's `params`: names (identifiers, not built in), shapes `[rows, cols]` of dims,
/// numbers or formulas, initialisations and weight decays.
fn param_specs(
    src: &Source,
    raw: &BTreeMap<S<String>, S<RawParam>>,
    dims: &BTreeMap<String, usize>,
) -> Result<Vec<ParamSpec>, PlanError> {
    let mut params = Vec::new();
    for (name, p) in raw {
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
    Ok(params)
}
