//! The epoch files against the real file system: write atomicity and failure (PITFALLS B4), and
//! start-up after a crash between a sync's data and its `currentEpoch` (PITFALLS B5).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests may fail loudly

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use common::txn;
use zab_core::{Config, DurableState, Epoch, LearnerType, Peer, ServerId, Zxid};
use zab_store::{DataDir, EpochFiles, EpochKind, LogOptions, StoreError, NEEDS_INITIAL_SYNC_FILE};

fn opts() -> LogOptions {
    LogOptions {
        prealloc_bytes: 8192,
        force_sync: true,
    }
}

fn zxid(epoch: u32, counter: u32) -> Zxid {
    Zxid::new(Epoch(epoch), counter)
}

fn load(snap_dir: &Path, log_dir: &Path) -> (DurableState, Vec<u8>) {
    let mut dd = DataDir::open(snap_dir, log_dir, opts()).unwrap();
    let mut state = Vec::new();
    let st = dd.load(|r| r.read_to_end(&mut state).map(|_| ())).unwrap();
    (st, state)
}

/// A core peer built from `st` (member 1 of three voters).
fn peer(st: DurableState) -> Result<Peer, zab_core::StepError> {
    let members: BTreeMap<ServerId, LearnerType> = (1..=3)
        .map(|s| (ServerId(s), LearnerType::Participant))
        .collect();
    Peer::new(Config::new(ServerId(1), members), st, 0)
}

/// B4 (ZOOKEEPER-2307): an epoch write that fails (here: a directory where its temporary file
/// goes, so the create fails) returns an error naming that file and leaves the previous epoch
/// durable: a read, and a restart, still see it. A rename that fails (the target is a
/// directory) is an error naming both names and changes nothing else.
#[test]
fn b4_a_failed_epoch_write_names_the_file_and_keeps_the_old_epoch() {
    let d = tempfile::tempdir().unwrap();
    let files = EpochFiles::open(d.path(), true).unwrap();
    files.write(EpochKind::Accepted, Epoch(5)).unwrap();
    files.write(EpochKind::Current, Epoch(4)).unwrap();

    let tmp = d.path().join("acceptedEpoch.tmp");
    fs::create_dir(&tmp).unwrap();
    fs::write(tmp.join("x"), b"in the way").unwrap();
    let err = files.write(EpochKind::Accepted, Epoch(6)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Io { .. }), "{msg}");
    assert!(msg.contains("acceptedEpoch.tmp"), "{msg}");
    assert_eq!(files.read(EpochKind::Accepted).unwrap(), Some(Epoch(5)));
    assert_eq!(
        fs::read_to_string(files.path(EpochKind::Accepted)).unwrap(),
        "5\n"
    );
    fs::remove_dir_all(&tmp).unwrap();

    let current = files.path(EpochKind::Current);
    fs::remove_file(&current).unwrap();
    fs::create_dir(&current).unwrap();
    fs::write(current.join("x"), b"in the way").unwrap();
    let err = files.write(EpochKind::Current, Epoch(6)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("rename to") && msg.contains("currentEpoch.tmp"),
        "{msg}"
    );
    assert_eq!(files.read(EpochKind::Accepted).unwrap(), Some(Epoch(5)));
    fs::remove_dir_all(&current).unwrap();

    // The failed write's temporary file is gone after the next start; the epochs are the last
    // completed writes.
    let (st, _) = load(d.path(), &d.path().join("log"));
    assert_eq!((st.accepted_epoch, st.current_epoch), (Epoch(5), Epoch(0)));
    assert!(!d.path().join("currentEpoch.tmp").exists());
}

/// B4 (ZOOKEEPER-4269): leftover temporary files of all three writes (a crash mid-write: empty,
/// torn, or complete but not renamed) do not stop a start, and do not count: the node starts
/// with the last completed writes, the same on every start, and the leftovers are removed.
#[test]
fn b4_leftover_temp_files_at_start_up_are_ignored_and_removed() {
    let d = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (d.path().join("data"), d.path().join("log"));
    {
        let dd = DataDir::open(&snap_dir, &log_dir, opts()).unwrap();
        dd.epochs.write(EpochKind::Accepted, Epoch(7)).unwrap();
        dd.epochs.write(EpochKind::Current, Epoch(6)).unwrap();
    }
    for (name, content) in [
        ("acceptedEpoch.tmp", &b"8\n"[..]),
        ("currentEpoch.tmp", b"\0\0"),
        ("needsInitialSync.tmp", b""),
    ] {
        fs::write(snap_dir.join(name), content).unwrap();
    }
    let (st, _) = load(&snap_dir, &log_dir);
    assert_eq!((st.accepted_epoch, st.current_epoch), (Epoch(7), Epoch(6)));
    assert!(!st.needs_initial_sync, "an unfinished marker write counted");
    for name in [
        "acceptedEpoch.tmp",
        "currentEpoch.tmp",
        "needsInitialSync.tmp",
    ] {
        assert!(!snap_dir.join(name).exists(), "{name} left in place");
    }
    assert!(!snap_dir.join(NEEDS_INITIAL_SYNC_FILE).exists());
    let (again, _) = load(&snap_dir, &log_dir);
    assert_eq!(
        (again.accepted_epoch, again.current_epoch),
        (Epoch(7), Epoch(6))
    );
    assert!(peer(again).is_ok());
}

