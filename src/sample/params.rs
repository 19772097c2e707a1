//! Typed sampler parameters: the [`SamplerParams`] trait a sampler's parameter struct
//! implements, and [`sampler_params!`](crate::sampler_params), the macro that writes the
//! struct, its `Default` and its [`Fields`] (one [`Field`] per struct field: name, doc line,
//! type; and `set`, the typed assignment of a written value) from one declaration per field.
//!
//! The plan's `[sampler]` table, `saintflow sample`'s flags and their help are generated
//! from [`Fields::FIELDS`], and written values land through [`Fields::set`], which checks
//! the field's range ([`FieldValue`]): a field is declared once — type, default, doc — and
//! the plan key, the flag and the library's struct literal all follow from it. This module
//! knows no sampler; each sampler's file declares its struct, and `sample/config.rs`
//! gathers them into [`SamplerConfig`](crate::sample::SamplerConfig).

use std::fmt::Debug;

use crate::sample::{SampleError, Sampler};
use crate::store::format::TypesMeta;
use crate::store::{Csr, GraphStore};

/// A sampler's parameter struct: its kind's name and description, and how it becomes a
/// sampler over a graph.
pub trait SamplerParams: Fields + Clone + Debug + Default + PartialEq {
    /// The name plan files (`kind = "rw"`) and `--sampler` use.
    const KIND: &'static str;
    /// One line for help texts.
    const DOC: &'static str;
    /// A subgraph is the whole graph: no normalisation, no clipping, one step per epoch.
    const WHOLE_GRAPH: bool = false;

    /// The sampler these parameters build.
    type Sampler<'g>: Sampler + 'g;

    /// The sampler over `graph`, one of `store`'s graphs (its full or training graph; the
    /// typed samplers read the store's types and relations, the others only `graph`); the
    /// cross-field checks (frontier m ≤ n, η ≥ 1) are the sampler's constructor's.
    fn build<'g>(
        &self,
        store: &'g GraphStore,
        graph: Csr<'g>,
    ) -> Result<Self::Sampler<'g>, SampleError>;

    /// Expected node draws per subgraph, before dedup (what the planner plans for);
    /// `None`: every node of the graph.
    fn expected_nodes(&self) -> Option<usize>;

    /// Whether the fields fit the graph and each other: the names they give (node types,
    /// relations) are the graph's (`types`: a typed store's; `None`: a homogeneous graph's
    /// one type and relation), and no two fields say the same thing two ways. Checked when
    /// a plan is lowered against a store, so that the error can point at the plan's value;
    /// [`build`](Self::build) checks the same before it builds.
    fn check_graph_fields(&self, _types: Option<&TypesMeta>) -> Result<(), GraphFieldError> {
        Ok(())
    }
}

/// A field that does not fit the graph (a name it lacks) or another field: which field,
/// and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphFieldError {
    /// The field (`budgets`, `root_types`).
    pub field: &'static str,
    /// What is wrong, with the nearest name and the graph's names.
    pub what: String,
}

impl GraphFieldError {
    /// As a sampler's parameter error (`typed_node `budgets`: …`).
    pub(crate) fn of(kind: &str) -> impl FnOnce(GraphFieldError) -> SampleError + '_ {
        move |e| SampleError::Param(format!("{kind} `{}`: {}", e.field, e.what))
    }
}

/// The fields of a parameter struct, written by [`sampler_params!`](crate::sampler_params).
pub trait Fields {
    /// One entry per field, in declaration order.
    const FIELDS: &'static [Field];

    /// Sets the field named `name` to a written value, checked against the field's type
    /// and range.
    fn set(&mut self, name: &str, v: Input) -> Result<(), FieldError>;
}

/// What a field holds and which written values it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// A whole number ≥ 1 (`usize`, or `Option<usize>` unset by default).
    Count,
    /// A number > 0 (`f64`; a whole number is taken as one).
    Positive,
    /// `true` or `false` (`bool`; on the command line a switch).
    Flag,
    /// Whole numbers ≥ 0 by name ([`NamedCounts`]): a plan's table `{ paper = 500 }`, a
    /// flag's `paper=500,author=200`, a Python dict.
    Counts,
    /// Names ([`Names`]): a plan's array `["paper", "author"]`, a flag's `paper,author`, a
    /// Python list.
    Names,
}

