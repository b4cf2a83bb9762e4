//! K16, K17: the history's events stored one row per commit (`tenure_changes`), its versions
//! keyed by revision and packed into rows (`tenure_version_rows`); files of the older layouts
//! (formats 7 and 8: one row per version, `tenure_versions`; 3 to 6: keyed by key,
//! `tenure_history`, and in 3 and 4 one event row per write, `tenure_events`) read in place,
//! converted at open and replayed as before; compaction, and a damaged events row refused.
//!
//! The files of the old layouts are made from files of this build with redb itself: their
//! versions and `tenure_changes` rows are decoded (the layout of DESIGN "Revision history") and
//! written back as the builds before K17 wrote them, the format set and the meta checksum
//! rewritten.

mod support;

use std::path::Path;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable, TableDefinition, TableHandle};
use support::*;
use tenure::{AutoCompaction, Event, EventKind, KeyValue, Op, Tenure, Txn, WatchOptions};

const META: TableDefinition<&str, i64> = TableDefinition::new("tenure_meta");
const CHANGES: TableDefinition<(i64, u32), &[u8]> = TableDefinition::new("tenure_changes");
const PER_WRITE: TableDefinition<(i64, u32), &[u8]> = TableDefinition::new("tenure_events");
const VERSIONS: TableDefinition<(i64, &[u8]), &[u8]> = TableDefinition::new("tenure_version_rows");
const SINGLE: TableDefinition<(i64, &[u8]), &[u8]> = TableDefinition::new("tenure_versions");
const DELETED: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tenure_deleted");
const KEYED: TableDefinition<(&[u8], i64), &[u8]> = TableDefinition::new("tenure_history");

/// The seal of a stored row (`store/seal.rs`): payload, then CRC-32 of the table name, key and
/// payload, lengths as u64 LE.
fn seal(table: &str, key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut h = crc32fast::Hasher::new();
    h.update(&(table.len() as u64).to_le_bytes());
    h.update(table.as_bytes());
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key);
    h.update(payload);
    let mut out = payload.to_vec();
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out
}

fn position_bytes(rev: i64, n: u32) -> Vec<u8> {
    let mut id = rev.to_be_bytes().to_vec();
    id.extend_from_slice(&n.to_be_bytes());
    id
}

/// Rewrites the meta checksum row over every other meta row, as every tenure transaction does.
fn reseal_meta(meta: &mut redb::Table<&str, i64>) {
    let mut h = crc32fast::Hasher::new();
    for row in meta.iter().unwrap() {
        let (k, v) = row.unwrap();
        if k.value() == "checksum" {
            continue;
        }
        h.update(&(k.value().len() as u64).to_le_bytes());
        h.update(k.value().as_bytes());
        h.update(&v.value().to_le_bytes());
    }
    meta.insert("checksum", h.finalize() as i64).unwrap();
}

/// The writes a `tenure_changes` row lists: revision (i64 LE), key length (u32 LE), key.
fn row_writes(mut payload: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    while !payload.is_empty() {
        let rev = i64::from_le_bytes(payload[..8].try_into().unwrap());
        let len = u32::from_le_bytes(payload[8..12].try_into().unwrap()) as usize;
        out.push((rev, payload[12..12 + len].to_vec()));
        payload = &payload[12 + len..];
    }
    out
}

/// A `tenure_changes` row: its key (the position of its first write) and its writes.
type ChangesRow = ((i64, u32), Vec<(i64, Vec<u8>)>);

/// Every `tenure_changes` row of a closed file.
fn changes_rows(path: &Path) -> Vec<ChangesRow> {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let t = tx.open_table(CHANGES).unwrap();
    t.iter()
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            let v = v.value();
            (k.value(), row_writes(&v[..v.len() - 4]))
        })
        .collect()
}

fn has_table(path: &Path, name: &str) -> bool {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let found = tx.list_tables().unwrap().any(|t| t.name() == name);
    found
}

fn format_of(path: &Path) -> i64 {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let v = tx
        .open_table(META)
        .unwrap()
        .get("format")
        .unwrap()
        .unwrap()
        .value();
    v
}

fn take_varint(bytes: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = bytes[0];
        *bytes = &bytes[1..];
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
    }
    v
}

