//! Peer connections refused (the transport's TLS and hello checks), by reason.

use prometheus::{IntCounter, IntCounterVec, Opts};

use super::topics::Builder;

/// `zab_peer_connections_refused_total{reason}` (see the parent module's table); the label
/// children are resolved at registration.
#[derive(Clone, Debug)]
pub struct PeerMetrics {
    /// `reason="tls"`: an inbound TLS handshake failed (no or untrusted certificate, plaintext).
    pub(crate) tls: IntCounter,
    /// `reason="certificate_name"`: the certificate does not name the server its hello claims.
    pub(crate) name: IntCounter,
    /// `reason="hello"`: the hello was refused or unreadable.
    pub(crate) hello: IntCounter,
    /// `reason="tls_dial"`: a dial's TLS handshake failed.
    pub(crate) tls_dial: IntCounter,
}

impl PeerMetrics {
    pub(super) fn register(b: &Builder<'_>) -> prometheus::Result<PeerMetrics> {
        let v = IntCounterVec::new(
            Opts::new(
                "zab_peer_connections_refused_total",
                "peer connections refused or failed, by reason: tls (inbound TLS handshake), \
                 certificate_name (certificate does not name the claimed server), hello, \
                 tls_dial (outbound TLS handshake)",
            ),
            &["reason"],
        )?;
        b.registry.register(Box::new(v.clone()))?;
        Ok(PeerMetrics {
            tls: v.with_label_values(&["tls"]),
            name: v.with_label_values(&["certificate_name"]),
            hello: v.with_label_values(&["hello"]),
            tls_dial: v.with_label_values(&["tls_dial"]),
        })
    }
}
