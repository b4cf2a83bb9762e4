//! SPEC P (shared mode): several processes on one file. Each process here is this test binary
//! re-executed to run `shared_child_entry` (an ignored test), driven line by line over its
//! stdin and answering on its stdout; the parent waits for each answer (with a deadline),
//! never for a fixed time.
//!
//! Until the `connect` client retries across a takeover (h-resume), a child's call that fails
//! while the owner changes is retried by the child itself for up to `RETRY_FOR` (the answer
//! says how many attempts failed); tests that kill the owner tolerate those failures and then
//! require success.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use tenure::sync::{Mutex, Session, SessionOptions};
use tenure::{Error, Tenure, WatchOptions};

const CHILD_ENV: &str = "TENURE_SHARED_CHILD";
const CHILD_MODE_ENV: &str = "TENURE_SHARED_CHILD_MODE";
/// Every answer line starts with this (the test harness prints its own lines too).
const MARK: &str = "@@ ";
/// How long a child retries a call that fails while the owner changes.
const RETRY_FOR: Duration = Duration::from_secs(20);
/// How long the parent waits for an answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

fn say(line: impl AsRef<str>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{MARK}{}", line.as_ref());
    let _ = out.flush();
}

/// Runs `f` until it succeeds or `RETRY_FOR` passed: the value and the failed attempts.
fn retried<T>(mut f: impl FnMut() -> tenure::Result<T>) -> (tenure::Result<T>, u32) {
    let start = Instant::now();
    let mut failed = 0;
    loop {
        match f() {
            Ok(v) => return (Ok(v), failed),
            Err(e) if start.elapsed() >= RETRY_FOR => return (Err(e), failed),
            Err(_) => {
                failed += 1;
                // Backoff between attempts of a call that failed (not a wait for an event).
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The child: opens the file named by `CHILD_ENV` (shared unless the mode says `plain`), says
/// `open owner=BOOL` (or `error ...`), then runs the commands read from stdin.
#[test]
#[ignore = "child process of the shared-mode tests; run by them"]
fn shared_child_entry() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return; // not started by a parent test
    };
    let plain = std::env::var(CHILD_MODE_ENV).as_deref() == Ok("plain");
    let db = match Tenure::builder().path(&path).shared(!plain).open() {
        Ok(db) => db,
        Err(e) => {
            say(format!("error {:?} {e}", e.code()));
            return;
        }
    };
    say(format!("open owner={}", db.stats().owner));
    let mut guards = Vec::new();
    let mut sessions = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["put", k, v] => match retried(|| db.put(k, v, None)) {
                (Ok(rev), failed) => say(format!("put {rev} failed={failed}")),
                (Err(e), _) => say(format!("error {e}")),
            },
            ["get", k] => match retried(|| db.get(k)) {
                (Ok(Some(kv)), _) => say(format!("value {}", String::from_utf8_lossy(&kv.value))),
                (Ok(None), _) => say("value none"),
                (Err(e), _) => say(format!("error {e}")),
            },
            ["count", prefix] => match retried(|| db.range(prefix, None)) {
                (Ok(kvs), _) => say(format!("count {}", kvs.len())),
                (Err(e), _) => say(format!("error {e}")),
            },
            ["owner"] => say(format!("owner {}", db.stats().owner)),
            ["watch", prefix] => {
                let opts = WatchOptions {
                    prefix: true,
                    ..WatchOptions::default()
                };
                match db.watch(prefix, opts) {
                    Ok(w) => {
                        say("watching");
                        std::thread::spawn(move || {
                            for ev in w {
                                let Ok(ev) = ev else { return };
                                say(format!(
                                    "event {} {} rev={}",
                                    String::from_utf8_lossy(&ev.kv.key),
                                    String::from_utf8_lossy(&ev.kv.value),
                                    ev.kv.mod_revision
                                ));
                            }
                        });
                    }
                    Err(e) => say(format!("error {e}")),
                }
            }
            ["lock", name, ttl_s] => {
                let opts = SessionOptions {
                    ttl: Duration::from_secs(ttl_s.parse().unwrap()),
                    ..SessionOptions::default()
                };
                let locked = retried(|| {
                    let s = Session::new(&db, opts.clone())?;
                    match Mutex::new(&s, name).lock(Duration::from_secs(30)) {
                        Ok(g) => Ok((s, g)),
                        Err(e) => {
                            // Revoked, not orphaned: a lease left alive would keep whatever
                            // it still holds for its whole TTL.
                            let _ = s.close();
                            Err(e)
                        }
                    }
                });
                match locked {
                    (Ok((s, g)), failed) => {
                        say(format!(
                            "locked lease={} token={} failed={failed}",
                            s.lease_id(),
                            g.fencing_token()
                        ));
                        sessions.push(s);
                        guards.push(g);
                    }
                    (Err(e), _) => say(format!("error {e}")),
                }
            }
            ["trylock", name, ttl_s] => {
                let opts = SessionOptions {
                    ttl: Duration::from_secs(ttl_s.parse().unwrap()),
                    ..SessionOptions::default()
                };
                let tried = retried(|| {
                    let s = Session::new(&db, opts.clone())?;
                    match Mutex::new(&s, name).try_lock() {
                        Ok(g) => Ok(Some((s, g))),
                        Err(Error::Locked { .. }) => {
                            s.close()?;
                            Ok(None)
                        }
                        Err(e) => {
                            let _ = s.close();
                            Err(e)
                        }
                    }
                });
                match tried {
                    (Ok(Some((s, g))), _) => {
                        say(format!(
                            "locked lease={} token={}",
                            s.lease_id(),
                            g.fencing_token()
                        ));
                        sessions.push(s);
                        guards.push(g);
                    }
                    (Ok(None), _) => say("busy"),
                    (Err(e), _) => say(format!("error {e}")),
                }
            }
            ["lease", id] => match retried(|| match db.time_to_live(id.parse::<i64>().unwrap()) {
                Err(Error::LeaseNotFound(_)) => Ok(None),
                other => other.map(Some),
            }) {
                (Ok(Some(_)), _) => say("lease live"),
                (Ok(None), _) => say("lease gone"),
                (Err(e), _) => say(format!("error {e}")),
            },
            ["close"] => {
                guards.clear();
                sessions.clear();
                match db.close() {
                    Ok(()) => say("closed"),
                    Err(e) => say(format!("error {e}")),
                }
            }
            _ => say(format!("error unknown command {line:?}")),
        }
    }
}

