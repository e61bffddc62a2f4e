//! `redraft complete` end to end: the real binary on a small random-weight checkpoint (the
//! parity fixture's weights with a tokenizer trained here), so every path from files to the
//! printed suggestion (or, with `--raw`, the printed middle) runs. And what `redraft` does with a developer command (`train`, `eval`, `bench`,
//! `score`): it hands it to `redraft-lab`.

mod io;

use redraft_engine::tokenizer::Tokenizer;

use redraft_tests::cli::{json_ok, path, redraft, repo};

/// `redraft complete --model MODEL --stdin-json --json FLAGS` on `request`.
fn complete_json(model: &std::path::Path, request: &str, flags: &[&str]) -> std::process::Output {
    let mut args = vec!["complete", "--model", path(model), "--stdin-json", "--json"];
    args.extend_from_slice(flags);
    redraft(&args, request)
}

/// A complete model directory: fixture weights, a BPE tokenizer filling the model's 384 ids
/// (mask 0, EOS 1) and redraft.json saying so.
fn model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = repo().join("fixtures/parity/dream-tied");
    std::fs::copy(
        fixture.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("config.json")).unwrap())
            .unwrap();
    config["eos_token_id"] = 1.into();
    config["pad_token_id"] = 1.into();
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    let corpus: Vec<String> = std::fs::read_dir(repo().join("engine/src"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    let tokenizer =
        Tokenizer::train_bpe(corpus.iter(), 384, &["<|mask|>", "<|endoftext|>"]).unwrap();
    assert_eq!(
        tokenizer.vocab_size(),
        384,
        "corpus too small for the fixture's vocabulary"
    );
    tokenizer.save(&dir.path().join("tokenizer.json")).unwrap();
    std::fs::write(
        dir.path().join("redraft.json"),
        r#"{"mask_token_id": 0, "eos_token_id": 1, "logit_shift": true}"#,
    )
    .unwrap();
    dir
}

#[test]
fn completes_between_prefix_and_suffix_files_as_json() {
    let model = model_dir();
    let prefix = model.path().join("prefix.rs");
    let suffix = model.path().join("suffix.rs");
    std::fs::write(&prefix, "fn add(a: u32, b: u32) -> u32 {\n    ").unwrap();
    std::fs::write(&suffix, "\n}\n").unwrap();
    let out = redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--prefix-file",
            path(&prefix),
            "--suffix-file",
            path(&suffix),
            "--max-tokens",
            "12",
            "--json",
        ],
        "",
    );
    let v = json_ok(&out);
    assert!(v["middle"].is_string());
    let tokens = v["tokens"].as_array().unwrap().len();
    assert!(tokens <= 12);
    let forwards = v["forwards"].as_u64().unwrap();
    assert!(
        (1..=12).contains(&forwards),
        "{forwards} forwards for 12 slots"
    );
    assert!(v["tokens_per_forward"].as_f64().unwrap() >= 1.0);
    assert!(v["timings"]["total_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["sampler"]["schedule"]["kind"], "threshold");
}

#[test]
fn plain_output_is_the_suggestion_and_matches_json() {
    let model = model_dir();
    let request = r#"{"prefix": "let x = ", "suffix": ";\n", "language": "rust"}"#;
    let plain = redraft(
        &["complete", "--model", path(model.path()), "--stdin-json"],
        request,
    );
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let json = json_ok(&redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--stdin-json",
            "--json",
        ],
        request,
    ));
    // Nothing printed is said so on stderr; either way stdout is the JSON's suggestion.
    let stdout = String::from_utf8(plain.stdout).unwrap();
    match json["suggestion"].as_str() {
        Some(suggestion) => assert_eq!(stdout, suggestion),
        None => {
            assert_eq!(stdout, "");
            assert!(String::from_utf8_lossy(&plain.stderr).starts_with("no suggestion: "));
        }
    }
    assert_eq!(json["plan"]["unit"], "rest-of-line", "{json}");
}

/// `dir/lib.rs`, whose line 3 column 13 (after `let v = `) is a rest-of-line cursor.
fn rest_of_line_file(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("lib.rs");
    std::fs::write(
        &file,
        "fn main() {\n    let total = 0;\n    let v = \n    println!(\"{v}\");\n}\n",
    )
    .unwrap();
    file
}

