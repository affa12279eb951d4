//! Scenario tests: peers wired by hand with FIFO links and an instant disk that reports
//! `LogPersisted` at the end of every batch (or later, when a test holds it back).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::message::Message;
use crate::sync_plan::SyncPlan;
use crate::types::{Epoch, LearnerType, RequestId, Role, ServerId, Txn, Zxid};
use crate::Peer;

/// One simulated server: the peer, its "disk" and what it applied.
pub(super) struct Node {
    pub peer: Peer,
    pub log: Vec<Txn>,
    pub snapshot: (Zxid, Vec<Txn>),
    pub applied: Vec<Txn>,
    pub accepted: Epoch,
    pub current: Epoch,
    pub trace: Vec<Action>,
    pub done: Vec<Action>,
    /// When false, appends stay volatile until `flush`.
    pub auto_persist: bool,
    /// The durable "needs initial sync" marker (cleared by `PersistInitialized`).
    pub needs_initial_sync: bool,
    pub up: bool,
}

pub(super) struct Cluster {
    pub cfg: BTreeMap<ServerId, LearnerType>,
    pub nodes: BTreeMap<ServerId, Node>,
    pub links: BTreeMap<(ServerId, ServerId), VecDeque<Message>>,
    pub now: u64,
    /// `(tick_ms, finalize_wait_ms)` of every peer.
    pub timing: (u64, u64),
}

fn config(
    sid: ServerId,
    members: &BTreeMap<ServerId, LearnerType>,
    (tick_ms, finalize_wait_ms): (u64, u64),
) -> Config {
    let mut c = Config::new(sid, members.clone());
    c.tick_ms = tick_ms;
    c.finalize_wait_ms = finalize_wait_ms;
    c.committed_log_window = 4;
    c.diff_from_log_limit = 100;
    c
}

impl Cluster {
    pub fn new(participants: u64, observers: u64) -> Cluster {
        Cluster::with_timing(participants, observers, (100, 20))
    }

    /// A cluster whose peers use `(tick_ms, finalize_wait_ms)`.
    pub fn with_timing(participants: u64, observers: u64, timing: (u64, u64)) -> Cluster {
        let mut cfg = BTreeMap::new();
        for s in 1..=participants {
            cfg.insert(ServerId(s), LearnerType::Participant);
        }
        for s in participants + 1..=participants + observers {
            cfg.insert(ServerId(s), LearnerType::Observer);
        }
        let mut c = Cluster {
            cfg,
            nodes: BTreeMap::new(),
            links: BTreeMap::new(),
            now: 0,
            timing,
        };
        for sid in c.cfg.keys().copied().collect::<Vec<_>>() {
            c.start(sid, DurableState::default());
        }
        c
    }

    pub fn start(&mut self, sid: ServerId, d: DurableState) {
        let peer = Peer::new(config(sid, &self.cfg, self.timing), d.clone(), self.now).unwrap();
        let node = Node {
            peer,
            log: d.log_tail.clone(),
            snapshot: (d.snapshot_zxid, Vec::new()),
            applied: Vec::new(),
            accepted: d.accepted_epoch,
            current: d.current_epoch,
            trace: Vec::new(),
            done: Vec::new(),
            auto_persist: true,
            needs_initial_sync: d.needs_initial_sync,
            up: true,
        };
        self.nodes.insert(sid, node);
        self.process(sid);
    }

    /// What the node would load after a crash now (everything it was told is durable).
    pub fn durable(&self, sid: ServerId) -> DurableState {
        let n = &self.nodes[&sid];
        let persisted = n.peer.core.log.persisted();
        let tail: Vec<Txn> = n
            .log
            .iter()
            .filter(|t| t.zxid <= persisted)
            .cloned()
            .collect();
        DurableState {
            accepted_epoch: n.accepted,
            current_epoch: n.current,
            snapshot_zxid: n.snapshot.0,
            log_index: tail.iter().map(|t| t.zxid).collect(),
            log_bytes: tail.iter().map(|t| t.data.len() as u32).collect(),
            snapshot_bytes: 0,
            log_tail: tail,
            needs_initial_sync: n.needs_initial_sync,
        }
    }