/// A child process and its answers.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The copy of the test binary a child of another user runs (removed with it).
    _exe_dir: Option<tempfile::TempDir>,
}

impl Proc {
    fn start(path: &Path, mode: &str) -> Proc {
        Proc::start_as(path, mode, None)
    }

    fn start_as(path: &Path, mode: &str, uid: Option<u32>) -> Proc {
        let mut exe = std::env::current_exe().unwrap();
        // Another user must reach the test binary: a checkout can sit under a directory
        // only its owner may enter (`mktemp -d`), so that child runs a copy in a 0755 one.
        let exe_dir = uid.map(|_| {
            use std::os::unix::fs::PermissionsExt;
            let d = tempfile::tempdir().unwrap();
            std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let copy = d.path().join("child");
            std::fs::copy(&exe, &copy).unwrap();
            exe = copy;
            d
        });
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--ignored",
            "--exact",
            "shared_child_entry",
            "--nocapture",
            "--test-threads",
            "1",
            "-q",
        ])
        .env(CHILD_ENV, path)
        .env(CHILD_MODE_ENV, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        if let Some(uid) = uid {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid);
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(answer) = line.strip_prefix(MARK) {
                    if tx.send(answer.to_string()).is_err() {
                        return;
                    }
                }
            }
        });
        Proc {
            child,
            stdin,
            lines,
            _exe_dir: exe_dir,
        }
    }

    /// The next answer line.
    fn next(&self) -> String {
        match self.lines.recv_timeout(ANSWER_WITHIN) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!("no answer within {ANSWER_WITHIN:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the child ended"),
        }
    }

    /// The next answer that starts with `prefix` (other lines, e.g. watch events, are kept
    /// for `events`).
    fn expect(&self, prefix: &str) -> String {
        let l = self.next();
        assert!(l.starts_with(prefix), "expected {prefix:?}, got {l:?}");
        l
    }

    fn send(&mut self, cmd: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{cmd}").unwrap();
        stdin.flush().unwrap();
    }

    fn ask(&mut self, cmd: &str) -> String {
        self.send(cmd);
        self.next()
    }

    /// `open owner=BOOL`: whether this child owns the file.
    fn opened(&self) -> bool {
        match self.next().as_str() {
            "open owner=true" => true,
            "open owner=false" => false,
            other => panic!("open failed: {other}"),
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        drop(self.stdin.take());
        self.kill();
    }
}