/// A version's stored bytes past its links (`store/chain.rs`: depth, level count, each
/// level's length and revisions, LEB128): the key's row as `codec` encodes it.
fn version_entry(stored: &[u8]) -> &[u8] {
    let mut rest = stored;
    take_varint(&mut rest);
    let levels = rest[0];
    rest = &rest[1..];
    for _ in 0..levels {
        let n = rest[0];
        rest = &rest[1..];
        for _ in 0..n {
            take_varint(&mut rest);
        }
    }
    rest
}

/// A version: (revision, key), and its stored bytes (links, then the key's row as `codec`
/// encodes it).
type Version = ((i64, Vec<u8>), Vec<u8>);

/// The versions a `tenure_version_rows` row packs (its seal stripped): each revision (i64 LE),
/// key length (u32 LE), key, length (u32 LE), stored bytes.
fn row_versions(mut payload: &[u8], out: &mut Vec<Version>) {
    let u32_at = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
    while !payload.is_empty() {
        let rev = i64::from_le_bytes(payload[..8].try_into().unwrap());
        let klen = u32_at(&payload[8..]);
        let key = payload[12..12 + klen].to_vec();
        let len = u32_at(&payload[12 + klen..]);
        let at = 16 + klen;
        out.push(((rev, key), payload[at..at + len].to_vec()));
        payload = &payload[at + len..];
    }
}

/// Every version of a closed file, in (revision, key) order.
fn versions(path: &Path) -> Vec<Version> {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let t = tx.open_table(VERSIONS).unwrap();
    let mut out = Vec::new();
    for r in t.iter().unwrap() {
        let (_, v) = r.unwrap();
        let v = v.value();
        row_versions(&v[..v.len() - 4], &mut out);
    }
    out
}

/// Turns a closed file of this build into one of formats 7 or 8: one row per version in
/// `tenure_versions`, (revision, key) → the stored bytes sealed under revision (big-endian)
/// then key; `format` set.
fn to_single_layout(path: &Path, format: i64) {
    let versions = versions(path);
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut single = tx.open_table(SINGLE).unwrap();
        for ((rev, key), stored) in &versions {
            let mut at = rev.to_be_bytes().to_vec();
            at.extend_from_slice(key);
            let row = seal("tenure_versions", &at, stored);
            single
                .insert((*rev, key.as_slice()), row.as_slice())
                .unwrap();
        }
        let mut meta = tx.open_table(META).unwrap();
        meta.insert("format", format).unwrap();
        reseal_meta(&mut meta);
    }
    tx.delete_table(VERSIONS).unwrap();
    tx.commit().unwrap();
}

/// Turns a closed file of this build into one the builds before K17 wrote: its history keyed
/// by key (`tenure_history`, (key, revision) → the row sealed under key then revision), and
/// with `per_write`, as before K16, one sealed `tenure_events` row per write, (revision, n) →
/// key, instead of `tenure_changes`; `format` set.
fn to_keyed_layout(path: &Path, format: i64, per_write: bool) {
    let rows = changes_rows(path);
    let versions = versions(path);
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut keyed = tx.open_table(KEYED).unwrap();
        for ((rev, key), stored) in &versions {
            let mut at = key.clone();
            at.extend_from_slice(&rev.to_be_bytes());
            let row = seal("tenure_history", &at, version_entry(stored));
            keyed
                .insert((key.as_slice(), *rev), row.as_slice())
                .unwrap();
        }
        if per_write {
            let mut events = tx.open_table(PER_WRITE).unwrap();
            let (mut rev, mut n) = (0, 0u32);
            for (_, writes) in rows {
                for (r, key) in writes {
                    if r != rev {
                        (rev, n) = (r, 0);
                    }
                    let row = seal("tenure_events", &position_bytes(r, n), &key);
                    events.insert((r, n), row.as_slice()).unwrap();
                    n += 1;
                }
            }
        }
        let mut meta = tx.open_table(META).unwrap();
        meta.insert("format", format).unwrap();
        reseal_meta(&mut meta);
    }
    tx.delete_table(VERSIONS).unwrap();
    tx.delete_table(DELETED).unwrap();
    if per_write {
        tx.delete_table(CHANGES).unwrap();
    }
    tx.commit().unwrap();
}

