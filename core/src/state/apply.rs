//! The one apply algorithm: an etcd request ([`RequestOp`]) applied to the [`LeaseKv`] at one
//! revision, validated in full first (I-S1). `tenure serve` runs etcd's requests through it, and
//! the embedded [`Txn`](crate::Txn) is lowered to one (`LeaseKv::txn`).

use std::collections::BTreeSet;

use crate::batch::Batch;
use crate::error::Result;
use crate::etcd::{
    Outcome, RangeCompare, RangeRequest, RangeResponse, Refusal, RequestOp, ResponseOp,
};
use crate::kv::range::KeyRange;
use crate::kv::txn::{Compare, CompareTarget};
use crate::limits::{check_key, check_txn_ops};
use crate::state::LeaseKv;

/// The rules a request is held to: etcd's for a request from outside; the embedded API's for a
/// lowered [`Txn`](crate::Txn), which may write one key twice in a branch (the last write wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// etcd's: a key written twice in one branch is [`Refusal::DuplicateKey`].
    Etcd,
    /// The embedded `Txn`'s.
    Embedded,
}

/// etcd's op budget (SPEC E2a) for a request from outside, before any work on it. The embedded
/// [`Txn`](crate::Txn) nests nothing and is not held to it.
fn check_ops(op: &RequestOp) -> Result<()> {
    match op {
        RequestOp::Txn(t) => check_txn_ops(t),
        _ => Ok(()),
    }
}

impl LeaseKv {
    fn compare_range(&self, c: &RangeCompare) -> bool {
        if c.range_end.is_empty() {
            return self.kv.compare(&c.compare);
        }
        let keys = self
            .kv
            .keys_in(&KeyRange::new(&c.compare.key, &c.range_end));
        if keys.is_empty() {
            let value = matches!(c.compare.target, CompareTarget::Value(_));
            return !value && self.kv.compare(&c.compare);
        }
        keys.into_iter().all(|key| {
            self.kv.compare(&Compare {
                key,
                ..c.compare.clone()
            })
        })
    }

