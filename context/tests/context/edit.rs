//! The text layer of next-edit suggestions: diffs, edit history, the editable region, the plan
//! and the edits a rewritten region makes. Fixtures mark the cursor with `$0`.

use proptest::prelude::*;
use redraft_context::edit::{
    apply, edit_region, parse_patches, plan_edit, render_blocks, render_history,
    suggestion_from_region, unified_diff, DiffError, EditBudget, EditPlan, EditStyle,
    EditSuggestion, FilePatch, HistoryEdit, Hunk, HunkLine, TextEdit,
};
use redraft_context::{parse_rust, ByteEstimate, Language, Source, TokenCounter};

fn split(fixture: &str) -> (String, usize) {
    let cursor = fixture.find("$0").expect("fixture has a $0 cursor");
    (fixture.replacen("$0", "", 1), cursor)
}

/// One token per line: budgets in tests read as line counts.
struct Lines;

impl TokenCounter for Lines {
    fn count_tokens(&self, text: &str) -> usize {
        text.lines().count()
    }
}

fn context(text: &str) -> HunkLine {
    HunkLine::Context(text.to_string())
}

fn removed(text: &str) -> HunkLine {
    HunkLine::Removed(text.to_string())
}

fn added(text: &str) -> HunkLine {
    HunkLine::Added(text.to_string())
}

fn one_patch(diff: &str) -> FilePatch {
    let mut patches = parse_patches(diff).expect("the diff parses");
    assert_eq!(patches.len(), 1, "{patches:#?}");
    patches.remove(0)
}

// ---- diff: parsing ----

#[test]
fn parses_several_files_with_git_headers_and_prose_between() {
    let diff = "\
diff --git a/src/lib.rs b/src/lib.rs
index 83db48f..bf269f4 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@ fn main() {
 fn main() {
-    let x = 1;
+    let y = 1;
 }
@@ -10,2 +10,3 @@
 a
+b
 c
// User accepted prediction:
--- a/README.md\t2024-01-01 00:00:00
+++ b/docs/README.md
@@ -4 +4 @@
-old
+new
";
    let patches = parse_patches(diff).unwrap();
    assert_eq!(
        patches,
        vec![
            FilePatch {
                old_path: "src/lib.rs".into(),
                new_path: "src/lib.rs".into(),
                hunks: vec![
                    Hunk {
                        old_start: 1,
                        new_start: 1,
                        lines: vec![
                            context("fn main() {"),
                            removed("    let x = 1;"),
                            added("    let y = 1;"),
                            context("}"),
                        ],
                        ..Hunk::default()
                    },
                    Hunk {
                        old_start: 10,
                        new_start: 10,
                        lines: vec![context("a"), added("b"), context("c")],
                        ..Hunk::default()
                    },
                ],
            },
            FilePatch {
                old_path: "README.md".into(),
                new_path: "docs/README.md".into(),
                hunks: vec![Hunk {
                    old_start: 4,
                    new_start: 4,
                    lines: vec![removed("old"), added("new")],
                    ..Hunk::default()
                }],
            },
        ]
    );
}

#[test]
fn headers_without_counts_and_blank_lines_as_context() {
    // Hand-written diffs (Zed's edit-prediction cases) drop the space of empty context lines
    // and give counts that do not add up; a blank line past the counts ends the hunk.
    let diff = "--- a/f.rs\n+++ b/f.rs\n@@ -7 +7 @@\n fn a() {}\n\n-fn b() {}\n+fn c() {}\n\nUser edited f.rs\n";
    let patch = one_patch(diff);
    assert_eq!(
        patch.hunks[0].lines,
        vec![
            context("fn a() {}"),
            context(""),
            removed("fn b() {}"),
            added("fn c() {}"),
        ]
    );
    assert_eq!(patch.hunks[0].old_start, 7);
    assert_eq!(patch.hunks[0].old_len(), 3);
    assert_eq!(patch.hunks[0].new_len(), 3);
}

#[test]
fn blank_lines_within_the_counts_are_kept() {
    let patch = one_patch("--- a/f\n+++ b/f\n@@ -1,3 +1,2 @@\n a\n\n-b\n");
    assert_eq!(
        patch.hunks[0].lines,
        vec![context("a"), context(""), removed("b")]
    );
}

#[test]
fn no_newline_markers_belong_to_their_side() {
    let patch =
        one_patch("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n");
    assert!(patch.hunks[0].old_no_newline);
    assert!(!patch.hunks[0].new_no_newline);
    assert_eq!(
        patch.hunks[0].lines,
        vec![context("a"), removed("b"), added("c")]
    );

    let both =
        one_patch("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+c\n b\n\\ No newline at end of file\n");
    assert!(both.hunks[0].old_no_newline && both.hunks[0].new_no_newline);
}

#[test]
fn crlf_diffs_read_like_lf_ones() {
    let lf = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
    assert_eq!(
        parse_patches(&lf.replace('\n', "\r\n")).unwrap(),
        parse_patches(lf).unwrap()
    );
}

#[test]
fn removed_lines_that_look_like_file_headers_stay_in_the_hunk() {
    // `-- x` removed and `++ y` added, inside a hunk whose counts are not yet met.
    let patch = one_patch("--- a/f.sql\n+++ b/f.sql\n@@ -1,2 +1,2 @@\n--- x\n+++ y\n a\n");
    assert_eq!(
        patch.hunks[0].lines,
        vec![removed("-- x"), added("++ y"), context("a")]
    );
}

#[test]
fn a_hunk_without_a_file_header_has_empty_paths() {
    let patches = parse_patches("@@ -1 +1 @@\n-a\n+b\n").unwrap();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].old_path, "");
    assert_eq!(patches[0].hunks[0].lines, vec![removed("a"), added("b")]);
}

/// `git diff` in a merge with conflicts writes a combined diff (`diff --cc`, `@@@` hunks with
/// a column per parent): no one edit, so its hunks are skipped, and a plain patch after it is
/// read as ever.
#[test]
fn a_combined_diffs_hunks_are_skipped() {
    let diff = "diff --cc src/a.rs\nindex 1a2b,3c4d..5e6f\n--- a/src/a.rs\n+++ b/src/a.rs\n\
                @@@ -1,3 -1,3 +1,7 @@@\n  fn main() {\n++<<<<<<< HEAD\n +    let w = 3;\n\
                ++=======\n+     let x = 3;\n++>>>>>>> other\n  }\n\
                diff --git a/src/b.rs b/src/b.rs\n--- a/src/b.rs\n+++ b/src/b.rs\n\
                @@ -1 +1 @@\n-let a = 1;\n+let b = 1;\n";
    let patches = parse_patches(diff).unwrap();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert!(patches[0].hunks.is_empty(), "{patches:?}");
    assert_eq!(patches[1].new_path, "src/b.rs");
    assert_eq!(patches[1].hunks.len(), 1);
    let edits: Vec<HistoryEdit> = patches.iter().flat_map(HistoryEdit::from_patch).collect();
    assert_eq!(
        edits,
        vec![HistoryEdit {
            path: "src/b.rs".into(),
            old: "let a = 1;\n".into(),
            new: "let b = 1;\n".into(),
        }]
    );
}

