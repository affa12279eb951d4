//! The helper of a joining node: a member of the cluster asked for its view (GET_CONFIG)
//! until it answers.
//!
//! INV-1: a failed ask is never fatal: it is logged (one WARN line) and retried every
//! [`RETRY_EVERY`]; only the caller bounds the wait (join INV-3).
//! INV-2: one ask takes at most [`ASK_TIMEOUT`] to connect and as long again for the answer.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;
use zab_net::{Member, MemberRole, Membership, ServerId};

use zab_net::config::ConfigError;

use super::{ClusterView, RETRY_EVERY};
use crate::client::{Client, ClientOptions, Credentials};
use crate::protocol::{ClusterConfig, MemberState};
use crate::server::ServerError;

/// How the node asks the helper for the cluster's view.
pub trait Helper {
    /// The helper's address, for messages.
    fn addr(&self) -> &str;
    /// One GET_CONFIG; the error text says why it failed.
    fn ask(&self) -> impl std::future::Future<Output = Result<ClusterView, String>> + Send;
}

/// Asks `helper` until it answers (join INV-3), one WARN line per failed attempt.
pub(super) async fn ask_until_answered(helper: &impl Helper) -> ClusterView {
    loop {
        match helper.ask().await {
            Ok(view) => return view,
            Err(e) => warn!(
                "cannot get the cluster's configuration from the helper {}: {e}; retrying in \
                 {RETRY_EVERY:?}",
                helper.addr()
            ),
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// The helper reached with the fe-meta client (GET_CONFIG).
#[derive(Clone, Debug)]
pub struct ClientHelper {
    addr: String,
    credentials: Option<Arc<Credentials>>,
    /// TLS to the helper's client port (the joining node's `client.secure=true`).
    tls: Option<crate::client::ClientTls>,
}

/// How long one GET_CONFIG to the helper may take (connect and answer each).
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

impl ClientHelper {
    /// The member at `addr` (`host:client_port`), over plain TCP, without credentials.
    pub fn new(addr: &str) -> ClientHelper {
        ClientHelper {
            addr: addr.to_string(),
            credentials: None,
            tls: None,
        }
    }
}

/// The member at `addr` as a [`ClientHelper`], reached with TLS when the joining node's
/// zoo.cfg `text` says `client.secure=true` (its own key store and trust store, read now).
pub fn client_helper(addr: &str, text: &str) -> Result<ClientHelper, ServerError> {
    Ok(ClientHelper {
        addr: addr.to_string(),
        tls: crate::server::conn::tls::joining_tls(text)?,
        credentials: crate::server::auth::node_credentials_in(text)?,
    })
}

impl Helper for ClientHelper {
    fn addr(&self) -> &str {
        &self.addr
    }

    async fn ask(&self) -> Result<ClusterView, String> {
        let opts = ClientOptions {
            connect_timeout: ASK_TIMEOUT,
            request_timeout: ASK_TIMEOUT,
            credentials: self.credentials.clone(),
            tls: self.tls.clone(),
            ..ClientOptions::DEFAULT
        };
        let client = Client::connect_with(&self.addr, opts)
            .await
            .map_err(|e| e.to_string())?;
        let config = client.get_config().await.map_err(|e| e.to_string())?;
        Ok(view_of(config))
    }
}

/// The view in a GET_CONFIG answer.
pub fn view_of(c: ClusterConfig) -> ClusterView {
    let members = c
        .members
        .into_iter()
        .map(|m| {
            let role = match m.state {
                MemberState::Participant => MemberRole::Participant,
                MemberState::Observer => MemberRole::Observer,
                MemberState::Joining => MemberRole::Joining,
            };
            let member = Member {
                role,
                address: m.address,
            };
            (ServerId(m.sid), member)
        })
        .collect();
    ClusterView {
        cluster_id: c.cluster_id,
        membership: Membership {
            version: c.version,
            members,
        },
        tick_ms: c.tick_time_ms,
        init_limit: c.init_limit,
        sync_limit: c.sync_limit,
    }
}

/// A plain start's configuration error, with the way out when the missing key is one a
/// `--helper` start completes (a node that joined with a minimal zoo.cfg).
pub(crate) fn point_to_helper(e: ServerError) -> ServerError {
    let missing = match &e {
        ServerError::Config(ConfigError::Missing { key }) => *key,
        ServerError::Invalid(why) if why.contains("`clusterId`") => "clusterId",
        _ => return e,
    };
    if !matches!(
        missing,
        "tickTime" | "initLimit" | "syncLimit" | "clusterId"
    ) {
        return e;
    }
    ServerError::Invalid(format!(
        "{e}; a node that joined with --helper and a minimal zoo.cfg must start with \
         `--helper HOST:CLIENT_PORT` again (it only completes what zoo.cfg lacks), or zoo.cfg \
         must set clusterId, tickTime, initLimit and syncLimit (`fe-meta show-config` on a \
         member prints them)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_timing_key_points_to_helper_and_other_errors_pass_unchanged() {
        let e = point_to_helper(ServerError::Config(ConfigError::Missing {
            key: "tickTime",
        }));
        let text = e.to_string();
        assert!(text.contains("missing required key `tickTime`"), "{text}");
        assert!(text.contains("--helper HOST:CLIENT_PORT"), "{text}");
        let e = point_to_helper(ServerError::Config(ConfigError::Missing { key: "dataDir" }));
        assert!(!e.to_string().contains("--helper"), "{e}");
    }
}
