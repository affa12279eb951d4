//! The learner's end of a SNAP: make the received snapshot durable, restore the state machine
//! from it (streamed from the file, verified), reset the log to it, then tell the core.
//!
//! INV-1 (io.rs): `SnapshotInstalled { zxid }` is fed only after the snapshot file is durable,
//! the state machine holds it, and the log reset is durable; the actions after `EndSnapshot`
//! in the batch (appends of the txns that follow the snapshot) reach the log thread after the
//! reset.

use tracing::info;
use zab_core::{Input, Zxid};
use zab_store::{LogEvent, SnapDir, SnapshotWriter};

use super::api::StateMachine;
use super::driver::{Driver, Fatal};

impl Driver {
    /// Handles `Action::EndSnapshot` (INV-1).
    pub(super) async fn install_snapshot(&mut self, zxid: Zxid) -> Result<(), Fatal> {
        let Some((received, w)) = self.snapper.receiving.take() else {
            return Err(Fatal(format!(
                "EndSnapshot {zxid} without a SNAP in progress"
            )));
        };
        if received != zxid {
            return Err(Fatal(format!(
                "EndSnapshot {zxid} but the SNAP in progress is at {received}"
            )));
        }
        let mut sm = self
            .sm
            .take()
            .ok_or_else(|| Fatal("state machine lost during a restore".to_string()))?;
        let snaps = self.snapper.snaps().clone();
        let (sm, restored) = tokio::task::spawn_blocking(move || {
            let r = restore_from(w, &snaps, zxid, sm.as_mut());
            (sm, r)
        })
        .await
        .map_err(|e| Fatal(format!("restoring the SNAP at {zxid}: {e}")))?;
        self.sm = Some(sm);
        let bytes = restored.map_err(Fatal)?;
        self.log
            .reset(zxid)
            .map_err(|e| Fatal(format!("txn log: {e}")))?;
        self.wait_log(|ev| matches!(ev, LogEvent::Reset { .. }))
            .await?;
        self.snapper.installed();
        info!(%zxid, "SNAP installed");
        self.inputs.push_back(Input::SnapshotInstalled { zxid });
        self.inputs.push_back(Input::SnapshotSaved { zxid, bytes });
        Ok(())
    }
}

fn restore_from(
    w: SnapshotWriter,
    snaps: &SnapDir,
    zxid: Zxid,
    sm: &mut dyn StateMachine,
) -> Result<u64, String> {
    let info = w
        .finish()
        .map_err(|e| format!("making the SNAP at {zxid} durable: {e}"))?;
    let mut r = snaps
        .open_reader(zxid)
        .map_err(|e| format!("reopening {}: {e}", info.path.display()))?;
    sm.restore(zxid, &mut r)
        .map_err(|e| format!("state machine failed to restore the SNAP at {zxid}: {e}"))?;
    r.finish()
        .map_err(|e| format!("verifying {}: {e}", info.path.display()))?;
    Ok(super::snap::file_bytes(&info.path))
}
