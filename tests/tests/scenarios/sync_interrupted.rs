//! PITFALLS C19, C20: a learner's sync cut short (its leader dies while its appends are still
//! pending on disk; the link drops in the middle of a DIFF). What it acks and reports
//! afterwards is what its own disk holds, and the next sync continues from there.

use tests::sim::net::Channel;
use tests::sim::{Cluster, Weights};
use zab_core::{Message, Role};

use super::*;

/// Steps with `w` until `pred` holds; fails after `max` steps.
fn step_until(
    c: &mut Cluster,
    w: Weights,
    max: usize,
    what: &str,
    pred: impl Fn(&Cluster) -> bool,
) {
    for _ in 0..max {
        if pred(c) {
            return;
        }
        c.step_with(w);
    }
    assert!(
        pred(c),
        "{what}: not reached in {max} steps; {}",
        c.describe()
    );
}

/// C19 (ZOOKEEPER-4712): a follower has appends still pending on its disk when its leader
/// dies; it goes LOOKING, and those appends complete while it elects and resyncs in a new
/// epoch. A persist completion from the old epoch never becomes an ACK in the new one (only
/// NEWLEADER `<e,0>` and proposals of epoch `e` are acked), and the order and
/// ack-after-durable checkers stay green.
#[test]
fn c19_stale_persist_completion_after_a_role_change() {
    let (mut c, l) = started(options(3, 0));
    let [f, g] = others(&c, l)[..] else {
        unreachable!()
    };
    commit_n(&mut c, l, 3);
    c.settle();
    let old_epoch = c.peer(l).unwrap().current_epoch();
    for _ in 0..3 {
        c.write(l);
    }
    step_until(
        &mut c,
        NO_FSYNC,
        2_000,
        "appends pending on both followers",
        |c| [f, g].iter().all(|id| c.node(*id).disk.pending.len() >= 2),
    );
    c.crash(l);
    step_until(&mut c, NO_FSYNC, 20_000, "both followers LOOKING", |c| {
        [f, g]
            .iter()
            .all(|id| c.peer(*id).is_some_and(|p| p.role() == Role::Looking))
    });
    for id in [f, g] {
        assert!(
            !c.node(id).disk.pending.is_empty(),
            "precondition: appends of epoch {old_epoch} still pending on {id} when its role \
             changed"
        );
    }
    let mark = c.events().len();
    let leader = elect_among(&mut c, &[f, g]);
    let f = if leader == f { g } else { f };
    c.stabilize();
    let mut epoch_of_leader = None;
    for e in &c.events()[mark..] {
        match e.msg {
            Message::LeaderInfo { new_epoch, .. } if e.to == f => epoch_of_leader = Some(new_epoch),
            Message::Ack { zxid } if e.from == f => {
                let cur = epoch_of_leader.expect("an ACK before LEADERINFO");
                assert!(
                    zxid.epoch() == cur,
                    "{f} acks {zxid} to {} in epoch {cur}",
                    e.to
                );
            }
            _ => {}
        }
    }
    assert!(epoch_of_leader.is_some_and(|e| e > old_epoch));
    commit_n(&mut c, leader, 2);
    c.restart(l);
    c.check_liveness();
}

/// C20 (ZOOKEEPER-2355): the link drops in the middle of a DIFF, after some of its txns
/// arrived. The learner's next ACKEPOCH (our FOLLOWERINFO's lastZxid) reports exactly what
/// its log holds, a prefix of the leader's history short of the DIFF's end, and the next sync
/// sends the rest.
#[test]
fn c20_last_zxid_reported_after_an_interrupted_diff_is_what_is_on_disk() {
    let mut o = options(3, 0);
    o.committed_log_window = 64;
    o.snap_every = 0;
    let (mut c, l) = started(o);
    let f = others(&c, l)[0];
    commit_n(&mut c, l, 2);
    c.settle();
    c.crash(f);
    commit_n(&mut c, l, 40);
    c.settle();
    let target = last_logged(&c, l);
    let mark = c.events().len();
    c.restart(f);
    step_until(
        &mut c,
        Weights::QUIET,
        20_000,
        "part of the DIFF delivered",
        |c| diff_partly_delivered(c, mark, l, f),
    );
    c.cut(l, f);
    let cut_at = c.node(f).disk.last_appended();
    step_until(
        &mut c,
        Weights::QUIET,
        20_000,
        "the follower LOOKING",
        |c| c.peer(f).is_some_and(|p| p.role() == Role::Looking),
    );
    c.heal_all();
    let (at, reported) = next_ack_epoch(&mut c, f).expect("an ACKEPOCH after the cut");
    let disk = &c.node(f).disk;
    assert_eq!(
        reported,
        disk.last_appended(),
        "the reported zxid is not the log's end"
    );
    assert!(
        reported >= cut_at && reported < target,
        "{reported} vs {cut_at}..{target}"
    );
    let history = c.applied_zxids(l);
    let held = disk_zxids(&c, f);
    let upto = history.iter().position(|z| *z == reported).unwrap() + 1;
    assert!(
        held.iter().all(|z| history[..upto].contains(z)),
        "the follower's log is not a prefix of the leader's history"
    );
    c.heal_all();
    c.stabilize();
    assert_eq!(last_sync(&c, f), Some(SyncMode::Diff));
    let rest = proposals_sent(&c, at, l, f);
    assert_eq!(
        rest.first(),
        history.get(upto),
        "the resync starts right after {reported}"
    );
    c.check_liveness();
    assert_eq!(c.applied_zxids(f), c.applied_zxids(l));
}

/// True when the DIFF `l` sends `f` (after event `mark`) has started to arrive: more than its
/// header and two txns delivered, NEWLEADER not yet.
fn diff_partly_delivered(c: &Cluster, mark: usize, l: ServerId, f: ServerId) -> bool {
    let sent: Vec<&Message> = c.events()[mark..]
        .iter()
        .filter(|e| e.from == l && e.to == f && !matches!(e.msg, Message::Notification(_)))
        .map(|e| &e.msg)
        .collect();
    let queued = c.net().queue_len((l, f, Channel::Quorum));
    let delivered = sent.len().saturating_sub(queued);
    let diff = sent.iter().position(|m| matches!(m, Message::Diff { .. }));
    let newleader = sent
        .iter()
        .position(|m| matches!(m, Message::NewLeader { .. }));
    match (diff, newleader) {
        (Some(d), Some(n)) => delivered > d + 2 && delivered <= n,
        _ => false,
    }
}

/// Steps (at most 50 000 times) until `f` sends an ACKEPOCH after the events so far; the
/// index of that event and the last zxid it reports.
fn next_ack_epoch(c: &mut Cluster, f: ServerId) -> Option<(usize, Zxid)> {
    let mark = c.events().len();
    let mut reported = None;
    for _ in 0..50_000 {
        reported = c.events()[mark..]
            .iter()
            .enumerate()
            .find_map(|(i, e)| match e.msg {
                Message::AckEpoch { last_zxid, .. } if e.from == f => Some((mark + i, last_zxid)),
                _ => None,
            });
        if reported.is_some() {
            break;
        }
        c.step_with(Weights::QUIET);
    }
    reported
}
