//! Several processes on one file (issue 25, BENCHMARKS.md section 13): each figure is taken
//! between real processes (this binary spawns itself, `--role ...`), side by side in one run.
//!
//! `--owner` says who serves the file: `shared` (`Tenure::builder().path(p).shared(true)`: the
//! first process to open owns it, the others reach it over its unix socket) or `serve` (`tenure
//! serve FILE --listen unix:SOCK`, the stand-in with the same wire: every tenure process is a
//! client of it).
//!
//! - `handoff`: a lock handed between two processes (A unlocks → B holds), `--handoffs` times.
//!   The holder holds for a random time in [`--hold-min-us`, `--hold-max-us`] after the waiter
//!   said it is about to wait (a FIFO between them, outside the timed span), records t0 on
//!   CLOCK_MONOTONIC (system-wide) and unlocks; the waiter records t1 as its lock call returns.
//!   Hand-off = t1 - t0. Systems: tenure (`shared`: owner ↔ non-owner, and two non-owners beside
//!   an idle owner; `serve`: two clients), Python `filelock` (fcntl flock, default polling 50 ms;
//!   bench/shared_filelock.py, with `--python`), and etcd's lock service (its server-side
//!   concurrency Mutex, through the Rust etcd-client crate) on a real etcd when `etcd` is
//!   installed (`--etcd`).
//! - `roundtrip`: a durable put (`Durability::Immediate`) and an uncontended lock + unlock, in
//!   the owner's process against a non-owner's, in alternating blocks of `--block` calls (both
//!   see the same load), `--calls` each. Under `serve` the "owner" is an embedded engine on its
//!   own file and the non-owner a client of `tenure serve` (immediate durability).
//! - `takeover`: `--survivors` + 1 processes put in a loop; the owner is killed with SIGKILL
//!   (`--kills` times, a replacement process joins after each); per kill, the time from the kill
//!   until every survivor's first call begun after the owner's death has succeeded. Under
//!   `serve` the owner is `tenure serve`, restarted at once after the kill (a restart stands in
//!   for the takeover).
//!
//! Output: one `shared ...` line per figure (p50/p99/max in µs).
//!
//! `cargo build --profile profiling -p tenure-bench -p tenure-server &&
//!  target/profiling/shared --owner shared --python build/bench-shared/bin/python`

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tenure::sync::{Mutex, Session, SessionOptions};
use tenure::{Durability, Tenure};
use tenure_bench::{parse_args, summary_us, Scratch};

#[derive(Parser)]
struct Args {
    /// Who serves the file: `shared` (shared mode) or `serve` (`tenure serve`, the stand-in).
    #[arg(long, value_parser = ["shared", "serve"], default_value = "shared")]
    owner: String,
    /// Which figures (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = ["handoff", "roundtrip", "takeover"],
          default_values = ["handoff", "roundtrip", "takeover"])]
    only: Vec<String>,
    /// Lock hand-offs per system.
    #[arg(long, default_value_t = 1000)]
    handoffs: usize,
    /// The holder's hold time after the waiter waits, drawn uniformly from [min, max] µs.
    #[arg(long, default_value_t = 1_000)]
    hold_min_us: u64,
    #[arg(long, default_value_t = 51_000)]
    hold_max_us: u64,
    /// Calls per kind and side in `roundtrip`.
    #[arg(long, default_value_t = 2_000)]
    calls: usize,
    /// Calls per alternating block in `roundtrip`.
    #[arg(long, default_value_t = 100)]
    block: usize,
    /// Owner kills in `takeover`.
    #[arg(long, default_value_t = 20)]
    kills: usize,
    /// Processes that survive each kill.
    #[arg(long, default_value_t = 3)]
    survivors: usize,
    /// A Python with `filelock` installed (the hand-off against filelock); none: skipped.
    #[arg(long)]
    python: Option<PathBuf>,
    /// etcd's binary for the hand-off on a real etcd; `none` skips it.
    #[arg(long, default_value = "etcd")]
    etcd: String,
    /// `tenure serve --durability` under `--owner serve` (`buffered:100ms` shows what the
    /// hand-off costs without the disk's sync).
    #[arg(long, default_value = "immediate")]
    serve_durability: String,
    /// `tenure` (tenure-server's binary) for `--owner serve` [default: beside this binary].
    #[arg(long)]
    tenure_bin: Option<PathBuf>,
    /// Seed of the hold times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where files and sockets go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A child's part (internal): peer, rt, member, idle.
    #[arg(long, hide = true)]
    role: Option<String>,
    /// Child: what to open (`shared:FILE`, `file:FILE`, `unix:SOCK`, `etcd:URL`).
    #[arg(long, hide = true)]
    url: Option<String>,
    /// Child peer: 0 takes the even acquisitions.
    #[arg(long, hide = true, default_value_t = 0)]
    parity: u64,
    #[arg(long, hide = true)]
    fifo_in: Option<PathBuf>,
    #[arg(long, hide = true)]
    fifo_out: Option<PathBuf>,
}

