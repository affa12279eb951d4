//! Membership changes on a running [`ProcCluster`]: a server that joins with `--helper` (its
//! zoo.cfg lists only itself, as an operator writes it), and forgetting a server the cluster
//! dropped, so the end checks no longer expect it.
//!
//! INV-1: server `sid` of a cluster always has the ports `base + 3·(sid − 1)` of the cluster's
//! port block, so sids 1..=8 fit in a block and an added server never takes another's ports.
//! INV-2: a joiner's zoo.cfg carries `dataDir`, `clientPort`, `forceSync`, `preAllocSize` and its
//! own `server.N` line only: the cluster id, the configuration and the timing come from the
//! helper, which is what the test shows; plus, for a TLS cluster, the spec's TLS lines
//! (`sslQuorum`, `client.secure`, `ssl.*`: shared ones and the joiner's own).

use fe_meta::client::{Reconfigured, Written};
use fe_meta::state::catalog::FrontendRole;

use super::binary;
use super::cluster::ProcCluster;
use super::node::{NodePorts, ProcNode};
use super::ports::BLOCK_LEN;
use super::ProcError;

/// Servers per port block (INV-1).
pub const MAX_SID: u64 = (BLOCK_LEN / 3) as u64;

impl ProcCluster {
    /// The ports of server `sid` (INV-1).
    pub fn ports_of(&self, sid: u64) -> Result<NodePorts, ProcError> {
        assert!(
            (1..=MAX_SID).contains(&sid),
            "sid {sid} outside 1..={MAX_SID}"
        );
        let any = self.sids().into_iter().next().ok_or(ProcError::NoNode(1))?;
        let n = self.node(any)?;
        let base = n.ports().client - 3 * (n.sid() as u16 - 1);
        let p = base + 3 * (sid as u16 - 1);
        Ok(NodePorts {
            client: p,
            quorum: p + 1,
            election: p + 2,
        })
    }

    /// The zoo.cfg `server.N` value of server `sid`: `host:quorum:election;host:client`.
    pub fn server_value(&self, sid: u64) -> Result<String, ProcError> {
        let p = self.ports_of(sid)?;
        Ok(format!(
            "127.0.0.1:{}:{};127.0.0.1:{}",
            p.quorum, p.election, p.client
        ))
    }

    /// Asks node `via` to add server `sid` as a follower; returns the change's answer.
    pub async fn add_follower(&self, via: u64, sid: u64) -> Result<Reconfigured, ProcError> {
        let value = self.server_value(sid)?;
        let c = self
            .client(via, None)
            .await
            .map_err(ProcError::client(via))?;
        c.add_frontend(sid, FrontendRole::Follower, &value)
            .await
            .map_err(ProcError::client(via))
    }

    /// Asks node `via` to drop server `sid`; returns the change's answer.
    pub async fn drop_frontend(&self, via: u64, sid: u64) -> Result<Reconfigured, ProcError> {
        let c = self
            .client(via, None)
            .await
            .map_err(ProcError::client(via))?;
        c.drop_frontend(sid).await.map_err(ProcError::client(via))
    }

    /// Creates server `sid` on an empty data dir with a zoo.cfg listing only itself (INV-2)
    /// and starts it with `--helper` pointing at node `helper`'s client port.
    pub fn start_joiner(&mut self, sid: u64, helper: u64) -> Result<(), ProcError> {
        let ports = self.ports_of(sid)?;
        let bin = binary::fe_meta_bin()?;
        let helper_addr = self.client_addr(helper);
        let spec = self.spec().clone();
        let mut node = ProcNode::new(sid, ports, Default::default(), self.dir(), None, &bin);
        std::fs::create_dir_all(node.data_dir()).map_err(ProcError::io("mkdir data dir"))?;
        let mut cfg = format!(
            "dataDir={}\nclientPort={}\nforceSync={}\npreAllocSize={}\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort=0\nserver.{sid}={}\n",
            node.data_dir().display(),
            ports.client,
            if spec.force_sync { "yes" } else { "no" },
            spec.pre_alloc_kib,
            self.server_value(sid)?,
        );
        // The cluster's common lines and the node's own (e.g. `auth.*`, `ssl.*`: the joiner
        // asks its helper as the node identity, over TLS when the cluster uses it).
        for line in spec
            .extra
            .iter()
            .chain(spec.node_extra.get(&sid).into_iter().flatten())
        {
            cfg += line;
            cfg.push('\n');
        }
        std::fs::write(node.config_path(), cfg).map_err(ProcError::io("write zoo.cfg"))?;
        node.spawn_with(&["--helper", &helper_addr])?;
        self.insert_node(node);
        Ok(())
    }

    /// Forgets server `sid`, which the cluster dropped, so the end checks no longer expect
    /// it: waits up to `within` for it to exit by itself (a dropped server does) and returns
    /// its exit status; one still running then is killed (`None`).
    pub async fn forget(
        &mut self,
        sid: u64,
        within: std::time::Duration,
    ) -> Result<Option<i32>, ProcError> {
        let mut node = self.remove_node(sid)?;
        if !node.is_running() {
            return Ok(None);
        }
        match node.wait_exit(within).await {
            Ok(code) => Ok(code),
            Err(_) => {
                node.kill9()?;
                Ok(None)
            }
        }
    }
}

/// The journal id of a write's answer.
pub fn journal_id(w: &Written) -> u64 {
    w.journal_id.0
}

impl ProcCluster {
    /// Waits until exactly one of `sids` reports itself leader, established in its epoch (it
    /// applied an entry of it), and every other of `sids` follows it in that epoch; returns it.
    /// Unlike [`ProcCluster::leader`], servers outside `sids` (one waiting to be added, one
    /// dropped) are not asked.
    pub async fn leader_among(
        &self,
        sids: &[u64],
        within: std::time::Duration,
    ) -> Result<u64, ProcError> {
        let start = std::time::Instant::now();
        let mut last = String::new();
        while start.elapsed() < within {
            let mut seen = Vec::new();
            for sid in sids {
                seen.push((*sid, self.status(*sid).await));
            }
            let leader = seen.iter().find_map(|(sid, st)| {
                st.as_ref()
                    .filter(|st| {
                        st.mode == fe_meta::protocol::Mode::Leader
                            && st.epoch > 0
                            && u64::from(st.applied_journal_id.epoch().0) == st.epoch
                    })
                    .map(|st| (*sid, st.epoch))
            });
            if let Some((l, epoch)) = leader {
                let all = seen.iter().all(|(_, st)| {
                    st.as_ref()
                        .is_some_and(|st| st.leader_sid == Some(l) && st.epoch == epoch)
                });
                if all {
                    return Ok(l);
                }
            }
            last = format!(
                "{:?}",
                seen.iter()
                    .map(|(s, st)| (s, st.as_ref().map(|st| (st.mode, st.leader_sid, st.epoch))))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Err(ProcError::Timeout {
            what: format!("one leader followed by servers {sids:?}"),
            within,
            detail: format!(": {last}"),
        })
    }
}
