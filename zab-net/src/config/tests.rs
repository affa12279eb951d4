use super::*;

const BASE: &str = "\
# a three-node ensemble
tickTime=2000
initLimit=10
syncLimit=5
dataDir=/var/zab
server.1=127.0.0.1:2888:3888
server.2=127.0.0.1:2889:3889
server.3=127.0.0.1:2890:3890:observer
";

fn with(extra_lines: &str) -> String {
    format!("{BASE}{extra_lines}")
}

fn bad_value_key(err: &ConfigError) -> (&str, usize) {
    match err {
        ConfigError::BadValue { key, line, .. } => (key.as_str(), *line),
        other => panic!("expected BadValue, got {other:?}"),
    }
}

#[test]
fn minimal_file_gets_defaults() {
    let cfg = parse(BASE).unwrap();
    assert_eq!(cfg.tick_ms, 2000);
    assert_eq!(cfg.init_limit_ticks, 10);
    assert_eq!(cfg.sync_limit_ticks, 5);
    assert_eq!(cfg.data_dir, PathBuf::from("/var/zab"));
    assert_eq!(cfg.data_log_dir, cfg.data_dir);
    assert_eq!(cfg.client_port, None);
    assert_eq!(cfg.snap_count, 100_000);
    assert_eq!(
        cfg.snap_size_limit_bytes,
        Some(4 << 30),
        "ZooKeeper's 4 GiB"
    );
    assert_eq!(cfg.snap_retain_count, 3);
    assert_eq!(cfg.purge_interval_hours, 0);
    assert_eq!(cfg.pre_alloc_bytes, 64 * 1024 * 1024);
    assert!(cfg.force_sync);
    assert_eq!(cfg.cluster_id, None);
    assert_eq!(cfg.servers.len(), 3);
    let s3 = &cfg.servers[&ServerId(3)];
    assert_eq!(s3.learner_type, LearnerType::Observer);
    assert_eq!((s3.quorum_port, s3.election_port), (2890, 3890));
    assert_eq!(s3.to_string(), "127.0.0.1:2890:3890:observer");
}

#[test]
fn every_optional_key_parses() {
    let cfg = parse(&with(
        "dataLogDir = /fast/log\nclientPort=2181\nsnapCount=5000\nautopurge.snapRetainCount=5\n\
         autopurge.purgeInterval=24\npreAllocSize=1024\nforceSync=no\nclusterId=0xABC\n\
         ! bang comment\n\n",
    ))
    .unwrap();
    assert_eq!(cfg.data_log_dir, PathBuf::from("/fast/log"));
    assert_eq!(cfg.client_port, Some(2181));
    assert_eq!(cfg.snap_count, 5000);
    assert_eq!(cfg.snap_retain_count, 5);
    assert_eq!(cfg.purge_interval_hours, 24);
    assert_eq!(cfg.pre_alloc_bytes, 1024 * 1024);
    assert!(!cfg.force_sync);
    assert_eq!(cfg.cluster_id, Some(0xabc));
    assert_eq!(parse(&with("clusterId=42")).unwrap().cluster_id, Some(42));
}

/// PITFALLS E8: `snapSizeLimitInKb` as ZooKeeper reads it — KiB, and 0 or a negative value
/// disables the byte trigger; anything else is an error naming the key.
#[test]
fn snap_size_limit_in_kb_parses_and_non_positive_disables() {
    let limit = |v: &str| parse(&with(&format!("snapSizeLimitInKb={v}"))).unwrap();
    assert_eq!(limit("64").snap_size_limit_bytes, Some(64 * 1024));
    assert_eq!(limit("0").snap_size_limit_bytes, None);
    assert_eq!(limit("-1").snap_size_limit_bytes, None);
    let e = parse(&with("snapSizeLimitInKb=4GB")).unwrap_err();
    assert!(e.to_string().contains("snapSizeLimitInKb"), "{e}");
    let e = parse(&with(&format!("snapSizeLimitInKb={}", i64::MAX))).unwrap_err();
    assert!(e.to_string().contains("too large"), "{e}");
}

/// `snapCpuPercent`: an integer share of one core, 1 to 100, [`DEFAULT_SNAP_CPU_PERCENT`] when
/// absent; anything else is an error naming the key, its line and the range.
#[test]
fn snap_cpu_percent_parses_in_range() {
    let percent =
        |v: &str| parse(&with(&format!("snapCpuPercent={v}"))).map(|c| c.snap_cpu_percent);
    assert_eq!(
        parse(BASE).unwrap().snap_cpu_percent,
        DEFAULT_SNAP_CPU_PERCENT
    );
    assert_eq!(percent("30").unwrap(), 30);
    assert_eq!(percent(" 1 ").unwrap(), 1);
    assert_eq!(percent("100").unwrap(), 100);
    for bad in ["0", "101", "-5", "255", "1000"] {
        let e = percent(bad).unwrap_err();
        assert_eq!(bad_value_key(&e), ("snapCpuPercent", 9), "{bad}");
        assert!(e.to_string().contains("1 to 100"), "{e}");
    }
    for bad in ["thirty", "30%", "0.5", ""] {
        let e = percent(bad).unwrap_err();
        assert_eq!(bad_value_key(&e), ("snapCpuPercent", 9), "{bad:?}");
    }
}

