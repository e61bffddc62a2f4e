//! Next-edit cases cut from two versions of a file: hunks pair up into history and target,
//! churn is dropped, and every case's text is the old file with exactly the changes before its
//! target applied.

use proptest::prelude::*;
use redraft_context::edit::cut::{
    case_from_edits, cases_from_versions, cut_versions, CutOptions, DropReason, EditCase,
};
use redraft_context::edit::TextEdit;

/// A case written out: the text with `$0` at the cursor, the history as rendered blocks, and
/// the target as `range -> new text` (or `none`).
fn show(case: &EditCase) -> String {
    let mut text = case.text.clone();
    text.insert_str(case.cursor, "$0");
    let history: String = case
        .history
        .iter()
        .map(|edit| edit.render(&case.path))
        .collect();
    let target = match &case.target {
        Some(t) => format!("{:?} -> {:?}", &case.text[t.range.clone()], t.new_text),
        None => "none".to_string(),
    };
    format!("{text}--- history\n{history}--- target {target}\n")
}

fn check(old: &str, new: &str, expect: &[&str]) {
    let cases = cases_from_versions("src/lib.rs", old, new, &CutOptions::default());
    let shown: Vec<String> = cases.iter().map(show).collect();
    let expect: Vec<String> = expect.iter().map(|s| s.to_string()).collect();
    assert_eq!(shown, expect, "\n{}", shown.join("\n"));
}

fn drops(old: &str, new: &str) -> Vec<(DropReason, usize)> {
    let cut = cut_versions("src/lib.rs", old, new, &CutOptions::default());
    assert!(
        cut.cases.is_empty(),
        "expected churn only: {:#?}",
        cut.cases
    );
    cut.dropped.into_iter().collect()
}

const AREA: &str = "\
fn area() -> u32 {
    let w = 3;
    let h = 4;
    w * h
}
";

#[test]
fn nearby_hunks_pair_up_as_history_and_target() {
    let new = AREA
        .replace("let w = 3", "let width = 3")
        .replace("w * h", "width * h");
    check(
        AREA,
        &new,
        &[
            "\
fn area() -> u32 {
    let width$0 = 3;
    let h = 4;
    w * h
}
--- history
@@
 fn area() -> u32 {
-    let w = 3;
+    let width = 3;
     let h = 4;
--- target \"\" -> \"idth\"
",
            "\
fn area() -> u32 {
    let width = 3;
    let h = 4;
    width$0 * h
}
--- history
@@
 fn area() -> u32 {
-    let w = 3;
+    let width = 3;
     let h = 4;
@@
     let h = 4;
-    w * h
+    width * h
 }
--- target none
",
        ],
    );
}

