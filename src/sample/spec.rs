//! The sampler table: one [`SamplerSpec`] row per sampler kind (name, keys with their types,
//! defaults and docs, `build`, `expected_nodes`), read by the plan schema (`[sampler]` keys,
//! defaults, checks, `--set sampler.kind=`), `saintflow sample` (flags to keys by name),
//! the trainer and `explain`. Adding a sampler is its file in `sample/` with a `SPEC` and
//! one row in [`SAMPLERS`].
//!
//! The table speaks plain values ([`Input`] in, [`Value`] out), never TOML or clap: the
//! layers above convert into it and place its errors.

use std::fmt;

use crate::sample::{SampleError, Sampler};
use crate::store::Csr;

/// Every sampler, in the order error messages list them (`budget` "belongs to" the first
/// kind that has it).
pub const SAMPLERS: &[&SamplerSpec] = &[
    &super::frontier::SPEC,
    &super::walk::SPEC,
    &super::edge::SPEC,
    &super::node::SPEC,
    &super::node::FULL_SPEC,
];

/// The row named `name`.
pub fn find(name: &str) -> Option<&'static SamplerSpec> {
    SAMPLERS.iter().copied().find(|s| s.name == name)
}

/// The kinds' names, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    SAMPLERS.iter().map(|s| s.name)
}

/// The first kind (in table order) that has a key `key`.
pub fn owner_of(key: &str) -> Option<&'static SamplerSpec> {
    SAMPLERS.iter().copied().find(|s| s.key(key).is_some())
}

/// What a key holds and which values it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// A whole number ≥ 1.
    Count,
    /// A number > 0 (a whole number is taken as one).
    Positive,
    /// `true` or `false`.
    Flag,
}

impl KeyType {
    /// What the key expects, in words (`expected …` messages).
    pub fn expected(self) -> &'static str {
        match self {
            KeyType::Count => "a whole number ≥ 1",
            KeyType::Positive => "a number > 0",
            KeyType::Flag => "true or false",
        }
    }

    /// The checked value of a written one, or `None` when it is out of range or of
    /// another type.
    pub fn check(self, v: &Input) -> Option<Value> {
        match (self, *v) {
            (KeyType::Count, Input::Int(i)) if i >= 1 => Some(Value::Count(i as usize)),
            (KeyType::Positive, Input::Int(i)) if i > 0 => Some(Value::Number(i as f64)),
            (KeyType::Positive, Input::Float(x)) if x > 0.0 => Some(Value::Number(x)),
            (KeyType::Flag, Input::Bool(b)) => Some(Value::Flag(b)),
            _ => None,
        }
    }
}

/// A written value before it is checked against its key (a plan's TOML scalar, a flag).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Input {
    /// A whole number.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// Anything else (a string, an array, a table): never valid.
    Other,
}

/// A checked key value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Of a [`KeyType::Count`] key.
    Count(usize),
    /// Of a [`KeyType::Positive`] key.
    Number(f64),
    /// Of a [`KeyType::Flag`] key.
    Flag(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Count(k) => write!(f, "{k}"),
            Value::Number(x) => write!(f, "{x}"),
            Value::Flag(b) => write!(f, "{b}"),
        }
    }
}

/// One key of a sampler.
#[derive(Debug)]
pub struct Key {
    /// Its name in a plan's `[sampler]` (the CLI flag is `--name` with `-` for `_`).
    pub name: &'static str,
    /// Its type and range.
    pub ty: KeyType,
    /// Its default; `None`: unset unless written (the sampler decides, e.g. `pin_cap`).
    pub default: Option<Value>,
    /// One line for help texts.
    pub doc: &'static str,
}

/// Builds a sampler of a kind over a graph from its key values.
pub type BuildFn = for<'g> fn(Csr<'g>, &SamplerKind) -> Result<Box<dyn Sampler + 'g>, SampleError>;

/// One row of the table: everything the layers above know about a sampler kind.
#[derive(Debug)]
pub struct SamplerSpec {
    /// The name plan files and `--sampler` use.
    pub name: &'static str,
    /// One line for help texts.
    pub doc: &'static str,
    /// Its own keys (every kind also has the plan's `kind`, `graph`, `clip`).
    pub keys: &'static [Key],
    /// A subgraph is the whole graph: no normalisation, no clipping, one step per epoch.
    pub whole_graph: bool,
    /// The sampler over a graph.
    pub build: BuildFn,
    /// Expected node draws per subgraph, before dedup (what the planner plans for);
    /// `None`: every node of the graph.
    pub expected_nodes: fn(&SamplerKind) -> Option<usize>,
}

impl SamplerSpec {
    /// The key named `name`, with its index.
    pub fn key(&self, name: &str) -> Option<(usize, &'static Key)> {
        self.keys.iter().enumerate().find(|(_, k)| k.name == name)
    }

    /// The default clip: 16 f32 per cache line, off for whole graphs.
    pub fn default_clip(&self) -> usize {
        if self.whole_graph {
            1
        } else {
            16
        }
    }
}

/// A sampler kind with its key values (defaults where not set): what a plan's `[sampler]`
/// or the CLI's flags are typed into.
#[derive(Clone)]
pub struct SamplerKind {
    spec: &'static SamplerSpec,
    /// Aligned with `spec.keys`.
    values: Vec<Option<Value>>,
}