    /// Crashes `sid`, empties its data dir and restarts it without bootstrap (PITFALLS B9).
    pub fn wipe(&mut self, sid: ServerId) {
        self.crash(sid);
        let wiped = DurableState {
            needs_initial_sync: true,
            ..DurableState::default()
        };
        self.start(sid, wiped);
    }

    pub fn crash(&mut self, sid: ServerId) {
        if let Some(n) = self.nodes.get_mut(&sid) {
            n.up = false;
        }
        self.sever(sid);
    }

    /// Closes every link of `sid` (both ends hear of it).
    pub fn sever(&mut self, sid: ServerId) {
        let keys: Vec<_> = self
            .links
            .keys()
            .filter(|(a, b)| *a == sid || *b == sid)
            .copied()
            .collect();
        for (a, b) in keys {
            self.links.remove(&(a, b));
            for (me, other) in [(a, b), (b, a)] {
                if self.nodes.get(&me).is_some_and(|n| n.up) {
                    self.input(me, Input::ConnectionLost { peer: other });
                }
            }
        }
    }

    pub fn input(&mut self, sid: ServerId, input: Input) {
        let n = self.nodes.get_mut(&sid).unwrap();
        if !n.up {
            return;
        }
        n.peer.step(input).unwrap();
        self.process(sid);
    }

    /// Carries out the node's actions with an instant disk.
    pub fn process(&mut self, sid: ServerId) {
        let actions = self.nodes.get_mut(&sid).unwrap().peer.take_actions();
        let mut follow_up = Vec::new();
        for a in actions {
            self.nodes.get_mut(&sid).unwrap().trace.push(a.clone());
            self.execute(sid, a, &mut follow_up);
        }
        let n = self.nodes.get_mut(&sid).unwrap();
        if n.auto_persist {
            if let Some(last) = n.log.last() {
                if last.zxid > n.peer.core.log.persisted() {
                    follow_up.push(Input::LogPersisted { upto: last.zxid });
                }
            }
        }
        for i in follow_up {
            self.input(sid, i);
        }
    }

    fn execute(&mut self, sid: ServerId, a: Action, follow_up: &mut Vec<Input>) {
        let n = self.nodes.get_mut(&sid).unwrap();
        match a {
            Action::Send { to, msg } => self.links.entry((sid, to)).or_default().push_back(msg),
            Action::Disconnect { peer } => {
                // The quorum channel closes: its messages are dropped both ways and the other
                // end hears of it (notifications travel on the election channel and stay).
                for key in [(sid, peer), (peer, sid)] {
                    if let Some(q) = self.links.get_mut(&key) {
                        q.retain(|m| matches!(m, Message::Notification(_)));
                    }
                }
                self.nodes.get_mut(&sid).unwrap().done.push(a);
                if self.nodes.get(&peer).is_some_and(|n| n.up) {
                    self.input(peer, Input::ConnectionLost { peer: sid });
                }
            }
            Action::PersistAcceptedEpoch(e) => n.accepted = e,
            Action::PersistCurrentEpoch(e) => n.current = e,
            Action::PersistInitialized => {
                n.needs_initial_sync = false;
                n.done.push(Action::PersistInitialized);
            }
            Action::AppendLog(t) => n.log.push(t),
            Action::TruncateLog { zxid } => n.log.retain(|t| t.zxid <= zxid),
            Action::Apply(t) => n.applied.push(t),
            Action::SendLogRange { to, after, upto } => {
                let txns: Vec<Txn> = n
                    .log
                    .iter()
                    .filter(|t| t.zxid > after && t.zxid <= upto)
                    .cloned()
                    .collect();
                let q = self.links.entry((sid, to)).or_default();
                for t in txns {
                    let zxid = t.zxid;
                    q.push_back(Message::Proposal(t));
                    q.push_back(Message::Commit { zxid });
                }
            }
            Action::SendSnapshot { to, zxid } => {
                let mut state = n.snapshot.1.clone();
                state.extend(n.applied.iter().cloned());
                assert_eq!(state.last().map_or(n.snapshot.0, |t| t.zxid), zxid);
                let data = Bytes::from(format!("{}", state.len()));
                let q = self.links.entry((sid, to)).or_default();
                q.push_back(Message::Snap { zxid });
                q.push_back(Message::SnapChunk { data, last: true });
                n.done.push(Action::SendSnapshot { to, zxid });
            }
            Action::EndSnapshot { zxid } => {
                n.log.clear();
                n.snapshot = (zxid, Vec::new());
                n.applied.clear();
                follow_up.push(Input::SnapshotInstalled { zxid });
            }
            other => n.done.push(other),
        }
    }

