//! Tests of the server configuration's keys.
#![allow(clippy::unwrap_used)]
use super::*;
use zab_net::config::parse_with;

const BASE: &str = "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir=/tmp/x\n\
    server.1=127.0.0.1:2888:3888;127.0.0.1:9031\n\
    server.2=127.0.0.1:2889:3889;9032\n\
    server.3=127.0.0.1:2890:3890:observer\n";

fn cfg(extra: &str, sid: u64) -> Result<ServerConfig, ServerError> {
    ServerConfig::from_node(parse_with(&format!("{BASE}{extra}"), EXTRA_KEYS)?, sid)
}

#[test]
fn client_addresses_roles_and_defaults() {
    let c = cfg("clusterId=0x10\n", 2).unwrap();
    assert_eq!(
        (c.cluster_id, c.client_listen.as_str()),
        (16, "127.0.0.1:9032")
    );
    assert_eq!(c.members[&1].client_addr.as_deref(), Some("127.0.0.1:9031"));
    assert_eq!(c.members[&3].role, FrontendRole::Observer);
    assert_eq!(c.members[&3].client_addr, None);
    assert_eq!(c.tolerance_ms, 300_000);
    assert_eq!(c.timestamp_interval(), Duration::from_secs(150));
    let c = cfg(
        "clusterId=1\nclientPort=7000\nmeta_delay_toleration_second=2\n",
        1,
    )
    .unwrap();
    assert_eq!(c.client_listen, "127.0.0.1:7000");
    assert_eq!(c.tolerance_ms, 2000);
}

#[test]
fn differences_name_the_servers() {
    let zoo = bootstrap_membership(&parse_with(BASE, EXTRA_KEYS).unwrap());
    assert_eq!(zoo.differences(&zoo), None);
    let mut data = zoo.clone();
    data.members.remove(&ServerId(3));
    let mut four = data.members[&ServerId(1)].clone();
    four.address = "10.0.0.4:1:2".into();
    data.members.insert(ServerId(4), four);
    data.members.get_mut(&ServerId(2)).unwrap().address = "127.0.0.1:1:2".into();
    assert_eq!(
        zoo.differences(&data).as_deref(),
        Some("only in zoo.cfg: [3]; only in the data dir: [4]; role or address differs: [2]")
    );
}

#[test]
fn errors_name_the_key() {
    let e = cfg("", 1).unwrap_err().to_string();
    assert!(e.contains("clusterId"), "{e}");
    let e = cfg("clusterId=1\n", 3).unwrap_err().to_string();
    assert!(e.contains("clientPort"), "{e}");
    let e = cfg("clusterId=1\nmeta_delay_toleration_second=0\n", 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("meta_delay_toleration_second") && e.contains("line 9"),
        "{e}"
    );
    let e = cfg("clusterId=1\nwrite_timeout_ms=x\n", 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("write_timeout_ms") && e.contains("line 9"),
        "{e}"
    );
    let e = cfg("clusterId=1\nmeta_delay=1\n", 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown key `meta_delay`"), "{e}");
    assert!(cfg("clusterId=1\n", 9).is_err());
}

#[test]
fn admin_port_keys_and_their_errors() {
    let c = cfg("clusterId=1\n", 1).unwrap();
    assert_eq!(c.admin_listen.as_deref(), Some("0.0.0.0:8080"));
    assert_eq!(c.four_letter_words, FourLetterWord::ALL.to_vec());
    let c = cfg(
        "clusterId=1\nadmin.serverAddress=127.0.0.1\nadmin.serverPort=0\n",
        1,
    )
    .unwrap();
    assert_eq!(c.admin_listen.as_deref(), Some("127.0.0.1:0"));
    let c = cfg(
        "clusterId=1\nadmin.serverAddress=::1\nadmin.serverPort=9\n",
        1,
    )
    .unwrap();
    assert_eq!(c.admin_listen.as_deref(), Some("[::1]:9"));
    let c = cfg("clusterId=1\nadmin.enableServer=false\n", 1).unwrap();
    assert_eq!(c.admin_listen, None);
    for (extra, key) in [
        ("admin.enableServer=yes\n", "admin.enableServer"),
        ("admin.serverPort=70000\n", "admin.serverPort"),
        ("admin.serverPort=-1\n", "admin.serverPort"),
        ("admin.serverAddress=a b\n", "admin.serverAddress"),
        (
            "4lw.commands.whitelist=srvr, kill\n",
            "4lw.commands.whitelist",
        ),
    ] {
        let e = cfg(&format!("clusterId=1\n{extra}"), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains("line 9"), "{extra}: {e}");
    }
}

#[test]
fn the_whitelist_takes_words_or_a_star() {
    let c = cfg("clusterId=1\n4lw.commands.whitelist=srvr, ruok,srvr\n", 1).unwrap();
    assert_eq!(
        c.four_letter_words,
        vec![FourLetterWord::Srvr, FourLetterWord::Ruok]
    );
    let c = cfg("clusterId=1\n4lw.commands.whitelist=stat,*\n", 1).unwrap();
    assert_eq!(c.four_letter_words.len(), FourLetterWord::ALL.len());
    let c = cfg("clusterId=1\n4lw.commands.whitelist=\n", 1).unwrap();
    assert!(c.four_letter_words.is_empty());
}

/// `server_threads`: 1 by default, any count up to the maximum, anything else an error that
/// names the key and its line; the file's value is also what the runtime is sized by.
#[test]
fn server_threads_parse_in_range() {
    let threads = |v: &str| cfg(&format!("clusterId=1\nserver_threads={v}\n"), 1);
    assert_eq!(
        cfg("clusterId=1\n", 1).unwrap().server_threads,
        SERVER_THREADS_DEFAULT
    );
    assert_eq!(SERVER_THREADS_DEFAULT, 1);
    assert_eq!(threads("4").unwrap().server_threads, 4);
    assert_eq!(
        threads(&SERVER_THREADS_MAX.to_string())
            .unwrap()
            .server_threads,
        SERVER_THREADS_MAX
    );
    for v in ["0", "257", "-1", "two", ""] {
        let e = threads(v).unwrap_err().to_string();
        assert!(
            e.contains("server_threads") && e.contains("line 9"),
            "{v:?}: {e}"
        );
    }
    let settings = threads("3").unwrap().fe_meta_settings();
    assert!(settings.contains(&("server_threads".into(), "3".into())));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoo.cfg");
    std::fs::write(&path, format!("{BASE}clusterId=1\nserver_threads=6\n")).unwrap();
    assert_eq!(server_threads_of(&path), Some(6));
    std::fs::write(&path, format!("{BASE}clusterId=1\nserver_threads=0\n")).unwrap();
    assert_eq!(server_threads_of(&path), None);
    assert_eq!(server_threads_of(&dir.path().join("absent.cfg")), None);
}