/// A rest-of-line cursor: the engine's raw middle runs on for lines, `redraft complete` prints
/// what the editor would show for the cursor, the line finished and nothing past it.
#[test]
fn a_rest_of_line_cursor_prints_the_finished_line_as_the_editor_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = rest_of_line_file(dir.path());
    let run = |extra: &[&str]| {
        let mut args = vec![
            "complete",
            "--file",
            path(&file),
            "--line",
            "3",
            "--column",
            "13",
        ];
        args.extend_from_slice(extra);
        let out = redraft(&args, "");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        (String::from_utf8(out.stdout).unwrap(), stderr)
    };
    let (shown, _) = run(&[]);
    assert!(!shown.is_empty() && !shown.contains('\n'), "{shown:?}");
    let json = json_ok(&redraft(
        &[
            "complete",
            "--file",
            path(&file),
            "--line",
            "3",
            "--column",
            "13",
            "--json",
        ],
        "",
    ));
    assert_eq!(json["suggestion"], shown.as_str(), "{json}");
    // What is shown is the run's own middle, cut where its line ends.
    let middle = json["middle"].as_str().unwrap();
    assert!(
        middle.starts_with(shown.trim_end()),
        "{shown:?} from {middle:?}"
    );
    assert_eq!(json["plan"]["unit"], "rest-of-line", "{json}");
    assert_eq!(json["plan"]["language"], "rust", "{json}");
    assert_eq!(json["withheld"], false, "{json}");
    assert!(json["confidence"].as_f64().unwrap() < 1.0, "{json}");
    // Under a bar no suggestion meets: nothing on stdout, one line on stderr, success.
    let (withheld, why) = run(&["--min-confidence", "1"]);
    assert_eq!(withheld, "");
    assert_eq!(why.lines().count(), 1, "{why}");
    assert!(why.starts_with("no suggestion: the model was "), "{why}");
}

/// `--raw` is the engine alone, as before the pipeline: the whole prefix and suffix in, the raw
/// middle out, the JSON without the pipeline's fields.
#[test]
fn raw_prints_the_engines_middle_and_matches_json() {
    let model = model_dir();
    let request = r#"{"prefix": "let x = ", "suffix": ";\n"}"#;
    let args = [
        "complete",
        "--model",
        path(model.path()),
        "--stdin-json",
        "--raw",
    ];
    let plain = redraft(&args, request);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let json = json_ok(&redraft(&[&args[..], &["--json"]].concat(), request));
    assert_eq!(
        String::from_utf8(plain.stdout).unwrap(),
        json["middle"].as_str().unwrap()
    );
    assert!(
        json.get("suggestion").is_none() && json.get("plan").is_none(),
        "{json}"
    );
    // The raw canvas is --max-tokens slots, not the length the syntax asks for.
    assert_eq!(json["slots"], 64, "{json}");
}

/// A 20 MB file: the plan's windows around the cursor are all the model is given, within
/// the budget, instead of the whole file being tokenized.
#[test]
fn a_large_file_is_planned_to_the_windows_around_the_cursor() {
    let model = model_dir();
    let file = model.path().join("big.rs");
    let line = "let total = items.iter().map(|x| x * 2).sum::<u32>();\n";
    let mut text = String::from("fn main() {\n");
    text.push_str(&line.repeat((20 << 20) / line.len()));
    let cursor_line = (text.matches('\n').count() + 1).to_string();
    text.push_str("    let v = \n}\n");
    std::fs::write(&file, &text).unwrap();
    let json = json_ok(&redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--file",
            path(&file),
            "--line",
            &cursor_line,
            "--column",
            "13",
            "--max-tokens",
            "16",
            "--json",
        ],
        "",
    ));
    let count = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap();
    let (plan, budget) = (&json["plan"], &json["plan"]["budget"]);
    let allowed = count(budget, "prefix_tokens")
        + count(budget, "suffix_tokens")
        + count(budget, "neighbour_tokens");
    let planned = count(plan, "prefix_tokens")
        + count(plan, "suffix_tokens")
        + count(plan, "neighbour_tokens");
    assert!(planned <= allowed, "{json}");
    assert!(
        count(&json, "prefix_tokens") + count(&json, "suffix_tokens") <= allowed,
        "{json}"
    );
    assert!(count(plan, "prefix_start") > 20_000_000, "{json}");
    assert_eq!(count(plan, "suffix_end") as usize, text.len(), "{json}");
}

/// `--max-tokens` as large as the model's window: the middle may take a quarter of the
/// positions (the note says so) and the context keeps the rest, as under that cap. A fixed
/// `--canvas-tokens` likewise (uncapped, 255 slots left the context no token).
#[test]
fn a_max_tokens_past_a_quarter_of_the_positions_is_capped_with_a_note() {
    let model = model_dir();
    let request = serde_json::json!({
        "prefix": "let total = items.iter().map(|x| x * 2).sum::<u32>();\n".repeat(40),
        "suffix": "}\n",
    })
    .to_string();
    let ask_with = |flags: &[&str]| {
        let out = complete_json(model.path(), &request, flags);
        (json_ok(&out), String::from_utf8(out.stderr).unwrap())
    };
    let ask = |max_tokens: &str| ask_with(&["--max-tokens", max_tokens]);
    let (capped, quiet) = ask("64");
    let (asked, note) = ask("256");
    assert!(!quiet.contains("note:"), "{quiet}");
    assert!(
        note.contains("--max-tokens 256 is more than a middle may take of this model's 256 positions; at most 64"),
        "{note}"
    );
    assert_eq!(asked["plan"]["budget"], capped["plan"]["budget"], "{asked}");
    assert_eq!(asked["plan"]["budget"]["max_canvas_tokens"], 64, "{asked}");
    assert_eq!(asked["prefix_tokens"], capped["prefix_tokens"], "{asked}");
    assert!(asked["prefix_tokens"].as_u64().unwrap() > 100, "{asked}");

    let fixed = |canvas: &str| ask_with(&["--max-tokens", "300", "--canvas-tokens", canvas]);
    let (capped, quiet) = fixed("64");
    let (asked, note) = fixed("255");
    assert!(!quiet.contains("note:"), "{quiet}");
    assert!(
        note.contains("--canvas-tokens 255 is more than a middle may take of this model's 256 positions; at most 64"),
        "{note}"
    );
    assert_eq!(asked["plan"]["canvas_tokens"], 64, "{asked}");
    assert_eq!(asked["plan"]["budget"], capped["plan"]["budget"], "{asked}");
    assert!(asked["prefix_tokens"].as_u64().unwrap() > 100, "{asked}");
}

