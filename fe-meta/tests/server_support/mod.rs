//! In-process fe-meta clusters on loopback for the server tests: free ports found below the
//! ephemeral range, temp data dirs, tickTime 100 ms, forceSync=no (tests only).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use fe_meta::command::Command;
use fe_meta::protocol::{
    decode_response, encode_frame, encode_request, ErrorReply, FrameDecoder, Request, RequestBody,
    RequestMeta, Response, ResponseBody,
};
use fe_meta::server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zab_net::NodeOptions;
use zab_net::Role;

/// A port free right now, taken below the kernel's ephemeral range (32768+) so that no
/// outgoing connection of a concurrently running test can grab it between this check and the
/// server's bind; a process-wide counter keeps the tests of one binary apart.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 100) as u16 * 100;
    for _ in 0..10_000 {
        let port = 20_000 + (base - 20_000 + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 20000 and 32000");
}

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub n: u64,
    pub ports: BTreeMap<u64, (u16, u16, u16)>,
    pub extra: String,
    /// zoo.cfg `syncLimit` (ticks of 100 ms); 5 unless a test needs a node to stand still
    /// longer without its peers giving up on it.
    pub sync_limit: u32,
    pub servers: BTreeMap<u64, Server>,
    /// Servers with ports but not in the bootstrap configuration ([`Cluster::reserve`]): they
    /// join a running cluster after being added.
    pub joiners: BTreeSet<u64>,
}

impl Cluster {
    /// `n` voters; `extra` is appended to every zoo.cfg (fe-meta keys).
    pub fn new(n: u64, extra: &str) -> Cluster {
        let ports = (1..=n)
            .map(|s| (s, (free_port(), free_port(), free_port())))
            .collect();
        Cluster {
            root: tempfile::tempdir().unwrap(),
            n,
            ports,
            extra: extra.to_string(),
            sync_limit: 5,
            servers: BTreeMap::new(),
            joiners: BTreeSet::new(),
        }
    }

    /// Ports for server `sid`, which is no bootstrap member: its zoo.cfg line is the
    /// `server.N` value returned, to be added with ADD_FRONTEND before it starts
    /// ([`Cluster::start_joining`]).
    pub fn reserve(&mut self, sid: u64) -> String {
        self.ports
            .insert(sid, (free_port(), free_port(), free_port()));
        self.joiners.insert(sid);
        self.server_value(sid)
    }

    /// The `server.N` value of `sid`: `127.0.0.1:q:e;127.0.0.1:c`.
    pub fn server_value(&self, sid: u64) -> String {
        let (q, e, c) = self.ports[&sid];
        format!("127.0.0.1:{q}:{e};127.0.0.1:{c}")
    }

    pub fn data_dir(&self, sid: u64) -> PathBuf {
        self.root.path().join(format!("fe{sid}"))
    }

