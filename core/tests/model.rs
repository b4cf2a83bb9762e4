//! Model-based property test: random sequences of every lease and key operation, run
//! against the engine and against the reference model in `support/model.rs`, compared after every
//! step.
//!
//! After each step: the call's result (or error code) equals the model's; the whole key space
//! (`range`, `get`, `lease_of`), every lease (`leases()`, `time_to_live`), the revision and the
//! counters equal the model's; referential integrity holds; no unexpected expiry notice arrived.
//! Steps that make leases due (`advance`, `promote`, a reopen) wait on `expired()` for exactly
//! the batch the model predicts. Time is a `ManualClock`; nothing sleeps.
//!
//! Cases run in memory, on a file with `Durability::Buffered` (fast reopens) and on a file with
//! `Durability::Immediate` (both with a write-ahead log of small regions), or without the log; with auto revoke (L11) or manual revoke (L12: expired leases are
//! delivered, stay, and are delivered again every retry interval). The periodic checkpoint is
//! disabled (its moment is up to the expiry thread); explicit checkpoints and the one on close
//! are modelled. `PROPTEST_CASES` sets the number of cases (default 256).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use proptest::prelude::*;
use tenure::etcd::Refusal;
use tenure::{
    Compare, CompareOp, Durability, ErrorCode, ExpiredLease, KeyValue, LeaseId, ManualClock, Op,
    Tenure, Txn,
};

use support::model::{assert_integrity, engine_snapshot, observed, MErr, Model};

