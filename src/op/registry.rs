//! The op registry: plan files name ops, the registry makes them. Built-in and user ops
//! register the same way, explicitly (`registry.register("user.gelu", ...)`); an unknown
//! name or attribute is an error that lists the nearest known names.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{Op, OpError};
use crate::suggest::did_you_mean;

/// An attribute value as a plan file writes it (`p=0.5`, `kind="sym"`, `bias=true`).
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for Attr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attr::Num(x) => write!(f, "{x}"),
            Attr::Str(s) => write!(f, "{s:?}"),
            Attr::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Named attributes of one op application.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs(pub BTreeMap<String, Attr>);

impl Attrs {
    /// No attributes.
    pub fn new() -> Attrs {
        Attrs::default()
    }

    /// Adds one (builder style).
    pub fn with(mut self, name: &str, value: Attr) -> Attrs {
        self.0.insert(name.to_string(), value);
        self
    }

    /// A number attribute, or `default` when absent.
    pub fn num(&self, name: &str, default: f64) -> Result<f64, OpError> {
        match self.0.get(name) {
            None => Ok(default),
            Some(Attr::Num(x)) => Ok(*x),
            Some(other) => Err(OpError::Attr {
                name: name.into(),
                what: format!("expected a number, got {other}"),
            }),
        }
    }

    /// A whole-number attribute ≥ `min`, or `default` when absent.
    pub fn count(&self, name: &str, default: usize, min: usize) -> Result<usize, OpError> {
        let x = self.num(name, default as f64)?;
        if x.fract() != 0.0 || x < min as f64 || x > u32::MAX as f64 {
            return Err(OpError::Attr {
                name: name.into(),
                what: format!("expected a whole number ≥ {min}, got {x}"),
            });
        }
        Ok(x as usize)
    }

    /// A boolean attribute, or `default` when absent.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, OpError> {
        match self.0.get(name) {
            None => Ok(default),
            Some(Attr::Bool(b)) => Ok(*b),
            Some(other) => Err(OpError::Attr {
                name: name.into(),
                what: format!("expected true or false, got {other}"),
            }),
        }
    }

    /// A string attribute, or `default` when absent.
    pub fn string(&self, name: &str, default: &str) -> Result<String, OpError> {
        match self.0.get(name) {
            None => Ok(default.to_string()),
            Some(Attr::Str(s)) => Ok(s.clone()),
            Some(other) => Err(OpError::Attr {
                name: name.into(),
                what: format!("expected a string, got {other}"),
            }),
        }
    }
}

/// Makes an op from its attributes.
pub type Constructor = Arc<dyn Fn(&Attrs) -> Result<Arc<dyn Op>, OpError> + Send + Sync>;

/// One registered op.
#[derive(Clone)]
pub struct OpSpec {
    /// Attribute names accepted.
    pub attrs: Vec<String>,
    /// One line for `--help`-style listings: signature and meaning.
    pub doc: String,
    /// The constructor.
    pub make: Constructor,
}

/// Ops by name.
#[derive(Clone, Default)]
pub struct Registry {
    specs: BTreeMap<String, OpSpec>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.specs.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry holding every built-in op.
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        super::builtin::register(&mut r);
        r
    }

    /// Registers `name`; an existing name is an error (no silent shadowing of built-ins).
    pub fn register(
        &mut self,
        name: &str,
        attrs: &[&str],
        doc: &str,
        make: impl Fn(&Attrs) -> Result<Arc<dyn Op>, OpError> + Send + Sync + 'static,
    ) -> Result<(), OpError> {
        if self.specs.contains_key(name) {
            return Err(OpError::args(format!("op {name} is already registered")));
        }
        self.specs.insert(
            name.to_string(),
            OpSpec {
                attrs: attrs.iter().map(|s| s.to_string()).collect(),
                doc: doc.to_string(),
                make: Arc::new(make),
            },
        );
        Ok(())
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.specs.contains_key(name)
    }

    /// A registered op's spec.
    pub fn spec(&self, name: &str) -> Option<&OpSpec> {
        self.specs.get(name)
    }

    /// Every name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }

    /// The catalogue as a Markdown table (op, attributes, what it computes), one row per
    /// op in name order: what `saintflow ops --markdown` prints and plans/README.md holds.
    pub fn catalogue_markdown(&self) -> String {
        let mut out = String::from("| op | attributes | what it computes |\n|---|---|---|\n");
        for (name, spec) in &self.specs {
            let attrs = if spec.attrs.is_empty() {
                "—".to_string()
            } else {
                spec.attrs
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let doc = spec.doc.replace('|', "\\|");
            out.push_str(&format!("| `{name}` | {attrs} | {doc} |\n"));
        }
        out
    }

    /// "unknown op `name`" with the nearest known names, or, when none is near, every
    /// name (a short list) and where the catalogue is.
    pub fn unknown(&self, name: &str) -> String {
        let near = did_you_mean(name, self.names());
        if !near.is_empty() {
            return format!("unknown op `{name}`{near}");
        }
        let all: Vec<&str> = self.names().collect();
        format!(
            "unknown op `{name}`; the ops are {} (`saintflow ops` lists them with their attributes)",
            all.join(", ")
        )
    }

    /// Makes op `name` with `attrs`: unknown names and attributes are errors listing the
    /// nearest known ones (or all of them, when none is near).
    pub fn make(&self, name: &str, attrs: &Attrs) -> Result<Arc<dyn Op>, OpError> {
        let Some(spec) = self.specs.get(name) else {
            return Err(OpError::args(self.unknown(name)));
        };
        for key in attrs.0.keys() {
            if !spec.attrs.iter().any(|a| a == key) {
                let known = if spec.attrs.is_empty() {
                    " (it takes none)".to_string()
                } else {
                    let near = did_you_mean(key, spec.attrs.iter().map(String::as_str));
                    let all: Vec<String> = spec.attrs.iter().map(|a| format!("`{a}`")).collect();
                    format!("{near} (its attributes: {}; {})", all.join(", "), spec.doc)
                };
                return Err(OpError::Attr {
                    name: key.clone(),
                    what: format!("{name} has no attribute `{key}`{known}"),
                });
            }
        }
        (spec.make)(attrs)
    }
}