/// `key=value` fields of an answer.
fn fields(answer: &str) -> HashMap<&str, &str> {
    answer
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    (dir, path)
}

fn shared(path: &Path) -> tenure::Result<Tenure> {
    Tenure::builder().path(path).shared(true).open()
}

#[test]
fn p1_two_processes_see_one_database_and_each_others_writes_in_watches() {
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened(), "the first process owns the file");
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened(), "the second reaches the owner");
    assert!(a.ask("put k from-a").starts_with("put "));
    assert_eq!(b.ask("get k"), "value from-a");
    assert!(b.ask("put j from-b").starts_with("put "));
    assert_eq!(a.ask("get j"), "value from-b");
    // A watch in each sees the other's put.
    assert_eq!(b.ask("watch w/"), "watching");
    assert_eq!(a.ask("watch w/"), "watching");
    // The writer's own watch may answer before its put does: two lines, in either order.
    let mut got = [a.ask("put w/1 x"), a.next()];
    got.sort();
    assert!(
        got[0].starts_with("event w/1 x rev=") && got[1].starts_with("put "),
        "{got:?}"
    );
    assert!(b.expect("event").starts_with("event w/1 x rev="));
    let mut got = [b.ask("put w/2 y"), b.next()];
    got.sort();
    assert!(
        got[0].starts_with("event w/2 y rev=") && got[1].starts_with("put "),
        "{got:?}"
    );
    assert!(a.expect("event").starts_with("event w/2 y rev="));
}

#[test]
fn p2_without_shared_a_second_process_is_refused_naming_the_ways_to_share() {
    let (_dir, path) = temp_db();
    let a = Proc::start(&path, "plain");
    assert!(a.opened(), "an embedded engine drives itself");
    let e = Tenure::open(&path).unwrap_err();
    assert!(matches!(e, Error::AlreadyOpen(_)), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains("is already open") && m.contains("shared=True") && m.contains("tenure serve"),
        "{m}"
    );
    // A shared open while a process holds the file without sharing it: AlreadyOpen too, and
    // it gives the lock back (a later shared open, once the file is free, owns it).
    let e = shared(&path).unwrap_err();
    assert!(matches!(e, Error::AlreadyOpen(_)), "{e:?}");
    drop(a);
    let db = shared(&path).unwrap();
    assert!(db.stats().owner);
}

#[test]
fn p3_a_non_owner_is_refused_engine_only_calls_naming_them_and_says_it_does_not_own() {
    let (_dir, path) = temp_db();
    let owner = shared(&path).unwrap();
    // flock conflicts between two opens of the lock file even in one process.
    let other = shared(&path).unwrap();
    assert!(owner.stats().owner);
    assert!(!other.stats().owner);
    assert_eq!(other.path(), Some(path.as_path()));
    for (call, e) in [
        ("expired", other.expired().map(|_| ()).unwrap_err()),
        (
            "checkpoint",
            other.checkpoint(1, Duration::ZERO).unwrap_err(),
        ),
        ("promote", other.promote(Duration::ZERO).unwrap_err()),
        (
            "snapshot",
            other
                .snapshot(path.with_extension("snap"))
                .map(|_| ())
                .unwrap_err(),
        ),
    ] {
        let m = e.to_string();
        assert!(matches!(e, Error::Unsupported(_)), "{call}: {e:?}");
        assert!(
            m.contains(call) && m.contains(&path.display().to_string()),
            "{m}"
        );
    }
    // The engine's calls work on the owner; everything else on both.
    owner.expired().unwrap();
    let rev = other.put("k", "v", None).unwrap();
    assert_eq!(owner.get("k").unwrap().unwrap().mod_revision, rev);
    assert_eq!(other.alarms().unwrap(), vec![]);
    // Alarms through the owner's Maintenance service: raised and disarmed by a non-owner, in
    // force in the owner's engine.
    let corrupt = tenure::Alarm {
        member: 7,
        kind: tenure::AlarmKind::Corrupt,
    };
    other.raise_alarm(corrupt).unwrap();
    assert_eq!(owner.alarms().unwrap(), vec![corrupt]);
    assert_eq!(other.alarms().unwrap(), vec![corrupt]);
    assert!(other.disarm_alarm(corrupt).unwrap());
    assert_eq!(owner.alarms().unwrap(), vec![]);
    other.close().unwrap();
    owner.close().unwrap();
}

