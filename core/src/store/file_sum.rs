//! The CRC-32 of a whole file (SPEC K15): what a clean close records of the file it leaves, and
//! what the next open compares before it believes that record.
//!
//! A file with a long history is gigabytes, so it is read in chunks claimed in turn by two
//! threads, the caller and one helper; each chunk has its own CRC, combined in file order at the
//! end (`crc32fast::Hasher::combine`). [`crc_while`] lets the caller do other reading first (the
//! open's read-only pass) while the helper hashes, then join it.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes per chunk a thread claims: large enough that claiming costs nothing, small enough that
/// the two threads finish together (in unit tests smaller, still several reads per chunk, so
/// that files of many chunks stay small).
const CHUNK: u64 = if cfg!(test) { 1 << 20 } else { 32 << 20 };
/// Bytes per read: fits the core's cache, so the bytes are hashed while they are still in it.
const READ: usize = 256 << 10;

/// Reads exactly `out.len()` bytes at an offset (`FileExt::read_exact_at`, a redb backend's
/// `read`).
pub(super) type ReadAt<'a> = &'a (dyn Fn(u64, &mut [u8]) -> io::Result<()> + Sync);

/// The CRC-32 of the first `len` bytes read by `read`, on two threads.
pub(super) fn crc_of(read: ReadAt<'_>, len: u64) -> io::Result<u32> {
    crc_while(read, Some(len), || ()).0.unwrap_or(Ok(0))
}

/// Runs `work` on the calling thread while a helper thread hashes the first `len` bytes read by
/// `read` (`None`: nothing to hash), then hashes what is left beside the helper: the CRC-32 of
/// those bytes (`None` if none was asked for) and what `work` returned. A read error ends the
/// hashing with that error; `work` runs anyway.
pub(super) fn crc_while<T>(
    read: ReadAt<'_>,
    len: Option<u64>,
    work: impl FnOnce() -> T,
) -> (Option<io::Result<u32>>, T) {
    let Some(len) = len else {
        return (None, work());
    };
    let chunks = Chunks {
        read,
        len,
        count: len.div_ceil(CHUNK),
        next: AtomicU64::new(0),
    };
    std::thread::scope(|s| {
        // Without a helper (one chunk, or no thread to be had) the caller hashes alone, after
        // `work`.
        let helper = (chunks.count > 1)
            .then(|| {
                std::thread::Builder::new()
                    .name("tenure-file-crc".into())
                    .spawn_scoped(s, || chunks.hash())
                    .ok()
            })
            .flatten();
        let done = work();
        let mine = chunks.hash();
        let theirs = match helper {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the hashing thread panicked"))),
            None => Ok(Vec::new()),
        };
        (Some(combine(mine, theirs)), done)
    })
}

/// The chunks of a file, claimed one at a time by the threads hashing it.
struct Chunks<'a> {
    read: ReadAt<'a>,
    len: u64,
    count: u64,
    /// The next chunk no thread has claimed (`count` and above: none left).
    next: AtomicU64,
}

impl Chunks<'_> {
    /// Hashes chunks until none is left: each chunk's index and CRC.
    fn hash(&self) -> io::Result<Vec<(u64, crc32fast::Hasher)>> {
        let mut done = Vec::new();
        let mut buf = vec![0u8; READ];
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.count {
                return Ok(done);
            }
            let (mut at, end) = (i * CHUNK, ((i + 1) * CHUNK).min(self.len));
            let mut h = crc32fast::Hasher::new();
            while at < end {
                let n = buf.len().min((end - at) as usize);
                if let Err(e) = (self.read)(at, &mut buf[..n]) {
                    // The other thread stops at its next claim.
                    self.next.store(self.count, Ordering::Relaxed);
                    return Err(e);
                }
                h.update(&buf[..n]);
                at += n as u64;
            }
            done.push((i, h));
        }
    }
}

/// The CRC of the whole from the CRCs of its chunks, in file order.
fn combine(
    a: io::Result<Vec<(u64, crc32fast::Hasher)>>,
    b: io::Result<Vec<(u64, crc32fast::Hasher)>>,
) -> io::Result<u32> {
    let mut parts = a?;
    parts.extend(b?);
    parts.sort_unstable_by_key(|&(i, _)| i);
    let mut whole = crc32fast::Hasher::new();
    for (_, h) in &parts {
        whole.combine(h);
    }
    Ok(whole.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_from(bytes: &[u8]) -> impl Fn(u64, &mut [u8]) -> io::Result<()> + Sync + '_ {
        move |at, out| {
            let at = at as usize;
            out.copy_from_slice(&bytes[at..at + out.len()]);
            Ok(())
        }
    }

    #[test]
    fn k15_the_crc_of_a_file_read_in_chunks_on_two_threads_is_its_crc() {
        // Lengths around the chunk and read sizes: empty, one short read, a chunk exactly,
        // several chunks with a short last one.
        let big: Vec<u8> = (0..(3 * CHUNK + 12_345))
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        for len in [0, 1, READ as u64 - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 12_345] {
            let bytes = &big[..len as usize];
            let read = read_from(bytes);
            assert_eq!(
                crc_of(&read, len).unwrap(),
                crc32fast::hash(bytes),
                "length {len}"
            );
        }
    }

    #[test]
    fn k15_work_runs_beside_the_hashing_and_a_read_error_is_the_result() {
        let bytes = vec![7u8; (2 * CHUNK) as usize];
        let read = read_from(&bytes);
        let (crc, work) = crc_while(&read, Some(2 * CHUNK), || 42);
        assert_eq!((crc.unwrap().unwrap(), work), (crc32fast::hash(&bytes), 42));
        let (crc, work) = crc_while(&read, None, || 43);
        assert!(crc.is_none());
        assert_eq!(work, 43);
        let failing = |at: u64, _: &mut [u8]| -> io::Result<()> {
            if at >= CHUNK {
                Err(io::Error::other("unreadable"))
            } else {
                Ok(())
            }
        };
        let (crc, work) = crc_while(&failing, Some(3 * CHUNK), || 44);
        assert_eq!(crc.unwrap().unwrap_err().to_string(), "unreadable");
        assert_eq!(work, 44);
    }
}
