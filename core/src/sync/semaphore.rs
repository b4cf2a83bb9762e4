use crate::error::{Error, Result};
use crate::sync::admit::{Acquire, AdmitWait, Entry, Held, Rule};
use crate::sync::backend::RangeOptions;
use crate::sync::session::Session;
use crate::sync::turn::{key_of, own_entries, prefix_of, put_entry};
use crate::types::LeaseId;
use crate::wait::{block_on, Interest, Pollable, Wait};

/// A counting semaphore (SPEC S7): at most `permits` sessions hold it at once, admitted FIFO.
///
/// Key layout (tenure's own): each contender puts `name/<lease hex>` with its session's lease
/// and the permit count as its decimal value; the holders are the `permits` entries with the
/// lowest create revisions, and a waiter waits until fewer than `permits` entries older than its
/// own are left. A holder whose session ends loses its key, and so its permit. Every contender
/// must name the same permit count: one that differs from the entries already there is refused
/// with `InvalidArgument` naming both. A session holds a given semaphore at most once at a time
/// (as a mutex); the fencing token of a permit is its key's create revision.
///
/// ```
/// use std::time::Duration;
/// use tenure::sync::{Semaphore, Session, SessionOptions};
/// use tenure::{Error, Tenure};
///
/// let db = Tenure::in_memory()?;
/// let [a, b, c] = [(); 3].map(|_| Session::new(&db, SessionOptions::default()).unwrap());
/// let ga = Semaphore::new(&a, "pool/gpu", 2)?.acquire(Some(Duration::from_secs(5)))?;
/// let gb = Semaphore::new(&b, "pool/gpu", 2)?.try_acquire()?;
/// // Both permits are taken: a third session is refused (or, with `acquire`, waits its turn).
/// let full = Semaphore::new(&c, "pool/gpu", 2)?.try_acquire().unwrap_err();
/// assert!(matches!(full, Error::Locked { .. }));
/// ga.release()?;
/// let gc = Semaphore::new(&c, "pool/gpu", 2)?.try_acquire()?;
/// assert!(gc.fencing_token() > gb.fencing_token());
/// # Ok::<(), tenure::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore {
    session: Session,
    name: String,
    permits: usize,
    prefix: Vec<u8>,
    key: Vec<u8>,
}

/// A held permit of a [`Semaphore`]. Dropping it releases the permit.
#[derive(Debug)]
pub struct SemaphoreGuard {
    held: Held,
}

impl Semaphore {
    /// The most permits a semaphore may have.
    pub const MAX_PERMITS: usize = 4096;

    /// The semaphore `name` with `permits` permits, for `session`. `InvalidArgument` if
    /// `permits` is 0 or above [`MAX_PERMITS`](Self::MAX_PERMITS).
    pub fn new(session: &Session, name: &str, permits: usize) -> Result<Semaphore> {
        if permits == 0 || permits > Semaphore::MAX_PERMITS {
            return Err(Error::invalid(format!(
                "semaphore {name:?}: permits must be between 1 and {}, not {permits}",
                Semaphore::MAX_PERMITS
            )));
        }
        let prefix = prefix_of(name);
        let key = key_of(&prefix, session.lease_id().get());
        Ok(Semaphore {
            session: session.clone(),
            name: name.to_owned(),
            permits,
            prefix,
            key,
        })
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its number of permits.
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// This contender's key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    fn rule(&self) -> Rule {
        Rule {
            counted: self.prefix.clone(),
            own_only: true,
            limit: self.permits,
            watched: self.prefix.clone(),
        }
    }

    /// Claims the pair, puts this contender's key if absent and checks the permit count.
    fn enter(&self) -> Result<Entry> {
        let claim = self.session.claim(&self.key, "semaphore", &self.prefix)?;
        let db = self.session.backend();
        let (rev, fresh) = put_entry(
            &self.session,
            &self.key,
            self.permits.to_string().as_bytes(),
        )?;
        let entry = Entry {
            key: self.key.clone(),
            rev,
            fresh,
            claim: Some(claim),
        };
        if let Err(e) = self.check_permits() {
            if fresh {
                let _ = crate::sync::mutex::release(&**db, &self.key, rev);
            }
            return Err(e);
        }
        Ok(entry)
    }

