//! The committed C header, include/tenure.h, must be exactly what cbindgen generates from this
//! crate with ffi/cbindgen.toml. `make header` (TENURE_UPDATE_HEADER=1) rewrites it.

use std::path::PathBuf;

fn generate() -> String {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("ffi/cbindgen.toml is readable and valid");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        // `tenure_stats` is the core's `Stats` (renamed in cbindgen.toml): one field list.
        .with_src(crate_dir.join("../core/src/types.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

fn header_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../include/tenure.h")
}

#[test]
fn committed_header_is_what_cbindgen_generates() {
    let generated = generate();
    let path = header_path();
    if std::env::var_os("TENURE_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("include/tenure.h is writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "include/tenure.h is out of date with ffi/src (first difference at line {}).\n\
             Regenerate it with `make header` and commit it.",
            first + 1
        );
    }
}

#[test]
fn header_has_guards_version_defines_and_every_api_md_function() {
    let h = generate();
    for needle in [
        "#ifndef TENURE_H",
        "#define TENURE_H",
        "extern \"C\" {",
        "#define TENURE_VERSION_MAJOR ",
        "#define TENURE_VERSION_MINOR ",
        "#define TENURE_VERSION_PATCH ",
        "typedef int32_t tenure_result;",
        "typedef struct tenure tenure;",
        "typedef struct tenure_options {",
        "typedef struct tenure_stats {",
    ] {
        assert!(h.contains(needle), "header lacks {needle:?}");
    }
    // The core of the C API, by name.
    for f in [
        "tenure_options_init(",
        "tenure_open(",
        "void tenure_close(",
        "tenure_lease_grant(",
        "tenure_lease_revoke(",
        "tenure_lease_renew(",
        "tenure_lease_time_to_live(",
        "tenure_lease_attach(",
        "tenure_lease_detach(",
        "tenure_lease_of(",
        "tenure_lease_checkpoint(",
        "tenure_leases(",
        "tenure_promote(",
        "tenure_demote(",
        "tenure_expired_next(",
        "tenure_put(",
        "tenure_get(",
        "tenure_delete(",
        "tenure_range(",
        "tenure_watch(",
        "tenure_watcher_next(",
        "tenure_stats_read(",
        "const char *tenure_result_str(tenure_result code);",
        "const char *tenure_last_error_message(void);",
        "const char *tenure_version(void);",
    ] {
        assert!(h.contains(f), "header lacks {f:?}");
    }
}
