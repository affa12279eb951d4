//! The `fe-meta` binary: see [`fe_meta_cli`] (`fe-meta --help` lists the commands and the
//! exit codes).

fn main() -> std::process::ExitCode {
    fe_meta_cli::main()
}
