//! Everything etcd-shaped, used by `tenure serve` and the embedded engine alike: etcd's request
//! and response vocabulary (the one apply algorithm runs it), the one table between tenure's
//! errors and etcd's statuses, and (feature `remote`) the etcd client behind `Tenure::connect`,
//! and (feature `serve`) etcd's v3 services over a `Tenure`.

#[cfg(feature = "remote")]
pub(crate) mod client;
pub mod errors;
pub(crate) mod lower;
mod request;
#[cfg(feature = "serve")]
pub mod serve;

pub use self::request::{
    DeleteRangeRequest, Outcome, PutRequest, RangeCompare, Refusal, RequestOp, ResponseOp,
    TxnRequest, WatchStart,
};
pub use crate::kv::range::{RangeRequest, RangeResponse, SortOrder, SortTarget};