#[test]
fn p4_of_four_processes_opening_at_once_exactly_one_owns_the_file() {
    let (_dir, path) = temp_db();
    let mut procs: Vec<Proc> = (0..4).map(|_| Proc::start(&path, "shared")).collect();
    let owners = procs.iter().filter(|p| p.opened()).count();
    assert_eq!(owners, 1);
    for (i, p) in procs.iter_mut().enumerate() {
        assert!(p.ask(&format!("put race/{i} {i}")).starts_with("put "));
    }
    for p in &mut procs {
        assert_eq!(p.ask("count race/"), "count 4");
    }
}

#[test]
fn p5_when_the_owner_is_killed_a_survivor_takes_over_and_no_acknowledged_write_is_lost() {
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened());
    let mut b = Proc::start(&path, "shared");
    let mut c = Proc::start(&path, "shared");
    assert!(!b.opened() && !c.opened());
    for i in 0..20 {
        let p = if i % 2 == 0 { &mut b } else { &mut c };
        assert!(p.ask(&format!("put acked/{i:02} {i}")).starts_with("put "));
    }
    assert!(a.ask("put acked/by-owner x").starts_with("put "));
    a.kill();
    let killed = Instant::now();
    // Each survivor's next call succeeds (after failures while the owner changes).
    let put_b = b.ask("put after/b 1");
    let put_c = c.ask("put after/c 1");
    // The figure for DESIGN's takeover notes (not a bound checked here: timing on a shared
    // machine); the benchmarks measure it properly.
    eprintln!(
        "takeover: both survivors' puts done {:?} after the kill",
        killed.elapsed()
    );
    assert!(
        put_b.starts_with("put ") && put_c.starts_with("put "),
        "{put_b} / {put_c}"
    );
    assert_eq!(b.ask("count acked/"), "count 21");
    assert_eq!(c.ask("count after/"), "count 2");
    let owners = [b.ask("owner"), c.ask("owner")];
    assert_eq!(
        owners.iter().filter(|o| *o == "owner true").count(),
        1,
        "{owners:?}"
    );
}

#[test]
fn p5_when_the_owner_closes_a_waiting_process_takes_over() {
    let (_dir, path) = temp_db();
    let owner = shared(&path).unwrap();
    let other = shared(&path).unwrap();
    other.put("k", "1", None).unwrap();
    owner.close().unwrap();
    // The takeover happens on `other`'s thread; its handle reconnects to its own socket.
    let (got, _) = retried(|| other.get("k"));
    assert_eq!(got.unwrap().unwrap().value, b"1");
    assert!(other.stats().owner);
    // Its handle still goes through the socket: engine-only calls say so.
    let e = other.expired().map(|_| ()).unwrap_err();
    assert!(
        matches!(e, Error::Unsupported(_)) && e.to_string().contains("took the file over"),
        "{e}"
    );
    let third = shared(&path).unwrap();
    assert!(!third.stats().owner);
    assert_eq!(third.get("k").unwrap().unwrap().value, b"1");
    third.close().unwrap();
    other.close().unwrap();
    // Everything is released: a plain open owns the file again.
    Tenure::open(&path).unwrap().close().unwrap();
}

#[test]
fn p6_the_killed_owners_session_leases_are_revoked_by_the_process_that_takes_over() {
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened());
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened());
    // A 600 s TTL: only the revocation, not the TTL, can free the lock within the test.
    let held = a.ask("lock jobs 600");
    let held = fields(&held);
    let (lease, token): (i64, i64) = (
        held["lease"].parse().unwrap(),
        held["token"].parse().unwrap(),
    );
    assert_eq!(b.ask(&format!("lease {lease}")), "lease live");
    a.kill();
    let taken = b.ask("lock jobs 600");
    let taken = fields(&taken);
    assert!(taken["token"].parse::<i64>().unwrap() > token, "{taken:?}");
    assert_eq!(b.ask(&format!("lease {lease}")), "lease gone");
    assert_eq!(b.ask("owner"), "owner true");
}

