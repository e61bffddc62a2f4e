//! FIM tasks cut from whole Rust solutions with tests (HumanEvalPack-Rust's 164, or any JSONL of
//! `task_id`, `prompt`, `canonical_solution`, `test`), the way HumanEval-infilling was cut from
//! HumanEval:
//!
//! - single-line: each line of the solution with code on it that is not only brackets
//!   (`}`, `});`, ...), with its indentation and newline: `RustSingleLine/12/L3`;
//! - multi-line: every contiguous block from one such line to another (both included):
//!   `RustMultiLine/12/L3_L7`;
//! - random span: ten character spans per solution, seeded per problem: `RustRandomSpan/12/4`;
//! - random-span-light: the first kept random span of each problem: `RustRandomSpanLight/12/1`.
//!
//! Line numbers count every line of `canonical_solution` from 0 (HumanEvalPack's solutions
//! start with a newline, so their first code line is L1). Tasks whose empty middle still passes
//! the tests are dropped (by [`super::humanevalpack()`]); so are problems whose own solution fails.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::rng::SplitMix64;
use crate::task::{Task, TaskLanguage};

/// Random spans drawn per problem (HumanEval-infilling's random-span set has ten).
pub const SPANS_PER_PROBLEM: usize = 10;

/// A whole solution with its tests, as HumanEvalPack stores it.
#[derive(Debug, Clone, Deserialize)]
pub struct Problem {
    pub task_id: String,
    pub prompt: String,
    pub canonical_solution: String,
    #[serde(default)]
    pub test: String,
    #[serde(default)]
    pub entry_point: String,
}

impl Problem {
    /// The problem's own program as a task with the whole solution as the middle: its
    /// canonical program is the one every cut shares.
    pub fn whole(&self) -> Task {
        Task {
            task_id: self.task_id.clone(),
            prompt: self.prompt.clone(),
            suffix: String::new(),
            canonical_solution: self.canonical_solution.clone(),
            test: self.test.clone(),
            entry_point: self.entry_point.clone(),
            language: Some(TaskLanguage::Rust),
        }
    }

    /// `Rust/12` -> `12`: the id without its first component, which the cuts' ids carry.
    pub fn short_id(&self) -> &str {
        self.task_id
            .split_once('/')
            .map_or(self.task_id.as_str(), |(_, rest)| rest)
    }

    fn cut(&self, kind: Kind, label: &str, span: Range<usize>) -> Task {
        let solution = &self.canonical_solution;
        Task {
            task_id: format!("{}/{}/{label}", kind.name(), self.short_id()),
            prompt: format!("{}{}", self.prompt, &solution[..span.start]),
            suffix: solution[span.end..].to_string(),
            canonical_solution: solution[span].to_string(),
            test: self.test.clone(),
            entry_point: self.entry_point.clone(),
            language: Some(TaskLanguage::Rust),
        }
    }
}

/// The four task sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    SingleLine,
    MultiLine,
    RandomSpan,
    RandomSpanLight,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::SingleLine,
        Kind::MultiLine,
        Kind::RandomSpan,
        Kind::RandomSpanLight,
    ];

    /// The id prefix and file stem.
    pub fn name(self) -> &'static str {
        match self {
            Kind::SingleLine => "RustSingleLine",
            Kind::MultiLine => "RustMultiLine",
            Kind::RandomSpan => "RustRandomSpan",
            Kind::RandomSpanLight => "RustRandomSpanLight",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Kind, String> {
        match s {
            "single-line" => Ok(Kind::SingleLine),
            "multi-line" => Ok(Kind::MultiLine),
            "random-span" => Ok(Kind::RandomSpan),
            "random-span-light" => Ok(Kind::RandomSpanLight),
            other => Err(format!(
                "unknown task set `{other}` (single-line, multi-line, random-span, random-span-light)"
            )),
        }
    }
}

/// The solution's lines that single- and multi-line tasks cut: (line number, byte range with
/// the newline).
pub fn code_lines(solution: &str) -> Vec<(usize, Range<usize>)> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (number, line) in solution.split_inclusive('\n').enumerate() {
        let range = start..start + line.len();
        start = range.end;
        let code = line.trim();
        let only_brackets = code.chars().all(|c| "{}()[];,".contains(c));
        if !code.is_empty() && !only_brackets {
            lines.push((number, range));
        }
    }
    lines
}

