//! One `server.N=host:quorumPort:electionPort[:participant|:observer][;[clientHost:]clientPort]`
//! value. The client address after `;` is ZooKeeper 3.5's form; the node itself does not use
//! it, but an application (fe-meta) uses it to find each member's client port.
//!
//! The same text is a member's address in the replicated configuration
//! (`zab_core::Member::address`): zoo.cfg's `server.N` lines give the bootstrap members' values,
//! a membership change carries the new member's value, and each node parses it back with
//! [`ServerAddr::parse_value`] to reach that member.
//!
//! INV-1: a parsed [`ServerAddr`] has a non-empty host (IPv6 literals in brackets, as ZooKeeper
//! writes them) and two different ports.
//! INV-2: [`ServerAddr::to_value`] is canonical: it parses back to the same value, and two
//! spellings of one address (spaces, leading zeros, an explicit `:participant`) print alike.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

use thiserror::Error;
use zab_core::LearnerType;

/// A `server.N` value that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("bad server address `{value}`: {reason}")]
pub struct ServerAddrError {
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Where a member listens, and whether it votes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAddr {
    /// Host name or IP literal (without brackets).
    pub host: String,
    /// The port learners connect to the leader on (ZooKeeper's 2888).
    pub quorum_port: u16,
    /// The port of leader election (ZooKeeper's 3888).
    pub election_port: u16,
    /// Participant (votes) or observer.
    pub learner_type: LearnerType,
    /// The client address after `;`, if given.
    pub client: Option<ClientAddr>,
}

/// The `;[clientHost:]clientPort` part of a `server.N` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAddr {
    /// The client host, if given (without brackets); otherwise the server's host applies.
    pub host: Option<String>,
    /// The client port.
    pub port: u16,
}

impl ClientAddr {
    fn parse(value: &str) -> Result<ClientAddr, String> {
        let value = value.trim();
        let (host, port) = if let Some(v6) = value.strip_prefix('[') {
            let (host, rest) = v6
                .split_once(']')
                .ok_or_else(|| "unclosed `[` in the client host".to_string())?;
            let port = rest
                .trim_start()
                .strip_prefix(':')
                .ok_or_else(|| "expected `:` after `]` in the client address".to_string())?;
            (Some(host), port)
        } else {
            match value.rsplit_once(':') {
                Some((h, p)) => (Some(h), p),
                None => (None, value),
            }
        };
        if let Some(h) = host {
            if h.trim().is_empty() || h.contains(':') && !value.starts_with('[') {
                return Err(format!("bad client host in `{value}`"));
            }
        }
        let port = port
            .trim()
            .parse::<u16>()
            .map_err(|_| format!("bad client port `{port}` (expected `;[host:]port`)"))?;
        Ok(ClientAddr {
            host: host.map(|h| h.trim().to_string()),
            port,
        })
    }
}

impl fmt::Display for ClientAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Some(h) if h.contains(':') => write!(f, "[{h}]:{}", self.port),
            Some(h) => write!(f, "{h}:{}", self.port),
            None => write!(f, "{}", self.port),
        }
    }
}

impl ServerAddr {
    /// Parses the value of a `server.N` line (or a member's address text); the error says
    /// what is wrong.
    pub fn parse_value(value: &str) -> Result<ServerAddr, ServerAddrError> {
        parse(value).map_err(|reason| ServerAddrError {
            value: value.to_string(),
            reason,
        })
    }

    /// The canonical `server.N` value (INV-2): what a member's address text holds.
    pub fn to_value(&self) -> String {
        self.to_string()
    }
    /// The client endpoint `host:port` (the server's host when the client host is not given),
    /// if a client address was given.
    pub fn client_endpoint(&self) -> Option<String> {
        let c = self.client.as_ref()?;
        let host = c.host.clone().unwrap_or_else(|| self.host.clone());
        Some(if host.contains(':') {
            format!("[{host}]:{}", c.port)
        } else {
            format!("{host}:{}", c.port)
        })
    }

    /// `host:quorumPort`, brackets around IPv6 literals.
    pub fn quorum_endpoint(&self) -> String {
        format!("{}:{}", self.bracketed_host(), self.quorum_port)
    }

    /// `host:electionPort`, brackets around IPv6 literals.
    pub fn election_endpoint(&self) -> String {
        format!("{}:{}", self.bracketed_host(), self.election_port)
    }

    /// Resolves the quorum address (a DNS lookup for host names; this blocks).
    pub fn quorum_socket_addr(&self) -> std::io::Result<SocketAddr> {
        resolve(&self.quorum_endpoint())
    }

    /// Resolves the election address (a DNS lookup for host names; this blocks).
    pub fn election_socket_addr(&self) -> std::io::Result<SocketAddr> {
        resolve(&self.election_endpoint())
    }

    fn bracketed_host(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.quorum_endpoint(), self.election_port)?;
        if self.learner_type == LearnerType::Observer {
            f.write_str(":observer")?;
        }
        if let Some(c) = &self.client {
            write!(f, ";{c}")?;
        }
        Ok(())
    }
}

/// The parser behind [`ServerAddr::parse_value`]; the error is the reason only.
fn parse(value: &str) -> Result<ServerAddr, String> {
    let value = value.trim();
    let (value, client) = match value.split_once(';') {
        Some((server, client)) => (server, Some(ClientAddr::parse(client)?)),
        None => (value, None),
    };
    let (host, rest) = if let Some(v6) = value.strip_prefix('[') {
        let (host, rest) = v6
            .split_once(']')
            .ok_or_else(|| "unclosed `[` in IPv6 host".to_string())?;
        let rest = rest
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| "expected `:` after `]`".to_string())?;
        (host, rest)
    } else {
        value.split_once(':').ok_or_else(|| FORM.to_string())?
    };
    if host.trim().is_empty() {
        return Err("empty host".to_string());
    }
    let parts: Vec<&str> = rest.split(':').collect();
    let (quorum, election, kind) = match parts.as_slice() {
        [q, e] => (*q, *e, None),
        [q, e, k] => (*q, *e, Some(*k)),
        _ => return Err(FORM.to_string()),
    };
    let port = |p: &str, what: &str| {
        p.trim()
            .parse::<u16>()
            .map_err(|_| format!("bad {what} port `{p}`"))
    };
    let learner_type = match kind.map(str::trim) {
        None | Some("participant") => LearnerType::Participant,
        Some("observer") => LearnerType::Observer,
        Some(other) => {
            return Err(format!(
                "unknown server type `{other}` (expected `participant` or `observer`)"
            ))
        }
    };
    let (quorum_port, election_port) = (port(quorum, "quorum")?, port(election, "election")?);
    if quorum_port == election_port {
        return Err("quorum and election ports must differ".to_string());
    }
    Ok(ServerAddr {
        host: host.trim().to_string(),
        quorum_port,
        election_port,
        learner_type,
        client,
    })
}

const FORM: &str =
    "expected `host:quorumPort:electionPort[:participant|:observer][;[clientHost:]clientPort]`";

fn resolve(endpoint: &str) -> std::io::Result<SocketAddr> {
    endpoint.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{endpoint} resolves to no address"),
        )
    })
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
