//! The state of the driver's output to one peer, as a pure transition function (out INV-1..4
//! rely on it; `out` carries out the effects with the transport).
//!
//! ```text
//!            StreamStarted                 Disconnect (connected)
//!   Idle ───────────────▶ Streaming ─────────────────────────────▶ Closing
//!    ▲ ◀── StreamFinished ──┘ │                                    │ │
//!    │                        │ StreamFailed                       │ │ LinkDown, or MUTE_MAX
//!    │  SendFailed            ▼                                    │ │ passed (Tick): Pump
//!    └──────────────────▶ Muted ◀── (from Idle)                    │ │
//!      LinkDown, or MUTE_MAX passed (Tick): TellCore               ▼ ▼
//!                                                                   Idle
//! ```
//!
//! INV-1: in `Idle` a message leaves at once; in `Streaming` and `Closing` it waits in the
//! peer's queue (behind the stream, or until the closed connection's end is reported); in
//! `Muted` it is dropped ([`OutState::delivery`]).
//! INV-2: every way out of a connection (`Disconnect`, a failed send or stream, the link's
//! loss) voids what was queued for it (`Clear`, `Sever`, or a `LinkDown` outside `Closing`),
//! so nothing leaks onto a later connection.
//! INV-3: `Muted` and `Closing` end by themselves after [`MUTE_MAX`] (a `Tick`), so a peer is
//! never stuck waiting for a loss report the transport does not give.
//! INV-4: a stream event for another stream than the running one (an aborted stream whose
//! end was already on its way) changes nothing.
//! INV-5: an event that cannot happen in a state (a stream started while another runs, a send
//! that failed while nothing was being sent) is refused with [`Illegal`] and changes nothing.

use std::time::Duration;

use thiserror::Error;
use tokio::time::Instant;

/// How long a peer stays muted, or closing, without the transport reporting its loss.
pub(super) const MUTE_MAX: Duration = Duration::from_secs(3);

/// What the output to one peer is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum OutState {
    /// Messages leave at once.
    #[default]
    Idle,
    /// The stream `id` runs; messages wait behind it.
    Streaming {
        /// The running stream.
        id: u64,
    },
    /// The core closed an established connection at `since`; messages wait for its end.
    Closing {
        /// When.
        since: Instant,
    },
    /// A send failed at `since`; messages are dropped until the loss reaches the core.
    Muted {
        /// When.
        since: Instant,
    },
}

/// What happened to the output to one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OutEvent {
    /// A stream `id` was started (only from `Idle`).
    StreamStarted {
        /// The stream.
        id: u64,
    },
    /// The stream `id` sent everything.
    StreamFinished {
        /// The stream.
        id: u64,
    },
    /// The stream `id` failed (stalled, or its producer or send failed).
    StreamFailed {
        /// The stream.
        id: u64,
        /// When the failure was handled.
        now: Instant,
    },
    /// A message or a stream could not be handed to the transport.
    SendFailed {
        /// When.
        now: Instant,
    },
    /// The core closed the connection (`Action::Disconnect`).
    Disconnect {
        /// The transport had an established quorum connection to the peer.
        connected: bool,
        /// When.
        now: Instant,
    },
    /// The transport reported the quorum connection's loss.
    LinkDown,
    /// Time passed.
    Tick {
        /// Now.
        now: Instant,
    },
}

/// What the caller does after a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Effect {
    /// Nothing.
    Nothing,
    /// Drop the peer's queue and abort its stream (INV-2).
    Clear,
    /// `Clear`, and cut the quorum connection: a send failed (INV-2).
    Sever,
    /// Send what waits in the queue, in order, until it is empty or a stream starts.
    Pump,
    /// Drop the queue and abort the stream; the loss is news to the core: feed it a
    /// `ConnectionLost` (a `LinkDown`, or a mute that expired).
    TellCore,
}

/// How a message to the peer is handled in a state (INV-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Delivery {
    /// Hand it to the transport now.
    Now,
    /// Put it in the peer's queue.
    Queue,
    /// Drop it.
    Drop,
}

/// An event that cannot happen in the state it arrived in (INV-5).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("peer output: {event:?} cannot happen in {state:?}")]
pub(super) struct Illegal {
    /// The state.
    pub(super) state: OutState,
    /// The event.
    pub(super) event: OutEvent,
}

impl OutState {
    /// How a message is handled in this state (INV-1).
    pub(super) fn delivery(self) -> Delivery {
        match self {
            OutState::Idle => Delivery::Now,
            OutState::Streaming { .. } | OutState::Closing { .. } => Delivery::Queue,
            OutState::Muted { .. } => Delivery::Drop,
        }
    }
}

/// The state after `event` in `state`, and what the caller does (see the module docs).
pub(super) fn transition(state: OutState, event: OutEvent) -> Result<(OutState, Effect), Illegal> {
    use {Effect as E, OutEvent as Ev, OutState as S};
    let illegal = Illegal { state, event };
    let expired = |since: Instant, now: Instant| now.saturating_duration_since(since) >= MUTE_MAX;
    Ok(match (state, event) {
        (S::Idle, Ev::StreamStarted { id }) => (S::Streaming { id }, E::Nothing),
        (_, Ev::StreamStarted { .. }) => return Err(illegal),
        (S::Streaming { id }, Ev::StreamFinished { id: done }) if id == done => (S::Idle, E::Pump),
        (S::Streaming { id }, Ev::StreamFailed { id: done, now }) if id == done => {
            (S::Muted { since: now }, E::Sever)
        }
        (_, Ev::StreamFinished { .. } | Ev::StreamFailed { .. }) => (state, E::Nothing),
        (S::Idle, Ev::SendFailed { now }) => (S::Muted { since: now }, E::Sever),
        (_, Ev::SendFailed { .. }) => return Err(illegal),
        (S::Muted { .. }, Ev::Disconnect { .. }) => (state, E::Clear),
        (
            S::Closing { .. },
            Ev::Disconnect {
                connected: false, ..
            },
        ) => (state, E::Clear),
        (_, Ev::Disconnect { connected, now }) if connected => {
            (S::Closing { since: now }, E::Clear)
        }
        (_, Ev::Disconnect { .. }) => (S::Idle, E::Clear),
        (S::Closing { .. }, Ev::LinkDown) => (S::Idle, E::Pump),
        (_, Ev::LinkDown) => (S::Idle, E::TellCore),
        (S::Muted { since }, Ev::Tick { now }) if expired(since, now) => (S::Idle, E::TellCore),
        (S::Closing { since }, Ev::Tick { now }) if expired(since, now) => (S::Idle, E::Pump),
        (_, Ev::Tick { .. }) => (state, E::Nothing),
    })
}

#[cfg(test)]
#[path = "out_state_tests.rs"]
mod tests;