/// A hunk that changes nothing (`@@ -0,0 +0,0 @@` and no lines) is no edit.
#[test]
fn an_empty_hunk_is_no_edit() {
    let patches = parse_patches("--- a/f\n+++ b/f\n@@ -0,0 +0,0 @@\n").unwrap();
    assert_eq!(patches[0].hunks.len(), 1);
    assert!(HistoryEdit::from_patch(&patches[0]).is_empty());
}

#[test]
fn a_bad_hunk_header_is_an_error_naming_the_line() {
    let error = parse_patches("--- a/f\n+++ b/f\n@@ -x +1 @@\n-a\n").unwrap_err();
    assert_eq!(
        error,
        DiffError::BadHunkHeader {
            line: 3,
            header: "@@ -x +1 @@".into()
        }
    );
    assert!(error.to_string().starts_with("line 3: bad hunk header"));
}

// ---- diff: applying ----

#[test]
fn applies_hunks_whose_line_numbers_are_the_files_to_an_excerpt() {
    // The hunks state lines 120 and 126 of the file; the excerpt starts at line 118.
    let excerpt =
        "fn a() {\n    one();\n}\n\nfn b() {\n    two();\n}\n\nfn c() {\n    three();\n}\n";
    let patch = one_patch(
        "--- a/f.rs\n+++ b/f.rs\n@@ -120,3 +120,3 @@\n }\n \n-fn b() {\n+fn b(x: u8) {\n@@ -126,2 +126,2 @@\n fn c() {\n-    three();\n+    three(x);\n",
    );
    assert_eq!(
        apply(excerpt, &patch).unwrap(),
        "fn a() {\n    one();\n}\n\nfn b(x: u8) {\n    two();\n}\n\nfn c() {\n    three(x);\n}\n"
    );
}

#[test]
fn repeated_lines_are_matched_nearest_the_stated_line() {
    let text = "x\nx\nx\nx\n";
    let patch = one_patch("--- a/f\n+++ b/f\n@@ -3 +3 @@\n-x\n+y\n");
    assert_eq!(apply(text, &patch).unwrap(), "x\nx\ny\nx\n");
}

#[test]
fn a_hunk_that_does_not_match_is_an_error_naming_it() {
    let patch =
        one_patch("--- a/f.rs\n+++ b/f.rs\n@@ -1 +1 @@\n-a\n+b\n@@ -5 +5 @@\n-missing\n+found\n");
    let error = apply("a\nc\n", &patch).unwrap_err();
    assert_eq!(
        error,
        DiffError::HunkNotFound {
            hunk: 2,
            old_start: 5,
            path: "f.rs".into()
        }
    );
    assert!(error.to_string().contains("hunk 2 of \"f.rs\""), "{error}");
}

#[test]
fn hunks_apply_in_order_and_never_overlap() {
    // The second hunk's line is before the first's match: it is not searched behind it.
    let patch = one_patch("--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n@@ -1 +1 @@\n-a\n+A\n");
    assert!(apply("a\nb\n", &patch).is_err());
}

#[test]
fn added_lines_take_the_texts_line_ending() {
    let patch = one_patch("--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n+new\n b\n");
    assert_eq!(apply("a\r\nb\r\n", &patch).unwrap(), "a\r\nnew\r\nb\r\n");
}

#[test]
fn insertion_at_the_end_of_a_text_without_a_final_newline() {
    let patch = one_patch("--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+c\n");
    assert_eq!(apply("a\nb", &patch).unwrap(), "a\nb\nc");
}

// ---- diff: writing ----

#[test]
fn unified_diff_is_git_style() {
    let old = "a\nb\nc\nd\ne\nf\ng\n";
    let new = "a\nB\nc\nd\ne\nf\ng\nh";
    assert_eq!(
        unified_diff("src/x.rs", old, new, 1),
        "--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -7 +7,2 @@\n g\n+h\n\\ No newline at end of file\n"
    );
    assert_eq!(unified_diff("x", old, old, 3), "");
}

#[test]
fn unified_diff_round_trips_edge_cases() {
    for (old, new) in [
        ("", "a\n"),
        ("a\n", ""),
        ("a", "a\n"),
        ("a\n", "a"),
        ("a\nb", "a\nb\nc"),
        ("a\nb\nc\n", "a\nc\n"),
        ("x\nx\nx\n", "x\ny\nx\nx\n"),
        ("a\r\nb\r\n", "a\r\nc\r\n"),
        // A last line ending in a lone `\r`: written `b\r\n\ No newline`, the `\r` is the
        // file's.
        ("a\r\nb\r", "a\r\nB\r"),
        ("a\nb\r", "a\nb"),
        ("a\nb", "a\nb\r"),
    ] {
        for context_lines in [0, 1, 3] {
            let diff = unified_diff("f", old, new, context_lines);
            let patches = parse_patches(&diff).unwrap();
            let applied = match patches.as_slice() {
                [] => old.to_string(),
                [patch] => apply(old, patch).unwrap(),
                more => panic!("one file expected: {more:#?}"),
            };
            assert_eq!(
                applied, new,
                "{old:?} -> {new:?}, context {context_lines}:\n{diff}"
            );
        }
    }
}

/// A written diff is the texts' bytes: a CRLF line keeps its `\r` (else `git apply` and `patch`
/// refuse the diff: its lines are not the file's), a line whose ending changed is a change,
/// and an LF text's diff is as before.
#[test]
fn unified_diff_writes_each_lines_exact_bytes() {
    assert_eq!(
        unified_diff("f", "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n", 1),
        "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n"
    );
    assert_eq!(
        unified_diff("f", "a\r\nb\nc", "a\r\nb\r\nc", 3),
        "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\r\n-b\n+b\r\n c\n\\ No newline at end of file\n"
    );
    assert_eq!(
        unified_diff("f", "a\r\nb\r", "a\r\nB\r", 0),
        "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\r\n\\ No newline at end of file\n+B\r\n\\ No newline at end of file\n"
    );
}

