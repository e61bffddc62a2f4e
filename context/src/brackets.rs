//! A bracket scanner that skips strings and comments: enough lexing to tell whether a middle
//! closes what it opens, without a parser (a middle is rarely a complete syntax tree). How a
//! language writes its comments and strings is its [`Lexis`] (`crate::language` has one a
//! language). Literals whose closer repeats their opener's word or level (here-documents, C++
//! raw strings, Lua's long brackets) are `delimited`'s; whether a JavaScript `/` divides,
//! `regex`'s.

mod delimited;
mod regex;

use crate::Language;
use delimited::{Delimiter, Heredoc, LineMatch};
use regex::LastWord;

pub(crate) use delimited::Heredocs;

/// How a language writes comments and strings: what the scanner must know of it. The rows of
/// `crate::language` spell each from [`Lexis::NONE`] or a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lexis {
    /// What starts a line comment; the first heads neighbour snippets.
    pub(crate) line_comments: &'static [&'static str],
    /// A line comment starts only at a line's start or after a blank (shell's `$#`, YAML's
    /// `a#b`).
    pub(crate) comment_after_blank: bool,
    /// A block comment's opener and closer.
    pub(crate) block_comment: Option<(&'static str, &'static str)>,
    /// Block comments nest (Rust, Kotlin, Swift, Dart, Haskell); C's end at the first closer.
    pub(crate) comments_nest: bool,
    /// Quotes that open a string with backslash escapes.
    pub(crate) escaped_quotes: &'static [u8],
    /// Quotes that open a string without escapes (Go's raw strings, shell's `'`, SQL's).
    pub(crate) verbatim_quotes: &'static [u8],
    /// Of these quotes, those whose strings end at their line unless tripled: unterminated,
    /// such a string is a typo, and must not make every later line start inside a string.
    pub(crate) one_line_quotes: &'static [u8],
    /// Quotes that, three in a row, open a string closed by three (Python's docstrings, Java's
    /// text blocks, TOML's multi-line strings).
    pub(crate) triple_quotes: &'static [u8],
    /// A quote opens a string only where a token starts, not after a word character (YAML's
    /// `it's`, Haskell's `foldl'`).
    pub(crate) quotes_start_tokens: bool,
    /// Rust: `'` is a char literal or a lifetime; `r"..."`, `br#"..."#` are raw strings.
    pub(crate) rust: bool,
    /// Lua's long brackets of any level: strings, `[[...]]`, `[==[...]==]`, and comments,
    /// `--[[...]]`, `--[==[...]==]`.
    pub(crate) long_brackets: bool,
    /// C++'s raw strings, `R"delim(...)delim"` (and `u8R`, `uR`, `UR`, `LR`).
    pub(crate) cpp_raw_strings: bool,
    /// Here-documents, and how they open: the body holds anything up to its terminator's line.
    pub(crate) heredocs: Option<Heredocs>,
    /// Ruby's percent literals, `%w[a b]`, `%Q[#{x}="y"]`, `%r{/(\w+)}`, where an operand starts:
    /// their `#` is no comment, their quotes open no string.
    pub(crate) percent_literals: bool,
    /// C#'s verbatim strings, `@"..."`.
    pub(crate) at_verbatim: bool,
    /// JavaScript's regular expressions, `/[(]/g`: a `/` where an operand may start (at a line's
    /// start, after an operator or an opener, or after a keyword such as `return`) opens one.
    pub(crate) regex_literals: bool,
}

impl Lexis {
    /// No comments, no strings: the start every row's lexis is spelt from.
    pub(crate) const NONE: Lexis = Lexis {
        line_comments: &[],
        comment_after_blank: false,
        block_comment: None,
        comments_nest: false,
        escaped_quotes: b"",
        verbatim_quotes: b"",
        one_line_quotes: b"",
        triple_quotes: b"",
        quotes_start_tokens: false,
        rust: false,
        long_brackets: false,
        cpp_raw_strings: false,
        heredocs: None,
        percent_literals: false,
        at_verbatim: false,
        regex_literals: false,
    };