/// A watch of every key from `from`, drained: the events it replays (no write runs meanwhile;
/// the replayed events are queued when `watch` returns, the last ones at the current revision).
fn replay(db: &Tenure, from: i64) -> Vec<Event> {
    let mut w = db
        .watch(
            "",
            WatchOptions {
                prefix: true,
                start_revision: Some(from),
                prev_kv: true,
            },
        )
        .unwrap();
    let current = db.revision().unwrap();
    let mut out: Vec<Event> = Vec::new();
    while out.last().is_none_or(|e| e.kv.mod_revision < current) {
        out.push(w.recv_timeout(Duration::from_secs(10)).unwrap());
    }
    // The rest of the current revision's writes, then nothing.
    while let Some(e) = w.try_recv().unwrap() {
        assert_eq!(
            e.kv.mod_revision, current,
            "nothing beyond the current revision"
        );
        out.push(e);
    }
    out
}

/// What a compared event says: kind, key, value, revisions, version, lease, previous value.
type Said = (EventKind, Vec<u8>, Vec<u8>, i64, i64, i64, Option<Vec<u8>>);

/// Asserts two event lists say the same, naming the first difference (not the whole lists).
fn assert_same(got: &[Event], want: &[Event], ctx: &str) {
    let (g, w) = (said(got), said(want));
    if let Some(i) = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)) {
        panic!(
            "{ctx}: {} events against {}; first difference at {i}: {:?} against {:?}",
            g.len(),
            w.len(),
            g.get(i),
            w.get(i)
        );
    }
}

