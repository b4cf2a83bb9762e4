//! etcd's v3 gRPC services over one `Tenure` (feature `serve`): KV, Lease, Cluster, Watch,
//! Lock and Election. `tenure serve` puts them behind its listeners; shared mode serves them on
//! the unix socket beside the file.

mod bound;
pub mod convert;
pub mod coordination;
pub mod errors;
pub mod maintenance;
pub mod service;
pub mod watch;
