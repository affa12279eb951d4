//! Choosing the survivor: the local node may restart the cluster alone only if no named
//! survivor holds more, by the order elections use: (currentEpoch, last logged zxid).
//!
//! INV-1: [`judge`] is pure: the same survey gives the same verdict.
//! INV-2: a survivor of another cluster is a refusal that no flag overrides; a survivor that
//! is ahead of the local node, or that did not answer (it may be ahead), is a loss that only
//! `--force-lose-data` accepts, and each loss says which txns may be lost.

use fe_meta::protocol::RecoveryInfo;
use zab_core::Zxid;

/// What one survivor holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    /// Its server id.
    pub sid: u64,
    /// Its cluster id (`None`: unknown, a data dir without VERSION).
    pub cluster_id: Option<u64>,
    /// Its acceptedEpoch.
    pub accepted_epoch: u32,
    /// Its currentEpoch.
    pub current_epoch: u32,
    /// The last zxid it logged (or the newest snapshot's, when later).
    pub last_logged: Zxid,
    /// The last zxid it knows committed (`None`: not known offline).
    pub last_committed: Option<Zxid>,
    /// Its committed configuration's version.
    pub config_version: Zxid,
    /// False while it needs a first sync from a leader: its data does not count.
    pub initialized: bool,
    /// Its state in words (its mode when running).
    pub state: String,
}

impl Held {
    /// The order in which survivors are compared (INV-1).
    pub fn rank(&self) -> (u32, Zxid) {
        (self.current_epoch, self.last_logged)
    }
}

impl From<&RecoveryInfo> for Held {
    fn from(i: &RecoveryInfo) -> Held {
        Held {
            sid: i.sid,
            cluster_id: Some(i.config.cluster_id),
            accepted_epoch: i.accepted_epoch,
            current_epoch: i.current_epoch,
            last_logged: i.last_logged,
            last_committed: Some(i.last_committed),
            config_version: i.config.version,
            initialized: i.initialized,
            state: format!("running ({})", i.mode.name()),
        }
    }
}

/// One named survivor and its answer (`Err`: why it did not answer).
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// The endpoint named in `--survivors`.
    pub endpoint: String,
    /// What it holds.
    pub held: Result<Held, String>,
}

/// The verdict on the local node (INV-2).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Why recovery may not go on, whatever the flags.
    pub refusals: Vec<String>,
    /// What would be lost by going on; `--force-lose-data` accepts them.
    pub losses: Vec<String>,
}

/// How far `other` is ahead of `local`, in words.
fn how_far(local: &Held, other: &Held) -> String {
    let (l, o) = (local.last_logged, other.last_logged);
    if l.epoch() == o.epoch() && o > l {
        format!(
            "{} txns ahead (its last zxid {o} against this node's {l}, both epoch {})",
            o.counter() - l.counter(),
            o.epoch().0
        )
    } else {
        format!(
            "ahead: currentEpoch {} and last zxid {o} (epoch {}) against this node's \
             currentEpoch {} and last zxid {l} (epoch {})",
            other.current_epoch,
            o.epoch().0,
            local.current_epoch,
            l.epoch().0
        )
    }
}

/// Judges the local survivor against the named ones (INV-1, INV-2).
pub(crate) fn judge(local: &Held, rows: &[Row]) -> Verdict {
    let mut v = Verdict::default();
    for row in rows {
        let other = match &row.held {
            Err(why) => {
                v.losses.push(format!(
                    "survivor {} did not answer ({why}): whatever it logged beyond this node's \
                     last zxid {} is lost if it held more (start it: it answers without a \
                     quorum, or leave it out of --survivors if its disk is gone)",
                    row.endpoint, local.last_logged
                ));
                continue;
            }
            Ok(o) if o.sid == local.sid => continue,
            Ok(o) => o,
        };
        if let (Some(a), Some(b)) = (local.cluster_id, other.cluster_id) {
            if a != b {
                v.refusals.push(format!(
                    "survivor {} (server {}) belongs to cluster {b:#x}, this node to cluster \
                     {a:#x}: leave it out of --survivors",
                    row.endpoint, other.sid
                ));
                continue;
            }
        }
        if other.initialized && other.rank() > local.rank() {
            v.losses.push(format!(
                "survivor {} (server {}) is {}; the txns after {} on server {} will be lost. \
                 Run `fe-meta recover` on server {}'s host instead",
                row.endpoint,
                other.sid,
                how_far(local, other),
                local.last_logged,
                other.sid,
                other.sid
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(sid: u64, epoch: u32, last: u64) -> Held {
        Held {
            sid,
            cluster_id: Some(7),
            accepted_epoch: epoch,
            current_epoch: epoch,
            last_logged: Zxid((u64::from(epoch) << 32) | last),
            last_committed: None,
            config_version: Zxid::ZERO,
            initialized: true,
            state: String::new(),
        }
    }

    fn row(h: Held) -> Row {
        Row {
            endpoint: format!("h:{}", h.sid),
            held: Ok(h),
        }
    }

    #[test]
    fn the_newest_goes_on_and_one_behind_is_told_who_is_ahead_and_by_how_much() {
        let (a, b, c) = (held(1, 2, 9), held(2, 2, 5), held(3, 1, 40));
        let rows = [row(a.clone()), row(b.clone()), row(c.clone())];
        assert_eq!(judge(&a, &rows), Verdict::default());
        let v = judge(&b, &rows);
        assert!(v.refusals.is_empty());
        assert_eq!(v.losses.len(), 1, "{v:?}");
        assert!(v.losses[0].contains("server 1") && v.losses[0].contains("4 txns ahead"));
        let v = judge(&c, &rows);
        assert_eq!(v.losses.len(), 2, "{v:?}");
        assert!(v.losses[0].contains("currentEpoch 2"));
    }

    #[test]
    fn silence_is_a_loss_and_another_cluster_a_refusal() {
        let a = held(1, 2, 9);
        let mut foreign = held(2, 5, 1);
        foreign.cluster_id = Some(8);
        let mut fresh = held(3, 9, 9);
        fresh.initialized = false;
        let rows = [
            Row {
                endpoint: "gone:1".into(),
                held: Err("refused".into()),
            },
            row(foreign),
            row(fresh),
        ];
        let v = judge(&a, &rows);
        assert_eq!(v.refusals.len(), 1, "{v:?}");
        assert!(v.refusals[0].contains("cluster 0x8"));
        assert_eq!(v.losses.len(), 1, "{v:?}");
        assert!(v.losses[0].contains("gone:1"));
    }
}