impl FieldType {
    /// What the field expects, in words (`expected …` messages).
    pub fn expected(self) -> &'static str {
        match self {
            FieldType::Count => "a whole number ≥ 1",
            FieldType::Positive => "a number > 0",
            FieldType::Flag => "true or false",
            FieldType::Counts => "a table of names to whole numbers ≥ 0, each name once",
            FieldType::Names => "a list of names, each once",
        }
    }
}

/// One field of a parameter struct.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Its name: the struct field, the plan key, and the flag (`--pin-cap` for `pin_cap`).
    pub name: &'static str,
    /// The first line of its doc comment (help texts).
    pub doc: &'static str,
    /// Its type and range.
    pub ty: FieldType,
    /// Its default as written in a plan (`None`: unset, the sampler decides).
    pub default: fn() -> Option<String>,
}

impl Field {
    /// The doc line as help text: trimmed, without its final period.
    pub fn help(&self) -> &'static str {
        let d = self.doc.trim();
        d.strip_suffix('.').unwrap_or(d)
    }

    /// The command-line flag: `--` and the name with `-` for `_`.
    pub fn flag(&self) -> String {
        format!("--{}", self.name.replace('_', "-"))
    }
}

/// Why [`Fields::set`] refused a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// The struct has no field of that name.
    Unknown,
    /// The value is of another type or out of range; expected the field's type.
    Invalid(FieldType),
}

/// A written value before it is checked against its field (a plan's TOML value, a flag's
/// text, a Python value).
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A whole number.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A table of whole numbers by name, in the order written (a plan's inline table, a
    /// Python dict).
    Counts(Vec<(String, i64)>),
    /// Names, in the order written (a plan's array of strings, a Python list).
    Names(Vec<String>),
    /// A flag's text that is no scalar (`paper=500,author=200`, `paper,author`): what a
    /// [`FieldType::Counts`] or [`FieldType::Names`] field parses; any other field refuses
    /// it.
    Text(String),
    /// Anything else (a plan's string, a table of other values): never valid.
    Other,
}

impl Input {
    /// A flag's text: a whole number, a float, `true`/`false`, or [`Input::Text`].
    pub fn parse(s: &str) -> Input {
        let s = s.trim();
        if let Ok(i) = s.parse::<i64>() {
            Input::Int(i)
        } else if let Ok(x) = s.parse::<f64>() {
            Input::Float(x)
        } else if let Ok(b) = s.parse::<bool>() {
            Input::Bool(b)
        } else {
            Input::Text(s.to_string())
        }
    }
}

/// Whole numbers ≥ 0 by name, in the order written, each name once: a typed sampler's
/// draws per node type or relation (`budgets = { paper = 500, author = 200 }`). What the
/// names mean is the sampler's: they are checked against the graph when it is built (and
/// when a plan is lowered against a store), not here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamedCounts(pub Vec<(String, usize)>);

impl NamedCounts {
    /// No name given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The sum of the counts (saturating).
    pub fn total(&self) -> usize {
        self.0.iter().fold(0usize, |a, (_, c)| a.saturating_add(*c))
    }
}

/// Names in the order written, each once (a typed walk's root types).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names(pub Vec<String>);

/// Whether `names` holds each name once, and each a name (not empty, no `,` or `=`: the
/// flag syntax's separators).
fn distinct_names<'a>(names: impl Iterator<Item = &'a str> + Clone) -> bool {
    let ok = |n: &str| !n.is_empty() && !n.contains([',', '=']);
    names.clone().all(ok)
        && names
            .clone()
            .enumerate()
            .all(|(i, n)| names.clone().take(i).all(|m| m != n))
}

/// A flag's comma-separated list, items trimmed (empty text: no item).
fn items(s: &str) -> Vec<&str> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    s.split(',').map(str::trim).collect()
}

impl FieldValue for NamedCounts {
    const TYPE: FieldType = FieldType::Counts;