/// Small key space so operations collide; the empty key is always invalid.
const KEYS: [&[u8]; 6] = [b"a", b"a/1", b"a/2", b"b", b"b/1", b""];
const PREFIXES: [&[u8]; 5] = [b"", b"a", b"a/", b"b", b"c"];
const VALUES: [&[u8]; 4] = [b"", b"x", b"y", b"z"];
/// How long to wait for an expiry the model says is due.
const EXPIRY_WAIT: Duration = Duration::from_secs(10);
/// No periodic checkpoint during a case: only explicit ones and the one on close.
const NO_PERIODIC_CHECKPOINT: Duration = Duration::from_secs(1_000_000_000);
const MAX_TTL: Duration = Duration::from_secs(9_000_000_000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A lease argument: one of the live leases (by position), or a raw ID (maybe unknown, 0 or < 0).
#[derive(Debug, Clone)]
enum LeaseSel {
    Live(usize),
    Id(i64),
}

#[derive(Debug, Clone)]
enum TargetSpec {
    Value(usize),
    Version(i64),
    /// Offset from the current revision.
    Create(i64),
    Mod(i64),
    Lease(LeaseSel),
}

#[derive(Debug, Clone)]
enum OpSpec {
    Put(usize, usize, Option<LeaseSel>),
    Get(usize),
    Delete(usize),
    DeletePrefix(usize),
    Range(usize, Option<usize>),
}

#[derive(Debug, Clone)]
struct TxnSpec {
    compares: Vec<(usize, CompareOp, TargetSpec)>,
    success: Vec<OpSpec>,
    failure: Vec<OpSpec>,
}

#[derive(Debug, Clone)]
enum Step {
    Grant(Duration),
    GrantWithId(i64, Duration),
    Renew(LeaseSel),
    Revoke(LeaseSel),
    Attach(LeaseSel, Vec<usize>),
    Detach(LeaseSel, Vec<usize>),
    Checkpoint(LeaseSel, Duration),
    Advance(Duration),
    WallJump(i64),
    Promote(Duration),
    Demote,
    /// Close and reopen the file (as primary or standby); a no-op in memory.
    Reopen(bool),
    Put(usize, usize, Option<LeaseSel>),
    Delete(usize),
    DeletePrefix(usize),
    Txn(TxnSpec),
    /// etcd's Compact at the current revision minus this (K10).
    Compact(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    Memory,
    /// A file, its write-ahead log with small regions (hand-offs to the checkpointer and
    /// reopens that replay across regions happen within a case).
    Buffered,
    Immediate,
    /// A file without the log (each commit a durable redb transaction).
    ImmediateNoLog,
}

/// The log's region size in the file cases: small, so cases switch regions.
const REGION: u64 = 4096;

// ---- strategies -------------------------------------------------------------------------------

fn lease_sel() -> impl Strategy<Value = LeaseSel> {
    prop_oneof![
        6 => (0usize..8).prop_map(LeaseSel::Live),
        3 => (-1i64..=6).prop_map(LeaseSel::Id),
    ]
}

fn key() -> impl Strategy<Value = usize> {
    prop_oneof![15 => 0usize..5, 1 => Just(5usize)]
}

fn ttl() -> impl Strategy<Value = Duration> {
    prop_oneof![
        1 => Just(Duration::ZERO),
        4 => Just(ms(1000)),
        4 => Just(ms(1500)),
        4 => Just(ms(3000)),
        3 => Just(ms(10_000)),
        1 => Just(MAX_TTL),
        1 => Just(MAX_TTL + Duration::from_secs(1)),
    ]
}

fn cmp_op() -> impl Strategy<Value = CompareOp> {
    prop_oneof![
        Just(CompareOp::Equal),
        Just(CompareOp::NotEqual),
        Just(CompareOp::Less),
        Just(CompareOp::Greater),
    ]
}

fn target() -> impl Strategy<Value = TargetSpec> {
    prop_oneof![
        (0usize..4).prop_map(TargetSpec::Value),
        (0i64..=3).prop_map(TargetSpec::Version),
        (-3i64..=1).prop_map(TargetSpec::Create),
        (-3i64..=1).prop_map(TargetSpec::Mod),
        lease_sel().prop_map(TargetSpec::Lease),
    ]
}

fn op_spec() -> impl Strategy<Value = OpSpec> {
    prop_oneof![
        4 => (key(), 0usize..4, prop::option::weighted(0.5, lease_sel()))
            .prop_map(|(k, v, l)| OpSpec::Put(k, v, l)),
        2 => key().prop_map(OpSpec::Get),
        2 => key().prop_map(OpSpec::Delete),
        1 => (0usize..5).prop_map(OpSpec::DeletePrefix),
        1 => (0usize..5, prop::option::of(0usize..3)).prop_map(|(p, l)| OpSpec::Range(p, l)),
    ]
}

fn txn_spec() -> impl Strategy<Value = TxnSpec> {
    (
        prop::collection::vec((key(), cmp_op(), target()), 0..3),
        prop::collection::vec(op_spec(), 0..4),
        prop::collection::vec(op_spec(), 0..4),
    )
        .prop_map(|(compares, success, failure)| TxnSpec {
            compares,
            success,
            failure,
        })
}

fn step() -> impl Strategy<Value = Step> {
    let advance = prop::sample::select(vec![
        1u64, 250, 500, 1000, 1499, 1500, 2000, 3000, 5000, 11_000,
    ]);
    let remaining = prop::sample::select(vec![0u64, 400, 1000, 2500, 60_000]);
    prop_oneof![
        4 => ttl().prop_map(Step::Grant),
        2 => (-1i64..=6, ttl()).prop_map(|(id, t)| Step::GrantWithId(id, t)),
        3 => lease_sel().prop_map(Step::Renew),
        3 => lease_sel().prop_map(Step::Revoke),
        3 => (lease_sel(), prop::collection::vec(key(), 1..3)).prop_map(|(l, k)| Step::Attach(l, k)),
        2 => (lease_sel(), prop::collection::vec(key(), 1..3)).prop_map(|(l, k)| Step::Detach(l, k)),
        2 => (lease_sel(), remaining).prop_map(|(l, r)| Step::Checkpoint(l, ms(r))),
        5 => advance.prop_map(|a| Step::Advance(ms(a))),
        1 => prop::sample::select(vec![-4000i64, 2500]).prop_map(Step::WallJump),
        2 => prop::sample::select(vec![0u64, 0, 1000]).prop_map(|e| Step::Promote(ms(e))),
        1 => Just(Step::Demote),
        2 => prop::bool::weighted(0.8).prop_map(Step::Reopen),
        6 => (key(), 0usize..4, prop::option::weighted(0.6, lease_sel()))
            .prop_map(|(k, v, l)| Step::Put(k, v, l)),
        2 => key().prop_map(Step::Delete),
        1 => (0usize..5).prop_map(Step::DeletePrefix),
        4 => txn_spec().prop_map(Step::Txn),
        1 => (-1i64..6).prop_map(Step::Compact),
    ]
}

fn backing() -> impl Strategy<Value = Backing> {
    prop_oneof![
        5 => Just(Backing::Memory),
        4 => Just(Backing::Buffered),
        1 => Just(Backing::Immediate),
        1 => Just(Backing::ImmediateNoLog),
    ]
}

// ---- the harness ------------------------------------------------------------------------------

/// Retry interval of manual revoke (L12), as in the builder's default.
const RETRY: Duration = Duration::from_secs(3);

/// What a case runs on: the storage, and auto or manual revoke.
#[derive(Debug, Clone, Copy)]
struct Setup {
    backing: Backing,
    auto_revoke: bool,
}

struct Harness {
    setup: Setup,
    backing: Backing,
    _dir: Option<tempfile::TempDir>,
    path: Option<std::path::PathBuf>,
    clock: Arc<ManualClock>,
    db: Tenure,
    rx: Receiver<Vec<ExpiredLease>>,
    model: Model,
    /// The reference for K9: the key space as the model had it at each revision reached.
    past: BTreeMap<i64, Vec<KeyValue>>,
    /// The last compaction (K10).
    compacted: i64,
}

fn open(
    setup: Setup,
    path: Option<&std::path::Path>,
    clock: &Arc<ManualClock>,
    primary: bool,
) -> Tenure {
    let mut b = Tenure::builder()
        .clock(clock.clone())
        .primary(primary)
        .auto_revoke(setup.auto_revoke)
        .expired_retry_interval(RETRY)
        .checkpoint_interval(NO_PERIODIC_CHECKPOINT);
    b = match (setup.backing, path) {
        (Backing::Memory, _) | (_, None) => b.in_memory(),
        (Backing::Buffered, Some(p)) => b
            .path(p)
            .durability(Durability::Buffered(ms(2)))
            .log_region_size(REGION),
        (Backing::Immediate, Some(p)) => b
            .path(p)
            .durability(Durability::Immediate)
            .log_region_size(REGION),
        (Backing::ImmediateNoLog, Some(p)) => b
            .path(p)
            .durability(Durability::Immediate)
            .write_ahead_log(false),
    };
    b.open().expect("open")
}

impl Harness {
    fn new(setup: Setup, primary: bool) -> Harness {
        let backing = setup.backing;
        let dir = (backing != Backing::Memory).then(|| tempfile::tempdir().expect("tempdir"));
        let path = dir.as_ref().map(|d| d.path().join("model.tenure"));
        let clock = ManualClock::new();
        let db = open(setup, path.as_deref(), &clock, primary);
        let rx = db.expired().unwrap();
        Harness {
            setup,
            backing,
            _dir: dir,
            path,
            clock,
            db,
            rx,
            model: Model::with_revoke(primary, setup.auto_revoke, RETRY),
            past: BTreeMap::new(),
            compacted: 0,
        }
    }

    fn lease(&self, sel: &LeaseSel) -> i64 {
        match *sel {
            LeaseSel::Live(i) if !self.model.leases.is_empty() => *self
                .model
                .leases
                .keys()
                .nth(i % self.model.leases.len())
                .expect("in range"),
            LeaseSel::Live(_) => self.model.next_id,
            LeaseSel::Id(id) => id,
        }
    }

    fn opt_lease(&self, sel: &Option<LeaseSel>) -> Option<LeaseId> {
        sel.as_ref().map(|s| LeaseId::new(self.lease(s)))
    }

    fn keys(idx: &[usize]) -> Vec<Vec<u8>> {
        idx.iter().map(|&i| KEYS[i].to_vec()).collect()
    }

    fn txn(&self, spec: &TxnSpec) -> Txn {
        let rev = |off: i64| (self.model.revision + off).max(0);
        let op = |o: &OpSpec| match o {
            OpSpec::Put(k, v, l) => Op::put(KEYS[*k], VALUES[*v], self.opt_lease(l)),
            OpSpec::Get(k) => Op::get(KEYS[*k]),
            OpSpec::Delete(k) => Op::delete(KEYS[*k]),
            OpSpec::DeletePrefix(p) => Op::delete_prefix(PREFIXES[*p]),
            OpSpec::Range(p, limit) => Op::range(PREFIXES[*p], *limit),
        };
        Txn::new()
            .when(spec.compares.iter().map(|(k, op, t)| {
                let k = KEYS[*k];
                match t {
                    TargetSpec::Value(v) => Compare::value(k, *op, VALUES[*v]),
                    TargetSpec::Version(n) => Compare::version(k, *op, *n),
                    TargetSpec::Create(off) => Compare::create_revision(k, *op, rev(*off)),
                    TargetSpec::Mod(off) => Compare::mod_revision(k, *op, rev(*off)),
                    TargetSpec::Lease(l) => {
                        let id = self.lease(l);
                        Compare::lease(k, *op, (id != 0).then_some(LeaseId::new(id)))
                    }
                }
            }))
            .then(spec.success.iter().map(op))
            .otherwise(spec.failure.iter().map(op))
    }

    /// If the model says leases are due, waits for the one batch that revokes them and checks it:
    /// the same leases, TTLs and deleted key names (L11), one revision for the batch (K4).
    fn settle_expiry(&mut self, ctx: &str) {
        if let Some(expected) = self.model.expire_due() {
            let mut got = self
                .rx
                .recv_timeout(EXPIRY_WAIT)
                .unwrap_or_else(|e| panic!("{ctx}: expected expiry of {expected:?}, got {e:?}"));
            got.sort_by_key(|e| e.id);
            assert_eq!(got, expected, "{ctx}: expiry batch");
        }
    }

    /// Closes and reopens the file (L13, D7); the durable state must come back unchanged.
    fn reopen(&mut self, primary: bool, ctx: &str) {
        let before = engine_snapshot(&self.db, &KEYS);
        self.model.close();
        self.db.close().expect("close");
        assert_eq!(
            observed(self.db.put("a", "x", None)).map_err(|e| e.code),
            Err(ErrorCode::Closed),
            "{ctx}: D7 a closed engine refuses calls"
        );
        self.db = open(self.setup, self.path.as_deref(), &self.clock, primary);
        self.rx = self.db.expired().unwrap();
        self.model.reopen(primary);
        let expires_now = self.model.clone().expire_due().is_some();
        self.settle_expiry(ctx);
        if !expires_now {
            let after = engine_snapshot(&self.db, &KEYS);
            assert_eq!(
                after, before,
                "{ctx}: the state after a reopen is the state before it"
            );
        }
    }

    fn run(&mut self, step: &Step, ctx: &str) {
        match step {
            Step::Grant(ttl) => {
                let want = self.model.grant(None, *ttl);
                let got = observed(self.db.grant(*ttl)).map(LeaseId::get);
                assert_eq!(got, want, "{ctx}");
            }
            Step::GrantWithId(id, ttl) => {
                let want = self.model.grant(Some(*id), *ttl);
                let got = observed(self.db.grant_with_id(*id, *ttl)).map(LeaseId::get);
                assert_eq!(got, want, "{ctx}");
            }
            Step::Renew(l) => {
                let id = self.lease(l);
                let want = self.model.renew(id).map(Duration::from_nanos);
                assert_eq!(observed(self.db.renew(id)), want, "{ctx}");
            }
            Step::Revoke(l) => {
                let id = self.lease(l);
                let attached = self
                    .model
                    .leases
                    .get(&id)
                    .map(|l| l.keys.clone())
                    .unwrap_or_default();
                let want = self.model.revoke(id);
                assert_eq!(observed(self.db.revoke(id)), want, "{ctx}");
                // L4: every attached key (and only those: see the full comparison) is gone.
                for k in &attached {
                    assert_eq!(
                        self.db.get(k).expect("get"),
                        None,
                        "{ctx}: {k:?} survived its revoke"
                    );
                    assert_eq!(
                        self.db.lease_of(k).unwrap(),
                        None,
                        "{ctx}: {k:?} still attached after revoke"
                    );
                }
            }
            Step::Attach(l, keys) => {
                let id = self.lease(l);
                let keys = Self::keys(keys);
                assert_eq!(
                    observed(self.db.attach(id, &keys)),
                    self.model.attach(id, &keys),
                    "{ctx}"
                );
            }
            Step::Detach(l, keys) => {
                let id = self.lease(l);
                let keys = Self::keys(keys);
                assert_eq!(
                    observed(self.db.detach(id, &keys)),
                    self.model.detach(id, &keys),
                    "{ctx}"
                );
            }
            Step::Checkpoint(l, r) => {
                let id = self.lease(l);
                assert_eq!(
                    observed(self.db.checkpoint(id, *r)),
                    self.model.checkpoint(id, *r),
                    "{ctx}"
                );
            }
            Step::Advance(d) => {
                self.clock.advance(*d);
                self.model.advance(*d);
                self.settle_expiry(ctx);
            }
            Step::WallJump(delta) => {
                self.clock.step_wall(*delta);
                self.model.wall += delta;
            }
            Step::Promote(extend) => {
                assert_eq!(observed(self.db.promote(*extend)), Ok(()), "{ctx}");
                self.model.promote(*extend);
                self.settle_expiry(ctx);
            }
            Step::Demote => {
                assert_eq!(observed(self.db.demote()), Ok(()), "{ctx}");
                self.model.demote();
            }
            Step::Reopen(primary) => {
                if self.backing != Backing::Memory {
                    self.reopen(*primary, ctx);
                }
            }
            Step::Put(k, v, l) => {
                let lease = self.opt_lease(l);
                let want = self
                    .model
                    .put(KEYS[*k], VALUES[*v], lease.map_or(0, LeaseId::get));
                assert_eq!(
                    observed(self.db.put(KEYS[*k], VALUES[*v], lease)),
                    want,
                    "{ctx}"
                );
            }
            Step::Delete(k) => {
                let want = self.model.delete(KEYS[*k]);
                assert_eq!(observed(self.db.delete(KEYS[*k])), want, "{ctx}");
            }
            Step::DeletePrefix(p) => {
                let want = Ok(self.model.delete_prefix(PREFIXES[*p]));
                assert_eq!(observed(self.db.delete_prefix(PREFIXES[*p])), want, "{ctx}");
            }
            Step::Txn(spec) => {
                let txn = self.txn(spec);
                let want = self.model.txn(&txn);
                assert_eq!(observed(self.db.txn(txn.clone())), want, "{ctx}: {txn:?}");
            }
            Step::Compact(back) => {
                let rev = self.model.revision - back;
                let want = if rev > self.model.revision {
                    Err(Refusal::FutureRevision)
                } else if rev <= self.compacted {
                    Err(Refusal::Compacted)
                } else {
                    self.compacted = rev;
                    Ok(self.model.revision)
                };
                assert_eq!(self.db.compact(rev).expect("compact"), want, "{ctx}");
                assert_eq!(
                    self.db.compacted_revision().unwrap(),
                    self.compacted,
                    "{ctx}"
                );
            }
        }
        self.remember();
    }

    /// Records the key space at a revision first reached; an attach or detach (no revision)
    /// relabels the revisions from the key's last write on (K9).
    fn remember(&mut self) {
        let now = self.model.range(b"", None);
        for kv in &now {
            for (_, snap) in self.past.range_mut(kv.mod_revision..) {
                if let Some(old) = snap.iter_mut().find(|o| o.key == kv.key) {
                    if old.mod_revision == kv.mod_revision {
                        old.lease = kv.lease;
                    }
                }
            }
        }
        self.past.entry(self.model.revision).or_insert(now);
        self.past.retain(|&r, _| r >= self.compacted);
    }

    /// K9, K10: every retained revision reads as the model had it; below the compaction,
    /// `Compacted`; in memory only the present.
    fn check_history(&self, ctx: &str) {
        let current = self.model.revision;
        for (&rev, want) in &self.past {
            if rev >= current || rev == 0 {
                continue;
            }
            let got = self.db.range_at(b"", None, rev);
            if self.backing == Backing::Memory {
                assert_eq!(
                    got.map_err(|e| e.code()),
                    Err(ErrorCode::Compacted),
                    "{ctx}: K9 in memory a past revision {rev} is compacted"
                );
                continue;
            }
            assert_eq!(&got.expect("range_at"), want, "{ctx}: K9 range_at {rev}");
            let k = KEYS[(rev as usize) % 5];
            assert_eq!(
                self.db.get_at(k, rev).expect("get_at"),
                want.iter().find(|kv| kv.key == k).cloned(),
                "{ctx}: K9 get_at {k:?} {rev}"
            );
        }
        if self.compacted > 1 && self.backing != Backing::Memory {
            assert_eq!(
                self.db
                    .get_at(b"a", self.compacted - 1)
                    .map_err(|e| e.code()),
                Err(ErrorCode::Compacted),
                "{ctx}: K10 below the compaction"
            );
        }
        assert_eq!(
            self.db.get_at(b"a", current + 1).map_err(|e| e.code()),
            Err(ErrorCode::FutureRevision),
            "{ctx}: K9, K13 a future revision"
        );
    }

    /// Everything observable equals the model.
    fn check(&self, ctx: &str) {
        let (db, model) = (&self.db, &self.model);
        assert_eq!(
            db.revision().unwrap(),
            model.revision,
            "{ctx}: revision (K4)"
        );
        assert_eq!(
            db.is_primary().unwrap(),
            model.primary,
            "{ctx}: primary flag"
        );
        assert_eq!(
            db.range(b"", None).expect("range"),
            model.range(b"", None),
            "{ctx}: key space"
        );
        for k in KEYS {
            assert_eq!(db.get(k).expect("get"), model.get(k), "{ctx}: get {k:?}");
            assert_eq!(
                db.lease_of(k).unwrap(),
                model.lease_of(k),
                "{ctx}: lease_of {k:?}"
            );
        }
        assert_eq!(
            db.leases().unwrap(),
            model.lease_list(),
            "{ctx}: leases() (L7)"
        );
        for id in -1..=model.next_id + 1 {
            assert_eq!(
                observed(db.time_to_live(id)),
                model.time_to_live(id),
                "{ctx}: time_to_live({id})"
            );
        }
        let (s, w) = (db.stats(), model.stats());
        assert_eq!(
            (s.granted, s.revoked, s.renewed, s.expired, s.leases, s.keys, s.revision),
            (w.granted, w.revoked, w.renewed, w.expired, w.leases, w.keys, w.revision),
            "{ctx}: stats (granted, revoked, renewed, expired, leases, keys, revision)"
        );
        assert_integrity(db, &KEYS);
        match self.rx.try_recv() {
            Err(TryRecvError::Empty) => {}
            other => panic!("{ctx}: unexpected expiry notice {other:?}"),
        }
    }
}

fn run_case(setup: Setup, primary: bool, steps: &[Step]) {
    let backing = setup.backing;
    let mut harness = Harness::new(setup, primary);
    harness.check("open");
    harness.remember();
    for (i, step) in steps.iter().enumerate() {
        let ctx = format!("step {i} {step:?} ({setup:?})");
        harness.run(step, &ctx);
        harness.check(&ctx);
        harness.check_history(&ctx);
    }
    harness.model.close();
    harness.db.close().expect("close");
    assert_eq!(
        harness.db.grant(ms(1000)).map_err(|e| e.code()),
        Err(ErrorCode::Closed),
        "D7: a closed engine refuses calls"
    );
    if backing != Backing::Memory {
        // One last reopen: everything acknowledged is there.
        let db = open(
            setup,
            harness.path.as_deref(),
            &harness.clock,
            harness.model.primary,
        );
        harness.model.reopen(harness.model.primary);
        let mut model = harness.model.clone();
        if model.expire_due().is_none() {
            assert_eq!(
                engine_snapshot(&db, &KEYS),
                model.snapshot(&KEYS),
                "final reopen"
            );
        }
        db.close().expect("close");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every call's result and the whole observable state agree with the reference model after
    /// every step, across clock advances, promote/demote and close/reopen.
    #[test]
    fn engine_agrees_with_the_reference_model_after_every_step(
        backing in backing(),
        auto_revoke in prop::bool::weighted(0.75),
        primary in prop::bool::weighted(0.85),
        steps in prop::collection::vec(step(), 1..60),
    ) {
        run_case(Setup { backing, auto_revoke }, primary, &steps);
    }
}

/// The model itself: a few hand-checked facts, so a wrong model cannot silently agree with a
/// wrong engine on them.
#[test]
fn reference_model_encodes_the_spec_revision_rules() {
    let mut model = Model::new(true);
    let l = model.grant(None, ms(1000)).unwrap();
    assert_eq!(model.revision, 0, "grant writes no revision");
    assert_eq!(model.put(b"a", b"x", l), Ok(1));
    assert_eq!(model.delete(b"zz"), Ok(false));
    assert_eq!(model.revision, 1, "deleting nothing moves no revision");
    model.attach(l, &[b"n".to_vec()]).unwrap();
    assert_eq!(model.get(b"n"), None, "a bare attached name is no key");
    assert_eq!(
        model.delete_prefix(b"n"),
        0,
        "delete_prefix leaves bare names alone"
    );
    model.advance(ms(1000));
    let batch = model.expire_due().expect("due at the deadline");
    assert_eq!(batch[0].keys, vec![b"a".to_vec(), b"n".to_vec()]);
    assert_eq!(model.revision, 2, "one revision per expiry batch");
    let l2 = model.grant(None, ms(1000)).unwrap();
    assert_eq!(l2, 2, "IDs are never reused");
    model.revoke(l2).unwrap();
    assert_eq!(model.revision, 3, "a revoke always writes a revision");
    assert_eq!(
        model.renew(l2),
        Err(MErr {
            code: ErrorCode::LeaseNotFound,
            lease: Some(l2)
        })
    );
}
