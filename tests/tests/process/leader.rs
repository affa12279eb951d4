//! The leader fails: kill -9 under a steady load from several clients, and SIGSTOP past
//! syncLimit × tickTime.

use std::time::{Duration, Instant};

use fe_meta::client::{Client, ClientError, ClientOptions, Written};
use fe_meta::protocol::Status;
use tests::proc::{ClusterSpec, Load, ProcCluster};
use tokio::task::JoinHandle;

use crate::{epoch_of, ms};

/// kill -9 the leader while 3 clients (one per node) write: a new leader takes over, and the
/// writes go on; the time from the kill to the first write of the new leader is measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_under_load_a_new_leader_takes_over() {
    let mut c = ProcCluster::start("kill_leader", ClusterSpec::default())
        .await
        .unwrap();
    let old = c.leader(Duration::from_secs(10)).await.unwrap();
    let old_epoch = c.status(old).await.unwrap().epoch;
    let load = Load::start(&c, 3, 64, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let killed_at = Instant::now();
    c.kill(old).unwrap();
    let new = c.leader(Duration::from_secs(15)).await.unwrap();
    let elected = killed_at.elapsed();
    assert_ne!(new, old);
    let new_epoch = c.status(new).await.unwrap().epoch;
    assert!(new_epoch > old_epoch, "epoch {new_epoch} after {old_epoch}");
    // The writers on the surviving nodes go on in the new epoch.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.ledger().max_journal_id() < new_epoch << 32 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.restart(old).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let report = load.stop().await;

    let first = report
        .recovery_after(killed_at, new_epoch << 32)
        .expect("no write acknowledged by the new leader");
    let before = report.acked_between(killed_at - Duration::from_millis(1500), killed_at);
    assert!(before > 10, "only {before} writes in the steady phase");
    println!(
        "RECOVERY scenario=kill_leader election_ms={} first_acked_write_ms={} acked={} failed={} errors={:?}",
        ms(elected),
        ms(first),
        report.acked,
        report.failed,
        report.errors
    );
    assert!(
        first < Duration::from_secs(10),
        "first write after {first:?}"
    );
    let done = c.finish().await.unwrap();
    assert!(done.acked_writes as u64 >= report.acked);
}

/// SIGSTOP the leader for 3 × syncLimit × tickTime: the others elect a new leader meanwhile;
/// on SIGCONT the old leader steps down and follows the new one, in the new epoch. Writes sent
/// to it while it was frozen are acknowledged only in the new epoch (then kept, like every
/// acknowledged write); one it refused with a definite error is nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_leader_steps_down_and_follows_the_new_one() {
    let spec = ClusterSpec {
        extra: vec!["write_timeout_ms=4000".into()],
        ..ClusterSpec::default()
    };
    let sync_window = Duration::from_millis(spec.tick_ms * u64::from(spec.sync_limit));
    let mut c = ProcCluster::start("pause_leader", spec).await.unwrap();
    let old = c.leader(Duration::from_secs(10)).await.unwrap();
    let old_epoch = c.status(old).await.unwrap().epoch;
    let load = Load::start(&c, 3, 64, Duration::from_secs(20));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stalled_opts = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(20),
        ..ClientOptions::DEFAULT
    };
    let stalled_client = c.client(old, Some(stalled_opts)).await.unwrap();

    c.pause(old).unwrap();
    let paused_at = Instant::now();
    let stalled = spawn_stalled_writes(stalled_client);
    let new = c.leader(Duration::from_secs(15)).await.unwrap();
    let elected = paused_at.elapsed();
    assert_ne!(new, old);
    let new_epoch = c.status(new).await.unwrap().epoch;
    assert!(new_epoch > old_epoch);
    let frozen_for = (sync_window * 3).max(elected + Duration::from_millis(500));
    tokio::time::sleep(frozen_for.saturating_sub(paused_at.elapsed())).await;

    c.resume(old).unwrap();
    let resumed_at = Instant::now();
    let leader = c.leader(Duration::from_secs(15)).await.unwrap();
    let rejoined = resumed_at.elapsed();
    assert_eq!(leader, new, "the frozen leader took back the lead");
    let st = c.status(old).await.unwrap();
    assert_eq!((st.leader_sid, st.epoch), (Some(new), new_epoch));
    let report = load.stop().await;
    let stalled = stalled.await.unwrap();
    let (_, received) = c.sync_counts(old).await.unwrap();
    println!(
        "RECOVERY scenario=pause_leader frozen_ms={} election_ms={} rejoin_after_sigcont_ms={} \
         first_acked_write_ms={} old_leader_sync={received:?} stalled={:?}",
        ms(paused_at.elapsed() - rejoined),
        ms(elected),
        ms(rejoined),
        report
            .recovery_after(paused_at, new_epoch << 32)
            .map_or(-1, |d| ms(d) as i128),
        stalled
            .iter()
            .map(|(n, r)| (n, r.as_ref().map(|w| w.journal_id)))
            .collect::<Vec<_>>()
    );
    check_stalled_writes(&c, &stalled, new_epoch).await;
    c.finish().await.unwrap();
}

/// The outcome of one write sent to the frozen leader: its variable's name and the answer.
type StalledWrite = (String, Result<Written, ClientError>);

/// Writes `stalled-0` .. `stalled-4` through `client` one after the other, on a task; the task
/// returned yields their outcomes.
fn spawn_stalled_writes(client: Client) -> JoinHandle<Vec<StalledWrite>> {
    tokio::spawn(async move {
        let mut out = Vec::new();
        for k in 0..5 {
            let name = format!("stalled-{k}");
            out.push((name.clone(), client.set_var(&name, "x").await));
        }
        out
    })
}

/// Each write sent to the frozen leader was either acknowledged in `new_epoch` or later (and
/// goes into the ledger, to be checked like every acknowledged write), refused with a definite
/// error (and is on no node), or left without a definite answer.
async fn check_stalled_writes(c: &ProcCluster, stalled: &[StalledWrite], new_epoch: u64) {
    for (name, r) in stalled {
        match r {
            Ok(w) => {
                assert!(
                    epoch_of(w.journal_id.0) >= new_epoch,
                    "{name} acked in an old epoch: {w:?}"
                );
                c.ledger().record(name, "x", w.journal_id.0);
            }
            Err(e) if definite(e) => {
                for sid in c.sids() {
                    let v = c
                        .client(sid, None)
                        .await
                        .unwrap()
                        .get_var(name, true)
                        .await
                        .unwrap();
                    assert_eq!(v.value, None, "refused write {name} ({e}) is on node {sid}");
                }
            }
            Err(_) => {}
        }
    }
}

/// A refusal that says the write was not applied. Not a timeout or a lost connection, and not
/// QUORUM_UNAVAILABLE either: a leader that loses its quorum with the write submitted answers
/// so ("may or may not commit later"), and the write can still commit once the node follows
/// the new leader.
fn definite(e: &ClientError) -> bool {
    matches!(
        e.status(),
        Some(Status::NotLeader | Status::InvalidArgument)
    )
}
