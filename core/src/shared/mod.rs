//! Shared mode (`Builder::shared`, SPEC P, issue 25): several processes of one user open one
//! file; the first owns it (runs the engine and serves the others on a unix socket), the others
//! are handles over that socket, and one of them takes over when the owner closes or dies.
//!
//! Files: `socket_path` (where the socket is), `registry` (the session leases of this process
//! and their record), `ownership` (the lock file), `maintenance` (Status and Alarm), `server`
//! (the socket server), `takeover` (a non-owner's wait); this file: `Builder::open` and the
//! state of one shared open ([`Sharing`]).

use crate::engine::Builder;
use crate::error::Result;
use crate::handle::{Backend, Tenure};

#[cfg(feature = "serve")]
mod maintenance;
#[cfg(feature = "serve")]
mod ownership;
#[cfg(feature = "serve")]
mod registry;
#[cfg(feature = "serve")]
mod server;
#[cfg(feature = "serve")]
mod socket_path;
#[cfg(feature = "serve")]
mod takeover;

impl Builder {
    /// Opens the engine: recovers the file if there is one and starts its threads. With
    /// [`shared`](Builder::shared): owns the file, or reaches the process that does (SPEC P).
    pub fn open(self) -> Result<Tenure> {
        if self.is_shared() {
            return open_shared(self);
        }
        Ok(Tenure::over(Backend::Engine(self.open_engine()?)))
    }
}

#[cfg(not(feature = "serve"))]
fn open_shared(_: Builder) -> Result<Tenure> {
    Err(crate::error::Error::Unsupported(
        "shared mode (Builder::shared) needs tenure's feature `serve` (the owner serves the \
         other processes etcd's v3 API)"
            .into(),
    ))
}

#[cfg(feature = "serve")]
pub(crate) use self::serve_side::{open_shared, Sharing};

#[cfg(feature = "serve")]
mod serve_side {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::ownership::{lock_path, Ownership};
    use super::registry::Registry;
    use super::server::SocketServer;
    use super::socket_path::socket_path;
    use super::takeover::Takeover;
    use crate::engine::Builder;
    use crate::error::{Error, Result};
    use crate::etcd::client::ConnectOptions;
    use crate::handle::{Attachment, Backend, Tenure};
    use crate::locks::Mutex;
    use crate::types::{LeaseId, Recovery};

    /// How long an open waits for an owner that holds the lock but does not answer yet (it is
    /// still recovering the file, or dying).
    pub(crate) const OWNER_WAIT: Duration = Duration::from_secs(10);

    /// What a takeover adds to every lease's checkpointed remaining time (etcd's promotion
    /// model, [`Recovery::Extend`]): the surviving processes renewed their leases until the
    /// owner died, but renewals are not written to the file, so the file's remaining times are
    /// as old as the last checkpoint; this gives each survivor time to reach the new owner and
    /// renew. The dead owner's sessions are revoked, not extended.
    pub(crate) const TAKEOVER_GRACE: Duration = Duration::from_secs(2);

    /// One shared open of a file: what the owner holds and a non-owner needs to take over.
    pub(crate) struct Sharing {
        /// The database file, as given.
        pub(super) file: PathBuf,
        socket: PathBuf,
        uid: u32,
        /// The engine's options (`shared` off), for a takeover.
        builder: Builder,
        pub(super) ownership: Ownership,
        /// Whether this process owns the file; set and cleared under `sessions`.
        owns: AtomicBool,
        /// Guards the session leases of this process and the record of them in the lock file
        /// (written under it, only while `owns`).
        sessions: Mutex<Registry>,
        /// Guards the engine and the server while this process owns the file.
        owning: Mutex<Option<Owning>>,
    }

    struct Owning {
        engine: Tenure,
        server: SocketServer,
    }

