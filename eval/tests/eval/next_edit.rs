//! Next-edit evaluation over Zed's own cases (read in place from `benchmarks/`): every
//! case reads as Zed's parser reads it, writes back to the same case, scores its own expected
//! patches perfectly and no edit at zero; the baselines, a resumable run, completions files and
//! cases built from two versions of a tree.

use std::path::{Path, PathBuf};

use redraft_eval::next_edit::build::{build_from_dirs, pair_files, write_cases, BuildOptions};
use redraft_eval::next_edit::case::{read_cases, NextEditCase};
use redraft_eval::next_edit::run::{evaluate, read_completions};
use redraft_eval::next_edit::score::{score, Counts};
use redraft_eval::next_edit::{Baseline, NextEditSource};

/// Zed's cases, read in place from the repository's `benchmarks/zed-next-edit`.
fn zed_dir() -> PathBuf {
    let dir = crate::support::benchmarks().join("zed-next-edit");
    assert!(
        dir.join("zed--change-match-arm.md").is_file(),
        "Zed's next-edit cases not found in {}: restore them with `git checkout -- benchmarks`",
        dir.display()
    );
    dir
}

fn zed_cases() -> Vec<NextEditCase> {
    read_cases(&zed_dir()).expect("Zed's cases read")
}

fn zed_case(name: &str) -> NextEditCase {
    NextEditCase::read(&zed_dir().join(format!("{name}.md"))).unwrap()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/next_edit")
}

#[test]
fn every_zed_case_reads() {
    let cases = zed_cases();
    assert_eq!(cases.len(), 19);
    for case in &cases {
        assert!(
            !case.path.is_empty() && !case.excerpt.is_empty(),
            "{}",
            case.name
        );
        assert!(case.cursor <= case.excerpt.len(), "{}", case.name);
        assert!(!case.repository_url.is_empty() && !case.revision.is_empty());
        assert!(
            !case.no_edit,
            "{}: every Zed case expects an edit",
            case.name
        );
        assert_eq!(case.expected.len(), case.expected_patches.len());
        for expected in &case.expected {
            assert_ne!(*expected, case.excerpt, "{}", case.name);
        }
        assert!(!case.history.is_empty(), "{}", case.name);
    }
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names[0], "codex-acp--add-derive");
    assert_eq!(names[18], "zed--change-match-arm");
}

/// Worked out by hand from the file and Zed's `cursor_excerpt`: the marker line's `^` is at
/// column 32 of the line below `project::Event::Disk { .. } => {`, right after `Disk`; the
/// excerpt is the block without the marker line and without its final newline; each expected
/// text is the excerpt with that one line rewritten.
#[test]
fn zed_change_match_arm_reads_as_zeds_parser_reads_it() {
    let case = zed_case("zed--change-match-arm");
    let excerpt = [
        "                    {",
        "                        project_state.recent_paths.remove(ix);",
        "                    }",
        "                    project_state.recent_paths.push_front(path);",
        "                }",
        "            }",
        "            project::Event::Disk { .. } => {",
        "                if cx.has_flag::<EditPredictionJumpsFeatureFlag>() {",
        "                    self.refresh_prediction_from_diagnostics(",
        "                        project,",
    ]
    .join("\n");
    assert_eq!(case.name, "zed--change-match-arm");
    assert_eq!(case.path, "crates/edit_prediction/src/edit_prediction.rs");
    assert_eq!(case.repository_url, "git@github.com:zed-industries/zed");
    assert_eq!(case.revision, "be5763632dccb33470ca233c36ccd9e5e790e3b2");
    assert_eq!(case.excerpt, excerpt);
    let line_start = excerpt.find("            project::Event::Disk").unwrap();
    assert_eq!(case.cursor, line_start + 32);
    assert!(case.excerpt[..case.cursor].ends_with("project::Event::Disk"));
    assert_eq!(
        case.expected,
        [
            excerpt.replace("Event::Disk {", "Event::DiskBasedDiagnosticsFinished {"),
            excerpt.replace("Event::Disk {", "Event::DiskBasedDiagnosticsStarted {"),
        ]
    );
    assert_eq!(case.history.len(), 1);
    assert!(!case.history[0].accepted_prediction);
    assert!(case.history[0]
        .diff
        .contains("+            project::Event::Disk { .. } => {"));
    assert!(case.expected_patches[0].outside.is_empty());
}

