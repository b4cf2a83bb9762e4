//! The commit pipeline: writes append their effects to the pending batch; one *leader* at a
//! time takes the whole batch and makes it durable (group commit): with `Immediate`, the writer
//! that finds no commit in flight leads itself, so a lone writer's commit costs one log append
//! and no thread hand-off; the committer thread leads for writes nobody waits on (expiry,
//! `Buffered`), barriers and close. After a commit the leader delivers its events and notices
//! and wakes the writers waiting for it (SPEC D1–D3; DESIGN, "The write path").

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};

use super::{CommitProgress, Shared, WriteState};
use crate::batch::Batch;
use crate::clock::instant_after;
use crate::error::{Error, Result};
use crate::locks::MutexGuard;
use crate::rows::StoreOp;
use crate::store::wal::{self, Appended};
use crate::types::Durability;

/// Immediate mode: how long a leader waits for the writers of the previous commit to come back.
const GATHER: Duration = Duration::from_micros(50);
/// Buffered mode: flush early once this many ops are pending.
pub(super) const FLUSH_OPS: usize = 1 << 16;
/// Buffered mode: past this many pending ops a writer waits for the commit that takes its
/// write, so a writer faster than the disk cannot grow the pending batch (and the process)
/// without bound while the committer is busy (SPEC D3).
pub(super) const BUFFERED_BACKLOG_OPS: usize = 4 * FLUSH_OPS;

/// What only the commit leader touches, guarded by `Shared::leader`; taken by whoever holds
/// `CommitProgress::committing` (so never contended).
#[derive(Default)]
pub(super) struct Leader {
    /// The write-ahead log (`None`: commits go to redb; also once close flushed it).
    pub(super) logged: Option<Logged>,
    /// The previous batch's ops buffer, cleared, handed back to `pending` so a steady stream
    /// of writes never regrows it.
    spare: Vec<StoreOp>,
    /// Writes the previous commit carried and the last sequence number taken: with that many
    /// writers about, a commit that starts with fewer waits briefly for the rest (they were
    /// woken by the last commit and are on their way back).
    last_writes: u64,
    taken_seq: u64,
    /// Close brought redb up to date: no commit may follow.
    finished: bool,
}

impl Leader {
    pub(super) fn new(logged: Option<Logged>) -> Leader {
        Leader {
            logged,
            ..Leader::default()
        }
    }
}

/// Hands what a write added to `pending` on (returning the sequence number to wait for in
/// Immediate mode, and in Buffered mode past [`BUFFERED_BACKLOG_OPS`]), or, in memory,
/// straight to the hub. `leads`: the caller waits for it with [`wait_durable`] and so commits
/// it itself if no commit is in flight (Immediate); otherwise the committer thread is woken
/// for it.
pub(super) fn enqueued(s: &Shared, st: &mut WriteState, leads: bool) -> Option<u64> {
    if !s.cfg.persist {
        let batch = st.pending.take();
        deliver(s, batch);
        return None;
    }
    if st.pending.ops.is_empty() && st.pending.events.is_empty() {
        // Only notices (manual-revoke deliveries) and nothing pending before them: no commit
        // is needed to deliver them.
        let batch = st.pending.take();
        deliver(s, batch);
        return None;
    }
    st.seq += 1;
    match s.cfg.durability {
        Durability::Immediate => {
            if st.gather_until != 0 && st.seq >= st.gather_until {
                st.gather_until = 0;
                s.gather_cv.notify_one();
            }
            if !leads {
                s.commit_cv.notify_one();
            }
            Some(st.seq)
        }
        Durability::Buffered(_) => {
            // Buffered acknowledges on apply, and so delivers expired notices on apply too;
            // watch events still wait for their commit (K6).
            if !st.pending.expired.is_empty() {
                let expired = std::mem::take(&mut st.pending.expired);
                deliver(
                    s,
                    Batch {
                        expired,
                        ..Batch::default()
                    },
                );
            }
            let pending = st.pending.ops.len();
            if pending >= FLUSH_OPS {
                s.commit_cv.notify_one();
            }
            (pending >= BUFFERED_BACKLOG_OPS).then_some(st.seq)
        }
    }
}

