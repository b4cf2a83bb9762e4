//! Crash test (SPEC D1): a child process does acknowledged grants, revokes, checkpoints,
//! puts, deletes, attaches and transactions with `Durability::Immediate` and is killed with
//! SIGKILL at a random moment; the parent then reopens the file and checks that every
//! acknowledged operation is there and no operation is there in part.
//!
//! The child is this test binary, re-executed with `TENURE_CRASH_CHILD` set: the
//! `child_process_entry` test runs the workload then, and returns at once otherwise. Before each
//! call the child prints `@@B <seq> <op>`, after it returns `@@A <seq> <result>` (one flushed
//! `write` per line). The parent replays every acknowledged op on the reference model of
//! `support/model.rs` (and checks the child saw the result the model predicts). At most one op is
//! in flight when the child dies: the reopened state must then equal, exactly, the model either
//! without it or with it — a partial op (half a revoke, half a txn) matches neither. The revision
//! must be at least the last acknowledged one, and every key must point at a live lease.
//! Checkpoints are seen through `time_to_live` after the reopen (`Recovery::Wall`): the remaining
//! time must match the persisted checkpoint (or TTL) minus the wall time since it was written.
//!
//! A second test does the same with `Durability::Buffered` (SPEC D3): the reopened state must be
//! exactly the state after some prefix of the ops (never torn), and that prefix must hold every
//! op acknowledged more than one flush interval (plus a generous slack) before the kill.
//!
//! Rounds take turns between the write-ahead log with small regions (so rounds switch regions
//! and checkpoint into the file, and kills land during checkpoints), the log with its default
//! regions, and no log (whose open replays what the previous round left in the log).
//!
//! Rounds: 32 immediate and 10 buffered, or `TENURE_CRASH_ROUNDS` (immediate; a third of it
//! buffered). Seed: random, or `TENURE_CRASH_SEED` (printed). The rounds continue on one file.
//! Leases live for hours on a real `SystemClock`, so nothing expires during the test.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tenure::{Compare, CompareOp, Durability, LeaseId, Op, OpResponse, Tenure, Txn, TxnResponse};

use support::model::{assert_integrity, engine_snapshot, observed, MResult, Model, Snapshot};
use support::secs;

const CHILD_ENV: &str = "TENURE_CRASH_CHILD";
const CHILD_SEED_ENV: &str = "TENURE_CRASH_CHILD_SEED";
const CHILD_TAG_ENV: &str = "TENURE_CRASH_CHILD_TAG";
const CHILD_MODE_ENV: &str = "TENURE_CRASH_CHILD_MODE";
const CHILD_LOG_ENV: &str = "TENURE_CRASH_CHILD_LOG";
/// Set (to a thread count) for the concurrent workload.
const CHILD_THREADS_ENV: &str = "TENURE_CRASH_CHILD_THREADS";
/// The log's region size in most rounds: small, so that rounds switch regions and checkpoint
/// into the file many times, and kills land during checkpoints.
const SMALL_REGION: u64 = 4096;

/// How a round's child commits (DESIGN, "The write-ahead log"); rounds take turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Log {
    /// The log with `SMALL_REGION` regions.
    Small,
    /// The log with its default regions (1 MiB: no checkpoint during a round).
    Default,
    /// No log: each commit is a durable redb transaction (the log left by an earlier round is
    /// replayed by the open).
    Off,
}

impl Log {
    fn for_round(round: usize) -> Log {
        [Log::Small, Log::Small, Log::Default, Log::Off][round % 4]
    }

    fn name(self) -> &'static str {
        match self {
            Log::Small => "small",
            Log::Default => "default",
            Log::Off => "off",
        }
    }

    fn builder(self) -> tenure::Builder {
        let b = Tenure::builder();
        match self {
            Log::Small => b.log_region_size(SMALL_REGION),
            Log::Default => b,
            Log::Off => b.write_ahead_log(false),
        }
    }
}
/// A child stops working after this long or this many ops, and waits for its kill.
const CHILD_MAX_RUN: Duration = Duration::from_secs(30);
const CHILD_MAX_OPS: u64 = 5000;
/// The buffered child's flush interval (D3), and how late a flush may be on a busy machine.
const FLUSH_INTERVAL: Duration = Duration::from_millis(50);
const FLUSH_SLACK: Duration = Duration::from_millis(1500);

/// How the child acknowledges writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// D1: on disk when the call returns.
    Immediate,
    /// D3: in memory when the call returns, committed at least every `FLUSH_INTERVAL`.
    Buffered,
}

impl Mode {
    fn durability(self) -> Durability {
        match self {
            Mode::Immediate => Durability::Immediate,
            Mode::Buffered => Durability::Buffered(FLUSH_INTERVAL),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Immediate => "immediate",
            Mode::Buffered => "buffered",
        }
    }
}

const KEYS: [&[u8]; 6] = [b"a", b"a/1", b"a/2", b"b", b"b/1", b"c"];
const PREFIXES: [&str; 4] = ["a", "a/", "b", "x"];

