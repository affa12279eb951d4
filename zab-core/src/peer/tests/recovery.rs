//! Scenarios of a peer that comes back or a leader that goes away: the NEWLEADER ack waits for
//! a durable sync, an old leader's unacked proposals are truncated, a restarted follower
//! rejoins the established leader, and a failover ends without waiting for a resend (B7).

use std::collections::BTreeSet;

use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::message::Message;
use crate::sync_plan::SyncPlan;
use crate::types::{Epoch, Role, Zxid};

use super::{s, Cluster};

#[test]
fn newleader_ack_waits_for_durable_sync_txns_then_epoch() {
    // 1 and 2 commit writes while 3 is down; 3 restarts with a slow disk and gets a DIFF.
    let mut c = Cluster::new(3, 0);
    c.crash(s(3));
    c.run_until(5_000, |c| {
        c.leader().is_some() && c.nodes[&s(1)].peer.is_serving()
    });
    let leader = c.leader().unwrap();
    for i in 0..3 {
        c.write(leader, i, "w");
    }
    c.run_until(1_000, |c| (0..3).all(|i| c.write_done(leader, i).is_some()));
    c.start(s(3), DurableState::default());
    c.nodes.get_mut(&s(3)).unwrap().auto_persist = false;
    c.run_until(5_000, |c| {
        c.nodes[&s(3)].trace.iter().any(|a| {
            matches!(
                a,
                Action::Send {
                    msg: Message::AckEpoch { .. },
                    ..
                }
            )
        }) && c.links.values().all(|q| q.is_empty())
    });
    // Sync txns are logged, NEWLEADER received, but nothing is acked until the disk reports.
    let t = &c.nodes[&s(3)].trace;
    assert!(t.iter().any(|a| matches!(a, Action::AppendLog(_))));
    assert!(!t
        .iter()
        .any(|a| matches!(a, Action::PersistCurrentEpoch(_))));
    assert!(!c.nodes[&s(3)].peer.is_serving());
    let mark = t.len();
    c.flush(s(3));
    let t = &c.nodes[&s(3)].trace[mark..];
    let epoch_at = t
        .iter()
        .position(|a| matches!(a, Action::PersistCurrentEpoch(_)))
        .unwrap();
    let ack_at = t
        .iter()
        .position(|a| {
            matches!(
                a,
                Action::Send {
                    msg: Message::Ack { .. },
                    ..
                }
            )
        })
        .unwrap();
    assert!(
        epoch_at < ack_at,
        "currentEpoch must be durable before the NEWLEADER ack"
    );
    assert!(!c.nodes[&s(3)].trace[..mark]
        .iter()
        .any(|a| matches!(a, Action::Apply(_))));
    c.nodes.get_mut(&s(3)).unwrap().auto_persist = true;
    c.run_until(2_000, |c| c.nodes[&s(3)].peer.is_serving());
    assert_eq!(c.nodes[&s(3)].applied.len(), 3);
    assert!(matches!(
        c.nodes[&leader].peer.sync_plan_of(s(3)),
        Some(SyncPlan::Diff {
            after: Zxid::ZERO,
            ..
        })
    ));
    c.check_prefix();
}

#[test]
fn old_leader_with_unacked_proposals_is_truncated() {
    // C18 repro: the leader logs proposals nobody acks, is cut off, the others move on.
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    let old = c.leader().unwrap();
    c.write(old, 1, "committed");
    c.run_until(1_000, |c| c.write_done(old, 1).is_some());
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 1));
    // Proposals that never leave the leader.
    for sid in c.nodes.keys().copied().collect::<Vec<_>>() {
        if sid != old {
            c.links.remove(&(old, sid));
        }
    }
    c.write(old, 2, "lost-a");
    c.write(old, 3, "lost-b");
    c.links.retain(|(a, _), _| *a != old);
    c.sever(old);
    let durable = c.durable(old);
    c.crash(old);
    assert_eq!(durable.log_tail.len(), 3);
    c.run_until(10_000, |c| c.leader().is_some());
    let new = c.leader().unwrap();
    c.write(new, 4, "new");
    c.run_until(2_000, |c| c.write_done(new, 4).is_some());
    c.start(old, durable);
    c.run_until(10_000, |c| c.all_serving());
    assert!(matches!(
        c.nodes[&new].peer.sync_plan_of(old),
        Some(SyncPlan::TruncDiff { .. })
    ));
    let log: Vec<Zxid> = c.nodes[&old].log.iter().map(|t| t.zxid).collect();
    let new_log: Vec<Zxid> = c.nodes[&new].log.iter().map(|t| t.zxid).collect();
    assert_eq!(log, new_log);
    assert!(c.nodes[&old]
        .trace
        .iter()
        .any(|a| matches!(a, Action::TruncateLog { .. })));
}

