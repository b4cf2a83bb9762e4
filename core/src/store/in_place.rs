//! Reading a database file in place without ever writing it (SPEC E10, E12): offline
//! inspection and `snapshot status`.
//!
//! A database file is read under the shared locks of redb's read-only open, held for the whole
//! read (`open_read_only_held`): no engine has it open, and none opens it, until the read is
//! over. A file redb would have to repair (its writer was killed), or whose write-ahead log
//! holds records it lacks, is read through [`Scratch`], a backend that keeps every write redb
//! makes in memory: it is repaired, and the log replayed, in memory only. The file and its log
//! are never written (a file with mode 0444 in a read-only directory can be read), and nothing
//! acknowledged that the log holds is left out.

use std::fs::File;
use std::path::Path;

use redb::DatabaseError;

use redb::ReadableDatabase;

use super::files::{probe, Found};
use super::open::upgrade;
use super::scratch::Scratch;
use super::{
    corrupt_at, guarded, history, load, log_meta, open_error, open_read_only_held, replay, wal,
    Loaded, LogMeta, View, META,
};
use crate::error::{Error, Result};
use crate::etcd::errors::refused_at;
use crate::etcd::Refusal;
use crate::kv::range::KeyRange;
use crate::types::{KeyValue, SnapshotInfo, SnapshotProgress};

fn read_tx(db: &impl ReadableDatabase, path: &Path) -> Result<redb::ReadTransaction> {
    db.begin_read().map_err(|e| corrupt_at(path, e.to_string()))
}

/// A database read in place: read-only as it is, or repaired and replayed in memory.
enum Opened {
    /// No database yet: an empty file.
    Empty,
    AsIs(redb::ReadOnlyDatabase),
    Scratched(redb::Database),
}

/// Opens the database in the first `len` bytes of `path` without writing anything.
///
/// `with_log`: the file is a database (not a saved snapshot), read whole (`len` is `None`) under
/// the shared locks redb's read-only open takes, held for as long as the returned database
/// lives (`open_read_only_held`; its backend keeps a descriptor of the same open file
/// description): refused (`AlreadyOpen`) while an engine has the file open, and no engine can
/// open it for writing until the read is over (its open is `AlreadyOpen`), so the read never
/// sees a file or log being written. A file whose writer was killed is repaired, and the
/// records of its write-ahead log that redb lacks are replayed, in memory. Without `with_log`
/// (a saved snapshot, which has no log) nothing is locked and a file redb would have to
/// repair is refused as `Corrupt`.
fn open_in_place(path: &Path, len: Option<u64>, with_log: bool) -> Result<Opened> {
    if with_log {
        // Clear errors for what is no database, never blocking on a FIFO; an empty file is the
        // empty database an engine would make of it.
        if let Found::New = probe(path)? {
            return Ok(Opened::Empty);
        }
    }
    let file = File::open(path).map_err(|e| Error::io("cannot read", path, &e))?;
    let len = match len {
        Some(n) => n,
        None => file
            .metadata()
            .map_err(|e| Error::io("cannot read", path, &e))?
            .len(),
    };
    let scratch = |f: &File| {
        f.try_clone()
            .map(|f| Scratch::new(f, len))
            .map_err(|e| Error::io("cannot read", path, &e))
    };
    guarded(path, || {
        let as_is = if with_log {
            open_read_only_held(&file, path)?
        } else {
            redb::Builder::new().open_read_only_with_backend(scratch(&file)?)
        };
        match as_is {
            // A file whose history this build converts (formats 3 to 8) is read through a
            // copy converted in memory.
            Ok(db) if !converted(&db, path)? => {
                let lm = match log_meta(&db, path)? {
                    Some(lm) if with_log => lm,
                    _ => return Ok(Opened::AsIs(db)),
                };
                match wal::read(path, lm.id, lm.applied)? {
                    wal::Found::Ours(r) if !r.is_empty() => {}
                    _ => return Ok(Opened::AsIs(db)),
                }
            }
            Ok(_) => {}
            Err(DatabaseError::RepairAborted) if !with_log => {
                return Err(Error::Corrupt {
                    path: path.to_path_buf(),
                    detail: "not closed cleanly (redb would have to repair it, which writes it)"
                        .into(),
                })
            }
            Err(DatabaseError::RepairAborted) => {}
            Err(e) => return Err(open_error(path, e)),
        }
        // Repair and replay, in memory (the locks stay: `scratch` reads through a descriptor
        // of the same open file description).
        let db = redb::Builder::new()
            .create_with_backend(scratch(&file)?)
            .map_err(|e| open_error(path, e))?;
        upgrade(&db, path)?;
        if let Some(LogMeta {
            id: Some(id),
            applied,
        }) = log_meta(&db, path)?
        {
            if let wal::Found::Ours(r) = wal::read(path, Some(id), applied)? {
                if !r.is_empty() {
                    replay(&db, path, &r, id, false)?;
                }
            }
        }
        Ok(Opened::Scratched(db))
    })
}

/// Whether the file's format keeps the history in a layout `history::upgrade` converts.
fn converted(db: &redb::ReadOnlyDatabase, path: &Path) -> Result<bool> {
    let tx = read_tx(db, path)?;
    let meta = match tx.open_table(META) {
        Ok(m) => m,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(false),
        Err(e) => return Err(corrupt_at(path, e.to_string())),
    };
    let format = meta
        .get("format")
        .map_err(|e| corrupt_at(path, e.to_string()))?
        .map(|v| v.value());
    Ok(format.is_some_and(history::is_converted))
}