/// Delivers committed events to watchers and expired notices to `expired()`.
fn deliver(s: &Shared, batch: Batch) {
    if !batch.events.is_empty() {
        let mut hub = s.hub.lock();
        hub.dispatch(batch.events);
        s.record_events.store(hub.wants_events(), Ordering::Relaxed);
    }
    if !batch.expired.is_empty() {
        if let Some((tx, _)) = &*s.expired.lock() {
            for notices in batch.expired {
                if notices.is_empty() {
                    continue;
                }
                if let Err(TrySendError::Full(_)) = tx.try_send(notices) {
                    s.expired_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// An Immediate writer parked in [`wait_durable`] (in `CommitProgress::parked`), woken alone by the end
/// of the commit that covers its write, or handed the lead.
pub(super) struct Parked {
    seq: u64,
    slot: Arc<Slot>,
}

/// A thread's parking place, made once per thread: the end of a commit stores why it woke the
/// thread, then unparks it (a stale unpark only makes it look again).
struct Slot {
    thread: Thread,
    why: AtomicU32,
}

/// Why a parked writer was woken.
const PARKED: u32 = 0;
/// Its write is durable.
const DURABLE: u32 = 1;
/// It leads the next commit (`CommitProgress::committing` is already set for it).
const LEAD: u32 = 2;
/// A failure or close: look under `done`.
const LOOK: u32 = 3;

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            thread: std::thread::current(),
            why: AtomicU32::new(PARKED),
        })
    }
}

thread_local! {
    static SLOT: Arc<Slot> = Slot::new();
}

/// Waits until the write `seq` is durable (Immediate mode). If no commit is in flight when it is
/// not, the caller leads the next one itself: it commits everything pending, its own write
/// included. Otherwise it parks until the end of the commit that covers its write, or until
/// that commit hands it the lead (its write came in during the commit).
pub(super) fn wait_durable(s: &Shared, seq: u64) -> Result<()> {
    let mut done = s.done.lock();
    loop {
        if done.committed >= seq {
            return Ok(());
        }
        if let Some(e) = &done.failed {
            return Err(e.clone());
        }
        let leads = if !done.committing && s.cfg.durability == Durability::Immediate {
            done.committing = true;
            drop(done);
            true
        } else {
            // A fresh slot where the thread's own is gone (a write from a thread-local's
            // destructor).
            let slot = SLOT.try_with(Arc::clone).unwrap_or_else(|_| Slot::new());
            slot.why.store(PARKED, Ordering::Relaxed);
            done.parked.push(Parked {
                seq,
                slot: slot.clone(),
            });
            drop(done);
            let why = loop {
                std::thread::park();
                match slot.why.load(Ordering::Acquire) {
                    PARKED => continue,
                    why => break why,
                }
            };
            match why {
                DURABLE => return Ok(()),
                LEAD => true,
                _ => false,
            }
        };
        if leads && !lead(s, |l| round(s, l, Round::Writer)) {
            // Close ended the commits before this write was taken (it cannot be: close
            // commits everything applied before it); never wait for nothing.
            return Err(s.closed.clone());
        }
        done = s.done.lock();
    }
}

/// Waits on `done_cv` (counted in `CommitProgress::cv_waiters`, so the end of a commit knows to notify).
fn wait_cv(s: &Shared, done: &mut MutexGuard<'_, CommitProgress>) {
    done.cv_waiters += 1;
    s.done_cv.wait(done);
    done.cv_waiters -= 1;
}

/// Waits until no commit is in flight and takes the lead (`CommitProgress::committing`).
fn take_lead(s: &Shared) {
    let mut done = s.done.lock();
    done.lead_wanted += 1;
    while done.committing {
        wait_cv(s, &mut done);
    }
    done.lead_wanted -= 1;
    done.committing = true;
}

/// Runs `f` as the commit leader (the caller set `CommitProgress::committing`), then gives the lead up
/// (see [`release`]). A panic inside poisons the engine like a failed commit (D6), so
/// nobody waits for a commit that will never come. Returns false if close already ended the
/// commits (then `f` did not run).
fn lead(s: &Shared, f: impl FnOnce(&mut Leader)) -> bool {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut l = s.leader.lock();
        let open = !l.finished;
        if open {
            f(&mut l);
        }
        open
    }));
    if ran.is_err() {
        poison(s, Error::storage("a commit panicked; reopen the database"));
    }
    let woken = release(s, &mut s.done.lock());
    wake(woken);
    ran.unwrap_or(true)
}

