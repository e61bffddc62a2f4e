//! A GGUF file's own tokenizer: its byte-level BPE vocabulary, merges and token types
//! (`tokenizer.ggml.*` metadata) built into a `tokenizers` tokenizer, with the pre-tokenizer
//! split llama.cpp's `tokenizer.ggml.pre` names.

use std::path::PathBuf;

use super::Metadata;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const TOKEN_CONTROL: i64 = 3;
const TOKEN_USER_DEFINED: i64 = 4;

/// The file's byte-level BPE vocabulary as a `tokenizers` tokenizer: the vocabulary and merges
/// as stored, the pre-tokenizer llama.cpp's `tokenizer.ggml.pre` names, control and
/// user-defined tokens as added tokens.
pub(super) fn vocabulary(meta: &Metadata<'_>) -> Result<Tokenizer> {
    let model = meta.string("tokenizer.ggml.model")?;
    let origin = PathBuf::from(format!("{} (its vocabulary)", meta.path.display()));
    let unsupported = |message: String| Error::Tokenizer {
        path: origin.clone(),
        message: format!("{message}; put the model's tokenizer.json beside the file"),
    };
    if model != "gpt2" {
        return Err(unsupported(format!(
            "tokenizer.ggml.model `{model}` (only byte-level BPE, `gpt2`, is read from GGUF)"
        )));
    }
    let pre = meta
        .values
        .get("tokenizer.ggml.pre")
        .and_then(|v| v.to_string().ok())
        .map(String::as_str)
        .unwrap_or("gpt-2");
    let split = match pre {
        "qwen2" | "deepseek-r1-qwen" => Some(QWEN2_SPLIT),
        // llama.cpp's name for GPT-2's split; `gpt2` is what redraft's writer once wrote.
        // (llama.cpp's `default` is another split.)
        "gpt-2" | "gpt2" => None,
        other => {
            return Err(unsupported(format!(
                "tokenizer.ggml.pre `{other}` (supported: qwen2, gpt-2)"
            )))
        }
    };
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let merges = meta.strings("tokenizer.ggml.merges")?;
    let types = match meta.values.get("tokenizer.ggml.token_type") {
        Some(_) => meta.integers("tokenizer.ggml.token_type")?,
        None => vec![1; tokens.len()],
    };
    if types.len() != tokens.len() {
        return Err(unsupported(format!(
            "{} token types for {} tokens",
            types.len(),
            tokens.len()
        )));
    }
    // Built with the tokenizers crate's own types, as its `tokenizer.json` reader would build
    // them (a JSON document of 150k tokens and merges took half a second to write and parse).
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::{byte_level::ByteLevel, sequence::Sequence, split};
    use tokenizers::{AddedToken, PreTokenizerWrapper};
    let bad = |e: tokenizers::Error| unsupported(e.to_string());
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, &token)| (token.to_string(), id as u32))
        .collect();
    let mut pairs = Vec::with_capacity(merges.len());
    for (rank, merge) in merges
        .iter()
        .filter(|m| !m.starts_with("#version"))
        .enumerate()
    {
        let mut parts = merge.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(a), Some(b), None) => pairs.push((a.to_string(), b.to_string())),
            _ => {
                return Err(unsupported(format!(
                    "merge {} `{merge}` is not two tokens",
                    rank + 1
                )))
            }
        }
    }
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .continuing_subword_prefix(String::new())
        .end_of_word_suffix(String::new())
        .build()
        .map_err(bad)?;
    let byte_level = ByteLevel::new(false, false, split.is_none());
    let pre_tokenizer: PreTokenizerWrapper = match split {
        Some(regex) => Sequence::new(vec![
            split::Split::new(
                split::SplitPattern::Regex(regex.into()),
                tokenizers::SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(bad)?
            .into(),
            byte_level.into(),
        ])
        .into(),
        None => byte_level.into(),
    };
    let mut inner = tokenizers::Tokenizer::new(bpe);
    if split.is_some() {
        inner
            .with_normalizer(Some(tokenizers::normalizers::unicode::NFC))
            .map_err(bad)?;
    }
    inner.with_pre_tokenizer(Some(pre_tokenizer));
    inner.with_decoder(Some(byte_level));
    let added: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &kind)| kind == TOKEN_CONTROL || kind == TOKEN_USER_DEFINED)
        .map(|(&token, &kind)| {
            let marker = token.starts_with('<') && token.ends_with('>');
            AddedToken::from(token, kind == TOKEN_CONTROL || marker)
                .single_word(false)
                .lstrip(false)
                .rstrip(false)
                .normalized(false)
        })
        .collect();
    inner.add_tokens(added).map_err(bad)?;
    Ok(Tokenizer::from_inner(inner, origin))
}

/// Qwen2's pre-tokenizer split (its `tokenizer.json`), which llama.cpp calls `qwen2`.
pub(super) const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