#[test]
fn cursor_in_a_file_and_out_of_range_cursor() {
    let model = model_dir();
    let file = model.path().join("lib.rs");
    std::fs::write(&file, "fn main() {\n    let v = \n}\n").unwrap();
    let ok = redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--file",
            path(&file),
            "--line",
            "2",
            "--column",
            "13",
            "--json",
        ],
        "",
    );
    assert!(json_ok(&ok)["prefix_tokens"].as_u64().unwrap() > 0);
    let bad = redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--file",
            path(&file),
            "--line",
            "2",
            "--column",
            "40",
        ],
        "",
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("column 40 is past the end of line 2"));
}

#[test]
fn steps_view_streams_every_step_and_effort_bounds_steps() {
    let model = model_dir();
    let request = r#"{"prefix": "fn f() {", "suffix": "}"}"#;
    let out = redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--stdin-json",
            "--json",
            "--steps-view",
            "--effort",
            "low",
            "--max-tokens",
            "32",
        ],
        request,
    );
    let v = json_ok(&out);
    let forwards = v["forwards"].as_u64().unwrap();
    assert!(forwards <= 4, "low effort caps steps at 4, took {forwards}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let steps = stderr.lines().filter(|l| l.starts_with("step ")).count();
    assert_eq!(steps as u64, forwards);
    let one_per_step = json_ok(&redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--stdin-json",
            "--json",
            "--per-step",
            "1",
            "--max-tokens",
            "6",
        ],
        request,
    ));
    assert!(one_per_step["forwards"].as_u64().unwrap() <= 6);
    assert_eq!(one_per_step["sampler"]["schedule"]["k"], 1);
}

/// The engine's growth, so `--raw`: the pipeline's `--canvas-tokens` is a fixed length.
#[test]
fn a_canvas_whose_last_slot_is_written_grows_up_to_max_tokens() {
    // One slot: its first commit is content (EOS waits for content), so the canvas must grow.
    let request = r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#;
    let run = |canvas: &str, max: &str| {
        json_ok(&redraft(
            &[
                "complete",
                "--stdin-json",
                "--json",
                "--raw",
                "--effort",
                "high",
                "--canvas-tokens",
                canvas,
                "--max-tokens",
                max,
            ],
            request,
        ))
    };
    let grown = run("1", "12");
    let slots = grown["slots"].as_u64().unwrap();
    assert!((2..=12).contains(&slots), "{grown}");
    assert!(grown["tokens"].as_array().unwrap().len() as u64 <= slots);
    let fixed = run("1", "1");
    assert_eq!(fixed["slots"], 1, "{fixed}");
    assert_eq!(fixed["tokens"].as_array().unwrap().len(), 1);
}

#[test]
fn without_model_the_embedded_default_model_completes() {
    let out = redraft(
        &["complete", "--stdin-json", "--json", "--max-tokens", "8"],
        r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#,
    );
    let v = json_ok(&out);
    assert_eq!(v["model"], "<embedded>/assets/default-model");
    assert!(v["tokens"].as_array().unwrap().len() <= 8);
    let on_cpu = json_ok(&redraft(
        &[
            "complete",
            "--stdin-json",
            "--json",
            "--max-tokens",
            "8",
            "--device",
            "cpu",
        ],
        r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#,
    ));
    assert_eq!(on_cpu["device"], "cpu");
    assert_eq!(on_cpu["middle"], v["middle"]);
    if !cfg!(feature = "cuda") {
        assert_eq!(v["device"], "cpu", "auto is the CPU without CUDA");
    }
}

#[test]
fn devices_that_cannot_be_had_are_clear_errors() {
    let request = r#"{"prefix": "a", "suffix": "b"}"#;
    let bad = redraft(&["complete", "--stdin-json", "--device", "tpu"], request);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("use auto, cpu, cuda or cuda:N"), "{stderr}");
    if !cfg!(feature = "cuda") {
        let cuda = redraft(&["complete", "--stdin-json", "--device", "cuda"], request);
        assert!(!cuda.status.success());
        let stderr = String::from_utf8_lossy(&cuda.stderr);
        assert!(stderr.contains("--features cuda"), "{stderr}");
    }
}

