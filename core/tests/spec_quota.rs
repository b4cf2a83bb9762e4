//! SPEC E20: the space quota and the alarms, embedded (`tenure serve` against etcd is
//! `server/tests/quota.rs`).

use std::path::Path;
use std::time::Duration;

use tenure::{Alarm, AlarmKind, Builder, Error, ErrorCode, Op, Tenure, Txn};

const MEMBER: u64 = 0x51ab;
const VALUE: usize = 16 << 10;

fn nospace() -> Alarm {
    Alarm {
        member: MEMBER,
        kind: AlarmKind::NoSpace,
    }
}

fn open(path: &Path, quota: Option<u64>) -> Tenure {
    Builder::default()
        .path(path)
        .quota_backend_bytes(quota)
        .member_id(MEMBER)
        .open()
        .unwrap()
}

/// The length of a fresh database file with nothing in it.
fn empty_file_bytes(dir: &Path) -> u64 {
    let db = open(&dir.join("probe"), None);
    let bytes = db.storage_size().unwrap().file_bytes;
    db.close().unwrap();
    bytes
}

/// Puts values of `VALUE` bytes until a put is refused; the keys written and the refusal.
fn fill(db: &Tenure) -> (usize, Error) {
    let value = vec![b'x'; VALUE];
    for i in 0..4096 {
        if let Err(e) = db.put(format!("fill/{i:05}"), &value, None) {
            return (i, e);
        }
    }
    panic!("64 MiB written and the quota never refused a put");
}

#[test]
fn e20_writes_that_reach_the_quota_fail_raise_nospace_and_work_again_after_compact_defrag_disarm() {
    let dir = tempfile::tempdir().unwrap();
    let quota = empty_file_bytes(dir.path()) + (1 << 20);
    let path = dir.path().join("db");
    let db = open(&path, Some(quota));
    assert_eq!(db.quota_backend_bytes().unwrap(), Some(quota));
    let lease = db.grant(Duration::from_secs(60)).unwrap();
    db.put("keep", "v", Some(lease)).unwrap();

    let (written, e) = fill(&db);
    assert!(written > 0, "the first put was refused");
    assert!(matches!(e, Error::QuotaExceeded(_)), "{e:?}");
    assert_eq!(e.code(), ErrorCode::QuotaExceeded);
    assert_eq!(e.code() as i32, 24);
    assert!(
        e.to_string().contains("NOSPACE alarm"),
        "the message says what to do: {e}"
    );
    assert_eq!(db.alarms().unwrap(), vec![nospace()]);
    let rev = db.revision().unwrap();

    // Under NOSPACE: what costs room is refused, however small...
    let refused: [(&str, Result<(), Error>); 4] = [
        ("put", db.put("tiny", "", None).map(drop)),
        ("grant", db.grant(Duration::from_secs(5)).map(drop)),
        (
            "txn with a put",
            db.txn(Txn::new().then([Op::put("t", "v", None)])).map(drop),
        ),
        ("attach", db.attach(lease, &["keep"])),
    ];
    for (what, r) in refused {
        assert!(matches!(r, Err(Error::QuotaExceeded(_))), "{what}: {r:?}");
    }
    assert_eq!(db.revision().unwrap(), rev, "a refused write wrote nothing");
    // ...and reads, deletes, revokes, txns without puts and compaction still work.
    assert_eq!(db.get("keep").unwrap().unwrap().value, b"v");
    assert!(db.delete("fill/00000").unwrap());
    db.txn(Txn::new().then([Op::delete("fill/00001"), Op::get("keep")]))
        .unwrap();
    db.revoke(lease).unwrap();

    // The alarm is kept in the file.
    db.close().unwrap();
    let db = open(&path, Some(quota));
    assert_eq!(db.alarms().unwrap(), vec![nospace()]);
    assert!(matches!(
        db.put("after-reopen", "v", None),
        Err(Error::QuotaExceeded(_))
    ));

    // Disarming alone: the next put that reaches the quota raises the alarm again.
    assert!(db.disarm_alarm(nospace()).unwrap());
    assert!(matches!(
        db.put("big", vec![b'x'; VALUE], None),
        Err(Error::QuotaExceeded(_))
    ));
    assert_eq!(db.alarms().unwrap(), vec![nospace()]);

    // Recovery as on etcd: delete, compact, defragment, disarm.
    assert!(db.delete_prefix("fill/").unwrap() > 0);
    let current = db.revision().unwrap();
    db.compact(current).unwrap().unwrap();
    db.wait_compacted().unwrap();
    let size = db.defragment().unwrap();
    assert!(
        size.file_bytes < quota - (VALUE as u64) * 4,
        "defragment gave the room back: {} of {quota}",
        size.file_bytes
    );
    assert!(db.disarm_alarm(nospace()).unwrap());
    assert!(!db.disarm_alarm(nospace()).unwrap(), "disarmed already");
    assert_eq!(db.alarms().unwrap(), Vec::new());
    db.put("again", vec![b'y'; VALUE], None).unwrap();
    db.grant(Duration::from_secs(5)).unwrap();
    db.close().unwrap();
    assert_eq!(open(&path, Some(quota)).alarms().unwrap(), Vec::new());
}

