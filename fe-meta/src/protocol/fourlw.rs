//! ZooKeeper's four-letter words on the client port, for monitoring scripts.
//!
//! A connection whose first four bytes are a word of [`FourLetterWord::ALL`] gets a text
//! answer and is closed (as in ZooKeeper); a word off the server's whitelist
//! (`4lw.commands.whitelist`) is refused in text ([`refuse_unlisted_word`]), and any other
//! four lowercase letters too ([`refuse_unknown_word`]). Field names follow ZooKeeper where
//! they apply (`Zxid`, `Mode`, `Node count` = catalog entries; `zk_*` keys in `mntr`, whose
//! latencies are ms with a fraction); `mntr` then lists every counter and gauge of the node's
//! metrics registry (`zab_*`, `fe_meta_*`, `process_*`). Full output format:
//! `docs/PROTOCOL.md` §8. The same words are served as JSON on the admin port, under
//! ZooKeeper AdminServer's names ([`FourLetterWord::command_name`]).
//!
//! A node that stopped on a fatal error (it is about to exit) answers `ruok` with nothing and
//! every other word with one line saying so and why, as ZooKeeper answers a server that is
//! not running: a monitor that waits for `imok` or parses `Mode:` sees no healthy node.
//!
//! INV-1: rendering is a pure function of [`ServerStats`] and [`WordExtras`]; the output is
//! ASCII, one field per line, `\n` line ends.

use std::fmt::Write;
use zab_net::Zxid;

use zab_net::SyncCounters;

/// Declares the words from one table: the variants, [`FourLetterWord::ALL`], the 4-letter
/// text and ZooKeeper AdminServer's command name.
macro_rules! four_letter_words {
    ($($(#[$doc:meta])* $variant:ident = $word:literal, $name:literal;)*) => {
        /// A four-letter word.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum FourLetterWord {
            $($(#[$doc])* $variant,)*
        }

        impl FourLetterWord {
            /// Every word, in the order `docs/PROTOCOL.md` §8 lists them.
            pub const ALL: [FourLetterWord; [$($word),*].len()] = [$(FourLetterWord::$variant),*];

            /// The four letters.
            pub fn word(self) -> &'static str {
                match self {
                    $(FourLetterWord::$variant => $word,)*
                }
            }

            /// ZooKeeper AdminServer's name of the command (`GET /commands/<name>`).
            pub fn command_name(self) -> &'static str {
                match self {
                    $(FourLetterWord::$variant => $name,)*
                }
            }
        }
    };
}

four_letter_words! {
    /// `ruok`: answers `imok` (nothing once the node stopped on a fatal error).
    Ruok = "ruok", "ruok";
    /// `srvr`: server summary.
    Srvr = "srvr", "server_stats";
    /// `stat`: summary plus connected clients.
    Stat = "stat", "stats";
    /// `mntr`: tab-separated key/value lines, then every metric of the registry.
    Mntr = "mntr", "monitor";
    /// `conf`: the configuration in force, `key=value` lines.
    Conf = "conf", "configuration";
    /// `cons`: the open client connections.
    Cons = "cons", "connections";
    /// `srst`: resets the request counts and latencies of `srvr`/`stat`/`mntr`.
    Srst = "srst", "stat_reset";
    /// `envi`: the process's environment (version, host, OS, user, directories).
    Envi = "envi", "environment";
    /// `dirs`: the sizes of the data and txn log directories, bytes.
    Dirs = "dirs", "dirs";
    /// `isro`: `rw` when writes are possible, else `ro`.
    Isro = "isro", "is_read_only";
    /// `wchs`: the watch summary (fe-meta has no watches).
    Wchs = "wchs", "watch_summary";
}

impl FourLetterWord {
    /// The word for these four bytes, if they are one.
    pub fn parse(bytes: [u8; 4]) -> Option<FourLetterWord> {
        FourLetterWord::ALL
            .into_iter()
            .find(|w| w.word().as_bytes() == bytes)
    }

    /// The word named `name`: its four letters or its command name.
    pub fn from_name(name: &str) -> Option<FourLetterWord> {
        FourLetterWord::ALL
            .into_iter()
            .find(|w| w.word() == name || w.command_name() == name)
    }
}

/// The answer to four lowercase letters that are no word this server answers.
pub fn refuse_unknown_word(word: [u8; 4]) -> String {
    let word: String = word.iter().map(|b| char::from(*b)).collect();
    let known: Vec<&str> = FourLetterWord::ALL.iter().map(|w| w.word()).collect();
    format!(
        "{word} is not executed because it is not a four-letter word of this server ({})\n",
        known.join(", ")
    )
}

/// The answer to a word that is not in the whitelist (ZooKeeper's text).
pub fn refuse_unlisted_word(word: FourLetterWord) -> String {
    format!(
        "{} is not executed because it is not in the whitelist.\n",
        word.word()
    )
}

/// What some words report besides [`ServerStats`]; the server fills in what the word needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WordExtras {
    /// `mntr`: every counter and gauge of the metrics registry, `name{labels}` → value.
    pub metrics: Vec<(String, String)>,
    /// `conf`: the configuration in force, key → value.
    pub conf: Vec<(String, String)>,
    /// `envi`: the environment, key → value.
    pub env: Vec<(String, String)>,
    /// `dirs`: bytes in the data dir and in the txn log dir.
    pub dir_sizes: (u64, u64),
    /// `isro`: false when writes are possible (a serving leader, or a learner with one).
    pub read_only: bool,
}

