//! A client that sends and does not read its answers: the server stops reading it once its
//! unwritten answers pass a bound (`server::conn::framed` INV-1), and answers every request
//! it read once the client reads again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::time::Duration;

use bytes::BytesMut;
use fe_meta::protocol::{
    decode_response, encode_frame, encode_request, FrameDecoder, ReadOptions, Request, RequestBody,
    RequestMeta,
};
use server_support::Cluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bytes of requests a client that never reads may get the server to take, at most: the
/// server's bound on unwritten answers plus what the two sockets buffer, with room to spare.
const SENT_MAX: usize = 48 << 20;
/// No progress for this long: the server has stopped reading.
const STALL: Duration = Duration::from_secs(2);

/// One small read request, framed, and its length.
fn request_frame() -> Vec<u8> {
    let mut out = Vec::new();
    let body = RequestBody::ShowDatabases(ReadOptions { sync: false });
    let req = Request {
        id: 7,
        meta: RequestMeta::default(),
        body,
    };
    encode_frame(&encode_request(&req), &mut out);
    out
}

/// Sends copies of `frame` without reading until the server stops taking them (or
/// [`SENT_MAX`] bytes); the bytes sent.
async fn send_until_stalled(stream: &TcpStream, frame: &[u8]) -> usize {
    let chunk: Vec<u8> = frame.repeat(4096);
    let mut sent = 0;
    while sent < SENT_MAX {
        if tokio::time::timeout(STALL, stream.writable())
            .await
            .is_err()
        {
            break;
        }
        let at = sent % chunk.len();
        match stream.try_write(&chunk[at..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("sending failed after {sent} bytes: {e}"),
        }
    }
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_its_answers_is_not_read_without_bound() {
    let mut c = Cluster::new(1, "");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let frame = request_frame();
    let mut stream = TcpStream::connect(c.addr(1)).await.unwrap();
    let sent = send_until_stalled(&stream, &frame).await;
    assert!(
        sent < SENT_MAX,
        "the server kept reading a client that reads none of its answers ({sent} bytes)"
    );
    // Finish the frame cut in the middle, so that every request sent is whole.
    let rest = (frame.len() - sent % frame.len()) % frame.len();
    let requests = (sent + rest) / frame.len();
    let (mut rd, mut wr) = stream.split();
    let finish = async {
        wr.write_all(&frame[frame.len() - rest..]).await.unwrap();
    };
    let read_all = async {
        let (decoder, mut buf, mut answered) = (FrameDecoder::default(), BytesMut::new(), 0);
        while answered < requests {
            while let Some(p) = decoder.decode(&mut buf).unwrap() {
                let r = decode_response(&p).unwrap();
                assert_eq!(r.id, 7);
                r.result.expect("a read of the empty catalog succeeds");
                answered += 1;
            }
            if answered == requests {
                break;
            }
            let read = tokio::time::timeout(Duration::from_secs(20), rd.read_buf(&mut buf));
            let n = read.await.expect("answers stopped coming").unwrap();
            assert!(
                n > 0,
                "the server closed after {answered} of {requests} answers"
            );
        }
        answered
    };
    let ((), answered) = tokio::join!(finish, read_all);
    assert_eq!(answered, requests, "every request read is answered");
    c.stop_all().await;
}
