//! The built-in ops, one family per file, and their registration under the names plan
//! files use.

mod activation;
mod aggregate;
mod arith;
mod attention;
mod dropout;
mod link;
mod loss;
mod matmul;
mod nodenorm;
mod norm;
mod psum;
mod softmax_agg;
mod source;
mod sparse_features;
mod structure;
mod typed;

use std::sync::Arc;

pub use activation::{Activation, RELU};
pub use aggregate::{Extreme, PowerMean, POWER_MEAN_MAX};
pub use arith::{Add, AddN, BroadcastRows, Mul, Scale, Sub, SumRows};
pub use attention::{Gat, GatScoresBackward, GatVecBackward, GatZBackward, Side};
pub use dropout::{Dropout, DropoutBackward, DropoutMask};
pub use link::{LinkLoss, LinkLossBackward, LinkLossKind, PairKind, Pairs, PairsBackward};
pub use loss::{Loss, LossBackward, LossKind};
pub use matmul::{
    chain_factors, product, product_flops, transpose, ColumnView, Factor, Gemm, MatMul, Sddmm,
    Spmm, Transpose, PREPACK_K_MIN,
};
pub use nodenorm::{
    running_names, running_stats, update_running, BatchNormStats, NodeNorm, NodeNormGrad, NormKind,
    PairMode, Wrt, BN_MOMENTUM, NORM_EPS,
};
pub use norm::{L2Norm, L2NormBackward, L2_EPS};
pub use psum::{Psum, PsumGrad, PsumWrt};
pub use softmax_agg::{SoftmaxAgg, SoftmaxAggGrad, SoftmaxWrt};
pub use source::{AdjKind, AdjNorm, Adjacency, Features, One, Param, Sample, TargetsOp};
pub use sparse_features::{FeatureProduct, TypeRange};
pub use structure::{Concat, MeanHeads, MeanHeadsBackward, Slice, SliceBackward};
pub use typed::{
    member_flags, relation_flavour, BasisWeight, BasisWeightGrad, BasisWrt, RelAdjacency,
    RelationBlock, TypeInput, TypeRows,
};

pub(crate) use super::util::{dense, same_shape};

use super::{elementwise, neighbour_reduce, row_wise, Attrs, OpError, Registry};

/// A required attribute (`mean_heads(x, heads=4)`, `slice(x, start=0, len=8)`).
fn required(attrs: &Attrs, op: &str, name: &str) -> Result<(), OpError> {
    if attrs.0.contains_key(name) {
        Ok(())
    } else {
        Err(OpError::Attr {
            name: name.into(),
            what: format!("{op} needs `{name}=`, got none"),
        })
    }
}

/// Registers every built-in op callable from a plan file. (Source ops, parameters and
/// products are created by lowering, not called by name; backward ops by autodiff.)
/// A plan's `a - b`, `a * b`, `c * x` and `-x` lower to `sub`, `mul` and `scale`.
pub fn register(r: &mut Registry) {
    activations(r);
    norms(r);
    structure(r);
    aggregations(r);
}

/// A built-in's registration, which cannot fail: the built-in names are distinct.
fn ok(res: Result<(), OpError>) {
    res.expect("built-in names are distinct")
}

/// The activations and dropout.
fn activations(r: &mut Registry) {
    ok(r.register("relu", &[], "relu(x): max(x, 0)", |_| {
        Ok(elementwise(Activation::Relu))
    }));
    ok(r.register(
        "leaky_relu",
        &["slope"],
        "leaky_relu(x, slope=0.2): x if x > 0 else slope·x",
        |a| Ok(elementwise(Activation::leaky_relu(a.num("slope", 0.2)?)?)),
    ));
    ok(
        r.register("sigmoid", &[], "sigmoid(x): 1 / (1 + e^−x)", |_| {
            Ok(elementwise(Activation::Sigmoid))
        }),
    );
    ok(r.register("tanh", &[], "tanh(x)", |_| {
        Ok(elementwise(Activation::Tanh))
    }));
    ok(r.register(
        "sqrt",
        &["eps"],
        "sqrt(x, eps=1e-5): √max(x, eps), eps > 0 (a standard deviation from a variance)",
        |a| Ok(elementwise(Activation::sqrt(a.num("eps", 1e-5)?)?)),
    ));
    ok(r.register(
        "elu",
        &["alpha"],
        "elu(x, alpha=1.0): x if x > 0 else alpha·(e^x − 1), alpha ≥ 0",
        |a| Ok(elementwise(Activation::elu(a.num("alpha", 1.0)?)?)),
    ));
    ok(r.register(
        "dropout",
        &["p"],
        "dropout(x, p=0.5): inverted dropout while training (p in [0, 1)), identity in evaluation",
        |a| Ok(Arc::new(Dropout::new(a.num("p", 0.5)?)?)),
    ));
}

