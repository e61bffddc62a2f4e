//! What the model's tokens spell, as text a client may be shown: valid UTF-8 always, and never a
//! character the model did not write.
//!
//! A byte-level tokenizer's tokens are bytes, not characters: a 4-byte emoji is often several
//! tokens, and a diffusion model commits tokens in any order, so a run of tokens may end inside
//! a character (a later token may complete it) or hold bytes no character can be made of. The
//! tokenizer's own decode turns both into U+FFFD, which a client would show as the model's
//! text. [`Text::from_bytes`] is the one rule every door (HTTP answers and streams, the
//! language server's completions, next edits and drafts) goes through, by way of
//! [`crate::tokenizer::Tokenizer::text`]: the text is the longest valid prefix of the bytes, a
//! character cut off at the end is held back ([`Tail::Incomplete`]), and bytes that cannot be
//! UTF-8 whatever follows end the text there ([`Tail::Invalid`]). [`Draft`] is the same rule
//! for a denoising step's canvas, whose committed runs have masked slots between them.

use serde::Serialize;

use crate::tokenizer::Tokenizer;

/// What a still-masked slot looks like in a draft.
pub const MASK_GLYPH: char = '\u{2591}';

/// How the bytes after a [`Text`] end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Tail {
    /// There are none: every byte is in the text.
    Complete,
    /// The last bytes begin a character that later bytes may complete; held back until they do
    /// (at the end of a finished middle there are none, and they are dropped).
    Incomplete,
    /// Bytes no character begins with or continues: the text stops before them, whatever
    /// follows them.
    Invalid,
}

/// The longest valid UTF-8 text a run of bytes begins with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pub text: String,
    pub tail: Tail,
}

impl Text {
    /// The valid text `bytes` begin with, and what stopped it.
    pub fn from_bytes(bytes: &[u8]) -> Text {
        match std::str::from_utf8(bytes) {
            Ok(text) => Text {
                text: text.to_owned(),
                tail: Tail::Complete,
            },
            Err(err) => {
                let valid = &bytes[..err.valid_up_to()];
                Text {
                    // Checked by `from_utf8` just now: the bytes before the error are UTF-8.
                    text: String::from_utf8_lossy(valid).into_owned(),
                    // `error_len` is `None` exactly when the input ended inside a character
                    // that more bytes could complete.
                    tail: match err.error_len() {
                        None => Tail::Incomplete,
                        Some(_) => Tail::Invalid,
                    },
                }
            }
        }
    }

    /// Whether every byte made it into the text (nothing held back, nothing cut).
    pub fn is_complete(&self) -> bool {
        self.tail == Tail::Complete
    }
}

/// A denoising step's canvas as text, raw model output before any post-processing: the
/// committed runs' text, [`MASK_GLYPH`] for each slot still masked, nothing for the slots past
/// the end of the middle.
///
/// Each run is held to [`Text`]'s rule, with what a masked slot before or after it may still
/// bring: bytes at a run's start that continue a character begun before the gap, and a
/// character cut off at its end, are held back; bytes that are UTF-8 in no completion of the
/// gaps end the draft's text there, as they will end the middle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    pub text: String,
    /// Slots still masked (all of them, also past where the text stopped).
    pub masked: usize,
}

impl Draft {
    /// The draft of `slots` (a [`crate::sampler::CanvasView`]'s), where `is_end` says which
    /// tokens end the middle.
    pub fn render(
        tokenizer: &Tokenizer,
        slots: &[Option<u32>],
        is_end: impl Fn(u32) -> bool,
    ) -> Draft {
        let mut text = String::new();
        let mut masked = 0;
        let mut stopped = false;
        let mut run: Vec<u32> = Vec::new();
        let mut after_gap = false;
        for slot in slots {
            match slot {
                Some(t) if is_end(*t) => {
                    stopped |= Draft::flush(tokenizer, &mut run, after_gap, stopped, &mut text);
                    after_gap = false;
                }
                Some(t) => run.push(*t),
                None => {
                    stopped |= Draft::flush(tokenizer, &mut run, after_gap, stopped, &mut text);
                    after_gap = true;
                    masked += 1;
                    if !stopped {
                        text.push(MASK_GLYPH);
                    }
                }
            }
        }
        Draft::flush(tokenizer, &mut run, after_gap, stopped, &mut text);
        Draft { text, masked }
    }

    /// Writes `run`'s text (unless the draft has `stopped`) and empties it; whether its bytes
    /// stop the draft.
    fn flush(
        tokenizer: &Tokenizer,
        run: &mut Vec<u32>,
        after_gap: bool,
        stopped: bool,
        text: &mut String,
    ) -> bool {
        let ids = std::mem::take(run);
        if ids.is_empty() || stopped {
            return false;
        }
        let piece = if after_gap {
            tokenizer.text_after_gap(&ids)
        } else {
            tokenizer.text(&ids)
        };
        // A tokenizer failure shows as nothing drafted; the answer reports it.
        piece.is_ok_and(|piece| {
            text.push_str(&piece.text);
            piece.tail == Tail::Invalid
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(bytes: &[u8], text: &str, tail: Tail) {
        assert_eq!(
            Text::from_bytes(bytes),
            Text {
                text: text.to_string(),
                tail
            }
        );
    }

    #[test]
    fn valid_incomplete_and_invalid_bytes() {
        check("a😀\0b".as_bytes(), "a😀\0b", Tail::Complete);
        // The first three of the emoji's four bytes: held back.
        check(&"a😀".as_bytes()[..4], "a", Tail::Incomplete);
        // A continuation byte with no lead byte, and a lead byte followed by ASCII.
        check(b"ab\x80cd", "ab", Tail::Invalid);
        check(b"ab\xf0(cd", "ab", Tail::Invalid);
        // Bytes that are never UTF-8.
        check(b"x\xff", "x", Tail::Invalid);
        check(b"x\xc0\x80", "x", Tail::Invalid);
        // A real U+FFFD the model wrote as a character is text.
        check("a\u{fffd}b".as_bytes(), "a\u{fffd}b", Tail::Complete);
        check(b"", "", Tail::Complete);
    }
}
