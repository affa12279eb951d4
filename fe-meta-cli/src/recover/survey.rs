//! Asking the named survivors what they hold (RECOVERY_INFO), all at once, each within the
//! command's timeouts; and the table that shows the answers.
//!
//! INV-1: every endpoint gets one row, in the order named: its answer or why there is none.
//! INV-2: each ask is bounded by the connect and request timeouts; none is retried.

use fe_meta::client::{Client, ClientOptions};
use futures::future::join_all;

use super::choose::{Held, Row};

/// Asks every endpoint (INV-1, INV-2).
pub(crate) async fn ask(endpoints: &[String], options: ClientOptions) -> Vec<Row> {
    let asks = endpoints.iter().map(|e| {
        let options = options.clone();
        async move {
            let held = match Client::connect_with(e, options).await {
                Ok(client) => client
                    .recovery_info()
                    .await
                    .map(|i| Held::from(&i))
                    .map_err(|err| err.to_string()),
                Err(err) => Err(err.to_string()),
            };
            Row {
                endpoint: e.clone(),
                held,
            }
        }
    });
    join_all(asks).await
}

/// The survey as a table: the local node first, then every named survivor.
pub(crate) fn table(local: &Held, local_dir: &str, rows: &[Row]) -> String {
    let mut lines = vec![[
        "SID",
        "ENDPOINT",
        "REACHABLE",
        "STATE",
        "CURRENT_EPOCH",
        "LAST_ZXID",
        "LAST_COMMITTED",
        "CONFIG_VERSION",
    ]
    .map(String::from)
    .to_vec()];
    lines.push(cells(local_dir, Ok(local)));
    for r in rows {
        lines.push(cells(&r.endpoint, r.held.as_ref()));
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for l in &lines {
        let padded: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out += padded.join("  ").trim_end();
        out.push('\n');
    }
    out
}

fn cells(endpoint: &str, held: Result<&Held, &String>) -> Vec<String> {
    match held {
        Ok(h) => vec![
            h.sid.to_string(),
            endpoint.to_string(),
            "yes".into(),
            if h.initialized {
                h.state.clone()
            } else {
                format!("{} NOT INITIALIZED", h.state)
            },
            h.current_epoch.to_string(),
            h.last_logged.to_string(),
            h.last_committed
                .map_or_else(|| "-".to_string(), |z| z.to_string()),
            h.config_version.to_string(),
        ],
        Err(why) => vec![
            "?".into(),
            endpoint.to_string(),
            format!("NO: {why}"),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ],
    }
}
