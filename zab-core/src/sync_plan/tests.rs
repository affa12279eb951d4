//! Property tests of `plan_sync`: structural rules over arbitrary inputs (every ordering of the
//! learner's zxid against base, index, memory window), and a model check that executing the plan
//! on a ZAB-shaped learner log yields exactly the leader's log.

use proptest::prelude::*;

use super::*;
use crate::types::Epoch;

fn z(e: u32, c: u32) -> Zxid {
    Zxid::new(Epoch(e), c)
}

/// Varied record sizes (10–70 bytes) so the snapshot-size rule cuts at different points.
fn sizes_for(index: &[Zxid]) -> Vec<u32> {
    index.iter().map(|z| 10 * (z.counter() % 7 + 1)).collect()
}

fn arb_zxid() -> impl Strategy<Value = Zxid> {
    (0u32..4, 0u32..6).prop_map(|(e, c)| z(e, c))
}

prop_compose! {
    fn arb_log()(set in proptest::collection::btree_set((0u32..4, 1u32..6), 0..12),
                 base in arb_zxid(), mem in 0usize..14, limit in 0u64..8)
                 -> (Vec<Zxid>, Zxid, usize, u64) {
        let index: Vec<Zxid> = set.into_iter().map(|(e, c)| z(e, c)).collect();
        (index, base, mem, limit)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn structural_rules_hold_for_every_ordering(
        (index, base, mem, limit) in arb_log(),
        peer_last in arb_zxid(),
        snapshot_bytes in proptest::option::of(1u64..400),
        factor in prop_oneof![Just(-1.0), Just(0.33), Just(1.0)],
    ) {
        let memory_first = index.get(mem).copied();
        let sizes = sizes_for(&index);
        let log = LeaderLog {
            index: &index,
            base,
            memory_first,
            sizes: &sizes,
            diff_from_log_limit: limit,
            snapshot_bytes,
            snapshot_size_factor: factor,
        };
        let plan = plan_sync(&log, peer_last);
        let check_source = |after: Zxid, source: DiffSource| {
            if let DiffSource::Log { upto, count } = source {
                prop_assert!(count <= limit);
                prop_assert!(upto > after && index.binary_search(&upto).is_ok());
                let n = index.iter().filter(|x| **x > after && **x <= upto).count() as u64;
                prop_assert_eq!(n, count);
                // The snapshot-size rule (INV-3).
                if let (Some(snap), true) = (snapshot_bytes, factor >= 0.0) {
                    let bytes: u64 = index
                        .iter()
                        .zip(&sizes)
                        .filter(|(x, _)| **x > after && **x <= upto)
                        .map(|(_, b)| u64::from(*b))
                        .sum();
                    prop_assert!(bytes as f64 <= factor * snap as f64, "{} bytes over {}", bytes, snap);
                }
                // Everything after the range is in memory (INV-3).
                if let Some(next) = index.iter().find(|x| **x > upto) {
                    prop_assert_eq!(Some(*next), memory_first);
                }
            } else if let Some(first) = index.iter().find(|x| **x > after) {
                prop_assert!(memory_first.is_some_and(|m| m <= *first));
            }
            Ok(())
        };
        match plan {
            SyncPlan::Diff { after, source } => {
                prop_assert_eq!(after, peer_last);
                prop_assert!(log.is_member(after));
                check_source(after, source)?;
            }
            SyncPlan::TruncDiff { to, source } => {
                prop_assert!(!log.is_member(peer_last));
                prop_assert!(to < peer_last);
                prop_assert!(log.is_member(to));
                prop_assert_eq!(Some(to), log.last_member_at_or_below(peer_last));
                prop_assert!(to == Zxid::ZERO || to.epoch() == peer_last.epoch());
                check_source(to, source)?;
            }
            SyncPlan::Snap => {
                if log.is_member(peer_last) {
                    prop_assert!(log.diff_source(peer_last).is_none());
                }
            }
        }
    }

    #[test]
    fn executing_the_plan_reproduces_the_leaders_log(
        prefix_len in 0usize..6,
        lead_epochs in proptest::collection::btree_set(1u32..8, 0..3),
        lead_lens in proptest::collection::vec(1u32..4, 3),
        foll_epochs in proptest::collection::btree_set(1u32..8, 0..3),
        foll_lens in proptest::collection::vec(1u32..4, 3),
        continue_prefix in any::<bool>(),
        base_pos in 0usize..20,
        purge in 0usize..20,
        mem in 0usize..20,
        limit in 0u64..10,
    ) {
        // Common prefix: epoch 1, counters 1..=prefix_len.
        let prefix: Vec<Zxid> = (1..=prefix_len as u32).map(|c| z(1, c)).collect();
        let last_prefix_epoch = if prefix.is_empty() { 0 } else { 1 };
        // Disjoint epoch sets above the prefix; at most one side continues the prefix's epoch.
        let mut leader = prefix.clone();
        let mut learner = prefix.clone();
        let lead: Vec<u32> = lead_epochs.iter().map(|e| e + 1).collect();
        let foll: Vec<u32> =
            foll_epochs.iter().map(|e| e + 1).filter(|e| !lead.contains(e)).collect();
        if continue_prefix && last_prefix_epoch == 1 {
            learner.push(z(1, prefix_len as u32 + 1));
        }
        for (e, n) in lead.iter().zip(&lead_lens) {
            leader.extend((1..=*n).map(|c| z(*e, c)));
        }
        for (e, n) in foll.iter().zip(&foll_lens) {
            learner.extend((1..=*n).map(|c| z(*e, c)));
        }
        leader.sort();
        learner.sort();
        // Leader's snapshot at some point of its log; older segments partly purged.
        let base = if leader.is_empty() { Zxid::ZERO } else {
            let i = base_pos % (leader.len() + 1);
            if i == 0 { Zxid::ZERO } else { leader[i - 1] }
        };
        let keep_from = purge.min(leader.iter().filter(|x| **x <= base).count());
        let index: Vec<Zxid> = leader[keep_from..].to_vec();
        let memory_first = index.get(mem).copied();
        let sizes = sizes_for(&index);
        let log = LeaderLog {
            index: &index,
            base,
            memory_first,
            sizes: &sizes,
            diff_from_log_limit: limit,
            snapshot_bytes: Some(60),
            snapshot_size_factor: if limit % 2 == 0 { 0.33 } else { -1.0 },
        };
        let peer_last = learner.last().copied().unwrap_or(Zxid::ZERO);
        let result: Vec<Zxid> = match plan_sync(&log, peer_last) {
            SyncPlan::Diff { after, .. } => {
                let mut r = learner.clone();
                r.extend(leader.iter().filter(|x| **x > after));
                r
            }
            SyncPlan::TruncDiff { to, .. } => {
                prop_assert!(to == Zxid::ZERO || learner.contains(&to), "TRUNC to a zxid the learner lacks");
                let mut r: Vec<Zxid> = learner.iter().copied().filter(|x| *x <= to).collect();
                r.extend(leader.iter().filter(|x| **x > to));
                r
            }
            SyncPlan::Snap => leader.clone(),
        };
        prop_assert_eq!(result, leader);
    }
}

#[test]
fn table_of_seed_004() {
    let index = [z(1, 1), z(1, 2), z(1, 3), z(2, 1), z(2, 2)];
    let sizes = [100; 5];
    let log = LeaderLog {
        index: &index,
        base: Zxid::ZERO,
        memory_first: Some(z(1, 3)),
        sizes: &sizes,
        diff_from_log_limit: 100,
        snapshot_bytes: None,
        snapshot_size_factor: 0.33,
    };
    let mem = DiffSource::Memory;
    assert_eq!(
        plan_sync(&log, z(2, 2)),
        SyncPlan::Diff {
            after: z(2, 2),
            source: mem
        }
    );
    assert_eq!(
        plan_sync(&log, z(1, 3)),
        SyncPlan::Diff {
            after: z(1, 3),
            source: mem
        }
    );
    let from_log = DiffSource::Log {
        upto: z(1, 2),
        count: 1,
    };
    assert_eq!(
        plan_sync(&log, z(1, 1)),
        SyncPlan::Diff {
            after: z(1, 1),
            source: from_log
        }
    );
    // Old leader with un-quorumed proposals of epoch 1 (C18 repro): TRUNC+DIFF.
    assert_eq!(
        plan_sync(&log, z(1, 5)),
        SyncPlan::TruncDiff {
            to: z(1, 3),
            source: mem
        }
    );
    // Ahead in the leader's own epoch: TRUNC to the leader's last.
    assert_eq!(
        plan_sync(&log, z(2, 4)),
        SyncPlan::TruncDiff {
            to: z(2, 2),
            source: mem
        }
    );
    // Diverged in an epoch the leader never saw: the common point is unprovable (C18).
    assert_eq!(plan_sync(&log, z(3, 1)), SyncPlan::Snap);
    let tight = LeaderLog {
        diff_from_log_limit: 0,
        ..log
    };
    assert_eq!(plan_sync(&tight, z(1, 1)), SyncPlan::Snap);
}

/// C17 (ZOOKEEPER-4352): a fresh leader whose in-memory window is empty (it restarted from a
/// snapshot, or the window holds nothing yet) still owes a new member everything after its
/// zxid. An empty window is "no window", never "nothing to send": the plan takes the txns
/// from the log, or sends SNAP when the log cannot serve them; it never answers with an
/// in-memory (or empty) DIFF that would skip the early writes.
#[test]
fn c17_empty_window_on_a_fresh_leader() {
    let index = [z(1, 1), z(1, 2), z(1, 3), z(1, 4), z(1, 5)];
    let sizes = [100; 5];
    let fresh = LeaderLog {
        index: &index,
        base: Zxid::ZERO,
        memory_first: None,
        sizes: &sizes,
        diff_from_log_limit: 100,
        snapshot_bytes: None,
        snapshot_size_factor: 0.33,
    };
    assert_eq!(
        plan_sync(&fresh, Zxid::ZERO),
        SyncPlan::Diff {
            after: Zxid::ZERO,
            source: DiffSource::Log {
                upto: z(1, 5),
                count: 5
            }
        }
    );
    let tight = LeaderLog {
        diff_from_log_limit: 4,
        ..fresh
    };
    assert_eq!(plan_sync(&tight, Zxid::ZERO), SyncPlan::Snap);
    // Restarted from a snapshot at <1,5> with nothing logged after it: a member at zero
    // cannot be served from the log at all.
    let after_snapshot = LeaderLog {
        index: &index[4..],
        base: z(1, 5),
        memory_first: None,
        sizes: &sizes[4..],
        diff_from_log_limit: 100,
        snapshot_bytes: None,
        snapshot_size_factor: 0.33,
    };
    assert_eq!(plan_sync(&after_snapshot, Zxid::ZERO), SyncPlan::Snap);
    // Only a learner at the leader's tip gets the empty DIFF.
    assert_eq!(
        plan_sync(&after_snapshot, z(1, 5)),
        SyncPlan::Diff {
            after: z(1, 5),
            source: DiffSource::Memory
        }
    );
}

/// ZooKeeper's `snapshotSizeFactor`: a DIFF from the on-disk log that would stream more bytes
/// than the factor times the newest snapshot's size becomes a SNAP; a DIFF from memory is never
/// weighed, and the rule is off when the factor is negative or no snapshot size is known.
#[test]
fn snapshot_size_factor_turns_a_heavy_log_diff_into_a_snap() {
    let index: Vec<Zxid> = (1..=10).map(|c| z(1, c)).collect();
    let sizes = [100; 10];
    let log = LeaderLog {
        index: &index,
        base: Zxid::ZERO,
        memory_first: Some(z(1, 9)),
        sizes: &sizes,
        diff_from_log_limit: 100,
        snapshot_bytes: Some(1_500),
        snapshot_size_factor: 0.33,
    };
    // <1,5> needs <1,6>..<1,8> from disk: 300 bytes ≤ 0.33 × 1,500.
    let light = SyncPlan::Diff {
        after: z(1, 5),
        source: DiffSource::Log {
            upto: z(1, 8),
            count: 3,
        },
    };
    assert_eq!(plan_sync(&log, z(1, 5)), light);
    // <1,1> needs <1,2>..<1,8>: 700 bytes, over 495.
    assert_eq!(plan_sync(&log, z(1, 1)), SyncPlan::Snap);
    // From memory: never weighed, however small the snapshot.
    let tiny = LeaderLog {
        snapshot_bytes: Some(1),
        ..log
    };
    let from_memory = SyncPlan::Diff {
        after: z(1, 8),
        source: DiffSource::Memory,
    };
    assert_eq!(plan_sync(&tiny, z(1, 8)), from_memory);
    // Off: a negative factor, or no snapshot size known.
    let off = LeaderLog {
        snapshot_size_factor: -1.0,
        ..tiny
    };
    let unknown = LeaderLog {
        snapshot_bytes: None,
        ..tiny
    };
    for l in [off, unknown] {
        assert!(matches!(
            plan_sync(&l, z(1, 1)),
            SyncPlan::Diff {
                source: DiffSource::Log { count: 7, .. },
                ..
            }
        ));
    }
}
