//! Starts `tenure serve` on a random loopback port and runs real etcd clients against it.
#![allow(dead_code)]

pub(crate) mod certs;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for what another process or thread does.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

pub(crate) struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT` of the first TCP listener.
    pub addr: String,
    /// `https` when it serves TLS, else `http`.
    pub scheme: &'static str,
    pub log: Arc<Mutex<String>>,
}

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tenure")
}

impl Server {
    /// Starts `tenure serve FILE --listen 127.0.0.1:0 EXTRA...` and waits until it serves.
    pub(crate) fn start(file: &Path, extra: &[&str]) -> Server {
        Server::start_on(file, "127.0.0.1:0", extra)
    }

    /// Like `start`, listening on `listen` (HOST:PORT).
    pub(crate) fn start_on(file: &Path, listen: &str, extra: &[&str]) -> Server {
        Server::start_bin(bin(), file, listen, extra)
    }

    /// Like `start_on`, with another build of `tenure` (a benchmark's "before").
    pub(crate) fn start_bin(bin: &str, file: &Path, listen: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(bin)
            .arg("serve")
            .arg(file)
            .args(["--listen", listen])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tenure serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                for scheme in ["http", "https"] {
                    if let Some(rest) = line.split(&format!(" {scheme}://")).nth(1) {
                        let addr = rest.split([',', ' ']).next().unwrap_or("").to_string();
                        let _ = tx.send((addr, scheme));
                    }
                }
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let (addr, scheme) = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("tenure serve did not start: {}", log.lock().unwrap()));
        Server {
            child,
            addr,
            scheme,
            log,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Waits (20 s at most) until the log has a line containing `needle`.
    pub(crate) fn wait_log(&self, needle: &str) {
        let until = Instant::now() + Duration::from_secs(20);
        while !self.log.lock().unwrap().contains(needle) {
            assert!(
                Instant::now() < until,
                "no {needle:?} in the log: {}",
                self.log.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn etcdctl(&self, args: &[&str]) -> Output {
        etcdctl(&self.addr, args, None)
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.etcdctl(args);
        assert!(
            out.status.success(),
            "etcdctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// SIGTERM, then the exit status (within 20 s).
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        signal(&self.child, "TERM");
        wait_for(&mut self.child, Duration::from_secs(20))
    }

    pub(crate) fn kill9(mut self) {
        signal(&self.child, "KILL");
        wait_for(&mut self.child, Duration::from_secs(20));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    if sig == "STOP" {
        // `kill` returns once the signal is sent; a thread already running on another core may
        // still answer a request until the kernel stops it. Return only once every thread is.
        let task = format!("/proc/{}/task", child.id());
        let stopped = || {
            std::fs::read_dir(&task).unwrap().all(|t| {
                let stat =
                    std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default();
                // The state follows the parenthesised command name.
                matches!(
                    stat.rsplit_once(") ").map(|(_, rest)| rest.as_bytes()[0]),
                    Some(b'T' | b't')
                )
            })
        };
        let until = Instant::now() + Duration::from_secs(30);
        while !stopped() {
            assert!(Instant::now() < until, "pid {} did not stop", child.id());
            std::thread::yield_now();
        }
    }
}

pub(crate) fn wait_for(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < until,
            "process did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// etcdctl (API v3) against ENDPOINT, with optional stdin.
pub(crate) fn etcdctl(endpoint: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new("etcdctl");
    cmd.env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .expect("etcdctl is installed (Debian package etcd-client)");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

/// The `tenure` binary with `args`, run to completion.
pub(crate) fn tenure_cli(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// A process's output as text (invalid UTF-8 shown as U+FFFD).
pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A session on `db` with a `ttl_secs` lease, renewed every third of it.
pub(crate) fn session(db: &tenure::Tenure, ttl_secs: u64) -> tenure::sync::Session {
    let opts = tenure::sync::SessionOptions {
        ttl: Duration::from_secs(ttl_secs),
        keepalive_interval: None,
    };
    tenure::sync::Session::new(db, opts).unwrap()
}

pub(crate) fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.tenure");
    (dir, path)
}

/// etcdctl (API v3) against `addr`, its stdout lines on a channel (for commands that keep
/// running: lock, elect, watch).
pub(crate) fn spawn_lines(addr: &str, args: &[&str]) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={addr}"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || for _ in BufReader::new(err).lines() {});
    (child, rx)
}

/// A free loopback port (bound and released: another process may take it first, rarely).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A single-node etcd (Debian's etcd-server) on loopback ports, with its data in `dir`.
pub(crate) struct Etcd {
    pub child: Child,
    /// `127.0.0.1:PORT` of the client listener.
    pub addr: String,
    dir: PathBuf,
    peer: u16,
    tls: Option<EtcdTls>,
}

/// etcd's client TLS: its own flags and the etcdctl flags that get in.
#[derive(Clone)]
pub(crate) struct EtcdTls {
    pub server: Vec<String>,
    pub etcdctl: Vec<String>,
}

impl EtcdTls {
    /// `--cert-file/--key-file/--trusted-ca-file/--client-cert-auth` with `certs`.
    pub(crate) fn mutual(c: &certs::Certs) -> EtcdTls {
        EtcdTls {
            server: vec![
                format!("--cert-file={}", c.arg("server.pem")),
                format!("--key-file={}", c.arg("server.key")),
                format!("--trusted-ca-file={}", c.arg("ca.pem")),
                "--client-cert-auth".into(),
            ],
            etcdctl: c.etcdctl_flags("client"),
        }
    }
}

impl Etcd {
    pub(crate) fn start(dir: &Path) -> Etcd {
        Etcd::start_at(dir, free_port(), free_port(), None, &[])
    }

    /// An etcd serving its clients over TLS.
    pub(crate) fn start_tls(dir: &Path, tls: EtcdTls) -> Etcd {
        Etcd::start_at(dir, free_port(), free_port(), Some(tls), &[])
    }

    /// An etcd started with `extra` flags (e.g. `--auth-token-ttl`).
    pub(crate) fn start_with(dir: &Path, extra: &[&str]) -> Etcd {
        Etcd::start_at(dir, free_port(), free_port(), None, extra)
    }

    fn start_at(dir: &Path, port: u16, peer: u16, tls: Option<EtcdTls>, extra: &[&str]) -> Etcd {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{port}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new("etcd")
            .args(["--name", "t", "--data-dir"])
            .arg(dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("t={peer_url}")])
            .args(["--log-level", "error"])
            .args(tls.iter().flat_map(|t| t.server.iter()))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd is installed (Debian package etcd-server)");
        let e = Etcd {
            child,
            addr: format!("127.0.0.1:{port}"),
            dir: dir.to_path_buf(),
            peer,
            tls,
        };
        let until = Instant::now() + Duration::from_secs(30);
        while !e.ctl(&["endpoint", "health"]).status.success() {
            assert!(Instant::now() < until, "etcd did not start on {}", e.addr);
            std::thread::sleep(Duration::from_millis(50));
        }
        e
    }

    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// etcdctl against this etcd (with the client certificate when it serves TLS).
    pub(crate) fn ctl(&self, args: &[&str]) -> Output {
        let flags = self.tls.iter().flat_map(|t| t.etcdctl.iter());
        let args: Vec<&str> = flags
            .map(String::as_str)
            .chain(args.iter().copied())
            .collect();
        etcdctl(&self.url(), &args, None)
    }

    /// `ctl`, which must succeed.
    pub(crate) fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "etcdctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// SIGKILL; `restart` brings the same etcd (ports, data) back.
    pub(crate) fn kill9(mut self) -> DeadEtcd {
        signal(&self.child, "KILL");
        wait_for(&mut self.child, Duration::from_secs(20));
        let port = self.addr.rsplit(':').next().unwrap().parse().unwrap();
        DeadEtcd {
            dir: self.dir.clone(),
            port,
            peer: self.peer,
            tls: self.tls.take(),
        }
    }
}

/// A killed [`Etcd`], to restart.
pub(crate) struct DeadEtcd {
    dir: PathBuf,
    port: u16,
    peer: u16,
    tls: Option<EtcdTls>,
}

impl DeadEtcd {
    pub(crate) fn restart(self) -> Etcd {
        Etcd::start_at(&self.dir, self.port, self.peer, self.tls, &[])
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The next `n` lines of a `spawn_lines` command (20 s each at most).
pub(crate) fn next_lines(rx: &std::sync::mpsc::Receiver<String>, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("etcdctl printed nothing within 20 s")
        })
        .collect()
}

/// A Go program built by `make go-interop` from `tests/go/<name>/` (etcd 3.4's own Go client
/// packages); missing programs fail the test with the target that builds them.
#[allow(dead_code)]
pub(crate) fn go_program(name: &str) -> Command {
    let dir = std::env::var_os("TENURE_GO_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/go/bin"));
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `make go-interop` first",
        path.display()
    );
    Command::new(path)
}

/// Reads a watch stream until its cancel (a watcher the server dropped, E15), each response
/// within `wait`; returns the cancel and the last mod revision delivered before it (0: none).
pub(crate) async fn read_until_canceled(
    out: &mut tonic::Streaming<etcd_client::proto::PbWatchResponse>,
    wait: Duration,
) -> (etcd_client::proto::PbWatchResponse, i64) {
    let mut last = 0;
    loop {
        let m = tokio::time::timeout(wait, out.message())
            .await
            .expect("a watch response in time")
            .expect("the stream stays up")
            .expect("the stream ends with a cancel, not before it");
        if m.canceled {
            return (m, last);
        }
        last = m
            .events
            .last()
            .and_then(|e| e.kv.as_ref())
            .map_or(last, |kv| kv.mod_revision);
    }
}
