//! A small reference model of tenure's observable state, shared by the model-based property test
//! (`tests/model.rs`) and the crash test (`tests/crash.rs`).
//!
//! It is deliberately naive: plain `BTreeMap`s, one field per fact of the SPEC, no indexes, no
//! heaps, no batching. Every method mirrors one public call of `Tenure` and returns what that
//! call must return, errors included (compared by their stable `ErrorCode`).
//!
//! Rules encoded here, as implemented by `core/src` (SPEC line in brackets):
//! - revision +1 per put, per delete/delete_prefix that deleted something, per revoke (always),
//!   per txn that wrote, per batch of expiries [K4];
//! - a key *name* can be attached to a lease without a value (`attach` before any put): it is
//!   invisible to get/range, counts as no key for compares, is deleted by revoke/expiry, and is
//!   left alone by delete_prefix [L6];
//! - renew clears the checkpointed remaining TTL; checkpoint never moves the deadline; promote
//!   sets every deadline to now + extend + (checkpoint, else TTL) [L5, L8, L9];
//! - a clean close checkpoints every lease renewed since its last checkpoint (primary only), and
//!   a reopen in `Recovery::Wall` restarts each lease from its persisted remaining TTL (else its
//!   TTL) minus the wall time since it was persisted, and records that as its checkpoint [L13].
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tenure::{
    CompareOp, CompareTarget, Error, ErrorCode, ExpiredLease, KeyValue, LeaseId, LeaseInfo, Op,
    OpResponse, Stats, Tenure, Txn, TxnResponse,
};

/// etcd's MaxLeaseTTL, in ns.
pub(crate) const MAX_TTL_NS: u64 = 9_000_000_000 * 1_000_000_000;
const MS: u64 = 1_000_000;

/// An error as the model predicts it: the stable code, and the lease it names (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MErr {
    pub code: ErrorCode,
    pub lease: Option<i64>,
}

pub(crate) type MResult<T> = Result<T, MErr>;

impl From<&Error> for MErr {
    fn from(e: &Error) -> MErr {
        let lease = match e {
            Error::LeaseNotFound(id) | Error::LeaseExists(id) | Error::LeaseExpired(id) => {
                Some(id.get())
            }
            _ => None,
        };
        MErr {
            code: e.code(),
            lease,
        }
    }
}

/// The engine's result, with its error reduced to what the model predicts.
pub(crate) fn observed<T>(r: Result<T, Error>) -> MResult<T> {
    r.map_err(|e| MErr::from(&e))
}

fn err(code: ErrorCode) -> MErr {
    MErr { code, lease: None }
}

fn not_found(id: i64) -> MErr {
    MErr {
        code: ErrorCode::LeaseNotFound,
        lease: Some(id),
    }
}

pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1)
}

