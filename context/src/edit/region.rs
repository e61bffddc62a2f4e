//! The editable region: the whole lines around the cursor that the model may rewrite.
//!
//! The region is the smallest unit around the cursor that has a shape of its own, so a rewrite
//! stays inside it: for Rust the smallest multi-line block, item body, match, field list or
//! item that holds the cursor (tree-sitter); for Python and plain text the cursor's indentation
//! block with the line that opens it. It is then cut to at most `lines_above` lines above the
//! cursor's line and `lines_below` below, and grown from the cursor's line outwards (keeping
//! that ratio between the sides) only while it fits `region_tokens`. It never cuts a line: the
//! cursor's line is always in it, however long.

use std::fmt;
use std::ops::Range;

use tree_sitter::Node;

use super::plan::EditBudget;
use crate::{syntax, Language, Source, TokenCounter};

/// Rust nodes that make a region, with how a log names them.
const UNITS: &[(&str, &str)] = &[
    ("block", "statements"),
    ("match_block", "match arms"),
    ("field_declaration_list", "struct fields"),
    ("field_initializer_list", "struct literal fields"),
    ("enum_variant_list", "enum variants"),
    ("declaration_list", "impl/trait/mod body"),
    ("function_item", "function"),
    ("function_signature_item", "function signature"),
    ("impl_item", "impl"),
    ("trait_item", "trait"),
    ("struct_item", "struct"),
    ("enum_item", "enum"),
    ("mod_item", "module"),
    ("source_file", "top level"),
];

/// The lines the model may rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditRegion {
    /// Byte offsets in the source text: from a line start to just past a line's `\n` (or the
    /// end of the text).
    pub range: Range<usize>,
    pub reason: RegionReason,
}

/// Why the region is what it is, for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionReason {
    /// Rust: the smallest multi-line unit of this kind around the cursor.
    Syntax { unit: &'static str, cut: Cut },
    /// The cursor's indentation block and its opening line.
    Indentation { cut: Cut },
    /// No structure (an empty text, or plain lines at the left margin): lines around the cursor.
    Lines { cut: Cut },
}

/// Which limits made the region smaller than its unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cut {
    /// Lines of the unit above the region were left out.
    pub above: bool,
    /// Lines of the unit below the region were left out.
    pub below: bool,
    /// The token budget, not the line limits, stopped the region.
    pub tokens: bool,
}

impl RegionReason {
    pub fn cut(&self) -> Cut {
        match *self {
            RegionReason::Syntax { cut, .. }
            | RegionReason::Indentation { cut }
            | RegionReason::Lines { cut } => cut,
        }
    }
}

impl fmt::Display for RegionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegionReason::Syntax { unit, .. } => write!(f, "block ({unit})")?,
            RegionReason::Indentation { .. } => f.write_str("indentation block")?,
            RegionReason::Lines { .. } => f.write_str("lines around cursor")?,
        }
        let cut = self.cut();
        match (cut.above, cut.below) {
            (true, true) => f.write_str(" clamped above and below")?,
            (true, false) => f.write_str(" clamped above")?,
            (false, true) => f.write_str(" clamped below")?,
            (false, false) => {}
        }
        if cut.tokens {
            f.write_str(" to the token budget")?;
        }
        Ok(())
    }
}

/// The editable region around `source.cursor`; `budget.region_tokens` is measured with
/// `counter`. Rust without a caller-kept tree is parsed around the cursor.
pub fn edit_region(
    source: &Source<'_>,
    budget: &EditBudget,
    counter: &dyn TokenCounter,
) -> EditRegion {
    let text = source.text;
    let cursor = crate::floor_char_boundary(text, source.cursor.min(text.len()));
    let tree = match (source.language, source.tree) {
        (Language::Rust, None) => syntax::parse_around(text, cursor),
        _ => None,
    };
    let root = match (source.language, source.tree) {
        (Language::Rust, Some(tree)) => Some((tree.root_node(), 0)),
        _ => tree.as_ref().map(|(tree, base)| (tree.root_node(), *base)),
    };
    choose(text, cursor, root, budget, counter)
}

