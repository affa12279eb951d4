//! Unit and property tests of the checker: generated linearizable histories are accepted, known
//! violations are rejected and explained, and a few thousand ops per key check quickly.

use super::wgl::RegOp;
use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BUDGET: Duration = Duration::from_secs(10);

fn write(client: u32, key: &str, value: &str, invoke: u64, ret: Option<u64>) -> Operation {
    Operation {
        client,
        key: key.to_string(),
        kind: Kind::Write {
            value: value.to_string(),
        },
        invoke_ns: invoke,
        outcome: ret.map_or(Outcome::Unknown, |return_ns| Outcome::Ok { return_ns }),
    }
}

fn read(client: u32, key: &str, seen: Option<&str>, invoke: u64, ret: u64) -> Operation {
    Operation {
        client,
        key: key.to_string(),
        kind: Kind::Read {
            observed: seen.map(str::to_string),
        },
        invoke_ns: invoke,
        outcome: Outcome::Ok { return_ns: ret },
    }
}

fn violation_of(history: &[Operation]) -> Violation {
    match check(history, BUDGET).verdict {
        Verdict::NotLinearizable(v) => v,
        other => panic!("expected a violation, got {other:?}"),
    }
}

fn accepted(history: &[Operation]) -> bool {
    check(history, BUDGET).verdict == Verdict::Linearizable
}

#[test]
fn empty_and_simple_histories_are_linearizable() {
    assert!(accepted(&[]));
    assert!(accepted(&[
        read(0, "x", None, 0, 5),
        write(0, "x", "1", 10, Some(20)),
        read(1, "x", Some("1"), 15, 30),
        write(1, "y", "a", 0, Some(100)),
        read(0, "y", None, 10, 20),
        read(2, "y", Some("a"), 30, 40),
    ]));
}

#[test]
fn stale_read_after_a_completed_write_is_rejected() {
    let h = [
        write(0, "x", "1", 0, Some(10)),
        write(0, "x", "2", 20, Some(30)),
        read(1, "x", Some("1"), 40, 50),
        write(2, "other", "z", 0, Some(5)),
    ];
    let v = violation_of(&h);
    assert_eq!(v.key, "x");
    assert_eq!(v.ops, h[..3].to_vec(), "{v}");
}

#[test]
fn read_of_none_after_a_completed_write_is_rejected() {
    let v = violation_of(&[write(0, "x", "1", 0, Some(10)), read(1, "x", None, 20, 30)]);
    assert_eq!(v.ops.len(), 2, "{v}");
}

#[test]
fn read_of_a_never_written_value_is_rejected() {
    let v = violation_of(&[
        write(0, "x", "1", 0, Some(10)),
        read(1, "x", Some("7"), 20, 30),
    ]);
    assert_eq!(v.ops, vec![read(1, "x", Some("7"), 20, 30)]);
    assert!(v.reason.contains("never written"), "{v}");
}

#[test]
fn a_failed_write_seen_by_a_read_is_rejected() {
    let mut failed = write(0, "x", "1", 0, Some(10));
    failed.outcome = Outcome::Failed;
    violation_of(&[failed, read(1, "x", Some("1"), 20, 30)]);
}

#[test]
fn reads_seeing_concurrent_writes_in_opposite_orders_are_rejected() {
    let h = [
        write(0, "x", "a", 0, Some(100)),
        write(1, "x", "b", 0, Some(100)),
        read(2, "x", Some("a"), 10, 20),
        read(2, "x", Some("b"), 30, 40),
        read(3, "x", Some("b"), 10, 20),
        read(3, "x", Some("a"), 30, 40),
    ];
    let v = violation_of(&h);
    assert!(v.ops.len() <= h.len(), "{v}");
    // Each order alone is fine.
    assert!(accepted(&h[..4]));
    assert!(accepted(&[
        h[0].clone(),
        h[1].clone(),
        h[4].clone(),
        h[5].clone()
    ]));
}

