//! The client options a node uses to forward requests to another node, against scripted
//! loopback servers: forwarded ids carry the reserved top bit (and plain ids never do), and a
//! call that times out with `OnTimeout::DiscardConnection` fails the calls in flight, resets
//! the socket, and drops what the kernel had not delivered — where the default
//! `KeepConnection` delivers it after the timeout.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use fe_meta::client::{Client, ClientError, ClientOptions, OnTimeout};
use fe_meta::protocol::{
    decode_request, encode_frame, encode_response, FrameDecoder, ReadOptions, RequestBody,
    RequestMeta, Response, ResponseBody, FORWARDED_BIT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

fn get_var(name: String) -> RequestBody {
    RequestBody::GetVar {
        name,
        opts: ReadOptions { sync: false },
    }
}

/// Accepts one connection, records every request id into `ids` and answers each request.
async fn answering_server(ids: Arc<Mutex<Vec<u64>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let (mut buf, dec) = (BytesMut::new(), FrameDecoder::default());
        loop {
            while let Some(payload) = dec.decode(&mut buf).unwrap() {
                let req = decode_request(&payload).unwrap();
                ids.lock().unwrap().push(req.id);
                let resp = Response {
                    id: req.id,
                    kind: req.body.kind(),
                    result: Ok(ResponseBody::Var {
                        journal_id: fe_meta::Zxid(1),
                        value: None,
                    }),
                };
                let mut out = Vec::new();
                encode_frame(&encode_response(&resp), &mut out);
                s.write_all(&out).await.unwrap();
            }
            if s.read_buf(&mut buf).await.unwrap() == 0 {
                return;
            }
        }
    });
    addr
}

/// Three calls through a client with `options`; the ids the server saw.
async fn ids_sent(options: ClientOptions) -> Vec<u64> {
    let ids = Arc::new(Mutex::new(Vec::new()));
    let addr = answering_server(ids.clone()).await;
    let client = Client::connect_with(&addr, options).await.unwrap();
    for i in 0..3 {
        client.call(get_var(format!("v{i}"))).await.unwrap();
    }
    let seen = ids.lock().unwrap().clone();
    seen
}

#[tokio::test]
async fn forwarded_ids_carry_the_forwarded_bit_and_plain_ids_never_do() {
    let plain = ids_sent(ClientOptions::DEFAULT).await;
    let forwarded = ids_sent(ClientOptions::FORWARDING).await;
    for ids in [&plain, &forwarded] {
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "ids repeat: {ids:x?}");
        assert!(ids.iter().all(|id| id & !FORWARDED_BIT != 0), "{ids:x?}");
    }
    assert!(plain.iter().all(|id| id & FORWARDED_BIT == 0), "{plain:x?}");
    assert!(
        forwarded.iter().all(|id| id & FORWARDED_BIT != 0),
        "{forwarded:x?}"
    );
}

/// A listener whose accepted sockets have a small receive buffer, so a client's bytes pile up
/// on the client's side while the server does not read.
fn small_buffer_listener() -> TcpListener {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket.listen(4).unwrap()
}

/// How a silent server's read of one connection ended: the whole frames it got, and whether
/// the connection was reset (rather than closed, or still open after the bound).
struct ReadEnd {
    frames: usize,
    reset: bool,
}

/// Reads `s` (after `idle`, during which it reads nothing) until `want` frames came, the
/// connection ended, or 10 s passed; answers nothing.
async fn read_silently(mut s: TcpStream, idle: Duration, want: usize) -> ReadEnd {
    tokio::time::sleep(idle).await;
    let (mut buf, dec) = (BytesMut::new(), FrameDecoder::new(1 << 30));
    let (mut frames, start) = (0, Instant::now());
    while frames < want && start.elapsed() < Duration::from_secs(10) {
        let read = tokio::time::timeout(Duration::from_millis(500), s.read_buf(&mut buf)).await;
        match read {
            Err(_) => continue,
            Ok(Ok(0)) => {
                return ReadEnd {
                    frames,
                    reset: false,
                }
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                let reset = e.kind() == std::io::ErrorKind::ConnectionReset;
                return ReadEnd { frames, reset };
            }
        }
        while dec.decode(&mut buf).unwrap().is_some() {
            frames += 1;
        }
    }
    ReadEnd {
        frames,
        reset: false,
    }
}

