//! PITFALLS D and E: broadcast, quorum, liveness, stalled leaders.

use zab_core::Message;

use super::*;

/// D3 (ZOOKEEPER-1675): a deposed leader that has not noticed yet must not answer a sync with
/// a stale read point (linearizability checker); here it is asked right after the others
/// committed a write.
#[test]
fn d3_stale_sync_on_a_deposed_leader() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 2);
    let rest = others(&c, a);
    c.isolate(a);
    let b = elect_among(&mut c, &rest);
    let w = c.commit_write(b);
    let req = c.sync_read(a);
    c.run_for(5_000);
    if let Some(Ok(z)) = c.sync_outcome(req) {
        assert!(z >= w, "stale read point {z} < {w}");
    }
    c.check_liveness();
}

/// D4: a full partition A | B | C; within syncLimit (plus slack) no node serves as leader and
/// no write commits.
#[test]
fn d4_step_down_on_quorum_loss() {
    let o = options(3, 0);
    let limit_ms = o.tick_ms * u64::from(o.sync_limit_ticks);
    let (mut c, _) = started(o);
    let ids = c.ids();
    c.partition(&[&ids[0..1], &ids[1..2], &ids[2..3]]);
    c.run_for(limit_ms * 2 + 500);
    assert_eq!(c.leader(), None, "a leader still serves without a quorum");
    let reqs: Vec<_> = ids.iter().map(|id| c.write(*id)).collect();
    c.run_for(5_000);
    for r in reqs {
        assert!(
            !matches!(c.write_outcome(r), Some(Ok(_))),
            "a write committed in a minority"
        );
    }
    assert!(
        ids.iter().all(|id| !c.peer(*id).unwrap().is_serving()),
        "a minority node serves"
    );
    c.check_liveness();
}

/// D9: a proposal reaches one follower only; the leader stalls; the follower with the higher
/// zxid wins and commits the proposal through NEWLEADER; the old leader resumes with stale
/// packets queued. The proposal ends up everywhere.
#[test]
fn d9_old_epoch_proposal_committed_through_newleader() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 2);
    c.settle();
    let [b, cc] = others(&c, a)[..] else {
        unreachable!()
    };
    c.cut(a, cc);
    let mark = c.events().len();
    c.write(a);
    let p = last_logged(&c, a);
    c.expect_within(10_000, "the proposal durable on B", |c| {
        c.node(b).disk.durable_upto() >= p
    });
    assert!(c.events()[mark..]
        .iter()
        .any(|e| e.to == b && matches!(e.msg, Message::Proposal(_))));
    c.pause(a);
    c.heal_all();
    let l = elect_among(&mut c, &[b, cc]);
    assert_eq!(l, b, "the follower with the highest zxid must win");
    c.resume(a);
    c.check_liveness();
    assert!(c.applied_zxids(cc).contains(&p), "proposal {p} lost");
}

/// E3: the leader stalls for twice the election timeout; the others elect; on resuming it must
/// stop serving and rejoin as a follower.
#[test]
fn e3_stalled_leader_rejoins_as_follower() {
    let (mut c, a) = started(options(3, 0));
    commit_n(&mut c, a, 2);
    c.pause(a);
    let rest = others(&c, a);
    let b = elect_among(&mut c, &rest);
    commit_n(&mut c, b, 2);
    c.resume(a);
    c.run_for(3_000);
    let l = c.stabilize();
    assert_ne!(l, a);
    c.check_liveness();
}

/// A 7-voter cluster with observers loses its leader and a minority under load and recovers.
#[test]
fn seven_voters_lose_leader_and_minority_under_load() {
    let (mut c, l) = started(options(7, 2));
    commit_n(&mut c, l, 3);
    let rest = others(&c, l);
    c.crash(l);
    c.crash(rest[0]);
    c.crash(rest[1]);
    for _ in 0..10 {
        c.write(rest[2]);
        c.step_with(tests::sim::Weights::QUIET);
    }
    let n = elect_among(&mut c, &rest[2..]);
    commit_n(&mut c, n, 3);
    c.check_liveness();
}
