//! Keys over etcd: put, get, range, delete, txn, attach and detach, compact.

use etcd_client as etcd;

use super::convert::{compare, kv, op_response, txn_op};
use super::Remote;
use crate::error::{Error, Result};
use crate::etcd::errors;
use crate::etcd::Refusal;
use crate::kv::range::{CreateOrder, RangeOptions};
use crate::kv::txn::{Op, Txn, TxnResponse};
use crate::limits::check_key;
use crate::types::{KeyValue, LeaseId};

impl Remote {
    pub(crate) fn put(&self, key: &[u8], value: &[u8], lease: Option<LeaseId>) -> Result<i64> {
        check_key(key)?;
        let r = self.call(false, None, lease, |mut c| {
            let opts = lease.map(|l| etcd::PutOptions::new().with_lease(l.get()));
            async move { c.put(key, value, opts).await }
        })?;
        Ok(self.seen(r.header()))
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.get_at(key, 0)
    }

    /// `key` as it was at `revision` (0: the current one).
    pub(crate) fn get_at(&self, key: &[u8], revision: i64) -> Result<Option<KeyValue>> {
        // No key is empty: as the engine answers (etcd would refuse the request).
        if key.is_empty() {
            return Ok(None);
        }
        let r = self.call(true, None, None, |mut c| {
            let o = (revision != 0).then(|| etcd::GetOptions::new().with_revision(revision));
            async move { c.get(key, o).await }
        });
        let r = r.map_err(|e| at_revision(e, revision))?;
        self.seen(r.header()); // etcd's header holds the current revision, at any read
        Ok(r.kvs().first().map(kv))
    }

    /// Keys under `prefix` in key order (`order: None`) or as the recipes read them.
    pub(crate) fn range(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        order: Option<RangeOptions>,
    ) -> Result<Vec<KeyValue>> {
        self.range_at(prefix, limit, order, 0)
    }

    /// [`range`](Self::range) at `revision` (0: the current one).
    pub(crate) fn range_at(
        &self,
        prefix: &[u8],
        limit: Option<usize>,
        order: Option<RangeOptions>,
        revision: i64,
    ) -> Result<Vec<KeyValue>> {
        let limit = order.map_or(limit, |o| o.limit);
        // etcd reads limit 0 as "no limit"; tenure's limit 0 is no key.
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let r = self.call(true, None, None, |mut c| {
            let mut o = etcd::GetOptions::new().with_prefix();
            if let Some(n) = limit {
                o = o.with_limit(i64::try_from(n).unwrap_or(i64::MAX));
            }
            if revision != 0 {
                o = o.with_revision(revision);
            }
            if let Some(opts) = order {
                let dir = match opts.order {
                    CreateOrder::Oldest => etcd::SortOrder::Ascend,
                    CreateOrder::Newest => etcd::SortOrder::Descend,
                };
                o = o.with_sort(etcd::SortTarget::Create, dir);
                if let Some(max) = opts.max_create_revision {
                    o = o.with_max_create_revision(max);
                }
            }
            async move { c.get(prefix, Some(o)).await }
        });
        let r = r.map_err(|e| at_revision(e, revision))?;
        self.seen(r.header()); // etcd's header holds the current revision, at any read
        Ok(r.kvs().iter().map(kv).collect())
    }

    /// Deletes `key` (or every key under it): how many.
    pub(crate) fn delete(&self, key: &[u8], prefix: bool) -> Result<u64> {
        if !prefix {
            check_key(key)?;
        }
        let r = self.call(false, None, None, |mut c| {
            let o = prefix.then(|| etcd::DeleteOptions::new().with_prefix());
            async move { c.delete(key, o).await }
        })?;
        self.seen(r.header());
        Ok(r.deleted().max(0) as u64)
    }

    pub(crate) fn txn(&self, txn: &Txn) -> Result<TxnResponse> {
        let req = etcd::Txn::new()
            .when(txn.compares.iter().map(compare).collect::<Vec<_>>())
            .and_then(txn.success.iter().map(txn_op).collect::<Vec<_>>())
            .or_else(txn.failure.iter().map(txn_op).collect::<Vec<_>>());
        // A txn that writes nothing (reads under compares) is as safe to repeat as a range.
        let reads_only = txn
            .success
            .iter()
            .chain(&txn.failure)
            .all(|op| matches!(op, Op::Get { .. } | Op::Range { .. }));
        let r = self
            .call(reads_only, None, None, |mut c| {
                let req = req.clone();
                async move { c.txn(req).await }
            })
            .map_err(|e| self.name_missing_lease(e, txn))?;
        let revision = self.seen(r.header());
        let branch = if r.succeeded() {
            &txn.success
        } else {
            &txn.failure
        };
        let responses = branch
            .iter()
            .zip(r.op_responses().iter())
            .map(|(op, resp)| op_response(op, resp, revision))
            .collect();
        Ok(TxnResponse {
            succeeded: r.succeeded(),
            revision,
            responses,
        })
    }