const NAME_BYTES: usize = 256 * 1024;

/// How many requests of `NAME_BYTES` fill more than the socket buffers can hold: four times
/// the kernel's largest TCP send buffer (`tcp_wmem`, 4 MiB by default), at least 16 MiB.
fn calls_beyond_the_buffers() -> usize {
    let wmem_max = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|t| t.split_whitespace().last()?.parse::<usize>().ok())
        .unwrap_or(0);
    (4 * wmem_max).max(16 << 20) / NAME_BYTES
}

/// Requests of `NAME_BYTES` each, more than the socket buffers hold, to a server that reads
/// nothing for a second; each call times out after 300 ms. Returns how many were sent, how
/// the server's read ended and the calls' errors.
async fn flood_a_silent_server(on_timeout: OnTimeout) -> (usize, ReadEnd, Vec<ClientError>) {
    let calls = calls_beyond_the_buffers();
    let listener = small_buffer_listener();
    let addr = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        read_silently(s, Duration::from_secs(1), calls).await
    });
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_millis(300),
        on_timeout,
        ..ClientOptions::DEFAULT
    };
    let client = Arc::new(Client::connect_with(&addr, options).await.unwrap());
    let pending: Vec<_> = (0..calls)
        .map(|_| {
            let (c, name) = (client.clone(), "x".repeat(NAME_BYTES));
            tokio::spawn(async move { c.call(get_var(name)).await })
        })
        .collect();
    let mut errors = Vec::new();
    for call in pending {
        errors.push(call.await.unwrap().unwrap_err());
    }
    // The client stays alive (its writer may still be sending) until the server is done.
    let end = server.await.unwrap();
    drop(client);
    (calls, end, errors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_timed_out_request_is_still_delivered_later() {
    let (calls, end, errors) = flood_a_silent_server(OnTimeout::KeepConnection).await;
    assert!(
        errors
            .iter()
            .all(|e| matches!(e, ClientError::Timeout { .. })),
        "{errors:?}"
    );
    assert_eq!(end.frames, calls, "every request arrives after its timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discarded_connection_is_reset_and_never_delivers_what_it_held() {
    let (calls, end, errors) = flood_a_silent_server(OnTimeout::DiscardConnection).await;
    let timeouts = errors
        .iter()
        .filter(|e| matches!(e, ClientError::Timeout { .. }))
        .count();
    assert!(timeouts >= 1, "{errors:?}");
    assert!(
        errors
            .iter()
            .all(|e| matches!(e, ClientError::Timeout { .. } | ClientError::Closed { .. })),
        "{errors:?}"
    );
    assert!(end.reset, "the server saw no reset ({} frames)", end.frames);
    assert!(
        end.frames < calls,
        "all {calls} requests were delivered after the connection was discarded"
    );
}

#[tokio::test]
async fn a_discarding_timeout_fails_the_calls_in_flight_at_once_and_every_later_call() {
    let listener = small_buffer_listener();
    let addr = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        read_silently(s, Duration::ZERO, usize::MAX).await
    });
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        ..ClientOptions::FORWARDING
    };
    let client = Arc::new(Client::connect_with(&addr, options).await.unwrap());
    let meta = RequestMeta::default();
    let patient = {
        let c = client.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let r = c.exchange(get_var("patient".into()), meta, Duration::from_secs(20));
            (r.await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let short = Duration::from_millis(200);
    let e = client
        .exchange(get_var("short".into()), meta, short)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ClientError::Timeout { after, .. } if after == short),
        "{e:?}"
    );
    let (r, waited) = patient.await.unwrap();
    assert!(matches!(r, Err(ClientError::Closed { .. })), "{r:?}");
    assert!(
        waited < Duration::from_secs(10),
        "the call in flight waited {waited:?}"
    );
    assert!(client.is_closed());
    let later = client.exchange(get_var("later".into()), meta, short).await;
    assert!(
        matches!(later, Err(ClientError::Closed { .. })),
        "{later:?}"
    );
    let end = server.await.unwrap();
    assert!(end.reset, "the server saw no reset ({} frames)", end.frames);
    assert_eq!(end.frames, 2, "both requests were sent before the timeout");
}
