//! The `shared` bench's command line (BENCHMARKS.md section 13): `--help` says what it measures,
//! a bad `--owner` or `--only` is one line and exit 2, and with no tenure, etcd or Python to
//! reach it says so instead of hanging.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shared"))
        .args(args)
        .output()
        .expect("run the shared bench");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_names_the_three_figures_and_the_owner_choice() {
    let (code, out, err) = run(&["--help"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Several processes on one file"), "{out}");
    for word in ["handoff", "roundtrip", "takeover", "--owner", "filelock"] {
        assert!(out.contains(word), "{word} missing: {out}");
    }
    // The children's options are internal.
    assert!(!out.contains("--role <"), "{out}");
}

#[test]
fn a_bad_owner_or_figure_is_one_line_and_exit_2() {
    for bad in [
        &["--owner", "daemon"][..],
        &["--only", "latency"],
        &["--handoffs", "x"],
    ] {
        let (code, out, err) = run(bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(out.is_empty(), "{bad:?}: {out}");
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
        assert!(err.starts_with("shared: "), "{bad:?}: {err}");
    }
}
