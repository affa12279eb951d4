//! Transports with mutual TLS (`TransportConfig::tls`) on loopback: members of one CA exchange
//! messages; a peer with a certificate from another CA, a plaintext peer, and a peer whose
//! certificate (from the right CA) names another host are refused before any message, and
//! the refusals are counted on both ends.

// Test helpers outside #[test] fns fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::transport::{
    config, expect_silence, init_tracing, next_message, notification, CLUSTER,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use zab_core::ServerId;
use zab_net::tls::pem::Identity;
use zab_net::tls::PeerTls;
use zab_net::transport::{Transport, TransportStats};

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// Mutual TLS for a member whose certificate names `host`, trusting `trust`.
    fn member(&self, host: &str, trust: &Ca) -> PeerTls {
        self.member_checking(host, trust, true)
    }

    /// [`Ca::member`], with or without hostname verification.
    fn member_checking(&self, host: &str, trust: &Ca, names: bool) -> PeerTls {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![host.to_owned()])
            .unwrap()
            .signed_by(&key, &self.cert, &self.key)
            .unwrap();
        let id = Identity {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        };
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(trust.cert.der().to_vec()))
            .unwrap();
        PeerTls::new(id, Arc::new(roots), names).unwrap()
    }
}

/// Transports 1 and 2 with the given TLS, each told where the other listens.
async fn pair(
    one: Option<PeerTls>,
    two: Option<PeerTls>,
) -> [(
    Transport,
    tokio::sync::mpsc::Receiver<zab_net::transport::Event>,
); 2] {
    let mut out = Vec::new();
    for (sid, tls) in [(1, one), (2, two)] {
        let mut cfg = config(sid, CLUSTER, &[1, 2], common::transport::loopback0());
        cfg.tls = tls;
        cfg.handshake_timeout = Duration::from_secs(2);
        out.push(Transport::start(cfg).await.unwrap());
    }
    let a = out[0].0.local_addrs();
    let b = out[1].0.local_addrs();
    out[0].0.set_peer_addrs(ServerId(2), b).unwrap();
    out[1].0.set_peer_addrs(ServerId(1), a).unwrap();
    let (Some(two), Some(one)) = (out.pop(), out.pop()) else {
        panic!("two transports started");
    };
    [one, two]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_one_ca_exchange_messages_over_tls() {
    init_tracing();
    let ca = Ca::new();
    let [(t1, mut rx1), (t2, mut rx2)] = pair(
        Some(ca.member("127.0.0.1", &ca)),
        Some(ca.member("127.0.0.1", &ca)),
    )
    .await;
    for round in 0..20 {
        t1.send(ServerId(2), notification(round)).unwrap();
        t2.send(ServerId(1), notification(round)).unwrap();
    }
    for round in 0..20 {
        assert_eq!(
            next_message(&mut rx2).await,
            (ServerId(1), notification(round))
        );
        assert_eq!(
            next_message(&mut rx1).await,
            (ServerId(2), notification(round))
        );
    }
    assert_eq!(t1.stats().tls_refused + t2.stats().tls_refused, 0);
    t1.shutdown().await;
    t2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hostname_verification_the_ca_is_enough() {
    init_tracing();
    let ca = Ca::new();
    let [(t1, mut rx1), (t2, mut rx2)] = pair(
        Some(ca.member_checking("127.0.0.5", &ca, false)),
        Some(ca.member_checking("node-b.example", &ca, false)),
    )
    .await;
    t1.send(ServerId(2), notification(1)).unwrap();
    t2.send(ServerId(1), notification(2)).unwrap();
    assert_eq!(next_message(&mut rx2).await, (ServerId(1), notification(1)));
    assert_eq!(next_message(&mut rx1).await, (ServerId(2), notification(2)));
    t1.shutdown().await;
    t2.shutdown().await;
}

/// Transport 2 (`two`) keeps sending to TLS transport 1; nothing arrives either way.
async fn refused(two: Option<PeerTls>, one: PeerTls) -> (TransportStats, TransportStats) {
    let [(t1, mut rx1), (t2, mut rx2)] = pair(Some(one), two).await;
    for round in 0..5 {
        t2.send(ServerId(1), notification(round)).unwrap();
        t1.send(ServerId(2), notification(round)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    expect_silence(&mut rx1, Duration::from_millis(300)).await;
    expect_silence(&mut rx2, Duration::from_millis(10)).await;
    let stats = (t1.stats(), t2.stats());
    assert_eq!(stats.0.established + stats.1.established, 0, "{stats:?}");
    t1.shutdown().await;
    t2.shutdown().await;
    stats
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_ca_a_plaintext_peer_and_a_wrong_name_are_refused() {
    init_tracing();
    let (ca, other) = (Ca::new(), Ca::new());
    // Another CA (trusting ours, so only its own certificate is wrong).
    let (s1, s2) = refused(
        Some(other.member("127.0.0.1", &ca)),
        ca.member("127.0.0.1", &ca),
    )
    .await;
    assert!(s1.tls_refused >= 1, "{s1:?}");
    assert!(
        s1.tls_dial_failures >= 1,
        "node 1 must not accept node 2's server certificate"
    );
    assert!(s2.tls_dial_failures >= 1, "{s2:?}");
    // Plaintext.
    let (s1, _) = refused(None, ca.member("127.0.0.1", &ca)).await;
    assert!(s1.tls_refused >= 1, "{s1:?}");
    // Our CA, but the certificate names 127.0.0.5, not where server 2 is.
    let (s1, _) = refused(
        Some(ca.member("127.0.0.5", &ca)),
        ca.member("127.0.0.1", &ca),
    )
    .await;
    assert!(s1.tls_refused + s1.tls_dial_failures >= 1, "{s1:?}");
}
