//! Moving to the next endpoint: which failed exchanges may be sent again to another node, in
//! which order the endpoints are tried, and the error when none of them answered.
//!
//! INV-1 (order): after the endpoint at index `i` failed, a call tries `i+1, i+2, …` (wrapping)
//! and skips every endpoint it already tried, so each endpoint is tried at most once per call
//! and the call ends after at most as many attempts as there are endpoints. A connection lost
//! before the call started is not an attempt of the call: it dials `i+1, …, i` (`i` last).
//! INV-2 (at most once): a request is sent again elsewhere only if nothing of it was sent, or
//! sending it twice cannot apply it twice: a read (reads change nothing), or a write that
//! carries a client session (a retry with the same client id and sequence number applies at
//! most once, `docs/PROTOCOL.md` §3.2). A write without a session, or a membership change
//! (which carries none), whose connection was lost after it was sent is not resent: its
//! outcome is unknown and the caller gets [`ClientError::Closed`]. A leader transfer is never
//! resent either: a second one would move the leadership again.
//! INV-3: only a lost connection moves a call on ([`ClientError::Closed`] from the exchange,
//! [`ClientError::Connect`] from a dial); a timeout, a malformed answer or a server error is
//! the call's answer.

use crate::protocol::{RequestBody, RequestMeta};

use super::link::Failed;
use super::ClientError;

/// Whether this request may be sent again on another connection after its frame may have
/// reached a node (INV-2).
pub(super) fn resend_is_safe(body: &RequestBody, meta: &RequestMeta) -> bool {
    let kind = body.kind();
    if kind.is_membership_change() || kind == crate::protocol::RequestKind::TRANSFER_LEADER {
        return false;
    }
    !kind.is_write() || meta.session.is_some()
}

/// Whether the call moves on to the next endpoint after `failed` (INV-2, INV-3).
pub(super) fn moves_on(failed: &Failed, resend_is_safe: bool) -> bool {
    matches!(failed.error, ClientError::Closed { .. }) && (!failed.sent || resend_is_safe)
}

/// The endpoints a call tries after the one at `failed` failed, in order (INV-1): starting
/// after it and wrapping, without those already `tried` — `failed` itself last, when this call
/// has not tried it (its connection was lost before the call).
pub(super) fn next_candidates(failed: usize, tried: &[bool]) -> Vec<usize> {
    let n = tried.len();
    (1..=n)
        .map(|step| (failed + step) % n)
        .filter(|&i| !tried[i])
        .collect()
}

/// The error of a call whose every attempt failed: the one attempt's error as it is, or
/// [`ClientError::AllEndpointsFailed`] naming each endpoint tried with its failure.
pub(super) fn all_failed(mut attempts: Vec<ClientError>) -> ClientError {
    match attempts.len() {
        0 => ClientError::Connect {
            addr: String::new(),
            reason: "no endpoint given".to_owned(),
        },
        1 => attempts.remove(0),
        _ => ClientError::AllEndpointsFailed { attempts },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::state::catalog::SessionTag;

    #[test]
    fn candidates_start_after_the_failed_one_and_skip_the_tried() {
        assert_eq!(next_candidates(0, &[true, false, false]), vec![1, 2]);
        assert_eq!(next_candidates(1, &[false, true, false]), vec![2, 0]);
        assert_eq!(next_candidates(2, &[true, false, true]), vec![1]);
        assert_eq!(next_candidates(0, &[true]), Vec::<usize>::new());
        assert_eq!(next_candidates(1, &[false, false]), vec![0, 1]);
    }

    #[test]
    fn only_reads_and_session_writes_are_resent_after_a_send() {
        let write = RequestBody::Write(Command::CreateDb { name: "d".into() });
        let bare = RequestMeta::default();
        let tagged = RequestMeta {
            budget_ms: None,
            session: Some(SessionTag {
                client_id: 1,
                seq: 1,
                floor: 1,
            }),
        };
        assert!(resend_is_safe(&RequestBody::Status, &bare));
        assert!(!resend_is_safe(&write, &bare));
        assert!(resend_is_safe(&write, &tagged));
        let transfer = RequestBody::TransferLeader { target: Some(2) };
        assert!(
            !resend_is_safe(&transfer, &bare),
            "a second transfer moves it again"
        );
        let lost = |sent| Failed {
            error: ClientError::Closed {
                addr: "a:1".into(),
                reason: "reset".into(),
            },
            sent,
        };
        assert!(moves_on(&lost(false), false), "nothing sent: always safe");
        assert!(!moves_on(&lost(true), false));
        assert!(moves_on(&lost(true), true));
        let timeout = Failed {
            error: ClientError::Timeout {
                kind: write.kind(),
                after: std::time::Duration::from_secs(1),
            },
            sent: true,
        };
        assert!(!moves_on(&timeout, true), "a timeout is the call's answer");
    }

    #[test]
    fn the_all_failed_error_names_every_endpoint() {
        let e = all_failed(vec![
            ClientError::Connect {
                addr: "a:1".into(),
                reason: "refused".into(),
            },
            ClientError::Closed {
                addr: "b:2".into(),
                reason: "reset".into(),
            },
        ]);
        let text = e.to_string();
        assert!(text.contains("a:1") && text.contains("b:2"), "{text}");
        assert!(e.may_be_applied(), "b's attempt was sent: {text}");
    }
}
