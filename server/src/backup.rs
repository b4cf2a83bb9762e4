//! `tenure snapshot FILE OUT`, `tenure snapshot restore SAVED OUT` and
//! `tenure snapshot status SAVED` (SPEC E12).
//!
//! A saved snapshot is either a tenure file (from `tenure snapshot` or the embedded
//! `snapshot`) or what `etcdctl snapshot save` wrote from `tenure serve`: that file followed by
//! the SHA-256 of everything before it (recognised by its length: whole 512-byte sectors plus
//! 32 bytes, as etcd's own tools do). The checksum is checked and stripped before use.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;
use sha2::{Digest, Sha256};
use tenure::Tenure;

use crate::inspect::{emit, existing};

/// Exit code: the saved snapshot's checksum does not match its contents.
pub(crate) const EXIT_CHECKSUM: u8 = 4;

/// A failure, already worded, with its exit code.
struct Failure(String, u8);

fn fail(what: impl std::fmt::Display) -> Failure {
    Failure(format!("tenure: {what}"), 1)
}

fn finish(r: Result<(), Failure>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(m, code)) => {
            eprintln!("{m}");
            ExitCode::from(code)
        }
    }
}

/// `tenure snapshot FILE OUT`: a copy of a database no process has open, read in place.
pub(crate) fn snapshot(file: &Path, out: &Path, json: bool) -> ExitCode {
    if let Err(code) = existing(file) {
        return code;
    }
    // Read in place: FILE (and its log) is never written.
    finish(match Tenure::copy_file(file, out) {
        Ok(i) => {
            emit([if json {
                json!({
                    "file": out.display().to_string(),
                    "revision": i.revision,
                    "keys": i.keys,
                    "leases": i.leases,
                    "bytes": i.bytes,
                })
                .to_string()
            } else {
                format!(
                    "{}: revision {}, {} keys, {} leases, {} bytes",
                    out.display(),
                    i.revision,
                    i.keys,
                    i.leases,
                    i.bytes
                )
            }]);
            Ok(())
        }
        Err(e) => Err(fail(format_args!("{}: {e}", file.display()))),
    })
}

/// The length of the database in `saved` and whether an etcd checksum follows it (checked).
fn check_saved(saved: &Path) -> Result<(u64, bool), Failure> {
    let cannot = |e: std::io::Error| fail(format_args!("{}: {e}", saved.display()));
    let mut f = File::open(saved).map_err(cannot)?;
    let len = f.metadata().map_err(cannot)?.len();
    if len % 512 != 32 {
        return Ok((len, false));
    }
    let data = len - 32;
    let mut sha = Sha256::new();
    let mut rest = data;
    let mut buf = vec![0u8; 1 << 16];
    while rest > 0 {
        let n = buf.len().min(rest as usize);
        f.read_exact(&mut buf[..n]).map_err(cannot)?;
        sha.update(&buf[..n]);
        rest -= n as u64;
    }
    let mut want = [0u8; 32];
    f.read_exact(&mut want).map_err(cannot)?;
    if sha.finalize().as_slice() != want {
        return Err(Failure(
            format!(
                "tenure: {}: SHA-256 checksum mismatch: the snapshot is damaged or truncated",
                saved.display()
            ),
            EXIT_CHECKSUM,
        ));
    }
    Ok((data, true))
}

/// Copies the database in `saved` (its first `len` bytes) to `tmp`, fsynced, and opens it to
/// validate it; returns what it holds.
fn extract(saved: &Path, len: u64, tmp: &Path) -> Result<tenure::Stats, Failure> {
    let mut src = File::open(saved).map_err(|e| fail(format_args!("{}: {e}", saved.display())))?;
    src.seek(SeekFrom::Start(0))
        .map_err(|e| fail(format_args!("{}: {e}", saved.display())))?;
    let cannot = |e: std::io::Error| fail(format_args!("{}: {e}", tmp.display()));
    // Owner-only, as tenure creates a database (SPEC E14).
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .map_err(cannot)?;
    let copied = std::io::copy(&mut src.take(len), &mut dst).map_err(cannot)?;
    if copied != len {
        return Err(fail(format_args!(
            "{}: ended after {copied} of {len} bytes",
            saved.display()
        )));
    }
    dst.sync_all().map_err(cannot)?;
    drop(dst);
    // No log beside the temporary file: nothing is written through it, and none is left.
    let db = Tenure::builder()
        .path(tmp)
        .primary(false)
        .write_ahead_log(false)
        .open()
        .map_err(|e| {
            fail(format_args!(
                "{}: not a tenure snapshot: {e}",
                saved.display()
            ))
        })?;
    let stats = db.stats();
    db.close()
        .map_err(|e| fail(format_args!("{}: {e}", tmp.display())))?;
    File::open(tmp).and_then(|f| f.sync_all()).map_err(cannot)?;
    Ok(stats)
}

/// `tenure snapshot restore SAVED OUT`: a database file at OUT (which must not exist).
pub(crate) fn restore(saved: &Path, out: &Path) -> ExitCode {
    finish((|| {
        if out.exists() {
            return Err(fail(format_args!(
                "{}: already exists; restore writes a new file only",
                out.display()
            )));
        }
        let (len, checksum) = check_saved(saved)?;
        // Named as the engine names its temporaries, so what a killed restore left is removed.
        let tmp = tenure::temp_beside(out, "restoring")
            .map_err(|e| fail(format_args!("{}: {e}", out.display())))?;
        let stats = extract(saved, len, &tmp).and_then(|s| {
            // A hard link never replaces a file that appeared meanwhile.
            std::fs::hard_link(&tmp, out)
                .map_err(|e| fail(format_args!("{}: {e}", out.display())))?;
            let dir = match out.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| fail(format_args!("{}: {e}", dir.display())))?;
            Ok(s)
        });
        let _ = std::fs::remove_file(&tmp);
        let stats = stats?;
        emit([format!(
            "{}: revision {}, {} keys, {} leases{}",
            out.display(),
            stats.revision,
            stats.keys,
            stats.leases,
            if checksum {
                " (SHA-256 checksum ok)"
            } else {
                ""
            }
        )]);
        Ok(())
    })())
}

/// `tenure snapshot status SAVED`: revision, keys, leases and size of a saved snapshot, read in
/// place (the file is opened read-only; nothing is written anywhere).
pub(crate) fn status(saved: &Path, json: bool) -> ExitCode {
    finish((|| {
        let (len, checksum) = check_saved(saved)?;
        // Read in place, read-only: status writes nothing, not even a temporary copy.
        let s = Tenure::file_stats(saved, Some(len)).map_err(|e| {
            fail(format_args!(
                "{}: not a tenure snapshot: {e}",
                saved.display()
            ))
        })?;
        let size = std::fs::metadata(saved).map_or(0, |m| m.len());
        emit([if json {
            json!({
                "file": saved.display().to_string(),
                "revision": s.revision,
                "keys": s.keys,
                "leases": s.leases,
                "bytes": size,
                "checksum": checksum,
            })
            .to_string()
        } else {
            format!(
                "file:     {}\nrevision: {}\nkeys:     {}\nleases:   {}\nbytes:    {size}\nchecksum: {}",
                saved.display(),
                s.revision,
                s.keys,
                s.leases,
                if checksum { "SHA-256 ok" } else { "none" }
            )
        }]);
        let _ = std::io::stdout().flush();
        Ok(())
    })())
}
