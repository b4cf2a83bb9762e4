//! Compare-and-swap transactions (SPEC K5).

use crate::types::{KeyValue, LeaseId};

/// How a compare relates the key's current field to the given one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `=`
    Equal,
    /// `≠`
    NotEqual,
    /// `<` (current less than given)
    Less,
    /// `>` (current greater than given)
    Greater,
}

/// The field a compare looks at, with the value to compare against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CompareTarget {
    /// The value bytes (lexicographic order). Fails on a missing key.
    Value(Vec<u8>),
    /// The version (0 for a missing key).
    Version(i64),
    /// The create revision (0 for a missing key).
    CreateRevision(i64),
    /// The mod revision (0 for a missing key).
    ModRevision(i64),
    /// The lease ID (0 for none or a missing key).
    Lease(i64),
}

/// One condition of a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Compare {
    /// The key compared.
    pub key: Vec<u8>,
    /// The relation.
    pub op: CompareOp,
    /// The field and the value it is compared with.
    pub target: CompareTarget,
}

impl Compare {
    fn new(key: impl AsRef<[u8]>, op: CompareOp, target: CompareTarget) -> Compare {
        Compare {
            key: key.as_ref().to_vec(),
            op,
            target,
        }
    }

    /// Compares the key's value.
    pub fn value(key: impl AsRef<[u8]>, op: CompareOp, value: impl AsRef<[u8]>) -> Compare {
        Compare::new(key, op, CompareTarget::Value(value.as_ref().to_vec()))
    }

    /// Compares the key's version (`version(k, Equal, 0)`: the key does not exist).
    pub fn version(key: impl AsRef<[u8]>, op: CompareOp, version: i64) -> Compare {
        Compare::new(key, op, CompareTarget::Version(version))
    }

    /// Compares the key's create revision.
    pub fn create_revision(key: impl AsRef<[u8]>, op: CompareOp, revision: i64) -> Compare {
        Compare::new(key, op, CompareTarget::CreateRevision(revision))
    }

    /// Compares the key's mod revision.
    pub fn mod_revision(key: impl AsRef<[u8]>, op: CompareOp, revision: i64) -> Compare {
        Compare::new(key, op, CompareTarget::ModRevision(revision))
    }

    /// Compares the key's lease (`None`: the key has no lease, or does not exist).
    pub fn lease(key: impl AsRef<[u8]>, op: CompareOp, lease: Option<LeaseId>) -> Compare {
        Compare::new(key, op, CompareTarget::Lease(lease.map_or(0, LeaseId::get)))
    }
}

/// One operation of a [`Txn`] branch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    /// Put a key, optionally attached to a lease.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease to attach to, or none (detaches).
        lease: Option<LeaseId>,
    },
    /// Read one key.
    Get {
        /// The key.
        key: Vec<u8>,
    },
    /// Delete one key.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Delete every key with a prefix.
    DeletePrefix {
        /// The prefix.
        prefix: Vec<u8>,
    },
    /// Read every key with a prefix, in key order.
    Range {
        /// The prefix.
        prefix: Vec<u8>,
        /// At most this many keys.
        limit: Option<usize>,
    },
}

impl Op {
    /// `Op::Put`.
    pub fn put(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, lease: Option<LeaseId>) -> Op {
        Op::Put {
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
            lease,
        }
    }

    /// `Op::Get`.
    pub fn get(key: impl AsRef<[u8]>) -> Op {
        Op::Get {
            key: key.as_ref().to_vec(),
        }
    }

    /// `Op::Delete`.
    pub fn delete(key: impl AsRef<[u8]>) -> Op {
        Op::Delete {
            key: key.as_ref().to_vec(),
        }
    }

    /// `Op::DeletePrefix`.
    pub fn delete_prefix(prefix: impl AsRef<[u8]>) -> Op {
        Op::DeletePrefix {
            prefix: prefix.as_ref().to_vec(),
        }
    }

    /// `Op::Range`.
    pub fn range(prefix: impl AsRef<[u8]>, limit: Option<usize>) -> Op {
        Op::Range {
            prefix: prefix.as_ref().to_vec(),
            limit,
        }
    }
}

/// A transaction: if every compare holds, run `success`, else `failure`; atomically, at one
/// revision, durable when [`Tenure::txn`](crate::Tenure::txn) returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    /// Conditions, all of which must hold.
    pub compares: Vec<Compare>,
    /// Operations run when every compare holds.
    pub success: Vec<Op>,
    /// Operations run otherwise.
    pub failure: Vec<Op>,
}

impl Txn {
    /// An empty transaction (no compare: succeeds).
    pub fn new() -> Txn {
        Txn::default()
    }

    /// Adds compares.
    pub fn when(mut self, compares: impl IntoIterator<Item = Compare>) -> Txn {
        self.compares.extend(compares);
        self
    }

    /// Adds operations to the success branch.
    pub fn then(mut self, ops: impl IntoIterator<Item = Op>) -> Txn {
        self.success.extend(ops);
        self
    }

    /// Adds operations to the failure branch.
    pub fn otherwise(mut self, ops: impl IntoIterator<Item = Op>) -> Txn {
        self.failure.extend(ops);
        self
    }
}

/// The result of one [`Op`], in the order of the branch that ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResponse {
    /// A put, at the transaction's revision.
    Put {
        /// The revision of the write.
        revision: i64,
    },
    /// A get: the key-value, or none.
    Get(Option<KeyValue>),
    /// A delete: whether the key existed.
    Delete(bool),
    /// A delete-prefix: how many keys were deleted.
    DeletePrefix(u64),
    /// A range: the keys found.
    Range(Vec<KeyValue>),
}

/// What a transaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResponse {
    /// Whether every compare held (the success branch ran).
    pub succeeded: bool,
    /// The store revision after the transaction (unchanged when it wrote nothing).
    pub revision: i64,
    /// One response per operation of the branch that ran.
    pub responses: Vec<OpResponse>,
}
