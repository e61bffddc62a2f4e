//! One next-edit request: the rendered history, the editable region and the code on either
//! side of it, each within its share of the model's positions.

use std::ops::Range;

use super::history::{render_blocks, HistoryEdit};
use super::region::{self, RegionReason};
use crate::window::{self, LineIndex};
use crate::{syntax, Budget, Language, Source, TokenCounter};

/// Limits for one request. The tokens are the model's: the default model has 512 positions
/// for the whole request (history + before + old region + new region + after).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EditBudget {
    /// Lines of the region above the cursor's line, at most.
    pub lines_above: usize,
    /// Lines of the region below the cursor's line, at most.
    pub lines_below: usize,
    /// The region's current text, at most (its rewrite is given as many again).
    pub region_tokens: usize,
    pub history_tokens: usize,
    /// The window before the region.
    pub before_tokens: usize,
    /// The window after the region.
    pub after_tokens: usize,
    /// A rewrite that changes more than this share of the region (the larger of the bytes it
    /// removes and inserts, over the region's bytes) is no suggestion: a next edit is a small
    /// change, and a model that rewrites most of the region has lost its way.
    pub max_changed_fraction: f64,
    /// A rewrite whose change the model was less sure of than this (the lowest probability of
    /// a token it changes, 0 to 1) is no suggestion; `None`: the model's own bar.
    pub min_confidence: Option<f32>,
}

impl Default for EditBudget {
    fn default() -> EditBudget {
        EditBudget {
            lines_above: 3,
            lines_below: 10,
            region_tokens: 160,
            history_tokens: 160,
            before_tokens: 96,
            after_tokens: 64,
            max_changed_fraction: 0.5,
            min_confidence: None,
        }
    }
}

/// Positions a next-edit request is planned within at most, however many the model has: the
/// prompt is read whole before the rewrite starts, and the shares of a long-context
/// checkpoint's 32k positions made a 10k-token prompt, a request of tens of seconds on a CPU
/// (the real 0.5B in the typing replay: 1 of 38 requests answered, after 86 s).
pub const EDIT_POSITIONS: usize = 2048;

impl EditBudget {
    /// The default lines, with token shares of a model's `max_positions` (the default's at 512
    /// positions), at most [`EDIT_POSITIONS`]: the old region and its rewrite (given about as
    /// much again) take most of it, then history and the code around the region.
    pub fn for_positions(max_positions: usize) -> EditBudget {
        let positions = max_positions.min(EDIT_POSITIONS);
        let share = |sixteenths: usize| positions * sixteenths / 16;
        EditBudget {
            region_tokens: share(5),
            history_tokens: share(5),
            before_tokens: share(3),
            after_tokens: share(2),
            ..EditBudget::default()
        }
    }
}

/// How the model reads a next edit (the engine's format for its checkpoint): which region it
/// rewrites and how the history is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EditStyle {
    /// redraft's own: the region from the syntax around the cursor, history as hunks (see
    /// [`super::history`]).
    #[default]
    Redraft,
    /// Sweep Next-Edit's: a fixed window of [`SWEEP_WINDOW_LINES`] lines on either side of the
    /// cursor's line (what those models were trained to rewrite), history as `original:` /
    /// `updated:` blocks, and the window as it read before the latest edit in it.
    Sweep,
}

/// Lines of a Sweep window above and below the cursor's line (Zed's `sweep_prompt.rs`).
pub const SWEEP_WINDOW_LINES: usize = 10;

/// What the model is shown for one next-edit request, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPlan {
    pub path: String,
    /// The recent edits, rendered one block each, oldest first (see [`super::history`]).
    pub history: Vec<String>,
    pub style: EditStyle,
    /// The text just before the region, from a line start.
    pub before: String,
    /// The region's current text: whole lines.
    pub region: String,
    /// The region before the latest edit of this file, when that edit's new lines are in it
    /// once (undone there); else the region.
    pub original: String,
    /// Byte offset of the cursor in `region`.
    pub cursor_in_region: usize,
    /// The text just after the region, up to a line end.
    pub after: String,
    /// Byte offsets of the region in the source text.
    pub region_range: Range<usize>,
    /// Byte offset in the source text where `before` starts.
    pub before_start: usize,
    /// Byte offset in the source text where `after` ends.
    pub after_end: usize,
    pub reason: RegionReason,
    pub language: Language,
}

