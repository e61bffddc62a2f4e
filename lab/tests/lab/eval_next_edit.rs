//! `redraft eval --next-edit` end to end through the real binary, on Zed's cases (read in place
//! from the repository's `benchmarks/`): a baseline run whose summary is what the scorer says
//! case by case, resumed and refused into by another source; a completions file scored the same
//! way; cases built from two trees and scored.

use std::path::{Path, PathBuf};

use redraft_eval::next_edit::case::{read_cases, NextEditCase};
use redraft_eval::next_edit::score::{score, CaseScore, Counts};
use redraft_eval::next_edit::Baseline;
use serde_json::Value;

use redraft_tests::cli::{benchmarks, lab_in_repo as redraft_in_repo, ok, path, repo};

/// Zed's cases in the benchmark data (as `tests/eval.rs` finds its benchmarks).
fn zed_cases() -> PathBuf {
    let dir = benchmarks().join("zed-next-edit");
    assert!(
        dir.is_dir(),
        "Zed's next-edit cases not found in {}: restore them with `git checkout -- benchmarks`",
        dir.display()
    );
    dir
}

fn summary(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn number(summary: &Value, key: &str) -> f64 {
    summary[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key}: {summary}"))
}

/// What the summary must say, from the library's scorer.
fn check_summary(summary: &Value, cases: &[NextEditCase], scores: &[CaseScore]) {
    let n = cases.len() as f64;
    assert_eq!(summary["cases"], cases.len());
    let exact = scores.iter().filter(|s| s.exact).count() as f64 / n;
    let chrf = scores.iter().map(|s| s.delta_chrf).sum::<f64>() / n;
    let suggested = scores.iter().filter(|s| s.suggested).count() as f64 / n;
    let mut lines = Counts::default();
    for s in scores {
        lines.add(s.lines);
    }
    assert!(
        (number(summary, "exact_match") - exact).abs() < 1e-12,
        "{summary}"
    );
    assert!(
        (number(summary, "delta_chrf") - chrf).abs() < 1e-9,
        "{summary}"
    );
    assert!((number(summary, "suggestion_rate") - suggested).abs() < 1e-12);
    assert_eq!(summary["lines"]["true_positives"], lines.true_positives);
    assert_eq!(summary["lines"]["false_positives"], lines.false_positives);
    assert_eq!(summary["lines"]["false_negatives"], lines.false_negatives);
    assert!((number(summary, "line_precision") - lines.precision()).abs() < 1e-12);
    assert!((number(summary, "line_recall") - lines.recall()).abs() < 1e-12);
    // Baselines and completions files have no generation numbers.
    assert!(summary["latency_ms"].is_null() && summary["steps"].is_null());
}

#[test]
fn repeat_last_on_zeds_cases_is_what_the_scorer_says() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("repeat-last");
    let cases_dir = zed_cases();
    let args = [
        "eval",
        "--next-edit",
        path(&cases_dir),
        "--baseline",
        "repeat-last",
        "--out",
        path(&out),
    ];
    let table = ok(redraft_in_repo(&args));
    let cases = read_cases(&cases_dir).unwrap();
    assert_eq!(cases.len(), 19);
    let scores: Vec<CaseScore> = cases
        .iter()
        .map(|c| score(c, &Baseline::RepeatLast.suggest(c)))
        .collect();
    let first = summary(&out);
    check_summary(&first, &cases, &scores);
    assert_eq!(first["setting"], "repeat-last");
    // The Markdown table on stdout says the same.
    let chrf = format!("{:.2}", number(&first, "delta_chrf"));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("| delta-chrF") && l.contains(&chrf)),
        "{table}"
    );
    assert!(
        table.lines().nth(1).unwrap().starts_with("| ---"),
        "{table}"
    );
    let results = std::fs::read_to_string(out.join("cases.jsonl")).unwrap();
    let names: Vec<String> = results
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["case"].to_string())
        .collect();
    assert_eq!(names.len(), 19);
    assert_eq!(names[0], "\"codex-acp--add-derive\"");

    // The same command resumes: same summary, same file.
    ok(redraft_in_repo(&args));
    assert_eq!(summary(&out), first);
    assert_eq!(
        std::fs::read_to_string(out.join("cases.jsonl")).unwrap(),
        results
    );
    // Another baseline into the same directory is refused.
    let mut other = args;
    other[4] = "no-edit";
    let refused = redraft_in_repo(&other);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("another run"), "{stderr}");
}

