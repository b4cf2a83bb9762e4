mod support;

use std::time::Duration;

use support::{open_file_with_clock, recv};
use tenure::ManualClock;

#[test]
fn smoke_file_round_trip_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.tenure");
    let clock = ManualClock::new();
    let db = open_file_with_clock(&path, &clock);
    let l = db.grant(Duration::from_secs(10)).unwrap();
    db.put("a", "1", Some(l)).unwrap();
    let rx = db.expired().unwrap();
    clock.advance(Duration::from_secs(11));
    let batch = recv(&rx);
    assert_eq!(batch[0].id, l);
    assert!(db.get("a").unwrap().is_none());
    let l2 = db.grant(Duration::from_secs(100)).unwrap();
    db.close().unwrap();
    let db = open_file_with_clock(&path, &clock);
    assert!(db.time_to_live(l2).is_ok());
    assert_eq!(db.revision().unwrap(), 2);
}