    fn from_input(v: Input) -> Option<NamedCounts> {
        let pairs: Vec<(String, i64)> = match v {
            Input::Counts(p) => p,
            Input::Text(s) => items(&s)
                .into_iter()
                .map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.trim().to_string(), v.trim().parse::<i64>().ok()?))
                })
                .collect::<Option<_>>()?,
            _ => return None,
        };
        if !distinct_names(pairs.iter().map(|(k, _)| k.as_str())) {
            return None;
        }
        pairs
            .into_iter()
            .map(|(k, c)| Some((k, usize::try_from(c).ok()?)))
            .collect::<Option<_>>()
            .map(NamedCounts)
    }

    fn text(&self) -> Option<String> {
        let parts: Vec<String> = self.0.iter().map(|(k, c)| format!("{k}={c}")).collect();
        (!parts.is_empty()).then(|| parts.join(","))
    }
}

impl FieldValue for Names {
    const TYPE: FieldType = FieldType::Names;

    fn from_input(v: Input) -> Option<Names> {
        let names: Vec<String> = match v {
            Input::Names(n) => n,
            Input::Text(s) => items(&s).into_iter().map(str::to_string).collect(),
            _ => return None,
        };
        distinct_names(names.iter().map(String::as_str)).then_some(Names(names))
    }

    fn text(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| self.0.join(","))
    }
}

/// A Rust type a field may have: its [`FieldType`] and the checked conversion of a written
/// value.
pub trait FieldValue: Sized {
    /// The field type of this Rust type.
    const TYPE: FieldType;

    /// The value of a written one; `None` when it is out of range or of another type.
    fn from_input(v: Input) -> Option<Self>;

    /// The value as a plan writes it; `None` for an unset optional.
    fn text(&self) -> Option<String>;
}

impl FieldValue for usize {
    const TYPE: FieldType = FieldType::Count;

    fn from_input(v: Input) -> Option<usize> {
        match v {
            Input::Int(i) if i >= 1 => usize::try_from(i).ok(),
            _ => None,
        }
    }

