//! Every (state, event) pair of the per-peer output state, without sockets or a runtime.

use std::time::Duration;

use tokio::time::Instant;

use super::{transition, Delivery, Effect, Illegal, OutEvent, OutState, MUTE_MAX};

/// What a transition should do: the next state and effect, or refuse.
type Expected = Result<(OutState, Effect), ()>;

struct Clock {
    t0: Instant,
    now: Instant,
    soon: Instant,
    late: Instant,
}

fn clock() -> Clock {
    let t0 = Instant::now();
    Clock {
        t0,
        now: t0 + Duration::from_millis(500),
        soon: t0 + MUTE_MAX - Duration::from_millis(1),
        late: t0 + MUTE_MAX,
    }
}

/// The four states (a stream 1 runs; closing and muted since `t0`).
fn states(c: &Clock) -> [OutState; 4] {
    [
        OutState::Idle,
        OutState::Streaming { id: 1 },
        OutState::Closing { since: c.t0 },
        OutState::Muted { since: c.t0 },
    ]
}

/// Every event, with stream ids that match the running stream (1) and that do not (9).
fn events(c: &Clock) -> Vec<OutEvent> {
    vec![
        OutEvent::StreamStarted { id: 2 },
        OutEvent::StreamFinished { id: 1 },
        OutEvent::StreamFinished { id: 9 },
        OutEvent::StreamFailed { id: 1, now: c.now },
        OutEvent::StreamFailed { id: 9, now: c.now },
        OutEvent::SendFailed { now: c.now },
        OutEvent::Disconnect {
            connected: true,
            now: c.now,
        },
        OutEvent::Disconnect {
            connected: false,
            now: c.now,
        },
        OutEvent::LinkDown,
        OutEvent::Tick { now: c.soon },
        OutEvent::Tick { now: c.late },
    ]
}

/// The expected outcome of each event of `events` in `state`, in the same order.
fn expected(state: OutState, c: &Clock) -> Vec<Expected> {
    use {Effect as E, OutState as S};
    let stay = Ok((state, E::Nothing));
    let muted = Ok((S::Muted { since: c.now }, E::Sever));
    let closing = Ok((S::Closing { since: c.now }, E::Clear));
    match state {
        S::Idle => vec![
            Ok((S::Streaming { id: 2 }, E::Nothing)),
            stay,
            stay,
            stay,
            stay,
            muted,
            closing,
            Ok((S::Idle, E::Clear)),
            Ok((S::Idle, E::TellCore)),
            stay,
            stay,
        ],
        S::Streaming { .. } => vec![
            Err(()),
            Ok((S::Idle, E::Pump)),
            stay,
            muted,
            stay,
            Err(()),
            closing,
            Ok((S::Idle, E::Clear)),
            Ok((S::Idle, E::TellCore)),
            stay,
            stay,
        ],
        S::Closing { .. } => vec![
            Err(()),
            stay,
            stay,
            stay,
            stay,
            Err(()),
            closing,
            Ok((state, E::Clear)),
            Ok((S::Idle, E::Pump)),
            stay,
            Ok((S::Idle, E::Pump)),
        ],
        S::Muted { .. } => vec![
            Err(()),
            stay,
            stay,
            stay,
            stay,
            Err(()),
            Ok((state, E::Clear)),
            Ok((state, E::Clear)),
            Ok((S::Idle, E::TellCore)),
            stay,
            Ok((S::Idle, E::TellCore)),
        ],
    }
}

#[test]
fn every_event_in_every_state() {
    let c = clock();
    for state in states(&c) {
        let want = expected(state, &c);
        for (event, want) in events(&c).into_iter().zip(want) {
            let got = transition(state, event);
            let want = want.map_err(|()| Illegal { state, event });
            assert_eq!(got, want, "{event:?} in {state:?}");
        }
    }
}

#[test]
fn delivery_follows_the_state() {
    let c = clock();
    let [idle, streaming, closing, muted] = states(&c);
    assert_eq!(idle.delivery(), Delivery::Now);
    assert_eq!(streaming.delivery(), Delivery::Queue);
    assert_eq!(closing.delivery(), Delivery::Queue);
    assert_eq!(muted.delivery(), Delivery::Drop);
}

/// A whole life: a stream, a failed stream that mutes, the mute expiring, a close by the
/// core whose loss report releases the queue.
#[test]
fn a_peer_goes_through_its_states_and_back() {
    let c = clock();
    let step = |s, e| transition(s, e).unwrap();
    let (s, _) = step(OutState::Idle, OutEvent::StreamStarted { id: 1 });
    let (s, e) = step(s, OutEvent::StreamFailed { id: 1, now: c.t0 });
    assert_eq!((s, e), (OutState::Muted { since: c.t0 }, Effect::Sever));
    let (s, e) = step(s, OutEvent::Tick { now: c.soon });
    assert_eq!(e, Effect::Nothing, "not expired yet");
    let (s, e) = step(s, OutEvent::Tick { now: c.late });
    assert_eq!((s, e), (OutState::Idle, Effect::TellCore));
    let disconnect = OutEvent::Disconnect {
        connected: true,
        now: c.now,
    };
    let (s, _) = step(s, disconnect);
    assert_eq!(s.delivery(), Delivery::Queue);
    let (s, e) = step(s, OutEvent::LinkDown);
    assert_eq!((s, e), (OutState::Idle, Effect::Pump));
}

/// A clock that went backwards (never with a monotonic clock) does not expire anything.
#[test]
fn an_earlier_now_does_not_expire() {
    let c = clock();
    let muted = OutState::Muted { since: c.now };
    let got = transition(muted, OutEvent::Tick { now: c.t0 });
    assert_eq!(got, Ok((muted, Effect::Nothing)));
}
