//! `fe-meta backup` and `fe-meta restore` on real processes.
//!
//! A 3-node cluster is filled with a few thousand variables (a backup of several MiB), then a write load runs while the
//! `fe-meta backup` binary takes a backup from a FOLLOWER. The load must keep getting
//! acknowledgements while the backup streams; the file must verify and be a consistent cut
//! at its journal id: every acknowledged write at or below it is in the image with its value,
//! none above it is. The old cluster then passes the harness's end checks and stops.
//!
//! Restore: a copy with one byte flipped is refused by `fe-meta restore` and the target stays
//! empty; a zoo.cfg carrying the old cluster's id is refused too. The file is restored into
//! the three data dirs of a new cluster (a new clusterId). Each node, started alone (no
//! quorum, so no new leader writes its TIMESTAMP yet), reports the backup's digest at the
//! backup's journal id. Then all three start normally (no `--bootstrap`), elect a leader,
//! report the new cluster id, accept a write, and pass the end checks.
//!
//! Needs the `fe-meta` binary: `cargo build --release -p fe-meta-cli` or `FE_META_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use fe_meta::state::backup::{verify_backup, BackupHeader};
use fe_meta::state::catalog::Catalog;
use tests::proc::binary::{fe_meta_bin, output_text as text};
use tests::proc::{fill, ClusterSpec, Ledger, Load, ProcCluster};

/// Variables written before the backup.
const ENTRIES: usize = 4000;
/// Bytes per value.
const VALUE_LEN: usize = 64;
/// Bytes per value written before the backup: a file of several MiB (several chunks, and a
/// backup long enough for the load to be acknowledged meanwhile).
const FILL_VALUE_LEN: usize = 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_under_load_restores_into_a_new_cluster_with_an_equal_digest() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("catalog.backup");
    let (header, catalog, old_cluster) = take_backup(&file).await;
    assert_eq!(header.cluster_id, old_cluster);
    assert!(header.entry_count >= ENTRIES as u64, "{header:?}");

    let mut nc = ProcCluster::prepare("backup_restored", ClusterSpec::default()).unwrap();
    refuse_bad_restores(&nc, &file, work.path(), old_cluster);
    for sid in nc.sids() {
        let cfg = nc.node(sid).unwrap().config_path();
        let out = cli(&["restore", "--from", path(&file), "--config", path(&cfg)]);
        assert!(out.status.success(), "restore node {sid}: {}", text(&out));
        assert!(text(&out).contains("restored into"), "{}", text(&out));
    }
    for sid in nc.sids() {
        nc.restart(sid).unwrap();
        let (jid, digest) = digest_of(&nc, sid).await;
        assert_eq!(jid, header.journal_id.0, "node {sid} restored journal id");
        assert_eq!(digest, header.digest, "node {sid} restored digest");
        nc.terminate(sid).unwrap();
    }
    for sid in nc.sids() {
        nc.restart(sid).unwrap();
    }
    nc.serve().await.unwrap();
    let leader = nc.leader(Duration::from_secs(10)).await.unwrap();
    let st = nc.status(leader).await.unwrap();
    assert_ne!(st.cluster_id, old_cluster, "a new cluster id");
    assert!(st.applied_journal_id.0 > header.journal_id.0);
    let client = nc.client(leader, None).await.unwrap();
    let w = client.set_var("after-restore", "yes").await.unwrap();
    nc.ledger().record("after-restore", "yes", w.journal_id.0);
    // A variable of the old cluster is served by the new one.
    let (name, value) = catalog
        .vars()
        .next()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .unwrap();
    let got = client.get_var(&name, true).await.unwrap();
    assert_eq!(got.value.as_deref(), Some(value.as_str()));
    nc.finish().await.unwrap();
}

/// Fills a new cluster, runs a load, takes a backup from a follower with the CLI while the
/// load runs, checks the load kept going and the file is a consistent cut; the file's header,
/// its catalog and the old cluster's id.
async fn take_backup(file: &Path) -> (BackupHeader, Catalog, u64) {
    let mut c = ProcCluster::start("backup", ClusterSpec::default())
        .await
        .unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let follower = c.sids().into_iter().find(|s| *s != leader).unwrap();
    let cluster_id = c.status(leader).await.unwrap().cluster_id;
    let filled = fill(
        &c,
        leader,
        "pre-",
        ENTRIES,
        FILL_VALUE_LEN,
        64,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(filled, ENTRIES);
    let load = Load::start(&c, 3, VALUE_LEN, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (addr, out_file) = (c.client_addr(follower), file.to_path_buf());
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        cli(&["backup", "--server", &addr, "--out", path(&out_file)])
    })
    .await
    .unwrap();
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = load.stop().await;
    assert!(out.status.success(), "backup: {}", text(&out));
    let line = text(&out).trim().to_owned();
    assert!(
        line.contains("backup of cluster") && line.contains("-> "),
        "{line}"
    );
    let during = report.acked_between(started, ended);
    eprintln!(
        "backup took {:?}: {line}; the load had {during} writes acknowledged meanwhile \
         ({} in {:?} overall)",
        ended - started,
        report.acked,
        report.ran
    );
    assert!(during > 0, "the load got no ack while the backup ran");
    assert!(!tmp_of(file).exists(), "no .tmp left");
    let (header, catalog) = verify_backup(std::fs::File::open(file).unwrap()).unwrap();
    assert_consistent_cut(c.ledger(), &catalog, header.journal_id.0);
    c.finish().await.unwrap();
    (header, catalog, cluster_id)
}

