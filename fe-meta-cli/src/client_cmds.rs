//! The client commands: parse their arguments, send one request to one of the `--server`
//! endpoints (the next one when a connection fails, `fe_meta::client`'s rules), print the
//! answer as a table (default) or one JSON document (`--json`).
//!
//! INV: argument errors are caught here before the client connects (exit 2, like clap's own,
//! whether or not the server is up); everything the server decides is reported with the
//! server's message and status.

use clap::Subcommand;

use super::render::{self, Output};
use super::{runtime, ClientArgs, ExitCode, Failure};
use fe_meta::client::Client;
use fe_meta::command::{BackendRef, Command};
use fe_meta::protocol::parse_server_line;
use fe_meta::state::catalog::{BackendState, Column, ColumnType, FrontendRole};

/// A command sent to one node.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Add a backend by its heartbeat address (metadata only: nothing connects to it).
    AddBackend {
        /// HOST:HEARTBEAT_PORT.
        addr: String,
        /// Storage capacity in bytes (0 = unknown).
        #[arg(long, default_value_t = 0)]
        capacity: u64,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Drop a backend, by HOST:PORT or by id.
    DropBackend {
        /// HOST:HEARTBEAT_PORT or the backend id.
        backend: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Change a backend's state and/or capacity.
    ModifyBackend {
        /// HOST:HEARTBEAT_PORT or the backend id.
        backend: String,
        /// normal, decommissioning or offline.
        #[arg(long)]
        state: Option<String>,
        /// Storage capacity in bytes.
        #[arg(long)]
        capacity: Option<u64>,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// List the backends.
    ShowBackends(ReadArgs),
    /// List the frontends (the members of the committed cluster configuration) with role,
    /// leader, liveness and progress; a follower added but not yet synced shows as JOINING.
    ShowFrontends(ReadArgs),
    /// Add a follower to the cluster: `server.N=HOST:QUORUM_PORT:ELECTION_PORT;CLIENT_HOST:CLIENT_PORT`
    /// (zoo.cfg syntax). It joins as JOINING and votes once it has synced; then start it with
    /// `fe-meta server --helper`. Answers once the change committed.
    AddFollower {
        /// The new member's zoo.cfg line, `server.N=HOST:QP:EP;[CLIENT_HOST:]CLIENT_PORT`.
        line: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Add an observer (replicates, never votes): `server.N=HOST:QP:EP;CLIENT_HOST:CLIENT_PORT`.
    AddObserver {
        /// The new member's zoo.cfg line, `server.N=HOST:QP:EP;[CLIENT_HOST:]CLIENT_PORT`.
        line: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Remove a frontend from the cluster, by server id (any role, the leader included).
    DropFrontend {
        /// The server id (its `server.N`).
        sid: u64,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Make the leader hand over to server SID (or, without one, to the most up-to-date
    /// follower in sync), e.g. before stopping the leader's host; writes pause only for the
    /// handover and the new leader's election. Any node forwards it to the leader.
    TransferLeader {
        /// The server id that should lead next (a voting member).
        sid: Option<u64>,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// The node's committed cluster configuration: its version, the members and the timing.
    ShowConfig {
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Create a database.
    CreateDb {
        /// Its name.
        name: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Drop a database and its tables.
    DropDb {
        /// Its name.
        name: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Rename a database (its tables go with it).
    RenameDb {
        /// Its name.
        name: String,
        /// The name it gets.
        new_name: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Create a table.
    CreateTable {
        /// The database.
        db: String,
        /// The table's name.
        name: String,
        /// A column, NAME:TYPE[:null][:key][:default=VALUE], e.g. `id:BIGINT:key`,
        /// `price:DECIMAL(10,2):null`. Repeat for each column, in order.
        #[arg(long = "column", short = 'C', value_name = "SPEC", required = true)]
        columns: Vec<String>,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Drop a table.
    DropTable {
        /// The database.
        db: String,
        /// The table.
        name: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// List the databases.
    ShowDatabases(ReadArgs),
    /// List a database's tables and their columns.
    ShowTables {
        /// The database.
        db: String,
        /// The read options.
        #[command(flatten)]
        r: ReadArgs,
    },
    /// Set a global variable.
    SetVar {
        /// Its name.
        name: String,
        /// Its value.
        value: String,
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// Read a global variable (null / "not set" if it is not).
    GetVar {
        /// Its name.
        name: String,
        /// The read options.
        #[command(flatten)]
        r: ReadArgs,
    },
    /// List the global variables.
    ShowVars(ReadArgs),
    /// Wait until the node has applied everything committed now; prints its journal id.
    Sync {
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// The node's role, leader, epoch, progress, staleness and configuration version.
    Status {
        /// Where to connect.
        #[command(flatten)]
        c: ClientArgs,
    },
    /// The SHA-256 digest of the node's catalog (equal on replicas at equal journal ids).
    Digest(ReadArgs),
}

/// The arguments of a read.
#[derive(Clone, Debug, clap::Args)]
pub struct ReadArgs {
    /// Sync with the leader first (linearizable read on any node).
    #[arg(long)]
    pub sync: bool,
    /// Where to connect.
    #[command(flatten)]
    c: ClientArgs,
}

impl ClientCommand {
    fn client_args(&self) -> &ClientArgs {
        use ClientCommand as C;
        match self {
            C::AddBackend { c, .. }
            | C::DropBackend { c, .. }
            | C::ModifyBackend { c, .. }
            | C::CreateDb { c, .. }
            | C::DropDb { c, .. }
            | C::RenameDb { c, .. }
            | C::CreateTable { c, .. }
            | C::DropTable { c, .. }
            | C::SetVar { c, .. }
            | C::AddFollower { c, .. }
            | C::AddObserver { c, .. }
            | C::DropFrontend { c, .. }
            | C::TransferLeader { c, .. }
            | C::ShowConfig { c }
            | C::Sync { c }
            | C::Status { c } => c,
            C::ShowBackends(r)
            | C::ShowFrontends(r)
            | C::ShowDatabases(r)
            | C::ShowVars(r)
            | C::Digest(r)
            | C::ShowTables { r, .. }
            | C::GetVar { r, .. } => &r.c,
        }
    }

    /// The argument errors this command's parsers find (INV), before anything connects.
    fn check_arguments(&self) -> Result<(), Failure> {
        use ClientCommand as C;
        match self {
            C::AddBackend { addr, .. } => parse_host_port(addr).map(drop),
            C::DropBackend { backend, .. } => parse_backend(backend).map(drop),
            C::ModifyBackend { backend, state, .. } => {
                parse_backend(backend)?;
                state.as_deref().map(parse_state).transpose().map(drop)
            }
            C::CreateTable { columns, .. } => {
                columns.iter().try_for_each(|c| parse_column(c).map(drop))
            }
            C::AddFollower { line, .. } => server_line(line, FrontendRole::Follower).map(drop),
            C::AddObserver { line, .. } => server_line(line, FrontendRole::Observer).map(drop),
            _ => Ok(()),
        }
    }
}

/// Runs one client command and prints its answer.
pub(super) fn run(cmd: ClientCommand) -> Result<(), Failure> {
    cmd.check_arguments()?;
    let args = cmd.client_args().clone();
    let endpoints = args.endpoints()?;
    let options = args.options()?;
    let rt = runtime()?;
    let out = rt.block_on(async {
        let client = Client::connect_any(&endpoints, options).await?;
        execute(&client, cmd).await
    })?;
    if args.json {
        println!("{}", out.json);
    } else {
        print!("{}", out.human);
    }
    Ok(())
}

async fn execute(client: &Client, cmd: ClientCommand) -> Result<Output, Failure> {
    use ClientCommand as C;
    Ok(match cmd {
        C::AddBackend { addr, capacity, .. } => {
            let (host, port) = parse_host_port(&addr)?;
            render::written(
                "backend added",
                client.add_backend(&host, port, capacity).await?,
            )
        }
        C::DropBackend { backend, .. } => {
            let target = parse_backend(&backend)?;
            render::written("backend dropped", client.drop_backend(target).await?)
        }
        C::ModifyBackend {
            backend,
            state,
            capacity,
            ..
        } => {
            let target = parse_backend(&backend)?;
            let state = state.as_deref().map(parse_state).transpose()?;
            let w = client.modify_backend(target, state, capacity).await?;
            render::written("backend modified", w)
        }
        C::ShowBackends(r) => render::backends(client.show_backends(r.sync).await?),
        C::ShowFrontends(r) => render::frontends(client.show_members(r.sync).await?),
        C::AddFollower { line, .. } => add_frontend(client, &line, FrontendRole::Follower).await?,
        C::AddObserver { line, .. } => add_frontend(client, &line, FrontendRole::Observer).await?,
        C::DropFrontend { sid, .. } => {
            let changed = client.drop_frontend(sid).await?;
            render::reconfigured(&format!("server {sid} dropped"), &changed)
        }
        C::TransferLeader { sid, .. } => render::transferred(client.transfer_leader(sid).await?),
        C::ShowConfig { .. } => render::config(&client.get_config().await?),
        C::CreateDb { name, .. } => {
            render::written("database created", client.create_db(&name).await?)
        }
        C::DropDb { name, .. } => render::written("database dropped", client.drop_db(&name).await?),
        C::RenameDb { name, new_name, .. } => {
            let cmd = Command::RenameDb { name, new_name };
            render::written("database renamed", client.write(cmd).await?)
        }
        C::CreateTable {
            db, name, columns, ..
        } => create_table(client, &db, &name, &columns).await?,
        C::DropTable { db, name, .. } => {
            render::written("table dropped", client.drop_table(&db, &name).await?)
        }
        C::ShowDatabases(r) => render::databases(client.show_databases(r.sync).await?),
        C::ShowTables { db, r } => render::tables(&db, client.show_tables(&db, r.sync).await?),
        C::SetVar { name, value, .. } => {
            render::written("variable set", client.set_var(&name, &value).await?)
        }
        C::GetVar { name, r } => render::var(&name, client.get_var(&name, r.sync).await?),
        C::ShowVars(r) => render::vars(client.show_vars(r.sync).await?),
        C::Sync { .. } => render::synced(client.sync().await?),
        C::Status { .. } => status(client).await?,
        C::Digest(r) => render::digest(client.digest(r.sync).await?),
    })
}

/// create-table: parses the `NAME:TYPE` columns, then creates the table.
async fn create_table(
    client: &Client,
    db: &str,
    name: &str,
    columns: &[String],
) -> Result<Output, Failure> {
    let columns = columns
        .iter()
        .map(|c| parse_column(c))
        .collect::<Result<Vec<_>, _>>()?;
    let w = client.create_table(db, name, columns).await?;
    Ok(render::written("table created", w))
}

/// status: the answering node's STATUS, named by the endpoint that answered, and the
/// configuration.
async fn status(client: &Client) -> Result<Output, Failure> {
    let status = client.status().await?;
    let answered = client.addr();
    let config = client.get_config().await?;
    Ok(render::status(&answered, &status, &config))
}

/// add-follower / add-observer: adds the server of the `server.N=...` `line` as `role`.
async fn add_frontend(client: &Client, line: &str, role: FrontendRole) -> Result<Output, Failure> {
    let (sid, address) = server_line(line, role)?;
    let changed = client.add_frontend(sid, role, &address).await?;
    let as_role = match role {
        FrontendRole::Follower => "a follower",
        FrontendRole::Observer => "an observer",
    };
    Ok(render::reconfigured(
        &format!("server {sid} added as {as_role}"),
        &changed,
    ))
}

fn usage(message: String) -> Failure {
    Failure {
        code: ExitCode::Usage,
        message,
    }
}

/// `host:port` or `[v6]:port`.
pub(super) fn parse_host_port(s: &str) -> Result<(String, u16), Failure> {
    let bad = || usage(format!("expected HOST:PORT, found `{s}`"));
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(bad());
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| usage(format!("bad port in `{s}`: expected 1-65535")))?;
    Ok((host.to_owned(), port))
}

/// `server.N=value` of a new member, checked here before anything is sent.
fn server_line(line: &str, role: FrontendRole) -> Result<(u64, String), Failure> {
    parse_server_line(line, role).map_err(|e| usage(e.to_string()))
}

fn parse_backend(s: &str) -> Result<BackendRef, Failure> {
    if let Ok(id) = s.parse::<u64>() {
        return Ok(BackendRef::Id(id));
    }
    let (host, port) = parse_host_port(s)?;
    Ok(BackendRef::Addr { host, port })
}

fn parse_state(s: &str) -> Result<BackendState, Failure> {
    match s.to_ascii_lowercase().as_str() {
        "normal" => Ok(BackendState::Normal),
        "decommissioning" => Ok(BackendState::Decommissioning),
        "offline" => Ok(BackendState::Offline),
        _ => Err(usage(format!(
            "bad state `{s}`: expected normal, decommissioning or offline"
        ))),
    }
}

/// `NAME:TYPE[:null][:key][:default=VALUE]`.
pub(super) fn parse_column(spec: &str) -> Result<Column, Failure> {
    let bad = |why: String| usage(format!("bad column `{spec}`: {why}"));
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let ty = parts
        .next()
        .ok_or_else(|| bad("expected NAME:TYPE[:null][:key][:default=VALUE]".into()))?;
    let ty: ColumnType = ty.parse().map_err(|e| bad(format!("{e}")))?;
    let mut col = Column {
        name: name.to_owned(),
        ty,
        nullable: false,
        is_key: false,
        default: None,
    };
    for flag in parts {
        match flag {
            "null" => col.nullable = true,
            "key" => col.is_key = true,
            _ => match flag.strip_prefix("default=") {
                Some(v) => col.default = Some(v.to_owned()),
                None => return Err(bad(format!("unknown flag `{flag}` (null, key, default=V)"))),
            },
        }
    }
    Ok(col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        assert_eq!(
            parse_host_port("10.0.0.1:9050").ok(),
            Some(("10.0.0.1".to_owned(), 9050))
        );
        assert_eq!(
            parse_host_port("[::1]:9050").ok(),
            Some(("::1".to_owned(), 9050))
        );
        assert!(parse_host_port("host").is_err());
        assert!(parse_host_port("host:99999").is_err());
        assert!(matches!(parse_backend("12"), Ok(BackendRef::Id(12))));
        let c = parse_column("price:decimal(10,2):null:default=0").ok();
        assert_eq!(
            c,
            Some(Column {
                name: "price".into(),
                ty: ColumnType::Decimal {
                    precision: 10,
                    scale: 2
                },
                nullable: true,
                is_key: false,
                default: Some("0".into()),
            })
        );
        assert!(parse_column("id").is_err());
        assert!(parse_column("id:NOPE").is_err());
        assert!(parse_column("id:INT:bogus").is_err());
        let (sid, value) = server_line("server.4=h:1:2;3", FrontendRole::Follower).unwrap();
        assert_eq!((sid, value.as_str()), (4, "h:1:2;3"));
        let bad = server_line("server.4=h:1:2", FrontendRole::Follower).unwrap_err();
        assert_eq!(bad.code, ExitCode::Usage);
        assert!(bad.message.contains("no client port"), "{}", bad.message);
    }
}
