//! `redraft train --init` from a GGUF file end to end (issue 16): the real binary adapts a tiny
//! Qwen2.5-Coder-layout GGUF (quantized, untied head, grouped-query attention) to diffusion with
//! the adaptation flags, the output directory records them and completes with `redraft
//! complete`, the run resumes from its checkpoint, and bad adaptation flags fail before anything
//! is written.

use std::path::{Path, PathBuf};
use std::process::Output;

use candle_core::quantized::GgmlDType;
use redraft_tests::cli::{json_ok, lab as redraft, path};
use redraft_tests::gguf;

/// A corpus of two splits from the engine's sources.
fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (split, texts) in [
        (
            "train.jsonl",
            vec![
                include_str!("../../../engine/src/sampler.rs"),
                include_str!("../../../engine/src/config.rs"),
            ],
        ),
        (
            "valid.jsonl",
            vec![include_str!("../../../engine/src/checkpoint.rs")],
        ),
    ] {
        let lines: Vec<String> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                serde_json::json!({"crate": "redraft", "version": "0.1.0", "path": format!("f{i}.rs"), "text": text})
                    .to_string()
            })
            .collect();
        std::fs::write(dir.path().join(split), lines.join("\n") + "\n").unwrap();
    }
    dir
}

/// A tiny qwen2 GGUF in `dir`.
fn gguf_file(dir: &Path) -> PathBuf {
    let file = dir.join("qwen-tiny-q8_0.gguf");
    let config = gguf::config(320, 512);
    gguf::write(
        &file,
        &config,
        &gguf::weights(&config, 1),
        &gguf::tokenizer_json(320),
        GgmlDType::Q8_0,
        None,
    );
    file
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
        "--batch",
        "2",
        "--warmup",
        "1",
        "--eval-every",
        "2",
        "--eval-examples",
        "2",
    ];
    args.extend_from_slice(extra);
    redraft(&args, "")
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_gguf_is_adapted_trained_and_resumed() {
    let corpus = corpus();
    let work = tempfile::tempdir().unwrap();
    let file = gguf_file(work.path());
    let model = work.path().join("model");
    let init = [
        "--init",
        path(&file),
        "--attention",
        "block:8",
        "--mask-token",
        "<|im_start|>",
        "--seq-len",
        "48",
        "--steps",
        "2",
    ];
    let summary = json_ok(&train(corpus.path(), &model, &init));
    assert_eq!(summary["step"], 2);
    let log = std::fs::read_to_string(model.join("train_log.jsonl")).unwrap();
    let steps: Vec<u64> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(steps, [0, 2], "{log}");

    let tokenizer = read_json(&model.join("tokenizer.json"));
    let vocab = &tokenizer["model"]["vocab"];
    let redraft_json = read_json(&model.join("redraft.json"));
    assert_eq!(redraft_json["attention"], serde_json::json!({"block": 8}));
    assert_eq!(redraft_json["mask_token_id"], vocab["<|im_start|>"]);
    assert_eq!(redraft_json["eos_token_id"], vocab["<|endoftext|>"]);
    assert_eq!(redraft_json["logit_shift"], true);
    let config = read_json(&model.join("config.json"));
    assert_eq!(config["tie_word_embeddings"], false);
    assert_eq!(config["max_position_embeddings"], 512);

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

    let resumed = json_ok(&train(corpus.path(), &model, &["--resume", "--steps", "3"]));
    assert_eq!(resumed["step"], 3);
    assert_eq!(resumed["steps_this_session"], 1);
    let conflict = train(
        corpus.path(),
        &model,
        &["--resume", "--attention", "causal"],
    );
    assert!(!conflict.status.success());
    assert!(
        stderr(&conflict).contains("diffusion.attention"),
        "{}",
        stderr(&conflict)
    );
}

#[test]
fn bad_adaptation_flags_fail_before_anything_is_written() {
    let corpus = corpus();
    let work = tempfile::tempdir().unwrap();
    let file = gguf_file(work.path());
    let out = work.path().join("model");
    for (flags, expected) in [
        (
            vec!["--init", path(&file), "--mask-token", "<|nope|>"],
            "--mask-token `<|nope|>` is not in its vocabulary",
        ),
        (
            vec!["--init", path(&file), "--attention", "block:0"],
            "unknown attention `block:0`",
        ),
        (vec!["--mask-token", "<|fim_pad|>"], "--init"),
        (
            vec!["--attention", "causal", "--vocab-size", "300"],
            "--attention causal needs the logit shift",
        ),
        (
            vec!["--init", path(&file), "--seq-len", "1024"],
            "longer than the model's 512 positions",
        ),
    ] {
        let failed = train(corpus.path(), &out, &flags);
        assert!(!failed.status.success(), "{flags:?}");
        assert!(
            stderr(&failed).contains(expected),
            "{flags:?}: {}",
            stderr(&failed)
        );
        assert!(
            !out.join("tokenizer.json").exists(),
            "{flags:?} wrote a tokenizer"
        );
    }
}
