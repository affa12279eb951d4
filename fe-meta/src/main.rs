//! The `fe-meta` binary: see [`fe_meta::cli`] (`fe-meta --help` lists the commands and the
//! exit codes).

fn main() -> std::process::ExitCode {
    fe_meta::cli::main()
}
