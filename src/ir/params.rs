//! Trainable parameters: declarations (name, shape, initialiser) and their values, kept
//! outside the graph so a step's DAG is reused across steps and the optimiser updates the
//! values in place.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

use crate::sample::SampleRng;
use crate::seed::{hash3, stream};

use super::value::Tensor;

/// How a parameter starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Glorot (Xavier) uniform: U(−a, a), a = √(6 / (rows + cols)), as Kipf & Welling's GCN
    /// and GraphSAINT initialise weights.
    Glorot,
    /// Glorot uniform with the fans given (fan in, fan out) rather than read off the shape:
    /// a = √(6 / (fan_in + fan_out)). For a parameter that packs several of the paper's
    /// (GAT's attention vectors, one a ∈ R^{2F'} per head, stored as the heads' halves
    /// side by side).
    GlorotFans(usize, usize),
    /// All zeros (biases).
    Zeros,
    /// Every entry the same value.
    Const(f32),
}

/// One parameter of a plan.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    /// Unique name (`W_self.0`: parameter `W_self` of layer repetition 0).
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Initialiser.
    pub init: Init,
}

/// Parameter values by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    values: BTreeMap<String, Tensor>,
}

impl Params {
    /// Initialises every declared parameter; parameter `name` draws from an RNG seeded by
    /// (seed, hash of name), so adding a parameter does not change the others.
    pub fn init(decls: &[ParamDecl], seed: u64) -> Params {
        let mut values = BTreeMap::new();
        for d in decls {
            let key = xxhash_rust::xxh3::xxh3_64(d.name.as_bytes());
            let mut rng = SampleRng::seed_from_u64(hash3(seed, stream::INIT, key));
            let mut t = Tensor::zeros(d.rows, d.cols);
            match d.init {
                Init::Glorot | Init::GlorotFans(..) => {
                    let fans = match d.init {
                        Init::GlorotFans(i, o) => i + o,
                        _ => d.rows + d.cols,
                    };
                    let a = (6.0 / fans.max(1) as f64).sqrt() as f32;
                    t.data
                        .iter_mut()
                        .for_each(|v| *v = rng.random_range(-a..=a));
                }
                Init::Zeros => {}
                Init::Const(c) => t.data.fill(c),
            }
            values.insert(d.name.clone(), t);
        }
        Params { values }
    }

    /// A parameter's value.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.values.get(name)
    }

    /// A parameter's value, mutably.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Tensor> {
        self.values.get_mut(name)
    }

    /// Sets a parameter's value.
    pub fn insert(&mut self, name: impl Into<String>, value: Tensor) {
        self.values.insert(name.into(), value);
    }

    /// Keeps only the values whose name `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.values.retain(|k, _| keep(k));
    }

    /// All parameters, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Tensor)> {
        self.values.iter()
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// No parameters.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}
