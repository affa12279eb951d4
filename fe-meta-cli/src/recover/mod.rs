//! `fe-meta recover`: restarts a cluster that lost its majority from one survivor (Doris'
//! `metadata_failure_recovery`), run on that survivor's host with its zoo.cfg while it is
//! stopped.
//!
//! 1. `survey`: every survivor named in `--survivors` is asked RECOVERY_INFO (a running node
//!    answers it without a quorum); the local node is read from its data dir (`local`). The
//!    table shows them all.
//! 2. `choose`: the local node goes on only if no named survivor is ahead of it by the
//!    election's order (currentEpoch, last zxid) and every one answered; otherwise it refuses,
//!    naming the survivor ahead and by how much, unless `--force-lose-data`.
//! 3. `--plan` stops here, printing what would be done.
//! 4. `rewrite`: with the local node stopped (its client port does not answer, its quorum port
//!    is free), its old files are copied aside and a one-member configuration of itself is
//!    logged in a new epoch.
//! 5. `steps`: the next steps (start it; add the others back from wiped data dirs).
//!
//! INV-1: nothing is written before every check passed, and never with `--plan`.
//! INV-2: a refusal exits non-zero with one line that says why and what to do.

mod choose;
mod local;
mod rewrite;
mod steps;
mod survey;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use fe_meta::client::{ClientOptions, ClientTls, Credentials};
use zab_core::Zxid;

use crate::Failure;

/// `fe-meta recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The zoo.cfg of this host's node, the survivor that becomes a one-member cluster (its
    /// dataDir and myid); the node must be stopped.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: PathBuf,
    /// Client endpoints of every surviving member, comma-separated (this server's own, if
    /// named, is read from its data dir instead): each is asked what it holds; start the other
    /// survivors first (they answer without a quorum).
    #[arg(
        long,
        required = true,
        value_name = "HOST:PORT[,HOST:PORT...]",
        value_delimiter = ','
    )]
    pub survivors: Vec<String>,
    /// Go on although a named survivor is ahead of this node or did not answer: the txns it
    /// logged beyond this node's last zxid are LOST (the output lists whose and from which
    /// zxid), acknowledged writes among them.
    #[arg(long)]
    pub force_lose_data: bool,
    /// Print the survey and what would be done, change nothing.
    #[arg(long)]
    pub plan: bool,
    /// Seconds to wait for each survivor's answer (and for its connection).
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub timeout: f64,
}

/// How the survivors are asked, as the node itself would call them: zoo.cfg's
/// `auth.nodeCredentialsFile` and its client-port TLS (`client.secure`), if set.
fn node_client_settings(
    config: &std::path::Path,
) -> Result<(Option<std::sync::Arc<Credentials>>, Option<ClientTls>), Failure> {
    let text = std::fs::read_to_string(config).map_err(|e| Failure {
        code: crate::ExitCode::Other,
        message: format!("cannot read {}: {e}", config.display()),
    })?;
    let refused = |e: fe_meta::server::ServerError| Failure {
        code: crate::ExitCode::Other,
        message: e.to_string(),
    };
    let credentials = fe_meta::server::auth::node_credentials_in(&text).map_err(refused)?;
    let tls = fe_meta::server::node_client_tls_in(&text).map_err(refused)?;
    Ok((credentials, tls))
}

