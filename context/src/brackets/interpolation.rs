//! Code inside a string: Swift's `"\(f("x"))"`, Kotlin's `"${f("x")}"`, C#'s `$"{f("x")}"`,
//! JavaScript's `` `${f(`x`)}` ``, Ruby's `"#{h["x"]}"`, Dart's `'${m['x']}'`, PHP's
//! `"{$a["x"]}"`, shell's `"$(dirname "$0")"`.
//! Inside such a hole the scanner reads code (its quotes open strings of their own) until the
//! closer that ends the hole, then goes on in the string. Which strings it is nested in is
//! [`Holes`], a few bytes of [`super::LexMode`], so a line inside a hole resumes as it reads.

use super::{Mode, Scanner};

/// How a language writes a hole in a string, if it has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interpolation {
    /// `\(...)` in any `"` or `"""` string.
    Swift,
    /// `${...}` in any `"` or `"""` string (`$name` holds no code to read).
    Kotlin,
    /// `{...}` in a `$"..."` or `$@"..."` string; `{{` is a brace.
    CSharp,
    /// `${...}` in a template literal (`` `...` ``), JavaScript's and TypeScript's.
    JavaScript,
    /// `#{...}` in a `"` string or a backtick command.
    Ruby,
    /// `${...}` in any `'`, `"`, `'''` or `"""` string (`$name` holds no code to read).
    Dart,
    /// `{$...}` in a `"` string or a backtick command: the `{` opens the hole, the `$` starts its
    /// code (`{ $` is text, and `$a[0]`, `${a}` hold no quote to read).
    Php,
    /// `$(...)` in a `"` string: a command's output (`"$(basename "$f")"`), or arithmetic,
    /// `$((...))`. A `${...}` expansion is read as the string's text.
    Shell,
}

impl Interpolation {
    /// The byte a hole's opener starts with: a string's text runs up to it.
    pub(crate) fn starts_with(self) -> u8 {
        match self {
            Interpolation::Swift => b'\\',
            Interpolation::Kotlin
            | Interpolation::JavaScript
            | Interpolation::Dart
            | Interpolation::Shell => b'$',
            Interpolation::CSharp | Interpolation::Php => b'{',
            Interpolation::Ruby => b'#',
        }
    }

    /// The byte that ends a hole where nothing opened inside it is open.
    pub(crate) fn closer(self) -> u8 {
        match self {
            Interpolation::Swift | Interpolation::Shell => b')',
            Interpolation::Kotlin
            | Interpolation::CSharp
            | Interpolation::JavaScript
            | Interpolation::Ruby
            | Interpolation::Dart
            | Interpolation::Php => b'}',
        }
    }

    /// Whether every string `quote` opens holds holes: Swift's and Kotlin's `"`, JavaScript's
    /// `` ` ``, Ruby's and PHP's `"` and `` ` ``, Dart's `'` and `"`, shell's `"`; none of C#'s (a
    /// `$` opens those).
    pub(crate) fn holes_in(self, quote: u8) -> bool {
        match self {
            Interpolation::Swift | Interpolation::Kotlin | Interpolation::Shell => quote == b'"',
            Interpolation::JavaScript => quote == b'`',
            Interpolation::Ruby | Interpolation::Php => quote == b'"' || quote == b'`',
            Interpolation::Dart => quote == b'"' || quote == b'\'',
            Interpolation::CSharp => false,
        }
    }
}

/// Which string a hole is in, to go back to at its closer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoleString {
    /// `"...\(x)..."`, with escapes (ending at its line where the lexis says: Swift's, Kotlin's;
    /// Ruby's go on).
    Quote,
    /// `"""...${x}..."""`, with escapes.
    TripleQuote,
    /// C#'s `$@"...{x}..."`: no escapes but `""`, across lines.
    Doubled,
    /// `` `...${x}...` ``, with escapes (a template literal, a Ruby command).
    Backtick,
    /// `'...${x}...'`, with escapes (Dart's).
    Apostrophe,
    /// `'''...${x}...'''`, with escapes (Dart's).
    TripleApostrophe,
}

impl HoleString {
    /// The hole string of a [`Mode::Str`] closed by `quote` repeated `count` times.
    pub(super) fn of(quote: u8, count: u8) -> HoleString {
        match (quote, count) {
            (b'`', _) => HoleString::Backtick,
            (b'\'', 3) => HoleString::TripleApostrophe,
            (b'\'', _) => HoleString::Apostrophe,
            (_, 3) => HoleString::TripleQuote,
            _ => HoleString::Quote,
        }
    }

