//! Leader transfers in the simulation: an operator asks a node to hand the leadership over
//! (`Input::TransferLeadership`), scripted or as a random step of the sweep.
//!
//! INV-TR1: every request gets exactly one `TransferDone` (zab-core `transfer` T5) unless the
//! node it was asked of crashes first; the sweep checks that no node answers more than it was
//! asked.
//! INV-TR3: the liveness phase first waits until every transfer asked of a live node is
//! answered: while one runs, the leader refuses writes with `NotLeader` naming the target
//! (for at most syncLimit), which a client retries; the liveness phase's writes do not wait.
//! INV-TR2 (random transfers): asked of the leader three times in four (of any live node
//! otherwise, which refuses), to a random member, a random unknown sid, or no sid at all.

use rand::Rng;
use zab_core::{ServerId, TransferError, TransferReport};

use super::cluster::Cluster;

/// One random fault in this many is a leader transfer, when transfers are on.
pub const TRANSFER_ONE_IN: u32 = 8;

/// The transfers asked and answered in a run.
#[derive(Clone, Debug, Default)]
pub struct TransferLog {
    /// Requests fed in the run.
    pub total: u64,
    /// Requests fed, per node, less those a crash lost.
    pub asked: std::collections::BTreeMap<ServerId, u64>,
    /// Every answer, in order: the node and the outcome.
    pub answers: Vec<(ServerId, Result<TransferReport, TransferError>)>,
}

impl TransferLog {
    /// `id` crashed: the transfers it was asked and did not answer are lost with it.
    pub fn forget(&mut self, id: ServerId) {
        let answered = self.answered(id);
        self.asked.insert(id, answered);
    }

    fn answered(&self, id: ServerId) -> u64 {
        self.answers.iter().filter(|(n, _)| *n == id).count() as u64
    }

    /// Transfers asked and not answered yet (by nodes that did not crash since).
    pub fn pending(&self) -> u64 {
        self.asked
            .iter()
            .map(|(id, asked)| asked.saturating_sub(self.answered(*id)))
            .sum()
    }

    /// Answers that were a completed handover.
    pub fn completed(&self) -> usize {
        self.answers.iter().filter(|(_, o)| o.is_ok()).count()
    }
}

impl Cluster {
    /// Asks `id` to hand its leadership to `target` (or to the best follower).
    pub fn transfer_leadership(&mut self, id: ServerId, target: Option<ServerId>) {
        *self.transfers.asked.entry(id).or_default() += 1;
        self.transfers.total += 1;
        self.mix(0x7a ^ id.0 ^ target.map_or(0, |t| t.0 << 8));
        self.trace(format_args!("{id} is asked to transfer to {target:?}"));
        self.feed(id, zab_core::Input::TransferLeadership { target });
    }

    /// Every transfer answer so far.
    pub fn transfer_log(&self) -> &TransferLog {
        &self.transfers
    }

    /// `id` answered a transfer (INV-TR1).
    pub(crate) fn on_transfer_done(
        &mut self,
        id: ServerId,
        outcome: Result<TransferReport, TransferError>,
    ) {
        self.trace(format_args!("{id} transfer done: {outcome:?}"));
        if let Ok(r) = &outcome {
            assert_eq!(
                r.from, id,
                "seed {}: {id} reports a transfer from {}",
                self.opts.seed, r.from
            );
        }
        self.transfers.answers.push((id, outcome));
        let answered = self.transfers.answered(id);
        let asked = self.transfers.asked.get(&id).copied().unwrap_or(0);
        assert!(
            answered <= asked,
            "seed {}: {id} answered {answered} transfers, asked {asked}",
            self.opts.seed
        );
    }

    /// Runs until every pending transfer is answered (INV-TR3).
    pub(crate) fn settle_transfers(&mut self) {
        self.expect_within(
            super::script::LIVENESS_DEADLINE_MS,
            "pending leader transfers answered",
            |c| c.transfers.pending() == 0,
        );
    }

    /// A random transfer (INV-TR2).
    pub(crate) fn random_transfer(&mut self) {
        let live = self.live();
        if live.is_empty() {
            return;
        }
        let leader = self.leader().filter(|_| self.rng.gen_ratio(3, 4));
        let id = leader.unwrap_or_else(|| live[self.rng.gen_range(0..live.len())]);
        let ids = self.ids();
        let target = match self.rng.gen_range(0..8) {
            0 | 1 => None,
            2 => Some(ServerId(self.next_sid + 50)),
            _ => Some(ids[self.rng.gen_range(0..ids.len())]),
        };
        self.transfer_leadership(id, target);
    }
}
