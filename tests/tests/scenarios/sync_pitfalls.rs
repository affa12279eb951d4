//! PITFALLS C: the synchronization pitfalls `sync.rs` does not cover (C2, C3, C9, C15–C17;
//! C19 and C20, a sync cut short, are in `sync_interrupted.rs`). C6 and C7 are about files the simulated disk does not model (its local
//! snapshots are durable the moment they are taken); they are tested against the real store
//! in `zab-store/tests/sync_pitfalls.rs`.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tests::sim::{Cluster, Weights};
use zab_core::{Epoch, Message};

use super::*;

/// C2 (ZOOKEEPER-1156/1489): an old leader logged two txns nobody else has; after the others
/// moved on it gets TRUNC, and crashes right after the truncation executed. The truncation is
/// durable on its own: it restarts without the dropped txns, resyncs, and ends with exactly
/// the new leader's history, both applied and on disk.
#[test]
fn c2_crash_right_after_trunc_then_resync() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 3);
    c.settle();
    let rest = others(&c, a);
    c.isolate(a);
    c.write(a);
    c.write(a);
    let tip = last_logged(&c, a);
    until_durable(&mut c, a, tip);
    let dropped: Vec<Zxid> = disk_zxids(&c, a)
        .into_iter()
        .filter(|z| z.epoch() == tip.epoch() && *z > c.peer(rest[0]).unwrap().last_logged_zxid())
        .collect();
    assert_eq!(
        dropped.len(),
        2,
        "the old leader holds its two unacked txns"
    );
    let b = elect_among(&mut c, &rest);
    commit_n(&mut c, b, 2);
    let mark = c.events().len();
    c.heal_all();
    c.expect_within(30_000, "the TRUNC executed on the old leader", |c| {
        c.events()[mark..].iter().any(|e| {
            e.to == a && matches!(e.msg, Message::Trunc { zxid } if c.node(a).disk.last_appended() <= zxid)
        })
    });
    c.crash(a);
    assert!(
        dropped.iter().all(|z| !disk_zxids(&c, a).contains(z)),
        "the truncation did not survive the crash: {:?} on disk",
        disk_zxids(&c, a)
    );
    c.restart(a);
    c.check_liveness();
    assert_eq!(c.applied_zxids(a), c.applied_zxids(b));
    let leader_disk = disk_zxids(&c, b);
    for z in disk_zxids(&c, a) {
        assert!(
            leader_disk.contains(&z) || c.applied_zxids(b).contains(&z),
            "{z} only on {a}"
        );
    }
    assert!(dropped.iter().all(|z| !applied_anywhere(&c, *z)));
}

/// C3 (ZOOKEEPER-1319): every node stops; all restart in a seeded random order with some
/// progress in between, so a leader may start its epoch before the last member joins. The
/// new leader starts at `<e,0>`: NEWLEADER carries `<e,0>`, its first proposal is `<e,1>`, and
/// every epoch's proposals are numbered 1, 2, 3, … without a gap.
#[test]
fn c3_new_leader_starts_its_epoch_at_zero_after_a_full_restart() {
    let opts = options(3, 0);
    let seed = opts.seed;
    let (mut c, l) = started(opts);
    commit_n(&mut c, l, 4);
    c.settle();
    let mut order = c.ids();
    for id in &order {
        c.crash(*id);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xc3);
    order.shuffle(&mut rng);
    let mark = c.events().len();
    for (i, id) in order.iter().enumerate() {
        c.restart(*id);
        c.run_for(200 * i as u64 + 100);
    }
    let l = c.stabilize();
    let e = c.peer(l).unwrap().current_epoch();
    let z = c.commit_write(l);
    assert_eq!(z, Zxid::new(e, 1), "the first proposal of epoch {e}");
    let newleaders: Vec<Zxid> = c.events()[mark..]
        .iter()
        .filter(|ev| ev.from == l)
        .filter_map(|ev| match ev.msg {
            Message::NewLeader { zxid } => Some(zxid),
            _ => None,
        })
        .collect();
    assert!(!newleaders.is_empty());
    assert!(
        newleaders.iter().all(|z| *z == Zxid::new(e, 0)),
        "{newleaders:?}"
    );
    c.check_liveness();
    let mut by_epoch: std::collections::BTreeMap<Epoch, Vec<u32>> = Default::default();
    for z in c.applied_zxids(l) {
        by_epoch.entry(z.epoch()).or_default().push(z.counter());
    }
    for (epoch, counters) in by_epoch {
        let want: Vec<u32> = (1..=counters.len() as u32).collect();
        assert_eq!(counters, want, "epoch {epoch} is not numbered from 1");
    }
}

