//! The corpus as training sees it: every file's text and its token ids, tokenized once and
//! cached on disk (keyed by the corpus file's and the tokenizer's content hashes) so a resumed
//! run starts in seconds; plus the tokenizer training itself.

use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{TrainError, TrainResult, SPECIAL_TOKENS};
use crate::corpus::CorpusRecord;
use redraft_engine::tokenizer::Tokenizer;

const CACHE_MAGIC: &[u8; 8] = b"RDTOKS01";

/// One split of the corpus (`train.jsonl` or `valid.jsonl`), tokenized.
pub struct CorpusSplit {
    texts: Vec<String>,
    /// Token offsets: file `i` is `tokens[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<usize>,
    tokens: Vec<u32>,
    /// FNV-1a of the JSON Lines file (or of the texts, for in-memory splits).
    hash: u64,
}

impl CorpusSplit {
    /// Reads `jsonl` (one [`CorpusRecord`] per line) and its token ids, from
    /// `cache_dir` when a cache for this corpus and tokenizer exists, otherwise tokenizing in
    /// parallel and writing the cache.
    pub fn load(
        jsonl: &Path,
        tokenizer: &Tokenizer,
        tokenizer_hash: u64,
        cache_dir: &Path,
    ) -> TrainResult<CorpusSplit> {
        let bytes = std::fs::read(jsonl).map_err(|e| TrainError::read(jsonl, e))?;
        let hash = fnv1a(&bytes);
        let texts = parse_records(jsonl, &bytes)?;
        let stem = jsonl
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("split");
        let cache = cache_dir.join(format!(
            "tokens-{stem}-{hash:016x}-{tokenizer_hash:016x}.bin"
        ));
        if let Some((offsets, tokens)) = read_cache(&cache, texts.len()) {
            return Ok(CorpusSplit {
                texts,
                offsets,
                tokens,
                hash,
            });
        }
        let mut split = CorpusSplit::from_texts(texts, tokenizer)?;
        split.hash = hash;
        write_cache(
            &cache,
            &split.offsets,
            &split.tokens,
            tokenizer.vocab_size(),
        )?;
        Ok(split)
    }

    /// Tokenizes `texts` (in parallel; the result does not depend on the thread count).
    pub fn from_texts(texts: Vec<String>, tokenizer: &Tokenizer) -> TrainResult<CorpusSplit> {
        let encoded: Vec<Vec<u32>> = texts
            .par_iter()
            .map(|t| tokenizer.encode(t))
            .collect::<redraft_engine::Result<_>>()?;
        let mut offsets = Vec::with_capacity(texts.len() + 1);
        offsets.push(0);
        let mut tokens = Vec::with_capacity(encoded.iter().map(Vec::len).sum());
        for ids in encoded {
            tokens.extend(ids);
            offsets.push(tokens.len());
        }
        let mut hash = FNV_OFFSET;
        for t in &texts {
            hash = fnv1a_continue(hash, t.as_bytes());
            hash = fnv1a_continue(hash, &[0xff]);
        }
        Ok(CorpusSplit {
            texts,
            offsets,
            tokens,
            hash,
        })
    }

    pub fn num_files(&self) -> usize {
        self.texts.len()
    }

    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    pub fn num_bytes(&self) -> usize {
        self.texts.iter().map(String::len).sum()
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }

    pub fn text(&self, file: usize) -> &str {
        &self.texts[file]
    }

    pub fn file_tokens(&self, file: usize) -> &[u32] {
        &self.tokens[self.offsets[file]..self.offsets[file + 1]]
    }

    /// The file holding the corpus-wide token `index`, so that drawing a uniform token index
    /// draws files in proportion to their length (empty files are never drawn).
    pub fn file_at_token(&self, index: usize) -> usize {
        self.offsets.partition_point(|&o| o <= index) - 1
    }
}

fn parse_records(path: &Path, bytes: &[u8]) -> TrainResult<Vec<String>> {
    let text = std::str::from_utf8(bytes).map_err(|e| TrainError::BadCorpus {
        path: path.to_path_buf(),
        line: 0,
        message: format!("not UTF-8: {e}"),
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str::<CorpusRecord>(line)
                .map(|r| r.text)
                .map_err(|e| TrainError::BadCorpus {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message: e.to_string(),
                })
        })
        .collect()
}

