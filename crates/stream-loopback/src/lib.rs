//! Loopback fakes of thestream's two outside parties, real HTTP servers on
//! 127.0.0.1: [`telegram`], the fake Telegram Bot API; [`provider`], the
//! scripted LLM provider (OpenAI Chat Completions and Anthropic Messages
//! shapes, recording every request); and [`stack`], a whole loopback world
//! around the real `thestream` binary.
//!
//! This crate ships: `thestream demo` runs on it. Test-only support (canaries,
//! binary location, packets) lives in `stream-testkit`, which production
//! code never links (guarded by `stream-cli`'s dependency test).

#![deny(missing_docs)]

pub mod provider;
pub mod stack;
pub mod telegram;
