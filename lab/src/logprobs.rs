//! `redraft-lab logprobs` (`score` before): the model's log-probabilities over a text, one JSON line per position: the
//! token that position's logits predict, its log-probability and the most likely tokens. One full
//! pass, no sampling. For a causal (autoregressive) checkpoint this is next-token scoring, the
//! same numbers `scripts/llama/redraft-logprobs` prints from llama.cpp, which is how
//! `scripts/real-weights-parity` compares the two on the same file; for a diffusion checkpoint
//! it is the model's reading of an unmasked text.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use redraft_engine::sampler::{predicted_position, Pass};
use redraft_engine::ContextCache;
use redraft_runtime::model_args::ModelArgs;
use redraft_runtime::sampler_args::parse_at_least_one;
use redraft_runtime::stderr_line;
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// A file of the text to read, tokenized with the model's tokenizer (no special tokens).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "tokens",
        conflicts_with = "tokens"
    )]
    text: Option<PathBuf>,
    /// A file of token ids to read instead: a JSON array, or ids separated by whitespace.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Score only the first N tokens.
    #[arg(long, value_parser = parse_at_least_one)]
    max_tokens: Option<usize>,
    /// How many of the most likely tokens to list per position.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Print the token ids (one JSON array) and stop: the tokenizer's answer alone.
    #[arg(long)]
    ids_only: bool,
    /// Compute and print only the last position (what processing a prompt costs, as
    /// llama-bench's prompt test measures it: logits for the last token only).
    #[arg(long)]
    last: bool,
}

/// One position's line.
#[derive(Serialize)]
struct Line {
    pos: usize,
    /// The token this position's logits predict (the next one for a shifted head), if any.
    next: Option<u32>,
    next_logprob: Option<f64>,
    top: Vec<(u32, f64)>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Read before the model loads: a flag that names no file is said at once.
    let unreadable = |flag: &str, path: &std::path::Path| {
        format!(
            "--{flag} {}: cannot read it (--{flag} names a file, not {})",
            path.display(),
            if flag == "text" {
                "the text itself"
            } else {
                "the ids themselves"
            }
        )
    };
    let input = match (&args.text, &args.tokens) {
        (Some(path), _) => {
            let bytes = std::fs::read(path).with_context(|| unreadable("text", path))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?;
            Ok(text)
        }
        (None, Some(path)) => Err(parse_ids(
            &std::fs::read_to_string(path).with_context(|| unreadable("tokens", path))?,
        )
        .with_context(|| format!("{}: not a list of token ids", path.display()))?),
        (None, None) => bail!("give --text or --tokens"),
    };
    let start = Instant::now();
    let engine = args.model.load()?;
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut ids = match input {
        Ok(text) => engine.tokenizer().encode(&text)?,
        Err(ids) => ids,
    };
    if let Some(max) = args.max_tokens {
        ids.truncate(max);
    }
    let vocab = engine.model().config().vocab_size;
    if let Some(bad) = ids.iter().find(|&&t| t as usize >= vocab) {
        bail!("token id {bad} is outside the model's vocabulary of {vocab}");
    }
    if args.ids_only {
        return redraft::to_stdout(|out| {
            serde_json::to_writer(&mut *out, &ids)?;
            writeln!(out)
        });
    }
    if ids.is_empty() {
        bail!("nothing to read: the text has no tokens");
    }
    let positions = engine.model().config().max_position_embeddings;
    if ids.len() > positions {
        bail!(
            "{} tokens, more than the model's {positions} positions (use --max-tokens)",
            ids.len()
        );
    }
    let start = Instant::now();
    let first = if args.last { ids.len() - 1 } else { 0 };
    let logits = engine.model().forward(
        std::slice::from_ref(&ids),
        first..ids.len(),
        &mut ContextCache::default(),
        Pass::Full { store: false },
    )?;
    let rows: Vec<Vec<f32>> = logits.squeeze(0)?.to_vec2()?;
    let forward_ms = start.elapsed().as_secs_f64() * 1e3;
    let shift = engine.settings().logit_shift;
    redraft::to_stdout(|out| {
        for (pos, row) in (first..).zip(&rows) {
            let logprobs = log_softmax(row);
            let next = ids.get(predicted_position(shift, pos)).copied();
            let line = Line {
                pos,
                next,
                next_logprob: next.map(|t| logprobs[t as usize]),
                top: top_k(&logprobs, args.top),
            };
            serde_json::to_writer(&mut *out, &line)?;
            writeln!(out)?;
        }
        Ok(())
    })?;
    stderr_line(format_args!("redraft logprobs: {} tokens, load {load_ms:.0} ms, forward {forward_ms:.1} ms ({:.1} tokens/s), weights {:.1} MB{}",
        ids.len(),
        ids.len() as f64 / (forward_ms / 1e3),
        engine.model().weight_bytes() as f64 / 1e6,
        if engine.model().is_quantized() { " (quantized)" } else { "" }));
    Ok(())
}

/// Ids as a JSON array or separated by whitespace.
fn parse_ids(text: &str) -> anyhow::Result<Vec<u32>> {
    let text = text.trim();
    if text.starts_with('[') {
        return Ok(serde_json::from_str(text)?);
    }
    text.split_whitespace()
        .map(|t| {
            t.parse()
                .with_context(|| format!("`{t}` is not a token id"))
        })
        .collect()
}

/// Log-softmax in f64 (as the llama.cpp side computes it).
fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let log_sum = max + sum.ln();
    row.iter().map(|&v| v as f64 - log_sum).collect()
}

/// The `k` highest, descending (ties by id).
fn top_k(logprobs: &[f64], k: usize) -> Vec<(u32, f64)> {
    let mut order: Vec<u32> = (0..logprobs.len() as u32).collect();
    let k = k.min(order.len());
    if k == 0 {
        return Vec::new();
    }
    let by = |a: &u32, b: &u32| {
        logprobs[*b as usize]
            .total_cmp(&logprobs[*a as usize])
            .then(a.cmp(b))
    };
    order.select_nth_unstable_by(k - 1, by);
    order.truncate(k);
    order.sort_by(by);
    order
        .into_iter()
        .map(|t| (t, logprobs[t as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_both_ways_and_top_k_is_ordered() {
        assert_eq!(parse_ids("[1, 2, 3]").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_ids(" 4 5\n6 ").unwrap(), vec![4, 5, 6]);
        assert!(parse_ids("1 x").is_err());
        assert!(parse_ids("[-1]").is_err());
        let lp = log_softmax(&[0.0, 2.0, 1.0, 2.0]);
        let total: f64 = lp.iter().map(|v| v.exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        let top: Vec<u32> = top_k(&lp, 3).into_iter().map(|(t, _)| t).collect();
        assert_eq!(top, vec![1, 3, 2]);
        assert_eq!(top_k(&lp, 10).len(), 4);
    }
}
