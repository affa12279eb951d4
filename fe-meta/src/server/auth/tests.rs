use super::*;
use crate::command::Command;
use crate::protocol::{FrontendChange, ReadOptions, Secret};

fn hex(d: [u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn config() -> AuthConfig {
    let text = format!(
        "node admin sha256:{}\napp write sha256:{}\nviewer read sha256:{}\nfe-cert read cert\n",
        hex(secret_digest(b"node-secret")),
        hex(secret_digest(b"app-secret")),
        hex(secret_digest(b"view-secret")),
    );
    AuthConfig {
        identities: Some((
            PathBuf::from("ids"),
            Arc::new(Identities::parse(&text, "ids").unwrap()),
        )),
        node_credentials: None,
    }
}

fn auth(identity: &str, secret: &str) -> RequestBody {
    RequestBody::Auth(AuthRequest {
        identity: identity.into(),
        secret: Secret::new(secret),
    })
}

fn write() -> RequestBody {
    RequestBody::Write(Command::CreateDb { name: "d".into() })
}

fn refusal(d: &Decision) -> Option<(Status, bool, Refusal)> {
    match d {
        Decision::Answer {
            result: Err(e),
            close,
            refusal: Some(r),
        } => Some((e.status, *close, *r)),
        _ => None,
    }
}

#[test]
fn nothing_runs_before_auth_and_a_bad_auth_closes() {
    let cfg = config();
    let mut s = SessionAuth::new(&cfg, None);
    let d = s.decide(&RequestBody::Status);
    assert_eq!(
        refusal(&d),
        Some((Status::Unauthenticated, true, Refusal::NoIdentity))
    );
    let d = s.decide(&auth("app", "wrong"));
    assert_eq!(
        refusal(&d),
        Some((Status::Unauthenticated, true, Refusal::BadCredentials))
    );
    let d = s.decide(&auth("ghost", "app-secret"));
    assert_eq!(
        refusal(&d),
        Some((Status::Unauthenticated, true, Refusal::BadCredentials))
    );
    assert_eq!(s.identity(), None);
}

#[test]
fn each_role_runs_what_it_may_and_is_refused_the_rest() {
    let cfg = config();
    let add = RequestBody::ChangeMembership(FrontendChange::Drop { sid: 9 });
    let backup = RequestBody::Backup(ReadOptions::default());
    let transfer = RequestBody::TransferLeader { target: None };
    let read = RequestBody::ShowDatabases(ReadOptions { sync: true });
    let cases: [(&str, &str, [bool; 5]); 3] = [
        // read, write, membership, backup, transfer
        ("viewer", "view-secret", [true, false, false, false, false]),
        ("app", "app-secret", [true, true, false, false, false]),
        ("node", "node-secret", [true, true, true, true, true]),
    ];
    for (name, secret, allowed) in cases {
        let mut s = SessionAuth::new(&cfg, None);
        assert!(matches!(
            s.decide(&auth(name, secret)),
            Decision::Answer {
                result: Ok(_),
                close: false,
                refusal: None
            }
        ));
        assert_eq!(s.identity(), Some(name));
        for (body, may) in [&read, &write(), &add, &backup, &transfer]
            .into_iter()
            .zip(allowed)
        {
            let d = s.decide(body);
            if may {
                assert!(
                    matches!(d, Decision::Run),
                    "{name} {:?}: {d:?}",
                    body.kind()
                );
            } else {
                assert_eq!(
                    refusal(&d),
                    Some((Status::PermissionDenied, false, Refusal::PermissionDenied)),
                    "{name} {:?}",
                    body.kind()
                );
            }
        }
    }
}

#[test]
fn a_certificate_identity_needs_no_auth_and_an_open_node_runs_everything() {
    let cfg = config();
    let mut s = SessionAuth::new(&cfg, Some("fe-cert"));
    assert_eq!(s.identity(), Some("fe-cert"));
    assert!(matches!(s.decide(&RequestBody::Status), Decision::Run));
    assert!(
        refusal(&s.decide(&write())).is_some(),
        "fe-cert has role read"
    );
    let mut unknown = SessionAuth::new(&cfg, Some("app"));
    assert_eq!(
        unknown.identity(),
        None,
        "app proves itself by secret, not certificate"
    );
    assert!(refusal(&unknown.decide(&RequestBody::Status)).is_some());

    let open = AuthConfig {
        identities: None,
        node_credentials: None,
    };
    let mut s = SessionAuth::new(&open, None);
    assert!(matches!(s.decide(&write()), Decision::Run));
    match s.decide(&auth("anyone", "x")) {
        Decision::Answer {
            result: Ok(ResponseBody::Authenticated { role, .. }),
            ..
        } => assert_eq!(role, Role::Admin),
        d => panic!("{d:?}"),
    }
}

#[test]
fn identities_need_admin_node_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("ids");
    std::fs::write(
        &ids,
        format!(
            "node admin sha256:{}\napp write sha256:{}\n",
            hex(secret_digest(b"n")),
            hex(secret_digest(b"a"))
        ),
    )
    .unwrap();
    let creds = dir.path().join("creds");
    let err = AuthConfig::load(Some(&ids), None).unwrap_err();
    assert!(err.contains("auth.nodeCredentialsFile is not"), "{err}");
    std::fs::write(&creds, "app:a\n").unwrap();
    let err = AuthConfig::load(Some(&ids), Some(&creds)).unwrap_err();
    assert!(err.contains("not an admin"), "{err}");
    std::fs::write(&creds, "node:wrong\n").unwrap();
    assert!(AuthConfig::load(Some(&ids), Some(&creds)).is_err());
    std::fs::write(&creds, "node:n\n").unwrap();
    let cfg = AuthConfig::load(Some(&ids), Some(&creds)).unwrap();
    assert!(cfg.required());
    assert_eq!(cfg.credentials().unwrap().identity, "node");
    let open = AuthConfig::load(None, Some(&creds)).unwrap();
    assert!(!open.required() && open.credentials().is_some());
}

#[test]
fn node_credentials_come_from_the_uncommented_line() {
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("creds");
    std::fs::write(&creds, "node:n\n").unwrap();
    let text = format!(
        "#auth.nodeCredentialsFile=/nowhere\n auth.nodeCredentialsFile = {} \n",
        creds.display()
    );
    let found = node_credentials_in(&text).unwrap().unwrap();
    assert_eq!(found.identity, "node");
    assert!(node_credentials_in("#auth.nodeCredentialsFile=/nowhere\n")
        .unwrap()
        .is_none());
}