#[test]
fn three_hunks_give_two_targets_each_after_all_before_it() {
    let old = "a1\nx\nb1\nx\nc1\n";
    let new = "a2\nx\nb2\nx\nc2\n";
    let cases = cases_from_versions("f.rs", old, new, &CutOptions::default());
    let summary: Vec<(String, usize, Option<String>)> = cases
        .iter()
        .map(|c| {
            (
                c.text.clone(),
                c.history.len(),
                c.target.as_ref().map(|t| t.new_text.clone()),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a2\nx\nb1\nx\nc1\n".to_string(), 1, Some("2".to_string())),
            ("a2\nx\nb2\nx\nc1\n".to_string(), 2, Some("2".to_string())),
            ("a2\nx\nb2\nx\nc2\n".to_string(), 3, None),
        ]
    );
}

#[test]
fn hunks_far_apart_are_separate_groups_and_a_lone_hunk_is_no_case() {
    let filler: String = (0..20).map(|i| format!("let v{i} = {i};\n")).collect();
    let old = format!("let a = 1;\n{filler}let b = 2;\n");
    let new = format!("let a = 10;\n{filler}let b = 20;\n");
    assert_eq!(
        cases_from_versions("f.rs", &old, &new, &CutOptions::default()),
        []
    );
}

#[test]
fn history_is_capped_and_older_changes_stay_applied() {
    let old: String = (0..6).map(|i| format!("f({i});\nx;\n")).collect();
    let new: String = (0..6).map(|i| format!("g({i});\nx;\n")).collect();
    let options = CutOptions {
        max_history: 2,
        ..CutOptions::default()
    };
    let cases = cases_from_versions("f.rs", &old, &new, &options);
    let last_target = &cases[cases.len() - 2];
    assert_eq!(
        last_target.text,
        "g(0);\nx;\ng(1);\nx;\ng(2);\nx;\ng(3);\nx;\ng(4);\nx;\nf(5);\nx;\n"
    );
    assert_eq!(last_target.history.len(), 2);
    assert_eq!(last_target.history[0].old, "x;\nf(3);\nx;\n");
    assert_eq!(last_target.history[0].new, "x;\ng(3);\nx;\n");
}

#[test]
fn whitespace_only_changes_are_dropped() {
    let new = AREA
        .replace("let w = 3;", "let w =  3;")
        .replace("w * h", "w*h");
    assert_eq!(drops(AREA, &new), [(DropReason::Whitespace, 2)]);
}

#[test]
fn comment_only_changes_are_dropped() {
    let old = "/// Old docs.\nfn f() {\n    g(); // call g\n}\n";
    let new = "/// New docs, longer.\nfn f() {\n    g(); // call g, then return\n}\n";
    assert_eq!(drops(old, new), [(DropReason::Comment, 2)]);
    // A comment added on lines of its own, and a block comment reworded.
    let old = "fn f() {}\n/* one\n   two */\nfn g() {}\n";
    let new = "// new\nfn f() {}\n/* one\n   three */\nfn g() {}\n";
    assert_eq!(drops(old, new), [(DropReason::Comment, 2)]);
}

#[test]
fn version_strings_are_dropped() {
    let old = "#![doc(html_root_url = \"https://docs.rs/foo/1.2.3\")]\nconst V: &str = \"1.2.3\";\nconst W: &str = \"v0.9.0-beta.1\";\n";
    let new = "#![doc(html_root_url = \"https://docs.rs/foo/1.2.4\")]\nconst V: &str = \"1.3.0\";\nconst W: &str = \"v0.9.0\";\n";
    assert_eq!(drops(old, new), [(DropReason::Version, 1)]);
    // A float is code, not a version.
    let cut = cut_versions(
        "f.rs",
        "let a = 1.5;\nx;\nlet b = 2.5;\n",
        "let a = 1.25;\nx;\nlet b = 2.25;\n",
        &CutOptions::default(),
    );
    assert_eq!(cut.cases.len(), 2, "a target and the no-edit case");
}

#[test]
fn braces_and_blank_lines_are_no_code() {
    let old = "fn f() {\n    g();\n    }\n}\nfn h() {}\n";
    let new = "fn f() {\n    g();\n}\nfn h() {}\n";
    assert_eq!(drops(old, new), [(DropReason::NoCode, 1)]);
}

#[test]
fn giant_hunks_and_rewrites_are_dropped() {
    let keep: String = (0..100).map(|i| format!("keep({i});\n")).collect();
    let big_old: String = (0..30).map(|i| format!("old({i});\n")).collect();
    let big_new: String = (0..30).map(|i| format!("new({i});\n")).collect();
    assert_eq!(
        drops(&format!("{keep}{big_old}"), &format!("{keep}{big_new}")),
        [(DropReason::Giant, 1)]
    );
    let old: String = (0..10).map(|i| format!("a({i});\n")).collect();
    let new: String = (0..10)
        .map(|i| format!("b({i});\n{}", if i % 2 == 0 { "x\n" } else { "" }))
        .collect();
    assert_eq!(drops(&old, &new), [(DropReason::Rewrite, 1)]);
    assert_eq!(
        cut_versions("CHANGELOG.md", "a\n", "b\n", &CutOptions::default()).dropped,
        [(DropReason::Changelog, 1)].into_iter().collect()
    );
}

#[test]
fn churn_inside_a_group_is_applied_but_neither_history_nor_target() {
    // Unchanged lines between them keep the three changes apart.
    let old = "let a = 1;\nx;\n// note\nx;\nlet b = 2;\n";
    let new = "let a = 10;\nx;\n// a better note\nx;\nlet b = 20;\n";
    let cut = cut_versions("f.rs", old, new, &CutOptions::default());
    assert_eq!(
        cut.dropped,
        [(DropReason::Comment, 1)].into_iter().collect()
    );
    let first = &cut.cases[0];
    assert_eq!(
        first.text,
        "let a = 10;\nx;\n// a better note\nx;\nlet b = 2;\n"
    );
    assert_eq!(first.history.len(), 1);
    assert_eq!(first.target.as_ref().unwrap().new_text, "0");
}

#[test]
fn targets_out_of_the_region_are_dropped() {
    let options = CutOptions {
        lines_below: 2,
        group_lines: 8,
        ..CutOptions::default()
    };
    let old = "a(1);\nx;\nx;\nx;\nx;\na(2);\n";
    let new = "a(10);\nx;\nx;\nx;\nx;\na(20);\n";
    let cut = cut_versions("f.rs", old, new, &options);
    assert_eq!(
        cut.dropped,
        [(DropReason::OutOfReach, 1)].into_iter().collect()
    );
    assert_eq!(cut.cases.len(), 1, "the no-edit case remains");
    assert_eq!(cut.cases[0].target, None);
}

#[test]
fn made_up_edits_map_through_earlier_ones() {
    let base = "fn f(a: u32) {}\nfn g() { f(1); f(2); }\n";
    // History: the parameter, then the first call (later in the file, applied second); the
    // target is the second call, given as a range of the base text.
    let at = |s: &str| base.find(s).unwrap();
    let case = case_from_edits(
        "f.rs",
        base,
        &[
            TextEdit {
                range: at("a: u32") + 6..at("a: u32") + 6,
                new_text: ", b: bool".into(),
            },
            TextEdit {
                range: at("f(1)")..at("f(1)") + 4,
                new_text: "f(1, true)".into(),
            },
        ],
        Some(TextEdit {
            range: at("f(2)")..at("f(2)") + 4,
            new_text: "f(2, true)".into(),
        }),
    );
    expect_case(
        &case,
        "fn f(a: u32, b: bool) {}\nfn g() { f(1, true$0); f(2); }\n--- history\n@@\n-fn f(a: u32) {}\n+fn f(a: u32, b: bool) {}\n fn g() { f(1); f(2); }\n@@\n fn f(a: u32, b: bool) {}\n-fn g() { f(1); f(2); }\n+fn g() { f(1, true); f(2); }\n--- target \"\" -> \", true\"\n",
    );
    let target = case.target.unwrap();
    let mut applied = case.text.clone();
    applied.replace_range(target.range, &target.new_text);
    assert_eq!(
        applied,
        "fn f(a: u32, b: bool) {}\nfn g() { f(1, true); f(2, true); }\n"
    );
}

fn expect_case(case: &EditCase, expect: &str) {
    assert_eq!(show(case), expect, "\n{}", show(case));
}

#[test]
fn deletion_leaves_the_cursor_where_it_was() {
    let base = "let a = 1;\nlet b = 2;\nlet c = 3;\n";
    let case = case_from_edits(
        "f.rs",
        base,
        &[TextEdit {
            range: 11..22,
            new_text: String::new(),
        }],
        None,
    );
    assert_eq!(case.text, "let a = 1;\nlet c = 3;\n");
    assert_eq!(case.cursor, 11);
}

#[test]
fn the_same_versions_give_the_same_cases() {
    let new = AREA
        .replace("let w = 3", "let width = 3")
        .replace("w * h", "width * h");
    let a = cases_from_versions("f.rs", AREA, &new, &CutOptions::default());
    let b = cases_from_versions("f.rs", AREA, &new, &CutOptions::default());
    assert_eq!(a, b);
}

fn lines() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec![
            "a();",
            "b(1);",
            "let x = 2;",
            "}",
            "",
            "// c",
            "ü(é);",
        ]),
        0..30,
    )
    .prop_map(|v| v.into_iter().map(|s| format!("{s}\n")).collect())
}