/// CLOCK_MONOTONIC in ns: one clock for every process on the host (Python's `monotonic_ns` too).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Opens the tenure handle a child works on.
fn open_tenure(url: &str) -> tenure::Result<Tenure> {
    if let Some(p) = url.strip_prefix("shared:") {
        open_shared(Path::new(p))
    } else if let Some(p) = url.strip_prefix("file:") {
        Tenure::builder()
            .path(p)
            .durability(Durability::Immediate)
            .open()
    } else {
        Tenure::connect(url)
    }
}

/// Shared mode, durable writes (as `tenure serve`'s default).
fn open_shared(path: &Path) -> tenure::Result<Tenure> {
    Tenure::builder()
        .path(path)
        .durability(Durability::Immediate)
        .shared(true)
        .open()
}

/// Whether this process owns the file (`stats().owner`; an embedded engine always does, a
/// client of `tenure serve` never).
fn owns(db: &Tenure) -> bool {
    db.stats().owner
}

fn session(db: &Tenure) -> Session {
    Session::new(
        db,
        SessionOptions {
            ttl: Duration::from_secs(30),
            keepalive_interval: None,
        },
    )
    .expect("session")
}

fn main() {
    let args: Args = parse_args(include_str!("shared.rs"));
    match args.role.as_deref() {
        None => parent(&args),
        Some("peer") => peer(&args),
        Some("rt") => rt(&args),
        Some("member") => member(&args),
        Some("idle") => idle(&args),
        Some(other) => {
            eprintln!("shared: unknown role {other}");
            std::process::exit(2)
        }
    }
}

// ---- children ---------------------------------------------------------------------------------

