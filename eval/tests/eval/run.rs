//! `run::evaluate` on match-scored tasks (no toolchain needed): what a run's directory holds
//! after reruns with other selections, and which runs are scored at confidence bars.

use std::collections::HashMap;
use std::path::Path;

use redraft_eval::report::Summary;
use redraft_eval::run::{self, Completions, Run, RunIdentity, RESULTS_FILE, SUMMARY_FILE};
use redraft_eval::score::{Scorer, ScorerConfig};
use redraft_eval::task::{Task, TaskLanguage};

fn tasks(n: usize) -> Vec<Task> {
    (0..n)
        .map(|i| Task {
            task_id: format!("t{i}"),
            prompt: format!("fn f{i}() {{\n    "),
            suffix: "\n}\n".into(),
            canonical_solution: format!("let x = {i};"),
            test: String::new(),
            entry_point: String::new(),
            language: Some(TaskLanguage::Rust),
        })
        .collect()
}

fn identity() -> RunIdentity {
    RunIdentity {
        tasks: "tasks.jsonl".into(),
        tasks_hash: Some("fnv1a64:0000000000000001".into()),
        source: "theirs.jsonl".into(),
        completions_hash: Some("fnv1a64:0000000000000002".into()),
        model_fingerprint: None,
        setting: None,
        backend: None,
        scoring: None,
    }
}

/// Scores `tasks` with `given`'s completions into `out`, as `eval --completions` does.
fn evaluate(
    tasks: &[Task],
    given: &HashMap<String, String>,
    out: &Path,
) -> redraft_eval::error::Result<Summary> {
    let scorer = Scorer::new(&ScorerConfig::default(), &[]).unwrap();
    let languages = vec![TaskLanguage::Rust; tasks.len()];
    let run = Run {
        tasks,
        languages: &languages,
        scorer: &scorer,
        jobs: 2,
        label: "t".into(),
    };
    run::evaluate(&run, Completions::Given(given), &identity(), out)
}

fn ids(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join(RESULTS_FILE))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["task_id"].to_string())
        .collect()
}

/// Completions from a file come without confidences, so without bars, even when every one is
/// empty (an empty completion has no confidence to lack, and such a run got a bar table).
#[test]
fn completions_from_a_file_are_never_scored_at_bars() {
    let dir = tempfile::tempdir().unwrap();
    let all = tasks(4);
    let empty: HashMap<String, String> = all
        .iter()
        .map(|t| (t.task_id.clone(), String::new()))
        .collect();
    let summary = evaluate(&all, &empty, dir.path()).unwrap();
    assert_eq!(summary.empty_completions, 4);
    assert!(summary.bars.is_empty(), "{:?}", summary.bars);
    let written = std::fs::read_to_string(dir.path().join(SUMMARY_FILE)).unwrap();
    assert!(!written.contains("\"bars\""), "{written}");
    assert_eq!(redraft_eval::report::bar_table(&summary), "");
}

/// A rerun whose selection leaves out tasks an earlier run scored is refused, naming them,
/// before anything is scored (the results file held the earlier run's rows after the new ones,
/// five rows under a summary of two); a larger selection resumes, and the file holds exactly
/// the selection's rows, in task order.
#[test]
fn a_rerun_selecting_fewer_tasks_is_refused_and_the_file_holds_the_selection() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let all = tasks(5);
    let given: HashMap<String, String> = all
        .iter()
        .map(|t| (t.task_id.clone(), t.canonical_solution.clone()))
        .collect();
    evaluate(&all[..3], &given, out).unwrap();
    assert_eq!(ids(out), ["\"t0\"", "\"t1\"", "\"t2\""]);

    // A sample of two: t1 (scored before) is not selected.
    let sample = [all[0].clone(), all[3].clone()];
    let refused = evaluate(&sample, &given, out).unwrap_err().to_string();
    assert!(
        refused.contains("holds results for tasks this run does not select (`t1`, `t2`; 2 in all)")
            && refused.contains("pick another --out"),
        "{refused}"
    );
    assert_eq!(ids(out).len(), 3, "nothing was scored or written");

    let summary = evaluate(&all, &given, out).unwrap();
    assert_eq!(summary.tasks, 5);
    assert_eq!(ids(out), ["\"t0\"", "\"t1\"", "\"t2\"", "\"t3\"", "\"t4\""]);
}

/// The sandbox line said on stderr is kept in summary.json too, so a result says which of the
/// sandbox's layers held when it was scored; a run that executed nothing has none.
#[cfg(target_os = "linux")]
#[test]
fn the_summary_says_how_programs_ran() {
    let dir = tempfile::tempdir().unwrap();
    let task = Task {
        task_id: "One/0".into(),
        prompt: "def f():\n".into(),
        suffix: String::new(),
        canonical_solution: "    return 1\n".into(),
        test: "def check(candidate):\n    assert candidate() == 1\n".into(),
        entry_point: "f".into(),
        language: Some(TaskLanguage::Python),
    };
    let given = HashMap::from([(task.task_id.clone(), task.canonical_solution.clone())]);
    let scorer = crate::support::scorer(&[TaskLanguage::Python]);
    let run = Run {
        tasks: std::slice::from_ref(&task),
        languages: &[TaskLanguage::Python],
        scorer: &scorer,
        jobs: 1,
        label: "one".into(),
    };
    let summary = run::evaluate(&run, Completions::Given(&given), &identity(), dir.path()).unwrap();
    assert_eq!(summary.sandbox, scorer.describe());
    assert!(
        summary.sandbox.len() == 1 && summary.sandbox[0].starts_with("python: "),
        "{:?}",
        summary.sandbox
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(SUMMARY_FILE)).unwrap())
            .unwrap();
    assert_eq!(written["sandbox"][0], summary.sandbox[0].as_str());

    let unexecuted = tempfile::tempdir().unwrap();
    let all = tasks(1);
    let summary = evaluate(&all, &HashMap::new(), unexecuted.path()).unwrap();
    assert!(summary.sandbox.is_empty());
}
