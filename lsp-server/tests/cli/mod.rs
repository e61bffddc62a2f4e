//! What the command-line tests share: the repository root, its benchmark data, and
//! running the real `redraft` binary with arguments (and standard input, or from the root).
#![allow(dead_code)] // each test binary uses its own part of this

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
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
    Command::new(env!("CARGO_BIN_EXE_redraft"))
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_redraft"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
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