    impl Sharing {
        /// Makes this process the owner; the ownership lock is taken. Reads the previous
        /// owner's record, opens the file (recovery as on any reopen), revokes the previous
        /// owner's session leases, records this process's own, then serves the socket. On
        /// failure the lock is given back.
        ///
        /// When another process owned the file before (the lock file records it), leases are
        /// recovered as etcd promotes a new leader ([`TAKEOVER_GRACE`]): that owner's clients
        /// may be alive and renewing. This holds for a process that was waiting to take over
        /// and as much for one that opens the file just after the owner died and wins the
        /// lock before them (the counter test's replacement of a killed owner did, and with
        /// the builder's recovery every survivor's session was already expired). A file no
        /// shared owner ever held recovers them as the builder says.
        pub(super) fn become_owner(&self) -> Result<Tenure> {
            let owned = (|| {
                let previous = self.ownership.read_record();
                let mut builder = self.builder.clone();
                if previous.pid.is_some() {
                    builder = builder.recovery(Recovery::Extend(TAKEOVER_GRACE));
                }
                let engine = Tenure::over(Backend::Engine(builder.open_engine()?));
                for id in previous.leases {
                    match engine.revoke(id) {
                        Ok(()) | Err(Error::LeaseNotFound(_)) => {}
                        Err(e) => {
                            let _ = engine.close();
                            return Err(e);
                        }
                    }
                }
                {
                    let reg = self.sessions.lock();
                    self.owns.store(true, Ordering::Release);
                    if let Err(e) = self.ownership.write_record(&reg.encode(std::process::id())) {
                        log::warn!("shared mode: {e}");
                    }
                }
                match SocketServer::start(engine.bare(), &self.file, &self.socket, self.uid) {
                    Ok(server) => Ok((engine, server)),
                    Err(e) => {
                        self.owns.store(false, Ordering::Release);
                        let _ = engine.close();
                        Err(e)
                    }
                }
            })();
            match owned {
                Ok((engine, server)) => {
                    *self.owning.lock() = Some(Owning {
                        engine: engine.clone(),
                        server,
                    });
                    Ok(engine)
                }
                Err(e) => {
                    self.ownership.release();
                    Err(e)
                }
            }
        }

        /// Stops serving, closes the engine and gives the lock up, if this process owns the
        /// file (a waiting process takes over). The socket goes before the lock.
        fn release(&self) -> Result<()> {
            let Some(mut owning) = self.owning.lock().take() else {
                return Ok(());
            };
            owning.server.stop();
            let closed = owning.engine.close();
            {
                let _reg = self.sessions.lock();
                self.owns.store(false, Ordering::Release);
            }
            self.ownership.release();
            closed
        }
    }

    /// The attachment of a shared open's handles: closing the last of them releases the file.
    struct SharedFile {
        sharing: Arc<Sharing>,
        /// A non-owner's wait to take over (`None` for the first owner, and once closed).
        takeover: Mutex<Option<Takeover>>,
        closed: AtomicBool,
    }

    impl Attachment for SharedFile {
        fn owner(&self) -> bool {
            self.sharing.owns.load(Ordering::Acquire)
        }

        fn path(&self) -> &Path {
            &self.sharing.file
        }

        fn session_lease(&self, id: LeaseId, live: bool) {
            let mut reg = self.sharing.sessions.lock();
            reg.set(id, live);
            if self.sharing.owns.load(Ordering::Acquire) {
                if let Err(e) = self
                    .sharing
                    .ownership
                    .write_record(&reg.encode(std::process::id()))
                {
                    log::warn!("shared mode: {e}");
                }
            }
        }

        fn close(&self) -> Result<()> {
            if self.closed.swap(true, Ordering::AcqRel) {
                return Ok(());
            }
            let takeover = self.takeover.lock().take();
            if let Some(mut t) = takeover {
                t.stop();
            }
            self.sharing.release()
        }
    }

    impl Drop for SharedFile {
        fn drop(&mut self) {
            let _ = Attachment::close(self);
        }
    }

