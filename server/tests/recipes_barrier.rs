//! S11 across processes: etcd's own `contrib/recipes` double barrier (tests/go/
//! recipes2_double_barrier) and tenure's, mixed in one barrier over `tenure serve` and over etcd.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{go_program, temp_db, text, wait_for, Etcd, Server, WAIT};
use tenure::sync::DoubleBarrier;
use tenure::Tenure;

fn connect(url: &str) -> Tenure {
    tenure::ConnectOptions::new()
        .endpoints([url])
        .request_timeout(Duration::from_secs(10))
        .connect()
        .unwrap_or_else(|e| panic!("connect {url}: {e}"))
}

/// Two Go and two tenure participants of a barrier of four: each gets through `enter` (only
/// possible once all four counted each other) and `leave`.
fn mixed_double_barrier(endpoint: &str) {
    let count = "4";
    let go: Vec<_> = (0..2)
        .map(|_| {
            go_program("recipes2_double_barrier")
                .args([endpoint, "mixed", count])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ours: Vec<_> = (0..2)
        .map(|_| {
            let db = connect(endpoint);
            std::thread::spawn(move || {
                let s = common::session(&db, 30);
                let b = DoubleBarrier::new(&s, "mixed", 4);
                b.enter(WAIT)?;
                b.leave(WAIT)?;
                s.close()
            })
        })
        .collect();
    for t in ours {
        t.join().unwrap().unwrap();
    }
    for mut child in go {
        let status = wait_for(&mut child, WAIT);
        let out = child.wait_with_output().unwrap();
        assert!(status.success(), "Go participant: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "entered\nleft\n");
    }
    assert!(connect(endpoint).range("mixed/", None).unwrap().is_empty());
}

#[test]
fn s11_a_double_barrier_mixes_go_and_tenure_participants_on_tenure_and_on_etcd() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    mixed_double_barrier(&s.url());
    let etcd = Etcd::start(&dir.path().join("etcd"));
    mixed_double_barrier(&etcd.url());
}
