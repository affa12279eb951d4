//! The one place the simulation names the peer it drives.
//!
//! Until `zab_core::Peer` lands, [`Peer`] is a placeholder with the same API that never leaves
//! LOOKING; swapping the `pub use` below is the only change needed to drive the real core.

pub use shim::{Peer, StepError};

mod shim {
    use zab_core::{Action, Config, DurableState, Epoch, Input, Role, ServerId, Zxid};

    /// Placeholder error.
    #[derive(Debug)]
    pub struct StepError;

    impl std::fmt::Display for StepError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("shim")
        }
    }

    /// Placeholder peer: keeps its durable state, answers nothing.
    #[derive(Debug)]
    pub struct Peer {
        durable: DurableState,
    }

    #[allow(missing_docs, clippy::missing_errors_doc)]
    impl Peer {
        pub fn new(
            _config: Config,
            durable: DurableState,
            _now_ms: u64,
        ) -> Result<Peer, StepError> {
            Ok(Peer { durable })
        }
        pub fn step(&mut self, _input: Input) -> Result<(), StepError> {
            Ok(())
        }
        pub fn take_actions(&mut self) -> Vec<Action> {
            Vec::new()
        }
        pub fn role(&self) -> Role {
            Role::Looking
        }
        pub fn leader(&self) -> Option<ServerId> {
            None
        }
        pub fn accepted_epoch(&self) -> Epoch {
            self.durable.accepted_epoch
        }
        pub fn current_epoch(&self) -> Epoch {
            self.durable.current_epoch
        }
        pub fn last_logged_zxid(&self) -> Zxid {
            self.durable
                .log_index
                .last()
                .copied()
                .unwrap_or(self.durable.snapshot_zxid)
        }
        pub fn last_committed_zxid(&self) -> Zxid {
            self.durable.snapshot_zxid
        }
        pub fn last_applied_zxid(&self) -> Zxid {
            self.durable.snapshot_zxid
        }
        pub fn is_serving(&self) -> bool {
            false
        }
    }
}
