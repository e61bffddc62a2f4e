//! How a language writes its comments and strings, as the bracket scanner needs to know it:
//! a [`Lexis`] a language (`crate::language` spells one a row), and which bytes may start a
//! token in it.

use super::{Heredocs, Interpolation, Regexes};

/// How a language writes comments and strings: what the scanner must know of it. The rows of
/// `crate::language` spell each from [`Lexis::NONE`] or a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lexis {
    /// What starts a line comment; the first heads neighbour snippets.
    pub(crate) line_comments: &'static [&'static str],
    /// A line comment starts only at a line's start or after a blank (shell's `$#`, YAML's
    /// `a#b`).
    pub(crate) comment_after_blank: bool,
    /// `#[` opens an attribute, not a `#` comment (PHP 8's `#[Route('/')]`, which may span
    /// lines).
    pub(crate) hash_attributes: bool,
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
    /// A quote right after `$` is a variable's name, no string (Perl's `$"`, Ruby's `$'`; not
    /// shell's `$'..'`, a string).
    pub(crate) dollar_quotes: bool,
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
    /// A `)` with no `(` open to close is text, no error: a shell `case` pattern's (`a|b) cmd
    /// ;;`, in a Makefile's recipe or a YAML `run: |` script too; YAML's parentheses are
    /// plain text anyway).
    pub(crate) lone_parens: bool,
    /// Ruby's character literals where an operand starts, `?(`, `?"`, `?\"`: one character
    /// (a `?` after an operand, or before a blank or a name, is the ternary operator's).
    pub(crate) char_literals: bool,
    /// Dart's raw strings, `r'..'`, `r"""..."""`: an `r` right before the quote (not ending a
    /// name) takes the string's escapes and holes away.
    pub(crate) raw_prefix: bool,
    /// C#'s verbatim strings, `@"..."`: no escapes but `""`, across lines.
    pub(crate) at_verbatim: bool,
    /// C#'s raw strings: three or more quotes, closed by as many (`""""a """ b""""`), no
    /// escapes; `$"""`, `$$"""` too (their holes are read as text: a quote there closes nothing).
    pub(crate) raw_quote_runs: bool,
    /// Code inside strings, and how a hole opens (`\(`, `${`, C#'s `$"{`, Ruby's `#{`).
    pub(crate) interpolation: Option<Interpolation>,
    /// Regular expressions, `/[(]/g`: a `/` where an operand may start (at a line's start,
    /// after an operator or an opener, or after a keyword such as `return`) opens one, which
    /// ends at its line in JavaScript (Perl's `/.../`, its `m/.../`, and Ruby's where an operand
    /// starts may go on across lines).
    pub(crate) regexes: Option<Regexes>,
    /// Perl: quote-like operators (`q(..)`, `qw[..]`, `m{..}`, `s{..}{..}`, `tr/a/b/`, any
    /// delimiter, brackets nesting, modifiers after them), POD blocks (a line starting `=pod`,
    /// `=head1`, ... up to a line starting `=cut`) as comments, and no code after `__END__`.
    pub(crate) perl: bool,
}

impl Lexis {
    /// No comments, no strings: the start every row's lexis is spelt from.
    pub(crate) const NONE: Lexis = Lexis {
        line_comments: &[],
        comment_after_blank: false,
        hash_attributes: false,
        block_comment: None,
        comments_nest: false,
        escaped_quotes: b"",
        verbatim_quotes: b"",
        one_line_quotes: b"",
        triple_quotes: b"",
        quotes_start_tokens: false,
        dollar_quotes: false,
        rust: false,
        long_brackets: false,
        cpp_raw_strings: false,
        heredocs: None,
        percent_literals: false,
        lone_parens: false,
        char_literals: false,
        raw_prefix: false,
        at_verbatim: false,
        raw_quote_runs: false,
        interpolation: None,
        regexes: None,
        perl: false,
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
            || (self.char_literals && b == b'?')
            || (self.at_verbatim && b == b'@')
            || (self.interpolation == Some(Interpolation::CSharp) && b == b'$')
            || (self.regexes.is_some() && b == b'/')
            || (self.perl && matches!(b, b'=' | b'_' | b'q' | b'm' | b's' | b't' | b'y'))
    }
}
