//! Two durability bugs of a log sync slower than an election, one scenario each, named after
//! the bug. Both need a node whose appends stay unsynced (and unreported) while an election
//! runs; the script holds them back in two ways: a paused node is never fsynced while the
//! others step normally, and [`NO_FSYNC`] steps fsync no disk at all.
//!
//! - A new leader must persist currentEpoch only once the log tail it was elected with is
//!   durable (PITFALLS B3 on the leader's side, ZOOKEEPER-4643): otherwise a power loss keeps
//!   the new epoch but loses the tail, and the restarted node's vote (new epoch, shorter log)
//!   beats the holders of that tail, which it then truncates.
//! - A learner whose TRUNC cuts into appends not yet reported durable must still ack NEWLEADER:
//!   the completed truncation leaves its kept log durable (io contract L2), and no later report
//!   names the kept records (the real writer reports the last synced append, which the
//!   truncation removed).

use tests::sim::net::Channel;
use tests::sim::{Cluster, Weights};
use zab_core::{Epoch, Message, Role};

use super::*;

/// Steps with `w` until `pred` holds; fails when `within_ms` of virtual time pass first.
fn step_until(
    c: &mut Cluster,
    w: Weights,
    within_ms: u64,
    what: &str,
    pred: impl Fn(&Cluster) -> bool,
) {
    let deadline = c.now_ms() + within_ms;
    while !pred(c) {
        assert!(
            c.now_ms() <= deadline,
            "{what}: not reached within {within_ms} ms; {}",
            c.describe()
        );
        c.step_with(w);
    }
}

/// True when `id` leads (whether or not it serves yet).
fn leading(c: &Cluster, id: ServerId) -> bool {
    c.peer(id).is_some_and(|p| p.role() == Role::Leading)
}

/// The currentEpoch files `id` wrote since epoch write `mark`.
fn current_epochs_written(c: &Cluster, mark: usize, id: ServerId) -> Vec<Epoch> {
    c.epoch_writes()[mark..]
        .iter()
        .filter(|w| w.node == id && !w.accepted)
        .map(|w| w.epoch)
        .collect()
}

/// The TRUNC zxids sent to `to` since event `mark`.
fn truncs_sent(c: &Cluster, mark: usize, to: ServerId) -> Vec<Zxid> {
    c.events()[mark..]
        .iter()
        .filter(|e| e.to == to)
        .filter_map(|e| match e.msg {
            Message::Trunc { zxid } => Some(zxid),
            _ => None,
        })
        .collect()
}

/// Bug 1: 3 voters l, f, g (g the highest sid). l leads and commits t with acks from l and f;
/// g has t appended but its sync is held back. l dies; f and g elect g (equal votes, g wins on
/// sid) and f acks g's new epoch. g must not write currentEpoch = new epoch while t is not
/// durable on g. g then loses power (t is gone from its disk), f stays down, l restarts: g and
/// l elect, and the committed t survives: l, its only holder, leads (g's vote still carries the
/// old epoch), nobody is TRUNCated below t, and every acknowledged write is in the final
/// history. Before the fix g wrote the new currentEpoch on the ACKEPOCH quorum; after the power
/// loss its vote (new epoch, log without t) beat l's and l was TRUNCated below the committed t.
#[test]
fn a_new_leader_persists_current_epoch_only_after_its_log_tail_is_durable() {
    let mut c = Cluster::new(options(3, 0));
    let (f, l, g) = (sid(1), sid(2), sid(3));
    // g would win any election it takes part in; l leads only if g is away at first
    c.crash(g);
    assert_eq!(elect_among(&mut c, &[f, l]), l);
    c.restart(g);
    assert_eq!(c.stabilize(), l);
    commit_n(&mut c, l, 2);
    c.settle();
    let t = commit_t_while_g_stays_unsynced(&mut c, l, f, g);

    g_leads_without_writing_current_epoch(&mut c, l, f, g, t);

    // g loses power: t is gone from its disk; f stays down; l comes back
    c.crash(g);
    assert!(c.node(g).disk.durable_upto() < t);
    c.crash(f);
    c.restart(g);
    c.restart(l);
    let mark = c.events().len();
    let leader = elect_among(&mut c, &[g, l]);
    let truncs = truncs_sent(&c, mark, l);
    assert!(
        truncs.iter().all(|z| *z >= t),
        "{l} was TRUNCated to {truncs:?}, below the committed {t}"
    );
    assert_eq!(leader, l, "l, the only holder of the committed {t}, leads");
    assert_eq!(last_logged(&c, g), last_logged(&c, l));
    c.restart(f);
    c.check_liveness();
    for id in [f, l, g] {
        assert!(c.applied_zxids(id).contains(&t), "{id} lost {t}");
    }
}

