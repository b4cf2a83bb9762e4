//! The engine side of SPEC E2, E4 and E8: etcd-shaped requests through the public API.

mod support;

use tenure::etcd::{Outcome, PutRequest, RangeRequest, Refusal, RequestOp, ResponseOp, WatchStart};
use tenure::{Durability, Error, StorageFaults, Tenure, WatchOptions};

fn put(key: &str, value: &str) -> RequestOp {
    RequestOp::Put(PutRequest {
        key: key.into(),
        value: value.into(),
        ..PutRequest::default()
    })
}

fn range(key: &str, end: &str) -> RequestOp {
    RequestOp::Range(RangeRequest::new(key, end))
}

#[test]
fn e8_a_read_never_returns_a_write_whose_commit_failed() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::new();
    let db = Tenure::builder()
        .path(dir.path().join("db"))
        .durability(Durability::Immediate)
        .storage_faults(faults.clone())
        .open()
        .unwrap();
    db.execute(&put("a", "1")).unwrap();
    faults.fail_syncs(true);
    assert!(db.execute(&put("b", "lost")).is_err());
    // `b` is applied in memory but was never durable: a read must not return it.
    match db.execute(&range("\0", "\0")) {
        Err(Error::Storage { .. }) => {}
        other => panic!("a read returned state a crash could lose: {other:?}"),
    }
    match db.try_execute_read(&range("\0", "\0")) {
        Err(Error::Storage { .. }) => {}
        other => panic!("an inline read returned state a crash could lose: {other:?}"),
    }
}

#[test]
fn e8_inline_reads_answer_durable_state_and_decline_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = support::open_file(&dir.path().join("db"));
    db.execute(&put("a", "1")).unwrap();
    // Every write so far returned, so it is durable: the read is answered inline.
    let Some(Outcome::Done { response, .. }) = db.try_execute_read(&range("a", "")).unwrap() else {
        panic!("a read of durable state was not answered inline")
    };
    assert!(matches!(response, ResponseOp::Range(r) if r.kvs.len() == 1));
    assert_eq!(
        db.try_execute_read(&put("b", "2")).unwrap(),
        None,
        "a write is never run inline"
    );
    assert!(db.get("b").unwrap().is_none());
}

#[test]
fn e2_execute_headers_carry_the_written_revision() {
    let db = Tenure::in_memory().unwrap();
    let Outcome::Done { revision, .. } = db.execute(&put("k", "v")).unwrap() else {
        panic!("refused")
    };
    assert_eq!(revision, 1);
    let Outcome::Done { revision, response } = db.execute(&range("k", "")).unwrap() else {
        panic!("refused")
    };
    assert_eq!(revision, 1);
    let ResponseOp::Range(r) = response else {
        panic!("{response:?}")
    };
    assert_eq!(r.kvs[0].value, b"v");
}

#[test]
fn e2_compact_trims_the_watch_history_and_e4_watch_ranges() {
    let db = Tenure::in_memory().unwrap();
    for i in 0..5 {
        db.execute(&put(&format!("k{i}"), "v")).unwrap();
    }
    assert_eq!(db.compact(9).unwrap(), Err(Refusal::FutureRevision));
    assert_eq!(db.compact(3).unwrap(), Ok(5));
    assert_eq!(db.compact(3).unwrap(), Err(Refusal::Compacted));
    let opts = |start| WatchOptions {
        start_revision: Some(start),
        ..WatchOptions::default()
    };
    match db.watch_range("k", "\0", opts(2)).unwrap() {
        // etcd's compact_revision: the compaction itself, whose revision stays watchable.
        WatchStart::Compacted(floor) => assert_eq!(floor, 3),
        WatchStart::Started(_) => panic!("watched compacted history"),
    }
    let WatchStart::Started(mut w) = db.watch_range("k1", "k4", opts(4)).unwrap() else {
        panic!("compacted")
    };
    db.execute(&put("k2", "again")).unwrap();
    // Replayed from the history: k3 at 4; k4 (rev 5) is outside [k1, k4); then k2 at 6.
    let seen: Vec<_> = (0..2)
        .map(|_| {
            let ev = w.recv().unwrap();
            (ev.kv.key, ev.kv.mod_revision)
        })
        .collect();
    assert_eq!(seen, [(b"k3".to_vec(), 4), (b"k2".to_vec(), 6)]);
    assert!(w.try_recv().unwrap().is_none());
    assert!(db.durable_revision() >= 6);
}

/// A large range (no limit, or one above the small-read limit) is read from the file at the
/// revision pinned under the lock; its answer is the one memory gives (SPEC E2b).
#[test]
fn e2b_a_large_read_from_the_file_answers_as_memory_does() {
    use tenure::etcd::{DeleteRangeRequest, SortOrder, SortTarget};
    let dir = tempfile::tempdir().unwrap();
    let file = Tenure::open(dir.path().join("db")).unwrap();
    let memory = Tenure::in_memory().unwrap();
    for db in [&file, &memory] {
        for i in 0..600 {
            db.execute(&put(&format!("k{i:04}"), "v")).unwrap();
        }
        for i in (0..600).step_by(7) {
            db.execute(&put(&format!("k{i:04}"), "again")).unwrap();
        }
        db.execute(&RequestOp::DeleteRange(DeleteRangeRequest {
            key: "k0100".into(),
            range_end: "k0150".into(),
            ..DeleteRangeRequest::default()
        }))
        .unwrap();
    }
    let all = RangeRequest::new("k", "l");
    let asks = [
        all.clone(),
        RangeRequest {
            limit: 300,
            ..all.clone()
        },
        RangeRequest {
            limit: 257,
            sort_order: SortOrder::Descend,
            ..all.clone()
        },
        RangeRequest {
            count_only: true,
            ..all.clone()
        },
        RangeRequest {
            keys_only: true,
            limit: 1000,
            ..all.clone()
        },
        RangeRequest {
            min_mod_revision: 601,
            sort_target: SortTarget::Mod,
            sort_order: SortOrder::Ascend,
            ..all.clone()
        },
        RangeRequest::new("k0120", "k0400"),
    ];
    for r in asks {
        let op = RequestOp::Range(r);
        assert!(!op.is_small_read(), "{op:?}");
        let ours = format!("{:?}", file.execute(&op).unwrap());
        let memory = format!("{:?}", memory.execute(&op).unwrap());
        assert_eq!(ours, memory, "{op:?}");
    }
}
