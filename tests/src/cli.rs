//! Running the real binaries: `redraft` (the tests and benches of the `redraft` package) and
//! `redraft-lab` (those of `redraft-lab`, which has every `redraft` command too), with
//! arguments and standard input or from the repository root; the repository and its benchmark
//! data; the llama.cpp tools scripts/setup-llama-server provides.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where a binary of the workspace is: `REDRAFT_TEST_BINARIES` (a directory, for test and bench
/// executables copied elsewhere, as scripts/gpu-check runs them) or the directory cargo built
/// the running test into (`target/PROFILE/`, above `deps/`). Cargo builds a package's binaries
/// before its tests and benches, so a test of `redraft` finds a fresh `redraft`, one of
/// `redraft-lab` a fresh `redraft-lab`.
pub fn binary(name: &str) -> PathBuf {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    if let Some(dir) = std::env::var_os("REDRAFT_TEST_BINARIES") {
        return PathBuf::from(dir).join(file);
    }
    let exe = std::env::current_exe().expect("the test knows its executable");
    let deps = exe.parent().expect("a test executable sits in a directory");
    let profile = if deps.ends_with("deps") {
        deps.parent().expect("deps/ has a parent")
    } else {
        deps
    };
    let path = profile.join(file);
    assert!(
        path.is_file(),
        "{} not built: run the tests through cargo (`cargo test -p redraft` or `-p redraft-lab`)",
        path.display()
    );
    path
}

/// `redraft`.
pub fn redraft_binary() -> PathBuf {
    binary("redraft")
}

/// `redraft-lab`.
pub fn lab_binary() -> PathBuf {
    binary("redraft-lab")
}

/// The benchmark data kept in the repository (`benchmarks/`).
pub fn benchmarks() -> PathBuf {
    let dir = repo().join("benchmarks");
    assert!(
        dir.is_dir(),
        "benchmark data not found in {}: it is part of the repository, restore it with `git checkout -- benchmarks`",
        dir.display()
    );
    dir
}

/// Runs `redraft args` from the repository root, with no standard input, to the end.
pub fn redraft_in_repo(args: &[&str]) -> Output {
    in_repo(&redraft_binary(), args)
}

/// Runs `redraft-lab args` from the repository root, with no standard input, to the end.
pub fn lab_in_repo(args: &[&str]) -> Output {
    in_repo(&lab_binary(), args)
}

fn in_repo(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// What a successful run printed.
pub fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs `redraft args` with `stdin` as its standard input, to the end.
pub fn redraft(args: &[&str], stdin: &str) -> Output {
    with_stdin(&redraft_binary(), args, stdin, &[])
}

/// [`redraft`] with environment variables set (`Some`) or removed (`None`) for the run.
pub fn redraft_in(env: &[(&str, Option<String>)], args: &[&str], stdin: &str) -> Output {
    with_stdin(&redraft_binary(), args, stdin, env)
}

/// Runs `redraft-lab args` with `stdin` as its standard input, to the end.
pub fn lab(args: &[&str], stdin: &str) -> Output {
    with_stdin(&lab_binary(), args, stdin, &[])
}

/// [`lab`] with environment variables set (`Some`) or removed (`None`).
pub fn lab_in(env: &[(&str, Option<String>)], args: &[&str], stdin: &str) -> Output {
    with_stdin(&lab_binary(), args, stdin, env)
}

fn with_stdin(
    program: &Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, Option<String>)],
) -> Output {
    run_with(program, args, stdin, env, Stdio::piped())
}

/// Where a run's standard output goes, for tests of a command whose output cannot be written.
#[derive(Clone, Copy, Debug)]
pub enum Stdout {
    /// `/dev/full`: every write fails, as on a full disk.
    Full,
    /// A pipe whose reader has gone before anything is written (`| head -c 0`).
    Closed,
}

/// `program args` with `stdin` and environment variables set (`Some`) or removed (`None`), as
/// [`redraft_in`], its standard output `stdout`.
pub fn writing_to(
    program: &Path,
    env: &[(&str, Option<String>)],
    args: &[&str],
    stdin: &str,
    stdout: Stdout,
) -> Output {
    let stdout = match stdout {
        Stdout::Full => Stdio::from(std::fs::File::create("/dev/full").expect("/dev/full (Linux)")),
        Stdout::Closed => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            Stdio::from(writer)
        }
    };
    run_with(program, args, stdin, env, stdout)
}

