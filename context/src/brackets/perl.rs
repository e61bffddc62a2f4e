//! Perl's own literals: quote-like operators (`q(..)`, `qw[..]`, `m{..}`, `s{..}{..}`,
//! `tr/a/b/`, any delimiter, brackets nesting, modifiers after them), POD blocks (`=head1` ...
//! `=cut`) and the text after `__END__`. How an operator opens, and where the scanner enters,
//! leaves and goes between its parts; its text is [`Mode::QuoteLike`]'s, read by the scanner.

use super::delimited::{closer_of, is_word};
use super::{Mode, Scanner};

impl Scanner {
    /// Perl, at a `=`, a `_` or a lowercase letter of code: a POD block's or a quote-like
    /// operator's opener, entered, or the rest of a word that is none (a letter or `_` starts
    /// nothing else: read at once, a word costs one token), and its length.
    pub(super) fn perl_code(&mut self, bytes: &[u8], i: usize) -> usize {
        let rest = &bytes[i..];
        if rest[0] == b'=' {
            // `=head1`, `=pod`, `=cut` at a line's start; any other `=` starts nothing.
            if self.at_line_start() && is_pod_command(&rest[1..]) {
                self.mode = Mode::Pod {
                    cut: cuts_pod(rest),
                };
            }
            return 1;
        }
        if rest[0] == b'_' {
            let end = [&b"__END__"[..], b"__DATA__"]
                .into_iter()
                .find(|word| rest.starts_with(word))
                .filter(|word| !rest.get(word.len()).copied().is_some_and(is_word));
            if let (Some(word), true) = (end, self.at_line_start()) {
                self.mode = Mode::Data;
                return word.len();
            }
        } else if let Some(op) = quote_like_opener(bytes, i, self.previous) {
            self.mode = Mode::QuoteLike {
                open: op.open,
                close: op.close,
                depth: 0,
                parts: op.parts,
            };
            return op.len;
        }
        rest.iter().take_while(|&&c| is_word(c)).count()
    }

    /// The closer of a Perl quote-like operator at `bytes[i]` and its modifiers (`s{a}{b}gs`,
    /// `/x/i`), which are no operator's name (`s` before ` ||` would be one).
    pub(super) fn end_quote_like(&mut self, bytes: &[u8], i: usize) -> usize {
        self.mode = Mode::Code;
        let modifiers = bytes[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        1 + modifiers
    }

    /// A byte between the bracketed parts of a Perl `s{a} {b}`: a blank, or the next part's
    /// opener (a `#` starts a comment, and anything else, which Perl refuses, ends the
    /// operator: code).
    #[cold]
    pub(super) fn next_part(&mut self, bytes: &[u8], i: usize) -> usize {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            return 1;
        }
        // A `#` there starts a comment, which Perl allows between the parts: read as one, it
        // ends the operator (the next part reads as code), as a part it would hold all up to
        // the next `#`.
        if b != b'#' && quote_like_delimiter(b, bytes.get(i + 1).copied(), false) {
            self.mode = Mode::QuoteLike {
                open: b,
                close: closer_of(b),
                depth: 0,
                parts: 0,
            };
            return 1;
        }
        self.mode = Mode::Code;
        self.code_token(bytes, i)
    }
}

/// A Perl quote-like operator opened at `bytes[i]`: its opener's length (the name, blanks and
/// the delimiter), the delimiter and its closer, and how many parts follow the first (one for
/// `s`, `tr` and `y`, whose replacement is a second part). `None` where the word there is no
/// such operator's name (`sort`, `$s`, `$h{y}`, `-s $file`, `$obj->s(..)`, `y => 1`, `s = 2`).
/// `previous` is the byte read before `bytes`.
pub(super) fn quote_like_opener(bytes: &[u8], i: usize, previous: u8) -> Option<QuoteLike> {
    let before = if i > 0 { bytes[i - 1] } else { previous };
    // A sigil, a method's arrow, a file test's dash or a package's `::`: a name, no operator.
    let arrow = before == b'>' && i >= 2 && bytes[i - 2] == b'-';
    if is_word(before) || matches!(before, b'$' | b'@' | b'%' | b'&' | b'*' | b'-' | b':') || arrow
    {
        return None;
    }
    if names_a_sub(&bytes[..i]) {
        return None;
    }
    let rest = &bytes[i..];
    let name_len = rest.iter().take_while(|&&c| is_word(c)).count();
    let parts = match &rest[..name_len] {
        b"q" | b"qq" | b"qw" | b"qr" | b"qx" | b"m" => 0,
        b"s" | b"tr" | b"y" => 1,
        _ => return None,
    };
    let blanks = rest[name_len..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    let at = name_len + blanks;
    let open = *rest.get(at)?;
    let next = rest.get(at + 1).copied();
    if !quote_like_delimiter(open, next, blanks > 0) {
        return None;
    }
    Some(QuoteLike {
        len: at + 1,
        open,
        close: closer_of(open),
        parts,
    })
}

/// Whether `before`, the text before a word, ends with `sub` and blanks: the word is a sub's
/// name (`sub s {`, `sub y($)`), which Perl reads as no operator.
fn names_a_sub(before: &[u8]) -> bool {
    let blanks = before
        .iter()
        .rev()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    let Some(word) = before[..before.len() - blanks].strip_suffix(b"sub") else {
        return false;
    };
    blanks > 0 && !word.last().copied().is_some_and(is_word)
}

/// Whether `open`, before `next`, may open a Perl quote-like operator's part: any byte that is
/// no word's, no blank and no closer; after a blank (`qw (a b)`, `s {a} {b}`) only a bracket,
/// a slash, a quote and the like, for a `#` there starts a comment and `=`, `,` or `;` follow a
/// name (`y = 2` in a format, `sub q;`). `=>` after the name quotes it (`s => 1`).
pub(super) fn quote_like_delimiter(open: u8, next: Option<u8>, after_blank: bool) -> bool {
    if after_blank {
        return matches!(
            open,
            b'(' | b'[' | b'{' | b'<' | b'/' | b'|' | b'!' | b'\'' | b'"' | b'~' | b'^'
        );
    }
    let closer_or_name = is_word(open)
        || open.is_ascii_whitespace()
        || matches!(open, b')' | b']' | b'}' | b'>' | b';' | b'\\');
    let fat_comma = open == b'=' && next == Some(b'>');
    let package = open == b':' && next == Some(b':');
    !(closer_or_name || fat_comma || package)
}

/// What [`quote_like_opener`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct QuoteLike {
    pub(crate) len: usize,
    pub(crate) open: u8,
    pub(crate) close: u8,
    pub(crate) parts: u8,
}

/// Whether `text`, after a `=` at a line's start, is a POD command's name (`=head1`, `=pod`,
/// `=item`, ...), which opens a POD block; any other word there (`=foo();`, a statement's
/// second line) is code.
fn is_pod_command(text: &[u8]) -> bool {
    let name_len = text.iter().take_while(|&&c| is_word(c)).count();
    match &text[..name_len] {
        [b'h', b'e', b'a', b'd', level] => level.is_ascii_digit(),
        name => [
            &b"pod"[..],
            b"over",
            b"item",
            b"back",
            b"begin",
            b"end",
            b"for",
            b"encoding",
            b"cut",
        ]
        .contains(&name),
    }
}

/// Whether `text`, a line's start in a POD block, is its `=cut` line.
pub(super) fn cuts_pod(text: &[u8]) -> bool {
    text.starts_with(b"=cut") && !text.get(4).copied().is_some_and(is_word)
}
