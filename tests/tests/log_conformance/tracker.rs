//! The peer side of the log durability contract (`zab_core::io` L1–L3): from the actions it
//! issued and the inputs it was fed, the durable point a peer that follows the contract may
//! count. A report the contract does not allow is an error; a late report naming a zxid a
//! truncate or reset removed is ignored (L3), which is why the removed zxids are kept.

use std::collections::BTreeSet;

use zab_core::{Input, Zxid};

/// The peer side of the contract: what a peer that follows L1–L3 derives.
#[derive(Debug, Default)]
pub struct Tracker {
    /// The log as the peer sees it: every appended zxid not removed since.
    pub log: Vec<Zxid>,
    /// The zxid the log follows.
    base: Zxid,
    /// The durable point the peer counts.
    pub persisted: Zxid,
    /// Zxids a truncate or reset removed (a late report may name one: L3).
    removed: BTreeSet<Zxid>,
}

impl Tracker {
    /// The last record of the log, or the zxid it follows.
    pub fn last(&self) -> Zxid {
        self.log.last().copied().unwrap_or(self.base)
    }

    /// A record appended (the script only appends ascending zxids).
    pub fn append(&mut self, z: Zxid) {
        assert!(z > self.last(), "script appends {z} after {}", self.last());
        self.log.push(z);
    }

    /// L2: a completed truncate leaves exactly the kept records, all durable.
    pub fn truncate(&mut self, to: Zxid) {
        self.removed.extend(self.log.iter().filter(|z| **z > to));
        self.log.retain(|z| *z <= to);
        self.base = self.base.min(to);
        self.persisted = self.last();
    }

    /// A SNAP install reset the log: it holds nothing and follows `after`, durably.
    pub fn reset(&mut self, after: Zxid) {
        self.removed.extend(self.log.drain(..));
        self.base = after;
        self.persisted = after;
    }

    /// Feeds one input; `Err` when the contract does not allow it.
    pub fn feed(&mut self, input: &Input) -> Result<(), String> {
        match input {
            Input::LogPersisted { upto } => {
                if self.log.contains(upto) {
                    // L1
                    self.persisted = self.persisted.max(*upto);
                    Ok(())
                } else if self.removed.contains(upto) {
                    // L3: issued before a truncate/reset that removed it; ignored
                    Ok(())
                } else {
                    Err(format!(
                        "LogPersisted {{ upto: {upto} }} names a zxid never appended (log {:?})",
                        self.log
                    ))
                }
            }
            other => Err(format!("unexpected input {other:?}")),
        }
    }

    /// L1/L2 against the durable records of the log at the moment of a report: everything the
    /// peer may count durable is durable.
    pub fn check_durable(&self, durable: &[Zxid]) -> Result<(), String> {
        for z in self.log.iter().filter(|z| **z <= self.persisted) {
            if !durable.contains(z) {
                return Err(format!(
                    "the peer counts {z} durable (persisted {}) but the log's durable records \
                     are {durable:?}",
                    self.persisted
                ));
            }
        }
        Ok(())
    }
}