// ---- the operations and their one-line text form ----------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum TOp {
    Put(String, String, i64),
    Delete(String),
    DeletePrefix(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cmp {
    key: String,
    op: CompareOp,
    /// `ver`, `cre`, `mod` or `lease`.
    kind: String,
    arg: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum COp {
    Grant(u64),
    GrantId(i64, u64),
    Revoke(i64),
    Checkpoint(i64, u64),
    Put(String, String, i64),
    Delete(String),
    DeletePrefix(String),
    Attach(i64, String),
    Detach(i64, String),
    Txn(Vec<Cmp>, Vec<TOp>, Vec<TOp>),
}

fn op_char(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Equal => "=",
        CompareOp::NotEqual => "!",
        CompareOp::Less => "<",
        CompareOp::Greater => ">",
    }
}

fn char_op(s: &str) -> CompareOp {
    match s {
        "=" => CompareOp::Equal,
        "!" => CompareOp::NotEqual,
        "<" => CompareOp::Less,
        ">" => CompareOp::Greater,
        other => panic!("bad compare op {other:?}"),
    }
}

impl COp {
    fn encode(&self) -> String {
        let tops = |ops: &[TOp]| {
            let mut s = ops.len().to_string();
            for op in ops {
                match op {
                    TOp::Put(k, v, l) => s += &format!(" p {k} {v} {l}"),
                    TOp::Delete(k) => s += &format!(" d {k}"),
                    TOp::DeletePrefix(p) => s += &format!(" dp {p}"),
                }
            }
            s
        };
        match self {
            COp::Grant(ttl) => format!("grant {ttl}"),
            COp::GrantId(id, ttl) => format!("grant_id {id} {ttl}"),
            COp::Revoke(id) => format!("revoke {id}"),
            COp::Checkpoint(id, r) => format!("ckpt {id} {r}"),
            COp::Put(k, v, l) => format!("put {k} {v} {l}"),
            COp::Delete(k) => format!("del {k}"),
            COp::DeletePrefix(p) => format!("delp {p}"),
            COp::Attach(id, k) => format!("attach {id} {k}"),
            COp::Detach(id, k) => format!("detach {id} {k}"),
            COp::Txn(cmps, succ, fail) => {
                let mut s = format!("txn {}", cmps.len());
                for c in cmps {
                    s += &format!(" {} {} {} {}", c.key, op_char(c.op), c.kind, c.arg);
                }
                format!("{s} {} {}", tops(succ), tops(fail))
            }
        }
    }

    fn decode(line: &str) -> COp {
        let mut t = line.split(' ');
        let mut next = || {
            t.next()
                .unwrap_or_else(|| panic!("truncated op {line:?}"))
                .to_string()
        };
        let num = |s: String| -> i64 {
            s.parse()
                .unwrap_or_else(|_| panic!("bad number {s:?} in {line:?}"))
        };
        let op = next();
        match op.as_str() {
            "grant" => COp::Grant(num(next()) as u64),
            "grant_id" => {
                let id = num(next());
                COp::GrantId(id, num(next()) as u64)
            }
            "revoke" => COp::Revoke(num(next())),
            "ckpt" => {
                let id = num(next());
                COp::Checkpoint(id, num(next()) as u64)
            }
            "put" => {
                let (k, v) = (next(), next());
                COp::Put(k, v, num(next()))
            }
            "del" => COp::Delete(next()),
            "delp" => COp::DeletePrefix(next()),
            "attach" => {
                let id = num(next());
                COp::Attach(id, next())
            }
            "detach" => {
                let id = num(next());
                COp::Detach(id, next())
            }
            "txn" => {
                let n = num(next());
                let cmps = (0..n)
                    .map(|_| {
                        let (key, op, kind) = (next(), char_op(&next()), next());
                        Cmp {
                            key,
                            op,
                            kind,
                            arg: num(next()),
                        }
                    })
                    .collect();
                let mut tops = || {
                    let n = num(next());
                    (0..n)
                        .map(|_| match next().as_str() {
                            "p" => {
                                let (k, v) = (next(), next());
                                TOp::Put(k, v, num(next()))
                            }
                            "d" => TOp::Delete(next()),
                            "dp" => TOp::DeletePrefix(next()),
                            other => panic!("bad txn op {other:?} in {line:?}"),
                        })
                        .collect::<Vec<_>>()
                };
                let succ = tops();
                let fail = tops();
                COp::Txn(cmps, succ, fail)
            }
            other => panic!("unknown op {other:?}"),
        }
    }

    fn txn(&self) -> Txn {
        let COp::Txn(cmps, succ, fail) = self else {
            panic!("not a txn")
        };
        let ops = |ops: &[TOp]| -> Vec<Op> {
            ops.iter()
                .map(|o| match o {
                    TOp::Put(k, v, l) => Op::put(k, v, (*l != 0).then_some(LeaseId::new(*l))),
                    TOp::Delete(k) => Op::delete(k),
                    TOp::DeletePrefix(p) => Op::delete_prefix(p),
                })
                .collect()
        };
        Txn::new()
            .when(cmps.iter().map(|c| match c.kind.as_str() {
                "ver" => Compare::version(&c.key, c.op, c.arg),
                "cre" => Compare::create_revision(&c.key, c.op, c.arg),
                "mod" => Compare::mod_revision(&c.key, c.op, c.arg),
                "lease" => {
                    Compare::lease(&c.key, c.op, (c.arg != 0).then_some(LeaseId::new(c.arg)))
                }
                other => panic!("bad compare kind {other:?}"),
            }))
            .then(ops(succ))
            .otherwise(ops(fail))
    }
}

fn lease_arg(l: i64) -> Option<LeaseId> {
    (l != 0).then_some(LeaseId::new(l))
}

/// A result in its one-line form; the child prints it, the parent predicts it.
fn show<T>(r: MResult<T>, ok: impl FnOnce(T) -> String) -> String {
    match r {
        Ok(v) => ok(v),
        Err(e) => format!("err {} {}", e.code as i32, e.lease.unwrap_or(0)),
    }
}

fn show_txn(r: &TxnResponse) -> String {
    let mut s = format!("txn {} {}", u8::from(r.succeeded), r.revision);
    for resp in &r.responses {
        s += &match resp {
            OpResponse::Put { revision } => format!(" p{revision}"),
            OpResponse::Delete(existed) => format!(" d{}", u8::from(*existed)),
            OpResponse::DeletePrefix(n) => format!(" n{n}"),
            other => panic!("the crash workload reads nothing in a txn: {other:?}"),
        };
    }
    s
}

fn unit(_: ()) -> String {
    "ok".to_string()
}

fn run_on_engine(db: &Tenure, op: &COp) -> String {
    match op {
        COp::Grant(ttl) => show(observed(db.grant(secs(*ttl))), |id| format!("id {id}")),
        COp::GrantId(id, ttl) => show(observed(db.grant_with_id(*id, secs(*ttl))), |id| {
            format!("id {id}")
        }),
        COp::Revoke(id) => show(observed(db.revoke(*id)), unit),
        COp::Checkpoint(id, r) => show(observed(db.checkpoint(*id, secs(*r))), unit),
        COp::Put(k, v, l) => show(observed(db.put(k, v, lease_arg(*l))), |r| {
            format!("rev {r}")
        }),
        COp::Delete(k) => show(observed(db.delete(k)), |d| format!("del {}", u8::from(d))),
        COp::DeletePrefix(p) => show(observed(db.delete_prefix(p)), |n| format!("n {n}")),
        COp::Attach(id, k) => show(observed(db.attach(*id, &[k])), unit),
        COp::Detach(id, k) => show(observed(db.detach(*id, &[k])), unit),
        COp::Txn(..) => show(observed(db.txn(op.txn())), |r| show_txn(&r)),
    }
}

fn run_on_model(m: &mut Model, op: &COp) -> String {
    match op {
        COp::Grant(ttl) => show(m.grant(None, secs(*ttl)), |id| format!("id {id}")),
        COp::GrantId(id, ttl) => show(m.grant(Some(*id), secs(*ttl)), |id| format!("id {id}")),
        COp::Revoke(id) => show(m.revoke(*id), unit),
        COp::Checkpoint(id, r) => show(m.checkpoint(*id, secs(*r)), unit),
        COp::Put(k, v, l) => show(m.put(k.as_bytes(), v.as_bytes(), *l), |r| {
            format!("rev {r}")
        }),
        COp::Delete(k) => show(m.delete(k.as_bytes()), |d| format!("del {}", u8::from(d))),
        COp::DeletePrefix(p) => format!("n {}", m.delete_prefix(p.as_bytes())),
        COp::Attach(id, k) => show(m.attach(*id, &[k.as_bytes().to_vec()]), unit),
        COp::Detach(id, k) => show(m.detach(*id, &[k.as_bytes().to_vec()]), unit),
        COp::Txn(..) => show(m.txn(&op.txn()), |r| show_txn(&r)),
    }
}

// ---- the child --------------------------------------------------------------------------------

fn random_op(rng: &mut StdRng, live: &[i64], last_rev: i64, value: &str) -> COp {
    let lease = |rng: &mut StdRng| {
        if !live.is_empty() && rng.random_bool(0.85) {
            live[rng.random_range(0..live.len())]
        } else {
            rng.random_range(1..=60)
        }
    };
    let key = |rng: &mut StdRng| {
        String::from_utf8(KEYS[rng.random_range(0..KEYS.len())].to_vec()).unwrap()
    };
    let prefix = |rng: &mut StdRng| PREFIXES[rng.random_range(0..PREFIXES.len())].to_string();
    // TTLs are multiples of 100 s from 3600 s; checkpoints multiples of 100 s below that, so the
    // parent can tell which one a lease was recovered from.
    let ttl = |rng: &mut StdRng| 3600 + 100 * rng.random_range(0..20u64);
    let put_lease = |rng: &mut StdRng| match rng.random_range(0..10) {
        0..4 => 0,
        4..9 => lease(rng),
        _ => 1000 + rng.random_range(0..10),
    };
    match rng.random_range(0..100) {
        // Keep the number of leases bounded: past 24 live ones, a grant becomes a revoke.
        0..15 if live.len() >= 24 => COp::Revoke(lease(rng)),
        0..15 => COp::Grant(ttl(rng)),
        15..19 => {
            let id = rng.random_range(1..=60);
            COp::GrantId(id, ttl(rng))
        }
        19..29 => COp::Revoke(lease(rng)),
        29..37 => {
            let id = lease(rng);
            COp::Checkpoint(id, 100 * rng.random_range(1..30u64))
        }
        37..57 => {
            let (k, l) = (key(rng), put_lease(rng));
            COp::Put(k, value.to_string(), l)
        }
        57..65 => COp::Delete(key(rng)),
        65..69 => COp::DeletePrefix(prefix(rng)),
        69..74 => {
            let id = lease(rng);
            COp::Attach(id, key(rng))
        }
        74..77 => {
            let id = lease(rng);
            COp::Detach(id, key(rng))
        }
        _ => {
            let cmps = (0..rng.random_range(0..3))
                .map(|_| {
                    let (key, op) = (
                        key(rng),
                        [
                            CompareOp::Equal,
                            CompareOp::NotEqual,
                            CompareOp::Less,
                            CompareOp::Greater,
                        ][rng.random_range(0..4)],
                    );
                    let (kind, arg) = match rng.random_range(0..4) {
                        0 => ("ver", rng.random_range(0..3)),
                        1 => ("cre", rng.random_range(0..=last_rev + 1)),
                        2 => ("mod", rng.random_range(0..=last_rev + 1)),
                        _ => ("lease", if rng.random_bool(0.3) { 0 } else { lease(rng) }),
                    };
                    Cmp {
                        key,
                        op,
                        kind: kind.to_string(),
                        arg,
                    }
                })
                .collect();
            let tops = |rng: &mut StdRng, n: usize| {
                (0..n)
                    .map(|_| match rng.random_range(0..6) {
                        0..3 => {
                            let (k, l) = (key(rng), put_lease(rng));
                            TOp::Put(k, value.to_string(), l)
                        }
                        3..5 => TOp::Delete(key(rng)),
                        _ => TOp::DeletePrefix(prefix(rng)),
                    })
                    .collect::<Vec<_>>()
            };
            let succ_n = rng.random_range(1..4);
            let succ = tops(rng, succ_n);
            let fail_n = rng.random_range(0..3);
            let fail = tops(rng, fail_n);
            COp::Txn(cmps, succ, fail)
        }
    }
}

/// One flushed `write` per line, so the parent never sees half a line from a live child.
fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes()).expect("stdout");
    out.flush().expect("stdout");
}

