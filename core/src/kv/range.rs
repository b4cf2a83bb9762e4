//! etcd-shaped reads over the key index (SPEC E2): a key range `[key, range_end)` with etcd's
//! conventions, sort orders, revision filters, limit, count and keys-only. Pure functions of the
//! index; the engine adds locking and durability.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::kv::index::{prefix_end, Bounds, KvIndex};
use crate::types::KeyValue;

/// Which end of the create-revision order a [`RangeOptions`] read starts from (etcd's
/// `WithFirstCreate` / `WithLastCreate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CreateOrder {
    /// Lowest create revision first.
    #[default]
    Oldest,
    /// Highest create revision first.
    Newest,
}

/// A prefix read as the recipes make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RangeOptions {
    /// Sort by create revision from this end.
    pub order: CreateOrder,
    /// Only keys created at or before this revision (etcd's `WithMaxCreateRev`).
    pub max_create_revision: Option<i64>,
    /// At most this many keys.
    pub limit: Option<usize>,
}

/// Applies `opts` to keys read in key order: a stable sort by create revision, the bound, the
/// limit. For backends whose range has no server-side ordering.
pub fn sort_and_bound(kvs: &mut Vec<KeyValue>, opts: RangeOptions) {
    if let Some(max) = opts.max_create_revision {
        kvs.retain(|kv| kv.create_revision <= max);
    }
    match opts.order {
        CreateOrder::Oldest => kvs.sort_by_key(|kv| kv.create_revision),
        CreateOrder::Newest => kvs.sort_by_key(|kv| std::cmp::Reverse(kv.create_revision)),
    }
    if let Some(n) = opts.limit {
        kvs.truncate(n);
    }
}

/// A set of keys as etcd names it with `key` and `range_end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRange {
    start: Vec<u8>,
    /// `None`: the single key `start`.
    end: Option<Bound<Vec<u8>>>,
}

impl KeyRange {
    /// etcd's rules: an empty `range_end` is the key alone, `"\0"` is every key ≥ `key`, anything
    /// else is `[key, range_end)` (empty when `range_end <= key`).
    pub(crate) fn new(key: &[u8], range_end: &[u8]) -> KeyRange {
        let end = match range_end {
            [] => None,
            [0] => Some(Bound::Unbounded),
            e => Some(Bound::Excluded(e.to_vec())),
        };
        KeyRange {
            start: key.to_vec(),
            end,
        }
    }

    /// Every key starting with `prefix`.
    pub(crate) fn prefix(prefix: &[u8]) -> KeyRange {
        KeyRange {
            start: prefix.to_vec(),
            end: Some(prefix_end(prefix)),
        }
    }

    /// The one key this range is, if it is a single key.
    pub(crate) fn single_key(&self) -> Option<&[u8]> {
        self.end.is_none().then_some(self.start.as_slice())
    }

    /// The prefix whose keys are exactly this range, if it is one.
    pub(crate) fn as_prefix(&self) -> Option<&[u8]> {
        (self.end.as_ref() == Some(&prefix_end(&self.start))).then_some(self.start.as_slice())
    }

    /// The first key of a range with no end (every key from it on), if it is one.
    pub(crate) fn open_start(&self) -> Option<&[u8]> {
        matches!(self.end, Some(Bound::Unbounded)).then_some(self.start.as_slice())
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        match &self.end {
            None => key == self.start.as_slice(),
            Some(end) => {
                key >= self.start.as_slice()
                    && match end {
                        Bound::Excluded(e) => key < e.as_slice(),
                        _ => true,
                    }
            }
        }
    }

    /// The bounds to hand to `BTreeMap::range`, or `None` when the range is empty (a
    /// `range_end` at or below `key`, which `BTreeMap::range` would panic on).
    pub(crate) fn bounds(&self) -> Option<Bounds> {
        let end = match &self.end {
            None => Bound::Included(self.start.clone()),
            Some(Bound::Excluded(e)) if e.as_slice() <= self.start.as_slice() => return None,
            Some(e) => e.clone(),
        };
        Some((Bound::Included(self.start.clone()), end))
    }
}

/// Sort direction of a [`RangeRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum SortOrder {
    /// No sorting requested: key order.
    #[default]
    None,
    /// Ascending.
    Ascend,
    /// Descending.
    Descend,
}

/// What a [`RangeRequest`] sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum SortTarget {
    /// The key bytes.
    #[default]
    Key,
    /// The version.
    Version,
    /// The create revision.
    Create,
    /// The mod revision.
    Mod,
    /// The value bytes.
    Value,
}

