//! etcd 3.4's own Go client (`tests/go/`, built by `make go-interop`) against `tenure serve`
//! and against a real etcd in the same run.

mod common;

use common::{go_program, temp_db, text, Etcd, Server};

fn hello(endpoint: &str) -> String {
    let out = go_program("hello").arg(endpoint).output().unwrap();
    assert!(
        out.status.success(),
        "hello {endpoint}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn e2_go_clientv3_puts_and_reads_back_on_tenure_and_on_etcd() {
    let (dir, db) = temp_db();
    let s = Server::start(&db, &[]);
    assert_eq!(hello(&s.url()).trim(), "go");
    assert_eq!(s.ok(&["get", "hello", "--print-value-only"]).trim(), "go");
    let etcd = Etcd::start(&dir.path().join("etcd"));
    assert_eq!(hello(&etcd.url()).trim(), "go");
}
