//! The session leases of this process (SPEC P6) and their record in the ownership lock file:
//! the owner rewrites the record whenever a session starts or closes; whoever takes the file
//! over reads the previous owner's record and revokes those leases (the owner's sessions run
//! on its own engine, so no connection breaks when it dies). Pure: the file is the caller's.

use std::collections::BTreeSet;

use crate::types::LeaseId;

/// The first line of a record, so a stray file is never read as one.
const MAGIC: &str = "tenure shared-mode owner";
/// Most leases recorded (and read back): beyond it the oldest are dropped; their TTL still
/// ends them.
pub(crate) const MAX_LEASES: usize = 65_536;
/// Most bytes of a record read back (a lease line is at most 26 bytes).
pub(crate) const MAX_RECORD_BYTES: u64 = 64 + 26 * MAX_LEASES as u64;

/// The session leases of this process, in ID order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Registry {
    leases: BTreeSet<LeaseId>,
}

impl Registry {
    /// Records lease `id` as a session of this process (`live`) or forgets it.
    pub(crate) fn set(&mut self, id: LeaseId, live: bool) {
        if live {
            self.leases.insert(id);
            while self.leases.len() > MAX_LEASES {
                self.leases.pop_first();
            }
        } else {
            self.leases.remove(&id);
        }
    }

    /// The record written to the lock file: the magic line, the owner's process ID, one lease
    /// per line.
    pub(crate) fn encode(&self, pid: u32) -> String {
        let mut out = format!("{MAGIC}\npid {pid}\n");
        for id in &self.leases {
            out.push_str(&format!("lease {}\n", id.get()));
        }
        out
    }
}

/// What a lock file's record says: the owner's process ID and its session leases. Anything
/// else (an empty file, a torn or foreign one, bad lines) reads as no lease at all.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) pid: Option<u32>,
    pub(crate) leases: Vec<LeaseId>,
}

/// Reads a record (at most [`MAX_LEASES`] leases).
pub(crate) fn decode(text: &str) -> Record {
    let mut lines = text.lines();
    if lines.next() != Some(MAGIC) {
        return Record::default();
    }
    let mut r = Record::default();
    for line in lines {
        if let Some(pid) = line.strip_prefix("pid ") {
            r.pid = pid.parse().ok();
        } else if let Some(id) = line.strip_prefix("lease ") {
            match id.parse::<i64>() {
                Ok(id) if id > 0 && r.leases.len() < MAX_LEASES => r.leases.push(LeaseId::new(id)),
                _ => {}
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p6_a_record_reads_back_as_written() {
        let mut reg = Registry::default();
        reg.set(LeaseId::new(9), true);
        reg.set(LeaseId::new(3), true);
        reg.set(LeaseId::new(5), true);
        reg.set(LeaseId::new(5), false);
        let r = decode(&reg.encode(4242));
        assert_eq!(r.pid, Some(4242));
        assert_eq!(r.leases, vec![LeaseId::new(3), LeaseId::new(9)]);
    }

    #[test]
    fn p6_a_foreign_torn_or_empty_file_holds_no_lease() {
        assert_eq!(decode(""), Record::default());
        assert_eq!(decode("lease 5\n"), Record::default());
        let torn = format!("{MAGIC}\npid 1\nlease 7\nlease 1x\nlease -3\nlease 0\nlea");
        assert_eq!(decode(&torn).leases, vec![LeaseId::new(7)]);
    }

    #[test]
    fn p6_the_record_is_bounded() {
        let mut reg = Registry::default();
        for id in 1..=(MAX_LEASES as i64 + 10) {
            reg.set(LeaseId::new(id), true);
        }
        let text = reg.encode(u32::MAX);
        assert!(text.len() as u64 <= MAX_RECORD_BYTES, "{}", text.len());
        let r = decode(&text);
        assert_eq!(r.leases.len(), MAX_LEASES);
        assert_eq!(r.leases[0], LeaseId::new(11), "the oldest are dropped");
    }
}
