//! PITFALLS C: synchronization (DIFF / TRUNC / SNAP).

use zab_core::Message;

use super::sync_modes::diverge;
use super::*;

/// C1 (ZOOKEEPER-1154): the leader logs a txn nobody else has; everyone crashes; the others
/// come back without it, elect and commit; the old leader returns and must be truncated, never
/// DIFFed past its phantom txn (order checkers: it never applies it).
#[test]
fn c1_node_with_the_highest_zxid_absent_from_election() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 3);
    c.settle();
    let rest = others(&c, a);
    c.isolate(a);
    c.write(a);
    let phantom = last_logged(&c, a);
    until_durable(&mut c, a, phantom);
    for id in c.ids() {
        c.crash(id);
    }
    c.heal_all();
    for id in &rest {
        c.restart(*id);
    }
    let b = elect_among(&mut c, &rest);
    commit_n(&mut c, b, 2);
    c.restart(a);
    c.check_liveness();
    assert!(
        !applied_anywhere(&c, phantom),
        "the phantom txn {phantom} was applied"
    );
}

/// C4 (ZOOKEEPER-2832/1549): an uncommitted txn of an old leader must not survive through a
/// snapshot base and a later restart. Frequent local snapshots make every restart load one.
#[test]
fn c4_no_dirty_snapshot_resurrects_an_uncommitted_txn() {
    let mut o = options(3, 0);
    o.snap_every = 2;
    o.diff_from_log_limit = 3;
    o.committed_log_window = 2;
    let (mut c, b) = started(o);
    let rest = others(&c, b);
    let (a, cc) = (rest[0], rest[1]);
    commit_n(&mut c, b, 4);
    c.settle();
    c.isolate(b);
    c.write(b);
    let dirty = last_logged(&c, b);
    until_durable(&mut c, b, dirty);
    c.crash(b);
    c.heal_all();
    elect_among(&mut c, &[a, cc]);
    commit_n(&mut c, a, 6);
    c.crash(a);
    c.restart(b);
    let l = c.stabilize();
    commit_n(&mut c, l, 6);
    for id in c.ids() {
        c.crash(id);
        c.restart(id);
    }
    c.check_liveness();
    assert!(
        !applied_anywhere(&c, dirty),
        "the dirty txn {dirty} was applied"
    );
}

/// C5 (ZOOKEEPER-2845): a leader logs a txn no follower acks, is partitioned, the others move
/// on; after healing and two restarts the old leader must not retain the txn.
#[test]
fn c5_no_retained_uncommitted_txn_across_elections() {
    let (mut c, a, _) = diverge(1, 3);
    c.crash(a);
    c.restart(a);
    c.stabilize();
    c.crash(a);
    c.restart(a);
    c.check_liveness();
}

/// C10 (ZOOKEEPER-3642): the leader dies after sending a SNAP but before NEWLEADER; the
/// follower syncs again from another leader, then crashes and restarts; nothing is lost.
#[test]
fn c10_interrupted_snap_then_diff() {
    let mut o = options(3, 0);
    o.diff_from_log_limit = 3;
    o.committed_log_window = 2;
    let (mut c, l) = started(o);
    let rest = others(&c, l);
    let (f, g) = (rest[0], rest[1]);
    c.crash(f);
    commit_n(&mut c, l, 8);
    c.restart(f);
    c.expect_within(30_000, "the SNAP to the follower", |c| {
        c.events()
            .iter()
            .any(|e| e.to == f && matches!(e.msg, Message::Snap { .. }))
    });
    c.expect_within(30_000, "the SNAP received", |c| {
        c.node(f).disk.incoming.is_some() || c.node(f).disk.install.is_some()
    });
    c.crash(l);
    elect_among(&mut c, &[f, g]);
    c.crash(f);
    c.restart(f);
    c.restart(l);
    c.check_liveness();
}

