//! The leader's entries in flight: planned by the speculative [`Planner`], queued at the node,
//! and settled by what the node answers about each — not by how long a client waited.
//!
//! A submitted entry is a [`Submitted`] holding the node's reply channel and the entry's
//! [`Ticket`]. Whoever holds it when the node answers tells the planner: the waiting request
//! if the answer comes in time; otherwise (the client's wait timed out, or the request was
//! dropped) a small task that takes the reply channel over and waits for the node's answer.
//!
//! INV-1 (order): entries are queued at the node in plan order: the plan lock (an async mutex)
//! is held from planning until the entry is queued (`Node::enqueue_write`, zab-net node INV-5).
//! INV-2 (settled by the node): an entry stays pending in the planner until the node answers
//! it — `Ok(zxid)`: committed and applied here ([`Planner::settled`]); an error that says it
//! was never proposed (not leader, epoch exhausted, too large, node stopped:
//! [`Planner::failed`]) — or until the epoch changes ([`Planner::new_epoch`]). A client's
//! timeout changes nothing; QUORUM_LOST (may still commit under a new leader) waits for the
//! epoch change.
//! INV-3 (bounded): the task that takes over a reply channel ends when the node answers or
//! drops the channel, which it does for every queued write (zab-net node INV-2: every
//! pending request is answered, or failed when the node stops); at most one such task exists
//! per entry in flight.
//! INV-4 (memory): the planner holds a catalog only while this node leads: it starts empty
//! (the first submit of an epoch resets it to the applied catalog anyway) and is emptied again
//! by [`Writer::release`] when the node stops leading. Otherwise it would pin the version it
//! last saw — after a SNAP replaced the whole catalog, a complete second copy of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Mutex};
use zab_net::{Epoch, Role, Zxid};
use zab_net::{Node, SubmitError};

use super::session::{Planning, WriteAnswer};
use crate::command::{Planner, Ticket};
use crate::state::catalog::{Catalog, SharedCatalog};

type Answer = Result<Zxid, SubmitError>;

struct PlanState {
    planner: Planner,
    epoch: Option<Epoch>,
}

/// The leader's planner and its entries in flight (see the module docs).
pub struct Writer {
    plan: Arc<Mutex<PlanState>>,
    catalog: Arc<SharedCatalog>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

/// Why an entry was not queued.
#[derive(Debug)]
pub enum NotQueued {
    /// Planning answered without queuing anything: a refusal, a passed deadline, a session's
    /// stale or already applied request (`session::plan`).
    Answered(WriteAnswer),
    /// The node's request queue stayed full for the whole limit; nothing was queued.
    QueueFull(Duration),
}

/// An entry queued at the node, its answer not yet taken (INV-2, INV-3).
pub struct Submitted {
    rx: Option<oneshot::Receiver<Answer>>,
    ticket: Ticket,
    created_id: Option<u64>,
    plan: Arc<Mutex<PlanState>>,
    catalog: Arc<SharedCatalog>,
}

impl Writer {
    /// A writer for the catalog `catalog` publishes; its planner holds nothing until the
    /// first submit of an epoch starts it from the applied catalog (INV-4).
    pub fn new(catalog: Arc<SharedCatalog>) -> Writer {
        let plan = PlanState {
            planner: Planner::new(Catalog::default()),
            epoch: None,
        };
        Writer {
            plan: Arc::new(Mutex::new(plan)),
            catalog,
        }
    }

    /// Plans an entry under `epoch` with `plan` (given the planner and the applied catalog,
    /// under the plan lock) and queues it at `node` (INV-1); waits at most `limit` for room in
    /// the node's queue.
    pub async fn submit(
        &self,
        node: &Node,
        epoch: Epoch,
        limit: Duration,
        plan: impl FnOnce(&mut Planner, &Catalog) -> Planning,
    ) -> Result<Submitted, NotQueued> {
        let mut p = self.plan.lock().await;
        if p.epoch != Some(epoch) {
            p.planner.new_epoch(applied(&self.catalog));
            p.epoch = Some(epoch);
        }
        let (ticket, planned) = match plan(&mut p.planner, &self.catalog.load()) {
            Planning::Submit(ticket, planned) => (ticket, planned),
            Planning::Answer(answer) => return Err(NotQueued::Answered(answer)),
        };
        let (tx, rx) = oneshot::channel();
        let payload = planned.entry;
        if tokio::time::timeout(limit, node.enqueue_write(payload, tx))
            .await
            .is_err()
        {
            // Cancelled before it was queued: nothing was queued (zab-net node INV-5).
            p.planner.failed(ticket, || applied(&self.catalog));
            return Err(NotQueued::QueueFull(limit));
        }
        Ok(Submitted {
            rx: Some(rx),
            ticket,
            created_id: planned.created_id,
            plan: self.plan.clone(),
            catalog: self.catalog.clone(),
        })
    }

