//! A bracket scanner that skips strings and comments: enough lexing to tell whether a middle
//! closes what it opens, without a parser (a middle is rarely a complete syntax tree). Here: the
//! scanner, the state it carries ([`LexMode`]) and its reading of code, a byte or a token at a
//! time. How a language writes its comments and strings is its [`Lexis`] (`lexis`;
//! `crate::language` has one a language). Strings a quote opens (tripled, C#'s `@"`, `$"` and
//! `"""`, Rust's raw strings and chars) are `quotes`'s; literals whose closer repeats their
//! opener's word or level (here-documents, C++ raw strings, Lua's long brackets, Ruby's percent
//! literals) `delimited`'s; Perl's quote-like operators, POD and `__END__` `perl`'s; whether a
//! `/` divides or opens a regular expression (JavaScript, Ruby, Perl), `regex`'s; code inside a
//! string (Swift's `\(..)`, Kotlin's `${..}`, C#'s `$"{..}"`, JavaScript's `` `${..}` ``,
//! Ruby's `"#{..}"`, Dart's `'${..}'`, PHP's `"{$..}"`, shell's `"$(..)"`), `interpolation`'s.

mod delimited;
mod interpolation;
mod lexis;
mod perl;
mod quotes;
mod regex;

use std::ops::ControlFlow;

use crate::Language;
use delimited::{Delimiter, Heredoc, LineMatch};
use interpolation::{HoleString, Holes};
use regex::LastWord;

pub(crate) use delimited::Heredocs;
pub(crate) use interpolation::Interpolation;
pub(crate) use lexis::Lexis;
pub(crate) use regex::Regexes;

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
    /// The last word of the texts fed before the one being read (kept where the lexis has
    /// regular expressions): the cursor's line may end `return ` and the middle start `/x/`.
    /// Within a text the word before a `/` is read back from the `/` (only a `/` asks), so no
    /// token pays for it.
    word: LastWord,
    /// The byte read before the text being read (0 at the start): whether the text's first
    /// word goes on from `word`.
    text_previous: u8,
    /// A here-document opened on this line: its body starts at the line's end (none does where
    /// that end is inside a string or comment).
    heredoc_pending: Option<Heredoc>,
    /// A second one opened on this line (`cat <<A <<B`): its body follows the first's. A third
    /// is read as code.
    heredoc_next: Option<Heredoc>,
    /// The holes in strings the scanner is in (Swift's `"\(f("x"))"`), innermost last.
    holes: Holes,
    /// In a here-document's body: how far the line matches its terminator.
    terminator: LineMatch,
    /// How many of `stack` were open when this line began (fewer where the line closed some):
    /// those above are the line's own, which decide whether a shell `<<` shifts (inside
    /// `((...))` or `[...]`), the same way whether the scan began at this line or before.
    line_depth: usize,
}

/// Whether a point of the text is in code or inside a string or comment, and which kind (the
/// quote and how many close it, a raw string's `#`s or delimiter, a block comment's nesting, a
/// here-document's terminator, and the next one's where a line opened two; the strings a hole
/// of code is in): what the bracket scanner must know to go on from there.
/// [`crate::Plan`] carries the one where the cursor's line starts, so post-processing reads the
/// middle's quotes as the document does. A plain value (`Copy`, 32 bytes), meant for
/// line starts: a here-document opened on a line starts its body at the line's end, which a
/// mode taken before then does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexMode {
    mode: Mode,
    holes: Holes,
}

impl LexMode {
    /// Whether the point is in code (a hole in a string is code).
    pub fn in_code(self) -> bool {
        matches!(self.mode, Mode::Code)
    }

