//! The builders: HumanEvalPack-Rust cuts are deterministic, named as documented, and keep only
//! tasks whose empty middle fails; `--from-dir` cuts real code at syntax boundaries.

use std::collections::HashSet;

use redraft_eval::build::from_dir::{self, rust_parser, FromDirOptions};
use redraft_eval::build::humanevalpack::{candidates, Kind, Problem};
use redraft_eval::build::BuildOptions;
use redraft_eval::score::{score_all, Outcome};
use redraft_eval::task::{read_jsonl, read_tasks, write_jsonl, Task, TaskLanguage};

fn problems() -> Vec<Problem> {
    read_jsonl(&crate::support::humanevalpack()).unwrap()
}

#[test]
fn cuts_are_deterministic_and_ids_follow_the_format() {
    let problems = problems();
    for kind in Kind::ALL {
        let a: Vec<Task> = problems
            .iter()
            .flat_map(|p| candidates(p, kind, 0))
            .collect();
        let b: Vec<Task> = problems
            .iter()
            .flat_map(|p| candidates(p, kind, 0))
            .collect();
        assert_eq!(a, b, "{kind:?}");
        let ids: HashSet<&str> = a.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(ids.len(), a.len(), "{kind:?}: ids are unique");
        for task in &a {
            // Every cut puts the solution back together.
            let problem = &problems[task
                .task_id
                .split('/')
                .nth(1)
                .unwrap()
                .parse::<usize>()
                .unwrap()];
            assert_eq!(
                format!("{}{}{}", task.prompt, task.canonical_solution, task.suffix),
                format!("{}{}", problem.prompt, problem.canonical_solution)
            );
            assert_eq!(task.language, Some(TaskLanguage::Rust));
        }
    }
    let single: Vec<Task> = problems
        .iter()
        .flat_map(|p| candidates(p, Kind::SingleLine, 0))
        .collect();
    assert_eq!(single.len(), 1547);
    assert_eq!(single[0].task_id, "RustSingleLine/0/L1");
    assert_eq!(
        single[0].canonical_solution,
        "    for i in 0..numbers.len(){\n"
    );
    let spans = |seed| -> Vec<Task> {
        problems
            .iter()
            .flat_map(|p| candidates(p, Kind::RandomSpan, seed))
            .collect()
    };
    assert_ne!(spans(0), spans(1), "the seed matters");
    assert!(spans(0)
        .iter()
        .all(|t| t.task_id.starts_with("RustRandomSpan/")
            && t.task_id
                .rsplit('/')
                .next()
                .unwrap()
                .parse::<usize>()
                .is_ok()));
}

/// A small build, end to end: Rust/32 (whose solution only sometimes passes) is dropped, every
/// kept task passes with its middle and fails without it (checked by a fresh scorer, not the
/// builder's cache), and the files round-trip through the task reader.
#[test]
fn a_build_keeps_only_tasks_an_empty_middle_fails() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("subset.jsonl");
    #[derive(serde::Serialize)]
    struct Row<'a> {
        task_id: &'a str,
        prompt: &'a str,
        canonical_solution: &'a str,
        test: &'a str,
        entry_point: &'a str,
    }
    let problems = problems();
    let subset: Vec<Row> = [2, 12, 13, 32]
        .iter()
        .map(|&i| {
            let p = &problems[i];
            Row {
                task_id: &p.task_id,
                prompt: &p.prompt,
                canonical_solution: &p.canonical_solution,
                test: &p.test,
                entry_point: &p.entry_point,
            }
        })
        .collect();
    write_jsonl(&input, &subset).unwrap();
    let out = dir.path().join("out");
    let scorer = crate::support::scorer(&[TaskLanguage::Rust]);
    let kinds = [Kind::SingleLine, Kind::RandomSpanLight];
    let options = BuildOptions {
        kinds: kinds.to_vec(),
        seed: 0,
        gzip: true,
        jobs: crate::support::jobs(),
        max_tasks: None,
    };
    let report = redraft_eval::build::humanevalpack(&input, &out, &options, &scorer).unwrap();
    assert_eq!(report.problems, 4);
    assert_eq!(
        report.failing_solutions.keys().collect::<Vec<_>>(),
        ["Rust/32"]
    );
    assert!(out.join("build.json").is_file());

    let single = read_tasks(&out.join("RustSingleLine.jsonl.gz")).unwrap();
    let light = read_tasks(&out.join("RustRandomSpanLight.jsonl.gz")).unwrap();
    let set = &report.sets["RustSingleLine"];
    assert_eq!(set.tasks, single.len());
    assert_eq!(set.candidates, set.tasks + set.empty_passes);
    assert!(!single.is_empty() && !light.is_empty());
    assert!(single
        .iter()
        .all(|t| !t.task_id.starts_with("RustSingleLine/32/")));
    assert!(light
        .iter()
        .all(|t| t.task_id.starts_with("RustRandomSpanLight/")));

    let fresh = crate::support::scorer(&[TaskLanguage::Rust]);
    let tasks: Vec<&Task> = single.iter().chain(&light).collect();
    let empty: Vec<(&Task, &str)> = tasks.iter().map(|t| (*t, "")).collect();
    for (task, verdict) in tasks
        .iter()
        .zip(score_all(&fresh, &empty, crate::support::jobs(), "empty").unwrap())
    {
        assert_ne!(
            verdict.outcome,
            Outcome::Pass,
            "{}: empty middle passes",
            task.task_id
        );
    }
    let canonical: Vec<(&Task, &str)> = tasks
        .iter()
        .map(|t| (*t, t.canonical_solution.as_str()))
        .collect();
    for (task, verdict) in tasks
        .iter()
        .zip(score_all(&fresh, &canonical, crate::support::jobs(), "canonical").unwrap())
    {
        assert_eq!(
            verdict.outcome,
            Outcome::Pass,
            "{}: {}",
            task.task_id,
            verdict.detail
        );
    }

    // `max_tasks`: a seeded sample of the cuts, checked the same way (a subset of the full set).
    let sampled_out = dir.path().join("sampled");
    let sampled = BuildOptions {
        kinds: vec![Kind::SingleLine],
        max_tasks: Some(3),
        ..options
    };
    let report =
        redraft_eval::build::humanevalpack(&input, &sampled_out, &sampled, &scorer).unwrap();
    let set = &report.sets["RustSingleLine"];
    assert_eq!(set.candidates, 3);
    let kept = read_tasks(&sampled_out.join("RustSingleLine.jsonl.gz")).unwrap();
    assert_eq!(kept.len(), set.tasks);
    let full: HashSet<&str> = single.iter().map(|t| t.task_id.as_str()).collect();
    assert!(
        kept.iter().all(|t| full.contains(t.task_id.as_str())),
        "{:?}",
        kept.iter().map(|t| &t.task_id).collect::<Vec<_>>()
    );
}

