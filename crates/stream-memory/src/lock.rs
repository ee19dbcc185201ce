//! The owner-only root lock of the materializer.
//!
//! One lock file per context root in the data dir's `locks/` folder, holding
//! [`LockEvidence`]: the kernel's boot id
//! (`/proc/sys/kernel/random/boot_id`), the owner's PID, the kernel's start
//! time of that process (`/proc/<pid>/stat` field 22, clock ticks since
//! boot) and a random ownership token.
//!
//! - **Taking** it: the evidence is written to a hidden temporary file and
//!   hard-linked to the lock name, so a lock file is never seen
//!   half-written. Nothing is fsynced: the lock only means something during
//!   the boot that took it (processes see each other's files through the page
//!   cache), and a lock file that survives a crash names another boot and is
//!   reclaimed. If the name exists, its evidence is judged
//!   ([`judge`]): an owner from another boot, a PID that no longer runs (or
//!   is a zombie), or a PID now running a process that started at another
//!   time is **reclaimed**; a live owner is a **conflict**
//!   ([`LockError::Held`]); evidence that does not parse, is not a regular
//!   owner-only file of ours, or is too large **fails closed**
//!   ([`LockError::Malformed`]) and is left in place for the operator.
//! - Judging and reclaiming happen under a `flock` on `locks/.guard`, so two
//!   processes cannot both reclaim one stale lock and both believe they hold
//!   it; the kernel drops that guard when its holder dies.
//! - **Holding** it: [`RootLock::check`] re-reads the file and refuses
//!   unless it still carries exactly our evidence (token included).
//! - **Releasing** it: [`RootLock::release`] removes the file only if it
//!   still carries our evidence; a replaced or removed lock is refused
//!   ([`LockError::Replaced`]) and whatever is there is left alone. Dropping
//!   an unreleased lock releases it the same way, silently.
//!
//! The folder must be a real directory owned by us and private (no group or
//! other permission bits); it is created `0700` when missing.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

/// The largest lock file read.
const MAX_LOCK_BYTES: u64 = 1024;

/// The evidence format version.
const FORMAT: u32 = 1;

/// Why the lock could not be taken, checked or released. Carries a PID or
/// an OS error, never a path or content.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A live process holds the lock.
    #[error("the context root is locked by live process {pid}")]
    Held {
        /// The owner's PID.
        pid: u32,
    },
    /// The lock file is not evidence this build can trust: it does not
    /// parse, is not a regular owner-only file of ours, or is too large.
    /// Left in place; the operator must look at it.
    #[error("the root lock file is malformed; refusing to reclaim or take it")]
    Malformed,
    /// The lock file no longer carries our evidence (replaced or removed).
    #[error("the root lock was replaced or removed while held; refusing to release it")]
    Replaced,
    /// The locks folder is a symlink, not a directory, not ours, or shared.
    #[error("the locks folder is not a private directory owned by this user")]
    UnsafeDir,
    /// This process's own identity (boot id, start time) cannot be read.
    #[error("the kernel's boot id or process start time cannot be read")]
    Identity,
    /// A filesystem operation failed.
    #[error("root lock I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

impl From<Errno> for LockError {
    fn from(e: Errno) -> Self {
        Self::Io(e.into())
    }
}

/// What a lock file says about its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LockEvidence {
    /// Format version, `1`.
    pub format: u32,
    /// The kernel boot id when the lock was taken.
    pub boot_id: String,
    /// The owner's PID.
    pub pid: u32,
    /// The owner's start time, `/proc/<pid>/stat` field 22.
    pub start_time: u64,
    /// 32 random hex digits.
    pub token: String,
}

