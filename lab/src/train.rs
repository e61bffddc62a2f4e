//! `redraft train`: trains redraft's own masked-diffusion code model on a built corpus, or
//! continues one from a checkpoint's weights (`--init`: redraft's, another Qwen2 layout's, a GGUF
//! file, an autoregressive one adapted to diffusion), into a model directory that `redraft
//! complete --model` loads (the loop itself is `redraft_train::train`; this file turns flags
//! into its settings and draws the progress line).

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use candle_core::{DType, Device};
use redraft_engine::config::AttentionPattern;
use redraft_engine::DeviceSpec;
use redraft_runtime::sampler_args::parse_at_least_one;
use redraft_runtime::stderr_line;
use redraft_train::train::init::{Adaptation, InitCheckpoint};
use redraft_train::train::{
    self, checkpoint, tokens, EvalReport, Progress, TokenizerSource, TrainConfig, TrainControls,
    TrainPaths,
};

#[derive(clap::Args)]
pub struct Args {
    /// Corpus directory holding train.jsonl and valid.jsonl.
    #[arg(long)]
    corpus: PathBuf,
    /// Output model directory (also holds the checkpoint, token caches and train_log.jsonl).
    #[arg(long)]
    out: PathBuf,
    /// Reuse this tokenizer.json instead of training one (its specials must be redraft's).
    #[arg(long, conflicts_with = "vocab_size")]
    tokenizer: Option<PathBuf>,
    /// Train a byte-level BPE tokenizer of this many tokens [default: 4096].
    #[arg(long)]
    vocab_size: Option<usize>,
    /// Train the tokenizer on only the first N megabytes of the train split [default: all].
    #[arg(long)]
    tokenizer_sample_mb: Option<usize>,
    /// Only prepare the tokenizer and print its bytes per token on the valid split.
    #[arg(long)]
    tokenizer_only: bool,
    /// Transformer layers [default: 4].
    #[arg(long, value_parser = parse_at_least_one)]
    layers: Option<usize>,
    /// Hidden size [default: 256].
    #[arg(long, value_parser = parse_at_least_one)]
    hidden: Option<usize>,
    /// Attention heads [default: 4].
    #[arg(long, value_parser = parse_at_least_one)]
    heads: Option<usize>,
    /// Key/value heads [default: --heads].
    #[arg(long, value_parser = parse_at_least_one)]
    kv_heads: Option<usize>,
    /// MLP size [default: 1024].
    #[arg(long, value_parser = parse_at_least_one)]
    ffn: Option<usize>,
    /// Tokens per training sequence [default: 256].
    #[arg(long, value_parser = parse_seq_len)]
    seq_len: Option<usize>,
    /// Sequences per step [default: 8].
    #[arg(long, value_parser = parse_at_least_one)]
    batch: Option<usize>,
    /// Total steps; the learning-rate schedule ends here (may be raised on --resume) [default: 10000].
    #[arg(long, value_parser = parse_at_least_one)]
    steps: Option<usize>,
    /// Peak learning rate [default: 1e-3].
    #[arg(long, value_parser = parse_learning_rate)]
    lr: Option<f64>,
    /// Warmup steps [default: 200].
    #[arg(long)]
    warmup: Option<usize>,
    /// Seed of initialisation and data order [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Share of fill-in-the-middle examples among those that are not next edits [default: 0.7].
    #[arg(long, value_parser = parse_share)]
    fim_rate: Option<f64>,
    /// Share of fill-in-the-middle examples whose canvas is planned too short for the middle
    /// (filled to its last slot, no EOS: what makes the engine grow a canvas); above 0, half
    /// of the next edits that outgrow the engine's planned canvas get it too [default: 0.1].
    #[arg(long, value_parser = parse_share)]
    overflow: Option<f64>,
    /// Directory of next-edit cases (edits-train.jsonl, edits-valid.jsonl; see
    /// `cargo run -p redraft-train --example build_edits`): the run learns next edits too.
    #[arg(long)]
    edits: Option<PathBuf>,
    /// Share of next-edit examples [default: 0.3 with --edits, else 0].
    #[arg(long, requires = "edits", value_parser = parse_share)]
    edit_rate: Option<f64>,
    /// Next-edit canvases show the old region's tokens at their masked slots instead of the
    /// mask token (the exported model records it; the engine decodes it the same way).
    #[arg(long, requires = "edits")]
    edit_draft: bool,
    /// Evaluate on the corpus's validation split every N steps [default: 200].
    #[arg(long, value_parser = parse_at_least_one)]
    eval_every: Option<usize>,
    /// Held-out examples per evaluation [default: 128].
    #[arg(long, value_parser = parse_at_least_one)]
    eval_examples: Option<usize>,
    /// Save a checkpoint and export the model every N steps [default: 500].
    #[arg(long, value_parser = parse_at_least_one)]
    save_every: Option<usize>,
    /// Continue the run checkpointed in --out (settings come from the checkpoint).
    #[arg(long)]
    resume: bool,
    /// Start from this checkpoint's weights instead of random ones: a model directory (one
    /// `redraft train` exported, such as assets/default-model, or another Qwen2-layout
    /// safetensors model) or a GGUF file (dequantized to f32). Its shape, positions and
    /// tokenizer are the run's. An autoregressive checkpoint (a qwen2 GGUF, a model without a
    /// mask token) is adapted to diffusion: bidirectional attention unless --attention says
    /// otherwise, the logit shift kept, an unused token of its vocabulary as the mask.
    #[arg(long, conflicts_with_all = ["resume", "tokenizer", "vocab_size", "layers", "hidden", "heads", "kv_heads", "ffn"])]
    init: Option<PathBuf>,
    /// The token an --init checkpoint masks with [default: its own; for an autoregressive one,
    /// <|fim_pad|>]: one of its vocabulary's special tokens that text never produces.
    #[arg(long, requires = "init")]
    mask_token: Option<String>,
    /// Which keys each position attends to: bidirectional, causal, or block:N (block-causal in
    /// blocks of N positions) [default: bidirectional; an --init diffusion checkpoint's own].
    /// The exported redraft.json records it.
    #[arg(long, value_parser = parse_attention)]
    attention: Option<AttentionPattern>,
    /// Stop cleanly, saving a checkpoint, after this many minutes.
    #[arg(long, value_parser = parse_minutes)]
    max_minutes: Option<f64>,
    /// Dtype of the exported model.safetensors (the checkpoint is always f32).
    #[arg(long, default_value = "f32", value_parser = parse_dtype)]
    dtype: DType,
    /// Where training runs: auto (a GPU when this build has CUDA and the machine has one, else
    /// the CPU), cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: DeviceSpec,
    /// Worker threads for matmuls and data [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
}

