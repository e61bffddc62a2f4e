//! Literals whose closer repeats what their opener said: here-documents (`<<EOF` ... `EOF`),
//! C++ raw strings (`R"sql(` ... `)sql"`), Lua's long brackets (`[==[` ... `]==]`) and Ruby's
//! percent literals (`%Q[` ... `]`): how each opens, and how the scanner reads a here-document's
//! body and a raw string up to their closers. What the scanner keeps of one is `Copy`, so that
//! [`super::LexMode`] stays a plain value the language server can keep a line.

use std::fmt;

use super::{Mode, Scanner};

/// The word a literal's closer repeats: a here-document's terminator, a C++ raw string's
/// delimiter. Held inline; a word longer than [`Delimiter::KEPT`] bytes keeps its first bytes and
/// its length (a terminator matching those is taken for it). Two fit in a [`super::LexMode`]
/// (here-documents opened on one line, `cat <<A <<B`), with room for its other fields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Delimiter {
    len: u8,
    bytes: [u8; Delimiter::KEPT],
}

impl Delimiter {
    const KEPT: usize = 11;

    /// `None` for a word of more than 255 bytes.
    fn new(word: &[u8]) -> Option<Delimiter> {
        let len = u8::try_from(word.len()).ok()?;
        let mut bytes = [0; Delimiter::KEPT];
        let kept = word.len().min(Delimiter::KEPT);
        bytes[..kept].copy_from_slice(&word[..kept]);
        Some(Delimiter { len, bytes })
    }

    pub(crate) fn len(self) -> usize {
        usize::from(self.len)
    }

    /// Whether `b` may be the word's byte at `at`.
    fn allows(self, at: usize, b: u8) -> bool {
        at < self.len() && (at >= Delimiter::KEPT || self.bytes[at] == b)
    }

    /// Whether `text` starts with the word.
    pub(crate) fn starts(self, text: &[u8]) -> bool {
        text.len() >= self.len() && (0..self.len()).all(|at| self.allows(at, text[at]))
    }
}

impl fmt::Debug for Delimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kept = self.len().min(Delimiter::KEPT);
        write!(f, "{:?}", String::from_utf8_lossy(&self.bytes[..kept]))?;
        if self.len() > kept {
            write!(f, "+{}", self.len() - kept)?;
        }
        Ok(())
    }
}

/// How a language opens here-documents, if it has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Heredocs {
    /// Shell: `<<EOF`, `<< EOF`, `<<-EOF` (the terminator may follow tabs), `<<'EOF'`,
    /// `<<"EOF"`, `<<\EOF`. `<<<` is a here-string, and `<<` inside `$((...))` a shift.
    Shell,
    /// Ruby: `<<~EOS` and `<<-EOS` (an indented terminator), `<<"EOS"`, `<<'EOS'`, and a bare
    /// `<<EOS` whose name starts with a capital; none right after an operand (`a<<B`,
    /// `s<<~x`). `a << b` and `class << self` are no here-documents.
    Ruby,
    /// Perl: as Ruby's, and a quoted terminator may follow blanks (`<< "EOF"`).
    Perl,
    /// PHP: `<<<EOT`, `<<<"EOT"` and nowdocs, `<<<'EOT'`. Since PHP 7.3 the terminator may be
    /// indented and code may follow it on its line (`EOT);`).
    Php,
}

impl Heredocs {
    /// Code may follow the terminator on its line (PHP): a byte that cannot go on its word
    /// ends the body.
    pub(crate) fn code_after(self) -> bool {
        self == Heredocs::Php
    }
}

/// An open here-document: how the line that ends it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Heredoc {
    pub(crate) terminator: Delimiter,
    pub(crate) indent: TerminatorIndent,
}

/// What may come before a here-document's terminator on its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TerminatorIndent {
    Nothing,
    /// Shell's `<<-`.
    Tabs,
    /// Ruby's `<<~` and `<<-`, Perl's `<<~`, PHP's.
    Blanks,
}

