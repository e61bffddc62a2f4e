//! What a next-edit evaluation writes: one JSON line per case (the suggestion as a diff of the
//! excerpt, so a regression shows as a diff), `summary.json`, and a Markdown table with one
//! column per source.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::score::{CaseScore, Counts};
use crate::report::{number, padded_cells, percent, share, Metric, Percentiles};

/// What the model path recorded for one case (absent for baselines and completions files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NextEditStats {
    /// Plan + engine + edits: what the user waits for.
    pub latency_ms: f64,
    pub model_ms: f64,
    /// Denoising steps.
    pub steps: usize,
    pub forwards: usize,
    /// Canvas slots committed per model call, EOS padding included (`Completion::tokens_per_forward`).
    #[serde(alias = "tokens_per_forward")]
    pub slots_per_forward: f64,
    /// Tokens of the rewritten region the model wrote (before its end); 0 in results written
    /// before they were counted.
    #[serde(default)]
    pub rewrite_tokens: usize,
    /// How sure the model was of the rewrite's change (`EditOutcome::confidence`): the lowest
    /// probability of a token it changed; absent when it changed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// The suggestion was withheld, the confidence being below the run's bar.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unsure: bool,
}

/// One case's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub case: String,
    /// The right answer was no edit.
    pub no_edit: bool,
    /// The suggestion as a unified diff of the excerpt; empty for no suggestion.
    pub suggestion: String,
    pub exact: bool,
    pub delta_chrf: f64,
    pub suggested: bool,
    /// The expected alternative delta-chrF was best against (0-based).
    pub best: usize,
    pub lines: Counts,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<NextEditStats>,
}

impl CaseResult {
    pub fn new(
        case: &str,
        no_edit: bool,
        suggestion: String,
        score: CaseScore,
        generation: Option<NextEditStats>,
    ) -> CaseResult {
        CaseResult {
            case: case.to_string(),
            no_edit,
            suggestion,
            exact: score.exact,
            delta_chrf: score.delta_chrf,
            suggested: score.suggested,
            best: score.best,
            lines: score.lines,
            generation,
        }
    }
}

/// The numbers for one source over one case set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NextEditSummary {
    /// The source: a baseline's name, `completions FILE`, or the model's setting.
    pub setting: String,
    pub cases: usize,
    /// Cases whose answer is no edit.
    pub no_edit_cases: usize,
    /// Share of cases answered exactly (no suggestion on a no-edit case counts).
    pub exact_match: f64,
    /// Mean delta-chrF over all cases, 0 to 100.
    pub delta_chrf: f64,
    /// Changed lines summed over all cases (micro).
    pub lines: Counts,
    /// Of the changed lines suggested, those expected; `None` when none was suggested.
    pub line_precision: Option<f64>,
    /// Of the changed lines expected, those suggested; `None` when none was expected (no-edit
    /// cases only).
    pub line_recall: Option<f64>,
    /// Share of no-edit cases with a suggestion; `None` without such cases.
    pub false_positive_rate: Option<f64>,
    /// Share of cases with a suggestion (a case set is never empty: `read_cases` refuses one).
    pub suggestion_rate: f64,
    pub latency_ms: Option<Percentiles>,
    pub steps: Option<f64>,
    /// The rewrites' tokens over the model calls that wrote them, both summed over the cases
    /// (as `redraft_eval::report::Summary::tokens_per_forward` for FIM).
    pub tokens_per_forward: Option<f64>,
    /// Canvas slots per model call, EOS padding included, averaged over the cases.
    #[serde(default)]
    pub slots_per_forward: Option<f64>,
    /// What other confidence bars would have made of the same run: each of [`BARS`] whose
    /// outcome the run determines (above every confidence the run's own bar withheld).
    /// Empty for baselines and completions files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bars: Vec<BarPoint>,
}

pub use crate::report::BARS;

/// A run's numbers had every suggestion the model was less sure of than `bar` been withheld
/// (`EditBudget::min_confidence`): a withheld suggestion is no edit, exact on a no-edit case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BarPoint {
    pub bar: f32,
    pub exact_match: f64,
    pub false_positive_rate: Option<f64>,
    pub suggestion_rate: f64,
}

