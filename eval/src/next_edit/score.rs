//! Scoring one suggestion (the excerpt as the suggestion leaves it) against a case's expected
//! alternatives, with the metrics of Zed's `crates/edit_prediction_cli/src/metrics.rs` and
//! `score.rs` as they were while delta-chrF's beta was 2 (`metrics.rs` at zed-industries/zed
//! commit 04563bd23ab8, for one). That is an older version: current Zed computes its metrics
//! in `crates/edit_prediction_metrics` with beta 0.5 (precision weighs more) and scores a case
//! against the one alternative with the best delta-chrF, changed lines included, so its
//! numbers differ from these. Compare redraft's numbers with redraft's, never with a current
//! Zed run's; the version is kept so reports stay comparable with each other.
//!
//! - **delta-chrF** ([`delta_chr_f`]): character n-grams (orders 1 to 6) of the *change* the
//!   expected edit makes (n-gram counts after minus before) against those of the change the
//!   suggestion makes; a removed n-gram is its own token, so not removing what should go is a
//!   miss and removing what should stay a false alarm. Precision and recall are averaged over
//!   the orders and combined as F-beta with beta = 2 (recall weighs more), times 100. Runs of
//!   whitespace are collapsed first (spaces and tabs to one space, newlines to one newline),
//!   and only the changed span plus five characters either side is counted (Zed's shortcut,
//!   which gives the reference's counts: n-grams away from the change cancel). One difference
//!   from Zed's own reference function comes with the shortcut: a change that is whitespace
//!   only (re-indenting, a blank line) leaves nothing after collapsing, so it scores 100 against
//!   no change and no change scores 100 against it.
//! - **changed lines** ([`exact_lines`]): the multiset of `-` and `+` lines of the expected
//!   patch against the suggestion's diff, as true/false positives and false negatives; lines
//!   starting `---` or `+++` are skipped as headers, as Zed skips them. Changed lines of the
//!   expected patch outside the case's excerpt ([`super::case::ExpectedPatch::outside`]) are
//!   left out: no system sees or changes them (Zed, scoring whole files, never has any).
//! - **exact**: the suggestion leaves the excerpt equal to one of the expected texts.
//! - **suggested**: the suggestion changes the excerpt at all.
//!
//! Per case, delta-chrF is the best over the alternatives (Zed's `score.rs` takes the maximum)
//! and the changed lines are the alternative with the most true positives (Zed's
//! `max_by_key`, so the last of equals). Zed scores the whole file where a case here has an
//! excerpt: the same numbers whenever the changes lie more than five characters inside it.
//! A case whose answer is no edit has the excerpt itself as its one alternative and an empty
//! expected patch: no suggestion scores 100 and exact, any suggestion 0.

use std::collections::HashMap;

use redraft_context::edit::diff;
use serde::{Deserialize, Serialize};

use super::case::NextEditCase;
use crate::report::share;

/// Zed's `CHR_F_CHAR_ORDER`.
pub const CHR_F_ORDER: usize = 6;
/// Zed's `CHR_F_BETA` in the version followed (see the module's head): 2, recall weighs more.
/// Current Zed's is 0.5; not changed, so the numbers stay what earlier reports measured.
pub const CHR_F_BETA: f64 = 2.0;
/// Characters either side of a change whose n-grams can differ (order - 1).
const CONTEXT_CHARS: usize = CHR_F_ORDER - 1;

/// True/false positives and false negatives of one comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub true_positives: usize,
    pub false_positives: usize,
    pub false_negatives: usize,
}

impl Counts {
    /// Multisets compared: what both hold is a true positive, what only `actual` holds a
    /// false positive, what only `expected` holds a false negative.
    pub fn of<K: Eq + std::hash::Hash>(
        expected: &HashMap<K, usize>,
        actual: &HashMap<K, usize>,
    ) -> Counts {
        let mut counts = Counts::default();
        for (key, &want) in expected {
            let got = actual.get(key).copied().unwrap_or(0);
            counts.true_positives += want.min(got);
            counts.false_negatives += want.saturating_sub(got);
            counts.false_positives += got.saturating_sub(want);
        }
        for (key, &got) in actual {
            if !expected.contains_key(key) {
                counts.false_positives += got;
            }
        }
        counts
    }

