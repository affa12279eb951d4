//! PITFALLS B: epochs, election and discovery.

use zab_core::{Message, RequestError, Role};

use super::*;

/// B1 (ZOOKEEPER-335): a leader paused right after LEADERINFO; the others elect without it;
/// it resumes with its stale queue. No two txns may share a zxid (Integrity checker), and the
/// acceptedEpoch is durable before ACKEPOCH (durability checker).
#[test]
fn b1_leader_paused_after_leaderinfo_cannot_reuse_an_epoch() {
    let mut c = tests::sim::Cluster::new(options(3, 0));
    c.expect_within(30_000, "a LEADERINFO sent", |c| {
        c.events()
            .iter()
            .any(|e| matches!(e.msg, Message::LeaderInfo { .. }))
    });
    let a = c
        .events()
        .iter()
        .find(|e| matches!(e.msg, Message::LeaderInfo { .. }))
        .unwrap()
        .from;
    c.pause(a);
    let rest = others(&c, a);
    let b = elect_among(&mut c, &rest);
    commit_n(&mut c, b, 3);
    c.resume(a);
    c.run_for(2_000);
    c.check_liveness();
}

/// B3 (ZOOKEEPER-4643): a lagging follower acks NEWLEADER after a DIFF and crashes at once;
/// the leader crashes too; the follower and the third node must still hold every
/// acknowledged write.
#[test]
fn b3_follower_crashes_right_after_acking_newleader() {
    let (mut c, a) = started(options(3, 0));
    let [b, f] = others(&c, a)[..] else {
        unreachable!()
    };
    commit_n(&mut c, a, 2);
    c.settle();
    c.crash(f);
    commit_n(&mut c, a, 3);
    c.restart(f);
    c.expect_within(30_000, "the NEWLEADER ack", |c| {
        c.events()
            .iter()
            .any(|e| e.from == f && matches!(e.msg, Message::Ack { zxid } if zxid.counter() == 0))
    });
    c.crash(f);
    c.crash(a);
    c.restart(f);
    elect_among(&mut c, &[b, f]);
    c.check_liveness();
}

/// B9 (ZOOKEEPER-261): writes acked by {A, B, C} of five; C is wiped and restarted without
/// bootstrap; A and B crash before C resyncs. C, D, E must not elect (C does not vote until
/// its first sync, and D, E alone are no quorum): no leader for 20 s. Once A is back, A, D, E
/// elect a leader holding the writes; C syncs, becomes a voter and holds them too.
#[test]
fn b9_wiped_node_must_not_complete_a_quorum_without_committed_data() {
    let (mut c, a) = started(options(5, 0));
    let rest = others(&c, a);
    let (b, cc, d, e) = (rest[0], rest[1], rest[2], rest[3]);
    c.crash(d);
    c.crash(e);
    let written = commit_n(&mut c, a, 2);
    c.settle();
    c.wipe(cc);
    c.crash(a);
    c.crash(b);
    c.restart(d);
    c.restart(e);
    let elected = c.run_until(20_000, |c| leader_among(c, &[cc, d, e]).is_some());
    assert!(
        !elected,
        "C, D, E elected a leader without the committed writes"
    );
    assert!(c.peer(cc).unwrap().needs_initial_sync());
    c.restart(a);
    elect_among(&mut c, &[a, d, e]);
    c.expect_within(60_000, "C synced and voting", |c| {
        c.peer(cc)
            .is_some_and(|p| !p.needs_initial_sync() && p.role() == Role::Following)
    });
    let at_c = c.applied_zxids(cc);
    assert!(written.iter().all(|z| at_c.contains(z)), "C lacks a write");
    c.check_liveness();
}

/// B9: the wiped node crashes after its sync data arrived but before `PersistInitialized`; it
/// restarts still uninitialized (never voting on a half-done sync), then completes a sync.
#[test]
fn b9_crash_between_sync_and_persist_initialized_keeps_the_node_non_voting() {
    let (mut c, a) = started(options(3, 0));
    let w = others(&c, a)[0];
    let written = commit_n(&mut c, a, 3);
    c.settle();
    c.wipe(w);
    c.expect_within(30_000, "the wiped node's NEWLEADER ack", |c| {
        c.events()
            .iter()
            .any(|e| e.from == w && matches!(e.msg, Message::Ack { zxid } if zxid.counter() == 0))
    });
    assert!(
        c.node(w).disk.needs_initial_sync,
        "not initialized before UPTODATE"
    );
    c.crash(w);
    c.restart(w);
    assert!(c.peer(w).unwrap().needs_initial_sync());
    c.expect_within(60_000, "the wiped node synced and voting", |c| {
        c.peer(w)
            .is_some_and(|p| !p.needs_initial_sync() && p.role() == Role::Following)
    });
    assert!(!c.node(w).disk.needs_initial_sync);
    let at_w = c.applied_zxids(w);
    assert!(written.iter().all(|z| at_w.contains(z)));
    c.check_liveness();
}

/// B9: a wiped node becomes a voter after its sync, and its vote then counts: with the other
/// follower down, the leader and the former wiped node commit writes, and after the leader
/// crashes too, the synced node and the returning follower elect a leader holding them.
#[test]
fn b9_wiped_node_becomes_a_voter_after_its_sync() {
    let (mut c, a) = started(options(3, 0));
    let [w, f] = others(&c, a)[..] else {
        unreachable!()
    };
    let before = commit_n(&mut c, a, 2);
    c.settle();
    c.wipe(w);
    c.expect_within(60_000, "the wiped node synced and voting", |c| {
        c.peer(w)
            .is_some_and(|p| !p.needs_initial_sync() && p.role() == Role::Following)
    });
    c.crash(f);
    let l = elect_among(&mut c, &[a, w]);
    let after = commit_n(&mut c, l, 2);
    c.settle();
    c.crash(a);
    c.restart(f);
    elect_among(&mut c, &[w, f]);
    c.settle();
    let at_f = c.applied_zxids(f);
    assert!(
        before.iter().chain(after.iter()).all(|z| at_f.contains(z)),
        "a write committed with the former wiped node's vote was lost"
    );
    c.check_liveness();
}

