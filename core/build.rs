//! Compiles the lock and election services (server side only, feature `serve`); etcd's other
//! services come from the etcd-client crate.
fn main() {
    println!("cargo:rerun-if-changed=proto");
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
