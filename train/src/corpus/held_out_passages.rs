//! Passages of held-out code inside corpus files: a crate that copies a module or a few functions
//! of a held-out crate (clap's `output/textwrap` is textwrap's `lib.rs` with its tests edited,
//! httpdate's `date.rs` shares humantime's date code) stays far below the file-level
//! near-duplicate threshold, yet training on it would teach the model the very text the held-out
//! measurement cuts.
//!
//! A corpus file is dropped when it shares a run of [`HELD_OUT_PASSAGE_TOKENS`] consecutive code
//! tokens with any held-out file, and that run holds at least [`PASSAGE_DISTINCT_TOKENS`]
//! different tokens: a number table (`0, 0, 0, ...`), a spec's character ranges or a list of
//! `type SerializeSeq = Impossible<Self::Ok, Self::Error>;` lines repeats a handful of tokens and
//! is no passage of anyone's code. Code tokens are the near-duplicate check's words and single
//! punctuation bytes with whitespace *and comments* left out, so neither re-indenting, a new
//! licence header nor a comment added between two copied lines breaks a match; string and
//! character literals are read as such, so `"http://"` starts no comment. Next-edit data checks
//! the earlier crate versions it is cut from, which the corpus never reads, by the same windows
//! (`HeldOutCode`).
//!
//! Every such window of every held-out file is hashed into a set (rolling polynomial hash,
//! finished by splitmix64); a corpus file is then scanned with the same rolling hash, one set
//! look-up per token. A window in the set is a shared run of exactly that many tokens (up to a
//! 64-bit hash collision: with a few million held-out windows and 10^8 look-ups, odds of about
//! 10^-5 that any file is dropped by one), so the check is exact where shorter windows, chained,
//! would only approximate it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{near_duplicates, splitmix64};

/// Consecutive code tokens a corpus file may not share with a held-out file. Common idioms stay
/// below it (serde's `forward_to_deserialize_any!` lists and `Deserializer` forwarding, error
/// enums' `Display` impls: at most 93 tokens in the contamination audit, 88 in serde itself),
/// while the partial copies it found share runs of 102-614 tokens.
pub const HELD_OUT_PASSAGE_TOKENS: usize = 100;

/// Different tokens a window of [`HELD_OUT_PASSAGE_TOKENS`] must hold to count. On the corpus
/// the shared windows fall apart: at most 20 in tables, XML's name-character ranges and serde's
/// `Impossible` lists, at least 29 in copied code.
pub const PASSAGE_DISTINCT_TOKENS: usize = 25;

/// The base of the rolling window hash (odd, so every power is odd and no token's weight is 0).
const BASE: u64 = 0x9e37_79b9_7f4a_7c15;

/// The windows of the held-out files, each with the first file it was seen in.
pub(crate) struct HeldOutPassages {
    tokens: usize,
    distinct: usize,
    /// Window hash (already mixed) to a position in `sources`.
    windows: HashMap<u64, u32, BuildHasherDefault<MixedKey>>,
    /// `crate/path (version)` of each held-out file that added a window.
    sources: Vec<String>,
}

/// The longest run a file shares with held-out code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPassage {
    /// Tokens in the longest stretch of the file whose every window is held-out code: the
    /// shared run itself, unless two held-out passages happen to overlap in the file.
    pub tokens: usize,
    /// `crate/path (version)` of the held-out file holding the stretch's first window.
    pub source: String,
}

impl HeldOutPassages {
    /// An empty set of windows of `tokens` tokens, `distinct` of them different at least.
    pub(crate) fn new(tokens: usize, distinct: usize) -> HeldOutPassages {
        assert!(tokens > 0, "a passage has at least one token");
        HeldOutPassages {
            tokens,
            distinct,
            windows: HashMap::default(),
            sources: Vec::new(),
        }
    }

    /// Adds the windows of held-out file `text`; `source` names it in the drops it causes.
    pub(crate) fn insert(&mut self, source: String, text: &str) {
        let id = u32::try_from(self.sources.len()).expect("fewer than 2^32 held-out files");
        let tokens = code_tokens(text);
        let mut added = false;
        let windows = windows(&tokens, self.tokens).zip(distinct_tokens(&tokens, self.tokens));
        for (window, distinct) in windows {
            if distinct >= self.distinct {
                self.windows.entry(window).or_insert_with(|| {
                    added = true;
                    id
                });
            }
        }
        if added {
            self.sources.push(source);
        }
    }

