//! saintflow: training Graph Neural Networks by graph sampling (the GraphSAINT line of
//! work, Zeng et al., IPDPS 2019 and JPDC 2021) on one machine's cores, over memory-mapped
//! on-disk graphs. Every training step samples a small connected subgraph and trains the
//! complete GNN on it; the step is a DAG of ops that a planner optimises and a
//! work-stealing executor runs. GNN variants are plan files (`plans/`); new ops come
//! through the [`op::Op`] trait and a [`op::Registry`].
//!
//! # A tour
//!
//! Make a graph store (here a small generated one; `saintflow import` reads GraphSAINT
//! datasets and edge lists), open it — a memory map, never loaded whole — and sample
//! subgraphs from it with any sampler: each has a typed parameter struct
//! ([`sample::FrontierParams`], [`sample::WalkParams`], ...), and [`sample::SamplerConfig`]
//! (what a plan's `[sampler]` and `saintflow sample`'s flags are typed into) builds it:
//!
//! ```
//! use saintflow::prelude::*;
//! use saintflow::progress::Progress;
//! use saintflow::sample::{sample_subgraph, FrontierParams, SamplerConfig, SamplerParams, WalkParams};
//! use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};
//!
//! # fn main() -> saintflow::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("planted.sf");
//! let spec = KroneckerSpec {
//!     scale: 9, // 512 nodes
//!     degree: 8.0,
//!     n_features: 8,
//!     n_classes: 4,
//!     planted: Some(Planted::default()), // labels follow communities
//!     ..KroneckerSpec::default()
//! };
//! generate_kronecker(&spec, &path, false, &Progress::hidden())?;
//!
//! let store = GraphStore::open(&path)?;
//! assert_eq!(store.n_nodes(), 512);
//! let x0: &[f32] = store.feature_row(0)?;
//! assert_eq!(x0.len(), 8);
//! let train: Vec<u32> = store.nodes_with_role(Role::Train);
//!
//! // 50 random walks of length 2 from the training graph; subgraph i depends only on
//! // (seed, i). Node counts are clipped to a multiple of 16.
//! let rw = SamplerConfig::from(WalkParams {
//!     roots: 50,
//!     ..Default::default() // depth 2
//! });
//! assert_eq!(rw.expected_nodes(), Some(150));
//! let sampler = rw.build(&store, store.train())?;
//! let sub = sample_subgraph(&*sampler, 7, 0, 16)?;
//! assert!(sub.n_nodes() > 0 && sub.n_nodes() % 16 == 0);
//! assert!(sub.nodes.iter().all(|v| train.binary_search(v).is_ok()));
//!
//! // Or a sampler's own type, without the enum: a frontier of 20 nodes grown to 100.
//! let frontier = FrontierParams { frontier: 20, budget: 100, ..Default::default() }
//!     .build(&store, store.train())?;
//! assert!(sample_subgraph(&frontier, 7, 0, 1)?.n_nodes() <= 100);
//! # Ok(())
//! # }
//! ```
//!
//! Train a shipped plan on it: [`train::TrainOptions`] is a builder over the plan and the
//! store with defaults for everything else (seed 0, the plan's epochs, the built-in ops,
//! the executor on every core, no checkpoint, no log):
//!
//! ```
//! # use saintflow::prelude::*;
//! # use saintflow::progress::Progress;
//! # use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};
//! use saintflow::plan::Plan;
//! use saintflow::train::TrainOptions;
//!
//! # fn main() -> saintflow::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("planted.sf");
//! # let spec = KroneckerSpec { scale: 9, degree: 8.0, n_features: 8, n_classes: 4,
//! #     planted: Some(Planted::default()), ..KroneckerSpec::default() };
//! # generate_kronecker(&spec, &path, false, &Progress::hidden())?;
//! let store = GraphStore::open(&path)?;
//! let plan = Plan::load("plans/gcn.toml")?;
//! let outcome = TrainOptions::new(&plan, &store)
//!     .seed(1)
//!     .epochs(20)
//!     .threads(2)
//!     .train()?;
//! let test = outcome.test.expect("tested on the best-validation parameters");
//! assert!(test.accuracy > 0.5, "4 classes: chance is 0.25");
//! # Ok(())
//! # }
//! ```
//!
//! Add an op of your own. The common shapes take a few lines on an adapter: an elementwise
//! op is f and f′ ([`op::Elementwise`]), a row-wise op one function over a block of rows
//! ([`op::RowWise`]), a neighbour aggregation an identity, a fold and the gradient's
//! routing ([`op::NeighbourReduce`]); the adapter writes the [`op::Op`] (forward, backward,
//! the parallel split, what out-of-core inference needs). Register it under a name, and a
//! plan file uses that name like a built-in; [`testing::check_op_gradients`] checks its
//! gradient in one call. `user.double` is 2·x:
//!
//! ```
//! # use saintflow::prelude::*;
//! # use saintflow::progress::Progress;
//! # use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};
//! use saintflow::op::{elementwise, Elementwise, Registry};
//! use saintflow::plan::Plan;
//! use saintflow::testing::{check_op_gradients, Arg};
//! use saintflow::train::TrainOptions;
//!
//! #[derive(Clone, Debug)]
//! struct Double;
//!
//! impl Elementwise for Double {
//!     fn name(&self) -> &str {
//!         "user.double"
//!     }
//!     fn f(&self, x: f32) -> f32 {
//!         2.0 * x
//!     }
//!     fn df(&self, _x: f32) -> f32 {
//!         2.0
//!     }
//! }
//!
//! # fn main() -> saintflow::Result<()> {
//! check_op_gradients(elementwise(Double), &[Arg::Nodes(4)]).expect("f′ matches f");
//! let mut registry = Registry::with_builtins();
//! registry.register("user.double", &[], "user.double(x): 2x", |_| Ok(elementwise(Double)))?;
//!
//! let plan = Plan::parse(r#"
//! name = "double_gcn"
//! [dims]
//! hidden = 16
//! [sampler]
//! kind = "full"
//! [[layer]]
//! params = { W = ["in", "hidden"] }
//! out = "relu(user.double(A_sym @ x @ W))"
//! [output]
//! params = { W_out = ["in", "classes"] }
//! out = "A_sym @ x @ W_out"
//! "#, "double_gcn.toml")?;
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("planted.sf");
//! # let spec = KroneckerSpec { scale: 9, degree: 8.0, n_features: 8, n_classes: 4,
//! #     planted: Some(Planted::default()), ..KroneckerSpec::default() };
//! # generate_kronecker(&spec, &path, false, &Progress::hidden())?;
//! let store = GraphStore::open(&path)?;
//! // The built-ins alone refuse the plan when it is loaded, naming the op...
//! let refused = TrainOptions::new(&plan, &store).train().unwrap_err();
//! assert!(refused.to_string().contains("unknown op `user.double`"));
//! // ...the registry with it trains it.
//! let outcome = TrainOptions::new(&plan, &store)
//!     .registry(registry)
//!     .epochs(30)
//!     .threads(2)
//!     .train()?;
//! assert!(outcome.test.expect("tested").accuracy > 0.5);
//! # Ok(())
//! # }
//! ```
//!
//! The same registry gives a user crate the whole command line with its ops:
//! `saintflow::cli::run_with(registry)` in its `main` (see `examples/custom_op`, which
//! also has a neighbour aggregation). An op none of the adapters fits implements
//! [`op::Op`] itself: four required methods (name, arguments, output fact, forward), the
//! rest defaulted, capabilities (a partitioned forward, row locality, a blocked neighbour
//! forward) as small traits of their own.
//!
//! # Layers
//!
//! [`store`] ← [`sample`] ← [`ir`] (facts, values, the DAG, the `Op` trait) ← [`op`]
//! (built-in ops, registry, sources) ← [`autodiff`] ← [`plan`] / [`planner`] / [`exec`] ←
//! [`compile`] (a plan lowered and planned for a store, the memory check) ← [`dist`] /
//! [`infer`] (full-graph inference) ← [`train`]; [`error::Error`] gathers each layer's
//! error enum. ARCHITECTURE.md in the repository is the module map.
#![warn(missing_docs)]

pub mod atomic;
pub mod autodiff;
#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compile;
pub mod dist;
pub mod embedding;
pub mod error;
pub mod exec;
pub mod infer;
pub mod ir;
pub mod link;
pub mod log;
pub mod machine;
pub mod metrics;
pub mod npy;
pub mod op;
pub mod plan;
pub mod planner;
pub mod plot;
pub mod progress;
pub mod sample;
pub mod seed;
pub mod store;
pub mod suggest;
pub mod testing;
pub mod train;

pub use error::{Error, Result, StoreError};
pub use store::GraphStore;

/// The most used names.
pub mod prelude {
    pub use crate::error::{Error, Result, StoreError};
    pub use crate::store::{GraphStore, Labels, Role};
}
