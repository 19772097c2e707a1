//! Running a step's DAG. Today: [`interp`], a sequential reference interpreter (nodes in
//! topological order, values freed after their last use); the work-stealing executor will
//! run the same graphs and is tested against it.

pub mod gradcheck;
pub mod interp;

pub use gradcheck::{check_gradients, Discrepancy, GradCheck};
pub use interp::{run, Interpreter, StageTimes, StepRunner, StepValues};
