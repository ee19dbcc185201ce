//! End-to-end tests of the `thestream` binary: exit codes, config errors,
//! `init`, `events`, `declaration-check`, `scan`, `proposal-decision` and
//! `proposal-project`, read only through the CLI as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod activation;
mod common;
mod conversation;
mod decisions;
mod demo;
mod documents;
mod foundation;
mod memory_decisions;
mod review;
mod telegram_menu;
