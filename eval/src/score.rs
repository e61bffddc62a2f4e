//! Execution scoring: a completion is put back between its task's prefix and suffix, the task's
//! test is appended, and the program is run in the [`crate::sandbox`]. Python runs under
//! python3 (`check(entry_point)` appended, as HumanEval-infilling does); Rust is compiled as a
//! test crate (edition 2021) against prebuilt rand/regex/md5 rlibs and its test binary run.
//!
//! Identical programs are executed once per [`Scorer`] (every task cut from one problem gives
//! the same program for the canonical middle; a model often writes the same wrong line twice).

mod python;
mod rust;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::sandbox::{Exit, Limits, Sandbox};
use crate::task::{Task, TaskLanguage};

pub use python::Python;
pub use rust::{RustDeps, RustToolchain};

/// How a completion fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Pass,
    /// Rust: rustc rejected the program; Python: a syntax error before any code ran.
    CompileError,
    /// The tests ran and failed (or crashed, or ran none).
    TestFailure,
    /// Killed at the wall-clock or CPU limit.
    Timeout,
    /// Ran out of the address-space limit.
    Memory,
    /// The task has no test: scored by exact match and edit similarity only.
    NotExecuted,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Pass,
        Outcome::CompileError,
        Outcome::TestFailure,
        Outcome::Timeout,
        Outcome::Memory,
        Outcome::NotExecuted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::CompileError => "compile-error",
            Outcome::TestFailure => "test-failure",
            Outcome::Timeout => "timeout",
            Outcome::Memory => "memory",
            Outcome::NotExecuted => "not-executed",
        }
    }
}

/// An outcome and the start of the message that explains it (compiler error, failing
/// assertion), with paths relative to the program's directory so reports diff cleanly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Verdict {
    /// The first failing run of several, named as such.
    fn of_runs(runs: usize, mut each: impl FnMut() -> Result<Verdict>) -> Result<Verdict> {
        for run in 1..=runs {
            let verdict = each()?;
            if verdict.outcome != Outcome::Pass {
                if runs == 1 {
                    return Ok(verdict);
                }
                let detail = format!("run {run} of {runs}: {}", verdict.detail);
                return Ok(Verdict::new(verdict.outcome, detail));
            }
        }
        Ok(Verdict::new(Outcome::Pass, ""))
    }

    fn new(outcome: Outcome, detail: impl Into<String>) -> Verdict {
        Verdict {
            outcome,
            detail: clip(&detail.into(), 600),
        }
    }
}

/// What the scorer needs to know; everything has a default.
#[derive(Debug, Clone, Default)]
pub struct ScorerConfig {
    /// Where per-program directories are made (default: the system temp dir).
    pub work_dir: Option<PathBuf>,
    /// The Python interpreter (default: `python3` on PATH).
    pub python: Option<PathBuf>,
    /// `deps.json` written by scripts/setup-eval, or its directory (default:
    /// $REDRAFT_EVAL_DEPS, else target/eval-deps of the source tree this crate was built
    /// from, not of the current directory).
    pub rust_deps: Option<PathBuf>,
    /// Wall-clock limit for running a program (default: 3 s Python as HumanEval-infilling
    /// does, 10 s Rust).
    pub timeout: Option<Duration>,
    /// Address-space limit for running a program, MiB (default 2048).
    pub memory_mb: Option<u64>,
    /// Paths every program and compiler may also read and execute under Landlock, beyond
    /// what the scorer finds its toolchains need (an interpreter installed with the home
    /// directory as its prefix, a library directory elsewhere); each must exist.
    pub sandbox_read: Vec<PathBuf>,
}

/// The address-space limit without `--memory-mb`, MiB.
pub const DEFAULT_MEMORY_MB: u64 = 2048;

