//! Landlock confinement of a sandboxed child: it writes only in its own directory (and to
//! `/dev/null`); reads and executes only there, in the system's programs and libraries and in
//! the paths its toolchain needs; binds and connects no TCP port; and signals, or reaches
//! through an abstract socket, no process outside its own. Root gets no exemption, so rustc
//! running as root cannot `include_str!("/etc/shadow")` into a verdict, and a program running
//! as the invoking user cannot read or delete that user's files.
//!
//! The ruleset is built in the parent (paths opened, rules added: allocation is fine there)
//! and enforced between fork and exec by two system calls on its descriptor. The rights are
//! negotiated with the kernel: where it lacks one (TCP before ABI 4, signal scoping before
//! ABI 6) the rest still hold, and [`kernel_abi`] says which the reports name.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, ABI,
};

/// The newest ABI the rules are written for: filesystem rights up to device ioctls (5), TCP
/// (4), signal and abstract-socket scoping (6). A kernel with less enforces what it has.
const WRITTEN_FOR: ABI = ABI::V6;
const WRITTEN_FOR_VERSION: u32 = 6;

/// What every child may read and execute: programs and libraries (a merged /usr's links
/// resolve into /usr), what the dynamic loader, libc and the linker read under /etc, and the
/// devices that hold no data. Not /proc or /sys, where root could read the kernel's memory
/// (`include_bytes!("/proc/kcore")`), nor the rest of /etc or /dev.
const SYSTEM: [&str; 21] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    // Nix and Guix keep every program and library in a store that holds no secrets.
    "/nix/store",
    "/gnu/store",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
];

/// Besides its directory, the one file a child may write (and read).
const WRITABLE: &str = "/dev/null";

/// The Landlock ABI the kernel offers, capped at the one the rules are written for; `None`
/// where Landlock is not built in or not enabled.
pub fn kernel_abi() -> Option<u32> {
    // SAFETY: with a null attribute, size 0 and LANDLOCK_CREATE_RULESET_VERSION (1) the call
    // only returns the ABI version, creating nothing.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    (version > 0).then(|| (version as u32).min(WRITTEN_FOR_VERSION))
}

/// The system paths of [`SYSTEM`] that exist here, and /etc's `python*` entries (Debian's
/// system Python imports its `sitecustomize` from there).
fn system_paths() -> &'static [PathBuf] {
    static PATHS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let mut paths: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
        if let Ok(entries) = std::fs::read_dir("/etc") {
            paths.extend(
                entries
                    .filter_map(|entry| entry.ok())
                    .filter(|entry| entry.file_name().to_string_lossy().starts_with("python"))
                    .map(|entry| entry.path()),
            );
        }
        paths.retain(|path| path.exists());
        paths
    })
}

/// The ruleset for a child working in `dir` that also reads and executes beneath each of
/// `read` (a toolchain's sysroot, an interpreter's prefix), as a descriptor to enforce between
/// fork and exec.
pub fn ruleset(dir: &Path, read: &[PathBuf]) -> std::io::Result<OwnedFd> {
    let fs = AccessFs::from_all(WRITTEN_FOR);
    let readable = system_paths().iter().chain(read);
    let created = Ruleset::default()
        .handle_access(fs)
        .and_then(|ruleset| ruleset.handle_access(AccessNet::from_all(WRITTEN_FOR)))
        .and_then(|ruleset| ruleset.scope(Scope::from_all(WRITTEN_FOR)))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(
                readable,
                AccessFs::from_read(WRITTEN_FOR),
            ))
        })
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules([WRITABLE], fs)))
        .and_then(|ruleset| ruleset.add_rules(path_beneath_rules([dir], fs)))
        .map_err(std::io::Error::other)?;
    Option::<OwnedFd>::from(created).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this kernel has no Landlock",
        )
    })
}

/// Enforces `ruleset` on the calling thread and everything it will `exec`, after setting
/// no_new_privs (which Landlock needs without CAP_SYS_ADMIN, and which keeps a set-uid program
/// from gaining privileges).
///
/// # Safety
/// Async-signal-safe (two system calls); for use between fork and exec.
pub unsafe fn enforce(ruleset: libc::c_int) -> std::io::Result<()> {
    // SAFETY: plain system calls on values.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