    pub(crate) const RUST: Lexis = Lexis {
        line_comments: &["//"],
        block_comment: Some(("/*", "*/")),
        comments_nest: true,
        escaped_quotes: b"\"",
        one_line_quotes: b"'",
        rust: true,
        ..Lexis::NONE
    };

    /// Whether `b` may start something other than a plain byte of code in this lexis.
    pub(crate) fn starts_token(&self, b: u8) -> bool {
        matches!(b, b'(' | b'[' | b'{' | b')' | b']' | b'}')
            || self
                .line_comments
                .iter()
                .any(|marker| marker.as_bytes()[0] == b)
            || self
                .block_comment
                .is_some_and(|(open, _)| open.as_bytes()[0] == b)
            || self.escaped_quotes.contains(&b)
            || self.verbatim_quotes.contains(&b)
            || (self.rust && matches!(b, b'r' | b'\''))
            || (self.long_brackets && b == b'[')
            || (self.cpp_raw_strings && b == b'R')
            || (self.heredocs.is_some() && b == b'<')
            || (self.percent_literals && b == b'%')
            || (self.at_verbatim && b == b'@')
            || (self.regex_literals && b == b'/')
    }
}

/// Scanner state, carried across the prefix, the middle and the suffix.
#[derive(Debug, Clone)]
pub(crate) struct Scanner {
    stack: Vec<u8>,
    /// Closers that matched nothing or the wrong opener.
    pub(crate) errors: usize,
    /// Strings and comments that ended (a count, so that a string closed and another opened
    /// between two looks still shows).
    pub(crate) literals_ended: usize,
    mode: Mode,
    lexis: &'static Lexis,
    /// Which of the bytes that start a token of `lexis` are: a table, as the scanner reads
    /// every byte of up to 8 MiB on a request (the language server's window start).
    starts: &'static [bool; 256],
    /// The last byte read (0 at the start, where a line starts too): whether a comment or quote
    /// there starts a token.
    previous: u8,
    /// The last byte read on this line that is no blank (0 before any): whether a `/` there
    /// divides or opens a regular expression. Forgotten at a line's end, so that a scan resumed
    /// at a line start reads as one through it.
    previous_on_line: u8,
    /// The last word read (kept where the lexis has regular expressions): `return /x/`.
    word: LastWord,
    /// A here-document opened on this line: its body starts at the line's end (none does where
    /// that end is inside a string or comment).
    heredoc_pending: Option<Heredoc>,
    /// In a here-document's body: how far the line matches its terminator.
    terminator: LineMatch,
    /// How many of `stack` were open when this line began (fewer where the line closed some):
    /// those above are the line's own, which decide whether a shell `<<` shifts (inside
    /// `((...))` or `[...]`), the same way whether the scan began at this line or before.
    line_depth: usize,
}

/// Whether a point of the text is in code or inside a string or comment, and which kind (the
/// quote and how many close it, a raw string's `#`s or delimiter, a block comment's nesting, a
/// here-document's terminator): what the bracket scanner must know to go on from there.
/// [`crate::Plan`] carries the one where the cursor's line starts, so post-processing reads the
/// middle's quotes as the document does. A plain value (`Copy`, a few dozen bytes), meant for
/// line starts: a here-document opened on a line starts its body at the line's end, which a
/// mode taken before then does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexMode(Mode);

