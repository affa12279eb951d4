//! W6's remove-leader phase: the leader is dropped while the writer is on the members that
//! stay, or connected to the leader; the removed server is added back afterwards.
//!
//! INV-1: every wait is bounded by [`STEP`].

use std::time::{Duration, Instant};

use super::super::super::local_cluster::poll_endpoints;
use super::super::report::Line;
use super::*;

impl W6<'_> {
    /// Phase remove-leader: the leader is dropped (the writer on the others, or on it).
    pub(super) async fn remove_leader(&mut self, t: usize, pinned: bool) -> Result<Line, Failure> {
        let leader = self.healthy(&self.members, STEP).await?;
        let rest: Vec<u64> = self
            .members
            .iter()
            .copied()
            .filter(|&s| s != leader)
            .collect();
        let admin_on = rest[0];
        let rest_eps = self.endpoints(&rest)?;
        let mut list = rest_eps.clone();
        if pinned {
            list.insert(0, self.endpoint(leader)?);
        }
        let placed = Instant::now();
        self.writer.place(list.clone());
        if !self.writer.wait_writing_on(&list[..1], placed, STEP).await {
            return Err(Failure::other(format!(
                "W6: the writer did not write again on {} after moving",
                list[0]
            )));
        }
        let admin = self.client(admin_on).await?;
        let leader_ep = self.endpoint(leader)?;
        let timeout = self.p.request_timeout;
        let mut polls = None;
        let m = self
            .measure(admin.drop_frontend(leader), |call| {
                polls = Some((
                    tokio::spawn(new_leader(rest_eps.clone(), call, timeout)),
                    tokio::spawn(stepped_down(leader_ep.clone(), call)),
                ));
            })
            .await;
        let ((elected, probe), stepdown) = match polls {
            Some((a, b)) => (a.await.ok().unwrap_or((None, None)), b.await.ok().flatten()),
            None => ((None, None), None),
        };
        let exit = self.removed_exit(leader).await?;
        self.members.retain(|&s| s != leader);
        let healthy = self.healthy(&self.members, STEP).await;
        let mut l = Line::new("W6", "ens");
        l.set("phase", "remove-leader")
            .set("trial", t)
            .set("writer", if pinned { "pinned-to-removed" } else { "stays" })
            .set("server", leader);
        m.fields(&mut l);
        l.set("new_leader", elected.map_or(0, |(_, s)| s))
            .set("new_leader_ms", ms_since(m.call, elected.map(|(t, _)| t)))
            .set("fresh_client_write_ms", ms_since(m.call, probe))
            .set("old_leader_stepdown_ms", ms_since(m.call, stepdown))
            .set("removed_exit", exit);
        self.finish_line(l, &m, admin_on, leader, healthy).await
    }

    /// After remove-leader: the removed original server joins again on a fresh data dir.
    pub(super) async fn restore(&mut self) -> Result<(), Failure> {
        let Some(&sid) = ORIGINAL.iter().find(|s| !self.members.contains(s)) else {
            return Ok(());
        };
        let t0 = Instant::now();
        let via = self.members[0];
        self.joiners.start(sid, &self.endpoint(via)?)?;
        let value = self.joiners.ports(sid)?.server_value();
        let r = self
            .client(via)
            .await?
            .add_frontend(sid, FrontendRole::Follower, &value)
            .await;
        let answered = t0.elapsed();
        if let Err(e) = &r {
            progress(&format!("W6 restore: adding server {sid} back failed: {e}"));
        }
        r.map_err(Failure::from)?;
        let promoted = self.promoted(via, sid).await;
        self.members.push(sid);
        self.members.sort_unstable();
        self.healthy(&self.members, STEP).await?;
        progress(&format!(
            "W6 restore: server {sid} added back (answered in {} ms, a voter after {}, all synced after {} ms)",
            answered.as_millis(),
            promoted.map_or("never".to_owned(), |p| format!("{} ms", (p - t0).as_millis())),
            t0.elapsed().as_millis()
        ));
        self.writer.place(self.endpoints(&self.members)?);
        Ok(())
    }
}

/// Whether process `pid` still runs (not exited, not a zombie awaiting its reaper).
pub(super) fn still_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// Polls `staying` every 5 ms (at most `STEP` from `call`) until one says leader, then
/// writes with a fresh client on each in turn (100 ms to connect) until one write commits:
/// ((when elected, who), when the fresh write committed).
async fn new_leader(
    staying: Vec<String>,
    call: Instant,
    request_timeout: Duration,
) -> (Option<(Instant, u64)>, Option<Instant>) {
    let end = call + STEP;
    let mut elected = None;
    while elected.is_none() && Instant::now() < end {
        let st = poll_endpoints(&staying).await;
        elected = st
            .iter()
            .flatten()
            .find(|s| s.mode == Mode::Leader)
            .map(|s| (Instant::now(), s.sid));
        if elected.is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    if elected.is_none() {
        return (None, None);
    }
    let opts = ClientOptions {
        connect_timeout: Duration::from_millis(100),
        request_timeout,
        ..ClientOptions::DEFAULT
    };
    while Instant::now() < end {
        for e in &staying {
            if let Ok(c) = Client::connect_with(e, opts.clone()).await {
                if c.set_var("bench.w6probe", "p").await.is_ok() {
                    return (elected, Some(Instant::now()));
                }
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    (elected, None)
}

/// Polls the removed leader every 5 ms (at most `STEP` from `call`) until it no longer says
/// leader (or no longer answers): when.
async fn stepped_down(endpoint: String, call: Instant) -> Option<Instant> {
    let eps = [endpoint];
    while call.elapsed() < STEP {
        let st = poll_endpoints(&eps).await;
        if !st.iter().flatten().any(|s| s.mode == Mode::Leader) {
            return Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}
