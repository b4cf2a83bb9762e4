//! The one apply algorithm: an etcd request applied to the [`LeaseKv`] at one revision,
//! validated in full first (I-S1). `tenure serve` runs etcd's requests ([`RequestOp`]) through
//! it, and the embedded [`Txn`] too, lowered to etcd's request as a borrowed view
//! (`etcd/lower.rs`: no copy of it, each answer raised as it is made).

use std::collections::BTreeSet;

use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::etcd::lower::{raise, Branch, CompareRef, DeleteRef, OpRef, ReadRef, TxnRef};
use crate::etcd::{Outcome, RangeRequest, RangeResponse, Refusal, RequestOp, ResponseOp};
use crate::kv::range::KeyRange;
use crate::kv::txn::{Compare, CompareTarget, Txn, TxnResponse};
use crate::limits::{check_key, check_txn_ops};
use crate::state::LeaseKv;

/// The rules a request is held to: etcd's for a request from outside; the embedded API's for a
/// lowered [`Txn`], which may write one key twice in a branch (the last write wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// etcd's: a key written twice in one branch is [`Refusal::DuplicateKey`].
    Etcd,
    /// The embedded `Txn`'s.
    Embedded,
}

/// etcd's op budget (SPEC E2a) for a request from outside, before any work on it. The embedded
/// [`Txn`] nests nothing and is not held to it.
fn check_ops(op: &RequestOp) -> Result<()> {
    match op {
        RequestOp::Txn(t) => check_txn_ops(t),
        _ => Ok(()),
    }
}

/// Which nested txn takes which branch, in the order the ops meet them.
type Path<'p> = std::slice::Iter<'p, bool>;

impl LeaseKv {
    fn compare_range(&self, c: CompareRef<'_>) -> bool {
        if c.range_end.is_empty() {
            return self.kv.compare(c.compare);
        }
        let keys = self.kv.keys_in(&KeyRange::new(&c.compare.key, c.range_end));
        if keys.is_empty() {
            let value = matches!(c.compare.target, CompareTarget::Value(_));
            return !value && self.kv.compare(c.compare);
        }
        keys.into_iter().all(|key| {
            self.kv.compare(&Compare {
                key,
                ..c.compare.clone()
            })
        })
    }

    /// Whether every compare of `t` holds.
    fn holds(&self, t: TxnRef<'_>) -> bool {
        t.all(|c| self.compare_range(c))
    }

    /// The branch each nested txn of `ops` takes, decided on the state before any op runs
    /// (as etcd).
    fn branches(&self, ops: Branch<'_>, out: &mut Vec<bool>) {
        let Branch::Etcd(ops) = ops else {
            return; // the embedded txn nests none
        };
        for op in Branch::Etcd(ops).iter() {
            if let OpRef::Txn(t) = op {
                let ok = self.holds(TxnRef::Etcd(t));
                out.push(ok);
                self.branches(TxnRef::Etcd(t).branch(ok), out);
            }
        }
    }

    /// `past_ok`: a past revision is answered by the engine from the store
    /// ([`execute_read_with_past`](Self::execute_read_with_past)); elsewhere only the present
    /// is at hand, and an older revision is said as etcd's compacted answer.
    fn check_range(&self, r: &RangeRequest, past_ok: bool) -> std::result::Result<(), Refusal> {
        match r.revision {
            0 => Ok(()),
            rev if rev > self.kv.revision => Err(Refusal::FutureRevision),
            rev if rev < self.kv.compacted => Err(Refusal::Compacted),
            rev if rev < self.kv.revision && !past_ok => Err(Refusal::Compacted),
            _ => Ok(()),
        }
    }