/// By hand: three history blocks, the second after `// User accepted prediction:`; the `^`
/// at column 29 of the marker line is right after `test_session_cookie_secur`; the one
/// expected patch rewrites three lines of the excerpt.
#[test]
fn flask_rename_accepted_prediction_reads_as_zeds_parser_reads_it() {
    let case = zed_case("flask--rename-accepted-prediction");
    let flags: Vec<bool> = case.history.iter().map(|h| h.accepted_prediction).collect();
    assert_eq!(flags, [false, true, false]);
    assert!(case.history[1].diff.starts_with(
        "--- a/tests/test_basic.py\n+++ b/tests/test_basic.py\n@@ -358,6 +358,14 @@\n"
    ));
    let excerpt = "    cookie = rv.headers[\"set-cookie\"].lower()\n    assert \"samesite=lax\" in cookie\n\n\n\
                   def test_session_cookie_secur(app, client):\n    app.config[\"SESSION_COOKIE_HTTPONLY\"] = True\n\n\
                   \x20   @app.route(\"/\")\n    def index():\n        flask.session[\"testing\"] = 42\n        return \"Hello World\"\n\n\
                   \x20   rv = client.get(\"/\")\n    assert \"httponly\" in rv.headers[\"set-cookie\"].lower()\n\n\n\
                   def test_missing_session(app):";
    assert_eq!(case.excerpt, excerpt);
    assert_eq!(
        case.cursor,
        excerpt.find("def test_session_cookie_secur").unwrap() + 29
    );
    assert!(case.excerpt[..case.cursor].ends_with("def test_session_cookie_secur"));
    let expected = excerpt
        .replace("cookie_secur(", "cookie_secure(")
        .replace("COOKIE_HTTPONLY\"", "COOKIE_SECURE\"")
        .replace("assert \"httponly\"", "assert \"secure\"");
    assert_eq!(case.expected, [expected]);
}

/// Zed's `<` marker takes the marker line's first non-blank column, 3 here, on a cursor line
/// (`\t/`) two bytes long: the offset lands at the start of the next line, as Zed's does.
#[test]
fn terraform_less_than_marker_keeps_zeds_column() {
    let case = zed_case("terraform--add-comment");
    assert!(case.excerpt[..case.cursor].ends_with("\tdefer a.mu.Unlock()\n\n\t/\n"));
    assert!(case.excerpt[case.cursor..].starts_with("\tresult := []addrs.AbsActionInstance{}"));
    // Two of its five patches have no `@@` line, which Zed reads as one hunk.
    assert_eq!(case.expected.len(), 5);
    assert!(case.expected[4].contains("\t// Collect all action instances"));
}

/// Zed's whole-file patches can reach past the excerpt: codex-acp's second alternative also
/// adds an import far above it.
#[test]
fn changes_outside_the_excerpt_are_counted_not_applied() {
    let case = zed_case("codex-acp--add-derive");
    assert!(case.expected_patches[0].outside.is_empty());
    assert_eq!(case.expected_patches[1].outside.len(), 1);
    assert!(case.expected_patches[1].outside[0].starts_with('+'));
    assert_eq!(case.expected[0], case.expected[1]);
    assert!(case.expected[0].starts_with("#[derive(Debug, Serialize)]\npub enum PromptArgsError {"));
}

