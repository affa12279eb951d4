//! One [`Client`] method per read kind and [`Client::write`] for any write (`docs/PROTOCOL.md`
//! §4), with typed answers; the common writes have methods of their own too.
//!
//! INV: each method sends exactly one request and returns the body its kind answers with;
//! a mismatched body (which [`Client::call`] already rules out) is a
//! [`ClientError::Protocol`], never a panic.

use super::{Client, ClientError};
use crate::command::{BackendRef, Command};
use crate::protocol::{
    ClusterConfig, FrontendChange, FrontendRow, MemberRow, ReadOptions, RecoveryInfo, RequestBody,
    RequestMeta, ResponseBody, StatusInfo,
};
use crate::state::catalog::{Backend, BackendState, Column, Database, FrontendRole, Table};
use zab_net::Zxid;

/// A committed write: committed on a quorum and applied on the node that answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// The write's journal id (zxid).
    pub journal_id: Zxid,
    /// The new backend / database / table id, for writes that create one.
    pub created_id: Option<u64>,
}

/// A read answer and the catalog version it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read<T> {
    /// The last journal id applied to the catalog version read.
    pub journal_id: Zxid,
    /// What was read.
    pub value: T,
}

/// A committed membership change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reconfigured {
    /// The journal id that committed the change: the new configuration's version.
    pub version: Zxid,
    /// The leader's committed configuration when it answered (version `version`, or later if
    /// the leader already promoted a joining member).
    pub config: ClusterConfig,
}

/// The members of the committed configuration with their progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Members {
    /// The committed configuration's version.
    pub config_version: Zxid,
    /// By sid.
    pub rows: Vec<MemberRow>,
}

fn read<T>(journal_id: Zxid, value: T) -> Result<Read<T>, ClientError> {
    Ok(Read { journal_id, value })
}

fn mismatch(what: &str) -> ClientError {
    ClientError::Protocol(format!("unexpected answer to {what}"))
}

fn opts(sync: bool) -> ReadOptions {
    ReadOptions { sync }
}

impl Client {
    /// Any write: sends `cmd` (its request kind is [`Command::request_kind`]) and returns once
    /// it committed and the node that answered applied it. The methods below are this with
    /// the command spelled out.
    pub async fn write(&self, cmd: Command) -> Result<Written, ClientError> {
        let kind = cmd.request_kind();
        match self.call(RequestBody::Write(cmd)).await? {
            ResponseBody::Written {
                journal_id,
                created_id,
            } => Ok(Written {
                journal_id,
                created_id,
            }),
            _ => Err(mismatch(&kind.to_string())),
        }
    }

    /// STATUS: the node's role, leader, progress and staleness.
    pub async fn status(&self) -> Result<StatusInfo, ClientError> {
        match self.call(RequestBody::Status).await? {
            ResponseBody::Status(s) => Ok(s),
            _ => Err(mismatch("STATUS")),
        }
    }

    /// DIGEST: `(journal_id, sha256, entry_count)` of the node's catalog.
    pub async fn digest(&self, sync: bool) -> Result<(Zxid, [u8; 32], u64), ClientError> {
        match self.call(RequestBody::Digest(opts(sync))).await? {
            ResponseBody::Digest {
                journal_id,
                digest,
                entry_count,
            } => Ok((journal_id, digest, entry_count)),
            _ => Err(mismatch("DIGEST")),
        }
    }

    /// SYNC: returns once the node has applied everything committed when the sync started;
    /// the node's applied journal id.
    pub async fn sync(&self) -> Result<Zxid, ClientError> {
        match self.call(RequestBody::Sync).await? {
            ResponseBody::Synced { journal_id } => Ok(journal_id),
            _ => Err(mismatch("SYNC")),
        }
    }

    /// ADD_BACKEND `host:heartbeat_port` (capacity 0 = unknown).
    pub async fn add_backend(
        &self,
        host: &str,
        heartbeat_port: u16,
        capacity_bytes: u64,
    ) -> Result<Written, ClientError> {
        self.write(Command::AddBackend {
            host: host.to_owned(),
            heartbeat_port,
            capacity_bytes,
        })
        .await
    }

    /// DROP_BACKEND.
    pub async fn drop_backend(&self, target: BackendRef) -> Result<Written, ClientError> {
        self.write(Command::DropBackend(target)).await
    }

