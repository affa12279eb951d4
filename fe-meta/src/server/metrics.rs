//! fe-meta's Prometheus metrics, registered in the node's registry beside zab-net's `zab_*`
//! metrics and the process's (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! ...). `GET /metrics` on the admin port encodes that registry; `mntr` lists every counter
//! and gauge of it ([`gather_flat`]).
//!
//! | metric | type | labels | meaning |
//! |--------|------|--------|---------|
//! | `fe_meta_requests_total` | counter | `class`, `status` | requests answered, by class and outcome (`OK` or the error status name) |
//! | `fe_meta_request_duration_us` | histogram | `class` | time from decoding a request to queueing its answer, µs (buckets 50 µs..10 s) |
//! | `fe_meta_open_connections` | gauge | | framed client connections open |
//! | `fe_meta_client_tls_refused_total` | counter | | client connections refused by the client port's TLS (`client.secure=true`): no or untrusted client certificate, plaintext, no handshake in time |
//! | `fe_meta_outstanding_requests` | gauge | | requests received and not yet answered |
//! | `fe_meta_applied_journal_id` | gauge | | the last applied journal id (zxid) |
//! | `fe_meta_staleness_ms` | gauge | | how far this node's catalog lags the leader's clock, ms; 0 on the serving leader, -1 when unknown |
//! | `fe_meta_catalog_entries` | gauge | | entries in the catalog (`Node count` of `srvr`) |
//! | `fe_meta_last_timestamp_ms` | gauge | | the leader clock of the last applied TIMESTAMP entry (Unix ms; 0: none yet) |
//! | `fe_meta_timestamps_applied_total` | counter | | TIMESTAMP entries applied since the process started |
//! | `fe_meta_fatal` | gauge | | 1 once the node stopped on a fatal error |
//! | `fe_meta_server_threads` | gauge | | threads of the runtime that runs the server's tasks (`server_threads`) |
//! | `fe_meta_server_busy_seconds_total` | counter | | time those threads spent running tasks, summed over them: its rate divided by `fe_meta_server_threads` near 1 means the server's threads are saturated |
//! | `fe_meta_auth_refusals_total` | counter | `reason` | client requests refused by authentication (`no_identity`, `bad_credentials`) or authorisation (`permission_denied`) |
//!
//! A request's class: `write` (catalog writes and membership changes), `sync` (SYNC, and reads
//! with the sync flag), `admin` (STATUS, DIGEST, GET_CONFIG, RECOVERY_INFO, SHOW FRONTENDS,
//! SHOW MEMBERS) and `read` (the other catalog reads).
//!
//! INV-1: the request path touches atomics only: every `(class, status)` counter and every
//! class's histogram is resolved once, when the metrics are registered ([`FeMetrics::new`]).
//! INV-2: the gauges that mirror state (journal id, staleness, catalog entries, TIMESTAMPs,
//! fatal, the runtime's threads and busy time) are set from that state right before each
//! scrape ([`FeMetrics::refresh`]), so a scrape never shows an older value than the state it
//! was taken from.
//! INV-3: the Prometheus counters only grow (`srst` resets the four-letter words' own
//! counters in `stats`, not these).

use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

use zab_net::NodeOptions;

use super::auth::Refusal;
use crate::protocol::{RequestBody, Status};

/// A request's class for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestClass {
    /// A catalog write or a membership change.
    Write,
    /// A catalog read without the sync flag.
    Read,
    /// SYNC, or a read with the sync flag.
    Sync,
    /// STATUS, DIGEST, GET_CONFIG, SHOW FRONTENDS, SHOW MEMBERS.
    Admin,
}

impl RequestClass {
    /// Every class, in label order.
    pub const ALL: [RequestClass; 4] = [
        RequestClass::Write,
        RequestClass::Read,
        RequestClass::Sync,
        RequestClass::Admin,
    ];

    /// The class of `body`.
    pub fn of(body: &RequestBody) -> RequestClass {
        match body {
            RequestBody::Write(_) | RequestBody::ChangeMembership(_) => RequestClass::Write,
            RequestBody::Sync => RequestClass::Sync,
            RequestBody::Status
            | RequestBody::GetConfig
            | RequestBody::RecoveryInfo
            | RequestBody::Digest(_)
            | RequestBody::ShowFrontends(_)
            | RequestBody::ShowMembers(_)
            | RequestBody::Backup(_)
            | RequestBody::Auth(_) => RequestClass::Admin,
            RequestBody::TransferLeader { .. } => RequestClass::Admin,
            other => {
                if other.read_options().is_some_and(|o| o.sync) {
                    RequestClass::Sync
                } else {
                    RequestClass::Read
                }
            }
        }
    }

