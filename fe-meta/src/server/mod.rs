//! The fe-meta server: a ZAB node running the metadata state machine, and the client port.
//!
//! ```text
//! fe-meta server --config zoo.cfg [--bootstrap | --helper HOST:CLIENT_PORT]
//!   ServerConfig::load (with --helper: join::prepare completes zoo.cfg from a member and
//!   waits until this server is in the configuration) ─▶ MetaDir::open (VERSION = clusterId,
//!   ROLE = the server.N role; a joining node writes them once the node started)
//!   ─▶ Node::start_with(MetaState) ─▶ client listener (conn) ─▶ Shared::handle per request
//!         writes: leader plans + submits (write) · others forward once to the leader (peer)
//!                 and wait until they applied the returned journal id
//!         reads:  sync flag → Node::sync; else the staleness guard (machine::Progress)
//!   leader: TIMESTAMP every min(10 s, meta_delay_toleration_second / 2) (write::run_timestamps)
//!   admin HTTP port (admin): /metrics (zab_*, fe_meta_*, process_*), /health, /ready, ...
//! ```
//!
//! Use [`run`] from a binary (it returns when the shutdown future completes, when the node
//! stops on a fatal error ([`Stopped::Fatal`]) or when this server was removed from the
//! cluster ([`Stopped::Removed`]); after the last two the process must exit), or
//! [`Server::start`] / [`Server::start_with`] in-process (tests), then [`Server::shutdown`].
//! Configuration keys: [`config`]. Logs go through `tracing`, every task inside a `fe_meta`
//! span carrying the node's `sid`; the binary installs the subscriber.
//!
//! INV-1: the server starts only if the data dir's VERSION carries the configured `clusterId`
//! and its ROLE the configured role (`meta_dir` INV-1/2); otherwise [`Server::start`] fails
//! with the reason and nothing listens.
//! INV-2: losing the quorum never stops the process: writes and syncs fail with
//! QUORUM_UNAVAILABLE within `leader_wait_ms`, reads go on under the staleness guard. Only a
//! fatal node error (txn log, epoch file, SNAP install, state machine apply, protocol core)
//! stops the node; from then on nothing is answered from the catalog, the listener closes and
//! [`run`] returns [`Stopped::Fatal`] after one error line ([`fatal`] INV-1, INV-2).
//! INV-3: no library code here panics; every loop is bounded by a timeout or by shutdown.
//! INV-4: a server that is not a member never serves: a data dir of a removed server refuses
//! to start ([`ServerError::Removed`]: its REMOVED record, a snapshot that carries the
//! removal, or a removal in its log), and a running server that applies its own removal
//! closes its client port and [`run`] returns [`Stopped::Removed`] ([`removal`] INV-1).
//! INV-5: the configuration in force is the data dir's (committed, and any newer one in its
//! log); where zoo.cfg's `server.N` lines differ from it, one fe-meta WARN line at start names
//! the servers, and the node runs with the data dir's.

mod admin;
pub mod auth;
pub mod config;
mod conn;
pub mod fatal;
mod frontends;
mod handle;
mod hints;
pub mod join;
mod lag;
pub mod machine;
mod membership;
pub mod meta_dir;
pub mod metrics;
pub mod order;
mod peer;
mod pending;
mod recovery_info;
pub mod removal;
pub mod session;
pub mod staleness;
mod stats;
mod write;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};
use zab_core::StepError;
use zab_net::config::ConfigError;
use zab_net::{NetError, Node, NodeOptions, NodeStatus, ServerId, Zxid};

pub use config::{Member, ServerConfig, EXTRA_KEYS};
pub use conn::tls::joining_tls as node_client_tls_in;
pub use fatal::{FatalStop, FATAL_EXIT_STATUS};
pub use handle::VERSION;
pub use join::{ClusterView, Helper, JoinError};
pub use removal::{Removal, REMOVED_EXIT_STATUS};

use crate::error::MetaError;
use crate::server::meta_dir::{MetaDir, MetaDirError, MetaIdentity, StartCheck};
use crate::state::catalog::SharedCatalog;
use machine::Progress;