#[test]
fn e20_without_a_quota_the_file_grows_and_no_alarm_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("db"), None);
    assert_eq!(db.quota_backend_bytes().unwrap(), None);
    let value = vec![b'x'; VALUE];
    for i in 0..256 {
        db.put(format!("k{i}"), &value, None).unwrap();
    }
    assert_eq!(db.alarms().unwrap(), Vec::new());
}

#[test]
fn e20_raised_alarms_refuse_as_etcd_nospace_what_costs_room_corrupt_every_write() {
    let db = Builder::default().member_id(MEMBER).open().unwrap(); // in memory: no file to fill
    let lease = db.grant(Duration::from_secs(60)).unwrap();
    db.put("k", "v", None).unwrap();
    assert!(db.raise_alarm(nospace()).unwrap());
    assert!(!db.raise_alarm(nospace()).unwrap(), "raised already");
    assert!(matches!(
        db.put("k", "w", None),
        Err(Error::QuotaExceeded(_))
    ));
    assert!(db.delete("k").unwrap());

    let corrupt = Alarm {
        member: 7,
        kind: AlarmKind::Corrupt,
    };
    db.raise_alarm(corrupt).unwrap();
    assert_eq!(db.alarms().unwrap(), vec![nospace(), corrupt]);
    let e = db.revoke(lease).unwrap_err();
    assert!(
        matches!(&e, Error::Unavailable(m) if m == "etcdserver: corrupt cluster"),
        "{e:?}"
    );
    assert!(matches!(db.delete("k"), Err(Error::Unavailable(_))));
    assert_eq!(db.get("k").unwrap(), None, "reads still work");

    db.disarm_alarm(corrupt).unwrap();
    db.disarm_alarm(nospace()).unwrap();
    db.put("k", "x", Some(lease)).unwrap();
    db.revoke(lease).unwrap();
}

/// The line `name value` of an export.
fn figure(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn e24_the_embedded_export_has_the_quota_and_the_nospace_alarm_and_both_move() {
    let dir = tempfile::tempdir().unwrap();
    let quota = empty_file_bytes(dir.path()) + (1 << 20);
    let db = open(&dir.path().join("db"), Some(quota));
    let text = db.metrics().to_prometheus();
    assert_eq!(
        figure(&text, "etcd_server_quota_backend_bytes"),
        Some(quota)
    );
    assert_eq!(figure(&text, "tenure_server_alarm_nospace"), Some(0));
    assert!(matches!(fill(&db).1, Error::QuotaExceeded(_)));
    let m = db.metrics();
    assert_eq!(m.alarms, vec![nospace()]);
    assert_eq!(m.quota_backend_bytes, quota);
    let text = m.to_prometheus();
    assert_eq!(figure(&text, "tenure_server_alarm_nospace"), Some(1));
    assert!(db.disarm_alarm(nospace()).unwrap());
    let text = db.metrics().to_prometheus();
    assert_eq!(figure(&text, "tenure_server_alarm_nospace"), Some(0));
    // Readable after close, as the stats are.
    db.raise_alarm(nospace()).unwrap();
    db.close().unwrap();
    let text = db.metrics().to_prometheus();
    assert_eq!(figure(&text, "tenure_server_alarm_nospace"), Some(1));
    // No quota: 0, as `tenure serve` exports it.
    let db = open(&dir.path().join("unbounded"), None);
    let text = db.metrics().to_prometheus();
    assert_eq!(figure(&text, "etcd_server_quota_backend_bytes"), Some(0));
}