    pub fn add(&mut self, other: Counts) {
        self.true_positives += other.true_positives;
        self.false_positives += other.false_positives;
        self.false_negatives += other.false_negatives;
    }

    /// True positives over all `actual` holds; `None` when it holds nothing (no suggestion is
    /// not an imprecise one). Zed counts that as 0, as [`delta_chr_f`] does.
    pub fn precision(&self) -> Option<f64> {
        share(
            self.true_positives,
            self.true_positives + self.false_positives,
        )
    }

    /// True positives over all `expected` holds; `None` when it holds nothing (no-edit cases
    /// only: nothing to recall). Zed counts that as 0, as [`delta_chr_f`] does.
    pub fn recall(&self) -> Option<f64> {
        share(
            self.true_positives,
            self.true_positives + self.false_negatives,
        )
    }
}

/// Zed's delta-chrF of the edit `original -> actual` against `original -> expected`, 0 to 100.
pub fn delta_chr_f(original: &str, expected: &str, actual: &str) -> f64 {
    if original == expected && expected == actual {
        return 100.0;
    }
    let original = collapse_whitespace(original);
    let expected = collapse_whitespace(expected);
    let actual = collapse_whitespace(actual);
    let (original_for_expected, expected_region) = changed_region(&original, &expected);
    let (original_for_actual, actual_region) = changed_region(&original, &actual);
    let (mut precision, mut recall) = (0.0, 0.0);
    for order in 1..=CHR_F_ORDER {
        let expected_delta = delta(&expected_region, &original_for_expected, order);
        let actual_delta = delta(&actual_region, &original_for_actual, order);
        if expected_delta.is_empty() && actual_delta.is_empty() {
            precision += 1.0;
            recall += 1.0;
            continue;
        }
        let counts = Counts::of(&signed(&expected_delta), &signed(&actual_delta));
        // Zed's convention: nothing to be precise about (or to recall) is 0 at this order.
        precision += counts.precision().unwrap_or(0.0);
        recall += counts.recall().unwrap_or(0.0);
    }
    let precision = precision / CHR_F_ORDER as f64;
    let recall = recall / CHR_F_ORDER as f64;
    if precision + recall == 0.0 {
        return 0.0;
    }
    let beta2 = CHR_F_BETA * CHR_F_BETA;
    100.0 * (1.0 + beta2) * precision * recall / (beta2 * precision + recall)
}

/// Spaces and tabs (any whitespace but `\n`) become one space per run, newlines one newline
/// per run; a space run and a newline run next to each other are both kept.
fn collapse_whitespace(text: &str) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    let mut last = None;
    for c in text.chars() {
        if c == '\n' {
            if last != Some('\n') {
                out.push('\n');
                last = Some('\n');
            }
        } else if c.is_whitespace() {
            if last != Some(' ') {
                out.push(' ');
                last = Some(' ');
            }
        } else {
            out.push(c);
            last = None;
        }
    }
    out
}

/// The changed span of `original -> modified` (after the common prefix, before the common
/// suffix) with [`CONTEXT_CHARS`] either side, in each text; both empty when they are equal.
fn changed_region(original: &[char], modified: &[char]) -> (Vec<char>, Vec<char>) {
    let prefix = original
        .iter()
        .zip(modified)
        .take_while(|(a, b)| a == b)
        .count();
    let room = (original.len() - prefix).min(modified.len() - prefix);
    let suffix = original
        .iter()
        .rev()
        .zip(modified.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let original_end = original.len() - suffix;
    let modified_end = modified.len() - suffix;
    if prefix >= original_end && prefix >= modified_end {
        return (Vec::new(), Vec::new());
    }
    let start = prefix.saturating_sub(CONTEXT_CHARS);
    (
        original[start..(original_end + CONTEXT_CHARS).min(original.len())].to_vec(),
        modified[start..(modified_end + CONTEXT_CHARS).min(modified.len())].to_vec(),
    )
}

fn ngrams(chars: &[char], order: usize) -> HashMap<&[char], usize> {
    let mut counts = HashMap::new();
    if chars.len() >= order {
        for window in chars.windows(order) {
            *counts.entry(window).or_insert(0) += 1;
        }
    }
    counts
}

/// Count after minus count before, for every n-gram of either (zeros included, as Zed's map
/// has them: a change that leaves the counts equal is not "no change").
fn delta<'a>(after: &'a [char], before: &'a [char], order: usize) -> HashMap<&'a [char], isize> {
    let after = ngrams(after, order);
    let before = ngrams(before, order);
    let mut delta: HashMap<&[char], isize> = HashMap::new();
    for (gram, &count) in &before {
        delta.insert(
            gram,
            after.get(gram).copied().unwrap_or(0) as isize - count as isize,
        );
    }
    for (gram, &count) in &after {
        delta.entry(gram).or_insert(count as isize);
    }
    delta
}

/// Added n-grams as themselves, removed ones as a separate "removed" token (Zed's `¬gram`).
fn signed<'a>(delta: &HashMap<&'a [char], isize>) -> HashMap<(bool, &'a [char]), usize> {
    delta
        .iter()
        .filter(|(_, &d)| d != 0)
        .map(|(&gram, &d)| ((d > 0, gram), d.unsigned_abs()))
        .collect()
}