/// Why the server did not start.
#[derive(Debug, Error)]
pub enum ServerError {
    /// zoo.cfg or myid is wrong (the message names the key and line).
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    /// A configuration problem fe-meta itself checks.
    #[error("configuration: {0}")]
    Invalid(String),
    /// VERSION / ROLE refuse the start.
    #[error(transparent)]
    MetaDir(#[from] MetaDirError),
    /// The ZAB node did not start.
    #[error("starting the ZAB node: {0}")]
    Node(#[from] NetError),
    /// Joining with a helper is refused.
    #[error(transparent)]
    Join(#[from] JoinError),
    /// This server was removed from the cluster; its data dir cannot rejoin
    /// ([`REMOVED_EXIT_STATUS`]).
    #[error("{0}")]
    Removed(Removal),
    /// fe-meta's metrics could not be registered in the node's registry (a name taken).
    #[error("registering fe-meta's metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The client port could not be bound.
    #[error("cannot listen for clients on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<ServerError> for MetaError {
    fn from(e: ServerError) -> MetaError {
        match e {
            ServerError::MetaDir(e) => MetaError::MetaDir(e),
            other => MetaError::Io(std::io::Error::other(other.to_string())),
        }
    }
}

/// What the request handlers share.
#[derive(Debug)]
pub(crate) struct Shared {
    cfg: ServerConfig,
    node: Arc<Node>,
    catalog: Arc<SharedCatalog>,
    progress: Arc<Progress>,
    writer: pending::Writer,
    peers: peer::PeerPool,
    stats: stats::Stats,
    frontends: frontends::PeerAnswers,
    refusals: auth::RefusalLog,
    client_addrs: membership::ClientAddrCache,
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    client_addr: SocketAddr,
    stop: CancellationToken,
    admin: admin::AdminPort,
    tasks: Vec<JoinHandle<()>>,
}

/// How a server run by [`run`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The shutdown future completed; the server stopped cleanly.
    Requested,
    /// The node stopped on a fatal error (logged at ERROR); the process should exit with
    /// [`FATAL_EXIT_STATUS`] so that a supervisor restarts it once the cause is fixed.
    Fatal(FatalStop),
    /// This server applied the configuration (this version) that removed it from the cluster
    /// (logged at WARN); the process should exit with [`REMOVED_EXIT_STATUS`] and not be
    /// restarted with this data dir.
    Removed(Zxid),
}

/// How `fe-meta server` starts its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartMode {
    /// From zoo.cfg alone; an empty data dir first syncs from a leader as a learner.
    Plain,
    /// `--bootstrap`: an empty data dir is a member of a brand-new cluster
    /// ([`ServerConfig::bootstrap`]).
    Bootstrap,
    /// `--helper HOST:CLIENT_PORT`: join the cluster of that member ([`join`]).
    Helper(String),
}

/// How long the stop after a fatal error may take before [`run`] returns anyway (the node's
/// threads may be stuck on the failed disk).
const FATAL_STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs the server of `config_path` until `shutdown` completes, the node stops on a fatal
/// error, or this server is removed from the cluster; then stops it. A wait for membership
/// ([`StartMode::Helper`]) also ends with `shutdown` ([`Stopped::Requested`]).
pub async fn run(
    config_path: &Path,
    mode: StartMode,
    shutdown: impl Future<Output = ()>,
) -> Result<Stopped, ServerError> {
    tokio::pin!(shutdown);
    let (cfg, opts) = tokio::select! {
        () = &mut shutdown => return Ok(Stopped::Requested),
        prepared = prepare_start(config_path, &mode) => prepared?,
    };
    let (sid, data_dir, data_log_dir) = (
        cfg.sid,
        cfg.node.data_dir.clone(),
        cfg.node.data_log_dir.clone(),
    );
    let server = Server::start_with(cfg, opts).await?;
    let node = server.shared.node.clone();
    let ended = tokio::select! {
        () = shutdown => None,
        Some(reason) = fatal::wait_fatal(&node) => Some(Err(reason)),
        Some(version) = removal::wait_removed(&node) => Some(Ok(version)),
    };
    let reason = match ended {
        None => {
            server.shutdown().await;
            return Ok(Stopped::Requested);
        }
        Some(Ok(version)) => {
            warn!(
                sid,
                "this server was removed from the cluster by configuration version {version}: \
                 closing the client port and exiting with status {REMOVED_EXIT_STATUS} (do not \
                 restart it with this data dir)"
            );
            // The answers in flight (the drop-frontend that removed a leader) go out first.
            tokio::time::sleep(removal::ANSWER_GRACE).await;
            server.shutdown().await;
            return Ok(Stopped::Removed(version));
        }
        Some(Err(reason)) => reason,
    };
    let stop = FatalStop::new(reason, &data_dir, &data_log_dir);
    error!(sid, "{stop}");
    if tokio::time::timeout(FATAL_STOP_WAIT, server.shutdown())
        .await
        .is_err()
    {
        warn!(
            sid,
            "the node's threads did not stop within {FATAL_STOP_WAIT:?}; exiting anyway"
        );
    }
    Ok(Stopped::Fatal(stop))
}

/// The configuration and node options `mode` starts the server of `config_path` with (what
/// [`run`] passes to [`Server::start_with`]); with [`StartMode::Helper`] it returns once this
/// server may join ([`join`]).
pub async fn prepare_start(
    config_path: &Path,
    mode: &StartMode,
) -> Result<(ServerConfig, NodeOptions), ServerError> {
    let mut opts = NodeOptions::default();
    let cfg = match mode {
        StartMode::Plain => ServerConfig::load(config_path).map_err(join::point_to_helper)?,
        StartMode::Bootstrap => {
            let mut cfg = ServerConfig::load(config_path)?;
            cfg.bootstrap = true;
            cfg
        }
        StartMode::Helper(helper) => {
            let text = join::read_text(config_path)?;
            let start = join::prepare(&text, &join::client_helper(helper, &text)?).await?;
            opts.join_membership = start.join_membership;
            start.cfg
        }
    };
    Ok((cfg, opts))
}

impl Server {
    /// Loads `config_path` (zoo.cfg + fe-meta keys + `dataDir/myid`) and starts.
    pub async fn start(config_path: &Path) -> Result<Server, ServerError> {
        let cfg = ServerConfig::load(config_path)?;
        Server::start_with(cfg, NodeOptions::default()).await
    }

