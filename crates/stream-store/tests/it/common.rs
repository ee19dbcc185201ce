//! Helpers: fresh stores in temporary folders, and child processes that
//! re-enter this test binary to act as a second OS process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use stream_store::SqliteStore;

pub fn fresh_store() -> SqliteStore {
    // The folder must outlive the store; leak it for the test's lifetime.
    let dir = tempfile::tempdir().unwrap().keep();
    SqliteStore::open(&dir.join("store.db")).unwrap()
}

/// A store, its file, and the folder that must outlive both.
pub fn temp_store() -> (SqliteStore, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    (store, path, dir)
}

/// Env var telling a re-entered test binary which child role to play.
pub const CHILD_ROLE: &str = "STREAM_STORE_CHILD_ROLE";
pub const CHILD_DB: &str = "STREAM_STORE_CHILD_DB";
pub const CHILD_ARG: &str = "STREAM_STORE_CHILD_ARG";

/// Runs the test named `test` of this binary as a child process in `role`.
pub fn spawn_child(test: &str, role: &str, db: &Path, arg: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .env(CHILD_DB, db)
        .env(CHILD_ARG, arg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The role this process plays, if it is a child.
pub fn child_role() -> Option<(String, PathBuf, String)> {
    let role = std::env::var(CHILD_ROLE).ok()?;
    let db = std::env::var(CHILD_DB).ok()?;
    let arg = std::env::var(CHILD_ARG).unwrap_or_default();
    Some((role, PathBuf::from(db), arg))
}

/// The "race" child role: waits for `go` to exist, appends `key/payload`
/// (from `arg`) once, and prints `OUTCOME inserted|converged|conflict`.
pub fn race(store: &dyn stream_store::Store, go: &Path, arg: &str) {
    use stream_store::AppendOutcome;
    while !go.exists() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let (key, payload) = arg.split_once('/').unwrap();
    let outcome = store
        .append(&stream_store::conformance::event(
            "test:race",
            key,
            serde_json::json!(payload),
        ))
        .unwrap();
    let name = match outcome {
        AppendOutcome::Inserted { .. } => "inserted",
        AppendOutcome::Converged { .. } => "converged",
        AppendOutcome::Conflict => "conflict",
    };
    println!("OUTCOME {name}");
}
