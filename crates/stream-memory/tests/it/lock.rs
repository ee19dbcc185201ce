//! The root lock table: who may take it, who is reclaimed, what fails closed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use stream_memory::lock::{
    LockError, LockEvidence, OwnerState, ProcState, RootLock, boot_id, judge, process_start,
};

const NAME: &str = "context-root-test.lock";

/// A private locks folder.
fn lock_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let locks = dir.path().join("locks");
    (dir, locks)
}

/// Writes a lock file as another owner would: owner-only.
pub fn plant(dir: &Path, name: &str, evidence: &LockEvidence) {
    plant_bytes(dir, name, &evidence.encode());
}

fn plant_bytes(dir: &Path, name: &str, bytes: &[u8]) {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.exists() {
        std::fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
    }
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Evidence naming running process `pid` under this boot, as its own lock
/// would.
pub fn evidence_of(pid: u32) -> LockEvidence {
    let ProcState::Running { start_time } = process_start(pid).unwrap() else {
        panic!("{pid} is not running");
    };
    LockEvidence {
        format: 1,
        boot_id: boot_id().unwrap(),
        pid,
        start_time,
        token: "0123456789abcdef0123456789abcdef".into(),
    }
}

fn read(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(NAME)).unwrap()
}

#[test]
fn a_free_lock_is_taken_owner_only_and_released() {
    let (_d, dir) = lock_dir();
    let lock = RootLock::acquire(&dir, NAME).unwrap();
    let meta = std::fs::metadata(dir.join(NAME)).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777,
        0o700
    );
    let on_disk = LockEvidence::parse(&read(&dir)).unwrap();
    assert_eq!(&on_disk, lock.evidence());
    assert_eq!(on_disk.pid, std::process::id());
    assert_eq!(on_disk.boot_id, boot_id().unwrap());
    lock.check().unwrap();
    lock.release().unwrap();
    assert!(!dir.join(NAME).exists());
    // Nothing else is left behind but the guard.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [".guard"]);
}

/// One row per kind of owner the evidence may name.
#[test]
fn lock_table() {
    enum Expect {
        Conflict,
        Reclaimed,
    }
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let dead_pid = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let ours = LockEvidence::current().unwrap();
    let rows: Vec<(&str, LockEvidence, OwnerState, Expect)> = vec![
        (
            "a live owner (another process) conflicts",
            evidence_of(sleeper.id()),
            OwnerState::Live,
            Expect::Conflict,
        ),
        (
            "a live owner (this process, another thread) conflicts",
            ours.clone(),
            OwnerState::Live,
            Expect::Conflict,
        ),
        (
            "a dead PID is reclaimed",
            LockEvidence {
                pid: dead_pid,
                ..ours.clone()
            },
            OwnerState::Dead,
            Expect::Reclaimed,
        ),
        (
            "another boot id is reclaimed, even with a live PID",
            LockEvidence {
                boot_id: "00000000-0000-4000-8000-000000000000".into(),
                ..ours.clone()
            },
            OwnerState::Rebooted,
            Expect::Reclaimed,
        ),
        (
            "a reused PID (same pid, another start time) is reclaimed",
            LockEvidence {
                start_time: ours.start_time + 1,
                ..ours.clone()
            },
            OwnerState::PidReused,
            Expect::Reclaimed,
        ),
    ];
    for (name, evidence, state, expect) in rows {
        assert_eq!(judge(&evidence, &ours.boot_id).unwrap(), state, "{name}");
        let (_d, dir) = lock_dir();
        plant(&dir, NAME, &evidence);
        match expect {
            Expect::Conflict => {
                let err = RootLock::acquire(&dir, NAME).unwrap_err();
                assert!(
                    matches!(err, LockError::Held { pid } if pid == evidence.pid),
                    "{name}: {err}"
                );
                assert_eq!(read(&dir), evidence.encode(), "{name}: left alone");
            }
            Expect::Reclaimed => {
                let lock = RootLock::acquire(&dir, NAME).unwrap();
                assert_ne!(lock.evidence().token, evidence.token, "{name}");
                assert_eq!(LockEvidence::parse(&read(&dir)).unwrap(), *lock.evidence());
                lock.release().unwrap();
            }
        }
    }
    // Once the live owner dies, its lock is reclaimed.
    let (_d, dir) = lock_dir();
    plant(&dir, NAME, &evidence_of(sleeper.id()));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    RootLock::acquire(&dir, NAME).unwrap().release().unwrap();
}