    /// Starts with a loaded configuration and node options (tests tune timeouts there; the
    /// request timeout is set to `write_timeout_ms`).
    pub async fn start_with(
        cfg: ServerConfig,
        mut opts: NodeOptions,
    ) -> Result<Server, ServerError> {
        let span = tracing::info_span!("fe_meta", sid = cfg.sid);
        async move {
            let check = StartCheck {
                sid: cfg.sid,
                role: cfg.role,
                cluster_id: Some(cfg.cluster_id),
                may_bootstrap: false,
            };
            let meta = MetaDir::new(cfg.node.data_dir.clone());
            // A joining node writes VERSION and ROLE only once its configuration is durable
            // (meta_dir docs): a data dir with VERSION always knows its cluster.
            let joining = opts.join_membership.is_some();
            let identity = if joining {
                meta.verify(&check).map_err(|e| removal_refused(e, &cfg))?;
                None
            } else {
                Some(meta.open(&check).map_err(|e| removal_refused(e, &cfg))?)
            };
            let (listener, client_addr) = bind_client_port(&cfg.client_listen).await?;
            let metrics = metrics::FeMetrics::in_node_registry(&mut opts)?;
            let catalog = Arc::new(SharedCatalog::default());
            let progress = Arc::new(Progress::new(cfg.tolerance_ms));
            let machine = machine::state_machine(catalog.clone(), progress.clone());
            opts.request_timeout = cfg.write_timeout;
            opts.bootstrap = cfg.bootstrap;
            let node = Node::start_with(cfg.node.clone(), ServerId(cfg.sid), machine, opts)
                .await
                .map_err(|e| node_refused(e, &cfg))?;
            let identity = settle_started(&node, &cfg, &meta, &check, identity).await?;
            let node = Arc::new(node);
            let writer = pending::Writer::new(catalog.clone());
            let (admin_listener, admin) = admin::bind_configured(&cfg).await;
            info!(
                cluster_id = %format_args!("{:#018x}", identity.cluster_id),
                role = identity.role.name(),
                %client_addr,
                admin = admin.addr.map_or_else(|| "off".to_owned(), |a| format!("http://{a}")),
                "fe-meta server started"
            );
            let peers = peer::PeerPool::for_config(&cfg);
            let shared = Arc::new(Shared {
                peers,
                cfg,
                node: node.clone(),
                catalog,
                progress,
                writer,
                stats: stats::Stats::new(metrics),
                frontends: frontends::PeerAnswers::default(),
                refusals: auth::RefusalLog::default(),
                client_addrs: membership::ClientAddrCache::default(),
            });
            let stop = CancellationToken::new();
            let mut tasks = spawn_tasks(&shared, listener, meta, &stop);
            tasks.extend(admin_listener.map(|l| admin::spawn(&shared, l, &admin.stop)));
            Ok(Server {
                shared,
                client_addr,
                stop,
                admin,
                tasks,
            })
        }
        .instrument(span)
        .await
    }

    /// Where clients connect.
    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    /// Where the admin HTTP port listens (`None`: disabled, or its bind failed).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.addr
    }

