//! What the engine measures beyond `Stats` (SPEC L16): latency and size histograms recorded
//! with atomics on the paths that already run (no lock, no allocation per sample), and the
//! Prometheus text export of both, written here so the embedded crate needs no metrics crate.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::alarms::{Alarm, AlarmKind};
use crate::types::Stats;

/// Upper bounds (in seconds) of the latency buckets: 100 µs to 10 s, as Prometheus' defaults
/// start too coarse for an fsync.
const LATENCY_BOUNDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
/// Upper bounds of the group-commit size buckets (writes per commit).
const SIZE_BOUNDS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0,
];

/// A histogram fed from any thread: one atomic add per sample into its bucket, one into the
/// sum. Samples are integers: nanoseconds for latencies, counts for sizes (`scale` turns them
/// into the exported unit).
pub(crate) struct Histogram {
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last is +Inf.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
    /// Exported value of one sample unit (1e-9 for nanoseconds → seconds).
    scale: f64,
}

impl Histogram {
    /// A latency histogram in seconds, fed nanoseconds.
    pub(crate) fn latency() -> Histogram {
        Histogram::new(LATENCY_BOUNDS, 1e-9)
    }

    /// A size histogram, fed counts.
    pub(crate) fn sizes() -> Histogram {
        Histogram::new(SIZE_BOUNDS, 1.0)
    }

    fn new(bounds: &'static [f64], scale: f64) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            scale,
        }
    }

    /// Records one sample in the histogram's integer unit.
    pub(crate) fn record(&self, value: u64) {
        let v = value as f64 * self.scale;
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    pub(crate) fn record_duration(&self, d: Duration) {
        self.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        HistogramSnapshot {
            bounds: self.bounds.to_vec(),
            count: counts.iter().sum(),
            counts,
            sum: self.sum.load(Ordering::Relaxed) as f64 * self.scale,
        }
    }
}

/// One histogram's state at a moment (read bucket by bucket: under load its sum and buckets may
/// differ by the samples recorded meanwhile).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct HistogramSnapshot {
    /// The buckets' upper bounds (inclusive), ascending; a last bucket, +Inf, follows them.
    pub bounds: Vec<f64>,
    /// Samples per bucket (not cumulative): `bounds.len() + 1` entries.
    pub counts: Vec<u64>,
    /// Sum of the samples (seconds for latencies).
    pub sum: f64,
    /// Number of samples.
    pub count: u64,
}

/// Everything the engine measures (SPEC L16): `Stats` and the histograms. Over `connect` the
/// histograms are empty (the server exports its own at `/metrics`).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Metrics {
    /// The counters and gauges.
    pub stats: Stats,
    /// How late the expiry thread expired each lease past its deadline, in seconds.
    pub expiry_lateness: HistogramSnapshot,
    /// How long each group commit took to make its batch durable, in seconds.
    pub commit_duration: HistogramSnapshot,
    /// How long each fsync of the file or its log took, in seconds (with the log on a file
    /// system that takes `O_DIRECT`, a synchronous write counts as one).
    pub fsync_duration: HistogramSnapshot,
    /// Writes made durable by each group commit.
    pub commit_writes: HistogramSnapshot,
    /// The space quota in bytes (`Builder::quota_backend_bytes`, SPEC E20); 0: none set, and
    /// over `connect` (the server's is not known to a client).
    pub quota_backend_bytes: u64,
    /// The raised alarms (SPEC E20), as [`Tenure::alarms`](crate::Tenure::alarms) lists them
    /// (over `connect`, the server's; none if it cannot be asked).
    pub alarms: Vec<Alarm>,
}

/// The engine's histograms, in its shared state.
pub(crate) struct Recorders {
    pub(crate) expiry_lateness: Histogram,
    pub(crate) commit_duration: Histogram,
    pub(crate) commit_writes: Histogram,
}

impl Default for Recorders {
    fn default() -> Recorders {
        Recorders {
            expiry_lateness: Histogram::latency(),
            commit_duration: Histogram::latency(),
            commit_writes: Histogram::sizes(),
        }
    }
}

impl Metrics {
    /// The Prometheus text exposition format (version 0.0.4) of every figure, each name
    /// prefixed `tenure_`; the same names `tenure serve` exports at `/metrics`.
    pub fn to_prometheus(&self) -> String {
        let s = &self.stats;
        let mut out = String::with_capacity(4096);
        let counters: [(&str, &str, u64); 8] = [
            (
                "leases_granted_total",
                "Leases granted since open.",
                s.granted,
            ),
            (
                "leases_revoked_total",
                "Leases revoked by a call since open.",
                s.revoked,
            ),
            (
                "leases_renewed_total",
                "Successful lease renewals since open.",
                s.renewed,
            ),
            (
                "leases_expired_total",
                "Leases that reached their deadline since open.",
                s.expired,
            ),
            ("commits_total", "Storage commits since open.", s.commits),
            ("fsyncs_total", "Storage fsyncs since open.", s.fsyncs),
            (
                "expired_batches_dropped_total",
                "Expired-lease batches dropped because nobody drained the queue.",
                s.expired_dropped,
            ),
            (
                "watchers_registered",
                "Watchers registered now.",
                s.watchers,
            ),
        ];
        for (name, help, value) in counters {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            header(&mut out, name, help, kind);
            let _ = writeln!(out, "tenure_{name} {value}");
        }
        let gauges: [(&str, &str, i64); 3] = [
            ("leases", "Live leases now.", s.leases as i64),
            ("keys", "Live keys now.", s.keys as i64),
            ("revision", "The current store revision.", s.revision),
        ];
        for (name, help, value) in gauges {
            header(&mut out, name, help, "gauge");
            let _ = writeln!(out, "tenure_{name} {value}");
        }
        let histograms = [
            (
                "expiry_lateness_seconds",
                "How late each lease expired past its deadline.",
                &self.expiry_lateness,
            ),
            (
                "commit_duration_seconds",
                "How long each group commit took to make its batch durable.",
                &self.commit_duration,
            ),
            (
                "fsync_duration_seconds",
                "How long each fsync of the file or its log took.",
                &self.fsync_duration,
            ),
            (
                "commit_writes",
                "Writes made durable by each group commit.",
                &self.commit_writes,
            ),
        ];
        for (name, help, h) in histograms {
            header(&mut out, name, help, "histogram");
            write_histogram(&mut out, &format!("tenure_{name}"), h);
        }
        self.write_quota(&mut out);
        out
    }

