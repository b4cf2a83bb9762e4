//! Ownership of a shared file (SPEC P1, P4): an exclusive `flock` on `<file>.lock`, beside the
//! data file. The kernel frees it when its holder dies, however it dies, so whoever gets it next
//! knows the previous owner is gone. The file also carries the owner's record of its session
//! leases (`registry.rs`), rewritten in place (no fsync: a killed process leaves the page
//! cache behind, and after a machine crash the leases' TTL ends them anyway).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::registry::{self, Record, MAX_RECORD_BYTES};
use crate::error::{Error, Result};

/// The lock file of a database at `file` (its canonical path).
pub(crate) fn lock_path(file: &Path) -> PathBuf {
    let mut p = file.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// The open lock file (its own open file description: `flock` conflicts between two of them
/// even in one process).
#[derive(Debug)]
pub(crate) struct Ownership {
    path: PathBuf,
    file: File,
}

/// The lock file's path in an error about it.
fn refused(path: &Path, e: &std::io::Error) -> Error {
    // A lock file that exists but may not be opened is another user's; one that cannot be
    // made is a directory this process may not write.
    if e.kind() == std::io::ErrorKind::PermissionDenied && path.exists() {
        return Error::PermissionDenied(format!(
            "{}: {e} (shared mode: a file is shared by the processes of the user who owns it)",
            path.display()
        ));
    }
    Error::io(
        "shared mode keeps its lock file beside the database (its directory must be \
         writable); cannot open",
        path,
        e,
    )
}

impl Ownership {
    /// Opens (or creates, mode 0600) the lock file at `path`; takes nothing yet.
    pub(crate) fn open(path: &Path) -> Result<Ownership> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| refused(path, &e))?;
        Ok(Ownership {
            path: path.to_path_buf(),
            file,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Takes ownership if no one holds it: `Ok(false)` while another holder lives.
    pub(crate) fn try_take(&self) -> Result<bool> {
        match self.file.try_lock() {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(refused(&self.path, &e)),
        }
    }

    /// Gives ownership up (a waiting process takes it over).
    pub(crate) fn release(&self) {
        let _ = self.file.unlock();
    }

    /// What the file records: the last owner's process ID and session leases.
    pub(crate) fn read_record(&self) -> Record {
        let mut text = String::new();
        let mut f = &self.file;
        let _ = std::io::Seek::rewind(&mut f);
        match f.take(MAX_RECORD_BYTES).read_to_string(&mut text) {
            Ok(_) => registry::decode(&text),
            Err(_) => Record::default(),
        }
    }

    /// Rewrites the record (only the owner writes): the new text first, then the length, so the
    /// file never reads empty in between.
    pub(crate) fn write_record(&self, text: &str) -> Result<()> {
        self.file
            .write_all_at(text.as_bytes(), 0)
            .and_then(|()| self.file.set_len(text.len() as u64))
            .map_err(|e| Error::io("cannot write the shared-mode record in", &self.path, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::LeaseId;

    #[test]
    fn p1_one_holder_at_a_time_even_in_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(&dir.path().join("db"));
        assert!(path.ends_with("db.lock"));
        let a = Ownership::open(&path).unwrap();
        let b = Ownership::open(&path).unwrap();
        assert!(a.try_take().unwrap());
        assert!(!b.try_take().unwrap());
        a.release();
        assert!(b.try_take().unwrap());
        assert!(!a.try_take().unwrap());
        drop(b);
        assert!(a.try_take().unwrap(), "closing the holder frees it");
    }

    #[test]
    fn p6_the_record_is_rewritten_in_place_and_read_by_another_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(&dir.path().join("db"));
        let a = Ownership::open(&path).unwrap();
        let mut reg = registry::Registry::default();
        for id in [5, 6, 7] {
            reg.set(LeaseId::new(id), true);
        }
        a.write_record(&reg.encode(10)).unwrap();
        reg.set(LeaseId::new(6), false);
        a.write_record(&reg.encode(10)).unwrap();
        let b = Ownership::open(&path).unwrap();
        let r = b.read_record();
        assert_eq!(r.pid, Some(10));
        assert_eq!(r.leases, vec![LeaseId::new(5), LeaseId::new(7)]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
