//! `/metrics` (SPEC E18): Prometheus' text format (0.0.4) by `prometheus-client`. etcd's names
//! where a figure means the same thing (so dashboards and `etcdctl check datascale` work),
//! `tenure_` names for what tenure knows more of (the engine's histograms, L16). The engine's
//! figures are read at each scrape; the gRPC ones are kept by `metrics_grpc`.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tenure::{HistogramSnapshot, Tenure};

use crate::metrics_grpc::Grpc;

/// What `/metrics` shows: the registry (gRPC figures and the scrape-time collector).
pub(crate) struct Metrics {
    registry: Registry,
    pub(crate) grpc: Arc<Grpc>,
}

impl Metrics {
    pub(crate) fn new(db: Tenure) -> Metrics {
        let grpc = Arc::new(Grpc::new());
        let mut registry = Registry::default();
        registry.register(
            "grpc_server_started",
            "Total number of RPCs started on the server.",
            grpc.started.clone(),
        );
        registry.register(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            grpc.handled.clone(),
        );
        registry.register_collector(Box::new(Scraped {
            db,
            grpc: grpc.clone(),
        }));
        Metrics { registry, grpc }
    }

    /// The whole exposition. Reads the file's size: call it off the async threads.
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// The figures read at each scrape: the engine's, the process's, the in-flight calls'.
#[derive(Debug)]
struct Scraped {
    db: Tenure,
    grpc: Arc<Grpc>,
}

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Grpc")
    }
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

fn gauge_f(e: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

/// `name` without its `_total`: the encoder appends it to counters.
fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &HistogramSnapshot,
) -> std::fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    let mut buckets: Vec<(f64, u64)> = h
        .bounds
        .iter()
        .zip(&h.counts)
        .map(|(&b, &c)| (b, c))
        .collect();
    buckets.push((
        f64::INFINITY,
        h.counts.get(h.bounds.len()).copied().unwrap_or(0),
    ));
    m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(h.sum, h.count, &buckets, None)
}

/// Resident and virtual memory of this process in bytes, from /proc (Linux).
fn memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()
            .map(|k| k * 1024)
    };
    Some((kib("VmRSS:")?, kib("VmSize:")?))
}

impl Collector for Scraped {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let m = self.db.metrics();
        let s = m.stats;
        let e = &mut e;
        // etcd's names: one member that is always the leader.
        gauge(
            e,
            "etcd_server_has_leader",
            "Whether or not a leader exists. 1 is existence, 0 is not.",
            1,
        )?;
        gauge(
            e,
            "etcd_server_is_leader",
            "Whether or not this member is a leader. 1 if is, 0 otherwise.",
            1,
        )?;
        gauge(
            e,
            "etcd_server_leader_changes_seen_total",
            "The number of leader changes seen.",
            0,
        )?;
        // etcd's raft index is tenure's revision (Maintenance Status says the same, E6).
        for name in [
            "etcd_server_proposals_committed_total",
            "etcd_server_proposals_applied_total",
        ] {
            gauge(
                e,
                name,
                "The total number of consensus proposals committed (applied): the store revision.",
                s.revision,
            )?;
        }
        gauge(
            e,
            "etcd_server_proposals_pending",
            "The current number of pending proposals to commit.",
            0,
        )?;
        gauge(
            e,
            "etcd_debugging_mvcc_current_revision",
            "The current revision of store.",
            s.revision,
        )?;
        gauge(
            e,
            "etcd_debugging_mvcc_keys_total",
            "Total number of keys.",
            s.keys as i64,
        )?;
        gauge(
            e,
            "etcd_debugging_mvcc_watcher_total",
            "Total number of watchers.",
            s.watchers as i64,
        )?;
        let streams = self.grpc.in_flight("etcdserverpb.Watch", "Watch");
        gauge(
            e,
            "etcd_debugging_mvcc_watch_stream_total",
            "Total number of watch streams.",
            streams,
        )?;
        if let Ok(size) = self.db.storage_size() {
            for name in [
                "etcd_mvcc_db_total_size_in_bytes",
                "etcd_debugging_mvcc_db_total_size_in_bytes",
            ] {
                gauge(
                    e,
                    name,
                    "Total size of the underlying database physically allocated in bytes.",
                    size.file_bytes as i64,
                )?;
            }
            gauge(
                e,
                "etcd_mvcc_db_total_size_in_use_in_bytes",
                "Total size of the underlying database logically in use in bytes.",
                size.in_use_bytes as i64,
            )?;
        }
        // etcd's quota gauge (SPEC E20; 0: no quota) and tenure's NOSPACE indicator.
        gauge(
            e,
            "etcd_server_quota_backend_bytes",
            "Current backend storage quota size in bytes.",
            self.db
                .quota_backend_bytes()
                .ok()
                .flatten()
                .map_or(0, |q| q as i64),
        )?;
        let alarms = self.db.alarms().unwrap_or_default();
        gauge(
            e,
            "tenure_server_alarm_nospace",
            "1 while a NOSPACE alarm is raised (writes that need room are refused), else 0.",
            i64::from(alarms.iter().any(|a| a.kind == tenure::AlarmKind::NoSpace)),
        )?;
        counter(
            e,
            "etcd_debugging_lease_granted",
            "The total number of granted leases.",
            s.granted,
        )?;
        counter(
            e,
            "etcd_debugging_lease_revoked",
            "The total number of revoked leases.",
            s.revoked,
        )?;
        counter(
            e,
            "etcd_debugging_lease_renewed",
            "The number of renewed leases seen by the leader.",
            s.renewed,
        )?;
        counter(
            e,
            "etcd_debugging_server_lease_expired",
            "The total number of expired leases.",
            s.expired,
        )?;
        counter(
            e,
            "etcd_disk_backend_commit_total",
            "Storage commits since the server started (etcd exports only the histogram).",
            s.commits,
        )?;
        if let Some((rss, vm)) = memory() {
            gauge(
                e,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                rss as i64,
            )?;
            gauge(
                e,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                vm as i64,
            )?;
        }
        // tenure's own.
        gauge(e, "tenure_leases", "Live leases now.", s.leases as i64)?;
        counter(
            e,
            "tenure_fsyncs",
            "Storage fsyncs since the server started.",
            s.fsyncs,
        )?;
        counter(
            e,
            "tenure_expired_batches_dropped",
            "Expired-lease batches dropped because nobody drained the queue.",
            s.expired_dropped,
        )?;
        for (kind, service, method) in [
            ("lock", "v3lockpb.Lock", "Lock"),
            ("campaign", "v3electionpb.Election", "Campaign"),
        ] {
            let n = self.grpc.in_flight(service, method);
            gauge(
                e,
                &format!("tenure_server_pending_{kind}s"),
                &format!("{method} calls waiting now."),
                n,
            )?;
        }
        gauge_f(
            e,
            "tenure_up",
            "1 while the engine is open.",
            if self.db.is_closed() { 0.0 } else { 1.0 },
        )?;
        histogram(
            e,
            "tenure_expiry_lateness_seconds",
            "How late each lease expired past its deadline.",
            &m.expiry_lateness,
        )?;
        histogram(
            e,
            "tenure_commit_duration_seconds",
            "How long each group commit took to make its batch durable.",
            &m.commit_duration,
        )?;
        histogram(
            e,
            "tenure_fsync_duration_seconds",
            "How long each fsync of the file or its log took.",
            &m.fsync_duration,
        )?;
        histogram(
            e,
            "tenure_commit_writes",
            "Writes made durable by each group commit.",
            &m.commit_writes,
        )?;
        Ok(())
    }
}
