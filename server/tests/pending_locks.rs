//! Issue 23's acceptance for the lock service (SPEC E5): over a real `tenure serve`, 2 000 Lock
//! calls waiting on one name from one client (one channel) hold no server thread each, do not
//! slow writes, are served in their queue's order, and leave nothing behind when the client
//! drops them.
//!
//! `cargo test -p tenure-server --test pending_locks -- --nocapture` prints the figures.

mod common;

use std::time::{Duration, Instant};

use common::{temp_db, Server};
use etcd_client::{Client, GetOptions, LockOptions, SortOrder, SortTarget};

/// Lock calls pending at once.
const WAITERS: usize = 2_000;
/// Of those, how many are then served in turn; the client drops (cancels) the others.
const SERVED: usize = 200;
/// The server's thread count stays at or below this with every wait pending (it runs a tokio
/// worker per core, a few blocking threads for the puts, the engine's threads and the one
/// wait-pool thread; one thread per wait would be thousands).
const MAX_THREADS: usize = 48;
/// Puts in flight at once while measuring throughput.
const PUTTERS: usize = 8;
/// One measuring round on each server; `ROUNDS` pairs, alternating which server goes first.
const ROUND: Duration = Duration::from_millis(250);
const ROUNDS: usize = 12;
/// Put throughput with the waits pending, at least this share of it without them.
const MIN_SHARE: f64 = 0.9;
const WAIT: Duration = Duration::from_secs(120);

fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

async fn count(c: &mut Client, prefix: &str) -> i64 {
    c.get(
        prefix,
        Some(GetOptions::new().with_prefix().with_count_only()),
    )
    .await
    .unwrap()
    .count()
}