fn child_workload(path: &Path, seed: u64, tag: &str, mode: Mode, log: Log) {
    let db = log
        .builder()
        .path(path)
        .durability(mode.durability())
        .open()
        .expect("child: open");
    let mut live: Vec<i64> = db.leases().unwrap().iter().map(|l| l.id.get()).collect();
    if mode == Mode::Buffered {
        // D3's loss window, measured: `@@D REV` each time the durable revision moves (sampled
        // every millisecond), `@@R REV` after each acknowledged op.
        let db = db.clone();
        std::thread::spawn(move || {
            let mut last = db.durable_revision();
            loop {
                let now = db.durable_revision();
                if now != last {
                    emit(&format!("@@D {now}\n"));
                    last = now;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let start = Instant::now();
    let mut seq = 0u64;
    while start.elapsed() < CHILD_MAX_RUN && seq < CHILD_MAX_OPS {
        let op = random_op(
            &mut rng,
            &live,
            db.revision().unwrap(),
            &format!("{tag}.{seq}"),
        );
        emit(&format!("@@B {seq} {}\n", op.encode()));
        let result = run_on_engine(&db, &op);
        match (&op, result.strip_prefix("id ")) {
            (COp::Grant(_) | COp::GrantId(..), Some(id)) => live.push(id.parse().expect("id")),
            (COp::Revoke(id), _) if result == "ok" => live.retain(|l| l != id),
            _ => {}
        }
        emit(&format!("@@A {seq} {result}\n"));
        if mode == Mode::Buffered {
            emit(&format!("@@R {}\n", db.revision().unwrap()));
        }
        seq += 1;
    }
    // Done: wait, doing nothing, for the kill (or for the parent to go away).
    let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
}

/// The concurrent workload: `threads` threads, each granting a lease and putting a key attached
/// to it, over and over (commits are shared, each led by one of the writers). After each
/// acknowledged grant the child prints `@@G <thread> <i> <id>`, after each put `@@P <thread> <i>`.
fn child_concurrent_workload(path: &Path, tag: &str, log: Log, threads: usize) {
    let db = log.builder().path(path).open().expect("child: open");
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                let mut i = 0u64;
                while start.elapsed() < CHILD_MAX_RUN && i < CHILD_MAX_OPS {
                    let id = db.grant(Duration::from_secs(36_000)).expect("grant");
                    emit(&format!("@@G {t} {i} {}\n", id.get()));
                    db.put(concurrent_key(tag, t, i), "v", Some(id))
                        .expect("put");
                    emit(&format!("@@P {t} {i}\n"));
                    i += 1;
                }
            });
        }
    });
    let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
}

