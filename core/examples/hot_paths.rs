//! A fixed amount of work on the lessor and txn hot paths, for instruction counts under
//! `valgrind --tool=callgrind` (repeatable on a loaded machine, unlike wall time). Uses only
//! the public API that the code before issue 23 (`3f3e67e`) also has, so the same file builds
//! on both sides of a before/after comparison (BENCHMARKS.md).
//!
//! `hot_paths WORKLOAD N`: WORKLOAD is `lessor` (grant, renew and revoke N leases with explicit
//! IDs) or `txn` (N compare-and-put transactions over 1 024 live keys), on an in-memory engine.
//! Per-operation counts are the difference of two runs (`N` and `2N`) divided by `N`, which
//! cancels start-up and the fixture.

use std::time::Duration;

use tenure::{Compare, CompareOp, Op, Tenure, Txn};

const KEYS: usize = 1024;

fn lessor(db: &Tenure, n: i64) {
    let ttl = Duration::from_secs(1500);
    for id in 1..=n {
        db.grant_with_id(id, ttl).expect("grant");
    }
    for id in 1..=n {
        db.renew(id).expect("renew");
    }
    for id in 1..=n {
        db.revoke(id).expect("revoke");
    }
}

fn txn(db: &Tenure, n: usize) {
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| format!("bench/{i:05}").into_bytes())
        .collect();
    for k in &keys {
        db.put(k, "v", None).expect("put");
    }
    for i in 0..n {
        let k = &keys[i % KEYS];
        // The key's revision as the recipes read it: one put per earlier round on this key.
        let rev = db.get(k).expect("get").expect("live").mod_revision;
        let t = Txn::new()
            .when([Compare::mod_revision(k, CompareOp::Equal, rev)])
            .then([Op::put(k, "w", None)])
            .otherwise([Op::get(k)]);
        assert!(db.txn(t).expect("txn").succeeded);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(workload), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok())) else {
        eprintln!("usage: hot_paths lessor|txn N");
        std::process::exit(2);
    };
    let db = Tenure::in_memory().expect("open");
    match workload.as_str() {
        "lessor" => lessor(&db, n as i64),
        "txn" => txn(&db, n),
        other => {
            eprintln!("unknown workload {other}: lessor or txn");
            std::process::exit(2);
        }
    }
    db.close().expect("close");
}
