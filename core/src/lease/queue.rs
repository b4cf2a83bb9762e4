//! `LeaseExpiredNotifier`: an indexed binary min-heap of lease deadlines, one entry per lease.
//!
//! Entries are addressed by the lease's slot in the lessor's slab, so the heap keeps each
//! slot's position in a plain vector: every operation is O(log n) with no hashing.
//!
//! Invariant: `pos[heap[i].1] == i` for every heap index `i`, and `pos[s] == NONE` for every
//! slot `s` not in the heap.

const NONE: u32 = u32::MAX;

/// Indexed min-heap of `(deadline, slot)`; deadlines are nanoseconds of the engine clock.
#[derive(Debug, Default)]
pub(crate) struct LeaseExpiredNotifier {
    heap: Vec<(u64, u32)>,
    pos: Vec<u32>,
}

impl LeaseExpiredNotifier {
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
        let last = self.heap.len() - 1;
        self.swap(i, last);
        let (_, slot) = self.heap.pop().expect("non-empty");
        self.pos[slot as usize] = NONE;
        if i < self.heap.len() {
            // The moved entry may belong above or below `i`.
            self.sift_up(i);
            self.sift_down(i);
        }
    }

    #[inline]
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i].0 >= self.heap[parent].0 {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.heap[r].0 < self.heap[l].0 {
                r
            } else {
                l
            };
            if self.heap[c].0 >= self.heap[i].0 {
                break;
            }
            self.swap(i, c);
            i = c;
        }
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        for (i, &(d, s)) in self.heap.iter().enumerate() {
            assert_eq!(
                self.pos[s as usize] as usize, i,
                "position index out of date"
            );
            if i > 0 {
                assert!(self.heap[(i - 1) / 2].0 <= d, "heap order violated");
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
    fn notifier_pops_in_deadline_order_and_updates_in_place() {
        let mut q = LeaseExpiredNotifier::new();
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
        fn notifier_matches_an_ordered_map_model(ops in proptest::collection::vec(
            prop_oneof![
                (0u32..64, 0u64..1000).prop_map(|(s, d)| QOp::Upsert(s, d)),
                (0u32..64).prop_map(QOp::Remove),
                Just(QOp::Pop),
            ], 0..300)) {
            let mut q = LeaseExpiredNotifier::new();
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