fn concurrent_key(tag: &str, thread: usize, i: u64) -> String {
    format!("c/{tag}/{thread}/{i:08}")
}

/// The child's entry point: runs the workload when re-executed by the crash test (`--ignored`);
/// not a test of its own.
#[test]
#[ignore = "child process of the crash tests; run by them"]
fn child_process_entry() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        // Not started by a parent test (e.g. `--include-ignored`): there is nothing to check.
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED_ENV)
        .expect("seed")
        .parse()
        .expect("seed");
    let tag = std::env::var(CHILD_TAG_ENV).expect("tag");
    let mode = match std::env::var(CHILD_MODE_ENV).expect("mode").as_str() {
        "immediate" => Mode::Immediate,
        "buffered" => Mode::Buffered,
        other => panic!("unknown mode {other:?}"),
    };
    let log = match std::env::var(CHILD_LOG_ENV).expect("log").as_str() {
        "small" => Log::Small,
        "default" => Log::Default,
        "off" => Log::Off,
        other => panic!("unknown log {other:?}"),
    };
    match std::env::var(CHILD_THREADS_ENV) {
        Ok(n) => child_concurrent_workload(Path::new(&path), &tag, log, n.parse().expect("n")),
        Err(_) => child_workload(Path::new(&path), seed, &tag, mode, log),
    }
}