impl BarPoint {
    /// `None` when the run cannot tell: it withheld a suggestion `bar` would have kept.
    fn of(bar: f32, results: &[&CaseResult]) -> Option<BarPoint> {
        let confidence = |r: &CaseResult| r.generation.as_ref().and_then(|g| g.confidence);
        let unsure = |r: &CaseResult| r.generation.as_ref().is_some_and(|g| g.unsure);
        if results
            .iter()
            .any(|r| unsure(r) && confidence(r).is_some_and(|c| c >= bar))
        {
            return None;
        }
        let withheld = |r: &CaseResult| r.suggested && confidence(r).is_some_and(|c| c < bar);
        let n = results.len().max(1) as f64;
        let exact = |r: &CaseResult| if withheld(r) { r.no_edit } else { r.exact };
        let suggests = |r: &CaseResult| r.suggested && !withheld(r);
        let no_edit: Vec<&&CaseResult> = results.iter().filter(|r| r.no_edit).collect();
        Some(BarPoint {
            bar,
            exact_match: results.iter().filter(|r| exact(r)).count() as f64 / n,
            false_positive_rate: share(
                no_edit.iter().filter(|r| suggests(r)).count(),
                no_edit.len(),
            ),
            suggestion_rate: results.iter().filter(|r| suggests(r)).count() as f64 / n,
        })
    }
}

impl NextEditSummary {
    pub fn of(setting: &str, results: &[&CaseResult]) -> NextEditSummary {
        let n = results.len().max(1) as f64;
        let mut lines = Counts::default();
        for result in results {
            lines.add(result.lines);
        }
        let no_edit: Vec<&&CaseResult> = results.iter().filter(|r| r.no_edit).collect();
        let generated: Vec<&NextEditStats> = results
            .iter()
            .filter_map(|r| r.generation.as_ref())
            .collect();
        let mean = |f: &dyn Fn(&NextEditStats) -> f64| {
            (!generated.is_empty())
                .then(|| generated.iter().map(|g| f(g)).sum::<f64>() / generated.len() as f64)
        };
        let latencies: Vec<f64> = generated.iter().map(|g| g.latency_ms).collect();
        NextEditSummary {
            setting: setting.to_string(),
            cases: results.len(),
            no_edit_cases: no_edit.len(),
            exact_match: results.iter().filter(|r| r.exact).count() as f64 / n,
            delta_chrf: results.iter().map(|r| r.delta_chrf).sum::<f64>() / n,
            line_precision: lines.precision(),
            line_recall: lines.recall(),
            lines,
            false_positive_rate: share(
                no_edit.iter().filter(|r| r.suggested).count(),
                no_edit.len(),
            ),
            suggestion_rate: results.iter().filter(|r| r.suggested).count() as f64 / n,
            latency_ms: Percentiles::of(&latencies),
            steps: mean(&|g| g.steps as f64),
            tokens_per_forward: {
                let forwards: usize = generated.iter().map(|g| g.forwards).sum();
                let written: usize = generated.iter().map(|g| g.rewrite_tokens).sum();
                (forwards > 0).then(|| written as f64 / forwards as f64)
            },
            slots_per_forward: mean(&|g| g.slots_per_forward),
            bars: if generated.is_empty() {
                Vec::new()
            } else {
                BARS.iter()
                    .filter_map(|&bar| BarPoint::of(bar, results))
                    .collect()
            },
        }
    }
}

/// A model run's [`NextEditSummary::bars`] as a Markdown table, one row per bar; empty without.
pub fn bar_table(summary: &NextEditSummary) -> String {
    if summary.bars.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| confidence bar | exact match | false positives (no-edit) | suggestion rate |\n\
         |---:|---:|---:|---:|\n",
    );
    for point in &summary.bars {
        let _ = writeln!(
            out,
            "| {:.1} | {} | {} | {} |",
            point.bar,
            percent(Some(point.exact_match)),
            percent(point.false_positive_rate),
            percent(Some(point.suggestion_rate))
        );
    }
    out
}