/// The end of a commit, under `done`: picks the parked writers it covers (or all of them after
/// a failure), and hands the lead to the oldest writer left (whose write came in during the
/// commit) unless the committer waits for the lead (then it takes it and covers them: it
/// commits everything pending); else clears `committing`. The caller wakes the returned writers once `done` is
/// released, the next leader first.
#[must_use]
fn release(s: &Shared, done: &mut CommitProgress) -> Woken {
    let mut woken = Vec::new();
    let failed = done.failed.is_some();
    let mut i = 0;
    while i < done.parked.len() {
        if failed || done.parked[i].seq <= done.committed {
            let why = if failed { LOOK } else { DURABLE };
            woken.push((done.parked.swap_remove(i), why));
        } else {
            i += 1;
        }
    }
    let heir =
        (done.committing && done.lead_wanted == 0 && s.cfg.durability == Durability::Immediate)
            .then(|| (0..done.parked.len()).min_by_key(|&i| done.parked[i].seq))
            .flatten();
    match heir {
        Some(i) => {
            woken.push((done.parked.swap_remove(i), LEAD));
            let last = woken.len() - 1;
            woken.swap(0, last);
        }
        None => done.committing = false,
    }
    if done.cv_waiters > 0 {
        s.done_cv.notify_all();
    }
    Woken {
        parked: woken,
        #[cfg(feature = "serve")]
        futures: super::durable::covered(done, failed),
    }
}

/// What the end of a commit wakes, once `done` is released.
struct Woken {
    /// Parked writers and why (the next leader first).
    parked: Vec<(Parked, u32)>,
    /// Async waiters whose write is durable, or all of them after a failure (feature `serve`).
    #[cfg(feature = "serve")]
    futures: Vec<super::durable::Waiting>,
}

fn wake(woken: Woken) {
    for (p, why) in woken.parked {
        p.slot.why.store(why, Ordering::Release);
        p.slot.thread.unpark();
    }
    #[cfg(feature = "serve")]
    super::durable::complete(woken.futures);
}

/// Waits until the committer's progress satisfies `reached`, or fails with its failure.
pub(super) fn wait_done(s: &Shared, reached: impl Fn(&CommitProgress) -> bool) -> Result<()> {
    let mut done = s.done.lock();
    loop {
        if reached(&done) {
            return Ok(());
        }
        if let Some(e) = &done.failed {
            return Err(e.clone());
        }
        wait_cv(s, &mut done);
    }
}

/// Work for the checkpointer: bring redb up to `lsn` (SPEC D1 with a log).
pub(super) struct Work {
    ops: Vec<StoreOp>,
    revision: i64,
    next_id: i64,
    lsn: u64,
}

/// The checkpointer's progress, guarded by `Shared::ckpt` (taken alone).
#[derive(Default)]
pub(super) struct Ckpt {
    /// A hand-off is being applied.
    busy: bool,
    /// Why the checkpointer stopped (a failed redb commit) or that it is gone.
    failed: Option<Error>,
}

/// The committer's side of the write-ahead log.
pub(super) struct Logged {
    pub(super) writer: wal::Writer,
    pub(super) to_ckpt: Sender<Work>,
    /// The ops of the records in the active region: redb does not have them yet.
    unapplied: Vec<StoreOp>,
    /// The meta row after the last record.
    revision: i64,
    next_id: i64,
}

impl Logged {
    pub(super) fn new(writer: wal::Writer, to_ckpt: Sender<Work>) -> Logged {
        Logged {
            writer,
            to_ckpt,
            unapplied: Vec::new(),
            revision: 0,
            next_id: 0,
        }
    }

