//! Post-processing of the model's middle: what a user sees is what the eval scores.

use crate::brackets::{trouble, Scanner};
use crate::{Language, Plan, Unit};

/// Suffix lines compared against the end of a middle when looking for repeats.
const MAX_REPEATED_LINES: usize = 8;
/// Bytes of the start of the rest of the cursor's line that the end of a middle is compared
/// with when it repeats part of it (all of it is always compared): each part found is a
/// candidate whose brackets are scanned, so a middle of minified code repeating a long line
/// would cost its length squared.
const MAX_PARTIAL_REPEAT: usize = 256;

/// Cleans `middle` for insertion at the cursor of `plan`:
///
/// - a line completion stops at the end of its syntactic unit (the first line end where
///   nothing the middle opened is still open: a string or comment open at the cursor is not
///   the middle's); a block stops before the line that dedents out of the body it was
///   written into (a line starting inside a string or comment is no dedent); either stops at
///   a closer of what the suffix closes itself (the body's `}`, a call's `)`), keeping the
///   code before it on its line (`b)` as a call's last argument is `b`);
/// - text that repeats the start of the suffix is dropped when that leaves the brackets
///   balanced (no worse than keeping it); a repeat of part of the rest of the cursor's line
///   ends where one of its tokens ends as the document reads it (all of a `"""`, never one
///   quote of it);
/// - trailing whitespace goes, except the line break of a line inserted before existing text
///   (at the start of a line, or where the middle wrote one), and blanks before code that the
///   cursor's line goes on with (`mut ` at `let |x`; not before a closer or a separator);
/// - line breaks are the document's (CRLF or LF, from its own text), where it has any.
///
/// The middle is read from the state the plan found at the start of the cursor's line
/// ([`Plan::open_brackets`], [`Plan::line_start_mode`]), so its quotes mean what they mean in
/// the document: closing the docstring the cursor is in, not opening one.
///
/// `None` when nothing but whitespace is left. A [`Unit::Fixed`] canvas is only checked for
/// whitespace and repeats.
pub fn finish(middle: &str, plan: &Plan) -> Option<String> {
    if middle.trim().is_empty() {
        return None;
    }
    let at_cursor = scanner_at_cursor(plan);
    let cut = cut_to_unit(middle, plan, &at_cursor);
    let deduped = drop_suffix_repeats(cut, plan, &at_cursor);
    let tidy = tidy_whitespace(deduped, plan);
    (!tidy.trim().is_empty()).then_some(tidy)
}

/// Whether [`finish`] of any middle starting with `lead` cuts it within `lead`, where one of its
/// complete lines decides the cut (at the line's start or end, or at a closer on it that the
/// suffix has): what follows cannot change the finished suggestion, so decoding may stop (the
/// sampler's stop rule). Only a line ending decides: a partial last line may still open or
/// close brackets.
pub fn decided(lead: &str, plan: &Plan) -> bool {
    cut(lead, plan, &scanner_at_cursor(plan)).1
}

/// The scanner at the cursor: the state at the start of its line, then the line up to it.
fn scanner_at_cursor(plan: &Plan) -> Scanner {
    let mode = plan.line_start_mode.unwrap_or_default();
    let mut scanner = Scanner::resume(plan.language, &plan.open_brackets, mode);
    scanner.feed(&plan.line_prefix);
    scanner
}

fn cut_to_unit<'m>(middle: &'m str, plan: &Plan, at_cursor: &Scanner) -> &'m str {
    cut(middle, plan, at_cursor).0
}

