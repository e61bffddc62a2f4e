//! Runs untrusted programs (and the compiler on untrusted source) so that no completion can
//! hurt the run or the machine: its own directory, resource limits set in the child before
//! `exec` (address space, CPU seconds, processes, file size, open files, no core dumps), its own
//! process group killed as a whole at a wall-clock deadline, a network namespace with nothing
//! in it and a PID namespace where the kernel allows them, Landlock confinement where the
//! kernel has it and a seccomp filter (`sandbox/confine.rs`: writes only in its directory, reads
//! only the system's files and its toolchain's, no TCP, no signals out, no Unix sockets, no
//! mode or owner changes by path), and, when redraft runs as root, the uid of `nobody`.
//!
//! In a PID namespace the program runs under an init of its own (a fork of the sandbox's child,
//! which waits for that init and ends as the program ended): when the program exits, its init
//! exits and the kernel kills whatever else is in the namespace, so a daemon that left the
//! process group (`setsid`, a double fork) dies with it; and the program can signal no process
//! outside (`kill -9 -1` reaches only its own); without Landlock, `/proc`, not mounted anew,
//! still lists them. The child asks the kernel to SIGKILL it when redraft ends
//! (`PR_SET_PDEATHSIG`; its init too), and [`crate::interrupt`] kills the groups running when
//! redraft is interrupted: no program outlives the run.
//!
//! On macOS only the CPU, file-size and open-file limits, the process group and the deadline
//! hold (no address-space limit: macOS refuses RLIMIT_AS; no process limit unless redraft runs
//! as root); `sandbox/elsewhere.rs` stands in for `confine.rs`, and [`Sandbox::describe`] says
//! what holds.
//!
//! A wrong program here once grew to 10 GB; a looping one must not stall the run. Output goes
//! to files (bounded by the file-size limit), never to pipes a stray grandchild could hold open,
//! and to files without a name, read back through this process's own descriptors: a program
//! that puts a link where it sees an output file has this unconfined process follow nothing.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};

#[cfg(target_os = "linux")]
mod confine;
#[cfg(not(target_os = "linux"))]
mod elsewhere;
#[cfg(not(target_os = "linux"))]
use elsewhere as confine;

/// The uid/gid of `nobody`: 65534 on Linux, -2 on macOS.
#[cfg(not(target_os = "macos"))]
const NOBODY: u32 = 65534;
#[cfg(target_os = "macos")]
const NOBODY: u32 = u32::MAX - 1;

/// Whether RLIMIT_AS is set ([`Limits::address_space`]).
const LIMITS_ADDRESS_SPACE: bool = !cfg!(target_os = "macos");

/// A resource's type as libc's `getrlimit` takes it (glibc has an enum of its own).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;
/// Bytes of stdout/stderr kept for classification and reports, from the start...
const KEPT_OUTPUT: u64 = 64 * 1024;
/// ...and from the end, where the verdict is (a Python traceback's last line, the line the
/// scorer writes after `check` returns, the test harness's summary), however much the program
/// printed before it.
const KEPT_END: u64 = 4 * 1024;

/// Resource limits for one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Wall-clock time before the whole process group is killed.
    #[serde(serialize_with = "as_secs")]
    pub wall: Duration,
    /// CPU seconds (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL a second later.
    pub cpu_seconds: u64,
    /// Address space in bytes (RLIMIT_AS): allocation fails beyond it. Not on macOS, whose
    /// kernel refuses the limit (EINVAL since macOS 12) and never enforced it.
    pub address_space: u64,
    /// Largest file the child may write, output files included (RLIMIT_FSIZE).
    pub file_size: u64,
    /// Processes and threads (RLIMIT_NPROC), where the child's are counted apart from the
    /// invoking user's ([`Sandbox::limits_processes`]): the kernel counts every process of a
    /// uid (of a uid in a user namespace, from Linux 5.14) and ignores the limit for root.
    /// Like every limit here, held at the invoking process's own hard limit where that is
    /// lower (which only root may raise).
    pub processes: u64,
    /// Whether the child drops to `nobody` when redraft runs as root (needs its program
    /// readable by `nobody`, so not for a toolchain under /root).
    pub drop_privileges: bool,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// How the child is cut off from the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// A fresh network namespace (only a down loopback), with a PID namespace where the host
    /// allows one ([`Sandbox::pid_namespace`]): needs CAP_SYS_ADMIN.
    Namespace,
    /// A fresh user namespace holding a fresh network namespace (and PID namespace, where
    /// allowed): unprivileged, where the
    /// kernel allows unprivileged user namespaces.
    UserNamespace,
    /// Neither is available: the child shares the host's network.
    Shared,
}