    /// Writes `fe{sid}.cfg` and `myid`; returns the config path.
    pub fn write_config(&self, sid: u64, cluster_id: u64) -> PathBuf {
        let dir = self.data_dir(sid);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("myid"), format!("{sid}\n")).unwrap();
        let mut t = format!(
            "tickTime=100\ninitLimit=20\nsyncLimit={}\nforceSync=no\npreAllocSize=1024\n\
             dataDir={}\nclientPort={}\nclusterId={cluster_id}\n{}\n",
            self.sync_limit,
            dir.display(),
            self.ports[&sid].2,
            self.extra
        );
        if !self.extra.contains("admin.") {
            // The admin port on a port of the OS's choosing (the default 8080 is shared by
            // every test process on the machine).
            t += "admin.serverAddress=127.0.0.1\nadmin.serverPort=0\n";
        }
        for s in self.ports.keys() {
            if !self.joiners.contains(s) || *s == sid {
                t += &format!("server.{s}={}\n", self.server_value(*s));
            }
        }
        let path = self.root.path().join(format!("fe{sid}.cfg"));
        std::fs::write(&path, t).unwrap();
        path
    }

    /// Starts `sid` as a member of a new cluster (`--bootstrap`: an empty data dir votes).
    pub async fn start(&mut self, sid: u64) {
        self.start_bootstrap(sid, true).await;
    }

    /// Starts `sid`; without `bootstrap` an empty data dir first syncs as a non-voting learner.
    pub async fn start_bootstrap(&mut self, sid: u64, bootstrap: bool) {
        let path = self.write_config(sid, 0xfe_0001);
        let mut cfg = ServerConfig::load(&path).unwrap();
        cfg.bootstrap = bootstrap;
        let server = Server::start_with(cfg, NodeOptions::default())
            .await
            .unwrap();
        self.servers.insert(sid, server);
    }

    /// Starts the reserved server `sid` with an empty data dir, joining the cluster whose
    /// committed configuration (from GET_CONFIG on a member) is `config`.
    pub async fn start_joining(&mut self, sid: u64, config: &fe_meta::protocol::ClusterConfig) {
        let path = self.write_config(sid, config.cluster_id);
        let cfg = ServerConfig::load(&path).unwrap();
        let mut opts = NodeOptions::default();
        opts.join_membership = Some(config.membership());
        let server = Server::start_with(cfg, opts).await.unwrap();
        self.servers.insert(sid, server);
    }

    pub async fn start_all(&mut self) {
        for sid in 1..=self.n {
            self.start(sid).await;
        }
    }

    pub async fn stop(&mut self, sid: u64) {
        if let Some(s) = self.servers.remove(&sid) {
            s.shutdown().await;
        }
    }

    pub async fn stop_all(&mut self) {
        let sids: Vec<u64> = self.servers.keys().copied().collect();
        for s in sids {
            self.stop(s).await;
        }
    }

    pub fn addr(&self, sid: u64) -> SocketAddr {
        self.servers[&sid].client_addr()
    }

    /// Waits until one running server leads and all serve; returns the leader's sid.
    pub async fn wait_stable(&self, limit: Duration) -> u64 {
        let start = Instant::now();
        while start.elapsed() < limit {
            let st: Vec<_> = self.servers.values().map(|s| s.node_status()).collect();
            let leaders: Vec<_> = st
                .iter()
                .filter(|s| s.role == Role::Leading && s.serving)
                .collect();
            if leaders.len() == 1 && st.iter().all(|s| s.serving) {
                return leaders[0].sid.0;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no stable leader within {limit:?}");
    }
}

/// A test client: one connection, requests sent one at a time (or raw bytes).
pub struct Client {
    pub stream: TcpStream,
    buf: BytesMut,
    next: u64,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: BytesMut::new(),
            next: 1,
        }
    }

    pub async fn send(&mut self, body: RequestBody) -> u64 {
        self.send_with(body, RequestMeta::default()).await
    }

    /// Sends `body` with version-2 fields (deadline, session).
    pub async fn send_with(&mut self, body: RequestBody, meta: RequestMeta) -> u64 {
        let id = self.next;
        self.next += 1;
        let mut out = Vec::new();
        encode_frame(&encode_request(&Request { id, meta, body }), &mut out);
        self.stream.write_all(&out).await.unwrap();
        id
    }

    /// The next response, or `None` when the server closed the connection.
    pub async fn recv(&mut self) -> Option<Response> {
        let d = FrameDecoder::default();
        loop {
            if let Some(p) = d.decode(&mut self.buf).unwrap() {
                return Some(decode_response(&p).unwrap());
            }
            let n =
                tokio::time::timeout(Duration::from_secs(20), self.stream.read_buf(&mut self.buf))
                    .await
                    .expect("no answer in 20 s")
                    .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    pub async fn call(&mut self, body: RequestBody) -> Result<ResponseBody, ErrorReply> {
        let id = self.send(body).await;
        let r = self.recv().await.expect("connection closed");
        assert_eq!(r.id, id);
        r.result
    }

    pub async fn raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }
}

/// One request on a fresh connection.
pub async fn call(addr: SocketAddr, body: RequestBody) -> Result<ResponseBody, ErrorReply> {
    Client::connect(addr).await.call(body).await
}

/// A four-letter word's answer.
pub async fn four(addr: SocketAddr, word: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(word.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

pub fn add_backend(host: &str, port: u16) -> RequestBody {
    RequestBody::Write(Command::AddBackend {
        host: host.to_string(),
        heartbeat_port: port,
        capacity_bytes: 1 << 30,
    })
}

pub fn backends_of(r: &ResponseBody) -> Vec<(String, u16)> {
    match r {
        ResponseBody::Backends { backends, .. } => backends
            .iter()
            .map(|b| (b.host.clone(), b.heartbeat_port))
            .collect(),
        other => panic!("not a Backends answer: {other:?}"),
    }
}