/// [`parse_patches`] reads a written CRLF or mixed-ending diff back to the edit written, its
/// lines without the `\r`s (line endings are the text's business when a parsed diff is
/// applied).
#[test]
fn a_written_crlf_diff_parses_back_to_the_same_edit() {
    let (old, new) = ("fn a() {\r\n    1\r\n}\n", "fn a() {\r\n    2\r\n}\n");
    let patch = one_patch(&unified_diff("src/a.rs", old, new, 3));
    assert_eq!(patch.old_path, "src/a.rs");
    assert_eq!(
        patch.hunks[0].lines,
        vec![
            context("fn a() {"),
            removed("    1"),
            added("    2"),
            context("}"),
        ]
    );
    assert!(!patch.hunks[0].old_no_newline && !patch.hunks[0].new_no_newline);
    let crlf = "a\r\nb\r\nc\r\nd\r\ne";
    let edited = "a\r\nB\r\nc\r\nd\r\ne\r\nf";
    assert_eq!(
        apply(crlf, &one_patch(&unified_diff("f", crlf, edited, 1))).unwrap(),
        edited
    );
    // A diff whose own lines all end in `\r\n` (one saved on Windows): the `\r` before a
    // no-newline marker is the diff's, not a lone `\r` of the file's (which a diff with `\n`
    // lines keeps: `unified_diff_round_trips_edge_cases`).
    let windows = "--- a/f\r\n+++ b/f\r\n@@ -1 +1 @@\r\n-a\r\n\\ No newline at end of file\r\n+b\r\n\\ No newline at end of file\r\n";
    let patch = one_patch(windows);
    assert_eq!(patch.hunks[0].lines, vec![removed("a"), added("b")]);
    assert_eq!(apply("a", &patch).unwrap(), "b");
    // Its last marker cut off from its own line break (a diff pasted, trimmed): the hunk's
    // header says the diff's lines end in `\r\n`; a written diff's (LF) keeps the file's `\r`.
    let trimmed = windows.strip_suffix("\r\n").unwrap();
    assert_eq!(one_patch(trimmed).hunks[0].lines, patch.hunks[0].lines);
    let lone_cr = unified_diff("f", "a\nb\r", "a\nc\r", 1);
    let trimmed = lone_cr.strip_suffix('\n').unwrap();
    assert_eq!(apply("a\nb\r", &one_patch(trimmed)).unwrap(), "a\nc\r");
}

/// A directory of its own under the system's temporary directory, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("redraft-context-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `git apply`'s verdict on `diff` for a file `name` holding `old`: the file's bytes after.
fn git_apply(scratch: &Scratch, name: &str, old: &str, diff: &str) -> Result<Vec<u8>, String> {
    let file = scratch.0.join(name);
    std::fs::write(&file, old).unwrap();
    let patch = scratch.0.join("edit.diff");
    std::fs::write(&patch, diff).unwrap();
    let output = std::process::Command::new("git")
        .arg("apply")
        .arg(&patch)
        .current_dir(&scratch.0)
        // Outside any repository, whatever the temporary directory is in: git applies to the
        // files as `patch` does.
        .env("GIT_CEILING_DIRECTORIES", scratch.0.parent().unwrap())
        .output()
        .expect("git runs (the workspace's tests need git)");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(std::fs::read(&file).unwrap())
}

/// The real `git apply` takes a written diff of a CRLF, a mixed-ending or an LF file, with or
/// without a final newline, and makes the new text byte for byte.
#[test]
fn git_applies_written_diffs_to_any_line_endings() {
    let scratch = Scratch::new("git-apply");
    for (old, new) in [
        ("fn a() {\r\n    1\r\n}\r\n", "fn a() {\r\n    2\r\n}\r\n"),
        ("a\r\nb\nc\r\nd\n", "a\r\nB\nc\r\nd\r\n"),
        ("a\r\nb\r\nc", "a\r\nb\r\nc\r\n"),
        ("a\r\nb\r\n", "a\r\nb"),
        ("\u{feff}a\r\nb\r\n", "\u{feff}A\r\nb\r\n"),
        ("a\nb\nc\n", "a\nc\nd"),
    ] {
        // Git wants context (a diff without any needs `--unidiff-zero`).
        for context_lines in [1, 3] {
            let diff = unified_diff("f.rs", old, new, context_lines);
            let applied = git_apply(&scratch, "f.rs", old, &diff);
            assert_eq!(
                applied.as_deref(),
                Ok(new.as_bytes()),
                "{old:?} -> {new:?}, context {context_lines}:\n{diff}"
            );
        }
    }
}

/// A name that holds a newline, a tab, a `"` or a `\` would break the header lines (a path
/// could add a header of its own); it is quoted as git quotes it, and read back.
#[test]
fn header_names_with_special_characters_are_quoted_as_git_quotes_them() {
    let (old, new) = ("x\n", "y\n");
    let evil = "x.rs\n+++ b/evil\n@@ -1 +1 @@";
    let diff = unified_diff(evil, old, new, 3);
    assert_eq!(
        diff,
        "--- \"a/x.rs\\n+++ b/evil\\n@@ -1 +1 @@\"\n+++ \"b/x.rs\\n+++ b/evil\\n@@ -1 +1 @@\"\n@@ -1 +1 @@\n-x\n+y\n"
    );
    assert_eq!(one_patch(&diff).old_path, evil);
    let odd = "d\\ir/\"q\"\t\u{1b}\u{7f}é z.rs";
    let diff = unified_diff(odd, old, new, 3);
    assert!(
        diff.starts_with("--- \"a/d\\\\ir/\\\"q\\\"\\t\\033\\177é z.rs\"\n"),
        "{diff}"
    );
    let patch = one_patch(&diff);
    assert_eq!(
        (patch.old_path.as_str(), patch.new_path.as_str()),
        (odd, odd)
    );
    // Git reads the quoted name as the file's (a name without a `/` of its own: the directory
    // need not exist).
    let scratch = Scratch::new("quoted-names");
    let name = "q\"\n\t\\z.rs";
    let diff = unified_diff(name, old, new, 3);
    assert_eq!(
        git_apply(&scratch, name, old, &diff).as_deref(),
        Ok(new.as_bytes())
    );
    // A name that ends in whitespace is quoted, so the whitespace stays the name's.
    let trailing = "src/x.rs ";
    let diff = unified_diff(trailing, old, new, 3);
    assert!(diff.starts_with("--- \"a/src/x.rs \"\n"), "{diff}");
    assert_eq!(one_patch(&diff).new_path, trailing);
    // Plain names, spaces and non-ASCII letters included, are as they were.
    assert!(unified_diff("src/a b/é.rs", old, new, 3)
        .starts_with("--- a/src/a b/é.rs\n+++ b/src/a b/é.rs\n"));
    // A timestamp after a quoted name is not part of it; an unterminated quote is a plain name.
    let patch = one_patch("--- \"a/x y\"\t2024-01-01\n+++ \"b/x\\101\"\n@@ -1 +1 @@\n-x\n+y\n");
    assert_eq!(
        (patch.old_path.as_str(), patch.new_path.as_str()),
        ("x y", "xA")
    );
    assert_eq!(
        one_patch("--- \"a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+y\n").old_path,
        "\"a/x"
    );
}

fn lines_text() -> impl Strategy<Value = String> {
    // Few distinct lines, so diffs have repeats to get wrong; sometimes no final newline.
    (
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "", "  d"]), 0..12),
        any::<bool>(),
    )
        .prop_map(|(lines, final_newline)| {
            let mut text = lines.join("\n");
            if final_newline && !lines.is_empty() {
                text.push('\n');
            }
            text
        })
}

