//! Python programs: `prompt + completion + suffix + test + check(entry_point)` under python3, as
//! HumanEval-infilling scores them, then a line printed that only a program whose `check`
//! returned prints: a program that exits early (`exit()`, `raise SystemExit`, `os._exit(0)`)
//! exits 0 without running the test, and fails (OpenAI's human-eval counts SystemExit as a
//! failure too).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{as_env, child_env, timed_out, Outcome, Verdict};
use crate::error::{Error, Result};
use crate::sandbox::{executable_by_others, Exit, Limits, Reach, Sandbox, Status};
use crate::task::Task;

/// A Python interpreter the sandbox can start.
#[derive(Debug, Clone)]
pub struct Python {
    pub path: PathBuf,
    pub version: String,
    /// Its prefixes and module path (a virtual environment, the installation it was made
    /// from), which programs read under Landlock.
    pub reach: Reach,
}

/// The line written after `check(...)` returns: a constant no program prints by chance.
pub(crate) const CHECKED: &str = "redraft-eval: check returned 5c1e9f3a7b2d4086";

/// The line goes straight to file descriptor 1, on a line of its own whatever the program left
/// unfinished there, past a `sys.stdout` or `print` the program replaced; what the program
/// printed is flushed first (stdout is a pipe, so block-buffered), so the line comes last, in
/// the part of the output the sandbox keeps however much was printed.
pub(crate) fn program(task: &Task, completion: &str) -> String {
    format!(
        "{}{}{}\n{}\ncheck({})\ntry:\n    __import__(\"sys\").__stdout__.flush()\nexcept Exception:\n    pass\n__import__(\"os\").write(1, b\"\\n{CHECKED}\\n\")\n",
        task.prompt, completion, task.suffix, task.test, task.entry_point
    )
}

/// A program that imports what HumanEval's programs import and passes: run once when the scorer
/// starts, so an interpreter the sandbox cannot run (a library it may not read) stops the run
/// before any generation rather than failing every program.
pub(crate) fn probe() -> String {
    let task = Task {
        task_id: "redraft/probe".into(),
        prompt: "def f():\n".into(),
        suffix: "\n".into(),
        canonical_solution: String::new(),
        test: "def check(candidate):\n    assert candidate() == 1\n".into(),
        entry_point: "f".into(),
        language: None,
    };
    let imports = "collections, functools, hashlib, heapq, itertools, json, math, re, string";
    program(&task, &format!("    import {imports}\n    return 1"))
}

/// The interpreter a root run falls back on when `nobody` cannot execute the one asked for.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

impl Python {
    /// `requested`, or `python3` on PATH, resolved to the real executable (a pyenv shim needs
    /// environment the sandbox does not pass). As root, programs run as `nobody`: an
    /// interpreter `nobody` cannot execute (one under /root) is swapped for /usr/bin/python3,
    /// and without that it is an error; a completion never runs as root.
    pub fn find(requested: Option<&Path>, sandbox: &Sandbox) -> Result<Python> {
        Python::find_with(requested, sandbox, Path::new(SYSTEM_PYTHON))
    }

    /// [`Python::find`] with `system` in place of /usr/bin/python3.
    fn find_with(requested: Option<&Path>, sandbox: &Sandbox, system: &Path) -> Result<Python> {
        let requested = requested.unwrap_or(Path::new("python3"));
        let path = executable(requested)?;
        if sandbox.root && !executable_by_others(&path) {
            if !executable_by_others(system) {
                return Err(Error::Toolchain {
                    what: format!("python `{}`", path.display()),
                    message: format!(
                        "as root, programs run as nobody, who cannot execute it (and there is no {}): pass --python with an interpreter outside /root",
                        system.display()
                    ),
                });
            }
            return described(&executable(system)?);
        }
        described(&path)
    }

    pub(crate) fn run(
        &self,
        sandbox: &Sandbox,
        dir: &Path,
        program: &str,
        limits: &Limits,
        runs: usize,
    ) -> Result<Verdict> {
        let file = dir.join("program.py");
        std::fs::write(&file, program).map_err(|e| Error::io(&file, e))?;
        let env = child_env(dir);
        let mut env = as_env(&env);
        env.push(("PYTHONHASHSEED", OsStr::new("0")));
        let args = [OsStr::new("-B"), OsStr::new("-s"), OsStr::new("program.py")];
        Verdict::of_runs(runs, || {
            Ok(classify(&sandbox.run(
                &self.path,
                &args,
                dir,
                &env,
                limits,
                &self.reach,
            )?))
        })
    }
}

