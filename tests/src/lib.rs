//! Test harnesses: the deterministic cluster simulation ([`sim`]) driving the real `zab-core`,
//! and real `fe-meta server` processes on loopback for the fault tests ([`proc`]).
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
//! - multi-process fault tests (needs the `fe-meta` binary, built by the workspace's
//!   `cargo test --release`, or `cargo build --release -p fe-meta-cli`; `FE_META_BIN` overrides):
//!   `cargo test -p tests --release --test process -- --nocapture` (prints `RECOVERY` lines)
//!
//! The sweep mixes membership changes (servers added, promoted and removed, the leader
//! included) into the faults of odd seeds without wipes.
//!
//! Exploration knobs (never for CI): `ZAB_NO_PURGE=1` (no log purge), `ZAB_ALLOW_SNAP_REGRESS=1`
//! (tolerate a SNAP that moves a learner's state backwards), `ZAB_MEMBERSHIP=0` (no membership
//! changes).

pub mod damage;
pub mod lincheck;
pub mod proc;
pub mod sim;
