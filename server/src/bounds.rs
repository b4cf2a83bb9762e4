//! The flags bounding what one client can make `tenure serve` hold (SPEC E16) that are not
//! `--max-connections`, `--max-request-bytes` or the watch bounds: connection setup time,
//! keep-alive of idle connections, and the snapshots in progress.

use std::time::Duration;

use crate::snapshot_budget::{DEFAULT_MAX_SNAPSHOTS, DEFAULT_MAX_SNAPSHOT_DISK_BYTES};

/// Parses `10s`, `500ms`, `2m`, `2h` (etcd's flags' style, whole numbers).
fn duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}: expected e.g. 500ms, 10s, 2m or 2h");
    let at = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let n: u64 = s[..at].parse().map_err(|_| bad())?;
    let d = match &s[at..] {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(bad()),
    };
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be more than 0"));
    }
    Ok(d)
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct Bounds {
    /// How long a new connection has to finish its TLS handshake and send the HTTP/2 preface;
    /// one that has not is closed (it holds a --max-connections slot until then)
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub(crate) connection_setup_timeout: Duration,
    /// After this long without a frame from a client, the server pings it (etcd's flag and
    /// default)
    #[arg(long, value_name = "DURATION", default_value = "2h", value_parser = duration)]
    pub(crate) grpc_keepalive_interval: Duration,
    /// A client that does not answer that ping within this long is disconnected (etcd's flag
    /// and default)
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = duration)]
    pub(crate) grpc_keepalive_timeout: Duration,
    /// Most Snapshot streams in progress at once (each holds a copy of the database on disk);
    /// more are refused
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SNAPSHOTS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_snapshots: u32,
    /// Most bytes of disk the copies of the Snapshot streams in progress hold; a snapshot that
    /// would pass it is refused
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_SNAPSHOT_DISK_BYTES)]
    pub(crate) max_snapshot_disk_bytes: u64,
    /// A Snapshot stream whose client takes no chunk for this long ends (with an error),
    /// giving back its copy's disk
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub(crate) snapshot_read_timeout: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e16_durations_read_as_etcd_writes_them() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "10", "s", "0s", "1.5s", "-1s", "10x"] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }
}