/// `snapshotSizeFactor` (ZooKeeper's `zookeeper.snapshotSizeFactor`): a number, 0.33 by
/// default, negative disables; it reaches the core's sync plan.
#[test]
fn snapshot_size_factor_parses_and_reaches_the_core() {
    let factor = |v: &str| parse(&with(&format!("snapshotSizeFactor={v}"))).unwrap();
    assert_eq!(parse(&with("")).unwrap().snapshot_size_factor, 0.33);
    assert_eq!(factor("0.5").snapshot_size_factor, 0.5);
    let off = factor("-1");
    assert_eq!(off.snapshot_size_factor, -1.0);
    let sid = *off.servers.keys().next().unwrap();
    assert_eq!(off.to_core(sid).unwrap().snapshot_size_factor, -1.0);
    for bad in ["a third", "NaN", "inf"] {
        let e = parse(&with(&format!("snapshotSizeFactor={bad}"))).unwrap_err();
        assert!(e.to_string().contains("snapshotSizeFactor"), "{e}");
    }
}

#[test]
fn server_line_forms() {
    let p = ServerAddr::parse_value;
    assert_eq!(p("h:1:2").unwrap().learner_type, LearnerType::Participant);
    assert_eq!(
        p("h:1:2:participant").unwrap().learner_type,
        LearnerType::Participant
    );
    let v6 = p("[::1]:1:2:observer").unwrap();
    assert_eq!(v6.host, "::1");
    assert_eq!(v6.quorum_endpoint(), "[::1]:1");
    assert_eq!(v6.quorum_socket_addr().unwrap().port(), 1);
    assert_eq!(p(&v6.to_string()).unwrap(), v6);
    for bad in [
        "h",
        "h:1",
        ":1:2",
        "h:1:2:3:4",
        "h:x:2",
        "h:1:70000",
        "h:1:2:voter",
        "[::1:1:2",
        "[::1]1:2",
        "h:1:2;",
        "h:1:2;x",
        "h:1:2;h:70000",
        "h:1:2;:5",
        "h:1:2;a:b:5",
    ] {
        assert!(p(bad).is_err(), "{bad} parsed");
    }
}

#[test]
fn client_address_after_semicolon() {
    let p = ServerAddr::parse_value;
    let a = p("h:1:2;2181").unwrap();
    assert_eq!(
        a.client,
        Some(ClientAddr {
            host: None,
            port: 2181
        })
    );
    assert_eq!(a.client_endpoint().as_deref(), Some("h:2181"));
    assert_eq!(p(&a.to_string()).unwrap(), a);
    let b = p("h:1:2:observer;0.0.0.0:2182").unwrap();
    assert_eq!(b.learner_type, LearnerType::Observer);
    assert_eq!(b.client_endpoint().as_deref(), Some("0.0.0.0:2182"));
    assert_eq!(p(&b.to_string()).unwrap(), b);
    let c = p("[::1]:1:2;[::1]:2183").unwrap();
    assert_eq!(c.client_endpoint().as_deref(), Some("[::1]:2183"));
    assert_eq!(p(&c.to_string()).unwrap(), c);
    assert_eq!(p("h:1:2").unwrap().client, None);
}

#[test]
fn unknown_key_is_named_with_line() {
    let err = parse(&with("maxClientCnxns=60")).unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownKey { key, line: 9 } if key == "maxClientCnxns"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "line 9: unknown key `maxClientCnxns`");
    let err = parse(&with("server.x=h:1:2")).unwrap_err();
    assert!(
        matches!(err, ConfigError::UnknownKey { line: 9, .. }),
        "{err:?}"
    );
}

#[test]
fn syntax_errors_name_the_line() {
    for text in ["tickTime 2000", "=5"] {
        let err = parse(&with(text)).unwrap_err();
        assert!(
            matches!(err, ConfigError::Syntax { line: 9, .. }),
            "{err:?}"
        );
    }
}

#[test]
fn duplicate_key_names_both_lines() {
    let err = parse(&with("tickTime=100")).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Duplicate { key, line: 9, first_line: 2 } if key == "tickTime"),
        "{err:?}"
    );
}

#[test]
fn bad_values_name_key_and_line() {
    let cases = [
        ("clientPort=99999", "clientPort"),
        ("snapCount=0", "snapCount"),
        ("snapCount=-1", "snapCount"),
        ("autopurge.snapRetainCount=2", "autopurge.snapRetainCount"),
        ("autopurge.snapRetainCount=x", "autopurge.snapRetainCount"),
        ("autopurge.purgeInterval=-3", "autopurge.purgeInterval"),
        ("preAllocSize=0", "preAllocSize"),
        ("preAllocSize=18446744073709551615", "preAllocSize"),
        ("forceSync=true", "forceSync"),
        ("clusterId=0xZZ", "clusterId"),
        ("dataLogDir=", "dataLogDir"),
        ("server.4=h:1", "server.4"),
        ("server.4=h:7:7", "server.4"),
    ];
    for (line_text, key) in cases {
        let err = parse(&with(line_text)).unwrap_err();
        assert_eq!(bad_value_key(&err), (key, 9), "{line_text}");
        assert!(err.to_string().contains(key), "{err}");
    }
    for (text, key) in [
        ("tickTime=0", "tickTime"),
        ("initLimit=ten", "initLimit"),
        ("syncLimit=", "syncLimit"),
        ("dataDir=", "dataDir"),
    ] {
        let replaced = BASE
            .lines()
            .map(|l| if l.starts_with(key) { text } else { l })
            .collect::<Vec<_>>()
            .join("\n");
        let err = parse(&replaced).unwrap_err();
        assert_eq!(bad_value_key(&err).0, key, "{text}");
    }
}