/// The isolation this machine allows, probed once.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sandbox {
    pub network: Network,
    /// Whether the program also gets a PID namespace (with an init of its own) inside the
    /// network namespace: a host may allow the one and not the other (`max_pid_namespaces`
    /// 0, the nesting limit reached), and then keeps its network isolation without it.
    pub pid_namespace: bool,
    /// Whether redraft runs as root (children with `drop_privileges` then run as `nobody`).
    pub root: bool,
    /// The Landlock ABI children are confined with (`sandbox/confine.rs`), `None` where the kernel has
    /// no Landlock (or confining a child failed here): they then read and write what their uid
    /// may.
    pub landlock: Option<u32>,
    /// Whether a seccomp filter refuses children what Landlock does not cover: Unix sockets,
    /// and changing a file's mode or owner by its path (`sandbox/confine.rs`).
    pub seccomp: bool,
}

/// Where a child may read and execute under Landlock besides its own directory (read, write,
/// execute) and the system's programs and libraries: what its toolchain needs. A path that
/// would open too much is left out when a child is confined (`/`, a top-level directory, one
/// that holds the child's directory or `$HOME`): an interpreter installed with such a prefix
/// fails the scorer's check at start, rather than opening the user's files to every program.
/// The user widens it with `granted` (`redraft-lab eval --sandbox-read`), taken as given.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// Directories (everything beneath) or files: a sysroot, prebuilt crates, an interpreter's
    /// prefix.
    pub read: Vec<PathBuf>,
    /// What the user grants besides, never left out.
    pub granted: Vec<PathBuf>,
}

impl Reach {
    /// The absolute paths of `paths`, each once.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> Reach {
        let mut read: Vec<PathBuf> = Vec::new();
        for path in paths {
            if path.is_absolute() && !read.contains(&path) {
                read.push(path);
            }
        }
        Reach {
            read,
            granted: Vec::new(),
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Exited(i32),
    Signaled(i32),
    /// Killed at the wall-clock deadline.
    TimedOut,
}

/// A finished child: its status and the start of its output.
#[derive(Debug, Clone)]
pub struct Exit {
    pub status: Status,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// Whether the child used up its CPU seconds: a SIGKILL then is the limit's (the hard
    /// limit, a second past the SIGXCPU of the soft one), not a signal the program sent itself.
    pub cpu_limit_reached: bool,
}

impl Sandbox {
    /// Probes which isolation works here by starting `true` under each in turn: the
    /// namespaces first, then Landlock on top of what was found.
    pub fn detect() -> Sandbox {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let found = [Network::Namespace, Network::UserNamespace]
            .into_iter()
            .flat_map(|network| {
                [true, false].map(|pid_namespace| Sandbox {
                    network,
                    pid_namespace,
                    root,
                    landlock: None,
                    seccomp: false,
                })
            })
            .find(probe)
            .unwrap_or(Sandbox {
                network: Network::Shared,
                pid_namespace: false,
                root,
                landlock: None,
                seccomp: false,
            });
        let confined = Sandbox {
            landlock: confine::kernel_abi(),
            ..found
        };
        let found = if confined.landlock.is_some() && probe(&confined) {
            confined
        } else {
            found
        };
        let filtered = Sandbox {
            seccomp: confine::syscall_filter().is_some(),
            ..found
        };
        if filtered.seccomp && probe(&filtered) {
            filtered
        } else {
            found
        }
    }

    /// Whether a child with these limits will run as `nobody`.
    pub fn drops_to_nobody(&self, limits: &Limits) -> bool {
        self.root && limits.drop_privileges
    }

    /// Whether a child with these limits is held to [`Limits::processes`]: as `nobody`, or in
    /// a user namespace of its own on a kernel that counts a namespace's processes apart, so
    /// the limit stops a fork bomb without counting the user's other processes (and concurrent
    /// programs in namespaces of their own do not share one count).
    /// Root's own processes are never held (the kernel exempts them, in a user namespace too:
    /// a compiler run as root where root makes its network namespace with a user namespace).
    pub fn limits_processes(&self, limits: &Limits) -> bool {
        self.drops_to_nobody(limits)
            || (!self.root
                && self.network == Network::UserNamespace
                && counts_processes_per_user_namespace())
    }

