//! TLS on real `fe-meta server` processes: mutual TLS between members (`sslQuorum=true`) and a
//! TLS client port (`client.secure=true`, `ssl.clientAuth=need`), with certificates issued by
//! `fe-meta tls-certs` (rcgen) in the test's temp dir.
//!
//! - `tls_cluster_serves_and_refuses_strangers`: 3 nodes on 127.0.0.1-3 elect and take writes
//!   over TLS; refused before any protocol message: a peer with a certificate from another CA,
//!   a plaintext peer, a peer whose (valid) certificate names another host than the member it
//!   claims to be; refused on the client port: a plaintext client, a TLS client without a
//!   certificate, a client with a certificate from another CA. The cluster keeps serving; the
//!   logs show the refusals and `mntr` counts them.
//! - `tls_client_port_without_client_certificates`: `ssl.clientAuth=none` serves a TLS
//!   client without a certificate and still refuses plaintext and a client of another CA.
//! - `tls_certificates_rotate_one_node_at_a_time`: under a write load, each node is restarted
//!   with a new certificate from the same CA, then the cluster rolls over to a new CA (trust
//!   both, restart each; new certificates, restart each); no acknowledged write is lost.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use fe_meta::client::{Client, ClientOptions, ClientTls};
use tests::proc::binary::fe_meta_bin;
use tests::proc::cluster::PROBE;
use tests::proc::{ClusterSpec, Load, NodeNet, ProcCluster};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use zab_net::handshake::{write_frame, Channel, Hello};
use zab_net::tls::{pem, PeerTls};
use zab_net::ServerId;

const HOSTS: [&str; 3] = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];

