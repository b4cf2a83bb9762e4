//! `--max-connections`: a bound on the client connections `tenure serve` holds at once over all
//! its listeners, TLS handshakes still in progress included. At the bound the listeners stop
//! accepting (new connections wait in the kernel's backlog, as Go's `LimitListener` makes an
//! etcd listener wait) until one closes, so a flood of connections or of slow handshakes costs
//! bounded memory and descriptors.
//!
//! `--connection-setup-timeout`: a connection that has not finished its TLS handshake and sent
//! the HTTP/2 preface within that time of being accepted is closed, so connections that never
//! speak (or stop half-way through the preface) give their slot back.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;

/// The default of `--max-connections`: well under the usual limit of 1024 descriptors.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 512;

/// The bytes of a client's HTTP/2 preface: its 24-byte magic and the header of the SETTINGS
/// frame that must follow (whose payload may be empty).
const PREFACE_BYTES: usize = 24 + 9;

/// The bound, shared by every listener: its free slots and how long a connection has to set up.
#[derive(Clone, Debug)]
pub(crate) struct Slots {
    free: Arc<Semaphore>,
    pub(crate) setup_timeout: Duration,
}

impl Slots {
    pub(crate) fn new(max_connections: u32, setup_timeout: Duration) -> Slots {
        Slots {
            free: Arc::new(Semaphore::new(max_connections as usize)),
            setup_timeout,
        }
    }
}

/// Takes a slot, waiting while none is free; `None` once `closed` resolves first (the server
/// stops).
pub(crate) async fn slot(
    slots: &Slots,
    closed: impl Future<Output = ()>,
) -> Option<OwnedSemaphorePermit> {
    tokio::select! {
        _ = closed => None,
        s = slots.free.clone().acquire_owned() => s.ok(),
    }
}

/// A connection holding one slot of the bound until it is dropped (closed).
pub(crate) struct Limited<S> {
    inner: S,
    _slot: OwnedSemaphorePermit,
    /// Until the preface is in: how many of its bytes are still to come, and the deadline.
    setup: Option<(usize, Pin<Box<Sleep>>)>,
}

impl<S> Limited<S> {
    /// `inner` with its slot; it must have sent its HTTP/2 preface by `setup_deadline`.
    pub(crate) fn new(inner: S, slot: OwnedSemaphorePermit, setup_deadline: Instant) -> Limited<S> {
        Limited {
            inner,
            _slot: slot,
            setup: Some((
                PREFACE_BYTES,
                Box::pin(tokio::time::sleep_until(setup_deadline)),
            )),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Limited<S> {
    /// Reads, failing once the setup deadline passes before the preface is in: hyper then
    /// drops the connection and its slot.
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some((_, deadline)) = &mut this.setup {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no HTTP/2 preface within --connection-setup-timeout",
                )));
            }
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let (Poll::Ready(Ok(())), Some((left, _))) = (&read, &mut this.setup) {
            *left = left.saturating_sub(buf.filled().len() - before);
            if *left == 0 {
                this.setup = None;
            }
        }
        read
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
                    let deadline = Instant::now() + slots.setup_timeout;
                    if tx.send(Ok(Limited::new(c, slot, deadline))).await.is_err() {
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