/// Runs `fe-meta recover` (INV-1, INV-2).
pub fn run(args: &RecoverArgs) -> Result<(), Failure> {
    let local = local::read(&args.config)?;
    let timeout = Duration::try_from_secs_f64(args.timeout).unwrap_or(Duration::from_secs(5));
    let (credentials, tls) = node_client_settings(&args.config)?;
    let options = ClientOptions {
        connect_timeout: timeout,
        request_timeout: timeout,
        credentials,
        tls,
        ..ClientOptions::DEFAULT
    };
    let rt = crate::runtime()?;
    let mut endpoints: Vec<String> = args
        .survivors
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && *s != local.client_addr)
        .collect();
    endpoints.dedup();
    let rows = rt.block_on(survey::ask(&endpoints, &options));
    let local_probe = rt.block_on(survey::ask(
        std::slice::from_ref(&local.client_addr),
        &options,
    ));
    let here = format!("{} (local)", local.node.data_dir.display());
    print!("{}", survey::table(&local.held, &here, &rows));
    refuse_if_running(&local, &rows, &local_probe)?;
    check_verdict(&local, &rows, args.force_lose_data)?;
    let config = args.config.display().to_string();
    let epoch = rewrite::next_epoch(&local)?;
    let planned = rewrite::one_member(&local, Zxid::new(epoch, 1));
    if args.plan {
        println!(
            "plan: server {} would become a one-member cluster with its data (up to {}): \
             configuration {planned} logged in epoch {}; its old files copied to {}/recover-<time>/ \
             first. Nothing was changed (--plan).\n",
            local.sid,
            local.held.last_logged,
            epoch.0,
            local.node.data_dir.display()
        );
        print!("{}", steps::next_steps(&local, &planned, &config));
        return Ok(());
    }
    refuse_if_port_busy(&local)?;
    let done = rewrite::rewrite(&local, &stamp())?;
    println!(
        "server {} is now a one-member cluster with its data (up to {}): configuration {} \
         logged in epoch {}.\nold files copied to {} ({} files; RESTORE.txt there says how to \
         go back)\n",
        local.sid,
        local.held.last_logged,
        done.membership,
        done.membership.version.epoch().0,
        done.set_aside.display(),
        done.copied.len()
    );
    print!("{}", steps::next_steps(&local, &done.membership, &config));
    Ok(())
}

/// Refuses on what no flag overrides, and on losses unless `force` (then prints each loss).
fn check_verdict(local: &local::Local, rows: &[choose::Row], force: bool) -> Result<(), Failure> {
    let verdict = choose::judge(&local.held, rows);
    if let Some(why) = verdict.refusals.first().or(local.refusal.as_ref()) {
        return Err(Failure::other(format!("recovery refused: {why}")));
    }
    if verdict.losses.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(Failure::other(format!(
            "recovery refused: {} (or pass --force-lose-data to go on and lose them)",
            verdict.losses.join("; ")
        )));
    }
    for loss in &verdict.losses {
        println!("--force-lose-data: DATA WILL BE LOST: {loss}");
    }
    Ok(())
}

/// Refuses when the local node answers on its client port, or a named survivor is this very
/// server (INV-1).
fn refuse_if_running(
    local: &local::Local,
    rows: &[choose::Row],
    probe: &[choose::Row],
) -> Result<(), Failure> {
    let running = rows
        .iter()
        .chain(probe)
        .find(|r| r.held.as_ref().is_ok_and(|h| h.sid == local.sid));
    match running {
        Some(r) => Err(Failure::other(format!(
            "recovery refused: server {} is running (it answered at {}): stop it first; \
             `fe-meta recover` rewrites its data dir offline",
            local.sid, r.endpoint
        ))),
        None => Ok(()),
    }
}

/// Refuses when the local node's quorum or election port is taken: a node that runs without
/// answering on its client port (INV-1).
fn refuse_if_port_busy(local: &local::Local) -> Result<(), Failure> {
    let Some(own) = local.node.servers.get(&zab_core::ServerId(local.sid)) else {
        return Ok(());
    };
    for endpoint in [own.quorum_endpoint(), own.election_endpoint()] {
        if let Err(e) = std::net::TcpListener::bind(&endpoint) {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                return Err(Failure::other(format!(
                    "recovery refused: {endpoint} (server {}'s quorum or election port) is in \
                     use: is the node still running? stop it first",
                    local.sid
                )));
            }
        }
    }
    Ok(())
}

/// The set-aside dir's time stamp: UTC, `YYYYMMDDTHHMMSSZ`.
fn stamp() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0));
    let t = crate::render::utc(ms);
    format!("{}Z", t.replace(['-', ':'], "").replace(' ', "T"))
}