    /// Validates the ops that will run, before anything is applied.
    fn validate(
        &self,
        ops: Branch<'_>,
        path: &mut Path<'_>,
        rules: Rules,
        past_ok: bool,
    ) -> Result<std::result::Result<(), Refusal>> {
        let etcd = rules == Rules::Etcd;
        let mut puts = BTreeSet::new();
        let mut deletes = Vec::new();
        for op in ops.iter() {
            match op {
                OpRef::Read(ReadRef::Request(r)) => {
                    check_key(&r.key)?;
                    if let Err(refusal) = self.check_range(r, past_ok) {
                        return Ok(Err(refusal));
                    }
                }
                OpRef::Read(ReadRef::Key(key)) => check_key(key)?,
                // Lowered, a prefix is a range from its first key (`"\0"` for every key).
                OpRef::Read(ReadRef::Prefix { .. }) => {}
                OpRef::Put(p) => {
                    check_key(&p.key)?;
                    if etcd && !puts.insert(p.key.as_slice()) {
                        return Ok(Err(Refusal::DuplicateKey));
                    }
                    if (p.ignore_value || p.ignore_lease) && self.kv.get(&p.key).is_none() {
                        return Ok(Err(Refusal::KeyNotFound));
                    }
                    if !p.ignore_lease {
                        self.check_lease(p.lease)?;
                    }
                }
                OpRef::PutKey { key, lease, .. } => {
                    check_key(key)?;
                    if etcd && !puts.insert(key) {
                        return Ok(Err(Refusal::DuplicateKey));
                    }
                    self.check_lease(lease)?;
                }
                OpRef::Delete(DeleteRef::Request(d)) => {
                    check_key(&d.key)?;
                    if etcd {
                        deletes.push(KeyRange::new(&d.key, &d.range_end));
                    }
                }
                OpRef::Delete(DeleteRef::Key(key)) => {
                    check_key(key)?;
                    if etcd {
                        deletes.push(KeyRange::new(key, b""));
                    }
                }
                OpRef::Delete(DeleteRef::Prefix(prefix)) => {
                    if etcd {
                        deletes.push(KeyRange::prefix(prefix));
                    }
                }
                OpRef::Txn(t) => {
                    let ok = *path.next().expect("one branch per nested txn");
                    if let Err(r) =
                        self.validate(TxnRef::Etcd(t).branch(ok), path, rules, past_ok)?
                    {
                        return Ok(Err(r));
                    }
                }
            }
        }
        if !deletes.is_empty() && puts.iter().any(|k| deletes.iter().any(|d| d.contains(k))) {
            return Ok(Err(Refusal::DuplicateKey));
        }
        Ok(Ok(()))
    }

