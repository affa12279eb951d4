//! PITFALLS B: election and discovery timing (B2, B6, B7, B8). The epoch-file ordering
//! scenarios of the same section live in `epochs.rs`.

use std::collections::BTreeMap;

use zab_core::{ElectionState, Message, Role};

use super::*;

/// A node of `ids` that has taken the lead but is not established yet (still in discovery or
/// sync), if any.
fn prospective_leader(c: &Cluster, ids: &[ServerId]) -> Option<ServerId> {
    ids.iter().copied().find(|id| {
        c.peer(*id)
            .is_some_and(|p| p.role() == Role::Leading && !p.is_serving())
    })
}

/// B7 (ZOOKEEPER-3109): three voters, one down, so the two others are exactly a quorum. Once
/// one of them has taken the lead, the link to its only voter is cut, which breaks that voter's
/// quorum connection (its FOLLOWERINFO is lost and it goes back to LOOKING), and healed 50 ms
/// later. The LOOKING voter cannot rejoin (only the leader reports LEADING, no quorum), so
/// without the `epoch_wait_ticks` rule the prospective leader waits out the whole `initLimit`
/// (here 50 ticks = 5 s). With it, the leader re-elects once the voter reports LOOKING past the
/// wait: a serving leader within 1.5 s of the cut, well under initLimit × tickTime.
#[test]
fn b7_voter_back_to_looking_does_not_stall_the_prospective_leader_for_init_limit() {
    let mut o = options(3, 0);
    o.init_limit_ticks = 50;
    let init_ms = o.tick_ms * u64::from(o.init_limit_ticks);
    let (mut c, l) = started(o);
    let [b, down] = others(&c, l)[..] else {
        unreachable!()
    };
    c.crash(down);
    c.crash(l);
    c.restart(l);
    let pair = [l, b];
    c.expect_within(10_000, "a prospective leader", |c| {
        prospective_leader(c, &pair).is_some()
    });
    let a = prospective_leader(&c, &pair).unwrap();
    let voter = if a == l { b } else { l };
    let cut_at = c.now_ms();
    c.cut(a, voter);
    c.run_for(50);
    c.heal(a, voter);
    c.expect_within(init_ms, "a serving leader after the cut", |c| {
        leader_among(c, &pair).is_some()
    });
    let took = c.now_ms() - cut_at;
    eprintln!("b7: a serving leader {took} ms after the cut");
    assert!(
        took < 1_500,
        "a serving leader only {took} ms after the cut (initLimit is {init_ms} ms)"
    );
    c.restart(down);
    c.check_liveness();
}

/// The index in `c.events()` of the first message `pred` accepts, if any.
fn first_event(c: &Cluster, pred: impl Fn(&tests::sim::record::Event) -> bool) -> Option<usize> {
    c.events().iter().position(pred)
}

