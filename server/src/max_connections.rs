//! `--max-connections`: a bound on the client connections `tenure serve` holds at once over all
//! its listeners, TLS handshakes still in progress included. At the bound the listeners stop
//! accepting (new connections wait in the kernel's backlog, as Go's `LimitListener` makes an
//! etcd listener wait) until one closes, so a flood of connections or of slow handshakes costs
//! bounded memory and descriptors.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

/// The default of `--max-connections`: well under the usual limit of 1024 descriptors.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 512;

/// The free slots of the bound, shared by every listener.
pub(crate) type Slots = Arc<Semaphore>;

/// Takes a slot, waiting while none is free; `None` once `closed` resolves first (the server
/// stops).
pub(crate) async fn slot(
    slots: &Slots,
    closed: impl Future<Output = ()>,
) -> Option<OwnedSemaphorePermit> {
    tokio::select! {
        _ = closed => None,
        s = slots.clone().acquire_owned() => s.ok(),
    }
}

/// A connection holding one slot of the bound until it is dropped (closed).
pub(crate) struct Limited<S> {
    inner: S,
    _slot: OwnedSemaphorePermit,
}

impl<S> Limited<S> {
    pub(crate) fn new(inner: S, slot: OwnedSemaphorePermit) -> Limited<S> {
        Limited { inner, _slot: slot }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Limited<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Limited<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S: Connected> Connected for Limited<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// The connections `accept` yields, each after taking a slot, until the receiver is dropped
/// (the server stopped).
pub(crate) fn incoming<S, A, Fut>(slots: Slots, accept: A) -> ReceiverStream<io::Result<Limited<S>>>
where
    A: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = io::Result<S>> + Send,
    S: Send + 'static,
{
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let Some(slot) = slot(&slots, tx.closed()).await else {
                return;
            };
            let conn = tokio::select! {
                _ = tx.closed() => return,
                c = accept() => c,
            };
            match conn {
                Ok(c) => {
                    if tx.send(Ok(Limited::new(c, slot))).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // Out of descriptors and the like: say so, wait a little, go on.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    ReceiverStream::new(rx)
}
