//! stream-broker end to end: the real `thestream-worker` binary, the real
//! broker and the scripted provider over loopback HTTP; a misbehaving test
//! worker for protocol violations; canaries for every leak.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod e2e;
mod forked;
mod leaks;
mod misbehaving;
mod selftest;
mod spare;