/// Runs `fe-meta tls-certs`.
fn tls_certs(ca_dir: &Path, out: &Path, hosts: &[&str], clients: &[&str]) {
    let mut cmd = std::process::Command::new(fe_meta_bin().unwrap());
    cmd.arg("tls-certs")
        .arg("--ca-dir")
        .arg(ca_dir)
        .arg("--out")
        .arg(out);
    if !hosts.is_empty() {
        cmd.arg("--hosts").arg(hosts.join(","));
    }
    for c in clients {
        cmd.args(["--client", c]);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The certificates of one test: CA `a` (the cluster's) and CA `b` (a stranger, or the next CA).
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Certs {
        let dir = tempfile::Builder::new()
            .prefix("fe-meta-tls-")
            .tempdir()
            .unwrap();
        let p = dir.path();
        // node4.pem: a server added at run time (`members`: it listens on 127.0.0.1).
        tls_certs(
            &p.join("ca-a"),
            &p.join("a"),
            &[&HOSTS[..], &["127.0.0.1"]].concat(),
            &["app"],
        );
        tls_certs(&p.join("ca-b"), &p.join("b"), &HOSTS, &["app"]);
        tls_certs(&p.join("ca-a"), &p.join("a-elsewhere"), &["127.0.0.9"], &[]);
        // What each node reads: its key store and the trust store, replaced in place to rotate.
        for sid in 1..=4 {
            std::fs::copy(p.join(format!("a/node{sid}.pem")), self_key(p, sid)).unwrap();
        }
        std::fs::copy(p.join("a/ca.pem"), p.join("trust.pem")).unwrap();
        let both = std::fs::read_to_string(p.join("a/ca.pem")).unwrap()
            + &std::fs::read_to_string(p.join("b/ca.pem")).unwrap();
        std::fs::write(p.join("both-cas.pem"), both).unwrap();
        Certs { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn client(&self, ca: &str, cert: Option<&str>) -> ClientTls {
        let cert = cert.map(|c| self.path(c));
        ClientTls::load(&self.path(ca), cert.as_deref(), cert.as_deref()).unwrap()
    }
}

fn self_key(dir: &Path, sid: u64) -> PathBuf {
    dir.join(format!("key{sid}.pem"))
}

/// Three nodes on 127.0.0.1-3 with TLS on every port, clients need a certificate; the
/// harness's clients trust both CAs and present `client-app` of CA a.
fn spec(certs: &Certs) -> ClusterSpec {
    let mut s = ClusterSpec::default();
    let trust = certs.path("trust.pem");
    s.extra = vec![
        "sslQuorum=true".into(),
        format!("ssl.quorum.trustStore.location={}", trust.display()),
        "client.secure=true".into(),
        format!("ssl.trustStore.location={}", trust.display()),
        "ssl.clientAuth=need".into(),
    ];
    for sid in 1..=4u64 {
        let key = self_key(certs.dir.path(), sid);
        s.node_extra.insert(
            sid,
            vec![
                format!("ssl.quorum.keyStore.location={}", key.display()),
                format!("ssl.keyStore.location={}", key.display()),
            ],
        );
        if sid == 4 {
            continue;
        }
        s.net.insert(
            sid,
            NodeNet {
                host: HOSTS[sid as usize - 1].into(),
                netns: None,
            },
        );
    }
    s.client_tls = Some(certs.client("both-cas.pem", Some("a/client-app.pem")));
    s
}

fn cluster_id(c: &ProcCluster) -> u64 {
    let cfg = std::fs::read_to_string(c.node(1).unwrap().config_path()).unwrap();
    let v = cfg
        .lines()
        .find_map(|l| l.strip_prefix("clusterId="))
        .unwrap();
    v.parse().unwrap()
}

/// Dials node 1's quorum port as "server 2", with TLS as `tls` says (or plain), sends a valid
/// hello and returns what came back before the connection closed (for a refusal before any
/// protocol message: nothing, or a TLS alert, but no handshake reply).
async fn stranger_hello(c: &ProcCluster, tls: Option<PeerTls>) -> Vec<u8> {
    let node = c.node(1).unwrap();
    let addr = format!("{}:{}", node.host(), node.ports().quorum);
    let tcp = TcpStream::connect(&addr).await.unwrap();
    let hello = Hello {
        cluster_id: cluster_id(c),
        from: ServerId(2),
        to: ServerId(1),
        channel: Channel::Quorum,
    }
    .encode();
    let exchange = async {
        let mut s = match tls {
            Some(t) => t.connect(node.host(), tcp).await?,
            None => zab_net::tls::Stream::Plain(tcp),
        };
        write_frame(&mut s, &hello).await?;
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back).await;
        Ok::<_, std::io::Error>(back)
    };
    match tokio::time::timeout(Duration::from_secs(5), exchange).await {
        Ok(Ok(back)) => back,
        Ok(Err(_)) => Vec::new(),
        Err(_) => panic!("node 1 neither answered nor closed within 5 s"),
    }
}

fn peer_tls(certs: &Certs, key_store: &str) -> PeerTls {
    let id = pem::key_store("test", &certs.path(key_store)).unwrap();
    let roots = pem::trust_store("test", &certs.path("a/ca.pem")).unwrap();
    PeerTls::new(id, roots, true).unwrap()
}

/// A client of node 1 with `tls`: whether a STATUS call got an answer.
async fn client_answered(c: &ProcCluster, tls: Option<ClientTls>) -> bool {
    let opts = ClientOptions { tls, ..PROBE };
    match Client::connect_with(&c.client_addr(1), opts).await {
        Ok(client) => client.status().await.is_ok(),
        Err(_) => false,
    }
}

fn log_of(c: &ProcCluster, sid: u64) -> String {
    std::fs::read_to_string(c.node(sid).unwrap().log_path()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cluster_serves_and_refuses_strangers() {
    let certs = Certs::new();
    let mut c = ProcCluster::start("tls_serves", spec(&certs))
        .await
        .unwrap();
    c.leader(Duration::from_secs(10)).await.unwrap();
    let load = Load::start(&c, 2, 64, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Peers refused before any protocol message: no reply frame ever comes back.
    let no_reply = |back: &[u8]| !back.windows(4).any(|w| w == b"ZABN");
    let other_ca = stranger_hello(&c, Some(peer_tls(&certs, "b/node2.pem"))).await;
    assert!(other_ca.is_empty(), "a peer of another CA got {other_ca:?}");
    let plain = stranger_hello(&c, None).await;
    assert!(
        no_reply(&plain),
        "a plaintext peer got a handshake reply: {plain:?}"
    );
    let elsewhere = stranger_hello(&c, Some(peer_tls(&certs, "a-elsewhere/node1.pem"))).await;
    assert!(
        elsewhere.is_empty(),
        "a certificate for 127.0.0.9 passed as server 2: {elsewhere:?}"
    );

    // Clients refused on the client port; the harness's own client (CA a, client-app) works.
    assert!(
        !client_answered(&c, None).await,
        "a plaintext client was answered"
    );
    assert!(
        !client_answered(&c, Some(certs.client("a/ca.pem", None))).await,
        "a client without a certificate was answered (ssl.clientAuth=need)"
    );
    assert!(
        !client_answered(&c, Some(certs.client("a/ca.pem", Some("b/client-app.pem")))).await,
        "a client with a certificate from another CA was answered"
    );
    assert!(client_answered(&c, Some(certs.client("a/ca.pem", Some("a/client-app.pem")))).await);

    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = load.stop().await;
    assert!(report.acked > 10, "too few writes over TLS: {report:?}");
    let log = log_of(&c, 1);
    let refusals = log
        .matches("refusing peer connection: TLS check failed")
        .count();
    assert!(refusals >= 1, "node 1's log shows no TLS refusal");
    assert!(
        log.contains("refusing client: TLS handshake failed"),
        "no client refusal logged"
    );
    let mntr = c.mntr(1).await.unwrap();
    let count = |reason: &str| -> u64 {
        let key = format!("zab_peer_connections_refused_total{{reason=\"{reason}\"}}");
        mntr.get(&key).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    assert!(count("tls") >= 2, "TLS refusals counted: {}", count("tls"));
    assert_eq!(count("certificate_name"), 1);
    let clients = mntr
        .get("fe_meta_client_tls_refused_total")
        .and_then(|v| v.parse::<u64>().ok());
    assert!(
        clients >= Some(3),
        "client TLS refusals counted: {clients:?}"
    );
    c.finish().await.unwrap();
}

/// With `ssl.clientAuth=none` the client port is TLS but asks for no certificate: a client
/// that trusts the CA and presents none is served, a plaintext client is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_port_without_client_certificates() {
    let certs = Certs::new();
    let mut s = spec(&certs);
    for line in &mut s.extra {
        if line.as_str() == "ssl.clientAuth=need" {
            *line = "ssl.clientAuth=none".into();
        }
    }
    s.client_tls = Some(certs.client("both-cas.pem", None));
    let mut c = ProcCluster::start("tls_no_client_auth", s).await.unwrap();
    c.leader(Duration::from_secs(10)).await.unwrap();
    assert!(client_answered(&c, Some(certs.client("a/ca.pem", None))).await);
    assert!(
        !client_answered(&c, None).await,
        "a plaintext client was answered"
    );
    assert!(
        !client_answered(&c, Some(certs.client("b/ca.pem", None))).await,
        "a client that trusts another CA accepted the node's certificate"
    );
    let load = Load::start(&c, 2, 64, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = load.stop().await;
    assert!(report.acked > 10, "too few writes: {report:?}");
    c.finish().await.unwrap();
}

/// A server added at run time joins a TLS cluster with `--helper` (its zoo.cfg has only its
/// own line and the TLS keys): it reaches the helper's TLS client port with its certificate,
/// the members reach it by the IP they dial, and it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_server_joins_with_helper() {
    let certs = Certs::new();
    let mut c = ProcCluster::start("tls_join", spec(&certs)).await.unwrap();
    c.leader(Duration::from_secs(10)).await.unwrap();
    let load = Load::start(&c, 2, 64, Duration::from_secs(20));
    c.add_follower(2, 4).await.unwrap();
    c.start_joiner(4, 2).unwrap();
    c.leader(Duration::from_secs(20)).await.unwrap();
    let st = c.status(4).await.expect("node 4 answers over TLS");
    assert!(st.leader_sid.is_some(), "{st:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = load.stop().await;
    assert!(report.acked > 10, "too few writes: {report:?}");
    c.finish().await.unwrap();
}

/// Replaces node `sid`'s key store with `from` and restarts it; waits until every node
/// follows one leader again (the restarted node included: it got through TLS).
async fn restart_with(c: &mut ProcCluster, certs: &Certs, sid: u64, from: &str) {
    c.terminate(sid).unwrap();
    std::fs::copy(certs.path(from), self_key(certs.dir.path(), sid)).unwrap();
    c.restart(sid).unwrap();
    c.leader(Duration::from_secs(15)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_certificates_rotate_one_node_at_a_time() {
    let certs = Certs::new();
    let mut c = ProcCluster::start("tls_rotate", spec(&certs))
        .await
        .unwrap();
    c.leader(Duration::from_secs(10)).await.unwrap();
    let load = Load::start(&c, 2, 64, Duration::from_secs(60));
    // New certificates from the same CA, one node at a time.
    tls_certs(&certs.path("ca-a"), &certs.path("a2"), &HOSTS, &[]);
    for sid in 1..=3 {
        restart_with(&mut c, &certs, sid, &format!("a2/node{sid}.pem")).await;
    }
    // CA rollover: every node trusts both CAs (the file is read at each start) ...
    std::fs::copy(certs.path("both-cas.pem"), certs.path("trust.pem")).unwrap();
    for sid in 1..=3 {
        restart_with(&mut c, &certs, sid, &format!("a2/node{sid}.pem")).await;
    }
    // ... then each gets its certificate from the new CA.
    for sid in 1..=3 {
        restart_with(&mut c, &certs, sid, &format!("b/node{sid}.pem")).await;
    }
    let report = load.stop().await;
    assert!(report.acked > 10, "too few writes: {report:?}");
    c.finish().await.unwrap();
}

/// A zoo.cfg whose TLS files do not work is refused at start, naming the key and the file,
/// before anything is written to the data dir.
#[test]
fn bad_tls_files_refuse_the_start_naming_key_and_file() {
    let certs = Certs::new();
    let dir = certs.path("refused");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/myid"), "1\n").unwrap();
    let base = format!(
        "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort=1\nclusterId=7\n\
         admin.enableServer=false\nserver.1=127.0.0.1:2:3\n",
        dir.join("data").display()
    );
    let ca = certs.path("a/ca.pem");
    let cases = [
        (
            format!(
                "sslQuorum=true\nssl.quorum.keyStore.location={0}\n\
                 ssl.quorum.trustStore.location={1}\n",
                dir.join("missing.pem").display(),
                ca.display()
            ),
            ("ssl.quorum.keyStore.location", "missing.pem"),
        ),
        (
            format!(
                "sslQuorum=true\nssl.quorum.keyStore.location={0}\n\
                 ssl.quorum.trustStore.location={0}\n",
                ca.display()
            ),
            ("ssl.quorum.keyStore.location", "no private key"),
        ),
        (
            format!(
                "client.secure=true\nssl.keyStore.location={}\nssl.trustStore.location={}\n",
                certs.path("key1.pem").display(),
                certs
                    .path("key1.pem")
                    .display()
                    .to_string()
                    .replace("key1", "nothing")
            ),
            ("ssl.trustStore.location", "nothing.pem"),
        ),
        (
            "sslQuorum=true\n".to_owned(),
            ("ssl.quorum.keyStore.location", "sslQuorum=true"),
        ),
    ];
    for (lines, (key, file)) in cases {
        let cfg = dir.join("zoo.cfg");
        std::fs::write(&cfg, format!("{base}{lines}")).unwrap();
        let out = std::process::Command::new(fe_meta_bin().unwrap())
            .arg("server")
            .arg("--config")
            .arg(&cfg)
            .arg("--bootstrap")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started with {lines}");
        assert!(err.contains(key) && err.contains(file), "{lines}: {err}");
        assert!(
            !dir.join("data/VERSION").exists(),
            "{lines}: wrote the data dir"
        );
    }
}
