//! Issue 12 item 1: the data dir and the store's files are owner-only,
//! whatever modes they were found with.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::common::Home;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Every file and folder under `dir`, `dir` included.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_owned()];
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            out.extend(tree(&entry.unwrap().path()));
        }
    }
    out
}

/// Today's failure: a pre-made 0755 `.thestream` got a world-readable
/// `store.db`. Also the upgrade case: files an older build left 0644,
/// `-wal`/`-shm` included (held open by another connection so that they
/// stay on disk across the command).
#[test]
fn a_loose_data_dir_and_loose_store_files_become_owner_only() {
    let home = Home::init();
    let data = home.path().join(".thestream");
    std::fs::create_dir_all(&data).unwrap();
    chmod(&data, 0o755);
    let run = home.run(&["events"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(mode(&data), 0o700);
    let db = data.join("store.db");
    assert_eq!(mode(&db), 0o600);

    // An older build's modes, with the WAL companions present.
    let held = rusqlite::Connection::open(&db).unwrap();
    held.execute_batch("PRAGMA journal_mode = WAL; SELECT count(*) FROM events;")
        .unwrap();
    chmod(&data, 0o755);
    let companions = [data.join("store.db-wal"), data.join("store.db-shm")];
    for path in std::iter::once(&db).chain(&companions) {
        assert!(path.exists(), "{}", path.display());
        chmod(path, 0o644);
    }
    let run = home.run(&["events"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(mode(&data), 0o700);
    for path in std::iter::once(&db).chain(&companions) {
        assert_eq!(mode(path), 0o600, "{}", path.display());
    }
    drop(held);
    for path in tree(&data) {
        assert_eq!(
            mode(&path) & 0o077,
            0,
            "{} is not owner-only",
            path.display()
        );
    }
}

/// A data dir owned by someone else is refused, exit 2, naming it; nothing
/// is created in it.
#[test]
fn a_data_dir_owned_by_another_user_is_refused_with_exit_2() {
    let home = Home::init();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let data = if uid == 0 {
        // As root: a folder of ours given to `nobody`.
        let data = home.path().join(".thestream");
        std::fs::create_dir_all(&data).unwrap();
        chmod(&data, 0o755);
        std::os::unix::fs::chown(&data, Some(65534), Some(65534)).unwrap();
        data
    } else {
        // Not root: a folder root owns.
        let config = std::fs::read_to_string(home.config()).unwrap();
        let config = config.replace("data_dir = \".thestream\"", "data_dir = \"/\"");
        std::fs::write(home.config(), config).unwrap();
        PathBuf::from("/")
    };
    assert_ne!(std::fs::metadata(&data).unwrap().uid(), uid);
    let before = mode(&data);
    let run = home.run(&["events"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    // Named as configured (`./.thestream` for the default config).
    let named = if uid == 0 {
        ".thestream "
    } else {
        "data dir / "
    };
    assert!(
        run.stderr.contains(named) && run.stderr.contains("is owned by uid"),
        "{}",
        run.stderr
    );
    assert_eq!(mode(&data), before, "a refused data dir is left as it was");
    if uid == 0 {
        assert!(!data.join("store.db").exists());
    }
}
