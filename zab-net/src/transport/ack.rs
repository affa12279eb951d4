//! Cumulative acknowledgements coalesce in a link's outbox: at most one proposal ACK of an
//! epoch and one PINGACK wait there unwritten, each carrying the newest value sent since it
//! was queued.
//!
//! A learner acknowledges every log persist with one ACK of its highest durable proposal
//! (`zab_core` learner INV-3), and the leader counts an ACK of `z` for every proposal up to
//! `z` of the epoch; it answers every PING with a PINGACK of its round, and the leader counts
//! a PINGACK of `r` for every round up to `r`. So an acknowledgement not written yet says
//! nothing a later one does not say too. Without coalescing, a learner whose link to the
//! leader drains slower than the leader proposes and pings (the leader commits with the
//! others, and reads this one late) queues one ACK per persist and one PINGACK per ping, and
//! overflows its outbox, though the requests it forwards stay under the intake limit's
//! high-water mark (`crate::admission` INV-1 relies on this module for the rest).
//!
//! INV-1: a proposal ACK (an `Ack` whose counter is not 0) sent while an ACK of the same
//! epoch waits unwritten in the same outbox is *folded* into it: nothing is queued, and the
//! waiting one is written with the higher zxid. A PINGACK sent while one of a round not
//! above its own waits is folded the same way. Anything else (among them the ACK of
//! NEWLEADER, counter 0) is queued as it is.
//! INV-2: a folded value is written where the waiting message was queued, so it may overtake
//! messages queued after that one (requests, the other kind of acknowledgement, one of
//! another epoch); none depends on that order, and the folded value is always one this
//! server really sent, the newest of its kind: the leader reads both kinds as cumulative and
//! ignores one at or below what it already counted.
//! INV-3: the record belongs to one outbox generation: discarding the queue discards it, so
//! a value folded before a connection ended is never written on a later connection.
//!
//! [`UnwrittenAcks`] is a pure policy: the transport keeps one per outbox, and the
//! deterministic simulation's network keeps one per link, so both run this very rule.

use zab_core::{Message, Zxid};

/// An acknowledgement that may be folded (INV-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cumulative {
    /// A proposal ACK of this zxid.
    Ack(Zxid),
    /// A PINGACK of this round.
    PingAck(u64),
}

/// What of `msg` may be folded: a proposal ACK or a PINGACK (INV-1).
pub fn cumulative(msg: &Message) -> Option<Cumulative> {
    match msg {
        Message::Ack { zxid } if zxid.counter() > 0 => Some(Cumulative::Ack(*zxid)),
        Message::PingAck { round } => Some(Cumulative::PingAck(*round)),
        _ => None,
    }
}

/// The acknowledgements queued last in one outbox and not written yet (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwrittenAcks {
    ack: Option<Zxid>,
    ping_ack: Option<u64>,
}

impl UnwrittenAcks {
    /// Before queueing `c`: true when it was folded into the waiting one of its kind, so
    /// nothing is to be queued (INV-1).
    pub fn fold(&mut self, c: Cumulative) -> bool {
        match (c, &mut self.ack, &mut self.ping_ack) {
            (Cumulative::Ack(zxid), Some(waiting), _) if waiting.epoch() == zxid.epoch() => {
                *waiting = (*waiting).max(zxid);
                true
            }
            (Cumulative::PingAck(round), _, Some(waiting)) if *waiting <= round => {
                *waiting = round;
                true
            }
            _ => false,
        }
    }

    /// `c` was queued (not folded): it is now the waiting one of its kind, unless one still
    /// waits (of another epoch, or of a higher round after the rounds started again): that
    /// one keeps its record, so no fold is lost, and these are queued one by one until it
    /// is written.
    pub fn queued(&mut self, c: Cumulative) {
        match c {
            Cumulative::Ack(zxid) => {
                self.ack.get_or_insert(zxid);
            }
            Cumulative::PingAck(round) => {
                self.ping_ack.get_or_insert(round);
            }
        }
    }