/// The middle cut to its unit, and whether a complete line of it decided the cut.
fn cut<'m>(middle: &'m str, plan: &Plan, at_cursor: &Scanner) -> (&'m str, bool) {
    let unit = plan.canvas.unit;
    if unit == Unit::Fixed {
        return (middle, false);
    }
    let mut scanner = at_cursor.clone();
    let start_depth = scanner.depth();
    let mut block_indent = None;
    let mut offset = 0;
    let mut seen_code = false;
    let in_literal_at_cursor = !at_cursor.in_code();
    for line in middle.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        // A line that starts inside a string or comment (a docstring, a raw string) has no
        // indentation of the code's to judge. Where the plan could not tell what the cursor's
        // line starts in, each line is judged: a wrong guess would read the middle's closing
        // quotes as opening ones and never end a Python block, this only ends one early.
        let starts_in_code = scanner.in_code()
            || (plan.line_start_mode.is_none() && plan.language != Language::Rust);
        let before_line = scanner.clone();
        scanner.feed(line);
        let complete = line.ends_with('\n');
        let has_code = !line.trim().is_empty();
        if unit == Unit::Block && has_code && starts_in_code {
            // The body's indentation is that of its first line; a later line left of it has
            // left the body (Python has no closer to tell).
            let column = indent(if line_start == 0 {
                plan.line_prefix.clone() + line
            } else {
                line.to_string()
            });
            match block_indent {
                None => block_indent = Some(column),
                Some(body) if column < body => return (&middle[..line_start], complete),
                Some(_) => {}
            }
        }
        if unit != Unit::RestOfLine && scanner.depth() < start_depth {
            // This line closes something opened before the middle: where the suffix closes it
            // itself, the rest is the suffix's, from that closer on (`b)` as the last argument
            // keeps `b`), or from the line's start where nothing comes before it. The cut is
            // weighed against the whole line as it is: a cut before the line that ends the
            // string the cursor is in would read the suffix from inside that string.
            let closer = before_line
                .closes_below(line, start_depth)
                .filter(|&at| !line[..at].trim().is_empty())
                .map_or(line_start, |at| line_start + at);
            if trouble(at_cursor, &middle[..closer], &plan.suffix)
                <= trouble(at_cursor, &middle[..offset], &plan.suffix)
            {
                return (&middle[..closer], complete);
            }
        }
        seen_code |= has_code;
        // Still in the string or comment the cursor is in (no deeper in a nested comment):
        // the middle left nothing open.
        let in_cursors_literal = in_literal_at_cursor
            && scanner.literals_ended == at_cursor.literals_ended
            && scanner.mode() == at_cursor.mode();
        let line_done = complete && (scanner.in_code() || in_cursors_literal);
        if unit != Unit::Block && seen_code && line_done && scanner.depth() <= start_depth {
            return (&middle[..offset], true);
        }
    }
    (middle, false)
}

/// A line as a repeat is judged: its text without blanks around it, and the column it starts
/// at in the document (`None` where code comes before it on its line: a repeat of a line's
/// text there is judged by its text alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placed<'a> {
    text: &'a str,
    column: Option<usize>,
}