/// Asserts two reads give the same key-values, naming the first difference.
fn assert_same_kvs(got: &[KeyValue], want: &[KeyValue], ctx: &str) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{ctx}: {} keys against {}; first difference at {i}: {:?} against {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

/// The events of `all` from `from`, as a replay from the compaction point `compacted` gives
/// them: the rows before `compacted` are gone, so its own events have no previous value.
fn expected(all: &[Event], from: i64, compacted: i64) -> Vec<Event> {
    all.iter()
        .filter(|e| e.kv.mod_revision >= from)
        .cloned()
        .map(|mut e| {
            if e.kv.mod_revision <= compacted {
                e.prev_kv = None;
            }
            e
        })
        .collect()
}

fn said(events: &[Event]) -> Vec<Said> {
    events
        .iter()
        .map(|e| {
            let KeyValue {
                key,
                value,
                create_revision,
                mod_revision,
                version,
                ..
            } = e.kv.clone();
            (
                e.kind,
                key,
                value,
                create_revision,
                mod_revision,
                version,
                e.prev_kv.as_ref().map(|p| p.value.clone()),
            )
        })
        .collect()
}

/// Writes of every kind: puts, a txn of several writes in one revision, a delete, a delete by
/// prefix, a lease's revoke deleting its key. Returns the revision reached.
fn mixed_writes(db: &Tenure, round: usize) -> i64 {
    db.put(format!("a{round}"), "1", None).unwrap();
    db.put("b", format!("b{round}"), None).unwrap();
    db.txn(Txn::new().then([
        Op::put("a", format!("t{round}"), None),
        Op::put(format!("c{round}"), "1", None),
        Op::delete("b"),
    ]))
    .unwrap();
    let lease = db.grant(Duration::from_secs(600)).unwrap();
    db.put(format!("leased{round}"), "v", Some(lease)).unwrap();
    db.revoke(lease).unwrap();
    for i in 0..3 {
        db.put(format!("p/{round}/{i}"), "x", None).unwrap();
    }
    db.delete_prefix(format!("p/{round}/")).unwrap();
    db.revision().unwrap()
}

/// The file of `format` the builds before packed versions wrote (7 and 8: one row per
/// version; 3 to 6: keyed by key, with one event row per write for 3 and 4) reads in place as
/// written, replays and reads at every revision as written once opened, which converts it
/// (`format` becomes `now`), and goes on.
fn old_file_is_read_then_converted(format: i64, now: i64) {
    let per_write = format <= 4;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k16.tenure");
    let db = open_file(&path);
    let old_end = mixed_writes(&db, 0);
    let old_events = replay(&db, 1);
    let old_reads: Vec<Vec<KeyValue>> = (1..=old_end)
        .map(|r| db.range_at("", None, r).unwrap())
        .collect();
    db.close().unwrap();
    if format >= 7 {
        to_single_layout(&path, format);
        assert!(has_table(&path, "tenure_versions"));
    } else {
        to_keyed_layout(&path, format, per_write);
        assert!(!has_table(&path, "tenure_versions"));
    }
    assert!(!has_table(&path, "tenure_version_rows"));
    assert_eq!(has_table(&path, "tenure_changes"), !per_write);

    // Read in place, as it is: nothing written, the format kept.
    let bytes = std::fs::read(&path).unwrap();
    for (r, kvs) in (1..).zip(&old_reads) {
        let in_place = Tenure::read_file_range_at(&path, "", "\0", r).unwrap();
        assert_same_kvs(&in_place, kvs, &format!("in place at {r}"));
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "a read in place writes nothing"
    );

    let db = open_file(&path);
    assert_same(
        &replay(&db, 1),
        &old_events,
        "the old rows replay as written",
    );
    for (r, kvs) in (1..).zip(&old_reads) {
        assert_same_kvs(&db.range_at("", None, r).unwrap(), kvs, &format!("at {r}"));
    }
    let end = mixed_writes(&db, 1);
    let all = replay(&db, 1);
    assert_same(&all[..old_events.len()], &old_events, "the old rows first");
    assert!(all[old_events.len()..]
        .iter()
        .all(|e| e.kv.mod_revision > old_end));
    assert_eq!(all.last().unwrap().kv.mod_revision, end);
    // A start inside the old rows, one at the switch.
    for from in [4, old_end, old_end + 1] {
        let want: Vec<Event> = all
            .iter()
            .filter(|e| e.kv.mod_revision >= from)
            .cloned()
            .collect();
        assert_same(&replay(&db, from), &want, &format!("from {from}"));
    }
    db.close().unwrap();
    assert_eq!(format_of(&path), now, "converted: older builds refuse it");
    for old in ["tenure_history", "tenure_events", "tenure_versions"] {
        assert!(!has_table(&path, old), "{old} converted and dropped");
    }

    let db = open_file(&path);
    assert_same(&replay(&db, 1), &all, "across reopen");
    for (r, kvs) in (1..).zip(&old_reads) {
        assert_same_kvs(&db.range_at("", None, r).unwrap(), kvs, &format!("at {r}"));
    }
    db.close().unwrap();
}

#[test]
fn k16_a_file_with_one_event_row_per_write_reads_in_place_replays_and_is_converted() {
    old_file_is_read_then_converted(3, 9);
}

#[test]
fn k16_a_file_of_format_4_opens_replays_and_is_converted() {
    // 4: written with the log; converted, then marked complete (9) by the clean close.
    old_file_is_read_then_converted(4, 9);
}

#[test]
fn k17_a_file_of_the_history_keyed_by_key_reads_in_place_replays_and_is_converted() {
    old_file_is_read_then_converted(5, 9);
    old_file_is_read_then_converted(6, 9);
}

#[test]
fn k17_a_file_of_one_row_per_version_reads_in_place_replays_and_is_converted() {
    old_file_is_read_then_converted(7, 9);
    // 8: written with the log.
    old_file_is_read_then_converted(8, 9);
}

#[test]
fn k17_compaction_of_a_converted_file_keeps_every_later_answer() {
    converted_file_compacts(3);
    converted_file_compacts(7);
}

/// A file of `format` (3: keyed by key, 7: one row per version), converted at open, then
/// compacted twice: every answer at or after each compaction point stays.
fn converted_file_compacts(format: i64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k17-old.tenure");
    let db = open_file(&path);
    // 60 revisions of 100 writes (6 000 versions: more than one step), over 150 keys, with
    // deletes.
    for r in 0..60 {
        let ops: Vec<Op> = (0..100)
            .map(|i| {
                let key = format!("k{:03}", (r * 100 + i) % 150);
                if (r + i) % 7 == 0 {
                    Op::delete(key)
                } else {
                    Op::put(key, format!("{r}.{i}"), None)
                }
            })
            .collect();
        db.txn(Txn::new().then(ops)).unwrap();
    }
    let old_end = db.revision().unwrap();
    db.close().unwrap();
    if format >= 7 {
        to_single_layout(&path, format);
    } else {
        to_keyed_layout(&path, format, true);
    }

    let db = open_file(&path);
    for i in 0..20 {
        db.put(format!("k{:03}", i), format!("new{i}"), None)
            .unwrap();
    }
    let end = db.revision().unwrap();
    let all = replay(&db, 1);
    let reads: Vec<(i64, Vec<KeyValue>)> = (1..=end)
        .map(|r| (r, db.range_at("", None, r).unwrap()))
        .collect();
    let check = |db: &Tenure, compacted: i64| {
        for (r, kvs) in reads.iter().filter(|(r, _)| *r >= compacted) {
            assert_same_kvs(&db.range_at("", None, *r).unwrap(), kvs, &format!("at {r}"));
        }
        for from in [compacted, compacted + 1, old_end, end]
            .into_iter()
            .filter(|&f| f >= compacted)
        {
            let want = expected(&all, from, compacted);
            assert_same(&replay(db, from), &want, &format!("from {from}"));
        }
    };
    assert_eq!(db.compact_physical(30).unwrap(), Ok(end));
    check(&db, 30);
    db.close().unwrap();
    let below = versions(&path).iter().filter(|((r, _), _)| *r < 30).count();
    assert!(
        below <= 150,
        "at most one version per key below 30: {below}"
    );

    let db = open_file(&path);
    check(&db, 30);
    assert_eq!(db.compact_physical(old_end + 5).unwrap(), Ok(end));
    check(&db, old_end + 5);
    db.close().unwrap();
    let db = open_file(&path);
    check(&db, old_end + 5);
    db.close().unwrap();
}

/// The file at `path` without the write-ahead log: every call commits into the file itself.
fn open_without_log(path: &std::path::Path) -> Tenure {
    Tenure::builder()
        .path(path)
        .write_ahead_log(false)
        .open()
        .unwrap()
}

#[test]
fn k17_compaction_keeps_one_version_per_key_below_its_point_and_no_events_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k17.tenure");
    // Without the log every call is its own commit into the file: one row each.
    let open = || open_without_log(&path);
    let db = open();
    for t in 0..9 {
        let ops: Vec<Op> = (t * 128..(t * 128 + 128).min(1100))
            .map(|i| Op::put(format!("big/{i:04}"), "v", None))
            .collect();
        db.txn(Txn::new().then(ops)).unwrap();
    }
    // One revision of 1 100 deletes: more writes than one row holds.
    assert_eq!(db.delete_prefix("big/").unwrap(), 1100);
    let big = db.revision().unwrap();
    for r in 0..40 {
        db.put(format!("k{}", r % 5), format!("{r}"), None).unwrap();
        db.txn(Txn::new().then([
            Op::put("t", format!("{r}"), None),
            Op::put(format!("u{}", r % 3), "x", None),
        ]))
        .unwrap();
    }
    let end = db.revision().unwrap();
    let all = replay(&db, 1);
    let reads: Vec<(i64, Vec<KeyValue>)> = (big..=end)
        .map(|r| (r, db.range_at("", None, r).unwrap()))
        .collect();
    db.close().unwrap();
    let rows = changes_rows(&path);
    assert_eq!(
        rows.iter().filter(|(id, _)| id.0 != big).count(),
        9 + 80,
        "one row per commit"
    );
    // The big commit's rows: each keyed by the position of its first write, in order.
    let big_rows: Vec<_> = rows.iter().filter(|(id, _)| id.0 == big).collect();
    assert!(big_rows.len() >= 2, "1 100 writes of one commit take rows");
    let mut n = 0;
    for (id, writes) in &big_rows {
        assert_eq!(*id, (big, n), "keyed by the position of its first write");
        assert!(writes.len() <= 1024);
        n += writes.len() as u32;
    }
    assert_eq!(n, 1100);

    let compact_at = big + 40;
    let db = open();
    assert_eq!(db.compact_physical(compact_at).unwrap(), Ok(end));
    for (r, kvs) in reads.iter().filter(|(r, _)| *r >= compact_at) {
        assert_same_kvs(&db.range_at("", None, *r).unwrap(), kvs, &format!("at {r}"));
    }
    assert_same(
        &replay(&db, compact_at),
        &expected(&all, compact_at, compact_at),
        "from the compaction",
    );
    let live_at: Vec<KeyValue> = db.range_at("", None, compact_at).unwrap();
    db.close().unwrap();

    // Below the compaction only each key's last put at or below it is left; no events row
    // wholly below it is.
    let mut below: Vec<(i64, Vec<u8>)> = versions(&path)
        .into_iter()
        .map(|(at, _)| at)
        .filter(|(r, _)| *r < compact_at)
        .collect();
    let mut want: Vec<(i64, Vec<u8>)> = live_at
        .iter()
        .filter(|kv| kv.mod_revision < compact_at)
        .map(|kv| (kv.mod_revision, kv.key.clone()))
        .collect();
    want.sort();
    below.sort();
    assert_eq!(below, want);
    let rows = changes_rows(&path);
    assert!(
        rows.iter()
            .all(|(_, w)| w.iter().any(|(r, _)| *r >= compact_at)),
        "no events row wholly below the compaction is kept"
    );
}

