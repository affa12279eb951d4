//! PITFALLS D1, D5, E4: commit order under pipelining, elections on a large state, joiners
//! that must not cost the cluster its quorum.

use zab_core::{Message, Zxid};

use super::*;

/// The leader's ACKs received from `mark` on, as (sender, zxid), NEWLEADER acks left out.
fn acks_to(c: &tests::sim::Cluster, leader: ServerId, mark: usize) -> Vec<(ServerId, Zxid)> {
    c.events()[mark..]
        .iter()
        .filter(|e| e.to == leader)
        .filter_map(|e| match e.msg {
            Message::Ack { zxid } if zxid.counter() > 0 => Some((e.from, zxid)),
            _ => None,
        })
        .collect()
}

/// D1: commit strictly in zxid order when ACKs arrive out of order. Five voters, so a commit
/// needs the leader and two followers; E's link to the leader is cut, C and D are paused
/// (stalled, links up) while twelve writes are in flight, so only B acks them at once. C and D
/// then resume and ack in their own fsync batches: the leader receives ACKs for low zxids
/// after B's ACK for the highest one, and each proposal's quorum is completed by a late ACK.
/// COMMITs go out strictly in zxid order and gap-free; the order checker (PrimaryOrder,
/// gap-free per epoch) runs after every step on every node's applied sequence.
#[test]
fn d1_commits_in_zxid_order_when_acks_arrive_out_of_order() {
    let (mut c, l) = started(options(5, 0));
    commit_n(&mut c, l, 2);
    c.settle();
    let [b, cc, d, e] = others(&c, l)[..] else {
        unreachable!()
    };
    c.cut(l, e);
    c.pause(cc);
    c.pause(d);
    let mark = c.events().len();
    let reqs: Vec<_> = (0..12).map(|_| c.write(l)).collect();
    let last = last_logged(&c, l);
    c.expect_within(400, "B acks the last write", |c| {
        acks_to(c, l, mark).contains(&(b, last))
    });
    assert!(
        reqs.iter().all(|r| c.write_outcome(*r).is_none()),
        "a write committed with only the leader and B"
    );
    c.resume(d);
    c.resume(cc);
    let last_req = reqs[reqs.len() - 1];
    c.expect_within(10_000, "the last write committed", |c| {
        matches!(c.write_outcome(last_req), Some(Ok(_)))
    });
    let acks = acks_to(&c, l, mark);
    let b_last = acks.iter().position(|a| *a == (b, last)).unwrap();
    let late_low = acks[b_last..]
        .iter()
        .filter(|(from, z)| *from != b && *z < last)
        .count();
    assert!(
        late_low > 0,
        "no ACK for a lower zxid arrived after B's ACK for {last}: {acks:?}"
    );
    let expected: Vec<Zxid> = (0..reqs.len() as u64)
        .map(|i| Zxid(last.0 - (reqs.len() as u64 - 1) + i))
        .collect();
    for f in [b, cc, d] {
        let commits: Vec<Zxid> = c.events()[mark..]
            .iter()
            .filter(|ev| ev.from == l && ev.to == f)
            .filter_map(|ev| match ev.msg {
                Message::Commit { zxid } => Some(zxid),
                _ => None,
            })
            .collect();
        assert_eq!(
            commits, expected,
            "COMMITs to {f} out of zxid order or with gaps"
        );
    }
    let zxids: Vec<Zxid> = reqs
        .iter()
        .map(|r| match c.write_outcome(*r) {
            Some(Ok(z)) => z,
            other => panic!("write {r:?} answered {other:?} after a later one committed"),
        })
        .collect();
    assert_eq!(zxids, expected, "writes committed at unexpected zxids");
    c.check_liveness();
}

/// The first message of a sync (DIFF, TRUNC or SNAP header).
fn is_sync_start(msg: &Message) -> bool {
    matches!(
        msg,
        Message::Diff { .. } | Message::Snap { .. } | Message::Trunc { .. }
    )
}

/// Crashes the leader of a settled cluster and measures the virtual time until a write
/// through the new leader commits. Asserts no SNAP and no snapshot install on any node in that
/// window, and that every learner synced with a DIFF. Returns the time in virtual ms.
fn failover_ms(writes: usize, snap_every: usize) -> u64 {
    let mut o = options(3, 0);
    o.snap_every = snap_every;
    let (mut c, l) = started(o);
    for _ in 0..writes / 25 {
        let reqs: Vec<_> = (0..25).map(|_| c.write(l)).collect();
        c.expect_within(30_000, "a batch of writes committed", |c| {
            reqs.iter()
                .all(|r| matches!(c.write_outcome(*r), Some(Ok(_))))
        });
    }
    c.settle();
    let rest = others(&c, l);
    let installs = |c: &tests::sim::Cluster| -> u64 {
        c.ids()
            .iter()
            .map(|id| c.node(*id).disk.snap_installs)
            .sum()
    };
    let before = installs(&c);
    let local = c.node(rest[0]).disk.local_snapshots;
    assert!(
        snap_every == 0 || local >= (writes / snap_every) as u64 / 2,
        "the followers took only {local} local snapshots"
    );
    let mark = c.events().len();
    let records = c.sync_records().len();
    let t0 = c.now_ms();
    c.crash(l);
    let n = elect_among(&mut c, &rest);
    let z = c.commit_write(n);
    let took = c.now_ms() - t0;
    assert!(z.counter() == 1, "the first write of the new epoch is {z}");
    assert_eq!(
        installs(&c),
        before,
        "a snapshot was installed during fail-over"
    );
    assert!(
        !c.events()[mark..]
            .iter()
            .any(|e| matches!(e.msg, Message::Snap { .. } | Message::SnapChunk { .. })),
        "a SNAP was sent during fail-over"
    );
    let modes: Vec<_> = c.sync_records()[records..].iter().map(|r| r.mode).collect();
    assert!(
        !modes.is_empty()
            && modes
                .iter()
                .all(|m| matches!(m, SyncMode::EmptyDiff | SyncMode::Diff)),
        "fail-over sync modes {modes:?}"
    );
    c.restart(l);
    c.stabilize();
    assert_ne!(
        last_sync(&c, l),
        Some(SyncMode::Snap),
        "the old leader got a SNAP"
    );
    assert_eq!(installs(&c), before, "the old leader installed a snapshot");
    c.check_liveness();
    took
}

