//! Strings that open with a quote, and how they close: a quote (tripled where the lexis says),
//! C#'s `$"`, `@"`, `$@"` and raw `"""` strings, Rust's raw strings (`r#"..."#`) and char
//! literals (`'x'`, against lifetimes, `'a`).

use super::interpolation::Interpolation;
use super::{Mode, Scanner};

impl Scanner {
    /// C#, at the start of `rest`: a raw string (`"""`, `$"""`, `$$""""`), an interpolated
    /// string (`$"`), or a verbatim one (`@"`, `$@"`, `@$"`), entered, and its opener's length.
    pub(super) fn csharp_string(&mut self, rest: &[u8]) -> Option<usize> {
        let lexis = self.lexis;
        let interpolated = lexis.interpolation == Some(Interpolation::CSharp);
        let (dollars, quotes) = opener_runs(rest);
        if dollars > 0 && !interpolated {
            return None;
        }
        let after = &rest[dollars..];
        if lexis.raw_quote_runs && quotes >= 3 {
            let count = u8::try_from(quotes).unwrap_or(u8::MAX);
            self.mode = Mode::Verbatim { quote: b'"', count };
            return Some(dollars + usize::from(count));
        }
        if dollars == 1 && quotes > 0 {
            self.mode = Mode::Str {
                quote: b'"',
                count: 1,
                holes: true,
            };
            return Some(2);
        }
        let at_dollar = after.starts_with(b"@\"") && dollars == 1;
        let dollar_at = rest.starts_with(b"@$\"") && interpolated;
        if lexis.at_verbatim && (rest.starts_with(b"@\"") || at_dollar || dollar_at) {
            self.mode = Mode::Doubled {
                holes: at_dollar || dollar_at,
            };
            return Some(if at_dollar || dollar_at { 3 } else { 2 });
        }
        None
    }

    /// A byte of a string closed by `count` `quote`s, past any escape.
    pub(super) fn in_string(&mut self, bytes: &[u8], i: usize, quote: u8, count: u8) -> usize {
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

    /// Rust: a char literal (`'x'`, `'\n'`, `'\u{..}'`) or a lifetime (`'a`).
    pub(super) fn rust_char(&mut self, bytes: &[u8], i: usize) -> usize {
        if bytes.get(i + 1) == Some(&b'\\') {
            self.mode = Mode::Str {
                quote: b'\'',
                count: 1,
                holes: false,
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

/// How many `$`s start `rest`, and how many quotes follow them, each counted up to
/// [`RUN_COUNTED`]: a raw string keeps at most 255 quotes, and counting every `$` of a long run
/// at each of them would cost the run's square.
pub(super) fn opener_runs(rest: &[u8]) -> (usize, usize) {
    let run = |text: &[u8], b: u8| {
        text.iter()
            .take(RUN_COUNTED)
            .take_while(|&&c| c == b)
            .count()
    };
    let dollars = run(rest, b'$');
    (dollars, run(&rest[dollars..], b'"'))
}

/// How many of a run of `$`s or of quotes a C# string's opener counts.
const RUN_COUNTED: usize = 256;

/// At `bytes[i]` (an `r`): the `#`s of a raw string starting there (`r"`, `r#"`, after a `b`
/// too), or `None` where the `r` is part of a word (`for"`, `ptr#`).
pub(super) fn raw_string_hashes(bytes: &[u8], i: usize) -> Option<usize> {
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
