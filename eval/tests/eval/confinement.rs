//! What a program may touch beyond its own directory: Landlock keeps it (and rustc) to its
//! directory, the system's files and its toolchain's; a seccomp filter refuses Unix sockets and
//! mode or owner changes by path; the scorer's own handling of its output follows no link the
//! program made; and where confinement is refused, programs still run and the report says so.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use redraft_eval::sandbox::{Network, Sandbox};
use redraft_eval::score::{Outcome, Scorer, ScorerConfig};
use redraft_eval::task::TaskLanguage;

use crate::scorer::{check, python_task, refuse_on_this_thread, rust_task, tight_scorer};

/// A directory open to everyone, so only the confinement keeps a program (as `nobody` or not)
/// out, holding `secret` (mode 0666, text "x").
fn open_directory() -> (tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "x").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o666)).unwrap();
    (outside, secret)
}

/// A Python middle that tries `action` on `target` and returns 1 when the system refuses.
fn refused(action: &str, target: &Path) -> String {
    format!("    try:\n        ({action})({target:?})\n    except OSError:\n        return 1\n    return 0")
}

/// Under Landlock a program, and rustc compiling it, write only in the program's directory and
/// read only there, in the system's programs and libraries and in their toolchain: not a file
/// of another directory, however readable (the invoking user's files; to rustc running as
/// root, /etc/shadow), nor /tmp or /dev/shm to write.
#[test]
fn programs_reach_only_their_own_files() {
    let scorer = tight_scorer();
    if scorer.sandbox().landlock.is_none() {
        eprintln!("no Landlock here: programs reach what their uid may, not checked");
        return;
    }
    let (outside, secret) = open_directory();

    let task = python_task();
    check(&scorer, &task, &refused("open", &secret), Outcome::Pass);
    check(
        &scorer,
        &task,
        &refused("__import__('os').remove", &secret),
        Outcome::Pass,
    );
    let tag = std::process::id();
    let written = [
        outside.path().join("written"),
        format!("/tmp/redraft-landlock-{tag}").into(),
        format!("/dev/shm/redraft-landlock-{tag}").into(),
    ];
    for target in &written {
        check(
            &scorer,
            &task,
            &refused("lambda p: open(p, 'w').write('x')", target),
            Outcome::Pass,
        );
        assert!(!target.exists(), "{} was written", target.display());
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "x");
    // Its own directory is its to write and read; the interpreter's library is there to import.
    check(
        &scorer,
        &task,
        "    import json, subprocess\n    open('scratch', 'w').write('1')\n    return int(open('scratch').read())",
        Outcome::Pass,
    );

    let task = rust_task();
    let verdict = check(
        &scorer,
        &task,
        &format!("    include_str!({secret:?}).len() as u64"),
        Outcome::CompileError,
    );
    assert!(verdict.detail.contains("Permission denied"), "{verdict:?}");
    check(
        &scorer,
        &task,
        &format!("    std::fs::read({secret:?}).map_or(1, |_| 0)"),
        Outcome::Pass,
    );
    let target = outside.path().join("from-rust");
    check(
        &scorer,
        &task,
        &format!("    std::fs::write({target:?}, b\"x\").map_or(1, |_| 0)"),
        Outcome::Pass,
    );
    assert!(!target.exists());
    check(
        &scorer,
        &task,
        "    std::fs::write(\"scratch\", b\"1\").unwrap();\n    std::fs::read(\"scratch\").unwrap().len() as u64",
        Outcome::Pass,
    );
}

/// Where the kernel allows no namespace (a container's default seccomp profile), Landlock still
/// keeps a program from TCP: it cannot reach a server listening on this machine.
#[test]
fn without_namespaces_landlock_keeps_tcp_out() {
    if Sandbox::detect().landlock < Some(4) {
        eprintln!("no Landlock TCP rules here (ABI 4), not checked");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "    import socket\n    try:\n        socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    except OSError:\n        return 1\n    return 0"
    );
    let sandbox = passes_on_a_thread_refusing(libc::SYS_unshare, connect, "no TCP (Landlock)");
    assert_eq!(sandbox.network, Network::Shared, "{sandbox:?}");
    drop(listener);
}

/// A machine where confining a child fails (Landlock refused) runs programs as before, and its
/// reports say they are not confined.
#[test]
fn a_sandbox_that_cannot_confine_says_so_and_still_runs_programs() {
    let sandbox = passes_on_a_thread_refusing(
        libc::SYS_landlock_restrict_self,
        "    return 1".into(),
        "NO filesystem confinement",
    );
    assert_eq!(sandbox.landlock, None, "{sandbox:?}");
}

/// Scores `completion` of the Python task with a scorer made on a thread where the system call
/// `nr` fails with EPERM (for the scorer's probes and its programs alike), checks that it
/// passes and that every line of the scorer's report `says` so; the sandbox it found.
#[track_caller]
fn passes_on_a_thread_refusing(nr: libc::c_long, completion: String, says: &str) -> Sandbox {
    let (sandbox, described, verdict) = std::thread::spawn(move || {
        refuse_on_this_thread(nr, u32::MAX, libc::EPERM);
        let scorer = tight_scorer();
        let verdict = scorer.score(&python_task(), TaskLanguage::Python, &completion);
        (*scorer.sandbox(), scorer.describe(), verdict.unwrap())
    })
    .join()
    .unwrap();
    assert_eq!(verdict.outcome, Outcome::Pass, "{verdict:?}");
    assert!(
        described.iter().all(|line| line.contains(says)),
        "{described:?}"
    );
    sandbox
}

