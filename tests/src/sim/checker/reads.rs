//! Linearizability of sync-then-read (DESIGN §3.5; ZOOKEEPER-1675, PITFALLS D3).
//!
//! INV-R1: a `SyncDone Ok(z)` on node `n` for a sync issued when the highest acknowledged write
//! was `w` has `z >= w`, and `n` has applied everything up to `z` — so a local read then sees
//! every write acknowledged before the sync began.
//! INV-R2: each sync is answered at most once, by the node it was issued on.

use std::collections::BTreeMap;

use zab_core::{RequestError, RequestId, ServerId, Zxid};

use super::{NodeView, Verdict};

/// State of the read checker.
#[derive(Debug, Default)]
pub struct Reads {
    pending: BTreeMap<(ServerId, RequestId), Zxid>,
    /// Successful syncs so far (statistics).
    pub served: u64,
}

impl Reads {
    /// A client of `id` issues a sync while `max_acked` is the highest acknowledged write.
    pub fn on_client_sync(&mut self, id: ServerId, req: RequestId, max_acked: Zxid) -> Verdict {
        if self.pending.insert((id, req), max_acked).is_some() {
            return Err(format!("harness: sync {req:?} reused on {id}"));
        }
        Ok(())
    }

    /// `node` answers a sync.
    pub fn on_sync_done(
        &mut self,
        node: NodeView<'_>,
        req: RequestId,
        outcome: &Result<Zxid, RequestError>,
    ) -> Verdict {
        let id = node.id;
        let Some(min) = self.pending.remove(&(id, req)) else {
            return Err(format!(
                "node {id} answers sync {req:?} that is not pending"
            ));
        };
        let Ok(z) = outcome else { return Ok(()) };
        if *z < min {
            return Err(format!(
                "Linearizability: node {id} answers sync {req:?} with read point {z} but {min} \
                 was acknowledged before the sync was issued"
            ));
        }
        if node.last_applied() < *z {
            return Err(format!(
                "Linearizability: node {id} answers sync {req:?} at {z} having applied only up \
                 to {}",
                node.last_applied()
            ));
        }
        self.served += 1;
        Ok(())
    }

    /// `id` crashed: its clients' syncs are gone.
    pub fn on_crash(&mut self, id: ServerId) {
        self.pending.retain(|(n, _), _| *n != id);
    }
}