    /// Makes a batch durable in the log (one `pwrite` + `fdatasync`); a full region is handed
    /// to the checkpointer first, and a batch larger than a region goes straight to redb.
    fn commit(
        &mut self,
        s: &Shared,
        ops: &mut Vec<StoreOp>,
        revision: i64,
        next_id: i64,
    ) -> Result<()> {
        loop {
            match self.writer.append(revision, next_id, ops)? {
                Appended::Done => {
                    self.unapplied.append(ops);
                    (self.revision, self.next_id) = (revision, next_id);
                    return Ok(());
                }
                Appended::Full => self.hand_off(s)?,
                Appended::TooBig => {
                    // After what is before it, in one durable commit under the LSN of an empty
                    // marker record that then starts the other region (the LSNs in the log stay
                    // consecutive).
                    self.wait_idle(s)?;
                    self.unapplied.append(ops);
                    (self.revision, self.next_id) = (revision, next_id);
                    self.send(s, self.writer.last_lsn() + 1)?;
                    self.wait_idle(s)?;
                    self.writer.switch();
                    return match self.writer.append(revision, next_id, &[])? {
                        Appended::Done => Ok(()),
                        _ => Err(Error::storage("a log region cannot hold an empty record")),
                    };
                }
            }
        }
    }

    /// Hands the active region's records to the checkpointer and moves to the other region,
    /// once the previous hand-off is applied (so the other region holds nothing redb lacks).
    fn hand_off(&mut self, s: &Shared) -> Result<()> {
        self.wait_idle(s)?;
        if self.writer.active_used() {
            self.send(s, self.writer.last_lsn())?;
            self.writer.switch();
        }
        Ok(())
    }

    /// Sends the unapplied ops to the checkpointer, to be recorded as applied up to `lsn`.
    fn send(&mut self, s: &Shared, lsn: u64) -> Result<()> {
        s.ckpt.lock().busy = true;
        let work = Work {
            ops: std::mem::take(&mut self.unapplied),
            revision: self.revision,
            next_id: self.next_id,
            lsn,
        };
        self.to_ckpt
            .send(work)
            .map_err(|_| Error::storage("the checkpoint thread is gone; reopen the database"))
    }

    /// Waits until the checkpointer has applied every hand-off.
    fn wait_idle(&self, s: &Shared) -> Result<()> {
        let mut c = s.ckpt.lock();
        loop {
            if let Some(e) = &c.failed {
                return Err(e.clone());
            }
            if !c.busy {
                return Ok(());
            }
            s.ckpt_cv.wait(&mut c);
        }
    }

    /// Brings redb up to date with every record (a barrier, and close).
    fn flush(&mut self, s: &Shared) -> Result<()> {
        self.hand_off(s)?;
        self.wait_idle(s)
    }
}

/// The checkpoint thread (with a log): applies each region handed off by the committer to redb
/// in one durable commit that also records the region's last LSN (`log_applied`). A failure
/// poisons the engine like a failed commit (D6); the log still holds every acknowledged write.
pub(super) fn checkpointer(s: &Shared) {
    /// Marks the checkpointer gone however it ends, so the committer never waits for it.
    struct Gone<'a>(&'a Shared);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            let mut c = self.0.ckpt.lock();
            c.busy = false;
            c.failed.get_or_insert_with(|| {
                Error::storage("the checkpoint thread stopped; reopen the database")
            });
            self.0.ckpt_cv.notify_all();
        }
    }
    let _gone = Gone(s);
    let Some(rx) = s.ckpt_rx.lock().take() else {
        return;
    };
    for w in rx.iter() {
        let result = match &*s.store.lock() {
            Some(store) => store.commit(&w.ops, w.revision, w.next_id, Some(w.lsn)),
            None => Ok(()),
        };
        if result.is_ok() {
            s.file_revision.fetch_max(w.revision, Ordering::Release);
            super::quota::note_file_bytes(s);
        }
        drop(w);
        if let Err(e) = &result {
            poison(
                s,
                prefixed("checkpoint of the log into the database failed", e.clone()),
            );
        }
        let mut c = s.ckpt.lock();
        c.busy = false;
        if let Err(e) = result {
            c.failed.get_or_insert(e);
        }
        s.ckpt_cv.notify_all();
    }
}

fn prefixed(what: &str, e: Error) -> Error {
    match e {
        Error::Storage {
            message,
            errno,
            path,
        } => Error::Storage {
            message: format!("{what}: {message}"),
            errno,
            path,
        },
        other => other,
    }
}

