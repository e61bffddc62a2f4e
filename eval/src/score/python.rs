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
    /// Whether programs run as `nobody` (when redraft runs as root and `nobody` can execute
    /// the interpreter).
    pub runs_as_nobody: bool,
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

impl Python {
    /// `requested`, or `python3` on PATH, resolved to the real executable (a pyenv shim needs
    /// environment the sandbox does not pass). As root, an interpreter `nobody` cannot execute
    /// (one under /root) is swapped for /usr/bin/python3 when that exists, so programs still
    /// run as `nobody`.
    pub fn find(requested: Option<&Path>, sandbox: &Sandbox) -> Result<Python> {
        let requested = requested.unwrap_or(Path::new("python3"));
        let found = resolve(requested)?;
        if sandbox.root && !executable_by_others(&found.path) {
            let system = Path::new("/usr/bin/python3");
            if executable_by_others(system) {
                return Ok(Python {
                    runs_as_nobody: true,
                    ..resolve(system)?
                });
            }
            return Ok(Python {
                runs_as_nobody: false,
                ..found
            });
        }
        Ok(Python {
            runs_as_nobody: sandbox.root,
            ..found
        })
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

/// The interpreter as it reports itself, run as programs are (`-s`: no user site-packages);
/// `runs_as_nobody` false.
fn resolve(python: &Path) -> Result<Python> {
    let output = Command::new(python)
        .args([
            "-s",
            "-c",
            "import sys; print(sys.executable); print(sys.version.split()[0]); \
             [print(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, \
             sys.base_exec_prefix, *sys.path) if p.startswith('/')]",
        ])
        .output()
        .map_err(|source| Error::Spawn {
            program: python.display().to_string(),
            source,
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines = text.lines();
    match (output.status.success(), lines.next(), lines.next()) {
        (true, Some(path), Some(version)) if !path.is_empty() => Ok(Python {
            path: PathBuf::from(path),
            version: version.to_string(),
            runs_as_nobody: false,
            reach: Reach {
                read: lines.map(PathBuf::from).collect(),
            },
        }),
        _ => Err(Error::Toolchain {
            what: format!("python `{}`", python.display()),
            message: format!(
                "did not report its executable ({}); pass --python PATH",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        }),
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
