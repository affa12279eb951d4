//! Faults: crash, restart, wipe, pause/resume, link cut/heal, partitions, slow disks, slow
//! links, bursts of client writes.
//!
//! INV-F1: a crash loses what is not durable (a SNAP not yet durable, the state machine,
//! every connection, and the pending appends, of which a random prefix survives when
//! `SimOptions::crash_keeps_unsynced_prefix` is on: L4 of the log durability contract); a
//! restart rebuilds the peer from the disk (`DurableState`) and the state machine from the
//! newest snapshot.
//! INV-F2: random faults keep at most `max_faulty` nodes down or paused at once.
//! INV-F3: random wipes (only when `SimOptions::wipes` is on) keep at most a minority of the
//! participants (of the newest committed configuration and of the newest in force) wiped and
//! not yet resynced (disk still marked "needs initial sync") at any time.
//! A wiped voter does not vote until a leader synced it (B9), so a quorum that elects always
//! lies within the initialized voters and meets every quorum that committed a txn in a node
//! that still holds it: the checkers keep assuming that acknowledged writes survive. Wiping a
//! majority would leave no quorum able to elect, so the liveness phase could never end; the
//! bound rules that out, and the liveness phase resyncs the wiped minority.
//! INV-F4: a slow disk (only when `SimOptions::slow_disks` is on) stalls one node's log
//! fsyncs for [`STALL_MS`] of virtual time, several elections long: no pending append of that
//! node becomes durable and no `LogPersisted` is fed to it, while the rest of the run goes on.
//! Synchronous writes (epoch files, a truncate) still complete at once (the sim cannot block
//! a driver mid-batch; a truncate syncs the pending appends first, L2). At most one disk is
//! stalled at a time. With probability one half the node loses power at a random moment
//! inside the span (respecting INV-F2), keeping a random prefix of its unsynced appends, and
//! restarts a random moment after. Every stall and its scheduled power loss end with the
//! faults (`end_faults`), so the liveness phase runs on healthy disks.
//! INV-F5: a slow link (only when `SimOptions::bursts` is on) delivers nothing on one
//! direction of a quorum connection for [`SLOW_LINK_MS`] of virtual time while the other
//! direction and every other link go on: a reader that falls behind (a busy leader reading
//! one follower late). What is sent on it still queues and counts against its capacity
//! (`net` INV-N5), so a slow link overflows like a real one. Half the time it is a
//! follower's link to the leader, which carries its forwarded requests and its ACKs. Every
//! slow link ends with the faults.

use std::ops::RangeInclusive;

use rand::seq::SliceRandom;
use rand::Rng;
use zab_core::ServerId;

use super::cluster::Cluster;

/// How long a slow disk stalls, in virtual ms: an election takes a few hundred ms, `initLimit`
/// is one second, so a new leader or a syncing learner can meet its own pending tail.
pub const STALL_MS: RangeInclusive<u64> = 1_500..=6_000;

/// One random fault in this many is a slow disk (INV-F4), when slow disks are on. A run has
/// 20–120 faults, so most runs get a few stalls while the other faults keep their share.
pub const STALL_ONE_IN: u32 = 10;

/// One random fault in this many is a membership change (`members` INV-MB2), when changes
/// are on.
pub const MEMBERSHIP_ONE_IN: u32 = 6;

/// How many client writes a burst issues at once on one node (when `SimOptions::bursts` is
/// on): up to more than a leader with the sweep's outboxes takes at once (a quarter of the
/// outbox, 20–216 messages), so a burst meets the intake limit (`admit`).
pub const BURST_WRITES: RangeInclusive<usize> = 10..=100;

/// One random fault in this many is a burst of writes, when bursts are on.
pub const BURST_ONE_IN: u32 = 3;

/// How long a slow link delivers nothing, in virtual ms (INV-F5): shorter and longer than the
/// sweep's `syncLimit` (1.5–2.5 s).
pub const SLOW_LINK_MS: RangeInclusive<u64> = 200..=3_000;

/// One random fault in this many is a slow link, when bursts are on.
pub const SLOW_LINK_ONE_IN: u32 = 6;