/// Waits until `prefix` holds `n` keys (each pending Lock puts one), within `WAIT`.
async fn until_count(c: &mut Client, prefix: &str, n: i64) {
    let until = Instant::now() + WAIT;
    loop {
        let now = count(c, prefix).await;
        if now == n {
            return;
        }
        assert!(Instant::now() < until, "{now} keys under {prefix}, not {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Puts per second over one round, `PUTTERS` at a time on `c`'s channel.
async fn put_rate(c: &Client) -> f64 {
    let started = Instant::now();
    let until = started + ROUND;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..PUTTERS {
        let mut c = c.clone();
        tasks.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < until {
                c.put(format!("load/{t}"), vec![b'v'; 64], None)
                    .await
                    .unwrap();
                n += 1;
            }
            n
        });
    }
    let mut puts = 0;
    while let Some(n) = tasks.join_next().await {
        puts += n.unwrap();
    }
    puts as f64 / started.elapsed().as_secs_f64()
}

/// Leases for `n` lock calls, granted a few at a time (the server's commits group them).
async fn grant(c: &Client, n: usize) -> Vec<i64> {
    let mut tasks = tokio::task::JoinSet::new();
    for part in 0..PUTTERS {
        let mut c = c.clone();
        let k = n / PUTTERS + usize::from(part < n % PUTTERS);
        tasks.spawn(async move {
            let mut ids = Vec::with_capacity(k);
            for _ in 0..k {
                ids.push(c.lease_grant(3_600, None).await.unwrap().id());
            }
            ids
        });
    }
    let mut ids = Vec::with_capacity(n);
    while let Some(part) = tasks.join_next().await {
        ids.extend(part.unwrap());
    }
    ids
}

async fn lock(c: &mut Client, lease: i64) -> Vec<u8> {
    c.lock("x", Some(LockOptions::new().with_lease(lease)))
        .await
        .unwrap()
        .key()
        .to_vec()
}

/// Put throughput is compared with a second, identical server that has no waits, in
/// alternating rounds: the load of a shared machine drifts, and both sides see the same drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e5_two_thousand_pending_lock_waits_hold_no_thread_and_do_not_slow_puts() {
    let started = Instant::now();
    let (_dir, db) = temp_db();
    let (_idle_dir, idle_db) = temp_db();
    let s = Server::start(&db, &[]);
    let idle = Server::start(&idle_db, &[]);
    let pid = s.child.id();
    let mut c = Client::connect([s.url()], None).await.unwrap();
    let mut ci = Client::connect([idle.url()], None).await.unwrap();
    let leases = grant(&c, WAITERS + 1).await;
    let holder = lock(&mut c, leases[0]).await;
    // The same leases and holder there: only the waits differ.
    let idle_leases = grant(&ci, WAITERS + 1).await;
    lock(&mut ci, idle_leases[0]).await;
    let granted = started.elapsed();

    // Every waiter on a clone of `c`: one channel, one HTTP/2 connection.
    let (served_tx, mut served) = tokio::sync::mpsc::unbounded_channel();
    let waiters: Vec<_> = leases[1..]
        .iter()
        .map(|&lease| {
            let mut c = c.clone();
            let served = served_tx.clone();
            tokio::spawn(async move {
                // An error ends the test elsewhere (a waiter not served, a key left behind).
                if let Ok(r) = c
                    .lock("x", Some(LockOptions::new().with_lease(lease)))
                    .await
                {
                    let _ = served.send(r.key().to_vec());
                }
            })
        })
        .collect();
    until_count(&mut c, "x/", WAITERS as i64 + 1).await;
    let queued = started.elapsed();
    let pending_threads = threads(pid);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        if r % 2 == 0 {
            with.push(put_rate(&c).await);
            without.push(put_rate(&ci).await);
        } else {
            without.push(put_rate(&ci).await);
            with.push(put_rate(&c).await);
        }
    }
    let putting_threads = threads(pid);
    let share = with.iter().sum::<f64>() / without.iter().sum::<f64>();
    println!(
        "{WAITERS} waits pending: {pending_threads} server threads ({putting_threads} while \
         putting); puts/s with them {with:.0?}, without {without:.0?}: {share:.3}; leases \
         granted in {granted:.1?}, waits queued {:.1?} later",
        queued - granted
    );
    assert!(
        pending_threads.max(putting_threads) <= MAX_THREADS,
        "{pending_threads} / {putting_threads} server threads with {WAITERS} pending waits \
         (at most {MAX_THREADS})"
    );
    assert!(
        share >= MIN_SHARE,
        "puts with {WAITERS} waits pending ran at {share:.3} of the rate without (at least \
         {MIN_SHARE}): {with:.0?} against {without:.0?}"
    );

    // Released, the lock passes to each waiter in turn, oldest key first.
    let releasing = Instant::now();
    let mut held = holder;
    let mut last = 0;
    for i in 0..SERVED {
        c.unlock(held).await.unwrap();
        held = tokio::time::timeout(WAIT, served.recv())
            .await
            .unwrap_or_else(|_| panic!("waiter {i} was not served"))
            .unwrap();
        let oldest = c
            .get(
                "x/",
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_sort(SortTarget::Create, SortOrder::Ascend)
                        .with_limit(1),
                ),
            )
            .await
            .unwrap();
        let oldest = &oldest.kvs()[0];
        assert_eq!(oldest.key(), held, "waiter {i} was served out of turn");
        assert!(oldest.create_revision() > last);
        last = oldest.create_revision();
        assert!(
            served.try_recv().is_err(),
            "two waiters held the lock at once"
        );
    }
    let serving = releasing.elapsed();

    // The client drops the other calls (while the lock is held, so none is being granted):
    // the server withdraws their keys.
    for w in &waiters {
        w.abort();
    }
    until_count(&mut c, "x/", 1).await;
    c.unlock(held).await.unwrap();
    assert_eq!(count(&mut c, "x/").await, 0, "every key was removed");
    for w in waiters {
        let _ = w.await;
    }
    assert!(threads(pid) <= MAX_THREADS);
    println!(
        "{SERVED} waiters served in order in {serving:.1?}, {} dropped calls withdrawn",
        WAITERS - SERVED
    );
}
