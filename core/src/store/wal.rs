//! The write-ahead log beside the redb file (`PATH.wal`; format and invariants in
//! docs/DESIGN.md, "The write-ahead log").
//!
//! A fixed-size, zero-filled file: a header, then two regions used in turn. A commit appends one
//! record (all the ops of one group commit) to the active region with one direct synchronous
//! `pwrite` (else `pwrite` + `fdatasync`). When the active region is full, its records are handed to the checkpointer (one
//! durable redb commit) and the writer moves to the other region, whose records redb already
//! holds. Records carry consecutive log sequence numbers (LSNs); redb's meta row `log_applied`
//! is the LSN up to which redb holds the log.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::codec;
use super::StorageFaults;
use crate::alarms::{Alarm, AlarmKind};
use crate::error::{Error, Result};
use crate::limits::{LOG_REGION_MAX, LOG_REGION_MIN};
use crate::rows::StoreOp;

const MAGIC: [u8; 8] = *b"tenurlog";
const VERSION: u32 = 1;
/// Bytes before the first region.
const HEADER: u64 = 4096;
/// Bytes of the header that are checked (magic, version, pad, region size, id, crc).
const HEADER_USED: usize = 36;
/// Where the clean-close record sits in the header (SPEC K15; see [`CleanClose`]).
const CLOSE_AT: u64 = 64;
const CLOSE_MAGIC: [u8; 8] = *b"tclosed1";
/// Bytes of the clean-close record: magic, log id, file length, file CRC, record CRC.
const CLOSE_USED: usize = 32;
/// Size of one region of a new log: a checkpoint every 1 MiB of records, and at most two
/// regions (2 MiB) to replay on open.
pub(crate) const REGION: u64 = 1 << 20;
/// Record head: payload length (u32), head crc (u32), LSN (u64).
const HEAD: usize = 16;
/// How far past the newest readable record a stray record counts as written after it.
const LSN_WINDOW: u64 = 1 << 20;
/// The block size of direct appends (a multiple of every device's logical block size).
const BLOCK: u64 = 4096;

/// One record: the state of the meta row after it, and its ops.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) lsn: u64,
    pub(crate) revision: i64,
    pub(crate) next_id: i64,
    pub(crate) ops: Vec<StoreOp>,
}

/// The log file of the database at `db`.
pub(crate) fn path_of(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".wal");
    PathBuf::from(p)
}

/// `Corrupt` for the database `db`, about its log.
fn corrupt(db: &Path, detail: impl std::fmt::Display) -> Error {
    Error::Corrupt {
        path: db.to_path_buf(),
        detail: format!("its write-ahead log {}: {detail}", path_of(db).display()),
    }
}

fn align8(n: u64) -> u64 {
    (n + 7) & !7
}

fn head_crc(id: u64, len: u32, lsn: u64) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    h.update(&len.to_le_bytes());
    h.update(&lsn.to_le_bytes());
    h.finalize()
}

