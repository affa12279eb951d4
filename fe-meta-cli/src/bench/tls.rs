//! `bench --tls`: a throwaway CA and certificates in the launched cluster's folder
//! (`DIR/tls`, by `tls_certs`), and the zoo.cfg lines that turn TLS on for every port.
//!
//! INV-1: applied before any node starts; the nodes then refuse plaintext on every port, and
//! this process's clients (the workloads and the STATUS polls) present `client-bench.pem`.

use fe_meta::client::ClientTls;

use super::super::local_cluster::layout::{self, Layout};
use super::super::local_cluster::set_poll_tls;
use super::super::tls_certs::{write_all, Ca};
use super::super::Failure;

/// Issues the certificates, appends the TLS keys to every node's zoo.cfg, and returns the
/// clients' TLS (also made the STATUS polls' TLS).
pub fn secure(layout: &Layout) -> Result<ClientTls, Failure> {
    let dir = layout.dir.join("tls");
    let ca = Ca::new("fe-meta bench CA")?;
    let hosts: Vec<String> = layout
        .nodes
        .iter()
        .map(|_| "127.0.0.1".to_owned())
        .collect();
    write_all(&ca, &dir, &hosts, &["bench".to_owned()])?;
    let trust = dir.join("ca.pem");
    for (i, node) in layout.nodes.iter().enumerate() {
        let key = dir.join(format!("node{}.pem", i + 1));
        let lines = format!(
            "sslQuorum=true\nssl.quorum.keyStore.location={k}\n\
             ssl.quorum.trustStore.location={t}\nclient.secure=true\n\
             ssl.keyStore.location={k}\nssl.trustStore.location={t}\nssl.clientAuth=need\n",
            k = key.display(),
            t = trust.display()
        );
        layout::append_to_config(node, &lines)?;
    }
    let client = dir.join("client-bench.pem");
    let tls = ClientTls::load(&trust, Some(&client), Some(&client))
        .map_err(|e| Failure::other(e.to_string()))?;
    set_poll_tls(tls.clone());
    Ok(tls)
}
