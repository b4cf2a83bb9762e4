//! The S2-S4 mutex and election tests over a backend that implements only the recipes' seam
//! (no lease-loss or demotion fast path): the recipes need nothing else.

mod recipes;
mod support;

use support::{eventually, manual, secs, SeamOnly, WAIT};
use tenure::sync::{Session, SessionOptions};
use tenure::Tenure;

fn backend(db: &Tenure) -> SeamOnly {
    SeamOnly(db.clone())
}

fn session(db: &Tenure) -> Session {
    Session::new(
        &backend(db),
        SessionOptions {
            ttl: secs(30),
            keepalive_interval: None,
        },
    )
    .unwrap()
}
