//! A bracket scanner that skips strings and comments: enough lexing to tell whether a middle
//! closes what it opens, without a parser (a middle is rarely a complete syntax tree).

use crate::Language;

/// Scanner state, carried across the prefix, the middle and the suffix.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scanner {
    stack: Vec<u8>,
    /// Closers that matched nothing or the wrong opener.
    pub(crate) errors: usize,
    /// Strings and comments that ended (a count, so that a string closed and another opened
    /// between two looks still shows).
    pub(crate) literals_ended: usize,
    mode: Mode,
    python: bool,
}

/// Whether a point of the text is in code or inside a string or comment, and which kind (the
/// quote and how many close it, a raw string's `#`s, a block comment's nesting): what the
/// bracket scanner must know to go on from there. [`crate::Plan`] carries the one where the
/// cursor's line starts, so post-processing reads the middle's quotes as the document does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexMode(Mode);

impl LexMode {
    pub fn in_code(self) -> bool {
        self.0 == Mode::Code
    }

    /// Where `text` in `language` leaves the scanner [`crate::plan`] reads a text with, going
    /// on from `self` at its start (`LexMode::default()`, code, at the start of a text). Pieces
    /// of a text fed in turn read as one scan of the whole does when each piece ends after a
    /// `\n`: a caller holding a rope, or a checkpoint, need not copy the text before it. The
    /// language server asks it where a window of a huge document may start.
    pub fn after(self, language: Language, text: &str) -> LexMode {
        let mut scanner = Scanner::resume(language, "", self);
        scanner.feed(text);
        scanner.mode()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Mode {
    #[default]
    Code,
    LineComment,
    /// Rust block comments nest.
    BlockComment(u32),
    /// A string closed by `quote` repeated `count` times (Python triple quotes).
    Str {
        quote: u8,
        count: u8,
    },
    /// A Rust raw string (`r"..."`, `br#"..."#`), closed by `"` and `hashes` `#`: no escapes.
    RawStr {
        hashes: usize,
    },
}

impl Scanner {
    pub(crate) fn new(language: Language) -> Scanner {
        Scanner {
            python: language == Language::Python,
            ..Scanner::default()
        }
    }

    /// A scanner going on from a point where `open` (outermost first) is open and the text is
    /// in `mode`.
    pub(crate) fn resume(language: Language, open: &str, mode: LexMode) -> Scanner {
        Scanner {
            stack: open.bytes().collect(),
            mode: mode.0,
            ..Scanner::new(language)
        }
    }

    pub(crate) fn mode(&self) -> LexMode {
        LexMode(self.mode)
    }

    /// The brackets still open, outermost first.
    pub(crate) fn open(&self) -> String {
        self.stack.iter().map(|&b| char::from(b)).collect()
    }

    pub(crate) fn depth(&self) -> usize {
        self.stack.len()
    }

    pub(crate) fn in_code(&self) -> bool {
        self.mode == Mode::Code
    }

    pub(crate) fn feed(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let was_code = self.in_code();
            i += self.step(bytes, i);
            if !was_code && self.in_code() {
                self.literals_ended += 1;
            }
        }
    }

    /// Where the tokens of `text` read on from this state end, up to the first end at or past
    /// `up_to`: a closer (`"""`, `"#`, `*/`), an escape, a char literal or a comment marker is
    /// one token, any other byte one of its own. A text may be cut at these without splitting
    /// a token, which a cut at `up_to` alone could (the whole text is read for that).
    pub(crate) fn token_ends(&self, text: &str, up_to: usize) -> Vec<usize> {
        let mut scanner = self.clone();
        let bytes = text.as_bytes();
        let mut ends = Vec::new();
        let mut i = 0;
        while i < bytes.len() && i < up_to {
            i += scanner.step(bytes, i);
            ends.push(i);
        }
        ends
    }

    /// Where in `text`, read on from this state, the first closer that leaves fewer than
    /// `depth` brackets open starts; `None` if none does.
    pub(crate) fn closes_below(&self, text: &str, depth: usize) -> Option<usize> {
        let mut scanner = self.clone();
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let step = scanner.step(bytes, i);
            if scanner.depth() < depth {
                return Some(i);
            }
            i += step;
        }
        None
    }