    /// The node no longer leads: the planner forgets its entries and its catalog (INV-4).
    /// Entries still in flight settle against nothing; the next epoch it leads starts over.
    pub async fn release(&self) {
        let mut p = self.plan.lock().await;
        p.planner.new_epoch(Catalog::default());
        p.epoch = None;
    }

    /// Entries of the catalog the planner holds (tests of INV-4).
    #[cfg(test)]
    async fn planner_entries(&self) -> u64 {
        self.plan.lock().await.planner.speculative().entry_count()
    }
}

/// Empties the planner of `writer` whenever `node` stops leading (INV-4); ends when the node
/// stops.
pub async fn release_when_not_leading(node: &Node, writer: &Writer) {
    let mut role = node.watch_role();
    loop {
        let leading = {
            let st = role.borrow_and_update();
            if st.stopped {
                return;
            }
            st.role == Role::Leading
        };
        if !leading {
            writer.release().await;
        }
        if role.changed().await.is_err() {
            return;
        }
    }
}

impl Submitted {
    /// The id the entry creates (or the first id it reserves), if any.
    pub fn created_id(&self) -> Option<u64> {
        self.created_id
    }

    /// Waits at most `limit` for the node's answer and settles the entry with it (INV-2). On
    /// a timeout the answer is still taken, later, by a task of its own (INV-3).
    pub async fn wait(mut self, limit: Duration) -> Answer {
        let Some(rx) = self.rx.as_mut() else {
            return Err(SubmitError::Shutdown);
        };
        let answer = match tokio::time::timeout(limit, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(SubmitError::Shutdown),
            Err(_) => return Err(SubmitError::Timeout(limit)),
        };
        self.rx = None;
        settle(&self.plan, &self.catalog, self.ticket, &answer).await;
        answer
    }
}

impl Drop for Submitted {
    fn drop(&mut self) {
        let Some(rx) = self.rx.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (plan, catalog, ticket) = (self.plan.clone(), self.catalog.clone(), self.ticket);
        runtime.spawn(async move {
            let answer = rx.await.unwrap_or(Err(SubmitError::Shutdown));
            settle(&plan, &catalog, ticket, &answer).await;
        });
    }
}

fn applied(catalog: &SharedCatalog) -> Catalog {
    Catalog::clone(&catalog.load())
}

/// Whether the node's error says the entry was never proposed (INV-2).
fn never_proposed(e: &SubmitError) -> bool {
    match e {
        SubmitError::NotLeader { .. }
        | SubmitError::NoLeader
        | SubmitError::EpochExhausted
        | SubmitError::TooLarge { .. }
        | SubmitError::Shutdown
        | SubmitError::Fatal(_) => true,
        SubmitError::QuorumLost | SubmitError::Timeout(_) => false,
        // A kind of failure added later: the entry may have been proposed.
        _ => false,
    }
}

async fn settle(plan: &Mutex<PlanState>, catalog: &SharedCatalog, ticket: Ticket, answer: &Answer) {
    let mut p = plan.lock().await;
    match answer {
        Ok(_) => p.planner.settled(ticket, || applied(catalog)),
        Err(e) if never_proposed(e) => p.planner.failed(ticket, || applied(catalog)),
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    fn catalog_of(dbs: usize) -> Catalog {
        let mut p = Planner::new(Catalog::new());
        for i in 0..dbs {
            let create: crate::command::Write = Command::CreateDb {
                name: format!("db{i}"),
            }
            .into();
            p.plan(&create).unwrap();
        }
        p.speculative().clone()
    }

    /// INV-4: a writer pins no catalog before it plans (a follower's never does), and lets
    /// go of the one it planned on once released — so a catalog replaced by a SNAP is freed.
    #[tokio::test]
    async fn the_planner_holds_a_catalog_only_while_leading() {
        let shared = Arc::new(SharedCatalog::new(catalog_of(50)));
        let writer = Writer::new(shared.clone());
        assert_eq!(
            writer.planner_entries().await,
            0,
            "a new writer pins nothing"
        );
        {
            let mut p = writer.plan.lock().await;
            p.planner.new_epoch(applied(&shared));
            p.epoch = Some(Epoch(7));
        }
        assert_eq!(writer.planner_entries().await, 50);
        writer.release().await;
        assert_eq!(
            writer.planner_entries().await,
            0,
            "released on leaving the lead"
        );
        assert_eq!(writer.plan.lock().await.epoch, None);
    }
}
