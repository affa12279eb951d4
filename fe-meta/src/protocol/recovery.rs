//! RECOVERY_INFO's answer (`docs/PROTOCOL.md` §5.5): what one node holds, for choosing the
//! survivor that restarts a cluster that lost its majority (`fe-meta recover`).
//!
//! ```text
//! sid u64 | mode u8 | initialized u8 | accepted_epoch u32 | current_epoch u32
//!   | last_logged u64 | last_committed u64 | config (GET_CONFIG's body: the committed one)
//! ```
//!
//! INV-1: decoding never panics; encode and decode are exact inverses.
//! INV-2: every field is the answering node's own durable or in-memory state: nothing in it was
//! asked of another node, so a node without a quorum answers it.

use bytes::BufMut;
use zab_net::Zxid;

use super::config::{decode_config, encode_config, ClusterConfig};
use super::fourlw::Mode;
use super::rows::decode_mode;
use crate::wire::{Put, Reader, WireError};

/// What a node holds (INV-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryInfo {
    /// Its server id.
    pub sid: u64,
    /// Its role now (LOOKING when it has no quorum).
    pub mode: Mode,
    /// False while its data dir needs a first sync from a leader (`needsInitialSync`): its
    /// data is not a member's.
    pub initialized: bool,
    /// Its durable acceptedEpoch.
    pub accepted_epoch: u32,
    /// Its durable currentEpoch: with `last_logged`, what elections order votes by.
    pub current_epoch: u32,
    /// The last txn in its log, committed or not.
    pub last_logged: Zxid,
    /// The last txn it knows committed.
    pub last_committed: Zxid,
    /// Its committed configuration, with the cluster id (GET_CONFIG's answer).
    pub config: ClusterConfig,
}

impl RecoveryInfo {
    /// The order in which survivors are compared: the election's (currentEpoch, last zxid).
    pub fn rank(&self) -> (u32, Zxid) {
        (self.current_epoch, self.last_logged)
    }
}

pub(super) fn encode_recovery_info(o: &mut Vec<u8>, i: &RecoveryInfo) {
    o.put_u64(i.sid);
    o.put_u8(i.mode.tag());
    o.put_bool(i.initialized);
    o.put_u32(i.accepted_epoch);
    o.put_u32(i.current_epoch);
    o.put_u64(i.last_logged.0);
    o.put_u64(i.last_committed.0);
    encode_config(o, &i.config);
}

pub(super) fn decode_recovery_info(r: &mut Reader<'_>) -> Result<RecoveryInfo, WireError> {
    let sid = r.u64("sid")?;
    let mode = decode_mode(r)?;
    Ok(RecoveryInfo {
        sid,
        mode,
        initialized: r.bool("initialized")?,
        accepted_epoch: r.u32("accepted epoch")?,
        current_epoch: r.u32("current epoch")?,
        last_logged: Zxid(r.u64("last logged zxid")?),
        last_committed: Zxid(r.u64("last committed zxid")?),
        config: decode_config(r)?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::protocol::{ConfigMember, MemberState};

    fn sample() -> RecoveryInfo {
        RecoveryInfo {
            sid: 2,
            mode: Mode::Looking,
            initialized: true,
            accepted_epoch: 4,
            current_epoch: 3,
            last_logged: Zxid(0x3_0000_0007),
            last_committed: Zxid(0x3_0000_0005),
            config: ClusterConfig {
                cluster_id: 9,
                version: Zxid(0x1_0000_0002),
                in_force_version: Zxid(0x1_0000_0002),
                members: vec![ConfigMember {
                    sid: 2,
                    state: MemberState::Participant,
                    address: "h:1:2;3".into(),
                }],
                tick_time_ms: 100,
                init_limit: 10,
                sync_limit: 5,
            },
        }
    }

    #[test]
    fn round_trips_and_a_cut_answer_is_an_error() {
        let info = sample();
        let mut bytes = Vec::new();
        encode_recovery_info(&mut bytes, &info);
        let mut r = Reader::new(&bytes);
        assert_eq!(decode_recovery_info(&mut r).unwrap(), info);
        r.finish().unwrap();
        for cut in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..cut]);
            assert!(decode_recovery_info(&mut r).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[8] = 9;
        assert!(decode_recovery_info(&mut Reader::new(&bad)).is_err());
    }
}
