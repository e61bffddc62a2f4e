//! Whether a `/` opens a regular expression or divides (JavaScript, Ruby, Perl): what was read
//! before it on its line says. An operator, an opener, a line's start or a keyword such as
//! `return` comes before an operand, so a `/` there opens one (`return /[(]/.test(s)`,
//! `split /,/`); a name, a number or a closer comes before a division (`n / 2`, `f(x) / 2`).

use super::delimited::is_word;

/// A language whose `/` may open a regular expression, and how it reads one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Regexes {
    /// A `[...]` class holds a `/` (`/[/]/`); after a `}` an operand may start (a block's end).
    JavaScript,
    /// No class holds a `/` (the lexer finds the closing `/` first); after a `}` a `/`
    /// divides (`list.sum { |x| x } / n`), after `:` it is a symbol (`reduce(:/)`) and after
    /// `?` a character (`chomp(?/)`). A
    /// method's name, a blank and a `/` before no blank opens one (`split /,/`, `gsub /x/, ""`),
    /// as Ruby reads it.
    Ruby,
    /// No class holds a `/`; after a `}` a `/` divides (`$h{n} / 2`, `$h{a} // 0`), after a
    /// `*` it names a typeglob (`*/`), and at a line's start before a blank it divides.
    Perl,
}

/// The keywords after which an operand, so a regular expression, may start.
const JAVASCRIPT: [&[u8]; 14] = [
    b"return",
    b"typeof",
    b"instanceof",
    b"case",
    b"do",
    b"else",
    b"in",
    b"of",
    b"new",
    b"delete",
    b"void",
    b"throw",
    b"yield",
    b"await",
];

const RUBY: [&[u8]; 19] = [
    b"if", b"elsif", b"unless", b"while", b"until", b"and", b"or", b"not", b"return", b"when",
    b"then", b"else", b"do", b"in", b"case", b"yield", b"begin", b"break", b"next",
];

/// Perl's too, and the list operators whose first argument is a pattern (`split /,/`).
const PERL: [&[u8]; 14] = [
    b"if", b"elsif", b"unless", b"while", b"until", b"and", b"or", b"not", b"xor", b"return",
    b"when", b"split", b"grep", b"map",
];

const LONGEST_KEYWORD: usize = 10;
/// The longest word kept packed: enough to tell a keyword from a longer word.
const KEPT: usize = LONGEST_KEYWORD + 1;

/// The last word read on a line, enough of it to tell a keyword: its length, and its bytes
/// packed where it is no longer than [`KEPT`]. `Copy` and a few bytes: a scanner keeps one as it
/// goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LastWord {
    packed: u128,
    len: u8,
    /// Read right after a `.` (`obj.in`, `a?.return`) or a sigil (`$split`, `@in`): a
    /// property's or a variable's name, no keyword.
    member: bool,
}

const fn pack(word: &[u8]) -> u128 {
    let mut packed = 0;
    let mut at = 0;
    while at < word.len() {
        packed = (packed << 8) | word[at] as u128;
        at += 1;
    }
    packed
}

const fn pack_all<const N: usize>(words: [&[u8]; N]) -> [u128; N] {
    let mut packed = [0; N];
    let mut at = 0;
    while at < N {
        packed[at] = pack(words[at]);
        at += 1;
    }
    packed
}

const PACKED_JAVASCRIPT: [u128; JAVASCRIPT.len()] = pack_all(JAVASCRIPT);
const PACKED_DEF: u128 = pack(b"def");
const PACKED_RUBY: [u128; RUBY.len()] = pack_all(RUBY);
const PACKED_PERL: [u128; PERL.len()] = pack_all(PERL);

impl LastWord {
    /// The last word after reading `run` (a token, or a run of plain code) after `before`, the
    /// byte read before it: blanks keep it, any other byte that is no word's ends it.
    pub(crate) fn after(mut self, before: u8, run: &[u8]) -> LastWord {
        let Some(last) = run.iter().rposition(|c| !c.is_ascii_whitespace()) else {
            return self;
        };
        if !is_word(run[last]) {
            return LastWord::default();
        }
        let start = run[..last]
            .iter()
            .rposition(|&c| !is_word(c))
            .map_or(0, |at| at + 1);
        if start > 0 || !is_word(before) {
            let preceding = if start > 0 { run[start - 1] } else { before };
            self = LastWord {
                member: matches!(preceding, b'.' | b'$' | b'@'),
                ..LastWord::default()
            };
        }
        let word = &run[start..=last];
        let len = usize::from(self.len) + word.len();
        // Only a word no longer than a keyword is kept (a longer one packs as nothing, so that
        // the same word read a byte at a time or at once packs the same).
        self.packed = if len <= KEPT {
            let mut bytes = [0; 16];
            bytes[16 - word.len()..].copy_from_slice(word);
            (self.packed << (8 * word.len())) | u128::from_be_bytes(bytes)
        } else {
            0
        };
        self.len = u8::try_from(len).unwrap_or(u8::MAX);
        self
    }

