//! `saintflow-custom-op`: the whole `saintflow` command line with this crate's ops added,
//! through one call. `saintflow-custom-op train swish_gcn.toml --graph cora.sf` trains the
//! plan that the plain `saintflow` refuses (unknown op `user.swish`).

fn main() -> std::process::ExitCode {
    saintflow::cli::run_with(saintflow_example_custom_op::registry())
}
