//! RECOVERY_INFO: what this node holds, for `fe-meta recover` to choose the survivor that
//! restarts a cluster which lost its majority.
//!
//! INV-1: answered from this node's own status only (its durable epochs, its log, its
//! committed configuration): no forwarding, no quorum round, no catalog read; a node that is
//! LOOKING without a quorum, or stopped on a fatal error, answers it like any other.

use super::handle::mode_of;
use super::Shared;
use crate::protocol::RecoveryInfo;

impl Shared {
    /// This node's RECOVERY_INFO answer (INV-1).
    pub fn recovery_info(&self) -> RecoveryInfo {
        let st = self.node.status();
        RecoveryInfo {
            sid: self.cfg.sid,
            mode: mode_of(&st),
            initialized: st.initialized,
            accepted_epoch: st.accepted_epoch.0,
            current_epoch: st.current_epoch.0,
            last_logged: st.last_logged,
            last_committed: st.last_committed,
            config: self.cluster_config(),
        }
    }
}
