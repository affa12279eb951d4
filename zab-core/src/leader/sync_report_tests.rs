//! Unit tests of the leader's sync report (`Action::SyncChosen`, sync INV-1): peer 3 leads
//! {1, 2, 3} from a snapshot at (1,2) and a log holding (1,1), (1,2), (2,1), (2,2), and syncs
//! follower 1.

use bytes::Bytes;

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::message::{ElectionState, Message, Notification, Vote};
use crate::sync_plan::{DiffSource, SyncMode};
use crate::types::{Epoch, LearnerType, Role, ServerId, Txn, Zxid};
use crate::Peer;

fn z(e: u32, c: u32) -> Zxid {
    Zxid::new(Epoch(e), c)
}

fn txn(e: u32, c: u32) -> Txn {
    Txn::app(z(e, c), Bytes::from_static(b"t"))
}

/// Peer 3, elected: snapshot at (1,2), (1,1)..(2,2) logged, (2,1) and (2,2) in memory.
fn leader() -> Peer {
    let members = (1..=3)
        .map(|s| (ServerId(s), LearnerType::Participant))
        .collect();
    let mut cfg = Config::new(ServerId(3), members);
    cfg.finalize_wait_ms = 10;
    let d = DurableState {
        accepted_epoch: Epoch(2),
        current_epoch: Epoch(2),
        snapshot_zxid: z(1, 2),
        log_index: vec![z(1, 1), z(1, 2), z(2, 1), z(2, 2)],
        log_bytes: vec![1; 4],
        snapshot_bytes: 0,
        log_tail: vec![txn(2, 1), txn(2, 2)],
        needs_initial_sync: false,
        membership: None,
    };
    let mut p = Peer::new(cfg, d, 0).unwrap();
    let vote = Vote {
        leader: ServerId(3),
        zxid: z(2, 2),
        peer_epoch: Epoch(2),
    };
    let n = Notification {
        vote,
        round: 1,
        state: ElectionState::Looking,
        config_version: Zxid::ZERO,
    };
    p.step(Input::Message {
        from: ServerId(1),
        msg: Message::Notification(n),
    })
    .unwrap();
    p.step(Input::Tick { now_ms: 20 }).unwrap();
    assert_eq!(p.role(), Role::Leading);
    p.take_actions();
    p
}

/// What the leader reports when follower 1, whose last zxid is `last`, acks the epoch.
fn report_for(last: Zxid) -> (Action, Vec<Action>) {
    let mut p = leader();
    for msg in [
        Message::FollowerInfo {
            accepted_epoch: Epoch(2),
            protocol_version: 1,
        },
        Message::AckEpoch {
            current_epoch: Epoch(2),
            last_zxid: last,
        },
    ] {
        p.step(Input::Message {
            from: ServerId(1),
            msg,
        })
        .unwrap();
    }
    let actions = p.take_actions();
    let reports: Vec<&Action> = actions
        .iter()
        .filter(|a| matches!(a, Action::SyncChosen { .. }))
        .collect();
    assert_eq!(reports.len(), 1, "one report per sync: {actions:?}");
    (reports[0].clone(), actions)
}

fn chosen(mode: SyncMode, from: Zxid, txns: u64, source: DiffSource) -> Action {
    Action::SyncChosen {
        learner: ServerId(1),
        mode,
        from,
        to: z(2, 2),
        txns,
        source,
    }
}

fn is_sync_header(a: &Action) -> bool {
    matches!(
        a,
        Action::Send {
            msg: Message::Diff { .. } | Message::Trunc { .. } | Message::Snap { .. },
            ..
        } | Action::SendSnapshot { .. }
    )
}

#[test]
fn a_member_learner_is_reported_as_a_diff_before_its_header() {
    let (report, actions) = report_for(z(2, 1));
    assert_eq!(
        report,
        chosen(SyncMode::Diff, z(2, 1), 1, DiffSource::Memory)
    );
    let header = actions.iter().position(is_sync_header);
    let at = actions.iter().position(|a| *a == report);
    assert!(
        at.is_some() && at < header,
        "reported before the header: {actions:?}"
    );
}

#[test]
fn a_diff_reaching_below_the_memory_window_reports_the_log_range() {
    let (report, _) = report_for(z(1, 1));
    let source = DiffSource::Log {
        upto: z(1, 2),
        count: 1,
    };
    assert_eq!(report, chosen(SyncMode::Diff, z(1, 1), 3, source));
}

#[test]
fn a_learner_with_an_unknown_tail_of_a_known_epoch_is_reported_as_trunc_diff() {
    let (report, _) = report_for(z(1, 3));
    assert_eq!(
        report,
        chosen(SyncMode::TruncDiff, z(1, 2), 2, DiffSource::Memory)
    );
}

#[test]
fn a_learner_of_an_unknown_history_is_reported_as_a_snap_from_the_applied_point() {
    let (report, actions) = report_for(z(0, 7));
    assert_eq!(
        report,
        chosen(SyncMode::Snap, z(1, 2), 2, DiffSource::Memory)
    );
    let header = actions.iter().position(is_sync_header);
    assert!(actions.iter().position(|a| *a == report) < header);
}
