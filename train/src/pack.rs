//! The GPU trainer's pack (`train/gpu/data.py` reads it): a built corpus pre-tokenized, and
//! next-edit cases laid out by the engine's own code, as flat little-endian arrays.
//!
//! [`build`] writes to its output directory: `tokenizer.json` (byte-level BPE trained on an even
//! sample of the training files, [`SPECIAL_TOKENS`] at ids 0..8, unless one is given),
//! `train.tokens` / `valid.tokens` (u16 ids, each file followed by `<|file_sep|>`),
//! `train.offsets` / `valid.offsets` (u64 file starts, then the end), `edits-{train,valid}.tokens`
//! and `.index` (u32 rows: start, length, canvas start, canvas length) from
//! [`edit_tokens`], and `meta.json`. `scripts/build-pack` compresses them for the trip to a GPU.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::SeedableRng;
use redraft_engine::edit::EditMarkers;
use redraft_engine::tokenizer::Tokenizer;
use redraft_prompts::markers::FILE_SEP;

use crate::corpus::{CorpusRecord, TRAIN_FILE, VALID_FILE};
use crate::edits::read_edit_cases;
use crate::train::examples::edit::edit_tokens;
use crate::train::tokens::{bytes_per_token, fnv1a, train_tokenizer, CorpusSplit};
use crate::train::{TrainError, TrainResult, EOS_ID, MASK_ID, SPECIAL_TOKENS};

/// What [`build`] reads and how.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// A built corpus (`train.jsonl`, `valid.jsonl`).
    pub corpus: PathBuf,
    /// Next-edit cases (`edits-train.jsonl`, `edits-valid.jsonl`), if any.
    pub edits: Option<PathBuf>,
    pub out: PathBuf,
    pub vocab_size: usize,
    /// Bytes of training text packed (an even sample of the files when the split is larger), so
    /// the compressed pack fits what a GPU call carries.
    pub train_bytes: usize,
    /// Bytes of validation text packed (an even sample), enough for the trainer's evaluations.
    pub valid_bytes: usize,
    /// Next-edit cases laid out per split (an even sample when there are more).
    pub max_edit_cases: usize,
    /// Bytes of training text the tokenizer is trained on.
    pub tokenizer_sample_bytes: usize,
    /// Longest next-edit sequence.
    pub seq_len: usize,
    /// Use this tokenizer instead of training one.
    pub tokenizer: Option<PathBuf>,
    /// Also train these vocabulary sizes on the same sample and report their compression.
    pub compare_vocab: Vec<usize>,
}

impl PackOptions {
    pub fn new(corpus: impl Into<PathBuf>, out: impl Into<PathBuf>) -> PackOptions {
        PackOptions {
            corpus: corpus.into(),
            edits: None,
            out: out.into(),
            vocab_size: 8192,
            train_bytes: usize::MAX,
            valid_bytes: usize::MAX,
            max_edit_cases: usize::MAX,
            tokenizer_sample_bytes: 96 << 20,
            seq_len: 1024,
            tokenizer: None,
            compare_vocab: Vec::new(),
        }
    }
}

/// An even sample of a split's files, about `max_bytes` of text: file `i` is kept when
/// `floor((i + 1) f) > floor(i f)` for `f = max_bytes / total`, so the kept files are spread
/// over the whole split (sorted by crate, a prefix would hold a few crates only). All of them
/// when the split is smaller.
pub fn even_sample(jsonl: &Path, max_bytes: usize) -> TrainResult<Vec<CorpusRecord>> {
    let text = std::fs::read_to_string(jsonl).map_err(|e| TrainError::read(jsonl, e))?;
    let records: Vec<CorpusRecord> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| TrainError::BadCorpus {
            path: jsonl.to_path_buf(),
            line: 0,
            message: e.to_string(),
        })?;
    let total: usize = records.iter().map(|r| r.text.len()).sum();
    if total <= max_bytes {
        return Ok(records);
    }
    let f = max_bytes as f64 / total as f64;
    Ok(records
        .into_iter()
        .enumerate()
        .filter(|(i, _)| ((i + 1) as f64 * f).floor() > (*i as f64 * f).floor())
        .map(|(_, r)| r)
        .collect())
}

