//! The messages the JSON gateway transcodes, with serde impls in etcd's JSON (build.rs): its
//! own copies, decoded from and encoded to the same bytes the gRPC services read and write.
#![allow(
    unreachable_pub,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic,
    clippy::nursery
)]

pub(crate) mod etcdserverpb {
    include!(concat!(env!("OUT_DIR"), "/gateway/etcdserverpb.rs"));
    include!(concat!(env!("OUT_DIR"), "/gateway/etcdserverpb.serde.rs"));
}

pub(crate) mod v3lockpb {
    include!(concat!(env!("OUT_DIR"), "/gateway/v3lockpb.rs"));
    include!(concat!(env!("OUT_DIR"), "/gateway/v3lockpb.serde.rs"));
}

pub(crate) mod v3electionpb {
    include!(concat!(env!("OUT_DIR"), "/gateway/v3electionpb.rs"));
    include!(concat!(env!("OUT_DIR"), "/gateway/v3electionpb.serde.rs"));
}
