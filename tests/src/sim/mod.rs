//! The deterministic cluster simulation.
