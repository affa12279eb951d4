//! PITFALLS E1, E2, E6: lessons from BDB-JE-backed metadata journals that live in the
//! protocol: no retry of a write under a new epoch, no apply before COMMIT, SNAP fallback for a
//! learner the log left behind.

use bytes::Bytes;
use tests::sim::Cluster;
use zab_core::{Message, Zxid};

use super::*;

/// The payload of write request `req` issued on `id` (the harness names payloads this way).
fn payload_of(req: zab_core::RequestId, id: ServerId) -> Bytes {
    Bytes::from(format!("w{}@{}", req.0, id.0))
}

/// Every zxid under which `payload` was proposed, logged for a sync or committed, per the
/// messages sent.
fn zxids_carrying(c: &Cluster, payload: &Bytes) -> Vec<Zxid> {
    let mut v: Vec<Zxid> = c
        .events()
        .iter()
        .filter_map(|e| match &e.msg {
            Message::Proposal(t) | Message::Inform(t) if t.data == *payload => Some(t.zxid),
            _ => None,
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// How often `payload` occurs in the committed history (the longest applied sequence).
fn committed_count(c: &Cluster, payload: &Bytes) -> usize {
    c.checker()
        .order
        .global()
        .iter()
        .filter(|t| t.data == *payload)
        .count()
}

/// E1 (apache/doris #24259): a write that fails because its leader lost leadership is never
/// retried under a new epoch. Three voters: a write forwarded by C is proposed by A and
/// reaches B only (C's link to A breaks, so C's client gets an error); a write on A reaches B
/// too, and A is isolated before B's ACKs arrive; a third write on A reaches nobody. Every
/// client gets an error. B wins (it has the highest zxid) and commits the first two through
/// NEWLEADER under their original zxids; the third, logged only by A, never commits. Each
/// payload is proposed under one zxid only, occurs at most once in the committed history, and
/// C never forwards its failed write again.
#[test]
fn e1_write_failed_by_lost_leadership_is_never_retried_under_a_new_epoch() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 2);
    c.settle();
    let [b, cc] = others(&c, a)[..] else {
        unreachable!()
    };
    let before = last_logged(&c, a);
    let r_fwd = c.write(cc);
    c.expect_within(2_000, "A proposes C's forwarded write", |c| {
        last_logged(c, a) > before
    });
    c.cut(a, cc);
    let z_fwd = last_logged(&c, a);
    let r_a = c.write(a);
    let z_a = last_logged(&c, a);
    c.expect_within(2_000, "both proposals durable on B", |c| {
        c.node(b).disk.durable_upto() >= z_a
    });
    c.isolate(a);
    let r_lost = c.write(a);
    let z_lost = last_logged(&c, a);
    assert!(z_fwd < z_a && z_a < z_lost);
    let reqs = [(r_fwd, cc), (r_a, a), (r_lost, a)];
    c.expect_within(10_000, "every client answered", |c| {
        reqs.iter().all(|(r, _)| c.write_outcome(*r).is_some())
    });
    for (r, via) in reqs {
        assert!(
            matches!(c.write_outcome(r), Some(Err(_))),
            "write {r:?} on {via} reported {:?} after its leader lost its quorum",
            c.write_outcome(r)
        );
    }
    let l = elect_among(&mut c, &[b, cc]);
    assert_eq!(l, b, "the follower with the highest zxid must win");
    commit_n(&mut c, b, 2);
    c.check_liveness();
    let expected = [
        (r_fwd, cc, z_fwd, 1),
        (r_a, a, z_a, 1),
        (r_lost, a, z_lost, 0),
    ];
    for (r, via, z, count) in expected {
        let p = payload_of(r, via);
        let sent = zxids_carrying(&c, &p);
        assert!(
            sent.iter().all(|x| *x == z),
            "payload {p:?} of {z} also sent under other zxids: {sent:?}"
        );
        assert_eq!(
            committed_count(&c, &p),
            count,
            "payload {p:?} committed wrongly"
        );
    }
    let forwards = c
        .events()
        .iter()
        .filter(|e| matches!(&e.msg, Message::Request { payload, .. } if *payload == payload_of(r_fwd, cc)))
        .count();
    assert_eq!(forwards, 1, "C forwarded its failed write again");
}

/// E2 (apache/doris #31687, StarRocks #4977): followers apply only on COMMIT, so nothing
/// applied is ever rolled back. Five voters: A's proposal reaches B only while C, D and E
/// stall (two of five logged it, no quorum), then {A, B} | {C, D, E} (the proposal queued for
/// C, D and E is lost with the links); C, D, E elect and commit writes; on healing both
/// A and B truncate the proposal. It never entered any node's applied sequence (the longest
/// applied history ever seen is checked), it is gone from A's and B's logs, and both hold the
/// new leader's writes.
#[test]
fn e2_uncommitted_txn_is_truncated_and_never_applied() {
    let (mut c, a) = started(options(5, 0));
    commit_n(&mut c, a, 2);
    c.settle();
    let [b, cc, d, e] = others(&c, a)[..] else {
        unreachable!()
    };
    for x in [cc, d, e] {
        c.pause(x);
    }
    let req = c.write(a);
    let w = last_logged(&c, a);
    c.expect_within(300, "the proposal durable on B", |c| {
        c.node(b).disk.durable_upto() >= w
    });
    c.partition(&[&[a, b], &[cc, d, e]]);
    for x in [cc, d, e] {
        c.resume(x);
    }
    let n = elect_among(&mut c, &[cc, d, e]);
    let written = commit_n(&mut c, n, 3);
    assert!(
        !matches!(c.write_outcome(req), Some(Ok(_))),
        "the minority committed"
    );
    let mark = c.sync_records().len();
    c.heal_all();
    c.expect_within(
        60_000,
        "A and B follow the new leader with its writes",
        |c| {
            [a, b].iter().all(|x| {
                c.peer(*x).is_some_and(|p| p.is_serving())
                    && c.applied_zxids(*x).contains(&written[2])
            })
        },
    );
    for x in [a, b] {
        let mode = c.sync_records()[mark..]
            .iter()
            .rev()
            .find(|r| r.learner == x)
            .map(|r| r.mode);
        assert!(
            matches!(
                mode,
                Some(SyncMode::Trunc | SyncMode::TruncDiff | SyncMode::Snap)
            ),
            "{x} synced by {mode:?}, not a truncation"
        );
        let disk = &c.node(x).disk;
        assert!(
            !disk
                .log
                .iter()
                .chain(disk.pending.iter())
                .any(|t| t.zxid == w),
            "{x} still logs the uncommitted {w}"
        );
    }
    assert!(
        !c.checker().order.global().iter().any(|t| t.zxid == w),
        "the uncommitted {w} was applied somewhere"
    );
    assert!(!applied_anywhere(&c, w));
    c.check_liveness();
}

/// E6 (StarRocks #5642): a learner too far behind for the log gets a SNAP automatically. A
/// follower is down while the others go through many snapshot/purge cycles under load
/// (local snapshot every 5 applies, one kept, no log kept behind it) and a leader change;
/// it restarts while writes keep coming, is synced by SNAP (the log it would need is purged
/// on every node that could lead), and ends with the full committed history.
#[test]
fn e6_learner_down_for_many_purge_cycles_gets_a_snap() {
    let (mut c, l) = started(purging_options());
    commit_n(&mut c, l, 3);
    c.settle();
    let [f, g] = others(&c, l)[..] else {
        unreachable!()
    };
    let f_last = last_logged(&c, f);
    c.crash(f);
    for _ in 0..8 {
        let reqs: Vec<_> = (0..10).map(|_| c.write(l)).collect();
        c.expect_within(30_000, "a batch committed", |c| {
            reqs.iter()
                .all(|r| matches!(c.write_outcome(*r), Some(Ok(_))))
        });
    }
    c.settle();
    c.crash(l);
    c.restart(l);
    let n = elect_among(&mut c, &[l, g]);
    commit_n(&mut c, n, 10);
    c.settle();
    log_purged_past(&c, &[l, g], f_last);
    let mark = c.sync_records().len();
    c.restart(f);
    let reqs: Vec<_> = (0..10).map(|_| c.write(n)).collect();
    c.expect_within(60_000, "writes commit while the follower rejoins", |c| {
        reqs.iter()
            .all(|r| matches!(c.write_outcome(*r), Some(Ok(_))))
    });
    c.expect_within(60_000, "the follower serves", |c| {
        c.peer(f).is_some_and(|p| p.is_serving())
    });
    let first = c.sync_records()[mark..]
        .iter()
        .find(|r| r.learner == f)
        .map(|r| r.mode);
    assert_eq!(
        first,
        Some(SyncMode::Snap),
        "the lagging follower was not sent a SNAP"
    );
    c.settle();
    c.check_liveness();
    let global: Vec<Zxid> = c.checker().order.global().iter().map(|t| t.zxid).collect();
    assert_eq!(
        c.applied_zxids(f),
        global,
        "the follower lacks part of the history"
    );
    assert!(
        global.len() > 3 + 80 + 10 + 10,
        "only {} txns committed",
        global.len()
    );
}

/// E6's cluster: 3 voters that snapshot every 5 applies, keep one snapshot and no log behind
/// it, with a committed window of 2 txns.
fn purging_options() -> SimOptions {
    let mut o = options(3, 0);
    o.committed_log_window = 2;
    o.diff_from_log_limit = 1_000;
    o.snap_every = 5;
    o.snap_retain = 1;
    o.keep_log = 0;
    o
}

/// Each of `ids` took at least 5 local snapshots and purged its log past `f_last`.
fn log_purged_past(c: &Cluster, ids: &[ServerId], f_last: Zxid) {
    for &x in ids {
        let disk = &c.node(x).disk;
        assert!(
            disk.local_snapshots >= 5,
            "{x} took {} local snapshots",
            disk.local_snapshots
        );
        assert!(
            disk.log_base > f_last,
            "{x} still holds the log after {f_last} (base {})",
            disk.log_base
        );
    }
}