// ---- the parent -------------------------------------------------------------------------------

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// When a lease row was written: its base (checkpoint or TTL, ms) and a wall-time window
/// (ms) that contains the moment it was persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Written {
    base_ms: i64,
    from: i64,
    to: i64,
}

/// What the file must hold: the model, and when each lease row was persisted.
#[derive(Debug, Clone)]
struct Expected {
    m: Model,
    rows: BTreeMap<i64, Written>,
}

impl Expected {
    /// Applies `op` to the model; returns the result the engine must have reported.
    fn apply(&mut self, op: &COp, from: i64, to: i64) -> String {
        let result = run_on_model(&mut self.m, op);
        let ok = !result.starts_with("err");
        match op {
            COp::Grant(ttl) | COp::GrantId(_, ttl) if ok => {
                let id = result.strip_prefix("id ").expect("id").parse().expect("id");
                let base_ms = *ttl as i64 * 1000;
                self.rows.insert(id, Written { base_ms, from, to });
            }
            COp::Checkpoint(id, r) if ok => {
                let base_ms = *r as i64 * 1000;
                self.rows.insert(*id, Written { base_ms, from, to });
            }
            COp::Revoke(id) if ok => {
                self.rows.remove(id);
            }
            _ => {}
        }
        result
    }
}

/// What the parent read from the reopened file.
struct Observed {
    got: Snapshot,
    /// Remaining time of every lease, ms.
    remaining: BTreeMap<i64, i64>,
    /// Wall time just before the open and just after the reads, ms.
    opened: i64,
    read: i64,
}

impl Observed {
    fn read(path: &Path, ctx: &str) -> Observed {
        let opened = wall_ms();
        // Small regions: a log the child made with them is kept, not remade.
        let db = Log::Small
            .builder()
            .path(path)
            .open()
            .unwrap_or_else(|e| panic!("{ctx}: reopen after kill -9: {e}"));
        let got = engine_snapshot(&db, &KEYS);
        let remaining = db
            .leases()
            .unwrap()
            .iter()
            .map(|l| (l.id.get(), l.remaining.expect("primary").as_millis() as i64))
            .collect();
        // Never a key attached to a missing lease, never a half-detached key.
        assert_integrity(&db, &KEYS);
        let read = wall_ms();
        db.close().expect("close");
        Observed {
            got,
            remaining,
            opened,
            read,
        }
    }

    /// Whether the file holds exactly the state `e`.
    fn check(&self, e: &Expected) -> Result<(), String> {
        let want = e.m.snapshot(&KEYS);
        if self.got != want {
            return Err(format!("state differs: expected {want:?}"));
        }
        // L13 (wall): remaining = base - (now - persisted), persisted within [from, to].
        const SLACK_MS: i64 = 1000;
        for (id, w) in &e.rows {
            let r = self.remaining[id];
            let (lo, hi) = (
                w.base_ms - (self.read - w.from) - SLACK_MS,
                w.base_ms - (self.opened - w.to) + SLACK_MS,
            );
            if r < lo || r > hi {
                return Err(format!(
                    "lease {id}: remaining {r} ms, expected {lo}..={hi} from {w:?}"
                ));
            }
        }
        Ok(())
    }
}

struct Round {
    /// Acknowledged ops, with the result the child reported and when the parent saw it.
    acked: Vec<(COp, String, Instant)>,
    /// The op whose call had started when the child died, if any.
    in_flight: Option<COp>,
    /// When the kill was sent.
    killed: Instant,
}

fn parse_round(lines: &[(Instant, String)], killed: Instant) -> Round {
    let mut acked = Vec::new();
    let mut started: Option<(u64, COp)> = None;
    for (at, line) in lines {
        if let Some(rest) = line.strip_prefix("@@B ") {
            let (seq, op) = rest.split_once(' ').expect("B line");
            assert!(
                started.is_none(),
                "two ops in flight: {started:?} and {line:?}"
            );
            started = Some((seq.parse().expect("seq"), COp::decode(op)));
        } else if let Some(rest) = line.strip_prefix("@@A ") {
            let (seq, result) = rest.split_once(' ').expect("A line");
            let (s, op) = started
                .take()
                .unwrap_or_else(|| panic!("result without op: {line:?}"));
            assert_eq!(seq.parse::<u64>().expect("seq"), s, "results out of order");
            acked.push((op, result.to_string(), *at));
        }
    }
    Round {
        acked,
        in_flight: started.map(|(_, op)| op),
        killed,
    }
}

/// When to kill the child: after a random time, or right as a random op starts (likely in the
/// middle of its commit).
#[derive(Debug, Clone, Copy)]
enum Kill {
    After(Duration),
    AtOp(usize),
}