/// Two problems with one id (a file concatenated twice, or `Rust/12` and `Python/12`) would be
/// cut into a set with every task id twice, which `eval` refuses: the build refuses it first,
/// naming both, before any program runs or anything is written.
#[test]
fn problems_cut_to_the_same_task_ids_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let problems = problems();
    let lines = |ids: [&str; 2]| -> String {
        ids.iter()
            .map(|id| {
                let p = &problems[12];
                serde_json::json!({
                    "task_id": id, "prompt": p.prompt,
                    "canonical_solution": p.canonical_solution, "test": p.test,
                })
                .to_string()
                    + "\n"
            })
            .collect()
    };
    let scorer = crate::support::scorer(&[TaskLanguage::Rust]);
    let options = BuildOptions {
        kinds: vec![Kind::SingleLine],
        seed: 0,
        gzip: false,
        jobs: 1,
        max_tasks: None,
    };
    for (ids, says) in [
        (["Rust/12", "Rust/12"], "`Rust/12` and `Rust/12` would both"),
        (
            ["Rust/12", "Python/12"],
            "`Python/12` and `Rust/12` would both",
        ),
    ] {
        let input = dir.path().join("twice.jsonl");
        std::fs::write(&input, lines(ids)).unwrap();
        let out = dir.path().join("out");
        let error = redraft_eval::build::humanevalpack(&input, &out, &options, &scorer)
            .map(|report| format!("built {:?}", report.sets))
            .unwrap_or_else(|e| e.to_string());
        assert!(
            error.contains(says) && error.contains("tasks `<set>/12/...`"),
            "{error}"
        );
        assert!(!out.exists(), "nothing written");
    }
}

/// `--from-dir` on this repository's own engine sources: each cut is a syntax node (or the
/// inside of one), the file is the cut put back together, and the sample is seeded.
#[test]
fn from_dir_cuts_at_syntax_boundaries() {
    let src = crate::support::repo().join("engine/src");
    let options = FromDirOptions {
        per_file: 6,
        ..FromDirOptions::default()
    };
    let tasks = from_dir::build(&src, &options).unwrap();
    assert_eq!(tasks, from_dir::build(&src, &options).unwrap());
    let reseeded = from_dir::build(&src, &FromDirOptions { seed: 9, ..options }).unwrap();
    assert_ne!(tasks, reseeded);
    assert!(tasks.len() >= 30, "{} tasks", tasks.len());
    let mut parser = rust_parser();
    let mut kinds = HashSet::new();
    for task in &tasks {
        let mut parts = task.task_id.split_once('/').unwrap().1.rsplitn(3, '/');
        let (range, kind, path) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        kinds.insert(kind.to_string());
        let text = std::fs::read_to_string(src.join(path)).unwrap();
        let (start, end) = range.split_once('-').unwrap();
        let (start, end): (usize, usize) = (start.parse().unwrap(), end.parse().unwrap());
        assert_eq!(&text[start..end], task.canonical_solution);
        assert!(text[..start].ends_with(&task.prompt) && text[end..].starts_with(&task.suffix));
        assert!(task.test.is_empty() && task.language == Some(TaskLanguage::Rust));
        // The cut is a node of the parse, or the inside of one (block body, argument list).
        let tree = parser.parse(&text, None).unwrap();
        let code = task.canonical_solution.trim();
        let from = start + task.canonical_solution.find(code).unwrap();
        let node = tree
            .root_node()
            .descendant_for_byte_range(from, from + code.len())
            .unwrap();
        let exact = node.start_byte() == from && node.end_byte() == from + code.len();
        let inside = {
            let (open, close) = (
                text[..start].trim_end().chars().last(),
                text[end..].trim_start().chars().next(),
            );
            matches!(
                (open, close),
                (Some('{'), Some('}')) | (Some('('), Some(')'))
            )
        };
        assert!(
            exact || inside,
            "{}: {:?}",
            task.task_id,
            task.canonical_solution
        );
    }
    assert!(kinds.len() >= 4, "{kinds:?}");
}