impl LexMode {
    pub fn in_code(self) -> bool {
        matches!(self.0, Mode::Code)
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

/// A tag byte first (`repr(u8)`): the scanner asks "in code?" of every token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    #[default]
    Code,
    LineComment,
    /// The nesting of block comments (1 where they do not nest).
    BlockComment(u32),
    /// A string closed by `quote` repeated `count` times (Python triple quotes), with
    /// backslash escapes.
    Str {
        quote: u8,
        count: u8,
    },
    /// The same without escapes (Go's raw strings, shell's `'`, C#'s `@"`).
    Verbatim {
        quote: u8,
        count: u8,
    },
    /// A Lua long string or comment, closed by `]`, `level` `=`s and `]`.
    LongBracket {
        level: u32,
        comment: bool,
    },
    /// A C++ raw string, closed by `)`, its delimiter and `"`: no escapes.
    CppRaw(Delimiter),
    /// A here-document's body, closed by the line holding its terminator.
    Heredoc(Heredoc),
    /// A Ruby percent literal, closed by `close` where the `open`s inside it (`%w[a [b]]`,
    /// where `open` is no `close`) are closed: `depth` of them are open. Backslashes escape.
    Percent {
        open: u8,
        close: u8,
        depth: u32,
    },
    /// A Rust raw string (`r"..."`, `br#"..."#`), closed by `"` and `hashes` `#`: no escapes.
    RawStr {
        hashes: usize,
    },
    /// A JavaScript regular expression, in a `[...]` class or not (a `/` there closes nothing).
    Regex {
        class: bool,
    },
}

impl Scanner {
    pub(crate) fn new(language: Language) -> Scanner {
        Scanner {
            stack: Vec::new(),
            errors: 0,
            literals_ended: 0,
            mode: Mode::Code,
            lexis: language.lexis(),
            starts: language.token_starts(),
            previous: 0,
            previous_on_line: 0,
            word: LastWord::default(),
            heredoc_pending: None,
            terminator: LineMatch::Indent,
            line_depth: 0,
        }
    }