    fn apply_op(
        &mut self,
        op: OpRef<'_>,
        path: &mut Path<'_>,
        rev: i64,
        wrote: &mut bool,
        b: &mut Batch,
    ) -> ResponseOp {
        match op {
            OpRef::Read(r) => ResponseOp::Range(self.range(r)),
            OpRef::Put(p) => {
                // The previous key-value only when it is asked for or kept from.
                let keeps = p.prev_kv || p.ignore_value || p.ignore_lease;
                let prev = if keeps { self.kv.get(&p.key) } else { None };
                let value = match (&prev, p.ignore_value) {
                    (Some(kv), true) => kv.value.as_slice(),
                    _ => p.value.as_slice(),
                };
                let lease = match (&prev, p.ignore_lease) {
                    (Some(kv), true) => kv.lease.map_or(0, |l| l.get()),
                    _ => p.lease,
                };
                self.put_at(&p.key, value, lease, rev, b);
                *wrote = true;
                ResponseOp::Put {
                    prev_kv: if p.prev_kv { prev } else { None },
                }
            }
            OpRef::PutKey { key, value, lease } => {
                self.put_at(key, value, lease, rev, b);
                *wrote = true;
                ResponseOp::Put { prev_kv: None }
            }
            OpRef::Delete(DeleteRef::Key(key)) => {
                // The embedded `Op::Delete`: also forgets a bare attached name (L6), which
                // etcd has not; nothing to return, so no copy of the key-value.
                let existed = self.delete_at(key, rev, b);
                *wrote |= existed;
                ResponseOp::DeleteRange {
                    deleted: i64::from(existed),
                    prev_kvs: Vec::new(),
                }
            }
            OpRef::Delete(DeleteRef::Prefix(prefix)) => {
                let n = self.delete_prefix_at(prefix, rev, b);
                *wrote |= n > 0;
                ResponseOp::DeleteRange {
                    deleted: i64::try_from(n).unwrap_or(i64::MAX),
                    prev_kvs: Vec::new(),
                }
            }
            OpRef::Delete(DeleteRef::Request(d)) => {
                let range = KeyRange::new(&d.key, &d.range_end);
                let (deleted, prev_kvs) = if d.prev_kv {
                    let gone = self.kv.range_of(&range);
                    for kv in &gone {
                        self.delete_at(&kv.key, rev, b);
                    }
                    (gone.len(), gone)
                } else {
                    let keys = self.kv.keys_in(&range);
                    for key in &keys {
                        self.delete_at(key, rev, b);
                    }
                    (keys.len(), Vec::new())
                };
                *wrote |= deleted > 0;
                ResponseOp::DeleteRange {
                    deleted: deleted as i64,
                    prev_kvs,
                }
            }
            OpRef::Txn(t) => {
                let ok = *path.next().expect("one branch per nested txn");
                ResponseOp::Txn {
                    succeeded: ok,
                    responses: TxnRef::Etcd(t)
                        .branch(ok)
                        .iter()
                        .map(|op| self.apply_op(op, path, rev, wrote, b))
                        .collect(),
                }
            }
        }
    }

    /// etcd's range; a plain read of one key (the embedded `Op::Get`) is the index's get, a
    /// prefix (`Op::Range`) the index's prefix read.
    fn range(&self, r: ReadRef<'_>) -> RangeResponse {
        let kvs = match r {
            ReadRef::Request(r) => {
                let plain = r.range_end.is_empty()
                    && !r.keys_only
                    && !r.count_only
                    && r.min_mod_revision == 0
                    && r.max_mod_revision == 0
                    && r.min_create_revision == 0
                    && r.max_create_revision == 0;
                if !plain {
                    return self.kv.range_request(r);
                }
                self.kv.get(&r.key).into_iter().collect()
            }
            ReadRef::Key(key) => self.kv.get(key).into_iter().collect(),
            ReadRef::Prefix { prefix, limit } => self.kv.range(prefix, limit),
        };
        RangeResponse {
            count: kvs.len() as i64,
            kvs,
            more: false,
        }
    }

    /// The one algorithm on the ops of one branch: nested branches decided, every op validated,
    /// then applied at one revision, which moves only if something was written. `answer` takes
    /// each op's response, in order, with the revision the writes are at. `Ok(Ok(revision))`:
    /// the store's revision after it.
    fn apply_branch<'a>(
        &mut self,
        ops: Branch<'a>,
        rules: Rules,
        b: &mut Batch,
        mut answer: impl FnMut(OpRef<'a>, ResponseOp, i64),
    ) -> Result<std::result::Result<i64, Refusal>> {
        let mut path = Vec::new();
        self.branches(ops, &mut path);
        if let Err(r) = self.validate(ops, &mut path.iter(), rules, false)? {
            return Ok(Err(r));
        }
        let rev = self.next_revision()?;
        let mut wrote = false;
        let mut at = path.iter();
        for op in ops.iter() {
            let response = self.apply_op(op, &mut at, rev, &mut wrote, b);
            answer(op, response, rev);
        }
        if wrote {
            self.kv.revision = rev;
        }
        Ok(Ok(self.kv.revision))
    }

    /// SPEC E2: one etcd request, validated in full before anything is applied; every write at
    /// one revision, which moves only if something was written.
    pub(crate) fn execute(&mut self, op: &RequestOp, b: &mut Batch) -> Result<Outcome> {
        check_ops(op)?;
        self.apply(op, Rules::Etcd, b)
    }