fn encode_header(region: u64, id: u64) -> [u8; HEADER_USED] {
    let mut b = [0u8; HEADER_USED];
    b[..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&region.to_le_bytes());
    b[24..32].copy_from_slice(&id.to_le_bytes());
    let crc = crc32fast::hash(&b[..32]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    b
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

// ---- clean-close record (K15) ----------------------------------------------------------------

/// What a clean close left (SPEC K15): the database file, closed by redb, was `len` bytes whose
/// CRC-32 is `crc`, under the log id `id`. Kept in the log's header after the checked part:
/// outside the file it vouches for, durable (fsynced), and gone once an open takes the file (its
/// new header, with a new id, clears the rest of the header block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CleanClose {
    pub(crate) id: u64,
    pub(crate) len: u64,
    pub(crate) crc: u32,
}

impl CleanClose {
    fn encode(&self) -> [u8; CLOSE_USED] {
        let mut b = [0u8; CLOSE_USED];
        b[..8].copy_from_slice(&CLOSE_MAGIC);
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..28].copy_from_slice(&self.crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<CleanClose> {
        (b[..8] == CLOSE_MAGIC && crc32fast::hash(&b[..28]) == u32_at(b, 28)).then(|| CleanClose {
            id: u64_at(b, 8),
            len: u64_at(b, 16),
            crc: u32_at(b, 24),
        })
    }
}

/// The log's header, if it is whole: its bytes up to the end of the clean-close record.
fn read_header(file: &File) -> Option<[u8; CLOSE_AT as usize + CLOSE_USED]> {
    let mut b = [0u8; CLOSE_AT as usize + CLOSE_USED];
    file.read_exact_at(&mut b, 0).ok()?;
    (b[..8] == MAGIC && crc32fast::hash(&b[..32]) == u32_at(&b, 32) && u32_at(&b, 8) == VERSION)
        .then_some(b)
}

/// The clean-close record in the log of the database `db`, if there is one, whole, under the id
/// of the log's header. Anything else (no log, a damaged header or record, another id) is
/// `None`: the open then checks the file page by page, as without a record. Only reads.
pub(crate) fn clean_close(db: &Path) -> Option<CleanClose> {
    let log = path_of(db);
    // Not a FIFO, whose open would block (`read` refuses what is not a regular file).
    if !std::fs::metadata(&log).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let file = File::open(log).ok()?;
    let b = read_header(&file)?;
    let rec = CleanClose::decode(&b[CLOSE_AT as usize..])?;
    (rec.id == u64_at(&b, 24)).then_some(rec)
}

/// Writes `rec` into the header of the log of the database `db` and fsyncs it: the last step of
/// a clean close, while the database's locks (which cover its log) are still held. A log whose
/// header is not whole or carries another id is left alone (`Ok(false)`).
pub(crate) fn record_clean_close(
    db: &Path,
    rec: CleanClose,
    faults: &StorageFaults,
) -> Result<bool> {
    let log = path_of(db);
    let path = log.as_path();
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(false);
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io("cannot open", path, &e))?;
    if read_header(&file).is_none_or(|b| u64_at(&b, 24) != rec.id) {
        return Ok(false);
    }
    if faults.fails_write(super::LOG) || faults.fails_sync(super::LOG) {
        return Err(Error::io("cannot write", path, &super::injected()));
    }
    file.write_all_at(&rec.encode(), CLOSE_AT)
        .and_then(|()| file.sync_data())
        .map_err(|e| Error::io("cannot write", path, &e))?;
    Ok(true)
}

/// Test support: writes `rec` (`None`: zeros) where the clean-close record goes in the log of
/// `db`, as is; with `header_id`, the header gets that id too; `damaged`: a bit of the written
/// record flipped after its checksum was taken.
#[cfg(test)]
pub(crate) fn forge_clean_close(
    db: &Path,
    rec: Option<CleanClose>,
    header_id: Option<u64>,
    damaged: bool,
) {
    let file = OpenOptions::new()
        .write(true)
        .read(true)
        .open(path_of(db))
        .unwrap();
    let mut b = rec.map_or([0u8; CLOSE_USED], |r| r.encode());
    if damaged {
        b[20] ^= 1;
    }
    file.write_all_at(&b, CLOSE_AT).unwrap();
    if let Some(id) = header_id {
        let mut head = [0u8; HEADER_USED];
        file.read_exact_at(&mut head, 0).unwrap();
        file.write_all_at(&encode_header(u64_at(&head, 16), id), 0)
            .unwrap();
    }
}

// ---- record payload ---------------------------------------------------------------------------

/// Appends a record (head, payload, payload crc, padding to 8 bytes) to `out`.
fn encode_record(
    out: &mut Vec<u8>,
    id: u64,
    lsn: u64,
    revision: i64,
    next_id: i64,
    ops: &[StoreOp],
) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEAD]);
    out.extend_from_slice(&revision.to_le_bytes());
    out.extend_from_slice(&next_id.to_le_bytes());
    out.extend_from_slice(&(ops.len() as u64).to_le_bytes());
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(b);
    };
    for op in ops {
        match op {
            StoreOp::PutLease {
                id,
                ttl,
                remaining,
                wall_ms,
            } => {
                out.push(1);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&ttl.to_le_bytes());
                out.extend_from_slice(&remaining.to_le_bytes());
                out.extend_from_slice(&wall_ms.to_le_bytes());
            }
            StoreOp::DelLease(id) => {
                out.push(2);
                out.extend_from_slice(&id.to_le_bytes());
            }
            StoreOp::PutKey(k, e) => {
                out.push(3);
                bytes(out, k);
                out.extend_from_slice(&(codec::encoded_len(e) as u64).to_le_bytes());
                codec::encode_into(e, out);
            }
            StoreOp::DelKey(k) => {
                out.push(4);
                bytes(out, k);
            }
            StoreOp::DelKeyAt(k, rev) => {
                out.push(5);
                bytes(out, k);
                out.extend_from_slice(&rev.to_le_bytes());
            }
            StoreOp::LeaseKey(k, e) => {
                out.push(6);
                bytes(out, k);
                out.extend_from_slice(&(codec::encoded_len(e) as u64).to_le_bytes());
                codec::encode_into(e, out);
            }
            StoreOp::Compact(rev) => {
                out.push(7);
                out.extend_from_slice(&rev.to_le_bytes());
            }
            StoreOp::Alarm(a, raised) => {
                out.push(8);
                out.extend_from_slice(&a.member.to_le_bytes());
                out.extend_from_slice(&(a.kind.etcd_number() as u64).to_le_bytes());
                out.push(u8::from(*raised));
            }
        }
    }
    let len = (out.len() - start - HEAD) as u32;
    let crc = crc32fast::hash(&out[start + HEAD..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.resize(start + align8((out.len() - start) as u64) as usize, 0);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&head_crc(id, len, lsn).to_le_bytes());
    out[start + 8..start + 16].copy_from_slice(&lsn.to_le_bytes());
}

