//! The bench binaries' command lines: `--help` prints the binary's doc comment and exits 0; a
//! mistake is one line on stderr and exit status 2, never a panic.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_memory"))
        .args(args)
        .output()
        .expect("run the memory bench");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_prints_the_usage_and_exits_0() {
    for help in ["--help", "-h"] {
        let (code, out, err) = run(&[help]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("Memory per lease"), "{out}");
        assert!(out.contains("--leases <LEASES>"), "{out}");
        assert!(out.contains("--keys <KEYS>"), "{out}");
        assert!(out.contains("[default: 1000000]"), "{out}");
        assert!(err.is_empty(), "{err}");
    }
}

#[test]
fn an_unknown_option_or_a_bad_value_is_one_line_and_exit_2() {
    for bad in [
        &["--bogus", "1"][..],
        &["--leases", "many"],
        &["--leases"],
        &["leases"],
        &["--keys", "2"],
    ] {
        let (code, out, err) = run(bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(out.is_empty(), "{bad:?}: {out}");
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
        assert!(err.starts_with("memory: "), "{bad:?}: {err}");
        assert!(!err.contains("panicked"), "{bad:?}: {err}");
    }
}
