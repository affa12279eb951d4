//! TRANSFER_LEADER: the leader hands over to a follower (zab-net
//! [`Node::transfer_leadership`](zab_net::Node::transfer_leadership)).
//!
//! On the serving leader the node is asked directly; any other node forwards the request once
//! to the leader's client address (the forwarded bit, as for writes: `peer` INV-2) and passes
//! the answer back unchanged.
//!
//! INV-1: every refusal has its own status: NOT_LEADER (no leader, or a forwarded request
//! reached a non-leader), NOT_FOUND (no such member), INVALID_ARGUMENT (an observer or joining
//! member, or the leader itself), CONFLICT (a transfer or a membership change in progress),
//! TRANSFER_FAILED (the target could not take over; the message names who leads now),
//! TIMEOUT (no answer in time), INTERNAL (the node stopped).
//! INV-2: the wait is bounded by the request's deadline and [`TRANSFER_LIMIT`].

use std::time::Duration;

use zab_net::{ServerId, TransferError, TransferFailure};

use crate::protocol::{ErrorReply, RequestBody, ResponseBody, Status};
use crate::server::session::RequestContext;
use crate::server::write::is_serving_leader;
use crate::server::Shared;

/// The longest a transfer is waited for (syncLimit + initLimit with the default timing, and
/// some margin).
pub const TRANSFER_LIMIT: Duration = Duration::from_secs(60);

/// The reply for a failed transfer (INV-1).
pub fn transfer_error(e: &TransferFailure) -> ErrorReply {
    let status = match e {
        TransferFailure::Refused(r) => match r {
            TransferError::NotLeader { .. } => Status::NotLeader,
            TransferError::UnknownTarget(_) => Status::NotFound,
            TransferError::AlreadyLeader(_) | TransferError::NotAVoter(_) => {
                Status::InvalidArgument
            }
            TransferError::InProgress | TransferError::ChangeInFlight(_) => Status::Conflict,
            TransferError::TargetNotConnected(_)
            | TransferError::NoCandidate
            | TransferError::Timeout { .. }
            | TransferError::LeadershipLost { .. }
            | TransferError::NotElected { .. } => Status::TransferFailed,
        },
        TransferFailure::Timeout(_) => Status::Timeout,
        TransferFailure::Shutdown | TransferFailure::Fatal(_) => Status::Internal,
    };
    ErrorReply::new(status, format!("leader transfer: {e}"))
}

impl Shared {
    /// TRANSFER_LEADER (`forwarded`: it came from another node).
    pub async fn transfer_leader(
        &self,
        ctx: &RequestContext,
        target: Option<u64>,
        forwarded: bool,
    ) -> Result<ResponseBody, ErrorReply> {
        let Some(st) = self.serving_status().await else {
            return Err(self.no_quorum());
        };
        if is_serving_leader(&st) {
            return self.transfer_here(ctx, target).await;
        }
        let leader = st.leader.map(|l| l.0);
        if forwarded {
            let why = "this node is not the leader (a forwarded request is not forwarded again)";
            return Err(self.not_leader(leader, why));
        }
        let Some(addr) = leader.and_then(|l| self.member_client_addr(l)) else {
            let why = "the leader's client address is unknown";
            return Err(self.not_leader(leader, why));
        };
        let body = RequestBody::TransferLeader { target };
        let limit = ctx.limit(TRANSFER_LIMIT);
        match self
            .peers
            .call(&addr, ctx.forward_meta(), body, limit)
            .await
        {
            Ok(answer) => answer,
            Err(e) => Err(ErrorReply::new(
                Status::Timeout,
                format!(
                    "forwarding the transfer to the leader (server {}) failed: {e}; check which \
                     server leads now",
                    leader.unwrap_or_default()
                ),
            )),
        }
    }

    async fn transfer_here(
        &self,
        ctx: &RequestContext,
        target: Option<u64>,
    ) -> Result<ResponseBody, ErrorReply> {
        let limit = ctx.limit(TRANSFER_LIMIT);
        let asked = self.node.transfer_leadership(target.map(ServerId));
        let outcome = tokio::time::timeout(limit, asked)
            .await
            .unwrap_or(Err(TransferFailure::Timeout(limit)));
        match outcome {
            Ok(r) => {
                tracing::info!(
                    from = r.from.0,
                    to = r.to.0,
                    epoch = r.epoch.0,
                    ms = r.elapsed.as_millis() as u64,
                    "leadership transferred"
                );
                Ok(ResponseBody::Transferred {
                    from: r.from.0,
                    to: r.to.0,
                    epoch: r.epoch.0,
                    elapsed_ms: u64::try_from(r.elapsed.as_millis()).unwrap_or(u64::MAX),
                })
            }
            Err(e) => {
                tracing::warn!(error = %e, "leader transfer failed");
                Err(transfer_error(&e))
            }
        }
    }
}
