//! Request counters and latencies: the four-letter words' own (`srvr`, `stat`, `cons`,
//! `mntr`'s `zk_*` keys; reset by `srst`, as ZooKeeper's) and, through [`FeMetrics`], the
//! Prometheus ones (never reset).
//!
//! INV-1: the request path ([`Stats::request`], [`Stats::answered`]) touches atomics only;
//! the connection set's mutex is taken when a connection opens or closes and by the words.
//! INV-2: between two [`Stats::reset`]s the counters only grow, except `outstanding`
//! (requests in flight) and the set of open connections, which `reset` leaves alone.
//! INV-3: latencies are kept in µs; min/avg/max are 0 while nothing was answered since the
//! start or the last reset.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::metrics::{FeMetrics, RequestClass};
use crate::protocol::{ClientStats, Status};

/// One client connection's counters.
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Requests received.
    pub received: AtomicU64,
    /// Responses sent.
    pub sent: AtomicU64,
    /// Requests in flight.
    pub queued: AtomicU64,
    /// The client's identity, for an authorisation layer to map to a role: the subject CN
    /// (or, without one, the first DNS SAN) of the client certificate the TLS handshake
    /// verified, with `client.secure=true` and `ssl.clientAuth=need`; `None` otherwise. Set
    /// at accept, before the first request is read, and never changed.
    pub identity: Option<String>,
}

/// The server's counters.
#[derive(Debug)]
pub struct Stats {
    metrics: Arc<FeMetrics>,
    received: AtomicU64,
    sent: AtomicU64,
    outstanding: AtomicU64,
    next_conn: AtomicU64,
    /// `u64::MAX` while nothing was answered (INV-3).
    min_us: AtomicU64,
    max_us: AtomicU64,
    sum_us: AtomicU64,
    count: AtomicU64,
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
    /// Latency min, ms (with a fraction).
    pub min_ms: f64,
    /// Latency average, ms.
    pub avg_ms: f64,
    /// Latency max, ms.
    pub max_ms: f64,
    /// Open connections.
    pub clients: Vec<ClientStats>,
}

impl Stats {
    /// Counters that also feed `metrics`.
    pub fn new(metrics: Arc<FeMetrics>) -> Stats {
        Stats {
            metrics,
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            next_conn: AtomicU64::new(0),
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
            conns: Mutex::default(),
        }
    }

    /// The Prometheus metrics these counters feed.
    pub fn metrics(&self) -> &FeMetrics {
        &self.metrics
    }

    /// Registers a connection from `addr`; returns its id and counters.
    pub fn open(&self, addr: String, identity: Option<String>) -> (u64, Arc<ConnStats>) {
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let c = Arc::new(ConnStats {
            identity,
            ..ConnStats::default()
        });
        lock(&self.conns).insert(id, (addr, c.clone()));
        self.metrics.open_connections.inc();
        (id, c)
    }

    /// A client connection the client port's TLS refused.
    pub fn tls_refused(&self) {
        self.metrics.client_tls_refused.inc();
    }

    /// Forgets connection `id`.
    pub fn close(&self, id: u64) {
        if lock(&self.conns).remove(&id).is_some() {
            self.metrics.open_connections.dec();
        }
    }

    /// A request arrived.
    pub fn request(&self, c: &ConnStats) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        self.metrics.outstanding.inc();
        c.received.fetch_add(1, Ordering::Relaxed);
        c.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Its answer (of `class`, outcome `status`, `None`: OK) was queued after `took`.
    pub fn answered(
        &self,
        c: &ConnStats,
        class: RequestClass,
        status: Option<Status>,
        took: Duration,
    ) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        self.metrics.outstanding.dec();
        c.sent.fetch_add(1, Ordering::Relaxed);
        c.queued.fetch_sub(1, Ordering::Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.min_us.fetch_min(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.metrics.observe(class, status, took);
    }

    /// `srst`: zeroes the received/sent counters and the latencies (INV-2); the Prometheus
    /// counters go on.
    pub fn reset(&self) {
        self.received.store(0, Ordering::Relaxed);
        self.sent.store(0, Ordering::Relaxed);
        self.min_us.store(u64::MAX, Ordering::Relaxed);
        self.max_us.store(0, Ordering::Relaxed);
        self.sum_us.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }

    /// A snapshot of the counters.
    pub fn totals(&self) -> Totals {
        let clients = lock(&self.conns)
            .values()
            .map(|(addr, c)| ClientStats {
                addr: addr.clone(),
                queued: c.queued.load(Ordering::Relaxed),
                received: c.received.load(Ordering::Relaxed),
                sent: c.sent.load(Ordering::Relaxed),
            })
            .collect();
        let count = self.count.load(Ordering::Relaxed);
        let ms = |us: u64| us as f64 / 1000.0;
        let min_us = self.min_us.load(Ordering::Relaxed);
        Totals {
            received: self.received.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            outstanding: self.outstanding.load(Ordering::Relaxed),
            min_ms: if min_us == u64::MAX { 0.0 } else { ms(min_us) },
            avg_ms: if count == 0 {
                0.0
            } else {
                ms(self.sum_us.load(Ordering::Relaxed)) / count as f64
            },
            max_ms: ms(self.max_us.load(Ordering::Relaxed)),
            clients,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn latencies_keep_microseconds_and_reset_clears_them() {
        let stats = Stats::new(Arc::new(
            FeMetrics::new(&prometheus::Registry::new()).unwrap(),
        ));
        let (id, conn) = stats.open("127.0.0.1:1".into(), None);
        for us in [150, 250] {
            stats.request(&conn);
            stats.answered(&conn, RequestClass::Read, None, Duration::from_micros(us));
        }
        let t = stats.totals();
        assert_eq!((t.received, t.sent, t.outstanding), (2, 2, 0));
        assert_eq!((t.min_ms, t.avg_ms, t.max_ms), (0.15, 0.2, 0.25));
        assert_eq!(
            stats
                .metrics()
                .latency(RequestClass::Read)
                .unwrap()
                .get_sample_count(),
            2
        );
        stats.reset();
        let t = stats.totals();
        assert_eq!(
            (t.received, t.sent, t.min_ms, t.avg_ms, t.max_ms),
            (0, 0, 0.0, 0.0, 0.0)
        );
        assert_eq!(t.clients.len(), 1);
        assert_eq!(
            stats
                .metrics()
                .latency(RequestClass::Read)
                .unwrap()
                .get_sample_count(),
            2
        );
        stats.close(id);
        assert!(stats.totals().clients.is_empty());
    }
}
