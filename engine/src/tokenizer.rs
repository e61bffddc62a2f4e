//! The tokenizer: a Hugging Face `tokenizer.json` (byte-level BPE for every model redraft runs),
//! plus what the sampler needs to know about the vocabulary (which tokens are whitespace only)
//! and the bytes each token stands for, so the model's text is assembled from bytes and
//! checked once ([`Tokenizer::text`], [`crate::Text`]) instead of decoded lossily.

use std::path::{Path, PathBuf};

use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper,
    TokenizerImpl,
};

use crate::error::{Error, Result};
use crate::text::{Tail, Text};

/// A loaded tokenizer.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    whitespace: Vec<bool>,
    /// Per token id: a special token (a marker such as `<|fim_middle|>` or `<|cursor|>`).
    special: Vec<bool>,
    /// Per token id, its bytes, when the decoder is byte-level (every model redraft runs).
    bytes: Option<TokenBytes>,
    origin: PathBuf,
}

/// Every token's bytes, one after another: token `id` is `bytes[ends[id - 1]..ends[id]]`.
struct TokenBytes {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl TokenBytes {
    /// The bytes of every token of a byte-level tokenizer, by the rule of its decoder
    /// (`tokenizers`' `ByteLevel::decode_chain`): a token whose characters all stand for bytes
    /// in GPT-2's table is those bytes; any other (an added token spelled in plain text) is its
    /// own UTF-8.
    fn byte_level(inner: &tokenizers::Tokenizer, size: usize) -> TokenBytes {
        let table = gpt2_char_bytes();
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(size);
        for id in 0..size as u32 {
            if let Some(token) = inner.id_to_token(id) {
                let mapped: Option<Vec<u8>> = token
                    .chars()
                    .map(|c| table.get(c as usize).copied().flatten())
                    .collect();
                match mapped {
                    Some(mapped) => bytes.extend(mapped),
                    None => bytes.extend(token.as_bytes()),
                }
            }
            ends.push(bytes.len());
        }
        TokenBytes { bytes, ends }
    }

    fn of(&self, id: u32) -> Option<&[u8]> {
        let id = id as usize;
        let end = *self.ends.get(id)?;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        Some(&self.bytes[start..end])
    }
}

/// GPT-2's byte-level alphabet backwards: the byte each of its characters stands for, indexed
/// by the character's code point (printable Latin-1 bytes are their own character; the other
/// 68 bytes are U+0100 onwards, in byte order).
fn gpt2_char_bytes() -> Vec<Option<u8>> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    let mut table = vec![None; 256 + 68];
    let mut shifted = 256;
    for b in 0..=255u8 {
        if printable(b) {
            table[b as usize] = Some(b);
        } else {
            table[shifted] = Some(b);
            shifted += 1;
        }
    }
    table
}

impl Tokenizer {
    /// Loads `tokenizer.json`.
    pub fn load(path: &Path) -> Result<Tokenizer> {
        if !path.exists() {
            return Err(Error::MissingFile {
                path: path.to_path_buf(),
                what: "a tokenizer (tokenizer.json)",
            });
        }
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| Error::Tokenizer {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Tokenizer::from_inner(inner, path.to_path_buf()))
    }