/// The run limits `config` sets other than the defaults, as flags (`--timeout-s 0.5,
/// --memory-mb 64`); `None` when it sets none.
fn given_limits(config: &ScorerConfig) -> Option<String> {
    let mut given = Vec::new();
    if let Some(timeout) = config.timeout {
        given.push(format!("--timeout-s {}", timeout.as_secs_f64()));
    }
    if let Some(mb) = config.memory_mb.filter(|mb| *mb != DEFAULT_MEMORY_MB) {
        given.push(format!("--memory-mb {mb}"));
    }
    (!given.is_empty()).then(|| given.join(", "))
}

type Slot = Arc<OnceLock<std::result::Result<Verdict, String>>>;

/// Scores completions by execution; shareable across worker threads.
pub struct Scorer {
    sandbox: Sandbox,
    work_dir: PathBuf,
    python: Option<Python>,
    rust: Option<RustToolchain>,
    run_limits: HashMap<TaskLanguage, Limits>,
    /// `ScorerConfig::sandbox_read`, resolved.
    granted: Vec<PathBuf>,
    done: Mutex<HashMap<(TaskLanguage, String), Slot>>,
}

impl Scorer {
    /// A scorer able to run `languages` (each toolchain is found and checked now, so a missing
    /// one is reported before any generation starts).
    pub fn new(config: &ScorerConfig, languages: &[TaskLanguage]) -> Result<Scorer> {
        let sandbox = Sandbox::detect();
        let granted = config
            .sandbox_read
            .iter()
            .map(|path| {
                path.canonicalize()
                    .map_err(|e| Error::Invalid(format!("--sandbox-read {}: {e}", path.display())))
            })
            .collect::<Result<Vec<_>>>()?;
        let work_dir = config.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&work_dir).map_err(|e| Error::io(&work_dir, e))?;
        let memory = config.memory_mb.unwrap_or(DEFAULT_MEMORY_MB) << 20;
        let mut run_limits = HashMap::new();
        let mut python = None;
        let mut rust = None;
        for &language in languages {
            let wall = config.timeout.unwrap_or(match language {
                TaskLanguage::Python => Duration::from_secs(3),
                TaskLanguage::Rust => Duration::from_secs(10),
            });
            let limits = Limits {
                wall,
                cpu_seconds: wall.as_secs_f64().ceil() as u64 + 1,
                address_space: memory,
                file_size: 64 << 20,
                processes: 256,
                drop_privileges: true,
            };
            match language {
                TaskLanguage::Python if python.is_none() => {
                    let mut found = Python::find(config.python.as_deref(), &sandbox)?;
                    found.reach.granted.clone_from(&granted);
                    python = Some(found);
                }
                TaskLanguage::Rust if rust.is_none() => {
                    let mut found = RustToolchain::find(config.rust_deps.as_deref())?;
                    found.reach.granted.clone_from(&granted);
                    rust = Some(found);
                }
                _ => {}
            }
            if sandbox.drops_to_nobody(&limits) && !crate::sandbox::executable_by_others(&work_dir)
            {
                return Err(Error::Invalid(format!(
                    "programs run as nobody, who cannot reach the work dir {}: pick one under /tmp (--work-dir)",
                    work_dir.display()
                )));
            }
            run_limits.insert(language, limits);
        }
        let scorer = Scorer {
            sandbox,
            work_dir,
            python,
            rust,
            run_limits,
            granted,
            done: Mutex::new(HashMap::new()),
        };
        // Once each, at start (about a second for Rust): a toolchain that cannot run a
        // known-good program here is reported now, not as the model's failures. Limits the
        // caller set may be what stopped it: they are named first.
        let given = given_limits(config);
        let advice = |toolchain: &str| match &given {
            Some(given) => format!(
                "the limits given ({given}) may be too tight for it: try the defaults; \
                 else {toolchain}"
            ),
            None => toolchain.to_string(),
        };
        if let Some(python) = &scorer.python {
            scorer.probe(
                TaskLanguage::Python,
                &python::probe(),
                format!("python {}", python.path.display()),
                &scorer.run_limits[&TaskLanguage::Python],
                &advice(
                    "pass --python with an interpreter installed outside your home directory, or \
                     --sandbox-read with the paths it reads",
                ),
            )?;
        }
        if let Some(rust) = &scorer.rust {
            scorer.probe(
                TaskLanguage::Rust,
                rust::PROBE,
                format!("rustc {}", rust.rustc.display()),
                &rust::compile_limits(),
                &advice("the scoring toolchain is broken, or kept from files it needs; rerun scripts/setup-eval"),
            )?;
        }
        Ok(scorer)
    }

    /// Runs `program`, which passes wherever `language`'s toolchain `what` works in the
    /// sandbox; an error naming the sandbox (as `limits` shows it) and saying `advice` if not.
    fn probe(
        &self,
        language: TaskLanguage,
        program: &str,
        what: String,
        limits: &Limits,
        advice: &str,
    ) -> Result<()> {
        let verdict = self.execute(language, program, 1)?;
        if verdict.outcome == Outcome::Pass {
            return Ok(());
        }
        Err(Error::Toolchain {
            what,
            message: format!(
                "a known-good program did not pass ({}: {}) in the sandbox ({}): {advice}",
                verdict.outcome.name(),
                verdict.detail,
                self.sandbox.describe(limits)
            ),
        })
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// One line per language on how its programs run, for reports.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(python) = &self.python {
            let limits = &self.run_limits[&TaskLanguage::Python];
            lines.push(format!(
                "python: {} ({}); {}",
                python.path.display(),
                python.version,
                self.sandbox.describe(limits)
            ));
        }
        if let Some(rust) = &self.rust {
            let limits = &self.run_limits[&TaskLanguage::Rust];
            lines.push(format!(
                "rust: {} --edition 2021 --test, deps {}; tests {}; compile {}",
                rust.rustc.display(),
                rust.deps.manifest.display(),
                self.sandbox.describe(limits),
                self.sandbox.describe(&rust::compile_limits()),
            ));
        }
        if !self.granted.is_empty() {
            let shown: Vec<String> = self
                .granted
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            lines.push(format!(
                "also readable by every program (--sandbox-read): {}",
                shown.join(", ")
            ));
        }
        lines
    }

    /// The program `completion` makes of `task`.
    pub fn program(task: &Task, language: TaskLanguage, completion: &str) -> String {
        match language {
            TaskLanguage::Python => python::program(task, completion),
            TaskLanguage::Rust => rust::program(task, completion),
        }
    }

    /// Runs `completion` in `task` and classifies the result. Errors are the scorer's own
    /// (a toolchain that cannot start, a full disk), never the program's.
    pub fn score(&self, task: &Task, language: TaskLanguage, completion: &str) -> Result<Verdict> {
        if !task.is_executable() {
            return Ok(Verdict::new(Outcome::NotExecuted, ""));
        }
        let program = Scorer::program(task, language, completion);
        let slot = {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            done.entry((language, program.clone())).or_default().clone()
        };
        // A second worker asking for the same program waits for the first one's verdict.
        slot.get_or_init(|| {
            self.execute(language, &program, 1)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(Error::Invalid)
    }

    /// Runs `completion` in `task` `runs` times (compiled once), uncached: a pass means every
    /// run passed. For checking that a solution is a reliable reference: a test that draws
    /// random inputs can make a solution pass only sometimes.
    pub fn score_runs(
        &self,
        task: &Task,
        language: TaskLanguage,
        completion: &str,
        runs: usize,
    ) -> Result<Verdict> {
        if !task.is_executable() {
            return Ok(Verdict::new(Outcome::NotExecuted, ""));
        }
        let program = Scorer::program(task, language, completion);
        self.execute(language, &program, runs.max(1))
    }

    fn execute(&self, language: TaskLanguage, program: &str, runs: usize) -> Result<Verdict> {
        let limits = self.run_limits.get(&language).ok_or_else(|| {
            Error::Invalid(format!("the scorer was not set up for {language} tasks"))
        })?;
        let dir = Scratch::new(&self.work_dir)?;
        if self.sandbox.drops_to_nobody(limits) {
            // Programs may write scratch files next to themselves, as `nobody`.
            std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534))
                .map_err(|e| Error::io(dir.path(), e))?;
        }
        match language {
            TaskLanguage::Python => {
                let python = self.python.as_ref().ok_or_else(|| {
                    Error::Invalid("the scorer was not set up for python tasks".into())
                })?;
                python.run(&self.sandbox, dir.path(), program, limits, runs)
            }
            TaskLanguage::Rust => {
                let rust = self.rust.as_ref().ok_or_else(|| {
                    Error::Invalid("the scorer was not set up for rust tasks".into())
                })?;
                rust.run(&self.sandbox, dir.path(), program, limits, runs)
            }
        }
    }
}

