//! What an evaluation writes: one JSON line per task (diffable: a regression shows as a diff),
//! a summary JSON, and a table on stdout with one column per setting.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::generate::GenerationStats;
use crate::score::Outcome;

/// One task's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub task_id: String,
    /// What was scored (after post-processing when redraft generated it).
    pub completion: String,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    pub exact_match: bool,
    pub edit_similarity: f64,
    /// Absent when the completion came from a file (`--completions`).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<GenerationStats>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub mean: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; `None` for no values.
    pub fn of(values: &[f64]) -> Option<Percentiles> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank =
            |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        Some(Percentiles {
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
        })
    }
}

/// The numbers for one setting over one task set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub setting: String,
    pub tasks: usize,
    /// Tasks with a test (the denominator of pass@1).
    pub executed: usize,
    pub outcomes: BTreeMap<Outcome, usize>,
    /// Share of executed tasks whose completion passes: one sample per task (greedy unless
    /// the setting has a `--temperature`).
    pub pass_at_1: Option<f64>,
    pub compile_error_rate: Option<f64>,
    pub exact_match: f64,
    pub edit_similarity: f64,
    /// Completions post-processing left empty (or given empty).
    pub empty_completions: usize,
    pub latency_ms: Option<Percentiles>,
    /// Tokens of the middles (before the end) over the model calls that wrote them, each summed
    /// over the tasks: the text a forward pass gets written. `None` without model calls (a
    /// backend, completions from a file).
    pub tokens_per_forward: Option<f64>,
    /// Canvas slots committed per model call, EOS padding included, averaged over the tasks:
    /// the figure earlier reports called tokens per forward (docs/performance.md), kept to
    /// compare with them. A model that ends every middle at once scores the canvas length.
    #[serde(default)]
    pub slots_per_forward: Option<f64>,
    pub steps: Option<f64>,
    pub canvas_tokens: Option<f64>,
    /// Mean |engine's middle length - true middle length|, in tokens.
    #[serde(default)]
    pub length_error: Option<f64>,
    /// Mean steps after the end was committed, over middles the model ended.
    #[serde(default)]
    pub steps_after_end: Option<f64>,
    /// What an editor would have shown at each of [`BARS`] (a completion the model was less
    /// sure of withheld): empty when a completion came without a confidence (a backend's, a
    /// completions file's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bars: Vec<FimBar>,
    /// How the programs ran: the scorer's lines, one per language, as the run said them on
    /// stderr (which sandbox layers held, the limits); empty when nothing was executed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox: Vec<String>,
}

/// The confidence bars a model's run is scored at (inline completions and next edits).
pub const BARS: [f32; 10] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// A run's completions had every one the model was less sure of than `bar` been withheld
/// (`FimOptions::min_confidence`, decided as the language server decides it: a confidence
/// below the bar): a withheld completion is no suggestion, so it counts as a miss. An empty
/// completion has no confidence and nothing to withhold: it keeps its scored result at every
/// bar (an empty middle matched, a program that passes without one), so at bar 0, where
/// nothing is withheld, exact match and pass@1 are the run's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FimBar {
    pub bar: f32,
    /// Tasks with a completion shown.
    pub shown_rate: f64,
    /// Tasks whose completion is exact and not withheld, over all tasks (an empty completion
    /// that matches an empty middle counts at every bar).
    pub exact_match: f64,
    /// Shown completions that are exact; `None` when none is shown.
    pub precision: Option<f64>,
    /// Executed tasks whose completion passes and is not withheld (an empty completion that
    /// passes counts at every bar); `None` without a test.
    pub pass_at_1: Option<f64>,
}

impl FimBar {
    /// The run at each of [`BARS`]; empty unless every completion with text has a confidence.
    fn all(results: &[&TaskResult], executed: usize) -> Vec<FimBar> {
        let confidence = |r: &TaskResult| r.generation.as_ref().and_then(|g| g.confidence);
        let completed = |r: &TaskResult| !r.completion.trim().is_empty();
        if results.is_empty()
            || results
                .iter()
                .any(|r| completed(r) && confidence(r).is_none())
        {
            return Vec::new();
        }
        let n = results.len() as f64;
        BARS.iter()
            .map(|&bar| {
                // What the language server withholds; everything else stands as scored.
                let withheld = |r: &TaskResult| confidence(r).is_some_and(|c| c < bar);
                let kept: Vec<&&TaskResult> = results.iter().filter(|r| !withheld(r)).collect();
                let shown = kept.iter().filter(|r| completed(r)).count();
                let exact = kept.iter().filter(|r| r.exact_match).count() as f64;
                let exact_shown = kept
                    .iter()
                    .filter(|r| completed(r) && r.exact_match)
                    .count();
                let passed = kept.iter().filter(|r| r.outcome == Outcome::Pass).count();
                FimBar {
                    bar,
                    shown_rate: shown as f64 / n,
                    exact_match: exact / n,
                    precision: share(exact_shown, shown),
                    pass_at_1: share(passed, executed),
                }
            })
            .collect()
    }
}

