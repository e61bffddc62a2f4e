//! Whether a `/` in JavaScript opens a regular expression or divides: what was read before it on
//! its line says. An operator, an opener, a line's start or a keyword such as `return` comes
//! before an operand, so a `/` there opens one (`return /[(]/.test(s)`); a name, a number or a
//! closer comes before a division (`n / 2`, `f(x) / 2`).

use super::delimited::is_word;

/// The keywords after which an operand, so a regular expression, may start.
const KEYWORDS: [&[u8]; 14] = [
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

const LONGEST_KEYWORD: usize = 10;
/// The bytes of a word kept packed: enough to tell a keyword from a longer word.
const KEPT: usize = LONGEST_KEYWORD + 1;

/// The last word read on a line, enough of it to tell a keyword: its length, and its last
/// bytes packed (all of them in a word no longer than a keyword). `Copy` and a few bytes: a scanner keeps one as it goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LastWord {
    packed: u128,
    len: u8,
    /// Read right after a `.` (`obj.in`, `a?.return`): a property's name, no keyword.
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

const PACKED_KEYWORDS: [u128; KEYWORDS.len()] = {
    let mut packed = [0; KEYWORDS.len()];
    let mut at = 0;
    while at < KEYWORDS.len() {
        packed[at] = pack(KEYWORDS[at]);
        at += 1;
    }
    packed
};

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
                member: preceding == b'.',
                ..LastWord::default()
            };
        }
        let word = &run[start..=last];
        for &c in &word[word.len().saturating_sub(KEPT)..] {
            self.packed = (self.packed << 8) | u128::from(c);
        }
        // The same word read a byte at a time or at once packs the same.
        self.packed &= (1 << (8 * KEPT)) - 1;
        self.len = self
            .len
            .saturating_add(u8::try_from(word.len()).unwrap_or(u8::MAX));
        self
    }

    fn is_keyword(self) -> bool {
        let len = usize::from(self.len);
        !self.member
            && len <= LONGEST_KEYWORD
            && KEYWORDS
                .iter()
                .zip(PACKED_KEYWORDS)
                .any(|(keyword, packed)| keyword.len() == len && self.packed == packed)
    }
}

/// Whether an operand may start after `previous_on_line` (the last byte on its line that is no
/// blank, 0 at the line's start) and `word` (the last word read, kept for JavaScript only): a
/// `/` there opens a regular expression, and a Ruby `%` a percent literal.
pub(crate) fn operand_may_start(previous_on_line: u8, word: LastWord) -> bool {
    match previous_on_line {
        0 | b'(' | b',' | b'=' | b':' | b'[' | b'!' | b'&' | b'|' | b'?' | b'{' | b'}' | b';'
        | b'+' | b'-' | b'*' | b'%' | b'<' | b'>' | b'~' | b'^' => true,
        b => is_word(b) && word.is_keyword(),
    }
}
