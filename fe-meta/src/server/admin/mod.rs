//! The admin HTTP port (`admin.enableServer`, `admin.serverAddress`, `admin.serverPort`, as
//! ZooKeeper's AdminServer): HTTP/1.1 on the server's runtime.
//!
//! | request | answer |
//! |---------|--------|
//! | `GET /metrics` | the node's metrics registry in the Prometheus text format (`text/plain; version=0.0.4`): `zab_*`, `fe_meta_*`, `process_*` |
//! | `GET /health` | 200 `{"status":"ok",...}` while the node runs; 503 with the reason once it stopped on a fatal error ([`probes`] INV-1) |
//! | `GET /ready` | 200 when reads are served within the staleness tolerance and writes are possible; else 503 saying which and why ([`probes`] INV-2) |
//! | `GET /commands` | the four-letter words with their AdminServer names and links |
//! | `GET /commands/<name>` | a word as JSON, by AdminServer name or by its four letters; 404 JSON for another name |
//!
//! INV-1: a bind failure is one WARN line naming the address and the keys to change; the node
//! runs on without the admin port (as ZooKeeper).
//! INV-2: every connection ends when the server shuts down (a fatal stop leaves the port
//! up: [`AdminPort::stop`]); a client that sends no complete
//! request head within [`HEADER_READ_TIMEOUT`] is disconnected.
//! INV-3: any request gets a well-formed answer: an unknown path 404 and a method other than
//! GET or HEAD 405, each with a JSON body; nothing a client sends panics the server.

pub mod probes;
pub mod words;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{Encoder, TextEncoder};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn, Instrument};

use super::handle::mode_of;
use super::write::is_serving_leader;
use super::{ServerConfig, Shared};
use crate::protocol::FourLetterWord;
use probes::ProbeInput;

/// How long a client may take to send a request head (INV-2).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The admin port of a running server.
#[derive(Debug, Default)]
pub struct AdminPort {
    /// Where it listens (`None`: disabled, or its bind failed).
    pub addr: Option<SocketAddr>,
    /// Stops it: cancelled only by the server's shutdown, not by a fatal stop, so that
    /// `/health` reports the fatal stop while the process exits.
    pub stop: CancellationToken,
}

/// Binds the admin port `cfg` asks for, if any (INV-1): the listener and the port.
pub async fn bind_configured(cfg: &ServerConfig) -> (Option<TcpListener>, AdminPort) {
    let bound = match &cfg.admin_listen {
        Some(addr) => bind(addr).await,
        None => None,
    };
    let addr = bound.as_ref().map(|(_, a)| *a);
    (
        bound.map(|(l, _)| l),
        AdminPort {
            addr,
            ..AdminPort::default()
        },
    )
}

/// Serves the admin port on `listener` in the caller's span until `stop` is cancelled.
pub fn spawn(
    shared: &Arc<Shared>,
    listener: TcpListener,
    stop: &CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(run(shared.clone(), listener, stop.clone()).in_current_span())
}

/// Binds the admin port at `addr`; on failure logs one WARN line and returns `None` (INV-1).
pub async fn bind(addr: &str) -> Option<(TcpListener, SocketAddr)> {
    let bound = match TcpListener::bind(addr).await {
        Ok(l) => l.local_addr().map(|a| (l, a)),
        Err(e) => Err(e),
    };
    match bound {
        Ok(b) => Some(b),
        Err(e) => {
            warn!(
                "the admin HTTP port (/metrics, /health, /ready, /commands) cannot listen on \
                 {addr}: {e}; the server runs without it. Change `admin.serverPort` or \
                 `admin.serverAddress` in zoo.cfg, or set `admin.enableServer=false`"
            );
            None
        }
    }
}

/// Serves the admin port until `stop` is cancelled.
pub async fn run(shared: Arc<Shared>, listener: TcpListener, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                debug!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let (shared, stop) = (shared.clone(), stop.clone());
        let span = tracing::debug_span!("admin", %peer);
        tokio::spawn(
            async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(answer(&shared, &req).await) }
                });
                let mut builder = http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT);
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = stop.cancelled() => {}
                    served = conn => if let Err(e) = served {
                        debug!(error = %e, "admin connection ended");
                    },
                }
            }
            .instrument(span),
        );
    }
}

/// The answer to one request (INV-3).
async fn answer(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return json_reply(
            405,
            &json!({"error": format!("method {} is not allowed: use GET", req.method())}),
        );
    }
    let path = req.uri().path();
    match path {
        "/metrics" => metrics(shared),
        "/health" => {
            let (code, body) = probes::health(&probe_input(shared));
            json_reply(code, &body)
        }
        "/ready" => {
            let (code, body) = probes::ready(&probe_input(shared));
            json_reply(code, &body)
        }
        "/commands" | "/commands/" => json_reply(200, &command_list()),
        _ => match path.strip_prefix("/commands/") {
            Some(name) => match FourLetterWord::from_name(name.trim_end_matches('/')) {
                Some(word) => {
                    let inputs = shared.word_inputs(word).await;
                    let (code, body) = words::command_json(word, &inputs);
                    json_reply(code, &body)
                }
                None => json_reply(
                    404,
                    &json!({
                        "command": name,
                        "error": format!("unknown command `{name}`: GET /commands lists them"),
                    }),
                ),
            },
            None => json_reply(
                404,
                &json!({
                    "error": format!(
                        "no such endpoint `{path}`: /metrics, /health, /ready, /commands"
                    ),
                }),
            ),
        },
    }
}

fn metrics(shared: &Shared) -> Response<Full<Bytes>> {
    shared.refresh_metrics();
    let families = shared.node.metrics_registry().gather();
    let encoder = TextEncoder::new();
    let mut out = Vec::new();
    if let Err(e) = encoder.encode(&families, &mut out) {
        return json_reply(500, &json!({"error": format!("encoding the metrics: {e}")}));
    }
    reply(200, encoder.format_type(), out)
}

fn command_list() -> Value {
    let commands: Vec<Value> = FourLetterWord::ALL
        .iter()
        .map(|w| {
            json!({
                "name": w.command_name(),
                "alias": w.word(),
                "url": format!("/commands/{}", w.command_name()),
            })
        })
        .collect();
    json!({ "commands": commands })
}

/// The probes' view of the node, taken at once ([`probes`] INV-3).
fn probe_input(shared: &Shared) -> ProbeInput {
    let st = shared.node.status();
    let serving_leader = is_serving_leader(&st);
    ProbeInput {
        sid: shared.cfg.sid,
        mode: mode_of(&st).name(),
        fatal: st.fatal.clone(),
        serving_leader,
        serving_with_leader: st.serving && st.leader.is_some(),
        leader: st.leader.map(|l| l.0),
        reads_refused: shared
            .progress
            .check(serving_leader)
            .err()
            .map(|e| e.to_string()),
        staleness_ms: if serving_leader {
            None
        } else {
            shared.progress.lag_ms()
        },
        tolerance_ms: shared.progress.tolerance_ms(),
    }
}

fn json_reply(code: u16, body: &Value) -> Response<Full<Bytes>> {
    let mut text = body.to_string();
    text.push('\n');
    reply(code, "application/json", text.into_bytes())
}

fn reply(code: u16, content_type: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(CONTENT_TYPE, v);
    }
    resp
}