impl<'a> Placed<'a> {
    /// `line` placed after `before`, what comes before it on its line in the document.
    fn new(before: &str, line: &'a str) -> Placed<'a> {
        let column = before
            .trim()
            .is_empty()
            .then(|| indent(before) + indent(line));
        Placed {
            text: line.trim(),
            column,
        }
    }

    /// The same line: the same text, and for a bare word (`end`, `fi`, `done`, `else`) the
    /// same column where both are known. A block that closes with a keyword closes at its
    /// own column, so an `end` one level out is another line; a line of code written at
    /// another column (a model that did not indent its repeat) is still a repeat.
    fn repeats(self, other: Placed) -> bool {
        let bare_word = self.text.chars().all(is_word_char);
        self.text == other.text
            && (!bare_word
                || self.column.is_none()
                || other.column.is_none()
                || self.column == other.column)
    }
}

fn drop_suffix_repeats(middle: &str, plan: &Plan, at_cursor: &Scanner) -> String {
    // The suffix's first line follows the middle's last one on its line, or, where the middle
    // is a line inserted before it, keeps its place after the cursor's indentation (whitespace
    // tidying puts that back after the inserted line).
    let middle_last_line = if plan.canvas.unit != Unit::Fixed && inserts_line(middle, plan) {
        plan.line_prefix.clone()
    } else {
        match middle.rfind('\n') {
            Some(at) => middle[at + 1..].to_string(),
            None => format!("{}{middle}", plan.line_prefix),
        }
    };
    let suffix_lines: Vec<Placed> = plan
        .suffix
        .split('\n')
        .enumerate()
        .map(|(at, line)| Placed::new(if at == 0 { &middle_last_line } else { "" }, line))
        .filter(|line| !line.text.is_empty())
        .take(MAX_REPEATED_LINES)
        .collect();
    let rest_of_line = plan.line_suffix.trim();
    let mut candidates: Vec<&str> = vec![middle];
    // Whole trailing lines equal to the suffix's first lines.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(middle.match_indices('\n').map(|(at, _)| at + 1))
        .filter(|&at| !middle[at..].trim().is_empty())
        .collect();
    for n in 1..=suffix_lines.len().min(line_starts.len()) {
        let from = line_starts[line_starts.len() - n];
        // Judged by their text: a line written at another column is a repeat still.
        let tail = placed_lines(&middle[from..], "");
        if tail.len() == n
            && tail
                .iter()
                .zip(&suffix_lines)
                .all(|(a, b)| a.text == b.text)
        {
            candidates.push(&middle[..from]);
        }
    }
    // The end of the middle equal to the start of the rest of the cursor's line, up to the end
    // of one of its tokens as the document reads them: a middle that closed the docstring the
    // cursor is in repeats all of the suffix's `"""`, not its first quote or two. The part kept
    // ends where a token of the middle ends too: the `/` of a comment's `*/` is no repeat of
    // a `//` starting the suffix.
    let trimmed = middle.trim_end();
    if !rest_of_line.is_empty() {
        let line_suffix = plan.line_suffix.as_str();
        let mut reader = at_cursor.clone();
        reader.feed(&line_suffix[..line_suffix.len() - line_suffix.trim_start().len()]);
        let reach = trimmed.len().min(MAX_PARTIAL_REPEAT);
        let ends = reader.token_ends(rest_of_line, reach);
        let mut middle_ends = None;
        for cut in ends.into_iter().chain([rest_of_line.len()]) {
            if rest_of_line.is_char_boundary(cut) && trimmed.ends_with(&rest_of_line[..cut]) {
                let kept = &trimmed[..trimmed.len() - cut];
                let middle_ends =
                    middle_ends.get_or_insert_with(|| at_cursor.token_ends(trimmed, trimmed.len()));
                if !kept.is_empty() && middle_ends.binary_search(&kept.len()).is_err() {
                    continue;
                }
                // Nor inside a word: the scanner steps through a word a byte at a time, and
                // `else` before a suffix starting `else` is no `els` and a repeated `e`.
                let splits_word = kept.chars().next_back().is_some_and(is_word_char)
                    && rest_of_line[..cut].chars().next().is_some_and(is_word_char);
                if splits_word {
                    continue;
                }
                let last_line = kept.rfind('\n').map_or(0, |at| at + 1);
                candidates.push(if kept[last_line..].trim().is_empty() {
                    // Repeating all of an indented line leaves only its indentation behind.
                    kept.trim_end_matches([' ', '\t'])
                } else {
                    // Blanks after code are the line's own (`a, ` at `f(|b)`): whitespace
                    // tidying judges them.
                    kept
                });
            }
        }
    }
    candidates.sort_by_key(|candidate| std::cmp::Reverse(candidate.len()));
    candidates.dedup();
    // Brackets decide first; a candidate that still ends repeating the suffix's next line, or
    // the start of the rest of the cursor's line, has a point against it. A whole last line at
    // another column than the suffix's is another line: an `end` one level out (Ruby's and
    // Lua's blocks close with a keyword, which the bracket count does not weigh).
    let suffix_first = suffix_lines.first().copied();
    // A suffix window that ends before the document does leaves open the brackets the document
    // closes after it, and a candidate ending in a repeat of the suffix's next closing line (a
    // second `    }`) leaves one fewer: the count at the window's end rewards it. So where a
    // whole last line is a copy of the suffix's (the same text at the same column), going below
    // the fewest brackets the document itself has open anywhere in the window is trouble too.
    // (Not otherwise: a middle that closes what the document without it leaves open, a `}` one
    // level deeper than the suffix's or `x }` before the `}` of `${{ x }}`, goes below that and
    // is right.)
    let document_fewest = std::cell::OnceCell::new();
    let score = |candidate: &str| {
        let last_line = placed_lines(candidate, &plan.line_prefix).pop();
        // The candidate's last line and the suffix's first, where their texts are the same.
        let same_text = last_line
            .zip(suffix_first)
            .filter(|(last, first)| last.text == first.text);
        let repeats_line = same_text.is_some_and(|(last, first)| last.repeats(first));
        let another_line = same_text.is_some() && !repeats_line;
        let repeats_rest = !rest_of_line.is_empty()
            && candidate.trim_end().ends_with(rest_of_line)
            && !another_line;
        // A copy: the same line at the same column (a closer one level deeper is the middle's
        // own, and the document without the middle lacks it).
        let copied_line = same_text
            .is_some_and(|(last, first)| last.column.is_some() && last.column == first.column);
        let over_closed = if copied_line {
            let fewest = at_cursor.min_depth_through(&[candidate, &plan.suffix]);
            let document_fewest =
                *document_fewest.get_or_init(|| at_cursor.min_depth_through(&[&plan.suffix]));
            document_fewest.saturating_sub(fewest)
        } else {
            0
        };
        trouble(at_cursor, candidate, &plan.suffix)
            + over_closed
            + usize::from(repeats_line || repeats_rest)
    };
    let mut best = candidates[0];
    let mut best_score = score(best);
    for &candidate in &candidates[1..] {
        let candidate_score = score(candidate);
        if candidate_score < best_score {
            best = candidate;
            best_score = candidate_score;
        }
    }
    best.to_string()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The lines of a middle (or of a start of it) that hold more than blanks, as placed in the
/// document: its first line after the cursor's `line_prefix`.
fn placed_lines<'m>(middle: &'m str, line_prefix: &str) -> Vec<Placed<'m>> {
    let mut at = 0;
    let mut lines = Vec::new();
    for line in middle.split_inclusive('\n') {
        let before = if at == 0 { line_prefix } else { "" };
        at += line.len();
        let placed = Placed::new(before, line);
        if !placed.text.is_empty() {
            lines.push(placed);
        }
    }
    lines
}

