//! Baselines a next-edit model has to beat, computed from the case alone:
//! - `no-edit` suggests nothing (it is right on every no-edit case and scores 0 elsewhere);
//! - `repeat-last` repeats the user's last change: the last hunk of the edit history, reduced
//!   to the words it changed (`foo` -> `bar`), applied to the next occurrence of the old words
//!   after the cursor, else to the nearest one before it; nothing when the old words occur
//!   nowhere else or the change has no old words to find (a pure insertion of whole lines).
//!   Old words that are part of the new words where those stand already (the spot the user
//!   just edited: `foo` inside `async foo` after `foo` -> `async foo`) are the change made, not
//!   one to make, and are skipped.

use std::fmt;
use std::str::FromStr;

use redraft_context::edit::diff::HunkLine;
use serde::{Deserialize, Serialize};

use super::case::{HistoryBlock, NextEditCase};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    NoEdit,
    RepeatLast,
}

impl Baseline {
    pub const ALL: [Baseline; 2] = [Baseline::NoEdit, Baseline::RepeatLast];

    pub fn name(self) -> &'static str {
        match self {
            Baseline::NoEdit => "no-edit",
            Baseline::RepeatLast => "repeat-last",
        }
    }

    /// The excerpt as the baseline leaves it (unchanged: no suggestion).
    pub fn suggest(self, case: &NextEditCase) -> String {
        match self {
            Baseline::NoEdit => case.excerpt.clone(),
            Baseline::RepeatLast => repeat_last(case).unwrap_or_else(|| case.excerpt.clone()),
        }
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Baseline {
    type Err = String;

    fn from_str(s: &str) -> Result<Baseline, String> {
        Baseline::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown baseline `{s}`: no-edit or repeat-last"))
    }
}

/// The excerpt with the last history change repeated, or `None` when there is nothing to
/// repeat or nowhere to repeat it.
pub fn repeat_last(case: &NextEditCase) -> Option<String> {
    let (old, new) = last_change(&case.history)?;
    let (old, new) = word_change(&old, &new)?;
    // Where the new words stand, the old words inside them are the change already made:
    // repeating `foo` -> `async foo` there would write `async async foo`.
    let done: Vec<(usize, usize)> = case
        .excerpt
        .match_indices(new.as_str())
        .map(|(at, _)| (at, at + new.len()))
        .collect();
    let undone: Vec<usize> = whole_word_occurrences(&case.excerpt, &old)
        .into_iter()
        .filter(|&at| {
            !done
                .iter()
                .any(|&(start, end)| start <= at && at + old.len() <= end)
        })
        .collect();
    let at = nearest_after(&undone, case.cursor)?;
    let mut text = case.excerpt.clone();
    text.replace_range(at..at + old.len(), &new);
    Some(text)
}

/// The removed and added text of the last run of changed lines in the history's last hunk
/// (lines joined with `\n`).
pub fn last_change(history: &[HistoryBlock]) -> Option<(String, String)> {
    let hunk = history
        .iter()
        .rev()
        .filter_map(|block| block.patches().ok())
        .flat_map(|patches| patches.into_iter().rev())
        .find_map(|patch| patch.hunks.last().cloned())?;
    let end = hunk
        .lines
        .iter()
        .rposition(|line| !matches!(line, HunkLine::Context(_)))?;
    let start = hunk.lines[..end]
        .iter()
        .rposition(|line| matches!(line, HunkLine::Context(_)))
        .map_or(0, |at| at + 1);
    let run = &hunk.lines[start..=end];
    let join = |removed: bool| {
        run.iter()
            .filter_map(|line| match line {
                HunkLine::Removed(text) if removed => Some(text.as_str()),
                HunkLine::Added(text) if !removed => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some((join(true), join(false)))
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The span of `old -> new` that differs (after the common prefix, before the common suffix),
/// widened on both sides to whole words; `None` when nothing differs or the old side of the
/// span is empty (nothing to look for).
pub fn word_change(old: &str, new: &str) -> Option<(String, String)> {
    let prefix: usize = old
        .chars()
        .zip(new.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    let room = (old.len() - prefix).min(new.len() - prefix);
    let suffix: usize = old[prefix..]
        .chars()
        .rev()
        .zip(new[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .scan(0, |total, len| {
            *total += len;
            (*total <= room).then_some(len)
        })
        .sum();
    if old.len() - suffix == prefix && new.len() - suffix == prefix {
        return None;
    }
    // The prefix and suffix are shared, so widening them is the same in both texts.
    let start = old[..prefix]
        .char_indices()
        .rev()
        .take_while(|&(_, c)| is_word(c))
        .last()
        .map_or(prefix, |(at, _)| at);
    let tail = &old[old.len() - suffix..];
    let widen: usize = tail
        .chars()
        .take_while(|&c| is_word(c))
        .map(char::len_utf8)
        .sum();
    let suffix = suffix - widen;
    let old_span = &old[start..old.len() - suffix];
    let new_span = &new[start..new.len() - suffix];
    (!old_span.trim().is_empty()).then(|| (old_span.to_string(), new_span.to_string()))
}

/// Where `needle` occurs as whole words: the first occurrence starting at or after `cursor`,
/// else the last one before it.
pub fn next_occurrence(text: &str, needle: &str, cursor: usize) -> Option<usize> {
    nearest_after(&whole_word_occurrences(text, needle), cursor)
}

/// Where `needle` occurs as whole words, in order.
fn whole_word_occurrences(text: &str, needle: &str) -> Vec<usize> {
    let whole = |at: usize| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        let starts_word = needle.chars().next().is_some_and(is_word);
        let ends_word = needle.chars().next_back().is_some_and(is_word);
        !((starts_word && before.is_some_and(is_word)) || (ends_word && after.is_some_and(is_word)))
    };
    text.match_indices(needle)
        .map(|(at, _)| at)
        .filter(|&at| whole(at))
        .collect()
}

/// The first of `occurrences` (in order) at or after `cursor`, else the last one before it.
fn nearest_after(occurrences: &[usize], cursor: usize) -> Option<usize> {
    occurrences
        .iter()
        .copied()
        .find(|&at| at >= cursor)
        .or_else(|| occurrences.iter().copied().rev().find(|&at| at < cursor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_widened_to_whole_words() {
        let change = |old: &str, new: &str| {
            word_change(old, new).map(|(o, n)| (o.to_string(), n.to_string()))
        };
        assert_eq!(
            change("    let foo = 1;", "    let bar = 1;"),
            Some(("foo".into(), "bar".into()))
        );
        assert_eq!(
            change("fn test_cookie_httponly(app)", "fn test_cookie_secur(app)"),
            Some(("test_cookie_httponly".into(), "test_cookie_secur".into()))
        );
        // An insertion takes the word it touches along. The old words are then inside the new
        // ones where the user made the change: `repeat_last` must not repeat it there (the next
        // test).
        assert_eq!(
            change("  foo() {", "  async foo() {"),
            Some(("foo".into(), "async foo".into()))
        );
        assert_eq!(change("a b", "a b"), None);
        // A new line has nothing to look for.
        assert_eq!(change("", "let x = 1;"), None);
    }

    /// `foo() {` -> `async foo() {`: the `foo` the user just made `async foo` is not one to
    /// repeat the change on (that wrote `async async foo`); the next one still is, and with no
    /// other there is nothing to suggest.
    #[test]
    fn the_change_is_not_repeated_where_it_was_just_made() {
        let case = |excerpt: &str| {
            let cursor = excerpt.find("async ").unwrap() + "async ".len();
            NextEditCase {
                name: "async".into(),
                repository_url: String::new(),
                revision: String::new(),
                tags: Vec::new(),
                path: "a.ts".into(),
                excerpt: excerpt.into(),
                cursor,
                history: vec![HistoryBlock {
                    diff: "--- a/a.ts\n+++ b/a.ts\n@@ -1,2 +1,2 @@\n class A {\n-  foo() {\n+  async foo() {\n"
                        .into(),
                    accepted_prediction: false,
                }],
                expected_patches: Vec::new(),
                expected: Vec::new(),
                no_edit: true,
            }
        };
        let two = "class A {\n  async foo() {\n    await work();\n  }\n}\nclass B {\n  foo() {\n    work();\n  }\n}";
        assert_eq!(
            repeat_last(&case(two)).as_deref(),
            Some(two.replace("  foo() {", "  async foo() {").as_str())
        );
        let one = "class A {\n  async foo() {\n    await work();\n  }\n}";
        assert_eq!(repeat_last(&case(one)), None);
    }

    #[test]
    fn the_next_whole_word_occurrence_after_the_cursor_then_before() {
        let text = "foo foobar foo x foo";
        assert_eq!(next_occurrence(text, "foo", 1), Some(11));
        assert_eq!(next_occurrence(text, "foo", 17), Some(17));
        assert_eq!(next_occurrence(text, "foo", 18), Some(17));
        assert_eq!(next_occurrence("foobar", "foo", 0), None);
        assert_eq!(next_occurrence("a.b", ".", 0), Some(1));
    }

    #[test]
    fn the_last_run_of_the_last_hunk_is_the_change() {
        let history = [
            HistoryBlock {
                diff: "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-one\n+two\n".into(),
                accepted_prediction: false,
            },
            HistoryBlock {
                diff: "--- a/x\n+++ b/x\n@@ -1,4 +1,4 @@\n-a\n+b\n c\n-let foo = 1;\n+let bar = 1;\n d\n"
                    .into(),
                accepted_prediction: true,
            },
        ];
        assert_eq!(
            last_change(&history),
            Some(("let foo = 1;".into(), "let bar = 1;".into()))
        );
        assert_eq!(last_change(&[]), None);
    }
}