/// C11 (ZOOKEEPER-5094): a TRUNC is interrupted by a lost connection; the node resyncs, is
/// killed and restarts; its history must have no hole.
#[test]
fn c11_interrupted_trunc() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 2);
    c.settle();
    let rest = others(&c, a);
    c.isolate(a);
    c.write(a);
    let tip = last_logged(&c, a);
    until_durable(&mut c, a, tip);
    let b = elect_among(&mut c, &rest);
    commit_n(&mut c, b, 2);
    let mark = c.events().len();
    c.heal_all();
    c.expect_within(30_000, "a TRUNC to the old leader", |c| {
        c.events()[mark..]
            .iter()
            .any(|e| e.to == a && matches!(e.msg, Message::Trunc { .. }))
    });
    c.cut(a, b);
    c.run_for(1_000);
    c.heal_all();
    c.stabilize();
    c.crash(a);
    c.restart(a);
    c.check_liveness();
}

/// C12 (ZOOKEEPER-3911/4685): a DIFF-synced follower acks NEWLEADER; the leader and the other
/// follower die right after the leader has its quorum. Acknowledged writes must survive; the
/// follower acks NEWLEADER only with the sync data durable (durability checker).
#[test]
fn c12_diff_txns_durable_before_newleader_ack() {
    let (mut c, a) = started(options(3, 0));
    let [b, f] = others(&c, a)[..] else {
        unreachable!()
    };
    commit_n(&mut c, a, 5);
    c.crash(f);
    commit_n(&mut c, a, 5);
    c.restart(f);
    c.expect_within(30_000, "the follower serving again", |c| {
        c.peer(f).is_some_and(|p| p.is_serving())
    });
    c.crash(a);
    c.crash(b);
    for id in [a, b] {
        c.restart(id);
    }
    c.check_liveness();
}

/// C13 (ZOOKEEPER-4785): S2 leads; S0 stops; one more write; S1 stops; S0 restarts and syncs;
/// S2 stops; S1 starts; S0 and S1 elect. The write must survive.
#[test]
fn c13_async_logging_race_on_shutdown_during_diff() {
    let (mut c, s2) = started(options(3, 0));
    let [s0, s1] = others(&c, s2)[..] else {
        unreachable!()
    };
    commit_n(&mut c, s2, 2);
    c.crash(s0);
    commit_n(&mut c, s2, 1);
    c.crash(s1);
    c.restart(s0);
    c.expect_within(30_000, "s0 acks NEWLEADER", |c| {
        c.events()
            .iter()
            .any(|e| e.from == s0 && matches!(e.msg, Message::Ack { zxid } if zxid.counter() == 0))
    });
    c.crash(s2);
    c.restart(s1);
    elect_among(&mut c, &[s0, s1]);
    c.restart(s2);
    c.check_liveness();
}

/// C14 (ZOOKEEPER-4394): writes keep arriving while a follower syncs, so its sync stream mixes
/// committed and outstanding proposals around NEWLEADER; the follower crashes at several
/// points and must always come back consistent.
#[test]
fn c14_outstanding_proposals_around_newleader() {
    let (mut c, l) = started(options(3, 0));
    let f = others(&c, l)[0];
    commit_n(&mut c, l, 3);
    for round in 0..4 {
        c.crash(f);
        commit_n(&mut c, l, 3);
        c.restart(f);
        for i in 0..(20 + 10 * round) {
            if i % 3 == 0 {
                c.write(l);
            }
            c.step_with(tests::sim::Weights::QUIET);
        }
    }
    c.check_liveness();
}

/// C18: an old leader logged three proposals nobody acked; the others commit five txns in a
/// new epoch; after healing, the old leader ends with exactly their history.
#[test]
fn c18_old_leader_truncated_across_an_epoch_boundary() {
    let (mut c, a, b) = diverge(3, 5);
    c.check_liveness();
    assert_eq!(c.applied_zxids(a), c.applied_zxids(b));
}

/// C22 (ZOOKEEPER-1551/1552): observers sync like followers, never drop txns that arrive
/// between their snapshot and UPTODATE, and catch up after a crash.
#[test]
fn c22_observers_sync_and_catch_up() {
    let mut o = options(3, 2);
    o.diff_from_log_limit = 5;
    let (mut c, l) = started(o);
    let obs = sid(4);
    commit_n(&mut c, l, 3);
    c.crash(obs);
    commit_n(&mut c, l, 8);
    c.restart(obs);
    for _ in 0..5 {
        c.write(l);
        c.step_with(tests::sim::Weights::QUIET);
    }
    c.check_liveness();
    assert_eq!(c.applied_zxids(obs), c.applied_zxids(l));
}