/// D5 (ZOOKEEPER-1697/-2678): no full-state write on the election/sync critical path. A
/// cluster holding 1000 txns and dozens of local snapshots per node loses its leader; the new
/// leader syncs its follower with a DIFF (no SNAP, no snapshot installed anywhere), commits
/// its first write within a bound, and the returning old leader syncs by DIFF too. The time
/// to the first committed write does not grow with the state: it stays within a bound that a
/// 50-txn cluster also meets.
#[test]
fn d5_failover_on_a_large_state_writes_no_snapshot() {
    let big = failover_ms(1_000, 15);
    let small = failover_ms(50, 15);
    eprintln!("D5: first write of the new leader after {big} ms (1000 txns), {small} ms (50 txns)");
    assert!(big <= 4_000, "fail-over took {big} ms of virtual time");
    assert!(small <= 4_000, "fail-over took {small} ms of virtual time");
}

/// E4 (Doris `addUnReadyElectableNode`): a joining node must not raise the quorum before it
/// can ACK. Three voters with one follower partitioned away; an observer that was down for
/// 30 writes rejoins and stalls in the middle of its sync. Writes keep committing with the
/// leader and the one reachable follower while the observer is not yet serving, and the
/// observer ends with the full history once it resumes.
#[test]
fn e4_observer_joining_mid_sync_does_not_block_writes() {
    let (mut c, l) = started(options(3, 1));
    let obs = sid(4);
    let [f, partitioned] = others(&c, l)[..2] else {
        unreachable!()
    };
    c.crash(obs);
    commit_n(&mut c, l, 30);
    c.partition(&[&[l, f, obs], &[partitioned]]);
    let mark = c.events().len();
    c.restart(obs);
    c.expect_within(30_000, "the observer's sync started", |c| {
        c.events()[mark..]
            .iter()
            .any(|e| e.from == l && e.to == obs && is_sync_start(&e.msg))
    });
    c.pause(obs);
    let during = commit_n(&mut c, l, 5);
    assert!(
        !c.peer(obs).unwrap().is_serving(),
        "the observer finished its sync while paused"
    );
    c.resume(obs);
    let reqs: Vec<_> = (0..5).map(|_| c.write(l)).collect();
    c.expect_within(
        30_000,
        "writes committed while the observer catches up",
        |c| {
            reqs.iter()
                .all(|r| matches!(c.write_outcome(*r), Some(Ok(_))))
        },
    );
    c.expect_within(60_000, "the observer serves with the history", |c| {
        c.peer(obs).is_some_and(|p| p.is_serving()) && c.applied_zxids(obs).contains(&during[4])
    });
    c.check_liveness();
}

/// E4 with a wiped voter: three voters, the follower that was partitioned away is wiped and
/// rejoins without bootstrap, so it syncs as a non-voting learner. While it syncs (stalled in
/// the middle, like a slow copy) the leader and the other follower keep committing; after its
/// first sync it is a voter again and its vote then keeps the cluster writable when the other
/// follower crashes.
#[test]
fn e4_wiped_voter_rejoining_does_not_block_writes() {
    let (mut c, l) = started(options(3, 0));
    let [f, w] = others(&c, l)[..] else {
        unreachable!()
    };
    commit_n(&mut c, l, 20);
    c.isolate(w);
    commit_n(&mut c, l, 10);
    c.wipe(w);
    let mark = c.events().len();
    c.heal_all();
    c.expect_within(30_000, "the wiped node's sync started", |c| {
        c.events()[mark..]
            .iter()
            .any(|e| e.from == l && e.to == w && is_sync_start(&e.msg))
    });
    c.pause(w);
    commit_n(&mut c, l, 5);
    assert!(c.peer(w).unwrap().needs_initial_sync());
    c.resume(w);
    c.expect_within(60_000, "the wiped node synced and voting", |c| {
        c.peer(w)
            .is_some_and(|p| !p.needs_initial_sync() && p.is_serving())
    });
    c.crash(f);
    let n = elect_among(&mut c, &[l, w]);
    commit_n(&mut c, n, 3);
    c.check_liveness();
}
