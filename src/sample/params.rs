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
use crate::store::Csr;

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

    /// The sampler over `graph`; the cross-field checks (frontier m ≤ n, η ≥ 1) are the
    /// sampler's constructor's.
    fn build<'g>(&self, graph: Csr<'g>) -> Result<Self::Sampler<'g>, SampleError>;

    /// Expected node draws per subgraph, before dedup (what the planner plans for);
    /// `None`: every node of the graph.
    fn expected_nodes(&self) -> Option<usize>;
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
}

impl FieldType {
    /// What the field expects, in words (`expected …` messages).
    pub fn expected(self) -> &'static str {
        match self {
            FieldType::Count => "a whole number ≥ 1",
            FieldType::Positive => "a number > 0",
            FieldType::Flag => "true or false",
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

/// A written value before it is checked against its field (a plan's TOML scalar, a flag's
/// text).
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

impl Input {
    /// A flag's text: a whole number, a float, `true`/`false`, or [`Input::Other`].
    pub fn parse(s: &str) -> Input {
        let s = s.trim();
        if let Ok(i) = s.parse::<i64>() {
            Input::Int(i)
        } else if let Ok(x) = s.parse::<f64>() {
            Input::Float(x)
        } else if let Ok(b) = s.parse::<bool>() {
            Input::Bool(b)
        } else {
            Input::Other
        }
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
        assert_eq!(Input::parse("many"), Input::Other);
    }
}