#[test]
fn an_unknown_write_may_take_effect_late_or_never() {
    // Seen long after its invocation: it took effect.
    assert!(accepted(&[
        write(0, "x", "1", 0, Some(10)),
        write(1, "x", "2", 20, None),
        read(2, "x", Some("1"), 30, 40),
        read(2, "x", Some("2"), 1_000, 1_010),
        read(3, "x", Some("2"), 2_000, 2_010),
    ]));
    // Never seen: it did not take effect.
    assert!(accepted(&[
        write(0, "x", "1", 0, Some(10)),
        write(1, "x", "2", 20, None),
        read(2, "x", Some("1"), 30, 40),
        read(2, "x", Some("1"), 1_000, 1_010),
    ]));
    // Seen, then the older value again: no single point works.
    violation_of(&[
        write(0, "x", "1", 0, Some(10)),
        write(1, "x", "2", 20, None),
        read(2, "x", Some("2"), 30, 40),
        read(3, "x", Some("1"), 50, 60),
    ]);
    // An unknown write cannot take effect before it was invoked.
    violation_of(&[
        write(0, "x", "1", 0, Some(10)),
        read(2, "x", Some("2"), 20, 30),
        write(1, "x", "2", 40, None),
    ]);
}

#[test]
fn incomplete_reads_and_failed_ops_are_ignored() {
    let mut lost_read = read(1, "x", Some("junk"), 20, 30);
    lost_read.outcome = Outcome::Unknown;
    let mut failed_read = read(1, "x", Some("junk"), 20, 30);
    failed_read.outcome = Outcome::Failed;
    let report = check(
        &[write(0, "x", "1", 0, Some(10)), lost_read, failed_read],
        BUDGET,
    );
    assert_eq!(report.verdict, Verdict::Linearizable);
    assert_eq!(report.ops, 1);
}

#[test]
fn the_recorder_builds_a_checkable_history() {
    let rec = Recorder::new();
    let w = rec.invoke(0, "k", Kind::Write { value: "v1".into() });
    rec.ok(w, None);
    let lost = rec.invoke(1, "k", Kind::Write { value: "v2".into() });
    let r = rec.invoke(2, "k", Kind::Read { observed: None });
    rec.ok(r, Some("v1".into()));
    let f = rec.invoke(0, "k", Kind::Write { value: "v3".into() });
    rec.failed(f);
    rec.unknown(lost);
    let h = rec.history();
    assert_eq!(h.len(), 4);
    assert_eq!(h[1].outcome, Outcome::Unknown);
    assert_eq!(
        h[2].kind,
        Kind::Read {
            observed: Some("v1".into())
        }
    );
    assert_eq!(h[3].outcome, Outcome::Failed);
    assert!(accepted(&h));
}

/// A history from a sequential execution on `keys` registers: operation i takes effect at
/// time 10·i and its window is stretched by up to `spread` on each side, so windows overlap
/// heavily. Some writes fail (no effect) and some have unknown outcomes (with or without effect).
fn generated(rng: &mut ChaCha8Rng, ops: usize, keys: usize, spread: u64) -> Vec<Operation> {
    let mut state: Vec<Option<String>> = vec![None; keys];
    let mut history = Vec::with_capacity(ops);
    for i in 0..ops {
        let at = 10 * i as u64 + spread;
        let k = rng.gen_range(0..keys);
        let key = format!("k{k}");
        let invoke = at - rng.gen_range(0..=spread);
        let ret = at + rng.gen_range(0..=spread);
        let client = rng.gen_range(0..8);
        if rng.gen_bool(0.4) {
            let value = format!("v{i}");
            let roll = rng.gen_range(0..100);
            let op = if roll < 5 {
                let mut op = write(client, &key, &value, invoke, Some(ret));
                op.outcome = Outcome::Failed;
                op
            } else if roll < 10 {
                // Unknown outcome: takes effect only on an even roll.
                if roll % 2 == 0 {
                    state[k] = Some(value.clone());
                }
                write(client, &key, &value, invoke, None)
            } else {
                state[k] = Some(value.clone());
                write(client, &key, &value, invoke, Some(ret))
            };
            history.push(op);
        } else {
            history.push(read(client, &key, state[k].as_deref(), invoke, ret));
        }
    }
    history
}

#[test]
fn property_generated_sequential_histories_are_accepted() {
    for seed in 0..300 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ops = rng.gen_range(1..200);
        let keys = rng.gen_range(1..4);
        let spread = rng.gen_range(0..60);
        let h = generated(&mut rng, ops, keys, spread);
        let report = check(&h, BUDGET);
        assert_eq!(report.verdict, Verdict::Linearizable, "seed {seed}");
    }
}

