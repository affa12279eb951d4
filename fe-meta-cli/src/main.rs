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

extern "C" {
    /// mimalloc's `void mi_collect(bool force)` (the C library the allocator links in):
    /// frees the calling thread's empty pages and purges freed memory now, not after the
    /// purge delay.
    fn mi_collect(force: bool);
}

/// The catalog's release hook (`fe_meta::state::memory`): after a restore replaced the
/// catalog, mimalloc gives the old one's pages back at once instead of over seconds (a
/// follower that installed a SNAP of 1M entries was measured at 429 MiB right after and at
/// 264 MiB with this, against ~225 MiB for a follower that loaded the same catalog at start).
fn release_freed_memory() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any time.
    unsafe { mi_collect(true) }
}

fn main() -> std::process::ExitCode {
    fe_meta::state::memory::set_release_hook(release_freed_memory);
    fe_meta_cli::main()
}
