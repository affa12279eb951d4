//! The four-letter words' text, field by field.

use super::*;

fn stats() -> ServerStats {
    let mut syncs_sent = SyncCounters::default();
    (syncs_sent.diff, syncs_sent.trunc, syncs_sent.snap) = (4, 1, 2);
    ServerStats {
        version: "0.1.0".into(),
        sid: 2,
        mode: Mode::Leader,
        epoch: 3,
        zxid: Zxid(0x3_0000_0007),
        node_count: 5,
        latency_min_ms: 0.125,
        latency_avg_ms: 1.5,
        latency_max_ms: 9.0,
        received: 10,
        sent: 9,
        connections: 1,
        outstanding: 1,
        staleness_ms: Some(12),
        followers: Some((2, 2)),
        clients: vec![ClientStats {
            addr: "127.0.0.1:5000".into(),
            queued: 1,
            received: 10,
            sent: 9,
        }],
        syncs_sent,
        syncs_received: SyncCounters::default(),
        initialized: true,
        fatal: None,
        config_version: Zxid(0x3_0000_0002),
    }
}

#[test]
fn a_stopped_node_says_so_and_never_imok() {
    let mut s = stats();
    s.fatal = Some("txn log failed: preallocate /d/log.1.tmp: No space left on device".into());
    assert_eq!(render(FourLetterWord::Ruok, &s, &WordExtras::default()), "");
    for word in FourLetterWord::ALL.into_iter().skip(1) {
        let text = render(word, &s, &WordExtras::default());
        assert_eq!(
            text,
            "This fe-meta node is not serving requests: it stopped on a fatal error and is \
             exiting: txn log failed: preallocate /d/log.1.tmp: No space left on device\n"
        );
        assert!(!text.contains("Mode") && !text.contains("zk_server_state"));
    }
}

#[test]
fn outputs_carry_zookeeper_fields() {
    let s = stats();
    let x = WordExtras {
        metrics: vec![
            ("fe_meta_staleness_ms".into(), "-1".into()),
            ("zab_commits_total".into(), "12".into()),
        ],
        ..WordExtras::default()
    };
    assert_eq!(
        render(FourLetterWord::Ruok, &s, &WordExtras::default()),
        "imok"
    );
    let srvr = render(FourLetterWord::Srvr, &s, &x);
    assert!(srvr.contains("Zxid: 0x300000007\n"), "{srvr}");
    assert!(srvr.contains("Mode: leader\n") && srvr.contains("Node count: 5\n"));
    let stat = render(FourLetterWord::Stat, &s, &x);
    assert!(stat.contains("Clients:\n /127.0.0.1:5000[1](queued=1,recved=10,sent=9)\n"));
    let mntr = render(FourLetterWord::Mntr, &s, &x);
    assert!(mntr.contains("zk_server_state\tleader\n") && mntr.contains("zk_znode_count\t5\n"));
    assert!(mntr.contains("zk_synced_followers\t2\n") && mntr.contains("fe_meta_staleness_ms\t12"));
    assert!(
        mntr.contains("fe_meta_sync_sent_diff\t4\n")
            && mntr.contains("fe_meta_sync_sent_trunc\t1\n")
            && mntr.contains("fe_meta_sync_sent_snap\t2\n")
            && mntr.contains("fe_meta_sync_received_snap\t0\n")
            && mntr.contains("fe_meta_zab_initialized\t1\n")
            && mntr.contains("fe_meta_config_version\t0x300000002\n"),
        "{mntr}"
    );
    assert!(srvr.contains("Zab initialized: 1\n"), "{srvr}");
    assert!(
        srvr.contains("Latency min/avg/max: 0.125/1.5000/9.000\n"),
        "{srvr}"
    );
    assert!(
        mntr.contains("zk_min_latency\t0.125\n")
            && mntr.contains("fe_meta_latency_min_us\t125\n")
            && mntr.ends_with("zab_commits_total\t12\n"),
        "{mntr}"
    );
}

#[test]
fn every_word_has_its_letters_and_admin_name() {
    for w in FourLetterWord::ALL {
        let mut letters = [0u8; 4];
        letters.copy_from_slice(w.word().as_bytes());
        assert_eq!(FourLetterWord::parse(letters), Some(w));
        assert_eq!(FourLetterWord::from_name(w.word()), Some(w));
        assert_eq!(FourLetterWord::from_name(w.command_name()), Some(w));
    }
    assert_eq!(
        FourLetterWord::from_name("monitor"),
        Some(FourLetterWord::Mntr)
    );
    assert_eq!(FourLetterWord::parse(*b"kill"), None);
    assert_eq!(
        refuse_unlisted_word(FourLetterWord::Conf),
        "conf is not executed because it is not in the whitelist.\n"
    );
}

#[test]
fn the_new_words_answer_as_zookeeper_does() {
    let s = stats();
    let x = WordExtras {
        conf: vec![("clientPort".into(), "9030".into())],
        env: vec![("os.name".into(), "Linux".into())],
        dir_sizes: (4096, 67108864),
        read_only: true,
        ..WordExtras::default()
    };
    let r = |w| render(w, &s, &x);
    assert_eq!(r(FourLetterWord::Conf), "clientPort=9030\n");
    assert_eq!(
        r(FourLetterWord::Cons),
        " /127.0.0.1:5000[1](queued=1,recved=10,sent=9)\n\n"
    );
    assert_eq!(r(FourLetterWord::Envi), "Environment:\nos.name=Linux\n");
    assert_eq!(
        r(FourLetterWord::Dirs),
        "datadir_size: 4096\nlogdir_size: 67108864\n"
    );
    assert_eq!(r(FourLetterWord::Isro), "ro");
    assert_eq!(r(FourLetterWord::Srst), "Server stats reset.\n");
    assert!(r(FourLetterWord::Wchs).starts_with("0 connections watching 0 paths\n"));
}