    /// Consumes the token at `bytes[i]`, returning its length.
    fn step(&mut self, bytes: &[u8], i: usize) -> usize {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied();
        match self.mode {
            Mode::LineComment => {
                if b == b'\n' {
                    self.mode = Mode::Code;
                }
                1
            }
            Mode::BlockComment(depth) => match (b, next) {
                (b'*', Some(b'/')) => {
                    self.mode = if depth > 1 {
                        Mode::BlockComment(depth - 1)
                    } else {
                        Mode::Code
                    };
                    2
                }
                (b'/', Some(b'*')) => {
                    self.mode = Mode::BlockComment(depth + 1);
                    2
                }
                _ => 1,
            },
            Mode::Str { quote, count } => {
                if b == b'\\' {
                    // An escaped line break (a continuation) is one, CRLF or not.
                    let escaped = if bytes[i + 1..].starts_with(b"\r\n") {
                        3
                    } else {
                        2
                    };
                    return escaped.min(bytes.len() - i);
                }
                // A Rust char literal, or any Python string but a triple-quoted one, ends at
                // its line: unterminated, it is a typo, and must not make every later line
                // start inside a string.
                if b == b'\n' && count == 1 && (quote == b'\'' || self.python) {
                    self.mode = Mode::Code;
                    return 1;
                }
                let count = usize::from(count);
                if b == quote && bytes[i..].iter().take(count).all(|&c| c == quote) {
                    self.mode = Mode::Code;
                    return count.min(bytes.len() - i);
                }
                1
            }
            Mode::RawStr { hashes } => {
                let closes = b == b'"'
                    && bytes.len() > i + hashes
                    && bytes[i + 1..=i + hashes].iter().all(|&c| c == b'#');
                if closes {
                    self.mode = Mode::Code;
                    return 1 + hashes;
                }
                1
            }
            Mode::Code => self.code(bytes, i, b, next),
        }
    }