    fn from_bits(bits: u8) -> HoleString {
        match bits {
            0 => HoleString::Quote,
            1 => HoleString::TripleQuote,
            2 => HoleString::Doubled,
            3 => HoleString::Backtick,
            4 => HoleString::Apostrophe,
            _ => HoleString::TripleApostrophe,
        }
    }
}

/// The holes the scanner is in, innermost last: for each, the string it is in and how many
/// brackets opened inside it are open (a closer at none left ends the hole). At most
/// [`Holes::DEEPEST`] deep (a hole in a string in a hole in a string in a hole): a hole deeper
/// than that reads as its string's text, as every hole did before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Holes {
    len: u8,
    /// The string in the low 3 bits, the brackets open in the high 5 (at most 31 counted).
    frames: [u8; Holes::DEEPEST],
}

impl Holes {
    const DEEPEST: usize = 3;
    const DEPTH_ONE: u8 = 1 << 3;

    pub(crate) fn is_empty(self) -> bool {
        self.len == 0
    }

    /// Enters a hole in `string`; `false` where the holes are already as deep as they go.
    pub(crate) fn enter(&mut self, string: HoleString) -> bool {
        let Some(frame) = self.frames.get_mut(usize::from(self.len)) else {
            return false;
        };
        *frame = string as u8;
        self.len += 1;
        true
    }

    /// A bracket opened inside the innermost hole.
    pub(crate) fn open_bracket(&mut self) {
        if let Some(frame) = self.innermost() {
            if *frame >> 3 < 31 {
                *frame += Holes::DEPTH_ONE;
            }
        }
    }

    /// At a closer `b` in the innermost hole: the string it goes back to where `b` is the
    /// hole's `closer` and closes it; `None` where it closes a bracket opened inside the hole
    /// (one fewer is open) or is some other closer.
    pub(crate) fn close(&mut self, b: u8, closer: u8) -> Option<HoleString> {
        let frame = self.innermost()?;
        if *frame >= Holes::DEPTH_ONE {
            *frame -= Holes::DEPTH_ONE;
            return None;
        }
        if b != closer {
            return None;
        }
        let string = HoleString::from_bits(*frame);
        self.len -= 1;
        self.frames[usize::from(self.len)] = 0;
        Some(string)
    }

    fn innermost(&mut self) -> Option<&mut u8> {
        let len = usize::from(self.len);
        len.checked_sub(1).map(|at| &mut self.frames[at])
    }
}

impl Mode {
    /// The string a hole's closer goes back to.
    pub(super) fn around_hole(string: HoleString) -> Mode {
        let (quote, count) = match string {
            HoleString::Doubled => return Mode::Doubled { holes: true },
            HoleString::Quote => (b'"', 1),
            HoleString::TripleQuote => (b'"', 3),
            HoleString::Backtick => (b'`', 1),
            HoleString::Apostrophe => (b'\'', 1),
            HoleString::TripleApostrophe => (b'\'', 3),
        };
        Mode::Str {
            quote,
            count,
            holes: true,
        }
    }
}

impl Scanner {
    /// At `bytes[i]` in a string of the kind `string` names: a hole's opener, entered (its
    /// length), or a C# `{{`, a brace of the text; `None` for any other byte, and for a hole
    /// deeper than [`Holes`] keeps (its opener is text then).
    pub(super) fn open_hole(
        &mut self,
        bytes: &[u8],
        i: usize,
        string: HoleString,
    ) -> Option<usize> {
        let style = self.lexis.interpolation?;
        let next = bytes.get(i + 1).copied();
        let len = match (style, bytes[i], next) {
            (Interpolation::Swift, b'\\', Some(b'('))
            | (
                Interpolation::Kotlin | Interpolation::JavaScript | Interpolation::Dart,
                b'$',
                Some(b'{'),
            )
            | (Interpolation::Ruby, b'#', Some(b'{'))
            | (Interpolation::Shell, b'$', Some(b'(')) => 2,
            (Interpolation::Php, b'{', Some(b'$')) => 1,
            (Interpolation::CSharp, b'{', Some(b'{')) => return Some(2),
            (Interpolation::CSharp, b'{', _) => 1,
            _ => return None,
        };
        if !self.holes.enter(string) {
            return None;
        }
        self.mode = Mode::Code;
        // No end of the string, which [`Scanner::step`] counts as a literal left for code.
        self.literals_ended = self.literals_ended.wrapping_sub(1);
        Some(len)
    }
}
