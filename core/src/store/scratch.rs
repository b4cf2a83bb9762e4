//! A storage backend over the first bytes of a file that never writes it: what redb writes is
//! kept in memory, page by page, over the file's bytes. Reading a file in place repairs and
//! replays it there (`in_place`); the open makes its writes there first (`open`, D5).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Bytes per page of the in-memory overlay.
const PAGE: u64 = 4096;

/// The first `len` bytes of a file, read-only, with what redb writes kept in memory.
#[derive(Debug)]
pub(super) struct Scratch {
    file: File,
    overlay: Mutex<Overlay>,
}

#[derive(Debug)]
struct Overlay {
    /// The length redb sees.
    len: u64,
    /// How much of the file is still visible below the overlay (a shrink hides the rest, so a
    /// later growth reads zeros, as `set_len` requires).
    visible: u64,
    /// Pages written, by index.
    pages: HashMap<u64, Box<[u8]>>,
}

impl Scratch {
    pub(super) fn new(file: File, len: u64) -> Scratch {
        Scratch {
            file,
            overlay: Mutex::new(Overlay {
                len,
                visible: len,
                pages: HashMap::new(),
            }),
        }
    }

    /// Reads `out` at `offset` from the file, zeros past its visible part.
    fn read_file(&self, visible: u64, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let from_file = visible.saturating_sub(offset).min(out.len() as u64) as usize;
        self.file.read_exact_at(&mut out[..from_file], offset)?;
        out[from_file..].fill(0);
        Ok(())
    }
}

fn read_only() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        "opened read-only: nothing is written",
    )
}

impl redb::StorageBackend for Scratch {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.overlay.lock().map_err(|_| read_only())?.len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let o = self.overlay.lock().map_err(|_| read_only())?;
        if offset.saturating_add(out.len() as u64) > o.len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(out.len() - done);
            match o.pages.get(&page) {
                Some(p) => out[done..done + n].copy_from_slice(&p[within..within + n]),
                None => self.read_file(o.visible, at, &mut out[done..done + n])?,
            }
            done += n;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        let mut o = self.overlay.lock().map_err(|_| read_only())?;
        if len < o.len {
            o.visible = o.visible.min(len);
            o.pages.retain(|&i, _| i * PAGE < len);
            if let Some(p) = o.pages.get_mut(&(len / PAGE)) {
                p[(len % PAGE) as usize..].fill(0);
            }
        }
        o.len = len;
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut o = self.overlay.lock().map_err(|_| read_only())?;
        let o = &mut *o;
        o.len = o.len.max(offset.saturating_add(data.len() as u64));
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (page, within) = (at / PAGE, (at % PAGE) as usize);
            let n = (PAGE as usize - within).min(data.len() - done);
            let p = match o.pages.entry(page) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let mut fresh = vec![0u8; PAGE as usize].into_boxed_slice();
                    self.read_file(o.visible, page * PAGE, &mut fresh)?;
                    e.insert(fresh)
                }
            };
            p[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }
}
