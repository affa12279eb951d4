//! The core's only source of randomness: the jitter added to LOOKING's notification resends
//! (`looking` INV-3), so that peers that went LOOKING together do not resend in lockstep.
//!
//! INV-1: the sequence is a pure function of `(sid, Config::jitter_seed)`: the same
//! configuration draws the same jitter on every run, which is what lets a simulation replay a
//! seed exactly (`peer` INV-2).
//! INV-2: a `jitter_seed` of 0 (the default) starts the generator at `sid × 2^64/φ | 1`, the
//! state the core always started from before the seed was configurable, so deployments and
//! every existing test draw exactly the jitter they drew before.
//! INV-3: any other seed is mixed (splitmix64) and xored into that sid-derived state, so the
//! peers of one ensemble, which share a seed, still draw different sequences, and nearby seeds
//! give unrelated ones.
//! INV-4: the state is never 0 (the fixed point of xorshift): the low bit is always set.

use crate::types::ServerId;

/// 2^64 divided by the golden ratio: spreads consecutive sids over the state space.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A xorshift64* generator seeded from the sid and `Config::jitter_seed`; see the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Jitter {
    state: u64,
}

impl Jitter {
    /// The generator of peer `sid` for `seed` (INV-2, INV-3, INV-4).
    pub(crate) fn new(sid: ServerId, seed: u64) -> Jitter {
        let salt = if seed == 0 { 0 } else { splitmix64(seed) };
        Jitter {
            state: (sid.0.wrapping_mul(GOLDEN_GAMMA) ^ salt) | 1,
        }
    }

    /// The next number below `bound` (0 when `bound` is 0).
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let x = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        if bound == 0 {
            0
        } else {
            x % bound
        }
    }
}

/// The splitmix64 finalizer of `seed`'s first step: a bijection that scatters nearby seeds.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(sid: u64, seed: u64) -> Vec<u64> {
        let mut j = Jitter::new(ServerId(sid), seed);
        (0..32).map(|_| j.below(1_000_000)).collect()
    }

    #[test]
    fn seed_zero_starts_from_the_sid_alone() {
        for sid in [1, 2, 3, 7, 255] {
            let j = Jitter::new(ServerId(sid), 0);
            assert_eq!(j.state, sid.wrapping_mul(GOLDEN_GAMMA) | 1, "sid {sid}");
        }
    }

    #[test]
    fn the_same_configuration_draws_the_same_sequence() {
        for seed in [0, 1, 42, u64::MAX] {
            assert_eq!(draws(3, seed), draws(3, seed), "seed {seed}");
        }
    }

    #[test]
    fn seeds_change_the_sequence_and_peers_of_one_seed_differ() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..20 {
            for sid in 1..=7 {
                assert!(
                    seen.insert(draws(sid, seed)),
                    "sid {sid} seed {seed} repeats"
                );
            }
        }
    }

    #[test]
    fn draws_stay_below_the_bound() {
        for seed in [0, 9] {
            let mut j = Jitter::new(ServerId(2), seed);
            for bound in [1, 2, 3, 51, 1000] {
                for _ in 0..100 {
                    assert!(j.below(bound) < bound);
                }
            }
            assert_eq!(j.below(0), 0);
        }
    }

    #[test]
    fn the_state_is_never_zero() {
        for sid in 0..=7 {
            for seed in 0..1000 {
                assert_eq!(Jitter::new(ServerId(sid), seed).state & 1, 1);
            }
        }
    }
}
