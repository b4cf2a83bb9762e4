//! Starts `tenure serve` on a random loopback port and runs real etcd clients against it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT` of the first TCP listener.
    pub addr: String,
    pub log: Arc<Mutex<String>>,
}

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tenure")
}

impl Server {
    /// Starts `tenure serve FILE --listen 127.0.0.1:0 EXTRA...` and waits until it serves.
    pub(crate) fn start(file: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(bin())
            .arg("serve")
            .arg(file)
            .args(["--listen", "127.0.0.1:0"])
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
                if let Some(rest) = line.split("http://").nth(1) {
                    let addr = rest.split([',', ' ']).next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("tenure serve did not start: {}", log.lock().unwrap()));
        Server { child, addr, log }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
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

pub(crate) fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.tenure");
    (dir, path)
}
