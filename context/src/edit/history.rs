//! The user's recent edits, as the model reads them.
//!
//! A [`HistoryEdit`] is one change as whole lines: the lines it touched, before and after, with
//! at most [`CONTEXT_LINES`] unchanged line on either side, line endings `\n`.
//! [`render_history`] writes the newest edits that fit the token budget, oldest first, one
//! block each. A model is trained on exactly this text, so it is fixed here:
//!
//! ```text
//! @@ src/other.rs
//!  fn area(&self) -> u32 {
//! -    self.w * self.h
//! +    self.width * self.height
//! @@
//! -    let w = 3;
//! +    let width = 3;
//! ```
//!
//! - A block starts with a header line: `@@ ` and the file's path for an edit of another file,
//!   bare `@@` for an edit of the file being edited now (the request names that file).
//! - Then the edit's lines in order, each `\n`-terminated: ` ` + an unchanged line, `-` + a
//!   removed line, `+` + an added line (a line diff of `old` to `new`; within a replaced run
//!   the removed lines come before the added ones). No line numbers, no counts.
//! - Edits that change nothing are left out. The budget is spent newest first and counted block
//!   by block; the first block that does not fit ends the history (older ones are left out
//!   too, so what is shown is always the most recent run of edits).

use std::ops::Range;

use redraft_prompts::sweep;
use similar::{capture_diff_slices, Algorithm, DiffTag};

use super::diff::{FilePatch, HunkLine};
use super::plan::EditStyle;
use crate::TokenCounter;

/// Unchanged lines kept on either side of a change.
pub const CONTEXT_LINES: usize = 1;

/// One past edit, as whole lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEdit {
    pub path: String,
    /// The lines before the edit, each ending in `\n`.
    pub old: String,
    /// The same lines after the edit, each ending in `\n`.
    pub new: String,
}

impl HistoryEdit {
    /// One edit per hunk; context beyond [`CONTEXT_LINES`] at either end of a hunk is dropped
    /// (context between two changes of one hunk is kept). The path is the new path, or the old
    /// one for a deleted file.
    pub fn from_patch(patch: &FilePatch) -> Vec<HistoryEdit> {
        let path = if patch.new_path == "/dev/null" || patch.new_path.is_empty() {
            &patch.old_path
        } else {
            &patch.new_path
        };
        patch
            .hunks
            .iter()
            .map(|hunk| {
                let lines = &hunk.lines;
                let first_change = lines.iter().position(|line| !is_context(line));
                let last_change = lines.iter().rposition(|line| !is_context(line));
                let kept = match (first_change, last_change) {
                    (Some(first), Some(last)) => {
                        first.saturating_sub(CONTEXT_LINES)
                            ..(last + 1 + CONTEXT_LINES).min(lines.len())
                    }
                    _ => 0..0,
                };
                let mut old = String::new();
                let mut new = String::new();
                for line in &lines[kept] {
                    let text = line.text();
                    if !matches!(line, HunkLine::Added(_)) {
                        old.push_str(text);
                        old.push('\n');
                    }
                    if !matches!(line, HunkLine::Removed(_)) {
                        new.push_str(text);
                        new.push('\n');
                    }
                }
                // A byte order mark is not text (a `git diff` of line 1 carries the file's).
                let unmarked = |text: String| match text.strip_prefix('\u{feff}') {
                    Some(rest) => rest.to_string(),
                    None => text,
                };
                HistoryEdit {
                    path: path.clone(),
                    old: unmarked(old),
                    new: unmarked(new),
                }
            })
            // A hunk that changed only line endings changed no text the model reads.
            .filter(|edit| edit.old != edit.new)
            .collect()
    }

