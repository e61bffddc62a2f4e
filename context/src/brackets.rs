//! A bracket scanner that skips strings and comments: enough lexing to tell whether a middle
//! closes what it opens, without a parser (a middle is rarely a complete syntax tree). How a
//! language writes its comments and strings is its [`Lexis`] (`crate::language` has one a
//! language).

use crate::Language;

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
    /// Lua's long strings, `[[...]]`.
    pub(crate) long_brackets: bool,
    /// C#'s verbatim strings, `@"..."`.
    pub(crate) at_verbatim: bool,
    /// JavaScript's regular expressions, `/[(]/g`: a `/` where an operand may start (at a line's
    /// start, or after an operator or an opener) opens one.
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
    /// The nesting of block comments (1 where they do not nest).
    BlockComment(u32),
    /// A string closed by `quote` repeated `count` times (Python triple quotes), with
    /// backslash escapes.
    Str {
        quote: u8,
        count: u8,
    },
    /// The same without escapes (Go's raw strings, shell's `'`, Lua's `[[`: `]` twice).
    Verbatim {
        quote: u8,
        count: u8,
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
            if self.mode == Mode::Code && !self.starts[usize::from(bytes[i])] {
                // A run of plain code changes nothing but what was read last: passed at once
                // (most of a text; the language server feeds up to 8 MiB a request).
                let end = bytes[i..]
                    .iter()
                    .position(|&b| self.starts[usize::from(b)])
                    .map_or(bytes.len(), |n| i + n);
                self.read_plain(&bytes[i..end]);
                i = end;
                continue;
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

    /// What [`Scanner::step`] keeps of a nonempty run of bytes read as plain code.
    fn read_plain(&mut self, run: &[u8]) {
        self.previous = run[run.len() - 1];
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
        let len = self.token(bytes, i);
        let last = bytes[i + len - 1];
        self.previous = last;
        if last == b'\n' {
            self.previous_on_line = 0;
        } else if !last.is_ascii_whitespace() {
            self.previous_on_line = last;
        }
        len
    }

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
                    return self.token(bytes, i);
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
            Mode::Code if !self.starts[usize::from(b)] => 1,
            Mode::Code => self.code(bytes, i),
        }
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
        let operand_may_start = matches!(
            self.previous_on_line,
            0 | b'('
                | b','
                | b'='
                | b':'
                | b'['
                | b'!'
                | b'&'
                | b'|'
                | b'?'
                | b'{'
                | b'}'
                | b';'
                | b'+'
                | b'-'
                | b'*'
                | b'%'
                | b'<'
                | b'>'
                | b'~'
                | b'^'
        );
        if lexis.regex_literals && b == b'/' && operand_may_start {
            self.mode = Mode::Regex { class: false };
            return 1;
        }
        if lexis.long_brackets && rest.starts_with(b"[[") {
            self.mode = Mode::Verbatim {
                quote: b']',
                count: 2,
            };
            return 2;
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
            }
            _ => {}
        }
        1
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
        if char_len > 0 && rest.get(char_len) == Some(&b'\'') {
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

    /// Each language's tricky literals, read by its own rules: the brackets left open after
    /// each text and whether it ends in code. Rust's rules, which every language but Rust and
    /// Python got before (as plain text), read each of them otherwise.
    #[test]
    fn a_block_comment_carried_into_a_language_without_them_reads_on_as_code() {
        let in_comment = LexMode::default().after(Language::Rust, "/* (");
        assert!(!in_comment.in_code());
        let after = in_comment.after(Language::Python, "x = '(' # )\n");
        assert!(after.in_code());
        assert_eq!(
            after,
            LexMode::default().after(Language::Python, "x = '(' # )\n")
        );
    }

    #[test]
    fn each_language_reads_its_own_strings_and_comments() {
        let cases: &[(Language, &str, &str, bool)] = &[
            (Language::JavaScript, r#"f('it\'s (', "a\"(", x)"#, "", true),
            (Language::JavaScript, "f(`a ${b} (\n`, x); g(", "(", true),
            (
                Language::JavaScript,
                r"s.replace(/[(\/]/g, x); g(",
                "(",
                true,
            ),
            (Language::JavaScript, "x = a / 2; y = /\"/; f(", "(", true),
            (
                Language::TypeScript,
                "const t = html`\n  <p>(</p>\n",
                "",
                false,
            ),
            (Language::Go, r"f(`C:\dir\`, `(`); g(", "(", true),
            (
                Language::Go,
                "r := '(' ; s := \"unterminated (\ng(",
                "(",
                true,
            ),
            (Language::C, "/* /* */ f(", "(", true),
            (Language::Cpp, "s = \"typo (\nf(", "(", true),
            (
                Language::Java,
                "s = \"\"\"\n  \"(\" (\n  \"\"\"; f(",
                "(",
                true,
            ),
            (Language::CSharp, r#"var p = @"C:\dir\"; f("#, "(", true),
            (
                Language::Kotlin,
                "val s = \"\"\"\n  \"(\" \"\"\"\nf(",
                "(",
                true,
            ),
            (Language::Dart, "s = '''\nit's (\n'''; f(", "(", true),
            (Language::Shell, "echo ${#arr[@]} # (\nf() {", "{", true),
            (Language::Shell, r#"echo '"C:\' ; f("#, "(", true),
            (Language::Perl, "my $n = $#list; # (\nf(", "(", true),
            (Language::Ruby, "x = 1 # don't (\nf(", "(", true),
            (Language::Php, "# it's (\n$a = 'it\\'s (';\nf(", "(", true),
            (Language::R, "x <- 1 # (\nf(", "(", true),
            (
                Language::Yaml,
                "k: it's (fine)\nv: 'x (' # y (\nl: [",
                "[",
                true,
            ),
            (Language::Toml, "a = '''C:\\(\\'''\nb = [ # (\n", "[", true),
            (Language::Lua, "--[[ ( ]] s = [[\n(\n]] -- (\nf(", "(", true),
            (
                Language::Sql,
                "-- it's (\nSELECT f('it''s (', \"(\"",
                "(",
                true,
            ),
            (
                Language::Haskell,
                "foldl' f (x) {- {- ( -} -} g (",
                "(",
                true,
            ),
            (Language::Make, "# (\n\techo don't\nx := $(y", "(", true),
        ];
        let mut division = Scanner::new(Language::TypeScript);
        division.feed("f(a / b, c) / (d[0] / 2) / e /* ( */\n");
        assert_eq!((division.open(), division.in_code()), (String::new(), true));
        for &(language, text, open, in_code) in cases {
            let mut own = Scanner::new(language);
            own.feed(text);
            assert_eq!(
                (own.open().as_str(), own.in_code()),
                (open, in_code),
                "{language:?}: {text:?}"
            );
            let mut rust = Scanner::new(Language::Plain);
            rust.feed(text);
            assert_ne!(
                (rust.open().as_str(), rust.in_code()),
                (open, in_code),
                "Rust's rules read {language:?}'s {text:?} the same"
            );
        }
    }

    /// Text a line at a time: the pieces a Rust `'` would read across a line end (`'` then a
    /// line break then `'`, no valid char literal) are left out.
    fn code_lines() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "(", ")", "{", "}", "[", "]", "\"", "'x'", "'\\n'", "'a ", "\"\"\"", "'''", "r#\"",
                "\"#", "br\"", "/*", "*/", "//", "#", "\\", "\n", "a", " ", "é", "`", "/", "--",
                "[[", "]]", "{-", "-}", "@\"", "=",
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
            for language in Language::all() {
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
            for language in Language::all() {
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