fn run_with(
    program: &Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, Option<String>)],
    stdout: Stdio,
) -> Output {
    let mut command = Command::new(program);
    for (name, value) in env {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A run that fails on its arguments exits before it reads stdin: the pipe then breaks,
    // which is not the test's failure.
    let written = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    if let Err(err) = written {
        assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
    }
    child.wait_with_output().unwrap()
}

/// The one JSON object a successful run printed.
pub fn json_ok(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "redraft failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object on stdout")
}

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A path scripts/setup-llama-server provides (llama.cpp's binaries, the tiny GGUF models):
/// `$name` if set, else the set-up's `env.sh` in its cache. `None` only when neither exists and
/// REDRAFT_SKIP_LLAMA_SERVER=1 says the set-up was deliberately not run.
pub fn llama(name: &str) -> Option<PathBuf> {
    let from_env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    if let Some(path) = from_env(name) {
        return Some(path);
    }
    let cache = from_env("REDRAFT_LLAMA_CACHE").unwrap_or_else(|| {
        from_env("XDG_CACHE_HOME")
            .unwrap_or_else(|| from_env("HOME").unwrap_or_default().join(".cache"))
            .join("redraft-llama")
    });
    let env = cache.join("env.sh");
    let Ok(text) = std::fs::read_to_string(&env) else {
        if std::env::var("REDRAFT_SKIP_LLAMA_SERVER").as_deref() == Ok("1") {
            eprintln!(
                "\n!!! SKIPPED: a llama.cpp test (REDRAFT_SKIP_LLAMA_SERVER=1 and no {}) !!!\n",
                env.display()
            );
            return None;
        }
        panic!(
            "no {}: run scripts/setup-llama-server (scripts/test does), or set REDRAFT_SKIP_LLAMA_SERVER=1 to skip this test",
            env.display()
        );
    };
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("export {name}=")))
        .map(|v| PathBuf::from(v.trim_matches('"')))
        .unwrap_or_else(|| {
            panic!(
                "{} sets no {name}: rerun scripts/setup-llama-server",
                env.display()
            )
        });
    Some(value)
}

/// The small test model (`fixtures/small-model`) in a directory of its own, its `redraft.json`
/// tuning the effort presets to `efforts` (redraft.json's `efforts`, docs/models.md).
pub fn tuned_small_model(efforts: serde_json::Value) -> tempfile::TempDir {
    small_model_with(serde_json::json!({ "efforts": efforts }))
}

/// A model whose files read (configuration, settings, tokenizer: the small test model's) but
/// which does not build: its weights are missing. A load of it gets past every check made
/// before the loaded model is dropped, and fails after.
pub fn unbuildable_model() -> tempfile::TempDir {
    let fixture = repo().join("fixtures/small-model");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for file in ["config.json", "redraft.json", "tokenizer.json"] {
        std::fs::copy(fixture.join(file), dir.path().join(file)).expect("copying the fixture");
    }
    dir
}

/// The small test model (`fixtures/small-model`) in a directory of its own, the keys of
/// `settings` set in its `redraft.json` (docs/models.md).
pub fn small_model_with(settings: serde_json::Value) -> tempfile::TempDir {
    let fixture = repo().join("fixtures/small-model");
    let dir = tempfile::tempdir().expect("a temporary directory");
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(fixture.join(file), dir.path().join(file)).expect("copying the fixture");
    }
    let text =
        std::fs::read_to_string(fixture.join("redraft.json")).expect("the fixture's redraft.json");
    let mut json: serde_json::Value = serde_json::from_str(&text).expect("redraft.json is JSON");
    for (key, value) in settings.as_object().expect("settings are a JSON object") {
        json[key] = value.clone();
    }
    std::fs::write(dir.path().join("redraft.json"), json.to_string())
        .expect("writing redraft.json");
    dir
}