/// The summaries side by side as a Markdown table: one row per metric, one column per source.
pub fn table(summaries: &[NextEditSummary]) -> String {
    let rows: Vec<Metric<NextEditSummary>> = vec![
        (
            "cases (no-edit)",
            Box::new(|s| format!("{} ({})", s.cases, s.no_edit_cases)),
        ),
        ("exact match", Box::new(|s| percent(Some(s.exact_match)))),
        ("delta-chrF", Box::new(|s| number(Some(s.delta_chrf), 2))),
        ("line precision", Box::new(|s| percent(s.line_precision))),
        ("line recall", Box::new(|s| percent(s.line_recall))),
        (
            "false positives (no-edit)",
            Box::new(|s| percent(s.false_positive_rate)),
        ),
        (
            "suggestion rate",
            Box::new(|s| percent(Some(s.suggestion_rate))),
        ),
        (
            "latency p50 ms",
            Box::new(|s| number(s.latency_ms.map(|l| l.p50), 1)),
        ),
        (
            "latency p95 ms",
            Box::new(|s| number(s.latency_ms.map(|l| l.p95), 1)),
        ),
        ("steps", Box::new(|s| number(s.steps, 2))),
        (
            "tokens/forward",
            Box::new(|s| number(s.tokens_per_forward, 2)),
        ),
        (
            "slots/forward",
            Box::new(|s| number(s.slots_per_forward, 2)),
        ),
    ];
    let header = summaries
        .iter()
        .map(|s| s.setting.replace('|', "\\|"))
        .collect();
    let (cells, widths) = padded_cells(header, summaries, &rows, 3);
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        let _ = writeln!(out, "| {} |", row.join(" | "));
        if i == 0 {
            let rule: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(c, w)| {
                    if c == 0 {
                        "-".repeat(*w)
                    } else {
                        format!("{}:", "-".repeat(w - 1))
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} |", rule.join(" | "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(no_edit: bool, exact: bool, chrf: f64, suggested: bool, tp: usize) -> CaseResult {
        CaseResult {
            case: "c".into(),
            no_edit,
            suggestion: String::new(),
            exact,
            delta_chrf: chrf,
            suggested,
            best: 0,
            lines: Counts {
                true_positives: tp,
                false_positives: 1,
                false_negatives: 0,
            },
            generation: None,
        }
    }

    #[test]
    fn summary_rates_and_micro_line_counts() {
        let results = [
            result(false, true, 100.0, true, 3),
            result(false, false, 50.0, true, 1),
            result(true, true, 100.0, false, 0),
            result(true, false, 0.0, true, 0),
        ];
        let refs: Vec<&CaseResult> = results.iter().collect();
        let summary = NextEditSummary::of("repeat-last", &refs);
        assert_eq!(summary.exact_match, 0.5);
        assert_eq!(summary.delta_chrf, 62.5);
        assert_eq!(summary.false_positive_rate, Some(0.5));
        assert_eq!(summary.suggestion_rate, 0.75);
        // 4 true positives, 4 false positives, no false negatives.
        assert_eq!(summary.line_precision, Some(0.5));
        assert_eq!(summary.line_recall, Some(1.0));
        assert_eq!(summary.latency_ms, None);
        let table = table(&[summary]);
        let rows: Vec<&str> = table.lines().collect();
        assert!(rows[0].contains("repeat-last"), "{table}");
        assert!(rows[1].starts_with("| ---"), "{table}");
        assert!(
            rows.iter()
                .any(|r| r.contains("delta-chrF") && r.contains("62.50")),
            "{table}"
        );
    }

    /// A ratio of nothing is no measurement: no changed line suggested leaves line precision
    /// `-` (JSON `null`), not 0%, as the FIM bars leave "exact among shown" when nothing is
    /// shown; no changed line expected (no-edit cases only) leaves recall so, and no no-edit
    /// case the false-positive rate.
    #[test]
    fn a_ratio_of_nothing_is_a_dash_and_null_not_zero() {
        let silent = |no_edit: bool, missed: usize| CaseResult {
            lines: Counts {
                true_positives: 0,
                false_positives: 0,
                false_negatives: missed,
            },
            ..result(
                no_edit,
                no_edit,
                if no_edit { 100.0 } else { 0.0 },
                false,
                0,
            )
        };
        let row = |table: &str, name: &str| -> String {
            let line = table.lines().find(|l| l.starts_with(&format!("| {name} ")));
            let cells: Vec<String> = line
                .unwrap_or_else(|| panic!("no {name} row: {table}"))
                .split('|')
                .map(|c| c.trim().to_string())
                .collect();
            cells[2].clone()
        };

        // No-edit cases answered with no edit: nothing suggested, nothing expected.
        let results = [silent(true, 0), silent(true, 0)];
        let refs: Vec<&CaseResult> = results.iter().collect();
        let summary = NextEditSummary::of("no-edit", &refs);
        assert_eq!((summary.line_precision, summary.line_recall), (None, None));
        assert_eq!(summary.false_positive_rate, Some(0.0));
        let json = serde_json::to_value(&summary).unwrap();
        assert!(json["line_precision"].is_null(), "{json}");
        assert!(json["line_recall"].is_null(), "{json}");
        let shown = table(std::slice::from_ref(&summary));
        assert_eq!(row(&shown, "line precision"), "-", "{shown}");
        assert_eq!(row(&shown, "line recall"), "-", "{shown}");
        assert_eq!(row(&shown, "false positives (no-edit)"), "0.0%", "{shown}");
        assert_eq!(row(&shown, "suggestion rate"), "0.0%", "{shown}");

        // Edit cases missed: recall is a measured 0, precision still a ratio of nothing.
        let results = [silent(false, 2)];
        let refs: Vec<&CaseResult> = results.iter().collect();
        let summary = NextEditSummary::of("no-edit", &refs);
        assert_eq!(summary.line_precision, None);
        assert_eq!(summary.line_recall, Some(0.0));
        assert_eq!(summary.false_positive_rate, None);
        let shown = table(std::slice::from_ref(&summary));
        assert_eq!(row(&shown, "line precision"), "-", "{shown}");
        assert_eq!(row(&shown, "line recall"), "0.0%", "{shown}");
        assert_eq!(row(&shown, "false positives (no-edit)"), "-", "{shown}");
        // A summary written before (numbers) still reads.
        let mut old = serde_json::to_value(&summary).unwrap();
        old["line_precision"] = serde_json::json!(0.0);
        let read: NextEditSummary = serde_json::from_value(old).unwrap();
        assert_eq!(read.line_precision, Some(0.0));
    }

    /// A run's cases scored at other bars: a suggestion below the bar is withheld (no edit:
    /// exact on a no-edit case, a miss on an edit case); a bar at or below a confidence the run's
    /// own bar withheld is not scored (the run cannot tell what that suggestion would have scored).
    #[test]
    fn other_bars_withhold_the_suggestions_below_them() {
        let with = |mut r: CaseResult, confidence: Option<f32>, unsure: bool| {
            r.generation = Some(NextEditStats {
                latency_ms: 1.0,
                model_ms: 1.0,
                steps: 1,
                forwards: 1,
                slots_per_forward: 1.0,
                rewrite_tokens: 1,
                confidence,
                unsure,
            });
            r
        };
        let results = [
            // An edit case answered exactly, surely.
            with(result(false, true, 100.0, true, 1), Some(0.8), false),
            // A no-edit case with a spurious suggestion the model was unsure of.
            with(result(true, false, 0.0, true, 0), Some(0.25), false),
            // A no-edit case answered with no edit.
            with(result(true, true, 100.0, false, 0), None, false),
            // An edit case answered wrongly, fairly surely.
            with(result(false, false, 20.0, true, 1), Some(0.55), false),
        ];
        let refs: Vec<&CaseResult> = results.iter().collect();
        let summary = NextEditSummary::of("model", &refs);
        // One rewrite token over one call in each of the four cases; a slot a call.
        assert_eq!(summary.tokens_per_forward, Some(1.0));
        assert_eq!(summary.slots_per_forward, Some(1.0));
        let at = |bar: f32| summary.bars.iter().find(|p| p.bar == bar).unwrap();
        assert_eq!(summary.bars.len(), BARS.len());
        assert_eq!(at(0.0).exact_match, summary.exact_match);
        assert_eq!(at(0.0).false_positive_rate, Some(0.5));
        // 0.3: the spurious suggestion goes, its no-edit case is now exact.
        assert_eq!(
            (at(0.3).exact_match, at(0.3).false_positive_rate),
            (0.75, Some(0.0))
        );
        assert_eq!(at(0.3).suggestion_rate, 0.5);
        // 0.6: the wrong edit goes too (still a miss); 0.9: the right one goes, a miss now.
        assert_eq!((at(0.6).exact_match, at(0.6).suggestion_rate), (0.75, 0.25));
        assert_eq!((at(0.9).exact_match, at(0.9).suggestion_rate), (0.5, 0.0));
        let table = bar_table(&summary);
        assert!(table.contains("| 0.3 | 75.0% | 0.0% | 50.0% |"), "{table}");

        // Run at a bar of 0.5: the 0.25 suggestion was withheld, so bars up to 0.2 cannot be
        // scored; from 0.3 on, the same numbers.
        let mut barred = results.clone();
        barred[1] = with(result(true, true, 100.0, false, 0), Some(0.25), true);
        let refs: Vec<&CaseResult> = barred.iter().collect();
        let summary_barred = NextEditSummary::of("model", &refs);
        assert_eq!(summary_barred.bars.first().unwrap().bar, 0.3);
        assert_eq!(summary_barred.bars, summary.bars[3..]);
        // Baselines have no bars.
        let baseline = [result(false, true, 100.0, true, 1)];
        let refs: Vec<&CaseResult> = baseline.iter().collect();
        assert!(NextEditSummary::of("repeat-last", &refs).bars.is_empty());
        assert_eq!(bar_table(&NextEditSummary::of("repeat-last", &refs)), "");
    }

    /// Tokens per forward counts the rewrites' tokens, pooled: a case whose canvas the model
    /// filled with its end in one call wrote nothing, however many slots that committed.
    #[test]
    fn tokens_per_forward_counts_the_rewrites_written_over_all_calls() {
        let with = |forwards: usize, slots_per_forward: f64, rewrite_tokens: usize| {
            let mut r = result(false, false, 0.0, true, 1);
            r.generation = Some(NextEditStats {
                latency_ms: 1.0,
                model_ms: 1.0,
                steps: forwards,
                forwards,
                slots_per_forward,
                rewrite_tokens,
                confidence: None,
                unsure: false,
            });
            r
        };
        let results = [with(1, 16.0, 0), with(9, 2.0, 18)];
        let refs: Vec<&CaseResult> = results.iter().collect();
        let summary = NextEditSummary::of("model", &refs);
        assert_eq!(summary.tokens_per_forward, Some(18.0 / 10.0));
        assert_eq!(summary.slots_per_forward, Some(9.0));
        // A results line written before the rename still reads.
        let old =
            r#"{"latency_ms":1.0,"model_ms":1.0,"steps":2,"forwards":2,"tokens_per_forward":4.0}"#;
        let stats: NextEditStats = serde_json::from_str(old).unwrap();
        assert_eq!((stats.slots_per_forward, stats.rewrite_tokens), (4.0, 0));
    }

    #[test]
    fn results_round_trip_through_json() {
        let mut with_stats = result(false, true, 1.0, true, 1);
        with_stats.generation = Some(NextEditStats {
            latency_ms: 12.5,
            model_ms: 10.0,
            steps: 4,
            forwards: 4,
            slots_per_forward: 3.5,
            rewrite_tokens: 9,
            confidence: Some(0.25),
            unsure: true,
        });
        for result in [result(true, false, 0.0, true, 0), with_stats] {
            let line = serde_json::to_string(&result).unwrap();
            assert_eq!(serde_json::from_str::<CaseResult>(&line).unwrap(), result);
        }
    }
}