/// B4: a directory where an epoch write's temporary file goes would make every epoch write
/// fail at the first election; start-up refuses it with an error naming it.
#[test]
fn b4_a_directory_in_place_of_a_temp_file_is_refused_at_start_up_by_name() {
    let d = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (d.path().join("data"), d.path().join("log"));
    fs::create_dir_all(snap_dir.join("currentEpoch.tmp")).unwrap();
    let err = DataDir::open(&snap_dir, &log_dir, opts()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::BadEpochFile { .. }), "{msg}");
    assert!(msg.contains("currentEpoch.tmp"), "{msg}");
}

/// Writes the durable state of a follower of epoch 3 (log 3:1..=3:4) that acked LEADERINFO of
/// epoch 6 and received a SNAP of the leader's state at 5:10.
fn follower_before_snap(snap_dir: &Path, log_dir: &Path) -> DataDir {
    let mut dd = DataDir::open(snap_dir, log_dir, opts()).unwrap();
    dd.epochs.write(EpochKind::Accepted, Epoch(6)).unwrap();
    dd.epochs.write(EpochKind::Current, Epoch(3)).unwrap();
    for c in 1..=4 {
        dd.log.append(&txn(zxid(3, c).0, 40)).unwrap();
    }
    dd.log.sync().unwrap();
    dd
}

fn write_snapshot(dd: &DataDir, at: Zxid, body: &[u8]) {
    let mut w = dd.snaps.create(at, 1, None).unwrap();
    w.write_all(body).unwrap();
    w.finish().unwrap();
}

/// B5 (ZOOKEEPER-1653/2354): the node crashed after the SNAP's snapshot (of epoch 5) was
/// written, and its log reset to it, but before NEWLEADER wrote currentEpoch 6. It starts: the
/// snapshot loads, the epochs are exactly the files' (currentEpoch 3, not the snapshot's 5 nor
/// the new 6), and the core accepts that state (its data is of a later epoch than its
/// currentEpoch, which B3's order makes the normal state of an interrupted sync).
#[test]
fn b5_restart_between_a_later_epoch_snapshot_and_current_epoch_starts_with_the_files_epochs() {
    let d = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (d.path().join("data"), d.path().join("log"));
    {
        let mut dd = follower_before_snap(&snap_dir, &log_dir);
        write_snapshot(&dd, zxid(5, 10), b"leader state at 5:10");
        dd.log.reset(zxid(5, 10)).unwrap();
    }
    for _ in 0..2 {
        let (st, state) = load(&snap_dir, &log_dir);
        assert_eq!(state, b"leader state at 5:10");
        assert_eq!(st.snapshot_zxid, zxid(5, 10));
        assert!(st.log_tail.is_empty());
        assert_eq!((st.accepted_epoch, st.current_epoch), (Epoch(6), Epoch(3)));
        let p = peer(st).expect("the core refuses the interrupted sync's state");
        assert_eq!(p.current_epoch(), Epoch(3));
        assert_eq!(p.last_logged_zxid(), zxid(5, 10));
    }
}

/// B5: the same crash one step earlier: the snapshot is written but the log was not reset yet
/// (it ends at 3:4, before the snapshot). Loading restarts the log at the snapshot and keeps
/// the files' epochs; a crash while the snapshot itself was being written leaves only a
/// temporary file, which is removed, and the node starts with its old state and epochs.
#[test]
fn b5_restart_before_the_log_reset_or_mid_snapshot_is_deterministic() {
    let d = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (d.path().join("data"), d.path().join("log"));
    {
        let dd = follower_before_snap(&snap_dir, &log_dir);
        write_snapshot(&dd, zxid(5, 10), b"leader state at 5:10");
    }
    let (st, _) = load(&snap_dir, &log_dir);
    assert_eq!(st.snapshot_zxid, zxid(5, 10));
    assert!(st.log_index.is_empty(), "stale records: {:?}", st.log_index);
    assert_eq!((st.accepted_epoch, st.current_epoch), (Epoch(6), Epoch(3)));
    assert!(peer(st).is_ok());

    let d = tempfile::tempdir().unwrap();
    let (snap_dir, log_dir) = (d.path().join("data"), d.path().join("log"));
    {
        let dd = follower_before_snap(&snap_dir, &log_dir);
        let mut w = dd.snaps.create(zxid(5, 10), 1, None).unwrap();
        w.write_all(b"half of the leader's st").unwrap();
        // crash: the writer is dropped unfinished
    }
    let (st, state) = load(&snap_dir, &log_dir);
    assert!(state.is_empty());
    assert_eq!(st.snapshot_zxid, Zxid::ZERO);
    assert_eq!(st.log_index.last(), Some(&zxid(3, 4)));
    assert_eq!((st.accepted_epoch, st.current_epoch), (Epoch(6), Epoch(3)));
    assert!(fs::read_dir(&snap_dir).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".tmp")));
    assert!(peer(st).is_ok());
}
