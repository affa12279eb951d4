//! BACKUP on a running server (in-process): the answer is a stream of chunk frames with
//! contiguous offsets, then the header; other requests on the same connection are answered
//! while it streams; a client that does not read stalls only its own stream, never the
//! writes of others; the bytes received verify as a backup file whose digest is the node's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server_support;

use std::io::Cursor;
use std::time::{Duration, Instant};

use fe_meta::command::Command;
use fe_meta::protocol::{ReadOptions, RequestBody, RequestKind, ResponseBody, BACKUP_CHUNK_MAX};
use fe_meta::state::backup::{verify_backup, BackupHeader};
use server_support::{call, Client, Cluster};

/// Values of 60 KiB: 64 of them make an image of about 4 chunks.
const VALUE: usize = 60 * 1024;
const VARS: usize = 64;

async fn filled_node() -> Cluster {
    let mut c = Cluster::new(1, "meta_delay_toleration_second=60");
    c.start_all().await;
    c.wait_stable(Duration::from_secs(20)).await;
    let mut w = Client::connect(c.addr(1)).await;
    for i in 0..VARS {
        let body = RequestBody::Write(Command::SetVar {
            name: format!("v{i}"),
            value: "x".repeat(VALUE),
        });
        w.call(body).await.unwrap();
    }
    c
}

/// Reads the BACKUP stream of request `id` from `cl`: the file's bytes, the header, and the
/// ids of other answers that came in between.
async fn read_stream(cl: &mut Client, id: u64) -> (Vec<u8>, BackupHeader, Vec<u64>) {
    let (mut bytes, mut others, mut chunks) = (Vec::new(), Vec::new(), 0);
    loop {
        let r = cl.recv().await.expect("closed mid-stream");
        if r.id != id {
            others.push(r.id);
            continue;
        }
        assert_eq!(r.kind, RequestKind::BACKUP);
        match r.result.unwrap() {
            ResponseBody::BackupChunk { offset, data } => {
                assert_eq!(offset, bytes.len() as u64, "chunks are contiguous");
                assert!(data.len() <= BACKUP_CHUNK_MAX);
                bytes.extend_from_slice(&data);
                chunks += 1;
            }
            ResponseBody::BackupDone(h) => {
                assert!(chunks >= 3, "{chunks} chunks for {} bytes", bytes.len());
                assert_eq!(h.file_len(), bytes.len() as u64);
                return (bytes, h, others);
            }
            other => panic!("not a BACKUP answer: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_streams_in_chunks_beside_other_answers_and_verifies() {
    let mut c = filled_node().await;
    let addr = c.addr(1);
    let mut cl = Client::connect(addr).await;
    let id = cl.send(RequestBody::Backup(ReadOptions::default())).await;
    let status = cl.send(RequestBody::Status).await;
    let (bytes, header, others) = read_stream(&mut cl, id).await;
    assert_eq!(
        others,
        vec![status],
        "STATUS answered on the same connection"
    );
    let (checked, catalog) = verify_backup(Cursor::new(&bytes)).unwrap();
    assert_eq!(checked, header);
    assert_eq!(catalog.var("v7").map(str::len), Some(VALUE));
    let ResponseBody::Digest {
        journal_id, digest, ..
    } = call(addr, RequestBody::Digest(ReadOptions::default()))
        .await
        .unwrap()
    else {
        panic!("not a digest")
    };
    assert_eq!((journal_id, digest), (header.journal_id, header.digest));
    // With sync: the same image (nothing was written since).
    let id = cl
        .send(RequestBody::Backup(ReadOptions { sync: true }))
        .await;
    let (_, synced, _) = read_stream(&mut cl, id).await;
    assert_eq!(synced.digest, header.digest);
    c.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_does_not_read_stalls_only_its_own_backup() {
    let mut c = filled_node().await;
    let addr = c.addr(1);
    let mut slow = Client::connect(addr).await;
    let id = slow.send(RequestBody::Backup(ReadOptions::default())).await;
    // While the stream waits on the slow reader, writes of another client go through.
    let mut w = Client::connect(addr).await;
    let started = Instant::now();
    for i in 0..20 {
        let body = RequestBody::Write(Command::SetVar {
            name: format!("during{i}"),
            value: "y".into(),
        });
        w.call(body).await.unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "writes stalled: {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (bytes, header, _) = read_stream(&mut slow, id).await;
    let (_, catalog) = verify_backup(Cursor::new(&bytes)).unwrap();
    // The image is the version taken when the request arrived: none of the later writes.
    assert_eq!(catalog.var("during0"), None);
    assert_eq!(header.entry_count, VARS as u64);
    c.stop_all().await;
}
