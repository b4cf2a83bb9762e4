//! `DeadlineHeap`: an indexed 4-ary min-heap of lease deadlines, one entry per lease.
//!
//! Entries are addressed by the lease's slot in the lessor's slab, so the heap keeps each
//! slot's position in a plain vector: every operation is O(log n) with no hashing. Sifts move a
//! hole rather than swapping, so each level costs one entry write and one position write.
//!
//! Invariant: `pos[heap[i].1] == i` for every heap index `i`, and `pos[s] == NONE` for every
//! slot `s` not in the heap.

const NONE: u32 = u32::MAX;
/// Children per node: a 4-ary heap has half the levels of a binary one, and a node's children
/// share a cache line.
const ARITY: usize = 4;

/// Indexed min-heap of `(deadline, slot)`; deadlines are nanoseconds of the engine clock.
#[derive(Debug, Default)]
pub(crate) struct DeadlineHeap {
    heap: Vec<(u64, u32)>,
    pos: Vec<u32>,
}

impl DeadlineHeap {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Inserts `slot` with `deadline`, or moves its existing entry to `deadline`.
    pub(crate) fn register_or_update(&mut self, slot: u32, deadline: u64) {
        let s = slot as usize;
        if s >= self.pos.len() {
            self.pos.resize(s + 1, NONE);
        }
        match self.pos[s] {
            NONE => {
                let i = self.heap.len();
                self.heap.push((deadline, slot));
                self.pos[s] = i as u32;
                self.sift_up(i);
            }
            i => {
                let i = i as usize;
                let old = self.heap[i].0;
                self.heap[i].0 = deadline;
                if deadline < old {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
        }
    }

    /// The deadline `slot` is registered with, if any.
    #[cfg(test)]
    #[inline]
    pub(crate) fn deadline_of(&self, slot: u32) -> Option<u64> {
        match self.pos.get(slot as usize) {
            Some(&i) if i != NONE => Some(self.heap[i as usize].0),
            _ => None,
        }
    }

    /// The earliest entry.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        self.heap.first().copied()
    }

    /// Removes and returns the earliest entry.
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        let top = *self.heap.first()?;
        self.remove_at(0);
        Some(top)
    }

    /// Removes `slot`'s entry; returns whether it had one.
    pub(crate) fn remove(&mut self, slot: u32) -> bool {
        match self.pos.get(slot as usize) {
            Some(&i) if i != NONE => {
                self.remove_at(i as usize);
                true
            }
            _ => false,
        }
    }

    fn remove_at(&mut self, i: usize) {
        let (_, slot) = self.heap[i];
        self.pos[slot as usize] = NONE;
        let last = self.heap.pop().expect("non-empty");
        if i < self.heap.len() {
            // The last entry fills the hole; it may belong above or below `i`.
            if i > 0 && last.0 < self.heap[(i - 1) / ARITY].0 {
                self.sift_up_from(i, last);
            } else {
                self.sift_down_from(i, last);
            }
        }
    }

    #[inline]
    fn place(&mut self, i: usize, entry: (u64, u32)) {
        self.heap[i] = entry;
        self.pos[entry.1 as usize] = i as u32;
    }

    fn sift_up(&mut self, i: usize) {
        let entry = self.heap[i];
        self.sift_up_from(i, entry);
    }

    /// Moves the hole at `i` up until `entry` fits, then places it: one write per level.
    fn sift_up_from(&mut self, mut i: usize, entry: (u64, u32)) {
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let p = self.heap[parent];
            if entry.0 >= p.0 {
                break;
            }
            self.place(i, p);
            i = parent;
        }
        self.place(i, entry);
    }

    fn sift_down(&mut self, i: usize) {
        let entry = self.heap[i];
        self.sift_down_from(i, entry);
    }

    /// Moves the hole at `i` down to where `entry` fits, then places it.
    fn sift_down_from(&mut self, mut i: usize, entry: (u64, u32)) {
        let n = self.heap.len();
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let end = (first + ARITY).min(n);
            let mut c = first;
            for j in first + 1..end {
                if self.heap[j].0 < self.heap[c].0 {
                    c = j;
                }
            }
            let child = self.heap[c];
            if child.0 >= entry.0 {
                break;
            }
            self.place(i, child);
            i = c;
        }
        self.place(i, entry);
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        for (i, &(d, s)) in self.heap.iter().enumerate() {
            assert_eq!(
                self.pos[s as usize] as usize, i,
                "position index out of date"
            );
            if i > 0 {
                assert!(self.heap[(i - 1) / ARITY].0 <= d, "heap order violated");
            }
        }
        let indexed = self.pos.iter().filter(|&&p| p != NONE).count();
        assert_eq!(indexed, self.heap.len(), "stale position entries");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn heap_pops_in_deadline_order_and_updates_in_place() {
        let mut q = DeadlineHeap::new();
        q.register_or_update(0, 30);
        q.register_or_update(1, 10);
        q.register_or_update(2, 20);
        q.register_or_update(1, 40); // later: one entry, moved
        assert_eq!(q.len(), 3);
        assert_eq!(q.deadline_of(1), Some(40));
        assert_eq!(q.peek(), Some((20, 2)));
        assert!(q.remove(2));
        assert!(!q.remove(2));
        assert_eq!(q.pop(), Some((30, 0)));
        assert_eq!(q.pop(), Some((40, 1)));
        assert_eq!(q.pop(), None);
    }

    #[derive(Debug, Clone)]
    enum QOp {
        Upsert(u32, u64),
        Remove(u32),
        Pop,
    }

    proptest! {
        #[test]
        fn heap_matches_an_ordered_map_model(ops in proptest::collection::vec(
            prop_oneof![
                (0u32..64, 0u64..1000).prop_map(|(s, d)| QOp::Upsert(s, d)),
                (0u32..64).prop_map(QOp::Remove),
                Just(QOp::Pop),
            ], 0..300)) {
            let mut q = DeadlineHeap::new();
            let mut model: BTreeMap<u32, u64> = BTreeMap::new();
            for op in ops {
                match op {
                    QOp::Upsert(s, d) => { q.register_or_update(s, d); model.insert(s, d); }
                    QOp::Remove(s) => prop_assert_eq!(q.remove(s), model.remove(&s).is_some()),
                    QOp::Pop => {
                        let min = model.values().min().copied();
                        let got = q.pop();
                        prop_assert_eq!(got.map(|g| g.0), min);
                        if let Some((_, s)) = got { prop_assert_eq!(model.remove(&s), min); }
                    }
                }
                q.check_invariants();
                prop_assert_eq!(q.len(), model.len());
            }
        }
    }
}