#[test]
fn p7_a_stale_socket_of_a_dead_owner_is_replaced() {
    let (_dir, path) = temp_db();
    let mut socket = path.clone().into_os_string();
    socket.push(".sock");
    let socket = PathBuf::from(socket);
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists(), "a socket no one answers on");
    let owner = shared(&path).unwrap();
    assert!(owner.stats().owner);
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened());
    assert!(b.ask("put k v").starts_with("put "));
    assert_eq!(owner.get("k").unwrap().unwrap().value, b"v");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    drop(b);
    owner.close().unwrap();
    assert!(
        !socket.exists(),
        "the owner removes its socket when it closes"
    );
}

#[test]
fn p7_a_path_too_long_for_a_socket_falls_back_and_two_processes_meet_there() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("d".repeat(60)).join("e".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    let path = deep.join("db");
    let mut beside = path.clone().into_os_string();
    beside.push(".sock");
    assert!(beside.len() > 107);
    let owner = shared(&path).unwrap();
    assert!(owner.stats().owner);
    assert!(!Path::new(&beside).exists(), "no socket beside the file");
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened());
    assert!(b.ask("put far v").starts_with("put "));
    assert_eq!(owner.get("far").unwrap().unwrap().value, b"v");
    drop(b);
    owner.close().unwrap();
}

/// Whether this process runs as root (which ignores file modes: the tests that need a mode
/// to refuse run their child as `nobody`).
fn root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

const NOBODY: u32 = 65534;

#[test]
fn p8_a_file_in_a_read_only_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let path = ro.join("db");
    let lock = format!("{}.lock", path.display());
    if root() {
        let child = Proc::start_as(&path, "shared", Some(NOBODY));
        let answer = child.next();
        assert!(
            answer.contains("Storage") && answer.contains(&lock) && answer.contains("writable"),
            "{answer}"
        );
    } else {
        let e = shared(&path).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::Storage { .. }), "{e:?}");
        assert!(m.contains(&lock) && m.contains("writable"), "{m}");
    }
    assert!(!Path::new(&lock).exists());
}

#[test]
fn p8_another_user_gets_permission_denied_naming_the_path() {
    if !root() {
        eprintln!("skipped: needs root to run a process as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("db");
    let owner = shared(&path).unwrap();
    let child = Proc::start_as(&path, "shared", Some(NOBODY));
    let answer = child.next();
    assert!(
        answer.contains("PermissionDenied") && answer.contains("ermission denied"),
        "{answer}"
    );
    assert!(
        answer.contains(&dir.path().display().to_string()),
        "{answer}"
    );
    owner.close().unwrap();
}

#[test]
fn p1_shared_mode_needs_a_path() {
    let e = Tenure::builder().shared(true).open().unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("in-memory"),
        "{e}"
    );
}

#[test]
fn p5_a_closed_non_owner_no_longer_waits_to_take_over() {
    let (_dir, path) = temp_db();
    let owner = shared(&path).unwrap();
    let other = shared(&path).unwrap();
    other.close().unwrap();
    owner.close().unwrap();
    // Had the closed handle's thread taken the file over, this open would be refused.
    Tenure::open(&path).unwrap().close().unwrap();
}

#[test]
fn p6_a_process_that_took_over_records_its_own_sessions_for_the_next_owner() {
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened());
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened());
    let held = b.ask("lock jobs 600");
    let token: i64 = fields(&held)["token"].parse().unwrap();
    // `a` closes: `b`, the only one waiting, takes over (its next call succeeds once it serves).
    assert_eq!(a.ask("close"), "closed");
    assert!(b.ask("put after-a 1").starts_with("put "));
    assert_eq!(b.ask("owner"), "owner true");
    b.kill();
    // The next owner revokes `b`'s session lease (recorded when `b` became the owner), so the
    // lock is free at once, with a larger token; a 600 s TTL could not explain it.
    let mut c = Proc::start(&path, "shared");
    assert!(c.opened());
    let taken = c.ask("lock jobs 600");
    assert!(
        fields(&taken)["token"].parse::<i64>().unwrap() > token,
        "{taken}"
    );
}

