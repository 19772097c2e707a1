//! The `[sampler]` table (and a phase's `sampler` over it) typed into a
//! [`SamplerConfig`](crate::sample::SamplerConfig): the kinds are [`config::KINDS`], a
//! kind's keys are its parameter struct's fields, and defaults and range checks are the
//! struct's own ([`Fields::set`](crate::sample::params::Fields)); this file converts TOML
//! values into written inputs and places the answers in the source.

use toml::Spanned;

use crate::sample::config;
use crate::sample::params::{FieldError, FieldType, FieldValue, Input};
use crate::suggest::did_you_mean;

use super::schema::{SampleGraph, SamplerPlan, WrittenCount};
use super::spanned::{err, RawTable};
use super::{PlanError, PlanErrorKind, Source};

/// The keys every sampler has in a plan.
const COMMON_SAMPLER_KEYS: &[&str] = &["kind", "graph", "clip"];

/// Whether a `[sampler]` of kind `kind` keeps `key` (a common key or one of the kind's).
pub(super) fn keeps_key(kind: &str, key: &str) -> bool {
    COMMON_SAMPLER_KEYS.contains(&key) || config::find(kind).is_some_and(|s| s.field(key).is_some())
}

/// A TOML value as a written input: a scalar, a table of whole numbers (a typed sampler's
/// `budgets`), an array of strings (`root_types`).
fn input(v: &toml::Value) -> Input {
    match v {
        toml::Value::Integer(i) => Input::Int(*i),
        toml::Value::Float(x) => Input::Float(*x),
        toml::Value::Boolean(b) => Input::Bool(*b),
        toml::Value::Table(t) => t
            .iter()
            .map(|(k, v)| v.as_integer().map(|c| (k.clone(), c)))
            .collect::<Option<_>>()
            .map_or(Input::Other, Input::Counts),
        toml::Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .map_or(Input::Other, Input::Names),
        _ => Input::Other,
    }
}

/// The sampler of a merged `[sampler]` table (`table_at`: where to point when `kind` is
/// missing).
pub(super) fn sampler(
    src: &Source,
    t: &RawTable,
    table_at: usize,
) -> Result<SamplerPlan, PlanError> {
    let known = || config::names().collect::<Vec<_>>().join(", ");
    let get = |k: &str| t.get(k);
    let kind_v = get("kind").ok_or_else(|| {
        err(
            src,
            table_at,
            format!("the sampler has no `kind`: expected one of {}", known()),
        )
    })?;
    let name = kind_v
        .get_ref()
        .as_str()
        .ok_or_else(|| err(src, kind_v.span().start, "sampler kind: expected a string"))?;
    let Some(row) = config::find(name) else {
        return Err(src.error(
            kind_v.span().start,
            PlanErrorKind::Name,
            format!(
                "unknown sampler kind `{name}`{}",
                match did_you_mean(name, config::names()) {
                    h if h.is_empty() => format!(" (known: {})", known()),
                    h => h,
                }
            ),
        ));
    };
    for (k, v) in t {
        let k = k.get_ref().as_str();
        if !keeps_key(name, k) {
            let all: Vec<&str> = COMMON_SAMPLER_KEYS
                .iter()
                .copied()
                .chain(row.fields.iter().map(|f| f.name))
                .collect();
            let hint = did_you_mean(k, all.iter().copied());
            let other = config::owner_of(k)
                .map(|s| format!(" (`{k}` belongs to the `{}` sampler)", s.name))
                .unwrap_or_default();
            return Err(err(
                src,
                v.span().start,
                format!(
                    "the `{name}` sampler has no key `{k}`{hint}{other}; its keys: {}",
                    all.join(", ")
                ),
            ));
        }
    }
    let mut kind = (row.default)();
    let mut written = Vec::new();
    let mut spans = Vec::new();
    for field in row.fields {
        let Some(v) = get(field.name) else { continue };
        spans.push((field.name, v.span().start));
        match kind.set(field.name, input(v.get_ref())) {
            Ok(()) => {
                // A table's largest count stands for it (the memory check's placement).
                let count = match (field.ty, v.get_ref()) {
                    (FieldType::Count, toml::Value::Integer(n)) => Some(*n),
                    (FieldType::Counts, toml::Value::Table(t)) => {
                        t.values().filter_map(toml::Value::as_integer).max()
                    }
                    _ => None,
                };
                if let Some(n) = count {
                    written.push(WrittenCount {
                        key: field.name,
                        value: n as u64,
                        at: v.span().start,
                    });
                }
            }
            Err(FieldError::Invalid(ty)) => {
                let got = match ty {
                    // The flag's message never named the value.
                    FieldType::Flag => String::new(),
                    _ => format!(", got {}", v.get_ref()),
                };
                return Err(err(
                    src,
                    v.span().start,
                    format!("sampler `{}`: expected {}{got}", field.name, ty.expected()),
                ));
            }
            Err(FieldError::Unknown) => unreachable!("`{}` is a field of its kind", field.name),
        }
    }
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
    let clip = match get("clip") {
        None => row.default_clip(),
        Some(v) => match usize::from_input(input(v.get_ref())) {
            Some(c) => c,
            None => {
                return Err(err(
                    src,
                    v.span().start,
                    format!(
                        "sampler `clip`: expected {}, got {}",
                        FieldType::Count.expected(),
                        v.get_ref()
                    ),
                ))
            }
        },
    };
    Ok(SamplerPlan {
        kind,
        graph,
        clip,
        written,
        spans,
    })
}

/// A phase's sampler: its `sampler` table over the plan's `[sampler]` (`base`). A phase
/// naming another kind keeps only the keys every sampler has from the base.
pub(super) fn phase_sampler(
    src: &Source,
    base: &RawTable,
    phase: &Spanned<RawTable>,
) -> Result<SamplerPlan, PlanError> {
    let mut merged = base.clone();
    let new_kind = phase.get_ref().get("kind").map(|k| k.get_ref().clone());
    if new_kind.is_some() && new_kind.as_ref() != base.get("kind").map(|k| k.get_ref()) {
        merged.retain(|k, _| {
            k.get_ref() != "kind" && COMMON_SAMPLER_KEYS.contains(&k.get_ref().as_str())
        });
    }
    for (k, v) in phase.get_ref() {
        merged.insert(k.clone(), v.clone());
    }
    sampler(src, &merged, phase.span().start)
}
