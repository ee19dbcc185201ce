//! The store's files are owner-only: they hold every message, proposal and
//! memory version.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::StoreError;

/// Mode of every store file.
pub(crate) const FILE_MODE: u32 = 0o600;

/// The SQLite companions of `db` that hold its data too.
pub(crate) fn companions(db: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Creates `db` owner-only if it is missing, and tightens it and its
/// `-wal`/`-shm` to 0600 when an older build or a loose umask left them
/// readable by others. SQLite creates the companions with the database
/// file's mode, so a private database file keeps new ones private.
pub(crate) fn make_private(db: &Path) -> Result<(), StoreError> {
    let main = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(FILE_MODE)
        .open(db)
        .map_err(|e| StoreError::Backend(format!("cannot open {}: {}", db.display(), e.kind())))?;
    tighten(db, &main)?;
    for path in companions(db) {
        match File::open(&path) {
            Ok(file) => tighten(&path, &file)?,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(_) => return Err(not_private(&path)),
        }
    }
    Ok(())
}

/// Checks the open file itself (no second path lookup), and `fchmod`s it
/// to 0600 when group or others have any bit.
fn tighten(path: &Path, file: &File) -> Result<(), StoreError> {
    let meta = file.metadata().map_err(|_| not_private(path))?;
    if !meta.file_type().is_file() {
        return Err(not_private(path));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(|_| not_private(path))?;
    }
    Ok(())
}

fn not_private(path: &Path) -> StoreError {
    StoreError::NotPrivate {
        path: path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_store_file_is_created_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        make_private(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
    }

    #[test]
    fn loose_store_files_are_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        for path in std::iter::once(db.clone()).chain(companions(&db)) {
            std::fs::write(&path, b"").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        make_private(&db).unwrap();
        for path in std::iter::once(db.clone()).chain(companions(&db)) {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }

    #[test]
    fn a_directory_in_place_of_a_companion_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        std::fs::create_dir(dir.path().join("store.db-wal")).unwrap();
        let err = make_private(&db).unwrap_err();
        assert!(matches!(err, StoreError::NotPrivate { .. }), "{err}");
        assert!(err.to_string().contains("store.db-wal"), "{err}");
    }
}
