//! The one apply algorithm: an etcd request ([`RequestOp`]) applied to the [`Machine`] at one
//! revision, validated in full first (I-S1). `tenure serve` runs etcd's requests through it, and
//! the embedded [`Txn`](crate::Txn) is lowered to one (`Machine::txn`).

use std::collections::BTreeSet;

use crate::batch::Batch;
use crate::error::Result;
use crate::etcd::{Outcome, RangeCompare, RangeRequest, Refusal, RequestOp, ResponseOp};
use crate::kv::range::KeyRange;
use crate::kv::txn::{Compare, CompareTarget};
use crate::limits::check_key;
use crate::state::Machine;

impl Machine {
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

    fn check_range(&self, r: &RangeRequest) -> std::result::Result<(), Refusal> {
        match r.revision {
            0 => Ok(()),
            rev if rev > self.kv.revision => Err(Refusal::FutureRevision),
            rev if rev < self.kv.revision => Err(Refusal::Compacted),
            _ => Ok(()),
        }
    }

    /// Validates the ops that will run, before anything is applied.
    fn validate(
        &self,
        ops: &[RequestOp],
        path: &mut std::slice::Iter<'_, bool>,
    ) -> Result<std::result::Result<(), Refusal>> {
        let mut puts = BTreeSet::new();
        let mut deletes = Vec::new();
        for op in ops {
            match op {
                RequestOp::Range(r) => {
                    if let Err(refusal) = self.check_range(r) {
                        return Ok(Err(refusal));
                    }
                }
                RequestOp::Put(p) => {
                    check_key(&p.key)?;
                    if !puts.insert(p.key.as_slice()) {
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
                    deletes.push(KeyRange::new(&d.key, &d.range_end));
                }
                RequestOp::Txn(t) => {
                    let ok = *path.next().expect("one branch per nested txn");
                    if let Err(r) = self.validate(if ok { &t.success } else { &t.failure }, path)? {
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

    fn apply_ops(
        &mut self,
        ops: &[RequestOp],
        path: &mut std::slice::Iter<'_, bool>,
        rev: i64,
        wrote: &mut bool,
        b: &mut Batch,
    ) -> Vec<ResponseOp> {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            out.push(match op {
                RequestOp::Range(r) => ResponseOp::Range(self.kv.range_request(r)),
                RequestOp::Put(p) => {
                    let prev = self.kv.get(&p.key);
                    let value = match (&prev, p.ignore_value) {
                        (Some(kv), true) => kv.value.clone(),
                        _ => p.value.clone(),
                    };
                    let lease = match (&prev, p.ignore_lease) {
                        (Some(kv), true) => kv.lease.map_or(0, |l| l.get()),
                        _ => p.lease,
                    };
                    self.put_at(&p.key, &value, lease, rev, b);
                    *wrote = true;
                    ResponseOp::Put {
                        prev_kv: if p.prev_kv { prev } else { None },
                    }
                }
                RequestOp::DeleteRange(d) => {
                    let range = KeyRange::new(&d.key, &d.range_end);
                    let gone = self.kv.range_of(&range);
                    for kv in &gone {
                        self.delete_at(&kv.key, rev, b);
                    }
                    *wrote |= !gone.is_empty();
                    ResponseOp::DeleteRange {
                        deleted: gone.len() as i64,
                        prev_kvs: if d.prev_kv { gone } else { Vec::new() },
                    }
                }
                RequestOp::Txn(t) => {
                    let ok = *path.next().expect("one branch per nested txn");
                    let branch = if ok { &t.success } else { &t.failure };
                    ResponseOp::Txn {
                        succeeded: ok,
                        responses: self.apply_ops(branch, path, rev, wrote, b),
                    }
                }
            });
        }
        out
    }

    /// SPEC E2: one request, validated in full before anything is applied; every write at one
    /// revision, which moves only if something was written.
    pub(crate) fn execute(&mut self, op: &RequestOp, b: &mut Batch) -> Result<Outcome> {
        let ops = std::slice::from_ref(op);
        let mut path = Vec::new();
        self.branches(ops, &mut path);
        if let Err(r) = self.validate(ops, &mut path.iter())? {
            return Ok(Outcome::Refused(r));
        }
        let rev = self.kv.revision + 1;
        let mut wrote = false;
        let response = self
            .apply_ops(ops, &mut path.iter(), rev, &mut wrote, b)
            .pop()
            .expect("one op");
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
        let ops = std::slice::from_ref(op);
        let mut path = Vec::new();
        self.branches(ops, &mut path);
        if let Err(r) = self.validate(ops, &mut path.iter())? {
            return Ok(Outcome::Refused(r));
        }
        let response = self.read_ops(ops, &mut path.iter()).pop().expect("one op");
        Ok(Outcome::Done {
            revision: self.kv.revision,
            response,
        })
    }

    fn read_ops(
        &self,
        ops: &[RequestOp],
        path: &mut std::slice::Iter<'_, bool>,
    ) -> Vec<ResponseOp> {
        ops.iter()
            .map(|op| match op {
                RequestOp::Range(r) => ResponseOp::Range(self.kv.range_request(r)),
                RequestOp::Txn(t) => {
                    let ok = *path.next().expect("one branch per nested txn");
                    let branch = if ok { &t.success } else { &t.failure };
                    ResponseOp::Txn {
                        succeeded: ok,
                        responses: self.read_ops(branch, path),
                    }
                }
                RequestOp::Put(_) | RequestOp::DeleteRange(_) => {
                    unreachable!("read_ops is only called on requests that do not write")
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::etcd::{DeleteRangeRequest, PutRequest, TxnRequest};
    use crate::kv::txn::CompareOp;
    use std::time::Duration;

    fn machine() -> Machine {
        Machine::new(true, true, Duration::ZERO, Duration::from_secs(3))
    }

    fn put(key: &str, value: &str) -> RequestOp {
        RequestOp::Put(PutRequest {
            key: key.into(),
            value: value.into(),
            ..PutRequest::default()
        })
    }

    fn run(m: &mut Machine, op: RequestOp) -> Outcome {
        let mut b = Batch::new(false, true);
        m.execute(&op, &mut b).unwrap()
    }

    #[test]
    fn e2_put_prev_kv_ignore_value_and_lease() {
        let mut m = machine();
        let mut b = Batch::new(false, false);
        let lease = m
            .grant(None, Duration::from_secs(10), 0, 0, &mut b)
            .unwrap();
        run(&mut m, put("k", "v1"));
        let keep = RequestOp::Put(PutRequest {
            key: "k".into(),
            lease,
            prev_kv: true,
            ignore_value: true,
            ..PutRequest::default()
        });
        let Outcome::Done { revision, response } = run(&mut m, keep) else {
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
        let now = m.kv.get(b"k").unwrap();
        assert_eq!((now.value.as_slice(), now.version), (&b"v1"[..], 2));
        assert_eq!(now.lease.map(|l| l.get()), Some(lease));
        let missing = RequestOp::Put(PutRequest {
            key: "nope".into(),
            ignore_lease: true,
            ..PutRequest::default()
        });
        assert_eq!(run(&mut m, missing), Outcome::Refused(Refusal::KeyNotFound));
        assert!(m.kv.get(b"nope").is_none());
        let bad_lease = RequestOp::Put(PutRequest {
            key: "x".into(),
            lease: 999,
            ..PutRequest::default()
        });
        let mut b = Batch::new(false, true);
        assert!(matches!(
            m.execute(&bad_lease, &mut b),
            Err(Error::LeaseNotFound(_))
        ));
        assert_eq!(m.kv.revision, 2, "nothing written");
    }

    #[test]
    fn e2_delete_range_and_nested_txn_at_one_revision() {
        let mut m = machine();
        for k in ["a", "b", "c"] {
            run(&mut m, put(k, "1"));
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
        let Outcome::Done { revision, response } = run(&mut m, txn) else {
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
        assert_eq!(m.kv.get(b"d").unwrap().mod_revision, 4);
        assert!(m.kv.get(b"a").is_none() && m.kv.get(b"c").is_some());
    }

    #[test]
    fn e2_duplicate_keys_and_revisions_refused() {
        let mut m = machine();
        run(&mut m, put("a", "1"));
        let dup = RequestOp::Txn(TxnRequest {
            success: vec![put("k", "1"), put("k", "2")],
            ..TxnRequest::default()
        });
        assert_eq!(run(&mut m, dup), Outcome::Refused(Refusal::DuplicateKey));
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
            run(&mut m, overlap),
            Outcome::Refused(Refusal::DuplicateKey)
        );
        let at = |rev| {
            RequestOp::Range(RangeRequest {
                revision: rev,
                ..RangeRequest::new("a", "")
            })
        };
        assert_eq!(
            m.execute_read(&at(5)).unwrap(),
            Outcome::Refused(Refusal::FutureRevision)
        );
        run(&mut m, put("a", "2"));
        assert_eq!(
            m.execute_read(&at(1)).unwrap(),
            Outcome::Refused(Refusal::Compacted)
        );
        assert!(matches!(
            m.execute_read(&at(2)).unwrap(),
            Outcome::Done { revision: 2, .. }
        ));
        assert_eq!(m.kv.revision, 2);
    }
}
