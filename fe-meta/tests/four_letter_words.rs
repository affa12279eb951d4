//! Four-letter words as monitoring scripts send them: `echo WORD | nc HOST PORT` sends the word
//! and a newline and reads the answer while its own input is still open. Every answer must
//! arrive, 200 times in a row per word, and a word the server does not know is refused in text
//! instead of being read as a frame length.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::net::SocketAddr;
use std::time::Duration;

use server_support::Cluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `echo WORD | nc`: the word and a newline; the answer read to its end.
async fn echo_nc(addr: SocketAddr, word: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("{word}\n").as_bytes()).await.unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out).await {
        Ok(_) => String::from_utf8(out).unwrap(),
        Err(e) => panic!(
            "`{word}`: the answer was lost ({e}) after {} bytes",
            out.len()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_sent_with_a_newline_is_answered_200_times_in_a_row() {
    let mut c = Cluster::new(1, "meta_delay_toleration_second=60");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let addr = c.addr(1);
    let expect: [(&str, &str); 5] = [
        ("ruok", "imok"),
        ("srvr", "Mode: "),
        ("stat", "Clients:"),
        ("mntr", "zk_server_state\t"),
        ("envi", "envi is not executed"),
    ];
    for (word, part) in expect {
        for i in 0..200 {
            let answer = echo_nc(addr, word).await;
            assert!(
                answer.contains(part),
                "`{word}` try {i}: {answer:?} lacks {part:?}"
            );
        }
    }
    c.stop_all().await;
}
