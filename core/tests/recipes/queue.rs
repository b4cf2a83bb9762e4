//! S10: the queue and the priority queue, over the backend of the binary that runs them.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tenure::sync::{PriorityQueue, Queue};
use tenure::{Error, Stop, Wait, WaitPool};

use crate::{backend, eventually, mem, WAIT};

#[test]
fn s10_a_queue_is_fifo_and_try_dequeue_is_none_when_empty() {
    let db = mem();
    let q = Queue::new(&backend(&db), "jobs");
    assert_eq!(q.try_dequeue().unwrap(), None);
    let keys: Vec<_> = (0..5)
        .map(|i| q.enqueue(format!("item-{i}")).unwrap())
        .collect();
    for k in &keys {
        let k = String::from_utf8(k.clone()).unwrap();
        let nanos = k
            .strip_prefix("jobs/")
            .expect("etcd's layout: name/<unix ns>");
        assert!(nanos.parse::<u128>().is_ok(), "{k}");
    }
    for i in 0..5 {
        assert_eq!(q.dequeue(WAIT).unwrap(), format!("item-{i}").into_bytes());
    }
    assert_eq!(q.try_dequeue().unwrap(), None);
    assert!(db.range("jobs/", None).unwrap().is_empty());
}

#[test]
fn s10_dequeue_waits_for_an_enqueue_and_a_timeout_removes_nothing() {
    let db = mem();
    let q = Queue::new(&backend(&db), "jobs");
    let start = Instant::now();
    let r = q.dequeue(Duration::from_millis(100));
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    assert!(start.elapsed() >= Duration::from_millis(100));
    let qq = q.clone();
    let consumer = std::thread::spawn(move || qq.dequeue(WAIT));
    // The consumer is waiting (or about to): the item reaches it through its watch.
    q.enqueue("late").unwrap();
    assert_eq!(consumer.join().unwrap().unwrap(), b"late");
    // A cancelled dequeue ends with Timeout and takes nothing.
    let stop = Stop::new();
    let (qq, s) = (q.clone(), stop.clone());
    let cancelled = std::thread::spawn(move || qq.dequeue(Wait::forever().with_stop(&s)));
    stop.stop();
    assert!(matches!(
        cancelled.join().unwrap(),
        Err(Error::Timeout { .. })
    ));
    q.enqueue("kept").unwrap();
    assert_eq!(q.try_dequeue().unwrap().as_deref(), Some(&b"kept"[..]));
}

#[test]
fn s10_each_item_goes_to_exactly_one_of_many_consumers() {
    let db = mem();
    let (producers, per_producer, consumers) = (3, 30, 6);
    let total = producers * per_producer;
    let taken = Arc::new(AtomicUsize::new(0));
    let all_taken = Stop::new();
    let consumer_threads: Vec<_> = (0..consumers)
        .map(|_| {
            let q = Queue::new(&backend(&db), "work");
            let (taken, all_taken) = (taken.clone(), all_taken.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match q.dequeue(Wait::timeout(WAIT).with_stop(&all_taken)) {
                        Ok(v) => {
                            got.push(String::from_utf8(v).unwrap());
                            if taken.fetch_add(1, Ordering::SeqCst) + 1 == total {
                                all_taken.stop();
                            }
                        }
                        Err(Error::Timeout { .. }) => return got,
                        Err(e) => panic!("dequeue: {e}"),
                    }
                }
            })
        })
        .collect();
    let producer_threads: Vec<_> = (0..producers)
        .map(|p| {
            let q = Queue::new(&backend(&db), "work");
            std::thread::spawn(move || {
                for i in 0..per_producer {
                    q.enqueue(format!("{p}-{i}")).unwrap();
                }
            })
        })
        .collect();
    for t in producer_threads {
        t.join().unwrap();
    }
    let per_consumer: Vec<Vec<String>> = consumer_threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let all: Vec<&String> = per_consumer.iter().flatten().collect();
    let distinct: BTreeSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), total, "items handed out: {}", all.len());
    assert_eq!(distinct.len(), total, "an item went to two consumers");
    // FIFO per producer as seen by each consumer: a consumer never takes an older item of a
    // producer after a newer one.
    for got in &per_consumer {
        for p in 0..producers {
            let seq: Vec<usize> = got
                .iter()
                .filter_map(|v| v.strip_prefix(&format!("{p}-")))
                .map(|i| i.parse().unwrap())
                .collect();
            assert!(seq.windows(2).all(|w| w[0] < w[1]), "{seq:?}");
        }
    }
    assert!(db.range("work/", None).unwrap().is_empty());
}

#[test]
fn s10_a_priority_queue_serves_lower_priorities_first_and_fifo_within_one() {
    let db = mem();
    let q = PriorityQueue::new(&backend(&db), "pq");
    let k = q.enqueue("c1", 3).unwrap();
    assert_eq!(k, b"pq/00003/0000000000000000", "etcd's layout");
    assert_eq!(
        q.enqueue("c2", 3).unwrap(),
        b"pq/00003/0000000000000001",
        "the next sequence number"
    );
    assert!(
        db.get("__pq/00003").unwrap().is_some(),
        "the bookkeeping key"
    );
    q.enqueue("a1", 0).unwrap();
    q.enqueue("z", u16::MAX).unwrap();
    q.enqueue("a2", 0).unwrap();
    q.enqueue("c3", 3).unwrap();
    let order: Vec<_> = (0..6)
        .map(|_| String::from_utf8(q.dequeue(WAIT).unwrap()).unwrap())
        .collect();
    assert_eq!(order, ["a1", "a2", "c1", "c2", "c3", "z"]);
    assert_eq!(q.try_dequeue().unwrap(), None);
    // A waiting consumer gets the first item put after it started waiting.
    let qq = q.clone();
    let consumer = std::thread::spawn(move || qq.dequeue(WAIT));
    q.enqueue("late", 7).unwrap();
    assert_eq!(consumer.join().unwrap().unwrap(), b"late");
}

#[test]
fn s10_concurrent_priority_producers_never_share_a_sequence_number() {
    let db = mem();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let q = PriorityQueue::new(&backend(&db), "pq");
            std::thread::spawn(move || {
                (0..10)
                    .map(|i| q.enqueue(format!("{t}-{i}"), 1).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let keys: BTreeSet<Vec<u8>> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(keys.len(), 40, "every enqueue its own key");
    assert_eq!(db.range("pq/00001/", None).unwrap().len(), 40);
}

#[test]
fn s10_one_wait_pool_serves_many_dequeues_and_a_dropped_one_takes_nothing() {
    let db = mem();
    let q = Queue::new(&backend(&db), "pooled");
    let pool = WaitPool::new("test-queue-pool").unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let n = 10;
    for _ in 0..n {
        let tx = tx.clone();
        pool.submit(q.dequeue_wait(WAIT), move |r| {
            let _ = tx.send(r.unwrap().unwrap().value);
        });
    }
    eventually("every dequeue pending", || pool.pending() == n);
    for i in 0..n {
        q.enqueue(format!("{i}")).unwrap();
    }
    let got: BTreeSet<Vec<u8>> = (0..n).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    assert_eq!(got.len(), n);
    let (ltx, lrx) = crossbeam_channel::bounded(1);
    pool.submit(q.dequeue_wait(None), move |r| {
        let _ = ltx.send(r.is_ok());
    });
    eventually("the last dequeue pending", || pool.pending() == 1);
    drop(pool);
    q.enqueue("left").unwrap();
    assert_eq!(q.try_dequeue().unwrap().as_deref(), Some(&b"left"[..]));
    assert!(lrx.try_recv().is_err());
}
