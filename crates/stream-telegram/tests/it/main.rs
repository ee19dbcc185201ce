//! Integration tests of the Telegram channel against the loopback fake Bot
//! API of `stream-testkit` (real HTTP on 127.0.0.1) and a real SQLite store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod admission;
mod client;
mod common;
mod delivery;
mod listener;
mod menu;
mod polling;
mod webhook;
