//! What redraft shows the model around the cursor, and what it keeps of the answer.
//!
//! One policy, two callers: the language server builds every engine request with [`plan`] and
//! cleans every middle with [`finish`], and so does `redraft eval`, so a benchmark number
//! measures what an editor user gets. No LSP types, no model: text and byte offsets in, text
//! out; token counts come from the caller through [`TokenCounter`].
//!
//! - [`plan`] picks the prefix and suffix windows (cut at syntax boundaries, nearest code kept
//!   first), adds snippets from other open documents while the budget allows, and sizes the
//!   masked canvas from the syntax around the cursor ([`CanvasPlan`], with the reason).
//! - [`finish`] drops what repeats the suffix, keeps brackets balanced, stops a line completion
//!   at the end of its syntactic unit and refuses whitespace-only suggestions.
//! - [`survival`] measures what [`finish`] keeps of correct middles cut from real code.
//! - [`edit`] is the text layer of next-edit suggestions: diffs, edit history, the editable
//!   region around the cursor, the request plan and the edits a rewritten region makes.

mod brackets;
mod canvas;
pub mod edit;
mod finish;
mod language;
mod neighbours;
pub mod survival;
mod syntax;
mod window;

pub use brackets::LexMode;
pub use canvas::{CanvasPlan, Unit};
pub use finish::{decided, finish};
pub use language::Language;
pub use syntax::parse_rust;

/// Counts tokens the way the model will see them.
pub trait TokenCounter {
    fn count_tokens(&self, text: &str) -> usize;

    /// `text`'s tokens where they are at most `budget`, else some count above `budget`: what a
    /// window walk asks of each piece, so a counter that can stop encoding past the budget
    /// does (a megabyte line of minified code cost ~0.35 s a request counted whole). By
    /// default, [`TokenCounter::count_tokens`].
    fn count_within(&self, text: &str, budget: usize) -> usize {
        let _ = budget;
        self.count_tokens(text)
    }
}

/// About 3.2 bytes per token (byte-level BPE on code), rounded up: for tests and tools that
/// have no tokenizer at hand.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteEstimate;

impl TokenCounter for ByteEstimate {
    fn count_tokens(&self, text: &str) -> usize {
        (text.len() * 10).div_ceil(32)
    }
}

/// Token budgets around the canvas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub prefix_tokens: usize,
    pub suffix_tokens: usize,
    /// For snippets of other open documents, placed before the prefix.
    pub neighbour_tokens: usize,
    /// The largest canvas the caller allows (a user's "max tokens").
    pub max_canvas_tokens: usize,
}

impl Budget {
    /// Splits what a model with `max_positions` positions can see once a canvas of up to
    /// `max_canvas_tokens` slots (and a BOS) is placed: a quarter for other documents when
    /// there is room for useful snippets, then three quarters of the rest before the cursor.
    pub fn for_positions(max_positions: usize, max_canvas_tokens: usize) -> Budget {
        let max_canvas_tokens = max_canvas_tokens.clamp(1, max_positions.max(2) - 1);
        let available = max_positions.saturating_sub(max_canvas_tokens + 1);
        let neighbour_tokens = if available >= 1024 { available / 4 } else { 0 };
        let context = available - neighbour_tokens;
        let prefix_tokens = context * 3 / 4;
        Budget {
            prefix_tokens,
            suffix_tokens: context - prefix_tokens,
            neighbour_tokens,
            max_canvas_tokens,
        }
    }
}

/// The document around the cursor.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub text: &'a str,
    /// Byte offset of the cursor; a non-boundary offset is moved back to a char boundary and one
    /// past the end is clamped.
    pub cursor: usize,
    pub language: Language,
    /// An up-to-date parse of `text`, if the caller keeps one (the language server does);
    /// otherwise Rust is parsed on demand around the cursor.
    pub tree: Option<&'a tree_sitter::Tree>,
}

/// Another open document, offered as extra context.
#[derive(Debug, Clone)]
pub struct Neighbour {
    pub path: String,
    pub text: String,
    /// Larger is more recent.
    pub edited_at: u64,
}

