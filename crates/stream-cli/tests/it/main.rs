//! End-to-end tests of the `thestream` binary: exit codes, config errors,
//! `init` and `events`, read only through the CLI as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod foundation;
mod telegram_menu;
