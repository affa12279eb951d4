//! The CLI's exit codes, one per kind of failure (listed in `fe-meta --help`).
//!
//! INV: server errors exit with 10 + their protocol status code (`docs/PROTOCOL.md` §7), so a
//! script can tell "not found" from "no quorum" without parsing text; the statuses, their
//! names and meanings come from one table, `fe_meta::protocol::Status`, and so does the help
//! text's list of them ([`help_text`]).

use std::fmt::Write as _;

use fe_meta::client::ClientError;
use fe_meta::protocol::Status;

/// The exit code of a server error is this plus its status code.
pub const STATUS_BASE: u8 = 10;

/// An exit code of `fe-meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// 0.
    Success,
    /// 1: anything not listed below.
    Other,
    /// 2: bad command line (clap's own code).
    Usage,
    /// 3: cannot connect, or the connection was lost.
    Connection,
    /// 4: `fe-meta server`: the node stopped on a fatal error (txn log, epoch file, SNAP
    /// install, state machine); fix what the ERROR line names and start it again
    /// ([`fe_meta::server::FATAL_EXIT_STATUS`]).
    NodeFatal,
    /// 5: an answer that does not decode.
    Protocol,
    /// 6: `fe-meta server`: this server is not a member of the cluster any more — it was
    /// removed while running (it closed its client port and exited), or its data dir is that
    /// of a removed server (it refused to start; the message says how to add it again). A
    /// supervisor must not restart it with this data dir
    /// ([`fe_meta::server::REMOVED_EXIT_STATUS`]).
    Removed,
    /// 7: `fe-meta server`: the data dir cannot be read (a corrupt txn log, snapshot or epoch
    /// file, a gap in the log); the node refuses to start, and will refuse every time until
    /// the node is resynced from the cluster, so a supervisor must not restart it.
    DataDirDamaged,
    /// 10 + the status code: the server answered with this status (TIMEOUT also when the
    /// client gave up waiting).
    Status(Status),
}

impl ExitCode {
    /// The numeric code.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Other => 1,
            ExitCode::Usage => 2,
            ExitCode::Connection => 3,
            ExitCode::NodeFatal => fe_meta::server::FATAL_EXIT_STATUS,
            ExitCode::Protocol => 5,
            ExitCode::Removed => fe_meta::server::REMOVED_EXIT_STATUS,
            ExitCode::DataDirDamaged => 7,
            ExitCode::Status(s) => {
                STATUS_BASE.saturating_add(u8::try_from(s.code()).unwrap_or(u8::MAX - STATUS_BASE))
            }
        }
    }
}

impl From<&ClientError> for ExitCode {
    fn from(e: &ClientError) -> ExitCode {
        match e {
            ClientError::Connect { .. }
            | ClientError::Closed { .. }
            | ClientError::AllEndpointsFailed { .. } => ExitCode::Connection,
            ClientError::Timeout { .. } | ClientError::WindowFull { .. } => {
                ExitCode::Status(Status::Timeout)
            }
            ClientError::Protocol(_) => ExitCode::Protocol,
            ClientError::Server(reply) => ExitCode::Status(reply.status),
        }
    }
}

/// The "Exit codes" section of `fe-meta --help`.
pub fn help_text() -> String {
    let mut text = String::from(
        "\
Exit codes:
  0   success
  1   other failure (local I/O, a node of local-cluster failed to start, ...)
  2   bad command line
  3   cannot connect to the server, or the connection was lost
  4   server: the node stopped on a fatal error (disk full, I/O error, ...); the ERROR line
      says what failed, which file, and what to do; fix it and start the node again
  5   malformed answer from the server
  6   server: this server was removed from the cluster (while running, or its data dir is
      that of a removed server); do not restart it with this data dir: wipe it, add the
      server again on a member and start it with --helper
  7   server: the data dir is damaged (corrupt txn log, snapshot or epoch file); the node
      refuses to start until it is resynced: keep a copy, empty the data dir except myid,
      start it again (docs/OPERATIONS.md section 5.2)
",
    );
    for s in Status::ALL {
        let code = ExitCode::Status(s).code();
        let _ = writeln!(text, "  {code:<4}{:<20}{}", s.name(), s.meaning());
    }
    text.push_str("(server errors exit with 10 + the protocol status code of docs/PROTOCOL.md §7)");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe_meta::protocol::ErrorReply;

    #[test]
    fn server_errors_exit_with_ten_plus_status() {
        for s in Status::ALL {
            let e = ClientError::Server(ErrorReply::new(s, "m"));
            let expected = u16::from(STATUS_BASE) + s.code();
            assert_eq!(u16::from(ExitCode::from(&e).code()), expected, "{s}");
            assert!(help_text().contains(&format!("  {expected}  {}", s.name())));
        }
        assert_eq!(ExitCode::Status(Status::NotLeader).code(), 11);
        assert_eq!(ExitCode::Status(Status::StaleRequest).code(), 20);
    }
}
