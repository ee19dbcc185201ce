//! The context root: its identity (which names its lock) and every file
//! operation on `memory.md`, relative to one directory descriptor, never
//! through a link.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use stream_core::MemoryPath;
use stream_core::canon::sha256;
use stream_core::payload::MaterializationFailure;

use super::error::{Stop, fail};
use crate::lock::RootLock;

/// The identity of a context root for its lock: the device and inode of
/// the directory entry (not followed), so that every spelling of the path
/// (relative, absolute, through `..`) names one lock.
pub(super) fn root_identity(root: &Path) -> Option<(u64, u64)> {
    rustix::fs::lstat(root)
        .ok()
        .map(|st| (dev_of(&st), st.st_ino))
}

/// The lock file name of a context root: by device and inode when the root
/// exists, else by a digest of the path (nothing is written then). Carries
/// no path.
pub fn lock_name(root: &Path) -> String {
    match root_identity(root) {
        Some((dev, ino)) => format!("context-root-{dev:x}-{ino:x}.lock"),
        None => {
            let digest = sha256(root.as_os_str().as_encoded_bytes());
            format!("context-root-{}.lock", digest.short(16))
        }
    }
}

/// The context root, opened once: every later file operation is relative
/// to this descriptor and never follows a link.
pub(super) struct Root {
    fd: OwnedFd,
    pub(super) dev: u64,
    pub(super) ino: u64,
}

#[allow(clippy::useless_conversion)]
fn dev_of(st: &rustix::fs::Stat) -> u64 {
    u64::from(st.st_dev)
}

/// The kind of entry a path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The context root.
    Directory,
    /// `memory.md`.
    RegularFile,
}

/// The one judgment of an `lstat` (never followed) before an open: exactly
/// the expected kind passes, a symlink is `symlink`, anything else (every
/// other file type, or no entry) is `path`. Every file type is named, so a
/// new one cannot pass unnoticed.
fn expect_kind(st: rustix::io::Result<rustix::fs::Stat>, expected: Kind) -> Result<(), Stop> {
    use MaterializationFailure as F;
    let Ok(st) = st else {
        return fail(F::Path);
    };
    let found = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Some(Kind::Directory),
        FileType::RegularFile => Some(Kind::RegularFile),
        FileType::Symlink => return fail(F::Symlink),
        FileType::Fifo
        | FileType::Socket
        | FileType::CharacterDevice
        | FileType::BlockDevice
        | FileType::Unknown => None,
    };
    if found == Some(expected) {
        Ok(())
    } else {
        fail(F::Path)
    }
}

fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

impl Root {
    /// The root must exist and be a real directory, not a symlink.
    pub(super) fn open(path: &Path) -> Result<Self, Stop> {
        use MaterializationFailure as F;
        expect_kind(rustix::fs::lstat(path), Kind::Directory)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
            Errno::LOOP => Stop::Fail(F::Symlink),
            _ => Stop::Fail(F::Path),
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|_| Stop::Fail(F::Path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return fail(F::Path);
        }
        Ok(Self {
            fd,
            dev: dev_of(&st),
            ino: st.st_ino,
        })
    }

    /// Opens `memory.md`: a regular file on the root's filesystem, never
    /// through a link. Returns it with its size.
    fn open_memory(&self) -> Result<(std::fs::File, u64), Stop> {
        use MaterializationFailure as F;
        let name = MemoryPath::VALUE;
        expect_kind(
            rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW),
            Kind::RegularFile,
        )?;
        let fd =
            rustix::fs::openat(&self.fd, name, read_flags(), Mode::empty()).map_err(
                |e| match e {
                    Errno::LOOP => Stop::Fail(F::Symlink),
                    _ => Stop::Fail(F::Path),
                },
            )?;
        let st = rustix::fs::fstat(&fd).map_err(|_| Stop::Fail(F::Path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || dev_of(&st) != self.dev {
            return fail(F::Path);
        }
        Ok((fd.into(), u64::try_from(st.st_size).unwrap_or(u64::MAX)))
    }

    /// At most `cap` bytes of `memory.md` (more cannot match anything).
    pub(super) fn read_memory(&self, cap: u64) -> Result<Vec<u8>, Stop> {
        self.read_memory_open(cap).map(|(bytes, _)| bytes)
    }

    /// [`Self::read_memory`], and the file still open.
    fn read_memory_open(&self, cap: u64) -> Result<(Vec<u8>, std::fs::File), Stop> {
        let (file, size) = self.open_memory()?;
        // Sized by the fstat, so that the read takes two calls, not a
        // dozen doubling ones; `take` still bounds it if the file grew.
        let hint = usize::try_from(size.min(cap)).unwrap_or(0);
        let mut bytes = Vec::with_capacity(hint);
        let mut capped = file.take(cap);
        capped
            .read_to_end(&mut bytes)
            .map_err(|_| Stop::Fail(MaterializationFailure::Path))?;
        Ok((bytes, capped.into_inner()))
    }

    /// Removes temporary files a crashed materializer left (the lock is
    /// ours, so no live writer owns them).
    fn remove_stale_temporaries(&self) {
        let Ok(dir) = Dir::read_from(&self.fd) else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let stale = name.to_str().is_ok_and(|n| {
                n.starts_with(TEMP_PREFIX) && n.ends_with(".tmp") && n.len() > TEMP_PREFIX.len()
            });
            if stale {
                let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
            }
        }
    }