    /// A one-line description for reports.
    pub fn describe(&self, limits: &Limits) -> String {
        let network = match (self.network, self.pid_namespace) {
            (Network::Namespace, true) => "network+PID namespace (no network)",
            (Network::Namespace, false) => "network namespace (no network; no PID namespace)",
            (Network::UserNamespace, true) => "user+network+PID namespace (no network)",
            (Network::UserNamespace, false) => {
                "user+network namespace (no network; no PID namespace)"
            }
            (Network::Shared, _) if self.landlock >= Some(4) => {
                "no TCP (Landlock), NO namespaces (UDP and the PID space shared)"
            }
            (Network::Shared, _) => "NO network or PID isolation (namespaces unavailable)",
        };
        let files = match self.landlock {
            Some(abi) => format!(
                "Landlock ABI {abi} (writes only in its directory; reads only the system's and its toolchain's files)"
            ),
            None => "NO filesystem confinement (Landlock absent or refused)".to_string(),
        };
        let calls = if self.seccomp {
            "no Unix sockets, no chmod/chown by path (seccomp)"
        } else {
            "Unix sockets and chmod/chown NOT filtered (no seccomp filter)"
        };
        let user = if self.drops_to_nobody(limits) {
            "as nobody"
        } else {
            "as the invoking user"
        };
        let processes = if self.limits_processes(limits) {
            format!(
                "at most {} processes",
                within_hard_limit(libc::RLIMIT_NPROC, limits.processes)
            )
        } else {
            "processes NOT limited".to_string()
        };
        let memory = if LIMITS_ADDRESS_SPACE {
            format!(
                "{} MiB address space",
                within_hard_limit(libc::RLIMIT_AS, limits.address_space) >> 20
            )
        } else {
            "address space NOT limited (macOS refuses RLIMIT_AS)".to_string()
        };
        format!(
            "{network}, {files}, {calls}, {user}, {:.0} s wall, {} s CPU, {memory}, {processes}",
            limits.wall.as_secs_f64(),
            within_hard_limit(libc::RLIMIT_CPU, limits.cpu_seconds.max(1)),
        )
    }