    /// [`execute`](Self::execute) under `rules`: a txn's compares decided, then its branch
    /// (or the request alone, a branch of one) through the one algorithm.
    pub(crate) fn apply(&mut self, op: &RequestOp, rules: Rules, b: &mut Batch) -> Result<Outcome> {
        let done = |revision, response| Outcome::Done { revision, response };
        Ok(match op {
            RequestOp::Txn(t) => {
                let succeeded = self.holds(TxnRef::Etcd(t));
                let ops = TxnRef::Etcd(t).branch(succeeded);
                let mut responses = Vec::with_capacity(ops.len());
                match self.apply_branch(ops, rules, b, |_, r, _| responses.push(r))? {
                    Ok(revision) => done(
                        revision,
                        ResponseOp::Txn {
                            succeeded,
                            responses,
                        },
                    ),
                    Err(refusal) => Outcome::Refused(refusal),
                }
            }
            op => {
                let mut response = None;
                let ops = Branch::Etcd(std::slice::from_ref(op));
                match self.apply_branch(ops, rules, b, |_, r, _| response = Some(r))? {
                    Ok(revision) => done(revision, response.expect("one op, one response")),
                    Err(refusal) => Outcome::Refused(refusal),
                }
            }
        })
    }

    /// K5: the embedded txn, lowered to etcd's request as a borrowed view and applied by the
    /// one algorithm with the embedded rules (a key may be written twice in a branch); each
    /// answer raised to the embedded API's as it is made.
    pub(crate) fn txn(&mut self, txn: &Txn, b: &mut Batch) -> Result<TxnResponse> {
        let t = TxnRef::Embedded(txn);
        let succeeded = self.holds(t);
        let ops = t.branch(succeeded);
        let mut responses = Vec::with_capacity(ops.len());
        let applied = self.apply_branch(ops, Rules::Embedded, b, |op, r, rev| {
            responses.push(raise(op, r, rev))
        })?;
        match applied {
            Ok(revision) => Ok(TxnResponse {
                succeeded,
                revision,
                responses,
            }),
            // The embedded rules refuse nothing an embedded txn can hold (no ignore flags, no
            // past revision, a key may be written twice): said rather than assumed.
            Err(refusal) => Err(Error::storage(format!(
                "internal: an embedded txn was refused {refusal:?}"
            ))),
        }
    }

    /// A read-only request (a range, or a txn without writes): never changes anything.
    pub(crate) fn execute_read(&self, op: &RequestOp) -> Result<Outcome> {
        self.read(op, None)
    }

    /// [`execute_read`](Self::execute_read) for a request whose ranges may read past revisions
    /// (etcd's STM reads a txn of ranges at one revision): compares and present ranges are
    /// answered here; each past range is answered empty and returned, in response order, for
    /// the engine to read from the store (history at a retained revision never changes).
    pub(crate) fn execute_read_with_past(
        &self,
        op: &RequestOp,
    ) -> Result<(Outcome, Vec<RangeRequest>)> {
        let mut past = Vec::new();
        let out = self.read(op, Some(&mut past))?;
        Ok((out, past))
    }

    fn read(&self, op: &RequestOp, mut past: Option<&mut Vec<RangeRequest>>) -> Result<Outcome> {
        check_ops(op)?;
        let ops = Branch::Etcd(std::slice::from_ref(op));
        let mut path = Vec::new();
        self.branches(ops, &mut path);
        if let Err(r) = self.validate(ops, &mut path.iter(), Rules::Etcd, past.is_some())? {
            return Ok(Outcome::Refused(r));
        }
        let response = self.read_op(op.into(), &mut path.iter(), &mut past);
        Ok(Outcome::Done {
            revision: self.kv.revision,
            response,
        })
    }

