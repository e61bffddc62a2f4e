//! How many masked slots to lay down, from the syntax around the cursor.
//!
//! Length is the dominant quality factor for diffusion infilling: a canvas much longer than the
//! middle invites the model to keep writing, a short one cuts it off. The middle still ends
//! early through EOS, so each size is an upper bound for its kind of edit.

use crate::syntax::View;
use crate::window::LineIndex;
use crate::{Budget, Language};

/// Finishing the cursor's line (or an expression inside it).
pub const REST_OF_LINE_TOKENS: usize = 16;
/// A statement on a blank line, or a line inserted before the cursor's line.
pub const LINE_TOKENS: usize = 24;
/// An empty body: a fresh `fn`, a `match` with no arms, a block after `:`.
pub const BLOCK_TOKENS: usize = 48;

/// The kind of edit the canvas is sized for; [`crate::finish`] trims the middle to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// The cursor's line has code before it: complete that line (multi-line only while a
    /// bracket opened in the middle is still open).
    RestOfLine,
    /// The cursor is at the start of a line: one statement.
    Line,
    /// The cursor is in an empty body: several lines, ending before the body's closer.
    Block,
    /// The caller fixed the length (e.g. an evaluation told the true middle length): keep
    /// everything the model wrote.
    Fixed,
}

/// The canvas for one request and why it has that size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanvasPlan {
    pub tokens: usize,
    pub unit: Unit,
    pub reason: String,
}

impl CanvasPlan {
    /// A canvas of exactly `tokens` slots chosen by the caller.
    pub fn fixed(tokens: usize) -> CanvasPlan {
        CanvasPlan {
            tokens,
            unit: Unit::Fixed,
            reason: format!("length fixed by the caller: {tokens} tokens"),
        }
    }
}

pub(crate) fn choose(
    text: &str,
    cursor: usize,
    lines: &LineIndex,
    language: Language,
    syntax: Option<&View<'_>>,
    budget: &Budget,
) -> CanvasPlan {
    let line_prefix = &text[lines.line_start..cursor];
    let line_suffix = &text[cursor..lines.line_end];
    let (unit, why) = if !line_prefix.trim().is_empty() {
        (
            Unit::RestOfLine,
            format!("code before the cursor (`{}`)", excerpt(line_prefix.trim())),
        )
    } else if let Some(body) = syntax.and_then(|view| view.empty_body_at(text, cursor)) {
        (Unit::Block, format!("cursor in an empty {body}"))
    } else if let Some(opener) = opens_empty_body(text, lines, language) {
        (
            Unit::Block,
            format!("the line above ends with `{opener}` and its body is empty"),
        )
    } else if line_suffix.trim().is_empty() {
        (Unit::Line, "blank line: one statement".to_string())
    } else {
        (
            Unit::Line,
            format!(
                "start of the line `{}`: insert a line before it",
                excerpt(line_suffix.trim())
            ),
        )
    };
    let wanted = match unit {
        Unit::RestOfLine => REST_OF_LINE_TOKENS,
        Unit::Line => LINE_TOKENS,
        Unit::Block | Unit::Fixed => BLOCK_TOKENS,
    };
    let tokens = wanted.min(budget.max_canvas_tokens).max(1);
    let capped = if tokens < wanted {
        format!(" (capped from {wanted} by max tokens)")
    } else {
        String::new()
    };
    CanvasPlan {
        tokens,
        unit,
        reason: format!("{unit:?}: {why}; {tokens} tokens{capped}"),
    }
}

/// Without a tree: the previous non-blank line ends with a body opener and the next non-blank
/// line is not indented deeper than it (the body is empty).
fn opens_empty_body(text: &str, lines: &LineIndex, language: Language) -> Option<char> {
    if !text[lines.line_start..lines.line_end].trim().is_empty() {
        return None;
    }
    let above = text[..lines.line_start]
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())?;
    let opener = above.trim_end().chars().last()?;
    if !language.opens_body(opener) {
        return None;
    }
    let below = text[lines.line_end..]
        .lines()
        .find(|line| !line.trim().is_empty());
    match below {
        None => Some(opener),
        Some(below) => (indent(below) <= indent(above)).then_some(opener),
    }
}

fn indent(line: &str) -> usize {
    line.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// A short quote of code for a log line.
fn excerpt(code: &str) -> String {
    const MAX: usize = 40;
    match code.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &code[..cut]),
        None => code.to_string(),
    }
}
