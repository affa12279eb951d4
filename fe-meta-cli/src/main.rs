//! The `fe-meta` binary: see [`fe_meta_cli`] (`fe-meta --help` lists the commands and the
//! exit codes).

/// mimalloc rather than the system allocator: a leader's catalog is persistent trees whose
/// paths are copied on every write (the planner's speculative catalog shares them with the
/// applied one), and glibc's allocator keeps that churn as fragmented heap: after a
/// four-connection fill of 1M entries the leader held 537 MiB against 257 with mimalloc
/// (followers 221–245 either way; docs/BENCHMARKS.md, "Performance round 2"). Built with
/// `no_thp`: with transparent huge pages mimalloc's heap cost a lone write on the leader about
/// 90 µs at the median and stalls of 20–80 ms at the maximum.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    fe_meta_cli::main()
}
