//! What `redraft complete` reads and writes at its edges: a stdout that cannot be written (an
//! error) or that nobody reads any more (a quiet end), a byte order mark (not text), a file
//! extension in any case, and next-edit diffs that `git apply` takes for CRLF files, files
//! with a byte order mark and paths with special characters.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use redraft_tests::cli::{json_ok, path, redraft, redraft_binary, repo, writing_to, Stdout};

/// The test model: what these tests check is the command's, not a model's, so they do not
/// change with the embedded default.
fn small() -> &'static str {
    static SMALL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| path(&repo().join("fixtures/small-model")).to_string());
    SMALL.as_str()
}

/// `redraft args` with `stdin`, its standard output `stdout`.
fn into(stdout: Stdout, args: &[&str], stdin: &str) -> Output {
    writing_to(&redraft_binary(), &[], args, stdin, stdout)
}

/// A suggestion that cannot be written (a full disk) is an error, exit status 1, never a
/// suggestion lost with exit status 0 or a panic; a reader that stopped reading ends the
/// command quietly, as it ends git.
#[test]
fn output_that_cannot_be_written_is_an_error_and_a_closed_pipe_a_quiet_end() {
    let dir = tempfile::tempdir().unwrap();
    // The rest-of-line cursor the plain output test shows a suggestion at.
    let file = super::rest_of_line_file(dir.path());
    let at = [
        "complete",
        "--model",
        small(),
        "--file",
        path(&file),
        "--line",
        "3",
        "--column",
    ];
    let fim = [&at[..], &["13"]].concat();
    let next_edit = [&at[..], &["1", "--next-edit", "--max-change", "1000"]].concat();
    assert!(
        !redraft(&fim, "").stdout.is_empty(),
        "the fixture has a suggestion to lose"
    );
    for args in [
        fim.clone(),
        [&fim[..], &["--raw"]].concat(),
        [&fim[..], &["--json"]].concat(),
        [&fim[..], &["--raw", "--json"]].concat(),
        [&next_edit[..], &["--json"]].concat(),
    ] {
        let out = into(Stdout::Full, &args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("Error: cannot write to standard output")
                && stderr.contains("os error 28"),
            "{args:?}: {stderr}"
        );
    }
    let request = r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#;
    for extra in [&[][..], &["--json"], &["--raw"], &["--steps-view"]] {
        let args = [&["complete", "--model", small(), "--stdin-json"][..], extra].concat();
        let out = into(Stdout::Closed, &args, request);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("Error") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
    let edit = serde_json::json!({"text": "fn a() {\n    1\n}\n", "cursor": 9}).to_string();
    let out = into(
        Stdout::Closed,
        &[
            "complete",
            "--model",
            small(),
            "--next-edit",
            "--stdin-json",
            "--json",
        ],
        &edit,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const BOM: &str = "\u{feff}";

/// A UTF-8 byte order mark is not text: not a character of line 1, not given to the model. A
/// file with one completes as the same file without it; a request on stdin may start with one.
#[test]
fn a_byte_order_mark_is_neither_a_column_nor_text_for_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let text = "fn main() {\n    let x = 1;\n}\n";
    let (plain, marked) = (dir.path().join("plain.rs"), dir.path().join("marked.rs"));
    std::fs::write(&plain, text).unwrap();
    std::fs::write(&marked, format!("{BOM}{text}")).unwrap();
    let at = |file: &Path, column: &str| {
        let args = [
            "complete",
            "--model",
            small(),
            "--file",
            path(file),
            "--line",
            "1",
            "--column",
            column,
            "--max-tokens",
            "8",
            "--json",
        ];
        redraft(&args, "")
    };
    // Column 12 is the end of `fn main() {`, as an editor counts it.
    let (without, with) = (json_ok(&at(&plain, "12")), json_ok(&at(&marked, "12")));
    assert_eq!(with["middle"], without["middle"], "{with}");
    assert_eq!(with["plan"], without["plan"], "{with}");
    let past = at(&marked, "13");
    let stderr = String::from_utf8_lossy(&past.stderr);
    assert!(stderr.contains("it has 11 characters"), "{stderr}");

    let (prefix, suffix) = (dir.path().join("prefix.rs"), dir.path().join("suffix.rs"));
    std::fs::write(&prefix, format!("{BOM}fn main() {{\n    let x = ")).unwrap();
    std::fs::write(&suffix, format!("{BOM};\n}}\n")).unwrap();
    let files = json_ok(&redraft(
        &[
            "complete",
            "--model",
            small(),
            "--prefix-file",
            path(&prefix),
            "--suffix-file",
            path(&suffix),
            "--max-tokens",
            "8",
            "--json",
        ],
        "",
    ));
    let request = r#"{"prefix": "fn main() {\n    let x = ", "suffix": ";\n}\n"}"#;
    let args = [
        "complete",
        "--model",
        small(),
        "--stdin-json",
        "--max-tokens",
        "8",
        "--json",
    ];
    let stdin = json_ok(&redraft(&args, request));
    let marked_stdin = json_ok(&redraft(&args, &format!("{BOM}{request}")));
    assert_eq!(files["middle"], stdin["middle"], "{files}");
    assert_eq!(files["plan"], stdin["plan"], "{files}");
    assert_eq!(marked_stdin["middle"], stdin["middle"], "{marked_stdin}");
}

/// A file's extension names its language in any case (`.RS` is Rust, `.TS` TypeScript); one
/// the context layer does not know is plain text, said on stderr with the ones it knows.
#[test]
fn an_extension_in_any_case_names_the_language_and_an_unknown_one_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let ask = |name: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, "fn main() {\n    let x = ").unwrap();
        let out = redraft(
            &[
                "complete",
                "--model",
                small(),
                "--prefix-file",
                path(&file),
                "--max-tokens",
                "4",
                "--json",
            ],
            "",
        );
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (json_ok(&out)["plan"]["language"].clone(), stderr)
    };
    for (name, language) in [
        ("a.RS", "rust"),
        ("a.Py", "python"),
        ("a.rs", "rust"),
        ("a.ts", "typescript"),
        ("a.TSX", "typescript"),
        ("a.js", "javascript"),
        ("a.go", "go"),
        ("a.sh", "shellscript"),
    ] {
        let (said, stderr) = ask(name);
        assert_eq!(said, language, "{name}");
        assert!(
            !stderr.contains("not one redraft knows"),
            "{name}: {stderr}"
        );
    }
    let (said, note) = ask("a.xyz");
    assert_eq!(said, "plaintext");
    assert!(
        note.contains("extension `.xyz` (of ")
            && note.contains("is not one redraft knows the syntax of")
            && note.contains(".rs, .py, .pyi")
            && note.contains(".ts"),
        "{note}"
    );
    let (said, quiet) = ask("notes.TXT");
    assert_eq!(said, "plaintext");
    assert!(!quiet.contains("not one redraft knows"), "{quiet}");
}