/// Every acknowledged variable at or below `cut` is in `catalog` with its value; none above.
fn assert_consistent_cut(ledger: &Ledger, catalog: &Catalog, cut: u64) {
    let (mut below, mut above) = (0, 0);
    for (name, acked) in ledger.snapshot() {
        if acked.journal_id <= cut {
            assert_eq!(catalog.var(&name), Some(acked.value.as_str()), "{name}");
            below += 1;
        } else {
            assert_eq!(
                catalog.var(&name),
                None,
                "{name} acked at {:#x}",
                acked.journal_id
            );
            above += 1;
        }
    }
    assert!(below >= ENTRIES, "{below} acked writes in the backup");
    eprintln!("consistent cut at {cut:#x}: {below} acked writes in, {above} after it out");
}

/// A damaged copy and a zoo.cfg with the old cluster id are refused; nothing is written.
fn refuse_bad_restores(nc: &ProcCluster, file: &Path, work: &Path, old_cluster: u64) {
    let mut bytes = std::fs::read(file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    let bad = work.join("damaged.backup");
    std::fs::write(&bad, &bytes).unwrap();
    let node = nc.node(1).unwrap();
    let (cfg, dir) = (node.config_path(), node.data_dir());
    let out = cli(&["restore", "--from", path(&bad), "--config", path(&cfg)]);
    assert!(!out.status.success(), "a damaged file was restored");
    assert!(text(&out).contains("damaged"), "{}", text(&out));
    assert!(is_empty(&dir), "the target was written to");
    let verify = cli(&["restore", "--from", path(&bad), "--verify-only"]);
    assert!(!verify.status.success());

    let old_cfg = work.join("old-id.cfg");
    let own = std::fs::read_to_string(&cfg).unwrap();
    let swapped: String = own
        .lines()
        .map(|l| {
            if l.starts_with("clusterId=") {
                format!("clusterId={old_cluster}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&old_cfg, swapped).unwrap();
    let out = cli(&["restore", "--from", path(file), "--config", path(&old_cfg)]);
    assert!(!out.status.success(), "restored under the old cluster id");
    assert!(text(&out).contains("never be mixed"), "{}", text(&out));
    assert!(is_empty(&dir), "the target was written to");
}

/// Node `sid`'s DIGEST (journal id, digest), waiting up to 20 s for it to answer.
async fn digest_of(c: &ProcCluster, sid: u64) -> (u64, [u8; 32]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(client) = c.client(sid, None).await {
            if let Ok((jid, digest, _)) = client.digest(false).await {
                return (jid.0, digest);
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {sid} never answered DIGEST"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn cli(args: &[&str]) -> Output {
    Command::new(fe_meta_bin().unwrap())
        .args(args)
        .output()
        .unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn tmp_of(p: &Path) -> PathBuf {
    PathBuf::from(format!("{}.tmp", p.display()))
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none())
}

/// The figure of `docs/BENCHMARKS.md` ("Backup"): a catalog of 100k variables, the backup's
/// size, time and rate, and the write throughput of one continuous load inside the backups'
/// windows and outside them (same load, same minutes: the load's own rate drifts over a run).
/// Not a pass/fail test (ignored by default):
/// `cargo test --release -p tests --test process_backup -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for docs/BENCHMARKS.md, about half a minute"]
async fn measure_backup_of_100k_entries() {
    const N: usize = 100_000;
    const CLIENTS: usize = 8;
    const RUNS: usize = 10;
    let work = tempfile::tempdir().unwrap();
    let mut c = ProcCluster::start("backup_measure", ClusterSpec::default())
        .await
        .unwrap();
    let leader = c.leader(Duration::from_secs(10)).await.unwrap();
    let follower = c.sids().into_iter().find(|s| *s != leader).unwrap();
    let t = Instant::now();
    let filled = fill(&c, leader, "e", N, VALUE_LEN, 256, Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(filled, N);
    eprintln!(
        "filled {N} variables of {VALUE_LEN} bytes in {:?}",
        t.elapsed()
    );

    let load = Load::start(&c, CLIENTS, VALUE_LEN, Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let from = Instant::now();
    let addr = c.client_addr(follower);
    let mut windows = Vec::new();
    for i in 0..RUNS {
        let f = work.path().join(format!("b{i}"));
        let (a, out_file) = (addr.clone(), f.clone());
        let started = Instant::now();
        let out = tokio::task::spawn_blocking(move || {
            cli(&["backup", "--server", &a, "--out", path(&out_file)])
        })
        .await
        .unwrap();
        let took = started.elapsed();
        assert!(out.status.success(), "{}", text(&out));
        let bytes = std::fs::metadata(&f).unwrap().len();
        eprintln!(
            "backup {i}: {bytes} bytes in {took:?} ({:.0} MB/s)",
            bytes as f64 / 1e6 / took.as_secs_f64()
        );
        std::fs::remove_file(&f).unwrap();
        windows.push((started, started + took));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let to = Instant::now();
    let report = load.stop().await;
    let inside: usize = windows
        .iter()
        .map(|(a, b)| report.acked_between(*a, *b))
        .sum();
    let inside_s: f64 = windows.iter().map(|(a, b)| (*b - *a).as_secs_f64()).sum();
    let all = report.acked_between(from, to);
    let outside_s = (to - from).as_secs_f64() - inside_s;
    eprintln!(
        "RESULT backup entries={N} runs={RUNS} writes/s during backups={:.0} between \
         them={:.0} ({CLIENTS} writers, {VALUE_LEN}-byte values)",
        inside as f64 / inside_s,
        (all - inside) as f64 / outside_s
    );
    c.finish().await.unwrap();
}
