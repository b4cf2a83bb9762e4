//! S10 across processes: etcd's own `contrib/recipes` consumers (tests/go/recipes2_dequeue)
//! take what tenure's producers enqueue, over `tenure serve` and over etcd; a consumer process
//! killed with SIGKILL while its dequeue waits removes nothing.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{go_program, temp_db, text, Etcd, Server, WAIT};
use tenure::sync::{PriorityQueue, Queue};
use tenure::{Pollable, Tenure};

/// Set in the child process of the kill test: the endpoint it connects to.
const CHILD_ENV: &str = "TENURE_QUEUE_CHILD_ENDPOINT";

fn connect(url: &str) -> Tenure {
    tenure::ConnectOptions::new()
        .endpoints([url])
        .request_timeout(Duration::from_secs(10))
        .connect()
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// The Go consumer's lines after taking `n` items of the `kind` queue `name`.
fn go_dequeue(endpoint: &str, kind: &str, name: &str, n: usize) -> Vec<String> {
    let out = go_program("recipes2_dequeue")
        .args([endpoint, kind, name, &n.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "recipes2_dequeue {endpoint}: {}",
        text(&out.stderr)
    );
    text(&out.stdout).lines().map(str::to_owned).collect()
}

fn tenure_produces_and_go_consumes(endpoint: &str) {
    let db = connect(endpoint);
    let fifo = Queue::new(&db, "interop-fifo");
    let items: Vec<String> = (0..5).map(|i| format!("job-{i}")).collect();
    for v in &items {
        fifo.enqueue(v).unwrap();
    }
    assert_eq!(go_dequeue(endpoint, "fifo", "interop-fifo", 5), items);
    assert_eq!(fifo.try_dequeue().unwrap(), None, "Go took every item");

    let pq = PriorityQueue::new(&db, "interop-pq");
    for (v, p) in [
        ("low-1", 9),
        ("high-1", 1),
        ("low-2", 9),
        ("high-2", 1),
        ("top", 0),
    ] {
        pq.enqueue(v, p).unwrap();
    }
    assert_eq!(
        go_dequeue(endpoint, "priority", "interop-pq", 5),
        ["top", "high-1", "high-2", "low-1", "low-2"]
    );
    assert_eq!(pq.try_dequeue().unwrap(), None);
}

#[test]
fn s10_a_go_consumer_dequeues_a_tenure_producers_items_in_order_on_tenure_and_on_etcd() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    tenure_produces_and_go_consumes(&s.url());
    let etcd = Etcd::start(&dir.path().join("etcd"));
    tenure_produces_and_go_consumes(&etcd.url());
}

/// The child of the kill test: starts a dequeue, says `waiting` once its first poll found the
/// queue empty (its watch is in place), then waits until killed.
#[test]
fn queue_child_process_entry() {
    let Ok(endpoint) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = connect(&endpoint);
    let mut wait = Queue::new(&db, "crash").dequeue_wait(None);
    assert_eq!(wait.poll().unwrap(), None, "the queue starts empty");
    let mut out = std::io::stdout();
    writeln!(out, "waiting").unwrap();
    out.flush().unwrap();
    let got = tenure::block_on(wait);
    panic!("the child was to be killed while waiting, it got {got:?}");
}

fn killed_consumer_removes_nothing(endpoint: &str) {
    let db = connect(endpoint);
    let q = Queue::new(&db, "crash");
    let mut children: Vec<_> = (0..3)
        .map(|_| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "queue_child_process_entry", "--nocapture"])
                .env(CHILD_ENV, endpoint)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for l in lines.by_ref().map_while(Result::ok) {
                    if l == "waiting" {
                        let _ = tx.send(());
                    }
                }
            });
            rx.recv_timeout(WAIT).expect("the child never waited");
            child
        })
        .collect();
    for child in &mut children {
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    q.enqueue("survives").unwrap();
    assert_eq!(
        db.range("crash/", None).unwrap().len(),
        1,
        "the killed consumers removed nothing"
    );
    assert_eq!(q.dequeue(WAIT).unwrap(), b"survives");
}

#[test]
fn s10_a_consumer_killed_while_its_dequeue_waits_removes_nothing() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    killed_consumer_removes_nothing(&s.url());
    let etcd = Etcd::start(&dir.path().join("etcd"));
    killed_consumer_removes_nothing(&etcd.url());
}
