//! The simulated side: `tests::sim::disk::Disk`, driven as `tests::sim::exec` drives it, with
//! fsyncs at the script's settle points and explicit partial syncs.

use bytes::BytesMut;
use tests::sim::disk::{Disk, Snapshot};
use zab_core::{Input, Zxid};
use zab_store::LogCommand;

use super::tracker::Tracker;
use crate::txn;

/// The simulated disk, driven as `tests::sim::exec` drives it.
#[derive(Default)]
pub struct Sim {
    /// The simulated disk.
    disk: Disk,
    /// What a peer fed by this disk derives.
    pub tracker: Tracker,
}

impl Sim {
    /// Runs one batch as the simulation's driver runs it.
    pub fn batch(&mut self, cmds: &[LogCommand]) {
        for cmd in cmds {
            match cmd {
                LogCommand::Append(t) => {
                    self.tracker.append(t.zxid);
                    assert!(self.disk.append(t.clone()), "sim disk refuses {t:?}");
                }
                LogCommand::Truncate { to } => {
                    self.tracker.truncate(*to);
                    self.disk.truncate(*to);
                    self.check_kept("truncate");
                }
                LogCommand::Reset { after } => {
                    // a SNAP's stream, its end and its install, as the sim's driver runs them
                    let snap = Snapshot::of(&[txn(*after)]);
                    self.disk.incoming = Some((*after, BytesMut::from(&snap.encode()[..])));
                    assert!(self.disk.end_snapshot(*after).is_some());
                    assert!(self.disk.finish_install().is_some());
                    self.tracker.reset(*after);
                    self.check_kept("reset");
                }
                other => panic!("not a batch command: {other:?}"),
            }
        }
    }

    /// L2 on the sim: after a truncate or reset the disk holds exactly the kept records, all
    /// durable.
    fn check_kept(&self, what: &str) {
        let durable: Vec<Zxid> = self.disk.log.iter().map(|t| t.zxid).collect();
        assert_eq!(durable, self.tracker.log, "sim disk after {what}");
        assert!(self.disk.pending.is_empty(), "sim disk after {what}");
    }

    /// An fsync step of the simulation's scheduler.
    pub fn fsync(&mut self, n: usize) {
        if let Some(upto) = self.disk.fsync(n) {
            let input = Input::LogPersisted { upto };
            self.tracker
                .feed(&input)
                .unwrap_or_else(|e| panic!("sim disk: {e}"));
            let durable: Vec<Zxid> = self.disk.log.iter().map(|t| t.zxid).collect();
            self.tracker
                .check_durable(&durable)
                .unwrap_or_else(|e| panic!("sim disk after {input:?}: {e}"));
        }
    }

    /// An fsync of everything pending.
    pub fn settle(&mut self) {
        self.fsync(self.disk.pending.len());
    }

    /// What a restart finds after a power loss with everything synced.
    pub fn reopen(mut self) -> Vec<Zxid> {
        self.settle();
        self.disk.crash();
        self.disk.load().0.log_index
    }
}
