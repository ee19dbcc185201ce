//! Integration tests of both backends: the conformance suite on each, plus
//! the process-level tests only a real file or server can answer (racing
//! processes, SIGKILL mid-transaction, a dropped connection, corrupt,
//! foreign and newer stores).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod lease;
mod migration;
mod parts;
mod postgres;
mod postgres_readonly;
mod postgres_roles;
mod postgres_tls;
mod processes;
mod readonly;
mod refusals;
mod texts;

mod conformance {
    stream_store::conformance_suite!(crate::common::fresh_store());
}
