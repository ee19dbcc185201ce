#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! Integration tests of stream-sandbox. Every isolation test runs the real
//! probe binary through the crate's own `spawn`, asks it to attempt one
//! operation from inside the sandbox, and reads its one-line answer.

mod allowed;
mod boundaries;
mod common;
mod denied;
mod forked;
mod supervision;
mod verify;