    fn is_keyword(self, style: Regexes) -> bool {
        let (keywords, packed): (&[&[u8]], &[u128]) = match style {
            Regexes::JavaScript => (&JAVASCRIPT, &PACKED_JAVASCRIPT),
            Regexes::Ruby => (&RUBY, &PACKED_RUBY),
            Regexes::Perl => (&PERL, &PACKED_PERL),
        };
        let len = usize::from(self.len);
        !self.member
            && len <= LONGEST_KEYWORD
            && keywords
                .iter()
                .zip(packed)
                .any(|(keyword, &packed)| keyword.len() == len && self.packed == packed)
    }

    /// A name, not a number (`10 /2` divides in Ruby): its first byte, where kept, is no digit.
    fn is_name(self) -> bool {
        let len = usize::from(self.len);
        len > KEPT || !((self.packed >> (8 * (len.max(1) - 1))) as u8).is_ascii_digit()
    }

    /// A number (`1`, `0x1f`): a word kept whole whose first byte is a digit.
    pub(crate) fn is_number(self) -> bool {
        self.len > 0 && !self.is_name()
    }
}

impl Regexes {
    /// Whether a `[` in a regular expression opens a class that holds a `/`.
    pub(crate) fn has_classes(self) -> bool {
        self == Regexes::JavaScript
    }

    /// Whether a `/` opens a regular expression after `previous` (the byte read last),
    /// `previous_on_line` (the last byte on its line that is no blank, 0 at the line's start)
    /// and `word` (the last word read), before `next` (the byte after it, if read with it).
    pub(crate) fn opens_at(
        self,
        previous: u8,
        previous_on_line: u8,
        word: LastWord,
        next: Option<u8>,
    ) -> bool {
        // Ruby's `:/` is a symbol and `?/` a character (`chomp(?/)`), Perl's `*/` a typeglob.
        let name = match self {
            Regexes::JavaScript => false,
            Regexes::Ruby => matches!(previous, b':' | b'?'),
            Regexes::Perl => previous == b'*',
        };
        // A Perl line starting with `/` and a blank goes on dividing (`($done * 100)\n / $n`):
        // read as a pattern, which Perl's may be across lines, it would run on to the next `/`.
        let dividing_line = self == Regexes::Perl
            && previous_on_line == 0
            && next.is_some_and(|c| c == b' ' || c == b'\t');
        if name || dividing_line {
            return false;
        }
        if operand_may_start(Some(self), previous_on_line, word) {
            return true;
        }
        // `split /,/` but `a / b`, `a /= 2` and `def /(other)` (the method's name).
        self == Regexes::Ruby
            && is_word(previous_on_line)
            && word.is_name()
            && word.packed != PACKED_DEF
            && matches!(previous, b' ' | b'\t')
            && next.is_some_and(|c| !c.is_ascii_whitespace() && c != b'=')
    }
}

/// Whether an operand may start after `previous_on_line` (the last byte on its line that is no
/// blank, 0 at the line's start) and `word` (the last word read, kept where `style` is some):
/// a `/` there opens a regular expression, and a Ruby `%` a percent literal.
pub(crate) fn operand_may_start(
    style: Option<Regexes>,
    previous_on_line: u8,
    word: LastWord,
) -> bool {
    match previous_on_line {
        0 | b'(' | b',' | b'=' | b':' | b'[' | b'!' | b'&' | b'|' | b'?' | b'{' | b';' | b'+'
        | b'-' | b'*' | b'%' | b'<' | b'>' | b'~' | b'^' => true,
        b'}' => style.is_none_or(|style| style == Regexes::JavaScript),
        b => is_word(b) && style.is_some_and(|style| word.is_keyword(style)),
    }
}
