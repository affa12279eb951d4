//! The admin port of a node that stopped on a fatal error: its txn log sits on a small tmpfs
//! the test mounts and fills; once the node reports the error, `/health` and `/ready` answer
//! 503 naming it and `/metrics` shows `fe_meta_fatal 1`, while the client port is closed (the
//! admin port stays up until the server shuts down, so a supervisor sees why).
//!
//! Without the right to mount a tmpfs (not root, or a sandbox) the test prints a SKIP line and
//! passes. The mount is undone also when the test fails (`SmallFs` drops last).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientOptions};
use fe_meta::server::{Server, ServerConfig};
use tests::proc::SmallFs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `preAllocSize`, KiB: each log segment's size.
const SEGMENT_KIB: u64 = 256;
/// The small filesystem's size, and what is left free on it: one segment fits, two do not.
const FS_BYTES: u64 = 8 << 20;
const FREE_KIB: u64 = SEGMENT_KIB + 48;
/// How long the writes may take to fill the log.
const FILL_WITHIN: Duration = Duration::from_secs(60);

/// One HTTP/1.0 GET: the status and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_owned(),
    )
}

fn config(root: &Path, log_dir: &Path) -> PathBuf {
    let data_dir = root.join("data");
    std::fs::create_dir(&data_dir).unwrap();
    std::fs::write(data_dir.join("myid"), "1\n").unwrap();
    let base = tests::proc::ports::free_block().unwrap();
    let path = root.join("zoo.cfg");
    std::fs::write(
        &path,
        format!(
            "tickTime=100\ninitLimit=20\nsyncLimit=5\nforceSync=yes\npreAllocSize={SEGMENT_KIB}\n\
             dataDir={}\ndataLogDir={}\nclientPort={base}\nclusterId=0xad31\n\
             admin.serverAddress=127.0.0.1\nadmin.serverPort=0\n\
             server.1=127.0.0.1:{}:{};127.0.0.1:{base}\n",
            data_dir.display(),
            log_dir.display(),
            base + 1,
            base + 2
        ),
    )
    .unwrap();
    path
}

async fn wait_ready(admin: SocketAddr) {
    let start = Instant::now();
    loop {
        let (code, body) = get(admin, "/ready").await;
        if code == 200 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never ready: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes 1000-byte values until the node reports a fatal error or `FILL_WITHIN` passes; the
/// writes acknowledged.
async fn fill_until_fatal(server: &Server) -> u64 {
    let opts = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::DEFAULT
    };
    let writer = Client::connect_with(&server.client_addr().to_string(), opts)
        .await
        .unwrap();
    let value = tests::proc::load::value_of("fill", 1000);
    let start = Instant::now();
    let mut written = 0u64;
    while server.node_status().fatal.is_none() && start.elapsed() < FILL_WITHIN {
        if writer
            .set_var(&format!("fill-{written}"), &value)
            .await
            .is_ok()
        {
            written += 1;
        }
    }
    written
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_ready_report_a_fatal_stop_until_shutdown() {
    let name = "admin_fatal";
    let small = match SmallFs::mount(name, FS_BYTES).unwrap() {
        Ok(fs) => fs,
        Err(why) => {
            println!("SKIP {name}: {why}");
            return;
        }
    };
    let log_dir = small.path().join("log");
    std::fs::create_dir(&log_dir).unwrap();
    small.leave_free(FREE_KIB << 10).unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut cfg = ServerConfig::load(&config(root.path(), &log_dir)).unwrap();
    cfg.bootstrap = true;
    let server = Server::start_with(cfg, zab_net::NodeOptions::default())
        .await
        .unwrap();
    let admin = server.admin_addr().expect("the admin port is bound");
    wait_ready(admin).await;
    assert_eq!(get(admin, "/health").await.0, 200);

    let written = fill_until_fatal(&server).await;
    assert!(
        server.node_status().fatal.is_some(),
        "no fatal error after {written} writes"
    );

    let (code, body) = get(admin, "/health").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("fatal") && body.contains("No space left on device"),
        "{body}"
    );
    let (code, body) = get(admin, "/ready").await;
    assert_eq!(code, 503, "{body}");
    let (code, metrics) = get(admin, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("\nfe_meta_fatal 1\n"), "{metrics}");
    let (code, body) = get(admin, "/commands/ruok").await;
    assert_eq!(code, 503, "{body}");

    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown after the fatal error took over 10 s");
    assert!(
        TcpStream::connect(admin).await.is_err(),
        "the admin port still listens after shutdown"
    );
    println!("ADMIN_FATAL writes_before_fatal={written}");
    drop(small);
}
