//! stream-worker: the capture rules as a table, the frame exchange in
//! process, and property tests of the argument validator.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod deps;
mod fuzz;
mod rules;
mod serve;