/// What the database in the first `len` bytes of `path` holds, read without writing anything
/// (see `open_in_place`).
pub(crate) fn read_in_place(path: &Path, len: Option<u64>, with_log: bool) -> Result<Loaded> {
    let loaded = guarded(path, || {
        Ok(match open_in_place(path, len, with_log)? {
            Opened::Empty => None,
            Opened::AsIs(db) => load(&db, path)?,
            Opened::Scratched(db) => load(&db, path)?,
        })
    })?;
    Ok(loaded.map(|(l, _)| l).unwrap_or_default())
}

/// Copies the database file at `path` to `dest` as a snapshot (SPEC D8) without writing `path`
/// (see `open_in_place`): `tenure snapshot FILE OUT`.
pub(crate) fn copy_in_place(
    path: &Path,
    dest: &Path,
    progress: &mut dyn FnMut(SnapshotProgress),
) -> Result<SnapshotInfo> {
    guarded(path, || {
        let opened = open_in_place(path, None, true)?;
        // Validated as an open would (D5) before anything is written at `dest`.
        let tx = match &opened {
            Opened::Empty => {
                return Err(Error::invalid(format!(
                    "{} is empty: no database to copy",
                    path.display()
                )))
            }
            Opened::AsIs(db) => load(db, path).and_then(|_| read_tx(db, path)),
            Opened::Scratched(db) => load(db, path).and_then(|_| read_tx(db, path)),
        }?;
        View::of(tx, path).copy_to(dest, progress)
    })
}

/// The keys of `range` as they were at `revision` (0: the file's current one) in the database
/// file at `path`, read in place as [`read_in_place`] reads (SPEC E10, K9): under the file's
/// locks for the whole read (`AlreadyOpen` while an engine has it open; an engine opening it
/// meanwhile is refused), its log's records replayed in memory, nothing written. Below the
/// file's compaction → `Compacted`, above its revision → `FutureRevision`.
pub(crate) fn range_at_in_place(
    path: &Path,
    range: &KeyRange,
    revision: i64,
) -> Result<Vec<KeyValue>> {
    guarded(path, || {
        let opened = open_in_place(path, None, true)?;
        let (loaded, tx) = match &opened {
            Opened::Empty => (None, None),
            Opened::AsIs(db) => (load(db, path)?, Some(read_tx(db, path)?)),
            Opened::Scratched(db) => (load(db, path)?, Some(read_tx(db, path)?)),
        };
        let (current, compacted) = loaded
            .as_ref()
            .map_or((0, 0), |(l, _)| (l.revision, l.compacted));
        let at = if revision == 0 { current } else { revision };
        if at > current {
            return Err(refused_at(Refusal::FutureRevision, at, current, compacted));
        }
        if at < compacted {
            return Err(refused_at(Refusal::Compacted, at, current, compacted));
        }
        match tx {
            Some(tx) => View::of(tx, path).range_at(range, at, None),
            None => Ok(Vec::new()),
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::{copy_in_place, open_in_place, Opened};
    use crate::{Error, Tenure};

    /// A database with a lease and a key, closed cleanly (`crash`: false) or copied with its
    /// log while the engine had it open, as a kill -9 leaves it (redb must repair it and the
    /// log holds writes it lacks).
    fn database(dir: &Path, crash: bool) -> PathBuf {
        let path = dir.join("db.tenure");
        let db = Tenure::open(&path).unwrap();
        let lease = db.grant(Duration::from_secs(600)).unwrap();
        db.put("k", "v", Some(lease)).unwrap();
        if !crash {
            db.close().unwrap();
            return path;
        }
        let image = dir.join("image.tenure");
        std::fs::copy(&path, &image).unwrap();
        std::fs::copy(super::wal::path_of(&path), super::wal::path_of(&image)).unwrap();
        db.close().unwrap();
        image
    }

    fn assert_already_open(opened: crate::Result<Tenure>, path: &Path) {
        match opened {
            Err(Error::AlreadyOpen(p)) => assert_eq!(p, path),
            Ok(_) => panic!("an engine opened {} during an offline read", path.display()),
            Err(e) => panic!("expected AlreadyOpen, got {e:?}"),
        }
    }

    #[test]
    fn e10_no_engine_opens_a_file_while_it_is_read_in_place() {
        for crash in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = database(dir.path(), crash);
            let opened = open_in_place(&path, None, true).unwrap();
            assert_eq!(matches!(opened, Opened::Scratched(_)), crash);
            assert_already_open(Tenure::open(&path), &path);
            drop(opened);
            let db = Tenure::open(&path).unwrap();
            assert!(db.get("k").unwrap().is_some(), "crash image: {crash}");
            // And the other way round: an engine that has the file refuses the read.
            assert!(matches!(
                open_in_place(&path, None, true),
                Err(Error::AlreadyOpen(_))
            ));
            db.close().unwrap();
        }
    }

    #[test]
    fn e12_no_engine_opens_a_file_while_it_is_copied_in_place() {
        for crash in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = database(dir.path(), crash);
            let dest = dir.path().join("copy.tenure");
            let mut tried = 0;
            copy_in_place(&path, &dest, &mut |_| {
                if tried == 0 {
                    assert_already_open(Tenure::open(&path), &path);
                }
                tried += 1;
            })
            .unwrap();
            assert!(tried > 0, "the copy reported no progress");
            let copy = Tenure::open(&dest).unwrap();
            assert!(copy.get("k").unwrap().is_some(), "crash image: {crash}");
            copy.close().unwrap();
            Tenure::open(&path).unwrap().close().unwrap();
        }
    }
}
