//! [`SamplerConfig`]: one variant per sampler kind, holding that kind's typed parameter
//! struct; and [`KINDS`], each kind's name, doc, fields and defaults, in the order error
//! messages and help list them. The one place that imports every sampler: the plan schema,
//! `saintflow sample`, the trainer and `explain` see samplers through it. Adding a sampler
//! is its file (its struct by `sampler_params!`, its `SamplerParams` impl) and one line in
//! `samplers!` below.

use crate::sample::edge::EdgeParams;
use crate::sample::frontier::FrontierParams;
use crate::sample::node::{FullParams, NodeParams};
use crate::sample::params::{Field, FieldError, Fields, GraphFieldError, Input, SamplerParams};
use crate::sample::typed_params::{TypedEdgeParams, TypedNodeParams, TypedWalkParams};
use crate::sample::walk::WalkParams;
use crate::sample::{SampleError, Sampler};
use crate::store::format::TypesMeta;
use crate::store::{Csr, GraphStore};

/// One sampler kind as the layers above list it.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The name plan files and `--sampler` use.
    pub name: &'static str,
    /// One line for help texts.
    pub doc: &'static str,
    /// Its own fields (every kind also has the plan's `kind`, `graph`, `clip`).
    pub fields: &'static [Field],
    /// A subgraph is the whole graph.
    pub whole_graph: bool,
    /// The kind with its defaults.
    pub default: fn() -> SamplerConfig,
}

impl Kind {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
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

const fn kind<P: SamplerParams + Into<SamplerConfig>>() -> Kind {
    Kind {
        name: P::KIND,
        doc: P::DOC,
        fields: P::FIELDS,
        whole_graph: P::WHOLE_GRAPH,
        default: || P::default().into(),
    }
}

/// Writes [`SamplerConfig`] (a variant per kind), `From` each parameter struct, the
/// dispatching methods, and [`KINDS`].
macro_rules! samplers {
    ($($(#[doc = $doc:literal])* $variant:ident($params:ty),)+) => {
        /// A sampler kind with its typed parameters: what a plan's `[sampler]`, the CLI's
        /// flags and library code (`SamplerConfig::from(WalkParams { roots: 50,
        /// ..Default::default() })`) describe, and what [`build`](Self::build) turns into a
        /// sampler over a graph.
        #[derive(Clone, Debug, PartialEq)]
        pub enum SamplerConfig {
            $($(#[doc = $doc])* $variant($params),)+
        }

        $(
            impl From<$params> for SamplerConfig {
                fn from(p: $params) -> SamplerConfig {
                    SamplerConfig::$variant(p)
                }
            }
        )+

        /// Every sampler kind, in the order error messages list them (`budget` "belongs
        /// to" the first kind that has it).
        pub const KINDS: &[Kind] = &[$(kind::<$params>(),)+];

        impl SamplerConfig {
            /// Its kind's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(SamplerConfig::$variant(_) => <$params as SamplerParams>::KIND,)+
                }
            }

            /// Its kind's fields.
            pub fn fields(&self) -> &'static [Field] {
                match self {
                    $(SamplerConfig::$variant(_) => <$params as Fields>::FIELDS,)+
                }
            }

            /// Sets field `name` to a written value ([`Fields::set`] of the parameters).
            pub fn set(&mut self, name: &str, v: Input) -> Result<(), FieldError> {
                match self {
                    $(SamplerConfig::$variant(p) => p.set(name, v),)+
                }
            }

            /// The sampler over `graph`, one of `store`'s graphs
            /// ([`SamplerParams::build`]).
            pub fn build<'g>(
                &self,
                store: &'g GraphStore,
                graph: Csr<'g>,
            ) -> Result<Box<dyn Sampler + 'g>, SampleError> {
                Ok(match self {
                    $(SamplerConfig::$variant(p) => Box::new(p.build(store, graph)?),)+
                })
            }

            /// Whether its fields fit the graph ([`SamplerParams::check_graph_fields`]).
            pub fn check_graph_fields(&self, types: Option<&TypesMeta>) -> Result<(), GraphFieldError> {
                match self {
                    $(SamplerConfig::$variant(p) => p.check_graph_fields(types),)+
                }
            }

            /// Expected node draws per subgraph before dedup; `None`: the whole graph.
            pub fn expected_nodes(&self) -> Option<usize> {
                match self {
                    $(SamplerConfig::$variant(p) => p.expected_nodes(),)+
                }
            }

            /// Whether a subgraph is the whole graph.
            pub fn whole_graph(&self) -> bool {
                match self {
                    $(SamplerConfig::$variant(_) => <$params as SamplerParams>::WHOLE_GRAPH,)+
                }
            }
        }
    };
}

samplers! {
    /// Frontier sampling with the Dashboard.
    Frontier(FrontierParams),
    /// Random walks.
    Walk(WalkParams),
    /// Edges ∝ 1/deg(u) + 1/deg(v).
    Edge(EdgeParams),
    /// Nodes ∝ degree or uniform.
    Node(NodeParams),
    /// The whole graph.
    Full(FullParams),
    /// Nodes per node type (typed graphs).
    TypedNode(TypedNodeParams),
    /// Edges per relation (typed graphs).
    TypedEdge(TypedEdgeParams),
    /// Random walks from roots of chosen node types (typed graphs).
    TypedWalk(TypedWalkParams),
}

/// The kind named `name`.
pub fn find(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// The kinds' names, in [`KINDS`] order.
pub fn names() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.name)
}

/// The first kind (in [`KINDS`] order) that has a field `name`.
pub fn owner_of(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.field(name).is_some())
}

impl SamplerConfig {
    /// The kind named `name` with its defaults.
    pub fn default_of(name: &str) -> Option<SamplerConfig> {
        find(name).map(|k| (k.default)())
    }

    /// Its kind.
    pub fn kind(&self) -> &'static Kind {
        find(self.name()).expect("every variant is in KINDS")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::params::FieldType;

    /// Kinds are unique, their fields leave the plan's own keys alone, the variants are
    /// the kinds in order, and every field's default is accepted by its own `set` (the
    /// macro's defaults fit the declared ranges).
    #[test]
    fn kinds_are_unique_and_defaults_fit_their_fields() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(KINDS[..i].iter().all(|t| t.name != k.name), "{}", k.name);
            let mut c = (k.default)();
            assert_eq!(c.name(), k.name);
            assert_eq!(c.kind().name, k.name);
            assert_eq!(c.whole_graph(), k.whole_graph);
            for f in k.fields {
                assert!(!["kind", "graph", "clip"].contains(&f.name), "{}", f.name);
                assert!(!f.help().is_empty(), "{}.{}", k.name, f.name);
                if let Some(d) = (f.default)() {
                    c.set(f.name, Input::parse(&d)).unwrap();
                }
            }
            assert_eq!(c, (k.default)(), "{}", k.name);
        }
        let mut rw = SamplerConfig::default_of("rw").unwrap();
        assert_eq!(rw.set("budget", Input::Int(3)), Err(FieldError::Unknown));
        assert_eq!(
            rw.set("roots", Input::Bool(true)),
            Err(FieldError::Invalid(FieldType::Count))
        );
        rw.set("roots", Input::Int(50)).unwrap();
        assert_eq!(
            rw,
            WalkParams {
                roots: 50,
                depth: 2
            }
            .into()
        );
    }
}
