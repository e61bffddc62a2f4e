//! `confine`'s stand-in on systems other than Linux (macOS is the one checked:
//! `scripts/check-platforms`): no Landlock and no seccomp, so a child is never confined by them
//! and [`super::Sandbox::describe`] says so.

use std::os::fd::OwnedFd;
use std::path::Path;

use super::Reach;

/// An instruction of a system-call filter, of which there is none here.
#[derive(Clone, Copy)]
pub enum Instruction {}

/// No Landlock here.
pub fn kernel_abi() -> Option<u32> {
    None
}

/// No seccomp here.
pub fn syscall_filter() -> Option<&'static [Instruction]> {
    None
}

/// Never called: [`kernel_abi`] is `None`.
pub fn ruleset(_dir: &Path, _reach: &Reach) -> std::io::Result<OwnedFd> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Nothing to set: the flag is Linux's.
///
/// # Safety
/// None needed; `unsafe` as its Linux counterpart is.
pub unsafe fn no_new_privileges() -> std::io::Result<()> {
    Ok(())
}

/// Never called: [`ruleset`] makes none.
///
/// # Safety
/// As its Linux counterpart's.
pub unsafe fn enforce(_ruleset: libc::c_int) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Never called: [`syscall_filter`] makes none.
///
/// # Safety
/// As its Linux counterpart's.
pub unsafe fn filter_syscalls(filter: &[Instruction]) -> std::io::Result<()> {
    match filter.first() {
        Some(never) => match *never {},
        None => Err(std::io::ErrorKind::Unsupported.into()),
    }
}