/// [`edit_region`] for a cursor already on a char boundary, with the Rust tree (its root and
/// the byte offset its positions are relative to) if there is one.
pub(crate) fn choose(
    text: &str,
    cursor: usize,
    root: Option<(Node<'_>, usize)>,
    budget: &EditBudget,
    counter: &dyn TokenCounter,
) -> EditRegion {
    let line = line_at(text, cursor);
    let unit = match root {
        Some((root, base)) if !text.trim().is_empty() => rust_unit(text, root, base, cursor, &line),
        _ => None,
    };
    let (bounds, reason) = match unit {
        Some((bounds, unit)) => (
            bounds,
            RegionReason::Syntax {
                unit,
                cut: Cut::default(),
            },
        ),
        None => indentation_block(text, &line),
    };
    let (range, cut) = grow(text, &line, &bounds, budget, counter);
    let reason = match reason {
        RegionReason::Syntax { unit, .. } => RegionReason::Syntax { unit, cut },
        RegionReason::Indentation { .. } => RegionReason::Indentation { cut },
        RegionReason::Lines { .. } => RegionReason::Lines { cut },
    };
    EditRegion { range, reason }
}

/// The lines around the cursor, whatever the structure: at most `budget.lines_above` above the
/// cursor's line and `lines_below` below, within `region_tokens` (Sweep's fixed window).
pub(crate) fn lines_around(
    text: &str,
    cursor: usize,
    budget: &EditBudget,
    counter: &dyn TokenCounter,
) -> EditRegion {
    let line = line_at(text, cursor);
    let (range, cut) = grow(text, &line, &(0..text.len()), budget, counter);
    EditRegion {
        range,
        reason: RegionReason::Lines { cut },
    }
}

/// The whole line holding `offset`: its start to just past its `\n` (or the end of the text).
pub(crate) fn line_at(text: &str, offset: usize) -> Range<usize> {
    let start = text[..offset].rfind('\n').map_or(0, |at| at + 1);
    let end = text[offset..]
        .find('\n')
        .map_or(text.len(), |at| offset + at + 1);
    start..end
}

/// The line before the one starting at `line_start`.
fn line_before(text: &str, line_start: usize) -> Option<Range<usize>> {
    (line_start > 0).then(|| line_at(text, line_start - 1))
}

/// The line after the one ending at `line_end`.
fn line_after(text: &str, line_end: usize) -> Option<Range<usize>> {
    (line_end < text.len()).then(|| line_at(text, line_end))
}

/// The smallest multi-line unit around the cursor, as whole lines.
fn rust_unit(
    text: &str,
    root: Node<'_>,
    base: usize,
    cursor: usize,
    line: &Range<usize>,
) -> Option<(Range<usize>, &'static str)> {
    // The line's code (or, on a blank line, the cursor) is what the unit must hold.
    let content = &text[line.clone()];
    let code_start = line.start + (content.len() - content.trim_start().len());
    let (probe_start, probe_end) = if content.trim().is_empty() {
        (cursor, cursor)
    } else {
        (code_start, line.start + content.trim_end().len())
    };
    let start = probe_start.checked_sub(base)?;
    let end = probe_end.checked_sub(base)?;
    if end > root.end_byte() {
        return None;
    }
    let mut node: Option<Node<'_>> = root.descendant_for_byte_range(start, end);
    while let Some(current) = node {
        let unit = UNITS.iter().find(|(kind, _)| *kind == current.kind());
        if let Some(&(_, unit)) = unit {
            let multi_line = current.start_position().row != current.end_position().row;
            if multi_line || current.parent().is_none() {
                let start = line_at(text, current.start_byte() + base)
                    .start
                    .min(line.start);
                let last = (current.end_byte() + base).saturating_sub(1).max(start);
                let last = crate::floor_char_boundary(text, last.min(text.len()));
                let end = line_at(text, last).end.max(line.end);
                return Some((start..end, unit));
            }
        }
        node = current.parent();
    }
    None
}

/// The run of lines around the cursor's line indented at least as deep as it (blank lines
/// included inside, trimmed at the end) and the shallower line that opens it. A cursor on a
/// blank line takes that line's own indentation, or if it has none, that of the nearest line
/// above that has code.
fn indentation_block(text: &str, line: &Range<usize>) -> (Range<usize>, RegionReason) {
    let lines_reason = RegionReason::Lines {
        cut: Cut::default(),
    };
    // A blank line that has been indented says how deep the cursor is.
    let own = &text[line.clone()];
    let own = own.trim_end_matches(['\n', '\r']);
    let mut indent = (!own.is_empty() && own.trim().is_empty()).then(|| width(own));
    let mut probe = indent.is_none().then(|| line.clone());
    while let Some(current) = probe {
        if let Some(depth) = indentation(&text[current.clone()]) {
            indent = Some(depth);
            break;
        }
        probe = line_before(text, current.start);
    }
    let Some(indent) = indent else {
        return (0..text.len(), lines_reason);
    };
    let deep = |range: &Range<usize>| indentation(&text[range.clone()]).is_none_or(|d| d >= indent);
    let mut start = line.start;
    let mut opener = false;
    while let Some(before) = line_before(text, start) {
        start = before.start;
        if !deep(&before) {
            opener = true;
            break;
        }
    }
    let mut end = line.end;
    let mut last_code = line.end;
    while let Some(after) = line_after(text, end) {
        if !deep(&after) {
            break;
        }
        end = after.end;
        if indentation(&text[after.clone()]).is_some() {
            last_code = end;
        }
    }
    let end = last_code.max(line.end);
    if indent == 0 && !opener && start == 0 && end == text.len() {
        return (start..end, lines_reason);
    }
    (
        start..end,
        RegionReason::Indentation {
            cut: Cut::default(),
        },
    )
}

/// Leading whitespace of a line with code, tabs counted as 4; `None` for a blank line.
fn indentation(line: &str) -> Option<usize> {
    let trimmed = line.trim_start();
    (!trimmed.trim_end().is_empty()).then(|| width(&line[..line.len() - trimmed.len()]))
}

fn width(whitespace: &str) -> usize {
    whitespace
        .chars()
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// The cursor's line, then lines of `bounds` above and below it, alternately in the ratio of
/// the line limits, while they last and fit the token budget.
fn grow(
    text: &str,
    line: &Range<usize>,
    bounds: &Range<usize>,
    budget: &EditBudget,
    counter: &dyn TokenCounter,
) -> (Range<usize>, Cut) {
    let mut range = line.clone();
    let mut tokens = counter.count_within(&text[range.clone()], budget.region_tokens);
    let (mut above, mut below) = (0, 0);
    let mut above_open = budget.lines_above > 0;
    let mut below_open = budget.lines_below > 0;
    let mut cut = Cut::default();
    while above_open || below_open {
        // The side further behind its share goes next.
        let take_above =
            above_open && (!below_open || above * budget.lines_below <= below * budget.lines_above);
        let next = if take_above {
            line_before(text, range.start).filter(|next| next.start >= bounds.start)
        } else {
            line_after(text, range.end).filter(|next| next.end <= bounds.end)
        };
        let Some(next) = next else {
            if take_above {
                above_open = false;
            } else {
                below_open = false;
            }
            continue;
        };
        let cost = counter.count_within(
            &text[next.clone()],
            budget.region_tokens.saturating_sub(tokens),
        );
        if tokens + cost > budget.region_tokens {
            cut.tokens = true;
            if take_above {
                above_open = false;
            } else {
                below_open = false;
            }
            continue;
        }
        tokens += cost;
        if take_above {
            range.start = next.start;
            above += 1;
            above_open = above < budget.lines_above;
        } else {
            range.end = next.end;
            below += 1;
            below_open = below < budget.lines_below;
        }
    }
    cut.above = range.start > bounds.start;
    cut.below = range.end < bounds.end;
    cut.tokens &= cut.above || cut.below;
    (range, cut)
}
