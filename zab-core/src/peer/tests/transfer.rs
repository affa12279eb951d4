//! Leader transfer (`crate::transfer`): a handover to a named or chosen follower, the
//! refusals, a lagging target, a target that crashes after the handover, and the timeout.

use crate::io::{Action, Input};
use crate::message::RequestError;
use crate::transfer::{TransferError, TransferReport};
use crate::types::{Epoch, Role, ServerId, Zxid};

use super::{s, Cluster};

type Outcome = Result<TransferReport, TransferError>;

fn transfer(c: &mut Cluster, at: ServerId, target: Option<u64>) {
    let target = target.map(ServerId);
    c.input(at, Input::TransferLeadership { target });
}

fn outcomes(c: &Cluster, sid: ServerId) -> Vec<Outcome> {
    c.nodes[&sid]
        .done
        .iter()
        .filter_map(|a| match a {
            Action::TransferDone { outcome } => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

/// A serving 3-participant cluster (leader 3, epoch 1) with `writes` committed everywhere.
fn serving(observers: u64, writes: u64) -> Cluster {
    let mut c = Cluster::new(3, observers);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    for i in 0..writes {
        c.write(s(3), i, "w");
    }
    c.run_until(1_000, |c| {
        (0..writes).all(|i| c.write_done(s(3), i).is_some())
    });
    c
}

#[test]
fn transfer_to_a_named_follower_moves_the_leadership_without_a_finalize_wait() {
    let mut c = serving(0, 3);
    let started = c.now;
    transfer(&mut c, s(3), Some(1));
    c.run_until(5_000, |c| !outcomes(c, s(3)).is_empty());
    let report = outcomes(&c, s(3)).remove(0).unwrap();
    assert_eq!(
        report,
        TransferReport {
            from: s(3),
            to: s(1),
            epoch: Epoch(2)
        }
    );
    // Well under one finalize wait (20 ms) plus a tick: the nominee decides at once.
    assert!(c.now - started <= 20, "took {} ms", c.now - started);
    assert_eq!(c.leader(), Some(s(1)));
    assert_eq!(c.nodes[&s(3)].peer.role(), Role::Following);
    // Every committed write is in the new leader's history; a new write commits.
    let last = Zxid::new(Epoch(1), 3);
    assert!(c.nodes[&s(1)].log.iter().any(|t| t.zxid == last));
    // Server 2 moves once the notice reaches it (the old leader keeps the channels open).
    c.run_until(1_000, |c| {
        c.all_serving() && c.nodes[&s(2)].peer.leader() == Some(s(1))
    });
    c.write(s(2), 10, "after");
    c.run_until(1_000, |c| c.write_done(s(2), 10).is_some());
    assert_eq!(c.write_done(s(2), 10), Some(Ok(Zxid::new(Epoch(2), 1))));
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 4));
    c.check_prefix();
}

#[test]
fn transfer_without_a_target_picks_a_follower_in_sync() {
    let mut c = serving(0, 1);
    transfer(&mut c, s(3), None);
    c.run_until(5_000, |c| !outcomes(c, s(3)).is_empty());
    let report = outcomes(&c, s(3)).remove(0).unwrap();
    assert_eq!(report.to, s(1), "equal acks: the lowest sid");
    assert_eq!(c.leader(), Some(s(1)));
}

#[test]
fn refusals_change_nothing() {
    let mut c = serving(1, 1);
    transfer(&mut c, s(1), Some(2));
    transfer(&mut c, s(3), Some(3));
    transfer(&mut c, s(3), Some(9));
    transfer(&mut c, s(3), Some(4));
    c.crash(s(2));
    transfer(&mut c, s(3), Some(2));
    assert_eq!(
        outcomes(&c, s(1)),
        vec![Err(TransferError::NotLeader { leader: Some(s(3)) })]
    );
    assert_eq!(
        outcomes(&c, s(3)),
        vec![
            Err(TransferError::AlreadyLeader(s(3))),
            Err(TransferError::UnknownTarget(s(9))),
            Err(TransferError::NotAVoter(s(4))),
            Err(TransferError::TargetNotConnected(s(2))),
        ]
    );
    assert_eq!(c.leader(), Some(s(3)));
    c.write(s(3), 20, "still leading");
    c.run_until(1_000, |c| c.write_done(s(3), 20).is_some());
    assert!(c.write_done(s(3), 20).unwrap().is_ok());
}

#[test]
fn a_lagging_target_is_waited_for_and_writes_are_refused_meanwhile() {
    let mut c = serving(0, 1);
    c.nodes.get_mut(&s(1)).unwrap().auto_persist = false;
    c.write(s(3), 1, "not acked by 1 yet");
    c.run_until(1_000, |c| c.write_done(s(3), 1).is_some());
    transfer(&mut c, s(3), Some(1));
    transfer(&mut c, s(3), Some(2));
    c.write(s(3), 2, "refused");
    c.write(s(2), 3, "refused via a follower");
    c.run_until(1_000, |c| c.write_done(s(2), 3).is_some());
    let refused = Err(RequestError::NotLeader { leader: Some(s(1)) });
    assert_eq!(c.write_done(s(3), 2), Some(refused.clone()));
    assert_eq!(c.write_done(s(2), 3), Some(refused));
    assert_eq!(outcomes(&c, s(3)), vec![Err(TransferError::InProgress)]);
    assert_eq!(c.leader(), Some(s(3)));
    c.flush(s(1));
    c.run_until(5_000, |c| outcomes(c, s(3)).len() == 2);
    assert_eq!(outcomes(&c, s(3))[1].clone().unwrap().to, s(1));
    let last = Zxid::new(Epoch(1), 2);
    assert!(c.nodes[&s(1)].log.iter().any(|t| t.zxid == last));
}

#[test]
fn a_target_that_never_catches_up_times_out_and_the_leader_leads_on() {
    let mut c = serving(0, 1);
    c.nodes.get_mut(&s(1)).unwrap().auto_persist = false;
    c.write(s(3), 1, "never acked by 1");
    c.run_until(1_000, |c| c.write_done(s(3), 1).is_some());
    transfer(&mut c, s(3), Some(1));
    // syncLimit = 5 ticks of 100 ms.
    c.run_until(1_000, |c| !outcomes(c, s(3)).is_empty());
    assert_eq!(
        outcomes(&c, s(3)),
        vec![Err(TransferError::Timeout { target: s(1) })]
    );
    assert_eq!(c.leader(), Some(s(3)));
    c.write(s(3), 2, "leading on");
    c.run_until(1_000, |c| c.write_done(s(3), 2).is_some());
    assert!(c.write_done(s(3), 2).unwrap().is_ok());
}

#[test]
fn a_target_that_crashes_after_the_handover_costs_an_election_and_loses_nothing() {
    let mut c = serving(0, 3);
    transfer(&mut c, s(3), Some(1));
    c.run_until(1_000, |c| c.nodes[&s(3)].peer.role() == Role::Looking);
    c.crash(s(1));
    c.run_until(10_000, |c| !outcomes(c, s(3)).is_empty());
    let leader = c.leader().unwrap();
    assert_ne!(leader, s(1));
    assert_eq!(
        outcomes(&c, s(3)),
        vec![Err(TransferError::NotElected {
            target: s(1),
            leader: Some(leader)
        })]
    );
    // Nothing committed is lost: the three writes are applied on both survivors, and more
    // commit.
    c.write(leader, 30, "after");
    c.run_until(2_000, |c| c.write_done(leader, 30).is_some());
    assert!(c.write_done(leader, 30).unwrap().is_ok());
    c.run_until(2_000, |c| {
        [s(2), s(3)]
            .iter()
            .all(|sid| c.nodes[sid].applied.len() >= 4)
    });
    c.check_prefix();
}