/// After a failed commit (or a dead engine thread): every later write fails with `e`, and the
/// waiters wake with it (D6).
pub(super) fn poison(s: &Shared, e: Error) {
    s.state.lock().poisoned.get_or_insert(e.clone());
    let mut done = s.done.lock();
    done.failed.get_or_insert(e);
    let parked = std::mem::take(&mut done.parked);
    s.done_cv.notify_all();
    let woken = Woken {
        parked: parked.into_iter().map(|p| (p, LOOK)).collect(),
        #[cfg(feature = "serve")]
        futures: super::durable::covered(&mut done, true),
    };
    drop(done);
    wake(woken);
}

/// Who leads a commit round.
#[derive(Clone, Copy, PartialEq)]
enum Round {
    /// A writer waiting for its own write (Immediate): it may gather, and leaves barriers to
    /// the committer thread.
    Writer,
    /// The committer thread: it also serves `flush_to_file` barriers.
    Committer,
}

/// One group commit, run by the leader: takes everything pending, makes it durable in one log
/// append (or, without a log, one redb transaction), delivers its events and notices, then
/// publishes its progress (`committed`), or poisons the engine if it failed (D6).
fn round(s: &Shared, l: &mut Leader, who: Round) {
    let (mut batch, seq, revision, next_id, barrier) = {
        let mut st = s.state.lock();
        let want = l.taken_seq + l.last_writes;
        if who == Round::Writer && !st.closed && st.seq < want {
            let until = Instant::now() + GATHER;
            st.gather_until = want;
            while st.seq < want && Instant::now() < until {
                s.gather_cv.wait_until(&mut st, until);
            }
            st.gather_until = 0;
        }
        let batch = st.pending.take();
        std::mem::swap(&mut st.pending.ops, &mut l.spare);
        l.last_writes = st.seq - l.taken_seq;
        l.taken_seq = st.seq;
        let barrier = if who == Round::Committer {
            st.barriers
        } else {
            0
        };
        (
            batch,
            st.seq,
            st.lease_kv.kv.revision,
            st.lease_kv.lessor.next_id(),
            barrier,
        )
    };
    let work = !batch.is_empty();
    let writes = l.last_writes;
    let started = Instant::now();
    let failed = s.state.lock().poisoned.is_some();
    let mut result = if failed {
        Err(Error::storage(
            "an earlier commit failed; reopen the database",
        ))
    } else if !work {
        Ok(())
    } else {
        match &mut l.logged {
            Some(log) => log.commit(s, &mut batch.ops, revision, next_id),
            None => match &*s.store.lock() {
                Some(store) => store
                    .commit(&batch.ops, revision, next_id, None)
                    .inspect(|()| {
                        s.file_revision.fetch_max(revision, Ordering::Release);
                        super::quota::note_file_bytes(s);
                    }),
                None => Ok(()),
            },
        }
    };
    l.spare = std::mem::take(&mut batch.ops);
    l.spare.clear();
    if l.spare.capacity() > 4 * FLUSH_OPS {
        l.spare.shrink_to(FLUSH_OPS);
    }
    // A barrier (`flush_to_file`): everything committed so far goes into redb now.
    if let (Ok(()), Some(log)) = (&result, &mut l.logged) {
        if barrier > s.done.lock().barriers {
            result = log.flush(s);
        }
    }
    match result {
        Ok(()) => {
            if work {
                s.commits.fetch_add(1, Ordering::Relaxed);
                s.recorders
                    .commit_duration
                    .record_duration(started.elapsed());
                s.recorders.commit_writes.record(writes);
            }
            deliver(s, batch);
            let mut done = s.done.lock();
            done.committed = seq;
            done.revision = revision;
            done.barriers = done.barriers.max(barrier);
        }
        Err(e) => poison(s, prefixed("commit failed", e)),
    }
}

