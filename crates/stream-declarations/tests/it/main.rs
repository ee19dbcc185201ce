//! Integration tests of stream-declarations: the seed's Declaration rules as
//! a table, strict refusals naming their field, the fingerprint and the
//! registry, golden tool schemas, schema/typed agreement on tool arguments,
//! and the shipped declarations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod args;
mod common;
mod fingerprint;
mod install;
mod refusals;
mod rules;
mod schemas;
mod shipped;
