//! A client ranging the whole keyspace in a loop must not stall another client's writes
//! (issue 29 item 9; SPEC E2b): the putter's p99 latency against `tenure serve` and against a
//! real etcd, each with the same 100 000 keys and the same ranging client, in the same run.
//!
//! `cargo test -p tenure-server --test hostile_ranges -- --nocapture` prints the latencies.

mod common;

use common::{temp_db, Etcd, Server};
use etcd_client::{Client, GetOptions, Txn, TxnOp};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: usize = 100_000;
const PUTS: usize = 300;
const RANGES: usize = 5;
/// Clients ranging at once: together they keep a range in progress nearly all the time.
const RANGERS: usize = 2;

async fn client(addr: &str) -> Client {
    Client::connect([addr], None).await.unwrap()
}

/// 100 000 keys under `k/`, 128 puts a txn (etcd's op budget).
async fn load(addr: &str) {
    let mut c = client(addr).await;
    let keys: Vec<usize> = (0..KEYS).collect();
    for chunk in keys.chunks(128) {
        let ops: Vec<TxnOp> = chunk
            .iter()
            .map(|i| TxnOp::put(format!("k/{i:06}"), "v", None))
            .collect();
        c.txn(Txn::new().and_then(ops)).await.unwrap();
    }
}

/// The p99 of a putter's puts while `RANGERS` other clients each range all of `k/` without a
/// limit, `RANGES` times in a row (each answer checked to hold every key); at least `PUTS` puts.
async fn putter_p99(addr: &str) -> (Duration, usize) {
    let ranging = Arc::new(AtomicUsize::new(RANGERS));
    let rangers: Vec<_> = (0..RANGERS)
        .map(|_| {
            let (addr, ranging) = (addr.to_owned(), ranging.clone());
            tokio::spawn(async move {
                let mut c = client(&addr).await;
                for _ in 0..RANGES {
                    let r = c
                        .get("k/", Some(GetOptions::new().with_prefix()))
                        .await
                        .unwrap();
                    assert_eq!(r.count(), KEYS as i64);
                    assert_eq!(r.kvs().len(), KEYS);
                    assert!(!r.more());
                }
                ranging.fetch_sub(1, Ordering::Relaxed);
            })
        })
        .collect();
    let mut c = client(addr).await;
    let mut took = Vec::new();
    while took.len() < PUTS || ranging.load(Ordering::Relaxed) > 0 {
        let t = Instant::now();
        c.put(format!("w/{}", took.len()), "x", None).await.unwrap();
        took.push(t.elapsed());
    }
    for r in rangers {
        r.await.unwrap();
    }
    took.sort();
    (took[took.len() * 99 / 100], took.len())
}

/// SPEC E2b. Factor 1: tenure's putter is no slower than etcd's. With the whole range copied
/// under the state lock (before large reads went to the store), tenure's p99 here was 1.5 times
/// etcd's (290 ms against 190 ms; issue 29 saw 3–5 times); a putter that waits for no range's
/// copy goes through no consensus and measured a tenth of etcd's (23 ms against 205 ms). The
/// 25 ms floor absorbs a quiet etcd on a noisy machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_a_client_ranging_everything_in_a_loop_does_not_stall_a_putter() {
    let (_dir, file) = temp_db();
    let tenure = Server::start(&file, &[]);
    let etcd_dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(etcd_dir.path());
    load(&tenure.addr).await;
    load(&etcd.addr).await;
    let (ours, our_puts) = putter_p99(&tenure.addr).await;
    let (theirs, their_puts) = putter_p99(&etcd.addr).await;
    println!(
        "putter p99 over {RANGES} full ranges: tenure {ours:?} ({our_puts} puts), \
         etcd {theirs:?} ({their_puts} puts)"
    );
    let bound = theirs.max(Duration::from_millis(25));
    assert!(
        ours <= bound,
        "tenure's putter p99 {ours:?} above {bound:?} (etcd's {theirs:?})"
    );
}
