//! etcd-client's errors as tenure's: a gRPC status through the one table
//! ([`crate::etcd::errors`]), a transport failure as `Unavailable` (or, for a TLS refusal,
//! `Unauthenticated` with the reason).

use etcd_client as etcd;

use super::diagnose::tls_refused;
use crate::error::Error;
use crate::etcd::errors::{self, Code, EtcdError};
use crate::types::LeaseId;

pub(super) fn unavailable(e: impl std::fmt::Display) -> Error {
    Error::Unavailable(e.to_string())
}

/// `e` with the endpoints it concerns in front (connect's errors: which server refused whom).
pub(super) fn at_endpoints(e: Error, endpoints: &str) -> Error {
    let at = |m: String| {
        if m.contains(endpoints) {
            m
        } else {
            format!("{endpoints}: {m}")
        }
    };
    match e {
        Error::Unauthenticated(m) => Error::Unauthenticated(at(m)),
        Error::PermissionDenied(m) => Error::PermissionDenied(at(m)),
        Error::Unavailable(m) => Error::Unavailable(at(m)),
        other => other,
    }
}

/// `top` and the causes below `e`, innermost last: a TLS refusal hides several layers down.
fn chain(top: String, e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = top;
    let mut next = e.source();
    while let Some(s) = next {
        let m = s.to_string();
        if !out.contains(&m) {
            out = format!("{out}: {m}");
        }
        next = s.source();
    }
    out
}

/// etcd's errors as tenure's (a status through the one table). `lease`: the lease the call was
/// about, for lease errors.
pub(super) fn map_err(e: etcd::Error, lease: Option<LeaseId>) -> Error {
    match e {
        etcd::Error::GRpcStatus(s) => {
            let code = Code::from_i32(s.code() as i32);
            if EtcdError::from_text(s.message()).is_some() {
                return errors::error(code, s.message(), lease);
            }
            let msg = chain(s.message().to_string(), &s);
            tls_refused(&msg).unwrap_or_else(|| errors::error(code, &msg, lease))
        }
        // etcd-client's own words for a keep-alive answered with TTL 0.
        etcd::Error::LeaseKeepAliveError(m) if m == "lease not found" => {
            Error::LeaseNotFound(lease.unwrap_or(LeaseId::new(0)))
        }
        etcd::Error::InvalidArgs(m) => Error::InvalidArgument(m),
        etcd::Error::InvalidUri(e) => Error::invalid(e.to_string()),
        etcd::Error::TransportError(e) => {
            let msg = chain(e.to_string(), &e);
            tls_refused(&msg).unwrap_or_else(|| unavailable(msg))
        }
        other => unavailable(chain(other.to_string(), &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, text: &str) -> etcd::Error {
        etcd::Error::GRpcStatus(tonic::Status::new(code, text.to_owned()))
    }

    #[test]
    fn a_status_goes_through_the_one_table() {
        for row in EtcdError::all() {
            let code = tonic::Code::from_i32(row.code() as i32);
            let lease = Some(LeaseId::new(9));
            let mapped = map_err(status(code, row.text()), lease);
            assert_eq!(
                mapped.code(),
                row.error(lease).code(),
                "{row:?}: {mapped:?}"
            );
        }
        assert!(matches!(
            map_err(status(tonic::Code::NotFound, "etcdserver: requested lease not found"), Some(LeaseId::new(9))),
            Error::LeaseNotFound(id) if id.get() == 9
        ));
        assert!(matches!(
            map_err(status(tonic::Code::Unavailable, "connection reset"), None),
            Error::Unavailable(m) if m == "connection reset"
        ));
    }

    #[test]
    fn client_side_errors_keep_their_kind() {
        let gone = etcd::Error::LeaseKeepAliveError("lease not found".into());
        assert!(
            matches!(map_err(gone, Some(LeaseId::new(4))), Error::LeaseNotFound(id) if id.get() == 4)
        );
        let other = etcd::Error::LeaseKeepAliveError("stream closed".into());
        assert!(matches!(map_err(other, None), Error::Unavailable(_)));
        let args = etcd::Error::InvalidArgs("bad".into());
        assert!(matches!(map_err(args, None), Error::InvalidArgument(m) if m == "bad"));
    }

    #[test]
    fn refusals_name_the_endpoints_once() {
        let e = at_endpoints(Error::PermissionDenied("no".into()), "http://a:1");
        assert_eq!(e.to_string(), "permission denied: http://a:1: no");
        let again = at_endpoints(e, "http://a:1");
        assert_eq!(again.to_string(), "permission denied: http://a:1: no");
        let other = at_endpoints(Error::NotLeader, "http://a:1");
        assert!(
            matches!(other, Error::NotLeader),
            "only the network's errors"
        );
    }

    #[test]
    fn the_cause_chain_is_read_to_the_bottom_without_repeats() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|l| l as _)
            }
        }
        let e = Layer(
            "top",
            Some(Box::new(Layer("mid", Some(Box::new(Layer("top", None)))))),
        );
        assert_eq!(chain("top".into(), &e), "top: mid");
    }
}