/// How much of a here-document body's line matches its terminator so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum LineMatch {
    /// Nothing but the indentation the terminator may follow.
    #[default]
    Indent,
    /// The terminator's first this many bytes.
    Matched(usize),
    /// Something else: the line is the body's.
    Failed,
}

impl LineMatch {
    /// The match after `b`, a byte of the line that is no line break.
    pub(crate) fn next(self, doc: &Heredoc, b: u8) -> LineMatch {
        let word = doc.terminator;
        match self {
            LineMatch::Indent if b == b'\t' && doc.indent != TerminatorIndent::Nothing => self,
            LineMatch::Indent if b == b' ' && doc.indent == TerminatorIndent::Blanks => self,
            LineMatch::Indent if word.allows(0, b) => LineMatch::Matched(1),
            LineMatch::Matched(n) if word.allows(n, b) => LineMatch::Matched(n + 1),
            // CRLF: the `\r` before the line break.
            LineMatch::Matched(n) if n == word.len() && b == b'\r' => self,
            _ => LineMatch::Failed,
        }
    }

    pub(crate) fn whole(self, doc: &Heredoc) -> bool {
        self == LineMatch::Matched(doc.terminator.len())
    }
}

/// A byte of an identifier or a bare word (any byte of a UTF-8 sequence counts).
pub(crate) fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// At `bytes[i]`, a `<`: the here-document that `style` opens there, and how many bytes its
/// opener takes (the word and its quotes, which are no string of the code's); `None` where the
/// `<` is something else. `before` is the byte before it, `open` the brackets opened on its line
/// and still open there, `operand_before` whether a number or a closer is the last token before
/// it on its line, blanks between or not (`1 <<COUNT` shifts in Ruby and Perl).
pub(crate) fn heredoc_opener(
    bytes: &[u8],
    i: usize,
    style: Heredocs,
    before: u8,
    open: &[u8],
    operand_before: bool,
) -> Option<(usize, Heredoc)> {
    let rest = &bytes[i..];
    let (mut at, indent) = match style {
        Heredocs::Shell => {
            // `<<<` is a here-string; `$((a << b))`, `$[a << b]`, `arr[i<<j]` shift.
            if !rest.starts_with(b"<<") || rest.get(2) == Some(&b'<') || before == b'<' {
                return None;
            }
            if open.ends_with(b"((") || open.last() == Some(&b'[') {
                return None;
            }
            match rest.get(2) {
                Some(b'-') => (3, TerminatorIndent::Tabs),
                _ => (2, TerminatorIndent::Nothing),
            }
        }
        Heredocs::Ruby | Heredocs::Perl => {
            if !rest.starts_with(b"<<") || before == b'<' {
                return None;
            }
            match rest.get(2) {
                Some(b'~' | b'-') => (3, TerminatorIndent::Blanks),
                _ => (2, TerminatorIndent::Nothing),
            }
        }
        Heredocs::Php => {
            if !rest.starts_with(b"<<<") {
                return None;
            }
            (3, TerminatorIndent::Blanks)
        }
    };
    let blanks = rest[at..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    let quoted_after_blanks = matches!(rest.get(at + blanks), Some(b'\'' | b'"' | b'`'));
    if !matches!(style, Heredocs::Ruby | Heredocs::Perl)
        || quoted_after_blanks && style == Heredocs::Perl
    {
        at += blanks;
    }
    let (word, quoted, len) = match rest.get(at) {
        Some(&quote @ (b'\'' | b'"' | b'`')) => {
            let inside = &rest[at + 1..];
            let end = inside.iter().position(|&c| c == quote || c == b'\n')?;
            if inside[end] != quote {
                return None;
            }
            (&inside[..end], true, at + end + 2)
        }
        Some(b'\\') if style == Heredocs::Shell => {
            let word = bare_word(&rest[at + 1..], style);
            (word, true, at + 1 + word.len())
        }
        _ => {
            let word = bare_word(&rest[at..], style);
            (word, false, at + word.len())
        }
    };
    let first = *word.first()?;
    // A bare word is a name: `<< 2` shifts.
    let starts_name = first.is_ascii_alphabetic() || first == b'_' || first >= 0x80;
    if !quoted && !starts_name {
        return None;
    }
    if matches!(style, Heredocs::Ruby | Heredocs::Perl) {
        // Right after an operand, `<<` shifts or appends (`a<<B`, `s<<~x`), and after a number
        // or a closer a blank apart (`1 <<COUNT`; not after a name: `print <<EOS`, Perl's
        // `print $fh <<EOS`); a bare `<<EOS` opens one only with a capital name.
        let after_operand =
            is_word(before) || matches!(before, b')' | b']' | b'}') || operand_before;
        let bare = !quoted && indent == TerminatorIndent::Nothing;
        if after_operand || (bare && !(first.is_ascii_uppercase() || first == b'_')) {
            return None;
        }
    }
    let terminator = Delimiter::new(word)?;
    let doc = Heredoc { terminator, indent };
    Some((len, doc))
}

/// The unquoted word at the start of `text`: a name, or in shell anything up to a blank, an
/// operator or a quote (`<<END-OF-TEXT`).
fn bare_word(text: &[u8], style: Heredocs) -> &[u8] {
    let shell_word = |c: u8| {
        c.is_ascii_graphic()
            && !matches!(
                c,
                b'|' | b'&' | b';' | b'(' | b')' | b'<' | b'>' | b'\'' | b'"' | b'`' | b'\\'
            )
            || c >= 0x80
    };
    let len = match style {
        Heredocs::Shell => text.iter().take_while(|&&c| shell_word(c)).count(),
        Heredocs::Ruby | Heredocs::Perl | Heredocs::Php => {
            text.iter().take_while(|&&c| is_word(c)).count()
        }
    };
    &text[..len]
}

/// At `bytes[i]`, an `R`: the delimiter of a C++ raw string starting there (`R"(`, `u8R"x(`,
/// `LR"--(`) and how many bytes its opener takes from the `R`; `None` where the `R` is part of a
/// name or no raw string follows. `previous` is the byte read before `bytes`.
pub(crate) fn cpp_raw_opener(bytes: &[u8], i: usize, previous: u8) -> Option<(usize, Delimiter)> {
    let before = &bytes[..i];
    let prefix = if before.ends_with(b"u8") {
        2
    } else if before
        .last()
        .is_some_and(|c| matches!(c, b'u' | b'U' | b'L'))
    {
        1
    } else {
        0
    };
    let start = i - prefix;
    let preceding = match start {
        0 if prefix == 0 => previous,
        0 => 0,
        _ => bytes[start - 1],
    };
    if is_word(preceding) {
        return None;
    }
    let rest = &bytes[i + 1..];
    if rest.first() != Some(&b'"') {
        return None;
    }
    // At most 16 bytes, none of them a blank, a parenthesis, a backslash or a quote.
    let word_len = rest[1..].iter().take(17).position(|&c| c == b'(')?;
    let word = &rest[1..=word_len];
    let plain = word
        .iter()
        .all(|&c| c.is_ascii_graphic() && !matches!(c, b')' | b'\\' | b'"'));
    if !plain {
        return None;
    }
    Some((word_len + 3, Delimiter::new(word)?))
}

/// At the start of `text`, a Lua long bracket's opener (`[[`, `[==[`): its length and level
/// (how many `=`s).
pub(crate) fn long_bracket_opener(text: &[u8]) -> Option<(usize, u32)> {
    if text.first() != Some(&b'[') {
        return None;
    }
    let level = text[1..].iter().take_while(|&&c| c == b'=').count();
    (text.get(level + 1) == Some(&b'['))
        .then(|| Some((level + 2, u32::try_from(level).ok()?)))
        .flatten()
}

/// Whether `text` starts with the closer of a long bracket of `level` (`]==]`).
pub(crate) fn closes_long_bracket(text: &[u8], level: u32) -> bool {
    let level = level as usize;
    text.len() >= level + 2
        && text[0] == b']'
        && text[1..=level].iter().all(|&c| c == b'=')
        && text[level + 1] == b']'
}

/// The byte that closes a literal opened by `open`: its pair where it is a bracket, else itself
/// (`%w|a|`, `q!x!`).
pub(crate) fn closer_of(open: u8) -> u8 {
    match open {
        b'(' => b')',
        b'[' => b']',
        b'{' => b'}',
        b'<' => b'>',
        _ => open,
    }
}

/// At the start of `text`, a `%`: a Ruby percent literal's opener (`%w[`, `%Q(`, `%r{`, `%(`,
/// `%w|`), its length, and the bytes that open and close it; `None` for a modulo. After an
/// operand (`operand_before`: a name, a number, a closer) `%` is a modulo (`i % 2`,
/// `"%s" % [x]`), but a typed literal after a blank (`puts %w[a b]`, `when %r{x}`).
/// `previous` is the byte before the `%`.
pub(crate) fn percent_opener(
    text: &[u8],
    operand_before: bool,
    previous: u8,
) -> Option<(usize, u8, u8)> {
    let typed = text
        .get(1)
        .is_some_and(|c| b"qQwWiIrsx".contains(c) && text.get(2).is_some_and(|d| !is_word(*d)));
    if operand_before && !(typed && matches!(previous, b' ' | b'\t')) {
        return None;
    }
    let at = 1 + usize::from(typed);
    let open = *text.get(at)?;
    // Untyped, a `%` before any other byte is more often in a regular expression's text.
    let bracket = matches!(open, b'(' | b'[' | b'{' | b'<');
    if !(bracket || (typed && open.is_ascii_punctuation() && open != b'=')) {
        return None;
    }
    Some((at + 1, open, closer_of(open)))
}

impl Scanner {
    /// At the end of a line that opened a here-document: its body starts, unless the line ended
    /// inside a string or comment (which a scan resumed at the next line would not know of).
    #[cold]
    pub(super) fn start_heredoc(&mut self) {
        let pending = self.heredoc_pending.take();
        let next = self.heredoc_next.take();
        if let (Some(doc), true) = (pending, self.in_code()) {
            self.mode = Mode::Heredoc { doc, next };
            self.terminator = LineMatch::Indent;
        }
    }

    /// A byte of a C++ raw string, or its closer.
    #[inline(never)]
    pub(super) fn in_cpp_raw(&mut self, bytes: &[u8], i: usize, delimiter: Delimiter) -> usize {
        let end = &bytes[i + 1..];
        let closes =
            bytes[i] == b')' && delimiter.starts(end) && end.get(delimiter.len()) == Some(&b'"');
        if closes {
            self.mode = Mode::Code;
            return delimiter.len() + 2;
        }
        1
    }

    /// A byte of a here-document's body: the line that holds its terminator ends it, at its
    /// line break or, where code may follow the terminator (PHP), at the first byte that is no
    /// word's. Its end starts `next`'s body, where its line opened two: at once where the
    /// terminator ends its line, at the line's end where code follows it.
    #[inline(never)]
    pub(super) fn heredoc_body(
        &mut self,
        bytes: &[u8],
        i: usize,
        doc: Heredoc,
        next: Option<Heredoc>,
    ) -> usize {
        let b = bytes[i];
        let whole = self.terminator.whole(&doc);
        if b == b'\n' {
            self.terminator = LineMatch::Indent;
            if whole {
                self.mode = match next {
                    Some(doc) => Mode::Heredoc { doc, next: None },
                    None => Mode::Code,
                };
            }
            return 1;
        }
        let code_after = self.lexis.heredocs.is_some_and(Heredocs::code_after);
        if whole && code_after && !is_word(b) {
            self.terminator = LineMatch::Indent;
            self.mode = Mode::Code;
            self.heredoc_pending = next;
            return self.code_token(bytes, i);
        }
        self.terminator = self.terminator.next(&doc, b);
        1
    }
}
