//! SIGPIPE, ignored before the library first writes to a socket.
//!
//! A C program's SIGPIPE is at its default (end the process) unless it changed it; a write to a
//! socket whose peer closed (the owner of a shared file that just died, a `tenure serve` that
//! stopped) would then kill the program instead of failing with `EPIPE`, which the client turns
//! into a retry. Rust programs and Python already ignore SIGPIPE at start; gRPC's C core does as
//! this does. A handler or `SIG_IGN` the program set is left alone.

use std::sync::Once;

/// Sets SIGPIPE to ignored if it is at its default, once per process: called before the first
/// shared-mode `tenure_open` and the first `tenure_connect`.
pub(crate) fn ignore_if_default() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: sigaction with a zeroed (valid) struct out, then, only when the disposition is
        // SIG_DFL, with a struct that sets SIG_IGN and an empty mask; no handler code is run.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                return;
            }
            let mut ignore: libc::sigaction = std::mem::zeroed();
            ignore.sa_sigaction = libc::SIG_IGN;
            libc::sigemptyset(&mut ignore.sa_mask);
            libc::sigaction(libc::SIGPIPE, &ignore, std::ptr::null_mut());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disposition() -> libc::sighandler_t {
        // SAFETY: reads the disposition into a zeroed struct.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(
                libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old),
                0
            );
            old.sa_sigaction
        }
    }

    #[test]
    fn sigpipe_is_ignored_after_the_call() {
        // The Rust test harness already ignores SIGPIPE; the C tests (a process with SIGPIPE at
        // its default, tests/multiprocess) show the change from the default.
        ignore_if_default();
        assert_eq!(disposition(), libc::SIG_IGN);
    }
}
