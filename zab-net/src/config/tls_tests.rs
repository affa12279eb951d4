//! zoo.cfg's TLS keys (config/tls.rs).

use super::*;

const BASE: &str = "\
tickTime=2000
initLimit=10
syncLimit=5
dataDir=/var/zab
server.1=127.0.0.1:2888:3888
";

fn parse_tls(lines: &str) -> Result<TlsSettings, ConfigError> {
    parse(&format!("{BASE}{lines}")).map(|c| c.tls)
}

#[test]
fn plaintext_by_default_and_with_files_but_no_switch() {
    assert_eq!(parse_tls("").unwrap(), TlsSettings::default());
    let tls = parse_tls("ssl.quorum.keyStore.location=/k.pem\nsslQuorum=false\n").unwrap();
    assert_eq!(tls, TlsSettings::default());
}

#[test]
fn quorum_tls_with_its_files() {
    let tls = parse_tls(
        "sslQuorum=true\nssl.quorum.keyStore.location=/etc/k.pem\n\
         ssl.quorum.trustStore.location=/etc/ca.pem\nssl.quorum.keyStore.type=PEM\n",
    )
    .unwrap();
    let q = tls.quorum.unwrap();
    assert_eq!(q.key_store, PathBuf::from("/etc/k.pem"));
    assert_eq!(q.trust_store, PathBuf::from("/etc/ca.pem"));
    assert!(q.hostname_verification);
    assert!(tls.client.is_none());
}

#[test]
fn ssl_quorum_without_a_trust_store_names_the_key_and_line() {
    let err = parse_tls("sslQuorum=true\nssl.quorum.keyStore.location=/k.pem\n").unwrap_err();
    match &err {
        ConfigError::Needs { key, line, .. } => {
            assert_eq!(*key, "ssl.quorum.trustStore.location");
            assert_eq!(*line, 6);
        }
        other => panic!("expected Needs, got {other:?}"),
    }
    assert!(err.to_string().contains("sslQuorum=true"), "{err}");
}

#[test]
fn client_port_tls_and_client_auth() {
    let tls = parse_tls(
        "client.secure=true\nssl.keyStore.location=/s.pem\nssl.trustStore.location=/ca.pem\n\
         ssl.clientAuth=need\nssl.hostnameVerification=false\n",
    )
    .unwrap();
    let c = tls.client.unwrap();
    assert_eq!(c.client_auth, ClientAuth::Need);
    assert!(!c.hostname_verification);
    let err = parse_tls("client.secure=true\nssl.trustStore.location=/ca.pem\n").unwrap_err();
    assert!(err.to_string().contains("ssl.keyStore.location"), "{err}");
}

#[test]
fn bad_values_are_refused_with_their_key() {
    for (line, key) in [
        ("sslQuorum=yes\n", "sslQuorum"),
        ("ssl.clientAuth=want\n", "ssl.clientAuth"),
        ("ssl.keyStore.type=JKS\n", "ssl.keyStore.type"),
        (
            "ssl.quorum.hostnameVerification=1\n",
            "ssl.quorum.hostnameVerification",
        ),
    ] {
        match parse_tls(line).unwrap_err() {
            ConfigError::BadValue { key: k, .. } => assert_eq!(k, key),
            other => panic!("{line}: expected BadValue, got {other:?}"),
        }
    }
}