/// A cursor over a payload; every read is bounds-checked.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64_at(b, 0))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

/// Reads a payload whose checksum matched; `None` if it is not one `encode_record` wrote.
fn decode_payload(lsn: u64, payload: &[u8]) -> Option<Record> {
    let mut c = Cursor { b: payload, at: 0 };
    let revision = c.u64()? as i64;
    let next_id = c.u64()? as i64;
    let n = c.u64()?;
    let mut ops = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        ops.push(match c.take(1)?[0] {
            1 => StoreOp::PutLease {
                id: c.u64()? as i64,
                ttl: c.u64()?,
                remaining: c.u64()?,
                wall_ms: c.u64()? as i64,
            },
            2 => StoreOp::DelLease(c.u64()? as i64),
            3 => {
                let key = c.bytes()?.to_vec();
                StoreOp::PutKey(key, codec::decode(c.bytes()?)?)
            }
            4 => StoreOp::DelKey(c.bytes()?.to_vec()),
            5 => {
                let key = c.bytes()?.to_vec();
                StoreOp::DelKeyAt(key, c.u64()? as i64)
            }
            6 => {
                let key = c.bytes()?.to_vec();
                StoreOp::LeaseKey(key, codec::decode(c.bytes()?)?)
            }
            7 => StoreOp::Compact(c.u64()? as i64),
            8 => {
                let member = c.u64()?;
                let kind = AlarmKind::from_etcd_number(i32::try_from(c.u64()?).ok()?)?;
                let raised = match c.take(1)?[0] {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                StoreOp::Alarm(Alarm { member, kind }, raised)
            }
            _ => return None,
        });
    }
    (c.at == payload.len()).then_some(Record {
        lsn,
        revision,
        next_id,
        ops,
    })
}

// ---- reading (open) ---------------------------------------------------------------------------

/// What is at a database's log path.
pub(crate) enum Found {
    /// No log file.
    Missing,
    /// A log written for another database (its id differs): nothing in it belongs here.
    Foreign,
    /// This database's log: the records beyond `applied`, in LSN order, consecutive from
    /// `applied + 1` (possibly none).
    Ours(Vec<Record>),
}

/// Reads the log of the database `db` (only reads: a refused log is never written). `id` is the database's
/// log id (`None`: it has none, so any log is foreign); `applied` the LSN redb holds the log
/// up to. A torn last record is dropped; a damaged record with records after it, a gap, or a
/// damaged header is `Corrupt` (DESIGN, "The write-ahead log").
pub(crate) fn read(db: &Path, id: Option<u64>, applied: u64) -> Result<Found> {
    read_with(db, id.map(Some), Some(applied))
}

/// Checks the log of `db` on its own, before redb can say where it stands (a file redb must
/// repair first): the records under the log's own id must be readable and consecutive.
pub(crate) fn check(db: &Path) -> Result<()> {
    read_with(db, None, None).map(drop)
}

