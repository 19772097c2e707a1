//! The plan file as serde sees it: `Raw*` structs of the TOML with every value that can be
//! wrong kept with its span, and serde's messages rewritten into the plan vocabulary.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use crate::suggest::did_you_mean;

use super::{PlanError, PlanErrorKind, Source};

/// A schema error at byte `at` of `src` (typing's and the sampler tables' checks).
pub(super) fn err(src: &Source, at: usize, what: impl Into<String>) -> PlanError {
    src.error(at, PlanErrorKind::Schema, what)
}

pub(super) type S<T> = Spanned<T>;

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
pub(super) struct RawParam {
    pub(super) shape: Vec<S<Lit>>,
    pub(super) init: Option<S<Lit>>,
    pub(super) weight_decay: Option<S<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParamTable {
    shape: Vec<S<Lit>>,
    init: Option<S<Lit>>,
    weight_decay: Option<S<f64>>,
}

impl<'de> Deserialize<'de> for RawParam {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<RawParam, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawParam;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a shape `[rows, cols]` or a table `{ shape = [rows, cols], init = \"glorot\", weight_decay = 0.0 }`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawParam, A::Error> {
                let mut shape = Vec::new();
                while let Some(x) = seq.next_element()? {
                    shape.push(x);
                }
                Ok(RawParam {
                    shape,
                    init: None,
                    weight_decay: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawParam, A::Error> {
                let t = RawParamTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawParam {
                    shape: t.shape,
                    init: t.init,
                    weight_decay: t.weight_decay,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A `[[layer]]` or the `[output]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLayer {
    pub(super) name: Option<S<String>>,
    pub(super) repeat: Option<S<i64>>,
    pub(super) share: Option<S<bool>>,
    pub(super) dropout: Option<S<f64>>,
    pub(super) weight_decay: Option<S<f64>>,
    pub(super) lasso: Option<S<f64>>,
    #[serde(default)]
    pub(super) params: BTreeMap<S<String>, S<RawParam>>,
    pub(super) out: S<String>,
}

/// `[layer]` (one table) or `[[layer]]` (an array of tables).
#[derive(Debug, Default)]
pub(super) struct OneOrMany(pub(super) Vec<RawLayer>);

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

pub(super) type RawTable = BTreeMap<S<String>, S<toml::Value>>;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoss {
    pub(super) kind: Option<S<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOptimizer {
    pub(super) kind: Option<S<String>>,
    pub(super) lr: Option<S<f64>>,
    pub(super) weight_decay: Option<S<f64>>,
    pub(super) beta1: Option<S<f64>>,
    pub(super) beta2: Option<S<f64>>,
    pub(super) eps: Option<S<f64>>,
    pub(super) momentum: Option<S<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPhase {
    pub(super) epochs: S<i64>,
    pub(super) lr_factor: Option<S<f64>>,
    pub(super) sampler: Option<S<RawTable>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEval {
    pub(super) every: Option<S<i64>>,
    pub(super) patience: Option<S<i64>>,
    pub(super) watch: Option<S<Vec<S<String>>>>,
    pub(super) keep: Option<S<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDistributed {
    pub(super) consensus: Option<S<String>>,
    pub(super) beta: Option<S<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) kind: Option<S<String>>,
    pub(super) decoder: Option<S<String>>,
    pub(super) decoder_hidden: Option<S<i64>>,
    pub(super) loss: Option<S<String>>,
    pub(super) targets: Option<S<f64>>,
    pub(super) negatives: Option<S<i64>>,
    pub(super) negative_sampler: Option<S<String>>,
    pub(super) negative_ends: Option<S<String>>,
    pub(super) exclude_true: Option<S<bool>>,
    pub(super) exclude_targets: Option<S<bool>>,
    pub(super) metric: Option<S<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCompute {
    pub(super) precision: Option<S<String>>,
}

/// `[input]` (issue 57): the layer-0 input per node type.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInput {
    pub(super) dim: S<Lit>,
    pub(super) weight_decay: Option<S<f64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlan {
    pub(super) name: Option<S<String>>,
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) dims: BTreeMap<S<String>, S<i64>>,
    #[serde(default)]
    pub(super) constants: BTreeMap<S<String>, S<f64>>,
    pub(super) sampler: Option<S<RawTable>>,
    pub(super) input: Option<S<RawInput>>,
    pub(super) layer: Option<OneOrMany>,
    pub(super) output: Option<RawLayer>,
    pub(super) loss: Option<RawLoss>,
    pub(super) optimizer: Option<RawOptimizer>,
    #[serde(default)]
    pub(super) phase: Vec<RawPhase>,
    pub(super) eval: Option<RawEval>,
    pub(super) distributed: Option<RawDistributed>,
    pub(super) compute: Option<RawCompute>,
    pub(super) task: Option<RawTask>,
}

pub(super) const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "dims",
    "constants",
    "sampler",
    "input",
    "layer",
    "output",
    "loss",
    "optimizer",
    "phase",
    "eval",
    "distributed",
    "compute",
    "task",
];

/// Rewrites serde's messages into the plan vocabulary, with suggestions.
pub(super) fn toml_error(src: &Source, e: &toml::de::Error, kind: PlanErrorKind) -> PlanError {
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