    /// Runs `program args` in `dir` with a clean environment (`env` only), stdin closed,
    /// `limits` applied and, under Landlock, only `dir`, the system and `reach` in reach; kills
    /// the process group at the deadline and after the child exits (so nothing it started
    /// lingers).
    pub fn run(
        &self,
        program: &Path,
        args: &[&OsStr],
        dir: &Path,
        env: &[(&str, &OsStr)],
        limits: &Limits,
        reach: &Reach,
    ) -> Result<Exit> {
        // Kept open until the child has started: it enforces the ruleset by this descriptor.
        let ruleset = match self.landlock {
            Some(_) => Some(confine::ruleset(dir, reach).map_err(|e| Error::io(dir, e))?),
            None => None,
        };
        // Files without a name (made and unlinked before the child starts): the program can
        // write only through its descriptors, and there is no path for it to swap for a link
        // that would have this (unconfined) process read or write some other file for it.
        let unnamed =
            |what: &str| tempfile::tempfile_in(dir).map_err(|e| Error::io(&dir.join(what), e));
        let (mut stdout, mut stderr) = (unnamed("stdout")?, unnamed("stderr")?);
        let (child_stdout, child_stderr) = (
            stdout.try_clone().map_err(|e| Error::io(dir, e))?,
            stderr.try_clone().map_err(|e| Error::io(dir, e))?,
        );
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(child_stdout)
            .stderr(child_stderr)
            .process_group(0);
        let setup = ChildSetup {
            network: self.network,
            pid_namespace: self.pid_namespace,
            limits: *limits,
            nobody: self.drops_to_nobody(limits),
            process_limit: self.limits_processes(limits),
            nobody_namespace: self.drops_to_nobody(limits) && counts_processes_per_user_namespace(),
            ruleset: ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            // SAFETY: getpid has no preconditions.
            parent: unsafe { libc::getpid() },
            filter: confine::syscall_filter().filter(|_| self.seccomp),
        };
        // SAFETY: the closure only makes async-signal-safe system calls (unshare, getrlimit, setrlimit,
        // setgroups, setgid, setuid, prctl, landlock_restrict_self; for the PID namespace's init
        // pipe2, a raw clone, waitpid, close_range, read, write, kill, _exit) on data copied
        // before the fork; it allocates nothing.
        unsafe {
            command.pre_exec(move || setup.apply());
        }
        let started = Instant::now();
        let child = command.spawn().map_err(|source| Error::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        drop(ruleset);
        let pid = child.id() as libc::pid_t;
        crate::interrupt::group_started(pid);
        let deadline = started + limits.wall;
        let mut pause = Duration::from_millis(1);
        let status = loop {
            if exited_without_reaping(pid) {
                break None;
            }
            let now = Instant::now();
            if now >= deadline {
                break Some(Status::TimedOut);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        // Before reaping the leader, while its process group id cannot be reused: take down
        // anything it left behind (or everything, at the deadline).
        // SAFETY: kill with a negative pid signals the child's own process group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        crate::interrupt::group_ended(pid);
        let (waited, cpu) = wait_with_cpu(pid).map_err(|source| Error::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        // Reaped above: std's handle must not wait again.
        drop(child);
        let wall = started.elapsed();
        let status = status.unwrap_or_else(|| match (waited.code(), waited.signal()) {
            (Some(code), _) => Status::Exited(code),
            (None, Some(signal)) => Status::Signaled(signal),
            (None, None) => Status::Signaled(0),
        });
        Ok(Exit {
            status,
            stdout: read_ends(&mut stdout),
            stderr: read_ends(&mut stderr),
            wall,
            cpu_limit_reached: cpu >= Duration::from_secs(limits.cpu_seconds.max(1)),
        })
    }
}

/// Reaps `pid`: its exit status and the CPU time it and the children it waited for used.
fn wait_with_cpu(pid: libc::pid_t) -> std::io::Result<(std::process::ExitStatus, Duration)> {
    let mut status = 0;
    // SAFETY: `usage` is written by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid for writes for the call.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } < 0 {
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Ok((
        std::process::ExitStatus::from_raw(status),
        time(usage.ru_utime) + time(usage.ru_stime),
    ))
}

/// What the child does between `fork` and `exec`.
#[derive(Clone, Copy)]
struct ChildSetup {
    network: Network,
    pid_namespace: bool,
    limits: Limits,
    nobody: bool,
    /// Whether RLIMIT_NPROC is set ([`Sandbox::limits_processes`]).
    process_limit: bool,
    /// Whether, as `nobody`, the child tries a user namespace of its own (where the kernel
    /// counts a namespace's processes apart; decided before the fork, which reads the
    /// kernel's version).
    nobody_namespace: bool,
    /// The Landlock ruleset's descriptor, -1 for none.
    ruleset: libc::c_int,
    /// The seccomp filter, built before the fork.
    filter: Option<&'static [confine::Instruction]>,
    /// This process, which the child dies with ([`die_with_parent`]).
    parent: libc::pid_t,
}

impl ChildSetup {
    fn apply(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on values; failures are reported through errno.
        unsafe {
            let own_init = enter_namespaces(self.network, self.pid_namespace)?;
            let l = &self.limits;
            let cpu = l.cpu_seconds.max(1);
            set_limit(libc::RLIMIT_CPU, cpu, cpu + 1)?;
            if LIMITS_ADDRESS_SPACE {
                set_limit(libc::RLIMIT_AS, l.address_space, l.address_space)?;
            }
            set_limit(libc::RLIMIT_FSIZE, l.file_size, l.file_size)?;
            set_limit(libc::RLIMIT_CORE, 0, 0)?;
            set_limit(libc::RLIMIT_NOFILE, 256, 256)?;
            if self.nobody {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(NOBODY) != 0
                    || libc::setuid(NOBODY) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                // A user namespace of the program's own, made as `nobody` (where the kernel
                // lets `nobody` make one): the process limit below then counts this program's
                // processes apart from every other `nobody` process, the run's other programs
                // among them, so one that forks to its limit does not stop the others starting.
                // Without one the count is shared, as it was.
                if self.nobody_namespace {
                    own_user_namespace();
                }
            }
            if self.process_limit {
                // After the unshares and the change of user: in a user namespace of its own the
                // count starts from this process (and a limit set before `setuid` would have
                // failed the program's exec where `nobody` already had that many processes).
                set_limit(libc::RLIMIT_NPROC, l.processes, l.processes)?;
            }
            // After every change of credentials, which clears it.
            die_with_parent(self.parent)?;
            confine::no_new_privileges()?;
            if self.ruleset >= 0 {
                confine::enforce(self.ruleset)?;
            }
            if let Some(filter) = self.filter {
                confine::filter_syscalls(filter)?;
            }
            if own_init {
                return under_own_init();
            }
        }
        Ok(())
    }
}

/// Has the kernel SIGKILL this process when the thread that started it ends (the scoring
/// thread waits for it, so: when redraft ends, Ctrl-C or a crash, not when it is done); and
/// fails if `parent` is already gone. Linux only; elsewhere only the process group is killed,
/// by [`crate::interrupt`].
///
/// # Safety
/// Async-signal-safe; called only between fork and exec.
unsafe fn die_with_parent(parent: libc::pid_t) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on values.
    unsafe {
        let kill = libc::SIGKILL as libc::c_ulong;
        if libc::prctl(libc::PR_SET_PDEATHSIG, kill, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    let _ = parent;
    Ok(())
}

/// Moves the child into the namespaces `network` (and `pid_namespace`) name; whether it is in
/// a new PID namespace, so must start under an init of its own. Linux only: elsewhere every
/// sandbox is [`Network::Shared`] (the probes of the others fail there).
///
/// # Safety
/// Async-signal-safe; called only between fork and exec.
#[cfg(target_os = "linux")]
unsafe fn enter_namespaces(network: Network, pid_namespace: bool) -> std::io::Result<bool> {
    let pid = if pid_namespace { libc::CLONE_NEWPID } else { 0 };
    let flags = match network {
        Network::Namespace => libc::CLONE_NEWNET | pid,
        Network::UserNamespace => libc::CLONE_NEWUSER | libc::CLONE_NEWNET | pid,
        Network::Shared => return Ok(false),
    };
    // SAFETY: a plain system call on a value.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid != 0)
}

/// # Safety
/// None needed; `unsafe` as the Linux one is.
#[cfg(not(target_os = "linux"))]
unsafe fn enter_namespaces(network: Network, _pid_namespace: bool) -> std::io::Result<bool> {
    match network {
        Network::Shared => Ok(false),
        Network::Namespace | Network::UserNamespace => Err(std::io::ErrorKind::Unsupported.into()),
    }
}

/// Moves the child into a user namespace of its own, where the kernel lets it; without one its
/// processes count with every other of its user's.
///
/// # Safety
/// Async-signal-safe; called only between fork and exec.
unsafe fn own_user_namespace() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call on a value; its failure leaves the child where it was.
    unsafe {
        libc::unshare(libc::CLONE_NEWUSER);
    }
}

/// Never called: no PID namespace elsewhere than on Linux.
///
/// # Safety
/// None needed; `unsafe` as the Linux one is.
#[cfg(not(target_os = "linux"))]
unsafe fn under_own_init() -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Returns, to `exec` the program, only in a grandchild that is the second process of the new
/// PID namespace; its parent is the namespace's init, which reaps whatever is orphaned there and
/// reports the program's wait status through a pipe; the sandbox's own child waits for that init
/// and ends as the program ended (its exit code, or killed by its signal).
///
/// # Safety
/// Async-signal-safe; called only between fork and exec, after `unshare(CLONE_NEWPID)`. The
/// forks are raw `clone` calls: glibc's `fork` runs atfork handlers that take locks another
/// thread of the parent may have held at the first fork.
#[cfg(target_os = "linux")]
unsafe fn under_own_init() -> std::io::Result<()> {
    let mut report = [0; 2];
    // SAFETY: `report` has room for the two descriptors.
    if unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [report_read, report_write] = report;
    // SAFETY: as for `under_own_init`.
    let init = unsafe { fork_raw() };
    if init < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if init == 0 {
        // The init dies with the sandbox's child (whom the kernel kills when redraft ends),
        // and the namespace with it.
        // SAFETY: a plain system call on values.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
        }
    }
    if init > 0 {
        // SAFETY: as for `under_own_init`; none of these returns.
        unsafe {
            // Closing std's exec-error pipe (and every other inherited descriptor) lets `spawn`
            // return as soon as the program has been started.
            close_all_but(report_read);
            let status = wait_for(init);
            let mut program: libc::c_int = 0;
            let read = libc::read(
                report_read,
                (&raw mut program).cast(),
                std::mem::size_of::<libc::c_int>(),
            );
            end_as(if read == std::mem::size_of::<libc::c_int>() as isize {
                program
            } else {
                status
            })
        }
    }
    // SAFETY: as for `under_own_init`.
    let program = unsafe { fork_raw() };
    if program < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if program == 0 {
        return Ok(());
    }
    // SAFETY: as for `under_own_init`; init reaps until the program is done, then exits, which
    // has the kernel kill everything else in the namespace.
    unsafe {
        close_all_but(report_write);
        let status = loop {
            let mut status = 0;
            let reaped = libc::waitpid(-1, &mut status, 0);
            if reaped == program {
                break status;
            }
            if reaped < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        };
        libc::write(
            report_write,
            (&raw const status).cast(),
            std::mem::size_of::<libc::c_int>(),
        );
        libc::_exit(0)
    }
}

/// # Safety
/// Between fork and exec only.
#[cfg(target_os = "linux")]
unsafe fn fork_raw() -> libc::pid_t {
    // SAFETY: a clone with only the exit signal set is a plain fork, on every architecture's
    // argument order (the rest are zero).
    unsafe {
        libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) as libc::pid_t
    }
}

/// # Safety
/// Between fork and exec only, in a process that will not exec.
#[cfg(target_os = "linux")]
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep as libc::c_uint;
    // SAFETY: as for `close_all_but`.
    unsafe {
        if keep > 3 {
            close_fds(3, keep - 1);
        }
        close_fds(keep + 1, libc::c_uint::MAX);
    }
}

/// Closes descriptors `first..=last`; one by one (up to 65535) before Linux 5.9, which has no
/// `close_range`: below the kept one too, where std's exec-error pipe may be.
///
/// # Safety
/// Between fork and exec only, in a process that will not exec.
#[cfg(target_os = "linux")]
unsafe fn close_fds(first: libc::c_uint, last: libc::c_uint) {
    // SAFETY: closing descriptors has no memory effects.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) != 0 {
            for fd in first..=last.min(65535) {
                libc::close(fd as libc::c_int);
            }
        }
    }
}

