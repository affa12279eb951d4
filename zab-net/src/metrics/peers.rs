//! Peer connections refused (the transport's TLS and hello checks), by reason, and the
//! acknowledgements the transport folded (`transport::UnwrittenAcks`).

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
    /// `zab_peer_acks_folded_total`: ACKs and PINGACKs folded into one still unwritten.
    pub(crate) acks_folded: IntCounter,
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
        let acks_folded = IntCounter::new(
            "zab_peer_acks_folded_total",
            "ACKs and PINGACKs folded into one of their kind still waiting unwritten in a \
             link's outbox (the link drains slower than this server acknowledges)",
        )?;
        b.registry.register(Box::new(acks_folded.clone()))?;
        Ok(PeerMetrics {
            acks_folded,
            tls: v.with_label_values(&["tls"]),
            name: v.with_label_values(&["certificate_name"]),
            hello: v.with_label_values(&["hello"]),
            tls_dial: v.with_label_values(&["tls_dial"]),
        })
    }
}