    fn read_op(
        &self,
        op: OpRef<'_>,
        path: &mut Path<'_>,
        past: &mut Option<&mut Vec<RangeRequest>>,
    ) -> ResponseOp {
        match op {
            OpRef::Read(ReadRef::Request(r)) => match past {
                Some(list) if r.is_past(self.kv.revision) => {
                    list.push(r.clone());
                    ResponseOp::Range(RangeResponse::default())
                }
                _ => ResponseOp::Range(self.range(ReadRef::Request(r))),
            },
            OpRef::Read(r) => ResponseOp::Range(self.range(r)),
            OpRef::Txn(t) => {
                let ok = *path.next().expect("one branch per nested txn");
                ResponseOp::Txn {
                    succeeded: ok,
                    responses: TxnRef::Etcd(t)
                        .branch(ok)
                        .iter()
                        .map(|op| self.read_op(op, path, past))
                        .collect(),
                }
            }
            OpRef::Put(_) | OpRef::PutKey { .. } | OpRef::Delete(_) => {
                unreachable!("read_op is only called on requests that do not write")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::etcd::{DeleteRangeRequest, PutRequest, RangeCompare, TxnRequest};
    use crate::kv::txn::CompareOp;
    use std::time::Duration;

    fn fresh() -> LeaseKv {
        LeaseKv::new(true, true, Duration::ZERO, Duration::from_secs(3))
    }

    fn put(key: &str, value: &str) -> RequestOp {
        RequestOp::Put(PutRequest {
            key: key.into(),
            value: value.into(),
            ..PutRequest::default()
        })
    }

    fn run(lease_kv: &mut LeaseKv, op: RequestOp) -> Outcome {
        let mut b = Batch::new(false, true);
        lease_kv.execute(&op, &mut b).unwrap()
    }

    #[test]
    fn e2_put_prev_kv_ignore_value_and_lease() {
        let mut lease_kv = fresh();
        let mut b = Batch::new(false, false);
        let lease = lease_kv
            .grant(None, Duration::from_secs(10), 0, 0, &mut b)
            .unwrap();
        run(&mut lease_kv, put("k", "v1"));
        let keep = RequestOp::Put(PutRequest {
            key: "k".into(),
            lease,
            prev_kv: true,
            ignore_value: true,
            ..PutRequest::default()
        });
        let Outcome::Done { revision, response } = run(&mut lease_kv, keep) else {
            panic!("refused")
        };
        assert_eq!(revision, 2);
        let ResponseOp::Put {
            prev_kv: Some(prev),
        } = response
        else {
            panic!("{response:?}")
        };
        assert_eq!(prev.value, b"v1");
        let now = lease_kv.kv.get(b"k").unwrap();
        assert_eq!((now.value.as_slice(), now.version), (&b"v1"[..], 2));
        assert_eq!(now.lease.map(|l| l.get()), Some(lease));
        let missing = RequestOp::Put(PutRequest {
            key: "nope".into(),
            ignore_lease: true,
            ..PutRequest::default()
        });
        assert_eq!(
            run(&mut lease_kv, missing),
            Outcome::Refused(Refusal::KeyNotFound)
        );
        assert!(lease_kv.kv.get(b"nope").is_none());
        let bad_lease = RequestOp::Put(PutRequest {
            key: "x".into(),
            lease: 999,
            ..PutRequest::default()
        });
        let mut b = Batch::new(false, true);
        assert!(matches!(
            lease_kv.execute(&bad_lease, &mut b),
            Err(Error::LeaseNotFound(_))
        ));
        assert_eq!(lease_kv.kv.revision, 2, "nothing written");
    }

    #[test]
    fn e2_delete_range_and_nested_txn_at_one_revision() {
        let mut lease_kv = fresh();
        for k in ["a", "b", "c"] {
            run(&mut lease_kv, put(k, "1"));
        }
        let txn = RequestOp::Txn(TxnRequest {
            compare: vec![RangeCompare {
                compare: Compare::version("a", CompareOp::Greater, 0),
                range_end: b"c".to_vec(),
            }],
            success: vec![
                RequestOp::DeleteRange(DeleteRangeRequest {
                    key: "a".into(),
                    range_end: "c".into(),
                    prev_kv: true,
                }),
                RequestOp::Txn(TxnRequest {
                    compare: vec![RangeCompare {
                        compare: Compare::value("a", CompareOp::Equal, "1"),
                        range_end: Vec::new(),
                    }],
                    success: vec![put("d", "new")],
                    failure: vec![],
                }),
            ],
            failure: vec![],
        });
        let Outcome::Done { revision, response } = run(&mut lease_kv, txn) else {
            panic!("refused")
        };
        assert_eq!(revision, 4, "one revision for the whole txn");
        let ResponseOp::Txn {
            succeeded,
            responses,
        } = response
        else {
            panic!()
        };
        assert!(succeeded);
        assert!(
            matches!(&responses[0], ResponseOp::DeleteRange { deleted: 2, prev_kvs } if prev_kvs.len() == 2)
        );
        // The nested compare saw the state before the delete (etcd decides branches first).
        assert!(matches!(
            &responses[1],
            ResponseOp::Txn {
                succeeded: true,
                ..
            }
        ));
        assert_eq!(lease_kv.kv.get(b"d").unwrap().mod_revision, 4);
        assert!(lease_kv.kv.get(b"a").is_none() && lease_kv.kv.get(b"c").is_some());
    }

    #[test]
    fn k5_the_embedded_rules_let_a_branch_write_a_key_twice_etcds_refuse_it() {
        let mut lease_kv = fresh();
        let twice = RequestOp::Txn(TxnRequest {
            success: vec![put("k", "1"), put("k", "2")],
            ..TxnRequest::default()
        });
        let mut b = Batch::new(false, true);
        assert_eq!(
            lease_kv.apply(&twice, Rules::Etcd, &mut b).unwrap(),
            Outcome::Refused(Refusal::DuplicateKey)
        );
        let Outcome::Done { revision, .. } =
            lease_kv.apply(&twice, Rules::Embedded, &mut b).unwrap()
        else {
            panic!("refused")
        };
        assert_eq!(revision, 1, "both puts at one revision");
        assert_eq!(
            lease_kv.kv.get(b"k").unwrap().value,
            b"2",
            "the last write wins"
        );
    }

    #[test]
    fn e2_duplicate_keys_and_revisions_refused() {
        let mut lease_kv = fresh();
        run(&mut lease_kv, put("a", "1"));
        let dup = RequestOp::Txn(TxnRequest {
            success: vec![put("k", "1"), put("k", "2")],
            ..TxnRequest::default()
        });
        assert_eq!(
            run(&mut lease_kv, dup),
            Outcome::Refused(Refusal::DuplicateKey)
        );
        let overlap = RequestOp::Txn(TxnRequest {
            success: vec![
                put("k", "1"),
                RequestOp::DeleteRange(DeleteRangeRequest {
                    key: "a".into(),
                    range_end: "z".into(),
                    prev_kv: false,
                }),
            ],
            ..TxnRequest::default()
        });
        assert_eq!(
            run(&mut lease_kv, overlap),
            Outcome::Refused(Refusal::DuplicateKey)
        );
        let at = |rev| {
            RequestOp::Range(RangeRequest {
                revision: rev,
                ..RangeRequest::new("a", "")
            })
        };
        assert_eq!(
            lease_kv.execute_read(&at(5)).unwrap(),
            Outcome::Refused(Refusal::FutureRevision)
        );
        run(&mut lease_kv, put("a", "2"));
        assert_eq!(
            lease_kv.execute_read(&at(1)).unwrap(),
            Outcome::Refused(Refusal::Compacted)
        );
        assert!(matches!(
            lease_kv.execute_read(&at(2)).unwrap(),
            Outcome::Done { revision: 2, .. }
        ));
        assert_eq!(lease_kv.kv.revision, 2);
    }
}