/// A node's role as four-letter words and the status request show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Electing; not serving writes.
    Looking,
    /// Following the leader.
    Follower,
    /// The leader.
    Leader,
    /// Observing the leader.
    Observer,
}

impl Mode {
    /// The wire tag (status response).
    pub fn tag(self) -> u8 {
        match self {
            Mode::Looking => 0,
            Mode::Follower => 1,
            Mode::Leader => 2,
            Mode::Observer => 3,
        }
    }

    /// The mode with wire tag `tag`.
    pub fn from_tag(tag: u8) -> Option<Mode> {
        match tag {
            0 => Some(Mode::Looking),
            1 => Some(Mode::Follower),
            2 => Some(Mode::Leader),
            3 => Some(Mode::Observer),
            _ => None,
        }
    }

    /// ZooKeeper's name: `looking`, `follower`, `leader`, `observer`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Looking => "looking",
            Mode::Follower => "follower",
            Mode::Leader => "leader",
            Mode::Observer => "observer",
        }
    }
}

/// One connected client, for `stat`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientStats {
    /// `ip:port`.
    pub addr: String,
    /// Requests in flight.
    pub queued: u64,
    /// Requests received.
    pub received: u64,
    /// Responses sent.
    pub sent: u64,
}

/// What the four-letter words report; the server fills it in.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStats {
    /// Software version, e.g. `0.1.0`.
    pub version: String,
    /// This node's server id.
    pub sid: u64,
    /// Its role.
    pub mode: Mode,
    /// The ZAB epoch it is in.
    pub epoch: u64,
    /// Last applied zxid (= journal id).
    pub zxid: Zxid,
    /// Catalog entries (`Catalog::entry_count`).
    pub node_count: u64,
    /// Request latency since the start or `srst`, ms with a fraction (µs resolution).
    pub latency_min_ms: f64,
    /// Request latency, ms.
    pub latency_avg_ms: f64,
    /// Request latency, ms.
    pub latency_max_ms: f64,
    /// Requests received.
    pub received: u64,
    /// Responses sent.
    pub sent: u64,
    /// Open client connections.
    pub connections: u64,
    /// Requests in flight.
    pub outstanding: u64,
    /// How far the replayed catalog lags the leader's clock (ms), when known.
    pub staleness_ms: Option<u64>,
    /// On the leader: followers connected, and those in sync.
    pub followers: Option<(u64, u64)>,
    /// Connected clients (`stat` only).
    pub clients: Vec<ClientStats>,
    /// False while the data dir still needs its first sync from a leader (the node does not
    /// vote; PITFALLS B9).
    pub initialized: bool,
    /// How this node brought learners in sync while it led (since the process started).
    pub syncs_sent: SyncCounters,
    /// How this node was brought in sync as a learner (since the process started).
    pub syncs_received: SyncCounters,
    /// The fatal error the node stopped on (the process is exiting), if any.
    pub fatal: Option<String>,
    /// The version of the node's committed cluster configuration (0: zoo.cfg's bootstrap one).
    pub config_version: Zxid,
}

/// The text answer to `word` (for `srst`, the server has reset its counters already).
pub fn render(word: FourLetterWord, s: &ServerStats, x: &WordExtras) -> String {
    if let Some(reason) = &s.fatal {
        return match word {
            FourLetterWord::Ruok => String::new(),
            _ => not_serving(reason),
        };
    }
    match word {
        FourLetterWord::Ruok => "imok".to_owned(),
        FourLetterWord::Srvr => summary(s, false),
        FourLetterWord::Stat => summary(s, true),
        FourLetterWord::Mntr => mntr(s, &x.metrics),
        FourLetterWord::Conf => key_values(&x.conf, "="),
        FourLetterWord::Cons => {
            let mut out = String::new();
            clients(&mut out, &s.clients);
            out.push('\n');
            out
        }
        FourLetterWord::Srst => "Server stats reset.\n".to_owned(),
        FourLetterWord::Envi => format!("Environment:\n{}", key_values(&x.env, "=")),
        FourLetterWord::Dirs => format!(
            "datadir_size: {}\nlogdir_size: {}\n",
            x.dir_sizes.0, x.dir_sizes.1
        ),
        FourLetterWord::Isro => if x.read_only { "ro" } else { "rw" }.to_owned(),
        FourLetterWord::Wchs => "0 connections watching 0 paths\nTotal watches:0\n\
                                 (fe-meta has no watches: clients poll, or read with the sync \
                                 flag)\n"
            .to_owned(),
    }
}

