//! `--set key.path=value` overrides, applied to the spanned TOML tree (`DeTable`) before
//! it is deserialised, so an overridden value is checked like a written one and its errors
//! point past the file's end, at the override.

use std::borrow::Cow;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::suggest::did_you_mean;

use super::sampler::keeps_key;
use super::spanned::TOP_KEYS;
use super::{PlanError, PlanErrorKind, Source};

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

pub(super) fn apply_override<'i>(
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
    let keep = |k: &str| keeps_key(kind, k);
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
                // `embedding`: the `[embedding]` family's table (plan/embedding.rs).
                if i == 0 && !TOP_KEYS.contains(&p) && p != "embedding" {
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
            // A dim or constant the plan does not have is a typo: no plan reads a new one.
            let table = walk.first().map(|w| w.0);
            if walk.len() == 1
                && matches!(table, Some("dims" | "constants"))
                && !t.contains_key(last)
            {
                let known: Vec<String> = t.keys().map(|k| k.get_ref().to_string()).collect();
                let what = if table == Some("dims") {
                    "dim"
                } else {
                    "constant"
                };
                return Err(oerr(
                    last_at,
                    format!(
                        "unknown {what} `{last}`{}",
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