/// Bug 2: a learner ("slow") has three appends p1..p3 pending on its disk, none reported
/// durable; the old leader and the third voter hold p1 durably, the old leader's p2 and p3 die
/// with it. The old leader and the third voter establish a new epoch without slow, whose
/// sync stays held back. Then the third voter goes down and slow comes back: the epoch
/// leader's vote wins on epoch, and it sends slow TRUNC p1, cutting into the unreported
/// appends. No `LogPersisted` reaches slow through all of it (as with the real writer, which
/// syncs p1..p3 before the truncation and reports p3, a zxid the truncation removed), yet slow
/// must ack NEWLEADER and a leader be established within bounded time. Before the fix slow's
/// truncation left its durable point below p1, it never acked NEWLEADER, and elections
/// repeated with the epoch climbing.
#[test]
fn a_learner_whose_trunc_cuts_into_unreported_appends_acks_newleader() {
    let (mut c, old) = started(options(3, 0));
    let [slow, third] = others(&c, old)[..] else {
        unreachable!()
    };
    commit_n(&mut c, old, 2);
    c.settle();
    let p1 = commit_p1_while_slow_stays_unsynced(&mut c, old, slow, third);
    let p3 = p2_p3_pending_on_slow_only(&mut c, old, slow, third, p1);
    let (x, y) = old_and_third_elect_without_slow(&mut c, old, slow, third, p1);
    slow_truncated_into_pending_appends_acks_newleader(&mut c, x, y, slow, p1, p3);

    c.restart(y);
    c.check_liveness();
    assert!(c.applied_zxids(slow).contains(&p1));
    assert!(
        !applied_anywhere(&c, p3),
        "the unacknowledged {p3} survived"
    );
}

/// Bug 1, step 1: a write t reaches the logs of l, f and g with no disk synced, then l and f
/// sync and commit it while g is paused (its sync held back); returns t.
fn commit_t_while_g_stays_unsynced(c: &mut Cluster, l: ServerId, f: ServerId, g: ServerId) -> Zxid {
    let before = last_logged(c, g);
    // t reaches every log, no disk
    let req = c.write(l);
    step_until(c, NO_FSYNC, 5_000, "t appended on l, f and g", |c| {
        [l, f, g].iter().all(|id| last_logged(c, *id) > before)
    });
    let t = last_logged(c, l);
    assert!([f, g].iter().all(|id| last_logged(c, *id) == t));
    // g's sync is held back (a paused node is never fsynced); l and f sync t and commit it
    c.pause(g);
    c.expect_within(10_000, "t committed and acknowledged", |c| {
        c.write_outcome(req).is_some()
    });
    assert_eq!(c.write_outcome(req), Some(Ok(t)));
    for id in [l, f] {
        assert!(c.node(id).disk.durable_upto() >= t, "t not durable on {id}");
    }
    assert!(c.node(g).disk.durable_upto() < t);
    t
}

/// Bug 1, step 2: l dies; f and g elect g (f acks its new epoch) while g's log sync stays held
/// back, and g writes no currentEpoch while t is not durable on it.
fn g_leads_without_writing_current_epoch(
    c: &mut Cluster,
    l: ServerId,
    f: ServerId,
    g: ServerId,
    t: Zxid,
) {
    let old_epoch = c.peer(g).unwrap().current_epoch();
    c.crash(l);
    c.resume(g);
    let (events, epochs) = (c.events().len(), c.epoch_writes().len());
    step_until(c, NO_FSYNC, 20_000, "g leads and has f's ACKEPOCH", |c| {
        leading(c, g)
            && c.events()[events..]
                .iter()
                .any(|e| e.from == f && e.to == g && matches!(e.msg, Message::AckEpoch { .. }))
            && c.net().queue_len((f, g, Channel::Quorum)) == 0
    });
    let new_epoch = c.peer(g).unwrap().accepted_epoch();
    assert!(new_epoch > old_epoch);
    // a while longer (within initLimit), so a currentEpoch write has every chance to happen
    let until = c.now_ms() + 300;
    while c.now_ms() < until && leading(c, g) {
        c.step_with(NO_FSYNC);
    }
    assert!(
        c.node(g).disk.durable_upto() < t,
        "precondition: t still not durable on g"
    );
    let written = current_epochs_written(c, epochs, g);
    assert!(
        written.is_empty(),
        "leader {g} wrote currentEpoch {written:?} (elected with last zxid {t}) while its disk \
         was durable only up to {}",
        c.node(g).disk.durable_upto()
    );
}

