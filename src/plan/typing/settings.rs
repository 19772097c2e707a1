//! Typing of how a plan trains and runs: `[optimizer]` (Adam or SGD and their settings),
//! `[compute]` (precision) and `[distributed]` (consensus).

use saintflow_ops::gemm::Precision;
use saintflow_ops::optim::{Adam, Sgd};

use crate::suggest::did_you_mean;

use super::super::schema::{Compute, Consensus, Distributed, Optimizer};
use super::super::spanned::{err, RawCompute, RawDistributed, RawOptimizer, S};
use super::super::{PlanError, PlanErrorKind, Source};
use super::{pick, positive};

pub(super) fn optimizer(src: &Source, raw: Option<RawOptimizer>) -> Result<Optimizer, PlanError> {
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

pub(super) fn compute(src: &Source, raw: Option<RawCompute>) -> Result<Compute, PlanError> {
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

pub(super) fn distributed(
    src: &Source,
    raw: Option<RawDistributed>,
) -> Result<Distributed, PlanError> {
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
