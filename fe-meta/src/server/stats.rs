//! Request counters and latencies for the four-letter words (`srvr`, `stat`, `mntr`).
//!
//! INV: counters only grow, except `outstanding` (requests in flight) and the set of open
//! connections; nothing here blocks a request for longer than a short mutex section.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::protocol::ClientStats;

/// One client connection's counters.
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Requests received.
    pub received: AtomicU64,
    /// Responses sent.
    pub sent: AtomicU64,
    /// Requests in flight.
    pub queued: AtomicU64,
}

#[derive(Debug, Default)]
struct Latency {
    min_ms: u64,
    max_ms: u64,
    sum_ms: u64,
    count: u64,
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Stats {
    received: AtomicU64,
    sent: AtomicU64,
    outstanding: AtomicU64,
    next_conn: AtomicU64,
    latency: Mutex<Latency>,
    conns: Mutex<BTreeMap<u64, (String, Arc<ConnStats>)>>,
}

/// Totals for rendering.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Requests received.
    pub received: u64,
    /// Responses sent.
    pub sent: u64,
    /// In flight.
    pub outstanding: u64,
    /// Latency min, ms.
    pub min_ms: u64,
    /// Latency average, ms.
    pub avg_ms: f64,
    /// Latency max, ms.
    pub max_ms: u64,
    /// Open connections.
    pub clients: Vec<ClientStats>,
}

impl Stats {
    /// Registers a connection from `addr`; returns its id and counters.
    pub fn open(&self, addr: String) -> (u64, Arc<ConnStats>) {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let c = Arc::new(ConnStats::default());
        lock(&self.conns).insert(id, (addr, c.clone()));
        (id, c)
    }

    /// Forgets connection `id`.
    pub fn close(&self, id: u64) {
        lock(&self.conns).remove(&id);
    }

    /// A request arrived.
    pub fn request(&self, c: &ConnStats) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        c.received.fetch_add(1, Ordering::Relaxed);
        c.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Its answer was queued after `took`.
    pub fn answered(&self, c: &ConnStats, took: Duration) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        c.sent.fetch_add(1, Ordering::Relaxed);
        c.queued.fetch_sub(1, Ordering::Relaxed);
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        let mut l = lock(&self.latency);
        l.min_ms = if l.count == 0 { ms } else { l.min_ms.min(ms) };
        l.max_ms = l.max_ms.max(ms);
        l.sum_ms = l.sum_ms.saturating_add(ms);
        l.count += 1;
    }

    /// A snapshot of the counters.
    pub fn totals(&self) -> Totals {
        let l = lock(&self.latency);
        let clients = lock(&self.conns)
            .values()
            .map(|(addr, c)| ClientStats {
                addr: addr.clone(),
                queued: c.queued.load(Ordering::Relaxed),
                received: c.received.load(Ordering::Relaxed),
                sent: c.sent.load(Ordering::Relaxed),
            })
            .collect();
        Totals {
            received: self.received.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            outstanding: self.outstanding.load(Ordering::Relaxed),
            min_ms: l.min_ms,
            avg_ms: if l.count == 0 {
                0.0
            } else {
                l.sum_ms as f64 / l.count as f64
            },
            max_ms: l.max_ms,
            clients,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
