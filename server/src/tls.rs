//! TLS for `tenure serve` (SPEC E13) with etcd's flags: rustls (ring), never OpenSSL. The
//! certificate, key and trusted CA are read again on SIGHUP; new connections get the new ones,
//! established connections keep the session they have.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::crypto::ring::default_provider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::max_connections::{slot, Limited, Slots};

/// The files named by `--cert-file`, `--key-file`, `--trusted-ca-file` and whether
/// `--client-cert-auth` requires a client certificate from that CA.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) ca: Option<PathBuf>,
    pub(crate) client_auth: bool,
}

/// The TLS configuration new connections get, swapped whole on reload.
#[derive(Debug)]
pub(crate) struct Tls {
    files: Files,
    /// Read by every accepted connection, replaced by `reload` (SIGHUP).
    current: RwLock<Arc<ServerConfig>>,
}

fn certs(path: &PathBuf, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{what} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

fn config(f: &Files) -> Result<ServerConfig, String> {
    let chain = certs(&f.cert, "--cert-file")?;
    let key = PrivateKeyDer::from_pem_file(&f.key)
        .map_err(|e| format!("--key-file {}: {e}", f.key.display()))?;
    let provider = Arc::new(default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match (&f.ca, f.client_auth) {
        (Some(ca), true) => {
            let mut roots = RootCertStore::empty();
            for c in certs(ca, "--trusted-ca-file")? {
                roots
                    .add(c)
                    .map_err(|e| format!("--trusted-ca-file {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("--trusted-ca-file {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        (None, true) => {
            return Err("--client-cert-auth needs --trusted-ca-file (the CA of the clients)".into())
        }
        (_, false) => builder.with_no_client_auth(),
    };
    let mut c = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("--cert-file/--key-file: {e}"))?;
    // gRPC is HTTP/2; Go clients insist that ALPN says so.
    // HTTP/1.1 too: /health, /version and /metrics beside gRPC (E16).
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(c)
}

impl Tls {
    /// Reads and checks the files (an error names the flag and the file).
    pub(crate) fn load(files: Files) -> Result<Tls, String> {
        let c = config(&files)?;
        Ok(Tls {
            files,
            current: RwLock::new(Arc::new(c)),
        })
    }

    /// Reads the files again; on an error the configuration in use stays (and the error says
    /// why the new one was refused).
    pub(crate) fn reload(&self) -> Result<(), String> {
        let c = config(&self.files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(c);
        Ok(())
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

/// The connections of `listener` whose TLS handshake succeeds, until the receiver is dropped
/// (the server stopped). A refused handshake is logged and closed: it never reaches a handler.
/// Each connection holds one of `slots` from before it is accepted, through its handshake,
/// until it closes (`--max-connections`).
pub(crate) fn incoming(
    listener: TcpListener,
    tls: Arc<Tls>,
    slots: Slots,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<Limited<TlsStream<TcpStream>>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let Some(slot) = slot(&slots, tx.closed()).await else {
                return;
            };
            let (tcp, peer) = tokio::select! {
                _ = tx.closed() => return,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors and the like: say so, wait a little, go on.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let _ = tcp.set_nodelay(true);
            // The handshake and then the HTTP/2 preface within --connection-setup-timeout; a
            // slow client never holds up the others (each handshake runs on its own task).
            let limit = slots.setup_timeout;
            let deadline = tokio::time::Instant::now() + limit;
            let acceptor = tls.acceptor();
            let tx = tx.clone();
            tokio::spawn(async move {
                match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => {
                        let _ = tx.send(Ok(Limited::new(s, slot, deadline))).await;
                    }
                    Ok(Err(e)) => tracing::info!("TLS handshake with {peer} refused: {e}"),
                    Err(_) => {
                        tracing::info!("TLS handshake with {peer}: no answer in {limit:?}")
                    }
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
