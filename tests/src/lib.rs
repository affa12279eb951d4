//! Test harnesses: the deterministic cluster simulation ([`sim`]) driving the real `zab-core`.
//!
//! Commands:
//! - named scenarios (PITFALLS.md and every sync mode):
//!   `cargo test -p tests --release --test scenarios`
//! - the randomized sweep (CI; `ZAB_SWEEP_SECS`, default 150 s on two threads):
//!   `cargo test -p tests --release --test random`
//! - replay one seed: `ZAB_SEED=<n> cargo test -p tests --release --test random -- --nocapture`
//!   (`ZAB_TRACE=1` prints every step)
//! - soak: `cargo run --release -p tests --bin soak -- --secs 600` (or `--seeds N`), which
//!   reports seeds/second and the failing seeds.
//!
//! Exploration knobs (never for CI): `ZAB_NO_PURGE=1` (no log purge), `ZAB_ALLOW_SNAP_REGRESS=1`
//! (tolerate a SNAP that moves a learner's state backwards).

pub mod sim;
