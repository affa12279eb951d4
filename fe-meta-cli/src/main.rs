//! The `fe-meta` binary: see [`fe_meta_cli`] (`fe-meta --help` lists the commands and the
//! exit codes).

/// mimalloc rather than the system allocator: a leader's catalog is persistent trees whose
/// paths are copied on every write (the planner's speculative catalog shares them with the
/// applied one), and glibc's allocator keeps that churn as fragmented heap: after a
/// four-connection fill of 1M entries the leader held 537 MiB against 279 with mimalloc
/// (followers 242–255 either way; docs/BENCHMARKS.md, "Performance round 2").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fe_meta_cli::main()
}
