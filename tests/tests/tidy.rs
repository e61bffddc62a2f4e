//! The repository is self-contained: no tracked file refers to a folder beside it or to notes
//! kept outside it, so a bare clone builds, tests and reads the same as the checkout it came
//! from (rust-analyzer keeps such checks in its `tidy` test).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What no tracked file may mention. Spelt in pieces so this file does not match itself.
const OUTSIDE: [(&str, &str); 2] = [
    (
        concat!("..", "/shared"),
        "a folder beside the repository: keep what is needed in the repository (benchmark data in \
         benchmarks/) and refer to it there",
    ),
    (
        concat!("PROTOCOLS", ".md"),
        "notes that are not in the repository: name the public spec instead (Zed's \
         edit-prediction code, Inception's API, with a URL)",
    ),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// The tracked files, as paths relative to the repository root.
fn tracked_files() -> Vec<String> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git ls-files failed (this test reads the tracked files of a git checkout): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("tracked paths are UTF-8")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether a tracked file is checked: not the benchmark data itself (its provenance notes are
/// the authors'), not the lockfile.
fn checked(path: &str) -> bool {
    !path.starts_with("benchmarks/") && path != "Cargo.lock"
}

#[test]
fn no_tracked_file_refers_outside_the_repository() {
    let root = repo();
    let files = tracked_files();
    assert!(
        files.iter().any(|f| f == "Cargo.toml"),
        "sanity: the tracked files were listed"
    );
    let mut found = Vec::new();
    for file in files.iter().filter(|f| checked(f)) {
        // Tracked but deleted in this checkout, or a submodule: nothing to read.
        let Ok(bytes) = std::fs::read(root.join(file)) else {
            continue;
        };
        // Binary files (models, gzip) say nothing to a reader.
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            for (needle, why) in OUTSIDE {
                if line.contains(needle) {
                    found.push(format!("{file}:{}: `{needle}`, {why}", number + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "tracked files refer outside the repository:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_benchmark_data_is_in_the_repository() {
    let files = tracked_files();
    for required in [
        "benchmarks/README.md",
        "benchmarks/humaneval-infilling/HumanEval-SingleLineInfilling.jsonl.gz",
        "benchmarks/humaneval-infilling/LICENSE",
        "benchmarks/humanevalpack-rust/humanevalpack.jsonl",
        "benchmarks/humanevalpack-rust/LICENSE",
        "benchmarks/zed-next-edit/zed--change-match-arm.md",
        "benchmarks/zed-next-edit/LICENSE",
    ] {
        assert!(
            files.iter().any(|f| f == required),
            "{required} is not tracked: the tests and `redraft eval` read it from the repository"
        );
    }
}
