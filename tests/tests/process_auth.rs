//! Authentication and authorisation on real `fe-meta server` processes (`auth.identitiesFile`,
//! `auth.nodeCredentialsFile`): a client without an identity, or with a wrong secret, is refused
//! before any request runs and its connection is closed; each role runs what it may and gets
//! PERMISSION_DENIED for the rest; writes sent to followers are forwarded to the leader under
//! the nodes' own identity; every refusal is counted in the metrics and logged.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use fe_meta::client::{ClientError, ClientOptions, Credentials};
use fe_meta::protocol::{Secret, Status};
use fe_meta::server::auth::secret_digest;
use tests::proc::binary::{fe_meta_bin, output_text as text};
use tests::proc::cluster::PROBE;
use tests::proc::{ClusterSpec, Load, ProcCluster};

/// (identity, role, secret) of the test's identities file.
const IDENTITIES: [(&str, &str, &str); 4] = [
    ("node", "admin", "node-secret-5b1f"),
    ("ops", "admin", "ops-secret-93ad"),
    ("app", "write", "app-secret-77c0"),
    ("viewer", "read", "viewer-secret-0e42"),
];

fn hex(d: [u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the identities file and one `IDENTITY:SECRET` file per identity into `dir`.
fn write_files(dir: &Path) -> PathBuf {
    let mut text = String::from("# name role proof\n");
    for (name, role, secret) in IDENTITIES {
        text += &format!(
            "{name} {role} sha256:{}\n",
            hex(secret_digest(secret.as_bytes()))
        );
        std::fs::write(
            dir.join(format!("{name}.cred")),
            format!("{name}:{secret}\n"),
        )
        .unwrap();
    }
    let ids = dir.join("identities");
    std::fs::write(&ids, text).unwrap();
    ids
}

fn credentials(name: &str) -> Credentials {
    let (_, _, secret) = IDENTITIES.iter().find(|(n, ..)| *n == name).unwrap();
    Credentials {
        identity: name.into(),
        secret: Secret::new(*secret),
    }
}

/// Runs `fe-meta ARGS --server ADDR [--credentials FILE]`.
fn cli(addr: &str, creds: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(fe_meta_bin().unwrap());
    cmd.args(args).args(["--server", addr, "--timeout", "20"]);
    cmd.env_remove("FE_META_CREDENTIALS");
    if let Some(c) = creds {
        cmd.arg("--credentials").arg(c);
    }
    cmd.output().unwrap()
}

fn exit_of(status: Status) -> i32 {
    10 + i32::from(status.code())
}

/// A 3-node cluster that requires authentication, under a write load spread over all three
/// nodes: the refusals, each role's reach, a fourth server joining with `--helper`, and no
/// acknowledged write lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_and_roles_guard_the_client_port() {
    let files = tempfile::tempdir().unwrap();
    let ids = write_files(files.path());
    let cred = |name: &str| files.path().join(format!("{name}.cred"));
    let spec = ClusterSpec {
        extra: vec![
            format!("auth.identitiesFile={}", ids.display()),
            format!("auth.nodeCredentialsFile={}", cred("node").display()),
        ],
        credentials: Some(Arc::new(credentials("ops"))),
        ..ClusterSpec::default()
    };
    let mut c = ProcCluster::start("auth_roles", spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let follower = c.sids().into_iter().find(|s| *s != leader).unwrap();
    let (at_leader, at_follower) = (c.client_addr(leader), c.client_addr(follower));
    // Writers on every node: those on followers are forwarded under the node identity.
    let load = Load::start(&c, 3, 64, Duration::from_secs(20));
    refused_without_identity(&at_follower, &at_leader).await;
    roles_through_the_cli(&at_follower, &at_leader, files.path());
    refusals_counted_and_logged(&c, follower).await;

    // A new server joins under the node identity (GET_CONFIG from its helper, then SNAP or
    // DIFF from the leader); the end checks find every acknowledged write on it too.
    c.start_joiner(4, follower).unwrap();
    c.add_follower(follower, 4).await.unwrap();

    let report = load.stop().await;
    assert!(report.acked > 0, "the load wrote nothing: {report:?}");
    let done = c.finish().await.unwrap();
    assert!(done.acked_writes as u64 >= report.acked);
}

/// A node whose identities file does not make its own node credentials an admin refuses to
/// start, naming the key and the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_credentials_that_are_not_an_admin_refuse_the_start() {
    let files = tempfile::tempdir().unwrap();
    let ids = write_files(files.path());
    let app = files.path().join("app.cred");
    let spec = ClusterSpec {
        nodes: 1,
        extra: vec![
            format!("auth.identitiesFile={}", ids.display()),
            format!("auth.nodeCredentialsFile={}", app.display()),
        ],
        ..ClusterSpec::default()
    };
    let c = ProcCluster::prepare("auth_refused_start", spec).unwrap();
    let node = c.node(1).unwrap();
    std::fs::create_dir_all(node.data_dir()).unwrap();
    std::fs::write(node.data_dir().join("myid"), "1\n").unwrap();
    let cfg = node.config_path();
    let out = std::process::Command::new(fe_meta_bin().unwrap())
        .args(["server", "--bootstrap", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("auth.nodeCredentialsFile") && said.contains("is not an admin"),
        "{said}"
    );
}

/// No identity, or a wrong secret: refused before anything runs, the connection closed.
async fn refused_without_identity(at_follower: &str, at_leader: &str) {
    // No identity: refused before anything runs, and the connection is closed.
    let bare = fe_meta::client::Client::connect_with(at_follower, PROBE)
        .await
        .unwrap();
    let refused = bare.status().await.unwrap_err();
    assert_eq!(refused.status(), Some(Status::Unauthenticated), "{refused}");
    let after = bare.status().await.unwrap_err();
    assert!(
        matches!(after, ClientError::Closed { .. }),
        "the session must be closed after the refusal: {after}"
    );
    // A wrong secret: the connect itself fails, naming the status.
    let wrong = ClientOptions {
        credentials: Some(Arc::new(Credentials {
            identity: "ops".into(),
            secret: Secret::new("guess"),
        })),
        ..PROBE
    };
    let err = fe_meta::client::Client::connect_any(&[at_follower, at_leader], wrong)
        .await
        .unwrap_err();
    assert!(err.is_refused_identity(), "{err}");
}

/// Each role through `fe-meta --credentials`, sent to a follower (writes are forwarded).
fn roles_through_the_cli(at_follower: &str, at_leader: &str, dir: &Path) {
    let cred = |name: &str| dir.join(format!("{name}.cred"));
    let (cli_none, cli_view, cli_app, cli_ops) = tokio::task::block_in_place(|| {
        (
            cli(at_follower, None, &["show-databases"]),
            [
                cli(at_follower, Some(&cred("viewer")), &["show-databases"]),
                cli(at_follower, Some(&cred("viewer")), &["create-db", "v"]),
            ],
            [
                cli(at_follower, Some(&cred("app")), &["create-db", "a"]),
                cli(at_follower, Some(&cred("app")), &["drop-frontend", "9"]),
                cli(at_leader, Some(&cred("app")), &["transfer-leader"]),
            ],
            cli(at_follower, Some(&cred("ops")), &["drop-frontend", "9"]),
        )
    });
    assert_eq!(
        cli_none.status.code(),
        Some(exit_of(Status::Unauthenticated))
    );
    assert!(
        text(&cli_none).contains("UNAUTHENTICATED"),
        "{}",
        text(&cli_none)
    );
    assert!(cli_view[0].status.success(), "{}", text(&cli_view[0]));
    assert_eq!(
        cli_view[1].status.code(),
        Some(exit_of(Status::PermissionDenied)),
        "{}",
        text(&cli_view[1])
    );
    assert!(
        text(&cli_view[1]).contains("identity `viewer` has role read"),
        "{}",
        text(&cli_view[1])
    );
    assert!(
        cli_app[0].status.success(),
        "forwarded write: {}",
        text(&cli_app[0])
    );
    for o in &cli_app[1..] {
        assert_eq!(
            o.status.code(),
            Some(exit_of(Status::PermissionDenied)),
            "{}",
            text(o)
        );
    }
    // An admin gets past authorisation: the leader itself answers (server 9 is no member).
    assert_eq!(
        cli_ops.status.code(),
        Some(exit_of(Status::InvalidArgument)),
        "{}",
        text(&cli_ops)
    );
    assert!(
        text(&cli_ops).contains("server 9 is not a member"),
        "{}",
        text(&cli_ops)
    );
}

/// The refusals so far are counted per reason on `follower`, and logged without a secret.
async fn refusals_counted_and_logged(c: &ProcCluster, follower: u64) {
    // Counted per reason, and logged.
    let m = c.mntr(follower).await.unwrap();
    let count = |reason: &str| -> u64 {
        m.get(&format!(
            "fe_meta_auth_refusals_total{{reason=\"{reason}\"}}"
        ))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
    };
    assert!(count("no_identity") >= 2, "mntr: {m:?}");
    assert!(count("bad_credentials") >= 1, "mntr: {m:?}");
    assert!(count("permission_denied") >= 2, "mntr: {m:?}");
    let log = std::fs::read_to_string(c.node(follower).unwrap().log_path()).unwrap();
    assert!(log.contains("client request refused"), "log of {follower}");
    assert!(!log.contains("guess"), "a secret must never be logged");
}

/// With a TLS client port that requires client certificates, a certificate whose name the
/// identities file lists with proof `cert` is the session's identity from its first byte: no
/// AUTH, and that identity's role applies; a certificate the file does not list gets nothing
/// without AUTH.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_an_identity() {
    let files = tempfile::tempdir().unwrap();
    let (spec, client_tls) = cert_cluster(files.path());
    let mut c = ProcCluster::start("auth_cert", spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let addr = c.client_addr(leader);
    let as_dash = ClientOptions {
        tls: Some(client_tls("dash")),
        ..PROBE
    };
    let dash = fe_meta::client::Client::connect_with(&addr, as_dash)
        .await
        .unwrap();
    dash.status().await.unwrap();
    let denied = dash.create_db("d").await.unwrap_err();
    assert_eq!(denied.status(), Some(Status::PermissionDenied), "{denied}");
    assert!(
        denied.to_string().contains("identity `dash` has role read"),
        "{denied}"
    );

    let as_stranger = ClientOptions {
        tls: Some(client_tls("stranger")),
        ..PROBE
    };
    let stranger = fe_meta::client::Client::connect_with(&addr, as_stranger.clone())
        .await
        .unwrap();
    let refused = stranger.status().await.unwrap_err();
    assert_eq!(refused.status(), Some(Status::Unauthenticated), "{refused}");
    // The same certificate with an identity's secret: AUTH gives that identity's role.
    let with_secret = ClientOptions {
        credentials: Some(Arc::new(credentials("app"))),
        ..as_stranger
    };
    let app = fe_meta::client::Client::connect_with(&addr, with_secret)
        .await
        .unwrap();
    app.create_db("by-app").await.unwrap();
    c.finish().await.unwrap();
}

/// A one-node cluster with a TLS client port that needs client certificates and identities
/// (`dash`: read, by certificate), certificates for clients `dash` and `stranger` in `dir`;
/// and how a client presents the certificate of a name.
fn cert_cluster(dir: &Path) -> (ClusterSpec, impl Fn(&str) -> fe_meta::client::ClientTls) {
    let certs = dir.join("certs");
    let out = std::process::Command::new(fe_meta_bin().unwrap())
        .arg("tls-certs")
        .arg("--ca-dir")
        .arg(dir.join("ca"))
        .arg("--out")
        .arg(&certs)
        .args([
            "--hosts",
            "127.0.0.1",
            "--client",
            "dash",
            "--client",
            "stranger",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let ids = write_files(dir);
    let mut listed = std::fs::read_to_string(&ids).unwrap();
    listed += "dash read cert\n";
    std::fs::write(&ids, listed).unwrap();
    let (ca, node1) = (certs.join("ca.pem"), certs.join("node1.pem"));
    let client_tls = {
        let (certs, ca) = (certs.clone(), ca.clone());
        move |name: &str| {
            let pem = certs.join(format!("client-{name}.pem"));
            fe_meta::client::ClientTls::load(&ca, Some(&pem), Some(&pem)).unwrap()
        }
    };
    let spec = ClusterSpec {
        nodes: 1,
        extra: vec![
            format!("auth.identitiesFile={}", ids.display()),
            format!(
                "auth.nodeCredentialsFile={}",
                dir.join("node.cred").display()
            ),
            "client.secure=true".into(),
            format!("ssl.keyStore.location={}", node1.display()),
            format!("ssl.trustStore.location={}", ca.display()),
            "ssl.clientAuth=need".into(),
        ],
        client_tls: Some(client_tls("dash")),
        ..ClusterSpec::default()
    };
    (spec, client_tls)
}
