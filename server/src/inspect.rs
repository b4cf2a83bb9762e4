//! Offline inspection of a database no process has open (SPEC E10). The file is read in place
//! through a read-only view ([`Tenure::read_file`]): nothing expires and nothing is written, not
//! the file, its log, nor its directory; a file that does not exist is never created.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::json;
use tenure::{FileContents, KeyValue, LeaseInfo, Tenure};

/// Refuses a database file that does not exist (exit 1, naming it): offline commands never
/// create one.
pub(crate) fn existing(file: &Path) -> Result<(), ExitCode> {
    if file.exists() {
        return Ok(());
    }
    eprintln!("tenure: {}: no such file", file.display());
    Err(ExitCode::from(1))
}

/// What `file` holds, read without writing anything.
fn read(file: &Path) -> Result<FileContents, ExitCode> {
    existing(file)?;
    Tenure::read_file(file).map_err(|e| cannot_read(file, &e))
}

/// Reports why `file` cannot be read (exit code 1); a file another process has open names the
/// way to read it while it runs.
fn cannot_read(file: &Path, e: &tenure::Error) -> ExitCode {
    match e {
        tenure::Error::AlreadyOpen(_) => eprintln!(
            "tenure: {}: {e}: another process (an application, or `tenure serve`) has it open; \
             read it through that process (`etcdctl get` against `tenure serve`) or once it \
             has closed it",
            file.display()
        ),
        _ => eprintln!("tenure: {}: {e}", file.display()),
    }
    ExitCode::from(1)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn kv_json(kv: &KeyValue) -> serde_json::Value {
    json!({
        "type": "key",
        "key": text(&kv.key),
        "value": text(&kv.value),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
        "version": kv.version,
        "lease": kv.lease.map_or(0, |l| l.get()),
    })
}

fn lease_json(l: &LeaseInfo) -> String {
    json!({
        "type": "lease",
        "id": l.id.get(),
        "ttl_ms": l.ttl.as_millis() as u64,
        "keys": l.keys.iter().map(|k| text(k)).collect::<Vec<_>>(),
    })
    .to_string()
}

/// The keys in `[key, range_end)` (etcd's range: an empty end is `key` alone).
fn in_range<'a>(c: &'a FileContents, key: &[u8], range_end: &[u8]) -> Vec<&'a KeyValue> {
    c.keys
        .iter()
        .filter(|kv| {
            if range_end.is_empty() {
                kv.key == key
            } else {
                kv.key.as_slice() >= key && (range_end == b"\0" || kv.key.as_slice() < range_end)
            }
        })
        .collect()
}

/// Writes lines to stdout; a closed pipe (`| head`) ends quietly.
pub(crate) fn emit(lines: impl IntoIterator<Item = String>) {
    let out = std::io::stdout();
    let mut out = out.lock();
    for l in lines {
        if writeln!(out, "{l}").is_err() {
            return;
        }
    }
}

pub(crate) fn leases(file: &Path, json: bool) -> ExitCode {
    let c = match read(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let leases = &c.leases; // by ID
    if json {
        emit(leases.iter().map(lease_json));
    } else {
        let mut lines = vec![format!("{:<20} {:>12} {:>6}  KEYS", "ID", "TTL", "#KEYS")];
        for l in leases {
            let keys: Vec<String> = l.keys.iter().take(3).map(|k| text(k)).collect();
            let more = if l.keys.len() > 3 { ", …" } else { "" };
            lines.push(format!(
                "{:<20} {:>12} {:>6}  {}{more}",
                l.id.get(),
                format!("{:?}", l.ttl),
                l.keys.len(),
                keys.join(", ")
            ));
        }
        lines.push(format!("{} leases", leases.len()));
        emit(lines);
    }
    ExitCode::SUCCESS
}

pub(crate) fn get(file: &Path, key: &str, prefix: bool, rev: i64, json: bool) -> ExitCode {
    let c = match read(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let past;
    let kvs: Vec<&KeyValue> = if rev == 0 || rev == c.revision {
        if prefix {
            in_range(&c, key.as_bytes(), &prefix_end(key.as_bytes()))
        } else {
            in_range(&c, key.as_bytes(), b"")
        }
    } else {
        past = match read_at(file, key.as_bytes(), prefix, rev) {
            Ok(kvs) => kvs,
            Err(code) => return code,
        };
        past.iter().collect()
    };
    if json {
        emit(kvs.iter().map(|kv| kv_json(kv).to_string()));
    } else {
        // etcdctl's simple format: key line, value line.
        emit(kvs.iter().flat_map(|kv| [text(&kv.key), text(&kv.value)]));
    }
    if kvs.is_empty() {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// The key (or the keys under the prefix) as they were at `rev`, read in place under the
/// file's lock (`Tenure::read_file_range_at`): a file an engine has open is refused, and an
/// engine opening it meanwhile waits for nothing half-read. The file and its log are only read.
fn read_at(file: &Path, key: &[u8], prefix: bool, rev: i64) -> Result<Vec<KeyValue>, ExitCode> {
    let range_end = if prefix { prefix_end(key) } else { Vec::new() };
    Tenure::read_file_range_at(file, key, range_end, rev).map_err(|e| cannot_read(file, &e))
}

fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // every key ≥ prefix
}

pub(crate) fn dump(file: &Path) -> ExitCode {
    let c = match read(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let lines = c
        .leases
        .iter()
        .map(lease_json)
        .chain(c.keys.iter().map(|kv| kv_json(kv).to_string()));
    emit(lines);
    ExitCode::SUCCESS
}

pub(crate) fn stats(file: &Path, json: bool) -> ExitCode {
    let c = match read(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let s = c.stats();
    let size = std::fs::metadata(file).map_or(0, |m| m.len());
    if json {
        emit([json!({
            "file": file.display().to_string(),
            "bytes": size,
            "revision": s.revision,
            "leases": s.leases,
            "keys": s.keys,
        })
        .to_string()]);
    } else {
        emit([
            format!("file:     {}", file.display()),
            format!("bytes:    {size}"),
            format!("revision: {}", s.revision),
            format!("leases:   {}", s.leases),
            format!("keys:     {}", s.keys),
        ]);
    }
    ExitCode::SUCCESS
}
