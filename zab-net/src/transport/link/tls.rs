//! The dialer's side of TLS (transport INV-3): the handshake before the hello, and the
//! counting and rate-limited warning of a failed one.

use tokio::net::TcpStream;
use tokio::time::timeout;
use tracing::warn;

use super::super::bump;
use super::Link;
use crate::handshake::HandshakeError;
use crate::tls::Stream;

impl Link {
    /// The dialer's TLS handshake when the transport has TLS (transport INV-3): before the
    /// hello. A failure is counted and warned about (rate-limited).
    pub(super) async fn secure(
        &self,
        addr: std::net::SocketAddr,
        tcp: TcpStream,
    ) -> Result<Stream, HandshakeError> {
        let Some(tls) = &self.shared.cfg.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let host = self.shared.tls_host(self.peer, addr);
        let handshake = timeout(self.shared.cfg.handshake_timeout, tls.connect(&host, tcp)).await;
        let error = match handshake {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => e,
            Err(_) => std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out"),
        };
        self.tls_dial_failed(addr, &host, &error);
        Err(HandshakeError::Io(error))
    }

    /// Counts a dial whose TLS handshake failed and warns about it (rate-limited).
    pub(super) fn tls_dial_failed(
        &self,
        addr: std::net::SocketAddr,
        host: &str,
        error: &std::io::Error,
    ) {
        bump(&self.shared.counters.tls_dial_failures);
        if let Some(m) = &self.shared.cfg.metrics {
            m.tls_dial.inc();
        }
        if let Some(quiet) = self.shared.warn_limit.due(addr.ip()) {
            warn!(
                %addr,
                %host,
                error = %error,
                repeats = quiet,
                "TLS handshake with peer failed; check that both certificates are issued by \
                 the cluster CA (ssl.quorum.trustStore.location) and that the peer's names \
                 {host}"
            );
        }
    }
}
