//! The worker binary, loaded once: copied into a sealed memory file that
//! nothing can change, so the bytes the parent hashes are the bytes every
//! attempt executes. A file replaced or overwritten on disk afterwards
//! changes nothing until the parent loads it again.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::sys;

/// Why the worker binary could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file could not be opened or read.
    #[error("worker binary {path} cannot be read: {kind:?}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error kind.
        kind: std::io::ErrorKind,
    },
    /// The path is not a regular file.
    #[error("worker binary {path} is not a regular file")]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// The sealed copy could not be made (memfd, copy, seals or reopen).
    #[error("worker binary could not be sealed in memory: {what} (errno {errno})")]
    Seal {
        /// What failed.
        what: &'static str,
        /// Its errno.
        errno: i32,
    },
}

/// A worker binary sealed in memory (`memfd` with write, grow, shrink and
/// seal seals), held through a read-only descriptor. Spawn it with
/// [`crate::spawn_image`].
#[derive(Debug)]
pub struct WorkerImage {
    fd: OwnedFd,
    len: u64,
    source: PathBuf,
}

fn io_errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

impl WorkerImage {
    /// Copies the regular file at `path` into a sealed memory file.
    pub fn load(path: &Path) -> Result<Self, ImageError> {
        let read = |e: std::io::Error| ImageError::Read {
            path: path.to_owned(),
            kind: e.kind(),
        };
        let mut file = File::open(path).map_err(read)?;
        if !file.metadata().map_err(read)?.is_file() {
            return Err(ImageError::NotAFile {
                path: path.to_owned(),
            });
        }
        let seal = |what| move |errno| ImageError::Seal { what, errno };
        let writable = sys::memfd_create_sealable(c"thestream-worker").map_err(seal("memfd"))?;
        let mut copy = File::from(writable);
        let mut buffer = vec![0u8; 1 << 20];
        let mut len = 0u64;
        loop {
            let n = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read(e)),
            };
            std::io::Write::write_all(&mut copy, &buffer[..n]).map_err(|e| ImageError::Seal {
                what: "copy",
                errno: io_errno(&e),
            })?;
            len += n as u64;
        }
        sys::seal_all(copy.as_raw_fd()).map_err(seal("seals"))?;
        // Keep only a read-only descriptor: nothing this process holds can
        // write the image, and exec needs no writer open on it.
        let fd = File::open(format!("/proc/self/fd/{}", copy.as_raw_fd())).map_err(|e| {
            ImageError::Seal {
                what: "reopen read-only",
                errno: io_errno(&e),
            }
        })?;
        drop(copy);
        Ok(Self {
            fd: OwnedFd::from(fd),
            len,
            source: path.to_owned(),
        })
    }

    /// The image's bytes, read back from the sealed copy (for its hash).
    pub fn contents(&self) -> Result<Vec<u8>, ImageError> {
        let mut bytes = vec![0u8; usize::try_from(self.len).unwrap_or(usize::MAX)];
        let fd = self.fd.try_clone().map_err(|e| ImageError::Seal {
            what: "dup",
            errno: io_errno(&e),
        })?;
        File::from(fd)
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| ImageError::Seal {
                what: "read back",
                errno: io_errno(&e),
            })?;
        Ok(bytes)
    }

    /// The size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the image is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file it was loaded from (the child's `argv[0]`).
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The path that executes this descriptor (`/proc/self/fd/N`, resolved
    /// by the kernel in the child to the sealed file itself, as `fexecve`
    /// does) and the `argv[0]` to give it.
    pub(crate) fn exec_path(&self) -> (OsString, &OsStr) {
        (
            format!("/proc/self/fd/{}", self.fd.as_raw_fd()).into(),
            self.source.as_os_str(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::{SpawnLimits, spawn_image};
    use std::time::Duration;

    fn loaded(bytes: &[u8]) -> (tempfile::TempDir, PathBuf, WorkerImage) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("worker");
        std::fs::write(&path, bytes).unwrap();
        let image = WorkerImage::load(&path).unwrap();
        (dir, path, image)
    }

    #[test]
    fn an_overwritten_or_replaced_file_leaves_the_image_unchanged() {
        let (_dir, path, image) = loaded(b"canary-original-bytes");
        std::fs::write(&path, b"canary-overwritten-in-place").unwrap();
        assert_eq!(image.contents().unwrap(), b"canary-original-bytes");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"canary-replaced").unwrap();
        assert_eq!(image.contents().unwrap(), b"canary-original-bytes");
        assert_eq!(image.len(), 21);
    }

    #[test]
    fn the_sealed_image_cannot_be_written_even_through_proc() {
        let (_dir, _path, image) = loaded(b"canary-sealed");
        let (proc_path, _) = image.exec_path();
        let opened = std::fs::OpenOptions::new().write(true).open(&proc_path);
        if let Ok(mut file) = opened {
            assert!(std::io::Write::write_all(&mut file, b"x").is_err());
            assert!(file.set_len(0).is_err());
        }
        assert_eq!(image.contents().unwrap(), b"canary-sealed");
    }

    #[test]
    fn the_image_runs_after_its_file_is_overwritten() {
        let (_dir, path, image) = loaded(&std::fs::read("/bin/true").unwrap());
        std::fs::write(&path, b"#!/bin/sh\nexit 7\n").unwrap();
        let limits = SpawnLimits {
            wall_clock: Duration::from_secs(20),
            ..SpawnLimits::default()
        };
        let mut child = spawn_image(&image, &[], &limits).unwrap();
        let ended = child.wait(Duration::from_secs(20)).unwrap();
        assert_eq!(ended.ending, crate::Ending::Exited { code: 0 });
    }

    #[test]
    fn a_missing_file_or_a_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            WorkerImage::load(&dir.path().join("missing")),
            Err(ImageError::Read {
                kind: std::io::ErrorKind::NotFound,
                ..
            })
        ));
        assert!(matches!(
            WorkerImage::load(dir.path()),
            Err(ImageError::NotAFile { .. })
        ));
    }
}
