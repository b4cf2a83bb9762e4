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
    ONCE.call_once(ignore_now_if_default);
}

/// What [`ignore_if_default`] does once.
fn ignore_now_if_default() {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets SIGPIPE's disposition (a handler address, SIG_DFL or SIG_IGN) and returns the one
    /// it replaced.
    fn set(to: libc::sighandler_t) -> libc::sighandler_t {
        // SAFETY: sigaction with zeroed structs and an empty mask; the handler below does
        // nothing and is never run (no SIGPIPE is raised here).
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = to;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(libc::SIGPIPE, &new, &mut old), 0);
            old.sa_sigaction
        }
    }

    extern "C" fn programs_handler(_: libc::c_int) {}

    #[test]
    fn p18_sigpipe_at_its_default_is_ignored_and_a_programs_handler_is_left_alone() {
        // One test, since the disposition is the process's: it is put back at the end.
        let before = set(libc::SIG_DFL);
        ignore_now_if_default();
        assert_eq!(
            set(libc::SIG_DFL),
            libc::SIG_IGN,
            "the default becomes ignored"
        );
        let handler = programs_handler as extern "C" fn(libc::c_int) as libc::sighandler_t;
        set(handler);
        ignore_now_if_default();
        assert_eq!(set(before), handler, "the program's handler stays");
    }
}
