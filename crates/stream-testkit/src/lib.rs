//! Test support shared by the integration and end-to-end tests of thestream.
//!
//! Owns: [`canary`] strings that must never appear where sensitive text is
//! forbidden, and [`bin`], which finds (building if needed) the workspace's
//! real binaries so end-to-end tests run them as a user would; [`telegram`],
//! a loopback fake of the Telegram Bot API (also the `stream-fake-telegram`
//! binary); [`provider`], the scripted LLM provider (a loopback HTTP server
//! speaking the OpenAI Chat Completions and Anthropic Messages shapes,
//! recording every request); and [`packets`], a realistic `stream.sandbox/1`
//! packet with the three proposal tools.
//!
//! Nothing in production code may depend on this crate.

#![deny(missing_docs)]

pub mod bin;
pub mod canary;
pub mod packets;
pub mod provider;
pub mod stack;
pub mod telegram;
