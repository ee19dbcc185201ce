//! The serve lease: at most one process serves a bot's store at a time.
//!
//! SQLite: an exclusive `flock` on `store.db.lease` beside the store file,
//! held by an open descriptor for the holder's life; the file names the
//! holder. PostgreSQL (`postgres::lease`): a session advisory lock on a
//! connection of its own, whose life is the lease (the server ends it with
//! the session: a kill, a lost connection, a host gone), and the control
//! row [`LEASE_ROW`] naming the holder. Either way a holder that dies frees
//! the lease with no clean-up, and the next [`LeaseAttempt`] takes it.
//!
//! Naming the holder is advice for the message a refused process prints:
//! the lock decides, the name may be missing or a moment stale.

use std::fs::OpenOptions;
use std::io::{Read as _, Seek, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::StoreError;
use crate::postgres::lease::PgLease;

/// The control row naming the PostgreSQL lease's holder.
pub const LEASE_ROW: &str = "serve-lease";

/// Who holds (or asks for) the lease: no secret, no content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaseHolder {
    /// The host's name (`/proc/sys/kernel/hostname`).
    pub host: String,
    /// The process id on that host.
    pub pid: u32,
    /// When it took the lease, RFC 3339 UTC.
    pub started: String,
}

impl LeaseHolder {
    /// This process, now.
    pub fn this_process() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        let started = time::OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default();
        Self {
            host: if host.is_empty() {
                "unknown-host".into()
            } else {
                host
            },
            pid: std::process::id(),
            started,
        }
    }
}

impl std::fmt::Display for LeaseHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "host {} pid {} since {}",
            self.host, self.pid, self.started
        )
    }
}

/// What asking for the lease found.
#[derive(Debug)]
pub enum LeaseAttempt {
    /// It is ours until the [`Lease`] is dropped (or lost, PostgreSQL).
    Held(Lease),
    /// Another process holds it; its name when it could be read.
    Taken(Option<LeaseHolder>),
}

/// What looking at the lease, without taking it, found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// Nobody holds it.
    Free,
    /// Someone does; its name when it could be read.
    Taken(Option<LeaseHolder>),
}

/// A held lease. Dropping it gives the lease up.
#[derive(Debug)]
pub struct Lease {
    holder: LeaseHolder,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The descriptor holding the `flock`.
    File(#[allow(dead_code)] std::fs::File),
    Postgres(PgLease),
}

/// The lease is gone: its PostgreSQL session ended or stopped answering,
/// so another process may already hold it.
#[derive(Debug, thiserror::Error)]
#[error("the serve lease was lost: {why}")]
pub struct LeaseLost {
    /// What ended it (no URL, no content).
    pub why: String,
}

impl Lease {
    pub(crate) fn postgres(holder: LeaseHolder, lease: PgLease) -> Self {
        Self {
            holder,
            kind: Kind::Postgres(lease),
        }
    }

    /// Who holds it: this process.
    pub fn holder(&self) -> &LeaseHolder {
        &self.holder
    }

    /// Whether it is still ours. A `flock` lasts as long as its descriptor;
    /// a PostgreSQL lease lasts while its session answers.
    pub fn check(&self) -> Result<(), LeaseLost> {
        match &self.kind {
            Kind::File(_) => Ok(()),
            Kind::Postgres(pg) => pg.check(),
        }
    }
}

/// The lease file of the SQLite store at `db`.
pub(crate) fn lease_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lease");
    PathBuf::from(name)
}

/// Takes the `flock` on `db`'s lease file without waiting, or names who
/// holds it. The file is created owner-only; the holder's name is written
/// once the lock is ours (a failure to write it, on a full disk, leaves
/// the lease held and the holder unnamed).
pub(crate) fn try_file(db: &Path, holder: LeaseHolder) -> Result<LeaseAttempt, StoreError> {
    let path = lease_path(db);
    let failed =
        |e: std::io::Error| StoreError::Backend(format!("lease {}: {}", path.display(), e.kind()));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(crate::private::FILE_MODE)
        .open(&path)
        .map_err(failed)?;
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(Errno::WOULDBLOCK) => return Ok(LeaseAttempt::Taken(read_holder(&mut file))),
        Err(e) => return Err(failed(e.into())),
    }
    let named = serde_json::to_vec(&holder).map_err(|e| StoreError::Backend(e.to_string()))?;
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(&named));
    if let Err(e) = written {
        tracing::warn!(error = %e.kind(), "the lease is held but its holder could not be named");
    }
    Ok(LeaseAttempt::Held(Lease {
        holder,
        kind: Kind::File(file),
    }))
}

/// Whether someone holds `db`'s lease file. A `flock` cannot be looked at
/// without taking it, so this takes it for an instant when it is free;
/// one taking it in that instant is refused and asks again
/// (`thestream serve` does, briefly).
pub(crate) fn probe_file(db: &Path) -> Result<LeaseState, StoreError> {
    let path = lease_path(db);
    let mut file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LeaseState::Free),
        Err(e) => {
            return Err(StoreError::Backend(format!(
                "lease {}: {}",
                path.display(),
                e.kind()
            )));
        }
    };
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(LeaseState::Free),
        Err(Errno::WOULDBLOCK) => Ok(LeaseState::Taken(read_holder(&mut file))),
        Err(e) => Err(StoreError::Backend(format!(
            "lease {}: {}",
            path.display(),
            std::io::Error::from(e).kind()
        ))),
    }
}

/// The holder a lease file names, if it names one.
fn read_holder(file: &mut std::fs::File) -> Option<LeaseHolder> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pid: u32) -> LeaseHolder {
        LeaseHolder {
            host: "box".into(),
            pid,
            started: "2026-01-02T03:04:05Z".into(),
        }
    }

    #[test]
    fn a_file_lease_is_exclusive_names_its_holder_and_frees_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        assert_eq!(probe_file(&db).unwrap(), LeaseState::Free);
        assert!(!lease_path(&db).exists(), "a probe creates nothing");
        let LeaseAttempt::Held(first) = try_file(&db, holder(1)).unwrap() else {
            panic!("the first attempt holds");
        };
        assert!(first.check().is_ok());
        // A second descriptor, as a second process would open.
        match try_file(&db, holder(2)).unwrap() {
            LeaseAttempt::Taken(named) => assert_eq!(named, Some(holder(1))),
            LeaseAttempt::Held(_) => panic!("two holders"),
        }
        assert_eq!(probe_file(&db).unwrap(), LeaseState::Taken(Some(holder(1))));
        drop(first);
        assert_eq!(probe_file(&db).unwrap(), LeaseState::Free);
        assert!(matches!(
            try_file(&db, holder(3)).unwrap(),
            LeaseAttempt::Held(_)
        ));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(lease_path(&db)).unwrap().permissions();
        assert_eq!(mode.mode() & 0o777, 0o600);
    }

    #[test]
    fn the_holder_s_name_is_host_pid_and_start_only() {
        let me = LeaseHolder::this_process();
        assert_eq!(me.pid, std::process::id());
        assert!(!me.host.is_empty());
        let started = me.started.as_bytes();
        assert!(
            started.len() == 20 && started[10] == b'T' && started[19] == b'Z',
            "RFC 3339 UTC to the second: {}",
            me.started
        );
        assert_eq!(
            holder(7).to_string(),
            "host box pid 7 since 2026-01-02T03:04:05Z"
        );
        let value = serde_json::to_value(holder(7)).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"host": "box", "pid": 7, "started": "2026-01-02T03:04:05Z"})
        );
    }
}
