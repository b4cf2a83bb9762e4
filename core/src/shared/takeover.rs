//! A non-owner's wait to take the file over (SPEC P5): a thread that tries the ownership lock
//! every `POLL` and, once it has it, makes this process the owner (`Sharing::become_owner`:
//! recovery, the previous owner's session leases revoked, the socket served).
//!
//! A poll rather than a blocking `flock`: a thread blocked in `flock` cannot be woken without a
//! signal, and this one must stop when its handle closes. The poll is one syscall per `POLL`,
//! and adds at most `POLL` to a takeover.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{bounded, RecvTimeoutError, Sender};

use super::Sharing;
use crate::error::{Error, Result};

/// How often the lock is tried.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// The pause after a failed takeover (the file could not be opened) before trying again.
const RETRY: Duration = Duration::from_secs(1);

/// The running wait; `stop` ends it.
#[derive(Debug)]
pub(crate) struct Takeover {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Takeover {
    pub(crate) fn start(sharing: Arc<Sharing>) -> Result<Takeover> {
        let (stop, stopped) = bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("tenure-takeover".into())
            .spawn(move || loop {
                match stopped.recv_timeout(POLL) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                let failed = match sharing.ownership.try_take() {
                    Ok(false) => continue,
                    Ok(true) => match sharing.become_owner() {
                        Ok(_) => return,
                        Err(e) => e,
                    },
                    Err(e) => e,
                };
                log::error!(
                    "shared mode: cannot take {} over: {failed}",
                    sharing.file.display()
                );
                if !matches!(stopped.recv_timeout(RETRY), Err(RecvTimeoutError::Timeout)) {
                    return;
                }
            })
            .map_err(|e| Error::storage(format!("shared mode: cannot start a thread: {e}")))?;
        Ok(Takeover {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Ends the wait (a takeover in progress finishes first). Idempotent.
    pub(crate) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Takeover {
    fn drop(&mut self) {
        self.stop();
    }
}
