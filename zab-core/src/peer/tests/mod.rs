//! Scenario tests: peers wired by hand with FIFO links and an instant disk that reports
//! `LogPersisted` at the end of every batch (or later, when a test holds it back).
//!
//! This module is the harness ([`Cluster`], shared with `initial_sync_tests`); the scenarios
//! are in `serving` (a cluster that elects and commits) and `recovery` (peers that come back,
//! leaders that go away).

mod changed_vote;
mod early_decision;
mod membership;
mod recovery;
mod serving;
mod transfer;

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Action, Input};
use crate::membership::Membership;
use crate::message::Message;
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
    /// The committed configuration as of the last `MembershipChanged` (what a snapshot taken
    /// now would carry).
    pub committed: Option<Membership>,
    /// The configuration the snapshot `snapshot` carries.
    pub snapshot_membership: Option<Membership>,
    /// The configuration of the SNAP being received.
    pub receiving: Option<Membership>,
}

impl Node {
    /// `Proposal` + `Commit` pairs of the logged txns in `(after, upto]`.
    fn log_range(&self, after: Zxid, upto: Zxid) -> Vec<Message> {
        self.log
            .iter()
            .filter(|t| t.zxid > after && t.zxid <= upto)
            .flat_map(|t| {
                let zxid = t.zxid;
                [Message::Proposal(t.clone()), Message::Commit { zxid }]
            })
            .collect()
    }

    /// Installs the SNAP received: the log and the state restart from it.
    fn install_snapshot(&mut self, zxid: Zxid) -> Input {
        self.log.clear();
        self.snapshot = (zxid, Vec::new());
        self.applied.clear();
        let membership = self.receiving.take().unwrap();
        self.snapshot_membership = Some(membership.clone());
        Input::SnapshotInstalled { zxid, membership }
    }
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
            committed: None,
            snapshot_membership: d.membership.clone(),
            receiving: None,
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
            membership: n.snapshot_membership.clone(),
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

    /// Crashes `sid`: its connections close, and every other node hears it is unreachable (a
    /// killed process closes its election connections too).
    pub fn crash(&mut self, sid: ServerId) {
        if let Some(n) = self.nodes.get_mut(&sid) {
            n.up = false;
        }
        self.sever(sid);
        for other in self.nodes.keys().copied().collect::<Vec<_>>() {
            if other != sid {
                self.input(other, Input::PeerUnreachable { peer: sid });
            }
        }
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

    /// Feeds `input` to `sid`; a node that is down or was never started hears nothing.
    pub fn input(&mut self, sid: ServerId, input: Input) {
        let Some(n) = self.nodes.get_mut(&sid) else {
            return;
        };
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
                        q.retain(|m| {
                            matches!(m, Message::Notification(_) | Message::Transfer { .. })
                        });
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
                let msgs = n.log_range(after, upto);
                self.links.entry((sid, to)).or_default().extend(msgs);
            }
            Action::SendSnapshot {
                to,
                zxid,
                membership,
            } => {
                let mut state = n.snapshot.1.clone();
                state.extend(n.applied.iter().cloned());
                assert_eq!(state.last().map_or(n.snapshot.0, |t| t.zxid), zxid);
                assert_eq!(Some(&membership), n.committed.as_ref());
                let data = Bytes::from(format!("{}", state.len()));
                let q = self.links.entry((sid, to)).or_default();
                q.push_back(Message::Snap {
                    zxid,
                    membership: membership.clone(),
                });
                q.push_back(Message::SnapChunk { data, last: true });
                n.done.push(Action::SendSnapshot {
                    to,
                    zxid,
                    membership,
                });
            }
            Action::BeginSnapshot { membership, .. } => n.receiving = Some(membership),
            Action::EndSnapshot { zxid } => follow_up.push(n.install_snapshot(zxid)),
            Action::MembershipChanged {
                in_force,
                committed,
            } => {
                n.committed = Some(committed.clone());
                n.done.push(Action::MembershipChanged {
                    in_force,
                    committed,
                });
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
