//! Stage e: a Landlock ruleset that handles everything and allows nothing.
//!
//! The `landlock` crate advises against building an ABI from the running
//! kernel, because rules could then differ between machines. Here the ruleset
//! has no rule at all: handling more rights only denies more. So we ask for
//! exactly the rights of the kernel's ABI (capped at the newest the crate
//! knows), and "fully enforced" then means every right this kernel can
//! restrict is restricted.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::SandboxError;
use crate::enforcement::{LandlockReport, LandlockStatus};

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask the kernel for its ABI version.
const CREATE_RULESET_VERSION: u32 = 1;

/// The kernel's Landlock ABI, or `None` when it has none.
pub(super) fn kernel_abi() -> Option<u32> {
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call
    // only returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).ok().filter(|v| *v > 0)
}

/// Builds and applies the ruleset on the calling thread.
pub(super) fn restrict_self() -> Result<LandlockReport, SandboxError> {
    let kernel = kernel_abi();
    let Some(version) = kernel else {
        return Ok(LandlockReport {
            kernel_abi: None,
            ruleset_abi: 0,
            status: LandlockStatus::NotEnforced,
        });
    };
    let abi = ABI::from(i32::try_from(version).unwrap_or(i32::MAX));
    let fs = AccessFs::from_all(abi);
    let net = AccessNet::from_all(abi);
    let scopes = Scope::from_all(abi);

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(fs)
        .map_err(SandboxError::Landlock)?;
    if !net.is_empty() {
        ruleset = ruleset.handle_access(net).map_err(SandboxError::Landlock)?;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(SandboxError::Landlock)?;
    }
    let status = ruleset
        .create()
        .map_err(SandboxError::Landlock)?
        .no_new_privs(true)
        .restrict_self()
        .map_err(SandboxError::Landlock)?;
    let status = match status.ruleset {
        RulesetStatus::FullyEnforced => LandlockStatus::FullyEnforced,
        RulesetStatus::PartiallyEnforced => LandlockStatus::PartiallyEnforced,
        RulesetStatus::NotEnforced => LandlockStatus::NotEnforced,
    };
    Ok(LandlockReport {
        kernel_abi: kernel,
        ruleset_abi: abi as u32,
        status,
    })
}