/// The hand-off ping-pong (the same protocol as bench/shared_filelock.py, which says it).
fn peer(args: &Args) {
    let url = args.url.as_deref().expect("--url");
    let fifo = |p: &Option<PathBuf>| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(p.as_ref().expect("fifo"))
            .expect("open fifo")
    };
    let (mut fin, mut fout) = (fifo(&args.fifo_in), fifo(&args.fifo_out));
    let recv = |f: &mut std::fs::File, want: u8| {
        let mut b = [0u8];
        std::io::Read::read_exact(f, &mut b).expect("fifo read");
        assert_eq!(b[0], want, "peer {}: protocol", args.parity);
    };
    let mut rng = StdRng::seed_from_u64(args.seed * 2 + args.parity);
    let mut hold = || Duration::from_micros(rng.random_range(args.hold_min_us..=args.hold_max_us));
    // Acquired (t1), releasing (t0), and the release call's return.
    let (mut acq, mut rel, mut done) = (Vec::new(), Vec::new(), Vec::new());
    let p = args.parity;
    if let Some(etcd) = url.strip_prefix("etcd:") {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut c = rt
            .block_on(etcd_client::Client::connect([etcd], None))
            .expect("etcd");
        let lease = rt.block_on(c.lease_grant(300, None)).expect("lease").id();
        let opts = || Some(etcd_client::LockOptions::new().with_lease(lease));
        let mut held = None;
        if p == 0 {
            held = Some(
                rt.block_on(c.lock("handoff", opts()))
                    .expect("lock")
                    .key()
                    .to_vec(),
            );
            fout.write_all(b"A").expect("fifo");
        }
        for k in 1..=args.handoffs as u64 {
            if k % 2 == p {
                recv(&mut fin, b'A');
                fout.write_all(b"W").expect("fifo");
                let key = rt.block_on(c.lock("handoff", opts())).expect("lock");
                acq.push((k, now_ns()));
                held = Some(key.key().to_vec());
                fout.write_all(b"A").expect("fifo");
            } else {
                recv(&mut fin, b'W');
                std::thread::sleep(hold());
                let key = held.take().expect("held");
                rel.push((k, now_ns()));
                rt.block_on(c.unlock(key)).expect("unlock");
                done.push((k, now_ns()));
            }
        }
        if let Some(key) = held {
            rt.block_on(c.unlock(key)).expect("unlock");
        }
    } else {
        let db = open_tenure(url).expect("open");
        let s = session(&db);
        let m = Mutex::new(&s, "handoff");
        let wait = Duration::from_secs(60);
        let mut held = None;
        if p == 0 {
            held = Some(m.lock(wait).expect("lock"));
            fout.write_all(b"A").expect("fifo");
        }
        for k in 1..=args.handoffs as u64 {
            if k % 2 == p {
                recv(&mut fin, b'A');
                fout.write_all(b"W").expect("fifo");
                let g = m.lock(wait).expect("lock");
                acq.push((k, now_ns()));
                held = Some(g);
                fout.write_all(b"A").expect("fifo");
            } else {
                recv(&mut fin, b'W');
                std::thread::sleep(hold());
                let g = held.take().expect("held");
                rel.push((k, now_ns()));
                g.unlock().expect("unlock");
                done.push((k, now_ns()));
            }
        }
        if let Some(g) = held {
            g.unlock().expect("unlock");
        }
        s.close().expect("close session");
    }
    let mut out = std::io::stdout().lock();
    for (k, t) in acq {
        writeln!(out, "acq {k} {t}").expect("stdout");
    }
    for (k, t) in rel {
        writeln!(out, "rel {k} {t}").expect("stdout");
    }
    for (k, t) in done {
        writeln!(out, "done {k} {t}").expect("stdout");
    }
}

/// Round trips on command: `put N` / `lock N` answers one line of N durations in ns.
fn rt(args: &Args) {
    let db = open_tenure(args.url.as_deref().expect("--url")).expect("open");
    let s = session(&db);
    let m = Mutex::new(&s, &format!("rt-{}", std::process::id()));
    let value = [b'v'; 100];
    println!("ready owner={}", u8::from(owns(&db)));
    let mut i = 0u64;
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let mut w = line.split_whitespace();
        let (kind, n) = (
            w.next().unwrap_or(""),
            w.next().and_then(|n| n.parse().ok()),
        );
        let Some(n) = n else { break };
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            match kind {
                "put" => {
                    db.put(format!("rt/{}/{}", std::process::id(), i % 64), value, None)
                        .expect("put");
                }
                _ => m
                    .lock(Duration::from_secs(10))
                    .expect("lock")
                    .unlock()
                    .expect("unlock"),
            }
            lat.push(t.elapsed().as_nanos().to_string());
            i += 1;
        }
        println!("{}", lat.join(","));
    }
    s.close().expect("close session");
}

