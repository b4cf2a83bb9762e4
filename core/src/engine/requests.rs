//! The engine's etcd-shaped entry points (SPEC E2): [`Tenure::execute`] for one etcd request,
//! etcd's Compact, and watches over etcd's key ranges. What `tenure serve` calls.

#[cfg(feature = "serve")]
use super::durable::Applied;
use super::Engine;
use crate::error::{Error, Result};
use crate::etcd::{Outcome, Refusal, RequestOp, ResponseOp, WatchStart};
use crate::kv::range::{respond, KeyRange, RangeRequest, RangeResponse};
use crate::kv::watch::{WatchOptions, Watcher};
use crate::limits::check_start_revision;
use crate::store::{Covers, View};
use crate::types::KeyValue;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Engine {
    /// [`Tenure::execute`](crate::Tenure::execute), for this engine.
    pub(crate) fn execute(&self, op: &RequestOp) -> Result<Outcome> {
        if let RequestOp::Range(r) = op {
            if r.revision != 0 {
                return self.range_request(r);
            }
            if !op.is_small_read() && self.shared().cfg.persist {
                return self.large_read(r);
            }
        }
        if !op.writes() {
            if reads_at_revision(op) {
                return self.read_with_past(op);
            }
            return self.read_durable(|lease_kv| lease_kv.execute_read(op))?;
        }
        let s = self.shared();
        let out = self.write_with(|lease_kv, b| {
            super::quota::admit(s, lease_kv, b, super::quota::of_request(op))?;
            lease_kv.execute(op, b)
        })?;
        if let Outcome::Done { response, .. } = &out {
            if !wrote(response) {
                // It only read (a failed compare, an empty delete): what it read must be durable.
                self.read_durable(|_| ())?;
            }
        }
        Ok(out)
    }

    /// [`Tenure::try_execute_read`](crate::Tenure::try_execute_read), for this engine.
    pub(crate) fn try_execute_read(&self, op: &RequestOp) -> Result<Option<Outcome>> {
        if op.writes() || reads_at_revision(op) {
            return Ok(None);
        }
        self.try_read_durable(|lease_kv| lease_kv.execute_read(op))?
            .transpose()
    }

    /// [`Tenure::execute_applied`](crate::Tenure::execute_applied), for this engine.
    #[cfg(feature = "serve")]
    pub(crate) fn execute_applied(&self, op: &RequestOp) -> Result<Option<Applied<Outcome>>> {
        if reads_at_revision(op) {
            return Ok(None);
        }
        if !op.is_bounded() {
            return self.range_if_small(op);
        }
        if !op.writes() {
            let (out, seq) = self.read_unsettled(|lease_kv| lease_kv.execute_read(op))?;
            return Ok(Some(self.applied(out, seq)));
        }
        let s = self.shared();
        let (out, seq) = self.apply(
            |lease_kv, b, _| {
                super::quota::admit(s, lease_kv, b, super::quota::of_request(op))?;
                lease_kv.execute(op, b)
            },
            false,
        );
        let seq = match (&out, seq) {
            // It only read (a failed compare, an empty delete): what it read must be durable.
            (Ok(Outcome::Done { response, .. }), None) if !wrote(response) => {
                self.read_unsettled(|_| ())?.1
            }
            (_, seq) => seq,
        };
        Ok(Some(self.applied(out, seq)))
    }

    /// A range of the present without a small limit (E2b), answered here when the range holds
    /// few keys and bytes (SPEC E26: `INLINE_RANGE_KEYS`, `INLINE_RANGE_BYTES`), decided under
    /// the same state lock as the answer, so no write can grow it in between; `Ok(None)` for
    /// any other request, and for a range that holds more (the blocking pool reads it).
    #[cfg(feature = "serve")]
    fn range_if_small(&self, op: &RequestOp) -> Result<Option<Applied<Outcome>>> {
        use crate::limits::{INLINE_RANGE_BYTES, INLINE_RANGE_KEYS};
        let RequestOp::Range(r) = op else {
            return Ok(None);
        };
        let bounds = KeyRange::new(&r.key, &r.range_end).bounds();
        let (out, seq) = self.read_unsettled(|lease_kv| {
            lease_kv
                .kv
                .holds_at_most(bounds, INLINE_RANGE_KEYS, INLINE_RANGE_BYTES)
                .then(|| lease_kv.execute_read(op))
        })?;
        Ok(out.map(|out| self.applied(out, seq)))
    }

    /// One etcd range at its revision: the present from memory, a past revision from the store.
    fn range_request(&self, r: &RangeRequest) -> Result<Outcome> {
        // Decided, and the present answered, under one state lock: a write in between would
        // turn the present into a past revision that memory no longer holds.
        // A retained past revision is read from the store; anything else (the present, a
        // future or compacted revision) is the state machine's answer (`check_range`).
        let (current, present, newest) = self.read_durable(|lease_kv| {
            let kv = &lease_kv.kv;
            let present = (!r.is_past(kv.revision) || r.revision < kv.compacted)
                .then(|| lease_kv.execute_read(&RequestOp::Range(r.clone())));
            // Only a read of the past enters the history at the key's last write.
            let newest = match present {
                Some(_) => None,
                None => KeyRange::new(&r.key, &r.range_end)
                    .single_key()
                    .and_then(|key| kv.mod_revision(key)),
            };
            (kv.revision, present, newest)
        })?;
        if let Some(out) = present {
            return out;
        }
        let response = self.read_past_from(r, newest)?;
        Ok(Outcome::Done {
            revision: current,
            response: ResponseOp::Range(response),
        })
    }

    /// A large range of the present (SPEC E2b): the current revision pinned under the state
    /// lock, the range read at it from the store with no engine lock held, so writers never
    /// wait for the copy. History at a retained revision never changes: the answer is the one
    /// the memory would have given.
    fn large_read(&self, r: &RangeRequest) -> Result<Outcome> {
        let current = self.read_durable(|lease_kv| lease_kv.kv.revision)?;
        let at = RangeRequest {
            revision: current,
            ..r.clone()
        };
        let response = self.read_past(&at)?;
        Ok(Outcome::Done {
            revision: current,
            response: ResponseOp::Range(response),
        })
    }

    /// A read-only txn whose ranges name revisions (SPEC K9): compares and the present answered
    /// at one durable revision, then each past range from the store, into its place.
    fn read_with_past(&self, op: &RequestOp) -> Result<Outcome> {
        let (mut out, past) =
            self.read_durable(|lease_kv| lease_kv.execute_read_with_past(op))??;
        if past.is_empty() {
            return Ok(out);
        }
        let mut answers = Vec::with_capacity(past.len());
        for r in &past {
            answers.push(self.read_past(r)?);
        }
        if let Outcome::Done { revision, response } = &mut out {
            fill_past(op, response, *revision, &mut answers.into_iter());
        }
        Ok(out)
    }

    /// A range at a past revision, read from the store's history (SPEC K9).
    fn read_past(&self, r: &RangeRequest) -> Result<RangeResponse> {
        self.read_past_from(r, None)
    }

    /// [`read_past`](Self::read_past), for a single key whose last write memory knew at some
    /// revision not below `r.revision` (`newest`): the history is entered at that version.
    fn read_past_from(&self, r: &RangeRequest, newest: Option<i64>) -> Result<RangeResponse> {
        let range = KeyRange::new(&r.key, &r.range_end);
        let view = self.history_view(r.revision)?;
        let all = view.range_at(&range, r.revision, newest)?;
        drop(view);
        // A compaction that began meanwhile may have removed rows this read needed.
        let (current, compacted) =
            self.read_durable(|lease_kv| (lease_kv.kv.revision, lease_kv.kv.compacted))?;
        if r.revision < compacted {
            return Err(refused(Refusal::Compacted, r.revision, current, compacted));
        }
        Ok(respond(r, all))
    }

    /// A read transaction of the file once it holds `revision` (with the log, the file lags:
    /// `flush_to_file` brings it up to date), shared with other reads of the history until
    /// the store next writes.
    fn history_view(&self, revision: i64) -> Result<Arc<View>> {
        let s = self.shared();
        if !s.cfg.persist {
            // In memory no history is kept: only the present is answered.
            let current = self.revision()?;
            return Err(refused(Refusal::Compacted, revision, current, current));
        }
        let relabels = s.relabels.load(Ordering::Acquire);
        if s.file_revision.load(Ordering::Acquire) < revision
            || s.relabels_flushed.load(Ordering::Acquire) < relabels
        {
            // Covers every write applied before it: the revision, and the relabels counted.
            self.flush_to_file()?;
            s.relabels_flushed.fetch_max(relabels, Ordering::Release);
        }
        let store = s.store.lock();
        let store = store.as_ref().ok_or_else(|| s.closed.clone())?;
        // Loaded before the view begins (and raised only after what they count is in the
        // file): at most what the view holds.
        let now = Covers {
            revision: s.file_revision.load(Ordering::Acquire),
            relabels: s.relabels_flushed.load(Ordering::Acquire),
        };
        let wanted = Covers { revision, relabels };
        store.history_view(wanted, now)
    }

    /// [`Tenure::get_at`](crate::Tenure::get_at), for this engine.
    pub(crate) fn get_at(&self, key: &[u8], revision: i64) -> Result<Option<KeyValue>> {
        crate::limits::check_key(key)?;
        let r = RangeRequest {
            revision,
            ..RangeRequest::new(key, b"")
        };
        Ok(self.range_at_request(&r)?.kvs.into_iter().next())
    }

    /// [`Tenure::range_at`](crate::Tenure::range_at), for this engine.
    pub(crate) fn range_at(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        revision: i64,
    ) -> Result<Vec<KeyValue>> {
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let r = RangeRequest {
            revision,
            limit: limit.unwrap_or(0),
            ..RangeRequest::prefix(prefix)
        };
        Ok(self.range_at_request(&r)?.kvs)
    }

    fn range_at_request(&self, r: &RangeRequest) -> Result<RangeResponse> {
        match self.range_request(r)? {
            Outcome::Done {
                response: ResponseOp::Range(out),
                ..
            } => Ok(out),
            Outcome::Refused(why) => {
                let (current, compacted) =
                    self.read_durable(|lease_kv| (lease_kv.kv.revision, lease_kv.kv.compacted))?;
                Err(refused(why, r.revision, current, compacted))
            }
            other => Err(Error::storage(format!(
                "internal: a range was answered {other:?}"
            ))),
        }
    }

    /// [`Tenure::compacted_revision`](crate::Tenure::compacted_revision), for this engine.
    pub(crate) fn compacted_revision(&self) -> Result<i64> {
        self.read_durable(|lease_kv| lease_kv.kv.compacted)
    }

    /// [`Tenure::compact`](crate::Tenure::compact), for this engine.
    pub(crate) fn compact(&self, revision: i64) -> Result<std::result::Result<i64, Refusal>> {
        let s = self.shared();
        let done = self.write_with(|lease_kv, b| {
            super::quota::admit(s, lease_kv, b, crate::alarms::Cost::NONE)?;
            Ok(lease_kv.compact(revision, b))
        })?;
        if done.is_ok() {
            // The watch history keeps `revision` itself: a watch may start there (etcd).
            self.with_hub(|hub, _| {
                hub.compact(revision - 1);
                Ok(())
            })?;
            let s = self.shared();
            if s.cfg.persist {
                // The compactor carries out only what the file holds: bring it there first.
                self.flush_to_file()?;
                let _ = s.compact_tx.try_send(());
            }
        }
        Ok(done)
    }

    /// [`Tenure::wait_compacted`](crate::Tenure::wait_compacted), for this engine.
    pub(crate) fn wait_compacted(&self) -> Result<()> {
        let s = self.shared();
        if !s.cfg.persist {
            return Ok(());
        }
        self.flush_to_file()?;
        loop {
            let more = match &*s.store.lock() {
                Some(store) => store.compact_step()?,
                None => return Err(s.closed.clone()),
            };
            if !more {
                return Ok(());
            }
            s.store
                .let_waiters_in(std::time::Duration::from_millis(100));
        }
    }

    /// [`Tenure::watch_range`](crate::Tenure::watch_range), for this engine.
    pub(crate) fn watch_range(
        &self,
        key: impl AsRef<[u8]>,
        range_end: impl AsRef<[u8]>,
        opts: WatchOptions,
    ) -> Result<WatchStart> {
        let range = KeyRange::new(key.as_ref(), range_end.as_ref());
        Ok(match self.register(range, opts)? {
            Ok(w) => WatchStart::Started(w),
            Err(compacted) => WatchStart::Compacted(compacted),
        })
    }

    /// A watcher of `range` from `opts.start_revision` (SPEC K11): the revisions the watch
    /// hub still holds come from it, older ones from the store's history, queued first.
    /// `Ok(Err(c))`: the start is below the compaction at `c`.
    pub(crate) fn register(
        &self,
        range: KeyRange,
        opts: WatchOptions,
    ) -> Result<std::result::Result<Watcher, i64>> {
        let s = self.shared();
        let first = opts.start_revision.map(check_start_revision).transpose()?;
        let mut next = first;
        let mut earlier = Vec::new();
        // Each round reads up to the revision applied when it began; writes meanwhile may need
        // another round when the hub keeps no history (a few, under a steady stream of writes).
        for _ in 0..16 {
            let (from, to) = {
                let st = s.state.lock();
                if st.closed {
                    return Err(s.closed.clone());
                }
                let current = st.lease_kv.kv.revision;
                let compacted = st.lease_kv.kv.compacted;
                if first.is_some_and(|f| f < compacted) {
                    return Ok(Err(compacted));
                }
                let mut hub = s.hub.lock();
                let start = next.unwrap_or(current + 1);
                if start >= hub.floor(current) || !s.cfg.persist {
                    let o = WatchOptions {
                        start_revision: Some(start),
                        ..opts
                    };
                    let out = match hub.register_after(range, &o, current, earlier) {
                        Ok(w) => Ok(w),
                        Err(Error::Compacted { .. }) => Err(hub.floor(current).max(compacted)),
                        Err(e) => return Err(e),
                    };
                    s.record_events.store(hub.wants_events(), Ordering::Relaxed);
                    return Ok(out);
                }
                (start, current)
            };
            let view = self.history_view(to)?;
            earlier.extend(view.events(&range, from, to, opts.prev_kv)?);
            next = Some(to + 1);
        }
        Err(Error::Compacted {
            revision: next.unwrap_or(0),
            compact_revision: 0,
            reason: "writes outpaced the replay of the history; retry the watch".into(),
        })
    }
}