    /// The longest run of held-out code in `text`, if it shares at least one window.
    pub(crate) fn find(&self, text: &str) -> Option<SharedPassage> {
        if self.windows.is_empty() {
            return None;
        }
        // (windows in the current stretch, its first window's source); the longest so far.
        let mut stretch: Option<(usize, u32)> = None;
        let mut longest: Option<(usize, u32)> = None;
        for window in windows(&code_tokens(text), self.tokens) {
            stretch = match (self.windows.get(&window), stretch) {
                (None, _) => None,
                (Some(_), Some((length, source))) => Some((length + 1, source)),
                (Some(&source), None) => Some((1, source)),
            };
            if let Some((length, source)) = stretch {
                if longest.is_none_or(|(best, _)| length > best) {
                    longest = Some((length, source));
                }
            }
        }
        longest.map(|(length, source)| SharedPassage {
            tokens: length + self.tokens - 1,
            source: self.sources[source as usize].clone(),
        })
    }
}

/// The mixed hash of every window of `width` consecutive `tokens`, in order.
fn windows(tokens: &[u64], width: usize) -> impl Iterator<Item = u64> + '_ {
    // BASE^(width - 1): the weight of the token that leaves the window.
    let leaving = (1..width).fold(1u64, |power, _| power.wrapping_mul(BASE));
    let mut hash = tokens
        .iter()
        .take(width.saturating_sub(1))
        .fold(0u64, |hash, &token| {
            hash.wrapping_mul(BASE).wrapping_add(token)
        });
    let first = width.saturating_sub(1);
    (first..tokens.len()).map(move |end| {
        hash = hash.wrapping_mul(BASE).wrapping_add(tokens[end]);
        let window = splitmix64(hash);
        hash = hash.wrapping_sub(tokens[end + 1 - width].wrapping_mul(leaving));
        window
    })
}

/// The number of different tokens in every window of `width` consecutive `tokens`, in order.
fn distinct_tokens(tokens: &[u64], width: usize) -> impl Iterator<Item = usize> + '_ {
    let mut counts: HashMap<u64, usize> = HashMap::new();
    let mut distinct = 0;
    tokens.iter().enumerate().filter_map(move |(end, &token)| {
        let count = counts.entry(token).or_default();
        *count += 1;
        distinct += usize::from(*count == 1);
        if let Some(leaving) = end.checked_sub(width) {
            let count = counts
                .get_mut(&tokens[leaving])
                .expect("counted when it entered");
            *count -= 1;
            distinct -= usize::from(*count == 0);
        }
        (end + 1 >= width).then_some(distinct)
    })
}

/// Hashes of the code tokens of `text`: the near-duplicate check's tokens (runs of identifier
/// characters, single punctuation bytes) of everything but whitespace and comments (`//` to the
/// end of the line, `/* */` nested). String, raw string and character literals are tokenized
/// the same way but skipped whole while looking for comments, so a `//` inside one is kept.
pub(crate) fn code_tokens(text: &str) -> Vec<u64> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::with_capacity(bytes.len() / 4);
    // `code..at` is code not yet tokenized: it runs up to the next comment.
    let (mut code, mut at) = (0, 0);
    while at < bytes.len() {
        let comment_end = match (bytes[at], bytes.get(at + 1)) {
            (b'/', Some(b'/')) => Some(
                bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |n| at + n),
            ),
            (b'/', Some(b'*')) => Some(block_comment_end(bytes, at)),
            _ => None,
        };
        if let Some(end) = comment_end {
            tokens.extend(near_duplicates::token_hashes(&bytes[code..at]));
            (code, at) = (end, end);
            continue;
        }
        at = match bytes[at] {
            b'"' => string_end(bytes, at + 1, true, 0),
            b'\'' => char_literal_end(bytes, at).unwrap_or(at + 1),
            b if is_word(b) => {
                let end = word_end(bytes, at);
                match &bytes[at..end] {
                    b"r" | b"br" | b"cr" => raw_string_end(bytes, end).unwrap_or(end),
                    _ => end,
                }
            }
            _ => at + 1,
        };
    }
    tokens.extend(near_duplicates::token_hashes(&bytes[code..]));
    tokens
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn word_end(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_word(bytes[at]) {
        at += 1;
    }
    at
}

/// Just past the `*/` closing the (nested) block comment opening at `at`, or the end.
fn block_comment_end(bytes: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    while at + 1 < bytes.len() {
        match (bytes[at], bytes[at + 1]) {
            (b'/', b'*') => {
                depth += 1;
                at += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                at += 2;
                if depth == 0 {
                    return at;
                }
            }
            _ => at += 1,
        }
    }
    bytes.len()
}

