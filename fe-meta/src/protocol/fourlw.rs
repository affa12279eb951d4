//! ZooKeeper's four-letter words on the client port, for monitoring scripts.
//!
//! A connection whose first four bytes are `ruok`, `srvr`, `stat` or `mntr` gets a text answer
//! and is closed (as in ZooKeeper); any other four lowercase letters are refused in text
//! ([`refuse_unknown_word`]). Field names follow ZooKeeper where they apply (`Zxid`,
//! `Mode`, `Node count` = catalog entries; `zk_*` keys in `mntr`); fe-meta's own fields carry
//! `fe_meta_` prefixes in `mntr`. Full output format: `docs/PROTOCOL.md` §8.
//!
//! A node that stopped on a fatal error (it is about to exit) answers `ruok` with nothing and
//! `srvr`, `stat` and `mntr` with one line saying so and why, as ZooKeeper answers a server
//! that is not running: a monitor that waits for `imok` or parses `Mode:` sees no healthy node.
//!
//! INV-1: rendering is a pure function of [`ServerStats`]; the output is ASCII, one field per
//! line, `\n` line ends.

use std::fmt::Write;
use zab_net::Zxid;

use zab_net::SyncCounters;

/// A four-letter word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FourLetterWord {
    /// `ruok`: answers `imok` (nothing once the node stopped on a fatal error).
    Ruok,
    /// `srvr`: server summary.
    Srvr,
    /// `stat`: summary plus connected clients.
    Stat,
    /// `mntr`: tab-separated key/value lines.
    Mntr,
}

impl FourLetterWord {
    /// The word for these four bytes, if they are one.
    pub fn parse(bytes: [u8; 4]) -> Option<FourLetterWord> {
        match &bytes {
            b"ruok" => Some(FourLetterWord::Ruok),
            b"srvr" => Some(FourLetterWord::Srvr),
            b"stat" => Some(FourLetterWord::Stat),
            b"mntr" => Some(FourLetterWord::Mntr),
            _ => None,
        }
    }
}

/// The answer to four lowercase letters that are no word this server answers.
pub fn refuse_unknown_word(word: [u8; 4]) -> String {
    let word: String = word.iter().map(|b| char::from(*b)).collect();
    format!("{word} is not executed because it is not a four-letter word of this server (ruok, srvr, stat, mntr)\n")
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
    /// Request latency, ms.
    pub latency_min_ms: u64,
    /// Request latency, ms.
    pub latency_avg_ms: f64,
    /// Request latency, ms.
    pub latency_max_ms: u64,
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

/// The text answer to `word`.
pub fn render(word: FourLetterWord, s: &ServerStats) -> String {
    if let Some(reason) = &s.fatal {
        return match word {
            FourLetterWord::Ruok => String::new(),
            FourLetterWord::Srvr | FourLetterWord::Stat | FourLetterWord::Mntr => {
                not_serving(reason)
            }
        };
    }
    match word {
        FourLetterWord::Ruok => "imok".to_owned(),
        FourLetterWord::Srvr => summary(s, false),
        FourLetterWord::Stat => summary(s, true),
        FourLetterWord::Mntr => mntr(s),
    }
}

/// The answer of a node that stopped on a fatal error: one line, ASCII only (INV-1).
fn not_serving(reason: &str) -> String {
    let reason: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect();
    format!("This fe-meta node is not serving requests: it stopped on a fatal error and is exiting: {reason}\n")
}

fn summary(s: &ServerStats, with_clients: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Zookeeper version: fe-meta {}", s.version);
    if with_clients {
        out.push_str("Clients:\n");
        for c in &s.clients {
            let _ = writeln!(
                out,
                " /{}[1](queued={},recved={},sent={})",
                c.addr, c.queued, c.received, c.sent
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{:.4}/{}",
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

fn mntr(s: &ServerStats) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(out, "{k}\t{v}");
    };
    kv("zk_version", &format!("fe-meta {}", s.version));
    kv("zk_server_state", &s.mode.name());
    kv("zk_avg_latency", &format!("{:.4}", s.latency_avg_ms));
    kv("zk_max_latency", &s.latency_max_ms);
    kv("zk_min_latency", &s.latency_min_ms);
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
            latency_min_ms: 0,
            latency_avg_ms: 1.5,
            latency_max_ms: 9,
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
        assert_eq!(render(FourLetterWord::Ruok, &s), "");
        for word in [
            FourLetterWord::Srvr,
            FourLetterWord::Stat,
            FourLetterWord::Mntr,
        ] {
            let text = render(word, &s);
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
        assert_eq!(render(FourLetterWord::Ruok, &s), "imok");
        let srvr = render(FourLetterWord::Srvr, &s);
        assert!(srvr.contains("Zxid: 0x300000007\n"), "{srvr}");
        assert!(srvr.contains("Mode: leader\n") && srvr.contains("Node count: 5\n"));
        let stat = render(FourLetterWord::Stat, &s);
        assert!(stat.contains("Clients:\n /127.0.0.1:5000[1](queued=1,recved=10,sent=9)\n"));
        let mntr = render(FourLetterWord::Mntr, &s);
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
    }
}
