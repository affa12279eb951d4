//! The thread a background snapshot is written on: its own, named `zab-snapshot`, at the
//! lowest CPU priority the kernel offers.
//!
//! Encoding a large state machine's image takes seconds of CPU (1.6 s for 5M catalog entries),
//! and on a machine with few cores it competed with the threads that take, log and answer
//! writes: W2 (pipelined writes) kept 0.75 of its throughput while the leader snapshotted. The
//! snapshot is not urgent (commits go on meanwhile; snapshot INV-1), so its thread asks the
//! kernel for less. On Linux it first takes a niceness of [`SNAPSHOT_NICENESS`] for that thread
//! alone (`setpriority(PRIO_PROCESS, tid)` names one thread there), then the `SCHED_IDLE`
//! policy: a niced thread still gets a share of a busy core, and a write-path thread that
//! wakes up may wait for the niced one's time slice to end, whereas a `SCHED_IDLE` thread runs
//! only on CPU time nobody else wants and is preempted as soon as a normal thread wakes. With
//! idle cores it runs as fast as before.
//!
//! INV-1: the priority applies to the snapshot's own thread only, which ends with the
//! snapshot; no pooled thread is ever lowered (a lowered thread cannot be raised back without
//! privileges).
//! INV-2: a failure to lower the priority (or another OS) changes nothing but the priority: a
//! refused `SCHED_IDLE` keeps the niceness, a refused niceness keeps the normal priority, and
//! the snapshot is written all the same. A failure to start the thread runs the snapshot on
//! tokio's blocking pool at normal priority, as before.

use std::io;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::debug;

/// The niceness of the snapshot thread (0 = normal, 19 = lowest): CFS gives a nice-10 thread
/// about a tenth of the CPU a nice-0 thread gets when both want it.
pub(super) const SNAPSHOT_NICENESS: i32 = 10;

/// Runs `job` on a thread of its own at the lowest priority (module docs; INV-1, INV-2); the
/// handle ends when the job did.
pub(super) fn spawn_low_priority(job: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    let (done_tx, done_rx) = oneshot::channel::<()>();
    let job = std::sync::Arc::new(std::sync::Mutex::new(Some(job)));
    let on_thread = job.clone();
    let started = std::thread::Builder::new()
        .name("zab-snapshot".into())
        .spawn(move || {
            let lowered = lower_this_thread();
            debug!(?lowered, "snapshot thread started");
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

/// How far the snapshot thread's priority was lowered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lowered {
    /// `SCHED_IDLE` (with the niceness, if that was granted).
    Idle,
    /// Niceness [`SNAPSHOT_NICENESS`] only.
    Niced,
    /// Neither (INV-2).
    Unchanged,
}

/// Lowers the calling thread's CPU priority: niceness, then `SCHED_IDLE` (INV-2).
fn lower_this_thread() -> Lowered {
    lower_with(set_niceness, set_idle_policy)
}

/// Applies `nice` then `idle` to the calling thread; what held (INV-2).
fn lower_with(
    nice: impl FnOnce() -> io::Result<()>,
    idle: impl FnOnce() -> io::Result<()>,
) -> Lowered {
    let niced = nice()
        .map_err(|e| debug!(error = %e, "the snapshot thread keeps its niceness"))
        .is_ok();
    match idle() {
        Ok(()) => Lowered::Idle,
        Err(e) => {
            debug!(error = %e, "the snapshot thread is not SCHED_IDLE");
            if niced {
                Lowered::Niced
            } else {
                Lowered::Unchanged
            }
        }
    }
}

/// Sets the calling thread's niceness to [`SNAPSHOT_NICENESS`].
#[cfg(target_os = "linux")]
fn set_niceness() -> io::Result<()> {
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
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread under `SCHED_IDLE` (pid 0 names the calling thread on Linux).
#[cfg(target_os = "linux")]
fn set_idle_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Other systems: the thread keeps its priority (INV-2).
#[cfg(not(target_os = "linux"))]
fn set_niceness() -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Other systems: the thread keeps its priority (INV-2).
#[cfg(not(target_os = "linux"))]
fn set_idle_policy() -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// INV-1: the job runs under SCHED_IDLE at the lowered niceness, and the caller's thread keeps
    /// its own.
    #[tokio::test]
    async fn the_job_runs_idle_and_niced_on_its_own_thread() {
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
            // SAFETY: no pointers; 0 names the calling thread.
            let policy = unsafe { libc::sched_getscheduler(0) };
            tx.send((nice_of(tid), name, policy)).unwrap();
        })
        .await
        .unwrap();
        let (nice, name, policy) = rx.recv().unwrap();
        assert_eq!(
            nice,
            SNAPSHOT_NICENESS.max(here),
            "the snapshot thread is niced"
        );
        assert_eq!(policy, libc::SCHED_IDLE, "and SCHED_IDLE");
        assert_eq!(name.as_deref(), Some("zab-snapshot"));
        assert_eq!(
            nice_of(unsafe { libc::gettid() }),
            here,
            "the caller is not"
        );
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
    }

    /// INV-2: a refused SCHED_IDLE keeps the niceness; a refused niceness too leaves the
    /// thread as it was; either way the caller learns what held.
    #[test]
    fn a_refused_sched_idle_falls_back_to_the_niceness() {
        let refused = || Err(io::Error::from_raw_os_error(libc::EPERM));
        let got = std::thread::spawn(move || {
            let lowered = lower_with(set_niceness, refused);
            // SAFETY: no pointers; 0 names the calling thread.
            let policy = unsafe { libc::sched_getscheduler(0) };
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS as _, 0) };
            (lowered, policy, nice)
        })
        .join()
        .unwrap();
        assert_eq!(got.0, Lowered::Niced);
        assert_eq!(got.1, libc::SCHED_OTHER, "the policy is left alone");
        assert!(got.2 >= SNAPSHOT_NICENESS, "niced: {}", got.2);
        assert_eq!(lower_with(refused, refused), Lowered::Unchanged);
        assert_eq!(lower_with(refused, || Ok(())), Lowered::Idle);
    }
}
