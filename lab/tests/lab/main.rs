//! `redraft-lab` end to end, one binary (one link on 2 cores): remote backends (`backend`), FIM
//! and next-edit evaluation (`eval`, `eval_next_edit`; `eval_model`: a run tied to its model),
//! GGUF conversion and scoring (`gguf`), llama.cpp parity (`llama_parity`), training (`train`)
//! and training from a GGUF (`train_init`); Ctrl-C during `eval` (`interrupt`); and how its errors are printed and bad input told
//! (here).

mod backend;
mod eval;
mod eval_model;
mod eval_next_edit;
mod gguf;
mod interrupt;
mod llama_parity;
mod train;
mod train_init;

use redraft_tests::cli::{lab_binary, path, repo, writing_to, Stdout};

/// A developer command's error is printed as `redraft` prints one, for its own commands and
/// the shipped ones it offers too: `Error: ` and each cause once, no backtrace, whatever
/// `RUST_BACKTRACE` says (anyhow's `main` printed a stack under it), exit 1.
#[test]
fn errors_are_printed_as_redraft_prints_them() {
    let env = [("RUST_BACKTRACE", Some("1".to_string()))];
    let runs = [
        vec!["logprobs", "--model", "/nonexistent/model", "--text", "x"],
        vec!["complete", "--file", "/", "--line", "1", "--column", "1"],
    ];
    for args in runs {
        let out = redraft_tests::cli::lab_in(&env, &args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("Error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("acktrace"), "{args:?}: {stderr}");
    }
}

/// A flag value a command cannot use is a mistake on the command line: exit status 2 and
/// what is wrong, said before any work (the task file and model here do not exist, and
/// `bench` measures nothing), as clap says its own.
#[test]
fn flag_values_a_command_cannot_use_are_command_line_mistakes() {
    let runs: [(&[&str], &str); 22] = [
        (
            &["logprobs", "--text", "x", "--max-tokens", "0"],
            "--max-tokens <MAX_TOKENS>",
        ),
        (&["eval", "--tasks", "x", "--limit", "0"], "--limit <LIMIT>"),
        (
            &["eval", "--tasks", "x", "--sample", "0"],
            "--sample <SAMPLE>",
        ),
        (
            &["eval", "--tasks", "x", "--sweep", "--bogus"],
            "unexpected argument '--bogus' found",
        ),
        (
            &["eval", "--tasks", "x", "--sweep", "--effort bogus"],
            "unknown effort `bogus` (low, medium or high)",
        ),
        (
            &["eval", "--tasks", "x", "--backend", "notaurl"],
            "write it as http://HOST:PORT",
        ),
        (
            &["bench", "--lengths", "0"],
            "a length of 64 tokens or more",
        ),
        (
            &["bench", "--lengths", "512,16"],
            "a length of 64 tokens or more",
        ),
        // An empty task set, written over the --out file.
        (
            &["tasks", "--from-dir", "x", "--per-file", "0"],
            "--per-file <PER_FILE>",
        ),
        (
            &["tasks", "--from-dir", "x", "--max-tasks", "0"],
            "--max-tasks <MAX_TASKS>",
        ),
        (
            &["tasks", "humanevalpack-rust", "--max-tasks", "0"],
            "--max-tasks <MAX_TASKS>",
        ),
        (
            &["bench", "--configs", "/nonexistent"],
            "give small, medium, or a model directory or GGUF file",
        ),
        // A wall clock no `Duration` holds was a panic (exit 101); one too short to start an
        // interpreter, or an address space too small to map one, failed the run blaming it.
        (
            &["eval", "--tasks", "x", "--timeout-s", "nan"],
            "expected a number of seconds from 0.5 to 86400, got `nan`",
        ),
        (
            &["eval", "--tasks", "x", "--timeout-s", "inf"],
            "expected a number of seconds from 0.5 to 86400",
        ),
        (
            &["eval", "--tasks", "x", "--timeout-s", "1e30"],
            "expected a number of seconds from 0.5 to 86400",
        ),
        (
            &["eval", "--tasks", "x", "--timeout-s=-1"],
            "expected a number of seconds from 0.5 to 86400",
        ),
        (
            &["eval", "--tasks", "x", "--timeout-s", "0"],
            "expected a number of seconds from 0.5 to 86400",
        ),
        (
            &["eval", "--tasks", "x", "--memory-mb", "0"],
            "expected a whole number of MiB from 64 to 16777216",
        ),
        (
            &["eval", "--tasks", "x", "--memory-mb", "99999999999999"],
            "expected a whole number of MiB from 64 to 16777216",
        ),
        (&["eval", "--tasks", "x", "--jobs", "0"], "--jobs <JOBS>"),
        (
            &["tasks", "--from-dir", "x", "--jobs", "0"],
            "--jobs <JOBS>",
        ),
        (&["bench", "--repeats", "0"], "--repeats <REPEATS>"),
    ];
    for (args, says) in runs {
        let out = redraft_tests::cli::lab(args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing was measured");
        assert!(
            !stderr.contains("Usage: redraft-lab --"),
            "no usage of a command no one typed: {stderr}"
        );
        assert!(
            stderr.matches("For more information").count() <= 1,
            "clap's tip once, at the end: {stderr}"
        );
    }
}

/// Results that stdout cannot take (a full disk) are an error saying so, exit status 1, not a
/// panic; a reader that stops reading (`| head`) ends the command quietly, as it ends git.
#[test]
fn results_stdout_cannot_take_are_an_error_and_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("engine.jsonl");
    let sources = repo().join("engine/src");
    let build = [
        "tasks",
        "--from-dir",
        path(&sources),
        "--per-file",
        "1",
        "--max-tasks",
        "3",
        "--out",
        path(&tasks),
    ];
    let eval_out = dir.path().join("eval");
    let eval = [
        "eval",
        "--tasks",
        path(&tasks),
        "--canonical",
        "--out",
        path(&eval_out),
    ];
    for args in [&build[..], &eval] {
        let full = writing_to(&lab_binary(), &[], args, "", Stdout::Full);
        let stderr = String::from_utf8_lossy(&full.stderr);
        assert_eq!(full.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("Error: cannot write to standard output: No space left on device"),
            "{args:?}: {stderr}"
        );
        assert!(tasks.is_file(), "the work itself was done");
    }
    // The read end closed before anything is written.
    let closed = writing_to(&lab_binary(), &[], &eval, "", Stdout::Closed);
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("Error") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// A `--fim-file` the speed bench cannot cut rest-of-line completions from is an error naming
/// it, said before anything is timed: one that cannot be read was a warning after minutes of
/// measuring (exit 0, no completions timed), one without a line of code a panic.
#[test]
fn a_fim_file_the_bench_cannot_cut_is_an_error_before_any_timing() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.rs");
    std::fs::write(&short, "fn f() {}\n}\n").unwrap();
    let latin1 = dir.path().join("latin1.rs");
    std::fs::write(&latin1, b"// caf\xe9\nfn main() { let x = 1; }\n").unwrap();
    let missing = dir.path().join("missing.rs");
    let model = repo().join("assets/default-model");
    for (file, says) in [
        (
            &short,
            "no line (after the first) with 8 characters of code",
        ),
        (&latin1, "is not UTF-8 text"),
        (&missing, "No such file or directory"),
        (&dir.path().to_path_buf(), "Is a directory"),
    ] {
        let args = [
            "bench",
            "--configs",
            path(&model),
            "--lengths",
            "64",
            "--repeats",
            "1",
            "--python",
            "none",
            "--fim-file",
            path(file),
        ];
        let out = redraft_tests::cli::lab(&args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file:?}: {stderr}");
        assert!(
            stderr.contains(&format!("--fim-file {}", file.display())) && stderr.contains(says),
            "{file:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "nothing was timed: {stderr}");
    }
}

/// A tree no task can be cut from is an error naming it, and the task file `--out` names is
/// left as it was: it was replaced by an empty one ("0 tasks"), which `eval` then refuses.
#[test]
fn a_tree_without_a_task_to_cut_leaves_the_task_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("empty.rs"), "\n").unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    std::fs::write(&tasks, "{\"task_id\": \"kept\"}\n").unwrap();
    let args = ["tasks", "--from-dir", path(&tree), "--out", path(&tasks)];
    let out = redraft_tests::cli::lab(&args, "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no task could be cut from the .rs files under {}",
            tree.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&tasks).unwrap(),
        "{\"task_id\": \"kept\"}\n"
    );
}