/// A run's [`Summary::bars`] as a Markdown table, one row per bar; empty without.
pub fn bar_table(summary: &Summary) -> String {
    if summary.bars.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| confidence bar | shown | exact match | exact among shown | pass@1 |\n\
         |---:|---:|---:|---:|---:|\n",
    );
    for point in &summary.bars {
        let _ = writeln!(
            out,
            "| {:.1} | {} | {} | {} | {} |",
            point.bar,
            percent(Some(point.shown_rate)),
            percent(Some(point.exact_match)),
            percent(point.precision),
            percent(point.pass_at_1)
        );
    }
    out
}

impl Summary {
    pub fn of(setting: &str, results: &[&TaskResult]) -> Summary {
        let mut outcomes = BTreeMap::new();
        for result in results {
            *outcomes.entry(result.outcome).or_insert(0) += 1;
        }
        let executed = results.len() - outcomes.get(&Outcome::NotExecuted).copied().unwrap_or(0);
        let of_executed = |outcome| share(outcomes.get(&outcome).copied().unwrap_or(0), executed);
        let n = results.len().max(1) as f64;
        let generated: Vec<&GenerationStats> = results
            .iter()
            .filter_map(|r| r.generation.as_ref())
            .collect();
        let mean = |f: &dyn Fn(&GenerationStats) -> f64| {
            (!generated.is_empty())
                .then(|| generated.iter().map(|g| f(g)).sum::<f64>() / generated.len() as f64)
        };
        let latencies: Vec<f64> = generated.iter().map(|g| g.latency_ms).collect();
        // A backend calls no model of ours: no forwards to count.
        let forwarded: Vec<&GenerationStats> = generated
            .iter()
            .copied()
            .filter(|g| g.forwards > 0)
            .collect();
        let forwards: usize = forwarded.iter().map(|g| g.forwards).sum();
        let middle_tokens: usize = forwarded.iter().map(|g| g.middle_tokens).sum();
        Summary {
            setting: setting.to_string(),
            tasks: results.len(),
            executed,
            pass_at_1: of_executed(Outcome::Pass),
            compile_error_rate: of_executed(Outcome::CompileError),
            exact_match: results.iter().filter(|r| r.exact_match).count() as f64 / n,
            // Summed from +0.0: f64's `sum` of nothing is -0.0, which prints as `-0.000`.
            edit_similarity: results.iter().fold(0.0, |sum, r| sum + r.edit_similarity) / n,
            empty_completions: results
                .iter()
                .filter(|r| r.completion.trim().is_empty())
                .count(),
            latency_ms: Percentiles::of(&latencies),
            tokens_per_forward: (forwards > 0).then(|| middle_tokens as f64 / forwards as f64),
            slots_per_forward: (!forwarded.is_empty()).then(|| {
                forwarded.iter().map(|g| g.slots_per_forward).sum::<f64>() / forwarded.len() as f64
            }),
            steps: mean(&|g| g.steps as f64),
            canvas_tokens: mean(&|g| g.canvas_tokens as f64),
            length_error: mean(&|g| g.middle_tokens.abs_diff(g.true_tokens) as f64),
            steps_after_end: {
                let after: Vec<f64> = generated
                    .iter()
                    .filter_map(|g| g.steps_after_end)
                    .map(|s| s as f64)
                    .collect();
                (!after.is_empty()).then(|| after.iter().sum::<f64>() / after.len() as f64)
            },
            bars: FimBar::all(results, executed),
            sandbox: Vec::new(),
            outcomes,
        }
    }
}