#[test]
fn completions_on_a_few_zed_cases_are_scored_by_the_same_scorer() {
    let dir = tempfile::tempdir().unwrap();
    // Four of Zed's cases, copied out of the shared data for this run only.
    let set = dir.path().join("cases");
    std::fs::create_dir(&set).unwrap();
    for name in [
        "codex-acp--add-derive",
        "flask--rename-accepted-prediction",
        "terraform--add-comment",
        "zed--change-match-arm",
    ] {
        let file = format!("{name}.md");
        std::fs::copy(zed_cases().join(&file), set.join(&file)).unwrap();
    }
    let cases = read_cases(&set).unwrap();
    // Right, half right, nothing, and right as a region of the excerpt.
    let rename = &cases[1];
    let half = rename.excerpt.replace("cookie_secur(", "cookie_secure(");
    let answers = [
        cases[0].expected[0].clone(),
        half,
        cases[2].excerpt.clone(),
        cases[3].expected[1].clone(),
    ];
    let disk = cases[3].excerpt.find("Disk").unwrap();
    let rows = [
        serde_json::json!({"case": cases[0].name, "excerpt": answers[0]}),
        serde_json::json!({"case": cases[1].name, "excerpt": answers[1]}),
        serde_json::json!({"case": cases[2].name, "region": answers[2]}),
        serde_json::json!({
            "case": cases[3].name,
            "region": "DiskBasedDiagnosticsStarted",
            "range": [disk, disk + "Disk".len()],
        }),
    ];
    let file = dir.path().join("completions.jsonl");
    let text: Vec<String> = rows.iter().map(Value::to_string).collect();
    std::fs::write(&file, text.join("\n")).unwrap();
    let out = dir.path().join("out");
    ok(redraft_in_repo(&[
        "eval",
        "--next-edit",
        path(&set),
        "--completions",
        path(&file),
        "--out",
        path(&out),
    ]));
    let scores: Vec<CaseScore> = cases
        .iter()
        .zip(&answers)
        .map(|(case, answer)| score(case, answer))
        .collect();
    let summary = summary(&out);
    check_summary(&summary, &cases, &scores);
    assert_eq!(number(&summary, "exact_match"), 0.5);
    assert_eq!(number(&summary, "suggestion_rate"), 0.75);
    let chrf = number(&summary, "delta_chrf");
    assert!(chrf > 50.0 && chrf < 75.0, "{chrf}");
}

#[test]
fn cases_built_from_two_trees_are_scored() {
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("built");
    let fixtures = repo().join("eval/tests/fixtures/next_edit");
    let stdout = ok(redraft_in_repo(&[
        "eval",
        "--next-edit",
        path(&built),
        "--from-dirs",
        path(&fixtures.join("old")),
        path(&fixtures.join("new")),
        "--repository-url",
        "https://example.com/shapes",
    ]));
    assert!(stdout.starts_with("2 cases (1 no-edit)"), "{stdout}");
    assert_eq!(read_cases(&built).unwrap().len(), 2);
    let out = dir.path().join("out");
    ok(redraft_in_repo(&[
        "eval",
        "--next-edit",
        path(&built),
        "--baseline",
        "no-edit",
        "--out",
        path(&out),
    ]));
    let summary = summary(&out);
    // Silence is right on the no-edit case only.
    assert_eq!(number(&summary, "exact_match"), 0.5);
    assert_eq!(number(&summary, "false_positive_rate"), 0.0);
    assert_eq!(summary["no_edit_cases"], 1);
}

#[test]
fn next_edit_flags_need_next_edit() {
    let refused = redraft_in_repo(&["eval", "--tasks", "x.jsonl", "--baseline", "no-edit"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--baseline goes with --next-edit"),
        "{stderr}"
    );
    let refused = redraft_in_repo(&["eval", "--next-edit", "x", "--canonical"]);
    assert!(!refused.status.success());
}

/// The embedded model on three of Zed's cases: every suggestion recorded is a diff of the
/// excerpt that the library's scorer scores as the run did, and the run reports its latency,
/// steps and tokens per forward.
#[test]
fn the_embedded_model_is_scored_on_a_few_zed_cases() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model");
    let cases_dir = zed_cases();
    ok(redraft_in_repo(&[
        "eval",
        "--next-edit",
        path(&cases_dir),
        "--limit",
        "3",
        "--out",
        path(&out),
    ]));
    let cases = read_cases(&cases_dir).unwrap();
    let results = std::fs::read_to_string(out.join("cases.jsonl")).unwrap();
    let results: Vec<Value> = results
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 3);
    for result in &results {
        let case = cases
            .iter()
            .find(|c| result["case"] == c.name.as_str())
            .unwrap();
        let diff = result["suggestion"].as_str().unwrap();
        let suggested = if diff.is_empty() {
            case.excerpt.clone()
        } else {
            let patches = redraft_context::edit::parse_patches(diff).unwrap();
            redraft_context::edit::apply(&case.excerpt, &patches[0]).unwrap()
        };
        let scored = score(case, &suggested);
        assert_eq!(result["exact"], scored.exact, "{}", case.name);
        assert!((number(result, "delta_chrf") - scored.delta_chrf).abs() < 1e-9);
        assert!(number(result, "latency_ms") > 0.0);
        assert!(number(result, "steps") >= 1.0);
        assert!(number(result, "tokens_per_forward") > 0.0);
    }
    let summary = summary(&out);
    assert_eq!(summary["cases"], 3);
    assert!(!summary["latency_ms"].is_null() && !summary["steps"].is_null());
}
