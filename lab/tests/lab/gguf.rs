//! GGUF files end to end on the real binary: `redraft convert` writes a safetensors model (the
//! small test model, `fixtures/small-model`) as GGUF, every door loads it (`complete`,
//! `score`), and `score`'s numbers match the safetensors model's. Refusals of bad input are
//! clear. (The embedded default converted: `cli/tests/cli/models.rs`.)

use redraft_tests::cli::{json_ok, lab as redraft, ok, path};

const CODE: &str = "fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";

fn score_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn converted_models_load_everywhere_and_score_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("code.rs");
    std::fs::write(&text, CODE).unwrap();
    let f32_file = dir.path().join("f32.gguf");
    let q8_file = dir.path().join("q8.gguf");
    let small = redraft_tests::cli::repo().join("fixtures/small-model");
    for (file, kind) in [(&f32_file, "f32"), (&q8_file, "q8_0")] {
        ok(redraft(
            &[
                "convert",
                "--model",
                path(&small),
                "--out",
                path(file),
                "--type",
                kind,
            ],
            "",
        ));
    }
    // Each states its type as llama.cpp names it (where a file states none, llama.cpp guesses
    // and Ollama shows nothing).
    for (file, stated) in [(&f32_file, 0), (&q8_file, 7)] {
        let mut reader = std::fs::File::open(file).unwrap();
        let content = candle_core::quantized::gguf_file::Content::read(&mut reader).unwrap();
        let file_type = content.metadata["general.file_type"].to_u32().unwrap();
        assert_eq!(file_type, stated, "{}", file.display());
    }
    // `score`, the command's old name, still runs it.
    let embedded = score_lines(&ok(redraft(
        &["score", "--model", path(&small), "--text", path(&text)],
        "",
    )));
    let f32 = score_lines(&ok(redraft(
        &[
            "logprobs",
            "--model",
            path(&f32_file),
            "--text",
            path(&text),
        ],
        "",
    )));
    assert_eq!(
        embedded, f32,
        "an f32 GGUF scores exactly as the model it came from"
    );
    assert!(embedded.len() > 10);
    let line = &embedded[3];
    assert_eq!(line["pos"], 3);
    assert_eq!(line["top"].as_array().unwrap().len(), 5);
    let last = score_lines(&ok(redraft(
        &[
            "logprobs",
            "--model",
            path(&f32_file),
            "--text",
            path(&text),
            "--last",
        ],
        "",
    )));
    assert_eq!(last.len(), 1);
    assert_eq!(last[0]["pos"], embedded.len() - 1);
    let (a, b) = (&last[0]["top"][0], &embedded.last().unwrap()["top"][0]);
    assert_eq!(
        a[0], b[0],
        "the last position alone scores as in the whole pass"
    );
    assert!((a[1].as_f64().unwrap() - b[1].as_f64().unwrap()).abs() < 1e-4);
    let q8 = score_lines(&ok(redraft(
        &["logprobs", "--model", path(&q8_file), "--text", path(&text)],
        "",
    )));
    let worst = embedded
        .iter()
        .zip(&q8)
        .filter_map(|(a, b)| {
            Some((a["next_logprob"].as_f64()? - b["next_logprob"].as_f64()?).abs())
        })
        .fold(0f64, f64::max);
    assert!(
        worst > 0.0 && worst < 1.0,
        "Q8_0 moves log-probabilities a little: {worst}"
    );

    let prefix = dir.path().join("prefix");
    let suffix = dir.path().join("suffix");
    std::fs::write(&prefix, "fn add(a: u32, b: u32) -> u32 {\n    ").unwrap();
    std::fs::write(&suffix, "\n}\n").unwrap();
    let complete = |model: &std::path::Path| {
        let args = [
            "complete",
            "--raw",
            "--json",
            "--prefix-file",
            path(&prefix),
            "--suffix-file",
            path(&suffix),
            "--model",
            path(model),
        ];
        json_ok(&redraft(&args, ""))
    };
    assert_eq!(complete(&small)["middle"], complete(&f32_file)["middle"]);
    assert!(complete(&q8_file)["middle"].is_string());
}

#[test]
fn score_and_convert_refuse_bad_input_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let fail = |args: &[&str]| {
        let out = redraft(args, "");
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8(out.stderr).unwrap()
    };
    let ids = dir.path().join("ids.json");
    std::fs::write(&ids, "[1, 2, 999999]").unwrap();
    assert!(fail(&["logprobs", "--tokens", path(&ids)]).contains("999999"));
    std::fs::write(&ids, "1 two").unwrap();
    assert!(fail(&["logprobs", "--tokens", path(&ids)]).contains("two"));
    let binary = dir.path().join("binary");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    assert!(fail(&["logprobs", "--text", path(&binary)]).contains("not UTF-8"));
    let missing = dir.path().join("missing.rs");
    assert!(fail(&["logprobs", "--text", path(&missing)]).contains("missing.rs"));
    let empty = dir.path().join("empty.rs");
    std::fs::write(&empty, "").unwrap();
    assert!(fail(&["logprobs", "--text", path(&empty)]).contains("nothing to read"));
    let bogus = dir.path().join("bogus.gguf");
    std::fs::write(&bogus, "GGUF and then nothing").unwrap();
    let msg = fail(&["logprobs", "--model", path(&bogus), "--text", path(&empty)]);
    assert!(msg.contains("bogus.gguf") && msg.contains("GGUF"), "{msg}");
    let out = dir.path().join("x.gguf");
    assert!(fail(&["convert", "--out", path(&out), "--type", "q3_x"]).contains("unknown type"));
    assert!(!out.exists());
}