/// Just past the `"` and `hashes` `#`s closing a string literal whose text starts at `at`, or
/// the end. A raw string reads no escapes.
fn string_end(bytes: &[u8], mut at: usize, escapes: bool, hashes: usize) -> usize {
    while at < bytes.len() {
        match bytes[at] {
            b'\\' if escapes => at += 2,
            b'"' if bytes
                .get(at + 1..at + 1 + hashes)
                .is_some_and(|closing| closing.iter().all(|&b| b == b'#')) =>
            {
                return at + 1 + hashes;
            }
            _ => at += 1,
        }
    }
    bytes.len()
}

/// The end of the raw string whose `#`s or `"` start at `at`, just after its `r` (`r"`, `br#"`,
/// `cr"`), or `None` when none starts there (`r#type` is an identifier).
fn raw_string_end(bytes: &[u8], at: usize) -> Option<usize> {
    let hashes = bytes[at..].iter().take_while(|&&b| b == b'#').count();
    (bytes.get(at + hashes) == Some(&b'"'))
        .then(|| string_end(bytes, at + hashes + 1, false, hashes))
}

/// Just past the character literal opening at `at` (`'a'`, `'"'`, `'\''`, `'\u{2014}'`, `'é'`),
/// or `None` when the `'` starts a lifetime or a label.
fn char_literal_end(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at + 1)? {
        b'\\' => {
            // The escaped character may itself be a `'`; `\u{10FFFF}` is the longest escape.
            let close = bytes
                .get(at + 3..)?
                .iter()
                .take(9)
                .position(|&b| b == b'\'')?;
            Some(at + 3 + close + 1)
        }
        first => {
            let width = match first {
                0x00..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            (bytes.get(at + 1 + width) == Some(&b'\'')).then_some(at + 2 + width)
        }
    }
}

/// A hasher for keys that are already well-mixed 64-bit hashes: passes them through.
#[derive(Default)]
pub(crate) struct MixedKey(u64);

impl Hasher for MixedKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = splitmix64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text`'s code tokens are `code`'s tokens, comments and all.
    fn check(text: &str, code: &str) {
        let expected: Vec<u64> = near_duplicates::token_hashes(code.as_bytes()).collect();
        assert_eq!(code_tokens(text), expected, "{text:?}");
    }

    #[test]
    fn comments_and_whitespace_are_not_code() {
        check("fn f() {\n    a(b)\n}\n", "fn f(){a(b)}");
        check(
            "/// Docs.\nfn f() { a(/* x */ b) } // tail\n",
            "fn f(){a(b)}",
        );
        check("//! Module.\n/* a /* nested */ still */ x\n", "x");
        check("/** unterminated", "");
    }

    #[test]
    fn literals_hide_comment_markers() {
        check(
            "let u = \"http://example.com\"; // why\ny",
            "let u = \"http://example.com\"; y",
        );
        check("let s = \"a\\\" // b\"; c", "let s = \"a\\\" // b\"; c");
        check(
            "let r = r#\"a \" // b\"#; /* c */ d",
            "let r = r#\"a \" // b\"#; d",
        );
        check("let b = br\"\\\"; // c\nd", "let b = br\"\\\"; d");
        check("let q = '\"'; // \"\nz", "let q = '\"'; z");
        check("let q = '\\''; // '\nz", "let q = '\\''; z");
        check(
            "fn f<'a>(x: &'a str) -> &'static str { x } // 'c'\n",
            "fn f<'a>(x: &'a str) -> &'static str { x }",
        );
        check("let r#type = 1; // c\n", "let r#type = 1;");
    }

    fn words(range: std::ops::Range<usize>) -> String {
        range.map(|i| format!("w{i} ")).collect()
    }

    #[test]
    fn a_file_shares_a_passage_from_the_passage_length_on() {
        let mut passages = HeldOutPassages::new(10, 5);
        passages.insert("held/src/lib.rs (1.0.0)".to_string(), &words(0..30));
        let find = |text: &str| passages.find(text).map(|p| (p.tokens, p.source));
        let source = "held/src/lib.rs (1.0.0)".to_string();
        assert_eq!(
            find(&format!("a b {}c", words(5..15))),
            Some((10, source.clone()))
        );
        assert_eq!(find(&format!("a b {}c", words(5..14))), None);
        assert_eq!(
            find(&format!("{}x {}", words(0..12), words(18..29))),
            Some((12, source))
        );
    }

    #[test]
    fn repetitive_windows_are_no_passage() {
        let mut passages = HeldOutPassages::new(10, 5);
        let table = "0, 1, ".repeat(20);
        passages.insert("held/src/table.rs (1.0.0)".to_string(), &table);
        assert_eq!(passages.find(&format!("a {table}b")), None);
    }
}
