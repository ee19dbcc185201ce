//! In a forked child, before anything else runs: fresh `AT_RANDOM` bytes and
//! the stack-protector canary glibc derives from them.
//!
//! A fork copies the server's memory, so without this every sibling shares
//! the server's canary: one leaked from any child would be good against all
//! of them. glibc reads the 16 `AT_RANDOM` bytes once, at start, into the
//! thread's canary (`%fs:0x28` on x86_64) and pointer guard; writing new
//! bytes alone changes neither, so the canary is written as well.
//!
//! Safe here because no frame that checks a canary is live across the
//! write: Rust code is built without stack protectors, the raw `clone` has
//! returned, and the child never returns into the frames below the fork
//! (it ends with `exit`). The pointer guard is left as it is: pointers
//! glibc has already mangled with it (`atexit` handlers) would no longer
//! demangle. That residue is in `docs/design.md`.

use crate::sys;

/// The length of the `AT_RANDOM` block.
const AT_RANDOM_LEN: usize = 16;

/// Fresh random bytes into `AT_RANDOM`, and the canary derived from them
/// as glibc does (`_dl_setup_stack_chk_guard`): the first word, its lowest
/// byte zeroed so that string overflows stop at it. An errno if the bytes
/// cannot be had; then the child must not run.
pub(crate) fn reseed() -> Result<(), i32> {
    let mut fresh = [0u8; AT_RANDOM_LEN];
    sys::fill_random(&mut fresh)?;
    // SAFETY: getauxval reads the process's auxiliary vector.
    let at = unsafe { libc::getauxval(libc::AT_RANDOM) } as *mut u8;
    if at.is_null() {
        return Err(libc::ENOENT);
    }
    // SAFETY: the kernel puts 16 bytes at AT_RANDOM on the initial stack,
    // writable and alive for the whole process; nothing holds a reference.
    unsafe { std::ptr::copy_nonoverlapping(fresh.as_ptr(), at, AT_RANDOM_LEN) };
    let mut word = [0u8; 8];
    word.copy_from_slice(&fresh[..8]);
    set_canary(u64::from_le_bytes(word) & !0xff);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
fn set_canary(canary: u64) {
    // SAFETY: glibc keeps the canary at %fs:0x28 in the thread's control
    // block (the ABI's `header.stack_guard`); no live frame checks the old
    // value (see the module's comment).
    unsafe {
        std::arch::asm!("mov qword ptr fs:0x28, {}", in(reg) canary, options(nostack, preserves_flags));
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn set_canary(_canary: u64) {
    // Elsewhere glibc keeps the canary in `__stack_chk_guard`; not written
    // (the residue is in `docs/design.md`).
}

/// The canary this thread runs with, for tests.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn canary() -> u64 {
    let value: u64;
    // SAFETY: reads the thread control block's canary word.
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:0x28", out(reg) value, options(nostack, preserves_flags, readonly));
    }
    value
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The canary of a fresh process is glibc's derivation of its
    /// `AT_RANDOM` (so writing both keeps them as a fresh process has them).
    #[test]
    fn the_canary_is_derived_from_at_random_as_glibc_does() {
        // SAFETY: reads 16 bytes the kernel placed at AT_RANDOM.
        let at = unsafe { libc::getauxval(libc::AT_RANDOM) } as *const u8;
        assert!(!at.is_null());
        let mut word = [0u8; 8];
        // SAFETY: as above, the first 8 of the 16 bytes.
        unsafe { std::ptr::copy_nonoverlapping(at, word.as_mut_ptr(), 8) };
        assert_eq!(canary(), u64::from_le_bytes(word) & !0xff);
    }
}
