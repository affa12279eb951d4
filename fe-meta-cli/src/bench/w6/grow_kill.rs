//! W6's grow-kill phase (correctness, once): add servers 4 and 5, SIGKILL two original
//! members (the leader first); writes must continue and no acknowledged write may be lost.
//!
//! INV-1: every wait is bounded by [`STEP`] (the writer by the whole run's bound).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::super::super::local_cluster::poll_endpoints;
use super::super::report::Line;
use super::super::{cpu, progress};
use super::writer::{self, Counters};
use super::{ms, ms_since, rc_text, sids_text, AFTER, ORIGINAL, STEADY, STEP, W6};
use crate::Failure;
use fe_meta::client::Client;
use fe_meta::protocol::Mode;
use fe_meta::state::catalog::FrontendRole;

/// The kill and what the writer and the survivors did after it.
struct AfterKill {
    at: Instant,
    killed: Vec<u64>,
    survivors: Vec<u64>,
    writes_before: usize,
    counters_before: Counters,
    writer_on: String,
    elected: Option<(Instant, u64)>,
    continued: bool,
}

impl W6<'_> {
    /// Phase grow-kill (see the module docs).
    pub(super) async fn grow_kill(&mut self) -> Result<Line, Failure> {
        let leader0 = self.healthy(&self.members, STEP).await?;
        let admin_on = self.other_than(leader0);
        let added = self.grow_to_five(admin_on).await?;
        let members = self.voters(admin_on).await;
        let moved = self.write_on_all().await?;
        let gate = self.gate().await;
        let st0 = cpu::stat();
        tokio::time::sleep(STEADY).await;
        let leader = self.healthy(&self.members, STEP).await?;
        let k = self.kill_two_originals(leader).await?;
        tokio::time::sleep(AFTER).await;
        let (busy, nice) = cpu::busy_between(st0, cpu::stat());
        let ok = self.writer.ok_times();
        let max_gap = if k.continued {
            ok.get(k.writes_before.max(1) - 1..)
                .map(|w| w.windows(2).map(|p| p[1] - p[0]).max().unwrap_or_default())
                .unwrap_or_default()
        } else {
            k.writes_before
                .checked_sub(1)
                .and_then(|i| ok.get(i))
                .map_or(k.at.elapsed(), |&a| a.elapsed())
        };
        self.writer.finish().await;
        let acked = self.writer.acked_seq();
        let conn_loss = self.writer.counters().conn_loss - k.counters_before.conn_loss;
        let (stored, zxid_equal) = self.durability(&k.survivors).await;
        let mut l = Line::new("W6", "ens");
        l.set("phase", "grow-kill")
            .set("trial", 1)
            .set("added", "4,5")
            .set("add4_reconfig_ms", ms(added[0].0))
            .set("add4_rc", &added[0].1)
            .set("add5_reconfig_ms", ms(added[1].0))
            .set("add5_rc", &added[1].1)
            .set("members", members)
            .set("writer_list_update_ms", moved)
            .set("writer_on", &k.writer_on)
            .set("leader_before", leader)
            .set("killed", sids_text(&k.killed))
            .set("survivors", sids_text(&k.survivors))
            .set("new_leader", k.elected.map_or(0, |(_, s)| s))
            .set("new_leader_ms", ms_since(k.at, k.elected.map(|(t, _)| t)))
            .set("writes_continued", if k.continued { "yes" } else { "no" })
            .set("max_gap_ms", ms(max_gap))
            .set("ops_after_kill", ok.len() - k.writes_before)
            .set("conn_loss", conn_loss)
            .set("acked_writes", acked);
        durability_fields(&mut l, acked, stored, zxid_equal);
        for part in gate.split(' ') {
            if let Some((key, v)) = part.split_once('=') {
                l.set(key, v);
            }
        }
        l.set("machine_busy_cores", format!("{busy:.2}"))
            .set("nice_cores", format!("{nice:.2}"));
        Ok(l)
    }

    /// Adds servers 4 and 5 through `admin_on`, each started first with `--helper` and
    /// waited for until promoted; returns each add's call latency and outcome.
    async fn grow_to_five(&mut self, admin_on: u64) -> Result<Vec<(Duration, String)>, Failure> {
        let mut added = Vec::new();
        for sid in [4, 5] {
            self.joiners.start(sid, &self.endpoint(admin_on)?)?;
            let value = self.joiners.ports(sid)?.server_value();
            let t0 = Instant::now();
            let r = self
                .client(admin_on)
                .await?
                .add_frontend(sid, FrontendRole::Follower, &value)
                .await;
            added.push((
                t0.elapsed(),
                r.as_ref().map_or_else(rc_text, |_| "ok".to_owned()),
            ));
            r.map_err(Failure::from)?;
            if self.promoted(admin_on, sid).await.is_none() {
                let log = self.joiners.dir_of(sid).map_or("?".to_owned(), |d| {
                    d.join("fe-meta.log").display().to_string()
                });
                return Err(Failure::other(format!(
                    "W6: server {sid} was not promoted within {STEP:?} (its log: {log})"
                )));
            }
            self.members.push(sid);
            self.healthy(&self.members, STEP).await?;
        }
        Ok(added)
    }

    /// Gives the writer every member's endpoint (ZooKeeper's `updateServerList`); returns how
    /// long until it wrote on the new list (`-1`: not within [`STEP`]).
    async fn write_on_all(&mut self) -> Result<String, Failure> {
        let placed = Instant::now();
        let all = self.endpoints(&self.members)?;
        self.writer.place(all.clone());
        Ok(if self.writer.wait_writing_on(&all, placed, STEP).await {
            ms_since(placed, self.writer.last_ok())
        } else {
            "-1".to_owned()
        })
    }

    /// SIGKILLs two original members, `leader` first if it is one, then watches until a
    /// survivor leads and the writer wrote again (or [`STEP`] passed).
    async fn kill_two_originals(&mut self, leader: u64) -> Result<AfterKill, Failure> {
        let mut killed = Vec::new();
        if ORIGINAL.contains(&leader) {
            killed.push(leader);
        }
        for s in ORIGINAL {
            if killed.len() < 2 && !killed.contains(&s) {
                killed.push(s);
            }
        }
        let survivors: Vec<u64> = self
            .members
            .iter()
            .copied()
            .filter(|s| !killed.contains(s))
            .collect();
        let survivor_eps = self.endpoints(&survivors)?;
        let writes_before = self.writer.count();
        let counters_before = self.writer.counters();
        let writer_on = self.sid_of(self.writer.on());
        let at = Instant::now();
        for &s in &killed {
            if self.joiners.runs(s) {
                self.joiners.stop(s, Signal::SIGKILL).await?;
            } else {
                self.cluster.stop_node(s, Signal::SIGKILL).await?;
            }
        }
        let mut elected = None;
        while at.elapsed() < STEP
            && (elected.is_none() || self.writer.last_ok().is_none_or(|l| l < at))
        {
            if elected.is_none() {
                let st = poll_endpoints(&survivor_eps).await;
                elected = st
                    .iter()
                    .flatten()
                    .find(|s| s.mode == Mode::Leader)
                    .map(|s| (Instant::now(), s.sid));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let continued = self.writer.last_ok().is_some_and(|l| l > at);
        Ok(AfterKill {
            at,
            killed,
            survivors,
            writes_before,
            counters_before,
            writer_on,
            elected,
            continued,
        })
    }

    /// After grow-kill: the sequence number stored in the writer's variable (a sync read on
    /// the last survivor), and whether every survivor reaches the same journal id after one
    /// more write (polled up to 10 s).
    async fn durability(&self, survivors: &[u64]) -> (Option<u64>, bool) {
        let Some(&last) = survivors.last() else {
            return (None, false);
        };
        let Ok(c) = self.client(last).await else {
            return (None, false);
        };
        let stored = stored_seq(&c).await;
        let _ = c.set_var("bench.w6.final", "1").await;
        let Ok(eps) = self.endpoints(survivors) else {
            return (stored, false);
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let st = poll_endpoints(&eps).await;
            let ids: Option<Vec<_>> = st
                .iter()
                .map(|s| s.as_ref().map(|s| s.applied_journal_id))
                .collect();
            if ids.is_some_and(|ids| ids.windows(2).all(|w| w[0] == w[1])) {
                return (stored, true);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (stored, false)
    }
}

/// The sequence number the writer's variable holds (a sync read).
async fn stored_seq(c: &Client) -> Option<u64> {
    match c.get_var(writer::VAR, true).await {
        Ok(r) => r
            .value
            .and_then(|v| v.trim_start_matches('0').parse::<u64>().ok()),
        Err(e) => {
            progress(&format!(
                "W6 grow-kill: reading {} failed: {e}",
                writer::VAR
            ));
            None
        }
    }
}

/// `znode_version`, `lost_acked` and `survivors_zxid_equal`.
fn durability_fields(l: &mut Line, acked: u64, stored: Option<u64>, zxid_equal: bool) {
    // ZkBench's key: its znode version counts the committed writes as the stored sequence
    // number does (writer INV-1).
    l.set(
        "znode_version",
        stored.map_or("NA".to_owned(), |s| s.to_string()),
    )
    .set(
        "lost_acked",
        stored.map_or("NA".to_owned(), |s| acked.saturating_sub(s).to_string()),
    )
    .set(
        "survivors_zxid_equal",
        if zxid_equal { "yes" } else { "no" },
    );
}