/// B2 (ZOOKEEPER-1282/1264/1291): the leader writes acceptedEpoch = e before its first
/// LEADERINFO { e } goes out, and a learner writes currentEpoch = e when it acks NEWLEADER, not
/// at UPTODATE. A learner is crashed in the very step it acks NEWLEADER (UPTODATE cannot have
/// reached it yet): its currentEpoch file already holds e, and it restarts with currentEpoch e.
#[test]
fn b2_current_epoch_is_written_at_newleader_and_accepted_epoch_before_leaderinfo() {
    let mut c = Cluster::new(options(3, 0));
    let newleader_ack = |e: &tests::sim::record::Event| matches!(e.msg, Message::Ack { zxid } if zxid.counter() == 0);
    c.expect_within(30_000, "a NEWLEADER ack", |c| {
        first_event(c, newleader_ack).is_some()
    });
    let i = first_event(&c, newleader_ack).unwrap();
    let (f, l) = (c.events()[i].from, c.events()[i].to);
    let Message::Ack { zxid } = c.events()[i].msg else {
        unreachable!()
    };
    let e = zxid.epoch();
    assert!(
        !c.events()[i..]
            .iter()
            .any(|ev| ev.to == f && ev.msg == Message::UpToDate),
        "UPTODATE already sent to the learner"
    );
    assert!(!c.peer(f).unwrap().is_serving());
    // The leader: acceptedEpoch e written before the first LEADERINFO { e }.
    let info = first_event(&c, |ev| {
        ev.from == l && matches!(ev.msg, Message::LeaderInfo { new_epoch, .. } if new_epoch == e)
    })
    .expect("the leader's LEADERINFO");
    let accepted = c
        .epoch_writes()
        .iter()
        .find(|w| w.node == l && w.accepted && w.epoch == e)
        .expect("the leader's acceptedEpoch write");
    assert!(
        accepted.before_event <= info,
        "acceptedEpoch {e} written after LEADERINFO"
    );
    // The learner: currentEpoch e written before its NEWLEADER ack, and durable.
    let current = c
        .epoch_writes()
        .iter()
        .find(|w| w.node == f && !w.accepted && w.epoch == e)
        .expect("the learner's currentEpoch write at NEWLEADER");
    assert!(current.before_event <= i);
    c.crash(f);
    assert_eq!(c.node(f).disk.current_epoch, e, "currentEpoch not durable");
    c.restart(f);
    assert_eq!(c.peer(f).unwrap().current_epoch(), e);
    c.check_liveness();
}

/// B6 (ZOOKEEPER-1732/1805/1818): rolling restarts 150 ms apart, both followers and then the
/// leader, faster than a sync completes. Every restarted node must serve again within one
/// election (800 ms of virtual time from its restart, less than one `initLimit`, so no failed
/// discovery is allowed), and throughout, every FOLLOWING/LEADING notification a serving node
/// sends carries the epoch it actually follows or leads (its currentEpoch), so LOOKING nodes
/// see one `(leader, epoch)` from all of them and can join. Regression for scheduler seeds
/// (`ZAB_SCENARIO_SEED`) where the restarted node was left alone until initLimit (1 s): 5 and
/// 27, where a voter that had adopted its better vote then led for a follower of its old vote
/// (`election` INV-10); 81, 92, 138, 181 and 250, where a leader that decided early without
/// it, leaving its role for its better vote (`looking` INV-13), first answered it as LEADING,
/// so it joined a peer that had just stopped leading (`looking` INV-15, INV-14).
#[test]
fn b6_rolling_restarts_rejoin_within_one_election() {
    let (mut c, l) = started(options(3, 0));
    commit_n(&mut c, l, 3);
    let [f1, f2] = others(&c, l)[..] else {
        unreachable!()
    };
    let mut restarted_at = BTreeMap::new();
    let mut serving_at = BTreeMap::new();
    let mut seen = c.events().len();
    let bound_ms = 800;
    for (k, x) in [f1, f2, l].into_iter().enumerate() {
        c.crash(x);
        c.restart(x);
        restarted_at.insert(x, c.now_ms());
        serving_at.remove(&x);
        let until = c.now_ms() + if k < 2 { 150 } else { 3_000 };
        while c.now_ms() < until {
            if k == 2 && c.stable_leader().is_some() && serving_at.len() == 3 {
                break;
            }
            c.step_with(tests::sim::Weights::QUIET);
            check_established_votes(&c, &mut seen);
            for id in c.ids() {
                if c.peer(id).is_some_and(|p| p.is_serving()) {
                    serving_at.entry(id).or_insert(c.now_ms());
                }
            }
        }
    }
    for (x, at) in &restarted_at {
        let served = serving_at
            .get(x)
            .unwrap_or_else(|| panic!("{x} never served after its restart"));
        let took = served - at;
        eprintln!("b6: {x} serving {took} ms after its restart");
        assert!(
            took <= bound_ms,
            "{x} took {took} ms to rejoin (bound {bound_ms})"
        );
    }
    c.check_liveness();
}