/// What to send to the engine for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Neighbour snippets (each under a comment naming its file), then the prefix window.
    pub prefix: String,
    /// The suffix window.
    pub suffix: String,
    pub canvas: CanvasPlan,
    /// Byte offset in `Source::text` where the prefix window starts.
    pub prefix_start: usize,
    /// Byte offset in `Source::text` where the suffix window ends.
    pub suffix_end: usize,
    /// The cursor line's text before the cursor.
    pub line_prefix: String,
    /// The cursor line's text after the cursor (no newline).
    pub line_suffix: String,
    /// Brackets open where the cursor's line starts, outermost first (`"{{("`), from the
    /// document rather than the windows, so post-processing knows what the suffix closes.
    pub open_brackets: String,
    /// Whether the cursor's line starts in code or inside a string or comment (a docstring, a
    /// raw string, a block comment), from the same scan as `open_brackets`: post-processing
    /// goes on from it. `None` where that scan began after the start of the text (it reaches
    /// 256 KiB back from the line), so it may have begun inside a string:
    /// post-processing then assumes code and takes every line's indentation for code's.
    pub line_start_mode: Option<LexMode>,
    /// Tokens the windows and snippets were measured at.
    pub prefix_tokens: usize,
    pub suffix_tokens: usize,
    pub neighbour_tokens: usize,
    /// Bytes at the start of `prefix` taken by neighbour snippets.
    pub snippets_len: usize,
    pub language: Language,
}

/// Builds the engine request for `source`: windows, snippets and the canvas.
pub fn plan(
    source: &Source<'_>,
    budget: &Budget,
    counter: &dyn TokenCounter,
    neighbours: &[Neighbour],
) -> Plan {
    let text = source.text;
    let cursor = floor_char_boundary(text, source.cursor.min(text.len()));
    let owned_tree;
    let syntax = match (source.language, source.tree) {
        (Language::Rust, Some(tree)) => Some(syntax::View::new(tree, 0)),
        (Language::Rust, None) => {
            owned_tree = syntax::parse_around(text, cursor);
            owned_tree
                .as_ref()
                .map(|(tree, base)| syntax::View::new(tree, *base))
        }
        _ => None,
    };
    let lines = window::LineIndex::new(text, cursor);
    let canvas = canvas::choose(
        text,
        cursor,
        &lines,
        source.language,
        syntax.as_ref(),
        budget,
    );
    let windows = window::choose(text, cursor, &lines, syntax.as_ref(), budget, counter);
    let snippets = neighbours::choose(
        &text[windows.prefix_start..windows.suffix_end],
        cursor - windows.prefix_start,
        neighbours,
        budget.neighbour_tokens,
        counter,
        source.language,
    );
    let snippets_len = snippets.text.len();
    let mut prefix = snippets.text;
    prefix.push_str(&text[windows.prefix_start..cursor]);
    let line_start = line_start_state(text, lines.line_start, source.language);
    Plan {
        prefix,
        suffix: text[cursor..windows.suffix_end].to_string(),
        canvas,
        prefix_start: windows.prefix_start,
        suffix_end: windows.suffix_end,
        line_prefix: text[lines.line_start..cursor].to_string(),
        line_suffix: text[cursor..lines.line_end].to_string(),
        open_brackets: line_start.open,
        line_start_mode: line_start.mode,
        prefix_tokens: windows.prefix_tokens,
        suffix_tokens: windows.suffix_tokens,
        neighbour_tokens: snippets.tokens,
        snippets_len,
        language: source.language,
    }
}

/// How far back the bracket context is scanned (from the cursor's line start): a text that
/// starts further back is scanned from a line within reach, which cannot know whether it began
/// inside a string or comment ([`Plan::line_start_mode`] is then `None`).
pub const BRACKET_CONTEXT_BYTES: usize = 256 << 10;

/// The scanner's state where the cursor's line starts.
struct LineStartState {
    open: String,
    mode: Option<LexMode>,
}

/// Scans `text` up to `line_start`, from its start or, in a long text, from the first line
/// start within [`BRACKET_CONTEXT_BYTES`]. A scan that skipped text cannot know whether it
/// began inside a string or comment, so it says no mode: a wrong one would read every quote
/// of the middle the wrong way round, while taking each line for code only ends a block early.
fn line_start_state(text: &str, line_start: usize, language: Language) -> LineStartState {
    let mut from = line_start.saturating_sub(BRACKET_CONTEXT_BYTES);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    if from > 0 {
        from = text[from..line_start]
            .find('\n')
            .map_or(line_start, |newline| from + newline + 1);
    }
    let mut scanner = brackets::Scanner::new(language);
    scanner.feed(&text[from..line_start]);
    LineStartState {
        open: scanner.open(),
        // Plain text is scanned with Rust's rules, which a stray quote (an inch mark, a
        // backtick string holding one) would leave "inside a string" for the rest of the file.
        mode: (from == 0 && language != Language::Plain).then(|| scanner.mode()),
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}