/// An etcd `RangeRequest` (SPEC E2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RangeRequest {
    /// The first key.
    pub key: Vec<u8>,
    /// Empty: `key` alone; `"\0"`: every key ≥ `key`; else the keys in `[key, range_end)`.
    pub range_end: Vec<u8>,
    /// At most this many key-values (0 = no limit); `more` tells whether some were left out.
    pub limit: usize,
    /// The revision to read at (0: the current one); any revision from the last compaction
    /// on is answered as it was (SPEC K9).
    pub revision: i64,
    /// Sort direction.
    pub sort_order: SortOrder,
    /// Sort field.
    pub sort_target: SortTarget,
    /// Leave values out.
    pub keys_only: bool,
    /// Only count.
    pub count_only: bool,
    /// Keep keys with a mod revision ≥ this (0 = no bound).
    pub min_mod_revision: i64,
    /// Keep keys with a mod revision ≤ this (0 = no bound).
    pub max_mod_revision: i64,
    /// Keep keys with a create revision ≥ this (0 = no bound).
    pub min_create_revision: i64,
    /// Keep keys with a create revision ≤ this (0 = no bound).
    pub max_create_revision: i64,
}

impl RangeRequest {
    /// The keys `[key, range_end)` with etcd's conventions for `range_end`.
    pub fn new(key: impl AsRef<[u8]>, range_end: impl AsRef<[u8]>) -> RangeRequest {
        RangeRequest {
            key: key.as_ref().to_vec(),
            range_end: range_end.as_ref().to_vec(),
            ..RangeRequest::default()
        }
    }

    /// Every key starting with `prefix` (every key for an empty one), in etcd's terms.
    pub fn prefix(prefix: impl AsRef<[u8]>) -> RangeRequest {
        let prefix = prefix.as_ref();
        let end = match prefix_end(prefix) {
            Bound::Excluded(e) => e,
            _ => vec![0],
        };
        let key = if prefix.is_empty() {
            vec![0]
        } else {
            prefix.to_vec()
        };
        RangeRequest::new(key, end)
    }

    /// Whether this read asks for a revision older than `current` (0 and `current` are the
    /// present).
    pub(crate) fn is_past(&self, current: i64) -> bool {
        self.revision != 0 && self.revision < current
    }

    fn keep(&self, kv: &KeyValue) -> bool {
        let within = |v: i64, min: i64, max: i64| (min == 0 || v >= min) && (max == 0 || v <= max);
        within(
            kv.mod_revision,
            self.min_mod_revision,
            self.max_mod_revision,
        ) && within(
            kv.create_revision,
            self.min_create_revision,
            self.max_create_revision,
        )
    }
}

/// What a [`RangeRequest`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeResponse {
    /// The key-values, after filters, sorting and limit (none with `count_only`).
    pub kvs: Vec<KeyValue>,
    /// Whether the limit left some out.
    pub more: bool,
    /// How many keys the range holds (before filters and limit, as etcd counts).
    pub count: i64,
}

fn compare(target: SortTarget, a: &KeyValue, b: &KeyValue) -> Ordering {
    match target {
        SortTarget::Key => a.key.cmp(&b.key),
        SortTarget::Version => a.version.cmp(&b.version),
        SortTarget::Create => a.create_revision.cmp(&b.create_revision),
        SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
        SortTarget::Value => a.value.cmp(&b.value),
    }
}

impl KvIndex {
    /// Key-values with a value in `range`, in key order.
    pub(crate) fn range_of(&self, range: &KeyRange) -> Vec<KeyValue> {
        self.visit(range.bounds(), |_| true)
    }

    /// Keys with a value in `range`, in key order.
    pub(crate) fn keys_in(&self, range: &KeyRange) -> Vec<Vec<u8>> {
        self.visit(range.bounds(), |_| true)
            .into_iter()
            .map(|kv| kv.key)
            .collect()
    }

    /// etcd's range semantics: count everything in range, filter by revisions, sort (a target
    /// other than the key sorts ascending by default; ties stay in key order), then cut at the
    /// limit.
    pub(crate) fn range_request(&self, r: &RangeRequest) -> RangeResponse {
        let range = KeyRange::new(&r.key, &r.range_end);
        let mut count = 0i64;
        let plain_limit = r.sort_order == SortOrder::None
            && r.sort_target == SortTarget::Key
            && r.min_mod_revision == 0
            && r.max_mod_revision == 0
            && r.min_create_revision == 0
            && r.max_create_revision == 0;
        let kvs = self.visit(range.bounds(), |kv| {
            count += 1;
            !r.count_only
                && r.keep(kv)
                && !(plain_limit && r.limit > 0 && (count as usize) > r.limit + 1)
        });
        shape(r, kvs, count)
    }
}

/// etcd's answer from the key-values of the range that pass its filters (`kvs`, in key order)
/// and how many keys the range holds: sorted, cut at the limit, values left out if asked.
pub(crate) fn shape(r: &RangeRequest, mut kvs: Vec<KeyValue>, count: i64) -> RangeResponse {
    if r.count_only {
        return RangeResponse {
            kvs: Vec::new(),
            more: false,
            count,
        };
    }
    let order = match (r.sort_target, r.sort_order) {
        (SortTarget::Key, SortOrder::Ascend) => SortOrder::None,
        (t, SortOrder::None) if t != SortTarget::Key => SortOrder::Ascend,
        (_, o) => o,
    };
    match order {
        SortOrder::None => {}
        SortOrder::Ascend => kvs.sort_by(|a, b| compare(r.sort_target, a, b)),
        SortOrder::Descend => kvs.sort_by(|a, b| compare(r.sort_target, b, a)),
    }
    let mut more = false;
    if r.limit > 0 && kvs.len() > r.limit {
        kvs.truncate(r.limit);
        more = true;
    }
    if r.keys_only {
        for kv in &mut kvs {
            kv.value = Vec::new();
        }
    }
    RangeResponse { kvs, more, count }
}