/// Every FOLLOWING/LEADING notification sent since `seen` by a node that serves in that role
/// reports its own leader and the epoch it follows or leads (B6).
fn check_established_votes(c: &Cluster, seen: &mut usize) {
    for ev in &c.events()[*seen..] {
        let Message::Notification(n) = ev.msg else {
            continue;
        };
        let role = match n.state {
            ElectionState::Following => Role::Following,
            ElectionState::Leading => Role::Leading,
            _ => continue,
        };
        let Some(p) = c
            .peer(ev.from)
            .filter(|p| p.role() == role && p.is_serving())
        else {
            continue;
        };
        assert_eq!(
            (n.vote.leader, n.vote.peer_epoch),
            (p.leader().unwrap(), p.current_epoch()),
            "{} reports a vote that is not the leader and epoch it serves under",
            ev.from
        );
        assert_eq!(p.current_epoch(), p.epoch());
    }
    *seen = c.events().len();
}

/// B8 (ZOOKEEPER-2930/2164/3756): five voters; one follower loses every link (blackholed) and
/// then the leader crashes. The three others are a quorum and must elect within 1 s of virtual
/// time, never waiting on the unreachable node. In the simulation a cut link drops at once; in
/// the runtime every peer and channel has its own link task (`zab-net/src/transport/link.rs`:
/// `Link::run`, spawned per peer in `transport/mod.rs`), whose `dial` is bounded by
/// `TransportConfig::connect_timeout` and the handshake by `handshake_timeout`, so a blackholed
/// peer delays nobody else's notifications (`zab-net/tests/transport.rs`,
/// `a_peer_that_never_answers_does_not_delay_notifications_to_others`).
#[test]
fn b8_election_is_not_blocked_by_an_unreachable_peer() {
    let (mut c, l) = started(options(5, 0));
    let rest = others(&c, l);
    let dark = rest[0];
    let live: Vec<ServerId> = rest[1..].to_vec();
    c.isolate(dark);
    c.crash(l);
    let from = c.now_ms();
    let leader = elect_among(&mut c, &live);
    let took = c.now_ms() - from;
    eprintln!("b8: {leader} serving {took} ms after the crash");
    assert!(took < 1_000, "election took {took} ms with one peer dark");
    commit_n(&mut c, leader, 2);
    c.heal_all();
    c.restart(l);
    c.check_liveness();
}

/// `peer::looking` INV-12 (the early decision): with a finalize wait of 1 s (ten ticks), the
/// leader crashes; both survivors lose their quorum connection to it (the
/// simulated network reports the loss as the runtime's transport does), so once they agree
/// they decide without waiting: one takes the lead well within the finalize wait. Repeated
/// over several crashes, and with one voter of five partitioned away (cut links are reported
/// lost too).
#[test]
fn survivors_decide_without_the_finalize_wait_when_the_leader_crashes() {
    for (voters, dark) in [(3, false), (5, true)] {
        let mut o = options(voters, 0);
        o.finalize_wait_ms = 1_000;
        let (mut c, mut l) = started(o);
        for round in 0..3 {
            let mut live = others(&c, l);
            if dark {
                let d = live.remove(0);
                c.isolate(d);
            }
            c.crash(l);
            let from = c.now_ms();
            c.expect_within(10_000, "a survivor that takes the lead", |c| {
                prospective_leader(c, &live).is_some() || leader_among(c, &live).is_some()
            });
            let took = c.now_ms() - from;
            let leader = elect_among(&mut c, &live);
            let serving = c.now_ms() - from;
            eprintln!("{voters} voters, round {round}: {leader} leads {took} ms, serves {serving} ms after the crash");
            assert!(
                took < 200,
                "a survivor took the lead only {took} ms after the crash (finalize wait 1000 ms)"
            );
            commit_n(&mut c, leader, 2);
            c.heal_all();
            c.restart(l);
            c.check_liveness();
            l = c.stabilize();
        }
    }
}