#[test]
fn clear_errors_for_broken_model_dir_and_bad_requests() {
    let model = model_dir();
    std::fs::remove_file(model.path().join("tokenizer.json")).unwrap();
    let broken = redraft(
        &["complete", "--model", path(model.path()), "--stdin-json"],
        r#"{"prefix": "a"}"#,
    );
    assert!(!broken.status.success());
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(stderr.contains("tokenizer.json is missing"), "{stderr}");
    let garbage = redraft(&["complete", "--stdin-json"], "not json");
    assert!(!garbage.status.success());
    assert!(String::from_utf8_lossy(&garbage.stderr).contains("stdin must hold"));
    let nowhere = redraft(&["complete"], "");
    assert_eq!(nowhere.status.code(), Some(2), "a command-line mistake");
    let stderr = String::from_utf8_lossy(&nowhere.stderr);
    assert!(
        stderr.contains("<--file <FILE>|--prefix-file <PREFIX_FILE>|--stdin-json>"),
        "{stderr}"
    );
}

/// A flag's negative value reaches the flag's own parser: `--seed -1` is a seed (its 64 bits,
/// as the HTTP server reads one), and a value out of a flag's range says what the flag takes,
/// where clap read `-1` as an unknown flag ("unexpected argument '-1' found").
#[test]
fn a_negative_value_is_read_by_its_flag() {
    let request = r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#;
    let seeded = |seed: &str| {
        let out = redraft(
            &[
                "complete",
                "--stdin-json",
                "--json",
                "--temperature",
                "1",
                "--seed",
                seed,
            ],
            request,
        );
        json_ok(&out)
    };
    let (negative, unsigned) = (seeded("-1"), seeded("18446744073709551615"));
    assert_eq!(negative["sampler"]["seed"], u64::MAX, "{negative}");
    assert!(
        negative["tokens"].as_array().is_some_and(|t| !t.is_empty()),
        "{negative}"
    );
    assert_eq!(negative["tokens"], unsigned["tokens"]);
    for (flag, value, says) in [
        (
            "--line",
            "-1",
            "expected a whole number of 1 or more, got `-1`",
        ),
        (
            "--min-confidence",
            "-0.1",
            "expected a number from 0 to 1, got `-0.1`",
        ),
        (
            "--deadline-ms",
            "-5",
            "expected a whole number of milliseconds, 0 or more, got `-5`",
        ),
    ] {
        let out = redraft(&["complete", "--stdin-json", flag, value], request);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
}

/// A mistake on the command line (a missing input, a count of 0, a flag that would be
/// ignored) is exit status 2, said by clap before anything is read or loaded; what running finds
/// (a file, a request, a model) is 1.
#[test]
fn command_line_mistakes_exit_2_and_what_running_finds_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.rs");
    std::fs::write(&file, "fn a() {}\n").unwrap();
    let f = path(&file);
    for args in [
        &["complete"][..],
        &["complete", "--next-edit"],
        &["complete", "--file", f, "--line", "0", "--column", "1"],
        &["complete", "--file", f, "--line", "1", "--column", "0"],
        &["complete", "--stdin-json", "--line", "3", "--column", "1"],
        &["complete", "--suffix-file", f],
        &[
            "complete",
            "--file",
            f,
            "--line",
            "1",
            "--column",
            "1",
            "--suffix-file",
            f,
        ],
        &["complete", "--prefix-file", f, "--max-tokens", "0"],
        &["complete", "--prefix-file", f, "--canvas-tokens", "0"],
        &["complete", "--next-edit", "--stdin-json", "--history", f],
    ] {
        let out = redraft(args, r#"{"prefix": "a"}"#);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
    // A canvas is at most --max-tokens slots, in the pipeline and with --raw.
    for (extra, says) in [
        (
            &["--canvas-tokens", "65"][..],
            "--canvas-tokens 65 is more than --max-tokens 64",
        ),
        (
            &["--canvas-tokens", "200", "--max-tokens", "5", "--raw"],
            "--canvas-tokens 200 is more than --max-tokens 5",
        ),
    ] {
        let args = [&["complete", "--prefix-file", f][..], extra].concat();
        let out = redraft(&args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {says}")),
            "{args:?}: {stderr}"
        );
    }
    // A next-edit flag without --next-edit would be read by nothing: refused whatever the
    // input, as a fill-in-the-middle flag is refused with --next-edit.
    let at_file = ["--file", f, "--line", "1", "--column", "1"];
    for flag in [
        &["--history", f][..],
        &["--draft-tau", "0.5"],
        &["--no-draft"],
        &["--max-change", "0.1"],
        &["--min-edit-confidence", "0.3"],
    ] {
        for input in [&["--prefix-file", f][..], &at_file, &["--stdin-json"]] {
            let args = [&["complete"][..], input, flag].concat();
            let out = redraft(&args, r#"{"prefix": "a"}"#);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            let refused = stderr.contains("required arguments were not provided:\n  --next-edit")
                || stderr.contains("cannot be used with");
            assert!(refused && stderr.contains(flag[0]), "{args:?}: {stderr}");
        }
    }
    let zero = redraft(
        &["complete", "--file", f, "--line", "0", "--column", "1"],
        "",
    );
    let stderr = String::from_utf8_lossy(&zero.stderr);
    assert!(
        stderr.contains("expected a whole number of 1 or more, got `0`"),
        "{stderr}"
    );
    for (args, stdin, says) in [
        (
            &["complete", "--file", f, "--line", "3", "--column", "1"][..],
            "",
            "line 3 is past the end of the file: the cursor can be on lines 1 to 2",
        ),
        (
            &["complete", "--stdin-json"],
            "{\"prefix\": 5}",
            "stdin must hold",
        ),
        (
            &["complete", "--next-edit", "--stdin-json"],
            r#"{"text": "abc", "cursor": 99}"#,
            "cursor 99 is past the end of the 3-byte text",
        ),
    ] {
        let out = redraft(args, stdin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A directory, a binary file, a file too big to be source: each said plainly, before a model
/// is loaded. An empty file and a CRLF file complete.
#[test]
fn sources_that_are_not_text_files_are_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let check = |file: &std::path::Path, says: &str| {
        let out = redraft(
            &[
                "complete",
                "--file",
                path(file),
                "--line",
                "1",
                "--column",
                "1",
            ],
            "",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    };
    check(dir.path(), "is a directory; name a source file");
    let binary = dir.path().join("a.out");
    std::fs::write(&binary, b"\x7fELF\x02\x01\xff\xfe").unwrap();
    check(
        &binary,
        "is not UTF-8 text (a byte that is not UTF-8 at offset 6)",
    );
    // `--file /dev/zero` would grow without end; a file past the cap stops at the cap.
    let huge = dir.path().join("huge.rs");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(redraft::complete::MAX_INPUT_BYTES + 1)
        .unwrap();
    check(&huge, "holds more than 64 MiB");

    let model = model_dir();
    for (text, line, column) in [("", 1, 1), ("fn a() {\r\n    \r\n}\r\n", 2, 5)] {
        let file = dir.path().join("source.rs");
        std::fs::write(&file, text).unwrap();
        let (line, column) = (line.to_string(), column.to_string());
        let v = json_ok(&redraft(
            &[
                "complete",
                "--model",
                path(model.path()),
                "--file",
                path(&file),
                "--line",
                &line,
                "--column",
                &column,
                "--max-tokens",
                "4",
                "--json",
            ],
            "",
        ));
        assert!(v["middle"].is_string(), "{v}");
    }
}

/// An error is its message and causes, each once, never a backtrace, even with
/// `RUST_BACKTRACE=1` (a backtrace is for a panic, which a user's input never is).
#[test]
fn errors_print_each_cause_once_and_no_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    // A tag whose manifest is a directory: an I/O error whose message repeats its source.
    let store = dir.path().join("ollama");
    std::fs::create_dir_all(store.join("manifests/registry.ollama.ai/library/x/dir")).unwrap();
    let env = [
        ("RUST_BACKTRACE", Some("1".to_string())),
        ("OLLAMA_MODELS", Some(path(&store).to_string())),
    ];
    let out = redraft_tests::cli::redraft_in(&env, &["pull", "ollama:x:dir"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("os error 21").count(), 1, "{stderr}");
    assert!(!stderr.contains("acktrace"), "{stderr}");
    let out = redraft_tests::cli::redraft_in(
        &env,
        &[
            "complete",
            "--file",
            path(dir.path()),
            "--line",
            "1",
            "--column",
            "1",
        ],
        "",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("Error: ") && !stderr.contains("acktrace"),
        "{stderr}"
    );
}

/// The engine's own trim, so `--raw` (the pipeline's plan cuts first: the large-file test).
#[test]
fn long_context_is_trimmed_to_the_models_positions() {
    let model = model_dir();
    let request = serde_json::json!({
        "prefix": "let total = items.iter().map(|x| x * 2).sum::<u32>();\n".repeat(200),
        "suffix": "}\n".repeat(400),
    });
    let v = json_ok(&redraft(
        &[
            "complete",
            "--model",
            path(model.path()),
            "--stdin-json",
            "--raw",
            "--json",
            "--max-tokens",
            "16",
        ],
        &request.to_string(),
    ));
    let (prefix, suffix) = (
        v["prefix_tokens"].as_u64().unwrap(),
        v["suffix_tokens"].as_u64().unwrap(),
    );
    // The fixture model has 256 positions: 240 for context, three quarters of it before.
    assert_eq!((prefix, suffix), (180, 60));
}

/// `redraft complete --next-edit` on the default model: the JSON names the region, the edits
/// lie inside it, and the edits applied to the file give the file with the region rewritten
/// as `new_region` says; the plain output is a unified diff saying the same.
#[test]
fn next_edit_prints_the_edit_as_json_and_as_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("area.rs");
    let text = "fn area(width: u32, height: u32) -> u32 {\n    width * height\n}\n\nfn main() {\n    let width = 3;\n    let h = 4;\n    println!(\"{}\", area(w, h));\n}\n";
    std::fs::write(&file, text).unwrap();
    let history = dir.path().join("history.diff");
    std::fs::write(
        &history,
        "--- a/area.rs\n+++ b/area.rs\n@@ -5,3 +5,3 @@\n fn main() {\n-    let w = 3;\n+    let width = 3;\n     let h = 4;\n",
    )
    .unwrap();
    let args = [
        "complete",
        "--next-edit",
        "--file",
        path(&file),
        "--line",
        "6",
        "--column",
        "14",
        "--history",
        path(&history),
    ];
    let v = json_ok(&redraft(
        // No bar (the default model's own may be tuned): the rewrite as the model wrote it.
        &[
            &args[..],
            &[
                "--json",
                "--max-change",
                "1000",
                "--min-edit-confidence",
                "0",
            ],
        ]
        .concat(),
        "",
    ));
    // Under a limit of 0 any rewrite that changes something is refused.
    let strict = json_ok(&redraft(
        &[&args[..], &["--json", "--max-change", "0"]].concat(),
        "",
    ));
    assert_eq!(strict["edits"].as_array().unwrap().len(), 0);
    let changed = !v["edits"].as_array().unwrap().is_empty();
    assert_eq!(strict["rewrote_too_much"], changed);
    assert_eq!(v["rewrote_too_much"], false);
    // The model's confidence in its change is reported; under a bar of 1 (more than any
    // model's sampled token reaches short of certainty) a change it was not sure of is withheld,
    // and a bar of 0 withholds nothing.
    let confidence = v["confidence"].as_f64();
    assert_eq!(confidence.is_some(), changed, "{v}");
    assert!(confidence.is_none_or(|c| c > 0.0 && c <= 1.0), "{v}");
    let barred = json_ok(&redraft(
        &[
            &args[..],
            &[
                "--json",
                "--max-change",
                "1000",
                "--min-edit-confidence",
                "1",
            ],
        ]
        .concat(),
        "",
    ));
    let unsure = confidence.is_some_and(|c| c < 1.0);
    assert_eq!(barred["unsure"], unsure, "{barred}");
    assert_eq!(
        barred["edits"].as_array().unwrap().is_empty(),
        unsure || !changed
    );
    assert_eq!(v["unsure"], false);
    let refused = redraft(&[&args[..], &["--min-edit-confidence", "1.5"]].concat(), "");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("from 0 to 1"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let (start, end) = (
        v["region"]["start"].as_u64().unwrap() as usize,
        v["region"]["end"].as_u64().unwrap() as usize,
    );
    let cursor = text.find("width = 3").unwrap() + "width".len() - 1;
    assert!(
        start <= cursor && cursor <= end,
        "{start}..{end} holds the cursor"
    );
    assert_eq!(v["history_edits"], 1);
    assert!(v["forwards"].as_u64().unwrap() >= 1);
    assert!(v["tokens_per_forward"].as_f64().unwrap() > 0.0);
    assert_eq!(v["sampler"]["draft_tau"], 0.5);
    let mut edited = text.to_string();
    for edit in v["edits"].as_array().unwrap().iter().rev() {
        let (a, b) = (
            edit["start"].as_u64().unwrap() as usize,
            edit["end"].as_u64().unwrap() as usize,
        );
        assert!(start <= a && b <= end, "edit {a}..{b} inside the region");
        edited.replace_range(a..b, edit["text"].as_str().unwrap());
    }
    let new_region = v["new_region"].as_str().unwrap();
    let expected = format!("{}{}{}", &text[..start], new_region, &text[end..]);
    // Line endings and a final newline of the rewrite are the document's business.
    assert_eq!(edited.trim_end(), expected.trim_end());

    let out = redraft(&[&args[..], &["--max-change", "1000"]].concat(), "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let diff = String::from_utf8(out.stdout).unwrap();
    if v["edits"].as_array().unwrap().is_empty() {
        assert_eq!(diff, "");
    } else {
        let patches = redraft_context::edit::parse_patches(&diff).unwrap();
        assert_eq!(patches.len(), 1);
        assert_eq!(
            redraft_context::edit::apply(text, &patches[0]).unwrap(),
            edited
        );
    }
}

#[test]
fn next_edit_refuses_a_cursor_inside_a_character_and_bad_history() {
    let out = redraft(
        &["complete", "--next-edit", "--stdin-json"],
        r#"{"text": "let é = 1;\n", "cursor": 5}"#,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a character boundary"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.rs");
    std::fs::write(&file, "fn a() {}\n").unwrap();
    let history = dir.path().join("h.diff");
    let with_history = |text: &str| {
        std::fs::write(&history, text).unwrap();
        let (file, history) = (path(&file), path(&history));
        let args = [
            "complete",
            "--next-edit",
            "--file",
            file,
            "--line",
            "1",
            "--column",
            "1",
        ];
        redraft(&[&args[..], &["--history", history, "--json"]].concat(), "")
    };
    let out = with_history("--- a/a.rs\n+++ b/a.rs\n@@ nonsense @@\n-x\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("edit history"));
    // A history that is no diff at all (a wrong file) is said, and the edit computed without it.
    let out = with_history("these are my notes, not a diff\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the history holds no edit"), "{stderr}");
}

/// Commit bars outside (0, 1] are refused as a `redraft.json` preset's are.
#[test]
fn commit_bars_outside_zero_to_one_are_refused() {
    for (flag, value) in [("--tau", "1.5"), ("--tau", "0"), ("--draft-tau", "2")] {
        let out = redraft(
            &["complete", "--stdin-json", flag, value],
            r#"{"prefix": "a", "suffix": ""}"#,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains("above 0 and at most 1"), "{stderr}");
    }
}

/// `--max-change` is a share of the region, 0 or more: `nan` would turn the guard off without a
/// word (no share is more than it) and a negative one would mean 0, so both are mistakes.
#[test]
fn a_max_change_that_is_no_share_exits_2() {
    for value in ["nan", "-0.5", "half"] {
        let flag = format!("--max-change={value}");
        let out = redraft(
            &["complete", "--next-edit", "--stdin-json", &flag],
            r#"{"text": "fn a() {}\n", "cursor": 3}"#,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(
            stderr.contains("a share of the region, 0 or more"),
            "{flag}: {stderr}"
        );
    }
}

/// `redraft` alone in a fresh directory (so no `redraft-lab` of the build is beside it), with
/// `lab` (a shell script body) as the `redraft-lab` next to it if given. The binary is a hard
/// link where the file system allows, so no file of it is ever open for writing.
fn lone_redraft(lab: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("redraft");
    let binary = redraft_tests::cli::redraft_binary();
    if std::fs::hard_link(&binary, &exe).is_err() {
        std::fs::copy(&binary, &exe).unwrap();
    }
    if let Some(body) = lab {
        let script = dir.path().join("redraft-lab");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, exe)
}

/// `command`'s output, started again while the kernel says its file is busy: a file this test
/// process just wrote stays open for writing in any child another test thread forks before that
/// child's exec closes it, and exec refuses a file open for writing (ETXTBSY).
fn output_when_not_busy(command: &mut std::process::Command) -> std::process::Output {
    for _ in 0..100 {
        match command.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            result => return result.unwrap(),
        }
    }
    panic!("{command:?} stayed busy for 2 s")
}

#[test]
fn developer_commands_are_handed_to_redraft_lab_with_their_arguments_and_status() {
    let (dir, exe) = lone_redraft(Some(r#"echo "lab got: $*"; exit 3"#));
    let out = output_when_not_busy(
        std::process::Command::new(&exe)
            .args(["eval", "--bench", "x y", "--json"])
            .env("PATH", ""),
    );
    assert_eq!(out.status.code(), Some(3), "the lab's status comes back");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "lab got: eval --bench x y --json\n"
    );
    drop(dir);
}

#[test]
fn a_developer_command_without_redraft_lab_says_how_to_get_it() {
    let (_dir, exe) = lone_redraft(None);
    let out = output_when_not_busy(
        std::process::Command::new(&exe)
            .args(["train", "--corpus", "c"])
            .env("PATH", ""),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("redraft-lab") && stderr.contains("cargo build --release -p redraft-lab"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_command_is_an_error_naming_the_commands() {
    let out = redraft(&["frobnicate"], "");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown command `frobnicate`")
            && stderr.contains("complete, lsp, serve, convert, pull and models"),
        "{stderr}"
    );
}

/// `--effort` starts from the model's own preset where its `redraft.json` tunes one; a flag
/// overrides only what it names.
#[test]
fn effort_is_the_models_tuned_preset_and_flags_override_it() {
    let model = model_dir();
    let redraft_json = model.path().join("redraft.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&redraft_json).unwrap()).unwrap();
    settings["efforts"] =
        serde_json::json!({"low": {"schedule": {"kind": "top-k", "k": 2}, "max_steps": 3}});
    std::fs::write(&redraft_json, settings.to_string()).unwrap();
    let request = r#"{"prefix": "fn f() {", "suffix": "}"}"#;
    let run =
        |extra: &[&str]| json_ok(&complete_json(model.path(), request, extra))["sampler"].clone();
    let low = run(&["--effort", "low"]);
    assert_eq!(
        low["schedule"],
        serde_json::json!({"kind": "top-k", "k": 2})
    );
    assert_eq!(low["max_steps"], 3);
    let tau = run(&["--effort", "low", "--tau", "0.5"]);
    assert_eq!(
        tau["schedule"],
        serde_json::json!({"kind": "threshold", "tau": 0.5})
    );
    assert_eq!(tau["max_steps"], 3);
    // Untuned: the built-in medium.
    let medium = run(&[]);
    assert_eq!(
        medium["schedule"],
        serde_json::json!({"kind": "threshold", "tau": 0.8999999761581421})
    );
    assert_eq!(medium["max_steps"], 8);
}

/// A request that names no language is read as Rust, as the HTTP door reads a prompt without a
/// file name (`Language::UNSAID`); an id redraft does not know is plain text, said on stderr;
/// a field a request has no place for (a misspelled `language`) is said too.
#[test]
fn a_request_without_a_language_is_read_as_the_http_door_reads_it() {
    let ask = |request: &str| {
        let out = redraft(&["complete", "--stdin-json", "--json"], request);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (json_ok(&out), stderr)
    };
    let (unsaid, quiet) = ask(r#"{"prefix": "fn f() {\n    let x = ", "suffix": ";\n}\n"}"#);
    assert_eq!(unsaid["plan"]["language"], "rust", "{unsaid}");
    assert!(!quiet.contains("not one redraft knows"), "{quiet}");
    let (unknown, note) = ask(r#"{"prefix": "let x = ", "suffix": ";\n", "language": "Rust"}"#);
    assert_eq!(unknown["plan"]["language"], "plaintext", "{unknown}");
    assert!(
        note.contains("language `Rust` is not one redraft knows")
            && note.contains("(rust, python, c, cpp,"),
        "{note}"
    );
    // Another editor's name for a language redraft knows is that language, and not said.
    let (tsx, quiet) = ask(r#"{"prefix": "const x = ", "language": "typescriptreact"}"#);
    assert_eq!(tsx["plan"]["language"], "typescript", "{tsx}");
    assert!(!quiet.contains("not one redraft knows"), "{quiet}");
    assert!(!quiet.contains("no field"), "{quiet}");
    // A misspelled field left the default in force without a word: it is said, and passed
    // over (a script may send more than a request needs).
    let (typo, note) = ask(r#"{"prefix": "def f():\n    return ", "langauge": "python"}"#);
    assert_eq!(typo["plan"]["language"], "rust", "{typo}");
    assert!(
        note.contains("stdin's `langauge` is no field of a request (prefix, suffix, language)"),
        "{note}"
    );
    // Likewise for a next edit's request; and text after the object is still a mistake.
    let out = redraft(
        &["complete", "--next-edit", "--stdin-json"],
        r#"{"text": "fn a() {}\n", "cursor": 3, "histroy": ""}"#,
    );
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{note}");
    assert!(
        note.contains("`histroy` is no field of a request (text, cursor, path, history, language)"),
        "{note}"
    );
    let trailing = redraft(&["complete", "--stdin-json"], r#"{"prefix": "a"} x"#);
    let stderr = String::from_utf8_lossy(&trailing.stderr);
    assert_eq!(trailing.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("stdin must hold"), "{stderr}");
}

/// Sampler values that mean nothing are command-line mistakes (exit 2, said by clap before
/// anything is loaded): a temperature that is negative or not a number, zero steps.
#[test]
fn sampler_values_that_mean_nothing_exit_2() {
    for flag in [
        "--temperature=nan",
        "--temperature=inf",
        "--temperature=-1",
        "--steps=0",
        "--per-step=0",
        "--refresh-every=0",
    ] {
        let out = redraft(&["complete", "--stdin-json", flag], "{\"prefix\": \"x\"}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("expected a"), "{flag}: {stderr}");
    }
    let ok = redraft(
        &[
            "complete",
            "--stdin-json",
            "--temperature",
            "0.7",
            "--steps",
            "2",
        ],
        "{\"prefix\": \"x\"}",
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

/// A next edit's stdin request may name its language, over the one its path's extension says:
/// a notebook's `.ipynb` of Rust is planned as Rust (the region the function around the
/// cursor), where the extension alone reads plain text.
#[test]
fn a_next_edit_request_may_name_its_language_over_the_paths() {
    let text = "fn norm(point: &Point) -> f64 {\n    (p.x * p.x + p.y * p.y).sqrt()\n}\n";
    let reason = |language: Option<&str>| {
        let mut request = serde_json::json!({
            "text": text, "cursor": 12, "path": "analysis.ipynb", "history": "",
        });
        if let Some(language) = language {
            request["language"] = serde_json::json!(language);
        }
        let args = [
            "complete",
            "--next-edit",
            "--stdin-json",
            "--json",
            "--effort",
            "low",
        ];
        let answer = json_ok(&redraft(&args, &request.to_string()));
        answer["region"]["reason"].as_str().unwrap().to_string()
    };
    assert_eq!(reason(Some("rust")), "block (function)");
    let plain = reason(None);
    assert!(!plain.starts_with("block"), "{plain}");
}