/// The scorer reads a program's output, and on a second run writes it, through descriptors of
/// files without a name: a program that swaps the names it sees in its directory for links
/// has the scorer (root, unconfined) neither read a root-only file into the verdict nor create
/// one where the program may not.
#[test]
fn the_scorer_follows_no_link_a_program_makes() {
    let scorer = tight_scorer();
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = private.path().join("secret");
    std::fs::write(&secret, "the-secret-line").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let made = private.path().join("made");
    let link = |name: &str, target: &Path| {
        format!("    import os\n    try:\n        os.remove('{name}')\n    except OSError:\n        pass\n    os.symlink({target:?}, '{name}')\n")
    };
    // The output the scorer reads after the run: the program fails, so it is quoted.
    let read = link(".redraft-stderr", &secret) + "    raise RuntimeError('see stderr')";
    let verdict = check(&scorer, &python_task(), &read, Outcome::TestFailure);
    assert!(!verdict.detail.contains("the-secret-line"), "{verdict:?}");
    // The output the scorer makes for a second run of a program that passed.
    let write = link(".redraft-stdout", &made) + "    return 1";
    let verdict = scorer
        .score_runs(&python_task(), TaskLanguage::Python, &write, 2)
        .unwrap();
    assert_eq!(verdict.outcome, Outcome::Pass, "{verdict:?}");
    assert!(!made.exists(), "the scorer created {}", made.display());
}

/// A Python from a virtual environment runs programs that import its own packages: what the
/// interpreter reads (its prefixes, its module path) is in reach, asked with the programs'
/// environment.
#[test]
fn a_virtual_environments_packages_are_in_reach() {
    let system = Path::new("/usr/bin/python3");
    if !system.exists() {
        eprintln!("no /usr/bin/python3 to make a virtual environment of, not checked");
        return;
    }
    let place = tempfile::tempdir().unwrap();
    std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let venv = place.path().join("venv");
    let made = std::process::Command::new(system)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("site-packages"))
        .find(|path| path.is_dir())
        .expect("the environment's site-packages");
    std::fs::write(site.join("redraft_reach_check.py"), "VALUE = 1\n").unwrap();
    let config = ScorerConfig {
        python: Some(venv.join("bin/python")),
        ..crate::support::config()
    };
    let scorer = Scorer::new(&config, &[TaskLanguage::Python]).unwrap();
    check(
        &scorer,
        &python_task(),
        "    import redraft_reach_check\n    return redraft_reach_check.VALUE",
        Outcome::Pass,
    );
}

/// What the user grants (`--sandbox-read`, for an interpreter whose prefix is their home) every
/// program may read and execute, not write; the reports name it; a path that is not there is
/// an error naming it before anything runs.
#[test]
fn what_the_user_grants_is_read_not_written_and_said() {
    let (outside, secret) = open_directory();
    let config = ScorerConfig {
        sandbox_read: vec![outside.path().to_path_buf()],
        ..crate::support::config()
    };
    let scorer = Scorer::new(&config, &[TaskLanguage::Python, TaskLanguage::Rust]).unwrap();
    let said = scorer.describe().join("\n");
    let granted = outside.path().canonicalize().unwrap();
    assert!(
        said.contains(&format!("(--sandbox-read): {}", granted.display())),
        "{said}"
    );
    if scorer.sandbox().landlock.is_none() {
        eprintln!("no Landlock here: programs reach what their uid may, not checked");
        return;
    }
    let read = format!("    return len(open({secret:?}).read())");
    check(&scorer, &python_task(), &read, Outcome::Pass);
    let rust = format!("    include_str!({secret:?}).len() as u64");
    check(&scorer, &rust_task(), &rust, Outcome::Pass);
    let written = outside.path().join("written");
    let write = refused("lambda p: open(p, 'w').write('x')", &written);
    check(&scorer, &python_task(), &write, Outcome::Pass);
    assert!(!written.exists());

    let missing = outside.path().join("no-such-dir");
    let config = ScorerConfig {
        sandbox_read: vec![missing.clone()],
        ..crate::support::config()
    };
    let error = Scorer::new(&config, &[TaskLanguage::Python])
        .err()
        .expect("a missing path is refused")
        .to_string();
    assert!(
        error.contains(&format!("--sandbox-read {}", missing.display())),
        "{error}"
    );
}

/// What Landlock does not check, the seccomp filter refuses: a Unix socket (a desktop's D-Bus
/// outside the sandbox) and changing a file's mode by its path.
#[test]
fn programs_reach_no_unix_socket_and_change_no_mode() {
    let scorer = tight_scorer();
    if !scorer.sandbox().seccomp {
        eprintln!("no seccomp filter here, not checked");
        return;
    }
    let (outside, secret) = open_directory();
    if scorer.sandbox().root {
        // Its own file, which `nobody` could change the mode of but for the filter.
        std::os::unix::fs::chown(&secret, Some(65534), Some(65534)).unwrap();
    }
    let socket = outside.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let task = python_task();
    let connect = format!(
        "    import socket\n    try:\n        socket.socket(socket.AF_UNIX).connect({socket:?})\n    except OSError:\n        return 1\n    return 0"
    );
    check(&scorer, &task, &connect, Outcome::Pass);
    let chmod = format!(
        "    import os\n    try:\n        os.chmod({secret:?}, 0o600)\n    except OSError:\n        return 1\n    return 0"
    );
    check(&scorer, &task, &chmod, Outcome::Pass);
    let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o666);
}
