//! The store check's real synced write: what `serve` needs from the disk
//! under the data dir, tried rather than assumed (docs/operating.md, "A
//! failing disk").

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The probe's name in the data dir (with the process id, so that two
/// doctors never share one).
pub(super) const PROBE_PREFIX: &str = ".doctor-sync-probe-";

/// Writes a small owner-only file in `dir`, syncs it and the folder, and
/// removes it. The error says which step failed and the OS error, nothing
/// else.
pub(super) fn synced_write(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!("{PROBE_PREFIX}{}", std::process::id()));
    let step = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&probe)
            .map_err(step("create"))?;
        file.write_all(&[0u8; 4096]).map_err(step("write"))?;
        file.sync_all().map_err(step("fsync"))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(step("fsync of the folder"))
    })();
    // Removed whatever happened; a removal that fails after a failed step
    // adds nothing to say.
    let removed = std::fs::remove_file(&probe);
    written?;
    removed.map_err(step("remove"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synced_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        synced_write(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_folder_fails_at_create() {
        let dir = tempfile::tempdir().unwrap();
        let err = synced_write(&dir.path().join("gone")).unwrap_err();
        assert!(err.starts_with("create: "), "{err}");
    }
}