#[test]
fn restarted_follower_joins_established_leader() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    let leader = c.leader().unwrap();
    let follower = if leader == s(1) { s(2) } else { s(1) };
    let round = c.nodes[&leader].peer.election_round();
    let d = c.durable(follower);
    c.crash(follower);
    c.start(follower, d);
    c.run_until(5_000, |c| c.nodes[&follower].peer.is_serving());
    assert_eq!(c.nodes[&follower].peer.leader(), Some(leader));
    assert_eq!(c.nodes[&leader].peer.election_round(), round);
    let unique: BTreeSet<Epoch> = c.nodes.values().map(|n| n.peer.current_epoch()).collect();
    assert_eq!(unique.len(), 1);
}

/// PITFALLS B7 (failover time of discovery), with ZooKeeper's timing (tickTime 2000 ms,
/// finalizeWait 200 ms): the leader is killed; of the two survivors, the follower-to-be ends
/// its election first and its FOLLOWERINFO reaches the leader-to-be while that one is still
/// LOOKING, which drops it (the quorum channel's FOLLOWERINFO overtakes the election channel's
/// notification that would end the leader-to-be's election: looking INV-12). The new leader
/// must still be established (serving, its follower too) within about one `info_resend_ms` of
/// taking the lead, not after the half-tick (1 s) info resend that used to delay every such
/// failover.
#[test]
fn a_leader_that_finishes_its_election_last_is_established_within_an_info_resend() {
    let mut c = Cluster::with_timing(3, 0, (2000, 200));
    c.run_until(30_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    c.crash(s(3));
    // Node 2's vote reaches node 1, which decides at once (node 3 is unreachable): it follows
    // 2 and sends its FOLLOWERINFO ...
    let v2 = c
        .links
        .get_mut(&(s(2), s(1)))
        .unwrap()
        .drain(..)
        .collect::<Vec<_>>();
    for msg in v2 {
        c.input(s(1), Input::Message { from: s(2), msg });
    }
    assert_eq!(c.nodes[&s(1)].peer.role(), Role::Following);
    assert_eq!(c.nodes[&s(1)].peer.leader(), Some(s(2)));
    // ... which reaches node 2, still LOOKING, before node 1's votes, and is dropped.
    let q = c.links.get_mut(&(s(1), s(2))).unwrap();
    let at = q
        .iter()
        .position(|m| matches!(m, Message::FollowerInfo { .. }))
        .unwrap();
    let info = q.remove(at).unwrap();
    c.input(
        s(2),
        Input::Message {
            from: s(1),
            msg: info,
        },
    );
    assert_eq!(c.nodes[&s(2)].peer.role(), Role::Looking);
    while c.deliver_one() {}
    assert_eq!(c.nodes[&s(2)].peer.role(), Role::Leading);
    let took_lead = c.now;
    c.run_until(2_000, |c| c.leader() == Some(s(2)) && c.all_serving());
    let established = c.now - took_lead;
    assert!(
        established <= 100,
        "the new leader was established {established} ms after taking the lead"
    );
}

/// PITFALLS B7 (failover time of the election), with ZooKeeper's timing: the leader dies and
/// the survivor with the better vote notices first; its LOOKING notification reaches the
/// other survivor while that one still FOLLOWS the dead leader (which answers with its old
/// state and keeps no record of the vote). When the second survivor goes LOOKING in the same
/// round with a worse vote, the first one answers it at once (looking INV-7), so the election
/// ends one finalize wait (200 ms) after the second survivor went LOOKING, not after a resend
/// (another 200 ms) plus the finalize wait.
#[test]
fn a_survivor_that_goes_looking_late_learns_the_better_vote_at_once() {
    let mut c = Cluster::with_timing(3, 0, (2000, 200));
    c.run_until(30_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    c.nodes.get_mut(&s(3)).unwrap().up = false;
    c.links.retain(|(a, b), _| *a != s(3) && *b != s(3));
    c.input(s(2), Input::ConnectionLost { peer: s(3) });
    assert_eq!(c.nodes[&s(2)].peer.role(), Role::Looking);
    while c.deliver_one() {}
    assert_eq!(c.nodes[&s(1)].peer.role(), Role::Following);
    let lost = c.now;
    c.input(s(1), Input::ConnectionLost { peer: s(3) });
    assert_eq!(c.nodes[&s(1)].peer.role(), Role::Looking);
    c.run_until(2_000, |c| c.nodes[&s(2)].peer.role() == Role::Leading);
    let elected = c.now - lost;
    assert!(
        elected <= 200 + 20,
        "the election ended {elected} ms after both survivors were LOOKING"
    );
    c.run_until(1_000, |c| c.leader() == Some(s(2)) && c.all_serving());
}