/// # Safety
/// Between fork and exec only.
#[cfg(target_os = "linux")]
unsafe fn wait_for(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    // SAFETY: `status` is written by waitpid.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        // SAFETY: errno is thread-local and always valid.
        if unsafe { *libc::__errno_location() } != libc::EINTR {
            return 127 << 8;
        }
    }
    status
}

/// Exits as a process with wait status `status` ended: with its code, or killed by its signal.
///
/// # Safety
/// Between fork and exec only.
#[cfg(target_os = "linux")]
unsafe fn end_as(status: libc::c_int) -> ! {
    // SAFETY: plain system calls on values.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// Sets `resource`'s limits to `soft` and `hard`, each held at the current hard limit where
/// that is lower: a process without CAP_SYS_RESOURCE cannot raise it (the call would fail, and
/// every program with it), and a lower limit is the stricter one.
///
/// # Safety
/// Async-signal-safe; called only between fork and exec.
unsafe fn set_limit(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: within_hard_limit(resource, soft) as libc::rlim_t,
        rlim_max: within_hard_limit(resource, hard) as libc::rlim_t,
    };
    // SAFETY: `limit` is a valid rlimit for the duration of the call.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `wanted`, or this process's hard limit of `resource` where that is lower. Async-signal-safe
/// (one `getrlimit`, nothing allocated): [`set_limit`] calls it between fork and exec.
fn within_hard_limit(resource: Resource, wanted: u64) -> u64 {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `current` is valid for writes for the call.
    if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
        return wanted;
    }
    // RLIM_INFINITY is the largest value: no limit lowers `wanted`.
    wanted.min(current.rlim_max)
}