/// Whether `middle` is a line inserted before the cursor's line, which keeps its break (and
/// the cursor's line its indentation after it): at the start of a line, or where the model
/// ended one. After an indentation, with code after the cursor, a middle that wrote no break
/// is part of that line (`    |.expect(..)`): no break is added.
fn inserts_line(middle: &str, plan: &Plan) -> bool {
    // Whether the model ended its middle with a line break (trailing blanks aside).
    let wrote_break = middle.trim_end_matches([' ', '\t', '\r']).ends_with('\n');
    plan.canvas.unit != Unit::RestOfLine
        && plan.line_prefix.trim().is_empty()
        && !plan.line_suffix.trim().is_empty()
        && (wrote_break || plan.line_prefix.is_empty())
}

fn tidy_whitespace(mut middle: String, plan: &Plan) -> String {
    if plan.canvas.unit == Unit::Fixed {
        return middle;
    }
    let code_len = middle.trim_end().len();
    let inserting_line = inserts_line(&middle, plan);
    // Blanks before code that follows the cursor on its line are inside that line, not at its
    // end: `mut ` at `let |x = 5;` keeps its space (`mutx` would not compile), `a, ` at
    // `f(|b)` too. Before a closer or a separator no space belongs (`f(a )`), so none is kept.
    let blanks = &middle[code_len..];
    let inside_line = !inserting_line
        && blanks.bytes().all(|b| b == b' ' || b == b'\t')
        && plan.line_suffix.chars().next().is_some_and(|next| {
            !next.is_whitespace() && !matches!(next, ')' | ']' | ',' | ';' | '.' | '?' | ':')
        });
    if !inside_line {
        middle.truncate(code_len);
    }
    if inserting_line && !middle.is_empty() {
        middle.push('\n');
        // The code after the cursor keeps the indentation it had before the inserted line.
        middle.push_str(&plan.line_prefix);
    }
    match uses_crlf(plan) {
        Some(true) => middle = middle.replace("\r\n", "\n").replace('\n', "\r\n"),
        Some(false) => middle = middle.replace("\r\n", "\n"),
        None => {}
    }
    middle
}

/// Whether the document ends its lines with CRLF: its own text before the cursor says, not the
/// neighbour snippets in front of it (another file's line endings), else the suffix does;
/// `None` when neither holds a line break (the middle's own line endings are kept).
fn uses_crlf(plan: &Plan) -> Option<bool> {
    let own = plan.prefix.get(plan.snippets_len..).unwrap_or(&plan.prefix);
    [own, plan.suffix.as_str()]
        .into_iter()
        .find(|text| text.contains('\n'))
        .map(|text| text.contains("\r\n"))
}

fn indent(line: impl AsRef<str>) -> usize {
    line.as_ref()
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}
