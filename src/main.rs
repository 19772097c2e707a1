//! The `saintflow` binary: see `saintflow --help`.

fn main() -> std::process::ExitCode {
    saintflow::cli::main()
}