/// `bench --out` in directories that do not exist yet is written (they are made before
/// anything is timed: the report was lost after the whole run), and a length past the model's
/// positions is said to be left out, not dropped silently.
#[test]
fn bench_makes_the_report_directories_and_names_lengths_it_cannot_time() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("not/yet/bench.json");
    let model = repo().join("assets/default-model");
    let args = [
        "bench",
        "--configs",
        path(&model),
        "--lengths",
        "64,512",
        "--repeats",
        "1",
        "--python",
        "none",
        "--fim-cuts",
        "0",
        "--out",
        path(&report),
    ];
    let out = redraft_tests::cli::lab(&args, "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("--lengths 512 is past the 256 positions of"),
        "{stderr}"
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rows = written["configs"][0]["forward"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{written}");
    // A directory where the file goes is refused before any timing.
    let args = [&args[..11], &["--out", path(dir.path())]].concat();
    let out = redraft_tests::cli::lab(&args, "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is a directory"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was timed");
}

/// `logprobs --text` and `--tokens` name files: help says so (`<FILE>`), and a value that is
/// no file is named with its flag, said before the model loads; it was `reading fn main() {}`
/// under help that called --text "the text to read".
#[test]
fn logprobs_text_and_tokens_are_files_and_say_so() {
    let help = redraft_tests::cli::lab(&["logprobs", "--help"], "");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--text <FILE>") && help.contains("--tokens <FILE>"),
        "{help}"
    );
    for (flag, what) in [
        ("--text", "the text itself"),
        ("--tokens", "the ids themselves"),
    ] {
        let out = redraft_tests::cli::lab(
            &[
                "logprobs",
                "--model",
                "/nonexistent/model",
                flag,
                "fn main() {}",
            ],
            "",
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{flag} fn main() {{}}: cannot read it ({flag} names a file, not {what})"
            )),
            "{stderr}"
        );
        assert!(!stderr.contains("/nonexistent/model"), "{stderr}");
    }
}

/// Without --rust-deps or $REDRAFT_EVAL_DEPS the crates are the build tree's target/eval-deps
/// whatever the current directory: help says so (it said `target/eval-deps`, read as the
/// current directory's).
#[test]
fn help_says_where_the_rust_crates_come_from() {
    for command in ["eval", "tasks"] {
        let help = redraft_tests::cli::lab(&[command, "--help"], "");
        let help = String::from_utf8_lossy(&help.stdout).replace(char::is_whitespace, " ");
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            help.contains("target/eval-deps of the source tree this binary was built from"),
            "{command}: {help}"
        );
    }
}
