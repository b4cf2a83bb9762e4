//! The S2-S4 mutex and election tests over a backend that implements only the recipes' seam
//! (no lease-loss or demotion fast path): the recipes need nothing else.

mod recipes;
mod support;

use support::{eventually, mem, SeamOnly, WAIT};
use tenure::sync::Session;
use tenure::Tenure;

fn backend(db: &Tenure) -> SeamOnly {
    SeamOnly(db.clone())
}

fn session(db: &Tenure) -> Session {
    support::session_on(&backend(db))
}
