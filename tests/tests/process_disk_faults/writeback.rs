//! EIO from a snapshot's incremental writeback: `sync_file_range`, which zab-store calls for
//! every 8 MiB window of a snapshot while it is written (its `snapshot/writeback.rs`), fails
//! on a follower (the shim's `eio-writeback`). Its INV-2: the failure is a failed write; the
//! snapshot is abandoned, never fsynced nor published, and the node goes on as after any
//! failed background snapshot. Then the disk works again and the next snapshot is valid.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tests::proc::binary::{fe_meta_bin, output_text};
use tests::proc::disk_fault::{injected, retries};
use tests::proc::{fill, ProcCluster};

use crate::{a_follower, last_incarnation, ms, with_shim};

/// zab-store's writeback window: an image must be larger for `sync_file_range` to run.
const WINDOW: u64 = 8 * 1024 * 1024;
/// Bytes per value of the fill that grows the state past a window.
const BIG_VALUE: usize = 60_000;
/// Values of [`BIG_VALUE`] bytes written first: an image of 9 MB, more than a window.
const BIG_VALUES: usize = 150;
/// `snapCount`: a node snapshots after 50 to 100 txns.
const SNAP_COUNT: u64 = 100;
/// Small values per round of a fill that waits for a snapshot (a snapshot is due within
/// three rounds).
const ROUND: usize = 40;
/// Rounds at most before the snapshot waited for must have been logged.
const MAX_ROUNDS: usize = 10;
/// How long after a round the node's log is watched before the next round is written.
const WATCH: Duration = Duration::from_secs(1);
/// How long the node's log is watched after the last round.
const LAST_WATCH: Duration = Duration::from_secs(30);
/// What a node logs when a background snapshot fails (zab-net's driver).
const FAILED: &str = "background snapshot failed";
/// What a node logs when a snapshot was written durably under its final name (zab-net).
const WRITTEN: &str = "snapshot written";

/// A follower's snapshot writeback fails: it logs the failure (naming the call, the temp file
/// and the error), leaves neither the temp file nor a snapshot under the final name for that
/// zxid, syncs the failed file no more, keeps serving reads and writes; with the disk healthy
/// again, its next snapshot (larger than a window, so written back) is valid, and the end
/// checks hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_snapshot_writeback_fails_abandons_that_snapshot_and_goes_on() {
    let name = "eio_writeback_snapshot";
    let Some((df, mut spec)) = with_shim(name, 4096) else {
        return;
    };
    spec.snap_count = Some(SNAP_COUNT);
    let started = Instant::now();
    let mut c = ProcCluster::start(name, spec).await.unwrap();
    let leader = c.leader(Duration::from_secs(20)).await.unwrap();
    let faulty = a_follower(&c, leader);
    let dir = df.data_dir(faulty);
    df.set(faulty, "eio-writeback match=/snapshot.").unwrap();

    // Snapshots smaller than a window do not reach sync_file_range and succeed: grow the
    // state past a window, then write until a snapshot fails.
    let big = fill(
        &c,
        leader,
        "big-",
        BIG_VALUES,
        BIG_VALUE,
        8,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(big, BIG_VALUES, "the big values were not acknowledged");
    let (line, small_before) = fill_until(&c, leader, faulty, "small-a-", FAILED, 0).await;
    let tmp = abandoned_snapshot(&c, faulty, &dir, &line);
    still_serves(&mut c, faulty, &format!("big-{}", big - 1)).await;

    // The disk works again: the next snapshot is written back, synced and valid.
    df.set(faulty, "ok").unwrap();
    let injected_before = injected(&last_incarnation(&c, faulty)).len();
    let written = last_incarnation(&c, faulty).matches(WRITTEN).count();
    let (line, small_after) = fill_until(&c, leader, faulty, "small-b-", WRITTEN, written).await;
    let (file, size) = valid_snapshot(&c, faulty, &line);
    assert_eq!(
        injected(&last_incarnation(&c, faulty)).len(),
        injected_before,
        "the shim injected errors after the fault was cleared"
    );
    assert!(c.node_mut(faulty).unwrap().is_running());
    let end = c.finish().await.unwrap();
    println!(
        "RESULT scenario={name} faulty={faulty} leader={leader} big_values={big} \
         small_values_to_failure={small_before} small_values_to_success={small_after} \
         abandoned={} next_snapshot={} bytes={size} journal_id={:#x} acked_checked={} \
         total_ms={}",
        tmp.display(),
        file.display(),
        end.journal_id,
        end.acked_writes,
        ms(started.elapsed())
    );
}