#[test]
fn property_an_injected_stale_read_is_rejected_and_shrunk() {
    let mut rejected = 0;
    for seed in 0..300 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut h = generated(&mut rng, 150, 2, 40);
        // Two completed writes of one key, strictly ordered in real time.
        let writes: Vec<&Operation> = h
            .iter()
            .filter(|op| op.key == "k0" && matches!(op.kind, Kind::Write { .. }))
            .filter(|op| matches!(op.outcome, Outcome::Ok { .. }))
            .collect();
        let pair = writes.iter().enumerate().find_map(|(i, a)| {
            let Outcome::Ok { return_ns } = a.outcome else {
                return None;
            };
            writes[i + 1..]
                .iter()
                .find(|b| b.invoke_ns > return_ns)
                .map(|b| (*a, *b))
        });
        let Some((older, newer)) = pair else { continue };
        let (Kind::Write { value }, Outcome::Ok { return_ns }) = (&older.kind, newer.outcome)
        else {
            continue;
        };
        let stale = read(
            9,
            "k0",
            Some(value),
            return_ns + 1 + rng.gen_range(0..50),
            u64::MAX / 2,
        );
        h.push(stale.clone());
        let v = violation_of(&h);
        assert_eq!(v.key, "k0", "seed {seed}");
        assert!(v.ops.contains(&stale), "seed {seed}: {v}");
        assert!(v.ops.len() <= 6, "seed {seed}: not shrunk: {v}");
        rejected += 1;
    }
    assert!(
        rejected > 200,
        "only {rejected} seeds had two ordered writes"
    );
}

#[test]
fn thousands_of_overlapping_ops_per_key_check_quickly() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let h = generated(&mut rng, 12_000, 3, 80);
    let report = check(&h, BUDGET);
    assert_eq!(report.verdict, Verdict::Linearizable);
    println!(
        "{} ops on {} keys checked in {:?}",
        report.ops, report.keys, report.elapsed
    );
    assert!(
        report.elapsed < Duration::from_secs(3),
        "slow check: {:?}",
        report.elapsed
    );
}

/// Small random histories with distinct times, mostly not linearizable: the zone test finds a
/// conflict exactly when the exact search finds no linearization, and `check` agrees.
#[test]
fn property_zone_test_agrees_with_the_exact_search() {
    let (mut violations, mut fine) = (0, 0);
    for seed in 0..3000 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(1..9);
        let mut times: Vec<u64> = (0..2 * n as u64).collect();
        for i in (1..times.len()).rev() {
            times.swap(i, rng.gen_range(0..=i));
        }
        let mut writes = 0u32;
        let ops: Vec<RegOp> = (0..n)
            .map(|i| {
                let (a, b) = (times[2 * i], times[2 * i + 1]);
                let write = rng.gen_bool(0.5);
                let value = if write {
                    writes += 1;
                    writes
                } else {
                    0
                };
                let ret = if write && rng.gen_bool(0.15) {
                    u64::MAX
                } else {
                    a.max(b)
                };
                RegOp {
                    origin: i,
                    write,
                    value,
                    invoke: a.min(b),
                    ret,
                }
            })
            .collect();
        let ops: Vec<RegOp> = ops
            .into_iter()
            .map(|mut op| {
                if !op.write && writes > 0 {
                    op.value = rng.gen_range(0..=writes);
                }
                op
            })
            .collect();
        let far = Instant::now() + BUDGET;
        let exact = matches!(wgl::search(&ops, far), wgl::Search::Violation { .. });
        let conflict = zones::find_conflict(&ops);
        assert_eq!(
            exact,
            conflict.is_some(),
            "seed {seed}: {ops:?} conflict {conflict:?}"
        );
        if exact {
            violations += 1;
        } else {
            fine += 1;
        }
    }
    assert!(
        violations > 300 && fine > 300,
        "{violations} violations, {fine} linearizable"
    );
}

#[test]
fn a_stale_read_deep_in_a_long_history_is_found_fast() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut h = generated(&mut rng, 3000, 1, 40);
    let first = h.iter().find(|op| {
        matches!(op.kind, Kind::Write { .. }) && matches!(op.outcome, Outcome::Ok { .. })
    });
    let Some(Operation {
        kind: Kind::Write { value },
        ..
    }) = first.cloned()
    else {
        panic!("no completed write")
    };
    h.push(read(9, "k0", Some(&value), 20_000, 20_100));
    let report = check(&h, BUDGET);
    let Verdict::NotLinearizable(v) = report.verdict else {
        panic!("{:?}", report.verdict)
    };
    println!("{} ops checked in {:?}:\n{v}", report.ops, report.elapsed);
    assert!(v.ops.len() <= 4, "{v}");
    assert!(
        report.elapsed < Duration::from_secs(2),
        "slow: {:?}",
        report.elapsed
    );
}