/// The multiset of a diff's changed lines, sign included (Zed's
/// `extract_changed_lines_from_diff`).
pub fn changed_lines(diff: &str) -> HashMap<&str, usize> {
    let mut lines = HashMap::new();
    for line in diff.lines() {
        let header = line.starts_with("---")
            || line.starts_with("+++")
            || line.starts_with("@@")
            || line.starts_with("diff ")
            || line.starts_with("index ");
        if !header && (line.starts_with('+') || line.starts_with('-')) {
            *lines.entry(line).or_insert(0) += 1;
        }
    }
    lines
}

/// Changed lines of `actual_patch` against `expected_patch` (Zed's `exact_lines_match`).
pub fn exact_lines(expected_patch: &str, actual_patch: &str) -> Counts {
    Counts::of(&changed_lines(expected_patch), &changed_lines(actual_patch))
}

/// The suggestion's text as scored: trailing newlines go when the excerpt has none (a case's
/// excerpt is trimmed of them, so a rewrite that ends in one changes nothing).
pub fn normalise<'a>(case: &NextEditCase, actual: &'a str) -> &'a str {
    if case.excerpt.ends_with('\n') {
        actual
    } else {
        actual.trim_end_matches('\n')
    }
}

/// One case's score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CaseScore {
    /// Equal to one of the expected texts (or, on a no-edit case, no change).
    pub exact: bool,
    /// The best delta-chrF over the alternatives, 0 to 100.
    pub delta_chrf: f64,
    /// Changed lines against the alternative with the most true positives.
    pub lines: Counts,
    /// The suggestion changes the excerpt.
    pub suggested: bool,
    /// The alternative delta-chrF was best against (0-based, first of equals).
    pub best: usize,
}

