//! The log durability contract of `zab_core::io` (L1–L4), held against both implementations
//! of the txn log: the real `zab_store::LogWriter` on a temp dir and the simulation's
//! `tests::sim::disk::Disk`.
//!
//! Each script is a list of driver batches (the actions of one `take_actions()`: appends, a
//! TRUNC's truncate, a SNAP's log reset) with settle points between them. Both sides run it:
//! - the real writer executes each batch as one group commit (the test holds the sync thread
//!   in its `Flushed` report while it queues the batch, so batching is deterministic), and its
//!   events become inputs through `LogEvent::input`, the mapping the node driver uses;
//! - the simulated disk executes the same actions and reports as the simulation's scheduler
//!   does (`LogPersisted` after an fsync step; here at settle points and at explicit partial
//!   syncs).
//!
//! A [`Tracker`] plays the peer that follows the contract: it derives, from the actions and
//! the inputs, the durable point it may count (L1–L3) and rejects any report the contract does
//! not allow. At every settle point both sides must derive the same durable point, equal to
//! their last appended record (once every report is in, the whole log is durable). Every real
//! report is also checked against the real log's durable records at the moment it was made
//! (L1, L2). At the end both logs must hold the same records after a reopen (the real log) and
//! after a power loss with everything synced (the simulated disk).
//!
//! Here: the scripts and the runner. `log_conformance/tracker.rs` is the contract's peer,
//! `log_conformance/real_log.rs` and `log_conformance/sim_log.rs` the two sides.

// Test code: a failed expectation aborts the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod log_conformance {
    pub mod real_log;
    pub mod sim_log;
    pub mod tracker;
}

use bytes::Bytes;
use zab_core::{Epoch, Txn, Zxid};
use zab_store::{LogCommand, LogOptions};

use log_conformance::real_log::Real;
use log_conformance::sim_log::Sim;

/// One step of a script.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A driver batch: these actions, issued together.
    Batch(&'static [Act]),
    /// The simulated disk completes an fsync of its first `n` pending appends (the real writer
    /// syncs every batch as a group; it has no partial sync to mirror).
    SimSync(usize),
    /// Wait until every report of everything issued so far is in, then compare.
    Settle,
}

/// One action of a batch.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Append this many new records.
    Append(u32),
    /// TRUNC: keep the records up to the `k`-th record appended in the script (1-based;
    /// 0 = none).
    Truncate(usize),
    /// A SNAP installed at a new zxid above everything: the log is reset to follow it.
    Reset,
}

/// The real log's options: small segments, fsync on.
fn log_options() -> LogOptions {
    LogOptions {
        prealloc_bytes: 64 << 10,
        force_sync: true,
    }
}

/// The txn of `zxid`, with a payload naming it.
fn txn(zxid: Zxid) -> Txn {
    Txn::app(zxid, Bytes::from(format!("t{zxid}")))
}

