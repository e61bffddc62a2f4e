//! The tokenizer: a Hugging Face `tokenizer.json` (byte-level BPE for every model redraft runs),
//! plus what the sampler needs to know about the vocabulary (which tokens are whitespace only).

use std::path::{Path, PathBuf};

use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper,
    TokenizerImpl,
};

use crate::error::{Error, Result};

/// A loaded tokenizer.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    whitespace: Vec<bool>,
    /// Per token id: a special token (a marker such as `<|fim_middle|>` or `<|cursor|>`).
    special: Vec<bool>,
    origin: PathBuf,
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
        Tokenizer {
            inner,
            whitespace,
            special,
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

    /// The text of `ids`.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| self.error(e))
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

    fn error(&self, e: tokenizers::Error) -> Error {
        Error::Tokenizer {
            path: self.origin.clone(),
            message: e.to_string(),
        }
    }
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
