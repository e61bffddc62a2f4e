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

use super::Reach;
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, ABI,
};

/// An instruction of the system-call filter (a classic BPF statement).
pub type Instruction = libc::sock_filter;

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
/// `reach`'s paths (a toolchain's sysroot, an interpreter's prefix: those that are [`narrow`];
/// what the user granted, all), as a descriptor to enforce between fork and exec.
pub fn ruleset(dir: &Path, reach: &Reach) -> std::io::Result<OwnedFd> {
    let fs = AccessFs::from_all(WRITTEN_FOR);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let readable = system_paths()
        .iter()
        .chain(
            reach
                .read
                .iter()
                .filter(|path| narrow(path, dir, home.as_deref())),
        )
        .chain(&reach.granted);
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

/// Whether reading beneath `path` opens no more than a toolchain needs: not `/` or a top-level
/// directory (`/home`, `/tmp`), and not one holding the child's directory or `home`.
fn narrow(path: &Path, dir: &Path, home: Option<&Path>) -> bool {
    let holds = |inner: &Path| inner.starts_with(path);
    path.components().count() > 2 && !holds(dir) && !home.is_some_and(holds)
}

/// Sets no_new_privs on the calling thread: Landlock and a seccomp filter need it without
/// CAP_SYS_ADMIN, and a set-uid program the child runs gains no privileges by it.
///
/// # Safety
/// Async-signal-safe (one system call); for use between fork and exec.
pub unsafe fn no_new_privileges() -> std::io::Result<()> {
    let (on, unused) = (1 as libc::c_ulong, 0 as libc::c_ulong);
    // SAFETY: a plain system call on values.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, on, unused, unused, unused) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Enforces `ruleset` on the calling thread and everything it will `exec` (no_new_privs set
/// first: [`no_new_privileges`]).
///
/// # Safety
/// Async-signal-safe (one system call); for use between fork and exec.
pub unsafe fn enforce(ruleset: libc::c_int) -> std::io::Result<()> {
    // SAFETY: a plain system call on values.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What Landlock does not cover, refused with EPERM by a seccomp filter: creating a Unix
/// socket (`socket(AF_UNIX)`: connecting to a named one, a desktop session's D-Bus say, is no
/// file access Landlock checks before ABI 9) and changing a file's mode or owner by its path
/// (`chmod`, `chown` and their `*at` forms, which Landlock does not check). On the descriptor
/// forms (`fchmod`), the descriptor is one Landlock let the child open. Calls of another
/// architecture's numbering (x86's `int 0x80`, x32) are all refused, so none of these can be
/// made under another number. `None` on architectures the filter is not written for.
pub fn syscall_filter() -> Option<&'static [libc::sock_filter]> {
    static FILTER: OnceLock<Option<Vec<libc::sock_filter>>> = OnceLock::new();
    FILTER.get_or_init(build_filter).as_deref()
}

/// fchmodat2 (Linux 6.6) has one number on every architecture, which the libc crate names for
/// x86_64 only.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const SYS_FCHMODAT2: libc::c_long = 452;

/// The filter of [`syscall_filter`]: the architecture, then the call's number (numbers past
/// x32's bit refused), then `socket`'s first argument.
fn build_filter() -> Option<Vec<libc::sock_filter>> {
    #[cfg(target_arch = "x86_64")]
    let (arch, by_path): (u32, &[libc::c_long]) = (
        0xC000_003E, // AUDIT_ARCH_X86_64
        &[
            libc::SYS_chmod,
            libc::SYS_fchmodat,
            SYS_FCHMODAT2,
            libc::SYS_chown,
            libc::SYS_lchown,
            libc::SYS_fchownat,
        ],
    );
    #[cfg(target_arch = "aarch64")]
    let (arch, by_path): (u32, &[libc::c_long]) = (
        0xC000_00B7, // AUDIT_ARCH_AARCH64
        &[libc::SYS_fchmodat, SYS_FCHMODAT2, libc::SYS_fchownat],
    );
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return None;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        const X32_BIT: u32 = 0x4000_0000;
        // Offsets in `struct seccomp_data`: the number, the architecture, the first argument's
        // low 32 bits (little-endian).
        const NR: u32 = 0;
        const ARCH: u32 = 4;
        const ARG0: u32 = 16;
        let load = |offset| statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset, 0, 0);
        let equal = |k, jt, jf| statement(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, k, jt, jf);
        let ret = |k| statement(libc::BPF_RET | libc::BPF_K, k, 0, 0);
        let allow = ret(libc::SECCOMP_RET_ALLOW);
        let n = by_path.len() as u8;
        // Jumps count the instructions they skip; `refuse` is the last one, `socket` the
        // first after the by-path list's `allow`.
        let refuse_from = |at: u8| n + 8 - at;
        let mut filter = vec![
            load(ARCH),
            equal(arch, 0, refuse_from(1)),
            load(NR),
            statement(
                libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
                X32_BIT,
                refuse_from(3),
                0,
            ),
            equal(libc::SYS_socket as u32, n + 1, 0),
        ];
        for (i, &call) in by_path.iter().enumerate() {
            filter.push(equal(call as u32, refuse_from(5 + i as u8), 0));
        }
        filter.extend([
            allow,
            load(ARG0),
            equal(libc::AF_UNIX as u32, 1, 0),
            allow,
            ret(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ]);
        Some(filter)
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn statement(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Installs `filter` ([`syscall_filter`]) on the calling thread and everything it will `exec`
/// (no_new_privs set first: [`no_new_privileges`]).
///
/// # Safety
/// Async-signal-safe (one system call on a filter built before the fork); for use between fork
/// and exec.
pub unsafe fn filter_syscalls(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let program = libc::sock_fprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `program` points to `filter`, both alive for the call, which copies them.
    let installed = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &raw const program,
        )
    };
    if installed != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reach_that_would_open_the_users_files_or_the_childs_directory_is_left_out() {
        let dir = Path::new("/tmp/work/redraft-eval-1");
        let home = Some(Path::new("/home/alice"));
        for broad in [
            "/",
            "/home",
            "/home/alice",
            "/tmp",
            "/tmp/work",
            "/usr",
            "/opt",
        ] {
            assert!(!narrow(Path::new(broad), dir, home), "{broad}");
        }
        for narrow_enough in [
            "/home/alice/.pyenv/versions/3.12.1",
            "/home/alice/project/.venv",
            "/opt/conda",
            "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu",
            "/tmp/work/eval-deps",
        ] {
            assert!(
                narrow(Path::new(narrow_enough), dir, home),
                "{narrow_enough}"
            );
        }
    }

    /// The filter as the kernel runs it (loads of `seccomp_data`, jumps, returns), on calls of
    /// this architecture and another.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    #[test]
    fn the_filter_refuses_unix_sockets_and_changes_by_path_and_nothing_else() {
        let filter = syscall_filter().expect("a filter for this architecture");
        let native = filter[1].k;
        let run = |arch: u32, nr: libc::c_long, arg0: u32| {
            let mut at = 0;
            let mut accumulator = 0u32;
            loop {
                let op = filter[at];
                let code = u32::from(op.code);
                if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                    accumulator = match op.k {
                        0 => nr as u32,
                        4 => arch,
                        16 => arg0,
                        other => panic!("loads offset {other}"),
                    };
                    at += 1;
                } else if code & 0x07 == libc::BPF_JMP {
                    let taken = match code & 0xf0 {
                        op_code if op_code == libc::BPF_JEQ => accumulator == op.k,
                        op_code if op_code == libc::BPF_JGE => accumulator >= op.k,
                        other => panic!("jump {other:#x}"),
                    };
                    at += 1 + usize::from(if taken { op.jt } else { op.jf });
                } else {
                    assert_eq!(code, libc::BPF_RET | libc::BPF_K);
                    return op.k;
                }
            }
        };
        let refused = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let unix = libc::AF_UNIX as u32;
        assert_eq!(run(native, libc::SYS_socket, unix), refused);
        assert_eq!(
            run(native, libc::SYS_socket, libc::AF_INET as u32),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(native, libc::SYS_socketpair, unix),
            libc::SECCOMP_RET_ALLOW
        );
        for call in [libc::SYS_fchmodat, SYS_FCHMODAT2, libc::SYS_fchownat] {
            assert_eq!(run(native, call, 0), refused, "{call}");
        }
        #[cfg(target_arch = "x86_64")]
        for call in [libc::SYS_chmod, libc::SYS_chown, libc::SYS_lchown] {
            assert_eq!(run(native, call, 0), refused, "{call}");
        }
        for call in [
            libc::SYS_read,
            libc::SYS_openat,
            libc::SYS_fchmod,
            libc::SYS_clone,
        ] {
            assert_eq!(run(native, call, unix), libc::SECCOMP_RET_ALLOW, "{call}");
        }
        // Another numbering (x86's `int 0x80`; x32's numbers past bit 30): refused whole.
        assert_eq!(run(0x4000_0003, libc::SYS_read, 0), refused);
        assert_eq!(run(native, 0x4000_0000 | libc::SYS_socket, unix), refused);
    }
}