/// How long after its power loss a stalled node restarts, in virtual ms.
const RESTART_AFTER_MS: RangeInclusive<u64> = 0..=1_500;

impl Cluster {
    /// Crashes `id` (kill -9 plus loss of everything not fsynced).
    pub fn crash(&mut self, id: ServerId) {
        let ids = self.ids();
        let Some(node) = self.nodes.get_mut(&id) else {
            return;
        };
        if node.peer.take().is_none() {
            return;
        }
        let pending = node.disk.pending.len();
        let keep = if self.opts.crash_keeps_unsynced_prefix && pending > 0 {
            self.rng.gen_range(0..=pending)
        } else {
            0
        };
        let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
        node.disk.power_loss(keep);
        node.paused = false;
        node.crashes += 1;
        self.net.crash(id, &ids);
        self.reset_intake(id);
        self.checker.on_crash(id);
        self.transfers.forget(id);
        self.mix(0xc0 ^ id.0 ^ (keep as u64) << 8);
        self.trace(format_args!(
            "CRASH {id} (kept {keep} of {pending} unsynced appends)"
        ));
    }

    /// Crashes `id` right after the SNAP it is installing reached the disk (snapshot written,
    /// log reset to it) but before the node learned so: nothing after the install (the
    /// `currentEpoch` write of NEWLEADER in particular) happened (PITFALLS B5). Returns false,
    /// and does nothing, when no install is pending.
    pub fn crash_after_install(&mut self, id: ServerId) -> bool {
        let Some(node) = self.nodes.get_mut(&id) else {
            return false;
        };
        if node.disk.install.is_none() {
            return false;
        }
        node.disk.force_install();
        self.trace(format_args!("SNAP install of {id} durable"));
        self.crash(id);
        true
    }

    /// Restarts a crashed `id` from its disk.
    pub fn restart(&mut self, id: ServerId) {
        if self.nodes.get(&id).is_some_and(|n| !n.is_up()) {
            self.mix(0x5a ^ id.0);
            self.trace(format_args!("RESTART {id}"));
            self.start(id);
        }
    }

    /// Crashes `id`, empties its data dir and restarts it (PITFALLS B9) with `--helper`: it
    /// learns the newest committed configuration, and is refused when that lists it no more.
    pub fn wipe(&mut self, id: ServerId) {
        self.crash(id);
        let helper = self.newest_committed().cloned();
        if let Some(n) = self.nodes.get_mut(&id) {
            n.disk.wipe(helper);
            n.applied.clear();
        }
        self.trace(format_args!("WIPE {id}"));
        self.start(id);
    }