/// The committer thread: leads the commits nobody waits on (the expiry thread's, every
/// `Buffered` commit), `flush_to_file` barriers, and close's last commit and checkpoint.
pub(super) fn run(s: &Shared) {
    /// However the thread ends (a panic too), the log's writer is closed, which lets the
    /// checkpointer end.
    struct Finish<'a>(&'a Shared);
    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            finish(self.0);
        }
    }
    let _finish = Finish(s);
    let interval = match s.cfg.durability {
        Durability::Immediate => None,
        Durability::Buffered(d) => Some(d),
    };
    let mut next_flush = interval.map(instant_after);
    loop {
        let last = {
            let mut st = s.state.lock();
            loop {
                let barrier = st.barriers > s.done.lock().barriers; // lock order: state, done
                let due = match next_flush {
                    None => true,
                    Some(t) => Instant::now() >= t || st.pending.ops.len() >= FLUSH_OPS,
                };
                if barrier || (!st.pending.is_empty() && (due || st.closed)) {
                    break st.closed;
                }
                if st.closed {
                    return;
                }
                match next_flush {
                    None => s.commit_cv.wait(&mut st),
                    Some(t) => {
                        if Instant::now() >= t {
                            next_flush = interval.map(instant_after);
                        }
                        let t = next_flush.expect("buffered");
                        s.commit_cv.wait_until(&mut st, t);
                    }
                }
            }
        };
        if let Some(d) = interval {
            next_flush = Some(instant_after(d));
        }
        take_lead(s);
        let _ = lead(s, |l| round(s, l, Round::Committer));
        if last && s.state.lock().pending.is_empty() {
            return;
        }
    }
}

/// The committer's last act on close: with a log, bring redb up to date (so the file alone is
/// complete and the log holds nothing redb lacks), unless a failure poisoned the engine; then
/// let the checkpointer end. No commit is led after it.
fn finish(s: &Shared) {
    take_lead(s);
    let _ = lead(s, |l| {
        l.finished = true;
        if let Some(mut log) = l.logged.take() {
            if s.state.lock().poisoned.is_none() {
                // Then the file is complete on its own: a build without the log may open it.
                let complete = log.flush(s).and_then(|()| match &*s.store.lock() {
                    Some(store) => store.mark_complete(),
                    None => Ok(()),
                });
                if let Err(e) = complete {
                    poison(s, prefixed("checkpoint on close failed", e));
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::{StorageFaults, Tenure};

    /// SPEC D3: with the disk stalled, a Buffered writer stops at the backlog bound (it waits
    /// for the commit that takes its write) instead of growing the pending batch without end;
    /// once the disk moves again every write lands.
    #[test]
    fn d3_a_buffered_writer_waits_once_the_backlog_is_full() {
        let dir = tempfile::tempdir().unwrap();
        let faults = StorageFaults::new();
        let db = Tenure::builder()
            .path(dir.path().join("db"))
            .durability(Durability::Buffered(Duration::from_millis(5)))
            .storage_faults(faults.clone())
            .open()
            .unwrap();
        /// Lets the disk move again however the test ends, so closing the engine never hangs.
        struct Unstall(StorageFaults);
        impl Drop for Unstall {
            fn drop(&mut self) {
                self.0.stall_syncs(false);
            }
        }
        faults.stall_syncs(true);
        let unstall = Unstall(faults.clone());
        // The first commit (the one that stalls) takes at most FLUSH_OPS of them.
        let puts = BUFFERED_BACKLOG_OPS + FLUSH_OPS + 1000;
        let acked = Arc::new(AtomicUsize::new(0));
        let writer = {
            let (db, acked) = (db.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0..puts {
                    db.put(format!("k{i}"), "v", None).unwrap();
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let s = db.engine("test").unwrap().shared();
        while s.done.lock().parked.is_empty() {
            if writer.is_finished() {
                let pending = s.state.lock().pending.ops.len();
                let ended = writer.join().map_err(|e| e.downcast::<String>());
                panic!("the writer never waited ({pending} ops pending): {ended:?}");
            }
            std::thread::yield_now();
        }
        assert!(acked.load(Ordering::SeqCst) < puts);
        let pending = s.state.lock().pending.ops.len();
        assert!(
            (BUFFERED_BACKLOG_OPS..BUFFERED_BACKLOG_OPS + 64).contains(&pending),
            "{pending} ops pending"
        );
        drop(unstall);
        writer.join().unwrap();
        assert_eq!(acked.load(Ordering::SeqCst), puts);
        let last = db.get(format!("k{}", puts - 1)).unwrap().unwrap();
        assert_eq!(last.value, b"v");
    }
}