proptest! {
    #[test]
    fn applying_a_written_diff_gives_the_new_text(
        old in lines_text(),
        new in lines_text(),
        context_lines in 0usize..4,
    ) {
        let diff = unified_diff("f", &old, &new, context_lines);
        let patches = parse_patches(&diff).unwrap();
        prop_assert_eq!(patches.len(), usize::from(old != new));
        let applied = match patches.first() {
            Some(patch) => apply(&old, patch).unwrap(),
            None => old.clone(),
        };
        prop_assert_eq!(applied, new, "{}", diff);
    }
}

// ---- history ----

fn edit(path: &str, old: &str, new: &str) -> HistoryEdit {
    HistoryEdit {
        path: path.into(),
        old: old.into(),
        new: new.into(),
    }
}

#[test]
fn a_change_is_widened_to_its_lines_and_one_line_of_context() {
    let text = "fn f() {\n    let x = 1;\n    g(x);\n}\n";
    let x = text.find("x =").unwrap();
    assert_eq!(
        HistoryEdit::from_change("f.rs", text, x..x + 1, "y"),
        edit(
            "f.rs",
            "fn f() {\n    let x = 1;\n    g(x);\n",
            "fn f() {\n    let y = 1;\n    g(x);\n"
        )
    );
    // A whole line deleted: the range ends at the next line's start, which it does not touch.
    let line = text.find("    let").unwrap();
    let next = text.find("    g(").unwrap();
    assert_eq!(
        HistoryEdit::from_change("f.rs", text, line..next, ""),
        edit(
            "f.rs",
            "fn f() {\n    let x = 1;\n    g(x);\n",
            "fn f() {\n    g(x);\n"
        )
    );
    // An insertion at a line start touches that line.
    assert_eq!(
        HistoryEdit::from_change("f.rs", text, next..next, "    h();\n"),
        edit(
            "f.rs",
            "    let x = 1;\n    g(x);\n}\n",
            "    let x = 1;\n    h();\n    g(x);\n}\n"
        )
    );
}

#[test]
fn a_change_at_the_edges_of_a_crlf_text_has_lf_whole_lines() {
    let text = "a\r\nb";
    assert_eq!(
        HistoryEdit::from_change("t", text, 4..4, "c"),
        edit("t", "a\nb\n", "a\nbc\n")
    );
    assert_eq!(
        HistoryEdit::from_change("t", text, 0..1, "A"),
        edit("t", "a\nb\n", "A\nb\n")
    );
}

#[test]
fn a_patch_gives_one_edit_per_hunk_with_one_line_of_outer_context() {
    let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n";
    let new = old.replace("\n5\n", "\nfive\n").replace("\n14\n", "\n");
    let patch = one_patch(&unified_diff("src/n.rs", old, &new, 3));
    assert_eq!(patch.hunks.len(), 2, "{patch}");
    assert_eq!(
        HistoryEdit::from_patch(&patch),
        vec![
            edit("src/n.rs", "4\n5\n6\n", "4\nfive\n6\n"),
            edit("src/n.rs", "13\n14\n15\n", "13\n15\n"),
        ]
    );
}

/// A `git diff` of a file that starts with a byte order mark carries it on line 1; the edit the
/// model reads does not (the text it is given has none). A hunk that changed only line
/// endings changed no text the model reads: no edit.
#[test]
fn a_patchs_edits_hold_no_byte_order_mark_and_no_ending_only_change() {
    let old = "\u{feff}fn a() {}\nfn b() {}\n";
    let new = "\u{feff}fn a() { 1 }\nfn b() {}\n";
    let patch = one_patch(&unified_diff("src/m.rs", old, new, 3));
    assert_eq!(
        HistoryEdit::from_patch(&patch),
        vec![edit(
            "src/m.rs",
            "fn a() {}\nfn b() {}\n",
            "fn a() { 1 }\nfn b() {}\n"
        )]
    );
    let endings = one_patch(&unified_diff("src/m.rs", "a\nb\n", "a\r\nb\n", 3));
    assert_eq!(endings.hunks.len(), 1, "{endings}");
    assert_eq!(HistoryEdit::from_patch(&endings), vec![]);
}