    /// A scanner going on from a point where `open` (outermost first) is open and the text is
    /// in `mode`.
    pub(crate) fn resume(language: Language, open: &str, mode: LexMode) -> Scanner {
        Scanner {
            stack: open.bytes().collect(),
            mode: mode.0,
            line_depth: open.len(),
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
        matches!(self.mode, Mode::Code)
    }

    pub(crate) fn feed(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            // A run of plain code, or of a literal's text, changes nothing but what was read
            // last: passed at once (most of a text; the language server feeds up to 8 MiB a
            // request). Not so the line end after a here-document's opener, which starts its
            // body.
            if self.heredoc_pending.is_none() {
                let in_code = self.in_code();
                let end = if in_code {
                    bytes[i..]
                        .iter()
                        .position(|&b| self.starts[usize::from(b)])
                        .map_or(bytes.len(), |n| i + n)
                } else {
                    self.literal_text_end(bytes, i)
                };
                if end > i {
                    self.read_plain(&bytes[i..end], in_code);
                    i = end;
                    continue;
                }
            }
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

    /// Where the text of the string or comment the scanner is in, from `bytes[i]`, runs up to: a
    /// byte that may end or change it (a quote, an escape, a closer's first byte, a line break),
    /// or `i` itself where every byte may (a regular expression, a here-document line that
    /// may still be its terminator).
    fn literal_text_end(&self, bytes: &[u8], i: usize) -> usize {
        let rest = &bytes[i..];
        let stop = |stops: &dyn Fn(u8) -> bool| rest.iter().position(|&b| stops(b));
        let run = match self.mode {
            Mode::LineComment => stop(&|b| b == b'\n'),
            Mode::Str { quote, .. } => stop(&|b| b == quote || b == b'\\' || b == b'\n'),
            Mode::Verbatim { quote, .. } => stop(&|b| b == quote || b == b'\n'),
            Mode::RawStr { .. } => stop(&|b| b == b'"'),
            Mode::BlockComment(_) => match self.lexis.block_comment {
                Some((open, close)) => {
                    let (open, close) = (open.as_bytes()[0], close.as_bytes()[0]);
                    let nest = self.lexis.comments_nest;
                    stop(&|b| b == close || (nest && b == open))
                }
                None => Some(0),
            },
            Mode::LongBracket { .. } => stop(&|b| b == b']'),
            Mode::CppRaw(_) => stop(&|b| b == b')'),
            Mode::Percent { open, close, .. } => stop(&|b| b == open || b == close || b == b'\\'),
            Mode::Heredoc(_) if self.terminator == LineMatch::Failed => stop(&|b| b == b'\n'),
            Mode::Heredoc(_) | Mode::Regex { .. } | Mode::Code => Some(0),
        };
        i + run.unwrap_or(rest.len())
    }

    /// What [`Scanner::step`] keeps of a nonempty run of bytes read as plain code (`in_code`)
    /// or as a literal's text.
    fn read_plain(&mut self, run: &[u8], in_code: bool) {
        if in_code && self.lexis.regex_literals {
            self.word = self.word.after(self.previous, run);
        }
        self.previous = run[run.len() - 1];
        // A plain run changes no bracket: any line it starts begins at today's depth.
        if run.contains(&b'\n') {
            self.line_depth = self.stack.len();
        }
        for &b in run.iter().rev() {
            if b == b'\n' {
                self.previous_on_line = 0;
                return;
            }
            if !b.is_ascii_whitespace() {
                self.previous_on_line = b;
                return;
            }
        }
    }

    /// Consumes the token at `bytes[i]`, returning its length.
    fn step(&mut self, bytes: &[u8], i: usize) -> usize {
        let words = self.lexis.regex_literals && self.in_code();
        let len = self.token(bytes, i);
        let last = bytes[i + len - 1];
        if words {
            self.word = self.word.after(self.previous, &bytes[i..i + len]);
        }
        self.previous = last;
        if last == b'\n' {
            self.previous_on_line = 0;
            self.line_depth = self.stack.len();
            if self.heredoc_pending.is_some() {
                self.start_heredoc();
            }
        } else if !last.is_ascii_whitespace() {
            self.previous_on_line = last;
        }
        len
    }

    /// At the end of a line that opened a here-document: its body starts, unless the line ended
    /// inside a string or comment (which a scan resumed at the next line would not know of).
    #[cold]
    fn start_heredoc(&mut self) {
        let pending = self.heredoc_pending.take();
        if let (Some(doc), true) = (pending, self.in_code()) {
            self.mode = Mode::Heredoc(doc);
            self.terminator = LineMatch::Indent;
        }
    }

    /// Inlined into [`Scanner::step`]: it runs for every byte of a string or comment.
    #[inline(always)]
    fn token(&mut self, bytes: &[u8], i: usize) -> usize {
        let b = bytes[i];
        let lexis = self.lexis;
        match self.mode {
            Mode::LineComment => {
                if b == b'\n' {
                    self.mode = Mode::Code;
                }
                1
            }
            Mode::BlockComment(depth) => {
                // A state carried over from another language's text (`LexMode` is public):
                // this one has no block comments to end, so it reads on as code.
                let Some((open, close)) = lexis.block_comment else {
                    self.mode = Mode::Code;
                    return self.code_token(bytes, i);
                };
                if bytes[i..].starts_with(close.as_bytes()) {
                    self.mode = if depth > 1 {
                        Mode::BlockComment(depth - 1)
                    } else {
                        Mode::Code
                    };
                    close.len()
                } else if lexis.comments_nest && bytes[i..].starts_with(open.as_bytes()) {
                    self.mode = Mode::BlockComment(depth + 1);
                    open.len()
                } else {
                    1
                }
            }
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
                self.in_string(bytes, i, quote, count)
            }
            Mode::Verbatim { quote, count } => self.in_string(bytes, i, quote, count),
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
            Mode::LongBracket { level, .. } => {
                if b == b']' && delimited::closes_long_bracket(&bytes[i..], level) {
                    self.mode = Mode::Code;
                    return level as usize + 2;
                }
                1
            }
            Mode::CppRaw(delimiter) => self.in_cpp_raw(bytes, i, delimiter),
            Mode::Percent { open, close, depth } => {
                if b == b'\\' {
                    return 2.min(bytes.len() - i);
                }
                if b == close {
                    self.mode = match depth {
                        0 => Mode::Code,
                        _ => Mode::Percent {
                            open,
                            close,
                            depth: depth - 1,
                        },
                    };
                } else if b == open {
                    self.mode = Mode::Percent {
                        open,
                        close,
                        depth: depth + 1,
                    };
                }
                1
            }
            Mode::Heredoc(doc) => self.heredoc_body(bytes, i, doc),
            Mode::Regex { class } => {
                match b {
                    b'\\' => return 2.min(bytes.len() - i),
                    b'\n' => self.mode = Mode::Code,
                    b'[' => self.mode = Mode::Regex { class: true },
                    b']' if class => self.mode = Mode::Regex { class: false },
                    b'/' if !class => self.mode = Mode::Code,
                    _ => {}
                }
                1
            }
            Mode::Code => self.code_token(bytes, i),
        }
    }

    /// A token of code.
    #[inline]
    fn code_token(&mut self, bytes: &[u8], i: usize) -> usize {
        if self.starts[usize::from(bytes[i])] {
            self.code(bytes, i)
        } else {
            1
        }
    }

    /// A byte of a C++ raw string, or its closer.
    #[inline(never)]
    fn in_cpp_raw(&mut self, bytes: &[u8], i: usize, delimiter: Delimiter) -> usize {
        let end = &bytes[i + 1..];
        let closes =
            bytes[i] == b')' && delimiter.starts(end) && end.get(delimiter.len()) == Some(&b'"');
        if closes {
            self.mode = Mode::Code;
            return delimiter.len() + 2;
        }
        1
    }

    /// A byte of a string closed by `count` `quote`s, past any escape.
    fn in_string(&mut self, bytes: &[u8], i: usize, quote: u8, count: u8) -> usize {
        let b = bytes[i];
        // A Rust char literal, a Python or C string but a triple-quoted one, ends at its line.
        if b == b'\n' && count == 1 && self.lexis.one_line_quotes.contains(&quote) {
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

    /// A byte of a here-document's body: the line that holds its terminator ends it, at its
    /// line break or, where code may follow the terminator (PHP), at the first byte that is no
    /// word's.
    #[inline(never)]
    fn heredoc_body(&mut self, bytes: &[u8], i: usize, doc: Heredoc) -> usize {
        let b = bytes[i];
        let whole = self.terminator.whole(&doc);
        if b == b'\n' {
            self.terminator = LineMatch::Indent;
            if whole {
                self.mode = Mode::Code;
            }
            return 1;
        }
        if whole && doc.code_after && !delimited::is_word(b) {
            self.terminator = LineMatch::Indent;
            self.mode = Mode::Code;
            return self.code_token(bytes, i);
        }
        self.terminator = self.terminator.next(&doc, b);
        1
    }

    /// Whether the last byte read ends a word (a quote after it is an apostrophe or a prime).
    fn after_word(&self) -> bool {
        self.previous.is_ascii_alphanumeric() || self.previous == b'_'
    }

    fn after_blank(&self) -> bool {
        matches!(self.previous, 0 | b' ' | b'\t' | b'\n' | b'\r')
    }

    /// A token of code starting with a byte that may start more than itself.
    fn code(&mut self, bytes: &[u8], i: usize) -> usize {
        let lexis = self.lexis;
        let b = bytes[i];
        let rest = &bytes[i..];
        if let Some((open, _)) = lexis.block_comment {
            if rest.starts_with(open.as_bytes()) {
                self.mode = Mode::BlockComment(1);
                return open.len();
            }
        }
        if lexis.long_brackets {
            let (marker, comment) = if rest.starts_with(b"--") {
                (2, true)
            } else {
                (0, false)
            };
            if let Some((len, level)) = delimited::long_bracket_opener(&rest[marker..]) {
                self.mode = Mode::LongBracket { level, comment };
                return marker + len;
            }
        }
        let comment_may_start = !lexis.comment_after_blank || self.after_blank();
        if let Some(marker) = lexis
            .line_comments
            .iter()
            .find(|marker| comment_may_start && rest.starts_with(marker.as_bytes()))
        {
            self.mode = Mode::LineComment;
            return marker.len();
        }
        if lexis.rust {
            match b {
                b'r' => {
                    return match raw_string_hashes(bytes, i) {
                        Some(hashes) => {
                            self.mode = Mode::RawStr { hashes };
                            2 + hashes
                        }
                        None => 1,
                    }
                }
                b'\'' => return self.rust_char(bytes, i),
                _ => {}
            }
        }
        if lexis.regex_literals
            && b == b'/'
            && regex::operand_may_start(self.previous_on_line, self.word)
        {
            self.mode = Mode::Regex { class: false };
            return 1;
        }
        if lexis.percent_literals && b == b'%' {
            let operand_before = !regex::operand_may_start(self.previous_on_line, self.word);
            if let Some((len, open, close)) =
                delimited::percent_opener(rest, operand_before, self.previous)
            {
                self.mode = Mode::Percent {
                    open,
                    close,
                    depth: 0,
                };
                return len;
            }
        }
        if lexis.cpp_raw_strings && b == b'R' {
            if let Some((len, delimiter)) = delimited::cpp_raw_opener(bytes, i, self.previous) {
                self.mode = Mode::CppRaw(delimiter);
                return len;
            }
        }
        if let Some(style) = lexis.heredocs.filter(|_| b == b'<') {
            let before = if i > 0 { bytes[i - 1] } else { self.previous };
            if let Some((len, doc)) =
                delimited::heredoc_opener(bytes, i, style, before, self.opened_on_line())
            {
                // Of two on a line (`cat <<A <<B`) only the first's body is known: the second's
                // reads as code.
                self.heredoc_pending.get_or_insert(doc);
                return len;
            }
        }
        if lexis.at_verbatim && rest.starts_with(b"@\"") {
            self.mode = Mode::Verbatim {
                quote: b'"',
                count: 1,
            };
            return 2;
        }
        let escaped = lexis.escaped_quotes.contains(&b);
        let quote = escaped || lexis.verbatim_quotes.contains(&b);
        if quote && !(lexis.quotes_start_tokens && self.after_word()) {
            let tripled = lexis.triple_quotes.contains(&b)
                && rest.iter().take(3).filter(|&&c| c == b).count() == 3;
            let count = if tripled { 3 } else { 1 };
            self.mode = if escaped {
                Mode::Str { quote: b, count }
            } else {
                Mode::Verbatim { quote: b, count }
            };
            return usize::from(count);
        }
        match b {
            b'(' | b'[' | b'{' => self.stack.push(b),
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
                self.line_depth = self.line_depth.min(self.stack.len());
            }
            _ => {}
        }
        1
    }

    /// The brackets opened on this line and still open, outermost first.
    fn opened_on_line(&self) -> &[u8] {
        &self.stack[self.line_depth.min(self.stack.len())..]
    }

    /// Rust: a char literal (`'x'`, `'\n'`, `'\u{..}'`) or a lifetime (`'a`).
    fn rust_char(&mut self, bytes: &[u8], i: usize) -> usize {
        if bytes.get(i + 1) == Some(&b'\\') {
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
        // A line break is no char (Rust refuses it raw): `'` then a line break starts no literal
        // across the lines, which a scan resumed at the next line would not know of.
        let line_break = matches!(rest.first(), Some(b'\n' | b'\r'));
        if char_len > 0 && !line_break && rest.get(char_len) == Some(&b'\'') {
            char_len + 2
        } else {
            1
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
mod tests;
