//! Stage c: new namespaces where the kernel permits. Never fatal.

use crate::enforcement::NamespaceReport;

fn unshare(flag: libc::c_int) -> bool {
    // SAFETY: unshare takes one integer; the process is single-threaded
    // (checked in stage a), as CLONE_NEWUSER requires.
    unsafe { libc::unshare(flag) == 0 }
}

/// The user namespace first: without privilege it is what grants the
/// capability the other three need (over namespaces it owns only).
pub(super) fn enter() -> NamespaceReport {
    let user = unshare(libc::CLONE_NEWUSER);
    let network = unshare(libc::CLONE_NEWNET);
    let mount = unshare(libc::CLONE_NEWNS);
    let ipc = unshare(libc::CLONE_NEWIPC);
    NamespaceReport {
        user,
        network,
        mount,
        ipc,
    }
}

/// A fork server's report: it enters none (its children do).
pub(super) fn none() -> NamespaceReport {
    NamespaceReport {
        user: false,
        network: false,
        mount: false,
        ipc: false,
    }
}
