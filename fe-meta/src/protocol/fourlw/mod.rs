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
    let mut keys = std::collections::BTreeSet::new();
    let mut kv = |k: &str, v: &dyn std::fmt::Display| {
        // A registry line whose name the fixed part has already is not repeated.
        if keys.insert(k.to_owned()) {
            let _ = writeln!(out, "{k}\t{v}");
        }
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
mod tests;