/// etcd's range over every key-value of the range (in key order), as it was at some revision.
pub(crate) fn respond(r: &RangeRequest, all: Vec<KeyValue>) -> RangeResponse {
    let count = all.len() as i64;
    let kvs = if r.count_only {
        Vec::new()
    } else {
        all.into_iter().filter(|kv| r.keep(kv)).collect()
    };
    shape(r, kvs, count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Batch;

    fn index(entries: &[(&str, &str)]) -> KvIndex {
        let mut ix = KvIndex::default();
        let mut b = Batch::new(false, false);
        for (k, v) in entries {
            ix.revision += 1;
            let rev = ix.revision;
            ix.put(k.as_bytes(), v.as_bytes(), 0, rev, &mut b);
        }
        ix
    }

    fn keys(r: &RangeResponse) -> Vec<String> {
        r.kvs
            .iter()
            .map(|kv| String::from_utf8(kv.key.clone()).unwrap())
            .collect()
    }

    #[test]
    fn e2_range_end_conventions() {
        let ix = index(&[("a", "1"), ("b", "2"), ("b/1", "3"), ("c", "4")]);
        let get = |k: &str, e: &[u8]| keys(&ix.range_request(&RangeRequest::new(k, e)));
        assert_eq!(get("b", b""), ["b"]);
        assert_eq!(get("b", b"\0"), ["b", "b/1", "c"]);
        assert_eq!(get("\0", b"\0"), ["a", "b", "b/1", "c"]);
        assert_eq!(get("a", b"c"), ["a", "b", "b/1"]);
        assert!(
            get("c", b"a").is_empty(),
            "an inverted range is empty, not a panic"
        );
        assert!(get("c", b"c").is_empty());
        assert!(get("zz", b"").is_empty());
        let r = KeyRange::prefix(b"b");
        assert!(r.contains(b"b/1") && r.contains(b"b") && !r.contains(b"c"));
    }

    #[test]
    fn e2_sort_filters_limit_count_keys_only() {
        // Revisions: a=1, b=2, c=3, then a rewritten at 4 (version 2).
        let ix = index(&[("a", "z"), ("b", "y"), ("c", "x"), ("a", "w")]);
        let all = RangeRequest::new("\0", "\0");
        let run = |f: &dyn Fn(&mut RangeRequest)| {
            let mut r = all.clone();
            f(&mut r);
            ix.range_request(&r)
        };
        assert_eq!(
            keys(&run(&|r| r.sort_order = SortOrder::Descend)),
            ["c", "b", "a"]
        );
        // A non-key target without an order sorts ascending (etcd).
        assert_eq!(
            keys(&run(&|r| r.sort_target = SortTarget::Mod)),
            ["b", "c", "a"]
        );
        assert_eq!(
            keys(&run(&|r| {
                r.sort_target = SortTarget::Value;
                r.sort_order = SortOrder::Descend;
            })),
            ["b", "c", "a"]
        );
        assert_eq!(
            keys(&run(&|r| {
                r.sort_target = SortTarget::Version;
                r.sort_order = SortOrder::Descend;
            })),
            ["a", "b", "c"]
        );
        assert_eq!(
            keys(&run(&|r| r.sort_target = SortTarget::Create)),
            ["a", "b", "c"]
        );
        let limited = run(&|r| r.limit = 2);
        assert_eq!(
            (keys(&limited), limited.more, limited.count),
            (vec!["a".to_string(), "b".into()], true, 3)
        );
        let exact = run(&|r| r.limit = 3);
        assert!(!exact.more);
        let sorted_limited = run(&|r| {
            r.limit = 1;
            r.sort_order = SortOrder::Descend;
        });
        assert_eq!(
            (keys(&sorted_limited), sorted_limited.more),
            (vec!["c".to_string()], true)
        );
        assert_eq!(keys(&run(&|r| r.min_mod_revision = 3)), ["a", "c"]);
        assert_eq!(keys(&run(&|r| r.max_mod_revision = 2)), ["b"]);
        assert_eq!(keys(&run(&|r| r.min_create_revision = 2)), ["b", "c"]);
        assert_eq!(keys(&run(&|r| r.max_create_revision = 1)), ["a"]);
        let filtered = run(&|r| r.min_create_revision = 2);
        assert_eq!(
            filtered.count, 3,
            "count ignores the revision filters, as in etcd"
        );
        let counted = run(&|r| r.count_only = true);
        assert_eq!((counted.count, counted.kvs.len()), (3, 0));
        let bare = run(&|r| r.keys_only = true);
        assert!(bare.kvs.iter().all(|kv| kv.value.is_empty()));
        assert_eq!(bare.kvs[0].version, 2);
    }
}
