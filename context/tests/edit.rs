//! The text layer of next-edit suggestions: diffs, edit history, the editable region, the plan
//! and the edits a rewritten region makes. Fixtures mark the cursor with `$0`.

use proptest::prelude::*;
use redraft_context::edit::diff::{
    apply, parse_patches, unified_diff, DiffError, FilePatch, Hunk, HunkLine,
};

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