/// Puts k0..k9 at revisions 1..=10 without the log (every put its own commit: revision 5 is
/// the events row (5, 0)), then flips a bit of that row's key.
fn ten_puts_and_revision_5_damaged(path: &Path) {
    let db = open_without_log(path);
    for i in 0..10 {
        db.put(format!("k{i}"), "v", None).unwrap();
    }
    db.close().unwrap();
    let raw = redb::Database::open(path).unwrap();
    let tx = raw.begin_write().unwrap();
    {
        let mut t = tx.open_table(CHANGES).unwrap();
        let mut row = t.get((5, 0)).unwrap().unwrap().value().to_vec();
        row[9] ^= 0x40; // a bit of the key "k4"
        t.insert((5, 0), row.as_slice()).unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn k16_a_damaged_events_row_fails_the_replay_and_the_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k16-damaged.tenure");
    // Without the log every put is its own commit: revision 5 is the row (5, 0).
    let open = || open_without_log(&path);
    ten_puts_and_revision_5_damaged(&path);
    let db = open();
    // From before it: refused, naming the row; from after it: unaffected.
    for from in [1, 5] {
        let e = db
            .watch(
                "",
                WatchOptions {
                    prefix: true,
                    start_revision: Some(from),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code(), tenure::ErrorCode::Storage, "{e}");
        assert!(
            e.to_string().contains("damaged events row at revision 5"),
            "{e}"
        );
    }
    assert_eq!(replay(&db, 6).len(), 5);
    let e = db.compact_physical(8).unwrap_err();
    assert!(
        e.to_string().contains("damaged events row at revision 5"),
        "{e}"
    );
    // Reads at a revision use the history rows, not the events.
    assert_eq!(db.get_at("k4", 8).unwrap().unwrap().value, b"v");
    db.close().unwrap();
}

#[test]
fn k16_a_damaged_events_row_leaves_checkpoints_and_writes_unharmed() {
    // A checkpoint of the log also compacts (K10); a row it cannot read leaves that work to
    // the compactor, whose steps fail as above, and never fails the checkpoint's writes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k16-checkpoint.tenure");
    ten_puts_and_revision_5_damaged(&path);
    let open = || {
        Tenure::builder()
            .path(&path)
            .auto_compaction(AutoCompaction::Off)
            .open()
            .unwrap()
    };
    let db = open();
    assert!(db.compact(8).unwrap().is_ok());
    db.put("after", "w", None).unwrap();
    db.flush_to_file().unwrap();
    db.put("later", "w", None).unwrap();
    let e = db.wait_compacted().unwrap_err();
    assert!(
        e.to_string().contains("damaged events row at revision 5"),
        "{e}"
    );
    db.close().unwrap();
    let db = open();
    assert_eq!(db.get("after").unwrap().unwrap().value, b"w");
    assert_eq!(db.get("later").unwrap().unwrap().value, b"w");
    assert_eq!(db.get_at("k4", 8).unwrap().unwrap().value, b"v");
    db.close().unwrap();
}
