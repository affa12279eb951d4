//! One scenario per sync mode of the leader's decision table (seed 004 §5), asserting the mode
//! the leader chose from its actions (`Diff`/`Trunc`/`Snap` sends, `SendLogRange`,
//! `SendSnapshot`).

use tests::sim::SyncMode;

use super::*;

/// Crashes a follower, commits `n` writes without it, restarts it; returns it.
fn lag_follower(c: &mut tests::sim::Cluster, l: ServerId, n: usize) -> ServerId {
    let f = others(c, l)[0];
    c.settle();
    c.crash(f);
    commit_n(c, l, n);
    c.settle();
    c.restart(f);
    c.stabilize();
    f
}

#[test]
fn sync_empty_diff_for_an_up_to_date_follower() {
    let (mut c, l) = started(options(3, 0));
    let f = lag_follower(&mut c, l, 0);
    assert_eq!(last_sync(&c, f), Some(SyncMode::EmptyDiff));
    c.check_liveness();
}

#[test]
fn sync_diff_from_the_committed_log() {
    let (mut c, l) = started(options(3, 0));
    commit_n(&mut c, l, 2);
    let f = lag_follower(&mut c, l, 3);
    assert_eq!(last_sync(&c, f), Some(SyncMode::Diff));
    c.check_liveness();
}

#[test]
fn sync_diff_from_the_on_disk_log() {
    let mut o = options(3, 0);
    o.committed_log_window = 4;
    o.diff_from_log_limit = 100;
    o.snap_every = 0;
    let (mut c, l) = started(o);
    commit_n(&mut c, l, 2);
    let f = lag_follower(&mut c, l, 12);
    assert_eq!(last_sync(&c, f), Some(SyncMode::DiffFromLog));
    c.check_liveness();
}

#[test]
fn sync_snap_for_a_follower_too_far_behind() {
    let mut o = options(3, 0);
    o.committed_log_window = 4;
    o.diff_from_log_limit = 10;
    let (mut c, l) = started(o);
    commit_n(&mut c, l, 2);
    let f = lag_follower(&mut c, l, 15);
    assert_eq!(last_sync(&c, f), Some(SyncMode::Snap));
    c.check_liveness();
}

#[test]
fn sync_snap_when_the_log_was_purged() {
    let mut o = options(3, 0);
    o.committed_log_window = 2;
    o.diff_from_log_limit = 1_000;
    o.snap_every = 3;
    o.snap_retain = 1;
    o.keep_log = 0;
    let (mut c, l) = started(o);
    commit_n(&mut c, l, 2);
    let f = lag_follower(&mut c, l, 20);
    assert_eq!(last_sync(&c, f), Some(SyncMode::Snap));
    c.check_liveness();
}

/// The leader logs `k` proposals nobody else sees, then is cut off; the others elect a new
/// leader and commit `m` writes; returns (cluster, old leader, new leader).
pub fn diverge(k: usize, m: usize) -> (tests::sim::Cluster, ServerId, ServerId) {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 2);
    c.settle();
    let rest = others(&c, a);
    c.isolate(a);
    for _ in 0..k {
        c.write(a);
    }
    let tip = last_logged(&c, a);
    until_durable(&mut c, a, tip);
    let b = elect_among(&mut c, &rest);
    commit_n(&mut c, b, m);
    c.heal_all();
    c.stabilize();
    (c, a, b)
}

#[test]
fn sync_trunc_for_an_old_leader_with_unacked_proposals() {
    let (mut c, a, _) = diverge(1, 0);
    assert_eq!(last_sync(&c, a), Some(SyncMode::Trunc));
    c.check_liveness();
}

#[test]
fn sync_trunc_then_diff_when_the_new_leader_moved_on() {
    let (mut c, a, _) = diverge(1, 2);
    assert_eq!(last_sync(&c, a), Some(SyncMode::TruncDiff));
    c.check_liveness();
}

/// ZooKeeper's `snapshotSizeFactor`: a follower whose DIFF would stream more of the on-disk log
/// than the factor times the leader's newest snapshot gets a SNAP (one image to write and load
/// instead of a record per txn); a light DIFF stays a DIFF, and a negative factor turns the
/// rule off. In the simulation a snapshot weighs the whole applied history.
#[test]
fn sync_snap_when_the_log_outweighs_the_snapshot() {
    let run = |factor: f64, before: usize, lag: usize| {
        let mut o = options(3, 0);
        o.committed_log_window = 4;
        o.diff_from_log_limit = 1_000;
        o.snap_every = 5;
        o.purge_log = false;
        o.snapshot_size_factor = factor;
        let (mut c, l) = started(o);
        commit_n(&mut c, l, before);
        let f = lag_follower(&mut c, l, lag);
        let mode = last_sync(&c, f);
        c.check_liveness();
        mode
    };
    // A simulated txn is ~6 payload bytes and weighs ~18 in a snapshot. ~26 of ~32 txns from
    // the log: ~0.27 of the snapshot, well over 0.1 (payload sizes and where the newest
    // snapshot falls move the weight with the scheduler's seed, so the margins are wide).
    assert_eq!(run(0.1, 2, 30), Some(SyncMode::Snap));
    assert_eq!(run(-1.0, 2, 30), Some(SyncMode::DiffFromLog));
    // ~8 of ~52 txns from the log: ~0.05 of the snapshot.
    assert_eq!(run(0.2, 40, 12), Some(SyncMode::DiffFromLog));
}