/// The error of a refused read at `requested` (`current`: the current revision, `compacted`:
/// the compaction point, the first revision still kept).
fn refused(why: Refusal, requested: i64, current: i64, compacted: i64) -> Error {
    crate::etcd::errors::refused_at(why, requested, current, compacted)
}

/// Whether a read names a revision anywhere (a range, or a range inside a txn).
fn reads_at_revision(op: &RequestOp) -> bool {
    match op {
        RequestOp::Range(r) => r.revision != 0,
        RequestOp::Txn(t) => t.success.iter().chain(&t.failure).any(reads_at_revision),
        RequestOp::Put(_) | RequestOp::DeleteRange(_) => false,
    }
}

/// Puts each past range's answer into the place `execute_read_with_past` left for it: the same
/// walk (the branch each txn took, its ops in order).
fn fill_past(
    op: &RequestOp,
    response: &mut ResponseOp,
    current: i64,
    answers: &mut impl Iterator<Item = RangeResponse>,
) {
    match (op, response) {
        (RequestOp::Range(r), ResponseOp::Range(slot)) if r.is_past(current) => {
            if let Some(answer) = answers.next() {
                *slot = answer;
            }
        }
        (
            RequestOp::Txn(t),
            ResponseOp::Txn {
                succeeded,
                responses,
            },
        ) => {
            let branch = if *succeeded { &t.success } else { &t.failure };
            for (op, response) in branch.iter().zip(responses.iter_mut()) {
                fill_past(op, response, current, answers);
            }
        }
        _ => {}
    }
}

fn wrote(r: &ResponseOp) -> bool {
    match r {
        ResponseOp::Range(_) => false,
        ResponseOp::Put { .. } => true,
        ResponseOp::DeleteRange { deleted, .. } => *deleted > 0,
        ResponseOp::Txn { responses, .. } => responses.iter().any(wrote),
    }
}
