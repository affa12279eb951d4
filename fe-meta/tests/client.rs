//! The client library against a scripted in-process server (the protocol codec on a loopback
//! socket): pipelined calls answered out of order, typed error replies, the request timeout,
//! a lost connection failing every call in flight, the fatal id-0 error, and the session window.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

use fe_meta::Zxid;
use std::time::Duration;

use bytes::BytesMut;
use fe_meta::client::{Client, ClientError, ClientOptions};
use fe_meta::protocol::{
    decode_request, encode_frame, encode_response, ErrorDetail, ErrorReply, FrameDecoder, Request,
    RequestBody, RequestKind, Response, ResponseBody, Status,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Accepts one connection and hands each decoded request to `script`, which returns the
/// responses to send (possibly none yet, possibly several, in any order).
async fn serve<F>(mut script: F) -> String
where
    F: FnMut(Request) -> Vec<Response> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = BytesMut::new();
        let dec = FrameDecoder::default();
        loop {
            while let Some(payload) = dec.decode(&mut buf).unwrap() {
                let req = decode_request(&payload).unwrap();
                for resp in script(req) {
                    if resp.kind == RequestKind(0xFFFF) {
                        return; // scripted hang-up
                    }
                    let mut out = Vec::new();
                    encode_frame(&encode_response(&resp), &mut out);
                    s.write_all(&out).await.unwrap();
                }
            }
            if s.read_buf(&mut buf).await.unwrap() == 0 {
                return;
            }
        }
    });
    addr
}

fn var_answer(req: &Request, value: &str) -> Response {
    Response {
        id: req.id,
        kind: req.body.kind(),
        result: Ok(ResponseBody::Var {
            journal_id: Zxid(req.id),
            value: Some(value.to_owned()),
        }),
    }
}

fn name_of(req: &Request) -> String {
    match &req.body {
        RequestBody::GetVar { name, .. } => name.clone(),
        _ => String::new(),
    }
}

#[tokio::test]
async fn pipelined_calls_are_matched_by_id_whatever_the_order() {
    // Hold the first 10 requests, then answer them in reverse order.
    let mut held = Vec::new();
    let addr = serve(move |req| {
        held.push(req);
        if held.len() == 10 {
            held.drain(..)
                .rev()
                .map(|r| var_answer(&r, &name_of(&r)))
                .collect()
        } else {
            Vec::new()
        }
    })
    .await;
    let client = std::sync::Arc::new(Client::connect(&addr).await.unwrap());
    let calls: Vec<_> = (0..10)
        .map(|i| {
            let c = client.clone();
            tokio::spawn(async move { (i, c.get_var(&format!("v{i}"), false).await) })
        })
        .collect();
    for call in calls {
        let (i, got) = call.await.unwrap();
        assert_eq!(got.unwrap().value, Some(format!("v{i}")));
    }
}

#[tokio::test]
async fn error_replies_map_to_typed_errors() {
    let addr = serve(|req| {
        let reply = match name_of(&req).as_str() {
            "stale" => ErrorReply::stale(7000, 5000, "scripted"),
            "leader" => ErrorReply::not_leader(Some(2), Some("127.0.0.1:9031".into()), "scripted"),
            _ => ErrorReply::new(Status::NotFound, "scripted"),
        };
        vec![Response {
            id: req.id,
            kind: req.body.kind(),
            result: Err(reply),
        }]
    })
    .await;
    let client = Client::connect(&addr).await.unwrap();
    let e = client.get_var("stale", false).await.unwrap_err();
    assert!(
        matches!(
            &e,
            ClientError::Server(ErrorReply {
                detail: ErrorDetail::Lag { lag_ms: 7000, .. },
                ..
            })
        ),
        "{e:?}"
    );
    assert_eq!(e.status(), Some(Status::Stale));
    let e = client.get_var("leader", false).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "scripted (leader: server 2 at 127.0.0.1:9031)"
    );
    assert!(e.is_retryable());
    let e = client.get_var("x", false).await.unwrap_err();
    assert_eq!(e.name(), "NOT_FOUND");
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn an_unanswered_call_times_out_and_a_late_answer_is_dropped() {
    let mut n = 0;
    let addr = serve(move |req| {
        n += 1;
        // The first request is never answered; the second is answered normally.
        if n == 1 {
            Vec::new()
        } else {
            vec![var_answer(&req, "late-ok")]
        }
    })
    .await;
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_millis(200),
        ..ClientOptions::DEFAULT
    };
    let client = Client::connect_with(&addr, options).await.unwrap();
    let e = client.get_var("a", false).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Timeout { kind, .. } if kind == RequestKind::GET_VAR),
        "{e:?}"
    );
    assert!(e.may_be_applied());
    // The connection is still usable.
    let ok = client.get_var("b", false).await.unwrap();
    assert_eq!(ok.value.as_deref(), Some("late-ok"));
}

