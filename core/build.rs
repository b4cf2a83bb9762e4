//! Compiles the lock and election services (server side only, feature `serve`); etcd's other
//! services come from the etcd-client crate.
//!
//! It also names its `proto/` directory to the build scripts of crates that depend on this one
//! (`DEP_TENURE_PROTO_DIR`, through `links`), so they read these files rather than copies.
fn main() {
    println!("cargo:rerun-if-changed=proto");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    println!("cargo:proto_dir={}", dir.display());
    #[cfg(feature = "serve")]
    if let Err(e) = tonic_prost_build::configure()
        .build_client(false)
        .compile_protos(
            &["proto/v3lock.proto", "proto/v3election.proto"],
            &["proto"],
        )
    {
        panic!("cannot compile core/proto (is protoc installed? `make serve-tools`): {e}");
    }
}