/// `key{sep}value` lines, non-ASCII replaced (INV-1).
fn key_values(kv: &[(String, String)], sep: &str) -> String {
    let mut out = String::new();
    for (k, v) in kv {
        let _ = writeln!(out, "{}{sep}{}", ascii(k), ascii(v));
    }
    out
}

fn ascii(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

fn clients(out: &mut String, clients: &[ClientStats]) {
    for c in clients {
        let _ = writeln!(
            out,
            " /{}[1](queued={},recved={},sent={})",
            c.addr, c.queued, c.received, c.sent
        );
    }
}

/// The answer of a node that stopped on a fatal error: one line, ASCII only (INV-1).
fn not_serving(reason: &str) -> String {
    let reason = ascii(reason);
    format!("This fe-meta node is not serving requests: it stopped on a fatal error and is exiting: {reason}\n")
}

fn summary(s: &ServerStats, with_clients: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Zookeeper version: fe-meta {}", s.version);
    if with_clients {
        out.push_str("Clients:\n");
        clients(&mut out, &s.clients);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Latency min/avg/max: {:.3}/{:.4}/{:.3}",
        s.latency_min_ms, s.latency_avg_ms, s.latency_max_ms
    );
    let _ = writeln!(out, "Received: {}", s.received);
    let _ = writeln!(out, "Sent: {}", s.sent);
    let _ = writeln!(out, "Connections: {}", s.connections);
    let _ = writeln!(out, "Outstanding: {}", s.outstanding);
    let _ = writeln!(out, "Zxid: {}", s.zxid);
    let _ = writeln!(out, "Mode: {}", s.mode.name());
    let _ = writeln!(out, "Node count: {}", s.node_count);
    let _ = writeln!(out, "Zab initialized: {}", u8::from(s.initialized));
    out
}

fn mntr(s: &ServerStats, metrics: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(out, "{k}\t{v}");
    };
    kv("zk_version", &format!("fe-meta {}", s.version));
    kv("zk_server_state", &s.mode.name());
    kv("zk_avg_latency", &format!("{:.4}", s.latency_avg_ms));
    kv("zk_max_latency", &format!("{:.3}", s.latency_max_ms));
    kv("zk_min_latency", &format!("{:.3}", s.latency_min_ms));
    kv(
        "fe_meta_latency_avg_us",
        &format!("{:.1}", s.latency_avg_ms * 1000.0),
    );
    kv(
        "fe_meta_latency_max_us",
        &format!("{:.0}", s.latency_max_ms * 1000.0),
    );
    kv(
        "fe_meta_latency_min_us",
        &format!("{:.0}", s.latency_min_ms * 1000.0),
    );
    kv("zk_packets_received", &s.received);
    kv("zk_packets_sent", &s.sent);
    kv("zk_num_alive_connections", &s.connections);
    kv("zk_outstanding_requests", &s.outstanding);
    kv("zk_znode_count", &s.node_count);
    if let Some((followers, synced)) = s.followers {
        kv("zk_followers", &followers);
        kv("zk_synced_followers", &synced);
    }
    kv("fe_meta_sid", &s.sid);
    kv("fe_meta_epoch", &s.epoch);
    kv("fe_meta_zxid", &s.zxid);
    kv("fe_meta_applied_journal_id", &s.zxid.0);
    kv("fe_meta_zab_initialized", &u8::from(s.initialized));
    kv("fe_meta_config_version", &s.config_version);
    if let Some(ms) = s.staleness_ms {
        kv("fe_meta_staleness_ms", &ms);
    }
    for (dir, c) in [("sent", &s.syncs_sent), ("received", &s.syncs_received)] {
        kv(&format!("fe_meta_sync_{dir}_diff"), &c.diff);
        kv(&format!("fe_meta_sync_{dir}_trunc"), &c.trunc);
        kv(&format!("fe_meta_sync_{dir}_snap"), &c.snap);
    }
    for (k, v) in metrics {
        kv(&ascii(k), &ascii(v));
    }
    out
}

#[cfg(test)]
mod tests {
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
            metrics: vec![("zab_commits_total".into(), "12".into())],
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
        assert!(
            mntr.contains("zk_synced_followers\t2\n") && mntr.contains("fe_meta_staleness_ms\t12")
        );
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
}
