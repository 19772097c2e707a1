//! Typing: the spanned TOML ([`super::spanned`]) checked into a [`Plan`] (dims, layers
//! with their parameters and parsed `out`, loss, optimizer, phases, eval); `parse` is the
//! whole road from the virtual source to a plan. Here the plan's own tables (dims,
//! constants, layers in sequence, phases); a layer table in layer.rs, `[task]` and `[eval]`
//! in task.rs, `[optimizer]`, `[compute]` and `[distributed]` in settings.rs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use toml::de::DeTable;
use toml::Spanned;

use crate::op::builtin::LossKind;
use crate::suggest::did_you_mean;

mod layer;
mod settings;
mod task;

use layer::{input_spec, layer};
use settings::{compute, distributed, optimizer};
use task::{eval, task};

use super::overrides::apply_override;
use super::sampler::{phase_sampler, sampler};
use super::schema::SamplerPlan;
use super::schema::{Layer, Phase, Plan};
use super::spanned::{err, toml_error, RawLayer, RawPhase, RawPlan, RawTable, S};
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

fn typed(raw: RawPlan, src: Arc<Source>) -> Result<Plan, PlanError> {
    let s = src.as_ref();
    let (dims, dim_spans) = dims(s, &raw.dims)?;
    let constants = constants(s, &raw.constants, &dims)?;
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
    let layers = layers(s, raw.layer.unwrap_or_default().0, &dims)?;
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
    let phases = phases(s, &raw.phase, &sampler_plan, &base_table)?;
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

/// A number per dim name: the dims' values, or where each is written.
type ByDim = BTreeMap<String, usize>;

/// `[dims]`: each name checked (not built in, an identifier) and its value (1 to
/// [`MAX_DIM`]), with where each value is written.
fn dims(s: &Source, raw: &BTreeMap<S<String>, S<i64>>) -> Result<(ByDim, ByDim), PlanError> {
    let mut dims = BTreeMap::new();
    let mut dim_spans = BTreeMap::new();
    for (k, v) in raw {
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
    Ok((dims, dim_spans))
}

/// `[constants]`: each name an identifier that is no dim, `l` or built-in name, each value
/// finite.
fn constants(
    s: &Source,
    raw: &BTreeMap<S<String>, S<f64>>,
    dims: &BTreeMap<String, usize>,
) -> Result<BTreeMap<String, f64>, PlanError> {
    let mut constants = BTreeMap::new();
    for (k, v) in raw {
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
    Ok(constants)
}

/// The `[[layer]]`s in order, names distinct, their copies (the `repeat`s) at most
/// [`MAX_LAYERS`] in all.
fn layers(
    s: &Source,
    raw: Vec<RawLayer>,
    dims: &BTreeMap<String, usize>,
) -> Result<Vec<Layer>, PlanError> {
    let mut layers: Vec<Layer> = Vec::new();
    let mut copies = 0usize;
    for l in raw {
        let at = l
            .repeat
            .as_ref()
            .map_or(l.out.span().start, |r| r.span().start);
        let name_at = l.name.as_ref().map(|n| n.span().start);
        let l = layer(s, l, dims, false)?;
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
    Ok(layers)
}

/// The `[[phase]]`s: epochs, a sampler (the plan's, or its table with the phase's keys
/// over it) and an optional learning-rate factor > 0.
fn phases(
    s: &Source,
    raw: &[RawPhase],
    sampler_plan: &SamplerPlan,
    base_table: &RawTable,
) -> Result<Vec<Phase>, PlanError> {
    let mut phases = Vec::new();
    for p in raw {
        let epochs = count(s, &p.epochs, "epochs", 1)?;
        let sampler = match &p.sampler {
            None => sampler_plan.clone(),
            Some(o) => phase_sampler(s, base_table, o)?,
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
    Ok(phases)
}