/// C9 (ZOOKEEPER-3104): a follower too far behind gets SNAP while writes keep arriving; the
/// proposals queued behind the snapshot continue exactly where its zxid ends (no gap, no
/// overlap); the follower crashes right after UPTODATE, restarts and must hold the whole
/// history.
#[test]
fn c9_snap_under_write_load_is_contiguous() {
    let mut o = options(3, 0);
    o.committed_log_window = 2;
    o.diff_from_log_limit = 3;
    let (mut c, l) = started(o);
    let f = others(&c, l)[0];
    commit_n(&mut c, l, 3);
    c.crash(f);
    commit_n(&mut c, l, 12);
    let mark = c.events().len();
    c.restart(f);
    let mut i = 0;
    while !c.events()[mark..]
        .iter()
        .any(|e| e.to == f && matches!(e.msg, Message::UpToDate))
    {
        if i % 4 == 0 {
            c.write(l);
        }
        c.step_with(Weights::QUIET);
        i += 1;
        assert!(i < 20_000, "no UPTODATE to {f}; {}", c.describe());
    }
    assert_eq!(last_sync(&c, f), Some(SyncMode::Snap));
    let queued_before_uptodate = proposals_sent(&c, mark, l, f).len();
    let snap = c.events()[mark..]
        .iter()
        .find_map(|e| match e.msg {
            Message::Snap { zxid, .. } if e.to == f => Some(zxid),
            _ => None,
        })
        .unwrap();
    c.crash(f);
    c.restart(f);
    c.check_liveness();
    let history = c.applied_zxids(l);
    let queued: Vec<Zxid> = proposals_sent(&c, mark, l, f)
        .into_iter()
        .take(queued_before_uptodate)
        .collect();
    assert!(!queued.is_empty(), "no proposal queued behind the snapshot");
    let start = history.iter().position(|z| *z == snap).map_or(0, |p| p + 1);
    assert_eq!(
        queued[..],
        history[start..start + queued.len()],
        "the proposals after SNAP {snap} are not the history right after it"
    );
    assert_eq!(c.applied_zxids(f), history);
}

/// C15 (ZOOKEEPER-4925, QuorumSyncTest): F1 misses writes and comes back by DIFF; F2 then
/// falls behind; the leader dies, F2 restarts and F1, whose history partly arrived by that
/// DIFF, leads and syncs F2 and later the old leader. Every committed write survives
/// (liveness phase), and all end with the same history.
#[test]
fn c15_diff_synced_follower_leads_a_stale_one() {
    let mut o = options(3, 0);
    o.committed_log_window = 64;
    let (mut c, l) = started(o);
    let [f1, f2] = others(&c, l)[..] else {
        unreachable!()
    };
    commit_n(&mut c, l, 3);
    c.crash(f1);
    commit_n(&mut c, l, 6);
    c.restart(f1);
    c.stabilize();
    assert_eq!(last_sync(&c, f1), Some(SyncMode::Diff));
    c.settle();
    c.crash(f2);
    commit_n(&mut c, l, 3);
    c.settle();
    c.crash(l);
    c.restart(f2);
    let leader = elect_among(&mut c, &[f1, f2]);
    assert_eq!(leader, f1, "the node with the longest history leads");
    assert!(matches!(
        last_sync(&c, f2),
        Some(SyncMode::Diff | SyncMode::DiffFromLog)
    ));
    commit_n(&mut c, f1, 2);
    c.restart(l);
    c.check_liveness();
    assert_eq!(c.applied_zxids(f2), c.applied_zxids(f1));
    assert_eq!(c.applied_zxids(l), c.applied_zxids(f1));
}