#[test]
fn history_renders_oldest_first_with_headers_for_other_files() {
    let edits = [
        edit(
            "src/shape.rs",
            "fn area(&self) -> u32 {\n    self.w * self.h\n",
            "fn area(&self) -> u32 {\n    self.width * self.height\n",
        ),
        edit("src/main.rs", "    let w = 3;\n", "    let width = 3;\n"),
        edit("src/main.rs", "a\nb\n", "a\nb\n"),
        edit("src/main.rs", "x\n", "x\ny\n"),
    ];
    assert_eq!(
        render_history(&edits, "src/main.rs", 1000, &ByteEstimate),
        "\
@@ src/shape.rs
 fn area(&self) -> u32 {
-    self.w * self.h
+    self.width * self.height
@@
-    let w = 3;
+    let width = 3;
@@
 x
+y
"
    );
}

#[test]
fn the_history_budget_keeps_the_newest_edits() {
    let edits = [
        edit("f", "one\n", "1\n"),
        edit("f", "two\n", "2\n"),
        edit("f", "three\n", "3\n"),
    ];
    // Each block is three lines (header, `-`, `+`).
    assert_eq!(
        render_history(&edits, "f", 8, &Lines),
        "@@\n-two\n+2\n@@\n-three\n+3\n"
    );
    assert_eq!(render_history(&edits, "f", 9, &Lines).lines().count(), 9);
    assert_eq!(render_history(&edits, "f", 2, &Lines), "");
    // A newest block that does not fit ends the history: no older block is shown past it.
    let mut with_big = edits.to_vec();
    with_big.push(edit("f", "a\nb\nc\n", "A\nB\nC\n"));
    assert_eq!(render_history(&with_big, "f", 6, &Lines), "");
}

// ---- region ----

fn region_in(fixture: &str, language: Language, budget: &EditBudget) -> (String, String) {
    let (text, cursor) = split(fixture);
    let source = Source {
        text: &text,
        cursor,
        language,
        tree: None,
    };
    let region = edit_region(&source, budget, &ByteEstimate);
    assert!(
        region.range.start <= cursor && cursor <= region.range.end,
        "{region:?} holds the cursor"
    );
    assert!(region.range.start == 0 || text[..region.range.start].ends_with('\n'));
    assert!(region.range.end == text.len() || text[..region.range.end].ends_with('\n'));
    (text[region.range].to_string(), region.reason.to_string())
}

fn check_region(fixture: &str, language: Language, region: &str, reason: &str) {
    let got = region_in(fixture, language, &EditBudget::default());
    assert_eq!(got, (region.to_string(), reason.to_string()), "{fixture}");
}

#[test]
fn rust_regions_are_the_smallest_enclosing_unit() {
    check_region(
        "fn a() {}\n\nfn f(x: u8) -> u8 {\n    let y = x + 1;\n    $0y * 2\n}\n\nfn g() {}\n",
        Language::Rust,
        "fn f(x: u8) -> u8 {\n    let y = x + 1;\n    y * 2\n}\n",
        "block (statements)",
    );
    check_region(
        "fn f(x: u8) -> u8 {\n    let a = 1;\n    let b = 2;\n    match x {\n        0 => a,\n        1 => $0b,\n        _ => 0,\n    }\n}\n",
        Language::Rust,
        "    match x {\n        0 => a,\n        1 => b,\n        _ => 0,\n    }\n",
        "block (match arms)",
    );
    check_region(
        "use std::fmt;\n\nstruct S {\n    a: u8,\n    $0b: u8,\n}\n",
        Language::Rust,
        "struct S {\n    a: u8,\n    b: u8,\n}\n",
        "block (struct fields)",
    );
    check_region(
        "struct S;\n\nimpl S {\n    fn a(&self) {}\n$0\n    fn b(&self) {}\n}\n",
        Language::Rust,
        "impl S {\n    fn a(&self) {}\n\n    fn b(&self) {}\n}\n",
        "block (impl/trait/mod body)",
    );
    check_region(
        "impl S {\n    fn a(\n        &self,\n        $0x: u8,\n    ) {\n        g();\n    }\n}\n",
        Language::Rust,
        "    fn a(\n        &self,\n        x: u8,\n    ) {\n        g();\n    }\n",
        "block (function)",
    );
}

#[test]
fn a_one_line_block_is_not_a_region() {
    check_region(
        "fn f() {\n    if a { b$0 }\n    c;\n}\n",
        Language::Rust,
        "fn f() {\n    if a { b }\n    c;\n}\n",
        "block (statements)",
    );
}

#[test]
fn regions_are_clamped_to_lines_around_the_cursor() {
    let body: String = (0..20).map(|i| format!("    s{i}();\n")).collect();
    let fixture = format!(
        "fn f() {{\n{}}}\n",
        body.replace("    s8();", "    s8($0);")
    );
    let expected: String = (5..=18).map(|i| format!("    s{i}();\n")).collect();
    check_region(
        &fixture,
        Language::Rust,
        &expected,
        "block (statements) clamped above and below",
    );
    let fixture = format!(
        "fn f() {{\n{}}}\n",
        body.replace("    s1();", "    s1($0);")
    );
    let expected: String = format!(
        "fn f() {{\n{}",
        (0..=11)
            .map(|i| format!("    s{i}();\n"))
            .collect::<String>()
    );
    check_region(
        &fixture,
        Language::Rust,
        &expected,
        "block (statements) clamped below",
    );
}

#[test]
fn the_token_budget_shrinks_the_region_from_its_far_ends() {
    let fixture = "fn f() {\n    a();\n    b();\n    c();$0\n    d();\n    e();\n}\n";
    let budget = EditBudget {
        region_tokens: 3 * ByteEstimate.count_tokens("    a();\n"),
        ..EditBudget::default()
    };
    // Below gets lines first (its limit is larger), then above.
    assert_eq!(
        region_in(fixture, Language::Rust, &budget),
        (
            "    b();\n    c();\n    d();\n".to_string(),
            "block (statements) clamped above and below to the token budget".to_string()
        )
    );
    // The cursor's line is never cut, even over budget.
    let budget = EditBudget {
        region_tokens: 1,
        ..EditBudget::default()
    };
    assert_eq!(region_in(fixture, Language::Rust, &budget).0, "    c();\n");
}

#[test]
fn python_and_plain_text_use_indentation_blocks() {
    check_region(
        "import os\n\ndef f(x):\n    a = 1\n    b = $0a\n\ndef g():\n    pass\n",
        Language::Python,
        "def f(x):\n    a = 1\n    b = a\n",
        "indentation block",
    );
    check_region(
        "def f(x):\n    if x:\n        y()\n    $0\n    return 1\n",
        Language::Python,
        "def f(x):\n    if x:\n        y()\n    \n    return 1\n",
        "indentation block",
    );
    check_region(
        "one\ntwo\nthr$0ee\nfour\n",
        Language::Plain,
        "one\ntwo\nthree\nfour\n",
        "lines around cursor",
    );
    check_region(
        "- list\n  - item$0\n  - item\nnext\n",
        Language::Plain,
        "- list\n  - item\n  - item\n",
        "indentation block",
    );
}

#[test]
fn cursor_on_the_first_and_last_lines_and_an_empty_file() {
    check_region(
        "$0fn f() {\n    x();\n}\n",
        Language::Rust,
        "fn f() {\n    x();\n}\n",
        "block (function)",
    );
    check_region(
        "fn f() {\n    x();\n}$0",
        Language::Rust,
        "fn f() {\n    x();\n}",
        "block (statements)",
    );
    check_region(
        "a\nb\nc$0",
        Language::Plain,
        "a\nb\nc",
        "lines around cursor",
    );
    check_region("a\nb\n$0", Language::Plain, "a\nb\n", "lines around cursor");
    check_region("$0", Language::Rust, "", "lines around cursor");
    check_region("$0", Language::Python, "", "lines around cursor");
}

#[test]
fn a_caller_kept_tree_gives_the_same_region() {
    let (text, cursor) = split("fn f() {\n    let a = 1;\n    $0a\n}\n");
    let tree = parse_rust(&text).unwrap();
    let with_tree = Source {
        text: &text,
        cursor,
        language: Language::Rust,
        tree: Some(&tree),
    };
    let without = Source {
        tree: None,
        ..with_tree
    };
    let budget = EditBudget::default();
    assert_eq!(
        edit_region(&with_tree, &budget, &ByteEstimate),
        edit_region(&without, &budget, &ByteEstimate)
    );
}

// ---- plan ----

fn plan_for(fixture: &str, budget: &EditBudget, history: &[HistoryEdit]) -> (String, EditPlan) {
    let (text, cursor) = split(fixture);
    let source = Source {
        text: &text,
        cursor,
        language: Language::Rust,
        tree: None,
    };
    let plan = plan_edit(
        &source,
        "src/lib.rs",
        history,
        budget,
        EditStyle::Redraft,
        &ByteEstimate,
    );
    (text, plan)
}

#[test]
fn a_plan_is_the_region_with_windows_on_either_side() {
    let fixture = "use std::fmt;\n\nfn a() {\n    one();\n}\n\nfn f(x: u8) {\n    let y = x;\n    $0g(y);\n}\n\nfn b() {\n    two();\n}\n";
    let history = [edit("src/lib.rs", "fn f() {\n", "fn f(x: u8) {\n")];
    let (text, plan) = plan_for(fixture, &EditBudget::default(), &history);
    assert_eq!(plan.region, "fn f(x: u8) {\n    let y = x;\n    g(y);\n}\n");
    assert_eq!(plan.region_range.start, text.find("fn f").unwrap());
    assert_eq!(&plan.region[plan.cursor_in_region..], "g(y);\n}\n");
    assert_eq!(plan.before, "use std::fmt;\n\nfn a() {\n    one();\n}\n\n");
    assert_eq!(plan.after, "\nfn b() {\n    two();\n}\n");
    assert_eq!((plan.before_start, plan.after_end), (0, text.len()));
    assert_eq!(plan.history, ["@@\n-fn f() {\n+fn f(x: u8) {\n"]);
    assert_eq!(plan.reason.to_string(), "block (statements)");
    assert_eq!(plan.language, Language::Rust);
    assert_eq!(plan.path, "src/lib.rs");
}

#[test]
fn windows_stay_within_budget_and_cut_at_lines() {
    let items: String = (0..40)
        .map(|i| format!("fn f{i}() {{\n    g({i});\n}}\n"))
        .collect();
    let fixture = items.replace("g(20)", "g($020)");
    let budget = EditBudget::default();
    let (text, plan) = plan_for(&fixture, &budget, &[]);
    assert_eq!(plan.region, "fn f20() {\n    g(20);\n}\n");
    assert!(ByteEstimate.count_tokens(&plan.before) <= budget.before_tokens);
    assert!(ByteEstimate.count_tokens(&plan.after) <= budget.after_tokens);
    assert!(
        plan.before.len() > 100 && plan.after.len() > 100,
        "{plan:#?}"
    );
    assert_eq!(
        format!("{}{}{}", plan.before, plan.region, plan.after),
        text[plan.before_start..plan.after_end]
    );
    // Cut where an item or statement starts and ends, never after a closing brace's line.
    assert!(!plan.before.starts_with('}'), "{:?}", plan.before);
    assert!(
        plan.after.ends_with("}\n") || plan.after.ends_with(";\n"),
        "{:?}",
        plan.after
    );
}

#[test]
fn the_after_window_takes_what_the_before_window_leaves() {
    let items: String = (0..40)
        .map(|i| format!("fn f{i}() {{\n    g({i});\n}}\n"))
        .collect();
    let fixture = items.replace("g(0)", "g($00)");
    let budget = EditBudget::default();
    let (_, plan) = plan_for(&fixture, &budget, &[]);
    assert_eq!(plan.before, "");
    let after = ByteEstimate.count_tokens(&plan.after);
    assert!(
        after > budget.after_tokens && after <= budget.after_tokens + budget.before_tokens,
        "{after}"
    );
}

// ---- extract ----

/// Plans `fixture`, rewrites the region with `rewrite`, returns the suggestion and the text
/// after applying it.
fn suggest(fixture: &str, rewrite: impl Fn(&str) -> String) -> (EditSuggestion, String) {
    let (text, plan) = plan_for(fixture, &EditBudget::default(), &[]);
    let cursor = plan.region_range.start + plan.cursor_in_region;
    let suggestion = suggestion_from_region(&text, &plan, &rewrite(&plan.region), cursor);
    let mut edited = text.clone();
    for edit in suggestion.edits.iter().rev() {
        edited.replace_range(edit.range.clone(), &edit.new_text);
    }
    (suggestion, edited)
}

fn text_edit(range: std::ops::Range<usize>, new_text: &str) -> TextEdit {
    TextEdit {
        range,
        new_text: new_text.into(),
    }
}

const FN: &str = "fn f(x: u8) {\n    let y = x;\n    $0g(y);\n    h(y);\n}\n";

#[test]
fn a_one_word_change_is_a_one_word_edit() {
    let (suggestion, edited) = suggest(FN, |region| region.replace("let y", "let mut y"));
    let at = FN.find("let y").unwrap() + 4;
    assert_eq!(suggestion.edits, vec![text_edit(at..at, "mut ")]);
    assert_eq!(edited, split(FN).0.replace("let y", "let mut y"));
    assert_eq!(
        suggestion.jump,
        Some(at),
        "the edit is above the cursor's line"
    );

    let (suggestion, _) = suggest(FN, |region| region.replace("g(y)", "g(&y)"));
    let at = split(FN).0.find("g(y)").unwrap() + 2;
    assert_eq!(suggestion.edits, vec![text_edit(at..at, "&")]);
    assert_eq!(suggestion.jump, None, "on the cursor's line");
}

#[test]
fn insertions_deletions_and_several_hunks() {
    let text = split(FN).0;
    let (suggestion, edited) = suggest(FN, |region| region.replace("    h(y);\n", ""));
    let h = text.find("    h(y);\n").unwrap();
    assert_eq!(suggestion.edits, vec![text_edit(h..h + 10, "")]);
    assert_eq!(edited, text.replace("    h(y);\n", ""));

    let (suggestion, edited) = suggest(FN, |region| {
        region.replace("    h(y);\n", "    h(y);\n    k();\n")
    });
    let end = text.find("}\n").unwrap();
    assert_eq!(suggestion.edits, vec![text_edit(end..end, "    k();\n")]);
    assert_eq!(suggestion.jump, Some(end));
    assert_eq!(edited, text.replace("    h(y);\n", "    h(y);\n    k();\n"));

    let (suggestion, edited) = suggest(FN, |region| {
        region.replace("x: u8", "x: u16").replace("h(y)", "h(x)")
    });
    assert_eq!(suggestion.edits.len(), 2, "{suggestion:?}");
    assert_eq!(
        suggestion.edits[0],
        text_edit(
            text.find("u8").unwrap() + 1..text.find("u8").unwrap() + 2,
            "16"
        )
    );
    assert_eq!(
        edited,
        text.replace("x: u8", "x: u16").replace("h(y)", "h(x)")
    );

    let (suggestion, edited) = suggest(FN, |_| String::new());
    assert_eq!(edited, "", "deleting the whole region is an edit");
    assert_eq!(suggestion.edits, vec![text_edit(0..text.len(), "")]);
}

#[test]
fn no_edit_when_only_line_endings_differ() {
    for rewrite in [
        |region: &str| region.to_string(),
        |region: &str| region.trim_end_matches('\n').to_string(),
        |region: &str| region.replace('\n', "\r\n"),
    ] {
        let (suggestion, _) = suggest(FN, rewrite);
        assert_eq!(suggestion, EditSuggestion::default());
        assert!(suggestion.is_empty());
    }
    let crlf = FN.replace('\n', "\r\n");
    let (suggestion, _) = suggest(&crlf, |region| region.replace("\r\n", "\n"));
    assert!(suggestion.is_empty(), "{suggestion:?}");
}

#[test]
fn crlf_documents_keep_their_line_endings() {
    let crlf = FN.replace('\n', "\r\n");
    let text = split(&crlf).0;
    // The model writes LF.
    let (suggestion, edited) = suggest(&crlf, |region| {
        region
            .replace("\r\n", "\n")
            .replace("    h(y);\n", "    h(y);\n    k(y);\n")
    });
    let end = text.find("}\r\n").unwrap();
    assert_eq!(suggestion.edits, vec![text_edit(end..end, "    k(y);\r\n")]);
    assert_eq!(
        edited,
        text.replace("    h(y);\r\n", "    h(y);\r\n    k(y);\r\n")
    );
}

#[test]
fn non_ascii_edits_are_on_char_boundaries() {
    let fixture = "fn f() {\n    let é = \"ü\";\n    $0g(é);\n}\n";
    let text = split(fixture).0;
    let (suggestion, edited) = suggest(fixture, |region| region.replace("\"ü\"", "\"ö\""));
    let at = text.find('ü').unwrap();
    assert_eq!(
        suggestion.edits,
        vec![text_edit(at..at + 'ü'.len_utf8(), "ö")]
    );
    assert_eq!(edited, text.replace('ü', "ö"));
    // Same first byte (0xC3) in é and ê: the prefix is whole chars.
    let (suggestion, edited) = suggest(fixture, |region| region.replace('é', "ê"));
    assert_eq!(suggestion.edits.len(), 2);
    for edit in &suggestion.edits {
        assert_eq!(&text[edit.range.clone()], "é");
        assert_eq!(edit.new_text, "ê");
    }
    assert_eq!(edited, text.replace('é', "ê"));
}

#[test]
fn a_region_at_the_end_of_a_text_without_a_final_newline() {
    let fixture = "fn f() {\n    $0g();\n}";
    let text = split(fixture).0;
    let (suggestion, edited) = suggest(fixture, |region| format!("{region}\nfn h() {{}}\n"));
    assert_eq!(edited, format!("{text}\nfn h() {{}}"));
    assert_eq!(suggestion.jump, Some(text.len()));
}

fn small_lines() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "b", "é", "  a b", "", "x é y"]).prop_map(String::from),
        0..8,
    )
}

