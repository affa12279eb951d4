//! The local cluster's folder: made on the first run, reused as is by later runs.
//!
//! ```text
//! DIR/local-cluster.cfg    nodes, basePort, clusterId (what a later run reuses)
//! DIR/nodeN/zoo.cfg        node N's config (ports below, dataDir = DIR/nodeN/data; every
//!                          `server.M=127.0.0.1:Q:E;127.0.0.1:C` names M's client address)
//! DIR/nodeN/data/myid      N
//! DIR/nodeN/fe-meta.log    node N's stdout and stderr (appended across runs)
//! ```
//!
//! Ports from `basePort` B, node N = 1..: client B+N-1, quorum B+100+N-1, election B+200+N-1,
//! admin HTTP B+300+N-1 on 127.0.0.1 (default B = 9630: clients on 9630.., quorum 9730..,
//! election 9830.., admin 9930..; clear of the default ports of Doris and StarRocks, which a
//! metadata service runs beside, of ZooKeeper and of the Prometheus server's own).
//!
//! INV-1: an existing folder is never rewritten: its manifest decides nodes, ports and cluster
//! id, so a second run finds the same data under the same identity.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use super::super::Failure;

/// The manifest's file name.
const MANIFEST: &str = "local-cluster.cfg";
/// Most nodes.
pub const NODES_MAX: u16 = 9;

/// One node of the local cluster.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its server id (1-based).
    pub sid: u64,
    /// Its folder.
    pub dir: PathBuf,
    /// Its zoo.cfg.
    pub config: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// Its client port on 127.0.0.1.
    pub client_port: u16,
    /// Its admin HTTP port on 127.0.0.1 (`/metrics`, `/health`, `/ready`, `/commands`).
    pub admin_port: u16,
}

impl Node {
    /// `127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// `http://127.0.0.1:PORT`, its admin port.
    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin_port)
    }
}

/// The cluster's folder, as made or found.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The folder (absolute).
    pub dir: PathBuf,
    /// The first client port.
    pub base_port: u16,
    /// The cluster id shared by every node.
    pub cluster_id: u64,
    /// The nodes, by sid.
    pub nodes: Vec<Node>,
    /// Whether this run made the folder.
    pub created: bool,
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::other(format!("cannot {what} {}: {e}", path.display()))
}

/// Opens the folder `dir`, making it with `nodes` nodes from `base_port` if it has no
/// manifest yet.
pub fn open_or_create(dir: &Path, nodes: u16, base_port: u16) -> Result<Layout, Failure> {
    fs::create_dir_all(dir).map_err(|e| io_err("create", dir, e))?;
    let dir = fs::canonicalize(dir).map_err(|e| io_err("resolve", dir, e))?;
    let manifest = dir.join(MANIFEST);
    if manifest.exists() {
        let text = fs::read_to_string(&manifest).map_err(|e| io_err("read", &manifest, e))?;
        let (nodes_found, base, cluster_id) = parse_manifest(&text)
            .map_err(|why| Failure::other(format!("{}: {why}", manifest.display())))?;
        if nodes_found != nodes || base != base_port {
            tracing::debug!("reusing the folder's layout, not the command line's");
        }
        let layout = build(&dir, nodes_found, base, cluster_id, false)?;
        return Ok(layout);
    }
    if nodes == 0 || nodes > NODES_MAX {
        return Err(Failure::other(format!(
            "--nodes must be 1..={NODES_MAX}, got {nodes}"
        )));
    }
    if base_port < 1024 || u32::from(base_port) + 300 + u32::from(nodes) > 65535 {
        return Err(Failure::other(format!(
            "--base-port {base_port}: the cluster needs ports {base_port}..{} (above 1023)",
            u32::from(base_port) + 300 + u32::from(nodes)
        )));
    }
    let cluster_id = loop {
        let id: u64 = rand::random();
        if id != 0 {
            break id;
        }
    };
    let layout = build(&dir, nodes, base_port, cluster_id, true)?;
    for node in &layout.nodes {
        let data = node.dir.join("data");
        fs::create_dir_all(&data).map_err(|e| io_err("create", &data, e))?;
        let myid = data.join("myid");
        fs::write(&myid, format!("{}\n", node.sid)).map_err(|e| io_err("write", &myid, e))?;
        let cfg = zoo_cfg(&layout, node);
        fs::write(&node.config, cfg).map_err(|e| io_err("write", &node.config, e))?;
    }
    let text = format!(
        "# fe-meta local-cluster: this folder's layout (later runs reuse it)\n\
         nodes={nodes}\nbasePort={base_port}\nclusterId={cluster_id:#x}\n"
    );
    fs::write(&manifest, text).map_err(|e| io_err("write", &manifest, e))?;
    Ok(layout)
}

fn build(
    dir: &Path,
    nodes: u16,
    base_port: u16,
    cluster_id: u64,
    created: bool,
) -> Result<Layout, Failure> {
    let nodes = (1..=nodes)
        .map(|n| {
            let node_dir = dir.join(format!("node{n}"));
            Node {
                sid: u64::from(n),
                config: node_dir.join("zoo.cfg"),
                log: node_dir.join("fe-meta.log"),
                dir: node_dir,
                client_port: base_port + n - 1,
                admin_port: base_port + 300 + n - 1,
            }
        })
        .collect();
    Ok(Layout {
        dir: dir.to_path_buf(),
        base_port,
        cluster_id,
        nodes,
        created,
    })
}

