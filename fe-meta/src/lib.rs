//! fe-meta: a replicated metadata service in the style of the Doris / StarRocks frontends, built
//! on the ZAB engine of this workspace (through zab-net, its embedding API).
//!
//! The crate's folders follow the design:
//!
//! | module | what it is | runs where |
//! |---|---|---|
//! | [`state`] | the replicated state machine: catalog, journal entries, replay, images | every node |
//! | [`command`] | the write vocabulary ([`Command`]) and the leader's [`Planner`] | client, leader |
//! | [`protocol`] | the client protocol's codec (`docs/PROTOCOL.md`), sans-I/O | client, server |
//! | [`server`] | the running node: ZAB node, client port, forwarding, staleness, data dir | server |
//! | [`client`] | the async client library (also how a node forwards to another) | applications, the CLI, server |
//! | [`wire`] | the byte-level codec primitives shared by journal, image and protocol | all |
//!
//! The `fe-meta` command (server process, client commands, local cluster, benchmark) is the
//! fe-meta-cli package; its dependencies (argument parsing, JSON output, process control) are
//! not this library's.
//!
//! Every node holds the whole metadata in memory as an immutable [`Catalog`] version. The
//! leader turns a client's [`Command`] into a [`JournalEntry`] after validating it against the
//! catalog ([`Planner`]); the entry is replicated as one ZAB txn whose zxid is its journal id;
//! every node applies committed entries in order with [`apply`] and publishes the new version
//! ([`SharedCatalog`]). See `ARCHITECTURE.md` at the repository root for the whole path of a
//! write.
//!
//! ```text
//! client ─Request─▶ leader: Planner::plan(cmd) ─JournalEntry─▶ ZAB submit ─commit─▶ every node:
//!                   replay::apply(catalog', zxid, entry) ─▶ SharedCatalog::publish ─▶ readers
//! ```
//!
//! Crate-wide invariants (each module lists its own):
//! - INV-1: replay is a pure function of (catalog, entry) — no clock, RNG or I/O (`replay`).
//! - INV-2: nothing is ever skipped: an undecodable entry stops replay naming its journal id.
//! - INV-3: validation happens only before logging; replay never rejects a decodable entry.
//! - INV-4: no decoder (journal, image, protocol) panics or allocates beyond its stated bounds
//!   on any input.

pub mod client;
pub mod command;
pub mod error;
pub mod protocol;
pub mod server;
pub mod state;
pub mod wire;

pub use state::catalog::{Catalog, SharedCatalog};
/// A journal id is the zxid of the ZAB txn that carries the entry: its leader's epoch and a
/// counter within it.
pub use zab_net::{Epoch, Zxid};

pub use command::{Command, CommandError, NodeCommand, Planned, Planner, Write};
pub use error::MetaError;
pub use state::journal::{JournalEntry, Op, OpCode};
pub use state::machine::{CatalogSnapshot, MetaState};
pub use state::replay::{apply, ReplayError};