/// Node `sid` runs, reads `key` (which must be there) and takes writes.
async fn still_serves(c: &mut ProcCluster, sid: u64, key: &str) {
    assert!(
        c.node_mut(sid).unwrap().is_running(),
        "a failed writeback stopped node {sid}"
    );
    let read = c.client(sid, None).await.unwrap();
    let read = read.get_var(key, true).await.unwrap();
    assert!(read.value.is_some(), "node {sid} must still serve reads");
    let via = fill(c, sid, "via-faulty-", 20, 64, 4, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(via, 20, "writes through node {sid} must still commit");
}

/// Writes rounds of [`ROUND`] small values (`prefix`, the round, a number) through `leader`
/// until node `sid`'s last incarnation logged `text` more than `seen` times (each round is
/// watched for [`WATCH`], at most [`MAX_ROUNDS`] rounds, the last for [`LAST_WATCH`]);
/// returns the first new line with `text` and how many values were written.
async fn fill_until(
    c: &ProcCluster,
    leader: u64,
    sid: u64,
    prefix: &str,
    text: &str,
    seen: usize,
) -> (String, usize) {
    let mut written = 0;
    for round in 0..MAX_ROUNDS {
        let round_prefix = format!("{prefix}{round}-");
        let n = fill(
            c,
            leader,
            &round_prefix,
            ROUND,
            64,
            8,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        assert_eq!(
            n, ROUND,
            "round {round} of {prefix} values was not acknowledged"
        );
        written += n;
        let watch = if round + 1 == MAX_ROUNDS {
            LAST_WATCH
        } else {
            WATCH
        };
        let watch_until = Instant::now() + watch;
        while Instant::now() < watch_until {
            let log = last_incarnation(c, sid);
            if let Some(line) = log.lines().filter(|l| l.contains(text)).nth(seen) {
                return (line.to_owned(), written);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!(
        "node {sid} never logged {text:?} (seen {seen} before) after {written} values ({prefix})"
    );
}

/// The `snapshot.<16 hex>` name in `line`, with what follows it (`.tmp` or nothing).
fn snapshot_name_in(line: &str) -> Option<String> {
    let at = line.find("snapshot.")?;
    let rest = &line[at..];
    let hex = rest["snapshot.".len()..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .count();
    let end = "snapshot.".len() + hex;
    let tmp = rest[end..].starts_with(".tmp");
    (hex == 16).then(|| format!("{}{}", &rest[..end], if tmp { ".tmp" } else { "" }))
}

/// Node `sid`'s failed snapshot, from its log `line`: the line names the call, the temp file
/// under `dir` and the error; the shim injected into that file's `sync_file_range`; neither
/// the temp file nor the snapshot's final name is left, and no sync of the failed file
/// followed. Returns the temp file.
fn abandoned_snapshot(c: &ProcCluster, sid: u64, dir: &Path, line: &str) -> PathBuf {
    let tmp_name = snapshot_name_in(line).unwrap_or_else(|| panic!("names no snapshot: {line}"));
    assert!(tmp_name.ends_with(".tmp"), "names no temp file: {line}");
    let tmp = dir.join(&tmp_name);
    assert!(line.contains(&tmp.display().to_string()), "{line}");
    assert!(line.contains("sync_file_range"), "names no call: {line}");
    assert!(line.contains("Input/output error"), "{line}");
    let log = last_incarnation(c, sid);
    let shim = format!("into sync_file_range of {}", tmp.display());
    assert!(
        injected(&log).iter().any(|l| l.contains(&shim)),
        "the shim's line for {} is missing",
        tmp.display()
    );
    let retried = retries(&log);
    assert!(
        retried.is_empty(),
        "a failed snapshot was synced again: {retried:?}"
    );
    let published = tmp.with_extension("");
    for f in [&tmp, &published] {
        assert!(
            !f.exists(),
            "{} left after the failed writeback",
            f.display()
        );
    }
    tmp
}

/// Node `sid`'s snapshot named in `line` ("snapshot written"): larger than a writeback
/// window, and `fe-meta verify-image` finds it valid. Returns the file and its size.
fn valid_snapshot(c: &ProcCluster, sid: u64, line: &str) -> (PathBuf, u64) {
    let name = snapshot_name_in(line).unwrap_or_else(|| panic!("names no snapshot: {line}"));
    let file = c.node(sid).unwrap().data_dir().join(name);
    let size = std::fs::metadata(&file)
        .unwrap_or_else(|e| panic!("{} ({line}): {e}", file.display()))
        .len();
    assert!(
        size > WINDOW,
        "{} is {size} bytes: no window was written back",
        file.display()
    );
    let out = std::process::Command::new(fe_meta_bin().unwrap())
        .arg("verify-image")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "verify-image {}: {}",
        file.display(),
        output_text(&out)
    );
    (file, size)
}
