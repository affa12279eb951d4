//! `fe-meta check-config zoo.cfg`: the file checked as `fe-meta server` would load it (zab-net's
//! parser, `dataDir/myid`, fe-meta's own keys), reporting every error instead of the first.
//!
//! The parsers stop at the first error, and the start path keeps doing so; this command
//! collects by re-checking: after each error it takes the offending line out (an error that
//! names a line), puts in a placeholder for a missing required key, or drops the offending
//! fe-meta key, and parses again, until the file parses or an error leaves nothing to take out.
//!
//! INV-1: every error printed is one the server's own start path reports for this file (or for
//! it with earlier offending lines removed); nothing is printed as effective configuration
//! unless the file loads with no error at all.
//! INV-2: the re-checking loop is bounded (each round removes a line or key, or adds one of the
//! four required keys), and nothing is written anywhere.

use std::path::{Path, PathBuf};

use clap::Args;
use fe_meta::server::{ServerConfig, ServerError, EXTRA_KEYS};
use serde_json::json;
use zab_net::config::{parse_with, read_myid, ConfigError, NodeConfig};

use crate::Failure;

/// The keys zoo.cfg requires, with a value each accepts (stands in while the rest is checked).
const REQUIRED_PLACEHOLDERS: [(&str, &str); 4] = [
    ("tickTime", "1"),
    ("initLimit", "1"),
    ("syncLimit", "1"),
    ("dataDir", "."),
];

/// `fe-meta check-config`.
#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The zoo.cfg to check (as given to `fe-meta server --config`).
    #[arg(value_name = "ZOO_CFG")]
    pub config: PathBuf,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `check-config`: the errors (exit 1) or the effective configuration.
pub fn run(args: &CheckConfigArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&args.config)
        .map_err(|e| Failure::other(format!("cannot read {}: {e}", args.config.display())))?;
    let outcome = check(&text);
    if args.json {
        let doc = match &outcome {
            Ok(c) => json!({"valid": true, "errors": [], "effective": effective(c)
                .into_iter().map(|(k, v)| (k, json!(v))).collect::<serde_json::Map<_, _>>()}),
            Err(errors) => json!({"valid": false, "errors": errors}),
        };
        println!("{doc}");
    } else {
        match &outcome {
            Ok(c) => {
                println!("{}: OK; effective configuration:", args.config.display());
                for (k, v) in effective(c) {
                    println!("{k}={v}");
                }
            }
            Err(errors) => {
                for e in errors {
                    println!("{}: {e}", args.config.display());
                }
            }
        }
    }
    match outcome {
        Ok(_) => Ok(()),
        Err(errors) => Err(Failure::other(format!(
            "{}: {} error(s)",
            args.config.display(),
            errors.len()
        ))),
    }
}

/// Checks zoo.cfg text: the server configuration it loads to, or every error found.
pub fn check(text: &str) -> Result<ServerConfig, Vec<String>> {
    let mut errors = Vec::new();
    let Some((node, placeholder_dir)) = parse_collecting(text, &mut errors) else {
        return Err(errors);
    };
    let sid = if placeholder_dir {
        None
    } else {
        match read_myid(&node.data_dir) {
            Ok(sid) => Some(sid.0),
            Err(e) => {
                errors.push(e.to_string());
                None
            }
        }
    };
    // Without a known sid, fe-meta's keys are still checked, as the first server's.
    let check_sid = sid.or_else(|| node.servers.keys().next().map(|s| s.0));
    let loaded = check_sid.and_then(|sid| server_collecting(node, sid, &mut errors));
    match loaded {
        Some(c) if errors.is_empty() => Ok(c),
        _ => Err(errors),
    }
}

/// zab-net's parse, repeated with each offending line taken out; the parsed configuration and
/// whether `dataDir` is a placeholder, or `None` when an error left nothing to take out.
fn parse_collecting(text: &str, errors: &mut Vec<String>) -> Option<(NodeConfig, bool)> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let original = lines.len();
    let mut placeholder_dir = false;
    // Required keys whose line was taken out for a bad value: their "missing" is not news.
    let mut taken_out: Vec<String> = Vec::new();
    for _ in 0..=original + REQUIRED_PLACEHOLDERS.len() {
        let e = match parse_with(&lines.join("\n"), EXTRA_KEYS) {
            Ok(node) => return Some((node, placeholder_dir)),
            Err(e) => e,
        };
        let consequence =
            matches!(&e, ConfigError::Missing { key } if taken_out.iter().any(|k| k == key));
        if !consequence {
            errors.push(e.to_string());
        }
        match (line_of(&e), &e) {
            (Some(line), _) if line >= 1 && line <= original => {
                if let ConfigError::BadValue { key, .. } = &e {
                    taken_out.push(key.clone());
                }
                lines[line - 1].clear();
            }
            (None, ConfigError::Missing { key }) => {
                let (k, v) = REQUIRED_PLACEHOLDERS
                    .iter()
                    .find(|(k, _)| k == key)
                    .copied()?;
                placeholder_dir |= k == "dataDir";
                lines.push(format!("{k}={v}"));
            }
            _ => return None,
        }
    }
    None
}

