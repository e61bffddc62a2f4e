//! Rust programs: `prompt + completion + suffix + test` compiled with
//! `rustc --edition 2021 --test` against the rand 0.4 / regex 1 / md5 0.7 rlibs that
//! scripts/setup-eval built once (one rustc call per program instead of one cargo project per
//! task), then the test binary run.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use super::{as_env, child_env, clip, timed_out, Outcome, Verdict};
use crate::error::{Error, Result};
use crate::sandbox::{Exit, Limits, Reach, Sandbox, Status};
use crate::task::Task;

/// The crates every HumanEvalPack-Rust prompt uses.
const CRATES: [&str; 3] = ["rand", "regex", "md5"];

pub(crate) fn program(task: &Task, completion: &str) -> String {
    format!(
        "{}{}{}\n{}\n",
        task.prompt, completion, task.suffix, task.test
    )
}

/// rustc itself runs no code of the program (no build scripts, no proc macros here), so it
/// runs as the invoking user, which a toolchain under a 0700 /root needs; it is still time-,
/// memory- and network-limited.
pub(crate) fn compile_limits() -> Limits {
    Limits {
        wall: Duration::from_secs(60),
        cpu_seconds: 60,
        address_space: 4 << 30,
        file_size: 512 << 20,
        processes: 256,
        drop_privileges: false,
    }
}

/// `deps.json` as scripts/setup-eval writes it.
#[derive(Debug, Clone, Deserialize)]
pub struct RustDeps {
    /// `rustc -V` of the compiler that built the rlibs; rlibs only link with that compiler.
    pub rustc: String,
    pub dependency_dir: PathBuf,
    pub externs: BTreeMap<String, PathBuf>,
    #[serde(skip)]
    pub manifest: PathBuf,
}

impl RustDeps {
    /// `requested` (deps.json or its directory), else $REDRAFT_EVAL_DEPS, else this
    /// repository's target/eval-deps.
    pub fn find(requested: Option<&Path>) -> Result<RustDeps> {
        let place = match requested {
            Some(path) => path.to_path_buf(),
            None => match std::env::var_os("REDRAFT_EVAL_DEPS") {
                Some(dir) => PathBuf::from(dir),
                None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/eval-deps"),
            },
        };
        let manifest = if place.is_dir() {
            place.join("deps.json")
        } else {
            place
        };
        if !manifest.is_file() {
            return Err(Error::RustDepsMissing { looked: manifest });
        }
        let text = std::fs::read_to_string(&manifest).map_err(|e| Error::io(&manifest, e))?;
        let mut deps: RustDeps = serde_json::from_str(&text).map_err(|e| Error::Input {
            path: manifest.clone(),
            message: format!("{e}; rerun scripts/setup-eval"),
        })?;
        for name in CRATES {
            match deps.externs.get(name) {
                Some(rlib) if rlib.is_file() => {}
                _ => {
                    return Err(Error::Input {
                        path: manifest.clone(),
                        message: format!("no built rlib for `{name}`; rerun scripts/setup-eval"),
                    })
                }
            }
        }
        deps.manifest = manifest.canonicalize().unwrap_or(manifest);
        Ok(deps)
    }
}

/// The compiler and the crates programs link against.
#[derive(Debug, Clone)]
pub struct RustToolchain {
    /// The real rustc in the sysroot (a rustup proxy would need the environment the sandbox
    /// does not pass).
    pub rustc: PathBuf,
    pub deps: RustDeps,
    /// What rustc reads under Landlock: its sysroot (the standard library, the bundled
    /// linker) and the prebuilt crates.
    pub reach: Reach,
}

