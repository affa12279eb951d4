//! The offline half of `fe-meta recover` on a real data dir: what the survey reads, and what
//! the rewrite leaves (a one-member configuration in a new epoch, the old files aside).

#![allow(clippy::unwrap_used)]

use std::path::Path;

use bytes::Bytes;
use zab_core::{Epoch, MemberRole, ServerId, Txn, TxnKind, Zxid};
use zab_store::{DataDir, EpochFiles, EpochKind, LogOptions, TxnLog};

use super::{local, rewrite};

const OPTS: LogOptions = LogOptions {
    prealloc_bytes: 64 << 10,
    force_sync: false,
};

/// Server 1 of three, with `txns` app txns in epoch 1 and both epoch files at 1.
fn data_dir(root: &Path, txns: u32) -> std::path::PathBuf {
    let data = root.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("myid"), "1\n").unwrap();
    let cfg = root.join("zoo.cfg");
    let mut text = format!(
        "tickTime=100\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort=1\nclusterId=7\n\
         forceSync=no\npreAllocSize=64\n",
        data.display()
    );
    for sid in 1..=3 {
        let (q, e, c) = (20 + sid, 30 + sid, 10 + sid);
        text += &format!("server.{sid}=127.0.0.1:{q}:{e};127.0.0.1:{c}\n");
    }
    std::fs::write(&cfg, text).unwrap();
    let (mut log, _) = TxnLog::open(&data, OPTS).unwrap();
    for c in 1..=txns {
        let txn = Txn {
            zxid: Zxid::new(Epoch(1), c),
            data: Bytes::from_static(b"x"),
            kind: TxnKind::App,
        };
        log.append(&txn).unwrap();
    }
    log.sync().unwrap();
    let epochs = EpochFiles::open(&data, false).unwrap();
    epochs.write(EpochKind::Accepted, Epoch(1)).unwrap();
    epochs.write(EpochKind::Current, Epoch(1)).unwrap();
    cfg
}

#[test]
fn the_rewrite_logs_a_one_member_configuration_in_a_new_epoch_and_keeps_the_old_files() {
    let root = tempfile::tempdir().unwrap();
    let cfg = data_dir(root.path(), 3);
    let before = local::read(&cfg).unwrap();
    assert_eq!(before.refusal, None);
    assert_eq!(before.held.last_logged, Zxid::new(Epoch(1), 3));
    assert_eq!(before.in_force.members.len(), 3);
    let done = rewrite::rewrite(&before, "T").unwrap();
    let version = Zxid::new(Epoch(2), 1);
    assert_eq!(done.membership.version, version);
    let aside = root.path().join("data/recover-T");
    for f in ["acceptedEpoch", "currentEpoch", "RESTORE.txt"] {
        assert!(aside.join(f).is_file(), "{f} set aside");
    }
    let kept = std::fs::read_dir(&aside).unwrap().filter_map(|e| e.ok());
    let segments = kept.filter(|e| e.file_name().to_string_lossy().starts_with("log."));
    assert_eq!(segments.count(), 1, "the log segment set aside");
    let restore = std::fs::read_to_string(aside.join("RESTORE.txt")).unwrap();
    assert!(restore.contains("acceptedEpoch"), "{restore}");
    // What a start loads: the new configuration last in the log, both epochs at 2.
    let data = root.path().join("data");
    let mut dd = DataDir::open(&data, &data, OPTS).unwrap();
    let durable = dd.load(|_| Ok(())).unwrap();
    let last = durable.log_tail.last().unwrap();
    assert_eq!((last.zxid, last.kind), (version, TxnKind::Membership));
    assert_eq!(durable.log_tail.len(), 4, "the old txns are kept");
    assert_eq!(
        (durable.accepted_epoch, durable.current_epoch),
        (Epoch(2), Epoch(2))
    );
    drop(dd);
    let after = local::read(&cfg).unwrap();
    assert_eq!(after.in_force.version, version);
    let only: Vec<_> = after.in_force.members.iter().collect();
    assert_eq!(only.len(), 1);
    assert_eq!(*only[0].0, ServerId(1));
    assert_eq!(only[0].1.role, MemberRole::Participant);
    assert_eq!(only[0].1.address, "127.0.0.1:21:31;127.0.0.1:11");
}

#[test]
fn a_data_dir_that_never_synced_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let cfg = data_dir(root.path(), 1);
    let epochs = EpochFiles::open(root.path().join("data"), false).unwrap();
    epochs.set_needs_initial_sync(true).unwrap();
    let l = local::read(&cfg).unwrap();
    assert!(l.refusal.unwrap().contains("needsInitialSync"));
}