/// The normalisations.
fn norms(r: &mut Registry) {
    ok(r.register(
        "l2norm",
        &[],
        "l2norm(x): each row divided by its L2 norm",
        |_| Ok(row_wise(L2Norm)),
    ));
    ok(r.register(
        "batchnorm",
        &["momentum", "eps", "weighted", "running", "name"],
        "batchnorm(x[, gamma, beta], momentum=0.1, eps=1e-5, weighted=true, running=true, name=\"batchnorm.K\"): per column over the step's nodes (weighted by the sampler's 1/C_v), running mean and variance in evaluation (running=false: the evaluated nodes' own, no state); γ, β [1, f]",
        |a| {
            a.string("name", "")?;
            Ok(nodenorm::boxed(NodeNorm::batch(
                a.num("momentum", BN_MOMENTUM)?,
                a.num("eps", NORM_EPS)?,
                a.flag("weighted", true)?,
                a.flag("running", true)?,
            )?))
        },
    ));
    ok(r.register(
        "layernorm",
        &["eps"],
        "layernorm(x[, gamma, beta], eps=1e-5): each row to mean 0 and variance 1 over its features, then γ ⊙ · + β",
        |a| {
            Ok(nodenorm::boxed(NodeNorm::new(
                NormKind::Layer,
                a.num("eps", NORM_EPS)?,
                true,
            )?))
        },
    ));
    ok(r.register(
        "pairnorm",
        &["mode", "scale", "eps"],
        "pairnorm(x, mode=\"PN\", scale=1.0, eps=1e-5): centre over the nodes, rescale (PN: by the mean row norm; PN-SI: each row; PN-SCS: scale rows, then centre)",
        |a| {
            Ok(nodenorm::boxed(NodeNorm::new(
                NormKind::Pair {
                    mode: PairMode::parse(&a.string("mode", "PN")?)?,
                    scale: a.num("scale", 1.0)?,
                },
                a.num("eps", NORM_EPS)?,
                false,
            )?))
        },
    ));
    ok(r.register(
        "graphnorm",
        &["eps"],
        "graphnorm(x, alpha, gamma, beta, eps=1e-5): per column over the graph's nodes, the mean scaled by a learnable α subtracted, then γ ⊙ · / σ + β",
        |a| {
            Ok(nodenorm::boxed(NodeNorm::new(
                NormKind::Graph,
                a.num("eps", NORM_EPS)?,
                true,
            )?))
        },
    ));
}

/// Column structure and arithmetic.
fn structure(r: &mut Registry) {
    ok(r.register(
        "concat",
        &[],
        "concat(a, b, ...): columns side by side, equal row counts",
        |_| Ok(Arc::new(Concat)),
    ));
    ok(r.register(
        "slice",
        &["start", "len"],
        "slice(x, start=s, len=l): columns s..s+l",
        |a| {
            required(a, "slice", "start")?;
            required(a, "slice", "len")?;
            Ok(Arc::new(Slice {
                start: a.count("start", 0, 0)?,
                len: a.count("len", 0, 0)?,
            }))
        },
    ));
    ok(
        r.register("sub", &[], "sub(a, b): a − b, equal shapes", |_| {
            Ok(Arc::new(Sub))
        }),
    );
    ok(r.register(
        "mul",
        &[],
        "mul(a, b): a ⊙ b elementwise, equal shapes",
        |_| Ok(Arc::new(Mul)),
    ));
    ok(r.register("scale", &["c"], "scale(x, c=1.0): c·x", |a| {
        Ok(Arc::new(Scale::new(a.num("c", 1.0)?)?))
    }));
}

/// Aggregations over neighbours and heads.
fn aggregations(r: &mut Registry) {
    ok(r.register(
        "gat",
        &["heads", "slope", "dropout"],
        "gat(adj, z, a_l, a_r, heads=1, slope=0.2, dropout=0.0): GAT attention α on adj's pattern, H values per entry (multiply by z next); an entry of value 0 is no neighbour (`gat(A[r], …)`: within relation r); dropout on α while training",
        |a| {
            Ok(Arc::new(Gat::new(
                a.count("heads", 1, 1)?,
                a.num("slope", 0.2)?,
                a.num("dropout", 0.0)?,
            )?))
        },
    ));
    ok(r.register(
        "max_agg",
        &[],
        "max_agg(A, x): row i the element-wise maximum of x's rows at i's neighbours (0 without any)",
        |_| Ok(neighbour_reduce(Extreme::Max)),
    ));
    ok(r.register(
        "min_agg",
        &[],
        "min_agg(A, x): row i the element-wise minimum of x's rows at i's neighbours (0 without any)",
        |_| Ok(neighbour_reduce(Extreme::Min)),
    ));
    ok(r.register(
        "softmax_agg",
        &[],
        "softmax_agg(A, x, t): per column, row i Σ_j softmax_j(t·x_j)·x_j over i's neighbours (A's pattern), t a learnable [1, 1] or [1, f] parameter (PyG's SoftmaxAggregation; 0 without any)",
        |_| Ok(Arc::new(SoftmaxAgg)),
    ));
    ok(r.register(
        "powermean_agg",
        &["p"],
        "powermean_agg(A, x, p=1.0): row i (Σ_j a_ij·clamp(x_j, 0, 100)^p)^(1/p) over i's neighbours (with A_mean the power mean; 0 without any)",
        |a| Ok(neighbour_reduce(PowerMean::new(a.num("p", 1.0)?)?)),
    ));
    ok(r.register(
        "psum",
        &[],
        "psum(x, q): Σ_s softmax(q)_s · x's column block s, q a learnable [1, S] row and x S equal blocks (MixHop's output layer)",
        |_| Ok(Arc::new(Psum)),
    ));
    ok(r.register(
        "mean_heads",
        &["heads"],
        "mean_heads(x, heads=H): the average of x's H equal column blocks",
        |a| {
            required(a, "mean_heads", "heads")?;
            Ok(Arc::new(MeanHeads {
                heads: a.count("heads", 1, 1)?,
            }))
        },
    ));
}
