//! SPEC E19: every Auth RPC is `Unimplemented` with a message saying authentication is not
//! served and what decides access instead.

mod common;

use common::{temp_db, text, Server};

#[test]
fn e19_every_auth_call_says_auth_is_not_served_and_why() {
    let (_dir, file) = temp_db();
    let s = Server::start(&file, &[]);
    for args in [
        &["auth", "enable"][..],
        &["user", "add", "u:p"],
        &["user", "list"],
        &["role", "add", "r"],
        &["role", "grant-permission", "r", "read", "k"],
        // A client with a user and password authenticates first.
        &["--user", "u:p", "get", "k"],
    ] {
        let out = s.etcdctl(args);
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("authentication is not served by tenure serve")
                && err.contains("TLS client certificates"),
            "{args:?}: {err}"
        );
    }
    // Everything else is served as before.
    s.ok(&["put", "k", "v"]);
}
