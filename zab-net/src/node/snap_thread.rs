//! The thread a background snapshot is written on: its own, named `zab-snapshot`, at a lower
//! CPU priority than the rest of the node.
//!
//! Encoding a large state machine's image takes seconds of CPU (1.6 s for 5M catalog entries),
//! and on a machine with few cores it competed on equal terms with the threads that take,
//! log and answer writes: W2 (pipelined writes) kept 0.75 of its throughput while the leader
//! snapshotted. The snapshot is not urgent (commits go on meanwhile; snapshot INV-1), so its
//! thread asks the kernel for less: on Linux a niceness of [`SNAPSHOT_NICENESS`] for that
//! thread alone (`setpriority(PRIO_PROCESS, tid)` names one thread there). With idle cores it
//! runs as fast as before; on busy ones it yields to the write path.
//! Niceness alone does not keep the write path whole on 2 cores (its threads block on every
//! fdatasync and round trip, and the snapshot fills those gaps), so what the job writes is
//! also paced to `snapCpuPercent` of one core (`snap_duty`).
//!
//! Not `SCHED_IDLE`: tried (2M entries, 2 cores busy with other work), it starved the
//! snapshot (5.6 and 8.8 s instead of 1.0-2.8 s at niceness 10) without raising W2 during it,
//! and an idle-policy thread has no progress guarantee at all on cores that stay busy (the log
//! and restart replay would grow without bound); nor can an unprivileged thread leave it.
//!
//! INV-1: the niceness applies to the snapshot's own thread only, which ends with the
//! snapshot; no pooled thread is ever lowered (a lowered thread cannot be raised back without
//! privileges).
//! INV-2: a failure to lower the priority (or another OS) changes nothing but the priority: the
//! snapshot is written all the same. A failure to start the thread runs the snapshot on tokio's
//! blocking pool at normal priority, as before.

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::debug;

/// The niceness of the snapshot thread (0 = normal, 19 = lowest): CFS gives a nice-10 thread
/// about a tenth of the CPU a nice-0 thread gets when both want it.
pub(super) const SNAPSHOT_NICENESS: i32 = 10;

/// Runs `job` on a thread of its own at [`SNAPSHOT_NICENESS`] (INV-1, INV-2); the handle ends
/// when the job did.
pub(super) fn spawn_low_priority(job: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let job = std::sync::Arc::new(std::sync::Mutex::new(Some(job)));
    let on_thread = job.clone();
    let started = std::thread::Builder::new()
        .name("zab-snapshot".into())
        .spawn(move || {
            lower_this_thread();
            let job = on_thread.lock().ok().and_then(|mut j| j.take());
            if let Some(job) = job {
                job();
            }
            let _ = done_tx.send(());
        });
    match started {
        // The receiver resolves when the thread sends, or drops its sender (a panic).
        Ok(_) => tokio::spawn(async move {
            let _ = done_rx.await;
        }),
        Err(e) => {
            debug!(error = %e, "no snapshot thread; writing it on the blocking pool");
            tokio::task::spawn_blocking(move || {
                let job = job.lock().ok().and_then(|mut j| j.take());
                if let Some(job) = job {
                    job();
                }
            })
        }
    }
}

/// Lowers the calling thread's CPU priority to [`SNAPSHOT_NICENESS`] (Linux; INV-2).
#[cfg(target_os = "linux")]
fn lower_this_thread() {
    // SAFETY: gettid and setpriority take no pointers; on Linux PRIO_PROCESS with a thread id
    // changes that thread's niceness only.
    let r = unsafe {
        let tid = libc::gettid();
        libc::setpriority(
            libc::PRIO_PROCESS as _,
            tid as libc::id_t,
            SNAPSHOT_NICENESS,
        )
    };
    if r != 0 {
        debug!(
            error = %std::io::Error::last_os_error(),
            "the snapshot thread keeps its priority"
        );
    }
}

/// Other systems: the thread keeps its priority (INV-2).
#[cfg(not(target_os = "linux"))]
fn lower_this_thread() {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// INV-1: the job runs at the lowered niceness, and the caller's thread keeps its own.
    #[tokio::test]
    async fn the_job_runs_niced_on_its_own_thread() {
        // SAFETY: getpriority takes no pointers; errno is not consulted (nice values of a
        // test thread are never -1 here).
        let nice_of = |tid: libc::pid_t| unsafe {
            libc::getpriority(libc::PRIO_PROCESS as _, tid as libc::id_t)
        };
        let here = nice_of(unsafe { libc::gettid() });
        let (tx, rx) = std::sync::mpsc::channel();
        spawn_low_priority(move || {
            let tid = unsafe { libc::gettid() };
            let name = std::thread::current().name().map(str::to_owned);
            tx.send((nice_of(tid), name)).unwrap();
        })
        .await
        .unwrap();
        let (nice, name) = rx.recv().unwrap();
        assert_eq!(
            nice,
            SNAPSHOT_NICENESS.max(here),
            "the snapshot thread is niced"
        );
        assert_eq!(name.as_deref(), Some("zab-snapshot"));
        assert_eq!(
            nice_of(unsafe { libc::gettid() }),
            here,
            "the caller is not"
        );
    }
}
