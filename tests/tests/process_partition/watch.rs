//! The status watcher: every [`PERIOD`] it asks every node for its STATUS (one persistent
//! connection per node, from the host namespace, which no fault cuts) and keeps each round
//! with its invocation and return times, so a test can say when the majority elected, when
//! the old leader stepped down, and until when no majority node claimed to lead.
//!
//! INV-1: the poller stops by itself after its `max`, or earlier on [`Watch::stop`].
//! INV-2: a round's `invoked` precedes every answer in it: a node that answered "not leader"
//! in a round was not leading at `invoked` (so any commit it makes as a new leader is later).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientOptions};
use fe_meta::protocol::{Mode, StatusInfo};
use tokio::task::JoinHandle;

/// Time between rounds.
pub const PERIOD: Duration = Duration::from_millis(20);

const OPTS: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_millis(300),
    request_timeout: Duration::from_millis(500),
    ..ClientOptions::DEFAULT
};

/// One round: every node's STATUS (`None`: no answer).
#[derive(Clone, Debug)]
pub struct Round {
    /// When the round started.
    pub invoked: Instant,
    /// When its last answer arrived.
    pub returned: Instant,
    /// Each node's answer.
    pub status: BTreeMap<u64, Option<StatusInfo>>,
}

impl Round {
    /// Whether `sid` answered as an established leader of an epoch after `old_epoch` (it
    /// applied its epoch's first entry).
    pub fn new_leader(&self, sid: u64, old_epoch: u64) -> bool {
        self.status
            .get(&sid)
            .and_then(Option::as_ref)
            .is_some_and(|s| {
                s.is_leader()
                    && s.epoch > old_epoch
                    && u64::from(s.applied_journal_id.epoch().0) == s.epoch
            })
    }

    /// Whether every one of `sids` answered, and none in leader mode.
    pub fn none_leads(&self, sids: &[u64]) -> bool {
        sids.iter().all(|sid| {
            self.status
                .get(sid)
                .and_then(Option::as_ref)
                .is_some_and(|s| s.mode != Mode::Leader)
        })
    }

    /// Whether `sid` answered, not in leader mode.
    pub fn not_leading(&self, sid: u64) -> bool {
        self.none_leads(&[sid])
    }
}

/// The running watcher.
#[derive(Debug)]
pub struct Watch {
    rounds: Arc<Mutex<Vec<Round>>>,
    stop: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Watch {
    /// Starts polling `nodes` (sid, client address) for at most `max`.
    pub fn start(nodes: Vec<(u64, String)>, max: Duration) -> Watch {
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (rounds.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let deadline = Instant::now() + max;
            let mut conns: BTreeMap<u64, Client> = BTreeMap::new();
            while !s.load(Ordering::Relaxed) && Instant::now() < deadline {
                let round = poll(&nodes, &mut conns).await;
                r.lock().unwrap().push(round);
                tokio::time::sleep(PERIOD).await;
            }
        });
        Watch { rounds, stop, task }
    }

    /// Waits until `pred` holds for a round that started at or after `since`, or `within`
    /// passes; that round.
    pub async fn wait_for(
        &self,
        since: Instant,
        within: Duration,
        pred: impl Fn(&Round) -> bool,
    ) -> Option<Round> {
        let deadline = Instant::now() + within;
        loop {
            let found = {
                let g = self.rounds.lock().unwrap();
                g.iter().find(|r| r.invoked >= since && pred(r)).cloned()
            };
            if found.is_some() || Instant::now() >= deadline {
                return found;
            }
            tokio::time::sleep(PERIOD).await;
        }
    }

    /// Stops polling; every round.
    pub async fn stop(self) -> Vec<Round> {
        self.stop.store(true, Ordering::Relaxed);
        let rounds = self.rounds.clone();
        let _ = self.task.await;
        let all = rounds.lock().unwrap().clone();
        all
    }
}

async fn poll(nodes: &[(u64, String)], conns: &mut BTreeMap<u64, Client>) -> Round {
    let invoked = Instant::now();
    let mut status = BTreeMap::new();
    for (sid, addr) in nodes {
        if conns.get(sid).is_none_or(Client::is_closed) {
            match Client::connect_with(addr, OPTS).await {
                Ok(c) => {
                    conns.insert(*sid, c);
                }
                Err(_) => {
                    status.insert(*sid, None);
                    continue;
                }
            }
        }
        let answer = match conns.get(sid) {
            Some(c) => c.status().await.ok(),
            None => None,
        };
        if answer.is_none() {
            conns.remove(sid);
        }
        status.insert(*sid, answer);
    }
    Round {
        invoked,
        returned: Instant::now(),
        status,
    }
}
