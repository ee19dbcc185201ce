//! End-to-end tests of the `thestream` binary: exit codes, config errors,
//! `init`, `events`, `declaration-check`, `scan`, `proposal-decision` and
//! `proposal-project`, read only through the CLI as a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod activation;
mod annotations;
mod attempt;
mod backup;
mod common;
mod conversation;
mod decisions;
mod delivery;
mod demo;
mod deps;
mod doctor;
mod documents;
mod external_export;
mod failing_disk;
mod foundation;
mod full_disk;
mod inspect;
mod layers;
mod lease;
mod live;
mod llama;
mod memory_decisions;
mod memory_root;
mod pair;
mod postgres;
mod private_store;
mod provider_words;
mod raw_calls;
mod repo;
mod review;
mod review_terminal;
mod signed_decisions;
mod slow_models;
mod telegram_menu;