/// A program's scratch directory, removed when dropped, or by [`crate::interrupt`] when the
/// run is interrupted first.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new(work_dir: &Path) -> Result<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix("redraft-eval-")
            .tempdir_in(work_dir)
            .map_err(|e| Error::io(work_dir, e))?;
        crate::interrupt::dir_made(dir.path());
        Ok(Scratch(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        crate::interrupt::dir_removed(self.0.path());
    }
}

/// Scores `items` on `jobs` threads, with a progress line; verdicts in input order.
pub fn score_all(
    scorer: &Scorer,
    items: &[(&Task, &str)],
    jobs: usize,
    label: &str,
) -> Result<Vec<crate::score::Verdict>> {
    let progress = Progress::new(label, items.len());
    let results = crate::parallel::map(items, jobs, |(task, completion)| {
        let verdict = task
            .language(None)
            .and_then(|language| scorer.score(task, language, completion));
        progress.tick(verdict.as_ref().is_ok_and(|v| v.outcome == Outcome::Pass));
        verdict
    });
    progress.finish();
    results.into_iter().collect()
}

/// At most `max` bytes of `text`, cut at a char boundary, marked when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The environment every child gets: nothing from ours but a PATH for the linker.
fn child_env(dir: &Path) -> Vec<(&'static str, std::ffi::OsString)> {
    vec![
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME", dir.as_os_str().to_owned()),
        ("TMPDIR", dir.as_os_str().to_owned()),
        ("LANG", "C.UTF-8".into()),
    ]
}

