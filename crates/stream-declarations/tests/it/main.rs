//! Integration tests of stream-declarations: the declaration rules of
//! `docs/design.md §6` as a table, strict refusals naming their field, the
//! fingerprint and the registry, installed files, golden tool schemas,
//! schema/typed agreement on tool arguments, and the shipped declarations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod args;
mod common;
mod fingerprint;
mod install;
mod refusals;
mod rules;
mod schemas;
mod shipped;
