//! Test harnesses: the deterministic cluster simulation ([`sim`]) driving the real `zab-core`.

pub mod sim;