/// `read`; `id` `None`: the header's own id; `applied` `None`: just below the oldest record.
fn read_with(db: &Path, id: Option<Option<u64>>, applied: Option<u64>) -> Result<Found> {
    let log = path_of(db);
    let path = log.as_path();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(Error::io("cannot open", path, &e)),
    };
    if !meta.is_file() {
        return Err(corrupt(db, "the log is not a regular file"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::io("cannot read", path, &e))?;
    if bytes.len() < HEADER as usize || bytes[..8] != MAGIC {
        return Err(corrupt(db, "not a tenure log (bad magic)"));
    }
    if crc32fast::hash(&bytes[..32]) != u32_at(&bytes, 32) {
        return Err(corrupt(db, "damaged log header"));
    }
    if u32_at(&bytes, 8) != VERSION {
        return Err(corrupt(
            db,
            format!("unsupported log version {}", u32_at(&bytes, 8)),
        ));
    }
    let region = u64_at(&bytes, 16);
    if !(LOG_REGION_MIN..=LOG_REGION_MAX).contains(&region)
        || !region.is_multiple_of(8)
        || (bytes.len() as u64) < HEADER + 2 * region
    {
        return Err(corrupt(db, format!("impossible log region size {region}")));
    }
    let log_id = u64_at(&bytes, 24);
    if id.unwrap_or(Some(log_id)) != Some(log_id) {
        return Ok(Found::Foreign);
    }
    // Each region: the chain of records with consecutive LSNs from its start.
    let mut chains: [Vec<(u64, usize, usize)>; 2] = [Vec::new(), Vec::new()];
    let mut ends = [0usize; 2];
    for (r, chain) in chains.iter_mut().enumerate() {
        let (start, end) = (
            (HEADER + r as u64 * region) as usize,
            (HEADER + (r as u64 + 1) * region) as usize,
        );
        let mut pos = start;
        while let Some((lsn, size)) = record_at(&bytes[..end], pos, log_id) {
            if chain.last().is_some_and(|&(prev, _, _)| lsn != prev + 1) {
                break;
            }
            chain.push((lsn, pos + HEAD, pos + HEAD + u32_at(&bytes, pos) as usize));
            pos += size;
        }
        ends[r] = pos;
    }
    let applied = applied.unwrap_or_else(|| {
        let oldest = chains
            .iter()
            .filter_map(|c| c.first().map(|&(l, _, _)| l))
            .min();
        oldest.map_or(0, |l| l - 1)
    });
    // Nothing may have been written after what is readable: a record beyond the newest
    // readable one (and the torn one after it) means a damaged record in the middle.
    let top = chains
        .iter()
        .filter_map(|c| c.last().map(|&(l, _, _)| l))
        .max()
        .unwrap_or(0)
        .max(applied);
    for (r, &from) in ends.iter().enumerate() {
        let end = (HEADER + (r as u64 + 1) * region) as usize;
        let mut pos = from;
        while pos + HEAD <= end {
            let lsn = u64_at(&bytes, pos + 8);
            if lsn > top.saturating_add(1)
                && lsn <= top.saturating_add(LSN_WINDOW)
                && head_crc(log_id, u32_at(&bytes, pos), lsn) == u32_at(&bytes, pos + 4)
            {
                return Err(corrupt(
                    db,
                    format!("damaged log: record {lsn} follows an unreadable one (after {top})"),
                ));
            }
            pos += 8;
        }
    }
    let mut wanted: Vec<(u64, usize, usize)> = chains
        .into_iter()
        .flatten()
        .filter(|&(lsn, _, _)| lsn > applied)
        .collect();
    wanted.sort_unstable_by_key(|&(lsn, _, _)| lsn);
    let mut records = Vec::with_capacity(wanted.len());
    for (i, &(lsn, from, to)) in wanted.iter().enumerate() {
        if lsn != applied + 1 + i as u64 {
            return Err(corrupt(
                db,
                format!(
                    "damaged log: records {}..{lsn} are missing",
                    applied + 1 + i as u64
                ),
            ));
        }
        records.push(
            decode_payload(lsn, &bytes[from..to])
                .ok_or_else(|| corrupt(db, format!("damaged log: undecodable record {lsn}")))?,
        );
    }
    Ok(Found::Ours(records))
}

/// The record at `pos` if it is whole and its checksums match: (LSN, bytes it takes).
fn record_at(bytes: &[u8], pos: usize, id: u64) -> Option<(u64, usize)> {
    let head = bytes.get(pos..pos + HEAD)?;
    let (len, lsn) = (u32_at(head, 0), u64_at(head, 8));
    if head_crc(id, len, lsn) != u32_at(head, 4) {
        return None;
    }
    let size = align8((HEAD + len as usize + 4) as u64) as usize;
    let payload = bytes.get(pos + HEAD..pos + HEAD + len as usize)?;
    let crc = bytes.get(pos + HEAD + len as usize..pos + HEAD + len as usize + 4)?;
    (pos + size <= bytes.len() && crc32fast::hash(payload) == u32_at(crc, 0)).then_some((lsn, size))
}

// ---- writing ----------------------------------------------------------------------------------

/// The outcome of [`Writer::append`].
pub(crate) enum Appended {
    /// Written and fsynced.
    Done,
    /// Does not fit in what is left of the active region.
    Full,
    /// Does not fit in any region: it goes straight to redb.
    TooBig,
}

/// Appends records; owned by the commit leader (`Shared::leader`).
pub(crate) struct Writer {
    file: File,
    path: PathBuf,
    faults: StorageFaults,
    id: u64,
    region: u64,
    /// The region written to (0 or 1) and the offset of the next record in the file.
    active: u64,
    offset: u64,
    next_lsn: u64,
    buf: Vec<u8>,
    /// Appends by direct, synchronous writes, where the file system takes them.
    direct: Option<Direct>,
}

/// Appends with one `pwrite` on an `O_DIRECT | O_DSYNC` descriptor instead of `pwrite` +
/// `fdatasync`: durable when the call returns, and 10-17 % faster on the disk measured
/// (BENCHMARKS.md, 2b). Direct writes cover whole blocks: each append rewrites the block it starts in, its
/// earlier bytes (records already acknowledged, kept in `tail`) unchanged, and fills the rest of
/// its last block with zeros (over records older than what redb holds, or over zeros).
#[derive(Debug)]
struct Direct {
    file: File,
    /// The bytes of the block the next record starts in, before it.
    tail: Vec<u8>,
    /// Scratch space; the block-aligned window inside it is what is written.
    scratch: Vec<u8>,
}

impl Direct {
    /// The log at `path` opened for direct appends, if its regions are block-aligned and the
    /// file system accepts `O_DIRECT`; `None` otherwise (then appends use `fdatasync`).
    #[cfg(target_os = "linux")]
    fn open(path: &Path, region: u64) -> Option<Direct> {
        use std::os::unix::fs::OpenOptionsExt;
        if !region.is_multiple_of(BLOCK) {
            return None;
        }
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path)
            .ok()?;
        Some(Direct {
            file,
            tail: Vec::new(),
            scratch: Vec::new(),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open(_: &Path, _: u64) -> Option<Direct> {
        None
    }

    /// Writes `record` at `offset` (durable on return) as whole blocks from the one `offset`
    /// is in.
    fn append(&mut self, record: &[u8], offset: u64) -> std::io::Result<()> {
        let start = offset - offset % BLOCK;
        let before = (offset - start) as usize;
        debug_assert_eq!(before, self.tail.len());
        let used = before + record.len();
        let len = used.next_multiple_of(BLOCK as usize);
        self.scratch.clear();
        self.scratch.resize(len + BLOCK as usize, 0);
        let at = self.scratch.as_ptr().align_offset(BLOCK as usize);
        let window = &mut self.scratch[at..at + len];
        window[..before].copy_from_slice(&self.tail);
        window[before..used].copy_from_slice(record);
        self.file.write_all_at(window, start)?;
        let end = offset + record.len() as u64;
        let keep = (end % BLOCK) as usize;
        self.tail.clear();
        self.tail.extend_from_slice(&window[used - keep..used]);
        if self.scratch.capacity() > 4 * HEADER as usize && len < HEADER as usize {
            self.scratch = Vec::new();
        }
        Ok(())
    }
}

impl Writer {
    /// Opens the log of the database `db` for appending after `applied` under the id `id`
    /// (new at every open; redb already holds it, and every record of the log is older). A
    /// missing or foreign log (`reuse` false) is made anew; a reused one gets a header with the
    /// new id, which turns every old record stale. Only called with the database's lock held.
    pub(crate) fn open(
        db: &Path,
        id: u64,
        applied: u64,
        faults: StorageFaults,
        reuse: bool,
        region: u64,
    ) -> Result<Writer> {
        let log = path_of(db);
        let path = log.as_path();
        let file = OpenOptions::new().read(true).write(true).open(path);
        let mut head = [0u8; HEADER_USED];
        let reuse = reuse
            && file.as_ref().is_ok_and(|f| {
                f.read_exact_at(&mut head, 0).is_ok() && u64_at(&head, 16) == region
            });
        if !reuse {
            create_file(path, id, region)?;
        }
        let file = match file {
            Ok(f) if reuse => f,
            _ => OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| Error::io("cannot open", path, &e))?,
        };
        if reuse {
            if faults.fails_write(super::LOG) || faults.fails_sync(super::LOG) {
                return Err(Error::io("cannot write", path, &super::injected()));
            }
            // The whole header block: the rest of it (a clean-close record, K15) was the last
            // session's, and this open has written the database file.
            let mut block = vec![0u8; HEADER as usize];
            block[..HEADER_USED].copy_from_slice(&encode_header(region, id));
            file.write_all_at(&block, 0)
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::io("cannot write", path, &e))?;
        }
        Ok(Writer {
            direct: Direct::open(path, region),
            file,
            path: path.to_path_buf(),
            faults,
            id,
            region,
            active: 0,
            offset: HEADER,
            next_lsn: applied + 1,
            buf: Vec::new(),
        })
    }

    /// Appends one record with one direct synchronous `pwrite`, else `pwrite` + `fdatasync` (D1:
    /// acknowledged once this returns Done).
    pub(crate) fn append(
        &mut self,
        revision: i64,
        next_id: i64,
        ops: &[StoreOp],
    ) -> Result<Appended> {
        self.buf.clear();
        encode_record(
            &mut self.buf,
            self.id,
            self.next_lsn,
            revision,
            next_id,
            ops,
        );
        let len = self.buf.len() as u64;
        if len > self.region {
            return Ok(Appended::TooBig);
        }
        if self.offset + len > HEADER + (self.active + 1) * self.region {
            return Ok(Appended::Full);
        }
        let cannot = |what: &str, e: &std::io::Error| Error::io(what, &self.path, e);
        if self.faults.fails_write(super::LOG) {
            return Err(cannot("cannot write the log", &super::injected()));
        }
        self.faults.wait_while_stalled(super::LOG);
        let started = std::time::Instant::now();
        match &mut self.direct {
            Some(d) => {
                d.append(&self.buf, self.offset)
                    .map_err(|e| cannot("cannot write the log", &e))?;
                // Written and synced in one call: a sync fault fails it after the fact, as a
                // failed fsync whose data the disk may hold anyway.
                if self.faults.fails_sync(super::LOG) {
                    return Err(cannot("cannot fsync the log", &super::injected()));
                }
            }
            None => {
                self.file
                    .write_all_at(&self.buf, self.offset)
                    .map_err(|e| cannot("cannot write the log", &e))?;
                if self.faults.fails_sync(super::LOG) {
                    return Err(cannot("cannot fsync the log", &super::injected()));
                }
                self.file
                    .sync_data()
                    .map_err(|e| cannot("cannot fsync the log", &e))?;
            }
        }
        self.faults.count_sync(started);
        if self.buf.capacity() > 4 * HEADER as usize && len < HEADER {
            self.buf = Vec::new();
        }
        self.offset += len;
        self.next_lsn += 1;
        Ok(Appended::Done)
    }

    /// Moves to the start of the other region. Only once redb holds every record in it.
    pub(crate) fn switch(&mut self) {
        self.active ^= 1;
        self.offset = HEADER + self.active * self.region;
        if let Some(d) = &mut self.direct {
            d.tail.clear(); // regions start on a block boundary
        }
    }

    /// The LSN of the last record appended.
    pub(crate) fn last_lsn(&self) -> u64 {
        self.next_lsn - 1
    }

    /// Whether the active region holds records redb may not have.
    pub(crate) fn active_used(&self) -> bool {
        self.offset != HEADER + self.active * self.region
    }
}

/// Makes a new, zero-filled log under a temporary name, fsyncs it and renames it into place
/// (replacing a foreign log), then fsyncs the directory: a log is whole or absent.
fn create_file(path: &Path, id: u64, region: u64) -> Result<()> {
    let cannot = |what: &str, e: &std::io::Error| Error::io(what, path, e);
    let (dir, tmp) = super::sibling_temp(path, "creating")?;
    let made = (|| {
        // Owner-only, as the database it logs for.
        let f = super::new_private().open(&tmp)?;
        let zeros = vec![0u8; 1 << 20];
        let total = HEADER + 2 * region;
        let mut at = 0;
        while at < total {
            let n = zeros.len().min((total - at) as usize);
            f.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        f.write_all_at(&encode_header(region, id), 0)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made.map_err(|e| cannot("cannot create the log", &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{Data, Entry};

    fn ops() -> Vec<StoreOp> {
        vec![
            StoreOp::PutLease {
                id: 7,
                ttl: 5,
                remaining: u64::MAX,
                wall_ms: -3,
            },
            StoreOp::PutKey(
                b"k".to_vec(),
                Entry {
                    data: Some(Data {
                        value: b"v".to_vec(),
                        create: 2,
                        mod_revision: 3,
                        version: 1,
                    }),
                    lease: 7,
                },
            ),
            StoreOp::DelKey(b"gone".to_vec()),
            StoreOp::DelLease(6),
        ]
    }

    #[test]
    fn records_round_trip_and_every_truncation_or_bit_flip_is_refused() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 9, 4, 11, 12, &ops());
        assert_eq!(buf.len() % 8, 0);
        let (lsn, size) = record_at(&buf, 0, 9).expect("whole record");
        assert_eq!((lsn, size), (4, buf.len()));
        let len = u32_at(&buf, 0) as usize;
        let r = decode_payload(4, &buf[HEAD..HEAD + len]).expect("decodes");
        assert_eq!((r.revision, r.next_id, r.ops.len()), (11, 12, 4));
        assert_eq!(format!("{:?}", r.ops), format!("{:?}", ops()));
        assert!(record_at(&buf, 0, 8).is_none(), "another database's id");
        for cut in 0..buf.len() - 1 {
            if cut < HEAD + len + 4 {
                assert!(record_at(&buf[..cut], 0, 9).is_none(), "cut at {cut}");
            }
        }
        for bit in 0..(HEAD + len + 4) * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(record_at(&b, 0, 9).is_none(), "bit {bit} flipped");
        }
    }

    fn put(i: usize) -> Vec<StoreOp> {
        vec![StoreOp::PutKey(
            format!("k{i}").into_bytes(),
            Entry {
                data: Some(Data {
                    value: vec![i as u8; (i * 397) % 5000],
                    create: 1,
                    mod_revision: 1,
                    version: 1,
                }),
                lease: 0,
            },
        )]
    }

    #[test]
    fn appends_of_every_size_read_back_in_order_across_blocks_and_a_region_switch() {
        // Record sizes from a few bytes to over a block, so appends start and end anywhere in
        // a block (direct appends rewrite the block they start in).
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let region = 64 << 10;
        let mut w = Writer::open(&db, 5, 0, StorageFaults::default(), false, region).unwrap();
        let mut i = 0;
        let mut first_region = 0;
        for switched in [false, true] {
            loop {
                match w.append(i as i64, 1, &put(i)).unwrap() {
                    Appended::Done => i += 1,
                    Appended::Full => break,
                    Appended::TooBig => panic!("record {i} fits a region"),
                }
            }
            let applied = if switched { first_region } else { 0 };
            let Found::Ours(records) = read(&db, Some(5), applied).unwrap() else {
                panic!("the log is ours");
            };
            assert_eq!(records.len() as u64, w.last_lsn() - applied);
            for r in &records {
                let n = (r.lsn - 1) as usize;
                assert_eq!(r.revision, n as i64);
                assert_eq!(
                    format!("{:?}", r.ops),
                    format!("{:?}", put(n)),
                    "record {n}"
                );
            }
            first_region = w.last_lsn();
            w.switch();
        }
        assert!(
            i > 20,
            "{i} records: the regions held several blocks' worth"
        );
    }
}