    /// etcd's "lease not found" does not say which: the first lease of `txn` that is gone.
    fn name_missing_lease(&self, e: Error, txn: &Txn) -> Error {
        if !matches!(e, Error::LeaseNotFound(id) if id.get() == 0) {
            return e;
        }
        let leases = txn
            .success
            .iter()
            .chain(&txn.failure)
            .filter_map(|op| match op {
                Op::Put { lease, .. } => *lease,
                _ => None,
            });
        for id in leases {
            if let Err(Error::LeaseNotFound(_)) = self.time_to_live(id) {
                return Error::LeaseNotFound(id);
            }
        }
        e
    }

    /// Attaches `keys` to `id` (`attach`), or detaches those attached to it: a put that keeps
    /// the value (etcd's `ignore_value`). Attach is one txn, all or nothing: every key must
    /// have a value (etcd has no bare key names), else `Unsupported` naming the first without,
    /// as the txn itself saw them (its failure branch reads them: no second look that a
    /// concurrent writer could change). Detach is one conditional txn per key, so a key on
    /// another lease stays there.
    pub(crate) fn attach<K: AsRef<[u8]>>(
        &self,
        id: LeaseId,
        keys: &[K],
        attach: bool,
    ) -> Result<()> {
        self.time_to_live(id)?;
        keys.iter().try_for_each(|k| check_key(k.as_ref()))?;
        let put = |key: &[u8], lease: i64| {
            let o = etcd::PutOptions::new()
                .with_ignore_value()
                .with_lease(lease);
            etcd::TxnOp::put(key, Vec::new(), Some(o))
        };
        let mut reqs = Vec::new();
        if attach {
            let has_value = |k: &K| etcd::Compare::version(k.as_ref(), etcd::CompareOp::Greater, 0);
            let read = |k: &K| {
                etcd::TxnOp::get(k.as_ref(), Some(etcd::GetOptions::new().with_keys_only()))
            };
            reqs.push(
                etcd::Txn::new()
                    .when(keys.iter().map(has_value).collect::<Vec<_>>())
                    .and_then(
                        keys.iter()
                            .map(|k| put(k.as_ref(), id.get()))
                            .collect::<Vec<_>>(),
                    )
                    .or_else(keys.iter().map(read).collect::<Vec<_>>()),
            );
        } else {
            for key in keys {
                let key = key.as_ref();
                let when = etcd::Compare::lease(key, etcd::CompareOp::Equal, id.get());
                reqs.push(etcd::Txn::new().when([when]).and_then([put(key, 0)]));
            }
        }
        for req in reqs {
            let r = self.call(false, None, Some(id), |mut c| {
                let req = req.clone();
                async move { c.txn(req).await }
            })?;
            self.seen(r.header());
            if attach && !r.succeeded() {
                let missing = keys.iter().zip(r.op_responses()).find(
                    |(_, resp)| matches!(resp, etcd::TxnOpResponse::Get(g) if g.kvs().is_empty()),
                );
                let key = missing.map_or_else(
                    || String::from("a key"),
                    |(k, _)| String::from_utf8_lossy(k.as_ref()).into_owned(),
                );
                return Err(Error::Unsupported(format!(
                    "attach {key}: the key has no value; over connect only keys with a value \
                     can be attached (etcd has no bare key names)"
                )));
            }
        }
        Ok(())
    }

    /// etcd's Compact; `physical`: it returns once the server removed the compacted rows, else
    /// once the revision is compacted logically.
    pub(crate) fn compact(
        &self,
        revision: i64,
        physical: bool,
    ) -> Result<std::result::Result<i64, Refusal>> {
        let r = self.call(false, None, None, |mut c| async move {
            let o = physical.then(|| etcd::CompactionOptions::new().with_physical());
            c.compact(revision, o).await
        });
        match r {
            Ok(r) => Ok(Ok(self.seen(r.header()))),
            Err(e) => match errors::refusal_of(&e) {
                Some(r @ (Refusal::Compacted | Refusal::FutureRevision)) => Ok(Err(r)),
                _ => Err(e),
            },
        }
    }
}

/// The error of a read at `revision` with the numbers the caller knows (etcd's errors carry
/// none): the revision asked for.
fn at_revision(e: Error, revision: i64) -> Error {
    match e {
        Error::Compacted {
            revision: 0,
            compact_revision,
            reason,
        } => Error::Compacted {
            revision,
            compact_revision,
            reason,
        },
        Error::FutureRevision {
            requested: 0,
            current,
        } => Error::FutureRevision {
            requested: revision,
            current,
        },
        e => e,
    }
}