proptest! {
    /// Applying the edits to the document gives the document with the region rewritten; the
    /// edits are in order, apart, on char boundaries and trimmed to where the texts differ.
    #[test]
    fn extracted_edits_rewrite_the_region(
        before in small_lines(),
        region in small_lines(),
        after in small_lines(),
        new in small_lines(),
        crlf in any::<bool>(),
    ) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let join = |lines: &[String]| lines.iter().map(|line| format!("{line}{eol}")).collect::<String>();
        let (before, region, after) = (join(&before), join(&region), join(&after));
        let text = format!("{before}{region}{after}");
        let range = before.len()..before.len() + region.len();
        let plan = EditPlan {
            path: "t".into(),
            history: Vec::new(),
            style: EditStyle::Redraft,
            before: before.clone(),
            region: region.clone(),
            original: region.clone(),
            cursor_in_region: 0,
            after: after.clone(),
            region_range: range.clone(),
            before_start: 0,
            after_end: text.len(),
            reason: edit_region(
                &Source { text: &text, cursor: range.start, language: Language::Plain, tree: None },
                &EditBudget::default(),
                &ByteEstimate,
            )
            .reason,
            language: Language::Plain,
        };
        // The model writes LF whatever the document has.
        let new_lf: String = new.iter().map(|line| format!("{line}\n")).collect();
        let suggestion = suggestion_from_region(&text, &plan, &new_lf, range.start);
        // Into an empty region a lone newline is no edit; an empty document has no line
        // ending of its own, so it gets `\n`.
        let doc_eol = if text.is_empty() { "\n" } else { eol };
        let expected_region = if region.is_empty() && new_lf == "\n" {
            String::new()
        } else {
            new_lf.replace('\n', doc_eol)
        };
        let mut edited = text.clone();
        let mut end = 0;
        for edit in &suggestion.edits {
            prop_assert!(edit.range.start >= end, "in order and apart: {:?}", suggestion.edits);
            prop_assert!(text.is_char_boundary(edit.range.start) && text.is_char_boundary(edit.range.end));
            let old = &text[edit.range.clone()];
            prop_assert!(old != edit.new_text);
            if let (Some(a), Some(b)) = (old.chars().next(), edit.new_text.chars().next()) {
                prop_assert_ne!(a, b, "trimmed at the front: {:?}", edit);
            }
            if let (Some(a), Some(b)) = (old.chars().last(), edit.new_text.chars().last()) {
                prop_assert_ne!(a, b, "trimmed at the back: {:?}", edit);
            }
            end = edit.range.end;
        }
        for edit in suggestion.edits.iter().rev() {
            edited.replace_range(edit.range.clone(), &edit.new_text);
        }
        prop_assert_eq!(edited, format!("{before}{expected_region}{after}"));
        prop_assert_eq!(suggestion.edits.is_empty(), expected_region == region);
    }
}

