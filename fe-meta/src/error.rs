//! `MetaError`: every failure of this crate in one enum, for callers that handle them
//! together (the server). Each module's own error keeps its detail; this wraps them.
//!
//! INV-1: every variant's message says what failed and where (journal id, file, field), so it
//! can be shown to an operator as is.

use std::io;

use thiserror::Error;

use crate::command::CommandError;
use crate::protocol::{FrameTooLong, ProtocolError};
use crate::server::meta_dir::MetaDirError;
use crate::state::image::ImageError;
use crate::state::journal::JournalError;
use crate::state::replay::ReplayError;

/// Any fe-meta failure.
#[derive(Debug, Error)]
pub enum MetaError {
    /// A journal entry does not decode.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Replay stopped.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A command was refused (nothing logged).
    #[error(transparent)]
    Command(#[from] CommandError),
    /// An image could not be written or read.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The data dir's identity files refuse the start.
    #[error(transparent)]
    MetaDir(#[from] MetaDirError),
    /// A client frame does not decode.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A client frame is too long.
    #[error(transparent)]
    FrameTooLong(#[from] FrameTooLong),
    /// Other I/O.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}