#[test]
fn p3_a_non_owner_locks_through_the_socket_on_a_new_file() {
    // etcd's clients (the recipes' waits over the socket) take revision 0 for "none": the
    // owner starts a new file at revision 1, as `tenure serve` does.
    let (_dir, path) = temp_db();
    let owner = shared(&path).unwrap();
    let other = shared(&path).unwrap();
    let s = Session::new(&other, SessionOptions::default()).unwrap();
    let g = Mutex::new(&s, "jobs").lock(Duration::from_secs(5)).unwrap();
    assert!(g.fencing_token() > 1, "{}", g.fencing_token());
    g.unlock().unwrap();
    s.close().unwrap();
    other.close().unwrap();
    owner.close().unwrap();
}

/// Waits until `db` sees `n` entries under `prefix` (waiters queued): polled, since the
/// waiters are other processes whose keys this process only sees by reading.
fn until_entries(db: &Tenure, prefix: &str, n: usize) {
    let start = Instant::now();
    loop {
        if let Ok(kvs) = db.range(prefix, None) {
            if kvs.len() >= n {
                return;
            }
        }
        assert!(
            start.elapsed() < ANSWER_WITHIN,
            "{prefix}: fewer than {n} entries"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn p10_a_lock_held_by_a_killed_non_owner_is_taken_by_a_waiting_process_within_100_ms() {
    let (_dir, path) = temp_db();
    // This process owns the file; two children are non-owners.
    let owner = shared(&path).unwrap();
    assert!(owner.stats().owner);
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened());
    let mut c = Proc::start(&path, "shared");
    assert!(!c.opened());
    let held = b.ask("lock jobs 600");
    let token: i64 = fields(&held)["token"].parse().unwrap();
    c.send("lock jobs 600");
    until_entries(&owner, "jobs/", 2);
    b.kill();
    let killed = Instant::now();
    let taken = c.expect("locked");
    let took = killed.elapsed();
    eprintln!("a killed non-owner's lock taken after {took:?}");
    assert!(
        fields(&taken)["token"].parse::<i64>().unwrap() > token,
        "{taken}"
    );
    // A 600 s TTL: only the binding frees it, and within 100 ms (SPEC P10).
    assert!(took < Duration::from_millis(100), "{took:?}");
    drop(c);
    owner.close().unwrap();
}

#[test]
fn p5_a_lock_held_by_the_killed_owner_is_taken_within_the_takeover_time() {
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened());
    let mut c = Proc::start(&path, "shared");
    assert!(!c.opened());
    let watcher = shared(&path).unwrap();
    assert!(!watcher.stats().owner);
    let held = a.ask("lock jobs 600");
    let token: i64 = fields(&held)["token"].parse().unwrap();
    c.send("lock jobs 600");
    until_entries(&watcher, "jobs/", 2);
    a.kill();
    let killed = Instant::now();
    let taken = c.expect("locked");
    let took = killed.elapsed();
    eprintln!("the killed owner's lock taken after {took:?}");
    assert!(
        fields(&taken)["token"].parse::<i64>().unwrap() > token,
        "{taken}"
    );
    // The takeover: lock poll (10 ms), recovery, bind, the waiter's reconnect. Generous for a
    // loaded machine; the benchmark measures it.
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(c);
    watcher.close().unwrap();
}

#[test]
fn p15_a_watch_in_a_survivor_sees_every_event_once_in_order_across_takeovers() {
    let (_dir, path) = temp_db();
    let mut owners = vec![Proc::start(&path, "shared")];
    assert!(owners[0].opened());
    let mut w = Proc::start(&path, "shared");
    assert!(!w.opened());
    assert_eq!(w.ask("watch w/"), "watching");
    let mut writer = Proc::start(&path, "shared");
    assert!(!writer.opened());
    let mut puts = 0;
    let mut kills = 0;
    for round in 0..3 {
        // A spare non-owner, to take over next (or the watcher or the writer does).
        let spare = Proc::start(&path, "shared");
        // Right after a kill the spare may win the lock itself: either is a change of owner.
        let _ = spare.opened();
        for i in 0..10 {
            let answer = writer.ask(&format!("put w/{round}-{i:02} v"));
            assert!(answer.starts_with("put "), "{answer}");
            puts += 1;
        }
        owners.push(spare);
        // Kill whoever owns the file now, unless it is the watcher or the writer (then their
        // own takeover was the change of owner under test, and the rounds end).
        let Some(i) = owners
            .iter_mut()
            .position(|p| p.ask("owner") == "owner true")
        else {
            break;
        };
        owners.remove(i).kill();
        kills += 1;
    }
    assert!(kills >= 1);
    for i in 0..10 {
        assert!(writer
            .ask(&format!("put w/end-{i:02} v"))
            .starts_with("put "));
        puts += 1;
    }
    // Every event once, in order: revisions strictly increasing and contiguous (only the
    // writer writes, one revision per put; a put retried after a lost answer is a new
    // revision, which the watcher must see too).
    let mut revs: Vec<i64> = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    while keys.len() < puts {
        let l = w.next();
        let Some(ev) = l.strip_prefix("event ") else {
            continue;
        };
        let parts: Vec<&str> = ev.split_whitespace().collect();
        keys.insert(parts[0].to_string());
        revs.push(fields(ev)["rev"].parse().unwrap());
    }
    for pair in revs.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "events out of order, lost or repeated: {revs:?}"
        );
    }
}