/// The summaries side by side: one row per metric, one column per setting.
pub fn table(summaries: &[Summary]) -> String {
    let count = |s: &Summary, o: Outcome| s.outcomes.get(&o).copied().unwrap_or(0).to_string();
    let rows: Vec<Metric<Summary>> = vec![
        ("tasks", Box::new(|s| s.tasks.to_string())),
        ("pass@1", Box::new(|s| percent(s.pass_at_1))),
        ("exact match", Box::new(|s| percent(Some(s.exact_match)))),
        (
            "edit similarity",
            Box::new(|s| number(Some(s.edit_similarity), 3)),
        ),
        (
            "compile errors",
            Box::new(|s| percent(s.compile_error_rate)),
        ),
        (
            "test failures",
            Box::new(|s| count(s, Outcome::TestFailure)),
        ),
        ("timeouts", Box::new(|s| count(s, Outcome::Timeout))),
        ("memory", Box::new(|s| count(s, Outcome::Memory))),
        (
            "empty completions",
            Box::new(|s| s.empty_completions.to_string()),
        ),
        (
            "latency p50 ms",
            Box::new(|s| number(s.latency_ms.map(|l| l.p50), 1)),
        ),
        (
            "latency p95 ms",
            Box::new(|s| number(s.latency_ms.map(|l| l.p95), 1)),
        ),
        (
            "latency p99 ms",
            Box::new(|s| number(s.latency_ms.map(|l| l.p99), 1)),
        ),
        (
            "tokens/forward",
            Box::new(|s| number(s.tokens_per_forward, 2)),
        ),
        (
            "slots/forward",
            Box::new(|s| number(s.slots_per_forward, 2)),
        ),
        ("steps", Box::new(|s| number(s.steps, 2))),
        ("canvas tokens", Box::new(|s| number(s.canvas_tokens, 1))),
        ("length error", Box::new(|s| number(s.length_error, 2))),
        (
            "steps after end",
            Box::new(|s| number(s.steps_after_end, 2)),
        ),
    ];
    let header = summaries.iter().map(|s| s.setting.clone()).collect();
    let (cells, widths) = padded_cells(header, summaries, &rows, 0);
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        let _ = writeln!(out, "{}", row.join("  ").trim_end());
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(out, "{}", rule.join("  "));
        }
    }
    out
}

/// A table's row: the metric's name, and its cell for one summary.
pub(crate) type Metric<'a, S> = (&'a str, Box<dyn Fn(&S) -> String + 'a>);

/// `part` over `whole`; `None` when `whole` is 0, a share of nothing (`-` in a table, `null`
/// in JSON), not a 0% that reads as a measurement.
pub(crate) fn share(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// A share as a percentage to one decimal; `-` for none.
pub(crate) fn percent(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |x| format!("{:.1}%", 100.0 * x))
}