/// What a child runs.
struct Child {
    mode: Mode,
    log: Log,
    seed: u64,
    tag: String,
    /// The concurrent workload with this many threads, else the sequential one.
    threads: Option<usize>,
}

/// Runs the child until the kill, sends SIGKILL, and returns its complete lines (each with the
/// moment the parent read it) and the moment of the kill.
fn run_child(
    path: &Path,
    child: &Child,
    kill: Kill,
    stderr_path: &Path,
) -> (Vec<(Instant, String)>, Instant) {
    let mut command = Command::new(std::env::current_exe().expect("current_exe"));
    let Child {
        mode,
        log,
        seed,
        tag,
        threads,
    } = child;
    if let Some(n) = threads {
        command.env(CHILD_THREADS_ENV, n.to_string());
    }
    let mut child = command
        .args([
            "--ignored",
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads",
            "1",
            "-q",
        ])
        .env(CHILD_ENV, path)
        .env(CHILD_MODE_ENV, mode.name())
        .env(CHILD_LOG_ENV, log.name())
        .env(CHILD_SEED_ENV, seed.to_string())
        .env(CHILD_TAG_ENV, tag)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr_path).expect("stderr file"))
        .spawn()
        .expect("spawn child");
    let stdin = child.stdin.take(); // held open: the child waits on it once done
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = crossbeam_channel::unbounded::<(Instant, String)>();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                // A line cut by the kill (no newline) was never fully reported: not acknowledged.
                Ok(_) if buf.last() != Some(&b'\n') => return,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
                    if tx.send((Instant::now(), line)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = match kill {
        Kill::After(d) => Instant::now() + d,
        Kill::AtOp(_) => Instant::now() + Duration::from_secs(10),
    };
    let mut begun = 0;
    while let Ok((at, line)) = rx.recv_deadline(deadline) {
        let begins = line.starts_with("@@B ");
        lines.push((at, line));
        if begins {
            begun += 1;
            if matches!(kill, Kill::AtOp(n) if begun > n) {
                break;
            }
        }
    }
    let killed = Instant::now();
    let _ = child.kill(); // SIGKILL; an error means it had already exited
    let status = child.wait().expect("wait child");
    drop(stdin);
    lines.extend(rx.iter()); // what it wrote before it died
    reader.join().expect("reader");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "the child must die by SIGKILL, not on its own: {status:?}\n{}",
            std::fs::read_to_string(stderr_path).unwrap_or_default()
        );
    }
    (lines, killed)
}