const SAMPLE_RUST: &str = "use std::fmt;\r\n\r\n/// Ünïcode ✓\r\nstruct S {\r\n    a: u8,\r\n    b: String,\r\n}\r\n\r\nimpl S {\r\n    fn f(&self, x: u8) -> u8 {\r\n        match x {\r\n            0 => 1,\r\n            _ => {\r\n                let é = \"ü\";\r\n                é.len() as u8\r\n            }\r\n        }\r\n    }\r\n}\r\n";

const SAMPLE_PYTHON: &str = "import os\n\nclass A:\n    def f(self, x):\n        if x:\n            return 'é'\n\n        return None\n\n\tdef g(self):\n\t\tpass\n";

proptest! {
    /// Wherever the cursor is, the region holds its line, is whole lines within the line
    /// limits, and the plan's pieces are the document's text around it.
    #[test]
    fn regions_are_whole_lines_around_any_cursor(
        cursor in 0usize..400,
        python in any::<bool>(),
        lines_above in 0usize..4,
        lines_below in 0usize..12,
    ) {
        let (text, language) = if python {
            (SAMPLE_PYTHON, Language::Python)
        } else {
            (SAMPLE_RUST, Language::Rust)
        };
        let budget = EditBudget { lines_above, lines_below, ..EditBudget::default() };
        let source = Source { text, cursor, language, tree: None };
        let plan = plan_edit(&source, "f", &[], &budget, EditStyle::Redraft, &ByteEstimate);
        let range = plan.region_range.clone();
        let mut cursor = cursor.min(text.len());
        while !text.is_char_boundary(cursor) {
            cursor -= 1;
        }
        prop_assert_eq!(range.start + plan.cursor_in_region, cursor);
        prop_assert!(range.start == 0 || text[..range.start].ends_with('\n'));
        prop_assert!(range.end == text.len() || text[..range.end].ends_with('\n'));
        let line_start = text[..cursor].rfind('\n').map_or(0, |at| at + 1);
        let above = text[range.start..line_start].matches('\n').count();
        let below = text[cursor..range.end].matches('\n').count().saturating_sub(1);
        prop_assert!(above <= lines_above && below <= lines_below, "{:?}: {} above, {} below", plan.region, above, below);
        prop_assert_eq!(
            format!("{}{}{}", plan.before, plan.region, plan.after),
            &text[plan.before_start..plan.after_end]
        );
    }
}