/// A number to `digits` decimals; `-` for none.
pub(crate) fn number(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

/// The cells of a table of `summaries` side by side, each padded to its column's width (at
/// least `min_width` characters), and the widths: a header row (an empty corner, then
/// `header`, a cell per summary) and a row per metric, its name left-aligned and its values
/// right-aligned. The FIM and the next-edit tables differ only in how they join and rule them.
pub(crate) fn padded_cells<S>(
    header: Vec<String>,
    summaries: &[S],
    metrics: &[Metric<'_, S>],
    min_width: usize,
) -> (Vec<Vec<String>>, Vec<usize>) {
    let mut cells: Vec<Vec<String>> = vec![std::iter::once(String::new()).chain(header).collect()];
    for (name, value) in metrics {
        cells.push(
            std::iter::once(name.to_string())
                .chain(summaries.iter().map(value))
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..=summaries.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
                .max(min_width)
        })
        .collect();
    let padded = cells
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(c, cell)| {
                    if c == 0 {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                })
                .collect()
        })
        .collect();
    (padded, widths)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, outcome: Outcome, latency: Option<f64>) -> TaskResult {
        result_of_length(id, outcome, latency, 3)
    }

    /// A result whose engine middle had `middle_tokens` tokens; the true middle has 5.
    fn result_of_length(
        id: &str,
        outcome: Outcome,
        latency: Option<f64>,
        middle_tokens: usize,
    ) -> TaskResult {
        TaskResult {
            task_id: id.into(),
            completion: if outcome == Outcome::Pass {
                "x".into()
            } else {
                String::new()
            },
            outcome,
            detail: String::new(),
            exact_match: outcome == Outcome::Pass,
            edit_similarity: if outcome == Outcome::Pass { 1.0 } else { 0.0 },
            generation: latency.map(|latency_ms| GenerationStats {
                raw_middle: String::new(),
                canvas_tokens: 16,
                canvas_reason: String::new(),
                steps: 4,
                forwards: 4,
                slots_per_forward: 4.0,
                ended_by_eos: true,
                middle_tokens,
                true_tokens: 5,
                slots: 16,
                steps_after_end: (middle_tokens > 0).then_some(middle_tokens),
                latency_ms,
                model_ms: latency_ms,
                confidence: None,
            }),
        }
    }

    #[test]
    fn summary_counts_pass_at_1_over_executed_tasks() {
        let results = [
            result("a", Outcome::Pass, Some(10.0)),
            result("b", Outcome::CompileError, Some(30.0)),
            result("c", Outcome::TestFailure, Some(20.0)),
            result("d", Outcome::NotExecuted, Some(40.0)),
        ];
        let refs: Vec<&TaskResult> = results.iter().collect();
        let summary = Summary::of("low", &refs);
        assert_eq!(summary.executed, 3);
        assert_eq!(summary.pass_at_1, Some(1.0 / 3.0));
        assert_eq!(summary.compile_error_rate, Some(1.0 / 3.0));
        assert_eq!(summary.exact_match, 0.25);
        assert_eq!(summary.empty_completions, 3);
        assert_eq!(summary.length_error, Some(2.0));
        let latency = summary.latency_ms.unwrap();
        assert_eq!((latency.p50, latency.p95, latency.mean), (20.0, 40.0, 25.0));
        let table = table(&[
            summary.clone(),
            Summary {
                setting: "high".into(),
                ..summary
            },
        ]);
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["low", "high"], "{table}");
        let pass: Vec<&str> = table.lines().nth(3).unwrap().split_whitespace().collect();
        assert_eq!(pass, ["pass@1", "33.3%", "33.3%"], "{table}");
        assert!(table.contains("pass@1"));
    }

    /// No task scored (a run whose selection is empty): the means are 0, printed `0.000`, not
    /// the `-0.000` of f64's empty sum.
    #[test]
    fn an_empty_summary_prints_no_negative_zero() {
        let summary = Summary::of("x", &[]);
        assert!(summary.edit_similarity.is_sign_positive());
        let table = table(&[summary]);
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().eq(["edit", "similarity", "0.000"])),
            "{table}"
        );
        assert!(!table.contains("-0"), "{table}");
    }

    #[test]
    fn length_error_is_the_mean_distance_to_the_true_length() {
        let results = [
            result_of_length("a", Outcome::Pass, Some(1.0), 5),
            result_of_length("b", Outcome::Pass, Some(1.0), 9),
            result_of_length("c", Outcome::Pass, Some(1.0), 0),
            // Scored from a file: no length to compare.
            result_of_length("d", Outcome::Pass, None, 0),
        ];
        let refs: Vec<&TaskResult> = results.iter().collect();
        assert_eq!(Summary::of("x", &refs).length_error, Some(3.0));
        // Over the middles that ended (here: those with tokens): (5 + 9) / 2.
        assert_eq!(Summary::of("x", &refs).steps_after_end, Some(7.0));
        let table = table(&[Summary::of("x", &refs)]);
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().eq(["length", "error", "3.00"])),
            "{table}"
        );
    }

    /// Each bar withholds the completions the model was less sure of: they count as misses,
    /// and the exact ones among those shown are its precision.
    #[test]
    fn bars_withhold_the_completions_below_them() {
        let with = |outcome, confidence: Option<f32>| {
            let mut r = result(&format!("{confidence:?}"), outcome, Some(1.0));
            r.completion = "x".into();
            r.generation.as_mut().unwrap().confidence = confidence;
            r
        };
        let results = [
            with(Outcome::Pass, Some(0.95)),
            with(Outcome::TestFailure, Some(0.55)),
            with(Outcome::Pass, Some(0.35)),
            // Nothing to show: no confidence, never shown.
            result("empty", Outcome::TestFailure, Some(1.0)),
        ];
        let refs: Vec<&TaskResult> = results.iter().collect();
        let summary = Summary::of("x", &refs);
        assert_eq!(summary.bars.len(), BARS.len());
        let at = |bar: f32| {
            summary
                .bars
                .iter()
                .find(|b| (b.bar - bar).abs() < 1e-6)
                .unwrap()
                .clone()
        };
        assert_eq!(at(0.0).shown_rate, 0.75);
        assert_eq!(at(0.0).exact_match, summary.exact_match);
        assert_eq!(at(0.0).precision, Some(2.0 / 3.0));
        assert_eq!(at(0.0).pass_at_1, summary.pass_at_1);
        // 0.4: the unsure pass goes (a miss now), 0.6: the failure goes too.
        assert_eq!((at(0.4).shown_rate, at(0.4).exact_match), (0.5, 0.25));
        assert_eq!(at(0.4).precision, Some(0.5));
        assert_eq!((at(0.6).shown_rate, at(0.6).precision), (0.25, Some(1.0)));
        assert_eq!(at(0.6).pass_at_1, Some(0.25));
        assert_eq!((at(0.9).shown_rate, at(0.9).exact_match), (0.25, 0.25));
        let table = bar_table(&summary);
        assert!(
            table.contains("| 0.4 | 50.0% | 25.0% | 50.0% | 25.0% |"),
            "{table}"
        );
        // An empty completion is never shown, and has nothing to withhold: one that passes
        // (or is exact, on an empty middle) keeps that at every bar, so bar 0 is the run's own
        // numbers. A: "x" at 0.55, passes; B: "", passes.
        let mut empty = result("empty", Outcome::Pass, Some(1.0));
        empty.completion = String::new();
        let kept = [with(Outcome::Pass, Some(0.55)), empty];
        let refs: Vec<&TaskResult> = kept.iter().collect();
        let summary = Summary::of("x", &refs);
        assert_eq!((summary.pass_at_1, summary.exact_match), (Some(1.0), 1.0));
        for point in &summary.bars {
            let b = point.bar;
            let a_shown = b <= 0.55;
            let a = if a_shown { 1.0 } else { 0.0 };
            assert_eq!(point.shown_rate, a / 2.0, "{b}");
            assert_eq!(point.precision, a_shown.then_some(1.0), "{b}");
            assert_eq!(point.pass_at_1, Some((1.0 + a) / 2.0), "{b}");
            assert_eq!(point.exact_match, (1.0 + a) / 2.0, "{b}");
        }
        assert_eq!(summary.bars[0].pass_at_1, summary.pass_at_1);
        assert_eq!(summary.bars[0].exact_match, summary.exact_match);
        // A completion without a confidence (a backend's, a file's): no bars at all.
        let given = [with(Outcome::Pass, None), with(Outcome::Pass, Some(0.9))];
        let refs: Vec<&TaskResult> = given.iter().collect();
        let summary = Summary::of("x", &refs);
        assert!(summary.bars.is_empty());
        assert_eq!(bar_table(&summary), "");
    }

    /// The headline counts the middle's tokens, pooled: a model that writes EOS into every slot
    /// in one step fills the canvas but writes nothing, and a task with many calls weighs as
    /// many calls. Slots (EOS included) per call, averaged per task, is the second figure.
    #[test]
    fn tokens_per_forward_counts_the_middles_written_over_all_forwards() {
        let ran = |id: &str, middle_tokens, forwards, slots| {
            let mut r = result_of_length(id, Outcome::TestFailure, Some(1.0), middle_tokens);
            let g = r.generation.as_mut().unwrap();
            g.forwards = forwards;
            g.slots = slots;
            g.slots_per_forward = slots as f64 / forwards as f64;
            r
        };
        let results = [
            // All EOS after one forward: 32 slots, no middle.
            ran("eos", 0, 1, 32),
            ran("a", 8, 4, 16),
            ran("b", 4, 3, 16),
            // Scored from a file: no forwards.
            result_of_length("given", Outcome::Pass, None, 0),
        ];
        let refs: Vec<&TaskResult> = results.iter().collect();
        let summary = Summary::of("x", &refs);
        assert_eq!(summary.tokens_per_forward, Some(12.0 / 8.0));
        let slots = (32.0 + 4.0 + 16.0 / 3.0) / 3.0;
        assert!((summary.slots_per_forward.unwrap() - slots).abs() < 1e-9);
        let table = table(&[summary]);
        for (row, value) in [("tokens/forward", "1.50"), ("slots/forward", "13.78")] {
            assert!(
                table.lines().any(|l| l.split_whitespace().eq([row, value])),
                "{row} {value}: {table}"
            );
        }
        // No model calls (a backend's middles): no figure rather than 0.
        let mut backend = ran("backend", 5, 1, 0);
        backend.generation.as_mut().unwrap().forwards = 0;
        let summary = Summary::of("x", &[&backend]);
        assert_eq!(
            (summary.tokens_per_forward, summary.slots_per_forward),
            (None, None)
        );
    }

    /// Results written before the per-task figure was named for slots still read.
    #[test]
    fn a_results_line_from_before_the_rename_reads() {
        let result = result("a", Outcome::Pass, Some(1.5));
        let line = serde_json::to_string(&result)
            .unwrap()
            .replace("slots_per_forward", "tokens_per_forward");
        assert_eq!(serde_json::from_str::<TaskResult>(&line).unwrap(), result);
    }

    #[test]
    fn results_round_trip_through_json() {
        for result in [
            result("a", Outcome::Pass, Some(1.5)),
            result("b", Outcome::Timeout, None),
        ] {
            let line = serde_json::to_string(&result).unwrap();
            assert_eq!(serde_json::from_str::<TaskResult>(&line).unwrap(), result);
        }
    }
}