/// The 1-based line an error names, if it names one.
fn line_of(e: &ConfigError) -> Option<usize> {
    match e {
        ConfigError::Syntax { line, .. }
        | ConfigError::UnknownKey { line, .. }
        | ConfigError::Duplicate { line, .. }
        | ConfigError::BadValue { line, .. }
        | ConfigError::AddressInUse { line, .. } => Some(*line),
        _ => None,
    }
}

/// fe-meta's checks, repeated with each offending key dropped.
fn server_collecting(
    mut node: NodeConfig,
    sid: u64,
    errors: &mut Vec<String>,
) -> Option<ServerConfig> {
    for _ in 0..=EXTRA_KEYS.len() + 2 {
        let e = match ServerConfig::from_node(node.clone(), sid) {
            Ok(c) => return Some(c),
            Err(e) => e,
        };
        errors.push(e.to_string());
        match &e {
            ServerError::Config(ConfigError::BadValue { key, .. })
                if node.extra.remove(key).is_some() => {}
            ServerError::Invalid(msg) if msg.contains("clusterId") => {
                node.cluster_id = Some(1);
            }
            ServerError::Invalid(msg)
                if msg.starts_with("no client port") && node.client_port.is_none() =>
            {
                node.client_port = Some(1);
            }
            _ => return None,
        }
    }
    None
}

/// The effective configuration, key by key, in the file's terms: the ZAB node's keys, then
/// fe-meta's.
fn effective(c: &ServerConfig) -> Vec<(String, String)> {
    let mut v = node_keys(&c.node);
    v.extend(server_keys(c));
    v
}

/// The ZAB node's settings, in the order of a zoo.cfg.
fn node_keys(n: &NodeConfig) -> Vec<(String, String)> {
    let path = |p: &Path| p.display().to_string();
    let mut v = vec![
        ("tickTime".to_string(), n.tick_ms.to_string()),
        ("initLimit".to_string(), n.init_limit_ticks.to_string()),
        ("syncLimit".to_string(), n.sync_limit_ticks.to_string()),
        ("dataDir".to_string(), path(&n.data_dir)),
        ("dataLogDir".to_string(), path(&n.data_log_dir)),
    ];
    for (sid, s) in &n.servers {
        v.push((format!("server.{}", sid.0), s.to_value()));
    }
    v.extend([
        ("snapCount".to_string(), n.snap_count.to_string()),
        (
            "snapSizeLimitInKb".to_string(),
            n.snap_size_limit_bytes
                .map_or_else(|| "disabled".to_string(), |b| (b / 1024).to_string()),
        ),
        (
            "snapshotSizeFactor".to_string(),
            n.snapshot_size_factor.to_string(),
        ),
        (
            "autopurge.snapRetainCount".to_string(),
            n.snap_retain_count.to_string(),
        ),
        (
            "autopurge.purgeInterval".to_string(),
            n.purge_interval_hours.to_string(),
        ),
        (
            "preAllocSize".to_string(),
            (n.pre_alloc_bytes / 1024).to_string(),
        ),
        (
            "forceSync".to_string(),
            if n.force_sync { "yes" } else { "no" }.to_string(),
        ),
        ("snapCpuPercent".to_string(), n.snap_cpu_percent.to_string()),
    ]);
    v
}

/// fe-meta's own settings: the server's identity and client listener, then the keys of
/// [`ServerConfig::fe_meta_settings`] (as the `conf` word shows them).
fn server_keys(c: &ServerConfig) -> Vec<(String, String)> {
    let mut v = vec![
        ("clusterId".to_string(), format!("{:#x}", c.cluster_id)),
        ("myid".to_string(), c.sid.to_string()),
        ("role".to_string(), format!("{:?}", c.role)),
        ("clientListen".to_string(), c.client_listen.clone()),
    ];
    v.extend(c.fe_meta_settings());
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A bad required value is one error (not also "missing"); a missing one is listed; both
    /// with the errors after them.
    #[test]
    fn a_bad_or_missing_required_key_is_listed_once_and_checking_goes_on() {
        let text = "tickTime=x\ninitLimit=10\nserver.1=127.0.0.1:2888:3888;9031\nclusterId=1\n\
                    nope=1\n";
        let errors = check(text).unwrap_err();
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(errors[0].contains("line 1") && errors[0].contains("tickTime"));
        assert!(errors[1].contains("line 5") && errors[1].contains("nope"));
        assert!(errors[2].contains("missing") && errors[2].contains("syncLimit"));
        assert!(errors[3].contains("missing") && errors[3].contains("dataDir"));
    }
}