/// C16 (ZOOKEEPER-2418/2846): the leader purged the part of its log a lagging follower needs
/// (frequent snapshots, no log kept behind them) and the in-memory window is short, so a DIFF
/// would have a gap between the follower's zxid and what the leader still holds: the leader
/// must choose SNAP, and its proposals after the snapshot continue it without a gap.
#[test]
fn c16_leader_with_a_purged_log_sends_snap_not_a_gappy_diff() {
    let mut o = options(3, 0);
    o.committed_log_window = 2;
    o.diff_from_log_limit = 1_000;
    o.snap_every = 3;
    o.snap_retain = 1;
    o.keep_log = 0;
    let (mut c, l) = started(o);
    let f = others(&c, l)[0];
    commit_n(&mut c, l, 2);
    c.settle();
    c.crash(f);
    let behind = c.node(f).disk.durable_upto();
    commit_n(&mut c, l, 20);
    c.settle();
    for _ in 0..3 {
        c.run_for(200);
    }
    let leader_log_base = c.node(l).disk.log_base;
    assert!(
        leader_log_base > behind,
        "precondition: the leader's log (base {leader_log_base}) must no longer hold what \
         follows {behind}"
    );
    let mark = c.events().len();
    c.restart(f);
    c.stabilize();
    assert_eq!(last_sync(&c, f), Some(SyncMode::Snap));
    assert!(
        !c.events()[mark..]
            .iter()
            .any(|e| e.to == f && matches!(e.msg, Message::Diff { .. })),
        "a DIFF was sent across the purged range"
    );
    c.check_liveness();
    assert_eq!(c.applied_zxids(f), c.applied_zxids(l));
}

/// C17 (ZOOKEEPER-4352, k8s scale-up): X leads with Y, Z has never run; X writes; X and Y
/// stop, Y restarts (its in-memory committed window is empty) and leads with the empty Z.
/// Z must not get an empty or in-memory DIFF: it gets X's early writes from Y's log or a
/// snapshot. The plan itself is property-tested over all orderings of (peer, window, log) in
/// `zab-core/src/sync_plan/tests.rs` (`structural_rules_hold_for_every_ordering`,
/// `c17_empty_window_on_a_fresh_leader`).
#[test]
fn c17_fresh_leader_with_an_empty_window_syncs_a_new_member() {
    let mut o = options(3, 0);
    o.committed_log_window = 2;
    o.snap_every = 5;
    let mut c = Cluster::new(o);
    let z = sid(3);
    c.crash(z);
    let x = elect_among(&mut c, &[sid(1), sid(2)]);
    let y = if x == sid(1) { sid(2) } else { sid(1) };
    let early = commit_n(&mut c, x, 5);
    c.settle();
    c.run_for(500);
    assert!(
        c.node(y).disk.snapshot_zxid() >= *early.last().unwrap(),
        "precondition: {y}'s snapshot covers the early writes, so it restarts with nothing in \
         memory"
    );
    c.crash(x);
    c.crash(y);
    c.restart(y);
    c.restart(z);
    let leader = elect_among(&mut c, &[y, z]);
    assert_eq!(leader, y);
    c.stabilize();
    let mode = last_sync(&c, z);
    assert!(
        matches!(mode, Some(SyncMode::DiffFromLog | SyncMode::Snap)),
        "a member with nothing must get the log or a snapshot, got {mode:?}"
    );
    for w in &early {
        assert!(c.applied_zxids(z).contains(w), "{z} misses early write {w}");
    }
    c.restart(x);
    c.check_liveness();
}

/// C17, the window itself: Z falls behind after two writes; X and Y commit eight more and Y
/// snapshots past all of them; X and Y stop and Y restarts, so its in-memory window is empty
/// while its log still holds every record. Y leads and Z's zxid is in Y's history: the empty
/// window must read as "no window", so Z gets the missing txns from Y's on-disk log (an
/// in-memory DIFF would have nothing to send from).
#[test]
fn c17_fresh_leader_with_an_empty_window_diffs_a_stale_member_from_its_log() {
    let mut o = options(3, 0);
    o.committed_log_window = 2;
    o.snap_every = 1;
    o.keep_log = 100;
    let (mut c, x) = started(o);
    let [y, z] = others(&c, x)[..] else {
        unreachable!()
    };
    commit_n(&mut c, x, 2);
    c.settle();
    c.crash(z);
    let late = commit_n(&mut c, x, 8);
    c.settle();
    c.run_for(500);
    assert!(
        c.node(y).disk.snapshot_zxid() >= *late.last().unwrap(),
        "precondition: {y}'s snapshot covers every write, so it restarts with nothing in memory"
    );
    c.crash(x);
    c.crash(y);
    c.restart(y);
    c.restart(z);
    assert_eq!(elect_among(&mut c, &[y, z]), y);
    c.stabilize();
    assert_eq!(last_sync(&c, z), Some(SyncMode::DiffFromLog));
    for w in &late {
        assert!(c.applied_zxids(z).contains(w), "{z} misses {w}");
    }
    c.restart(x);
    c.check_liveness();
}