/// The store revision an acknowledged put or txn reported.
fn acknowledged_revision(reported: &str) -> Option<i64> {
    let mut t = reported.split(' ');
    match t.next()? {
        "rev" => t.next()?.parse().ok(),
        "txn" => t.nth(1)?.parse().ok(),
        _ => None,
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: impl FnOnce() -> T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(default)
}

#[derive(Debug, Default)]
struct Totals {
    acked: usize,
    /// Kills with an op in flight whose effect was on disk / was not (others changed nothing).
    in_flight_kept: usize,
    in_flight_lost: usize,
    /// Acknowledged ops not on disk after the kill (buffered mode only).
    acked_lost: usize,
    /// The longest any lost acknowledged op had been acknowledged when the kill was sent: the
    /// measured loss window of D3.
    oldest_lost: Duration,
    /// Buffered: the longest an acknowledged write took to become durable (ack to durable
    /// revision), and the longest the durable revision stood still while writes waited.
    lag: Duration,
    stall: Duration,
}

/// From a buffered child's `@@R` and `@@D` lines (see `child_workload`): the longest time from
/// an acknowledged write to the durable revision reaching it, and the longest time the durable
/// revision stood still while a write waited (the interval plus the commit in progress).
fn durability_lag(lines: &[(Instant, String)]) -> (Duration, Duration) {
    let num = |l: &str, tag: &str| {
        l.strip_prefix(tag)
            .and_then(|r| r.trim().parse::<i64>().ok())
    };
    let (mut lag, mut stall) = (Duration::ZERO, Duration::ZERO);
    let mut waiting: std::collections::VecDeque<(Instant, i64)> = Default::default();
    let mut durable = 0i64;
    let mut last_move: Option<Instant> = None;
    for (at, line) in lines {
        if let Some(rev) = num(line, "@@R ") {
            if rev > durable {
                waiting.push_back((*at, rev));
            }
        } else if let Some(rev) = num(line, "@@D ") {
            if let (Some(t), false) = (last_move, waiting.is_empty()) {
                stall = stall.max(at.saturating_duration_since(t));
            }
            durable = rev;
            last_move = Some(*at);
            while waiting.front().is_some_and(|&(_, r)| r <= durable) {
                let (t, _) = waiting.pop_front().unwrap();
                lag = lag.max(at.saturating_duration_since(t));
            }
        }
    }
    (lag, stall)
}

/// Kills a child `rounds` times, continuing on the same file, and checks each reopen. The file
/// must hold exactly the state after the first `k` ops of the round (acknowledged ones, then the
/// one in flight), for a `k` no smaller than what `must_keep` says must be durable; `k` then
/// becomes the starting point of the next round.
fn crash_rounds(
    mode: Mode,
    rounds: usize,
    seed: u64,
    kill: impl Fn(&mut StdRng) -> Kill,
    must_keep: impl Fn(&Round) -> usize,
) -> Totals {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crash.tenure");
    let stderr_path = dir.path().join("child.stderr");
    // Create the file first: the test is about acknowledged operations, not file creation.
    Tenure::open(&path).expect("create").close().expect("close");

    let mut expected = Expected {
        m: Model::new(true),
        rows: BTreeMap::new(),
    };
    let mut totals = Totals::default();
    let mut max_durable_rev = 0;
    for round in 0..rounds {
        let log = Log::for_round(round);
        let ctx = format!("{mode:?} log {log:?} TENURE_CRASH_SEED={seed}, round {round}");
        let (from, child_seed, plan) = (wall_ms(), rng.random(), kill(&mut rng));
        let child = Child {
            mode,
            log,
            seed: child_seed,
            tag: format!("r{round}"),
            threads: None,
        };
        let (lines, killed) = run_child(&path, &child, plan, &stderr_path);
        let to = wall_ms();
        let round_ops = parse_round(&lines, killed);
        if mode == Mode::Buffered {
            let (lag, stall) = durability_lag(&lines);
            totals.lag = totals.lag.max(lag);
            totals.stall = totals.stall.max(stall);
        }
        let min_k = must_keep(&round_ops);
        let Round {
            acked, in_flight, ..
        } = round_ops;
        let seen = Observed::read(&path, &ctx);
        let revs = |ops: &[(COp, String, Instant)]| {
            ops.iter()
                .filter_map(|(_, r, _)| acknowledged_revision(r))
                .max()
                .unwrap_or(0)
        };
        max_durable_rev = max_durable_rev.max(revs(&acked[..min_k]));
        assert!(
            seen.got.revision >= max_durable_rev,
            "{ctx}: revision {} is below {max_durable_rev}, acknowledged as durable",
            seen.got.revision
        );

        // Replay the round on the model; every prefix from `min_k` on is a candidate.
        let mut state = expected.clone();
        let mut found: Option<(usize, Expected)> = None;
        let mut misses = Vec::new();
        let mut consider = |k: usize, st: &Expected| {
            if k >= min_k && st.m.revision == seen.got.revision {
                match seen.check(st) {
                    Ok(()) => found = Some((k, st.clone())),
                    Err(e) => misses.push((k, e)),
                }
            }
        };
        consider(0, &state);
        for (i, (op, reported, _)) in acked.iter().enumerate() {
            let want = state.apply(op, from, to);
            assert_eq!(
                *reported, want,
                "{ctx}: op {i} {op:?}: the engine's result differs from the model's"
            );
            consider(i + 1, &state);
        }
        let n = acked.len();
        let before_in_flight = state.m.clone();
        if let Some(op) = &in_flight {
            state.apply(op, from, to);
            consider(n + 1, &state);
        }
        let Some((k, durable)) = found else {
            panic!(
                "{ctx}: the reopened state is not the state after any {min_k}..={n} acknowledged \
                 ops (+ in flight: {in_flight:?})\ngot {:?}\nclosest: {misses:#?}",
                seen.got
            );
        };
        if in_flight.is_some() && state.m != before_in_flight {
            if k == n + 1 {
                totals.in_flight_kept += 1;
            } else if k == n {
                totals.in_flight_lost += 1;
            }
        }
        totals.acked += n;
        totals.acked_lost += n.saturating_sub(k);
        if let Some((_, _, at)) = acked.get(k) {
            let age = killed.saturating_duration_since(*at);
            totals.oldest_lost = totals.oldest_lost.max(age);
        }
        max_durable_rev = max_durable_rev.max(durable.m.revision);
        expected = durable;
    }
    totals
}

/// D1: after a kill -9 at any instant, reopening shows every acknowledged operation and no
/// partial one; the revision never goes back; no key points at a missing lease.
#[test]
fn kill_9_at_random_moments_keeps_every_acknowledged_op_and_no_partial_one() {
    let rounds: usize = env_or("TENURE_CRASH_ROUNDS", || 32);
    let seed: u64 = env_or("TENURE_CRASH_SEED", || rand::rng().random());
    eprintln!("crash test (immediate): {rounds} rounds, TENURE_CRASH_SEED={seed}");
    let kill = |rng: &mut StdRng| {
        if rng.random_bool(0.5) {
            Kill::After(Duration::from_millis(rng.random_range(0..=250)))
        } else {
            Kill::AtOp(rng.random_range(0..60))
        }
    };
    // Every acknowledged op is durable.
    let t = crash_rounds(Mode::Immediate, rounds, seed, kill, |r| r.acked.len());
    eprintln!(
        "crash test (immediate): {} acknowledged ops; kills with an op in flight: {} durable, {} \
         not (others changed nothing)",
        t.acked, t.in_flight_kept, t.in_flight_lost
    );
    assert!(
        t.acked > 0,
        "the children acknowledged nothing: the test tested nothing"
    );
    assert_eq!(t.acked_lost, 0);
}

/// D3: with buffered durability a kill -9 loses at most the last flush interval, and never
/// leaves a torn state: the file holds exactly the effect of a prefix of the ops.
#[test]
fn kill_9_with_buffered_durability_leaves_a_prefix_losing_at_most_the_last_interval() {
    let rounds: usize = env_or("TENURE_CRASH_ROUNDS", || 32) / 3;
    let seed: u64 = env_or("TENURE_CRASH_SEED", || rand::rng().random());
    eprintln!("crash test (buffered): {rounds} rounds, TENURE_CRASH_SEED={seed}");
    let kill = |rng: &mut StdRng| {
        if rng.random_bool(0.7) {
            Kill::After(Duration::from_millis(rng.random_range(0..=2500)))
        } else {
            Kill::AtOp(rng.random_range(0..3000))
        }
    };
    // Ops acknowledged longer than a flush interval (plus slack) before the kill are durable.
    let must_keep = |r: &Round| {
        let old = |t: &Instant| *t + FLUSH_INTERVAL + FLUSH_SLACK < r.killed;
        r.acked.iter().take_while(|(_, _, t)| old(t)).count()
    };
    let t = crash_rounds(Mode::Buffered, rounds, seed, kill, must_keep);
    eprintln!(
        "crash test (buffered, {FLUSH_INTERVAL:?} interval): {} acknowledged ops, {} of them \
         lost; the oldest lost one was acknowledged {:?} before the kill; the longest from \
         an acknowledgement to durable: {:?}; the longest the durable revision stood still \
         while a write waited: {:?}",
        t.acked, t.acked_lost, t.oldest_lost, t.lag, t.stall
    );
    assert!(
        t.acked > 0,
        "the children acknowledged nothing: the test tested nothing"
    );
}

/// D1 and D2 under kill -9 with concurrent writers (commits shared, led by the writers
/// themselves): every acknowledged grant and put is on disk, and each thread's puts on disk are
/// a prefix of its puts (a later write is never durable without an earlier one): all its
/// acknowledged ones, plus at most the one in flight.
#[test]
fn kill_9_under_concurrent_writers_keeps_every_acknowledged_write_in_order() {
    const THREADS: usize = 6;
    let rounds: usize = env_or("TENURE_CRASH_ROUNDS", || 32) / 4;
    let seed: u64 = env_or("TENURE_CRASH_SEED", || rand::rng().random());
    eprintln!("crash test (concurrent): {rounds} rounds, TENURE_CRASH_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("crash.tenure");
    let stderr_path = dir.path().join("child.stderr");
    Tenure::open(&path).expect("create").close().expect("close");
    let mut total = 0;
    for round in 0..rounds {
        let log = Log::for_round(round);
        let ctx = format!("log {log:?} TENURE_CRASH_SEED={seed}, round {round}");
        let tag = format!("r{round}");
        let kill = Kill::After(Duration::from_millis(rng.random_range(0..=400)));
        let child = Child {
            mode: Mode::Immediate,
            log,
            seed: 0,
            tag: tag.clone(),
            threads: Some(THREADS),
        };
        let (lines, _) = run_child(&path, &child, kill, &stderr_path);
        let mut granted: Vec<(usize, u64, i64)> = Vec::new();
        let mut put = [0u64; THREADS];
        for (_, line) in &lines {
            let f: Vec<&str> = line.split(' ').collect();
            match f[..] {
                ["@@G", t, i, id] => granted.push((
                    t.parse().expect("t"),
                    i.parse().expect("i"),
                    id.parse().expect("id"),
                )),
                ["@@P", t, i] => {
                    let (t, i): (usize, u64) = (t.parse().expect("t"), i.parse().expect("i"));
                    assert_eq!(put[t], i, "{ctx}: thread {t}'s puts out of order");
                    put[t] = i + 1;
                }
                _ => {}
            }
        }
        let db = Tenure::open(&path).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        for &(t, i, id) in &granted {
            assert!(
                db.time_to_live(id).is_ok(),
                "{ctx}: acknowledged grant {id} (thread {t}, op {i}) lost"
            );
        }
        for (t, &acked) in put.iter().enumerate() {
            let on_disk = db.range(format!("c/{tag}/{t}/"), None).expect("range");
            let n = on_disk.len() as u64;
            assert!(
                n == acked || n == acked + 1,
                "{ctx}: thread {t}: {n} puts on disk, {acked} acknowledged"
            );
            for (i, kv) in on_disk.iter().enumerate() {
                assert_eq!(
                    kv.key,
                    concurrent_key(&tag, t, i as u64).into_bytes(),
                    "{ctx}: thread {t}: the puts on disk are not a prefix"
                );
                assert!(kv.lease.is_some(), "{ctx}: a put lost its lease");
            }
            total += acked;
        }
        db.close().expect("close");
    }
    eprintln!("crash test (concurrent): {total} acknowledged puts, none lost");
    assert!(total > 0, "the children acknowledged nothing");
}

/// The harness itself: every op the child can generate survives its one-line text form, so the
/// parent replays exactly what the child ran.
#[test]
fn crash_workload_ops_round_trip_through_their_text_form() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut live = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for i in 0..5000 {
        let op = random_op(&mut rng, &live, i / 10, &format!("r0.{i}"));
        assert_eq!(COp::decode(&op.encode()), op);
        kinds.insert(op.encode().split(' ').next().unwrap().to_string());
        if let COp::Grant(_) = op {
            live.push(i);
        }
    }
    assert_eq!(kinds.len(), 10, "every kind of op is generated: {kinds:?}");
}
