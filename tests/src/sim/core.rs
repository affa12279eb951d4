//! The one place the simulation names the peer it drives: the real `zab_core::Peer`.

pub use zab_core::Peer;
pub use zab_core::StepError;
