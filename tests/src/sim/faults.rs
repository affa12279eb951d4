//! Faults: crash, restart, wipe, pause/resume, link cut/heal, partitions.
//!
//! INV-F1: a crash loses exactly what is not durable (pending appends, a SNAP not yet
//! durable, the state machine, every connection); a restart rebuilds the peer from the disk
//! (`DurableState`) and the state machine from the newest snapshot.
//! INV-F2: random faults keep at most `max_faulty` nodes down or paused at once.
//! INV-F3: random wipes (only when `SimOptions::wipes` is on) keep at most a minority of the
//! voters wiped and not yet resynced (disk still marked "needs initial sync") at any time.
//! A wiped voter does not vote until a leader synced it (B9), so a quorum that elects always
//! lies within the initialized voters and meets every quorum that committed a txn in a node
//! that still holds it: the checkers keep assuming that acknowledged writes survive. Wiping a
//! majority would leave no quorum able to elect, so the liveness phase could never end; the
//! bound rules that out, and the liveness phase resyncs the wiped minority.

use rand::seq::SliceRandom;
use rand::Rng;
use zab_core::ServerId;

use super::cluster::Cluster;

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
        node.disk.crash();
        node.paused = false;
        node.crashes += 1;
        self.net.crash(id, &ids);
        self.checker.on_crash(id);
        self.mix(0xc0 ^ id.0);
        self.trace(format_args!("CRASH {id}"));
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

    /// Crashes `id`, empties its data dir and restarts it (PITFALLS B9).
    pub fn wipe(&mut self, id: ServerId) {
        self.crash(id);
        if let Some(n) = self.nodes.get_mut(&id) {
            n.disk.wipe();
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

    /// Ends every fault: heals links, resumes paused nodes, restarts crashed ones.
    pub fn end_faults(&mut self) {
        self.heal_all();
        for id in self.ids() {
            self.resume(id);
            self.restart(id);
        }
    }

    /// INV-F3: wiping `id` keeps at most a minority of the voters wiped and not resynced.
    fn may_wipe(&self, id: ServerId) -> bool {
        let voter = |n: &ServerId| n.0 as usize <= self.opts.voters;
        if !voter(&id) {
            return true;
        }
        let unsynced = self
            .nodes
            .values()
            .filter(|n| n.id != id && voter(&n.id) && n.disk.needs_initial_sync)
            .count();
        unsynced < self.opts.voters / 2
    }

    fn faulty(&self) -> usize {
        self.nodes.values().filter(|n| !n.is_live()).count()
    }

    /// One random fault.
    pub(crate) fn random_fault(&mut self) {
        self.faults += 1;
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
        let live: Vec<_> = self
            .nodes
            .values()
            .filter(|n| n.is_live())
            .map(|n| n.id)
            .collect();
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
