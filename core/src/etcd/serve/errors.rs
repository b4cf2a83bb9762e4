//! tenure's errors as etcd's gRPC statuses, through the core's one table
//! (`crate::etcd::errors`), which the etcd client reads the other way.

use crate::error::Error;
use crate::etcd::errors::{self as table, Code, EtcdError};
use crate::etcd::Refusal;
use tonic::Status;

/// etcd's status for one of its errors (its code and exact text).
/// The status etcd answers for `e`.
pub fn etcd(e: EtcdError) -> Status {
    Status::new(grpc(e.code()), e.text())
}

/// tenure's error as etcd would report the same condition.
/// The status of a tenure error, through the one table.
pub fn status(e: Error) -> Status {
    let (code, text) = table::status(&e);
    Status::new(grpc(code), text)
}

/// A refused request, as etcd refuses it.
/// The status of a request the apply algorithm refused.
pub fn refusal(r: Refusal) -> Status {
    etcd(EtcdError::of_refusal(r))
}

fn grpc(code: Code) -> tonic::Code {
    tonic::Code::from_i32(code as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_keeps_its_grpc_number_and_text() {
        for row in EtcdError::all() {
            let s = etcd(row);
            assert_eq!(s.code() as i32, row.code() as i32, "{row:?}");
            assert_eq!(s.message(), row.text());
        }
        let s = status(Error::InvalidArgument("key must not be empty".into()));
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert_eq!(s.message(), "etcdserver: key is not provided");
    }
}
