//! The static configuration of one peer, in ZooKeeper's units (ticks).

use std::collections::BTreeMap;

use crate::types::{LearnerType, ServerId};

/// Configuration of one peer. Times are in milliseconds of the clock the driver passes with
/// `Input::Tick`; limits are in ticks of `tick_ms`, as in zoo.cfg.
#[derive(Clone, Debug)]
pub struct Config {
    /// This server's id.
    pub sid: ServerId,
    /// Every member of the bootstrap configuration (zoo.cfg's `server.N` lines), this one
    /// included, and whether it votes. The peer keeps this field equal to the configuration
    /// in force (`membership` R1) from then on; a data dir's committed configuration
    /// (`DurableState::membership`) replaces the bootstrap one.
    pub members: BTreeMap<ServerId, LearnerType>,
    /// The address text of each bootstrap member (`membership::Member::address`), carried
    /// into the configuration txns this peer proposes; opaque to the core. May be empty.
    pub addresses: BTreeMap<ServerId, String>,
    /// zoo.cfg `tickTime`.
    pub tick_ms: u64,
    /// zoo.cfg `initLimit`: discovery and sync must finish within this many ticks.
    pub init_limit_ticks: u32,
    /// zoo.cfg `syncLimit`: a learner (or a leader's quorum) silent this many ticks is lost.
    pub sync_limit_ticks: u32,
    /// ZooKeeper's `maxTimeToWaitForEpoch`, in ticks (PITFALLS B7): a prospective leader still
    /// short of a FOLLOWERINFO quorum after this many ticks abandons the epoch and re-elects as
    /// soon as a participant it has not heard FOLLOWERINFO from reports LOOKING, instead of
    /// waiting out `initLimit`. Default 2 ticks: ten times the default `finalize_wait_ms`, so a
    /// voter that merely finalizes later than the leader is not mistaken for one that changed
    /// its mind, and a fifth of the default `initLimit`. 0 disables the rule (wait `initLimit`).
    pub epoch_wait_ticks: u32,
    /// Fast leader election waits this long for a better vote before deciding (ZooKeeper's
    /// finalizeWait, 200 ms).
    pub finalize_wait_ms: u64,
    /// A learner still waiting for LEADERINFO resends its FOLLOWERINFO (OBSERVERINFO) this
    /// often. Voters finish the election at slightly different moments, so a learner often
    /// sends its first info while its leader is still LOOKING, which drops it; the resend is
    /// what reaches the leader, and its period adds straight to the failover time. Default
    /// 50 ms (a duplicate info costs the leader a lookup); a driver that ticks less often
    /// resends at its tick.
    pub info_resend_ms: u64,
    /// How many recently committed txns the leader keeps in memory to DIFF learners from
    /// (ZooKeeper's committedLog, 500).
    pub committed_log_window: usize,
    /// A learner further behind than this many txns gets a SNAP instead of a DIFF from the
    /// on-disk log.
    pub diff_from_log_limit: u64,
    /// ZooKeeper's `snapshotSizeFactor`: a learner whose DIFF would stream more bytes from the
    /// on-disk log than this fraction of the newest snapshot's size gets a SNAP instead (a
    /// SNAP is one sequential image to write and load; a DIFF is a record per txn to log and
    /// apply). Negative disables the rule; DIFFs from memory are never weighed. Default 0.33.
    pub snapshot_size_factor: f64,
    /// The largest zxid counter a leader may assign before it forces a new epoch. `u32::MAX`
    /// in production; tests lower it to reach the rollover quickly.
    pub max_counter: u32,
    /// Seeds the generator of the jitter added to LOOKING's notification resends, the core's
    /// only randomness (`peer::jitter`). 0, the default, seeds it from the sid alone
    /// (`sid × 0x9e37_79b9_7f4a_7c15 | 1`), exactly as before this field existed; any other
    /// value is mixed into that, and peers with the same seed still draw different sequences.
    /// The simulation sets it from its run seed to vary election timing per run while a seed
    /// still replays exactly; a deployment has no reason to change it.
    pub jitter_seed: u64,
}

impl Config {
    /// A configuration with ZooKeeper's defaults for everything but the membership.
    pub fn new(sid: ServerId, members: BTreeMap<ServerId, LearnerType>) -> Config {
        Config {
            sid,
            members,
            addresses: BTreeMap::new(),
            tick_ms: 2000,
            init_limit_ticks: 10,
            sync_limit_ticks: 5,
            epoch_wait_ticks: 2,
            finalize_wait_ms: 200,
            info_resend_ms: 50,
            committed_log_window: 500,
            diff_from_log_limit: 100_000,
            snapshot_size_factor: 0.33,
            max_counter: u32::MAX,
            jitter_seed: 0,
        }
    }

    /// The voting members.
    pub fn participants(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.members
            .iter()
            .filter(|(_, t)| **t == LearnerType::Participant)
            .map(|(sid, _)| *sid)
    }

    /// True when `voters` (which may contain observers and strangers; they are ignored) is a
    /// strict majority of the participants.
    pub fn is_quorum<'a>(&self, voters: impl IntoIterator<Item = &'a ServerId>) -> bool {
        is_quorum_of(&self.members, voters)
    }
}

/// True when `voters` (observers and strangers ignored) is a strict majority of the
/// participants of `members`.
pub fn is_quorum_of<'a>(
    members: &BTreeMap<ServerId, LearnerType>,
    voters: impl IntoIterator<Item = &'a ServerId>,
) -> bool {
    let total = members
        .values()
        .filter(|t| **t == LearnerType::Participant)
        .count();
    let count = voters
        .into_iter()
        .filter(|sid| members.get(sid) == Some(&LearnerType::Participant))
        .count();
    count * 2 > total
}