    fn text(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl FieldValue for Option<usize> {
    const TYPE: FieldType = FieldType::Count;

    fn from_input(v: Input) -> Option<Option<usize>> {
        usize::from_input(v).map(Some)
    }

    fn text(&self) -> Option<String> {
        self.map(|k| k.to_string())
    }
}

impl FieldValue for f64 {
    const TYPE: FieldType = FieldType::Positive;

    fn from_input(v: Input) -> Option<f64> {
        match v {
            Input::Int(i) if i > 0 => Some(i as f64),
            Input::Float(x) if x > 0.0 => Some(x),
            _ => None,
        }
    }

    fn text(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl FieldValue for bool {
    const TYPE: FieldType = FieldType::Flag;

    fn from_input(v: Input) -> Option<bool> {
        match v {
            Input::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn text(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// Declares a sampler's parameter struct: each field with its doc comment (the first line
/// is its help text), its type (one with a [`FieldValue`]) and its default. Writes the
/// struct (each field's rustdoc ending with its default), `Default`, and [`Fields`]
/// (`FIELDS` and `set`); the sampler's file then implements [`SamplerParams`].
///
/// ```
/// saintflow::sampler_params! {
///     /// Parameters of a sampler.
///     #[derive(Clone, Copy, Debug, PartialEq)]
///     pub struct MyParams {
///         /// Nodes drawn.
///         pub budget: usize = 100,
///         /// Draw uniformly.
///         pub uniform: bool = false,
///     }
/// }
/// use saintflow::sample::params::{Fields, Input};
///
/// let mut p = MyParams { budget: 7, ..Default::default() };
/// p.set("uniform", Input::Bool(true)).unwrap();
/// assert_eq!(p, MyParams { budget: 7, uniform: true });
/// assert!(p.set("budget", Input::Int(0)).is_err());
/// assert_eq!(MyParams::FIELDS[0].help(), "Nodes drawn");
/// ```
#[macro_export]
macro_rules! sampler_params {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])+
                pub $field:ident : $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])+
                #[doc = ""]
                #[doc = concat!("Default: `", stringify!($default), "`.")]
                pub $field: $ty,
            )*
        }

        impl ::std::default::Default for $name {
            fn default() -> Self {
                $name {
                    $($field: $default,)*
                }
            }
        }

        impl $crate::sample::params::Fields for $name {
            const FIELDS: &'static [$crate::sample::params::Field] = &[
                $(
                    $crate::sample::params::Field {
                        name: stringify!($field),
                        doc: [$($doc),+][0],
                        ty: <$ty as $crate::sample::params::FieldValue>::TYPE,
                        default: || {
                            $crate::sample::params::FieldValue::text(
                                &<$name as ::std::default::Default>::default().$field,
                            )
                        },
                    },
                )*
            ];

            #[allow(unused_variables)]
            fn set(
                &mut self,
                name: &str,
                v: $crate::sample::params::Input,
            ) -> ::std::result::Result<(), $crate::sample::params::FieldError> {
                use $crate::sample::params::FieldError;
                match name {
                    $(
                        stringify!($field) => {
                            type T = $ty;
                            self.$field =
                                <T as $crate::sample::params::FieldValue>::from_input(v)
                                    .ok_or(FieldError::Invalid(
                                        <T as $crate::sample::params::FieldValue>::TYPE,
                                    ))?;
                            Ok(())
                        }
                    )*
                    _ => Err(FieldError::Unknown),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_values_check_ranges() {
        assert_eq!(usize::from_input(Input::Int(0)), None);
        assert_eq!(usize::from_input(Input::Int(-3)), None);
        assert_eq!(usize::from_input(Input::Float(2.0)), None);
        assert_eq!(usize::from_input(Input::Int(2)), Some(2));
        assert_eq!(<Option<usize>>::from_input(Input::Int(2)), Some(Some(2)));
        assert_eq!(f64::from_input(Input::Int(2)), Some(2.0));
        assert_eq!(f64::from_input(Input::Float(-1.0)), None);
        assert_eq!(f64::from_input(Input::Float(f64::NAN)), None);
        assert_eq!(bool::from_input(Input::Other), None);
        assert_eq!(bool::from_input(Input::Int(1)), None);
    }

    #[test]
    fn flag_text_parses_as_a_plan_scalar() {
        assert_eq!(Input::parse("7"), Input::Int(7));
        assert_eq!(Input::parse("-1"), Input::Int(-1));
        assert_eq!(Input::parse("2.5"), Input::Float(2.5));
        assert_eq!(Input::parse("true"), Input::Bool(true));
        assert_eq!(Input::parse("many"), Input::Text("many".into()));
    }

    #[test]
    fn named_counts_and_names_parse_from_a_plan_or_a_flag() {
        let nc = |pairs: &[(&str, usize)]| {
            NamedCounts(pairs.iter().map(|&(k, c)| (k.to_string(), c)).collect())
        };
        let table = Input::Counts(vec![("paper".into(), 500), ("word".into(), 0)]);
        assert_eq!(
            NamedCounts::from_input(table),
            Some(nc(&[("paper", 500), ("word", 0)]))
        );
        assert_eq!(
            NamedCounts::from_input(Input::parse(" paper = 500, word=0 ")),
            Some(nc(&[("paper", 500), ("word", 0)]))
        );
        assert_eq!(nc(&[("paper", 500), ("word", 0)]).total(), 500);
        assert_eq!(nc(&[("a", 1), ("b", 2)]).text().as_deref(), Some("a=1,b=2"));
        assert_eq!(NamedCounts::default().text(), None);
        // A negative count, a repeated name, a missing `=`, an empty name, a scalar.
        for bad in [
            Input::Counts(vec![("paper".into(), -1)]),
            Input::Counts(vec![("a".into(), 1), ("a".into(), 2)]),
            Input::parse("paper"),
            Input::parse("=3"),
            Input::parse("a=1,a=2"),
            Input::Int(3),
            Input::Other,
        ] {
            assert_eq!(NamedCounts::from_input(bad.clone()), None, "{bad:?}");
        }
        assert_eq!(
            Names::from_input(Input::parse("paper, author")),
            Some(Names(vec!["paper".into(), "author".into()]))
        );
        assert_eq!(
            Names::from_input(Input::Names(vec!["paper".into()])),
            Some(Names(vec!["paper".into()]))
        );
        assert_eq!(Names::from_input(Input::parse("a,a")), None);
        assert_eq!(Names::from_input(Input::parse("a,,b")), None);
        assert_eq!(Names::from_input(Input::Int(1)), None);
        // Scalars refuse text.
        assert_eq!(usize::from_input(Input::parse("paper=1")), None);
    }
}
