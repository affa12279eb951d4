//! The replicated state machine: what every node holds and how committed journal entries
//! change it. Nothing here knows about sockets, clocks or the node runtime except
//! [`machine`], which plugs the state into zab-net's `StateMachine`.
//!
//! - [`catalog`]: the metadata as one immutable version (databases, tables, backends,
//!   frontends, sessions), published atomically for readers ([`catalog::SharedCatalog`]).
//! - [`journal`]: the edit log's entries (`JournalEntry`, `Op`), one per ZAB txn, and their
//!   binary codec.
//! - [`replay`]: `apply(catalog, journal id, entry) -> catalog'`, a pure function (INV-1 of
//!   the crate), with a typed outcome per entry.
//! - [`outcomes`]: the recent entries replay ignored, for the write path's answers.
//! - [`image`]: the catalog streamed as a ZAB snapshot, and read back verified.
//! - [`backup`]: a backup file (one image with its journal id, digest and source cluster),
//!   written and verified.
//! - [`machine`]: apply / snapshot / restore with the published version and its hooks.
//! - [`memory`]: the allocator hook that returns a replaced catalog's memory after a restore.

pub mod backup;
pub mod catalog;
pub mod image;
pub mod journal;
pub mod machine;
pub mod memory;
pub mod outcomes;
pub mod replay;