    /// Whether the point is in Perl's POD or in its data after `__END__`: text after code that
    /// a file may end in as it may in code.
    pub fn in_perl_text(self) -> bool {
        matches!(self.mode, Mode::Pod { .. } | Mode::Data)
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
    /// backslash escapes, and holes of code where the lexis has them (`holes`).
    Str {
        quote: u8,
        count: u8,
        holes: bool,
    },
    /// The same without escapes (Go's raw strings, shell's `'`, C#'s `"""`).
    Verbatim {
        quote: u8,
        count: u8,
    },
    /// C#'s verbatim string, `@"..."`: closed by a `"` that is not doubled, across lines; with
    /// holes where `$` opened it.
    Doubled {
        holes: bool,
    },
    /// A Lua long string or comment, closed by `]`, `level` `=`s and `]`.
    LongBracket {
        level: u32,
        comment: bool,
    },
    /// A C++ raw string, closed by `)`, its delimiter and `"`: no escapes.
    CppRaw(Delimiter),
    /// A here-document's body, closed by the line holding its terminator; `next`'s body
    /// follows where its line opened two.
    Heredoc {
        doc: Heredoc,
        next: Option<Heredoc>,
    },
    /// A Ruby percent literal or a part of a Perl quote-like operator, closed by `close` where
    /// the `open`s inside it (`%w[a [b]]`, where `open` is no `close`) are closed: `depth` of
    /// them are open. Backslashes escape. `parts` more follow it (`s/a/b/`'s `b/`, or after
    /// `s{a}` whatever opens [`Mode::NextPart`]).
    QuoteLike {
        open: u8,
        close: u8,
        depth: u32,
        parts: u8,
    },
    /// Perl: between the bracketed parts of `s{a} {b}` or `tr[a]\n[b]`: blanks and line breaks,
    /// then the second part's opener, any delimiter.
    NextPart,
    /// A Rust raw string (`r"..."`, `br#"..."#`), closed by `"` and `hashes` `#` (at most 255,
    /// as Rust allows): no escapes.
    RawStr {
        hashes: u8,
    },
    /// A regular expression up to its `/` or its line's end: JavaScript's, in a `[...]` class or
    /// not (a `/` there closes nothing), and Ruby's after a method's name (`split /,/`). Perl's,
    /// and Ruby's where an operand starts, are [`Mode::QuoteLike`]s, across lines.
    Regex {
        class: bool,
    },
    /// Perl's POD, from a line starting `=head1`, `=pod`, ...: a comment up to the end of a
    /// line starting `=cut` (`cut`: this line is that one).
    Pod {
        cut: bool,
    },
    /// Perl's text after a line starting `__END__` or `__DATA__`: no code, to the end.
    Data,
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
            text_previous: 0,
            heredoc_pending: None,
            heredoc_next: None,
            holes: Holes::default(),
            terminator: LineMatch::Indent,
            line_depth: 0,
        }
    }

    /// A scanner going on from a point where `open` (outermost first) is open and the text is
    /// in `mode`.
    pub(crate) fn resume(language: Language, open: &str, mode: LexMode) -> Scanner {
        Scanner {
            stack: open.bytes().collect(),
            mode: mode.mode,
            holes: mode.holes,
            line_depth: open.len(),
            ..Scanner::new(language)
        }
    }

    pub(crate) fn mode(&self) -> LexMode {
        LexMode {
            mode: self.mode,
            holes: self.holes,
        }
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
        self.text_previous = self.previous;
        let mut i = 0;
        while i < bytes.len() {
            // A run of plain code, or of a literal's text, changes nothing but what was read
            // last: passed at once (most of a text; the language server feeds up to 8 MiB a
            // request). Not so the line end after a here-document's opener, which starts its
            // body.
            if self.heredoc_pending.is_none() {
                let in_code = self.in_code();
                let end = if in_code {
                    self.code_run_end(bytes, i)
                } else {
                    self.literal_text_end(bytes, i)
                };
                if end > i {
                    self.read_plain(&bytes[i..end]);
                    i = end;
                    continue;
                }
            }
            i += self.step(bytes, i);
        }
        if self.lexis.regexes.is_some() {
            self.word = self.word.after(self.text_previous, bytes);
        }
    }

    /// Where a run of plain code from `bytes[i]` ends: at a byte that may start a token. In
    /// Perl a letter inside a word starts no quote-like operator (`cost`, `this`), nor a `=`
    /// inside a line a POD block: passed too, as their token would be read.
    fn code_run_end(&self, bytes: &[u8], i: usize) -> usize {
        let mut end = i;
        loop {
            end = bytes[end..]
                .iter()
                .position(|&b| self.starts[usize::from(b)])
                .map_or(bytes.len(), |n| end + n);
            if !self.lexis.perl || end == i || end == bytes.len() {
                return end;
            }
            let (before, b) = (bytes[end - 1], bytes[end]);
            let inside_word = delimited::is_word(before) && (b == b'_' || b.is_ascii_lowercase());
            if !(inside_word || (b == b'=' && before != b'\n')) {
                return end;
            }
            end += 1;
        }
    }

    /// The last word before `bytes[i]`, of this text or (where it has none) of those before.
    fn word_before(&self, bytes: &[u8], i: usize) -> LastWord {
        self.word.after(self.text_previous, &bytes[..i])
    }

    /// Where the tokens of `text` read on from this state end, up to the first end at or past
    /// `up_to`: a closer (`"""`, `"#`, `*/`), an escape, a char literal or a comment marker is
    /// one token (a Perl word that starts with a letter a quote-like operator's name may start
    /// with too), any other byte one of its own. A text may be cut at these without splitting
    /// a token, which a cut at `up_to` alone could (the whole text is read for that).
    pub(crate) fn token_ends(&self, text: &str, up_to: usize) -> Vec<usize> {
        let mut scanner = self.clone();
        scanner.text_previous = scanner.previous;
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
        let closes = self.clone().read_tokens(text, |at, open| {
            if open < depth {
                ControlFlow::Break(at)
            } else {
                ControlFlow::Continue(())
            }
        });
        closes.break_value()
    }

    /// The fewest brackets open at any point of `texts` read on, one after another, from this
    /// state, this state's own count included.
    pub(crate) fn min_depth_through(&self, texts: &[&str]) -> usize {
        let mut scanner = self.clone();
        let mut fewest = scanner.depth();
        for text in texts {
            let _: ControlFlow<()> = scanner.read_tokens(text, |_, open| {
                fewest = fewest.min(open);
                ControlFlow::Continue(())
            });
        }
        fewest
    }

    /// Reads `text` on a token at a time (no run passed at once), handing `each` the start of
    /// every token and how many brackets are open after it, until `each` breaks.
    fn read_tokens<B>(
        &mut self,
        text: &str,
        mut each: impl FnMut(usize, usize) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        self.text_previous = self.previous;
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let step = self.step(bytes, i);
            each(i, self.depth())?;
            i += step;
        }
        ControlFlow::Continue(())
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
            Mode::Str { quote, holes, .. } => match self.hole_start(holes) {
                Some(hole) => stop(&|b| b == quote || b == b'\\' || b == b'\n' || b == hole),
                None => stop(&|b| b == quote || b == b'\\' || b == b'\n'),
            },
            Mode::Verbatim { quote, .. } => stop(&|b| b == quote || b == b'\n'),
            Mode::Doubled { holes } => {
                let hole = self.hole_start(holes).unwrap_or(b'"');
                stop(&|b| b == b'"' || b == hole)
            }
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
            Mode::QuoteLike { open, close, .. } => stop(&|b| b == open || b == close || b == b'\\'),
            Mode::NextPart => stop(&|b| !b.is_ascii_whitespace()),
            Mode::Heredoc { .. } if self.terminator == LineMatch::Failed => stop(&|b| b == b'\n'),
            // A line's first byte may be its `=cut`.
            Mode::Pod { cut } if cut || !self.at_line_start() => stop(&|b| b == b'\n'),
            Mode::Heredoc { .. } | Mode::Regex { .. } | Mode::Pod { .. } | Mode::Code => Some(0),
            Mode::Data => None,
        };
        i + run.unwrap_or(rest.len())
    }

    /// What [`Scanner::step`] keeps of a nonempty run of bytes read as plain code or as a
    /// literal's text.
    fn read_plain(&mut self, run: &[u8]) {
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
        let was_code = self.in_code();
        let len = self.token(bytes, i);
        if !was_code && self.in_code() {
            // Wrapping: a hole's opener took one back first.
            self.literals_ended = self.literals_ended.wrapping_add(1);
        }
        let last = bytes[i + len - 1];
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

    /// Whether the next byte starts a line (0: nothing read, or a scan resumed at a line start).
    fn at_line_start(&self) -> bool {
        matches!(self.previous, b'\n' | 0)
    }

    /// The byte a hole in a string with `holes` starts with, if it has them.
    fn hole_start(&self, holes: bool) -> Option<u8> {
        self.lexis
            .interpolation
            .filter(|_| holes)
            .map(Interpolation::starts_with)
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
            Mode::Str {
                quote,
                count,
                holes,
            } => {
                if holes {
                    if let Some(len) = self.open_hole(bytes, i, HoleString::of(quote, count)) {
                        return len;
                    }
                }
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
            Mode::Doubled { holes } => {
                if holes {
                    if let Some(len) = self.open_hole(bytes, i, HoleString::Doubled) {
                        return len;
                    }
                }
                if b == b'"' {
                    if bytes.get(i + 1) == Some(&b'"') {
                        return 2;
                    }
                    self.mode = Mode::Code;
                }
                1
            }
            Mode::RawStr { hashes } => {
                let hashes = usize::from(hashes);
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
            Mode::QuoteLike {
                open,
                close,
                depth,
                parts,
            } => {
                if b == b'\\' {
                    return 2.min(bytes.len() - i);
                }
                if b == close {
                    self.mode = match (depth, parts) {
                        (0, 0) if lexis.perl => return self.end_quote_like(bytes, i),
                        (0, 0) => Mode::Code,
                        // `s/a/b/`: the second part opens where the first closes.
                        (0, _) if open == close => Mode::QuoteLike {
                            open,
                            close,
                            depth: 0,
                            parts: parts - 1,
                        },
                        (0, _) => Mode::NextPart,
                        _ => Mode::QuoteLike {
                            open,
                            close,
                            depth: depth - 1,
                            parts,
                        },
                    };
                } else if b == open {
                    self.mode = Mode::QuoteLike {
                        open,
                        close,
                        depth: depth + 1,
                        parts,
                    };
                }
                1
            }
            Mode::NextPart => self.next_part(bytes, i),
            Mode::Heredoc { doc, next } => self.heredoc_body(bytes, i, doc, next),
            Mode::Regex { class } => {
                let classes = lexis.regexes.is_some_and(Regexes::has_classes);
                match b {
                    b'\\' => return 2.min(bytes.len() - i),
                    b'\n' => self.mode = Mode::Code,
                    b'[' if classes => self.mode = Mode::Regex { class: true },
                    b']' if class => self.mode = Mode::Regex { class: false },
                    b'/' if !class => self.mode = Mode::Code,
                    _ => {}
                }
                1
            }
            Mode::Pod { cut } => {
                if b == b'\n' {
                    if cut {
                        self.mode = Mode::Code;
                    }
                } else if !cut && self.at_line_start() && perl::cuts_pod(&bytes[i..]) {
                    self.mode = Mode::Pod { cut: true };
                    return 4;
                }
                1
            }
            Mode::Data => 1,
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
        // The most common token: a bracket starts nothing else but a block comment (Haskell's
        // `{-`) or a Lua long bracket (`[[`).
        if matches!(b, b'(' | b')' | b'[' | b']' | b'{' | b'}')
            && !(lexis.long_brackets && b == b'[')
        {
            return self.bracket(b);
        }
        if lexis.perl && (b == b'=' || b == b'_' || b.is_ascii_lowercase()) {
            return self.perl_code(bytes, i);
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
        let comment_may_start = (!lexis.comment_after_blank || self.after_blank())
            && !(lexis.hash_attributes && rest.starts_with(b"#["));
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
                    return match quotes::raw_string_hashes(bytes, i)
                        .and_then(|n| u8::try_from(n).ok())
                    {
                        Some(hashes) => {
                            self.mode = Mode::RawStr { hashes };
                            2 + usize::from(hashes)
                        }
                        None => 1,
                    }
                }
                b'\'' => return self.rust_char(bytes, i),
                _ => {}
            }
        }
        if lexis.char_literals && b == b'?' {
            if let Some(len) = self.char_literal(bytes, i) {
                return len;
            }
        }
        if let Some(style) = lexis.regexes.filter(|_| b == b'/') {
            let next = bytes.get(i + 1).copied();
            let word = self.word_before(bytes, i);
            if style.opens_at(self.previous, self.previous_on_line, word, next) {
                // Perl's `/.../` is its `m/.../`, across lines too (`/x` patterns), and so is
                // Ruby's where an operand starts. After a method's name (`split /,/`) Ruby's
                // may be a division (`width /2`, `w` a variable): it ends at its line, as a
                // JavaScript one does, so a division misread spoils one line, not the file.
                let certain = regex::operand_may_start(Some(style), self.previous_on_line, word);
                let across_lines = lexis.perl || (style == Regexes::Ruby && certain);
                self.mode = if across_lines {
                    Mode::QuoteLike {
                        open: b'/',
                        close: b'/',
                        depth: 0,
                        parts: 0,
                    }
                } else {
                    Mode::Regex { class: false }
                };
                return 1;
            }
        }
        if lexis.percent_literals && b == b'%' {
            let word = self.word_before(bytes, i);
            let operand_before =
                !regex::operand_may_start(lexis.regexes, self.previous_on_line, word);
            if let Some((len, open, close)) =
                delimited::percent_opener(rest, operand_before, self.previous)
            {
                self.mode = Mode::QuoteLike {
                    open,
                    close,
                    depth: 0,
                    parts: 0,
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
            // Only Ruby's and Perl's `<<` shifts after a number or a closer.
            let operand_before = matches!(style, Heredocs::Ruby | Heredocs::Perl)
                && (matches!(self.previous_on_line, b')' | b']')
                    || (delimited::is_word(self.previous_on_line)
                        && self.word_before(bytes, i).is_number()));
            let open = self.opened_on_line();
            if let Some((len, doc)) =
                delimited::heredoc_opener(bytes, i, style, before, open, operand_before)
            {
                // Of two on a line (`cat <<A <<B`) the second's body follows the first's; a
                // third's reads as code.
                if self.heredoc_pending.is_none() {
                    self.heredoc_pending = Some(doc);
                } else {
                    self.heredoc_next.get_or_insert(doc);
                }
                return len;
            }
        }
        if matches!(b, b'"' | b'@' | b'$') && (lexis.at_verbatim || lexis.raw_quote_runs) {
            if let Some(len) = self.csharp_string(rest) {
                return len;
            }
        }
        let raw = lexis.raw_prefix && self.raw_prefix_before(bytes, i);
        let escaped = lexis.escaped_quotes.contains(&b) && !raw;
        let quote = escaped || lexis.verbatim_quotes.contains(&b) || raw;
        // Perl's `$"` and `$'` are variables (`local $" = ', ';`), and so is `*"` (a glob);
        // Ruby's `$'` and `$"` too.
        let variable = (lexis.dollar_quotes && self.previous == b'$')
            || (lexis.perl && self.previous == b'*' && b == b'"');
        if quote && !(lexis.quotes_start_tokens && self.after_word()) && !variable {
            let tripled = lexis.triple_quotes.contains(&b)
                && rest.iter().take(3).filter(|&&c| c == b).count() == 3;
            let count = if tripled { 3 } else { 1 };
            self.mode = if escaped {
                let holes = lexis.interpolation.is_some_and(|i| i.holes_in(b));
                Mode::Str {
                    quote: b,
                    count,
                    holes,
                }
            } else {
                Mode::Verbatim { quote: b, count }
            };
            return usize::from(count);
        }
        self.bracket(b)
    }

    /// Whether the quote at `bytes[i]` follows Dart's raw-string prefix, an `r` that ends no
    /// name (`r'C:\'`). Asked at the quote, so that the `r`s of names stop no run of code;
    /// where the `r` ended the text before, the byte before it is not known and it counts (a
    /// name right before a quote is no Dart).
    fn raw_prefix_before(&self, bytes: &[u8], i: usize) -> bool {
        if !matches!(bytes[i], b'\'' | b'"') || self.previous != b'r' {
            return false;
        }
        let before_r = match i {
            0 => return true,
            1 => self.text_previous,
            _ => bytes[i - 2],
        };
        !delimited::is_word(before_r) && before_r != b'$'
    }

    /// At `bytes[i]`, a `?`: the length of the Ruby character literal it starts (`?(`, `?"`,
    /// `?\"`), or `None` where it is the ternary operator's (after an operand, before a blank,
    /// or before a name: `x ?ab : c`) or follows an operator with no blank between (`.*?)`, a
    /// line of a regular expression across lines, which the scanner reads as code).
    fn char_literal(&self, bytes: &[u8], i: usize) -> Option<usize> {
        if !matches!(
            self.previous,
            0 | b' ' | b'\t' | b'\n' | b'\r' | b'(' | b'[' | b'{'
        ) {
            return None;
        }
        let word = self.word_before(bytes, i);
        if !regex::operand_may_start(self.lexis.regexes, self.previous_on_line, word) {
            return None;
        }
        let c = *bytes.get(i + 1)?;
        if c.is_ascii_whitespace()
            || delimited::is_word(c) && bytes.get(i + 2).is_some_and(|&n| delimited::is_word(n))
        {
            return None;
        }
        let len = if c == b'\\' { 3 } else { 2 };
        Some(len.min(bytes.len() - i))
    }

    /// A byte of code that is a bracket (or anything else `code` found nothing in).
    fn bracket(&mut self, b: u8) -> usize {
        match b {
            b'(' | b'[' | b'{' => {
                self.holes.open_bracket();
                self.stack.push(b);
            }
            b')' | b']' | b'}' => {
                // Perl's `$]` is a variable (`$] >= 5.008`); a prototype's `($$)` closes its
                // bracket.
                if b == b']' && self.lexis.perl && self.previous == b'$' {
                    return 1;
                }
                if !self.holes.is_empty() {
                    let closer = self.lexis.interpolation.map_or(0, Interpolation::closer);
                    if let Some(string) = self.holes.close(b, closer) {
                        self.mode = Mode::around_hole(string);
                        return 1;
                    }
                }
                // A shell `case` pattern's `)` (`*.rs)`), where no `(` is open for it.
                if b == b')' && self.lexis.lone_parens && self.stack.last() != Some(&b'(') {
                    return 1;
                }
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
