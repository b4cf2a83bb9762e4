use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::sync::admit::{Acquire, AdmitWait, Entry, Held, Rule};
use crate::sync::mutex::release;
use crate::sync::session::Session;
use crate::sync::turn::{prefix_of, put_entry};
use crate::types::LeaseId;
use crate::wait::{block_on, Interest, Pollable, Wait};

/// A distributed read-write lock (SPEC S8): many readers at once or one writer alone, in
/// arrival order, so a stream of readers never starves a writer.
///
/// Key layout of etcd's `contrib/recipes` `RWMutex` (so Go programs using it interoperate):
/// a reader puts `name/read/<unix nanos>`, a writer `name/write/<unix nanos>`, with its
/// session's lease. A reader is admitted when no writer key older than its own is left; a
/// writer when no key at all older than its own is left. A holder whose session ends loses its
/// key, and with it the lock. The fencing token of a hold is its key's create revision.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{RwLock, Session, SessionOptions};
/// use tenure::{Error, Tenure};
///
/// let db = Tenure::in_memory()?;
/// let [a, b, c] = [(); 3].map(|_| Session::new(&db, SessionOptions::default()).unwrap());
/// let ra = RwLock::new(&a, "config").read(Some(Duration::from_secs(5)))?;
/// let rb = RwLock::new(&b, "config").try_read()?; // readers share
/// let refused = RwLock::new(&c, "config").try_write().unwrap_err();
/// assert!(matches!(refused, Error::Locked { .. }));
/// ra.release()?;
/// rb.release()?;
/// let w = RwLock::new(&c, "config").try_write()?; // a writer alone
/// assert!(w.is_write() && w.fencing_token() > 0);
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RwLock {
    session: Session,
    name: String,
    prefix: Vec<u8>,
}

/// The two kinds of hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}

impl Mode {
    fn word(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
}

/// A held read or write lock of a [`RwLock`]. Dropping it releases the lock.
#[derive(Debug)]
pub struct RwLockGuard {
    held: Held,
    mode: Mode,
}

impl RwLock {
    /// The read-write lock `name` for `session`.
    pub fn new(session: &Session, name: &str) -> RwLock {
        RwLock {
            session: session.clone(),
            name: name.to_owned(),
            prefix: prefix_of(name),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn rule(&self, mode: Mode) -> Rule {
        let counted = match mode {
            Mode::Read => {
                let mut p = self.prefix.clone();
                p.extend_from_slice(b"write/");
                p
            }
            Mode::Write => self.prefix.clone(),
        };
        Rule {
            counted,
            own_only: false,
            limit: 1,
            watched: self.prefix.clone(),
        }
    }

    /// Puts a new key `name/<mode>/<unix nanos>` (etcd's `newUniqueEphemeralKey`).
    fn enter(&self, mode: Mode) -> Result<Entry> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // A key taken by another contender at the same nanosecond: the next one.
        for nanos in now..now + 64 {
            let mut key = self.prefix.clone();
            key.extend_from_slice(format!("{}/{nanos}", mode.word()).as_bytes());
            let (rev, made) = put_entry(&self.session, &key, b"")?;
            if made {
                return Ok(Entry {
                    key,
                    rev,
                    fresh: true,
                    claim: None,
                });
            }
        }
        Err(Error::storage(format!(
            "read-write lock {:?}: no free key after 64 tries",
            self.name
        )))
    }

    fn guard(&self, entry: Entry, mode: Mode) -> RwLockGuard {
        RwLockGuard {
            held: Held::new(&self.session, entry),
            mode,
        }
    }

    /// Waits until this session holds the lock for reading (no writer before it), as long as
    /// `wait` allows. `Timeout`, `SessionExpired`, `NotPrimary` as [`Mutex::lock`]; on failure
    /// the key is removed, so it blocks no one.
    ///
    /// [`Mutex::lock`]: crate::sync::Mutex::lock
    pub fn read(&self, wait: impl Into<Wait>) -> Result<RwLockGuard> {
        block_on(self.read_wait(wait))
    }

    /// Waits until this session holds the lock for writing (no one before it).
    pub fn write(&self, wait: impl Into<Wait>) -> Result<RwLockGuard> {
        block_on(self.write_wait(wait))
    }

    /// [`read`](Self::read) as a state machine.
    pub fn read_wait(&self, wait: impl Into<Wait>) -> RwLockWait {
        self.wait(Mode::Read, wait.into())
    }

    /// [`write`](Self::write) as a state machine.
    pub fn write_wait(&self, wait: impl Into<Wait>) -> RwLockWait {
        self.wait(Mode::Write, wait.into())
    }

    fn wait(&self, mode: Mode, wait: Wait) -> RwLockWait {
        RwLockWait {
            lock: self.clone(),
            mode,
            wait,
            acquire: Acquire::Start,
        }
    }

    /// Takes the lock for reading if no writer holds it or waits for it, else `Locked`.
    pub fn try_read(&self) -> Result<RwLockGuard> {
        self.try_take(Mode::Read)
    }

    /// Takes the lock for writing if no one holds it or waits for it, else `Locked`.
    pub fn try_write(&self) -> Result<RwLockGuard> {
        self.try_take(Mode::Write)
    }

    fn try_take(&self, mode: Mode) -> Result<RwLockGuard> {
        let entry = self.enter(mode)?;
        let db = self.session.backend();
        let older = self.rule(mode).older(&**db, entry.rev)?;
        if older.is_empty() {
            return Ok(self.guard(entry, mode));
        }
        release(&**db, &entry.key, entry.rev)?;
        Err(Error::Locked {
            name: self.name.clone(),
            holder: older[0].lease.unwrap_or(LeaseId::new(0)),
        })
    }
}

/// A read or write wait in progress, from [`RwLock::read_wait`] or [`RwLock::write_wait`].
#[derive(Debug)]
pub struct RwLockWait {
    lock: RwLock,
    mode: Mode,
    wait: Wait,
    acquire: Acquire,
}

impl Pollable for RwLockWait {
    type Output = RwLockGuard;

    fn poll(&mut self) -> Result<Option<RwLockGuard>> {
        let (l, mode, wait) = (&self.lock, self.mode, &self.wait);
        let got = self.acquire.poll(|| {
            // Taken before the key is put, so that no demote in between is missed.
            let demoted = l.session.backend().demotion();
            let entry = l.enter(mode)?;
            let admit = AdmitWait::new(
                &l.session,
                l.rule(mode),
                entry.key.clone(),
                entry.rev,
                wait.clone(),
                demoted,
                format!("{} lock {:?}", mode.word(), l.name),
            );
            Ok((entry, admit))
        })?;
        Ok(got.map(|entry| l.guard(entry, mode)))
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        self.acquire.register(interest);
    }

    fn polls_the_network(&self) -> bool {
        self.lock.session.backend().over_network()
    }
}

impl Drop for RwLockWait {
    fn drop(&mut self) {
        self.acquire.withdraw();
    }
}

impl RwLockGuard {
    /// Whether this is a write hold (else a read hold).
    pub fn is_write(&self) -> bool {
        self.mode == Mode::Write
    }

    /// The fencing token: the create revision of this hold's key.
    pub fn fencing_token(&self) -> i64 {
        self.held.fencing_token()
    }

    /// This hold's key (`name/read/<nanos>` or `name/write/<nanos>`).
    pub fn key(&self) -> &[u8] {
        self.held.key()
    }

    /// Whether the lock is still held: its session is not done and its key exists with the same
    /// create revision.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// Releases the lock (deletes only this hold's key); `NotLeader` if it had been lost.
    pub fn release(self) -> Result<()> {
        self.held.release()
    }
}
