//! Integration tests of stream-memory: the frontmatter table, the
//! filesystem connector, the root lock and the materializer against a real
//! SQLite store, real settled runs and real files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod decide;
mod frontmatter;
mod lock;
mod materialize;
mod root_identity;
mod scan;