    /// An editor's change: `text_before[range]` replaced by `new_text`, widened to the whole
    /// lines it touches plus [`CONTEXT_LINES`] on either side. A range that ends at a line start
    /// does not touch that line. Offsets past the end are clamped, off-boundary ones moved back
    /// to a char boundary.
    pub fn from_change(
        path: &str,
        text_before: &str,
        range: Range<usize>,
        new_text: &str,
    ) -> HistoryEdit {
        let floor =
            |offset: usize| crate::floor_char_boundary(text_before, offset.min(text_before.len()));
        let end = floor(range.end);
        let start = floor(range.start).min(end);
        let mut lines_start = text_before[..start].rfind('\n').map_or(0, |at| at + 1);
        let touches_end_line = end == start || !text_before[..end].ends_with('\n');
        let mut lines_end = if touches_end_line {
            text_before[end..]
                .find('\n')
                .map_or(text_before.len(), |at| end + at + 1)
        } else {
            end
        };
        for _ in 0..CONTEXT_LINES {
            if lines_start > 0 {
                lines_start = text_before[..lines_start - 1]
                    .rfind('\n')
                    .map_or(0, |at| at + 1);
            }
            if lines_end < text_before.len() {
                lines_end = text_before[lines_end..]
                    .find('\n')
                    .map_or(text_before.len(), |at| lines_end + at + 1);
            }
        }
        let old = &text_before[lines_start..lines_end];
        let new = format!(
            "{}{}{}",
            &text_before[lines_start..start],
            new_text,
            &text_before[end..lines_end]
        );
        HistoryEdit {
            path: path.to_string(),
            old: whole_lines(old),
            new: whole_lines(&new),
        }
    }

    /// The edit as a Sweep prompt's history block ([`redraft_prompts::sweep::history_block`]:
    /// without its `<|file_sep|>`, which the engine writes, nor the `\n` that ends it); empty if
    /// it changes nothing.
    pub fn render_sweep(&self) -> String {
        sweep::history_block(&self.path, &self.old, &self.new)
    }

    /// The edit's block as [`render_history`] writes it; empty if it changes nothing.
    pub fn render(&self, current_path: &str) -> String {
        if self.old == self.new {
            return String::new();
        }
        let old: Vec<&str> = self.old.lines().collect();
        let new: Vec<&str> = self.new.lines().collect();
        let mut block = if self.path == current_path {
            "@@\n".to_string()
        } else {
            format!("@@ {}\n", self.path)
        };
        for op in capture_diff_slices(Algorithm::Myers, &old, &new) {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            if tag == DiffTag::Equal {
                push_lines(&mut block, ' ', &old[old_range]);
            } else {
                push_lines(&mut block, '-', &old[old_range]);
                push_lines(&mut block, '+', &new[new_range]);
            }
        }
        block
    }
}

fn is_context(line: &HunkLine) -> bool {
    matches!(line, HunkLine::Context(_))
}

fn push_lines(block: &mut String, sign: char, lines: &[&str]) {
    for line in lines {
        block.push(sign);
        block.push_str(line);
        block.push('\n');
    }
}

/// `\n` line endings, and one after the last line.
fn whole_lines(text: &str) -> String {
    let mut lines = String::with_capacity(text.len() + 1);
    for line in text.lines() {
        lines.push_str(line);
        lines.push('\n');
    }
    lines
}

/// The newest `edits` (last is newest) whose blocks fit `max_tokens`, written oldest first in
/// the format of the module doc.
pub fn render_history(
    edits: &[HistoryEdit],
    current_path: &str,
    max_tokens: usize,
    counter: &dyn TokenCounter,
) -> String {
    render_blocks(edits, current_path, max_tokens, counter, EditStyle::Redraft).concat()
}

/// The blocks of [`render_history`] one by one, oldest first, in `style`'s format: for
/// [`EditStyle::Sweep`] the newest [`sweep::MAX_HISTORY`] edits as [`HistoryEdit::render_sweep`]
/// writes them.
pub fn render_blocks(
    edits: &[HistoryEdit],
    current_path: &str,
    max_tokens: usize,
    counter: &dyn TokenCounter,
    style: EditStyle,
) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut tokens = 0;
    let most = match style {
        EditStyle::Redraft => usize::MAX,
        EditStyle::Sweep => sweep::MAX_HISTORY,
    };
    for edit in edits.iter().rev() {
        if blocks.len() == most {
            break;
        }
        let block = match style {
            EditStyle::Redraft => edit.render(current_path),
            EditStyle::Sweep => edit.render_sweep(),
        };
        if block.is_empty() {
            continue;
        }
        let cost = counter.count_within(&block, max_tokens.saturating_sub(tokens));
        if tokens + cost > max_tokens {
            break;
        }
        tokens += cost;
        blocks.push(block);
    }
    blocks.reverse();
    blocks
}
