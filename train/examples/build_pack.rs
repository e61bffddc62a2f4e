//! Builds the GPU trainer's pack (train/gpu/data.py reads it) from a built corpus and, when
//! given, next-edit cases, and prints what it holds.
//!
//! ```text
//! cargo run --release -p redraft-train --example build_pack -- \
//!     --corpus target/gpu-corpus --edits target/gpu-edits --out target/gpu-pack \
//!     [--vocab-size 8192] [--tokenizer-sample-mb 96] [--seq-len 1024] [--tokenizer FILE]
//!     [--compare-vocab 4096 16384] [--train-mb 350] [--valid-mb 6] [--max-edit-cases 20000]
//! ```
//!
//! Writes to `OUT`: `tokenizer.json` (byte-level BPE trained on an even sample of the training
//! files, the specials of `redraft_train::train::SPECIAL_TOKENS` at ids 0..8, unless
//! `--tokenizer` names one), `train.tokens` / `valid.tokens` (little-endian u16 ids, each file
//! followed by `<|file_sep|>`), `train.offsets` / `valid.offsets` (u64 file starts, then the end),
//! `edits-{train,valid}.tokens` + `.index` (u32 rows: start, length, canvas start, canvas
//! length) laid out by `train::examples::edit::edit_tokens`, the engine's own next-edit layout,
//! and `meta.json`. `--train-mb` / `--valid-mb` pack an even sample of a split's files of about that size,
//! `--max-edit-cases` an even sample of each split's next-edit cases. `scripts/build-pack` compresses them. `--compare-vocab` also trains those
//! sizes on the same sample and reports bytes per token on the validation split for each.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context};
use redraft_train::pack::{self, PackOptions};

fn parse() -> anyhow::Result<PackOptions> {
    let mut corpus = None;
    let mut edits = None;
    let mut out = None;
    let mut vocab_size = 8192;
    let mut sample_mb = 96;
    let mut train_mb = None;
    let mut valid_mb = None;
    let mut max_edit_cases = usize::MAX;
    let mut seq_len = 1024;
    let mut tokenizer = None;
    let mut compare = Vec::new();
    let mut args = std::env::args().skip(1).peekable();
    while let Some(flag) = args.next() {
        let mut values = Vec::new();
        while let Some(value) = args.next_if(|a| !a.starts_with("--")) {
            values.push(value);
        }
        let one = || -> anyhow::Result<String> {
            match values.as_slice() {
                [value] => Ok(value.clone()),
                _ => bail!("{flag} takes exactly one value"),
            }
        };
        let number = || -> anyhow::Result<usize> {
            one()?
                .parse()
                .with_context(|| format!("{flag} takes a number"))
        };
        match flag.as_str() {
            "--corpus" => corpus = Some(PathBuf::from(one()?)),
            "--edits" => edits = Some(PathBuf::from(one()?)),
            "--out" => out = Some(PathBuf::from(one()?)),
            "--vocab-size" => vocab_size = number()?,
            "--tokenizer-sample-mb" => sample_mb = number()?,
            "--train-mb" => train_mb = Some(number()?),
            "--valid-mb" => valid_mb = Some(number()?),
            "--max-edit-cases" => max_edit_cases = number()?,
            "--seq-len" => seq_len = number()?,
            "--tokenizer" => tokenizer = Some(PathBuf::from(one()?)),
            "--compare-vocab" => {
                for v in &values {
                    compare.push(v.parse().context("--compare-vocab takes numbers")?);
                }
            }
            other => bail!("unknown argument `{other}`: see the header of examples/build_pack.rs"),
        }
    }
    if vocab_size > usize::from(u16::MAX) + 1 {
        bail!("--vocab-size {vocab_size} does not fit the pack's 16-bit ids");
    }
    Ok(PackOptions {
        corpus: corpus.context("pass --corpus DIR (what build_corpus wrote)")?,
        edits,
        out: out.context("pass --out DIR")?,
        vocab_size,
        tokenizer_sample_bytes: sample_mb << 20,
        train_bytes: train_mb.map_or(usize::MAX, |mb| mb * 1_000_000),
        valid_bytes: valid_mb.map_or(usize::MAX, |mb| mb * 1_000_000),
        max_edit_cases,
        seq_len,
        tokenizer,
        compare_vocab: compare,
    })
}

fn main() -> anyhow::Result<()> {
    let options = parse()?;
    let report = pack::build(&options)?;
    std::io::stdout().write_all(report.as_bytes())?;
    Ok(())
}