/// Texts of `jsonl` in file order until `max_bytes` (the deterministic sample the tokenizer
/// is trained on).
pub fn read_texts(jsonl: &Path, max_bytes: usize) -> TrainResult<Vec<String>> {
    let bytes = std::fs::read(jsonl).map_err(|e| TrainError::read(jsonl, e))?;
    let mut texts = parse_records(jsonl, &bytes)?;
    let mut total = 0;
    let keep = texts
        .iter()
        .take_while(|t| {
            let under = total < max_bytes;
            total += t.len();
            under
        })
        .count();
    texts.truncate(keep);
    Ok(texts)
}

/// Trains redraft's byte-level BPE on `texts`, with [`SPECIAL_TOKENS`] at ids 0..8.
pub fn train_tokenizer(texts: &[String], vocab_size: usize) -> TrainResult<Tokenizer> {
    let tokenizer = Tokenizer::train_bpe(texts.iter(), vocab_size, &SPECIAL_TOKENS)?;
    for (id, special) in SPECIAL_TOKENS.iter().enumerate() {
        if tokenizer.token_to_id(special) != Some(id as u32) {
            return Err(TrainError::Config(format!(
                "the trained tokenizer gave `{special}` id {:?}, expected {id}",
                tokenizer.token_to_id(special)
            )));
        }
    }
    Ok(tokenizer)
}

/// Bytes of text per token over `texts` (higher is a denser vocabulary).
pub fn bytes_per_token(tokenizer: &Tokenizer, texts: &[String]) -> TrainResult<f64> {
    let counts: Vec<(usize, usize)> = texts
        .par_iter()
        .map(|t| tokenizer.encode(t).map(|ids| (t.len(), ids.len())))
        .collect::<redraft_engine::Result<_>>()?;
    let (bytes, tokens) = counts
        .iter()
        .fold((0, 0), |(b, t), (b2, t2)| (b + b2, t + t2));
    Ok(bytes as f64 / tokens.max(1) as f64)
}

fn read_cache(path: &Path, files: usize) -> Option<(Vec<usize>, Vec<u32>)> {
    let bytes = std::fs::read(path).ok()?;
    let (magic, rest) = bytes.split_at_checked(8)?;
    if magic != CACHE_MAGIC {
        return None;
    }
    let word = |b: &[u8], i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let (n_files, n_tokens, width) = (word(rest, 0)?, word(rest, 1)?, word(rest, 2)?);
    if n_files as usize != files || !(width == 2 || width == 4) {
        return None;
    }
    let offsets: Vec<usize> = (0..=files)
        .map(|i| word(rest, 3 + i).map(|o| o as usize))
        .collect::<Option<_>>()?;
    let body = rest.get((4 + files) * 8..)?;
    if body.len() != n_tokens as usize * width as usize
        || offsets.last() != Some(&(n_tokens as usize))
    {
        return None;
    }
    let tokens = if width == 2 {
        body.chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
            .collect()
    } else {
        body.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    Some((offsets, tokens))
}

/// Header, file offsets, then the ids as u16 when the vocabulary allows (half the size).
fn write_cache(path: &Path, offsets: &[usize], tokens: &[u32], vocab: usize) -> TrainResult<()> {
    let width: u64 = if vocab <= 1 << 16 { 2 } else { 4 };
    let mut out = Vec::with_capacity(8 * (4 + offsets.len()) + tokens.len() * width as usize);
    out.extend_from_slice(CACHE_MAGIC);
    for w in [(offsets.len() - 1) as u64, tokens.len() as u64, width] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for &o in offsets {
        out.extend_from_slice(&(o as u64).to_le_bytes());
    }
    for &t in tokens {
        if width == 2 {
            out.extend_from_slice(&(t as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    write_atomic(path, &out)
}

/// Writes `path` through a temporary file in the same directory and a rename, so a reader (or a
/// run killed mid-write) never sees a partial file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> TrainResult<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| TrainError::write(dir, e))?;
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(TrainError::write(path, e));
    }
    Ok(())
}

pub(crate) fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a: a stable content hash (std's hasher may change between Rust releases).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_continue(FNV_OFFSET, bytes)
}

fn fnv1a_continue(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