    /// The `class` label.
    pub fn label(self) -> &'static str {
        match self {
            RequestClass::Write => "write",
            RequestClass::Read => "read",
            RequestClass::Sync => "sync",
            RequestClass::Admin => "admin",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The latency buckets, µs: the node's (50 µs to 10 s), so fe-meta's and zab-net's
/// histograms compare bucket by bucket.
pub use zab_net::metrics::LATENCY_BUCKETS_US;

/// One class's resolved counters (index 0: `OK`, then `Status::ALL` in order) and histogram.
#[derive(Debug)]
struct ClassMetrics {
    outcomes: Vec<IntCounter>,
    latency_us: Histogram,
}

/// fe-meta's metrics (module docs).
#[derive(Debug)]
pub struct FeMetrics {
    classes: Vec<ClassMetrics>,
    /// Framed client connections open.
    pub open_connections: IntGauge,
    /// Client connections refused by the client port's TLS.
    pub client_tls_refused: IntCounter,
    /// Requests received and not yet answered.
    pub outstanding: IntGauge,
    applied_journal_id: IntGauge,
    staleness_ms: IntGauge,
    catalog_entries: IntGauge,
    last_timestamp_ms: IntGauge,
    timestamps_applied: IntCounter,
    fatal: IntGauge,
    server_threads: IntGauge,
    server_busy_seconds: prometheus::Counter,
    /// By [`Refusal::ALL`]' order.
    auth_refusals: Vec<IntCounter>,
}

/// What [`FeMetrics::refresh`] mirrors into the gauges.
#[derive(Clone, Copy, Debug, Default)]
pub struct StateGauges {
    /// The last applied journal id.
    pub applied_journal_id: u64,
    /// The staleness, ms (`None`: unknown).
    pub staleness_ms: Option<u64>,
    /// Catalog entries.
    pub catalog_entries: u64,
    /// The last applied TIMESTAMP's leader clock, Unix ms (0: none).
    pub last_timestamp_ms: u64,
    /// TIMESTAMP entries applied since the start.
    pub timestamps_applied: u64,
    /// Whether the node stopped on a fatal error.
    pub fatal: bool,
    /// The runtime's threads.
    pub server_threads: usize,
    /// Their busy time so far, summed.
    pub server_busy: Duration,
}

fn gauge(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntGauge> {
    let g = IntGauge::with_opts(Opts::new(name, help))?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

/// The per-class request counters and histograms, resolved (INV-1) and registered, and the
/// process collector.
fn class_metrics(registry: &Registry) -> prometheus::Result<Vec<ClassMetrics>> {
    let requests = IntCounterVec::new(
        Opts::new(
            "fe_meta_requests_total",
            "Client requests answered, by class (write, read, sync, admin) and outcome \
             status (OK or the error status)",
        ),
        &["class", "status"],
    )?;
    let latency = HistogramVec::new(
        HistogramOpts::new(
            "fe_meta_request_duration_us",
            "Time from decoding a client request to queueing its answer, in microseconds, \
             by class",
        )
        .buckets(LATENCY_BUCKETS_US.to_vec()),
        &["class"],
    )?;
    let classes = RequestClass::ALL
        .iter()
        .map(|class| {
            let c = class.label();
            let mut outcomes = vec![requests.get_metric_with_label_values(&[c, "OK"])?];
            for status in Status::ALL {
                outcomes.push(requests.get_metric_with_label_values(&[c, status.name()])?);
            }
            let latency_us = latency.get_metric_with_label_values(&[c])?;
            Ok(ClassMetrics {
                outcomes,
                latency_us,
            })
        })
        .collect::<prometheus::Result<Vec<_>>>()?;
    registry.register(Box::new(requests))?;
    registry.register(Box::new(latency))?;
    #[cfg(target_os = "linux")]
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    Ok(classes)
}

/// The refusal counters, resolved per reason (INV-1) and registered.
fn auth_refusals(registry: &Registry) -> prometheus::Result<Vec<IntCounter>> {
    let refusals = IntCounterVec::new(
        Opts::new(
            "fe_meta_auth_refusals_total",
            "Client requests refused: no identity, bad credentials (both UNAUTHENTICATED, the \
             connection is closed) or a role that does not allow them (PERMISSION_DENIED)",
        ),
        &["reason"],
    )?;
    let resolved = Refusal::ALL
        .iter()
        .map(|r| refusals.get_metric_with_label_values(&[r.label()]))
        .collect::<prometheus::Result<Vec<_>>>()?;
    registry.register(Box::new(refusals))?;
    Ok(resolved)
}

fn counter(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl FeMetrics {
    /// Registers the metrics in the registry of the node `opts` starts (made there if the
    /// embedder gave none).
    pub fn in_node_registry(opts: &mut NodeOptions) -> prometheus::Result<Arc<FeMetrics>> {
        let registry = opts.metrics_registry.get_or_insert_with(Registry::new);
        FeMetrics::new(registry).map(Arc::new)
    }

    /// Registers fe-meta's metrics and the process collector in `registry` and resolves every
    /// labelled child (INV-1). Fails if a name is registered there already.
    pub fn new(registry: &Registry) -> prometheus::Result<FeMetrics> {
        let classes = class_metrics(registry)?;
        let gauges = |name: &str, help: &str| gauge(registry, name, help);
        Ok(FeMetrics {
            classes,
            open_connections: gauges("fe_meta_open_connections", "Framed client connections open")?,
            client_tls_refused: counter(
                registry,
                "fe_meta_client_tls_refused_total",
                "Client connections refused by the client port's TLS handshake",
            )?,
            outstanding: gauges(
                "fe_meta_outstanding_requests",
                "Client requests received and not yet answered",
            )?,
            applied_journal_id: gauges(
                "fe_meta_applied_journal_id",
                "The last journal id (zxid) applied to this node's catalog",
            )?,
            staleness_ms: gauges(
                "fe_meta_staleness_ms",
                "How far this node's catalog lags the leader's clock, ms (0 on the serving \
                 leader, -1 when unknown)",
            )?,
            catalog_entries: gauges("fe_meta_catalog_entries", "Entries in this node's catalog")?,
            last_timestamp_ms: gauges(
                "fe_meta_last_timestamp_ms",
                "The leader clock (Unix ms) of the last TIMESTAMP entry applied here; 0: none",
            )?,
            timestamps_applied: counter(
                registry,
                "fe_meta_timestamps_applied_total",
                "TIMESTAMP entries applied since the process started",
            )?,
            fatal: gauges(
                "fe_meta_fatal",
                "1 once the node stopped on a fatal error (the process is exiting)",
            )?,
            server_threads: gauges(
                "fe_meta_server_threads",
                "Threads of the runtime that runs the server's tasks (server_threads)",
            )?,
            server_busy_seconds: {
                let c = prometheus::Counter::new(
                    "fe_meta_server_busy_seconds_total",
                    "Time the server's runtime threads spent running tasks, summed over them",
                )?;
                registry.register(Box::new(c.clone()))?;
                c
            },
            auth_refusals: auth_refusals(registry)?,
        })
    }

    /// Counts one answered request of `class` with outcome `status` (`None`: OK) that took
    /// `took` (INV-1: atomics only).
    pub fn observe(&self, class: RequestClass, status: Option<Status>, took: Duration) {
        let Some(c) = self.classes.get(class.index()) else {
            return;
        };
        let slot = status.map_or(0, |s| {
            Status::ALL
                .iter()
                .position(|x| *x == s)
                .map_or(0, |i| i + 1)
        });
        if let Some(counter) = c.outcomes.get(slot) {
            counter.inc();
        }
        c.latency_us.observe(took.as_secs_f64() * 1e6);
    }

    /// Counts one request refused for `refusal` (INV-1: atomics only).
    pub fn auth_refused(&self, refusal: Refusal) {
        let slot = Refusal::ALL.iter().position(|r| *r == refusal);
        if let Some(counter) = slot.and_then(|i| self.auth_refusals.get(i)) {
            counter.inc();
        }
    }

    /// How many requests were refused for `refusal`.
    pub fn auth_refusals(&self, refusal: Refusal) -> u64 {
        let slot = Refusal::ALL.iter().position(|r| *r == refusal);
        slot.and_then(|i| self.auth_refusals.get(i))
            .map_or(0, IntCounter::get)
    }

    /// Sets the state gauges (INV-2).
    pub fn refresh(&self, s: &StateGauges) {
        self.applied_journal_id.set(clamp(s.applied_journal_id));
        self.staleness_ms.set(s.staleness_ms.map_or(-1, clamp));
        self.catalog_entries.set(clamp(s.catalog_entries));
        self.last_timestamp_ms.set(clamp(s.last_timestamp_ms));
        let counted = self.timestamps_applied.get();
        if s.timestamps_applied > counted {
            self.timestamps_applied
                .inc_by(s.timestamps_applied - counted);
        }
        self.fatal.set(i64::from(s.fatal));
        self.server_threads
            .set(i64::try_from(s.server_threads).unwrap_or(i64::MAX));
        let busy = s.server_busy.as_secs_f64() - self.server_busy_seconds.get();
        if busy > 0.0 {
            self.server_busy_seconds.inc_by(busy);
        }
    }

    /// The histogram of `class` (tests and the text words read counts from it).
    pub fn latency(&self, class: RequestClass) -> Option<&Histogram> {
        self.classes.get(class.index()).map(|c| &c.latency_us)
    }
}

/// Every counter and gauge sample of `registry` as `name{labels}` → value, and every
/// histogram's `_count` and `_sum`, sorted by name: what `mntr` lists.
pub fn gather_flat(registry: &Registry) -> Vec<(String, String)> {
    use prometheus::proto::MetricType;
    let mut out = Vec::new();
    for family in registry.gather() {
        let name = family.name();
        for m in family.get_metric() {
            let labels: Vec<String> = m
                .get_label()
                .iter()
                .map(|l| format!("{}=\"{}\"", l.name(), l.value()))
                .collect();
            let key = |suffix: &str| {
                if labels.is_empty() {
                    format!("{name}{suffix}")
                } else {
                    format!("{name}{suffix}{{{}}}", labels.join(","))
                }
            };
            match family.get_field_type() {
                MetricType::COUNTER => {
                    out.push((key(""), number(m.get_counter().get_value())));
                }
                MetricType::GAUGE => out.push((key(""), number(m.get_gauge().get_value()))),
                MetricType::HISTOGRAM => {
                    let h = m.get_histogram();
                    out.push((key("_count"), h.get_sample_count().to_string()));
                    out.push((key("_sum"), number(h.get_sample_sum())));
                }
                // Nothing in the registry is untyped.
                MetricType::UNTYPED => {}
                MetricType::SUMMARY => {
                    let s = m.get_summary();
                    out.push((key("_count"), s.sample_count().to_string()));
                    out.push((key("_sum"), number(s.sample_sum())));
                }
            }
        }
    }
    out
}

/// A sample value as text: integers without a fraction.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_class_and_status_is_resolved_and_counted_where_it_belongs() {
        let registry = Registry::new();
        let m = FeMetrics::new(&registry).unwrap();
        m.observe(RequestClass::Write, None, Duration::from_micros(120));
        m.observe(
            RequestClass::Read,
            Some(Status::Stale),
            Duration::from_millis(3),
        );
        m.refresh(&StateGauges {
            applied_journal_id: 0x1_0000_0005,
            staleness_ms: None,
            catalog_entries: 7,
            last_timestamp_ms: 0,
            timestamps_applied: 3,
            fatal: false,
            server_threads: 2,
            server_busy: Duration::from_millis(1500),
        });
        let flat: std::collections::BTreeMap<_, _> = gather_flat(&registry).into_iter().collect();
        assert_eq!(
            flat["fe_meta_requests_total{class=\"write\",status=\"OK\"}"],
            "1"
        );
        assert_eq!(
            flat["fe_meta_requests_total{class=\"read\",status=\"STALE\"}"],
            "1"
        );
        assert_eq!(
            flat["fe_meta_requests_total{class=\"sync\",status=\"TIMEOUT\"}"],
            "0"
        );
        assert_eq!(
            flat["fe_meta_request_duration_us_count{class=\"write\"}"],
            "1"
        );
        assert_eq!(
            flat["fe_meta_request_duration_us_sum{class=\"read\"}"],
            "3000"
        );
        assert_eq!(flat["fe_meta_staleness_ms"], "-1");
        assert_eq!(flat["fe_meta_applied_journal_id"], "4294967301");
        assert_eq!(flat["fe_meta_catalog_entries"], "7");
        assert_eq!(flat["fe_meta_timestamps_applied_total"], "3");
        assert_eq!(flat["fe_meta_server_threads"], "2");
        assert_eq!(flat["fe_meta_server_busy_seconds_total"], "1.5");
        assert!(m.latency(RequestClass::Admin).is_some());
    }

    #[test]
    fn registering_twice_in_one_registry_fails() {
        let registry = Registry::new();
        FeMetrics::new(&registry).unwrap();
        assert!(FeMetrics::new(&registry).is_err());
    }

    #[test]
    fn classes_of_requests() {
        use crate::protocol::ReadOptions;
        assert_eq!(RequestClass::of(&RequestBody::Sync), RequestClass::Sync);
        assert_eq!(RequestClass::of(&RequestBody::Status), RequestClass::Admin);
        let plain = ReadOptions { sync: false };
        let synced = ReadOptions { sync: true };
        assert_eq!(
            RequestClass::of(&RequestBody::ShowDatabases(plain)),
            RequestClass::Read
        );
        assert_eq!(
            RequestClass::of(&RequestBody::ShowDatabases(synced)),
            RequestClass::Sync
        );
    }
}
