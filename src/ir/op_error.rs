//! The error of ops ([`OpError`]), in a leaf of its own so that both the op trait
//! ([`super::op`], which re-exports it) and the data sources ([`super::source`]) name it
//! without importing each other (issue 54 item 6: no import cycle inside a folder).

use saintflow_ops::KernelError;

/// Errors of ops: bad arguments (caught when the plan is loaded) and failures while a step
/// runs (a kernel, the data source).
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// Wrong number or kinds of arguments, or shapes that do not fit.
    #[error("{what}")]
    Args {
        /// What is wrong, in "expected …, got …" form.
        what: String,
    },
    /// A bad attribute (`p=1.5`, a missing `name=`).
    #[error("attribute {name}: {what}")]
    Attr {
        /// The attribute.
        name: String,
        /// What is wrong.
        what: String,
    },
    /// Differentiating through an op without a backward.
    #[error("backward not supported for {op}")]
    NoBackward {
        /// The op.
        op: String,
    },
    /// A kernel refused its inputs.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The data source failed (sampling, reading the store).
    #[error("{0}")]
    Source(String),
    /// A value is missing (a parameter not initialised, an op run without a data source).
    #[error("{0}")]
    Missing(String),
    /// The op panicked while running (the executor catches it and fails the step).
    #[error("panicked: {0}")]
    Panicked(String),
}

impl OpError {
    /// An argument error.
    pub fn args(what: impl Into<String>) -> OpError {
        OpError::Args { what: what.into() }
    }
}
