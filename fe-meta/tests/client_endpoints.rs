//! A client with several endpoints against scripted in-process nodes (the protocol codec on
//! loopback sockets) and a real 3-node in-process cluster: a refused endpoint is skipped; a
//! lost connection moves a read, and a session write with the same session fields, to the next
//! endpoint; a write without a session is not resent; each endpoint is tried at most once per
//! call, in order after the failed one; all down fails naming every endpoint; a node stopped
//! under a write load moves the client on with every write applied exactly once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod server_support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use fe_meta::client::{Client, ClientError, ClientOptions};
use fe_meta::command::Command;
use fe_meta::protocol::{
    decode_request, encode_frame, encode_response, FrameDecoder, Request, RequestBody, RequestMeta,
    Response, ResponseBody, Status,
};
use fe_meta::Zxid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a scripted node does with each request it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Answers it (a write as Written with journal id 7, a GET_VAR with the node's address).
    Answer,
    /// Closes the connection without answering, as a node killed mid-request.
    HangUp,
    /// Hangs up on its first connection, answers on the later ones (a node back up).
    HangUpOnce,
}

/// A scripted node: its address and every request it read, on any of its connections.
struct Node {
    addr: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Node {
    fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

async fn node(script: Script) -> Node {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (me, log) = (addr.clone(), Arc::clone(&seen));
    tokio::spawn(async move {
        for connection in 0.. {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let hang_up = match script {
                Script::Answer => false,
                Script::HangUp => true,
                Script::HangUpOnce => connection == 0,
            };
            let (me, log) = (me.clone(), Arc::clone(&log));
            tokio::spawn(async move {
                let mut buf = BytesMut::new();
                let dec = FrameDecoder::default();
                loop {
                    while let Some(payload) = dec.decode(&mut buf).unwrap() {
                        let req = decode_request(&payload).unwrap();
                        log.lock().unwrap().push(req.clone());
                        if hang_up {
                            return;
                        }
                        let mut out = Vec::new();
                        encode_frame(&encode_response(&answer(&req, &me)), &mut out);
                        if s.write_all(&out).await.is_err() {
                            return;
                        }
                    }
                    match s.read_buf(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    Node { addr, seen }
}

fn answer(req: &Request, me: &str) -> Response {
    let result = match &req.body {
        RequestBody::Write(_) => ResponseBody::Written {
            journal_id: Zxid(7),
            created_id: Some(42),
        },
        RequestBody::GetVar { .. } => ResponseBody::Var {
            journal_id: Zxid(7),
            value: Some(me.to_owned()),
        },
        other => panic!("the scripted node does not answer {other:?}"),
    };
    Response {
        id: req.id,
        kind: req.body.kind(),
        result: Ok(result),
    }
}

/// An address nothing listens on (bound, then closed): connecting is refused.
async fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().to_string()
}

const QUICK: ClientOptions = ClientOptions {
    connect_timeout: Duration::from_secs(2),
    request_timeout: Duration::from_secs(5),
    ..ClientOptions::DEFAULT
};

async fn read_var(client: &Client) -> Result<String, ClientError> {
    Ok(client.get_var("x", false).await?.value.unwrap_or_default())
}

#[tokio::test]
async fn a_refused_endpoint_is_skipped() {
    let down = closed_port().await;
    let up = node(Script::Answer).await;
    let client = Client::connect_any(&[&down, &up.addr], QUICK)
        .await
        .unwrap();
    assert_eq!(client.addr(), up.addr);
    assert_eq!(read_var(&client).await.unwrap(), up.addr);
    assert_eq!(client.endpoints(), [down, up.addr.clone()]);
}

#[tokio::test]
async fn all_down_fails_naming_every_endpoint() {
    let (a, b, c) = (
        closed_port().await,
        closed_port().await,
        closed_port().await,
    );
    let e = Client::connect_any(&[&a, &b, &c], QUICK).await.unwrap_err();
    let ClientError::AllEndpointsFailed { attempts } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(attempts.len(), 3, "{e}");
    let text = e.to_string();
    for addr in [&a, &b, &c] {
        assert!(text.contains(addr.as_str()), "{addr} missing from: {text}");
    }
    assert_eq!(e.name(), "UNREACHABLE");
    assert!(!e.may_be_applied(), "nothing was sent: {e}");
}

#[tokio::test]
async fn a_lost_connection_moves_a_read_to_the_next_endpoint() {
    let dying = node(Script::HangUp).await;
    let up = node(Script::Answer).await;
    let client = Client::connect_any(&[&dying.addr, &up.addr], QUICK)
        .await
        .unwrap();
    assert_eq!(client.addr(), dying.addr);
    assert_eq!(read_var(&client).await.unwrap(), up.addr);
    assert_eq!(client.addr(), up.addr);
    assert_eq!((dying.seen().len(), up.seen().len()), (1, 1));
}

#[tokio::test]
async fn a_session_write_is_resent_with_the_same_session_fields() {
    let dying = node(Script::HangUp).await;
    let up = node(Script::Answer).await;
    let client = Client::connect_any(&[&dying.addr, &up.addr], QUICK)
        .await
        .unwrap();
    let w = client.create_db("d").await.unwrap();
    assert_eq!((w.journal_id, w.created_id), (Zxid(7), Some(42)));
    let (first, retry) = (dying.seen(), up.seen());
    assert_eq!((first.len(), retry.len()), (1, 1));
    let tag = first[0].meta.session.expect("a write carries the session");
    assert_eq!(
        retry[0].meta.session,
        Some(tag),
        "the same client id, seq, floor"
    );
    assert_eq!(tag.client_id, client.session().client_id());
    assert_eq!(first[0].body, retry[0].body);
}

#[tokio::test]
async fn a_write_without_a_session_is_not_resent_after_it_was_sent() {
    let dying = node(Script::HangUp).await;
    let up = node(Script::Answer).await;
    let client = Client::connect_any(&[&dying.addr, &up.addr], QUICK)
        .await
        .unwrap();
    let body = RequestBody::Write(Command::CreateDb { name: "d".into() });
    let e = client
        .call_with(body, RequestMeta::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ClientError::Closed { addr, .. } if *addr == dying.addr),
        "{e:?}"
    );
    assert!(e.may_be_applied());
    assert!(up.seen().is_empty(), "resent without a session");
    // The connection is gone: the next call goes to the next endpoint without sending
    // anything to the lost one.
    assert_eq!(read_var(&client).await.unwrap(), up.addr);
    assert_eq!(dying.seen().len(), 1);
}

#[tokio::test]
async fn a_later_call_dials_again_after_every_endpoint_failed() {
    let flaky = node(Script::HangUpOnce).await;
    let client = Client::connect_any(&[&flaky.addr], QUICK).await.unwrap();
    let e = read_var(&client).await.unwrap_err();
    assert!(matches!(&e, ClientError::Closed { .. }), "{e:?}");
    assert!(client.is_closed());
    assert_eq!(read_var(&client).await.unwrap(), flaky.addr);
    assert!(!client.is_closed());
    assert_eq!(flaky.seen().len(), 2);
}

#[tokio::test]
async fn each_endpoint_is_tried_once_per_call_in_order_after_the_failed_one() {
    let refused = closed_port().await;
    let nodes = [
        node(Script::HangUp).await,
        node(Script::HangUp).await,
        node(Script::HangUp).await,
    ];
    // Connects to nodes[0] (index 1); a call then tries 2, 3, 0 (refused), and stops.
    let endpoints = [&refused, &nodes[0].addr, &nodes[1].addr, &nodes[2].addr];
    let client = Client::connect_any(&endpoints, QUICK).await.unwrap();
    let e = read_var(&client).await.unwrap_err();
    let ClientError::AllEndpointsFailed { attempts } = &e else {
        panic!("{e:?}");
    };
    let order: Vec<String> = attempts
        .iter()
        .map(|a| match a {
            ClientError::Closed { addr, .. } | ClientError::Connect { addr, .. } => addr.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        order,
        [&nodes[0].addr, &nodes[1].addr, &nodes[2].addr, &refused].map(|s| s.clone())
    );
    for n in &nodes {
        assert_eq!(n.seen().len(), 1, "{} asked more than once", n.addr);
    }
    assert!(e.to_string().contains(&refused), "{e}");
}

/// A real cluster: a client on a follower keeps writing through a stop of that follower; it
/// moves to the next endpoint, every acknowledged write is there, and none is applied twice (a
/// session write applied before the stop and resent is answered with its first outcome, not
/// ALREADY_EXISTS).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_stopped_under_writes_moves_the_client_on() {
    let mut c = server_support::Cluster::new(3, "");
    c.start_all().await;
    let leader = c.wait_stable(Duration::from_secs(20)).await;
    let followers: Vec<u64> = (1..=3).filter(|s| *s != leader).collect();
    let first = followers[0];
    let endpoints: Vec<String> = [first, followers[1], leader]
        .iter()
        .map(|s| c.addr(*s).to_string())
        .collect();
    let client = Arc::new(
        Client::connect_any(&endpoints, ClientOptions::DEFAULT)
            .await
            .unwrap(),
    );
    assert_eq!(client.addr(), endpoints[0]);

    let answered = Arc::new(AtomicUsize::new(0));
    let writer = spawn_writes(&client, &answered);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = answered.load(Ordering::Relaxed);
    c.stop(first).await;
    eprintln!("{before} of {WRITES} writes answered when the node stopped");
    let failed = writer.await.unwrap();
    // A node shutting down may still answer a write that committed but that it no longer
    // applies with TIMEOUT (a server error, not a lost connection: the call ends there). No
    // other failure is allowed: a resent write applied twice would be ALREADY_EXISTS.
    eprintln!(
        "{} writes answered TIMEOUT by the stopping node",
        failed.len()
    );
    for (port, e) in &failed {
        assert_eq!(e.status(), Some(Status::Timeout), "write {port}: {e:?}");
    }
    // Whether or not a write was in flight at the stop, the next one moves on.
    client.add_backend("be", WRITES + 1, 0).await.unwrap();
    assert_ne!(client.addr(), endpoints[0], "still on the stopped node");

    check_each_write_once(&client, &failed).await;
    c.stop_all().await;
}

/// Writes in the stopped-node test, pipelined on one client.
const WRITES: u16 = 200;

/// Spawns [`WRITES`] pipelined session writes (a backend each, its port = its number) and
/// returns the failures; `answered` counts the answers as they come.
fn spawn_writes(
    client: &Arc<Client>,
    answered: &Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Vec<(u16, ClientError)>> {
    let (client, answered) = (Arc::clone(client), Arc::clone(answered));
    tokio::spawn(async move {
        let mut pending = tokio::task::JoinSet::new();
        for port in 1..=WRITES {
            let (client, answered) = (Arc::clone(&client), Arc::clone(&answered));
            pending.spawn(async move {
                let result = client.add_backend("be", port, 0).await;
                answered.fetch_add(1, Ordering::Relaxed);
                (port, result)
            });
            if port % 4 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let mut failed = Vec::new();
        while let Some(done) = pending.join_next().await {
            let (port, result) = done.unwrap();
            if let Err(e) = result {
                failed.push((port, e));
            }
        }
        failed
    })
}

/// No backend is there twice, and every acknowledged write (all but `failed`, plus the last
/// one) is.
async fn check_each_write_once(client: &Client, failed: &[(u16, ClientError)]) {
    let backends = client.show_backends(true).await.unwrap().value;
    let ports: Vec<u16> = backends.iter().map(|b| b.heartbeat_port).collect();
    let distinct: BTreeSet<u16> = ports.iter().copied().collect();
    assert_eq!(distinct.len(), ports.len(), "a backend twice: {ports:?}");
    let unsure: BTreeSet<u16> = failed.iter().map(|(p, _)| *p).collect();
    for port in 1..=WRITES + 1 {
        assert!(
            distinct.contains(&port) || unsure.contains(&port),
            "acknowledged write {port} missing"
        );
    }
}