    pub fn flush(&mut self, sid: ServerId) {
        let last = self.nodes[&sid].log.last().map(|t| t.zxid);
        if let Some(upto) = last {
            self.input(sid, Input::LogPersisted { upto });
        }
    }

    /// Delivers one message on the first non-empty link; false when all are empty.
    pub fn deliver_one(&mut self) -> bool {
        let Some(key) = self
            .links
            .iter()
            .find(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
        else {
            return false;
        };
        let msg = self
            .links
            .get_mut(&key)
            .and_then(|q| q.pop_front())
            .unwrap();
        self.input(key.1, Input::Message { from: key.0, msg });
        true
    }

    pub fn tick(&mut self, ms: u64) {
        self.now += ms;
        for sid in self.nodes.keys().copied().collect::<Vec<_>>() {
            self.input(sid, Input::Tick { now_ms: self.now });
        }
    }

    /// Delivers and ticks until `cond` holds (or panics after `max_ms` of virtual time).
    pub fn run_until(&mut self, max_ms: u64, cond: impl Fn(&Cluster) -> bool) {
        let end = self.now + max_ms;
        while !cond(self) {
            assert!(self.now < end, "condition not reached by {}", self.now);
            while self.deliver_one() {
                if cond(self) {
                    return;
                }
            }
            self.tick(10);
        }
    }

    pub fn leader(&self) -> Option<ServerId> {
        self.nodes
            .iter()
            .find(|(_, n)| n.up && n.peer.role() == Role::Leading && n.peer.is_serving())
            .map(|(s, _)| *s)
    }

    pub fn all_serving(&self) -> bool {
        self.nodes
            .values()
            .filter(|n| n.up)
            .all(|n| n.peer.is_serving())
    }

    pub fn write(&mut self, sid: ServerId, id: u64, data: &'static str) {
        let input = Input::ClientWrite {
            request_id: RequestId(id),
            payload: Bytes::from_static(data.as_bytes()),
        };
        self.input(sid, input);
    }

    pub fn write_done(&self, sid: ServerId, id: u64) -> Option<Result<Zxid, crate::RequestError>> {
        self.nodes[&sid].done.iter().find_map(|a| match a {
            Action::WriteDone {
                request_id,
                outcome,
            } if *request_id == RequestId(id) => Some(outcome.clone()),
            _ => None,
        })
    }

    /// Asserts that the applied sequences of all nodes are prefixes of one another.
    pub fn check_prefix(&self) {
        let seqs: Vec<Vec<Zxid>> = self
            .nodes
            .values()
            .map(|n| n.applied.iter().map(|t| t.zxid).collect())
            .collect();
        for a in &seqs {
            for b in &seqs {
                let k = a.len().min(b.len());
                assert_eq!(a[..k], b[..k], "applied sequences diverge");
            }
        }
    }
}

pub(super) fn s(n: u64) -> ServerId {
    ServerId(n)
}

#[test]
fn three_peers_elect_the_highest_sid_and_commit_a_write() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    for n in c.nodes.values() {
        assert_eq!(n.peer.current_epoch(), Epoch(1));
        assert_eq!(n.accepted, Epoch(1));
    }
    c.write(s(1), 7, "a");
    c.run_until(1_000, |c| c.write_done(s(1), 7).is_some());
    let z = c.write_done(s(1), 7).unwrap().unwrap();
    assert_eq!(z, Zxid::new(Epoch(1), 1));
    c.run_until(1_000, |c| c.nodes.values().all(|n| n.applied.len() == 1));
    c.check_prefix();
    c.write(s(3), 8, "b");
    c.run_until(1_000, |c| c.write_done(s(3), 8).is_some());
    assert_eq!(c.write_done(s(3), 8), Some(Ok(Zxid::new(Epoch(1), 2))));
}