/// Runs `script` on both sides; panics at the first difference or contract violation.
fn run(name: &str, script: &[Step]) {
    let mut real = Real::new();
    let mut sim = Sim::default();
    let mut appended: Vec<Zxid> = Vec::new();
    let mut epoch = 1;
    let mut last = Zxid::ZERO;
    for (i, step) in script.iter().enumerate() {
        let at = format!("{name}, step {i} ({step:?})");
        match step {
            Step::Batch(acts) => {
                let mut cmds = Vec::new();
                for act in *acts {
                    match act {
                        Act::Append(n) => {
                            for _ in 0..*n {
                                let counter = if last.epoch() == Epoch(epoch) {
                                    last.counter() + 1
                                } else {
                                    1
                                };
                                last = Zxid::new(Epoch(epoch), counter);
                                appended.push(last);
                                cmds.push(LogCommand::Append(txn(last)));
                            }
                        }
                        Act::Truncate(k) => {
                            let to = k.checked_sub(1).map_or(Zxid::ZERO, |k| appended[k]);
                            cmds.push(LogCommand::Truncate { to });
                            // what follows a TRUNC comes from a newer leader
                            epoch += 1;
                        }
                        Act::Reset => {
                            epoch += 1;
                            last = Zxid::new(Epoch(epoch), 50);
                            cmds.push(LogCommand::Reset { after: last });
                        }
                    }
                }
                real.batch(&cmds);
                sim.batch(&cmds);
            }
            Step::SimSync(n) => sim.fsync(*n),
            Step::Settle => {
                real.settle();
                sim.settle();
                assert_eq!(real.tracker.log, sim.tracker.log, "{at}: logs differ");
                assert_eq!(
                    real.tracker.persisted, sim.tracker.persisted,
                    "{at}: the durable point a peer derives differs: real writer {}, sim disk {}",
                    real.tracker.persisted, sim.tracker.persisted
                );
                assert_eq!(
                    real.tracker.persisted,
                    real.tracker.last(),
                    "{at}: every report is in, yet a peer counts its log durable only up to {} \
                     of {}",
                    real.tracker.persisted,
                    real.tracker.last()
                );
            }
        }
    }
    let expected = real.tracker.log.clone();
    assert_eq!(real.reopen(), expected, "{name}: the real log after reopen");
    assert_eq!(
        sim.reopen(),
        expected,
        "{name}: the sim disk after a power loss"
    );
}

use Act::{Append, Reset, Truncate};
use Step::{Batch, Settle, SimSync};

#[test]
fn append_runs_settle_to_the_last_record() {
    run(
        "append runs",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Append(2)]),
            Batch(&[Append(4)]),
            SimSync(1),
            Settle,
        ],
    );
}

/// Bug 2's shape: the writer syncs a, b, c before the truncate and reports c, which the
/// truncate removes; only L2 tells the peer that a and b are durable.
#[test]
fn truncate_into_pending_appends() {
    run(
        "truncate into pending appends",
        &[Batch(&[Append(3), Truncate(2)]), Settle],
    );
}

#[test]
fn truncate_into_appends_pending_since_an_earlier_batch() {
    run(
        "truncate into appends of an earlier batch",
        &[
            Batch(&[Append(2)]),
            Settle,
            Batch(&[Append(3)]),
            SimSync(1),
            Batch(&[Truncate(3)]),
            Settle,
        ],
    );
}

#[test]
fn truncate_below_synced_records() {
    run(
        "truncate below synced records",
        &[Batch(&[Append(5)]), Settle, Batch(&[Truncate(2)]), Settle],
    );
}

#[test]
fn truncate_to_the_last_record() {
    run(
        "truncate to the last record",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Truncate(3)]),
            Settle,
            Batch(&[Append(2), Truncate(5)]),
            Settle,
        ],
    );
}

#[test]
fn truncate_everything_then_append() {
    run(
        "truncate everything then append",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Append(1), Truncate(0), Append(2)]),
            Settle,
            Batch(&[Append(1)]),
            Settle,
        ],
    );
}

#[test]
fn truncate_then_append_in_one_batch() {
    run(
        "truncate then append",
        &[
            Batch(&[Append(4), Truncate(2), Append(2)]),
            Settle,
            Batch(&[Append(1), Truncate(6), Append(1)]),
            Settle,
        ],
    );
}

#[test]
fn reset_after_snapshot() {
    run(
        "reset after a SNAP",
        &[
            Batch(&[Append(3)]),
            Settle,
            Batch(&[Append(2), Reset]),
            Settle,
            Batch(&[Append(2)]),
            Batch(&[Append(1)]),
            Settle,
        ],
    );
}

#[test]
fn several_batches_between_settle_points() {
    run(
        "several batches",
        &[
            Batch(&[Append(2)]),
            Batch(&[Append(2)]),
            SimSync(3),
            Batch(&[Truncate(3)]),
            Batch(&[Append(1)]),
            Batch(&[Append(2), Truncate(5)]),
            Settle,
            Batch(&[Append(3)]),
            Batch(&[Reset, Append(1)]),
            Settle,
        ],
    );
}