#[test]
fn p16_a_survivors_session_keeps_its_lease_and_lock_across_a_takeover() {
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened());
    let mut b = Proc::start(&path, "shared");
    assert!(!b.opened());
    let mut c = Proc::start(&path, "shared");
    assert!(!c.opened());
    let held = b.ask("lock jobs 2");
    let lease = fields(&held)["lease"].to_string();
    a.kill();
    let killed = Instant::now();
    // Three TTLs pass with the new owner serving; the lease lives only if b renews it there.
    let mut checks = 0;
    while killed.elapsed() < Duration::from_secs(6) {
        assert_eq!(c.ask(&format!("lease {lease}")), "lease live");
        assert_eq!(c.ask("trylock jobs 2"), "busy");
        checks += 1;
    }
    assert!(checks > 0);
    // b still holds it: its token is the one it got before the takeover.
    assert_eq!(b.ask(&format!("lease {lease}")), "lease live");
}

#[test]
fn p5_a_process_that_opens_just_after_the_owner_died_keeps_the_survivors_sessions() {
    // The replacement of a killed owner may win the ownership lock before any waiting process
    // (the counter test's C replacements did): it is a takeover too, and recovers leases with
    // the takeover's grace. The survivor here is a plain `connect` client of the socket, so no
    // other process competes for the lock and the fresh open is sure to win it.
    let (_dir, path) = temp_db();
    let mut a = Proc::start(&path, "shared");
    assert!(a.opened());
    let socket = format!("unix:{}.sock", path.canonicalize().unwrap().display());
    let survivor = tenure::ConnectOptions::new()
        .endpoints([socket])
        .connect()
        .unwrap();
    let ttl = Duration::from_secs(2);
    let opts = SessionOptions {
        ttl,
        ..SessionOptions::default()
    };
    let s = Session::new(&survivor, opts).unwrap();
    let g = Mutex::new(&s, "jobs").lock(Duration::from_secs(5)).unwrap();
    // The session renews while more than its TTL passes: the file still has the lease's
    // remaining time from its grant (renewals are not written), now past.
    assert!(!s.wait_done(ttl + Duration::from_millis(500)));
    a.kill();
    let owner = shared(&path).unwrap();
    assert!(owner.stats().owner);
    let lease = s.lease_id();
    assert!(
        owner.time_to_live(lease).is_ok(),
        "the survivor's lease did not survive the fresh owner's recovery"
    );
    let held = owner
        .get(format!("jobs/{:x}", lease.get()))
        .unwrap()
        .expect("the survivor's lock entry");
    assert_eq!(held.lease, Some(lease));
    // Its keep-alive reaches the new owner and renews: still held after another TTL.
    assert!(
        !s.wait_done(ttl + Duration::from_millis(500)),
        "the session was lost"
    );
    assert!(owner.time_to_live(lease).is_ok());
    g.unlock().unwrap();
    s.close().unwrap();
    survivor.close().unwrap();
    owner.close().unwrap();
}
