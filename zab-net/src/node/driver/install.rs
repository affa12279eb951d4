//! The learner's end of a SNAP: make the received snapshot durable, restore the state machine
//! from it (streamed from the file, verified), reset the log to it, then tell the core.
//!
//! INV-1 (io.rs): `SnapshotInstalled { zxid, membership }` is fed only after the snapshot file
//! is durable, the state machine holds it, and the log reset is durable; the actions after
//! `EndSnapshot` in the batch (appends of the txns that follow the snapshot) reach the log
//! thread after the reset.
//! INV-2: the configuration fed with it is the one the installed file carries (read back from
//! the file, as a restart would); a file without one is fatal.

use tracing::info;
use zab_core::{Input, Membership, Zxid};
use zab_store::{SnapDir, SnapshotWriter};

use super::Driver;
use crate::node::api::StateMachine;
use crate::node::fatal::{Fatal, InstallError};

impl Driver {
    /// Handles `Action::EndSnapshot` (INV-1).
    pub(super) async fn install_snapshot(&mut self, zxid: Zxid) -> Result<(), Fatal> {
        let w = self.snapper.end_receive(zxid)?;
        let mut sm = self.sm.take().ok_or(Fatal::StateMachineLost)?;
        let snaps = self.snapper.snaps().clone();
        let (sm, restored) = tokio::task::spawn_blocking(move || {
            let r = restore_from(w, &snaps, zxid, sm.as_mut());
            (sm, r)
        })
        .await
        .map_err(|source| Fatal::RestoreTask { zxid, source })?;
        self.sm = Some(sm);
        let (bytes, membership) = restored?;
        let membership = membership.ok_or(Fatal::InstalledWithoutMembership(zxid))?;
        let inputs = &mut self.inputs;
        self.log.reset(zxid, |i| inputs.push_back(i)).await?;
        self.meter.log_cut(None);
        self.snapper.installed();
        info!(%zxid, configuration = %membership.version, "SNAP installed");
        self.snapper.set_committed(membership.clone());
        self.inputs
            .push_back(Input::SnapshotInstalled { zxid, membership });
        self.inputs.push_back(Input::SnapshotSaved { zxid, bytes });
        Ok(())
    }
}

/// Makes the SNAP durable, restores `sm` from the file and verifies it; returns its size and
/// the configuration it carries.
fn restore_from(
    w: SnapshotWriter,
    snaps: &SnapDir,
    zxid: Zxid,
    sm: &mut dyn StateMachine,
) -> Result<(u64, Option<Membership>), InstallError> {
    let info = w
        .finish()
        .map_err(|source| InstallError::Durable { zxid, source })?;
    let path = || info.path.clone();
    let mut r = snaps
        .open_reader(zxid)
        .map_err(|source| InstallError::Reopen {
            path: path(),
            source,
        })?;
    let membership = r.info().membership.clone();
    sm.restore(zxid, &mut r)
        .map_err(|source| InstallError::Restore { zxid, source })?;
    r.finish().map_err(|source| InstallError::Verify {
        path: path(),
        source,
    })?;
    Ok((crate::node::snap::file_bytes(&info.path), membership))
}