#[test]
fn missing_required_keys_are_named() {
    for key in ["tickTime", "initLimit", "syncLimit", "dataDir"] {
        let text: String = BASE
            .lines()
            .filter(|l| !l.starts_with(key))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = parse(&text).unwrap_err();
        assert!(
            matches!(err, ConfigError::Missing { key: k } if k == key),
            "{err:?}"
        );
        assert!(err.to_string().contains(key));
    }
    let no_servers: String = BASE
        .lines()
        .filter(|l| !l.starts_with("server."))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(matches!(
        parse(&no_servers).unwrap_err(),
        ConfigError::Missing { key: "server.N" }
    ));
}

#[test]
fn all_observers_is_an_error() {
    let text = "tickTime=1\ninitLimit=1\nsyncLimit=1\ndataDir=d\nserver.1=h:1:2:observer\n";
    assert!(matches!(
        parse(text).unwrap_err(),
        ConfigError::NoParticipants
    ));
}

#[test]
fn shared_addresses_are_refused() {
    let err = parse(&with("server.4=127.0.0.1:3888:4000")).unwrap_err();
    assert!(
        matches!(&err, ConfigError::AddressInUse { other: 1, line: 9, addr, .. }
            if addr == "127.0.0.1:3888"),
        "{err:?}"
    );
    // The same ports on another host are fine.
    assert!(parse(&with("server.4=127.0.0.2:2888:3888")).is_ok());
}

#[test]
fn extra_keys_are_returned_and_parsed() {
    let text = with("meta_delay_toleration_second=300\nmeta.dir = /meta\nmeta.port=x\n");
    assert!(matches!(
        parse(&text).unwrap_err(),
        ConfigError::UnknownKey { line: 9, .. }
    ));
    let cfg = parse_with(&text, &["meta_delay_toleration_second", "meta.*"]).unwrap();
    assert_eq!(cfg.extra.len(), 3);
    assert_eq!(
        cfg.extra_value::<u64>("meta_delay_toleration_second")
            .unwrap(),
        Some(300)
    );
    assert_eq!(
        cfg.extra_value::<String>("meta.dir").unwrap().as_deref(),
        Some("/meta")
    );
    assert_eq!(cfg.extra_value::<u64>("absent").unwrap(), None);
    let err = cfg.extra_value::<u16>("meta.port").unwrap_err();
    assert_eq!(bad_value_key(&err), ("meta.port", 11));
    // A prefix alone is not a key.
    assert!(parse_with(&with("meta.=1"), &["meta.*"]).is_err());
}

#[test]
fn to_core_carries_membership_and_limits() {
    let cfg = parse(&with("tickTime=100").replace("tickTime=2000\n", "")).unwrap();
    let core = cfg.to_core(ServerId(2)).unwrap();
    assert_eq!(core.sid, ServerId(2));
    assert_eq!(core.tick_ms, 100);
    assert_eq!((core.init_limit_ticks, core.sync_limit_ticks), (10, 5));
    assert_eq!(
        core.participants().collect::<Vec<_>>(),
        vec![ServerId(1), ServerId(2)]
    );
    assert_eq!(core.members[&ServerId(3)], LearnerType::Observer);
    assert_eq!(core.addresses, cfg.bootstrap_addresses());
    assert_eq!(core.addresses[&ServerId(3)], "127.0.0.1:2890:3890:observer");
    assert!(matches!(
        cfg.to_core(ServerId(9)).unwrap_err(),
        ConfigError::NotAMember { sid: 9 }
    ));
}

#[test]
fn files_and_myid_are_read() {
    let dir = std::env::temp_dir().join(format!("zab-net-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg_path = dir.join("zoo.cfg");
    std::fs::write(&cfg_path, BASE).unwrap();
    assert_eq!(load(&cfg_path, &[]).unwrap().servers.len(), 3);
    assert!(matches!(
        load(&dir.join("absent.cfg"), &[]).unwrap_err(),
        ConfigError::Io { .. }
    ));
    assert!(matches!(
        read_myid(&dir).unwrap_err(),
        ConfigError::Io { .. }
    ));
    std::fs::write(dir.join("myid"), "2\n").unwrap();
    assert_eq!(read_myid(&dir).unwrap(), ServerId(2));
    std::fs::write(dir.join("myid"), "two").unwrap();
    assert!(matches!(
        read_myid(&dir).unwrap_err(),
        ConfigError::BadValue { .. }
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
