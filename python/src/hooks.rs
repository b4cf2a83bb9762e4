//! Process-level hooks: every open handle is tracked weakly so that
//! - at interpreter exit (`atexit`) the handles still open are closed cleanly (checkpoints,
//!   buffered writes flushed, file released), and
//! - in a child made by `os.fork()` the descriptors of inherited database files are closed, so
//!   the child does not keep the parent's file lock alive after the parent closes. The engine
//!   objects themselves are never touched in the child (see `ForkSafe`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::handle::PyTenure;
use crate::runtime;

static LIVE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn live(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    LIVE.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("weakref")?.getattr("WeakSet")?.call0()?.unbind())
    })
    .map(|s| s.bind(py))
}

/// Registers a new handle.
pub(crate) fn track(py: Python<'_>, db: &Bound<'_, PyTenure>) -> PyResult<()> {
    live(py)?.call_method1("add", (db,))?;
    Ok(())
}

fn handles<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTenure>>> {
    let mut out = Vec::new();
    for h in live(py)?.try_iter()? {
        if let Ok(h) = h?.cast_into::<PyTenure>() {
            out.push(h);
        }
    }
    Ok(out)
}

/// `atexit`: closes every handle still open. Errors are not raised at exit. Engine threads stop
/// entering the interpreter first (what closing ends is not delivered to Python), and those
/// inside it are waited for, so none runs Python code while the interpreter finalizes.
#[pyfunction]
pub(crate) fn _close_all(py: Python<'_>) {
    runtime::stop_attaching();
    if let Ok(hs) = handles(py) {
        for h in hs {
            let _ = h.call_method0("close");
        }
    }
    runtime::wait_detached(py, std::time::Duration::from_secs(2));
}

/// `os.register_at_fork(after_in_child=...)`: closes the child's copies of the descriptors of
/// every database file open in the parent, and in shared mode of its ownership lock file
/// (`<file>.lock`) and of the sockets bound to `<file>.sock` (the owner's listener and the
/// connections it accepted): else the child would keep the parent's ownership, and its clients'
/// connections, alive after the parent dies, and no other process could take over. Nothing of
/// the engines is run.
#[pyfunction]
pub(crate) fn _after_fork_in_child(py: Python<'_>) {
    runtime::reset_attached_after_fork();
    let Ok(hs) = handles(py) else { return };
    let files: Vec<std::path::PathBuf> = hs.iter().filter_map(|h| h.get().file.clone()).collect();
    if files.is_empty() {
        return;
    }
    // The socket's path as bound: from the path as given or from the canonical one.
    let sockets: Vec<std::path::PathBuf> = hs
        .iter()
        .flat_map(|h| [h.get().path.clone(), h.get().file.clone()])
        .flatten()
        .map(|f| beside(&f, ".sock"))
        .collect();
    let mut targets: Vec<std::path::PathBuf> = files.iter().map(|f| beside(f, ".lock")).collect();
    targets.extend(socket_inodes_bound_to(&sockets));
    targets.extend(files);
    close_descriptors_of(&targets);
}

/// `file` with `suffix` appended to its name (`app.tenure` → `app.tenure.lock`).
fn beside(file: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// The `socket:[INODE]` link targets (as `/proc/self/fd` shows them) of the unix sockets bound
/// to one of `paths`, from `/proc/net/unix` (a listener's accepted connections carry its path).
#[cfg(target_os = "linux")]
fn socket_inodes_bound_to(paths: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // Num RefCount Protocol Flags Type St Inode [Path]
            let mut fields = line.split_whitespace();
            let inode = fields.nth(6)?;
            let path = std::path::Path::new(fields.next()?);
            paths
                .iter()
                .any(|p| p == path)
                .then(|| format!("socket:[{inode}]").into())
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn socket_inodes_bound_to(_paths: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    Vec::new()
}

#[cfg(target_os = "linux")]
fn close_descriptors_of(files: &[std::path::PathBuf]) {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    // Collect first: the directory being read holds a descriptor of its own.
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            files.contains(&target).then_some(fd)
        })
        .collect();
    for fd in fds {
        // SAFETY: the descriptor belongs to an inherited engine that this process never uses
        // again (it is leaked, see ForkSafe); closing it releases the child's share of the
        // parent's open file description and its lock.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
}

#[cfg(not(target_os = "linux"))]
fn close_descriptors_of(_files: &[std::path::PathBuf]) {}

/// Installs the hooks (module init).
pub(crate) fn install(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let close_all = m.getattr("_close_all")?;
    py.import("atexit")?
        .call_method1("register", (close_all,))?;
    let after = m.getattr("_after_fork_in_child")?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("after_in_child", after)?;
    py.import("os")?
        .call_method("register_at_fork", (), Some(&kwargs))?;
    Ok(())
}