fn as_env<'a>(
    env: &'a [(&'static str, std::ffi::OsString)],
) -> Vec<(&'static str, &'a std::ffi::OsStr)> {
    env.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
}

/// Whether the child was stopped by the wall clock or the CPU limit (a SIGKILL before the CPU
/// limit is the program's own doing, `kill -9 $$`, and a failure).
fn timed_out(exit: &Exit) -> bool {
    use crate::sandbox::Status;
    match exit.status {
        Status::TimedOut | Status::Signaled(libc::SIGXCPU) => true,
        Status::Signaled(libc::SIGKILL) => exit.cpu_limit_reached,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A known-good program that fails under limits the caller set names them as a cause
    /// (the hint blamed only the interpreter: "pass --python with an interpreter installed
    /// outside your home directory" for `--timeout-s 0`); the defaults are no cause.
    #[test]
    fn limits_set_apart_from_the_defaults_are_named() {
        assert_eq!(given_limits(&ScorerConfig::default()), None);
        let default_memory = ScorerConfig {
            memory_mb: Some(DEFAULT_MEMORY_MB),
            ..ScorerConfig::default()
        };
        assert_eq!(given_limits(&default_memory), None);
        let tight = ScorerConfig {
            timeout: Some(Duration::from_millis(500)),
            memory_mb: Some(64),
            ..ScorerConfig::default()
        };
        assert_eq!(
            given_limits(&tight).as_deref(),
            Some("--timeout-s 0.5, --memory-mb 64")
        );
    }
}
