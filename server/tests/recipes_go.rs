//! SPEC S8 interop: etcd 3.4's `contrib/recipes` RWMutex in a Go program (`tests/go/
//! rwlock_writer`, built by `make go-interop`) and tenure's `RwLock` exclude each other, over
//! `tenure serve` and over etcd, because they share one key layout.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use common::{go_program, temp_db, Etcd, Server, WAIT};
use tenure::sync::{RwLock, Session, SessionOptions};
use tenure::{Error, Tenure};

fn go_writer_holds_the_write_lock_and_a_tenure_reader_waits(url: &str) {
    let mut go = go_program("rwlock_writer")
        .args([url, "cfg"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(go.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "locked", "the Go writer took the lock");
    let db = Tenure::builder()
        .endpoints([url])
        .request_timeout(Duration::from_secs(5))
        .connect()
        .unwrap();
    let s = Session::new(&db, SessionOptions::default()).unwrap();
    assert!(matches!(
        RwLock::new(&s, "cfg").try_read(),
        Err(Error::Locked { .. })
    ));
    assert!(matches!(
        RwLock::new(&s, "cfg").read(Some(Duration::from_millis(300))),
        Err(Error::Timeout { .. })
    ));
    let reader = {
        let s = s.clone();
        std::thread::spawn(move || RwLock::new(&s, "cfg").read(Some(WAIT)))
    };
    let deadline = std::time::Instant::now() + WAIT;
    while db.range("cfg/read/", None).unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader never queued"
        );
        std::thread::yield_now();
    }
    assert!(!reader.is_finished(), "the reader waits while Go writes");
    go.stdin.take().unwrap().write_all(b"\n").unwrap();
    let g = reader.join().unwrap().unwrap();
    assert!(g.is_held() && !g.is_write());
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "unlocked");
    assert!(go.wait().unwrap().success());
    g.release().unwrap();
    s.close().unwrap();
}

#[test]
fn s8_a_go_rwmutex_writer_holds_a_tenure_reader_back_on_tenure_serve() {
    let (_dir, file) = temp_db();
    let server = Server::start(&file, &[]);
    go_writer_holds_the_write_lock_and_a_tenure_reader_waits(&server.url());
}

#[test]
fn s8_a_go_rwmutex_writer_holds_a_tenure_reader_back_on_etcd() {
    let (dir, _file) = temp_db();
    let etcd = Etcd::start(&dir.path().join("etcd"));
    go_writer_holds_the_write_lock_and_a_tenure_reader_waits(&etcd.url());
}
