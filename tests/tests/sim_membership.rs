//! Named deterministic scenarios of membership changes (`zab_core::membership`), run on the
//! simulated cluster with every checker after every step (`tests::sim::checker::membership`
//! among them: a committed change is held like an acknowledged write, a removed node never
//! leads nor votes). Each ends with the liveness phase: every member of the leader's committed
//! configuration applies the same history.
//!
//! `ZAB_SCENARIO_SEED=<n>` changes the scheduler seed (default 1):
//! `for s in $(seq 1 50); do ZAB_SCENARIO_SEED=$s cargo test -p tests --release --test sim_membership || break; done`

// Test code: a failed expectation aborts the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tests::sim::{run_with, Cluster, RunReport, SimOptions};
use zab_core::{LearnerType, MemberRole, MembershipError, Role, ServerId, Zxid};

fn options(voters: usize, observers: usize) -> SimOptions {
    let seed = std::env::var("ZAB_SCENARIO_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    eprintln!("scenario seed {seed} (ZAB_SCENARIO_SEED replays another)");
    SimOptions::new(seed, voters, observers)
}

fn started(opts: SimOptions) -> (Cluster, ServerId) {
    let mut c = Cluster::new(opts);
    let l = c.stabilize();
    (c, l)
}

/// The role of `member` in the committed configuration `of` reported last.
fn role_in(c: &Cluster, of: ServerId, member: ServerId) -> Option<MemberRole> {
    c.committed_membership(of).and_then(|m| m.role_of(member))
}

/// Asks the leader to add a follower; requires the change to commit; returns the new sid and
/// the change's version.
fn add_follower(c: &mut Cluster) -> (ServerId, Zxid) {
    let leader = c.stabilize();
    let (req, new) = c.add_member(leader, LearnerType::Participant);
    c.expect_within(30_000, "the addition is answered", |c| {
        c.membership_outcome(req).is_some()
    });
    let version = c.membership_outcome(req).unwrap().unwrap();
    assert_eq!(role_in(c, leader, new), Some(MemberRole::Joining));
    (new, version)
}

/// Runs until every live member reports `member` a participant in its committed configuration.
fn await_promotion(c: &mut Cluster, member: ServerId) {
    c.expect_within(60_000, "the joining member is promoted", |c| {
        c.ids().into_iter().all(|id| {
            c.peer(id).is_none()
                || !c.is_member(id)
                || role_in(c, id, member) == Some(MemberRole::Participant)
        })
    });
}

/// Removes `member` through the current leader; requires it to commit; returns the version.
fn remove(c: &mut Cluster, member: ServerId) -> Zxid {
    let leader = c.stabilize();
    let req = c.remove_member(leader, member);
    c.expect_within(30_000, "the removal is answered", |c| {
        c.membership_outcome(req).is_some()
    });
    c.membership_outcome(req).unwrap().unwrap()
}

#[test]
fn a_follower_answers_not_leader_and_a_second_change_waits_for_the_first() {
    let (mut c, leader) = started(options(3, 0));
    let follower = c.ids().into_iter().find(|id| *id != leader).unwrap();
    let req = c.remove_member(follower, leader);
    assert_eq!(
        c.membership_outcome(req),
        Some(Err(MembershipError::NotLeader {
            leader: Some(leader)
        }))
    );
    let (first, _) = c.add_member(leader, LearnerType::Observer);
    let (second, _) = c.add_member(leader, LearnerType::Observer);
    assert!(matches!(
        c.membership_outcome(second),
        Some(Err(MembershipError::ChangeInFlight(_)))
    ));
    c.expect_within(30_000, "the first change commits", |c| {
        c.membership_outcome(first).is_some()
    });
    assert!(c.membership_outcome(first).unwrap().is_ok());
    c.check_liveness();
    assert_eq!(c.ids().len(), 4, "the observer was started");
}

#[test]
fn a_change_while_a_member_is_down() {
    let (mut c, leader) = started(options(5, 0));
    let down = c.ids().into_iter().find(|id| *id != leader).unwrap();
    c.crash(down);
    c.commit_write(leader);
    let (new, version) = add_follower(&mut c);
    await_promotion(&mut c, new);
    let leader = c.stabilize();
    c.commit_write(leader);
    c.restart(down);
    c.expect_within(
        60_000,
        "the member that was down learns both changes",
        |c| {
            c.peer(down).is_some_and(|p| {
                p.is_serving()
                    && p.committed_membership().role_of(new) == Some(MemberRole::Participant)
                    && p.committed_membership().version > version
            })
        },
    );
    c.check_liveness();
}

#[test]
fn the_leader_removed() {
    let (mut c, leader) = started(options(3, 1));
    c.commit_write(leader);
    let version = remove(&mut c, leader);
    assert_eq!(
        c.checker().membership.removed().get(&leader),
        Some(&version),
        "the old leader applied its removal"
    );
    let next = c.stabilize();
    assert_ne!(next, leader);
    assert!(!c.is_member(leader));
    let z = c.commit_write(next);
    assert!(z > version);
    c.check_liveness();
    assert_ne!(c.peer(leader).map(|p| p.role()), Some(Role::Leading));
}

#[test]
fn the_leader_crashing_with_the_change_proposed_but_not_committed() {
    let (mut c, leader) = started(options(5, 0));
    c.commit_write(leader);
    c.isolate(leader);
    let (req, new) = c.add_member(leader, LearnerType::Participant);
    assert!(
        c.peer(leader).unwrap().membership().role_of(new) == Some(MemberRole::Joining),
        "the change is in force on the leader (logged, R1)"
    );
    c.crash(leader);
    c.heal_all();
    let next = c.stabilize();
    assert_ne!(next, leader);
    assert_eq!(c.membership_outcome(req), None, "never answered");
    assert!(!c.is_member(new), "the change never reached a quorum");
    c.commit_write(next);
    c.restart(leader);
    c.expect_within(60_000, "the old leader drops its uncommitted change", |c| {
        c.peer(leader)
            .is_some_and(|p| p.is_serving() && p.membership().role_of(new).is_none())
    });
    c.check_liveness();
    assert!(!c.ids().contains(&new), "the server was never started");
}

/// 5 voters grow to 6: the leader, the new member and two old followers on one side, two old
/// followers on the other. The change commits on the majority side (a quorum of both
/// configurations); the minority can neither elect nor commit, and joins after the heal.
#[test]
fn a_partition_that_separates_old_and_new_members_during_the_change() {
    let (mut c, leader) = started(options(5, 0));
    let old: Vec<ServerId> = c.ids().into_iter().filter(|id| *id != leader).collect();
    let (minority, majority) = old.split_at(2);
    c.partition(&[&[leader, majority[0], majority[1]], minority]);
    let (new, _) = add_follower(&mut c);
    c.partition(&[&[leader, majority[0], majority[1], new], minority]);
    await_promotion_on(&mut c, &[leader, majority[0], majority[1], new], new);
    let req = c.write(minority[0]);
    c.run_for(3_000);
    assert!(
        !matches!(c.write_outcome(req), Some(Ok(_))),
        "the minority of old members commits nothing"
    );
    c.commit_write(leader);
    c.heal_all();
    await_promotion(&mut c, new);
    c.check_liveness();
}

/// Like [`await_promotion`], on the given nodes only.
fn await_promotion_on(c: &mut Cluster, ids: &[ServerId], member: ServerId) {
    c.expect_within(60_000, "the joining member is promoted", |c| {
        ids.iter()
            .all(|id| role_in(c, *id, member) == Some(MemberRole::Participant))
    });
}

/// 3 voters grow to 4: the promotion of the new member is in force (logged) on the leader and
/// the new member when a partition cuts them off from the two old followers, which elect a
/// leader of the committed configuration (2 of 3). After the heal the two cut-off members hold
/// a configuration of 4 participants in which only 2 follow that leader; they still join it
/// (its own LEADING claim suffices, `election` INV-8), the promotion is proposed again and
/// commits, and every member applies the same history. Scenario seed 1 once left them LOOKING
/// for good, judging the leader by their own configuration in force.
#[test]
fn members_holding_an_uncommitted_promotion_rejoin_the_committed_configurations_leader() {
    let (mut c, leader) = started(options(3, 0));
    let (new, _) = add_follower(&mut c);
    // the promotion is proposed once the new member synced: cut the leader and the new member
    // off from the two old followers before it can commit
    c.expect_within(30_000, "the promotion is proposed", |c| {
        c.peer(leader)
            .is_some_and(|p| p.membership().role_of(new) == Some(MemberRole::Participant))
    });
    let old: Vec<ServerId> = c
        .ids()
        .into_iter()
        .filter(|id| *id != leader && *id != new)
        .collect();
    c.partition(&[&[leader, new], &old]);
    let req = c.write(leader);
    c.run_for(5_000);
    assert!(
        !matches!(c.write_outcome(req), Some(Ok(_))),
        "the side with one old member commits nothing"
    );
    c.heal_all();
    await_promotion(&mut c, new);
    let leader = c.stabilize();
    c.commit_write(leader);
    c.check_liveness();
}

#[test]
fn a_removed_node_keeps_running_and_never_disturbs() {
    let mut opts = options(5, 0);
    // no local snapshots: a restart finds the removal only logged, not applied
    opts.snap_every = 0;
    let (mut c, leader) = started(opts);
    let removed = c.ids().into_iter().find(|id| *id != leader).unwrap();
    remove(&mut c, removed);
    c.expect_within(10_000, "the removed node applies its removal", |c| {
        c.checker().membership.removed().contains_key(&removed)
    });
    let epoch = c.peer(leader).unwrap().current_epoch();
    for _ in 0..3 {
        c.commit_write(leader);
        c.crash(removed);
        c.run_for(300);
        c.restart(removed);
        c.run_for(3_000);
        assert_eq!(c.leader(), Some(leader), "the leader is undisturbed");
        assert_eq!(
            c.peer(leader).unwrap().current_epoch(),
            epoch,
            "no new epoch"
        );
    }
    c.check_liveness();
    assert_eq!(c.leader(), Some(leader));
    assert_eq!(c.peer(leader).unwrap().current_epoch(), epoch);
}

#[test]
fn grow_three_to_five_then_lose_two_of_the_original_three() {
    let (mut c, _) = started(options(3, 0));
    let original = c.ids();
    let (a, _) = add_follower(&mut c);
    await_promotion(&mut c, a);
    let (b, _) = add_follower(&mut c);
    await_promotion(&mut c, b);
    let leader = c.stabilize();
    assert_eq!(c.participants().len(), 5);
    c.commit_write(leader);
    for &id in original.iter().filter(|id| **id != leader).take(1) {
        c.crash(id);
    }
    c.crash(leader);
    let next = c.stabilize();
    assert!(!original.contains(&next) || c.peer(next).is_some());
    for _ in 0..5 {
        let via = c.leader().unwrap_or(next);
        c.commit_write(via);
    }
    c.check_liveness();
}

/// Seed 101 (3 voters, 2 observers): a follower receives a SNAP, and the configuration txn the
/// leader proposes next reaches it after `EndSnapshot` but before `SnapshotInstalled`. The
/// install keeps the configurations logged after the snapshot (`members` INV-1), so when the
/// follower applies that txn its committed configuration is the new one; the install once
/// forgot it (the membership checker's INV-M1: "node 2 reports committed configuration 0x0
/// but applied configuration 0x10000000e"). Replayed as it failed and as the sweep runs it.
#[test]
fn a_snap_install_keeps_a_configuration_logged_after_end_snapshot() {
    replay_as_it_failed_and_today(101);
}

/// Seed 233 (5 voters): node 4 missed the promotion of node 6 and the changes after it, so in
/// its configuration in force (version 0x10000002b) node 6 is still joining and node 3, since
/// removed, a participant. Node 6 leads the newest configuration, followed by nodes 1, 2, 5
/// and 8; node 4 learns the newer committed configuration from a member's answer
/// (`membership` R7) and joins node 6 on its own LEADING claim (`election` INV-8). It once
/// stayed LOOKING for good (liveness phase: "a stable leader: not reached"). Replayed as it
/// failed and as the sweep runs it.
#[test]
fn a_member_behind_a_promotion_rejoins_the_newer_configurations_leader() {
    replay_as_it_failed_and_today(233);
}

/// The sweep's run of `seed` with membership changes on, whatever the seed draws.
fn run_with_changes(seed: u64) -> RunReport {
    let (mut opts, steps) = SimOptions::for_seed(seed);
    opts.membership_changes = true;
    run_with(opts, steps)
}

/// Seed 255 (7 voters, 1 observer): the leader 7 proposes its own removal while it syncs the
/// joining member 11 (SNAP, then the proposals of the sync, then NEWLEADER). Member 11 logs
/// the removal, so its configuration in force no longer lists its leader; it still hears the
/// leader it learns from (`peer` INV-5) and acks its NEWLEADER. It once dropped it, and a
/// synced learner with a durable log never acked NEWLEADER (the NEWLEADER-ack checker).
/// Replayed as it failed and as the sweep runs it.
#[test]
fn a_learner_acks_newleader_of_a_leader_removing_itself() {
    replay_as_it_failed_and_today(255);
}

/// Seed 1567 (7 voters, 2 observers, grown to 9 voters and 2 observers): with one link served
/// per deliver step, each of the 11 servers' links was served about every 85 virtual ms,
/// slower than FOLLOWERINFO is resent, so every epoch's discovery ran out of initLimit and
/// elections churned through the liveness phase (`tests::sim::cluster` INV-C4). Runs as the
/// sweep runs it today: every checker and the liveness phase pass.
#[test]
fn an_eleven_server_cluster_elects_a_stable_leader() {
    let r = run_with_changes(1567);
    assert!(r.added > 0, "seed 1567 grows the cluster");
}

/// `seed`'s sweep run with one link served per deliver step, as the sweep scheduled it when
/// it failed, then as it schedules it today (`tests::sim::cluster` INV-C4).
fn replay_as_it_failed_and_today(seed: u64) {
    let (mut as_it_failed, steps) = SimOptions::for_seed(seed);
    as_it_failed.membership_changes = true;
    as_it_failed.links_per_deliver = None;
    run_with(as_it_failed, steps);
    run_with_changes(seed);
}

/// A random run with membership changes replays exactly (added servers and their sids,
/// answers, removals and all).
#[test]
fn a_run_with_membership_changes_replays_exactly() {
    for seed in [5, 29] {
        let (a, b) = (run_with_changes(seed), run_with_changes(seed));
        assert_eq!(a.hash, b.hash, "seed {seed} is not deterministic");
        assert_eq!((a.steps, a.added, a.removed), (b.steps, b.added, b.removed));
        assert!(a.membership_requests > 0, "seed {seed} asks for changes");
    }
}

/// Random runs with membership changes mixed into the faults (`tests::sim::members`), on the
/// odd seeds below 100 without wipes (as the random sweep runs them): changes are asked,
/// committed, servers added and removed, and every run passes every checker and the liveness
/// phase.
#[test]
fn random_runs_with_membership_changes() {
    let (mut requests, mut commits, mut added, mut removed) = (0, 0, 0, 0);
    for seed in (1..100).step_by(2) {
        let (opts, _) = SimOptions::for_seed(seed);
        if opts.wipes {
            continue;
        }
        let r = run_with_changes(seed);
        requests += r.membership_requests;
        commits += r.membership_commits;
        added += r.added;
        removed += r.removed;
    }
    eprintln!(
        "odd seeds 1..100 without wipes: {requests} changes asked, {commits} committed, \
         {added} servers added, {removed} removed"
    );
    assert!(
        commits >= 10 && added >= 5 && removed >= 5,
        "{requests} changes asked, {commits} committed, {added} added, {removed} removed"
    );
}