/// What the store holds for a lease: rewritten by grant, checkpoint and the close checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub ttl: u64,
    pub remaining: Option<u64>,
    pub wall_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MLease {
    pub ttl: u64,
    /// `None` on a standby.
    pub deadline: Option<u64>,
    /// Checkpointed remaining TTL, used by the next promote.
    pub ckpt: Option<u64>,
    /// Renewed since its last checkpoint.
    pub dirty: bool,
    /// Manual revoke: delivered on `expired()`, waiting for the application's revoke.
    pub expired: bool,
    /// Attached key names (with or without a value).
    pub keys: BTreeSet<Vec<u8>>,
    pub row: Row,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MData {
    pub value: Vec<u8>,
    pub create: i64,
    pub mod_revision: i64,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MEntry {
    /// `None`: a bare name, attached to a lease by `attach` and never put since.
    pub data: Option<MData>,
    /// 0 = no lease.
    pub lease: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MCounters {
    pub granted: u64,
    pub revoked: u64,
    pub renewed: u64,
    pub expired: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Model {
    pub leases: BTreeMap<i64, MLease>,
    pub kv: BTreeMap<Vec<u8>, MEntry>,
    pub revision: i64,
    pub next_id: i64,
    pub primary: bool,
    /// `false`: etcd's manual revoke (L12), expired leases are delivered and stay.
    pub auto_revoke: bool,
    /// Manual revoke: how long until an unrevoked expired lease is delivered again, ns.
    pub retry: u64,
    /// Monotonic time, ns (a `ManualClock` starts at zero).
    pub now: u64,
    /// Wall time, ms, relative to the clock's starting wall time.
    pub wall: i64,
    /// Since the last open.
    pub counters: MCounters,
}

impl Model {
    /// An empty engine with auto revoke.
    pub(crate) fn new(primary: bool) -> Model {
        Model::with_revoke(primary, true, Duration::from_secs(3))
    }

    /// An empty engine; `auto_revoke = false` is L12's manual revoke, redelivering every `retry`.
    pub(crate) fn with_revoke(primary: bool, auto_revoke: bool, retry: Duration) -> Model {
        Model {
            leases: BTreeMap::new(),
            kv: BTreeMap::new(),
            revision: 0,
            next_id: 1,
            primary,
            auto_revoke,
            retry: ns(retry),
            now: 0,
            wall: 0,
            counters: MCounters::default(),
        }
    }

    // ---- leases ---------------------------------------------------------------------------

    /// L1–L3: TTL checked first, then the ID.
    pub(crate) fn grant(&mut self, id: Option<i64>, ttl: Duration) -> MResult<i64> {
        if ttl.is_zero() {
            return Err(err(ErrorCode::InvalidArgument));
        }
        let ttl = ns(ttl);
        if ttl > MAX_TTL_NS {
            return Err(err(ErrorCode::LeaseTtlTooLarge));
        }
        let id = match id {
            Some(id) if id <= 0 => return Err(err(ErrorCode::InvalidArgument)),
            Some(id) if self.leases.contains_key(&id) => {
                return Err(MErr {
                    code: ErrorCode::LeaseExists,
                    lease: Some(id),
                })
            }
            Some(id) => id,
            None => self.next_id,
        };
        self.next_id = self.next_id.max(id + 1);
        self.leases.insert(
            id,
            MLease {
                ttl,
                deadline: self.primary.then(|| self.now.saturating_add(ttl)),
                ckpt: None,
                dirty: false,
                expired: false,
                keys: BTreeSet::new(),
                row: Row {
                    ttl,
                    remaining: None,
                    wall_ms: self.wall,
                },
            },
        );
        self.counters.granted += 1;
        Ok(id)
    }

    /// Removes a lease and every key name attached to it (no revision bump here).
    fn drop_lease(&mut self, id: i64) -> Option<ExpiredLease> {
        let lease = self.leases.remove(&id)?;
        for key in &lease.keys {
            self.kv.remove(key);
        }
        Some(ExpiredLease {
            id: LeaseId::new(id),
            ttl: Duration::from_nanos(lease.ttl),
            keys: lease.keys.into_iter().collect(),
        })
    }

    /// L4: one revision, always.
    pub(crate) fn revoke(&mut self, id: i64) -> MResult<()> {
        self.drop_lease(id).ok_or(not_found(id))?;
        self.revision += 1;
        self.counters.revoked += 1;
        Ok(())
    }

    /// L5: returns the TTL in ns. A lease past its deadline is never brought back.
    pub(crate) fn renew(&mut self, id: i64) -> MResult<u64> {
        if !self.primary {
            return Err(err(ErrorCode::NotPrimary));
        }
        let (now, auto) = (self.now, self.auto_revoke);
        let lease = self.leases.get_mut(&id).ok_or(not_found(id))?;
        if lease.expired || lease.deadline.is_some_and(|d| d <= now) {
            return Err(if lease.expired || !auto {
                MErr {
                    code: ErrorCode::LeaseExpired,
                    lease: Some(id),
                }
            } else {
                not_found(id)
            });
        }
        lease.deadline = Some(now.saturating_add(lease.ttl));
        lease.ckpt = None;
        lease.dirty = true;
        self.counters.renewed += 1;
        Ok(lease.ttl)
    }

    /// L6: lease checked first, then every key; all or nothing; no revision.
    pub(crate) fn attach(&mut self, id: i64, keys: &[Vec<u8>]) -> MResult<()> {
        if !self.leases.contains_key(&id) {
            return Err(not_found(id));
        }
        if keys.iter().any(Vec::is_empty) {
            return Err(err(ErrorCode::InvalidArgument));
        }
        for key in keys {
            let entry = self.kv.entry(key.clone()).or_insert(MEntry {
                data: None,
                lease: 0,
            });
            let old = std::mem::replace(&mut entry.lease, id);
            if old != 0 && old != id {
                self.leases
                    .get_mut(&old)
                    .expect("attached lease")
                    .keys
                    .remove(key);
            }
            self.leases
                .get_mut(&id)
                .expect("checked")
                .keys
                .insert(key.clone());
        }
        Ok(())
    }

    /// L6: only keys attached to `id` are detached; a bare name disappears.
    pub(crate) fn detach(&mut self, id: i64, keys: &[Vec<u8>]) -> MResult<()> {
        if !self.leases.contains_key(&id) {
            return Err(not_found(id));
        }
        for key in keys {
            let Some(entry) = self.kv.get_mut(key) else {
                continue;
            };
            if entry.lease != id {
                continue;
            }
            entry.lease = 0;
            if entry.data.is_none() {
                self.kv.remove(key);
            }
            self.leases.get_mut(&id).expect("checked").keys.remove(key);
        }
        Ok(())
    }

    /// L8: persisted; the deadline stays.
    pub(crate) fn checkpoint(&mut self, id: i64, remaining: Duration) -> MResult<()> {
        let wall = self.wall;
        let lease = self.leases.get_mut(&id).ok_or(not_found(id))?;
        let r = ns(remaining);
        lease.ckpt = Some(r);
        lease.dirty = false;
        lease.row = Row {
            ttl: lease.ttl,
            remaining: Some(r),
            wall_ms: wall,
        };
        Ok(())
    }

    /// L9. A lease delivered for a manual revoke stays expired and is due at once.
    pub(crate) fn promote(&mut self, extend: Duration) {
        self.primary = true;
        let base = self.now.saturating_add(ns(extend));
        for lease in self.leases.values_mut() {
            lease.deadline = Some(if lease.expired {
                self.now
            } else {
                base.saturating_add(lease.ckpt.unwrap_or(lease.ttl))
            });
        }
    }

    /// L9.
    pub(crate) fn demote(&mut self) {
        self.primary = false;
        for lease in self.leases.values_mut() {
            lease.deadline = None;
        }
    }

    /// Moves both clocks (a `ManualClock::advance`).
    pub(crate) fn advance(&mut self, d: Duration) {
        self.now = self.now.saturating_add(ns(d));
        self.wall += d.as_millis() as i64;
    }

    /// L10–L12: every lease whose deadline has passed, in one batch. Auto revoke: revoked, at
    /// one revision. Manual: delivered with its current keys, kept, and due again after `retry`
    /// (a redelivery is not counted as a new expiry). Returns the notices (sorted by lease ID),
    /// or `None` when nothing is due.
    pub(crate) fn expire_due(&mut self) -> Option<Vec<ExpiredLease>> {
        if !self.primary {
            return None;
        }
        let due: Vec<i64> = self
            .leases
            .iter()
            .filter(|(_, l)| l.deadline.is_some_and(|d| d <= self.now))
            .map(|(&id, _)| id)
            .collect();
        if due.is_empty() {
            return None;
        }
        if !self.auto_revoke {
            let retry_at = self.now.saturating_add(self.retry);
            let mut notices = Vec::new();
            for id in due {
                let lease = self.leases.get_mut(&id).expect("due");
                notices.push(ExpiredLease {
                    id: LeaseId::new(id),
                    ttl: Duration::from_nanos(lease.ttl),
                    keys: lease.keys.iter().cloned().collect(),
                });
                if !lease.expired {
                    self.counters.expired += 1;
                }
                lease.expired = true;
                lease.deadline = Some(retry_at);
            }
            return Some(notices);
        }
        let notices: Vec<ExpiredLease> = due
            .into_iter()
            .filter_map(|id| self.drop_lease(id))
            .collect();
        self.revision += 1;
        self.counters.expired += notices.len() as u64;
        Some(notices)
    }

    /// L8: a clean close checkpoints every lease renewed since its last checkpoint (primary).
    pub(crate) fn close(&mut self) {
        if !self.primary {
            return;
        }
        let (now, wall) = (self.now, self.wall);
        for lease in self.leases.values_mut() {
            if !lease.dirty {
                continue;
            }
            lease.dirty = false;
            let Some(deadline) = lease.deadline.filter(|_| !lease.expired) else {
                continue;
            };
            let r = deadline.saturating_sub(now);
            lease.ckpt = Some(r);
            lease.row = Row {
                ttl: lease.ttl,
                remaining: Some(r),
                wall_ms: wall,
            };
        }
    }

    /// L13 (`Recovery::Wall`): what an open of the closed file rebuilds.
    pub(crate) fn reopen(&mut self, primary: bool) {
        self.primary = primary;
        self.counters = MCounters::default();
        let (now, wall) = (self.now, self.wall);
        for lease in self.leases.values_mut() {
            let base = lease.row.remaining.unwrap_or(lease.row.ttl);
            let elapsed_ms = wall.saturating_sub(lease.row.wall_ms).max(0) as u64;
            let left = base.saturating_sub(elapsed_ms.saturating_mul(MS));
            lease.ckpt = Some(left);
            lease.deadline = primary.then(|| now.saturating_add(left));
            lease.dirty = false;
            lease.expired = false;
        }
    }

    // ---- keys -----------------------------------------------------------------------------

    fn put_at(&mut self, key: &[u8], value: &[u8], lease: i64, rev: i64) {
        let entry = self.kv.entry(key.to_vec()).or_insert(MEntry {
            data: None,
            lease: 0,
        });
        match &mut entry.data {
            Some(d) => {
                d.value = value.to_vec();
                d.mod_revision = rev;
                d.version += 1;
            }
            None => {
                entry.data = Some(MData {
                    value: value.to_vec(),
                    create: rev,
                    mod_revision: rev,
                    version: 1,
                })
            }
        }
        let old = std::mem::replace(&mut entry.lease, lease);
        if old != lease {
            if let Some(l) = self.leases.get_mut(&old) {
                l.keys.remove(key);
            }
            if let Some(l) = self.leases.get_mut(&lease) {
                l.keys.insert(key.to_vec());
            }
        }
    }

    /// Removes the key (value and name); returns whether it had a value.
    fn delete_at(&mut self, key: &[u8]) -> bool {
        let Some(entry) = self.kv.remove(key) else {
            return false;
        };
        if let Some(l) = self.leases.get_mut(&entry.lease) {
            l.keys.remove(key);
        }
        entry.data.is_some()
    }

    fn check_lease(&self, lease: i64) -> MResult<()> {
        if lease != 0 && !self.leases.contains_key(&lease) {
            return Err(not_found(lease));
        }
        Ok(())
    }

    /// K1.
    pub(crate) fn put(&mut self, key: &[u8], value: &[u8], lease: i64) -> MResult<i64> {
        if key.is_empty() {
            return Err(err(ErrorCode::InvalidArgument));
        }
        self.check_lease(lease)?;
        self.revision += 1;
        self.put_at(key, value, lease, self.revision);
        Ok(self.revision)
    }

    /// K3.
    pub(crate) fn delete(&mut self, key: &[u8]) -> MResult<bool> {
        if key.is_empty() {
            return Err(err(ErrorCode::InvalidArgument));
        }
        let existed = self.delete_at(key);
        if existed {
            self.revision += 1;
        }
        Ok(existed)
    }

    /// Keys with a value under `prefix`.
    fn keys_with_prefix(&self, prefix: &[u8]) -> Vec<Vec<u8>> {
        self.kv
            .iter()
            .filter(|(k, e)| k.starts_with(prefix) && e.data.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// K3.
    pub(crate) fn delete_prefix(&mut self, prefix: &[u8]) -> u64 {
        let keys = self.keys_with_prefix(prefix);
        for k in &keys {
            self.delete_at(k);
        }
        if !keys.is_empty() {
            self.revision += 1;
        }
        keys.len() as u64
    }

    fn compare(&self, key: &[u8], op: CompareOp, target: &CompareTarget) -> bool {
        let data = self
            .kv
            .get(key)
            .and_then(|e| e.data.as_ref().map(|d| (d, e.lease)));
        let ord = match (target, data) {
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(v), Some((d, _))) => d.value.cmp(v),
            (CompareTarget::Version(n), d) => d.map_or(0, |(d, _)| d.version).cmp(n),
            (CompareTarget::CreateRevision(n), d) => d.map_or(0, |(d, _)| d.create).cmp(n),
            (CompareTarget::ModRevision(n), d) => d.map_or(0, |(d, _)| d.mod_revision).cmp(n),
            (CompareTarget::Lease(n), d) => d.map_or(0, |(_, l)| l).cmp(n),
        };
        match op {
            CompareOp::Equal => ord.is_eq(),
            CompareOp::NotEqual => ord.is_ne(),
            CompareOp::Less => ord.is_lt(),
            CompareOp::Greater => ord.is_gt(),
        }
    }

    /// K5: the branch is validated in full first; one revision if it wrote anything.
    pub(crate) fn txn(&mut self, txn: &Txn) -> MResult<TxnResponse> {
        let succeeded = txn
            .compares
            .iter()
            .all(|c| self.compare(&c.key, c.op, &c.target));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        for op in ops {
            match op {
                Op::Put { key, lease, .. } => {
                    if key.is_empty() {
                        return Err(err(ErrorCode::InvalidArgument));
                    }
                    self.check_lease(lease.map_or(0, LeaseId::get))?;
                }
                Op::Get { key } | Op::Delete { key } if key.is_empty() => {
                    return Err(err(ErrorCode::InvalidArgument));
                }
                _ => {}
            }
        }
        let rev = self.revision + 1;
        let mut wrote = false;
        let mut responses = Vec::new();
        for op in ops {
            responses.push(match op {
                Op::Put { key, value, lease } => {
                    self.put_at(key, value, lease.map_or(0, LeaseId::get), rev);
                    wrote = true;
                    OpResponse::Put { revision: rev }
                }
                Op::Get { key } => OpResponse::Get(self.get(key)),
                Op::Delete { key } => {
                    let existed = self.delete_at(key);
                    wrote |= existed;
                    OpResponse::Delete(existed)
                }
                Op::DeletePrefix { prefix } => {
                    let keys = self.keys_with_prefix(prefix);
                    for k in &keys {
                        self.delete_at(k);
                    }
                    wrote |= !keys.is_empty();
                    OpResponse::DeletePrefix(keys.len() as u64)
                }
                Op::Range { prefix, limit } => OpResponse::Range(self.range(prefix, *limit)),
            });
        }
        if wrote {
            self.revision = rev;
        }
        Ok(TxnResponse {
            succeeded,
            revision: self.revision,
            responses,
        })
    }

    // ---- reads ----------------------------------------------------------------------------

    fn kv_of(key: &[u8], e: &MEntry) -> Option<KeyValue> {
        e.data.as_ref().map(|d| KeyValue {
            key: key.to_vec(),
            value: d.value.clone(),
            create_revision: d.create,
            mod_revision: d.mod_revision,
            version: d.version,
            lease: (e.lease != 0).then_some(LeaseId::new(e.lease)),
        })
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<KeyValue> {
        self.kv.get(key).and_then(|e| Self::kv_of(key, e))
    }

    pub(crate) fn range(&self, prefix: &[u8], limit: Option<usize>) -> Vec<KeyValue> {
        self.kv
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .filter_map(|(k, e)| Self::kv_of(k, e))
            .take(limit.unwrap_or(usize::MAX))
            .collect()
    }

    pub(crate) fn lease_of(&self, key: &[u8]) -> Option<LeaseId> {
        self.kv
            .get(key)
            .filter(|e| e.lease != 0)
            .map(|e| LeaseId::new(e.lease))
    }

    fn remaining(&self, lease: &MLease) -> Option<Duration> {
        if !self.primary {
            return None;
        }
        if lease.expired {
            return Some(Duration::ZERO);
        }
        lease
            .deadline
            .map(|d| Duration::from_nanos(d.saturating_sub(self.now)))
    }

    fn info(&self, id: i64, lease: &MLease) -> LeaseInfo {
        LeaseInfo {
            id: LeaseId::new(id),
            ttl: Duration::from_nanos(lease.ttl),
            remaining: self.remaining(lease),
            keys: lease.keys.iter().cloned().collect(),
        }
    }

    /// L7.
    pub(crate) fn time_to_live(&self, id: i64) -> MResult<LeaseInfo> {
        self.leases
            .get(&id)
            .map(|l| self.info(id, l))
            .ok_or(not_found(id))
    }

    /// L7: ascending remaining time (on a standby: checkpoint, else TTL), ties by ID.
    pub(crate) fn lease_list(&self) -> Vec<LeaseInfo> {
        let mut all: Vec<(Duration, LeaseInfo)> = self
            .leases
            .iter()
            .map(|(&id, l)| {
                let info = self.info(id, l);
                let order = info
                    .remaining
                    .unwrap_or(Duration::from_nanos(l.ckpt.unwrap_or(l.ttl)));
                (order, info)
            })
            .collect();
        all.sort_by_key(|(order, info)| (*order, info.id));
        all.into_iter().map(|(_, i)| i).collect()
    }

    /// The parts of `Stats` the model knows.
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            granted: self.counters.granted,
            revoked: self.counters.revoked,
            renewed: self.counters.renewed,
            expired: self.counters.expired,
            leases: self.leases.len() as u64,
            keys: self.kv.values().filter(|e| e.data.is_some()).count() as u64,
            revision: self.revision,
            ..Stats::default()
        }
    }

    /// The durable, time-independent state (what must survive a crash or a reopen).
    pub(crate) fn snapshot(&self, universe: &[&[u8]]) -> Snapshot {
        Snapshot {
            revision: self.revision,
            kvs: self.range(b"", None),
            leases: self
                .leases
                .iter()
                .map(|(&id, l)| {
                    (
                        id,
                        Duration::from_nanos(l.ttl),
                        l.keys.iter().cloned().collect(),
                    )
                })
                .collect(),
            lease_of: universe
                .iter()
                .map(|k| (k.to_vec(), self.lease_of(k).map(LeaseId::get)))
                .collect(),
        }
    }
}

/// The durable, time-independent state of an engine: revision, every key-value, every lease with
/// its TTL and attached key names (in ID order), and `lease_of` over a universe of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub revision: i64,
    pub kvs: Vec<KeyValue>,
    pub leases: Vec<(i64, Duration, Vec<Vec<u8>>)>,
    pub lease_of: Vec<(Vec<u8>, Option<i64>)>,
}

/// Reads the same facts from an engine.
pub(crate) fn engine_snapshot(db: &Tenure, universe: &[&[u8]]) -> Snapshot {
    let mut leases: Vec<(i64, Duration, Vec<Vec<u8>>)> = db
        .leases()
        .unwrap()
        .into_iter()
        .map(|l| (l.id.get(), l.ttl, l.keys))
        .collect();
    leases.sort_by_key(|l| l.0);
    Snapshot {
        revision: db.revision().unwrap(),
        kvs: db.range(b"", None).expect("range"),
        leases,
        lease_of: universe
            .iter()
            .map(|k| (k.to_vec(), db.lease_of(k).unwrap().map(LeaseId::get)))
            .collect(),
    }
}

/// Referential integrity an engine must keep at all times, whatever happened: every key points at
/// a live lease that lists it, and every key a lease lists points back at it.
pub(crate) fn assert_integrity(db: &Tenure, universe: &[&[u8]]) {
    let leases = db.leases().unwrap();
    let ids: BTreeSet<i64> = leases.iter().map(|l| l.id.get()).collect();
    for kv in db.range(b"", None).expect("range") {
        assert_eq!(
            db.lease_of(&kv.key).unwrap(),
            kv.lease,
            "lease_of disagrees with the key's lease field"
        );
        if let Some(l) = kv.lease {
            assert!(
                ids.contains(&l.get()),
                "key {:?} points at missing lease {l}",
                kv.key
            );
        }
    }
    for k in universe {
        if let Some(l) = db.lease_of(k).unwrap() {
            assert!(
                ids.contains(&l.get()),
                "key {k:?} points at missing lease {l}"
            );
            let info = leases.iter().find(|i| i.id == l).expect("live");
            assert!(
                info.keys.iter().any(|x| x == k),
                "lease {l} does not list its key {k:?}"
            );
        }
    }
    for info in &leases {
        for k in &info.keys {
            assert_eq!(
                db.lease_of(k).unwrap(),
                Some(info.id),
                "lease {} lists {k:?}, which points elsewhere",
                info.id
            );
        }
    }
}
