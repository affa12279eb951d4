//! The Wing–Gong search with Lowe's memoization, for the history of one register.
//!
//! Events (invocations and returns) sit in a doubly linked list in time order. The search walks
//! the list: at an invocation it tries to linearize that operation next (apply it to the
//! register; a read must see the current value), and if the pair (set of linearized operations,
//! register value) was never reached before it removes ("lifts") the operation's two events and
//! starts again from the head. Reaching a return event means the operation it closes should have
//! been linearized already: the search backtracks (undoes the last lift and tries the next
//! candidate after it). An empty list is a linearization; backtracking with nothing to undo
//! proves there is none.
//!
//! Invariants: lifts are undone in LIFO order (so relinking restores the exact list); the memo
//! holds every (bitset, value) pair ever pushed, so each is expanded at most once and the search
//! terminates; a write whose outcome is unknown returns at +∞ (its return event is last), so it
//! can always be linearized after everything else, which is the same as never taking effect.

use std::collections::HashSet;
use std::time::Instant;

/// A register operation prepared for the search: values interned to small integers, 0 = none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegOp {
    /// Index of the operation in the caller's list (for explanations).
    pub(crate) origin: usize,
    /// `true` for a write of `value`, `false` for a read that returned `value`.
    pub(crate) write: bool,
    /// Interned value; 0 means "no value".
    pub(crate) value: u32,
    /// Invocation time.
    pub(crate) invoke: u64,
    /// Return time; `u64::MAX` for a write whose outcome is unknown.
    pub(crate) ret: u64,
}

/// How the search ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Search {
    /// A linearization exists.
    Linearizable,
    /// None exists; `blocked` is the op whose return the deepest attempt could not pass and
    /// `prefix` the ops that attempt had linearized (positions in the input slice, in order).
    Violation { blocked: usize, prefix: Vec<usize> },
    /// The deadline passed first.
    Timeout,
}

const NIL: usize = usize::MAX;

struct Node {
    op: usize,
    call: bool,
    prev: usize,
    next: usize,
}

struct EventList {
    nodes: Vec<Node>,
    /// For op i: its call node and its return node.
    slots: Vec<(usize, usize)>,
}

impl EventList {
    /// Node 0 is the head sentinel; events follow in time order, an invocation before a return
    /// at the same instant (the more permissive reading: the two overlap).
    fn new(ops: &[RegOp]) -> Self {
        let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            events.push((op.invoke, false, i));
            events.push((op.ret, true, i));
        }
        events.sort_unstable();
        let mut nodes = vec![Node {
            op: NIL,
            call: false,
            prev: NIL,
            next: NIL,
        }];
        let mut slots = vec![(NIL, NIL); ops.len()];
        for (_, is_return, op) in events {
            let id = nodes.len();
            let prev = id - 1;
            nodes[prev].next = id;
            nodes.push(Node {
                op,
                call: !is_return,
                prev,
                next: NIL,
            });
            if is_return {
                slots[op].1 = id;
            } else {
                slots[op].0 = id;
            }
        }
        EventList { nodes, slots }
    }

    fn unlink(&mut self, id: usize) {
        let (prev, next) = (self.nodes[id].prev, self.nodes[id].next);
        self.nodes[prev].next = next;
        if next != NIL {
            self.nodes[next].prev = prev;
        }
    }

    fn relink(&mut self, id: usize) {
        let (prev, next) = (self.nodes[id].prev, self.nodes[id].next);
        self.nodes[prev].next = id;
        if next != NIL {
            self.nodes[next].prev = id;
        }
    }

    fn lift(&mut self, op: usize) {
        let (call, ret) = self.slots[op];
        self.unlink(call);
        self.unlink(ret);
    }

    fn unlift(&mut self, op: usize) {
        let (call, ret) = self.slots[op];
        self.relink(ret);
        self.relink(call);
    }

    fn first(&self) -> usize {
        self.nodes[0].next
    }
}

/// Searches for a linearization of `ops` (all on one register, initially without value).
pub(crate) fn search(ops: &[RegOp], deadline: Instant) -> Search {
    let mut list = EventList::new(ops);
    let words = ops.len().div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut memo: HashSet<(Box<[u64]>, u32)> = HashSet::new();
    // (op, register value before it)
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut state = 0u32;
    let mut deepest: Option<(usize, Vec<usize>)> = None;
    let mut entry = list.first();
    let mut steps = 0u32;
    loop {
        if entry == NIL {
            // Only reachable when the list is empty: every call precedes its return.
            return Search::Linearizable;
        }
        steps = steps.wrapping_add(1);
        if steps & 4095 == 0 && Instant::now() >= deadline {
            return Search::Timeout;
        }
        let node = &list.nodes[entry];
        let op_index = node.op;
        if node.call {
            let op = ops[op_index];
            let applies = op.write || op.value == state;
            let next_state = if op.write { op.value } else { state };
            if applies {
                linearized[op_index / 64] |= 1 << (op_index % 64);
                if memo.insert((linearized.clone().into_boxed_slice(), next_state)) {
                    stack.push((op_index, state));
                    state = next_state;
                    list.lift(op_index);
                    entry = list.first();
                    if entry == NIL {
                        return Search::Linearizable;
                    }
                    continue;
                }
                linearized[op_index / 64] &= !(1 << (op_index % 64));
            }
            entry = list.nodes[entry].next;
        } else {
            let deeper = match &deepest {
                Some((_, prefix)) => stack.len() > prefix.len(),
                None => true,
            };
            if deeper {
                deepest = Some((op_index, stack.iter().map(|&(op, _)| op).collect()));
            }
            let Some((undo, before)) = stack.pop() else {
                let (blocked, prefix) = deepest.unwrap_or((op_index, Vec::new()));
                return Search::Violation { blocked, prefix };
            };
            linearized[undo / 64] &= !(1 << (undo % 64));
            state = before;
            list.unlift(undo);
            entry = list.nodes[list.slots[undo].0].next;
        }
    }
}
