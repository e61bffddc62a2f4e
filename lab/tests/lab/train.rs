//! `redraft train` end to end: the real binary trains a tiny model on a tiny corpus, the output
//! directory completes with `redraft complete`, and the run resumes from its checkpoint.

use std::path::{Path, PathBuf};
use std::process::Output;

use redraft_tests::cli::{json_ok, lab as redraft, path, repo};

/// `train.jsonl` from the engine's sources, `valid.jsonl` from this crate's.
fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (split, source) in [
        ("train.jsonl", "engine/src"),
        ("valid.jsonl", "lsp-server/src"),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join(source))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        let lines: Vec<String> = files
            .iter()
            .map(|p| {
                serde_json::json!({
                    "crate": "redraft",
                    "version": "0.1.0",
                    "path": p.file_name().unwrap().to_str().unwrap(),
                    "text": std::fs::read_to_string(p).unwrap(),
                })
                .to_string()
            })
            .collect();
        std::fs::write(dir.path().join(split), lines.join("\n") + "\n").unwrap();
    }
    dir
}

fn train(corpus: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        "--corpus",
        path(corpus),
        "--out",
        path(out),
        "--threads",
        "1",
    ];
    args.extend_from_slice(extra);
    redraft(&args, "")
}

const TINY: &[&str] = &[
    "--vocab-size",
    "300",
    "--layers",
    "1",
    "--hidden",
    "32",
    "--heads",
    "2",
    "--ffn",
    "64",
    "--seq-len",
    "32",
    "--batch",
    "2",
    "--steps",
    "3",
    "--warmup",
    "1",
    "--eval-every",
    "2",
    "--eval-examples",
    "2",
    "--save-every",
    "2",
];

#[test]
fn trains_a_model_that_completes_and_resumes() {
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let model = out.path().join("model");

    let summary = json_ok(&train(corpus.path(), &model, TINY));
    assert_eq!(summary["step"], 3);
    assert_eq!(summary["stopped"], "finished");
    if !cfg!(feature = "cuda") {
        assert_eq!(summary["device"], "cpu");
    }
    assert!(summary["tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(summary["last_eval"]["val_acc"].as_f64().is_some());
    for file in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "redraft.json",
        "train_log.jsonl",
        "checkpoint/state.json",
    ] {
        assert!(model.join(file).is_file(), "{file} is missing");
    }
    let log = std::fs::read_to_string(model.join("train_log.jsonl")).unwrap();
    assert_eq!(
        log.lines().count(),
        2,
        "evaluations at steps 2 and 3: {log}"
    );

    let completion = json_ok(&redraft(
        &[
            "complete",
            "--model",
            path(&model),
            "--stdin-json",
            "--json",
            "--max-tokens",
            "8",
        ],
        r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#,
    ));
    assert!(completion["middle"].is_string());
    assert!(completion["tokens"].as_array().unwrap().len() <= 8);

    let again = train(corpus.path(), &model, TINY);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("pass --resume"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    let resumed = json_ok(&train(corpus.path(), &model, &["--resume", "--steps", "5"]));
    assert_eq!(resumed["step"], 5);
    assert_eq!(resumed["steps_this_session"], 2);

    let conflict = train(corpus.path(), &model, &["--resume", "--seed", "9"]);
    assert!(!conflict.status.success());
    assert!(String::from_utf8_lossy(&conflict.stderr).contains("seed: 0 -> 9"));
}

#[test]
fn tokenizer_only_reports_bytes_per_token() {
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let report = json_ok(&train(
        corpus.path(),
        out.path(),
        &["--vocab-size", "300", "--tokenizer-only"],
    ));
    assert_eq!(report["vocab_size"], 300);
    assert!(report["valid_bytes_per_token"].as_f64().unwrap() > 1.0);
    assert!(out.path().join("tokenizer.json").is_file());
}

#[test]
fn a_device_that_cannot_be_had_fails_before_any_work() {
    if cfg!(feature = "cuda") {
        return;
    }
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let mut args = TINY.to_vec();
    args.extend(["--device", "cuda:1"]);
    let failed = train(corpus.path(), out.path(), &args);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("`cuda:1` needs a redraft built with CUDA"),
        "{stderr}"
    );
    assert!(
        !out.path().join("tokenizer.json").exists(),
        "nothing was trained"
    );
}

#[test]
fn missing_corpus_says_what_to_pass() {
    let empty = tempfile::tempdir().unwrap();
    let out = train(empty.path(), &empty.path().join("out"), TINY);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("train.jsonl is missing"), "{stderr}");
}