/// B10 (ZOOKEEPER-1277): with a tiny counter space the leader must force a new epoch before
/// the counter overflows; writes keep committing across the rollovers.
#[test]
fn b10_zxid_counter_rollover_forces_a_new_epoch() {
    let mut o = options(3, 0);
    o.max_counter = 4;
    let (mut c, l) = started(o);
    let first_epoch = c.peer(l).unwrap().current_epoch();
    let mut zxids = Vec::new();
    let mut attempts = 0;
    while zxids.len() < 12 {
        attempts += 1;
        assert!(attempts < 100, "writes stopped committing across rollovers");
        let via = c.stabilize();
        match c.write_and_wait(via) {
            Some(Ok(z)) => zxids.push(z),
            Some(Err(RequestError::EpochExhausted | RequestError::QuorumLost)) | None => {}
            Some(Err(e)) => panic!("unexpected write error {e:?}"),
        }
    }
    assert!(
        zxids.iter().all(|z| z.counter() <= 4),
        "counter beyond max_counter: {zxids:?}"
    );
    let l2 = c.stabilize();
    assert!(c.peer(l2).unwrap().current_epoch().0 >= first_epoch.0 + 2);
    c.check_liveness();
}

/// B11: five nodes; D and E paused; w committed on {A, B, C}; A crashes; D and E resume and
/// C's links are cut for a while so D or E could gather votes first. Whoever leads holds w
/// (durability checker at establishment).
#[test]
fn b11_leader_less_up_to_date_than_a_follower_must_not_win() {
    let (mut c, a) = started(options(5, 0));
    let rest = others(&c, a);
    let (b, cc, d, e) = (rest[0], rest[1], rest[2], rest[3]);
    c.pause(d);
    c.pause(e);
    commit_n(&mut c, a, 3);
    c.crash(a);
    c.resume(d);
    c.resume(e);
    for x in [b, d, e] {
        c.cut(cc, x);
    }
    c.run_for(3_000);
    c.heal_all();
    c.run_for(3_000);
    c.restart(a);
    c.check_liveness();
}

/// B12 (ZOOKEEPER-2959): observers never count. With two of three voters down, one voter and
/// two observers must not establish a leader or commit a write.
#[test]
fn b12_observers_never_complete_a_quorum() {
    let (mut c, l) = started(options(3, 2));
    let voters = [sid(1), sid(2), sid(3)];
    let down: Vec<_> = voters.iter().copied().filter(|v| *v != l).collect();
    for v in &down {
        c.crash(*v);
    }
    let req = c.write(l);
    c.run_for(10_000);
    assert!(
        !matches!(c.write_outcome(req), Some(Ok(_))),
        "a write committed without a quorum"
    );
    assert_eq!(
        c.leader(),
        None,
        "a leader serves without a quorum of voters"
    );
    for v in down {
        c.restart(v);
    }
    c.check_liveness();
}

/// B5 (ZOOKEEPER-1653/2354): a learner crashes after the SNAP of a later epoch reached its
/// disk but before its NEWLEADER wrote currentEpoch. Its data now ends in an epoch above its
/// currentEpoch file. It must start (the harness fails the run if the core refuses the durable
/// state), keep the currentEpoch its file says (never adopt the snapshot's epoch: it did not
/// accept that NEWLEADER), then sync again and hold every committed write.
#[test]
fn b5_crash_after_snap_install_before_current_epoch_restarts_deterministically() {
    let mut o = options(3, 0);
    o.snap_every = 5;
    o.keep_log = 0;
    o.diff_from_log_limit = 5;
    let (mut c, a) = started(o);
    let [f, b] = others(&c, a)[..] else {
        unreachable!()
    };
    commit_n(&mut c, a, 2);
    c.settle();
    c.crash(f);
    let old_epoch = c.node(f).disk.current_epoch;
    // A new epoch among {a, b}, with enough writes that f can only get a SNAP.
    c.crash(a);
    c.restart(a);
    let l = elect_among(&mut c, &[a, b]);
    let written = commit_n(&mut c, l, 30);
    c.settle();
    let new_epoch = c.peer(l).unwrap().current_epoch();
    assert!(new_epoch > old_epoch);
    c.restart(f);
    c.expect_within(30_000, "f installing a SNAP", |c| {
        c.node(f).disk.install.is_some()
    });
    assert!(c.crash_after_install(f));
    let disk = &c.node(f).disk;
    assert_eq!(
        disk.current_epoch, old_epoch,
        "currentEpoch written too early"
    );
    assert!(
        disk.snapshot_zxid().epoch() > old_epoch,
        "the snapshot is of epoch {}, not above currentEpoch {old_epoch}",
        disk.snapshot_zxid().epoch()
    );
    c.restart(f);
    assert_eq!(c.peer(f).unwrap().current_epoch(), old_epoch);
    c.expect_within(30_000, "f synced again", |c| {
        c.peer(f).is_some_and(|p| p.is_serving())
    });
    assert!(c.peer(f).unwrap().current_epoch() >= new_epoch);
    let at_f = c.applied_zxids(f);
    assert!(written.iter().all(|z| at_f.contains(z)), "f lacks a write");
    c.check_liveness();
}
