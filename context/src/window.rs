//! Prefix and suffix windows: as much of the nearest code as the token budget allows, cut where
//! an item or statement begins (prefix) or ends (suffix), else at a line.

use crate::syntax::View;
use crate::{Budget, TokenCounter};

/// Bytes per token assumed when a single line is too long to count and must be cut inside.
const BYTES_PER_TOKEN_FLOOR: usize = 3;

/// The cursor's line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineIndex {
    pub(crate) line_start: usize,
    /// Offset of the line's `\n` (or the end of the text); `\r` of a CRLF is left to the line.
    pub(crate) line_end: usize,
}

impl LineIndex {
    pub(crate) fn new(text: &str, cursor: usize) -> LineIndex {
        let line_start = text[..cursor].rfind('\n').map_or(0, |at| at + 1);
        let mut line_end = text[cursor..]
            .find('\n')
            .map_or(text.len(), |at| cursor + at);
        if line_end > cursor && text.as_bytes()[line_end - 1] == b'\r' {
            line_end -= 1;
        }
        LineIndex {
            line_start,
            line_end,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Windows {
    pub(crate) prefix_start: usize,
    pub(crate) suffix_end: usize,
    pub(crate) prefix_tokens: usize,
    pub(crate) suffix_tokens: usize,
}

/// One side's walk: candidate cut points from the cursor outwards with the tokens up to each.
struct Walk {
    /// (offset, tokens between the cursor and this offset), nearest first.
    cuts: Vec<(usize, usize)>,
    /// Whether the walk reached the start (or end) of the text within budget.
    whole: bool,
}

impl Walk {
    fn tokens(&self) -> usize {
        self.cuts.last().map_or(0, |&(_, tokens)| tokens)
    }
}

pub(crate) fn choose(
    text: &str,
    cursor: usize,
    lines: &LineIndex,
    syntax: Option<&View<'_>>,
    budget: &Budget,
    counter: &dyn TokenCounter,
) -> Windows {
    let mut before = walk_back(text, cursor, lines, budget.prefix_tokens, counter);
    // Either side's unused share goes to the other.
    let spare_before = if before.whole {
        budget.prefix_tokens - before.tokens()
    } else {
        0
    };
    let after = walk_forward(text, cursor, budget.suffix_tokens + spare_before, counter);
    if after.whole && !before.whole && after.tokens() < budget.suffix_tokens {
        let extra = budget.suffix_tokens - after.tokens();
        before = walk_back(text, cursor, lines, budget.prefix_tokens + extra, counter);
    }
    let (prefix_start, prefix_tokens) = if before.whole {
        *before.cuts.last().unwrap_or(&(cursor, 0))
    } else {
        pick(&before.cuts, |offset| {
            syntax.is_none_or(|view| view.starts_unit(first_code(text, offset)))
        })
    };
    let (suffix_end, suffix_tokens) = if after.whole {
        *after.cuts.last().unwrap_or(&(cursor, 0))
    } else {
        pick(&after.cuts, |offset| {
            syntax.is_none_or(|view| view.ends_unit(last_code(text, offset)))
        })
    };
    Windows {
        prefix_start,
        suffix_end,
        prefix_tokens,
        suffix_tokens,
    }
}

/// The farthest cut that is a syntax boundary, else the farthest line cut. The first cut (the
/// cursor's own line) is always kept even if it is not a boundary.
fn pick(cuts: &[(usize, usize)], boundary: impl Fn(usize) -> bool) -> (usize, usize) {
    cuts.iter()
        .skip(1)
        .rev()
        .find(|&&(offset, _)| boundary(offset))
        .or(cuts.last())
        .copied()
        .unwrap_or_default()
}

/// Line starts before the cursor while the budget lasts: the cursor's line first (cut inside if
/// that line alone is over budget), then whole earlier lines.
fn walk_back(
    text: &str,
    cursor: usize,
    lines: &LineIndex,
    budget: usize,
    counter: &dyn TokenCounter,
) -> Walk {
    let mut cuts = Vec::new();
    let first = counter.count_within(&text[lines.line_start..cursor], budget);
    if first > budget {
        let start = ceil_char_boundary(text, cursor.saturating_sub(budget * BYTES_PER_TOKEN_FLOOR));
        let start = start.max(lines.line_start);
        cuts.push((start, counter.count_tokens(&text[start..cursor])));
        return Walk { cuts, whole: false };
    }
    cuts.push((lines.line_start, first));
    let mut tokens = first;
    let mut start = lines.line_start;
    while start > 0 {
        let line_start = text[..start - 1].rfind('\n').map_or(0, |at| at + 1);
        let line = counter.count_within(&text[line_start..start], budget - tokens);
        if tokens + line > budget {
            return Walk { cuts, whole: false };
        }
        tokens += line;
        start = line_start;
        cuts.push((start, tokens));
    }
    Walk { cuts, whole: true }
}

/// Line ends (just past the `\n`) after the cursor while the budget lasts.
fn walk_forward(text: &str, cursor: usize, budget: usize, counter: &dyn TokenCounter) -> Walk {
    let mut cuts = Vec::new();
    let mut end = cursor;
    let mut tokens = 0;
    while end < text.len() {
        let line_end = text[end..].find('\n').map_or(text.len(), |at| end + at + 1);
        let line = counter.count_within(&text[end..line_end], budget - tokens);
        if tokens + line > budget {
            if cuts.is_empty() {
                // The cursor's own line is over budget: keep its nearest part.
                let cut = floor_char_boundary(text, end + budget * BYTES_PER_TOKEN_FLOOR);
                cuts.push((cut, counter.count_tokens(&text[end..cut])));
            }
            return Walk { cuts, whole: false };
        }
        tokens += line;
        end = line_end;
        cuts.push((end, tokens));
    }
    Walk { cuts, whole: true }
}

/// The first non-whitespace byte at or after a line start.
fn first_code(text: &str, line_start: usize) -> usize {
    line_start + (text[line_start..].len() - text[line_start..].trim_start().len())
}

/// Just past the last non-whitespace byte before `line_end`.
fn last_code(text: &str, line_end: usize) -> usize {
    text[..line_end].trim_end().len()
}

fn ceil_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset += 1;
    }
    offset
}

fn floor_char_boundary(text: &str, offset: usize) -> usize {
    crate::floor_char_boundary(text, offset.min(text.len()))
}
