//! The one rule for a file written for the user (`backup` and the three
//! exports): its folder is opened once, `O_DIRECTORY | O_NOFOLLOW`, and must
//! be a real directory owned by us that no group or other can write; every
//! later step works through that descriptor (`openat`, `renameat`), so a
//! folder swapped for a symlink after the check cannot receive a byte.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::dest::DestinationError;

/// A checked destination: the folder's descriptor and the file's name in it.
#[derive(Debug)]
pub struct Destination {
    dir: OwnedFd,
    folder: PathBuf,
    name: OsString,
    path: PathBuf,
}

impl Destination {
    /// Checks `path` by the rule above: not stdout, a plain file name, a
    /// private folder of ours, and no entry of that name but a regular file.
    pub fn open(path: &Path) -> Result<Self, DestinationError> {
        let text = path.as_os_str();
        if text == "-" || path.starts_with("/dev") || path.starts_with("/proc") {
            return Err(DestinationError::Stdout);
        }
        let not_a_file = || DestinationError::NotAFile {
            path: path.to_owned(),
        };
        let name = path.file_name().ok_or_else(not_a_file)?.to_owned();
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            Some(_) => PathBuf::from("."),
            None => return Err(not_a_file()),
        };
        let not_dir = || DestinationError::ParentNotDirectory {
            path: folder.clone(),
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = rustix::fs::open(&folder, flags, Mode::empty()).map_err(|_| not_dir())?;
        let stat = rustix::fs::fstat(&dir).map_err(|_| not_dir())?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            return Err(not_dir());
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        if stat.st_uid != uid {
            return Err(DestinationError::ParentNotOwned { path: folder });
        }
        // Another user able to write the folder could swap the file in or out.
        if stat.st_mode & 0o022 != 0 {
            return Err(DestinationError::ParentShared { path: folder });
        }
        let destination = Self {
            dir,
            path: path.to_owned(),
            folder,
            name,
        };
        match destination.entry()? {
            None | Some(FileType::RegularFile) => Ok(destination),
            Some(FileType::Directory) => Err(DestinationError::Directory {
                path: path.to_owned(),
            }),
            Some(_) => Err(DestinationError::NotRegular {
                path: path.to_owned(),
            }),
        }
    }

    /// The type of what is already there under the name, read through the
    /// folder's descriptor without following a symlink.
    fn entry(&self) -> Result<Option<FileType>, DestinationError> {
        match rustix::fs::statat(&self.dir, &*self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
            Err(Errno::NOENT) => Ok(None),
            Err(_) => Err(DestinationError::NotRegular {
                path: self.path.clone(),
            }),
        }
    }

    /// Whether a regular file already has the name.
    pub fn exists(&self) -> Result<bool, DestinationError> {
        Ok(self.entry()?.is_some())
    }

    /// The same folder, another name in it (an export's manifest).
    pub fn beside(&self, name: &OsStr) -> Result<Self, DestinationError> {
        let dir = self
            .dir
            .try_clone()
            .map_err(|_| DestinationError::ParentNotDirectory {
                path: self.folder.clone(),
            })?;
        let sibling = Self {
            dir,
            path: self.folder.join(name),
            folder: self.folder.clone(),
            name: name.to_owned(),
        };
        match sibling.entry()? {
            None | Some(FileType::RegularFile) => Ok(sibling),
            Some(_) => Err(DestinationError::NotRegular { path: sibling.path }),
        }
    }

    /// The path as the user gave it (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder, as the user gave it (for messages).
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// Writes the file owner-only and atomically through the folder's
    /// descriptor: a fresh 0600 temporary file made with `openat`
    /// (`O_EXCL | O_NOFOLLOW`), filled by `fill`, fsynced, `renameat`'d over
    /// the name, then the folder fsynced. Returns the bytes written; on any
    /// failure the temporary file is removed.
    pub fn write_with(
        &self,
        fill: impl FnOnce(&mut File) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).map_err(|_| std::io::Error::other("no randomness"))?;
        let mut temp = OsString::from(".");
        temp.push(&self.name);
        temp.push(format!(
            ".{}.tmp",
            nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ));
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.dir, &*temp, flags, Mode::from_raw_mode(0o600))?;
        let result = (|| {
            // The umask may only have narrowed 0600; say it exactly.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))?;
            let mut file = File::from(fd);
            fill(&mut file)?;
            file.sync_all()?;
            let size = file.metadata()?.len();
            rustix::fs::renameat(&self.dir, &*temp, &self.dir, &*self.name)?;
            rustix::fs::fsync(&self.dir)?;
            Ok(size)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&self.dir, &*temp, AtFlags::empty());
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn the_file_lands_through_the_descriptor_owner_only_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().join("out.jsonl");
        let dest = Destination::open(&path).unwrap();
        assert!(!dest.exists().unwrap());
        let size = dest.write_with(|f| f.write_all(b"abc")).unwrap();
        assert_eq!(size, 3);
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(dest.exists().unwrap());
        let failed = dest.write_with(|_| Err(std::io::Error::other("no")));
        assert!(failed.is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "the failed write left nothing");
    }

    #[test]
    fn a_symlinked_shared_or_missing_folder_and_a_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            Destination::open(&link.join("x")),
            Err(DestinationError::ParentNotDirectory { .. })
        ));
        assert!(matches!(
            Destination::open(&dir.path().join("missing/x")),
            Err(DestinationError::ParentNotDirectory { .. })
        ));
        assert!(matches!(
            Destination::open(&real),
            Err(DestinationError::Directory { .. })
        ));
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o720)).unwrap();
        assert!(matches!(
            Destination::open(&real.join("x")),
            Err(DestinationError::ParentShared { .. })
        ));
    }
}
