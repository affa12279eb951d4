//! `/health` and `/ready`: what a supervisor, a load balancer or Kubernetes asks a node.
//!
//! INV-1: health is false only once the node stopped on a fatal error (the process is
//! exiting): losing the quorum or the leader keeps a node healthy (server INV-2).
//! INV-2: ready means both: reads are served (the staleness guard lets them through: the
//! serving leader, or a learner whose catalog lags less than `meta_delay_toleration_second`)
//! and writes are possible (this node is the serving leader, or a serving learner that knows
//! its leader). The answer names each side and why it is not.
//! INV-3: both are pure functions of a [`ProbeInput`] taken at once from the node.

use serde_json::{json, Value};

/// What the probes look at, taken from the node at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInput {
    /// This node's server id.
    pub sid: u64,
    /// ZooKeeper's mode name (`leader`, `follower`, `observer`, `looking`).
    pub mode: &'static str,
    /// The fatal error the node stopped on.
    pub fatal: Option<String>,
    /// This node is the established, serving leader.
    pub serving_leader: bool,
    /// This node serves under a known leader (any role).
    pub serving_with_leader: bool,
    /// The leader it knows.
    pub leader: Option<u64>,
    /// The staleness guard's refusal of reads, if it refuses them.
    pub reads_refused: Option<String>,
    /// The staleness, ms, when known (`None` on the serving leader).
    pub staleness_ms: Option<u64>,
    /// `meta_delay_toleration_second`, in ms.
    pub tolerance_ms: u64,
}

/// An HTTP status and a JSON body.
pub type ProbeAnswer = (u16, Value);

/// `/health` (INV-1).
pub fn health(p: &ProbeInput) -> ProbeAnswer {
    match &p.fatal {
        None => (200, json!({"status": "ok", "sid": p.sid, "mode": p.mode})),
        Some(reason) => (
            503,
            json!({
                "status": "fatal",
                "sid": p.sid,
                "reason": format!("the node stopped on a fatal error and the process is exiting: {reason}"),
            }),
        ),
    }
}

/// `/ready` (INV-2).
pub fn ready(p: &ProbeInput) -> ProbeAnswer {
    if let Some(reason) = &p.fatal {
        let why = format!("the node stopped on a fatal error: {reason}");
        let side = json!({"ok": false, "reason": why});
        return (
            503,
            json!({"status": "not ready", "sid": p.sid, "mode": p.mode, "reads": side, "writes": side}),
        );
    }
    let reads = match &p.reads_refused {
        None => json!({
            "ok": true,
            "staleness_ms": p.staleness_ms,
            "tolerance_ms": p.tolerance_ms,
        }),
        Some(reason) => json!({
            "ok": false,
            "reason": reason,
            "staleness_ms": p.staleness_ms,
            "tolerance_ms": p.tolerance_ms,
        }),
    };
    let writes_ok = p.serving_leader || p.serving_with_leader;
    let writes = if writes_ok {
        json!({"ok": true, "leader": p.leader})
    } else {
        let reason = match p.leader {
            None => "no leader: the node is electing or has no quorum, so writes fail with \
                     QUORUM_UNAVAILABLE"
                .to_owned(),
            Some(l) => format!("the node is not (yet) in sync with leader {l}"),
        };
        json!({"ok": false, "reason": reason, "leader": p.leader})
    };
    let ok = p.reads_refused.is_none() && writes_ok;
    (
        if ok { 200 } else { 503 },
        json!({
            "status": if ok { "ready" } else { "not ready" },
            "sid": p.sid,
            "mode": p.mode,
            "reads": reads,
            "writes": writes,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follower() -> ProbeInput {
        ProbeInput {
            sid: 2,
            mode: "follower",
            fatal: None,
            serving_leader: false,
            serving_with_leader: true,
            leader: Some(1),
            reads_refused: None,
            staleness_ms: Some(120),
            tolerance_ms: 300_000,
        }
    }

    #[test]
    fn a_synced_follower_is_healthy_and_ready() {
        let p = follower();
        assert_eq!(health(&p).0, 200);
        let (code, body) = ready(&p);
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["writes"]["leader"], 1);
        assert_eq!(body["reads"]["staleness_ms"], 120);
    }

    #[test]
    fn without_a_leader_it_is_healthy_but_not_ready_and_says_writes() {
        let mut p = follower();
        (p.mode, p.serving_with_leader, p.leader) = ("looking", false, None);
        assert_eq!(health(&p).0, 200);
        let (code, body) = ready(&p);
        assert_eq!(code, 503);
        assert_eq!(body["reads"]["ok"], true);
        assert_eq!(body["writes"]["ok"], false);
        assert!(body["writes"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no leader")));
    }

    #[test]
    fn stale_reads_make_it_not_ready_with_the_guards_reason() {
        let mut p = follower();
        p.reads_refused = Some("this node's catalog is 9 ms behind".into());
        let (code, body) = ready(&p);
        assert_eq!(code, 503);
        assert_eq!(
            body["reads"]["reason"],
            "this node's catalog is 9 ms behind"
        );
        assert_eq!(body["writes"]["ok"], true);
    }

    #[test]
    fn a_fatal_stop_fails_both_probes() {
        let mut p = follower();
        p.fatal = Some("txn log failed".into());
        let (code, body) = health(&p);
        assert_eq!(code, 503);
        assert!(body["reason"]
            .as_str()
            .is_some_and(|r| r.contains("txn log failed")));
        assert_eq!(ready(&p).0, 503);
    }
}