/// Whether `pid` has exited, leaving it a zombie (so its pid, and its process group id, stay
/// reserved until `wait`).
fn exited_without_reaping(pid: libc::pid_t) -> bool {
    // SAFETY: `info` is written by waitid; WNOWAIT leaves the child waitable.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        // Elsewhere `waitid` also reports a child that stopped (SIGSTOP): only an exit counts
        // (CLD_EXITED, CLD_KILLED, CLD_DUMPED, 1 to 3 everywhere; Linux reports nothing else
        // here).
        rc == 0 && info.si_pid() != 0 && (1..=3).contains(&info.si_code)
    }
}

/// The file's text, or its first [`KEPT_OUTPUT`] and last [`KEPT_END`] bytes with a line
/// saying how much was left out between them.
fn read_ends(file: &mut File) -> String {
    // The child wrote through a descriptor sharing this one's offset.
    if file.rewind().is_err() {
        return String::new();
    }
    let len = file.metadata().map_or(0, |m| m.len());
    let mut head = Vec::new();
    let _ = file.by_ref().take(KEPT_OUTPUT).read_to_end(&mut head);
    if len <= KEPT_OUTPUT + KEPT_END {
        let _ = file.read_to_end(&mut head);
        return String::from_utf8_lossy(&head).into_owned();
    }
    let mut tail = Vec::new();
    if file.seek(SeekFrom::End(-(KEPT_END as i64))).is_ok() {
        let _ = file.read_to_end(&mut tail);
    }
    format!(
        "{}\n[... {} bytes left out ...]\n{}",
        String::from_utf8_lossy(&head),
        len - KEPT_OUTPUT - KEPT_END,
        String::from_utf8_lossy(&tail)
    )
}