impl LockEvidence {
    /// Evidence for this process with a fresh random token.
    pub fn current() -> Result<Self, LockError> {
        let pid = std::process::id();
        let start_time = match process_start(pid)? {
            ProcState::Running { start_time } => start_time,
            ProcState::Gone | ProcState::Zombie => return Err(LockError::Identity),
        };
        let mut token = [0u8; 16];
        getrandom::fill(&mut token).map_err(|_| LockError::Identity)?;
        Ok(Self {
            format: FORMAT,
            boot_id: boot_id()?,
            pid,
            start_time,
            token: token.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    /// The bytes of a lock file.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing a struct of strings and integers cannot fail.
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Parses the bytes of a lock file strictly.
    pub fn parse(bytes: &[u8]) -> Result<Self, LockError> {
        let evidence: Self = serde_json::from_slice(bytes).map_err(|_| LockError::Malformed)?;
        let well_formed = evidence.format == FORMAT
            && is_boot_id(&evidence.boot_id)
            && evidence.pid > 0
            && evidence.token.len() == 32
            && evidence
                .token
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if well_formed {
            Ok(evidence)
        } else {
            Err(LockError::Malformed)
        }
    }
}

fn is_boot_id(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// The kernel's boot id.
pub fn boot_id() -> Result<String, LockError> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map_err(|_| LockError::Identity)?;
    let id = text.trim().to_owned();
    if is_boot_id(&id) {
        Ok(id)
    } else {
        Err(LockError::Identity)
    }
}

/// A process as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    /// No such process.
    Gone,
    /// Exited, not yet reaped: dead.
    Zombie,
    /// Running (or sleeping, stopped…), started at `start_time`.
    Running {
        /// Field 22, clock ticks after boot.
        start_time: u64,
    },
}

/// Reads `/proc/<pid>/stat`: whether the process exists, and its start time.
pub fn process_start(pid: u32) -> Result<ProcState, LockError> {
    let text = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ProcState::Gone),
        // ESRCH: the process vanished between open and read.
        Err(e) if e.raw_os_error() == Some(Errno::SRCH.raw_os_error()) => {
            return Ok(ProcState::Gone);
        }
        Err(e) => return Err(LockError::Io(e)),
    };
    parse_stat(&text).ok_or(LockError::Identity)
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) is in
/// parentheses and may itself hold spaces and parentheses, so fields are
/// counted after the last `)`: field 3 (state) comes first there, field 22
/// (start time) is the twentieth.
fn parse_stat(text: &str) -> Option<ProcState> {
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_ascii_whitespace();
    let state = fields.next()?;
    let start_time: u64 = fields.nth(18)?.parse().ok()?;
    Some(match state {
        "Z" | "X" | "x" => ProcState::Zombie,
        _ => ProcState::Running { start_time },
    })
}

/// What became of a lock's owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// Still running: the lock is held.
    Live,
    /// The PID runs nothing, or a zombie: reclaimable.
    Dead,
    /// Taken under another boot: reclaimable.
    Rebooted,
    /// The PID now belongs to a process started at another time: reclaimable.
    PidReused,
}

/// Judges evidence against the running kernel (`boot_id` is ours).
pub fn judge(evidence: &LockEvidence, boot_id: &str) -> Result<OwnerState, LockError> {
    if evidence.boot_id != boot_id {
        return Ok(OwnerState::Rebooted);
    }
    Ok(match process_start(evidence.pid)? {
        ProcState::Gone | ProcState::Zombie => OwnerState::Dead,
        ProcState::Running { start_time } if start_time != evidence.start_time => {
            OwnerState::PidReused
        }
        ProcState::Running { .. } => OwnerState::Live,
    })
}

/// A held root lock. Released by [`RootLock::release`], or on drop.
#[derive(Debug)]
pub struct RootLock {
    dir: PathBuf,
    name: String,
    evidence: LockEvidence,
    released: bool,
}

/// Opens (creating `0700` if missing) the locks folder and checks it is a
/// private directory of ours.
fn open_lock_dir(dir: &Path) -> Result<OwnedFd, LockError> {
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| match e {
        Errno::LOOP | Errno::NOTDIR => LockError::UnsafeDir,
        other => other.into(),
    })?;
    let st = rustix::fs::fstat(&fd)?;
    let private = FileType::from_raw_mode(st.st_mode) == FileType::Directory
        && st.st_uid == rustix::process::geteuid().as_raw()
        && st.st_mode & 0o077 == 0;
    if private {
        Ok(fd)
    } else {
        Err(LockError::UnsafeDir)
    }
}

/// Holds an exclusive `flock` on `locks/.guard` while alive.
struct Guard {
    _fd: OwnedFd,
}

impl Guard {
    fn take(dir: &OwnedFd) -> Result<Self, LockError> {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            rustix::fs::openat(dir, ".guard", flags, Mode::from_raw_mode(0o600)).map_err(|e| {
                match e {
                    Errno::LOOP => LockError::UnsafeDir,
                    other => other.into(),
                }
            })?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(LockError::UnsafeDir);
        }
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
        Ok(Self { _fd: fd })
    }
}

/// Reads the lock file `name`: `None` when absent.
fn read_evidence(dir: &OwnedFd, name: &str) -> Result<Option<LockEvidence>, LockError> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        // A symlink, or anything else that cannot be opened as a file.
        Err(Errno::LOOP | Errno::NXIO) => return Err(LockError::Malformed),
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&fd)?;
    let trusted = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
        && st.st_uid == rustix::process::geteuid().as_raw()
        && st.st_mode & 0o077 == 0
        && u64::try_from(st.st_size).is_ok_and(|n| n <= MAX_LOCK_BYTES);
    if !trusted {
        return Err(LockError::Malformed);
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_LOCK_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_LOCK_BYTES {
        return Err(LockError::Malformed);
    }
    LockEvidence::parse(&bytes).map(Some)
}

/// Writes `evidence` to a fresh hidden file and links it to `name` (no
/// fsync: see the module documentation):
/// `Ok(false)` when `name` already exists.
fn create_lock(dir: &OwnedFd, name: &str, evidence: &LockEvidence) -> Result<bool, LockError> {
    let tmp = format!(".{name}.{}.tmp", evidence.token);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))?;
    let written = (|| -> Result<bool, LockError> {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(&evidence.encode())?;
        match rustix::fs::linkat(dir, tmp.as_str(), dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(e.into()),
        }
    })();
    let removed = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
    let linked = written?;
    removed?;
    Ok(linked)
}

