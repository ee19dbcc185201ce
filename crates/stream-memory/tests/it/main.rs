//! Integration tests of stream-memory: the frontmatter table and the
//! filesystem connector against a real SQLite store and real files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod frontmatter;
mod scan;