    /// The quota and the NOSPACE alarm under the names `tenure serve`'s `/metrics` gives them
    /// (SPEC E24): etcd's quota gauge, and tenure's own for the alarm (etcd has none).
    fn write_quota(&self, out: &mut String) {
        let nospace = self.alarms.iter().any(|a| a.kind == AlarmKind::NoSpace);
        for (name, help, value) in [
            (
                "etcd_server_quota_backend_bytes",
                "Current backend storage quota size in bytes.",
                self.quota_backend_bytes,
            ),
            (
                "tenure_server_alarm_nospace",
                "1 while a NOSPACE alarm is raised (writes that need room are refused), else 0.",
                u64::from(nospace),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        }
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP tenure_{name} {help}");
    let _ = writeln!(out, "# TYPE tenure_{name} {kind}");
}

/// Writes `h` as Prometheus' cumulative `_bucket{le=…}`, `_sum` and `_count` lines.
pub fn write_histogram(out: &mut String, name: &str, h: &HistogramSnapshot) {
    let mut cumulative = 0u64;
    for (i, b) in h.bounds.iter().enumerate() {
        cumulative += h.counts.get(i).copied().unwrap_or(0);
        let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
    }
    // Always present, even for an empty snapshot (over `connect`).
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum {}", h.sum);
    let _ = writeln!(out, "{name}_count {}", h.count);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l16_a_sample_lands_in_the_first_bucket_that_holds_it() {
        let h = Histogram::latency();
        h.record_duration(Duration::from_micros(50)); // ≤ 100 µs
        h.record_duration(Duration::from_micros(100)); // = 100 µs, inclusive
        h.record_duration(Duration::from_millis(3)); // ≤ 5 ms
        h.record_duration(Duration::from_secs(60)); // +Inf
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.counts[0], 2);
        assert_eq!(
            s.counts[LATENCY_BOUNDS.iter().position(|&b| b == 0.005).unwrap()],
            1
        );
        assert_eq!(s.counts[LATENCY_BOUNDS.len()], 1);
        assert!((s.sum - 60.00315).abs() < 1e-9, "{}", s.sum);
    }

    #[test]
    fn l16_the_text_export_has_cumulative_buckets_and_every_counter() {
        let h = Histogram::sizes();
        for n in [1, 3, 3, 100] {
            h.record(n);
        }
        let m = Metrics {
            stats: Stats {
                granted: 7,
                keys: 2,
                revision: 9,
                ..Stats::default()
            },
            commit_writes: h.snapshot(),
            ..Metrics::default()
        };
        let text = m.to_prometheus();
        for line in [
            "tenure_leases_granted_total 7",
            "tenure_keys 2",
            "tenure_revision 9",
            "# TYPE tenure_commit_writes histogram",
            "tenure_commit_writes_bucket{le=\"1\"} 1",
            "tenure_commit_writes_bucket{le=\"4\"} 3",
            "tenure_commit_writes_bucket{le=\"128\"} 4",
            "tenure_commit_writes_bucket{le=\"+Inf\"} 4",
            "tenure_commit_writes_sum 107",
            "tenure_commit_writes_count 4",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // An empty snapshot (over `connect`) still has its +Inf bucket.
        assert!(text.contains("tenure_fsync_duration_seconds_bucket{le=\"+Inf\"} 0\n"));
        // No quota, no alarm.
        assert!(
            text.contains("\netcd_server_quota_backend_bytes 0\n"),
            "{text}"
        );
        assert!(text.contains("\ntenure_server_alarm_nospace 0\n"), "{text}");
    }

    #[test]
    fn e24_the_text_export_has_the_quota_and_the_nospace_alarm() {
        let corrupt = Alarm {
            member: 1,
            kind: AlarmKind::Corrupt,
        };
        let mut m = Metrics {
            quota_backend_bytes: 65536,
            alarms: vec![corrupt],
            ..Metrics::default()
        };
        let text = m.to_prometheus();
        assert!(text.contains("\n# TYPE etcd_server_quota_backend_bytes gauge\n"));
        assert!(
            text.contains("\netcd_server_quota_backend_bytes 65536\n"),
            "{text}"
        );
        // Only NOSPACE counts.
        assert!(text.contains("\ntenure_server_alarm_nospace 0\n"), "{text}");
        m.alarms.push(Alarm {
            member: 2,
            kind: AlarmKind::NoSpace,
        });
        assert!(m
            .to_prometheus()
            .contains("\ntenure_server_alarm_nospace 1\n"));
    }
}
