//! A short tour of tenure, run by `make demo`: leases that expire on time, a renewed lease,
//! TTL keys that vanish with their lease, a watch, and recovery after close and reopen.

use std::time::{Duration, Instant};

use tenure::{EventKind, Tenure, WatchOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tenure-tour-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("tour.tenure");
    let t0 = Instant::now();
    let at = || format!("[{:>6.3}s]", t0.elapsed().as_secs_f64());

    println!("tenure {} — opening {}", tenure::VERSION, path.display());
    let db = Tenure::open(&path)?;
    let expired = db.expired();

    // A watch on every key under "svc/": prints puts and the deletes caused by expiry.
    let mut watcher = db.watch(
        "svc/",
        WatchOptions {
            prefix: true,
            ..Default::default()
        },
    )?;
    let printer = std::thread::spawn(move || {
        for event in watcher.by_ref() {
            let Ok(ev) = event else { break };
            let kind = match ev.kind {
                EventKind::Put => "PUT   ",
                EventKind::Delete => "DELETE",
            };
            println!(
                "          watch: {kind} {} @ revision {}",
                String::from_utf8_lossy(&ev.kv.key),
                ev.revision()
            );
        }
    });

    let short = db.grant(Duration::from_millis(800))?;
    let medium = db.grant(Duration::from_millis(1600))?;
    let kept = db.grant(Duration::from_millis(1200))?;
    let durable = db.grant(Duration::from_secs(3600))?;
    println!("{} granted leases {short} (0.8 s), {medium} (1.6 s), {kept} (1.2 s, will be renewed), {durable} (1 h)", at());
    db.put("svc/api", "10.0.0.1:8080", Some(short))?;
    db.put("svc/db", "10.0.0.2:5432", Some(medium))?;
    db.put("svc/cache", "10.0.0.3:6379", Some(kept))?;
    db.put("config/region", "eu-west", Some(durable))?;

    // Keep one lease alive by renewing it; the others expire on time, keys and all.
    let ka = db.keep_alive(kept, Some(Duration::from_millis(400)))?;
    let mut seen = 0;
    while seen < 2 {
        for lease in expired.recv_timeout(Duration::from_secs(10))? {
            let keys: Vec<_> = lease
                .keys
                .iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect();
            println!(
                "{} lease {} expired (ttl {:?}); deleted keys {keys:?}",
                at(),
                lease.id,
                lease.ttl
            );
            seen += 1;
        }
    }
    let info = db.time_to_live(kept)?;
    println!(
        "{} lease {kept} is still alive thanks to keep-alive: {:?} left, keys {:?}",
        at(),
        info.remaining.unwrap_or_default(),
        info.keys
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect::<Vec<_>>()
    );
    ka.stop();

    let s = db.stats();
    println!(
        "{} stats: granted {} expired {} renewed {} live leases {} keys {} revision {} commits {}",
        at(),
        s.granted,
        s.expired,
        s.renewed,
        s.leases,
        s.keys,
        s.revision,
        s.commits
    );
    db.close()?;
    printer.join().ok();
    println!("{} closed; reopening…", at());

    let db = Tenure::open(&path)?;
    println!(
        "{} recovered revision {} with {} leases:",
        at(),
        db.revision(),
        db.leases().len()
    );
    for l in db.leases() {
        let keys: Vec<_> = l
            .keys
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        println!(
            "          lease {} ttl {:?} remaining {:?} keys {keys:?}",
            l.id,
            l.ttl,
            l.remaining.unwrap_or_default()
        );
    }
    for kv in db.range("", None)? {
        println!(
            "          key {} = {} (lease {:?})",
            String::from_utf8_lossy(&kv.key),
            String::from_utf8_lossy(&kv.value),
            kv.lease.map(|l| l.get())
        );
    }
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    println!("{} done", at());
    Ok(())
}