/// `git apply`'s verdict on `diff` in `dir`, outside any repository.
fn git_apply(dir: &Path, diff: &[u8]) -> Output {
    let mut child = Command::new("git")
        .args(["apply", "-"])
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git runs (the workspace's tests need git)");
    child.stdin.take().unwrap().write_all(diff).unwrap();
    child.wait_with_output().unwrap()
}

/// The plain output of `--next-edit` is a diff `git apply` takes, whatever the file's line
/// endings and whether it starts with a byte order mark (kept: the diff is of the file as it
/// is), and applying it makes the file the JSON's edits make.
#[test]
fn next_edit_diffs_of_crlf_and_marked_files_apply_with_git() {
    let dir = tempfile::tempdir().unwrap();
    let lf = "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n\nfn main() {\n    let x = area(1, 2);\n}\n";
    for (name, text) in [
        ("crlf.rs", lf.replace('\n', "\r\n")),
        ("mixed.rs", lf.replacen('\n', "\r\n", 3)),
        ("marked.rs", format!("{BOM}{lf}")),
        (
            "marked_crlf.rs",
            format!("{BOM}{}", lf.replace('\n', "\r\n")),
        ),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, &text).unwrap();
        let args = [
            "complete",
            "--model",
            small(),
            "--next-edit",
            "--file",
            name,
            "--line",
            "3",
            "--column",
            "1",
            "--max-change",
            "1000",
            "--min-edit-confidence",
            "0",
        ];
        let run = |extra: &[&str]| {
            let out = Command::new(redraft_binary())
                .args([&args[..], extra].concat())
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        let json: serde_json::Value = serde_json::from_slice(&run(&["--json"])).unwrap();
        let diff = run(&[]);
        let edits = json["edits"].as_array().unwrap();
        // The test model rewrites this region; a model that does not leaves nothing to check.
        assert!(
            !edits.is_empty(),
            "{name}: no edit to write as a diff: {json}"
        );
        // The JSON's offsets are in the text after the byte order mark.
        let bom = if text.starts_with(BOM) { BOM } else { "" };
        let mut edited = text[bom.len()..].to_string();
        for edit in edits.iter().rev() {
            let range =
                edit["start"].as_u64().unwrap() as usize..edit["end"].as_u64().unwrap() as usize;
            edited.replace_range(range, edit["text"].as_str().unwrap());
        }
        let applied = git_apply(dir.path(), &diff);
        assert!(
            applied.status.success(),
            "{name}: {}\n{}",
            String::from_utf8_lossy(&applied.stderr),
            String::from_utf8_lossy(&diff)
        );
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{bom}{edited}"),
            "{name}"
        );
    }
}

/// The `path` of a next-edit request is the user's; the diff's headers quote one that holds a
/// newline (as git does) rather than let it write header lines of its own.
#[test]
fn next_edit_diff_headers_quote_a_path_with_special_characters() {
    let request = serde_json::json!({
        "text": "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n\nfn main() {\n    let x = area(1, 2);\n}\n",
        "cursor": 43,
        "path": "x.rs\n+++ b/evil\n@@ -1 +1 @@",
    });
    let out = redraft(
        &[
            "complete",
            "--model",
            small(),
            "--next-edit",
            "--stdin-json",
            "--max-change",
            "1000",
            "--min-edit-confidence",
            "0",
        ],
        &request.to_string(),
    );
    let diff = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!diff.is_empty(), "the test model rewrites this region");
    let headers: Vec<&str> = diff.lines().take(2).collect();
    assert_eq!(
        headers,
        [
            r#"--- "a/x.rs\n+++ b/evil\n@@ -1 +1 @@""#,
            r#"+++ "b/x.rs\n+++ b/evil\n@@ -1 +1 @@""#
        ],
        "{diff}"
    );
    assert_eq!(diff.matches("\n+++ ").count(), 1, "{diff}");
    let patches = redraft_context::edit::parse_patches(&diff).unwrap();
    assert_eq!(patches.len(), 1, "{diff}");
    assert_eq!(patches[0].old_path, request["path"].as_str().unwrap());
}
