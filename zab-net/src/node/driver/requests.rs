//! The handle's requests: each becomes a core input (fed by the next `drain`) or takes effect
//! at once. Which requests are taken at all is `admission`'s (driver INV-5).

use tracing::debug;
use zab_core::Input;

use super::super::api::SubmitError;
use super::super::pending::Reply;
use super::super::Request;
use super::Driver;

impl Driver {
    /// Turns a client request into an input (fed by the next `drain`); the other requests
    /// take effect at once.
    pub(super) async fn on_request(&mut self, req: Request) {
        match req {
            Request::Write { payload, reply } => self.queue_write(payload, reply),
            Request::Sync { reply } => {
                let request_id = self.pending.register(reply);
                self.inputs.push_back(Input::ClientSync { request_id });
            }
            #[cfg(feature = "test-support")]
            Request::Pause { duration } => {
                tracing::warn!(?duration, "driver paused (fault injection)");
                tokio::time::sleep(duration).await;
            }
            Request::ChangeMembership { change, reply } => {
                let request_id = self.pending.register_change(reply);
                self.inputs
                    .push_back(Input::ChangeMembership { request_id, change });
            }
            Request::Transfer { target, reply } => {
                if self.transfer.register(reply) {
                    self.inputs.push_back(Input::TransferLeadership { target });
                }
            }
            Request::SetPeerAddrs { sid, addrs } => {
                self.peer_book.set_override(sid, addrs);
                if self.transport.set_peer_addrs(sid, addrs).is_err() {
                    // Not a member in force yet: used once a configuration lists it.
                    debug!(
                        peer = sid.0,
                        "address kept for when the peer becomes a member"
                    );
                }
            }
        }
    }

    fn queue_write(&mut self, payload: bytes::Bytes, reply: Reply) {
        let max = zab_core::codec::MAX_DATA_LEN;
        if payload.len() > max {
            let len = payload.len();
            let _ = reply.send(Err(SubmitError::TooLarge { len, max }));
            return;
        }
        let request_id = self.pending.register(reply);
        self.inputs.push_back(Input::ClientWrite {
            request_id,
            payload,
        });
    }
}