/// [`even_sample`] of `jsonl` written to `path` (the splits are read back from files).
fn write_sample(jsonl: &Path, max_bytes: usize, path: &Path) -> TrainResult<PathBuf> {
    let mut lines = String::new();
    for record in even_sample(jsonl, max_bytes)? {
        lines.push_str(&serde_json::to_string(&record).expect("json"));
        lines.push('\n');
    }
    std::fs::write(path, lines).map_err(|e| TrainError::write(path, e))?;
    Ok(path.to_path_buf())
}

fn write_u16(path: &Path, ids: impl Iterator<Item = u32>) -> TrainResult<usize> {
    let mut bytes = Vec::new();
    for id in ids {
        let id = u16::try_from(id).map_err(|_| {
            TrainError::Config(format!("token id {id} does not fit the pack's 16 bits"))
        })?;
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    std::fs::write(path, &bytes).map_err(|e| TrainError::write(path, e))?;
    Ok(bytes.len() / 2)
}

fn write_words<T: Copy>(path: &Path, values: &[T], le: impl Fn(T) -> Vec<u8>) -> TrainResult<()> {
    let bytes: Vec<u8> = values.iter().flat_map(|&v| le(v)).collect();
    std::fs::write(path, bytes).map_err(|e| TrainError::write(path, e))
}

/// One split's token stream and file offsets; returns (files, tokens, bytes).
fn write_split(
    split: &CorpusSplit,
    out: &Path,
    name: &str,
    file_sep: u32,
) -> TrainResult<(usize, usize, usize)> {
    let mut offsets = Vec::with_capacity(split.num_files() + 1);
    let mut at = 0u64;
    for file in 0..split.num_files() {
        offsets.push(at);
        at += split.file_tokens(file).len() as u64 + 1;
    }
    offsets.push(at);
    let stream =
        (0..split.num_files()).flat_map(|f| split.file_tokens(f).iter().copied().chain([file_sep]));
    let tokens = write_u16(&out.join(format!("{name}.tokens")), stream)?;
    write_words(&out.join(format!("{name}.offsets")), &offsets, |v: u64| {
        v.to_le_bytes().to_vec()
    })?;
    Ok((split.num_files(), tokens, split.num_bytes()))
}

/// Next-edit sequences laid out by the engine's code; returns (cases, sequences, no-edit ones).
fn write_edits(
    tokenizer: &Tokenizer,
    cases_path: &Path,
    out: &Path,
    name: &str,
    seq_len: usize,
    max_cases: usize,
) -> TrainResult<(usize, usize, usize)> {
    let mut cases = read_edit_cases(cases_path)?;
    if cases.len() > max_cases {
        // An even sample: the cases come grouped by crate and kind.
        let f = max_cases as f64 / cases.len() as f64;
        let mut i = 0usize;
        cases.retain(|_| {
            i += 1;
            (i as f64 * f).floor() > ((i - 1) as f64 * f).floor()
        });
    }
    let markers = EditMarkers::of(tokenizer)?;
    let mut rng = StdRng::seed_from_u64(0x6564_6974);
    let mut tokens: Vec<u32> = Vec::new();
    let mut index: Vec<u32> = Vec::new();
    let mut no_edit = 0;
    for case in &cases {
        let Some(example) = edit_tokens(tokenizer, markers, case, seq_len, EOS_ID, &mut rng)?
        else {
            continue;
        };
        index.extend([
            tokens.len() as u32,
            example.tokens.len() as u32,
            example.canvas.start as u32,
            example.canvas.len() as u32,
        ]);
        tokens.extend(&example.tokens);
        no_edit += usize::from(example.no_edit);
    }
    write_u16(
        &out.join(format!("edits-{name}.tokens")),
        tokens.into_iter(),
    )?;
    write_words(
        &out.join(format!("edits-{name}.index")),
        &index,
        |v: u32| v.to_le_bytes().to_vec(),
    )?;
    Ok((cases.len(), index.len() / 4, no_edit))
}

/// Builds the pack into `options.out` and returns a readable summary of what it holds.
pub fn build(options: &PackOptions) -> TrainResult<String> {
    let out = &options.out;
    std::fs::create_dir_all(out).map_err(|e| TrainError::write(out, e))?;
    let train_jsonl = options.corpus.join(TRAIN_FILE);
    let valid_jsonl = options.corpus.join(VALID_FILE);
    let mut report = String::new();

    let sample: Vec<String> = even_sample(&train_jsonl, options.tokenizer_sample_bytes)?
        .into_iter()
        .map(|r| r.text)
        .collect();
    let sample_bytes: usize = sample.iter().map(String::len).sum();
    let valid_texts: Vec<String> = even_sample(&valid_jsonl, 32 << 20)?
        .into_iter()
        .map(|r| r.text)
        .collect();
    let tokenizer = match &options.tokenizer {
        Some(path) => Tokenizer::load(path)?,
        None => {
            let _ = writeln!(
                std::io::stderr(),
                "training a {}-token BPE on {:.1} MB ({} files)",
                options.vocab_size,
                sample_bytes as f64 / 1e6,
                sample.len()
            );
            train_tokenizer(&sample, options.vocab_size)?
        }
    };
    for &size in &options.compare_vocab {
        let other = train_tokenizer(&sample, size)?;
        writeln!(
            report,
            "vocabulary {size}: {:.3} bytes per token on the validation split",
            bytes_per_token(&other, &valid_texts)?
        )
        .expect("writing to a String");
    }
    let tokenizer_path = out.join("tokenizer.json");
    tokenizer.save(&tokenizer_path)?;
    let valid_bpt = bytes_per_token(&tokenizer, &valid_texts)?;
    writeln!(
        report,
        "vocabulary {}: {valid_bpt:.3} bytes per token on the validation split",
        tokenizer.vocab_size()
    )
    .expect("writing to a String");
    let file_sep = tokenizer
        .token_to_id(FILE_SEP)
        .ok_or_else(|| TrainError::Config("the tokenizer has no <|file_sep|> token".into()))?;

    let hash =
        fnv1a(&std::fs::read(&tokenizer_path).map_err(|e| TrainError::read(&tokenizer_path, e))?);
    let cache = out.join("cache");
    std::fs::create_dir_all(&cache).map_err(|e| TrainError::write(&cache, e))?;
    let train_packed = write_sample(
        &train_jsonl,
        options.train_bytes,
        &cache.join("train-packed.jsonl"),
    )?;
    let valid_packed = write_sample(
        &valid_jsonl,
        options.valid_bytes,
        &cache.join("valid-packed.jsonl"),
    )?;
    let mut splits = serde_json::Map::new();
    for (name, jsonl) in [("train", &train_packed), ("valid", &valid_packed)] {
        let _ = writeln!(std::io::stderr(), "tokenizing {}", jsonl.display());
        let split = CorpusSplit::load(jsonl, &tokenizer, hash, &cache)?;
        let (files, tokens, bytes) = write_split(&split, out, name, file_sep)?;
        writeln!(
            report,
            "{name}: {files} files, {:.1} MB, {tokens} tokens ({:.3} bytes per token)",
            bytes as f64 / 1e6,
            bytes as f64 / (tokens - files).max(1) as f64
        )
        .expect("writing to a String");
        splits.insert(
            name.into(),
            serde_json::json!({"files": files, "tokens": tokens, "bytes": bytes}),
        );
    }
    std::fs::remove_dir_all(&cache).ok();
    let mut edits = serde_json::Map::new();
    if let Some(dir) = &options.edits {
        for name in ["train", "valid"] {
            let (cases, sequences, no_edit) = write_edits(
                &tokenizer,
                &dir.join(format!("edits-{name}.jsonl")),
                out,
                name,
                options.seq_len,
                options.max_edit_cases,
            )?;
            writeln!(
                report,
                "edits-{name}: {sequences} sequences from {cases} cases ({no_edit} ask for no edit)"
            )
            .expect("writing to a String");
            edits.insert(
                name.into(),
                serde_json::json!({"cases": cases, "sequences": sequences, "no_edit": no_edit}),
            );
        }
    }
    let meta = serde_json::json!({
        "format": 1,
        "vocab_size": tokenizer.vocab_size(),
        "mask_id": MASK_ID,
        "eos_id": EOS_ID,
        "file_sep_id": file_sep,
        "specials": SPECIAL_TOKENS,
        "seq_len": options.seq_len,
        "tokenizer_sample_bytes": sample_bytes,
        "valid_bytes_per_token": valid_bpt,
        "splits": splits,
        "edits": edits,
    });
    let meta_path = out.join("meta.json");
    let meta = serde_json::to_string_pretty(&meta).expect("json");
    std::fs::write(&meta_path, meta).map_err(|e| TrainError::write(&meta_path, e))?;
    writeln!(report, "wrote {}", out.display()).expect("writing to a String");
    Ok(report)
}