    /// This node's server id.
    pub fn sid(&self) -> u64 {
        self.shared.cfg.sid
    }

    /// The ZAB node's status.
    pub fn node_status(&self) -> NodeStatus {
        self.shared.node.status()
    }

    /// The last applied journal id.
    pub fn applied_journal_id(&self) -> Zxid {
        self.shared.catalog.journal_id()
    }

    /// Fault injection for tests: this node's ZAB driver stands still for `duration` (no
    /// ticks, no messages, no requests handled, like a stopped process whose sockets stay
    /// open), while the client port keeps taking requests. Only with the `test-support`
    /// feature.
    #[cfg(feature = "test-support")]
    pub async fn pause_node(&self, duration: std::time::Duration) {
        self.shared.node.pause(duration).await;
    }

    /// Stops accepting clients, closes the connections, stops the node and waits for it.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.admin.stop.cancel();
        self.shared.node.shutdown().await;
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
        info!(sid = self.shared.cfg.sid, "fe-meta server stopped");
    }
}

/// Once the node started: a removal in its log refuses the start (INV-4), a stale zoo.cfg is
/// named (INV-5), and a joining node (`identity` is `None`), whose configuration is durable
/// now, writes VERSION and ROLE. On a refusal the node is shut down.
async fn settle_started(
    node: &Node,
    cfg: &ServerConfig,
    meta: &MetaDir,
    check: &StartCheck,
    identity: Option<MetaIdentity>,
) -> Result<MetaIdentity, ServerError> {
    if let Some(version) = removal::removed_by_log(node) {
        node.shutdown().await;
        return Err(ServerError::Removed(removal::removal_of(cfg, version)));
    }
    hints::warn_stale_zoo_cfg(node, cfg);
    match identity {
        Some(identity) => Ok(identity),
        None => match meta.open(check) {
            Ok(identity) => Ok(identity),
            Err(e) => {
                node.shutdown().await;
                Err(e.into())
            }
        },
    }
}

/// Binds the client port: the listener and the address it got.
async fn bind_client_port(addr: &str) -> Result<(TcpListener, SocketAddr), ServerError> {
    let listen_error = |source| ServerError::Listen {
        addr: addr.to_owned(),
        source,
    };
    let listener = TcpListener::bind(addr).await.map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    Ok((listener, bound))
}

/// The server's tasks, each in the caller's span: the initial-sync and no-leader hints, the
/// leader's TIMESTAMPs, the staleness guard's synced mark, the fatal-stop and removal
/// watchers, and the listener.
fn spawn_tasks(
    shared: &Arc<Shared>,
    listener: TcpListener,
    meta: MetaDir,
    stop: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let here = tracing::Span::current();
    let node = &shared.node;
    vec![
        tokio::spawn(hints::hint_initial_sync(node.clone(), stop.clone()).instrument(here.clone())),
        tokio::spawn(hints::hint_no_leader(node.clone(), stop.clone()).instrument(here.clone())),
        tokio::spawn(write::run_timestamps(shared.clone()).instrument(here.clone())),
        tokio::spawn(write::mark_synced_when_serving(shared.clone()).instrument(here.clone())),
        tokio::spawn({
            let s = shared.clone();
            async move { pending::release_when_not_leading(&s.node, &s.writer).await }
                .instrument(here.clone())
        }),
        tokio::spawn(fatal::close_on_fatal(node.clone(), stop.clone()).instrument(here.clone())),
        tokio::spawn(
            removal::close_on_removed(node.clone(), meta, stop.clone()).instrument(here.clone()),
        ),
        tokio::spawn(conn::run_listener(shared.clone(), listener, stop.clone()).instrument(here)),
    ]
}

/// The refusal of a removed server's data dir, with how to add it again (REMOVED exists).
fn removal_refused(e: MetaDirError, cfg: &ServerConfig) -> ServerError {
    match e {
        MetaDirError::Removed { version, .. } => {
            ServerError::Removed(removal::removal_of(cfg, Zxid(version)))
        }
        other => ServerError::MetaDir(other),
    }
}

/// The node's start error; the engine's refusal of a removed server's data dir (a snapshot
/// carries the removal) becomes [`ServerError::Removed`].
fn node_refused(e: NetError, cfg: &ServerConfig) -> ServerError {
    match e {
        NetError::Core(StepError::Removed { version, .. }) => {
            ServerError::Removed(removal::removal_of(cfg, version))
        }
        other => ServerError::Node(other),
    }
}