/// Whether the kernel counts RLIMIT_NPROC per user namespace (Linux 5.14, "Reimplement
/// RLIMIT_NPROC on top of ucounts"); before, a user namespace's processes counted with all of
/// the user's, and a limit low enough to stop a fork bomb would stop the program's first fork.
#[cfg(target_os = "linux")]
fn counts_processes_per_user_namespace() -> bool {
    static COUNTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COUNTS.get_or_init(|| kernel_release().is_some_and(|release| release >= (5, 14)))
}

/// No user namespaces elsewhere.
#[cfg(not(target_os = "linux"))]
fn counts_processes_per_user_namespace() -> bool {
    false
}

/// The running kernel's major and minor version.
#[cfg(target_os = "linux")]
fn kernel_release() -> Option<(u32, u32)> {
    // SAFETY: `uname` fills the zeroed struct it is given; its fields are NUL-terminated.
    let release = unsafe {
        let mut name: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut name) != 0 {
            return None;
        }
        std::ffi::CStr::from_ptr(name.release.as_ptr())
            .to_string_lossy()
            .into_owned()
    };
    parse_release(&release)
}

/// `6.18.44-fc-v1272` -> (6, 18).
#[cfg(target_os = "linux")]
fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Starts `true` (or `sh -c :`) under `sandbox`'s isolation; whether it ran.
fn probe(sandbox: &Sandbox) -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    let limits = Limits {
        wall: Duration::from_secs(10),
        cpu_seconds: 5,
        address_space: 1 << 30,
        file_size: 1 << 20,
        processes: 64,
        drop_privileges: false,
    };
    // `sh -c :` where there is no `true` at a fixed path (NixOS has only /bin/sh).
    let shell: [&OsStr; 2] = ["-c".as_ref(), ":".as_ref()];
    let Some((truth, args)) = [
        ("/bin/true", &[][..]),
        ("/usr/bin/true", &[]),
        ("/bin/sh", &shell[..]),
    ]
    .into_iter()
    .map(|(program, args)| (Path::new(program), args))
    .find(|(program, _)| program.exists()) else {
        return false;
    };
    matches!(
        sandbox.run(truth, args, dir.path(), &[], &limits, &Reach::default()),
        Ok(Exit {
            status: Status::Exited(0),
            ..
        })
    )
}

/// Whether `nobody` can execute `path`: every directory on the way searchable by others and
/// the file executable by others (so a toolchain under a 0700 /root cannot be used as nobody).
pub fn executable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let mode = |p: &Path| p.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
    mode(&path) & 0o001 != 0 && path.ancestors().skip(1).all(|dir| mode(dir) & 0o001 != 0)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::parse_release;

    #[test]
    fn kernel_releases_are_read_to_their_major_and_minor() {
        assert_eq!(parse_release("6.18.44-fc-v1272"), Some((6, 18)));
        assert_eq!(parse_release("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(parse_release("5.14.0-427.13.1.el9_4.x86_64"), Some((5, 14)));
        assert!(Some((5, 4)) < Some((5, 14)));
        assert_eq!(parse_release("6"), None);
        assert_eq!(parse_release(""), None);
    }
}