    /// Stops giving `id` any input (a stalled process); its connections stay up.
    pub fn pause(&mut self, id: ServerId) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.paused = n.is_up();
        }
        self.trace(format_args!("PAUSE {id}"));
    }

    /// Resumes a paused `id`.
    pub fn resume(&mut self, id: ServerId) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.paused = false;
        }
        self.trace(format_args!("RESUME {id}"));
    }

    /// Cuts the link between `a` and `b`.
    pub fn cut(&mut self, a: ServerId, b: ServerId) {
        self.trace(format_args!("CUT {a}-{b}"));
        self.net.cut(a, b);
    }

    /// Heals the link between `a` and `b`.
    pub fn heal(&mut self, a: ServerId, b: ServerId) {
        self.trace(format_args!("HEAL {a}-{b}"));
        self.net.heal(a, b);
    }

    /// Cuts every link between different groups; nodes in no group are isolated.
    pub fn partition(&mut self, groups: &[&[ServerId]]) {
        let group_of = |id: ServerId| groups.iter().position(|g| g.contains(&id));
        let ids = self.ids();
        for &a in &ids {
            for &b in &ids {
                if a < b && (group_of(a).is_none() || group_of(a) != group_of(b)) {
                    self.cut(a, b);
                }
            }
        }
    }

    /// Cuts every link of `id`.
    pub fn isolate(&mut self, id: ServerId) {
        for other in self.ids() {
            if other != id {
                self.cut(id, other);
            }
        }
    }

    /// Heals every link.
    pub fn heal_all(&mut self) {
        self.trace(format_args!("HEAL ALL"));
        self.net.heal_all();
    }

    /// Stalls the log fsyncs of `id` for `ms` of virtual time (INV-F4).
    pub fn stall_disk(&mut self, id: ServerId, ms: u64) {
        let until = self.now_ms + ms;
        if let Some(n) = self.nodes.get_mut(&id) {
            n.fsync_stalled_until_ms = until;
        }
        self.mix(0xd15c ^ id.0 ^ until << 8);
        self.trace(format_args!("STALL DISK {id} until t={until}"));
    }

    /// The quorum link from `from` to `to` delivers nothing for `ms` of virtual time
    /// (INV-F5).
    pub fn slow_link(&mut self, from: ServerId, to: ServerId, ms: u64) {
        let until = self.now_ms + ms;
        self.net.slow(from, to, until);
        self.mix(0x5104 ^ from.0 << 8 ^ to.0 << 16 ^ until << 24);
        self.trace(format_args!("SLOW LINK {from}->{to} until t={until}"));
    }

    /// Ends every fault: heals links, resumes paused nodes, restarts crashed ones, ends disk
    /// stalls and drops their scheduled power losses, ends slow links.
    pub fn end_faults(&mut self) {
        self.heal_all();
        self.net.end_slow_links();
        for n in self.nodes.values_mut() {
            n.fsync_stalled_until_ms = 0;
            n.power_loss_at_ms = None;
            n.restart_at_ms = None;
        }
        for id in self.ids() {
            self.resume(id);
            self.restart(id);
        }
    }

    /// Runs the power losses and restarts that slow-disk faults scheduled for now or earlier
    /// (INV-F4); called at the start of every step.
    pub(crate) fn scheduled_disk_faults(&mut self) {
        let now = self.now_ms;
        let due: Vec<(ServerId, bool)> = self
            .nodes
            .values()
            .filter_map(|n| {
                if n.power_loss_at_ms.is_some_and(|t| t <= now) {
                    Some((n.id, true))
                } else if n.restart_at_ms.is_some_and(|t| t <= now) {
                    Some((n.id, false))
                } else {
                    None
                }
            })
            .collect();
        for (id, power_loss) in due {
            let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
            if power_loss {
                node.power_loss_at_ms = None;
                let live = node.is_live();
                // INV-F2: a node already counted faulty may go down; another only with room
                if !live || self.faulty() < self.opts.max_faulty {
                    self.trace(format_args!("POWER LOSS {id} (slow disk)"));
                    self.stalled_power_losses += 1;
                    self.crash(id);
                } else {
                    let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
                    node.restart_at_ms = None;
                }
            } else {
                node.restart_at_ms = None;
                self.restart(id);
            }
        }
    }

    /// A slow disk on a random up node, when no disk is stalled already (INV-F4).
    fn random_stall(&mut self) {
        let now = self.now_ms;
        if self.nodes.values().any(|n| n.fsync_stalled(now)) {
            return;
        }
        let up: Vec<ServerId> = self
            .nodes
            .values()
            .filter(|n| n.is_up())
            .map(|n| n.id)
            .collect();
        if up.is_empty() {
            return;
        }
        let id = up[self.rng.gen_range(0..up.len())];
        let span = self.rng.gen_range(STALL_MS);
        self.stalls += 1;
        self.stall_disk(id, span);
        if self.rng.gen_ratio(1, 2) {
            let loss = now + self.rng.gen_range(0..span);
            let restart = loss + self.rng.gen_range(RESTART_AFTER_MS);
            let node = self.nodes.get_mut(&id).unwrap_or_else(|| unreachable!());
            node.power_loss_at_ms = Some(loss);
            node.restart_at_ms = Some(restart);
        }
    }

    /// A slow link (INV-F5): half the time a follower's to the leader, else any one.
    fn random_slow_link(&mut self) {
        let ids = self.ids();
        let followers: Vec<ServerId> = match self.leader() {
            Some(l) => ids.iter().copied().filter(|id| *id != l).collect(),
            None => Vec::new(),
        };
        let (from, to) = match self.leader() {
            Some(l) if !followers.is_empty() && self.rng.gen_ratio(1, 2) => {
                (followers[self.rng.gen_range(0..followers.len())], l)
            }
            _ => {
                let mut pair = ids.clone();
                pair.shuffle(&mut self.rng);
                match pair[..] {
                    [a, b, ..] => (a, b),
                    _ => return,
                }
            }
        };
        let span = self.rng.gen_range(SLOW_LINK_MS);
        self.slow_links += 1;
        self.slow_link(from, to, span);
    }

    /// A burst of [`BURST_WRITES`] client writes on the leader (half the time, when there is
    /// one) or on a random live node.
    fn random_burst(&mut self) {
        let live = self.live();
        if live.is_empty() {
            return;
        }
        let id = match self.leader() {
            Some(l) if self.rng.gen_ratio(1, 2) && live.contains(&l) => l,
            _ => live[self.rng.gen_range(0..live.len())],
        };
        let n = self.rng.gen_range(BURST_WRITES);
        self.trace(format_args!("BURST of {n} writes on {id}"));
        for _ in 0..n {
            self.write(id);
        }
    }

    /// INV-F3: wiping `id` keeps the participants wiped and not resynced a minority, in the
    /// committed configuration and in the one in force.
    fn may_wipe(&self, id: ServerId) -> bool {
        self.unsynced_minority(Some(id), None)
    }

    fn faulty(&self) -> usize {
        self.nodes.values().filter(|n| !n.is_live()).count()
    }

    /// A membership change, a leader transfer, a slow disk, a slow link or a burst, when drawn
    /// (and turned on).
    fn special_fault(&mut self) -> bool {
        if self.opts.membership_changes && self.rng.gen_ratio(1, MEMBERSHIP_ONE_IN) {
            self.random_membership_change();
        } else if self.opts.transfers && self.rng.gen_ratio(1, super::transfer::TRANSFER_ONE_IN) {
            self.random_transfer();
        } else if self.opts.slow_disks && self.rng.gen_ratio(1, STALL_ONE_IN) {
            self.random_stall();
        } else if self.opts.bursts && self.rng.gen_ratio(1, SLOW_LINK_ONE_IN) {
            self.random_slow_link();
        } else if self.opts.bursts && self.rng.gen_ratio(1, BURST_ONE_IN) {
            self.random_burst();
        } else {
            return false;
        }
        true
    }

    /// One random fault.
    pub(crate) fn random_fault(&mut self) {
        self.faults += 1;
        if self.special_fault() {
            return;
        }
        let ids = self.ids();
        let down: Vec<_> = self
            .nodes
            .values()
            .filter(|n| !n.is_up())
            .map(|n| n.id)
            .collect();
        let paused: Vec<_> = self
            .nodes
            .values()
            .filter(|n| n.paused)
            .map(|n| n.id)
            .collect();
        let live = self.live();
        let room = self.faulty() < self.opts.max_faulty;
        let a = ids[self.rng.gen_range(0..ids.len())];
        let b = ids[self.rng.gen_range(0..ids.len())];
        let kinds = if self.opts.wipes { 13 } else { 12 };
        match self.rng.gen_range(0..kinds) {
            0 | 1 if room && !live.is_empty() => {
                let id = live[self.rng.gen_range(0..live.len())];
                self.crash(id);
            }
            2..=4 if !down.is_empty() => {
                let id = down[self.rng.gen_range(0..down.len())];
                self.restart(id);
            }
            5 if room && !live.is_empty() => {
                let id = live[self.rng.gen_range(0..live.len())];
                self.pause(id);
            }
            6 if !paused.is_empty() => {
                let id = paused[self.rng.gen_range(0..paused.len())];
                self.resume(id);
            }
            7 => self.cut(a, b),
            8 | 9 => self.heal(a, b),
            10 => {
                let mut shuffled = ids.clone();
                shuffled.shuffle(&mut self.rng);
                let k = self.rng.gen_range(1..shuffled.len().max(2));
                let (x, y) = shuffled.split_at(k.min(shuffled.len()));
                self.partition(&[x, y]);
            }
            12 => {
                if self.may_wipe(a) {
                    self.wipes += 1;
                    self.wipe(a);
                }
            }
            _ => self.heal_all(),
        }
    }
}
