//! From the model's rewrite of the region to the edits an editor applies: a line diff of the
//! old region and the new, each changed run of lines narrowed to the characters that differ,
//! so renaming a word is an edit of that word (a run that replaces as many lines as it removes
//! is narrowed line by line, so the word renamed on two lines is two edits).

use std::ops::Range;

use similar::{capture_diff_slices, Algorithm, DiffTag};

use super::diff::line_ending;
use super::plan::EditPlan;
use super::region::line_at;

/// Replace `range` of the document with `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    /// Byte offsets in the document, on char boundaries.
    pub range: Range<usize>,
    pub new_text: String,
}

/// A next-edit suggestion: no edits is no suggestion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditSuggestion {
    /// In document order, not overlapping; each range is in the document before any edit.
    pub edits: Vec<TextEdit>,
    /// Where the editor should offer to jump: the first edit's start, when that is not on the
    /// cursor's line.
    pub jump: Option<usize>,
}

impl EditSuggestion {
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// How much of a region of `region_len` bytes the edits change: the larger of the bytes
    /// they remove and insert, over the region's bytes (0 for no edit; may exceed 1 when more
    /// is inserted than the region held).
    pub fn changed_fraction(&self, region_len: usize) -> f64 {
        let removed: usize = self.edits.iter().map(|e| e.range.len()).sum();
        let inserted: usize = self.edits.iter().map(|e| e.new_text.len()).sum();
        removed.max(inserted) as f64 / region_len.max(1) as f64
    }
}

/// The edits that turn `plan`'s region of `text` (`text[plan.region_range]`, the document the
/// plan was made from) into `new_region`. Line endings of `new_region` become the document's;
/// a rewrite that differs only in them, or only in the region's final newline, is no edit. A
/// region range that is not in `text` gives no edit.
pub fn suggestion_from_region(
    text: &str,
    plan: &EditPlan,
    new_region: &str,
    cursor: usize,
) -> EditSuggestion {
    let Some(old) = text.get(plan.region_range.clone()) else {
        return EditSuggestion::default();
    };
    let base = plan.region_range.start;
    let eol = line_ending(if old.contains('\n') { old } else { text });
    let new = with_ending(new_region, eol, old);

    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    // Lines are equal when their text is; which newline ends them is the document's business.
    let key = |line: &&str| -> (String, bool) {
        let content = line.strip_suffix('\n').unwrap_or(line);
        let content = content.strip_suffix('\r').unwrap_or(content);
        (content.to_string(), content.len() == line.len())
    };
    let old_keys: Vec<_> = old_lines.iter().map(key).collect();
    let new_keys: Vec<_> = new_lines.iter().map(key).collect();
    let offsets = |lines: &[&str]| {
        let mut offsets = Vec::with_capacity(lines.len() + 1);
        let mut at = 0;
        offsets.push(0);
        for line in lines {
            at += line.len();
            offsets.push(at);
        }
        offsets
    };
    let old_at = offsets(&old_lines);
    let new_at = offsets(&new_lines);

    let mut edits = Vec::new();
    // The changed run being gathered: its old and new line ranges.
    let mut run: Option<(Range<usize>, Range<usize>)> = None;
    let mut flush = |run: Option<(Range<usize>, Range<usize>)>| {
        let Some((old_range, new_range)) = run else {
            return;
        };
        // As many lines in as out: line by line, so a word changed on two lines is two edits.
        let pieces: Vec<(Range<usize>, Range<usize>)> = if old_range.len() == new_range.len() {
            old_range
                .zip(new_range)
                .map(|(o, n)| (o..o + 1, n..n + 1))
                .collect()
        } else {
            vec![(old_range, new_range)]
        };
        for (old_range, new_range) in pieces {
            let old_text = &old[old_at[old_range.start]..old_at[old_range.end]];
            let new_text = &new[new_at[new_range.start]..new_at[new_range.end]];
            edits.push(narrowed(base + old_at[old_range.start], old_text, new_text));
        }
    };
    for op in capture_diff_slices(Algorithm::Myers, &old_keys, &new_keys) {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            flush(run.take());
            continue;
        }
        run = Some(match run.take() {
            Some((old_run, new_run)) => {
                (old_run.start..old_range.end, new_run.start..new_range.end)
            }
            None => (old_range, new_range),
        });
    }
    flush(run);
    edits.retain(|edit| !edit.range.is_empty() || !edit.new_text.is_empty());

    let cursor = crate::floor_char_boundary(text, cursor.min(text.len()));
    let line = line_at(text, cursor);
    let on_cursor_line = |offset: usize| {
        line.start <= offset
            && (offset < line.end || (offset == line.end && !text[..line.end].ends_with('\n')))
    };
    let jump = edits
        .first()
        .map(|edit| edit.range.start)
        .filter(|&start| !on_cursor_line(start));
    EditSuggestion { edits, jump }
}

/// `new_region` with `eol` line endings, ending in a newline exactly when `old` does (unless
/// it is empty: deleting the whole region is an edit; an empty `old` takes it as written).
fn with_ending(new_region: &str, eol: &str, old: &str) -> String {
    let mut new = String::with_capacity(new_region.len() + 2);
    for line in new_region.split_inclusive('\n') {
        match line.strip_suffix('\n') {
            Some(content) => {
                new.push_str(content.strip_suffix('\r').unwrap_or(content));
                new.push_str(eol);
            }
            None => new.push_str(line),
        }
    }
    if old.is_empty() {
        // An empty region (an empty document, or the end after a final newline) gains what
        // the model wrote, but a lone newline is nothing.
        if new == eol {
            new.clear();
        }
        return new;
    }
    let old_ends = old.ends_with('\n');
    if new.ends_with('\n') && !old_ends {
        new.truncate(new.len() - eol.len());
    } else if !new.is_empty() && !new.ends_with('\n') && old_ends {
        new.push_str(eol);
    }
    new
}

/// The edit that replaces `old`, at byte `start` of the document, with `new`, narrowed to the
/// characters that change: their longest common prefix and, of what is left, suffix are left
/// out (both on char boundaries), so renaming a word is an edit of that word.
pub(super) fn narrowed(start: usize, old: &str, new: &str) -> TextEdit {
    let (prefix, suffix) = common_affixes(old, new);
    TextEdit {
        range: start + prefix..start + old.len() - suffix,
        new_text: new[prefix..new.len() - suffix].to_string(),
    }
}

/// Bytes of the longest common prefix and, of what is left, suffix; both on char boundaries.
fn common_affixes(old: &str, new: &str) -> (usize, usize) {
    let prefix = old
        .char_indices()
        .zip(new.chars())
        .find(|((_, a), b)| a != b)
        .map_or_else(|| old.len().min(new.len()), |((at, _), _)| at);
    let (old_rest, new_rest) = (&old[prefix..], &new[prefix..]);
    let suffix = old_rest
        .chars()
        .rev()
        .zip(new_rest.chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum();
    (prefix, suffix)
}