#[test]
fn the_changed_fraction_is_the_larger_of_what_is_removed_and_inserted_over_the_region() {
    use redraft_context::edit::{EditSuggestion, TextEdit};
    let edit = |range: std::ops::Range<usize>, text: &str| TextEdit {
        range,
        new_text: text.into(),
    };
    assert_eq!(EditSuggestion::default().changed_fraction(40), 0.0);
    let rename = EditSuggestion {
        edits: vec![edit(4..5, "width"), edit(20..21, "width")],
        jump: None,
    };
    assert_eq!(rename.changed_fraction(40), 0.25);
    let deletion = EditSuggestion {
        edits: vec![edit(0..30, "")],
        jump: None,
    };
    assert_eq!(deletion.changed_fraction(40), 0.75);
    assert_eq!(deletion.changed_fraction(0), 30.0);
}

// ---- Sweep's style ----

#[test]
fn sweep_history_blocks_are_original_and_updated_lines() {
    let edits = [
        edit("src/a.rs", "fn a() {}\n", "fn a() {}\n"),
        edit(
            "src/a.rs",
            "let w = 3;\nuse(w);\n",
            "let width = 3;\nuse(w);\n",
        ),
        edit("src/b.rs", "x\n", "x\ny\n"),
    ];
    let blocks = render_blocks(&edits, "src/a.rs", 1000, &ByteEstimate, EditStyle::Sweep);
    // Zed's sweep_prompt.rs: `{path}.diff`, `original:` and `updated:` each before their lines
    // (context included), the engine adds `<|file_sep|>` before and a newline after; an edit
    // that changes nothing is left out.
    assert_eq!(
        blocks,
        [
            "src/a.rs.diff\noriginal:\nlet w = 3;\nuse(w);\nupdated:\nlet width = 3;\nuse(w);",
            "src/b.rs.diff\noriginal:\nx\nupdated:\nx\ny",
        ]
    );
    // At most three, the newest; a long side keeps its first 20 and last 19 lines.
    let many: Vec<HistoryEdit> = (0..5)
        .map(|i| edit("f", &format!("{i}\n"), &format!("{i}{i}\n")))
        .collect();
    let blocks = render_blocks(&many, "f", 1000, &ByteEstimate, EditStyle::Sweep);
    assert_eq!(blocks.len(), 3);
    assert!(blocks[0].contains("original:\n2\n"), "{blocks:?}");
    let long: String = (0..50).map(|i| format!("l{i}\n")).collect();
    let block = edit("f", &long, "x\n").render_sweep();
    let original: Vec<&str> = block
        .split("original:\n")
        .nth(1)
        .unwrap()
        .split("\nupdated:")
        .next()
        .unwrap()
        .lines()
        .collect();
    assert_eq!(original.len(), 40);
    assert_eq!(
        (original[19], original[20], original[21]),
        ("l19", "...", "l31")
    );
    assert_eq!(original[39], "l49");
}

fn sweep_plan(text: &str, cursor: usize, history: &[HistoryEdit]) -> EditPlan {
    let source = Source {
        text,
        cursor,
        language: Language::Rust,
        tree: None,
    };
    plan_edit(
        &source,
        "src/lib.rs",
        history,
        &EditBudget::default(),
        EditStyle::Sweep,
        &ByteEstimate,
    )
}

#[test]
fn a_sweep_window_is_ten_lines_either_side_of_the_cursor_whatever_the_syntax() {
    let text: String = (0..40).map(|i| format!("let v{i} = {i};\n")).collect();
    let cursor = text.find("let v20").unwrap() + 4;
    let plan = sweep_plan(&text, cursor, &[]);
    let lines: Vec<&str> = plan.region.lines().collect();
    assert_eq!(lines.len(), 21);
    assert_eq!((lines[0], lines[20]), ("let v10 = 10;", "let v30 = 30;"));
    assert_eq!(plan.style, EditStyle::Sweep);
    assert_eq!(plan.original, plan.region, "no edit to undo");
    // Near the top the window is what there is.
    let plan = sweep_plan(&text, 3, &[]);
    assert_eq!(plan.region.lines().count(), 11);
}

#[test]
fn the_original_window_undoes_the_latest_edit_of_the_file_where_it_shows() {
    let text = "fn f(width: u32) {\n    g(w);\n}\n";
    let cursor = text.find("g(w)").unwrap();
    let renamed = edit("src/lib.rs", "fn f(w: u32) {\n", "fn f(width: u32) {\n");
    let plan = sweep_plan(text, cursor, std::slice::from_ref(&renamed));
    assert_eq!(plan.original, "fn f(w: u32) {\n    g(w);\n}\n");
    // The latest edit of another file, or one whose lines are not in the window (or are in it
    // twice), leaves the window as it is.
    let elsewhere = edit("src/other.rs", "a\n", "b\n");
    let plan = sweep_plan(text, cursor, &[renamed, elsewhere]);
    assert_eq!(
        plan.original, "fn f(w: u32) {\n    g(w);\n}\n",
        "the latest of this file"
    );
    let gone = edit("src/lib.rs", "x\n", "y\n");
    assert_eq!(sweep_plan(text, cursor, &[gone]).original, text);
    let twice = "a\nb\na\n";
    let repeated = edit("src/lib.rs", "c\n", "a\n");
    assert_eq!(sweep_plan(twice, 0, &[repeated]).original, twice);
}

#[test]
fn a_long_context_model_plans_next_edits_within_a_few_thousand_positions() {
    use redraft_context::edit::EDIT_POSITIONS;
    assert_eq!(
        EditBudget::for_positions(32_768),
        EditBudget::for_positions(EDIT_POSITIONS)
    );
    let small = EditBudget::for_positions(512);
    assert_eq!(
        small.region_tokens, 160,
        "a small model's shares are its own"
    );
    assert!(EditBudget::for_positions(32_768).before_tokens <= EDIT_POSITIONS / 4);
}

/// The next-edit plan around a megabyte line (minified code): the region is the line (whole
/// lines or nothing), the code around it within the budget, and no text of more than the
/// budget's worth of bytes is counted whole, the line included.
#[test]
fn a_megabyte_line_is_planned_without_counting_it() {
    let unit = "function b(c){return c+1};var x=[1,2,3].map(function(d){return d*2});";
    let line = unit.repeat(1 << 14);
    let text = format!("{line}\n{line}\n{line}\n");
    let cursor = line.len() + 1 + line.len() / 2;
    let source = Source {
        text: &text,
        cursor,
        language: Language::Plain,
        tree: None,
    };
    let budget = EditBudget::for_positions(1024);
    let counter = crate::context::Bounded::default();
    let plan = plan_edit(
        &source,
        "bundle.min.js",
        &[],
        &budget,
        EditStyle::Redraft,
        &counter,
    );
    assert_eq!(plan.region, format!("{line}\n"));
    assert!(plan.before.is_empty() && plan.after.is_empty());
    // The largest budget a piece is counted within, a token's 8 bytes each.
    let most = (budget.region_tokens + budget.before_tokens + budget.after_tokens + 1) * 8;
    assert!(
        counter.longest_counted.get() <= most,
        "counted {} bytes at once",
        counter.longest_counted.get()
    );
}
