//! A 3-node replicated key-value store in one process, on loopback:
//!
//! ```text
//! cargo run -p zab-net --example kv            # RUST_LOG=info for the nodes' logs
//! ```
//! It starts three nodes (ephemeral ports, a temp data dir, forceSync=no because this is a
//! demo), waits for a leader, submits writes **through a follower** (forwarded to the leader;
//! `submit` returns once the write is committed and applied on that follower), reads them back
//! on another follower after `sync` (linearizable), stops the leader, measures how long the
//! next write takes to commit under the new leader, and shuts down.

use std::collections::BTreeMap;
use std::error::Error;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use zab_net::config::parse;
use zab_net::transport::PeerAddrs;
use zab_net::{ApplyError, Node, NodeOptions, Role, ServerId, SnapshotSource, StateMachine, Zxid};

/// The state: an immutable map behind a shared pointer; a snapshot is a pointer copy.
#[derive(Clone, Default)]
struct Kv(Arc<Mutex<Arc<BTreeMap<String, String>>>>);

impl Kv {
    fn get(&self, key: &str) -> Option<String> {
        self.0.lock().get(key).cloned()
    }
}

struct View(Arc<BTreeMap<String, String>>);

impl SnapshotSource for View {
    fn write_to(self: Box<Self>, out: &mut dyn Write) -> std::io::Result<()> {
        for (k, v) in self.0.iter() {
            writeln!(out, "{k}={v}")?;
        }
        Ok(())
    }
}

impl StateMachine for Kv {
    fn apply(&mut self, _zxid: Zxid, data: &[u8]) -> Result<(), ApplyError> {
        let text = std::str::from_utf8(data).map_err(|e| ApplyError::new(e.to_string()))?;
        let (k, v) = text
            .split_once('=')
            .ok_or_else(|| ApplyError::new(format!("not key=value: {text}")))?;
        Arc::make_mut(&mut self.0.lock()).insert(k.to_string(), v.to_string());
        Ok(())
    }

    fn snapshot(&self) -> Box<dyn SnapshotSource> {
        Box::new(View(self.0.lock().clone()))
    }

    fn restore(&mut self, _zxid: Zxid, src: &mut dyn Read) -> Result<(), ApplyError> {
        let mut map = BTreeMap::new();
        for line in BufReader::new(src).lines() {
            let line = line.map_err(|e| ApplyError::new(e.to_string()))?;
            if let Some((k, v)) = line.split_once('=') {
                map.insert(k.to_string(), v.to_string());
            }
        }
        *self.0.lock() = Arc::new(map);
        Ok(())
    }
}

fn zoo_cfg(dir: &std::path::Path, sid: u64) -> String {
    // The server.N ports are placeholders: the nodes listen on ports the OS picks (below).
    format!(
        "tickTime=100\ninitLimit=20\nsyncLimit=5\nforceSync=no\npreAllocSize=4096\n\
         dataDir={}\n\
         server.1=127.0.0.1:12881:13881\nserver.2=127.0.0.1:12882:13882\n\
         server.3=127.0.0.1:12883:13883\n",
        dir.join(format!("node{sid}")).display()
    )
}

async fn wait_leader(nodes: &BTreeMap<ServerId, (Node, Kv)>) -> Result<ServerId, Box<dyn Error>> {
    for _ in 0..500 {
        let serving = nodes.values().all(|(n, _)| n.status().serving);
        let leader = nodes
            .values()
            .find(|(n, _)| n.status().role == Role::Leading)
            .map(|(n, _)| n.sid());
        if let (true, Some(l)) = (serving, leader) {
            return Ok(l);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err("no leader within 10 s".into())
}

/// The nodes of the example, each with its state machine.
type Nodes = BTreeMap<ServerId, (Node, Kv)>;

/// Starts three nodes on loopback ports chosen by the OS and tells each where the others are.
async fn start_cluster(dir: &std::path::Path) -> Result<Nodes, Box<dyn Error>> {
    let any: PeerAddrs = "127.0.0.1:0".parse().map(|a| PeerAddrs {
        quorum: a,
        election: a,
    })?;
    let mut nodes = BTreeMap::new();
    for sid in 1..=3 {
        let cfg = parse(&zoo_cfg(dir, sid))?;
        let mut opts = NodeOptions::default();
        opts.listen = Some(any);
        opts.peer_addrs = (1..=3)
            .filter(|p| *p != sid)
            .map(|p| (ServerId(p), PeerAddrs::UNKNOWN))
            .collect();
        // A brand-new cluster in a fresh temp dir: every node starts initialized.
        opts.bootstrap = true;
        let kv = Kv::default();
        let node = Node::start_with(cfg, ServerId(sid), kv.clone(), opts).await?;
        println!("node {sid} listens on {:?}", node.local_addrs());
        nodes.insert(ServerId(sid), (node, kv));
    }
    // Tell every node where the others ended up listening.
    for (sid, (node, _)) in &nodes {
        for (other, (o, _)) in &nodes {
            if other != sid {
                node.set_peer_addrs(*other, o.local_addrs()).await;
            }
        }
    }
    Ok(nodes)
}

/// Stops the leader and measures the time to the next committed write through `via`.
async fn failover(
    nodes: &mut Nodes,
    leader: ServerId,
    via: ServerId,
) -> Result<(), Box<dyn Error>> {
    let t0 = Instant::now();
    if let Some((old, _)) = nodes.remove(&leader) {
        old.shutdown().await;
    }
    let zxid = loop {
        match nodes[&via]
            .0
            .submit(Bytes::from_static(b"after=failover"))
            .await
        {
            Ok(z) => break z,
            Err(e) if t0.elapsed() < Duration::from_secs(15) => {
                tracing::debug!(error = %e, "retrying");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let new_leader = wait_leader(nodes).await?;
    println!(
        "leader {leader} stopped; new leader {new_leader}; next write committed at {zxid} after {:?}",
        t0.elapsed()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let dir = tempfile::tempdir()?;
    let mut nodes = start_cluster(dir.path()).await?;
    let leader = wait_leader(&nodes).await?;
    let followers: Vec<ServerId> = nodes.keys().copied().filter(|s| *s != leader).collect();
    let (via, reader) = (followers[0], followers[1]);
    println!("leader: {leader}; writing through follower {via}");
    for (k, v) in [("color", "blue"), ("shape", "circle"), ("size", "42")] {
        let zxid = nodes[&via]
            .0
            .submit(Bytes::from(format!("{k}={v}")))
            .await?;
        println!(
            "  {k}={v} committed at {zxid}; on {via}: {:?}",
            nodes[&via].1.get(k)
        );
    }
    let point = nodes[&reader].0.sync().await?;
    println!(
        "sync on {reader} → {point}; color there = {:?}",
        nodes[&reader].1.get("color")
    );
    failover(&mut nodes, leader, via).await?;
    for (node, _) in nodes.values() {
        node.shutdown().await;
    }
    Ok(())
}