/// Bug 2, step 1: a write p1 reaches every log with no disk synced, then old and third sync
/// and commit it while slow is paused (its sync held back); returns p1.
fn commit_p1_while_slow_stays_unsynced(
    c: &mut Cluster,
    old: ServerId,
    slow: ServerId,
    third: ServerId,
) -> Zxid {
    let before = last_logged(c, slow);
    // p1 reaches every log; slow's sync is held back while the others sync and commit it
    let req = c.write(old);
    step_until(c, NO_FSYNC, 5_000, "p1 appended everywhere", |c| {
        [old, slow, third]
            .iter()
            .all(|id| last_logged(c, *id) > before)
    });
    let p1 = last_logged(c, old);
    c.pause(slow);
    c.expect_within(10_000, "p1 committed and acknowledged", |c| {
        c.write_outcome(req).is_some()
    });
    assert_eq!(c.write_outcome(req), Some(Ok(p1)));
    for id in [old, third] {
        assert!(
            c.node(id).disk.durable_upto() >= p1,
            "p1 not durable on {id}"
        );
    }
    p1
}

/// Bug 2, step 2: two more writes p2 and p3 reach only old's and slow's logs, no disk; p1..p3
/// are all pending on slow. Returns p3.
fn p2_p3_pending_on_slow_only(
    c: &mut Cluster,
    old: ServerId,
    slow: ServerId,
    third: ServerId,
    p1: Zxid,
) -> Zxid {
    c.cut(old, third);
    c.write(old);
    c.write(old);
    let p3 = last_logged(c, old);
    assert!(p3 > p1);
    c.resume(slow);
    step_until(c, NO_FSYNC, 5_000, "p3 appended on slow", |c| {
        last_logged(c, slow) == p3
    });
    let pending: Vec<Zxid> = c.node(slow).disk.pending.iter().map(|t| t.zxid).collect();
    assert!(
        pending.first() == Some(&p1) && pending.last() == Some(&p3) && pending.len() >= 3,
        "precondition: p1..p3 all pending on {slow}: {pending:?}"
    );
    p3
}

/// Bug 2, step 3: old loses power (p2, p3 gone), slow stalls with p1..p3 pending, and old and
/// third elect a leader x with log p1; returns x and the other one, y.
fn old_and_third_elect_without_slow(
    c: &mut Cluster,
    old: ServerId,
    slow: ServerId,
    third: ServerId,
    p1: Zxid,
) -> (ServerId, ServerId) {
    c.crash(old);
    assert_eq!(c.node(old).disk.durable_upto(), p1);
    c.pause(slow);
    c.heal(old, third);
    c.restart(old);
    let x = elect_among(c, &[old, third]);
    let y = if x == old { third } else { old };
    assert_eq!(last_logged(c, x), p1);
    (x, y)
}

/// Bug 2, step 4: y goes down and slow comes back, its sync still held back; x's vote wins on
/// epoch and x sends slow TRUNC p1, into its unreported appends up to p3. Slow must ack
/// NEWLEADER and follow x within bounded time.
fn slow_truncated_into_pending_appends_acks_newleader(
    c: &mut Cluster,
    x: ServerId,
    y: ServerId,
    slow: ServerId,
    p1: Zxid,
    p3: Zxid,
) {
    let epoch_x = c.peer(x).unwrap().current_epoch();
    // one voter down; slow comes back, its sync still held back; x's vote wins on epoch
    c.crash(y);
    c.resume(slow);
    assert!(c.node(slow).disk.durable_upto() < p1);
    let mark = c.events().len();
    // slow still believes it follows the old leader of the old epoch until it notices
    let established = |c: &Cluster| {
        leader_among(c, &[x, slow]) == Some(x)
            && c.peer(slow).is_some_and(|p| {
                p.role() == Role::Following
                    && p.is_serving()
                    && p.current_epoch() == c.peer(x).unwrap().current_epoch()
            })
    };
    let deadline_ms = 30_000;
    let deadline = c.now_ms() + deadline_ms;
    while !established(c) && c.now_ms() <= deadline {
        c.step_with(NO_FSYNC);
    }
    let truncs = truncs_sent(c, mark, slow);
    assert!(
        truncs.contains(&p1),
        "precondition: {x} sends {slow} TRUNC {p1} (into its unreported appends up to {p3}); \
         TRUNCs sent: {truncs:?}"
    );
    assert!(
        established(c),
        "no leader established among {x} and {slow} within {deadline_ms} ms after TRUNC {p1} \
         (elections repeat: {x} now at acceptedEpoch {}, was at {epoch_x}); {}",
        c.peer(x).unwrap().accepted_epoch(),
        c.describe()
    );
    let newleader_acked = c.events()[mark..].iter().any(|e| {
        e.from == slow && e.to == x && matches!(e.msg, Message::Ack { zxid } if zxid.counter() == 0)
    });
    assert!(newleader_acked, "{slow} serves without acking NEWLEADER");
}