    /// `InvalidArgument` if another entry names a different permit count.
    fn check_permits(&self) -> Result<()> {
        let db = self.session.backend();
        let all = own_entries(&**db, &self.prefix, RangeOptions::default())?;
        let mine = self.permits.to_string();
        match all
            .iter()
            .find(|kv| kv.key != self.key && kv.value != mine.as_bytes())
        {
            None => Ok(()),
            Some(other) => Err(Error::invalid(format!(
                "semaphore {:?} has {} permits (agreed by its holders), not {} as asked",
                self.name,
                String::from_utf8_lossy(&other.value),
                self.permits
            ))),
        }
    }

    /// Waits until this session holds a permit, as long as `wait` allows (`None`: no limit; a
    /// `Duration`; a [`Wait`] with a deadline and a stop token). `Timeout` if it runs out or is
    /// stopped; `SessionExpired` at once if the session's lease is lost; `NotPrimary` if the
    /// engine is demoted; `InvalidArgument` if the permit count differs from its holders'. On
    /// failure this contender's key is removed, so it blocks no one.
    pub fn acquire(&self, wait: impl Into<Wait>) -> Result<SemaphoreGuard> {
        block_on(self.acquire_wait(wait))
    }

    /// [`acquire`](Self::acquire) as a state machine, for a [`WaitPool`](crate::WaitPool) or
    /// an event loop. Nothing happens until it is polled; dropped before its end, it withdraws.
    pub fn acquire_wait(&self, wait: impl Into<Wait>) -> SemaphoreWait {
        SemaphoreWait {
            sem: self.clone(),
            wait: wait.into(),
            acquire: Acquire::Start,
        }
    }

    /// Takes a permit if one is free and no one waits before this contender, else `Locked`
    /// (naming the oldest holder).
    pub fn try_acquire(&self) -> Result<SemaphoreGuard> {
        let entry = self.enter()?;
        let db = self.session.backend();
        let older = self.rule().older(&**db, entry.rev)?;
        let mine = db
            .get(&self.key)?
            .is_some_and(|kv| kv.create_revision == entry.rev);
        if !mine {
            return Err(Error::SessionExpired(self.session.lease_id()));
        }
        if older.len() < self.permits {
            return Ok(SemaphoreGuard {
                held: Held::new(&self.session, entry),
            });
        }
        if entry.fresh {
            crate::sync::mutex::release(&**db, &self.key, entry.rev)?;
        }
        Err(Error::Locked {
            name: self.name.clone(),
            holder: older[0].lease.unwrap_or(LeaseId::new(0)),
        })
    }
}

/// A semaphore wait in progress, from [`Semaphore::acquire_wait`].
#[derive(Debug)]
pub struct SemaphoreWait {
    sem: Semaphore,
    wait: Wait,
    acquire: Acquire,
}

impl Pollable for SemaphoreWait {
    type Output = SemaphoreGuard;

    fn poll(&mut self) -> Result<Option<SemaphoreGuard>> {
        let (s, wait) = (&self.sem, &self.wait);
        let got = self.acquire.poll(|| {
            // Taken before the key is put, so that no demote in between is missed.
            let demoted = s.session.backend().demotion();
            let entry = s.enter()?;
            let admit = AdmitWait::new(
                &s.session,
                s.rule(),
                entry.key.clone(),
                entry.rev,
                wait.clone(),
                demoted,
                format!("semaphore {:?}", s.name),
            );
            Ok((entry, admit))
        })?;
        Ok(got.map(|entry| SemaphoreGuard {
            held: Held::new(&s.session, entry),
        }))
    }

    fn register<'a>(&'a self, interest: &mut Interest<'a>) {
        self.acquire.register(interest);
    }

    fn polls_the_network(&self) -> bool {
        self.sem.session.backend().over_network()
    }
}

impl Drop for SemaphoreWait {
    fn drop(&mut self) {
        self.acquire.withdraw();
    }
}

impl SemaphoreGuard {
    /// The fencing token: the create revision of this permit's key.
    pub fn fencing_token(&self) -> i64 {
        self.held.fencing_token()
    }

    /// This permit's key.
    pub fn key(&self) -> &[u8] {
        self.held.key()
    }

    /// Whether the permit is still held: its session is not done and its key exists with the
    /// same create revision.
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// Releases the permit (deletes only this acquisition's key); `NotLeader` if it had already
    /// been lost.
    pub fn release(self) -> Result<()> {
        self.held.release()
    }
}
