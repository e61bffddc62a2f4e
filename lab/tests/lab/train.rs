//! `redraft train` end to end: the real binary trains a tiny model on a tiny corpus, the output
//! directory completes with `redraft complete`, and the run resumes from its checkpoint.

use std::path::{Path, PathBuf};
use std::process::Output;

use redraft_tests::cli::{self, json_ok, lab as redraft, path, repo};

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

    // A fresh run into it is refused, whatever it was told of the tokenizer, before it writes
    // any: `--tokenizer` replaced the run's tokenizer.json first (the run could no longer be
    // resumed, nor its model complete), and a `--vocab-size` of another size was told to
    // remove it.
    let tokenizer = std::fs::read(model.join("tokenizer.json")).unwrap();
    let other = repo().join("assets/default-model/tokenizer.json");
    for extra in [
        TINY,
        &["--tokenizer", path(&other)],
        &["--tokenizer", path(&other), "--tokenizer-only"],
        &["--vocab-size", "500"],
    ] {
        let again = train(corpus.path(), &model, extra);
        let stderr = String::from_utf8_lossy(&again.stderr);
        assert_eq!(again.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(
            stderr.contains("already holds a checkpoint: pass --resume"),
            "{extra:?}: {stderr}"
        );
        assert!(
            std::fs::read(model.join("tokenizer.json")).unwrap() == tokenizer,
            "{extra:?} replaced the run's tokenizer"
        );
    }

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
fn a_model_directory_without_a_checkpoint_is_not_trained_over() {
    // The shipped default's directory (an export whose checkpoint is not there), or a converted
    // or downloaded model: a fresh run reused its tokenizer and wrote over its weights and
    // config. A tokenizer alone is what a run may start from (`tokenizer_only_...` above).
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let shipped = repo().join("assets/default-model");
    let mut before = Vec::new();
    for entry in std::fs::read_dir(&shipped).unwrap() {
        let from = entry.unwrap().path();
        let to = out.path().join(from.file_name().unwrap());
        std::fs::copy(&from, &to).unwrap();
        before.push((to.clone(), std::fs::read(&to).unwrap()));
    }
    for extra in [TINY, &["--tokenizer-only"]] {
        let again = train(corpus.path(), out.path(), extra);
        let stderr = String::from_utf8_lossy(&again.stderr);
        assert_eq!(again.status.code(), Some(1), "{extra:?}: {stderr}");
        assert!(
            stderr.contains("holds a model") && stderr.contains("no checkpoint to resume"),
            "{extra:?}: {stderr}"
        );
        for (file, bytes) in &before {
            assert!(
                std::fs::read(file).unwrap() == *bytes,
                "{extra:?} wrote over {}",
                file.display()
            );
        }
    }
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

/// Settings no run can have are mistakes on the command line: exit status 2 and what is wrong,
/// before the corpus is even looked at (it is missing here) and nothing written. A value alone
/// is checked as it is read; one that only fails beside another (`--kv-heads 3` with 4 heads)
/// when the flags are read together.
#[test]
fn settings_no_run_can_have_are_command_line_mistakes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (flags, says) in [
        (&["--steps", "0"][..], "--steps <STEPS>"),
        (&["--batch", "0"], "--batch <BATCH>"),
        (&["--layers", "0"], "--layers <LAYERS>"),
        (&["--fim-rate", "2"], "expected a share from 0 to 1"),
        (&["--lr", "nan"], "expected a number above 0"),
        (&["--seq-len", "4"], "8 or more"),
        (
            &["--max-minutes=-1"],
            "expected a number of minutes above 0",
        ),
        // A deadline no clock can add: a panic, after the tokenizer was written into --out.
        (&["--max-minutes", "1e30"], "at most 525600 (a year)"),
        (
            &["--kv-heads", "3"],
            "--heads 4 must be a multiple of --kv-heads 3",
        ),
        (&["--hidden", "100", "--heads", "3"], "--hidden 100 must be"),
    ] {
        let failed = train(&dir.path().join("no-corpus"), &out, flags);
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert_eq!(failed.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{flags:?}: {stderr}"
        );
        assert!(!stderr.contains("train.jsonl"), "{flags:?}: {stderr}");
    }
    assert!(!out.exists(), "nothing was written");
}

/// A run whose attention buffers (quadratic in --seq-len) this machine cannot allocate is
/// refused before the tokenizer is trained, saying why, instead of the process aborting at the
/// first step ("memory allocation of ... bytes failed"). Ten million tokens a sequence would
/// take petabytes: no machine has them.
#[test]
fn settings_whose_attention_cannot_be_allocated_are_refused_before_training() {
    if cfg!(feature = "cuda") {
        return;
    }
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let huge = [
        "--device",
        "cpu",
        "--vocab-size",
        "300",
        "--seq-len",
        "10000000",
    ];
    let model = [
        "--batch", "2", "--hidden", "64", "--heads", "2", "--layers", "1",
    ];
    let failed = train(corpus.path(), out.path(), &[&huge[..], &model].concat());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("Error: --seq-len 10000000 with --batch 2")
            && stderr.contains("more than this machine can allocate")
            && stderr.contains("lower --seq-len or --batch"),
        "{stderr}"
    );
    assert!(
        !out.path().join("tokenizer.json").exists(),
        "nothing was trained"
    );
    // A tokenizer-only run allocates no attention: the same settings train its tokenizer.
    let tokenizer_only = train(
        corpus.path(),
        out.path(),
        &[&huge[..], &["--tokenizer-only"]].concat(),
    );
    assert!(
        tokenizer_only.status.success(),
        "{}",
        String::from_utf8_lossy(&tokenizer_only.stderr)
    );
    assert!(out.path().join("tokenizer.json").exists());
}

/// What the run prints when it is done goes to a stdout that may not take it (a full disk): an
/// error saying so, exit status 1, not a panic.
#[test]
fn a_report_stdout_cannot_take_is_an_error() {
    let corpus = corpus();
    let out = tempfile::tempdir().unwrap();
    let args = [
        "train",
        "--corpus",
        path(corpus.path()),
        "--out",
        path(out.path()),
        "--vocab-size",
        "300",
        "--tokenizer-only",
        "--threads",
        "1",
    ];
    let failed = cli::writing_to(&cli::lab_binary(), &[], &args, "", cli::Stdout::Full);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Error: cannot write to standard output: No space left on device"),
        "{stderr}"
    );
}
