//! What the eval tests share: the repository, its benchmark data and the Rust crates
//! programs link against (built by scripts/setup-eval on first use, as a fresh clone needs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use redraft_eval::score::{Scorer, ScorerConfig};
use redraft_eval::task::TaskLanguage;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("eval/ sits in the repository")
        .to_path_buf()
}

/// The benchmark data kept in the repository (`benchmarks/`), read in place.
pub fn benchmarks() -> PathBuf {
    let dir = repo().join("benchmarks");
    assert!(
        dir.join("humanevalpack-rust/humanevalpack.jsonl").is_file(),
        "benchmark data not found in {}: it is part of the repository, restore it with `git checkout -- benchmarks`",
        dir.display()
    );
    dir
}

pub fn humanevalpack() -> PathBuf {
    benchmarks().join("humanevalpack-rust/humanevalpack.jsonl")
}

/// deps.json from scripts/setup-eval (run once per test binary; a no-op once built).
pub fn rust_deps() -> PathBuf {
    static DEPS: OnceLock<PathBuf> = OnceLock::new();
    DEPS.get_or_init(|| {
        let output = Command::new(repo().join("scripts/setup-eval"))
            .output()
            .expect("scripts/setup-eval runs");
        assert!(
            output.status.success(),
            "scripts/setup-eval failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
    .clone()
}

pub fn config() -> ScorerConfig {
    ScorerConfig {
        rust_deps: Some(rust_deps()),
        ..ScorerConfig::default()
    }
}

pub fn scorer(languages: &[TaskLanguage]) -> Scorer {
    Scorer::new(&config(), languages).expect("scorer starts")
}

pub fn jobs() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}