    /// MODIFY_BACKEND: a new state and/or capacity.
    pub async fn modify_backend(
        &self,
        target: BackendRef,
        state: Option<BackendState>,
        capacity_bytes: Option<u64>,
    ) -> Result<Written, ClientError> {
        self.write(Command::ModifyBackend {
            target,
            state,
            capacity_bytes,
        })
        .await
    }

    /// SHOW_BACKENDS, by id.
    pub async fn show_backends(&self, sync: bool) -> Result<Read<Vec<Backend>>, ClientError> {
        match self.call(RequestBody::ShowBackends(opts(sync))).await? {
            ResponseBody::Backends {
                journal_id,
                backends,
            } => read(journal_id, backends),
            _ => Err(mismatch("SHOW_BACKENDS")),
        }
    }

    /// SHOW_FRONTENDS, by sid.
    pub async fn show_frontends(&self, sync: bool) -> Result<Read<Vec<FrontendRow>>, ClientError> {
        match self.call(RequestBody::ShowFrontends(opts(sync))).await? {
            ResponseBody::Frontends { journal_id, rows } => read(journal_id, rows),
            _ => Err(mismatch("SHOW_FRONTENDS")),
        }
    }

    /// SHOW_MEMBERS: the committed configuration's members with their progress, its version
    /// and which member is joining.
    pub async fn show_members(&self, sync: bool) -> Result<Read<Members>, ClientError> {
        match self.call(RequestBody::ShowMembers(opts(sync))).await? {
            ResponseBody::Members {
                journal_id,
                config_version,
                rows,
            } => read(
                journal_id,
                Members {
                    config_version,
                    rows,
                },
            ),
            _ => Err(mismatch("SHOW_MEMBERS")),
        }
    }

    /// GET_CONFIG: the node's committed cluster configuration, the cluster id and the
    /// cluster's timing (answered by the node itself, never forwarded).
    pub async fn get_config(&self) -> Result<ClusterConfig, ClientError> {
        match self.call(RequestBody::GetConfig).await? {
            ResponseBody::Config(c) => Ok(c),
            _ => Err(mismatch("GET_CONFIG")),
        }
    }

    /// RECOVERY_INFO: what the node holds (epochs, last logged and committed zxid, committed
    /// configuration); answered by the node itself, never forwarded, with or without a quorum.
    pub async fn recovery_info(&self) -> Result<RecoveryInfo, ClientError> {
        match self.call(RequestBody::RecoveryInfo).await? {
            ResponseBody::RecoveryInfo(i) => Ok(i),
            _ => Err(mismatch("RECOVERY_INFO")),
        }
    }

    /// ADD_FRONTEND: adds server `sid` as a follower or an observer; `address` is its zoo.cfg
    /// `server.N` value (`host:quorumPort:electionPort;[clientHost:]clientPort`). Returns once
    /// the change committed. A follower joins as `joining` and votes once it synced.
    pub async fn add_frontend(
        &self,
        sid: u64,
        role: FrontendRole,
        address: &str,
    ) -> Result<Reconfigured, ClientError> {
        let change = FrontendChange::Add {
            sid,
            role,
            address: address.to_owned(),
        };
        self.change_membership(change).await
    }

    /// DROP_FRONTEND: removes server `sid`, whatever its role. Returns once the change
    /// committed.
    pub async fn drop_frontend(&self, sid: u64) -> Result<Reconfigured, ClientError> {
        self.change_membership(FrontendChange::Drop { sid }).await
    }

    /// ADD_FRONTEND or DROP_FRONTEND.
    pub async fn change_membership(
        &self,
        change: FrontendChange,
    ) -> Result<Reconfigured, ClientError> {
        let body = RequestBody::ChangeMembership(change);
        let kind = body.kind();
        match self.call(body).await? {
            ResponseBody::Reconfigured { version, config } => Ok(Reconfigured { version, config }),
            _ => Err(mismatch(&kind.to_string())),
        }
    }

    /// CREATE_DB.
    pub async fn create_db(&self, name: &str) -> Result<Written, ClientError> {
        self.write(Command::CreateDb {
            name: name.to_owned(),
        })
        .await
    }

