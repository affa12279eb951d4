//! Leader transfer (zab-core `transfer`): a handover under load, and a handover racing the
//! crash of its target at several moments (0–300 ms) (before the target caught up, during the election,
//! after it leads). The checkers run throughout: no acknowledged write is lost, at most one
//! leader per epoch, and every request gets one answer.

use zab_core::{Role, TransferError};

use super::*;

/// Three writes in flight, then a transfer to the first follower: the target leads, the old
/// leader follows it and reports the move, and every write answered `Ok` stays applied.
#[test]
fn transfer_under_load_moves_the_leader_to_the_target() {
    let (mut c, l) = started(options(3, 0));
    let target = others(&c, l)[0];
    let writes: Vec<_> = (0..3).map(|_| c.write(l)).collect();
    c.transfer_leadership(l, Some(target));
    c.expect_within(10_000, "the transfer answered", |c| {
        !c.transfer_log().answers.is_empty()
    });
    let (who, outcome) = c.transfer_log().answers[0].clone();
    assert_eq!(who, l);
    let report = outcome.unwrap();
    assert_eq!((report.from, report.to), (l, target));
    assert_eq!(c.leader(), Some(target));
    assert_eq!(c.peer(l).map(|p| p.role()), Some(Role::Following));
    for w in writes {
        if let Some(Ok(z)) = c.write_outcome(w) {
            assert!(c.applied_zxids(target).contains(&z), "{z} lost by the move");
        }
    }
    c.check_liveness();
}

/// Transfer racing target crash: the target is killed 0–300 ms after the request, so the crash
/// lands while the leader waits for it, after the handover notice, during the election or
/// after it leads. Someone leads again, the old leader answers once, and nothing committed is
/// lost (the checkers), before and after the target comes back.
#[test]
fn transfer_racing_target_crash() {
    for delay in [0, 5, 20, 40, 50, 55, 60, 65, 70, 80, 100, 150, 300] {
        let (mut c, l) = started(options(3, 0));
        let target = others(&c, l)[0];
        let writes: Vec<_> = (0..3).map(|_| c.write(l)).collect();
        c.transfer_leadership(l, Some(target));
        c.run_for(delay);
        c.crash(target);
        let survivors: Vec<ServerId> = others(&c, target);
        elect_among(&mut c, &survivors);
        c.expect_within(10_000, "the transfer answered", |c| {
            !c.transfer_log().answers.is_empty()
        });
        let answers = c.transfer_log().answers.clone();
        assert_eq!(answers.len(), 1, "delay {delay}: {answers:?}");
        match &answers[0].1 {
            Ok(r) => assert_eq!(r.to, target),
            Err(
                TransferError::NotElected { .. }
                | TransferError::TargetNotConnected(_)
                | TransferError::LeadershipLost { .. },
            ) => {}
            Err(e) => panic!("delay {delay}: unexpected refusal {e:?}"),
        }
        let leader = elect_among(&mut c, &survivors);
        for w in &writes {
            if let Some(Ok(z)) = c.write_outcome(*w) {
                assert!(
                    c.applied_zxids(leader).contains(&z),
                    "delay {delay}: {z} lost"
                );
            }
        }
        eprintln!("transfer racing crash after {delay} ms: {:?}", answers[0].1);
        c.restart(target);
        c.check_liveness();
    }
}