/// Puts in a loop. `mark T`: answer `took E`, the end of the first successful call begun at
/// or after T. `who`: answer `owner 0|1`.
fn member(args: &Args) {
    let db = open_tenure(args.url.as_deref().expect("--url")).expect("open");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let key = format!("m/{}", std::process::id());
    db.put(&key, "0", None).expect("first put");
    println!("ready owner={}", u8::from(owns(&db)));
    // Successful calls (start, end) since the last mark, and the mark still unanswered.
    let mut ok: Vec<(u64, u64)> = Vec::new();
    let mut pending: Option<u64> = None;
    let mut n = 0u64;
    loop {
        match rx.try_recv() {
            Ok(cmd) if cmd.starts_with("mark ") => {
                let t: u64 = cmd[5..].trim().parse().expect("mark");
                match ok.iter().find(|(s, _)| *s >= t) {
                    Some((_, e)) => println!("took {e}"),
                    None => pending = Some(t),
                }
                ok.clear();
            }
            Ok(cmd) if cmd == "who" => println!("owner {}", u8::from(owns(&db))),
            Ok(_) | Err(mpsc::TryRecvError::Disconnected) => return,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        let s = now_ns();
        n += 1;
        match db.put(&key, n.to_string(), None) {
            Ok(_) => {
                let e = now_ns();
                match pending {
                    Some(t) if s >= t => {
                        println!("took {e}");
                        pending = None;
                    }
                    _ => {
                        if ok.len() >= 1 << 20 {
                            ok.drain(..1 << 19);
                        }
                        ok.push((s, e));
                    }
                }
            }
            // No spinning on a refused connection: the owner's successor needs the CPU.
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Holds the file open (shared mode's owner, idle) until stdin closes.
fn idle(args: &Args) {
    let db = open_tenure(args.url.as_deref().expect("--url")).expect("open");
    println!("ready owner={}", u8::from(owns(&db)));
    let _ = std::io::stdin().lock().lines().count();
    drop(db);
}

// ---- the parent -------------------------------------------------------------------------------

/// A child process of this binary, talking line by line over its stdin/stdout.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Proc {
    fn spawn(role: &str, url: &str, extra: &[String]) -> Proc {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .args(["--role", role, "--url", url])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn a child");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Proc {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        let w = self.stdin.as_mut().expect("stdin");
        writeln!(w, "{line}").expect("to the child");
        w.flush().expect("to the child");
    }

    fn line(&mut self) -> String {
        let mut s = String::new();
        let n = self.stdout.read_line(&mut s).expect("from the child");
        assert!(n > 0, "child {} ended early", self.child.id());
        s.trim_end().to_string()
    }

    /// Closes stdin (the child's cue to end) and waits for it.
    fn finish(mut self) {
        self.stdin.take();
        let _ = self.child.wait();
    }

    fn kill(&mut self) {
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
    }
}

/// `tenure serve FILE --listen unix:SOCK` (immediate durability), up when a client gets in.
struct Serve {
    child: Child,
}

impl Serve {
    fn start(bin: &Path, file: &Path, sock: &Path, durability: &str) -> Serve {
        let child = Command::new(bin)
            .arg("serve")
            .arg(file)
            .arg("--listen")
            .arg(format!("unix:{}", sock.display()))
            .args(["--durability", durability, "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn tenure serve");
        Serve { child }
    }

    /// [`Serve::start`], then waits until a client gets in; the server and its URL.
    fn start_up(bin: &Path, file: &Path, sock: &Path, durability: &str) -> (Serve, String) {
        let s = Serve::start(bin, file, sock, durability);
        let url = format!("unix:{}", sock.display());
        Serve::wait_up(&url);
        (s, url)
    }

    fn wait_up(url: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(db) = Tenure::connect(url) {
                if db.get("up").is_ok() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "tenure serve did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(mut self) {
        // SAFETY: our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A single-node etcd on loopback ports, its data in `dir`, stopped by PID on drop.
struct Etcd {
    child: Child,
    url: String,
}

impl Etcd {
    fn start(bin: &str, dir: &Path) -> Option<Etcd> {
        let port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port")
        };
        let (c, p) = (port(), port());
        let url = format!("http://127.0.0.1:{c}");
        let peer = format!("http://127.0.0.1:{p}");
        let child = Command::new(bin)
            .args(["--name", "b", "--data-dir"])
            .arg(dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args([
                "--initial-cluster",
                &format!("b={peer}"),
                "--log-level",
                "error",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let e = Etcd { child, url };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let up = rt.block_on(async {
                let mut c = etcd_client::Client::connect([&e.url], None).await.ok()?;
                c.get("up", None).await.ok()
            });
            if up.is_some() {
                return Some(e);
            }
            if Instant::now() > deadline {
                eprintln!("etcd did not come up");
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        // SAFETY: our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("path");
    // SAFETY: a NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", p.display());
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Runs one hand-off pair (`spawn(parity, fifo_in, fifo_out)` starts a peer) and pairs each
/// release with the acquisition after it: the hand-offs, and how long each release call took.
fn handoff_pair(
    args: &Args,
    dir: &Path,
    label: &str,
    spawn: impl Fn(u64, &Path, &Path) -> Child,
) -> Option<(Vec<Duration>, Vec<Duration>)> {
    let f01 = dir.join(format!("{label}-0to1"));
    let f10 = dir.join(format!("{label}-1to0"));
    mkfifo(&f01);
    mkfifo(&f10);
    let started = Instant::now();
    let children = [spawn(0, &f10, &f01), spawn(1, &f01, &f10)];
    let (mut acq, mut rel, mut done) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut failed = false;
    for c in children {
        let out = c.wait_with_output().expect("peer");
        failed |= !out.status.success();
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let [kind, k, t] = w[..] {
                let (k, t): (u64, u64) = (k.parse().expect("k"), t.parse().expect("t"));
                match kind {
                    "acq" => acq.insert(k, t),
                    "rel" => rel.insert(k, t),
                    _ => done.insert(k, t),
                };
            }
        }
    }
    if failed {
        eprintln!("shared handoff {label}: a peer failed");
        return None;
    }
    let since = |m: &HashMap<u64, u64>| -> Vec<Duration> {
        (1..=args.handoffs as u64)
            .filter_map(|k| Some(Duration::from_nanos(m.get(&k)?.saturating_sub(rel[&k]))))
            .collect()
    };
    eprintln!("{label}: {:.1} s", started.elapsed().as_secs_f64());
    Some((since(&acq), since(&done)))
}

/// Reports a hand-off and, beside it, its release calls; the hand-off's p50.
fn report_handoff(system: &str, (lat, release): (Vec<Duration>, Vec<Duration>)) -> Duration {
    let p50 = report(&format!("handoff system={system}"), lat);
    if !release.is_empty() {
        report(&format!("handoff_release_call system={system}"), release);
    }
    p50
}

fn report(line: &str, mut lat: Vec<Duration>) -> Duration {
    let p50 = {
        lat.sort_unstable();
        tenure_bench::quantile(&lat, 0.5)
    };
    println!(
        "shared {line} n={} {} load=\"{}\"",
        lat.len(),
        summary_us("lat", &mut lat),
        load()
    );
    p50
}

fn parent(args: &Args) {
    let scratch = Scratch::new(args.dir.clone());
    let dir = scratch.dir.as_path();
    let exe = std::env::current_exe().expect("own path");
    let tenure_bin = args
        .tenure_bin
        .clone()
        .unwrap_or_else(|| exe.with_file_name("tenure"));
    let serve = args.owner == "serve";
    println!(
        "# shared --owner {} load=\"{}\" handoffs={} hold={}..{}us",
        args.owner,
        load(),
        args.handoffs,
        args.hold_min_us,
        args.hold_max_us
    );
    let peer_args = |parity: u64, fin: &Path, fout: &Path| -> Vec<String> {
        vec![
            "--parity".into(),
            parity.to_string(),
            "--fifo-in".into(),
            fin.display().to_string(),
            "--fifo-out".into(),
            fout.display().to_string(),
            "--handoffs".into(),
            args.handoffs.to_string(),
            "--hold-min-us".into(),
            args.hold_min_us.to_string(),
            "--hold-max-us".into(),
            args.hold_max_us.to_string(),
            "--seed".into(),
            args.seed.to_string(),
        ]
    };
    let (exe, peer_args) = (&exe, &peer_args);
    let rust_peer = |url: String| {
        move |parity: u64, fin: &Path, fout: &Path| {
            Command::new(exe)
                .args(["--role", "peer", "--url", &url])
                .args(peer_args(parity, fin, fout))
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a peer")
        }
    };

    if args.only.iter().any(|o| o == "handoff") {
        let mut tenure_p50 = None;
        if serve {
            let file = dir.join("handoff.tenure");
            let sock = dir.join("handoff.sock");
            let (s, url) = Serve::start_up(&tenure_bin, &file, &sock, &args.serve_durability);
            if let Some(lat) = handoff_pair(args, dir, "serve", rust_peer(url)) {
                tenure_p50 = Some(report_handoff("tenure-serve-clients", lat));
            }
            s.stop();
        } else {
            let file = dir.join("handoff.tenure");
            let url = format!("shared:{}", file.display());
            // Owner ↔ non-owner: the first peer opens first and owns the file.
            if let Some(lat) = handoff_pair(args, dir, "owner", rust_peer(url.clone())) {
                tenure_p50 = Some(report_handoff("tenure-owner-nonowner", lat));
            }
            // Two non-owners beside an idle owner.
            let file2 = dir.join("handoff2.tenure");
            let url2 = format!("shared:{}", file2.display());
            let mut owner = Proc::spawn("idle", &url2, &[]);
            let ready = owner.line();
            assert!(ready.starts_with("ready"), "idle owner: {ready}");
            if let Some(lat) = handoff_pair(args, dir, "nonowners", rust_peer(url2)) {
                report_handoff("tenure-nonowner-nonowner", lat);
            }
            owner.finish();
        }
        if let Some(py) = &args.python {
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("shared_filelock.py");
            let lockfile = dir.join("filelock.lock");
            let spawn = |parity: u64, fin: &Path, fout: &Path| {
                Command::new(py)
                    .arg(&script)
                    .args(peer_args(parity, fin, fout))
                    .arg("--lockfile")
                    .arg(&lockfile)
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("spawn the filelock peer")
            };
            if let Some(lat) = handoff_pair(args, dir, "filelock", spawn) {
                let p50 = report_handoff("filelock", lat);
                if let Some(t) = tenure_p50 {
                    println!(
                        "shared handoff filelock_p50/tenure_p50={:.1}",
                        p50.as_secs_f64() / t.as_secs_f64()
                    );
                }
            }
        }
        if args.etcd != "none" {
            match Etcd::start(&args.etcd, dir) {
                Some(e) => {
                    let url = format!("etcd:{}", e.url);
                    if let Some(lat) = handoff_pair(args, dir, "etcd", rust_peer(url)) {
                        report_handoff("etcd-lock-service", lat);
                    }
                }
                None => eprintln!("shared: etcd not started ({}); skipped", args.etcd),
            }
        }
    }

    if args.only.iter().any(|o| o == "roundtrip") {
        roundtrip(args, dir, serve, &tenure_bin);
    }
    if args.only.iter().any(|o| o == "takeover") {
        takeover(args, dir, serve, &tenure_bin);
    }
    println!("# done load=\"{}\"", load());
}

fn roundtrip(args: &Args, dir: &Path, serve: bool, tenure_bin: &Path) {
    let file = dir.join("rt.tenure");
    let mut server = None;
    let (owner_url, other_url) = if serve {
        let (s, url) = Serve::start_up(
            tenure_bin,
            &file,
            &dir.join("rt.sock"),
            &args.serve_durability,
        );
        server = Some(s);
        (format!("file:{}", dir.join("rt-own.tenure").display()), url)
    } else {
        let url = format!("shared:{}", file.display());
        (url.clone(), url)
    };
    // The first to open owns the file (the embedded engine under `serve`); the second not.
    let mut owner = Proc::spawn("rt", &owner_url, &[]);
    let r = owner.line();
    assert_eq!(r, "ready owner=1", "the owner's side");
    let mut other = Proc::spawn("rt", &other_url, &[]);
    let r = other.line();
    assert_eq!(r, "ready owner=0", "the non-owner's side");
    for kind in ["put", "lock"] {
        // Warm-up, not measured: the first writes grow the file, connections settle.
        for p in [&mut owner, &mut other] {
            p.send(&format!("{kind} 50"));
            p.line();
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let parse = |l: String| -> Vec<Duration> {
            l.split(',')
                .map(|n| Duration::from_nanos(n.parse().expect("ns")))
                .collect()
        };
        let mut left = args.calls;
        while left > 0 {
            let n = left.min(args.block);
            owner.send(&format!("{kind} {n}"));
            a.extend(parse(owner.line()));
            other.send(&format!("{kind} {n}"));
            b.extend(parse(other.line()));
            left -= n;
        }
        let what = if kind == "put" {
            "durable_put"
        } else {
            "lock_unlock"
        };
        let pa = report(&format!("roundtrip {what} side=owner"), a);
        let pb = report(&format!("roundtrip {what} side=nonowner"), b);
        println!(
            "shared roundtrip {what} nonowner_p50/owner_p50={:.2}",
            pb.as_secs_f64() / pa.as_secs_f64()
        );
    }
    owner.finish();
    other.finish();
    if let Some(s) = server {
        s.stop();
    }
}

fn takeover(args: &Args, dir: &Path, serve: bool, tenure_bin: &Path) {
    let file = dir.join("takeover.tenure");
    let sock = dir.join("takeover.sock");
    let mut server = None;
    let url = if serve {
        let (s, url) = Serve::start_up(tenure_bin, &file, &sock, &args.serve_durability);
        server = Some(s);
        url
    } else {
        format!("shared:{}", file.display())
    };
    // Under `serve` every member is a client; in shared mode one more: the owner.
    let count = args.survivors + usize::from(!serve);
    let mut members: Vec<Proc> = Vec::new();
    for _ in 0..count {
        let mut p = Proc::spawn("member", &url, &[]);
        let r = p.line();
        assert!(r.starts_with("ready"), "member: {r}");
        members.push(p);
    }
    let mut lat = Vec::new();
    let mut rng = rand::rng();
    for _ in 0..args.kills {
        // Let the members run a while between kills (and a replacement settle).
        std::thread::sleep(Duration::from_millis(rng.random_range(100..300)));
        let owner_index = if serve {
            None
        } else {
            let mut found = None;
            for (i, m) in members.iter_mut().enumerate() {
                m.send("who");
                if m.line() == "owner 1" {
                    found = Some(i);
                }
            }
            Some(found.expect("one member owns the file"))
        };
        let t_kill = now_ns();
        match owner_index {
            Some(i) => {
                members[i].kill();
                let _ = members[i].child.wait();
            }
            None => {
                let s = server.as_mut().expect("server");
                // SAFETY: our own child.
                unsafe { libc::kill(s.child.id() as i32, libc::SIGKILL) };
                let _ = s.child.wait();
            }
        }
        let t_dead = now_ns();
        if serve {
            // The stand-in's takeover: the server restarts (recovery as on any reopen).
            server = Some(Serve::start(
                tenure_bin,
                &file,
                &sock,
                &args.serve_durability,
            ));
        }
        let dead = owner_index.map(|i| members.remove(i));
        let mut worst = 0;
        for m in members.iter_mut() {
            m.send(&format!("mark {t_dead}"));
        }
        for m in members.iter_mut() {
            let l = m.line();
            let e: u64 = l
                .strip_prefix("took ")
                .and_then(|e| e.parse().ok())
                .expect("took");
            worst = worst.max(e.saturating_sub(t_kill));
        }
        lat.push(Duration::from_nanos(worst));
        drop(dead);
        if !serve {
            let mut p = Proc::spawn("member", &url, &[]);
            let r = p.line();
            assert!(r.starts_with("ready"), "replacement: {r}");
            members.push(p);
        }
    }
    report(
        &format!(
            "takeover system={} survivors={}",
            if serve {
                "tenure-serve-restart"
            } else {
                "tenure-shared"
            },
            args.survivors
        ),
        lat,
    );
    for m in members {
        m.finish();
    }
    if let Some(s) = server {
        s.stop();
    }
}