/// A zombie (exited, not reaped) is dead.
#[test]
fn a_zombie_owner_is_dead() {
    let child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    // Not waited for: a zombie until the test ends.
    for _ in 0..200 {
        if process_start(pid).unwrap() == ProcState::Zombie {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(process_start(pid).unwrap(), ProcState::Zombie);
    let evidence = LockEvidence {
        pid,
        ..LockEvidence::current().unwrap()
    };
    assert_eq!(
        judge(&evidence, &evidence.boot_id).unwrap(),
        OwnerState::Dead
    );
    drop(child);
}

/// Sets the scene in a locks folder.
type Setup = fn(&Path);

/// Evidence that cannot be trusted fails closed and is left in place.
#[test]
fn malformed_lock_evidence_fails_closed() {
    let rows: Vec<(&str, Setup)> = vec![
        ("not JSON", |dir| plant_bytes(dir, NAME, b"garbage")),
        ("empty (a half-written lock)", |dir| {
            plant_bytes(dir, NAME, b"")
        }),
        ("an unknown field", |dir| {
            let mut v: serde_json::Value =
                serde_json::from_slice(&LockEvidence::current().unwrap().encode()).unwrap();
            v["owner"] = "someone".into();
            plant_bytes(dir, NAME, &serde_json::to_vec(&v).unwrap());
        }),
        ("a short token", |dir| {
            let e = LockEvidence {
                token: "abc".into(),
                ..LockEvidence::current().unwrap()
            };
            plant(dir, NAME, &e);
        }),
        ("readable by others", |dir| {
            plant(dir, NAME, &LockEvidence::current().unwrap());
            std::fs::set_permissions(dir.join(NAME), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }),
        ("too large", |dir| plant_bytes(dir, NAME, &vec![b' '; 4096])),
        ("a symlink to valid evidence", |dir| {
            plant(dir, "elsewhere", &LockEvidence::current().unwrap());
            std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join(NAME)).unwrap();
        }),
        ("a directory", |dir| {
            plant(dir, "x", &LockEvidence::current().unwrap());
            std::fs::create_dir(dir.join(NAME)).unwrap();
        }),
    ];
    for (name, setup) in rows {
        let (_d, dir) = lock_dir();
        setup(&dir);
        let before = std::fs::symlink_metadata(dir.join(NAME)).unwrap();
        let err = RootLock::acquire(&dir, NAME).unwrap_err();
        assert!(matches!(err, LockError::Malformed), "{name}: {err}");
        let after = std::fs::symlink_metadata(dir.join(NAME)).unwrap();
        assert_eq!(
            (before.len(), before.file_type()),
            (after.len(), after.file_type()),
            "{name}: left in place"
        );
    }
}

/// A lock replaced (or removed) while held: `check` refuses, and `release`
/// refuses and leaves the other evidence where it is.
#[test]
fn a_lock_replaced_while_held_fails_closed_at_release() {
    let (_d, dir) = lock_dir();
    let lock = RootLock::acquire(&dir, NAME).unwrap();
    let intruder = LockEvidence {
        token: "ffffffffffffffffffffffffffffffff".into(),
        ..lock.evidence().clone()
    };
    std::fs::remove_file(dir.join(NAME)).unwrap();
    plant(&dir, NAME, &intruder);
    assert!(matches!(lock.check(), Err(LockError::Replaced)));
    assert!(matches!(lock.release(), Err(LockError::Replaced)));
    assert_eq!(read(&dir), intruder.encode(), "the other evidence is kept");

    let (_d, dir) = lock_dir();
    let lock = RootLock::acquire(&dir, NAME).unwrap();
    std::fs::remove_file(dir.join(NAME)).unwrap();
    assert!(matches!(lock.check(), Err(LockError::Replaced)));
    assert!(matches!(lock.release(), Err(LockError::Replaced)));

    // Malformed evidence planted over a held lock is also refused at release.
    let (_d, dir) = lock_dir();
    let lock = RootLock::acquire(&dir, NAME).unwrap();
    std::fs::remove_file(dir.join(NAME)).unwrap();
    plant_bytes(&dir, NAME, b"garbage");
    assert!(matches!(lock.release(), Err(LockError::Malformed)));
    assert_eq!(read(&dir), b"garbage");
}

/// Dropping a held lock releases it, but never someone else's.
#[test]
fn drop_releases_only_our_own_lock() {
    let (_d, dir) = lock_dir();
    drop(RootLock::acquire(&dir, NAME).unwrap());
    assert!(!dir.join(NAME).exists());
    let lock = RootLock::acquire(&dir, NAME).unwrap();
    let intruder = LockEvidence {
        token: "ffffffffffffffffffffffffffffffff".into(),
        ..lock.evidence().clone()
    };
    std::fs::remove_file(dir.join(NAME)).unwrap();
    plant(&dir, NAME, &intruder);
    drop(lock);
    assert_eq!(read(&dir), intruder.encode());
}

/// The locks folder must be a private real directory.
#[test]
fn an_unsafe_locks_folder_fails_closed() {
    let (d, dir) = lock_dir();
    let real = d.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, &dir).unwrap();
    assert!(matches!(
        RootLock::acquire(&dir, NAME),
        Err(LockError::UnsafeDir)
    ));

    let (_d, dir) = lock_dir();
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(matches!(
        RootLock::acquire(&dir, NAME),
        Err(LockError::UnsafeDir)
    ));
}

/// The guard serializes reclaimers: many threads racing for one stale lock,
/// exactly one holds it at a time.
#[test]
fn racing_reclaimers_hold_one_at_a_time() {
    let (_d, dir) = lock_dir();
    let stale = LockEvidence {
        boot_id: "00000000-0000-4000-8000-000000000000".into(),
        ..LockEvidence::current().unwrap()
    };
    plant(&dir, NAME, &stale);
    let holders = std::sync::atomic::AtomicUsize::new(0);
    let max = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..20 {
                    match RootLock::acquire(&dir, NAME) {
                        Ok(lock) => {
                            let now = holders.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                            max.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                            lock.check().unwrap();
                            holders.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                            lock.release().unwrap();
                        }
                        Err(LockError::Held { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    assert_eq!(max.load(std::sync::atomic::Ordering::SeqCst), 1);
}