fn parse_attention(s: &str) -> Result<AttentionPattern, String> {
    match s {
        "bidirectional" => Ok(AttentionPattern::Bidirectional),
        "causal" => Ok(AttentionPattern::Causal),
        other => match other.strip_prefix("block:").map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => Ok(AttentionPattern::Block(n)),
            _ => Err(format!(
                "unknown attention `{other}` (bidirectional, causal or block:N with N >= 1)"
            )),
        },
    }
}

/// `--seq-len`: room for a masked span and its context (the trainer's least, 8 tokens).
fn parse_seq_len(text: &str) -> Result<usize, String> {
    text.parse::<usize>()
        .ok()
        .filter(|n| *n >= 8)
        .ok_or_else(|| format!("expected a whole number of tokens, 8 or more, got `{text}`"))
}

/// `--lr`: above 0 and finite.
fn parse_learning_rate(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|lr| lr.is_finite() && *lr > 0.0)
        .ok_or_else(|| format!("expected a number above 0 (like 1e-3), got `{text}`"))
}

/// `--fim-rate`, `--overflow`, `--edit-rate`: a share of the examples, 0 to 1.
fn parse_share(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|share| (0.0..=1.0).contains(share))
        .ok_or_else(|| format!("expected a share from 0 to 1, got `{text}`"))
}