/// The interpreter `python` starts (a pyenv shim, a name on PATH: with this process's
/// environment, as a user would start it).
fn executable(python: &Path) -> Result<PathBuf> {
    let text = report(
        Command::new(python),
        python,
        "import sys; print(sys.executable)",
    )?;
    match text.lines().next() {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => Err(no_report(python, "")),
    }
}

/// The interpreter at `path` as programs see it: run as they are (`-s`, the environment
/// cleared: a `PYTHONPATH` or `PYTHONHOME` of this shell reaches no program, so it widens
/// nothing they may read), its version and what it reads: the executable, its prefixes,
/// libraries and module path.
fn described(path: &Path) -> Result<Python> {
    let mut command = Command::new(path);
    command
        .arg("-s")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8");
    let text = report(
        command,
        path,
        "import os, sys, sysconfig; print(sys.version.split()[0]); \
         paths = sysconfig.get_paths(); \
         [print(p) for p in (os.path.realpath(sys.executable), sys.prefix, sys.base_prefix, \
         sys.exec_prefix, sys.base_exec_prefix, sysconfig.get_config_var('LIBDIR') or '', \
         *(paths.get(k, '') for k in ('stdlib', 'platstdlib', 'purelib', 'platlib')), \
         *sys.path) if p.startswith('/')]",
    )?;
    let mut lines = text.lines();
    let version = lines
        .next()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| no_report(path, ""))?;
    Ok(Python {
        path: path.to_path_buf(),
        version: version.to_string(),
        reach: Reach::new(lines.map(PathBuf::from)),
    })
}

/// What `command` (the interpreter `python` with its arguments) prints for `code`.
fn report(mut command: Command, python: &Path, code: &str) -> Result<String> {
    let output = command
        .args(["-c", code])
        .output()
        .map_err(|source| Error::Spawn {
            program: python.display().to_string(),
            source,
        })?;
    if !output.status.success() {
        return Err(no_report(python, &String::from_utf8_lossy(&output.stderr)));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn no_report(python: &Path, stderr: &str) -> Error {
    Error::Toolchain {
        what: format!("python `{}`", python.display()),
        message: format!(
            "did not report its executable ({}); pass --python PATH",
            stderr.trim()
        ),
    }
}

/// A syntax error at compile time prints no traceback header: nothing of the program ran.
pub(crate) fn classify(exit: &Exit) -> Verdict {
    let stderr = exit.stderr.trim_end();
    let last = stderr.lines().last().unwrap_or("");
    if exit.status == Status::Exited(0) {
        if exit.stdout.lines().any(|line| line == CHECKED) {
            return Verdict::new(Outcome::Pass, "");
        }
        return Verdict::new(
            Outcome::TestFailure,
            "exited before check() returned (exit(), SystemExit or os._exit): the test did not run to the end",
        );
    }
    if stderr.contains("MemoryError") {
        return Verdict::new(Outcome::Memory, last);
    }
    if timed_out(exit) {
        return Verdict::new(
            Outcome::Timeout,
            format!("killed after {:.1} s", exit.wall.as_secs_f64()),
        );
    }
    let syntax = ["SyntaxError", "IndentationError", "TabError"]
        .iter()
        .any(|kind| last.starts_with(kind));
    if syntax && !stderr.contains("Traceback (most recent call last)") {
        return Verdict::new(Outcome::CompileError, tail_lines(stderr, 4));
    }
    let detail = match exit.status {
        Status::Signaled(signal) => format!("killed by signal {signal}"),
        _ => tail_lines(stderr, 3),
    };
    Verdict::new(Outcome::TestFailure, detail)
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::sandbox::Network;

    /// As root, an interpreter `nobody` cannot execute is never run as root instead: without
    /// the system's, the scorer refuses to start.
    #[test]
    fn as_root_a_python_nobody_cannot_run_is_refused_not_run_as_root() {
        let system = Path::new(SYSTEM_PYTHON);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !system.exists() {
            eprintln!("not root, or no {SYSTEM_PYTHON} to copy: not checked");
            return;
        }
        let private = tempfile::tempdir().unwrap();
        std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let python = private.path().join("python3");
        std::fs::copy(system.canonicalize().unwrap(), &python).unwrap();
        let sandbox = Sandbox {
            network: Network::Shared,
            pid_namespace: false,
            root: true,
            landlock: None,
            seccomp: false,
        };
        let found = Python::find_with(Some(&python), &sandbox, system).unwrap();
        assert_eq!(
            found.path.canonicalize().unwrap(),
            system.canonicalize().unwrap()
        );
        let missing = private.path().join("no-such-python3");
        let refused = Python::find_with(Some(&python), &sandbox, &missing).unwrap_err();
        assert!(refused.to_string().contains("run as nobody"), "{refused}");
    }
}