    /// The branch each (nested) txn takes, decided on the state before any op runs (as etcd).
    fn branches(&self, ops: &[RequestOp], out: &mut Vec<bool>) {
        for op in ops {
            if let RequestOp::Txn(t) = op {
                let ok = t.compare.iter().all(|c| self.compare_range(c));
                out.push(ok);
                self.branches(if ok { &t.success } else { &t.failure }, out);
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
        ops: &[RequestOp],
        path: &mut std::slice::Iter<'_, bool>,
        rules: Rules,
        past_ok: bool,
    ) -> Result<std::result::Result<(), Refusal>> {
        let etcd = rules == Rules::Etcd;
        let mut puts = BTreeSet::new();
        let mut deletes = Vec::new();
        for op in ops {
            match op {
                RequestOp::Range(r) => {
                    check_key(&r.key)?;
                    if let Err(refusal) = self.check_range(r, past_ok) {
                        return Ok(Err(refusal));
                    }
                }
                RequestOp::Put(p) => {
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
                RequestOp::DeleteRange(d) => {
                    check_key(&d.key)?;
                    if etcd {
                        deletes.push(KeyRange::new(&d.key, &d.range_end));
                    }
                }
                RequestOp::Txn(t) => {
                    let ok = *path.next().expect("one branch per nested txn");
                    let branch = if ok { &t.success } else { &t.failure };
                    if let Err(r) = self.validate(branch, path, rules, past_ok)? {
                        return Ok(Err(r));
                    }
                }
            }
        }
        if puts.iter().any(|k| deletes.iter().any(|d| d.contains(k))) {
            return Ok(Err(Refusal::DuplicateKey));
        }
        Ok(Ok(()))
    }

    fn apply_op(
        &mut self,
        op: &RequestOp,
        path: &mut std::slice::Iter<'_, bool>,
        rules: Rules,
        rev: i64,
        wrote: &mut bool,
        b: &mut Batch,
    ) -> ResponseOp {
        match op {
            RequestOp::Range(r) => ResponseOp::Range(self.range(r)),
            RequestOp::Put(p) => {
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
            RequestOp::DeleteRange(d)
                if rules == Rules::Embedded && d.range_end.is_empty() && !d.prev_kv =>
            {
                // The embedded `Op::Delete`: also forgets a bare attached name (L6), which
                // etcd has not; nothing to return, so no copy of the key-value.
                let existed = self.delete_at(&d.key, rev, b);
                *wrote |= existed;
                ResponseOp::DeleteRange {
                    deleted: i64::from(existed),
                    prev_kvs: Vec::new(),
                }
            }
            RequestOp::DeleteRange(d) => {
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
            RequestOp::Txn(t) => {
                let ok = *path.next().expect("one branch per nested txn");
                let branch = if ok { &t.success } else { &t.failure };
                ResponseOp::Txn {
                    succeeded: ok,
                    responses: branch
                        .iter()
                        .map(|op| self.apply_op(op, path, rules, rev, wrote, b))
                        .collect(),
                }
            }
        }
    }

    /// etcd's range; a plain read of one key (the embedded `Op::Get`) is the index's get.
    fn range(&self, r: &RangeRequest) -> RangeResponse {
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
        let kvs: Vec<_> = self.kv.get(&r.key).into_iter().collect();
        RangeResponse {
            count: kvs.len() as i64,
            kvs,
            more: false,
        }
    }

    /// SPEC E2: one etcd request, validated in full before anything is applied; every write at
    /// one revision, which moves only if something was written.
    pub(crate) fn execute(&mut self, op: &RequestOp, b: &mut Batch) -> Result<Outcome> {
        check_ops(op)?;
        self.apply(op, Rules::Etcd, b)
    }

    /// [`execute`](Self::execute) under `rules`: the one apply algorithm.
    pub(crate) fn apply(&mut self, op: &RequestOp, rules: Rules, b: &mut Batch) -> Result<Outcome> {
        let ops = std::slice::from_ref(op);
        let mut path = Vec::new();
        self.branches(ops, &mut path);
        if let Err(r) = self.validate(ops, &mut path.iter(), rules, false)? {
            return Ok(Outcome::Refused(r));
        }
        let rev = self.next_revision()?;
        let mut wrote = false;
        let response = self.apply_op(op, &mut path.iter(), rules, rev, &mut wrote, b);
        if wrote {
            self.kv.revision = rev;
        }
        Ok(Outcome::Done {
            revision: self.kv.revision,
            response,
        })
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
        let ops = std::slice::from_ref(op);
        let mut path = Vec::new();
        self.branches(ops, &mut path);
        if let Err(r) = self.validate(ops, &mut path.iter(), Rules::Etcd, past.is_some())? {
            return Ok(Outcome::Refused(r));
        }
        let response = self.read_op(op, &mut path.iter(), &mut past);
        Ok(Outcome::Done {
            revision: self.kv.revision,
            response,
        })
    }

    fn read_op(
        &self,
        op: &RequestOp,
        path: &mut std::slice::Iter<'_, bool>,
        past: &mut Option<&mut Vec<RangeRequest>>,
    ) -> ResponseOp {
        match op {
            RequestOp::Range(r) => match past {
                Some(list) if r.is_past(self.kv.revision) => {
                    list.push(r.clone());
                    ResponseOp::Range(RangeResponse::default())
                }
                _ => ResponseOp::Range(self.range(r)),
            },
            RequestOp::Txn(t) => {
                let ok = *path.next().expect("one branch per nested txn");
                let branch = if ok { &t.success } else { &t.failure };
                ResponseOp::Txn {
                    succeeded: ok,
                    responses: branch
                        .iter()
                        .map(|op| self.read_op(op, path, past))
                        .collect(),
                }
            }
            RequestOp::Put(_) | RequestOp::DeleteRange(_) => {
                unreachable!("read_op is only called on requests that do not write")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::etcd::{DeleteRangeRequest, PutRequest, TxnRequest};
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