    /// The canonical path of a database file that may not exist yet: its directory's canonical
    /// path and its name, so every process derives the same lock file and socket.
    fn canonical(file: &Path) -> Result<PathBuf> {
        if let Ok(p) = std::fs::canonicalize(file) {
            return Ok(p);
        }
        let name = file
            .file_name()
            .ok_or_else(|| Error::invalid(format!("{}: not a file name", file.display())))?;
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = std::fs::canonicalize(dir).map_err(|e| Error::io("cannot open", file, &e))?;
        Ok(dir.join(name))
    }

    /// Opens `b`'s file in shared mode: as its owner if no process owns it, else over the
    /// owner's socket (waiting up to `OWNER_WAIT` for an owner that is starting), with a thread
    /// waiting to take over.
    pub(crate) fn open_shared(b: Builder) -> Result<Tenure> {
        let file = b
            .file()
            .ok_or_else(|| {
                Error::invalid(
                    "shared mode needs a path: an in-memory database cannot be shared between \
                     processes",
                )
            })?
            .to_path_buf();
        let canon = canonical(&file)?;
        let ownership = Ownership::open(&lock_path(&canon))?;
        let uid = rustix::process::getuid().as_raw();
        let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
        let socket = socket_path(&canon, runtime_dir.as_deref(), uid);
        let sharing = Arc::new(Sharing {
            file,
            socket,
            uid,
            // The owner serves etcd's clients, which take revision 0 for "none" (the recipes'
            // waits over the socket among them): a new file starts at 1, as `tenure serve`'s.
            builder: b.shared(false).base_revision_at_least(1),
            ownership,
            owns: AtomicBool::new(false),
            sessions: Mutex::new(Registry::default()),
            owning: Mutex::new(None),
        });
        let deadline = Instant::now() + OWNER_WAIT;
        let mut pause = Duration::from_millis(1);
        loop {
            if sharing.ownership.try_take()? {
                let engine = sharing.become_owner()?;
                let file = SharedFile {
                    sharing,
                    takeover: Mutex::new(None),
                    closed: AtomicBool::new(false),
                };
                return Ok(engine.attached(Arc::new(file)));
            }
            if let Some(db) = reach_owner(&sharing, Instant::now() >= deadline)? {
                let takeover = Takeover::start(sharing.clone())?;
                let file = SharedFile {
                    sharing,
                    takeover: Mutex::new(Some(takeover)),
                    closed: AtomicBool::new(false),
                };
                return Ok(db.attached(Arc::new(file)));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// A handle over the owner's socket; `Ok(None)` while it does not answer yet (an owner
    /// starting, or one that died and whose lock the next try may get), an error when it
    /// refuses this user or, `last`, still does not answer.
    fn reach_owner(sharing: &Sharing, last: bool) -> Result<Option<Tenure>> {
        let socket = &sharing.socket;
        let gone = match std::os::unix::net::UnixStream::connect(socket) {
            Ok(_) => {
                // Sessions bound to this process (SPEC P10): its death frees them at once.
                let opened = ConnectOptions::new()
                    .endpoints([format!("unix:{}", socket.display())])
                    .bind_sessions(true)
                    .open_remote();
                match opened {
                    Ok(r) => return Ok(Some(Tenure::over(Backend::Etcd(Box::new(r))))),
                    Err(e) => e.to_string(),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::PermissionDenied(format!(
                    "{}: {e} (the socket of the process that owns {} is only for its user)",
                    socket.display(),
                    sharing.file.display()
                )))
            }
            Err(e) => e.to_string(),
        };
        if !last {
            return Ok(None);
        }
        let pid = sharing
            .ownership
            .read_record()
            .pid
            .map_or_else(|| "another process".to_string(), |p| format!("process {p}"));
        Err(Error::Unavailable(format!(
            "{} is owned by {pid} (it holds {}), which did not answer on {} within {}: {gone}",
            sharing.file.display(),
            sharing.ownership.path().display(),
            socket.display(),
            crate::error::human(OWNER_WAIT)
        )))
    }
}
