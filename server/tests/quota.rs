//! SPEC E20: `tenure serve --quota-backend-bytes` and the Alarm RPC side by side with a real
//! etcd (Debian's etcd-server): the same etcdctl commands and the same raw Alarm requests get
//! the same answers (member IDs, addresses, counts and revisions aside, which differ anyway).

mod common;

use std::process::Command;

use common::{etcdctl, temp_db, text, Etcd, Server};
use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client};

/// Bytes of each value the fill writes.
const VALUE: usize = 64 << 10;
/// Room the quota leaves above an empty database.
const ROOM: u64 = 1 << 20;

/// A number field of `endpoint status -w json`.
fn status_field(addr: &str, field: &str) -> u64 {
    let out = text(&etcdctl(addr, &["endpoint", "status", "-w", "json"], None).stdout);
    let at = out
        .find(&format!("\"{field}\":"))
        .unwrap_or_else(|| panic!("{out}"));
    out[at + field.len() + 3..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// The `errors` of `endpoint status -w json` (absent: none).
fn status_errors(addr: &str) -> String {
    let out = text(&etcdctl(addr, &["endpoint", "status", "-w", "json"], None).stdout);
    match out.find("\"errors\":") {
        Some(at) => out[at..].split(']').next().unwrap().to_string() + "]",
        None => "[]".into(),
    }
}

/// etcdctl's stderr without its client log lines (timestamps, connection IDs).
fn errors_of(stderr: &[u8]) -> String {
    text(stderr)
        .lines()
        .filter(|l| !l.starts_with("{\"level\""))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// One etcdctl command's answer with the endpoint's own names replaced.
fn run(addr: &str, member: u64, args: &[&str], stdin: Option<&str>) -> String {
    let out = etcdctl(addr, args, stdin);
    let hex = format!("{member:x}");
    format!(
        "{args:?} ok={} {}{}",
        out.status.success(),
        text(&out.stdout),
        errors_of(&out.stderr)
    )
    .replace(&member.to_string(), "<member>")
    .replace(&hex, "<member>")
    .replace(addr, "<addr>")
}

/// Puts `VALUE`-byte values until one is refused; the refused put's answer.
fn fill(addr: &str, member: u64) -> String {
    let value = "x".repeat(VALUE);
    for i in 0..256 {
        let key = format!("fill/{i:03}");
        let out = etcdctl(addr, &["put", &key], Some(&value));
        if !out.status.success() {
            assert!(i > 0, "the first put was refused: {}", text(&out.stderr));
            return run(addr, member, &["put", "fill/last"], Some(&value));
        }
    }
    panic!("16 MiB written and {addr} never refused a put");
}

/// The whole story: fill, what is refused and what is not, the alarm, recovery.
fn transcript(addr: &str) -> Vec<String> {
    let member = status_field(addr, "member_id");
    let mut t = vec![fill(addr, member)];
    let mut step = |args: &[&str]| t.push(run(addr, member, args, None));
    step(&["put", "small", "v"]);
    step(&["lease", "grant", "60"]);
    step(&["alarm", "list"]);
    step(&["get", "small"]);
    step(&["get", "fill/000", "--print-value-only=false", "--keys-only"]);
    t.push(status_errors(addr).replace(&member.to_string(), "<member>"));
    // Counts and revisions differ between the two: only success is compared.
    let ok = |args: &[&str]| etcdctl(addr, args, None).status.success();
    t.push(format!("del ok={}", ok(&["del", "fill/", "--prefix"])));
    let rev = status_field(addr, "revision").to_string();
    t.push(format!(
        "compact ok={}",
        ok(&["compact", &rev, "--physical"])
    ));
    let mut step = |args: &[&str]| t.push(run(addr, member, args, None));
    step(&["defrag"]);
    step(&["alarm", "disarm"]);
    step(&["alarm", "list"]);
    step(&["alarm", "disarm"]);
    step(&["put", "small", "v"]);
    t.push(format!("grant ok={}", ok(&["lease", "grant", "60"])));
    t
}

#[test]
fn e20_past_the_quota_serve_and_etcd_refuse_alarm_and_recover_alike() {
    let dir = tempfile::tempdir().unwrap();
    // etcd's empty backend is some tens of KiB: ROOM above it.
    let etcd = Etcd::start_with(dir.path(), &["--quota-backend-bytes", &ROOM.to_string()]);
    let (_d, db) = temp_db();
    // tenure's empty file, measured, plus the same room.
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = Server::start(&probe_dir.path().join("probe"), &[]);
    let empty = status_field(&probe.addr, "dbSize");
    drop(probe);
    let quota = (empty + ROOM).to_string();
    let s = Server::start(&db, &["--quota-backend-bytes", &quota]);

    let theirs = transcript(&etcd.addr);
    let ours = transcript(&s.addr);
    for (a, b) in theirs.iter().zip(&ours) {
        assert_eq!(a, b, "etcd (left) and tenure serve (right) differ");
    }
    assert_eq!(theirs.len(), ours.len());
    assert!(
        ours[0].contains("etcdserver: mvcc: database space exceeded"),
        "{ours:?}"
    );
    assert!(
        ours[3].contains("memberID:<member> alarm:NOSPACE"),
        "{ours:?}"
    );
}

#[test]
fn e20_the_nospace_alarm_survives_a_restart_and_metrics_show_it() {
    let (_d, db) = temp_db();
    let s = Server::start(&db, &["--quota-backend-bytes", "1"]);
    let member = status_field(&s.addr, "member_id");
    let refused = run(&s.addr, member, &["put", "k", "v"], None);
    assert!(refused.contains("database space exceeded"), "{refused}");
    let metrics = text(
        &Command::new("curl")
            .args(["-s", &format!("http://{}/metrics", s.addr)])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(
        metrics.contains("\netcd_server_quota_backend_bytes 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("\ntenure_server_alarm_nospace 1\n"),
        "{metrics}"
    );
    assert_eq!(s.terminate().code(), Some(0));

    // No quota now (negative: off, as etcd), but the alarm was kept: still refused.
    let s = Server::start(&db, &["--quota-backend-bytes", "-1"]);
    let list = run(&s.addr, member, &["alarm", "list"], None);
    assert!(list.contains("memberID:<member> alarm:NOSPACE"), "{list}");
    let refused = run(&s.addr, member, &["put", "k", "v"], None);
    assert!(refused.contains("database space exceeded"), "{refused}");
    run(&s.addr, member, &["alarm", "disarm"], None);
    let put = run(&s.addr, member, &["put", "k", "v"], None);
    assert!(put.contains("ok=true OK"), "{put}");
    let metrics = text(
        &Command::new("curl")
            .args(["-s", &format!("http://{}/metrics", s.addr)])
            .output()
            .unwrap()
            .stdout,
    );
    assert!(
        metrics.contains("\ntenure_server_alarm_nospace 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("\netcd_server_quota_backend_bytes 0\n"),
        "{metrics}"
    );
}

/// Raw Alarm requests (etcdctl only lists and disarms) and what a CORRUPT alarm refuses.
async fn alarm_story(url: String, addr: &str) -> Vec<String> {
    let mut c = Client::connect([url], None).await.unwrap();
    let mut t = Vec::new();
    let member = |m: u64| {
        let mut o = AlarmOptions::new();
        o.with_member(m);
        Some(o)
    };
    let calls = [
        // NOSPACE first: etcd then checks CORRUPT first, as tenure always does.
        (AlarmAction::Activate, AlarmType::Nospace, 9),
        (AlarmAction::Activate, AlarmType::Corrupt, 5),
        (AlarmAction::Activate, AlarmType::Corrupt, 5),
        (AlarmAction::Get, AlarmType::Corrupt, 0),
        (AlarmAction::Get, AlarmType::None, 0),
    ];
    for (action, kind, m) in calls {
        let r = c.alarm(action, kind, member(m)).await.unwrap();
        let mut got: Vec<_> = r
            .alarms()
            .iter()
            .map(|a| (a.member_id(), a.alarm()))
            .collect();
        got.sort_by_key(|a| a.0);
        t.push(format!("{action:?} {kind:?} {m}: {got:?}"));
    }
    for args in [
        &["put", "k", "v"][..],
        &["del", "k"],
        &["get", "k"],
        &["lease", "grant", "5"],
    ] {
        let out = etcdctl(addr, args, None);
        t.push(format!(
            "{args:?} ok={} {}{}",
            out.status.success(),
            text(&out.stdout),
            errors_of(&out.stderr)
        ));
    }
    let calls = [
        (AlarmAction::Deactivate, AlarmType::Corrupt, 5),
        (AlarmAction::Deactivate, AlarmType::Corrupt, 5),
        (AlarmAction::Deactivate, AlarmType::Nospace, 9),
        (AlarmAction::Get, AlarmType::None, 0),
    ];
    for (action, kind, m) in calls {
        let r = c.alarm(action, kind, member(m)).await.unwrap();
        let got: Vec<_> = r
            .alarms()
            .iter()
            .map(|a| (a.member_id(), a.alarm()))
            .collect();
        t.push(format!("{action:?} {kind:?} {m}: {got:?}"));
    }
    let out = etcdctl(addr, &["put", "k", "v"], None);
    t.push(format!("put after ok={}", out.status.success()));
    t
}

#[tokio::test(flavor = "multi_thread")]
async fn e20_alarm_activate_deactivate_get_answer_as_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = Etcd::start(dir.path());
    let (_d, db) = temp_db();
    let s = Server::start(&db, &[]);
    let theirs = alarm_story(etcd.url(), &etcd.addr).await;
    let ours = alarm_story(s.url(), &s.addr).await;
    assert_eq!(theirs, ours, "etcd (left) and tenure serve (right) differ");
    assert!(
        ours.iter().any(|l| l.contains("corrupt cluster")),
        "{ours:?}"
    );
}