/// Every candidate task of `kind` (before dropping the ones an empty middle passes).
/// Random-span-light is chosen from the random spans after that filter, so here it gives the
/// random spans.
pub fn candidates(problem: &Problem, kind: Kind, seed: u64) -> Vec<Task> {
    match kind {
        Kind::SingleLine => code_lines(&problem.canonical_solution)
            .into_iter()
            .map(|(n, range)| problem.cut(kind, &format!("L{n}"), range))
            .collect(),
        Kind::MultiLine => {
            let lines = code_lines(&problem.canonical_solution);
            let mut tasks = Vec::new();
            for (i, (first, start)) in lines.iter().enumerate() {
                for (last, end) in &lines[i..] {
                    tasks.push(problem.cut(
                        kind,
                        &format!("L{first}_L{last}"),
                        start.start..end.end,
                    ));
                }
            }
            tasks
        }
        Kind::RandomSpan | Kind::RandomSpanLight => {
            random_spans(&problem.canonical_solution, seed, &problem.task_id)
                .into_iter()
                .enumerate()
                .map(|(i, range)| problem.cut(Kind::RandomSpan, &(i + 1).to_string(), range))
                .collect()
        }
    }
}

/// Renames a kept random-span task as the light set's task of its problem.
pub fn as_light(task: &Task) -> Task {
    let mut light = task.clone();
    light.task_id = task
        .task_id
        .replacen(Kind::RandomSpan.name(), Kind::RandomSpanLight.name(), 1);
    light
}

/// Up to [`SPANS_PER_PROBLEM`] distinct character spans with code in them, each end uniform
/// over the solution's char boundaries; seeded by `seed` and the problem id alone.
fn random_spans(solution: &str, seed: u64, problem_id: &str) -> Vec<Range<usize>> {
    let boundaries: Vec<usize> = solution
        .char_indices()
        .map(|(i, _)| i)
        .chain([solution.len()])
        .collect();
    let mut rng = SplitMix64::for_name(seed, problem_id);
    let mut spans: Vec<Range<usize>> = Vec::new();
    for _ in 0..SPANS_PER_PROBLEM * 100 {
        if spans.len() == SPANS_PER_PROBLEM || boundaries.len() < 2 {
            break;
        }
        let a = boundaries[rng.below(boundaries.len())];
        let b = boundaries[rng.below(boundaries.len())];
        let span = a.min(b)..a.max(b);
        if solution[span.clone()].trim().is_empty() || spans.contains(&span) {
            continue;
        }
        spans.push(span);
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem() -> Problem {
        Problem {
            task_id: "Rust/7".into(),
            prompt: "fn f(x: i32) -> i32 {\n".into(),
            canonical_solution: "\n    let y = x + 1;\n\n    if y > 2 {\n        y\n    } else {\n        0\n    }\n}\n".into(),
            test: "#[test] fn t() { assert_eq!(f(2), 3); }".into(),
            entry_point: "f".into(),
        }
    }

    #[test]
    fn single_lines_skip_blank_and_bracket_only_lines() {
        let tasks = candidates(&problem(), Kind::SingleLine, 0);
        let ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "RustSingleLine/7/L1",
                "RustSingleLine/7/L3",
                "RustSingleLine/7/L4",
                "RustSingleLine/7/L5",
                "RustSingleLine/7/L6"
            ]
        );
        assert_eq!(tasks[0].canonical_solution, "    let y = x + 1;\n");
        for task in &tasks {
            let whole = format!("{}{}{}", task.prompt, task.canonical_solution, task.suffix);
            assert_eq!(
                whole,
                format!("{}{}", problem().prompt, problem().canonical_solution)
            );
        }
    }

    #[test]
    fn multi_line_blocks_run_from_code_line_to_code_line() {
        let tasks = candidates(&problem(), Kind::MultiLine, 0);
        // 5 code lines: 5 + 4 + 3 + 2 + 1 blocks.
        assert_eq!(tasks.len(), 15);
        let block = tasks
            .iter()
            .find(|t| t.task_id == "RustMultiLine/7/L1_L3")
            .unwrap();
        assert_eq!(
            block.canonical_solution,
            "    let y = x + 1;\n\n    if y > 2 {\n"
        );
    }

    #[test]
    fn random_spans_are_seeded_distinct_and_hold_code() {
        let a = candidates(&problem(), Kind::RandomSpan, 3);
        assert_eq!(a, candidates(&problem(), Kind::RandomSpan, 3));
        assert_ne!(a, candidates(&problem(), Kind::RandomSpan, 4));
        assert_eq!(a.len(), SPANS_PER_PROBLEM);
        assert_eq!(a[0].task_id, "RustRandomSpan/7/1");
        for task in &a {
            assert!(!task.canonical_solution.trim().is_empty());
        }
        assert_eq!(as_light(&a[2]).task_id, "RustRandomSpanLight/7/3");
    }
}