impl SamplerKind {
    /// The kind named `name` with its defaults.
    pub fn new(name: &str) -> Option<SamplerKind> {
        find(name).map(SamplerKind::of)
    }

    /// The kind of `spec` with its defaults.
    pub fn of(spec: &'static SamplerSpec) -> SamplerKind {
        SamplerKind {
            spec,
            values: spec.keys.iter().map(|k| k.default).collect(),
        }
    }

    /// Its row.
    pub fn spec(&self) -> &'static SamplerSpec {
        self.spec
    }

    /// The name plan files use.
    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// Sets key `key` to `v`: an error when the kind has no such key or `v` is of another
    /// type than the key's (range checks are [`KeyType::check`]'s).
    pub fn set(&mut self, key: &str, v: Value) -> Result<(), SampleError> {
        let (i, k) = self.spec.key(key).ok_or_else(|| {
            SampleError::Param(format!("the `{}` sampler has no key `{key}`", self.name()))
        })?;
        let fits = matches!(
            (k.ty, v),
            (KeyType::Count, Value::Count(_))
                | (KeyType::Positive, Value::Number(_))
                | (KeyType::Flag, Value::Flag(_))
        );
        if !fits {
            return Err(SampleError::Param(format!(
                "{}: `{key}` expected {}, got {v}",
                self.name(),
                k.ty.expected()
            )));
        }
        self.values[i] = Some(v);
        Ok(())
    }

    /// [`set`](Self::set), chained.
    pub fn with(mut self, key: &str, v: Value) -> Result<SamplerKind, SampleError> {
        self.set(key, v)?;
        Ok(self)
    }

    /// The value of `key` (`None`: unset and without a default).
    ///
    /// # Panics
    /// When the kind has no key `key`: `build` and `expected_nodes` read their own keys.
    pub fn get(&self, key: &str) -> Option<Value> {
        let (i, _) = self
            .spec
            .key(key)
            .unwrap_or_else(|| panic!("the `{}` sampler has no key `{key}`", self.name()));
        self.values[i]
    }

    /// The keys with their values, in the row's order.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, Option<Value>)> + '_ {
        self.spec
            .keys
            .iter()
            .map(|k| k.name)
            .zip(self.values.iter().copied())
    }

    /// A count key's value (`None`: unset).
    pub fn opt_count(&self, key: &str) -> Option<usize> {
        match self.get(key) {
            Some(Value::Count(k)) => Some(k),
            None => None,
            other => panic!("`{key}` is not a count: {other:?}"),
        }
    }

    /// A count key's value.
    pub fn count(&self, key: &str) -> usize {
        self.opt_count(key)
            .unwrap_or_else(|| panic!("`{key}` has no value"))
    }

    /// A number key's value.
    pub fn number(&self, key: &str) -> f64 {
        match self.get(key) {
            Some(Value::Number(x)) => x,
            other => panic!("`{key}` is not a number: {other:?}"),
        }
    }

    /// A flag key's value.
    pub fn flag(&self, key: &str) -> bool {
        match self.get(key) {
            Some(Value::Flag(b)) => b,
            other => panic!("`{key}` is not a flag: {other:?}"),
        }
    }

    /// The sampler over `graph`.
    pub fn build<'g>(&self, graph: Csr<'g>) -> Result<Box<dyn Sampler + 'g>, SampleError> {
        (self.spec.build)(graph, self)
    }

    /// Expected node draws per subgraph before dedup; `None`: the whole graph.
    pub fn expected_nodes(&self) -> Option<usize> {
        (self.spec.expected_nodes)(self)
    }

    /// Whether a subgraph is the whole graph.
    pub fn whole_graph(&self) -> bool {
        self.spec.whole_graph
    }
}

impl PartialEq for SamplerKind {
    fn eq(&self, other: &SamplerKind) -> bool {
        self.spec.name == other.spec.name && self.values == other.values
    }
}

impl fmt::Debug for SamplerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct(self.name());
        for (k, v) in self.values() {
            d.field(k, &v);
        }
        d.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unique_and_defaults_fit_their_types() {
        for (i, s) in SAMPLERS.iter().enumerate() {
            assert!(SAMPLERS[..i].iter().all(|t| t.name != s.name), "{}", s.name);
            let mut kind = SamplerKind::of(s);
            for k in s.keys {
                assert!(!["kind", "graph", "clip"].contains(&k.name), "{}", k.name);
                if let Some(d) = k.default {
                    kind.set(k.name, d).unwrap();
                }
            }
        }
        let e = SamplerKind::new("rw")
            .unwrap()
            .with("budget", Value::Count(3));
        assert!(e.is_err());
        let e = SamplerKind::new("rw")
            .unwrap()
            .with("roots", Value::Flag(true));
        assert!(e.is_err());
    }

    #[test]
    fn key_types_check_ranges() {
        assert_eq!(KeyType::Count.check(&Input::Int(0)), None);
        assert_eq!(KeyType::Count.check(&Input::Float(2.0)), None);
        assert_eq!(KeyType::Count.check(&Input::Int(2)), Some(Value::Count(2)));
        assert_eq!(
            KeyType::Positive.check(&Input::Int(2)),
            Some(Value::Number(2.0))
        );
        assert_eq!(KeyType::Positive.check(&Input::Float(-1.0)), None);
        assert_eq!(KeyType::Flag.check(&Input::Other), None);
    }
}