    /// A tokenizer from the bytes of a `tokenizer.json`; `origin` names it in errors.
    pub fn from_bytes(bytes: &[u8], origin: &Path) -> Result<Tokenizer> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| Error::Tokenizer {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Tokenizer::from_inner(inner, origin.to_path_buf()))
    }

    pub(crate) fn from_inner(mut inner: tokenizers::Tokenizer, origin: PathBuf) -> Tokenizer {
        // A user's text that spells a special token (`<|mask|>` in a comment) is text: it must
        // never turn into a mask or an EOS on the canvas.
        inner.set_encode_special_tokens(true);
        let size = inner.get_vocab_size(true);
        let whitespace = (0..size as u32)
            .map(|id| {
                inner
                    .decode(&[id], false)
                    .is_ok_and(|s| !s.is_empty() && s.trim().is_empty())
            })
            .collect();
        let mut special = vec![false; size];
        for (&id, token) in inner.get_added_tokens_decoder().iter() {
            if token.special {
                if let Some(slot) = special.get_mut(id as usize) {
                    *slot = true;
                }
            }
        }
        let bytes = matches!(inner.get_decoder(), Some(DecoderWrapper::ByteLevel(_)))
            .then(|| TokenBytes::byte_level(&inner, size));
        Tokenizer {
            inner,
            whitespace,
            special,
            bytes,
            origin,
        }
    }

    /// Trains a byte-level BPE tokenizer on `texts` (any string round-trips exactly).
    /// `specials` get the first ids, in order.
    pub fn train_bpe<I, S>(texts: I, vocab_size: usize, specials: &[&str]) -> Result<Tokenizer>
    where
        I: Iterator<Item = S> + Send,
        S: AsRef<str> + Send,
    {
        let origin = PathBuf::from("<trained>");
        let fail = |e: tokenizers::Error| Error::Tokenizer {
            path: origin.clone(),
            message: e.to_string(),
        };
        let mut trainer = BpeTrainerBuilder::new()
            .vocab_size(vocab_size)
            .min_frequency(2)
            .show_progress(false)
            .special_tokens(
                specials
                    .iter()
                    .map(|s| AddedToken::from(*s, true))
                    .collect(),
            )
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build();
        let byte_level = ByteLevel::new(false, false, true);
        let mut tokenizer: TokenizerImpl<
            BPE,
            NormalizerWrapper,
            PreTokenizerWrapper,
            PostProcessorWrapper,
            DecoderWrapper,
        > = TokenizerImpl::new(BPE::default());
        tokenizer
            .with_pre_tokenizer(Some(byte_level))
            .with_decoder(Some(byte_level));
        tokenizer.train(&mut trainer, texts).map_err(fail)?;
        Ok(Tokenizer::from_inner(
            tokenizers::Tokenizer::from(tokenizer),
            origin,
        ))
    }

    /// Writes `tokenizer.json`.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.inner.save(path, false).map_err(|e| Error::Tokenizer {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Token ids of `text`, without any special tokens added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(text, false).map_err(|e| self.error(e))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The last tokens of `text`, the same as the last of the whole text's tokens, at least
    /// `at_least` of them where it holds that many (more may come): ever longer tails of it are
    /// encoded, each cut at a line start where one is near, rather than the whole text, so a
    /// huge text costs what the tokens asked for cost. The tokens of the tail's first
    /// [`EDGE_WORDS`] pre-tokens are left out: the cut may fall inside a word or a run of
    /// spaces, which byte-level BPE then splits otherwise, all along the run.
    pub fn encode_tail(&self, text: &str, at_least: usize) -> Result<Vec<u32>> {
        let mut bytes = at_least.saturating_mul(BYTES_PER_TOKEN_FIRST);
        loop {
            if bytes >= text.len() {
                return self.encode(text);
            }
            let mut start = text.len() - bytes;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            // The next line start, where one is in the first half of the tail.
            let half = floor_boundary(text, start + bytes / 2).max(start);
            if let Some(line_end) = text[start..half].find('\n') {
                start += line_end + 1;
            }
            let ids = self.encode_cut(&text[start..], Cut::AtStart)?;
            if ids.len() >= at_least {
                return Ok(ids);
            }
            bytes = bytes.saturating_mul(4);
        }
    }

    /// `text`'s tokens where it holds at most `most`, else a count above `most` (a head's):
    /// only as much of `text` is encoded as that takes ([`Tokenizer::encode_head`]), so a
    /// megabyte line of minified code is over a budget for what the budget's tokens cost, not
    /// what the line's do (~0.35 s a megabyte, on the thread that runs the model).
    pub fn count_up_to(&self, text: &str, most: usize) -> Result<usize> {
        Ok(self.encode_head(text, most.saturating_add(1))?.len())
    }

    /// [`Tokenizer::encode_tail`] at the start of `text`: its first tokens, the same as the
    /// whole text's first, at least `at_least` of them where it holds that many.
    pub fn encode_head(&self, text: &str, at_least: usize) -> Result<Vec<u32>> {
        let mut bytes = at_least.saturating_mul(BYTES_PER_TOKEN_FIRST);
        loop {
            if bytes >= text.len() {
                return self.encode(text);
            }
            let mut end = bytes;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            // Just past the last line end, where one is in the second half of the head.
            let half = floor_boundary(text, end / 2);
            if let Some(line_end) = text[half..end].rfind('\n') {
                end = half + line_end + 1;
            }
            let ids = self.encode_cut(&text[..end], Cut::AtEnd)?;
            if ids.len() >= at_least {
                return Ok(ids);
            }
            bytes = bytes.saturating_mul(4);
        }
    }

    /// The tokens of `piece`, a part cut out of a longer text, but those of its [`EDGE_WORDS`]
    /// pre-tokens at the cut (the encoding's word ids are its pre-tokens).
    fn encode_cut(&self, piece: &str, cut: Cut) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(piece, false).map_err(|e| self.error(e))?;
        let (ids, words) = (encoding.get_ids(), encoding.get_word_ids());
        Ok(match cut {
            Cut::AtStart => {
                let Some(&first) = words.iter().flatten().next() else {
                    return Ok(Vec::new());
                };
                let from = words
                    .iter()
                    .position(|w| w.is_some_and(|w| w >= first + EDGE_WORDS))
                    .unwrap_or(ids.len());
                ids[from..].to_vec()
            }
            Cut::AtEnd => {
                let Some(&last) = words.iter().rev().flatten().next() else {
                    return Ok(Vec::new());
                };
                let to = words
                    .iter()
                    .rposition(|w| w.is_some_and(|w| w + EDGE_WORDS <= last))
                    .map_or(0, |i| i + 1);
                ids[..to].to_vec()
            }
        })
    }

    /// The text of `ids` as the `tokenizers` crate decodes it: bytes that are not UTF-8 become
    /// U+FFFD. For prompts, logs and training data, whose tokens come from text; what the model
    /// wrote goes through [`Tokenizer::text`].
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| self.error(e))
    }

    /// What the model wrote in `ids`, as text a client may be shown: valid UTF-8 up to the
    /// first bytes that are not (a character cut off at the end is held back, bytes no
    /// character can be made of end the text; [`crate::Text`]), never a U+FFFD the model did not
    /// write as a character. Ids outside the vocabulary are skipped, as `decode` skips them.
    pub fn text(&self, ids: &[u32]) -> Result<Text> {
        match self.spelled(ids) {
            Some(bytes) => Ok(Text::from_bytes(&bytes)),
            None => self.text_from_decode(ids),
        }
    }

    /// [`Tokenizer::text`] of tokens that follow a gap (a masked slot of a draft): bytes at
    /// their start that continue a character (at most 3) may belong to one begun in the gap,
    /// so they are held back instead of ending the text.
    pub fn text_after_gap(&self, ids: &[u32]) -> Result<Text> {
        match self.spelled(ids) {
            Some(bytes) => {
                let continuing = bytes
                    .iter()
                    .take(3)
                    .take_while(|&&b| b & 0xc0 == 0x80)
                    .count();
                Ok(Text::from_bytes(&bytes[continuing..]))
            }
            None => self.text_from_decode(ids),
        }
    }

    /// The bytes `ids` stand for, with a byte-level decoder; `None` with any other.
    fn spelled(&self, ids: &[u32]) -> Option<Vec<u8>> {
        let table = self.bytes.as_ref()?;
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            if let Some(token) = table.of(id) {
                bytes.extend_from_slice(token);
            }
        }
        Some(bytes)
    }

    /// [`Tokenizer::text`] for a decoder that is not byte-level (no model redraft runs has
    /// one): its own decode, cut at the first U+FFFD that no token spells, since that is where
    /// it met bytes that are not UTF-8 (held back or invalid cannot be told apart there).
    fn text_from_decode(&self, ids: &[u32]) -> Result<Text> {
        let decoded = self.decode(ids)?;
        let spelled = ids.iter().any(|&id| {
            self.inner
                .id_to_token(id)
                .is_some_and(|t| t.contains('\u{fffd}'))
        });
        Ok(match decoded.find('\u{fffd}') {
            Some(at) if !spelled => Text {
                text: decoded[..at].to_string(),
                tail: Tail::Invalid,
            },
            _ => Text {
                text: decoded,
                tail: Tail::Complete,
            },
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.whitespace.len()
    }

    /// `special()[id]`: the token is one of the tokenizer's special tokens (never text).
    pub fn special(&self) -> &[bool] {
        &self.special
    }

    /// `whitespace()[id]`: the token decodes to whitespace only.
    pub fn whitespace(&self) -> &[bool] {
        &self.whitespace
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The largest id of the vocabulary, added tokens included, with its token: a model needs a
    /// row of logits for every id up to it, however sparse the ids are.
    pub fn largest_id(&self) -> Option<(u32, String)> {
        self.inner
            .get_vocab(true)
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(token, id)| (id, token))
    }

    /// The file it was read from (named in errors).
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    fn error(&self, e: tokenizers::Error) -> Error {
        Error::Tokenizer {
            path: self.origin.clone(),
            message: e.to_string(),
        }
    }
}

/// Pre-tokens next to a cut whose tokens [`Tokenizer::encode_tail`] and
/// [`Tokenizer::encode_head`] leave out: the one the cut falls in, which byte-level BPE splits
/// from its own start, and one more, since a pre-tokenizer's lookahead may reach across it.
pub const EDGE_WORDS: u32 = 2;

/// Bytes of text first encoded per token asked for: code runs about 3 bytes a token, so most
/// requests encode once.
const BYTES_PER_TOKEN_FIRST: usize = 6;

/// Which end of a piece of text was cut off the whole.
#[derive(Clone, Copy)]
enum Cut {
    AtStart,
    AtEnd,
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trained_bpe_round_trips_any_text() {
        let corpus = [
            "fn main() {\n    println!(\"hi\");\n}\n",
            "let x = vec![1, 2, 3];\n",
        ];
        let tok = Tokenizer::train_bpe(
            corpus.iter().cycle().take(50),
            300,
            &["<|mask|>", "<|eos|>"],
        )
        .unwrap();
        assert_eq!(tok.token_to_id("<|mask|>"), Some(0));
        assert_eq!(tok.token_to_id("<|eos|>"), Some(1));
        for text in ["fn main() {}", "  \t\r\n", "emoji 🦀 and ünïcödé", ""] {
            let ids = tok.encode(text).unwrap();
            assert_eq!(tok.decode(&ids).unwrap(), text);
        }
        // Special tokens spelled in text stay text, and round-trip.
        let text = "a <|mask|> b <|eos|>";
        let ids = tok.encode(text).unwrap();
        assert!(!ids.contains(&0) && !ids.contains(&1), "{ids:?}");
        assert_eq!(tok.decode(&ids).unwrap(), text);
        let space = tok.encode(" ").unwrap();
        assert!(tok.whitespace()[space[0] as usize]);
        let word = tok.encode("main").unwrap();
        assert!(!tok.whitespace()[word[0] as usize]);
    }
}
