//! Leases: the expiry heap and the pure lessor state machine.

pub(crate) mod lessor;
pub(crate) mod queue;
