//! `scripts/ship-model`: a trained model directory becomes the embedded default's files (one
//! Q8_0 GGUF with its redraft.json, tokenizer.json and a README), checked before anything is
//! replaced; a model over the size limit replaces nothing. `scripts/carry-size`: what a GPU
//! device call would carry. (The GGUF compiled in is read as these files are: engine test
//! `gguf::a_compiled_in_gguf_is_the_model_its_files_give_from_disk`.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use redraft_tests::cli::{self, json_ok, path, repo};

fn ship(model: &Path, assets: &Path, previous: &Path, extra: &[&str]) -> Output {
    Command::new(repo().join("scripts/ship-model"))
        .arg(model)
        .args([
            "--assets",
            path(assets),
            "--previous",
            path(previous),
            "--no-build",
        ])
        .args(extra)
        .env("REDRAFT", cli::redraft_binary())
        .output()
        .expect("scripts/ship-model runs")
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A directory whose `assets/` holds a model shipped before, and where `previous/` would go.
fn shipped_before() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (assets, previous) = (dir.path().join("assets"), dir.path().join("previous"));
    std::fs::create_dir(&assets).unwrap();
    std::fs::write(assets.join("model.safetensors"), "the model shipped before").unwrap();
    (dir, assets, previous)
}

#[test]
fn a_trained_model_ships_as_one_gguf_and_the_old_files_are_kept() {
    let (_dir, assets, previous) = shipped_before();
    let small = repo().join("fixtures/small-model");

    let out = ship(&small, &assets, &previous, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        names(&assets),
        ["README.md", "model.gguf", "redraft.json", "tokenizer.json"]
    );
    assert_eq!(names(&previous), ["model.safetensors"]);
    let gguf = std::fs::read(assets.join("model.gguf")).unwrap();
    assert_eq!(&gguf[..4], b"GGUF");
    // Q8_0: about 1.06 bytes a weight for the 2M model's matrices (its safetensors is f16).
    let f16 = std::fs::metadata(small.join("model.safetensors"))
        .unwrap()
        .len() as usize;
    assert!(gguf.len() < f16 * 7 / 10, "{} bytes from {f16}", gguf.len());
    let readme = std::fs::read_to_string(assets.join("README.md")).unwrap();
    assert!(readme.contains("2 layers, hidden 192"), "{readme}");
    assert!(readme.contains("Q8_0 matrices"), "{readme}");

    // The files as they will be compiled in load as a model directory and complete.
    let answer = json_ok(&cli::redraft(
        &[
            "complete",
            "--model",
            path(&assets),
            "--stdin-json",
            "--json",
        ],
        r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#,
    ));
    assert_eq!(answer["model"], path(&assets.join("model.gguf")));
    assert!(answer["steps"].as_u64().unwrap() > 0, "{answer}");
}

#[test]
fn a_model_over_the_limit_replaces_nothing() {
    let (dir, assets, previous) = shipped_before();
    let out = ship(
        &repo().join("fixtures/small-model"),
        &assets,
        &previous,
        &["--max-mb", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("over the 1 MB limit"), "{stderr}");
    assert_eq!(names(&assets), ["model.safetensors"]);
    assert!(!previous.exists());

    // Not a model directory: said before anything runs.
    let out = ship(dir.path(), &assets, &previous, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no config.json"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names(&assets), ["model.safetensors"]);
}

/// `scripts/carry-size`: what a GPU device call would carry (the working tree and the paths
/// named), refused over 64 MiB, as the pack and the CUDA bundle are checked before a window.
#[test]
fn carry_size_counts_the_tree_and_refuses_over_64_mib() {
    let carry = |paths: &[&Path]| {
        Command::new(repo().join("scripts/carry-size"))
            .args(paths)
            .output()
            .expect("scripts/carry-size runs")
    };
    let alone = carry(&[]);
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    let said = String::from_utf8_lossy(&alone.stdout).to_string();
    let tree: f64 = said
        .split(" MiB of working tree")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no tree size in {said:?}"));
    // The tracked files alone hold two copies of the 3.9 MB small model.
    assert!(tree > 7.0 && tree < 63.0, "{said}");
    let bytes = carry(&[Path::new("--tree-bytes")]);
    let bytes: f64 = String::from_utf8_lossy(&bytes.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(
        (bytes / 1048576.0 - tree).abs() < 0.06,
        "{bytes} bytes against {said}"
    );

    let dir = tempfile::tempdir().unwrap();
    let fits = dir.path().join("fits.bin");
    std::fs::write(&fits, vec![0u8; 1 << 20]).unwrap();
    let out = carry(&[&fits]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("+ 1.0 MiB carried"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let over = dir.path().join("over.bin");
    std::fs::write(&over, vec![0u8; 64 << 20]).unwrap();
    let out = carry(&[&over]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("over the limit"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(carry(&[&dir.path().join("missing")]).status.code(), Some(2));
}