fn parse_manifest(text: &str) -> Result<(u16, u16, u64), String> {
    let (mut nodes, mut base, mut cluster) = (None, None, None);
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("bad line `{line}`"))?;
        let bad = || format!("bad value for {k}: `{v}`");
        match k.trim() {
            "nodes" => nodes = Some(v.trim().parse::<u16>().map_err(|_| bad())?),
            "basePort" => base = Some(v.trim().parse::<u16>().map_err(|_| bad())?),
            "clusterId" => {
                let hex = v.trim().trim_start_matches("0x");
                cluster = Some(u64::from_str_radix(hex, 16).map_err(|_| bad())?);
            }
            _ => return Err(format!("unknown key `{k}`")),
        }
    }
    match (nodes, base, cluster) {
        (Some(n), Some(b), Some(c)) if (1..=NODES_MAX).contains(&n) => Ok((n, b, c)),
        _ => Err("expected nodes (1-9), basePort and clusterId".to_owned()),
    }
}

/// Appends `lines` (whole `key=value` lines) to node `node`'s zoo.cfg.
pub fn append_to_config(node: &Node, lines: &str) -> Result<(), Failure> {
    use std::io::Write as _;
    fs::OpenOptions::new()
        .append(true)
        .open(&node.config)
        .and_then(|mut f| f.write_all(lines.as_bytes()))
        .map_err(|e| io_err("append to", &node.config, e))
}

/// Appends `lines` to every node's zoo.cfg.
pub fn append_keys(layout: &Layout, lines: &str) -> Result<(), Failure> {
    layout
        .nodes
        .iter()
        .try_for_each(|n| append_to_config(n, lines))
}

/// Node `node`'s zoo.cfg: production-like timing (elections do not wait for ticks).
fn zoo_cfg(layout: &Layout, node: &Node) -> String {
    let b = layout.base_port;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# fe-meta node {sid} of a local cluster (made by `fe-meta local-cluster`)\n\
         tickTime=2000\ninitLimit=10\nsyncLimit=5\nforceSync=yes\n\
         dataDir={data}\nclientPort={client}\nclusterId={cid:#x}\n\
         admin.serverAddress=127.0.0.1\nadmin.serverPort={admin}",
        sid = node.sid,
        data = node.dir.join("data").display(),
        client = node.client_port,
        admin = node.admin_port,
        cid = layout.cluster_id,
    );
    for n in &layout.nodes {
        let i = n.client_port - b;
        let _ = writeln!(
            s,
            "server.{}=127.0.0.1:{}:{};{}",
            n.sid,
            b + 100 + i,
            b + 200 + i,
            n.endpoint()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_reuses_the_first_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let first = open_or_create(tmp.path(), 3, 20000).unwrap();
        assert!(first.created);
        let cfg = fs::read_to_string(&first.nodes[1].config).unwrap();
        assert!(cfg.contains("clientPort=20001"), "{cfg}");
        assert!(cfg.contains("admin.serverPort=20301\n"), "{cfg}");
        assert!(
            cfg.contains("server.3=127.0.0.1:20102:20202;127.0.0.1:20002"),
            "{cfg}"
        );
        let again = open_or_create(tmp.path(), 5, 30000).unwrap();
        assert!(!again.created);
        assert_eq!(again.nodes.len(), 3);
        assert_eq!(again.base_port, 20000);
        assert_eq!(again.cluster_id, first.cluster_id);
        assert_eq!(again.nodes[2].endpoint(), "127.0.0.1:20002");
    }

    /// Default ports of the services a metadata service runs beside or is compared with:
    /// Doris and StarRocks FE (http 8030, edit log 9010, rpc 9020, MySQL query 9030, cloud
    /// meta 6090) and BE/CN (http 8040, heartbeat 9050, brpc 8060, be 9060, starlet and
    /// single-replica load 9070, https and download 8050), ZooKeeper (client 2181, quorum 2888,
    /// election 3888, admin 8080, metrics 7000, secure client 2281) and Prometheus (server
    /// 9090, Pushgateway 9091, Alertmanager 9093 and 9094, node_exporter 9100).
    const TAKEN: [u16; 22] = [
        8030, 9010, 9020, 9030, 6090, 8040, 9050, 8060, 9060, 9070, 8050, 2181, 2888, 3888, 8080,
        7000, 2281, 9090, 9091, 9093, 9094, 9100,
    ];

    #[test]
    fn the_default_ports_of_the_largest_local_cluster_are_not_taken_by_neighbours() {
        let tmp = tempfile::tempdir().unwrap();
        let layout =
            open_or_create(tmp.path(), NODES_MAX, super::super::DEFAULT_BASE_PORT).unwrap();
        let mut ports = Vec::new();
        for node in &layout.nodes {
            ports.extend([node.client_port, node.admin_port]);
            let cfg = fs::read_to_string(&node.config).unwrap();
            for line in cfg.lines().filter(|l| l.starts_with("server.")) {
                // server.N=127.0.0.1:QUORUM:ELECTION;127.0.0.1:CLIENT
                let addr = line.split_once('=').unwrap().1;
                let (peer, client) = addr.split_once(';').unwrap();
                let mut parts = peer.split(':').skip(1);
                for p in [parts.next(), parts.next(), client.rsplit(':').next()] {
                    ports.push(p.unwrap().parse().unwrap());
                }
            }
        }
        assert_eq!(ports.len(), 9 * (2 + 9 * 3), "{ports:?}");
        for port in ports {
            assert!(
                !TAKEN.contains(&port),
                "port {port} is a neighbour's default"
            );
            assert!(
                (9630..9940).contains(&port),
                "port {port} outside 9630..9939"
            );
        }
    }
}