    /// Writes `new` to an owner-only hidden temporary file in the root and
    /// fsyncs it. Nothing is visible until [`Temporary::rename_over`]; a
    /// dropped [`Temporary`] removes its file. This may run before the
    /// decision it serves is durable: only the rename needs that.
    pub(super) fn stage_memory(self, new: &[u8], lock: &RootLock) -> Result<Temporary, Stop> {
        self.remove_stale_temporaries();
        let name = format!("{TEMP_PREFIX}{}.tmp", lock.evidence().token);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, name.as_str(), flags, Mode::from_raw_mode(0o600))
            .map_err(|_| Stop::Fail(MaterializationFailure::Write))?;
        // From here on, dropping it removes the file.
        let temporary = Temporary {
            root: Some(self),
            name,
        };
        let written = (|| -> std::io::Result<()> {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(new)?;
            file.sync_all()?;
            let st = rustix::fs::fstat(&file)?;
            if st.st_mode & 0o7777 != 0o600 {
                return Err(std::io::ErrorKind::PermissionDenied.into());
            }
            Ok(())
        })();
        match written {
            Ok(()) => Ok(temporary),
            Err(_) => fail(MaterializationFailure::Write),
        }
    }

    /// Recovery: `memory.md` already holds the new bytes. Enforce 0600 and
    /// make the file durable; the returned [`Renamed`] makes the earlier
    /// rename durable.
    pub(super) fn settle_memory(self) -> Result<Renamed, Stop> {
        let (file, _) = self.open_memory()?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(0o600))
            .and_then(|()| rustix::fs::fsync(&file))
            .map_err(|_| Stop::Fail(MaterializationFailure::Write))?;
        Ok(Renamed {
            root: self.fd,
            old: None,
        })
    }
}

/// A `memory.md` renamed into place whose rename is not yet durable: the
/// root still needs its fsync. That fsync may run beside the scan of the
/// new bytes (the receipt commits only after [`Renamed::make_durable`]
/// returned). The replaced file is held open until then, so that the
/// rename does not free its blocks inline (about 65 us for 64 KiB).
pub(super) struct Renamed {
    root: OwnedFd,
    old: Option<std::fs::File>,
}

impl Renamed {
    /// Fsyncs the root, then lets the replaced file go.
    pub(super) fn make_durable(self) -> Result<(), Stop> {
        let synced = rustix::fs::fsync(&self.root);
        drop(self.old);
        synced.map_err(|_| Stop::Fail(MaterializationFailure::Write))
    }
}

/// The new bytes in a durable hidden temporary file beside `memory.md`,
/// not yet renamed over it. Dropped, it removes the file.
pub(super) struct Temporary {
    /// `None` once renamed.
    root: Option<Root>,
    name: String,
}

impl Temporary {
    /// A last look that `memory.md` still holds `base` (a hand edit since
    /// the check is not overwritten), a check that the lock is still ours,
    /// then the atomic rename over `memory.md`. The rename is made durable
    /// by the returned [`Renamed`].
    pub(super) fn rename_over(
        mut self,
        base: &[u8],
        cap: u64,
        lock: &RootLock,
    ) -> Result<Renamed, Stop> {
        let Some(root) = self.root.as_ref() else {
            return fail(MaterializationFailure::Write);
        };
        let old = match root.read_memory_open(cap)? {
            (bytes, old) if bytes == base => old,
            _ => return fail(MaterializationFailure::StaleBase),
        };
        lock.check().map_err(|e| Stop::Abort(e.into()))?;
        rustix::fs::renameat(&root.fd, self.name.as_str(), &root.fd, MemoryPath::VALUE)
            .map_err(|_| Stop::Fail(MaterializationFailure::Write))?;
        let Some(root) = self.root.take() else {
            return fail(MaterializationFailure::Write);
        };
        Ok(Renamed {
            root: root.fd,
            old: Some(old),
        })
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if let Some(root) = &self.root {
            let _ = rustix::fs::unlinkat(&root.fd, self.name.as_str(), AtFlags::empty());
        }
    }
}

/// Hidden (scans skip it): `.memory.md.<token>.tmp`.
const TEMP_PREFIX: &str = ".memory.md.";

#[cfg(test)]
mod tests {
    use super::*;

    /// `Root::open` and `open_memory` share one judgment of what an entry
    /// is: only the expected kind passes, a link is `symlink`, the rest
    /// `path`.
    #[test]
    fn expect_kind_passes_only_the_expected_kind() {
        use MaterializationFailure as F;
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        std::fs::create_dir(at("dir")).unwrap();
        std::fs::write(at("file"), b"x").unwrap();
        std::os::unix::fs::symlink(at("file"), at("link")).unwrap();
        let fifo = std::ffi::CString::new(at("fifo").as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let outcome = |name: &str, kind: Kind| match expect_kind(rustix::fs::lstat(at(name)), kind)
        {
            Ok(()) => None,
            Err(Stop::Fail(reason)) => Some(reason),
            Err(Stop::Abort(e)) => panic!("{e}"),
        };
        for (name, as_dir, as_file) in [
            ("dir", None, Some(F::Path)),
            ("file", Some(F::Path), None),
            ("link", Some(F::Symlink), Some(F::Symlink)),
            ("fifo", Some(F::Path), Some(F::Path)),
            ("missing", Some(F::Path), Some(F::Path)),
        ] {
            assert_eq!(outcome(name, Kind::Directory), as_dir, "{name}");
            assert_eq!(outcome(name, Kind::RegularFile), as_file, "{name}");
        }
    }

    #[test]
    fn lock_names_are_per_root_whatever_the_spelling_and_carry_no_path() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        assert_ne!(lock_name(&a), lock_name(&b));
        assert_eq!(lock_name(&a), lock_name(&dir.path().join("b/../a/.")));
        for name in [lock_name(&a), lock_name(Path::new("/srv/missing/context"))] {
            assert!(!name.contains("srv") && !name.contains('/'), "{name}");
            assert!(name.starts_with("context-root-") && name.ends_with(".lock"));
        }
    }
}