    fn code(&mut self, bytes: &[u8], i: usize, b: u8, next: Option<u8>) -> usize {
        match b {
            b'(' | b'[' | b'{' => {
                self.stack.push(b);
                1
            }
            b')' | b']' | b'}' => {
                let opener = match b {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                match self.stack.pop() {
                    Some(top) if top == opener => {}
                    Some(_) | None => self.errors += 1,
                }
                1
            }
            b'#' if self.python => {
                self.mode = Mode::LineComment;
                1
            }
            b'/' if !self.python && next == Some(b'/') => {
                self.mode = Mode::LineComment;
                2
            }
            b'/' if !self.python && next == Some(b'*') => {
                self.mode = Mode::BlockComment(1);
                2
            }
            b'"' | b'\'' if self.python => {
                let triple = bytes[i..].iter().take(3).filter(|&&c| c == b).count() == 3;
                self.mode = Mode::Str {
                    quote: b,
                    count: if triple { 3 } else { 1 },
                };
                if triple {
                    3
                } else {
                    1
                }
            }
            b'r' if !self.python => match raw_string_hashes(bytes, i) {
                Some(hashes) => {
                    self.mode = Mode::RawStr { hashes };
                    2 + hashes
                }
                None => 1,
            },
            b'"' => {
                self.mode = Mode::Str { quote: b, count: 1 };
                1
            }
            // Rust: a char literal (`'x'`, `'\n'`, `'\u{..}'`) or a lifetime (`'a`).
            b'\'' => {
                if next == Some(b'\\') {
                    self.mode = Mode::Str {
                        quote: b'\'',
                        count: 1,
                    };
                    return 1;
                }
                let rest = &bytes[i + 1..];
                let char_len = rest
                    .first()
                    .map_or(0, |&lead| utf8_len(lead))
                    .min(rest.len());
                if char_len > 0 && rest.get(char_len) == Some(&b'\'') {
                    char_len + 2
                } else {
                    1
                }
            }
            _ => 1,
        }
    }
}

/// At `bytes[i]` (an `r`): the `#`s of a raw string starting there (`r"`, `r#"`, after a `b`
/// too), or `None` where the `r` is part of a word (`for"`, `ptr#`).
fn raw_string_hashes(bytes: &[u8], i: usize) -> Option<usize> {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let starts_token = match i {
        0 => true,
        1 => bytes[0] == b'b' || !word(bytes[0]),
        _ if bytes[i - 1] == b'b' => !word(bytes[i - 2]),
        _ => !word(bytes[i - 1]),
    };
    if !starts_token {
        return None;
    }
    let hashes = bytes[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (bytes.get(i + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Bracket trouble in `middle + suffix` after `start` (the state at the cursor): closers that
/// match nothing or the wrong opener, plus openers left unclosed at the end. Only differences
/// between middles matter, so a suffix window that ends inside a block is fine.
pub(crate) fn trouble(start: &Scanner, middle: &str, suffix: &str) -> usize {
    let mut scanner = start.clone();
    scanner.feed(middle);
    scanner.feed(suffix);
    scanner.errors + scanner.depth()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn depth_of(language: Language, text: &str) -> (usize, usize) {
        let mut scanner = Scanner::new(language);
        scanner.feed(text);
        (scanner.depth(), scanner.errors)
    }

    #[test]
    fn brackets_in_strings_comments_and_chars_do_not_count() {
        let rust = r#"f("(", '(', '\'', /* ( /* nested ( */ */ x) // (
"#;
        assert_eq!(depth_of(Language::Rust, rust), (0, 0));
        assert_eq!(
            depth_of(Language::Rust, "fn f<'a>(x: &'a str) {"),
            (1, 0),
            "lifetimes are not char literals"
        );
        assert_eq!(
            depth_of(Language::Python, "f('(', \"\"\"\n(\n\"\"\", x) # (\n"),
            (0, 0)
        );
        assert_eq!(depth_of(Language::Rust, "let c = '字'; g("), (1, 0));
    }

    #[test]
    fn raw_strings_hold_quotes_and_backslashes_until_their_hashes() {
        let raw = r###"f(r#"a "quoted" ( \"#, br"\", r##"{ "# }"##, x)"###;
        assert_eq!(depth_of(Language::Rust, raw), (0, 0));
        // An `r` that ends a word starts no raw string.
        assert_eq!(depth_of(Language::Rust, "for\"(\" in x {"), (1, 0));
        assert_eq!(depth_of(Language::Rust, "let s = r\"\n(\n\"; g("), (1, 0));
        let mut open = Scanner::new(Language::Rust);
        open.feed("let s = r#\"\n");
        assert!(
            !open.in_code(),
            "still inside the raw string at the next line"
        );
    }

    #[test]
    fn wrong_and_extra_closers_are_errors() {
        assert_eq!(depth_of(Language::Rust, "(]"), (0, 1));
        assert_eq!(depth_of(Language::Rust, "())"), (0, 1));
        let call = Scanner::resume(Language::Rust, "{(", LexMode::default());
        assert_eq!(call.open(), "{(");
        assert_eq!(trouble(&call, "a", ")}"), 0);
        assert!(
            trouble(&call, "a)", ")}") > 0,
            "closes what the suffix closes"
        );
        assert!(
            trouble(&call, "g(a", ")}") > 0,
            "leaves its own opener open"
        );
        assert_eq!(trouble(&call, "g(a)", ")}"), 0);
    }

    #[test]
    fn python_strings_but_triple_quoted_ones_end_at_their_line() {
        let mut typo = Scanner::new(Language::Python);
        typo.feed("print(\"unterminated)\n");
        assert!(typo.in_code(), "{typo:?}");
        assert_eq!(typo.depth(), 1, "the call is still open");
        let mut continued = Scanner::new(Language::Python);
        continued.feed("s = 'a \\\n");
        assert!(!continued.in_code(), "a backslash continues the line");
        for quotes in ["\"\"\"", "'''"] {
            let mut doc = Scanner::new(Language::Python);
            doc.feed(&format!("def f():\n    {quotes}Doc (\n"));
            assert!(!doc.in_code(), "{quotes}");
            doc.feed(&format!("{quotes}\n"));
            assert!(doc.in_code(), "{quotes}");
            assert_eq!((doc.depth(), doc.literals_ended), (0, 1));
        }
    }

    /// Text a line at a time: the pieces a Rust `'` would read across a line end (`'` then a
    /// line break then `'`, no valid char literal) are left out.
    fn code_lines() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "(", ")", "{", "}", "[", "]", "\"", "'x'", "'\\n'", "'a ", "\"\"\"", "'''", "r#\"",
                "\"#", "br\"", "/*", "*/", "//", "#", "\\", "\n", "a", " ", "é",
            ]),
            0..40,
        )
        .prop_map(|pieces| pieces.concat())
    }

    proptest! {
        /// Resuming at a line start from the state scanned there reads the rest as one scan
        /// of the whole text does: the oracle for the plan's line-start state.
        #[test]
        fn resuming_at_a_line_start_equals_scanning_through(text in code_lines()) {
            for language in [Language::Rust, Language::Python, Language::Plain] {
                let mut whole = Scanner::new(language);
                whole.feed(&text);
                let line_starts = std::iter::once(0)
                    .chain(text.match_indices('\n').map(|(at, _)| at + 1));
                for at in line_starts {
                    let mut before = Scanner::new(language);
                    before.feed(&text[..at]);
                    let mut after = Scanner::resume(language, &before.open(), before.mode());
                    after.feed(&text[at..]);
                    prop_assert_eq!(after.open(), whole.open());
                    prop_assert_eq!(after.mode(), whole.mode());
                    prop_assert_eq!(before.errors + after.errors, whole.errors);
                }
            }
        }

        /// `LexMode::after` over the lines of a text, one after another, ends where one scan
        /// of the whole text does, and so does any line's mode: the language server feeds a
        /// rope so.
        #[test]
        fn lex_mode_after_lines_equals_scanning_through(text in code_lines()) {
            for language in [Language::Rust, Language::Python, Language::Plain] {
                let mut at = 0;
                let mut mode = LexMode::default();
                for line in text.split_inclusive('\n') {
                    mode = mode.after(language, line);
                    at += line.len();
                    let mut through = Scanner::new(language);
                    through.feed(&text[..at]);
                    prop_assert_eq!(mode, through.mode());
                }
            }
        }
    }
}
