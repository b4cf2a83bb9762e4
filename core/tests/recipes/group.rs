//! S12: groups and the partitioner, over the backend of the binary that runs them; the ring's
//! properties measured with numbers.

use std::collections::HashMap;
use std::time::Duration;

use tenure::sync::{Group, GroupChange, Partitioner, Ring};
use tenure::Error;

use crate::{backend, mem, session, WAIT};

#[test]
fn s12_members_join_leave_and_a_member_whose_session_ends_leaves() {
    let db = mem();
    let (a, b) = (session(&db), session(&db));
    let mut changes = Group::watch(&backend(&db), "workers").unwrap();
    let ga = Group::new(&a, "workers");
    ga.join("w1", "cpu").unwrap();
    assert_eq!(
        db.get("workers/members/w1").unwrap().unwrap().value,
        b"cpu",
        "the layout: name/members/<member> = capabilities"
    );
    let gb = Group::new(&b, "workers");
    gb.join("w2", "gpu").unwrap();
    let ids: Vec<_> = Group::members(&backend(&db), "workers")
        .unwrap()
        .into_iter()
        .map(|m| (m.id, m.capabilities))
        .collect();
    assert_eq!(
        ids,
        [
            ("w1".into(), b"cpu".to_vec()),
            ("w2".into(), b"gpu".to_vec())
        ]
    );
    assert!(
        matches!(changes.next(WAIT).unwrap(), GroupChange::Joined(m) if m.id == "w1" && m.capabilities == b"cpu")
    );
    assert!(matches!(changes.next(WAIT).unwrap(), GroupChange::Joined(m) if m.id == "w2"));
    // Another session cannot be w1; the same one updates its capabilities.
    let r = Group::new(&b, "workers").join("w1", "x");
    assert!(matches!(r, Err(Error::Locked { .. })), "{r:?}");
    ga.join("w1", "cpu+ssd").unwrap();
    assert!(
        matches!(changes.next(WAIT).unwrap(), GroupChange::Joined(m) if m.capabilities == b"cpu+ssd")
    );
    for bad in ["", "a/b", &"x".repeat(257)] {
        assert!(matches!(ga.join(bad, ""), Err(Error::InvalidArgument(_))));
    }
    ga.leave().unwrap();
    assert_eq!(changes.next(WAIT).unwrap(), GroupChange::Left("w1".into()));
    ga.leave().unwrap(); // not joined: nothing
    db.revoke(b.lease_id()).unwrap(); // w2's session ends
    assert_eq!(changes.next(WAIT).unwrap(), GroupChange::Left("w2".into()));
    assert!(Group::members(&backend(&db), "workers").unwrap().is_empty());
    assert!(matches!(
        changes.next(Duration::from_millis(20)),
        Err(Error::Timeout { .. })
    ));
}

#[test]
fn s12_the_partitioner_follows_the_live_members() {
    let db = mem();
    let sessions: Vec<_> = (0..3).map(|_| session(&db)).collect();
    let groups: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let g = Group::new(s, "shards");
            g.join(&format!("m{i}"), "").unwrap();
            g
        })
        .collect();
    assert!(matches!(
        Partitioner::new(&backend(&db), "shards", 0),
        Err(Error::InvalidArgument(_))
    ));
    let p = Partitioner::new(&backend(&db), "shards", 2).unwrap();
    let before: Vec<_> = (0..50)
        .map(|k| p.members_for(format!("key-{k}")).unwrap())
        .collect();
    for owners in &before {
        assert_eq!(owners.len(), 2);
        assert_ne!(owners[0], owners[1]);
    }
    let again: Vec<_> = (0..50)
        .map(|k| p.members_for(format!("key-{k}")).unwrap())
        .collect();
    assert_eq!(before, again, "stable while membership is");
    db.revoke(sessions[1].lease_id()).unwrap(); // m1 dies
    for (k, was) in before.iter().enumerate() {
        let owners = p.members_for(format!("key-{k}")).unwrap();
        assert!(!owners.contains(&"m1".to_string()), "{owners:?}");
        if was[0] != "m1" {
            assert_eq!(owners[0], was[0], "key-{k}'s owner moved needlessly");
        }
    }
    groups[0].leave().unwrap();
    groups[2].leave().unwrap();
    assert!(
        p.members_for("k").unwrap().is_empty(),
        "no members, no owner"
    );
}

/// The primary owner of each of `keys` on `ring`.
fn owners(ring: &Ring, keys: &[String]) -> Vec<String> {
    keys.iter()
        .map(|k| ring.members_for(k, 1)[0].to_owned())
        .collect()
}

#[test]
fn s12_the_ring_is_balanced_and_moves_only_the_keys_it_must() {
    let members: Vec<String> = (0..10).map(|i| format!("node-{i}")).collect();
    let keys: Vec<String> = (0..100_000).map(|i| format!("object-{i}")).collect();
    let ring = Ring::new(&members);
    let owned = owners(&ring, &keys);
    // Balanced: each member's load against the mean (10 000).
    let mut load: HashMap<&str, usize> = HashMap::new();
    for o in &owned {
        *load.entry(o).or_default() += 1;
    }
    let (min, max) = (*load.values().min().unwrap(), *load.values().max().unwrap());
    let mean = keys.len() / members.len();
    println!("10 members, 100000 keys: load min {min}, max {max}, mean {mean}");
    assert_eq!(load.len(), 10);
    assert!(
        max * 100 <= mean * 135 && min * 100 >= mean * 65,
        "load {min}..{max} around {mean}"
    );
    // Stable: the same members in another order give the same ring.
    let mut shuffled = members.clone();
    shuffled.reverse();
    assert_eq!(Ring::new(&shuffled), ring);
    // A join moves only keys to the newcomer, about 1/11 of them.
    let mut joined = members.clone();
    joined.push("node-10".into());
    let after_join = owners(&Ring::new(&joined), &keys);
    let moved: Vec<_> = (0..keys.len())
        .filter(|&i| after_join[i] != owned[i])
        .collect();
    println!(
        "join of an 11th member moved {} of 100000 keys (ideal {})",
        moved.len(),
        keys.len() / 11
    );
    assert!(moved.iter().all(|&i| after_join[i] == "node-10"));
    let ideal = keys.len() / 11;
    assert!(
        moved.len() <= ideal * 135 / 100 && moved.len() >= ideal * 65 / 100,
        "{} moved, ideal {ideal}",
        moved.len()
    );
    // A leave moves only the leaver's keys.
    let left: Vec<String> = members.iter().filter(|m| *m != "node-3").cloned().collect();
    let after_leave = owners(&Ring::new(&left), &keys);
    let moved_on_leave = (0..keys.len())
        .filter(|&i| after_leave[i] != owned[i])
        .count();
    assert!((0..keys.len()).all(|i| after_leave[i] == owned[i] || owned[i] == "node-3"));
    assert_eq!(moved_on_leave, load["node-3"]);
    println!("leave of node-3 moved {moved_on_leave} keys, exactly the ones it owned");
    // Replicas: distinct members, the primary first.
    let r = ring.members_for("x", 3);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0], ring.members_for("x", 1)[0]);
    assert_eq!(ring.members_for("x", 99).len(), 10);
    assert!(Ring::new(Vec::<String>::new())
        .members_for("x", 1)
        .is_empty());
}
