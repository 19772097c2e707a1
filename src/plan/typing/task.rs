//! Typing of `[task]` (node classification, or link prediction: decoder, loss, how
//! targets and negatives are sampled, metric) and of `[eval]`, which the task shapes.

use crate::op::builtin::LinkLossKind;
use crate::sample::{LinkSampling, NegativeDist, NegativeEnds};

use super::super::schema::{Decoder, Eval, Keep, LinkMetric, LinkTask, Task, Watch};
use super::super::spanned::{err, RawEval, RawTask};
use super::super::{PlanError, Source};
use super::{count, pick};

/// `[task]`: node classification when absent or `kind = "node"` (then no other key may be
/// written: they would silently do nothing).
pub(super) fn task(src: &Source, raw: Option<RawTask>) -> Result<Task, PlanError> {
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
        no_link_keys(src, &t)?;
        return Ok(Task::Node);
    }
    let decoder = decoder(src, &t)?;
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
    let sampling = sampling(src, &t)?;
    let metric = match &t.metric {
        None => LinkMetric::Mrr,
        Some(m) => link_metric(src, m.span().start, m.get_ref(), "metric")?,
    };
    Ok(Task::Link(LinkTask {
        decoder,
        loss,
        sampling,
        metric,
        at,
    }))
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
pub(super) fn eval(src: &Source, raw: Option<RawEval>, task: &Task) -> Result<Eval, PlanError> {
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

/// A node task's table: any key of link prediction is an error naming it.
fn no_link_keys(src: &Source, t: &RawTask) -> Result<(), PlanError> {
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
            format!("[task] {key} belongs to link prediction: add kind = \"link\" or remove it"),
        ));
    }
    Ok(())
}

/// `decoder` (dot, distmult or mlp) and `decoder_hidden`, which only the mlp takes.
fn decoder(src: &Source, t: &RawTask) -> Result<Decoder, PlanError> {
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
    Ok(decoder)
}

/// How a link task samples a step's targets: `targets`, `negatives`, `negative_sampler`,
/// `negative_ends`, `exclude_true`, `exclude_targets`.
fn sampling(src: &Source, t: &RawTask) -> Result<LinkSampling, PlanError> {
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
    Ok(LinkSampling {
        fraction,
        negatives,
        dist,
        ends,
        exclude_true: t.exclude_true.as_ref().is_some_and(|b| *b.get_ref()),
        exclude_targets,
    })
}
