//! TTL keys: the pure key index, transactions and watches.

pub(crate) mod index;
pub(crate) mod range;
pub(crate) mod txn;
pub(crate) mod watch;