impl RustToolchain {
    pub fn find(deps: Option<&Path>) -> Result<RustToolchain> {
        let deps = RustDeps::find(deps)?;
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let sysroot = output_of(Command::new(&rustc).args(["--print", "sysroot"]))?;
        let sysroot = PathBuf::from(sysroot.trim());
        let rustc = sysroot.join("bin/rustc");
        let version = output_of(Command::new(&rustc).arg("-V"))?;
        if version.trim() != deps.rustc.trim() {
            return Err(Error::Toolchain {
                what: format!("{}", deps.manifest.display()),
                message: format!(
                    "built by `{}` but rustc is now `{}`: rerun scripts/setup-eval",
                    deps.rustc.trim(),
                    version.trim()
                ),
            });
        }
        let mut read = vec![sysroot, deps.dependency_dir.clone()];
        read.extend(deps.externs.values().cloned());
        Ok(RustToolchain {
            rustc,
            deps,
            reach: Reach::new(read),
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
        let compiled = self.compile(sandbox, dir, program)?;
        let verdict = match classify_compile(&compiled) {
            Ok(verdict) => verdict,
            // What looks like the toolchain's failure may be the program's own doing (a
            // `#[link]` to a library that is not there, a symbol defined twice): the probe,
            // which links every crate, decides.
            Err(message) => {
                let probe = dir.join("probe");
                std::fs::create_dir_all(&probe).map_err(|e| Error::io(&probe, e))?;
                match classify_compile(&self.compile(sandbox, &probe, PROBE)?) {
                    Ok(None) => Some(compile_error(&compiled)),
                    _ => return Err(self.broken(message)),
                }
            }
        };
        if let Some(verdict) = verdict {
            return Ok(verdict);
        }
        let mut env = child_env(dir);
        env.push(("RUST_BACKTRACE", "0".into()));
        let env = as_env(&env);
        let args = [OsStr::new("--test-threads=1")];
        let binary = dir.join("program");
        Verdict::of_runs(runs, || {
            Ok(classify_run(&sandbox.run(
                &binary,
                &args,
                dir,
                &env,
                limits,
                &Reach::default(),
            )?))
        })
    }

    /// `program` compiled as a test binary in `dir` (`dir/program`), against the prebuilt crates.
    fn compile(&self, sandbox: &Sandbox, dir: &Path, program: &str) -> Result<Exit> {
        let file = dir.join("program.rs");
        std::fs::write(&file, program).map_err(|e| Error::io(&file, e))?;
        let env = child_env(dir);
        let env = as_env(&env);
        let mut args: Vec<OsString> = [
            "--edition",
            "2021",
            "--test",
            "--crate-name",
            "program",
            "-A",
            "warnings",
            "-C",
            "debuginfo=0",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let mut dependency = OsString::from("dependency=");
        dependency.push(&self.deps.dependency_dir);
        args.extend(["-L".into(), dependency]);
        for (name, rlib) in &self.deps.externs {
            let mut spec = OsString::from(format!("{name}="));
            spec.push(rlib);
            args.extend(["--extern".into(), spec]);
        }
        args.extend(["-o", "program", "program.rs"].map(OsString::from));
        let args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
        sandbox.run(
            &self.rustc,
            &args,
            dir,
            &env,
            &compile_limits(),
            &self.reach,
        )
    }

    /// The error of a compiler or a set of crates that cannot build programs: the scorer's,
    /// never the completion's.
    fn broken(&self, message: String) -> Error {
        Error::Toolchain {
            what: format!("rustc {}", self.rustc.display()),
            message: format!(
                "{message}: the scoring toolchain is broken, not the completion; rerun scripts/setup-eval (deps {})",
                self.deps.manifest.display()
            ),
        }
    }
}

/// A program that links every crate and runs one test: compiled and run once when the scorer
/// starts, so a broken toolchain stops the run before any generation rather than showing as
/// the model's compile errors.
pub(crate) const PROBE: &str = "extern crate md5;
extern crate rand;
extern crate regex;

#[test]
fn the_crates_link() {
    let _ = (md5::compute(b\"\"), regex::Regex::new(\"a\").is_ok());
    let _: u8 = rand::random();
}
";

fn output_of(command: &mut Command) -> Result<String> {
    let program = format!("{:?}", command.get_program());
    let output = command.output().map_err(|source| Error::Spawn {
        program: program.clone(),
        source,
    })?;
    if !output.status.success() {
        return Err(Error::Toolchain {
            what: program,
            message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn allocation_failed(exit: &Exit) -> bool {
    exit.stderr.contains("memory allocation of") && exit.stderr.contains("failed")
}

/// rustc errors that say the prebuilt crates are broken, whatever the program (an rlib corrupt,
/// ambiguous, or built by another compiler or for another target), as rustc starts their line.
/// Besides these: E0463 for a crate the scorer provides, and a failing linker.
const ENVIRONMENT_ERRORS: [&str; 6] = [
    "error[E0460]", // found possibly newer version of crate
    "error[E0461]", // couldn't find crate with expected target triple
    "error[E0462]", // found staticlib instead of rlib or dylib
    "error[E0464]", // multiple candidates for a dependency
    "error[E0514]", // found crate compiled by an incompatible version of rustc
    "error[E0786]", // found invalid metadata files
];

/// Crates a program may need whose absence (E0463, can't find crate) is the toolchain's: the
/// prebuilt ones and the sysroot's. A program's own `extern crate serde;` is its compile error.
const PROVIDED_CRATES: [&str; 8] = [
    "rand",
    "regex",
    "md5",
    "std",
    "core",
    "alloc",
    "test",
    "proc_macro",
];

/// The error that says the environment, not the program, kept rustc from building it.
fn environment_error(stderr: &str) -> Option<&str> {
    stderr.lines().find(|line| {
        if let Some(krate) = line
            .strip_prefix("error[E0463]: can't find crate for `")
            .and_then(|rest| rest.split('`').next())
        {
            return PROVIDED_CRATES.contains(&krate);
        }
        if line.starts_with("error: linking with") {
            // A symbol the program declared in its own `extern` block and nothing defines is
            // the program's mistake.
            return !(stderr.contains("undefined reference to")
                || stderr.contains("undefined symbol"));
        }
        ENVIRONMENT_ERRORS.iter().any(|code| line.starts_with(code))
    })
}

/// `Ok(None)`: it compiled. `Err`: rustc could not build any program here (a corrupt or
/// mismatched rlib, a missing standard library, a failing linker), with the error that says
/// so: the scorer's failure, not an outcome.
pub(crate) fn classify_compile(exit: &Exit) -> std::result::Result<Option<Verdict>, String> {
    if exit.status == Status::Exited(0) {
        return Ok(None);
    }
    if !timed_out(exit) && !allocation_failed(exit) {
        if let Some(line) = environment_error(&exit.stderr) {
            return Err(line.trim().to_string());
        }
    }
    Ok(Some(if allocation_failed(exit) {
        Verdict::new(Outcome::Memory, "rustc ran out of memory")
    } else if timed_out(exit) {
        Verdict::new(
            Outcome::Timeout,
            format!("rustc killed after {:.1} s", exit.wall.as_secs_f64()),
        )
    } else {
        compile_error(exit)
    }))
}

/// The program did not compile: the first error, which explains the rest.
fn compile_error(exit: &Exit) -> Verdict {
    let from = exit.stderr.find("error").unwrap_or(0);
    Verdict::new(Outcome::CompileError, clip(&exit.stderr[from..], 500))
}

/// A pass is a clean exit whose summary counts at least one passed test: a completion that
/// ends the process early, or hides the tests, must not pass.
pub(crate) fn classify_run(exit: &Exit) -> Verdict {
    if allocation_failed(exit) {
        return Verdict::new(Outcome::Memory, last_line(&exit.stderr));
    }
    if timed_out(exit) {
        return Verdict::new(
            Outcome::Timeout,
            format!("killed after {:.1} s", exit.wall.as_secs_f64()),
        );
    }
    let passed = exit
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test result: ok. "))
        .filter_map(|rest| rest.split(' ').next()?.parse::<usize>().ok())
        .next();
    match (exit.status, passed) {
        (Status::Exited(0), Some(n)) if n > 0 => Verdict::new(Outcome::Pass, ""),
        (Status::Exited(0), _) => Verdict::new(Outcome::TestFailure, "no test ran"),
        (Status::Signaled(signal), _) => Verdict::new(
            Outcome::TestFailure,
            format!("killed by signal {signal}: {}", last_line(&exit.stderr)),
        ),
        _ => {
            // The harness prints each failure's panic message under `---- name stdout ----`.
            let failure = exit
                .stdout
                .find("---- ")
                .map(|at| &exit.stdout[at..])
                .unwrap_or(&exit.stdout);
            Verdict::new(Outcome::TestFailure, clip(failure, 400))
        }
    }
}

fn last_line(text: &str) -> &str {
    text.trim_end().lines().last().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rustc_failed(stderr: &str) -> Exit {
        Exit {
            status: Status::Exited(1),
            stdout: String::new(),
            stderr: stderr.to_string(),
            wall: Duration::from_millis(100),
            cpu_limit_reached: false,
        }
    }

    fn check(stderr: &str, environment: bool) {
        let classified = classify_compile(&rustc_failed(stderr));
        match classified {
            Err(line) => assert!(environment, "{stderr}: the environment's? {line}"),
            Ok(verdict) => {
                assert!(!environment, "{stderr}: {verdict:?}");
                assert_eq!(verdict.unwrap().outcome, Outcome::CompileError);
            }
        }
    }

    /// What the toolchain cannot do is its own failure; what the program asked for is a
    /// compile error.
    #[test]
    fn the_environments_errors_are_told_from_the_programs() {
        check(
            "error[E0786]: found invalid metadata files for crate `rand`\n  |\n  = note: invalid metadata version found",
            true,
        );
        check("error[E0463]: can't find crate for `regex`\n", true);
        check("error[E0463]: can't find crate for `std`\n", true);
        check(
            "error[E0460]: found possibly newer version of crate `libc` which `rand` depends on\n",
            true,
        );
        check(
            "error[E0514]: found crate `md5` compiled by an incompatible version of rustc\n",
            true,
        );
        check(
            "error: linking with `cc` failed: exit status: 1\n  = note: collect2: fatal error: cannot find 'ld'\n",
            true,
        );
        // The program's own mistakes.
        check("error[E0463]: can't find crate for `serde`\n", false);
        check("error[E0308]: mismatched types\n", false);
        check(
            "error: linking with `cc` failed: exit status: 1\n  = note: program.o: undefined reference to `missing'\n",
            false,
        );
    }
}