/// `--max-minutes`: a time to run, above 0 and at most a year (a deadline further off is no
/// deadline, and one past what a clock can add, `1e30`, was a panic after the tokenizer was
/// written).
fn parse_minutes(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|m| *m > 0.0 && *m <= MAX_MINUTES)
        .ok_or_else(|| {
            format!("expected a number of minutes above 0, at most {MAX_MINUTES} (a year), got `{text}`")
        })
}

const MAX_MINUTES: f64 = 525_600.0;

fn parse_dtype(s: &str) -> Result<DType, String> {
    match s {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        other => Err(format!("unknown dtype `{other}` (f32 or f16)")),
    }
}

impl Args {
    /// The run's settings: the checkpoint's when resuming (or the --init checkpoint's), else
    /// the defaults, then the flags; `vocab_size`, when given, is the fresh tokenizer's.
    fn config(&self, base: TrainConfig, vocab_size: Option<usize>) -> TrainConfig {
        let mut c = base;
        if let Some(v) = vocab_size {
            c.model.vocab_size = v;
        }
        let set = |slot: &mut usize, v: Option<usize>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        set(&mut c.model.layers, self.layers);
        set(&mut c.model.hidden, self.hidden);
        set(&mut c.model.heads, self.heads);
        match self.kv_heads {
            Some(v) => c.model.kv_heads = v,
            None if !self.resume && self.init.is_none() => c.model.kv_heads = c.model.heads,
            None => {}
        }
        set(&mut c.model.ffn, self.ffn);
        set(&mut c.data.seq_len, self.seq_len);
        set(&mut c.batch, self.batch);
        set(&mut c.steps, self.steps);
        set(&mut c.optim.warmup, self.warmup);
        set(&mut c.eval_every, self.eval_every);
        set(&mut c.eval_examples, self.eval_examples);
        set(&mut c.save_every, self.save_every);
        if let Some(lr) = self.lr {
            c.optim.lr = lr;
        }
        if let Some(seed) = self.seed {
            c.seed = seed;
        }
        if let Some(rate) = self.fim_rate {
            c.data.fim_rate = rate;
        }
        if let Some(share) = self.overflow {
            c.data.overflow = share;
        }
        match self.edit_rate {
            Some(rate) => c.data.edit_rate = rate,
            None if self.edits.is_some() && !self.resume => c.data.edit_rate = 0.3,
            None => {}
        }
        if self.edit_draft {
            c.data.edit_draft = true;
        }
        if let Some(attention) = self.attention {
            c.diffusion.attention = attention;
        }
        c
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // A fresh run's settings are the defaults and the flags: flags that do not go together
    // (`--kv-heads` that does not divide `--heads`) are a mistake on the command line, said
    // before anything is read or trained. A resumed or --init run's are checked on its
    // checkpoint's below.
    let fresh = !args.resume && args.init.is_none();
    let fresh_guess = fresh.then(|| {
        let vocab_guess = args.vocab_size.unwrap_or(4096);
        args.config(TrainConfig::default(), Some(vocab_guess))
    });
    if let Some(config) = &fresh_guess {
        config
            .validate()
            .map_err(|mistake| redraft::flag_error::<Args>("redraft-lab train", mistake))?;
    }
    if let Some(threads) = args.threads {
        // candle reads the thread count from rayon's variable; set it before any tensor op.
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
    // A device that cannot be had fails now, not after the corpus is tokenized.
    let device = args.device.resolve()?;
    let paths = TrainPaths {
        corpus: args.corpus.clone(),
        out: args.out.clone(),
        edits: args.edits.clone(),
    };
    for split in [paths.train_split(), paths.valid_split()] {
        if !split.is_file() {
            bail!(
                "{} is missing: --corpus must be a directory built by the corpus builder (train.jsonl, valid.jsonl)",
                split.display()
            );
        }
    }
    if let Some(config) = fresh_guess.as_ref().filter(|_| !args.tokenizer_only) {
        // Now, not after the tokenizer has been trained (a tokenizer-only run allocates none).
        check_attention_memory(config, &device)?;
    }
    if !args.resume {
        // Before the tokenizer is looked at: a run is not started over another one.
        checkpoint::refuse_existing(&paths.out)?;
    }
    let (base, tokenizer) = if args.resume {
        let state = checkpoint::load_state(&paths.out)?.with_context(|| {
            format!(
                "{} holds no checkpoint to resume: drop --resume to start a run",
                paths.out.display()
            )
        })?;
        if args.tokenizer.is_some() || args.vocab_size.is_some() {
            bail!("--resume reuses the tokenizer in --out: drop --tokenizer and --vocab-size");
        }
        let tokenizer = redraft_engine::tokenizer::Tokenizer::load(&paths.tokenizer())?;
        (state.config, tokenizer)
    } else if let Some(init) = &args.init {
        let context = || format!("--init {}", init.display());
        let checkpoint = InitCheckpoint::open(init).with_context(context)?;
        let adaptation = Adaptation {
            mask_token: args.mask_token.clone(),
            attention: args.attention,
        };
        let base = checkpoint.train_config(&adaptation).with_context(context)?;
        // Bad flags fail now, before anything is written.
        args.config(base.clone(), None).validate()?;
        let tokenizer = checkpoint.write_tokenizer(&paths)?;
        (base, tokenizer)
    } else {
        (TrainConfig::default(), prepare_tokenizer(&args, &paths)?)
    };
    if args.tokenizer_only {
        let valid = tokens::read_texts(&paths.valid_split(), usize::MAX)?;
        let report = serde_json::json!({
            "tokenizer": paths.tokenizer(),
            "vocab_size": tokenizer.vocab_size(),
            "valid_bytes_per_token": tokens::bytes_per_token(&tokenizer, &valid)?,
        });
        return redraft::to_stdout(|out| writeln!(out, "{report}"));
    }
    // A fresh run's model has its new tokenizer's vocabulary; a resumed or --init one keeps its
    // embeddings (a checkpoint may have more rows than its tokenizer has tokens).
    let fresh_vocab = fresh.then(|| tokenizer.vocab_size());
    let config = args.config(base, fresh_vocab);
    if !fresh {
        check_attention_memory(&config, &device)?;
    }
    if args.resume && args.steps.is_some() {
        stderr_line(format_args!(
            "note: --steps {} on resume reshapes the rest of the learning-rate schedule",
            config.steps
        ));
    }
    drop(tokenizer);

    let interactive = std::io::stderr().is_terminal();
    let mut last_line = Instant::now() - Duration::from_secs(60);
    let mut on_progress = |p: &Progress| {
        let line = progress_line(p);
        if interactive {
            let _ = write!(io::stderr(), "\r{line}\x1b[K");
        } else if last_line.elapsed() >= Duration::from_secs(30) || p.step == p.steps {
            stderr_line(format_args!("{line}"));
            last_line = Instant::now();
        }
    };
    let mut on_eval = |r: &EvalReport| {
        if interactive {
            stderr_line(format_args!(""));
        }
        stderr_line(format_args!("{}", eval_line(r)));
    };
    let mut on_status = |s: &str| {
        if interactive {
            let _ = write!(io::stderr(), "\r\x1b[K");
        }
        stderr_line(format_args!("{s}"));
    };
    let controls = TrainControls {
        deadline: args
            .max_minutes
            .map(|m| Instant::now() + Duration::from_secs_f64(m * 60.0)),
        stop_after: None,
        on_progress: Some(&mut on_progress),
        on_eval: Some(&mut on_eval),
        on_status: Some(&mut on_status),
    };
    let summary = train::train(&config, &paths, args.resume, args.dtype, &device, controls)
        .with_context(|| format!("training into {}", paths.out.display()))?;
    if interactive {
        stderr_line(format_args!(""));
    }
    let mut value = serde_json::to_value(&summary)?;
    value["out"] = serde_json::to_value(&paths.out)?;
    redraft::to_stdout(|out| writeln!(out, "{value}"))
}

/// Refuses settings whose attention buffers this machine cannot allocate, before any work:
/// the CPU trainer (`redraft_train`'s) keeps each layer's attention probabilities for the
/// backward pass, `[batch, heads, seq-len, seq-len]` f32, and one `[batch, seq-len, seq-len]`
/// gradient scratch beside them, all held through a step. They grow with the square of
/// `--seq-len`, and an allocation that fails aborts the process ("memory allocation of N bytes
/// failed") in the middle of the run; so the whole is allocated here first, and given back. (On
/// a GPU the buffers are the device's, and candle says when they do not fit.)
fn check_attention_memory(config: &TrainConfig, device: &Device) -> anyhow::Result<()> {
    if !device.is_cpu() {
        return Ok(());
    }
    let (layers, heads) = (config.model.layers, config.model.heads);
    let (batch, len) = (config.batch, config.data.seq_len);
    // A layer's probabilities for each head, and the gradient scratch.
    let floats = layers
        .checked_mul(heads)
        .and_then(|n| n.checked_add(1))
        .and_then(|n| {
            [batch, len, len]
                .into_iter()
                .try_fold(n, usize::checked_mul)
        });
    let mut probe: Vec<f32> = Vec::new();
    let fits = floats.is_some_and(|n| probe.try_reserve_exact(n).is_ok());
    // The allocation must happen: an unused one may be optimised away, and the check with it.
    std::hint::black_box(&probe);
    if !fits {
        let buffers = layers as f64 * heads as f64 + 1.0;
        let bytes = buffers * batch as f64 * (len as f64).powi(2) * 4.0;
        bail!(
            "--seq-len {len} with --batch {batch}, {heads} heads and {layers} layers: a training \
             step keeps {:.1} GB of attention probabilities (batch x heads x seq-len^2 x 4 bytes \
             a layer), more than this machine can allocate; lower --seq-len or --batch",
            bytes / 1e9
        );
    }
    Ok(())
}

/// The tokenizer of a fresh run: the given file, the one already in --out, or a new one.
fn prepare_tokenizer(
    args: &Args,
    paths: &TrainPaths,
) -> anyhow::Result<redraft_engine::tokenizer::Tokenizer> {
    if let Some(file) = &args.tokenizer {
        return Ok(train::prepare_tokenizer(
            paths,
            &TokenizerSource::File(file.clone()),
        )?);
    }
    let existing = paths.tokenizer();
    if existing.is_file() {
        let tokenizer = redraft_engine::tokenizer::Tokenizer::load(&existing)?;
        match args.vocab_size {
            Some(v) if v != tokenizer.vocab_size() => bail!(
                "{} has {} tokens, not --vocab-size {v}: remove it to train a new one",
                existing.display(),
                tokenizer.vocab_size()
            ),
            _ => {
                stderr_line(format_args!("reusing {}", existing.display()));
                return Ok(tokenizer);
            }
        }
    }
    let vocab_size = args.vocab_size.unwrap_or(4096);
    let sample_bytes = args.tokenizer_sample_mb.map_or(usize::MAX, |mb| mb << 20);
    match args.tokenizer_sample_mb {
        Some(mb) => stderr_line(format_args!(
            "training a {vocab_size}-token BPE tokenizer on the first {mb} MB of the train split"
        )),
        None => stderr_line(format_args!(
            "training a {vocab_size}-token BPE tokenizer on the train split"
        )),
    }
    let started = Instant::now();
    let tokenizer = train::prepare_tokenizer(
        paths,
        &TokenizerSource::Train {
            vocab_size,
            sample_bytes,
        },
    )?;
    stderr_line(format_args!(
        "tokenizer trained in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(tokenizer)
}

fn progress_line(p: &Progress) -> String {
    format!(
        "step {}/{} loss {:.4} lr {:.2e} |g| {:.2} {:.0} tok/s ETA {}",
        p.step,
        p.steps,
        p.loss,
        p.lr,
        p.grad_norm,
        p.tokens_per_s,
        duration(p.eta_s)
    )
}

fn eval_line(r: &EvalReport) -> String {
    format!(
        "eval step {}: val loss {:.4} ce {:.4} acc {:.3} (fim {:.3}, plain {:.3}{}); train loss {}",
        r.step,
        r.val_loss,
        r.val_ce,
        r.val_acc,
        r.val_fim_acc,
        r.val_plain_acc,
        r.val_edit_acc
            .map_or_else(String::new, |a| format!(", next edit {a:.3}")),
        r.train_loss
            .map_or_else(|| "-".to_string(), |l| format!("{l:.4}"))
    )
}

fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}