    /// When `msg` is taken to be written: the message to write in its place. The waiting
    /// message of its kind carries what was folded into it, and is then written; anything
    /// else is written as it is.
    pub fn take(&mut self, msg: Message) -> Message {
        match cumulative(&msg) {
            Some(Cumulative::Ack(zxid)) => match self.ack {
                Some(waiting) if waiting.epoch() == zxid.epoch() && waiting >= zxid => {
                    self.ack = None;
                    Message::Ack { zxid: waiting }
                }
                _ => msg,
            },
            Some(Cumulative::PingAck(round)) => match self.ping_ack {
                Some(waiting) if waiting >= round => {
                    self.ping_ack = None;
                    Message::PingAck { round: waiting }
                }
                _ => msg,
            },
            None => msg,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zab_core::Epoch;

    fn ack(epoch: u32, counter: u32) -> Message {
        Message::Ack {
            zxid: Zxid::new(Epoch(epoch), counter),
        }
    }

    fn ping_ack(round: u64) -> Message {
        Message::PingAck { round }
    }

    /// Queues `msg` through `slot` as the transport does: folded ones are not queued.
    fn send(slot: &mut UnwrittenAcks, queue: &mut Vec<Message>, msg: Message) {
        match cumulative(&msg) {
            Some(c) if slot.fold(c) => {}
            Some(c) => {
                queue.push(msg);
                slot.queued(c);
            }
            None => queue.push(msg),
        }
    }

    fn written(slot: &mut UnwrittenAcks, queue: Vec<Message>) -> Vec<Message> {
        queue.into_iter().map(|m| slot.take(m)).collect()
    }

    #[test]
    fn acks_and_ping_acks_fold_into_the_first_unwritten_one_of_their_kind() {
        let (mut slot, mut q) = (UnwrittenAcks::default(), Vec::new());
        send(&mut slot, &mut q, ack(2, 1));
        send(&mut slot, &mut q, ping_ack(7));
        send(&mut slot, &mut q, Message::Ping { round: 1 });
        for c in 2..=40 {
            send(&mut slot, &mut q, ack(2, c));
            send(&mut slot, &mut q, ping_ack(7 + u64::from(c)));
        }
        assert_eq!(q.len(), 3, "{q:?}");
        let out = written(&mut slot, q);
        assert_eq!(
            out,
            vec![ack(2, 40), ping_ack(47), Message::Ping { round: 1 }]
        );
        // Written: the next ones are queued again.
        let mut q = Vec::new();
        send(&mut slot, &mut q, ack(2, 41));
        send(&mut slot, &mut q, ping_ack(48));
        assert_eq!(written(&mut slot, q), vec![ack(2, 41), ping_ack(48)]);
    }

    #[test]
    fn a_newleader_ack_and_acks_of_another_epoch_are_queued_and_no_fold_is_lost() {
        let (mut slot, mut q) = (UnwrittenAcks::default(), Vec::new());
        send(&mut slot, &mut q, ack(2, 5));
        send(&mut slot, &mut q, ack(3, 0));
        send(&mut slot, &mut q, ack(3, 1));
        send(&mut slot, &mut q, ack(3, 2));
        send(&mut slot, &mut q, ack(2, 9));
        assert_eq!(
            written(&mut slot, q),
            vec![ack(2, 9), ack(3, 0), ack(3, 1), ack(3, 2)]
        );
        // The old epoch's ACK written, the new one's fold again.
        let mut q = Vec::new();
        send(&mut slot, &mut q, ack(3, 3));
        send(&mut slot, &mut q, ack(3, 4));
        assert_eq!(written(&mut slot, q), vec![ack(3, 4)]);
    }

    #[test]
    fn ping_acks_of_rounds_that_started_again_are_queued_as_they_are() {
        let (mut slot, mut q) = (UnwrittenAcks::default(), Vec::new());
        send(&mut slot, &mut q, ping_ack(50));
        send(&mut slot, &mut q, ping_ack(1));
        send(&mut slot, &mut q, ping_ack(2));
        assert_eq!(
            written(&mut slot, q),
            vec![ping_ack(50), ping_ack(1), ping_ack(2)]
        );
    }

    #[test]
    fn a_fold_never_lowers_the_waiting_zxid() {
        let (mut slot, mut q) = (UnwrittenAcks::default(), Vec::new());
        send(&mut slot, &mut q, ack(4, 10));
        send(&mut slot, &mut q, ack(4, 3));
        assert_eq!(written(&mut slot, q), vec![ack(4, 10)]);
    }

    #[test]
    fn a_message_that_did_not_go_through_the_record_is_written_as_it_is() {
        let mut slot = UnwrittenAcks::default();
        slot.queued(Cumulative::Ack(Zxid::new(Epoch(2), 3)));
        assert_eq!(slot.take(ack(2, 8)), ack(2, 8));
        assert_eq!(slot.take(ack(2, 3)), ack(2, 3));
        assert_eq!(slot, UnwrittenAcks::default());
    }
}
