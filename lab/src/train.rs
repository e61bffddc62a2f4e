//! `redraft train`: trains redraft's own masked-diffusion code model on a built corpus, or
//! continues one from a checkpoint's weights (`--init`: redraft's, another Qwen2 layout's, a GGUF
//! file, an autoregressive one adapted to diffusion), into a model directory that `redraft
//! complete --model` loads (the loop itself is `redraft_train::train`; this file turns flags
//! into its settings and draws the progress line).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use candle_core::DType;
use redraft_engine::config::AttentionPattern;
use redraft_engine::DeviceSpec;
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
    #[arg(long)]
    layers: Option<usize>,
    /// Hidden size [default: 256].
    #[arg(long)]
    hidden: Option<usize>,
    /// Attention heads [default: 4].
    #[arg(long)]
    heads: Option<usize>,
    /// Key/value heads [default: --heads].
    #[arg(long)]
    kv_heads: Option<usize>,
    /// MLP size [default: 1024].
    #[arg(long)]
    ffn: Option<usize>,
    /// Tokens per training sequence [default: 256].
    #[arg(long)]
    seq_len: Option<usize>,
    /// Sequences per step [default: 8].
    #[arg(long)]
    batch: Option<usize>,
    /// Total steps; the learning-rate schedule ends here (may be raised on --resume) [default: 10000].
    #[arg(long)]
    steps: Option<usize>,
    /// Peak learning rate [default: 1e-3].
    #[arg(long)]
    lr: Option<f64>,
    /// Warmup steps [default: 200].
    #[arg(long)]
    warmup: Option<usize>,
    /// Seed of initialisation and data order [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Share of fill-in-the-middle examples among those that are not next edits [default: 0.7].
    #[arg(long)]
    fim_rate: Option<f64>,
    /// Share of fill-in-the-middle examples whose canvas is planned too short for the middle
    /// (filled to its last slot, no EOS: what makes the engine grow a canvas); above 0, half
    /// of the next edits that outgrow the engine's planned canvas get it too [default: 0.1].
    #[arg(long)]
    overflow: Option<f64>,
    /// Directory of next-edit cases (edits-train.jsonl, edits-valid.jsonl; see
    /// `cargo run -p redraft-train --example build_edits`): the run learns next edits too.
    #[arg(long)]
    edits: Option<PathBuf>,
    /// Share of next-edit examples [default: 0.3 with --edits, else 0].
    #[arg(long, requires = "edits")]
    edit_rate: Option<f64>,
    /// Next-edit canvases show the old region's tokens at their masked slots instead of the
    /// mask token (the exported model records it; the engine decodes it the same way).
    #[arg(long, requires = "edits")]
    edit_draft: bool,
    /// Evaluate on the held-out crates every N steps [default: 200].
    #[arg(long)]
    eval_every: Option<usize>,
    /// Held-out examples per evaluation [default: 128].
    #[arg(long)]
    eval_examples: Option<usize>,
    /// Save a checkpoint and export the model every N steps [default: 500].
    #[arg(long)]
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
    #[arg(long)]
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
    if !args.resume && args.init.is_none() {
        // Bad flags fail now, not after the tokenizer has been trained.
        let vocab_guess = args.vocab_size.unwrap_or(4096);
        args.config(TrainConfig::default(), Some(vocab_guess))
            .validate()?;
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
        println!("{report}");
        return Ok(());
    }
    // A fresh run's model has its new tokenizer's vocabulary; a resumed or --init one keeps its
    // embeddings (a checkpoint may have more rows than its tokenizer has tokens).
    let fresh_vocab = (!args.resume && args.init.is_none()).then(|| tokenizer.vocab_size());
    let config = args.config(base, fresh_vocab);
    if args.resume && args.steps.is_some() {
        eprintln!(
            "note: --steps {} on resume reshapes the rest of the learning-rate schedule",
            config.steps
        );
    }
    drop(tokenizer);

    let interactive = std::io::stderr().is_terminal();
    let mut last_line = Instant::now() - Duration::from_secs(60);
    let mut on_progress = |p: &Progress| {
        let line = progress_line(p);
        if interactive {
            eprint!("\r{line}\x1b[K");
        } else if last_line.elapsed() >= Duration::from_secs(30) || p.step == p.steps {
            eprintln!("{line}");
            last_line = Instant::now();
        }
    };
    let mut on_eval = |r: &EvalReport| {
        if interactive {
            eprintln!();
        }
        eprintln!("{}", eval_line(r));
    };
    let mut on_status = |s: &str| {
        if interactive {
            eprint!("\r\x1b[K");
        }
        eprintln!("{s}");
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
        eprintln!();
    }
    let mut value = serde_json::to_value(&summary)?;
    value["out"] = serde_json::to_value(&paths.out)?;
    println!("{value}");
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
                eprintln!("reusing {}", existing.display());
                return Ok(tokenizer);
            }
        }
    }
    let vocab_size = args.vocab_size.unwrap_or(4096);
    let sample_bytes = args.tokenizer_sample_mb.map_or(usize::MAX, |mb| mb << 20);
    match args.tokenizer_sample_mb {
        Some(mb) => eprintln!(
            "training a {vocab_size}-token BPE tokenizer on the first {mb} MB of the train split"
        ),
        None => eprintln!("training a {vocab_size}-token BPE tokenizer on the train split"),
    }
    let started = Instant::now();
    let tokenizer = train::prepare_tokenizer(
        paths,
        &TokenizerSource::Train {
            vocab_size,
            sample_bytes,
        },
    )?;
    eprintln!(
        "tokenizer trained in {:.0} s",
        started.elapsed().as_secs_f64()
    );
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
