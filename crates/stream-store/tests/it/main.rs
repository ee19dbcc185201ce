//! Integration tests of the SQLite backend: the conformance suite, plus the
//! process-level tests only a real file can answer (racing processes,
//! SIGKILL mid-transaction, corrupt, foreign and newer files).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod migration;
mod parts;
mod processes;
mod refusals;

mod conformance {
    stream_store::conformance_suite!(crate::common::fresh_store());
}
