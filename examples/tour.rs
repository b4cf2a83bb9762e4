//! A short tour of tenure, run by `make demo`: leases that expire on time while a renewed one
//! lives on, TTL keys that vanish with their lease, a watch, a lock handed from one worker to
//! another, a leader failover after a crash, and recovery after close and reopen.

use std::time::{Duration, Instant};

use tenure::sync::{Election, FenceGate, Mutex, Session, SessionOptions};
use tenure::{EventKind, Tenure, WatchOptions};

/// Every duration of the tour is printed this one way: `800 ms`, `1.6 s`, `3597 s`.
fn human(d: Duration) -> String {
    match d.as_millis() {
        ms @ 0..1000 => format!("{ms} ms"),
        1000..100_000 => {
            let s = format!("{:.2}", d.as_secs_f64());
            format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => format!("{} s", d.as_secs()),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tenure-tour-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("tour.tenure");
    let start = Instant::now();
    let at = || format!("[{:>8}]", human(start.elapsed()));

    println!("tenure {}: a tour, in {}", tenure::VERSION, path.display());
    let db = Tenure::open(&path)?;

    println!("\n1. Leases and TTL keys");
    let prefix = WatchOptions {
        prefix: true,
        ..Default::default()
    };
    let mut watcher = db.watch("svc/", prefix.clone())?;
    let expired = db.expired()?;
    let services = [
        ("svc/api", "10.0.0.1:8080", Duration::from_millis(800)),
        ("svc/db", "10.0.0.2:5432", Duration::from_millis(1600)),
        ("svc/cache", "10.0.0.3:6379", Duration::from_millis(1200)),
    ];
    let mut leases = Vec::new();
    for (key, addr, ttl) in services {
        let lease = db.grant(ttl)?;
        db.put(key, addr, Some(lease))?;
        println!(
            "{} {key} registered on lease {lease}, which lives {}",
            at(),
            human(ttl)
        );
        leases.push(lease);
    }
    let config = db.grant(Duration::from_secs(3600))?;
    db.put("config/region", "eu-west", Some(config))?;
    println!(
        "{} config/region stored on lease {config}, which lives {}",
        at(),
        human(Duration::from_secs(3600))
    );
    let cache = leases[2];
    let renewing = db.keep_alive(cache, Some(Duration::from_millis(400)))?;
    println!(
        "{} lease {cache} is renewed every 400 ms; the others are left to expire",
        at()
    );
    let mut gone = 0;
    while gone < 2 {
        for lease in expired.recv_timeout(Duration::from_secs(10))? {
            let keys: Vec<_> = lease.keys.iter().map(|k| text(k)).collect();
            println!(
                "{} lease {} expired after {}: {} deleted with it",
                at(),
                lease.id,
                human(lease.ttl),
                keys.join(", ")
            );
            gone += 1;
        }
    }
    let info = db.time_to_live(cache)?;
    println!(
        "{} lease {cache} is still alive, {} left; it holds {}",
        at(),
        human(info.remaining.unwrap_or_default()),
        info.keys
            .iter()
            .map(|k| text(k))
            .collect::<Vec<_>>()
            .join(", ")
    );
    renewing.stop();
    let mut seen = Vec::new();
    while let Some(ev) = watcher.try_recv()? {
        let kind = match ev.kind {
            EventKind::Put => "put",
            EventKind::Delete => "delete",
        };
        seen.push(format!("{kind} {}", text(&ev.kv.key)));
    }
    println!("           the watch on svc/ saw: {}", seen.join(", "));

    println!("\n2. A lock handed over");
    let options = SessionOptions {
        ttl: Duration::from_secs(1),
        ..Default::default()
    };
    let worker_a = Session::new(&db, options.clone())?;
    let worker_b = Session::new(&db, options.clone())?;
    let storage = FenceGate::new(); // what the guarded resource keeps
    let held = Mutex::new(&worker_a, "jobs/nightly").lock(None)?;
    let token_a = held.fencing_token();
    storage.admit(token_a)?;
    println!(
        "{} worker-a holds jobs/nightly, fencing token {token_a}",
        at()
    );
    let mut queue = db.watch("jobs/nightly/", prefix.clone())?;
    let b = worker_b.clone();
    let waiting = std::thread::spawn(move || Mutex::new(&b, "jobs/nightly").lock(None));
    queue.recv_timeout(Duration::from_secs(10))?; // worker-b's place in the queue
    println!("{} worker-b queues for jobs/nightly", at());
    held.unlock()?;
    let held = waiting.join().expect("worker-b")?;
    let token_b = held.fencing_token();
    storage.admit(token_b)?;
    println!(
        "{} worker-a unlocked; worker-b holds jobs/nightly, fencing token {token_b}",
        at()
    );
    if let Err(e) = storage.admit(token_a) {
        println!("{} a late write from worker-a is refused: {e}", at());
    }
    held.unlock()?;

    println!("\n3. A leader failover");
    let host_a = Session::new(&db, options.clone())?;
    let host_b = Session::new(&db, options)?;
    let _leading = Election::new(&host_a, "svc/scheduler").campaign("host-a", None)?;
    println!("{} host-a leads svc/scheduler", at());
    let b = host_b.clone();
    let campaign =
        std::thread::spawn(move || Election::new(&b, "svc/scheduler").campaign("host-b", None));
    let crashed = Instant::now();
    host_a.orphan(); // a crash: nobody renews host-a's lease any more
    println!(
        "{} host-a crashes: its session's 1 s lease is no longer renewed",
        at()
    );
    let leadership = campaign.join().expect("host-b")?;
    println!(
        "{} host-b leads svc/scheduler, {} after the crash (token {})",
        at(),
        human(crashed.elapsed()),
        leadership.fencing_token()
    );
    host_b.close()?;
    worker_a.close()?;
    worker_b.close()?;
    let s = db.stats();
    println!(
        "{} so far: {} leases granted, {} expired, {} renewals, {} commits",
        at(),
        s.granted,
        s.expired,
        s.renewed,
        s.commits
    );

    db.close()?;
    println!("\n4. Recovery");
    let db = Tenure::open(&path)?;
    println!(
        "{} closed and reopened at revision {}",
        at(),
        db.revision().unwrap()
    );
    for l in db.leases().unwrap() {
        println!(
            "           lease {} ({} TTL, {} left) still holds {}",
            l.id,
            human(l.ttl),
            human(l.remaining.unwrap_or_default()),
            l.keys
                .iter()
                .map(|k| text(k))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    println!("\ndone in {}", human(start.elapsed()));
    Ok(())
}
