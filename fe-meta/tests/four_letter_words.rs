//! Four-letter words as monitoring scripts send them: `echo WORD | nc HOST PORT` sends the word
//! and a newline and reads the answer while its own input is still open. Every answer must
//! arrive, 200 times in a row per word, with a client that writes like nc and with the real
//! `nc` (skipped with a message when it is not installed), and a word the server does not
//! know is refused in text instead of being read as a frame length.

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

/// Every word, a part of its answer, and an unknown word's refusal.
const EXPECT: [(&str, &str); 12] = [
    ("ruok", "imok"),
    ("srvr", "Mode: "),
    ("stat", "Clients:"),
    ("mntr", "zk_server_state\t"),
    ("conf", "clientPortAddress="),
    ("cons", "\n"),
    ("srst", "Server stats reset."),
    ("envi", "Environment:\n"),
    ("dirs", "datadir_size: "),
    ("isro", "rw"),
    ("wchs", "Total watches:0"),
    ("kill", "kill is not executed"),
];

/// The real `nc`, if installed.
fn nc_path() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("nc"))
            .find(|p| p.is_file())
    })
}

/// `echo WORD | nc HOST PORT` with the real nc.
fn real_nc(nc: &std::path::Path, addr: SocketAddr, word: &str) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(nc)
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{word}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_through_the_real_nc_is_answered_200_times_in_a_row() {
    let Some(nc) = nc_path() else {
        println!("SKIPPED: `nc` is not installed (apt-get install netcat-openbsd)");
        return;
    };
    let mut c = Cluster::new(1, "meta_delay_toleration_second=60");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let addr = c.addr(1);
    for (word, part) in EXPECT {
        let nc = nc.clone();
        let answers = tokio::task::spawn_blocking(move || {
            (0..200)
                .map(|_| real_nc(&nc, addr, word))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        for (i, answer) in answers.iter().enumerate() {
            assert!(
                answer.contains(part),
                "`echo {word} | nc` try {i}: {answer:?} lacks {part:?}"
            );
        }
    }
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_word_sent_with_a_newline_is_answered_200_times_in_a_row() {
    let mut c = Cluster::new(1, "meta_delay_toleration_second=60");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let addr = c.addr(1);
    for (word, part) in EXPECT {
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