/// Scores `actual`, the case's excerpt as the suggestion leaves it.
pub fn score(case: &NextEditCase, actual: &str) -> CaseScore {
    let actual = normalise(case, actual);
    let alternatives = case.alternatives();
    let (best, delta_chrf) = alternatives
        .iter()
        .map(|expected| delta_chr_f(&case.excerpt, expected, actual))
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |(bi, bs), (i, s)| {
            if s > bs {
                (i, s)
            } else {
                (bi, bs)
            }
        });
    let actual_patch = diff::unified_diff(&case.path, &case.excerpt, actual, 3);
    let actual_lines = changed_lines(&actual_patch);
    let lines = if case.no_edit {
        Counts::of(&HashMap::new(), &actual_lines)
    } else {
        case.expected_patches
            .iter()
            .map(|expected| {
                let patch = expected.patch();
                let mut lines = changed_lines(&patch);
                // Lines outside the excerpt: no system sees or changes them, so they are
                // neither missed nor matched (exact match and delta-chrF ignore them too).
                for line in &expected.outside {
                    if let Some(count) = lines.get_mut(line.as_str()) {
                        *count = count.saturating_sub(1);
                    }
                }
                lines.retain(|_, count| *count > 0);
                Counts::of(&lines, &actual_lines)
            })
            .max_by_key(|counts| counts.true_positives)
            .unwrap_or_default()
    };
    CaseScore {
        exact: alternatives.contains(&actual),
        delta_chrf: delta_chrf.max(0.0),
        lines,
        suggested: actual != case.excerpt,
        best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_wrong_replacement_of_the_right_span_is_five_sixths() {
        // By hand: orders 1 and 2 each have the removal right and the insertion wrong (P = R =
        // 1/2); orders 3 to 6 have no n-grams in either change (1 each). P = R = 5/6, and
        // F-beta of equal P and R is that value.
        assert!(close(delta_chr_f("ab", "ac", "ad"), 100.0 * 5.0 / 6.0));
        assert!(close(delta_chr_f("ab", "ac", "ac"), 100.0));
        assert!(close(delta_chr_f("ab", "ab", "ab"), 100.0));
    }

    #[test]
    fn texts_shorter_than_the_orders_keep_zeds_credit_for_empty_orders() {
        // No edit where one was due: orders 1 and 2 score 0, but orders 3 to 6 have no n-grams
        // on either side and count as agreement (Zed's behaviour): 4/6.
        assert!(close(delta_chr_f("ab", "ac", "ab"), 100.0 * 4.0 / 6.0));
        // With a realistic context (more than 6 characters) a missed edit scores 0.
        assert_eq!(
            delta_chr_f("let x = 42;", "let x = 100;", "let x = 42;"),
            0.0
        );
        // So does an edit where none was due.
        assert_eq!(
            delta_chr_f("let x = 42;", "let x = 42;", "let x = 43;"),
            0.0
        );
    }

    #[test]
    fn hand_computed_values() {
        // Inserting "x" where "b" was due, in "a|c". Order 1: expected {+b}, actual {+x}: 0.
        // Order 2: expected {-ac, +ab, +bc}, actual {-ac, +ax, +xc}: P = R = 1/3. Order 3:
        // {+abc} against {+axc} (the original has no 3-gram): 0. Orders 4 to 6: no n-grams
        // on either side, 1 each. P = R = (0 + 1/3 + 0 + 3) / 6 = 5/9.
        assert!(close(delta_chr_f("ac", "abc", "axc"), 100.0 * 5.0 / 9.0));
    }

    /// Values from an independent transcription of Zed's `metrics.rs` (Python), including
    /// the bounds Zed's own tests put on two of them (partial match 40..60, wrong edit 20..40).
    #[test]
    fn values_agree_with_a_transcription_of_zeds_code() {
        for (original, expected, actual, value) in [
            ("abba", "aa", "aba", 81.81357649442755),
            (
                "let x = 42;",
                "let x = 100;",
                "let x = 99;",
                43.71316306483301,
            ),
            (
                "fn main() { foo(); }",
                "fn main() { bar(); }",
                "fn main() { baz(); }",
                70.29761904761904,
            ),
            (
                "one two three",
                "one three",
                "one two four",
                28.884792182520318,
            ),
        ] {
            let got = delta_chr_f(original, expected, actual);
            assert!((got - value).abs() < 1e-9, "{original:?}: {got} != {value}");
        }
    }

    #[test]
    fn whitespace_runs_collapse_spaces_and_newlines_separately() {
        assert_eq!(
            collapse_whitespace("a  \t b\n\n\n c \n"),
            ['a', ' ', 'b', '\n', ' ', 'c', ' ', '\n']
        );
        // Re-indenting the same code changes nothing chrF sees.
        assert_eq!(delta_chr_f("x\n  y", "x\n    y", "x\n        y"), 100.0);
        // So a whitespace-only change scores 100 against none, and none against it (Zed's
        // shortcut does; its reference function would not).
        assert_eq!(delta_chr_f("x\n  y", "x\n    y", "x\n  y"), 100.0);
        assert_eq!(delta_chr_f("a;\nb;", "a;\nb;", "a;\n\nb;"), 100.0);
    }

    #[test]
    fn changed_lines_are_a_multiset_without_headers() {
        let expected = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-old 1\n-old 2\n+new 1\n+new 2\n";
        let actual = "-old 1\n+new 1\n+extra\n";
        assert_eq!(
            exact_lines(expected, actual),
            Counts {
                true_positives: 2,
                false_positives: 1,
                false_negatives: 2
            }
        );
        assert_eq!(
            exact_lines("+a\n+a\n+a\n", "+a\n+a\n"),
            Counts {
                true_positives: 2,
                false_positives: 0,
                false_negatives: 1
            }
        );
        let none = Counts::default();
        assert_eq!((none.precision(), none.recall()), (None, None));
    }
}
