//! Why a TLS connection failed. Under TLS 1.3 a server refuses a client certificate (missing,
//! expired, from another CA) only after the handshake, so gRPC just sees the connection close;
//! when connect's first call fails over `https://`, one handshake is made here by hand, with
//! the same CA, certificate and name, to report the server's own reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use super::errors::{at_endpoints, tls_refused};
use super::Credentials;
use crate::error::Error;

/// How long the server gets to refuse us once the handshake is done.
const REFUSAL_WINDOW: Duration = Duration::from_secs(1);

fn config(creds: &Credentials) -> Result<ClientConfig, String> {
    let mut roots = RootCertStore::empty();
    match &creds.ca_file {
        Some(p) => {
            let pem = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            for c in CertificateDer::pem_slice_iter(&pem) {
                roots
                    .add(c.map_err(|e| format!("{}: {e}", p.display()))?)
                    .map_err(|e| e.to_string())?;
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let b = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut c = match creds.identity() {
        Some((cert, key)) => {
            let pem = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
            let chain = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{}: {e}", cert.display()))?;
            let key =
                PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
            b.with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
        None => b.with_no_client_auth(),
    };
    c.alpn_protocols = vec![b"h2".to_vec()];
    Ok(c)
}

/// The reason a TLS connection to `endpoint` (`https://HOST:PORT`) fails, or `None` if a
/// handshake succeeds and the server keeps the connection (the failure is elsewhere).
pub(super) async fn tls_refusal(endpoint: &str, creds: &Credentials) -> Option<String> {
    let hostport = endpoint.strip_prefix("https://")?;
    let config = match config(creds) {
        Ok(c) => c,
        Err(e) => return Some(e),
    };
    let host = match creds.server_name.as_deref() {
        Some(n) => n.to_string(),
        None => {
            let h = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
            h.trim_start_matches('[').trim_end_matches(']').to_string()
        }
    };
    let name = ServerName::try_from(host).ok()?;
    let tcp = tokio::net::TcpStream::connect(hostport).await.ok()?;
    let mut tls = match tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
    {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let mut byte = [0u8; 1];
    // A server that requires client certificates refuses ours with an alert, or by closing
    // (or resetting) the connection before the alert is read.
    const CLOSED: &str = "the server closed the connection after the TLS handshake: it refused \
                          this client's certificate (none, expired, or not from its CA)";
    match tokio::time::timeout(REFUSAL_WINDOW, tls.read(&mut byte)).await {
        Ok(Err(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) =>
        {
            Some(format!("{CLOSED} ({e})"))
        }
        Ok(Err(e)) => Some(e.to_string()),
        Ok(Ok(0)) => Some(CLOSED.into()),
        _ => None,
    }
}

/// Whether the server at `endpoint` (`http://HOST:PORT`) answers a TLS hello with a
/// certificate: then the plain-text endpoint names a TLS port.
pub(super) async fn speaks_tls(endpoint: &str) -> bool {
    let Some(hostport) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let Ok(builder) = ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions() else {
        return false;
    };
    // No roots: any certificate is refused, which is all this needs to see.
    let config = builder
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth();
    let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let (Ok(name), Ok(tcp)) = (
        ServerName::try_from(host),
        tokio::net::TcpStream::connect(hostport).await,
    ) else {
        return false;
    };
    match tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
    {
        Ok(_) => true,
        Err(e) => e
            .get_ref()
            .and_then(|i| i.downcast_ref::<tokio_rustls::rustls::Error>())
            .is_some_and(|e| matches!(e, tokio_rustls::rustls::Error::InvalidCertificate(_))),
    }
}

/// A connection failure `e` as `Unauthenticated` when an `https://` endpoint's TLS refuses us
/// (or we it), or an `http://` endpoint is a TLS port, with the reason; else `e`.
pub(super) fn refusal(
    rt: &tokio::runtime::Runtime,
    e: Error,
    endpoints: &[String],
    creds: &Credentials,
    limit: Duration,
) -> Error {
    if !matches!(e, Error::Unavailable(_)) || limit.is_zero() {
        return e;
    }
    let until = Instant::now() + limit;
    for ep in endpoints {
        let left = until.saturating_duration_since(Instant::now());
        let why = rt.block_on(async {
            tokio::time::timeout(left, async {
                if ep.starts_with("https://") {
                    tls_refusal(ep, creds).await
                } else if speaks_tls(ep).await {
                    Some("the server speaks TLS there; use https://".to_string())
                } else {
                    None
                }
            })
            .await
        });
        if let Ok(Some(why)) = why {
            let e =
                tls_refused(&why).unwrap_or_else(|| Error::Unauthenticated(format!("TLS: {why}")));
            return at_endpoints(e, ep);
        }
    }
    e
}