impl RootLock {
    /// Takes lock `name` in folder `dir`, reclaiming a verified dead,
    /// rebooted or PID-reused owner.
    pub fn acquire(dir: &Path, name: &str) -> Result<Self, LockError> {
        let evidence = LockEvidence::current()?;
        let fd = open_lock_dir(dir)?;
        let _guard = Guard::take(&fd)?;
        // Two rounds: the first may find a stale lock and reclaim it.
        for _ in 0..2 {
            if create_lock(&fd, name, &evidence)? {
                return Ok(Self {
                    dir: dir.to_owned(),
                    name: name.to_owned(),
                    evidence,
                    released: false,
                });
            }
            let Some(found) = read_evidence(&fd, name)? else {
                continue;
            };
            let state = judge(&found, &evidence.boot_id)?;
            match state {
                OwnerState::Live => return Err(LockError::Held { pid: found.pid }),
                OwnerState::Dead | OwnerState::Rebooted | OwnerState::PidReused => {
                    tracing::info!(pid = found.pid, ?state, "reclaiming a stale root lock");
                    match rustix::fs::unlinkat(&fd, name, AtFlags::empty()) {
                        Ok(()) | Err(Errno::NOENT) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Err(LockError::Replaced)
    }

    /// The lock file's name inside the locks folder.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The evidence this lock was taken with.
    pub fn evidence(&self) -> &LockEvidence {
        &self.evidence
    }

    /// Succeeds only if the lock file still carries exactly our evidence.
    pub fn check(&self) -> Result<(), LockError> {
        let fd = open_lock_dir(&self.dir)?;
        match read_evidence(&fd, &self.name)? {
            Some(found) if found == self.evidence => Ok(()),
            Some(_) | None => Err(LockError::Replaced),
        }
    }

    /// Removes the lock file if it still carries our evidence; otherwise
    /// refuses and leaves it alone.
    pub fn release(mut self) -> Result<(), LockError> {
        self.released = true;
        self.release_inner()
    }

    fn release_inner(&self) -> Result<(), LockError> {
        let fd = open_lock_dir(&self.dir)?;
        let _guard = Guard::take(&fd)?;
        match read_evidence(&fd, &self.name)? {
            Some(found) if found == self.evidence => {
                rustix::fs::unlinkat(&fd, self.name.as_str(), AtFlags::empty())?;
                Ok(())
            }
            Some(_) | None => Err(LockError::Replaced),
        }
    }
}

impl Drop for RootLock {
    fn drop(&mut self) {
        if !self.released {
            self.released = true;
            if let Err(e) = self.release_inner() {
                tracing::warn!(error = %e, "root lock not released on drop");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        // Field 22 is 777; the command name holds spaces and parentheses.
        let line = "4242 (a (b) c) S 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 777 23 24\n";
        assert_eq!(
            parse_stat(line),
            Some(ProcState::Running { start_time: 777 })
        );
        let zombie = line.replace(") S ", ") Z ");
        assert_eq!(parse_stat(&zombie), Some(ProcState::Zombie));
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn our_own_start_time_matches_the_kernel() {
        let ours = LockEvidence::current().unwrap();
        assert_eq!(ours.pid, std::process::id());
        assert_eq!(judge(&ours, &ours.boot_id).unwrap(), OwnerState::Live);
    }

    #[test]
    fn evidence_round_trips_and_parses_strictly() {
        let ours = LockEvidence::current().unwrap();
        assert_eq!(LockEvidence::parse(&ours.encode()).unwrap(), ours);
        let mut v: serde_json::Value = serde_json::from_slice(&ours.encode()).unwrap();
        v["extra"] = serde_json::json!(1);
        let rows: [(&str, serde_json::Value); 6] = [
            ("unknown field", v),
            (
                "bad token",
                serde_json::json!({"format":1,"bootId":ours.boot_id,"pid":1,"startTime":1,"token":"XYZ"}),
            ),
            (
                "pid zero",
                serde_json::json!({"format":1,"bootId":ours.boot_id,"pid":0,"startTime":1,"token":ours.token}),
            ),
            (
                "boot id",
                serde_json::json!({"format":1,"bootId":"nope","pid":1,"startTime":1,"token":ours.token}),
            ),
            (
                "format",
                serde_json::json!({"format":2,"bootId":ours.boot_id,"pid":1,"startTime":1,"token":ours.token}),
            ),
            (
                "missing field",
                serde_json::json!({"format":1,"bootId":ours.boot_id,"pid":1,"token":ours.token}),
            ),
        ];
        for (name, value) in rows {
            assert!(
                matches!(
                    LockEvidence::parse(&serde_json::to_vec(&value).unwrap()),
                    Err(LockError::Malformed)
                ),
                "{name}"
            );
        }
        assert!(matches!(
            LockEvidence::parse(b"not json"),
            Err(LockError::Malformed)
        ));
    }
}