    /// DROP_DB (and its tables).
    pub async fn drop_db(&self, name: &str) -> Result<Written, ClientError> {
        self.write(Command::DropDb {
            name: name.to_owned(),
        })
        .await
    }

    /// SHOW_DATABASES, by id.
    pub async fn show_databases(&self, sync: bool) -> Result<Read<Vec<Database>>, ClientError> {
        match self.call(RequestBody::ShowDatabases(opts(sync))).await? {
            ResponseBody::Databases {
                journal_id,
                databases,
            } => read(journal_id, databases),
            _ => Err(mismatch("SHOW_DATABASES")),
        }
    }

    /// CREATE_TABLE.
    pub async fn create_table(
        &self,
        db: &str,
        name: &str,
        columns: Vec<Column>,
    ) -> Result<Written, ClientError> {
        self.write(Command::CreateTable {
            db: db.to_owned(),
            name: name.to_owned(),
            columns,
        })
        .await
    }

    /// DROP_TABLE.
    pub async fn drop_table(&self, db: &str, name: &str) -> Result<Written, ClientError> {
        self.write(Command::DropTable {
            db: db.to_owned(),
            name: name.to_owned(),
        })
        .await
    }

    /// SHOW_TABLES of a database, by name.
    pub async fn show_tables(&self, db: &str, sync: bool) -> Result<Read<Vec<Table>>, ClientError> {
        let body = RequestBody::ShowTables {
            opts: opts(sync),
            db: db.to_owned(),
        };
        match self.call(body).await? {
            ResponseBody::Tables { journal_id, tables } => read(journal_id, tables),
            _ => Err(mismatch("SHOW_TABLES")),
        }
    }

    /// SET_VAR.
    pub async fn set_var(&self, name: &str, value: &str) -> Result<Written, ClientError> {
        self.write(Command::SetVar {
            name: name.to_owned(),
            value: value.to_owned(),
        })
        .await
    }

    /// GET_VAR: `None` if the variable is not set.
    pub async fn get_var(
        &self,
        name: &str,
        sync: bool,
    ) -> Result<Read<Option<String>>, ClientError> {
        let body = RequestBody::GetVar {
            opts: opts(sync),
            name: name.to_owned(),
        };
        match self.call(body).await? {
            ResponseBody::Var { journal_id, value } => read(journal_id, value),
            _ => Err(mismatch("GET_VAR")),
        }
    }

    /// SHOW_VARS, by name.
    pub async fn show_vars(&self, sync: bool) -> Result<Read<Vec<(String, String)>>, ClientError> {
        match self.call(RequestBody::ShowVars(opts(sync))).await? {
            ResponseBody::Vars { journal_id, vars } => read(journal_id, vars),
            _ => Err(mismatch("SHOW_VARS")),
        }
    }

    /// TRANSFER_LEADER: makes the leader hand over to server `target` (or, with `None`, to the
    /// most up-to-date follower in sync) and returns once the old leader serves under the new
    /// one. Any node forwards it to the leader. Waits at most the longer of the request
    /// timeout and [`TRANSFER_WAIT`]; never resent to another node (a second transfer would
    /// move the leadership again).
    pub async fn transfer_leader(&self, target: Option<u64>) -> Result<Transferred, ClientError> {
        let limit = self.options.request_timeout.max(TRANSFER_WAIT);
        let meta = RequestMeta {
            budget_ms: Some(u32::try_from(limit.as_millis()).unwrap_or(u32::MAX)),
            session: None,
        };
        let body = RequestBody::TransferLeader { target };
        match self
            .exchange(body, meta, limit)
            .await?
            .map_err(ClientError::from)?
        {
            ResponseBody::Transferred {
                from,
                to,
                epoch,
                elapsed_ms,
            } => Ok(Transferred {
                from,
                to,
                epoch,
                elapsed_ms,
            }),
            _ => Err(mismatch("TRANSFER_LEADER")),
        }
    }
}

/// How long [`Client::transfer_leader`] waits at least: the leader waits up to syncLimit for
/// its target, then the election and the new leader's sync take up to initLimit.
pub const TRANSFER_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A completed leader transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transferred {
    /// The old leader.
    pub from: u64,
    /// The new leader.
    pub to: u64,
    /// The epoch the new leader established.
    pub epoch: u32,
    /// From the request reaching the old leader to it serving under the new one.
    pub elapsed_ms: u64,
}