/// Plans a next-edit request for the cursor in `source` (`history` oldest first). `before` and
/// `after` are the FIM windows' line walks ([`crate::plan`]'s, cut where an item or statement
/// starts or ends) from the region's edges; what one side leaves of its budget when it reaches
/// the start or end of the text goes to the other.
pub fn plan_edit(
    source: &Source<'_>,
    path: &str,
    history: &[HistoryEdit],
    budget: &EditBudget,
    style: EditStyle,
    counter: &dyn TokenCounter,
) -> EditPlan {
    let text = source.text;
    let cursor = crate::floor_char_boundary(text, source.cursor.min(text.len()));
    let owned_tree = match (source.language, source.tree) {
        (Language::Rust, None) => syntax::parse_around(text, cursor),
        _ => None,
    };
    let tree = match (source.language, source.tree) {
        (Language::Rust, Some(tree)) => Some((tree, 0)),
        _ => owned_tree.as_ref().map(|(tree, base)| (tree, *base)),
    };
    let region = match style {
        EditStyle::Redraft => region::choose(
            text,
            cursor,
            tree.map(|(tree, base)| (tree.root_node(), base)),
            budget,
            counter,
        ),
        EditStyle::Sweep => region::lines_around(
            text,
            cursor,
            &EditBudget {
                lines_above: SWEEP_WINDOW_LINES,
                lines_below: SWEEP_WINDOW_LINES,
                // The prompt shows the window three times (in the file, as it was, as it is)
                // where redraft's shows it once: two thirds of the share keep the total.
                region_tokens: budget.region_tokens * 2 / 3,
                ..*budget
            },
            counter,
        ),
    };
    let view = tree.map(|(tree, base)| syntax::View::new(tree, base));
    let range = region.range.clone();

    let (mut before_start, before_tokens) = before_window(
        text,
        range.start,
        view.as_ref(),
        budget.before_tokens,
        counter,
    );
    let (mut after_end, after_tokens) =
        after_window(text, range.end, view.as_ref(), budget.after_tokens, counter);
    if before_start == 0 && after_end < text.len() {
        let spare = budget.before_tokens - before_tokens;
        after_end = after_window(
            text,
            range.end,
            view.as_ref(),
            budget.after_tokens + spare,
            counter,
        )
        .0;
    } else if after_end == text.len() && before_start > 0 {
        let spare = budget.after_tokens - after_tokens;
        before_start = before_window(
            text,
            range.start,
            view.as_ref(),
            budget.before_tokens + spare,
            counter,
        )
        .0;
    }

    let region_text = &text[range.clone()];
    EditPlan {
        path: path.to_string(),
        history: render_blocks(history, path, budget.history_tokens, counter, style),
        style,
        before: text[before_start..range.start].to_string(),
        region: region_text.to_string(),
        original: original_region(region_text, path, history),
        cursor_in_region: cursor - range.start,
        after: text[range.end..after_end].to_string(),
        region_range: range,
        before_start,
        after_end,
        reason: region.reason,
        language: source.language,
    }
}

/// `region` with the latest edit of `path` undone, when the lines that edit wrote are in it
/// exactly once; else `region` as it is.
fn original_region(region: &str, path: &str, history: &[HistoryEdit]) -> String {
    let latest = history.iter().rev().find(|edit| edit.path == path);
    match latest {
        Some(edit) if edit.old != edit.new && !edit.new.is_empty() => {
            let mut found = region.match_indices(edit.new.as_str());
            match (found.next(), found.next()) {
                (Some((at, _)), None) => format!(
                    "{}{}{}",
                    &region[..at],
                    edit.old,
                    &region[at + edit.new.len()..]
                ),
                _ => region.to_string(),
            }
        }
        _ => region.to_string(),
    }
}

/// Whole lines before `line_start` within `tokens`: (where they start, their tokens).
fn before_window(
    text: &str,
    line_start: usize,
    view: Option<&syntax::View<'_>>,
    tokens: usize,
    counter: &dyn TokenCounter,
) -> (usize, usize) {
    let windows = window::choose(
        text,
        line_start,
        &LineIndex::new(text, line_start),
        view,
        &side_budget(tokens, 0),
        counter,
    );
    (windows.prefix_start, windows.prefix_tokens)
}

/// Whole lines from `line_end` (a line start or the end of the text) within `tokens`: (where
/// they end, their tokens).
fn after_window(
    text: &str,
    line_end: usize,
    view: Option<&syntax::View<'_>>,
    tokens: usize,
    counter: &dyn TokenCounter,
) -> (usize, usize) {
    let windows = window::choose(
        text,
        line_end,
        &LineIndex::new(text, line_end),
        view,
        &side_budget(0, tokens),
        counter,
    );
    // The walk keeps part of a first line that is over budget on its own; a window here is
    // whole lines or nothing.
    let end = windows.suffix_end;
    if end == text.len() || text[..end].ends_with('\n') {
        (end, windows.suffix_tokens)
    } else {
        (line_end, 0)
    }
}

fn side_budget(prefix_tokens: usize, suffix_tokens: usize) -> Budget {
    Budget {
        prefix_tokens,
        suffix_tokens,
        neighbour_tokens: 0,
        max_canvas_tokens: 1,
    }
}