/// vscode's expected patch also awaits a call two lines below the excerpt's end: no system
/// sees or changes it, so the exact answer (exact, delta-chrF 100) is not short of it in the
/// changed lines either (it scored recall 4 of 6 when those lines counted as misses).
#[test]
fn changed_lines_outside_the_excerpt_are_not_counted() {
    let case = zed_case("vscode--add-async-and-await");
    assert_eq!(case.expected_patches[0].outside.len(), 2);
    let scored = score(&case, &case.expected[0]);
    assert!(scored.exact && scored.delta_chrf == 100.0);
    assert_eq!(
        scored.lines,
        Counts {
            true_positives: 4,
            false_positives: 0,
            false_negatives: 0
        }
    );
    // Nothing suggested misses the four lines inside, not the two outside.
    assert_eq!(score(&case, &case.excerpt).lines.false_negatives, 4);
    for case in zed_cases() {
        for expected in &case.expected {
            assert_eq!(
                score(&case, expected).lines.recall(),
                Some(1.0),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn every_zed_case_writes_back_to_itself() {
    for case in zed_cases() {
        assert!(case.is_writable(), "{}", case.name);
        let text = case.to_markdown();
        let again = NextEditCase::from_markdown("ignored", &text)
            .unwrap_or_else(|e| panic!("{}: {e}\n{text}", case.name));
        assert_eq!(again, case, "{}\n{text}", case.name);
    }
}

#[test]
fn expected_patches_score_perfectly_and_no_edit_scores_zero() {
    for case in zed_cases() {
        for (i, expected) in case.expected.iter().enumerate() {
            let scored = score(&case, expected);
            assert!(scored.exact && scored.suggested, "{} #{i}", case.name);
            assert_eq!(scored.delta_chrf, 100.0, "{} #{i}", case.name);
        }
        let nothing = score(&case, &case.excerpt);
        assert!(!nothing.exact && !nothing.suggested, "{}", case.name);
        assert_eq!(nothing.delta_chrf, 0.0, "{}", case.name);
        assert_eq!(nothing.lines.true_positives, 0);
        assert_eq!(nothing.lines.false_positives, 0);
        // A trailing newline the excerpt does not have changes nothing.
        assert!(!score(&case, &format!("{}\n", case.excerpt)).suggested);
    }
}

#[test]
fn the_expected_patch_has_every_changed_line() {
    let case = zed_case("flask--rename-accepted-prediction");
    let scored = score(&case, &case.expected[0]);
    assert_eq!(
        scored.lines,
        Counts {
            true_positives: 6,
            false_positives: 0,
            false_negatives: 0
        }
    );
}

#[test]
fn a_half_right_answer_scores_between() {
    let case = zed_case("flask--rename-accepted-prediction");
    // The name fixed, the config key and the assertion left as they were.
    let half = case.excerpt.replace("cookie_secur(", "cookie_secure(");
    let scored = score(&case, &half);
    assert!(!scored.exact && scored.suggested);
    assert!(
        scored.delta_chrf > 0.0 && scored.delta_chrf < 100.0,
        "{}",
        scored.delta_chrf
    );
    assert_eq!(
        scored.lines,
        Counts {
            true_positives: 2,
            false_positives: 0,
            false_negatives: 4
        }
    );
    // Renaming the wrong thing scores lower than half right.
    let wrong = case.excerpt.replace("def index", "def home");
    assert!(score(&case, &wrong).delta_chrf < scored.delta_chrf);
}

#[test]
fn a_no_edit_case_rewards_silence() {
    let mut case = zed_case("zed--change-match-arm");
    let text = case.to_markdown();
    let without = &text[..text.find("## Expected Patch").unwrap()];
    case = NextEditCase::from_markdown("no-edit", without).unwrap();
    assert!(case.no_edit && case.expected.is_empty());
    let silent = score(&case, &case.excerpt);
    assert!(silent.exact && !silent.suggested);
    assert_eq!(silent.delta_chrf, 100.0);
    let noisy = score(&case, &case.excerpt.replace("Disk", "Diskette"));
    assert!(!noisy.exact && noisy.suggested);
    assert_eq!(noisy.delta_chrf, 0.0);
    assert_eq!(noisy.lines.false_positives, 2);
}

#[test]
fn repeat_last_repeats_the_last_change_at_its_next_occurrence() {
    // The history adds `Serialize` to one `#[derive(Debug)]`; the excerpt's is the other.
    let case = zed_case("codex-acp--add-derive");
    let repeated = Baseline::RepeatLast.suggest(&case);
    assert_eq!(repeated, case.expected[0]);
    assert!(score(&case, &repeated).exact);
    // `DiagnosticsUpdated` -> `Disk` was the change; no `DiagnosticsUpdated` is left.
    let case = zed_case("zed--change-match-arm");
    assert_eq!(Baseline::RepeatLast.suggest(&case), case.excerpt);
    assert_eq!(Baseline::NoEdit.suggest(&case), case.excerpt);
}

/// The numbers of the two baselines on Zed's 19 cases, through a run written to disk.
#[test]
fn baseline_runs_resume_and_refuse_another_source() {
    let cases = zed_cases();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("repeat-last");
    let source = NextEditSource::Baseline(Baseline::RepeatLast);
    let identity = source.identity(&zed_dir()).unwrap();
    let summary = evaluate(&cases, &source, &identity, &out).unwrap();
    assert_eq!((summary.cases, summary.no_edit_cases), (19, 0));
    // Exact only on codex-acp (see above).
    assert!((summary.exact_match - 1.0 / 19.0).abs() < 1e-12);
    let per_case: Vec<f64> = cases
        .iter()
        .map(|c| score(c, &Baseline::RepeatLast.suggest(c)).delta_chrf)
        .collect();
    let mean = per_case.iter().sum::<f64>() / 19.0;
    assert!((summary.delta_chrf - mean).abs() < 1e-9);
    assert_eq!(summary.false_positive_rate, None);
    assert_eq!(summary.latency_ms, None);
    let results = std::fs::read_to_string(out.join("cases.jsonl")).unwrap();
    assert_eq!(results.lines().count(), 19);
    assert!(out.join("summary.json").is_file() && out.join("summary.md").is_file());

    // A rerun resumes (nothing to redo) and writes the same bytes.
    let again = evaluate(&cases, &source, &identity, &out).unwrap();
    assert_eq!(again, summary);
    assert_eq!(
        std::fs::read_to_string(out.join("cases.jsonl")).unwrap(),
        results
    );

    // Another source is refused in the same directory.
    let other = NextEditSource::Baseline(Baseline::NoEdit);
    let refused = evaluate(&cases, &other, &other.identity(&zed_dir()).unwrap(), &out).unwrap_err();
    assert!(refused.to_string().contains("another run"), "{refused}");

    let silent = evaluate(
        &cases,
        &other,
        &other.identity(&zed_dir()).unwrap(),
        &dir.path().join("no-edit"),
    )
    .unwrap();
    assert_eq!(
        (
            silent.exact_match,
            silent.delta_chrf,
            silent.suggestion_rate
        ),
        (0.0, 0.0, 0.0)
    );
    // Every one of Zed's cases is an edit: all its lines missed, none suggested.
    assert_eq!(silent.line_recall, Some(0.0));
    assert_eq!(silent.line_precision, None);
}

#[test]
fn completions_files_are_scored_by_the_same_scorer() {
    let cases = zed_cases();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("completions.jsonl");
    // The first alternative for every case, half as whole excerpts, half as regions.
    let rows: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            if i % 2 == 0 {
                serde_json::json!({"case": case.name, "excerpt": case.expected[0]}).to_string()
            } else {
                // The region from the first changed line on, as a byte range of the excerpt.
                let start = case
                    .excerpt
                    .bytes()
                    .zip(case.expected[0].bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
                let start = case.excerpt[..start].rfind('\n').map_or(0, |at| at + 1);
                serde_json::json!({
                    "case": case.name,
                    "region": &case.expected[0][start..],
                    "range": [start, case.excerpt.len()],
                })
                .to_string()
            }
        })
        .collect();
    std::fs::write(&file, rows.join("\n")).unwrap();
    let given = read_completions(&file, &cases).unwrap();
    let source = NextEditSource::Completions {
        file: &file,
        given: &given,
    };
    let summary = evaluate(
        &cases,
        &source,
        &source.identity(&zed_dir()).unwrap(),
        &dir.path().join("out"),
    )
    .unwrap();
    assert_eq!(summary.exact_match, 1.0);
    assert_eq!(summary.delta_chrf, 100.0);
    assert_eq!(summary.suggestion_rate, 1.0);

    std::fs::write(&file, "{\"case\": \"nope\", \"excerpt\": \"\"}\n").unwrap();
    let unknown = read_completions(&file, &cases).unwrap_err();
    assert!(unknown.to_string().contains("not a case here"), "{unknown}");
}

#[test]
fn cases_are_built_from_two_versions_of_a_tree() {
    let old = fixtures().join("old");
    let new = fixtures().join("new");
    let pairs = pair_files(&old, &new).unwrap();
    // README.md is the same in both and src/added.rs is new: only shapes.rs pairs.
    let paths: Vec<&str> = pairs.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["src/shapes.rs"]);
    let options = BuildOptions {
        repository_url: "https://example.com/shapes".into(),
        revision: "0".into(),
        ..BuildOptions::default()
    };
    let built = build_from_dirs(&old, &new, &options).unwrap();
    assert_eq!(built.unwritable, 0);
    let cases = built.cases;
    // The field's rename is a group of its own (nine unchanged lines away); `area` and
    // `is_square` are one: the second is the target, then the group is done.
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["src-shapes.rs--1", "src-shapes.rs--2-no-edit"]);

    let target = &cases[0];
    assert!(!target.no_edit);
    assert!(target.excerpt[..target.cursor]
        .ends_with("    pub fn area(&self) -> u32 {\n        self.width"));
    assert_eq!(target.history.len(), 1);
    assert!(target.history[0]
        .diff
        .contains("+        self.width * self.h"));
    assert_eq!(
        target.expected,
        [target
            .excerpt
            .replace("self.w == self.h", "self.width == self.h")]
    );
    // Repeating the last rename is right here.
    assert!(score(target, &Baseline::RepeatLast.suggest(target)).exact);

    let done = &cases[1];
    assert!(done.no_edit && done.expected_patches.is_empty());
    assert!(done.excerpt[..done.cursor]
        .ends_with("    pub fn is_square(&self) -> bool {\n        self.width"));
    assert_eq!(done.history.len(), 2);

    // Written in Zed's format and read back unchanged.
    let dir = tempfile::tempdir().unwrap();
    let files = write_cases(dir.path(), &cases).unwrap();
    assert_eq!(files.len(), 2);
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.starts_with(
        "+++\nrepository_url = \"https://example.com/shapes\"\nrevision = \"0\"\n+++\n\n# src-shapes.rs--1\n"
    ));
    assert!(text.contains("## Edit History\n\n```diff\n--- a/src/shapes.rs\n"));
    assert!(text.contains("```src/shapes.rs\n"));
    assert!(
        text.contains("\n        self.width * self.h\n        //        ^[CURSOR_POSITION]\n"),
        "{text}"
    );
    assert_eq!(read_cases(dir.path()).unwrap(), cases);
}
