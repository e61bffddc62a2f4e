//! What an interrupted run leaves behind: nothing running and no scratch directory. The
//! sandbox runs each program in a process group of its own (so a terminal's Ctrl-C, sent to
//! the foreground group, never reaches it) and the scorer makes a scratch directory per
//! program (a Rust one holds a test binary of megabytes); a run ended by a signal did neither
//! of the things a finished one does, killing the group and removing the directory. They are
//! registered here while they live, and [`install`]'s handler, on SIGINT, SIGTERM or SIGHUP,
//! kills the groups, removes the directories and ends the process as the signal would have
//! (so a shell sees an interrupted command: status 130 for Ctrl-C).
//!
//! The signal handler only writes a byte to a pipe (all a handler may safely do); a thread
//! reading the pipe does the rest. A program started after the groups were killed (a race
//! of microseconds) still dies with this process: the sandbox's children ask for SIGKILL when
//! their parent dies (`PR_SET_PDEATHSIG`, Linux).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

/// The process groups and scratch directories of the programs running now.
struct Live {
    groups: BTreeSet<libc::pid_t>,
    dirs: BTreeSet<PathBuf>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    groups: BTreeSet::new(),
    dirs: BTreeSet::new(),
});

fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A program's process group (its leader's pid), from its start until it is reaped.
pub(crate) fn group_started(pid: libc::pid_t) {
    live().groups.insert(pid);
}

/// Called after the group was killed and before its leader is reaped: until then its id
/// cannot name another group.
pub(crate) fn group_ended(pid: libc::pid_t) {
    live().groups.remove(&pid);
}

/// A scratch directory that exists until [`dir_removed`].
pub(crate) fn dir_made(dir: &Path) {
    live().dirs.insert(dir.to_path_buf());
}

pub(crate) fn dir_removed(dir: &Path) {
    live().dirs.remove(dir);
}

/// The pipe's write end, for the handler; -1 before [`install`].
static WAKE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = WAKE.load(std::sync::atomic::Ordering::Relaxed);
    let byte = signal as u8;
    // SAFETY: write is async-signal-safe; `byte` outlives the call.
    unsafe {
        libc::write(fd, (&raw const byte).cast(), 1);
    }
}

/// Has SIGINT, SIGTERM and SIGHUP kill the programs running and remove their scratch
/// directories before the process ends. Once per process; later calls do nothing. Without it
/// (a library caller's choice) a signal ends the process as before.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two descriptors.
        if unsafe { libc::pipe(pipe.as_mut_ptr()) } != 0 {
            return;
        }
        let [read, write] = pipe;
        for fd in pipe {
            // SAFETY: fcntl on descriptors this call just made; no program inherits them.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        WAKE.store(write, std::sync::atomic::Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("interrupt".into())
            .spawn(move || {
                let mut byte = 0u8;
                // SAFETY: reads one byte into `byte`.
                while unsafe { libc::read(read, (&raw mut byte).cast(), 1) } != 1 {}
                clean_up_and_end(libc::c_int::from(byte));
            });
        if spawned.is_err() {
            return;
        }
        for signal in SIGNALS {
            // SAFETY: `on_signal` only writes to a pipe; the action is zeroed, then filled.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    });
}

/// Kills every live group, removes every live directory, and ends the process as `signal`
/// would have, had it not been caught. The lock is held to the end: a program ending meanwhile
/// waits, and no group id is reused under it.
fn clean_up_and_end(signal: libc::c_int) -> ! {
    let live = live();
    for &group in &live.groups {
        // SAFETY: kill with a negative pid signals that process group.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
    for dir in &live.dirs {
        // A program killed a moment ago may still finish a write into it: a second try.
        for _ in 0..3 {
            match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => break,
            }
        }
    }
    // SAFETY: plain system calls on values.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
        libc::_exit(128 + signal)
    }
}
