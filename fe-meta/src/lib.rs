//! fe-meta: a replicated metadata service in the style of the Doris / StarRocks frontends, built
//! on the ZAB engine of this workspace.
//!
//! Every node holds the whole metadata in memory as an immutable [`catalog::Catalog`] version.
//! The leader turns a client's [`command::Command`] into a [`journal::JournalEntry`] after
//! validating it against the catalog ([`command::Planner`]); the entry is replicated as one ZAB
//! txn whose zxid is its journal id; every node applies committed entries in order with
//! [`replay::apply`] and publishes the new version ([`catalog::SharedCatalog`]). Images
//! ([`image`]) are the catalog streamed into a ZAB snapshot, and [`state_machine::MetaState`]
//! ties apply / snapshot / restore together in the shape of zab-net's `StateMachine`;
//! [`meta_dir`] keeps the node's `VERSION` and `ROLE` files; [`protocol`] is the client
//! protocol (`docs/PROTOCOL.md`).
//!
//! ```text
//! client ─Request─▶ leader: Planner::plan(cmd) ─JournalEntry─▶ ZAB submit ─commit─▶ every node:
//!                   replay::apply(catalog', zxid, entry) ─▶ SharedCatalog::publish ─▶ readers
//! ```
//!
//! # For the server (what this crate leaves to the running node)
//! - State machine: implement zab-net's `StateMachine` by delegating to
//!   [`state_machine::MetaState`] (`apply`, `snapshot` + [`state_machine::CatalogSnapshot::write_to`],
//!   `restore`); its `on_applied` hook wakes read-your-writes waiters (`journal_id >= target`)
//!   and, when `last_timestamp_ms` changed, calls [`staleness::StalenessGuard::observe`].
//! - Writes on the leader: `Planner::plan(cmd)` → submit `planned.entry.encode()` → on commit
//!   answer with what replay did ([`state_machine::MetaState::set_outcomes`],
//!   [`outcomes::RecentOutcomes`]): `Written { journal_id: zxid, created_id }` if applied, the
//!   conflict's typed error if ignored. An entry stays pending in the planner until the node
//!   answers it (`Planner::settled` / `Planner::failed`) or the epoch changes
//!   (`Planner::new_epoch`), never because a client gave up. Elsewhere: forward, then wait for
//!   the returned journal id (no locks held).
//! - Reads: [`protocol::answer_catalog_read`] after the sync flag and the staleness check;
//!   STATUS, SHOW_FRONTENDS, SYNC and the four-letter words need node facts.
//! - Start-up: [`meta_dir::MetaDir::open`] before anything else; refuse to start on error.
//!
//! Crate-wide invariants (each module lists its own):
//! - INV-1: replay is a pure function of (catalog, entry) — no clock, RNG or I/O (`replay`).
//! - INV-2: nothing is ever skipped: an undecodable entry stops replay naming its journal id.
//! - INV-3: validation happens only before logging; replay never rejects a decodable entry.
//! - INV-4: no decoder (journal, image, protocol) panics or allocates beyond its stated bounds
//!   on any input.

pub mod catalog;
pub mod cli;
pub mod client;
pub mod command;
pub mod error;
pub mod image;
pub mod journal;
pub mod meta_dir;
pub mod outcomes;
pub mod protocol;
pub mod replay;
pub mod server;
pub mod staleness;
pub mod state_machine;
pub mod wire;

pub use catalog::{Catalog, SharedCatalog};

pub use command::{Command, CommandError, Planned, Planner};
pub use error::MetaError;
pub use journal::{JournalEntry, Op, OpCode};
pub use replay::{apply, ReplayError};
pub use state_machine::{CatalogSnapshot, MetaState};