#[tokio::test]
async fn a_lost_connection_fails_every_call_in_flight_and_later() {
    let mut n = 0;
    let addr = serve(move |req| {
        n += 1;
        if n < 3 {
            Vec::new()
        } else {
            vec![Response {
                id: req.id,
                kind: RequestKind(0xFFFF),
                result: Ok(ResponseBody::Synced {
                    journal_id: Zxid(0),
                }),
            }]
        }
    })
    .await;
    let client = std::sync::Arc::new(Client::connect(&addr).await.unwrap());
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.sync().await })
        })
        .collect();
    for call in calls {
        let e = call.await.unwrap().unwrap_err();
        assert!(matches!(e, ClientError::Closed { .. }), "{e:?}");
    }
    assert!(client.is_closed());
    let e = client.status().await.unwrap_err();
    assert!(matches!(e, ClientError::Closed { .. }), "{e:?}");
}

#[tokio::test]
async fn an_error_for_request_id_zero_closes_the_connection() {
    let addr = serve(|_req| {
        vec![Response {
            id: 0,
            kind: RequestKind(0),
            result: Err(ErrorReply::new(
                Status::InvalidArgument,
                "unsupported protocol version 9",
            )),
        }]
    })
    .await;
    let client = Client::connect(&addr).await.unwrap();
    let e = client.status().await.unwrap_err();
    match e {
        ClientError::Closed { reason, .. } => {
            assert!(
                reason.contains("unsupported protocol version 9"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn connect_errors_name_the_address() {
    // A port with no listener: bind, learn the port, close.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let e = Client::connect(&addr).await.unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains(&addr), "{e}");
    let _ = TcpStream::connect(&addr).await.unwrap_err();
}

/// A write answered `Written` with the request id as journal id.
fn written_answer(req: &Request) -> Response {
    Response {
        id: req.id,
        kind: req.body.kind(),
        result: Ok(ResponseBody::Written {
            journal_id: Zxid(req.id),
            created_id: None,
        }),
    }
}

/// The session window (`ClientSession` INV-3): with the session's oldest write still in
/// flight and 1023 after it, a write waits instead of being sent 1024 past the floor; it is
/// sent, with the next floor, once the oldest ends, and fails unsent (WINDOW_FULL, not
/// applied) when the oldest outlasts its timeout.
#[tokio::test]
async fn a_write_past_the_session_window_waits_for_the_oldest_one() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = serve(move |req| {
        log.lock().unwrap().push(req.meta.session.unwrap());
        vec![written_answer(&req)]
    })
    .await;
    let session = std::sync::Arc::new(fe_meta::client::ClientSession::with_id(0x5e55));
    let options = ClientOptions {
        request_timeout: Duration::from_millis(300),
        ..ClientOptions::DEFAULT
    };
    let client = Client::connect_in_session(&addr, options, session.clone())
        .await
        .unwrap();
    let oldest = session.begin().await;
    let mut others = Vec::new();
    for _ in 1..fe_meta::client::SEQ_SPAN_MAX {
        others.push(session.begin().await);
    }
    let e = client.set_var("v", "1").await.unwrap_err();
    assert!(
        matches!(e, ClientError::WindowFull { oldest: 1, .. }),
        "{e:?}"
    );
    assert!(!e.may_be_applied(), "{e}");
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");

    let pending = tokio::spawn({
        let client = std::sync::Arc::new(client);
        async move { client.set_var("v", "2").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(seen.lock().unwrap().is_empty(), "still waiting for seq 1");
    drop(oldest);
    pending.await.unwrap().unwrap();
    let tag = seen.lock().unwrap()[0];
    assert_eq!((tag.seq, tag.floor), (1025, 2));
    drop(others);
}
