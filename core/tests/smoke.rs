use std::time::Duration;
use tenure::{ManualClock, Tenure};

#[test]
fn smoke_file_round_trip_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.tenure");
    let clock = ManualClock::new();
    let db = Tenure::builder()
        .path(&path)
        .clock(clock.clone())
        .open()
        .unwrap();
    let l = db.grant(Duration::from_secs(10)).unwrap();
    db.put("a", "1", Some(l)).unwrap();
    let rx = db.expired().unwrap();
    clock.advance(Duration::from_secs(11));
    let batch = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(batch[0].id, l);
    assert!(db.get("a").unwrap().is_none());
    let l2 = db.grant(Duration::from_secs(100)).unwrap();
    db.close().unwrap();
    let db = Tenure::builder()
        .path(&path)
        .clock(clock.clone())
        .open()
        .unwrap();
    assert!(db.time_to_live(l2).is_ok());
    assert_eq!(db.revision().unwrap(), 2);
}