proptest! {
    /// Applying a case's target gives the old file with every change up to that one applied:
    /// the new file's lines up to the target, the old file's after it.
    #[test]
    fn a_case_is_the_old_file_with_the_changes_before_its_target(
        old in lines(),
        edits in prop::collection::vec((0usize..30, 0usize..3, lines()), 0..6),
    ) {
        let mut new = old.clone();
        for (at, remove, insert) in edits {
            let at = at.min(new.len());
            let end = (at + remove).min(new.len());
            new.splice(at..end, insert.into_iter().take(3));
        }
        let (old, new) = (old.concat(), new.concat());
        let options = CutOptions { max_changed_fraction: 1.0, ..CutOptions::default() };
        for case in cases_from_versions("f.rs", &old, &new, &options) {
            prop_assert!(case.text.is_char_boundary(case.cursor) && case.cursor <= case.text.len());
            let mut after = case.text.clone();
            if let Some(target) = &case.target {
                prop_assert!(!(target.range.is_empty() && target.new_text.is_empty()));
                after.replace_range(target.range.clone(), &target.new_text);
            }
            // `after` is a prefix of `new` then a suffix of `old`: some split point works.
            let ok = (0..=after.len()).filter(|&i| after.is_char_boundary(i)).any(|i| {
                new.starts_with(&after[..i]) && old.ends_with(&after[i..])
            });
            prop_assert!(ok, "case text is not new-prefix + old-suffix:\n{after}");
        }
    }
}