#[test]
fn single_participant_leads_alone() {
    let mut c = Cluster::new(1, 0);
    c.run_until(1_000, |c| c.leader().is_some());
    c.write(s(1), 1, "x");
    c.run_until(100, |c| c.write_done(s(1), 1).is_some());
    assert_eq!(c.write_done(s(1), 1), Some(Ok(Zxid::new(Epoch(1), 1))));
}

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
fn observer_learns_leader_and_gets_inform() {
    let mut c = Cluster::new(3, 1);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.nodes[&s(4)].peer.role(), Role::Observing);
    c.write(s(4), 1, "via-observer");
    c.run_until(1_000, |c| c.write_done(s(4), 1).is_some());
    assert!(c.write_done(s(4), 1).unwrap().is_ok());
    assert_eq!(c.nodes[&s(4)].applied.len(), 1);
    let informed = c.nodes[&s(4)].trace.len();
    assert!(informed > 0);
    c.check_prefix();
}

#[test]
fn sync_on_follower_is_answered_after_quorum_round() {
    let mut c = Cluster::new(3, 0);
    c.run_until(5_000, |c| c.leader().is_some() && c.all_serving());
    c.write(s(3), 1, "a");
    c.input(
        s(1),
        Input::ClientSync {
            request_id: RequestId(9),
        },
    );
    c.run_until(1_000, |c| {
        c.nodes[&s(1)]
            .done
            .iter()
            .any(|a| matches!(a, Action::SyncDone { .. }))
    });
    let got = c.nodes[&s(1)].done.iter().find_map(|a| match a {
        Action::SyncDone { outcome, .. } => Some(outcome.clone()),
        _ => None,
    });
    let z = got.unwrap().unwrap();
    assert!(c.nodes[&s(1)].peer.last_applied_zxid() >= z);
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
/// LOOKING, which drops it. The new leader must still be established (serving, its follower
/// too) within about one `info_resend_ms` of taking the lead, not after the half-tick (1 s)
/// info resend that used to delay every such failover.
#[test]
fn a_leader_that_finishes_its_election_last_is_established_within_an_info_resend() {
    let mut c = Cluster::with_timing(3, 0, (2000, 200));
    c.run_until(30_000, |c| c.leader().is_some() && c.all_serving());
    assert_eq!(c.leader(), Some(s(3)));
    c.crash(s(3));
    while c.deliver_one() {}
    for sid in [s(1), s(2)] {
        assert_eq!(c.nodes[&sid].peer.role(), Role::Looking);
    }
    // Node 1 finalizes first: it follows 2 and sends its FOLLOWERINFO ...
    c.now += 200;
    c.input(s(1), Input::Tick { now_ms: c.now });
    assert_eq!(c.nodes[&s(1)].peer.role(), Role::Following);
    assert_eq!(c.nodes[&s(1)].peer.leader(), Some(s(2)));
    assert!(c.links[&(s(1), s(2))]
        .iter()
        .any(|m| matches!(m, Message::FollowerInfo { .. })));
    // ... which node 2, still LOOKING, drops.
    while c.deliver_one() {}
    assert_eq!(c.nodes[&s(2)].peer.role(), Role::Looking);
    c.now += 5;
    c.input(s(2), Input::Tick { now_ms: c.now });
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
