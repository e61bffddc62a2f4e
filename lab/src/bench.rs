//! `redraft bench`: how fast the engine is on this machine, next to PyTorch on the same weights
//! and inputs.
//!
//! For each configuration it writes freshly initialised weights as a Hugging Face directory,
//! times redraft's forward pass over 512/1024/2048 tokens, a cached denoising step and an
//! end-to-end 16-token middle at 1k context, measures this machine's f32 matmul peak in the same
//! run, and (when a Python with torch is available) runs `fixtures/parity/torch_bench.py` on the
//! very same directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use candle_core::{Device, Tensor};
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::{DiffusionSettings, ModelConfig, RedraftJson};
use redraft_engine::qwen2::{init_weights, Qwen2};
use redraft_engine::sampler::{Canvas, Controls, Effort, Pass, Sampler, SamplerConfig};
use redraft_engine::ContextCache;
use redraft_engine::InfillRequest;
use redraft_runtime::model_args::ModelArgs;
use redraft_runtime::stderr_line;
use serde_json::json;

#[derive(clap::Args)]
pub struct Args {
    /// Sequence lengths for the full forward pass, each 64 or more (the canvas-only pass puts
    /// a 16-slot canvas three quarters in).
    #[arg(long, value_delimiter = ',', default_values_t = [512, 1024, 2048], value_parser = parse_length)]
    lengths: Vec<usize>,
    /// Timed repetitions per measurement (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = redraft_runtime::sampler_args::parse_at_least_one)]
    repeats: usize,
    /// Model sizes to run: `small` (4 layers, d 256, 6.3M) and/or `medium` (6 layers, d 384,
    /// 17.3M), the two PyTorch anchors (on the CPU), or a model directory, timed on `--device`.
    #[arg(long, value_delimiter = ',', default_values_t = ["small".to_string(), "medium".to_string()], value_parser = parse_config)]
    configs: Vec<String>,
    /// Python with torch + transformers for the reference (default: `.venv-ref/bin/python`
    /// if present; `none` to skip).
    #[arg(long)]
    python: Option<String>,
    /// Write the report as JSON here (its directories are made, before anything is timed).
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
    /// Source file to cut rest-of-line completions from (code the model never trained on), timed
    /// with --model (default: the embedded model) at each effort.
    #[arg(long)]
    fim_file: Option<PathBuf>,
    /// Number of cuts (0 skips the real-model part).
    #[arg(long, default_value_t = 40)]
    fim_cuts: usize,
}

/// The slots of the canvas whose logits the canvas-only pass computes.
const CANVAS: usize = 16;

/// A `--lengths` value: one that holds the canvas-only pass's canvas, which starts three
/// quarters in, so a quarter of the length must be at least [`CANVAS`] slots.
fn parse_length(text: &str) -> Result<usize, String> {
    let least = 4 * CANVAS;
    text.parse::<usize>()
        .ok()
        .filter(|len| *len >= least)
        .ok_or_else(|| {
            format!(
                "expected a length of {least} tokens or more (the canvas-only pass puts a \
                 {CANVAS}-slot canvas in the last quarter), got `{text}`"
            )
        })
}

/// A `--configs` entry: an anchor (`small`, `medium`) or a path that exists ([`is_model_dir`]).
fn parse_config(text: &str) -> Result<String, String> {
    if ANCHORS.contains(&text) || is_model_dir(text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "unknown bench config `{text}`: give small, medium, or a model directory or GGUF \
             file (no such path)"
        ))
    }
}

/// The configurations PyTorch is timed on beside redraft.
const ANCHORS: [&str; 2] = ["small", "medium"];

fn anchor(name: &str) -> anyhow::Result<ModelConfig> {
    let (d, layers, ffn) = match name {
        "small" => (256, 4, 1024),
        "medium" => (384, 6, 1536),
        other => bail!("unknown bench config `{other}` (small or medium)"),
    };
    let config = json!({
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "vocab_size": 8192, "hidden_size": d, "intermediate_size": ffn,
        "num_hidden_layers": layers, "num_attention_heads": d / 64, "num_key_value_heads": d / 64,
        "head_dim": 64, "max_position_embeddings": 4096, "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "hidden_act": "silu",
        "torch_dtype": "float32",
    });
    Ok(serde_json::from_value(config)?)
}

/// FLOPs of one forward over `len` tokens with logits for `rows` positions.
fn forward_flops(c: &ModelConfig, len: usize, rows: usize) -> f64 {
    let (d, hd, ffn) = (
        c.hidden_size as f64,
        c.head_dim() as f64,
        c.intermediate_size as f64,
    );
    let (q, kv) = (
        c.num_attention_heads as f64 * hd,
        c.num_kv_heads() as f64 * hd,
    );
    let t = len as f64;
    let proj = 2.0 * t * d * (q + 2.0 * kv) + 2.0 * t * q * d + 2.0 * t * d * 3.0 * ffn;
    let attn = 4.0 * t * t * q;
    c.num_hidden_layers as f64 * (proj + attn) + 2.0 * rows as f64 * d * c.vocab_size as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn time_ms(repeats: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    f()?; // warm-up
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let started = Instant::now();
        f()?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(times))
}

/// Best f32 matmul throughput of this machine, GFLOP/s, through the same backend.
fn matmul_peak(repeats: usize) -> anyhow::Result<f64> {
    let mut best: f64 = 0.0;
    for (m, k, n) in [(1024, 1024, 1024), (2048, 256, 1024), (512, 1024, 4096)] {
        let a = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
        let b = Tensor::randn(0f32, 1.0, (k, n), &Device::Cpu)?;
        let ms = time_ms(repeats, || {
            a.matmul(&b)?;
            Ok(())
        })?;
        best = best.max(2.0 * (m * k * n) as f64 / (ms * 1e6));
    }
    Ok(best)
}

fn random_ids(len: usize, vocab: usize, seed: u64) -> Vec<u32> {
    // xorshift: deterministic and dependency-free.
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (vocab as u64 - 2)) as u32
        })
        .collect()
}

fn write_model_dir(dir: &Path, config: &ModelConfig) -> anyhow::Result<Qwen2> {
    let tensors = init_weights(config, 0)?;
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(config)?,
    )?;
    let extra = RedraftJson {
        mask_token_id: Some(config.vocab_size as u32 - 1),
        eos_token_id: Some(config.vocab_size as u32 - 2),
        pad_token_id: None,
        bos_token_id: None,
        logit_shift: Some(true),
        ..RedraftJson::default()
    };
    std::fs::write(
        dir.join("redraft.json"),
        serde_json::to_string_pretty(&extra)?,
    )?;
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors"))?;
    // Load back through the checkpoint path, as a user's model would be.
    let weights = Weights::load(dir, candle_core::DType::F32, &Device::Cpu)?;
    Ok(Qwen2::new(config, &weights, &Device::Cpu)?)
}

fn default_python() -> Option<String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-ref/bin/python");
    venv.exists().then(|| venv.display().to_string())
}

fn torch_reference(
    python: &str,
    dir: &Path,
    lengths: &[usize],
    repeats: usize,
    vocab: usize,
) -> anyhow::Result<serde_json::Value> {
    // The very ids redraft runs, so both time the same input.
    let ids: serde_json::Map<String, serde_json::Value> = lengths
        .iter()
        .map(|&len| (len.to_string(), json!(random_ids(len, vocab, len as u64))))
        .collect();
    let ids_path = dir.join("bench_ids.json");
    std::fs::write(&ids_path, serde_json::to_string(&ids)?)?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/parity/torch_bench.py");
    let lengths: Vec<String> = lengths.iter().map(ToString::to_string).collect();
    let output = Command::new(python)
        .arg(&script)
        .arg("--model")
        .arg(dir)
        .arg("--lengths")
        .args(&lengths)
        .args(["--threads", "2", "--repeats", &repeats.to_string()])
        .arg("--ids")
        .arg(&ids_path)
        .output()
        .with_context(|| format!("running {python} {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "torch reference failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Whether a `--configs` entry names a model rather than an anchor (`small`, `medium`): any
/// path that exists (a model directory, a GGUF file, a directory holding one), which the
/// engine's loader then reads or explains.
fn is_model_dir(config: &str) -> bool {
    Path::new(config).exists()
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Made now: a report that cannot be written is said before minutes of measuring.
    if let Some(out) = &args.out {
        if out.is_dir() {
            bail!(
                "--out {} is a directory: name the report's file",
                out.display()
            );
        }
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("--out {}: making {}", out.display(), parent.display()))?;
        }
    }
    // Read now: a file that cannot be timed is said before minutes of measuring, not after.
    let fim = if args.fim_cuts > 0 {
        rest_of_line_cuts(&args)?
    } else {
        None
    };
    // The anchors' share of the peak is the CPU's; a model directory alone does not need it.
    let peak = if args.configs.iter().all(|c| is_model_dir(c)) {
        f64::NAN
    } else {
        let peak = matmul_peak(args.repeats)?;
        redraft::to_stdout(|out| {
            writeln!(out, "f32 matmul peak on this machine: {peak:.1} GFLOP/s\n")
        })?;
        peak
    };
    let python = match args.python.as_deref() {
        Some("none") => None,
        Some(p) => Some(p.to_string()),
        None => default_python(),
    };
    let mut report = vec![];
    for name in &args.configs {
        if is_model_dir(name) {
            report.push(time_model_dir(Path::new(name), &args)?);
            continue;
        }
        let config = anchor(name)?;
        let dir = tempfile::tempdir()?;
        let model = write_model_dir(dir.path(), &config)?;
        let vocab = config.vocab_size;
        redraft::to_stdout(|out| {
            writeln!(
                out,
                "== {name}: {} layers, d {}, {:.1}M parameters",
                config.num_hidden_layers,
                config.hidden_size,
                config.num_parameters() as f64 / 1e6
            )
        })?;
        let torch = match &python {
            Some(py) => match torch_reference(py, dir.path(), &args.lengths, args.repeats, vocab) {
                Ok(v) => Some(v),
                Err(e) => {
                    stderr_line(format_args!("warning: no PyTorch reference: {e:#}"));
                    None
                }
            },
            None => None,
        };
        redraft::to_stdout(|out| {
            writeln!(
                out,
                "{:>6} | {:>9} {:>8} {:>6} | {:>11} {:>8} | {:>9}",
                "tokens", "redraft", "GFLOP/s", "%peak", "canvas-only", "%peak", "pytorch"
            )
        })?;
        let mut rows = vec![];
        for &len in &args.lengths {
            let ids = vec![random_ids(len, vocab, len as u64)];
            let full_ms = time_ms(args.repeats, || {
                model.forward(
                    &ids,
                    0..len,
                    &mut ContextCache::default(),
                    Pass::Full { store: false },
                )?;
                Ok(())
            })?;
            // What the product runs: logits only for a 16-slot canvas.
            let canvas = len * 3 / 4..len * 3 / 4 + CANVAS;
            let canvas_ms = time_ms(args.repeats, || {
                model.forward(
                    &ids,
                    canvas.clone(),
                    &mut ContextCache::default(),
                    Pass::Full { store: false },
                )?;
                Ok(())
            })?;
            let gflops = forward_flops(&config, len, len) / (full_ms * 1e6);
            let canvas_gflops = forward_flops(&config, len, CANVAS) / (canvas_ms * 1e6);
            let torch_ms = torch.as_ref().and_then(|t| {
                t["results"]
                    .as_array()?
                    .iter()
                    .find(|r| r["tokens"] == len)?["ms_median"]
                    .as_f64()
            });
            redraft::to_stdout(|out| {
                writeln!(
                    out,
                    "{len:>6} | {full_ms:>7.1}ms {gflops:>8.1} {:>5.0}% | {canvas_ms:>9.1}ms {:>7.0}% | {:>9}",
                    100.0 * gflops / peak,
                    100.0 * canvas_gflops / peak,
                    torch_ms.map_or("-".to_string(), |t| format!("{t:.1}ms")),
                )
            })?;
            rows.push(json!({
                "tokens": len, "redraft_full_ms": full_ms, "gflops": gflops,
                "fraction_of_peak": gflops / peak, "redraft_canvas_only_ms": canvas_ms,
                "canvas_only_fraction_of_peak": canvas_gflops / peak, "pytorch_ms": torch_ms,
            }));
        }
        // A 16-token middle at 1,024 tokens of context: 768 before, 240 after.
        let settings = DiffusionSettings {
            mask_token_id: vocab as u32 - 1,
            eos_token_id: vocab as u32 - 2,
            pad_token_id: vocab as u32 - 2,
            bos_token_id: None,
            logit_shift: true,
            edit_canvas: Default::default(),
            attention: Default::default(),
            efforts: Default::default(),
            edit_min_confidence: 0.0,
            fim_min_confidence: 0.0,
        };
        let canvas = Canvas::new(random_ids(768, vocab, 1), 16, random_ids(240, vocab, 2));
        let sampler = Sampler::new(settings, &[]);
        let seq = vec![sampler.sequence(&canvas)];
        let window = 767..784;
        let mut cache = ContextCache::default();
        model.forward(&seq, window.clone(), &mut cache, Pass::Full { store: true })?;
        let step_ms = time_ms(args.repeats, || {
            model.forward(&seq, window.clone(), &mut cache, Pass::Window)?;
            Ok(())
        })?;
        let e2e = time_middles(&model, &sampler, &canvas, args.repeats, "at 1k context")?;
        redraft::to_stdout(|out| {
            writeln!(
                out,
                "cached denoising step (16-slot window, 1k context): {step_ms:.2}ms\n"
            )
        })?;
        report.push(json!({
            "config": name, "parameters": config.num_parameters(), "forward": rows,
            "cached_step_ms": step_ms, "end_to_end": e2e, "pytorch": torch,
        }));
    }
    let completions = match fim {
        Some(cuts) => real_completions(&args, &cuts)?,
        None => serde_json::Value::Null,
    };
    let report = json!({"matmul_peak_gflops": peak, "configs": report, "completions": completions});
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// A 16-token middle of `canvas` decoded end to end, with the cache on and off: printed, and as
/// JSON rows.
fn time_middles(
    model: &Qwen2,
    sampler: &Sampler,
    canvas: &Canvas,
    repeats: usize,
    at: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut rows = vec![];
    for cached in [true, false] {
        let mut config = SamplerConfig::default();
        config.cache.enabled = cached;
        let mut last = None;
        let ms = time_ms(repeats, || {
            last = Some(sampler.run(
                model,
                &mut ContextCache::default(),
                std::slice::from_ref(canvas),
                &config,
                Controls::default(),
            )?);
            Ok(())
        })?;
        let middle = last.expect("ran at least once");
        redraft::to_stdout(|out| {
            writeln!(
                out,
                "16-token middle {at}, cache {}: {ms:.1}ms, {} forwards, {:.2} tokens/forward",
                if cached { "on " } else { "off" },
                middle.stats.forwards,
                middle.tokens_per_forward(0)
            )
        })?;
        rows.push(
            json!({"cache": cached, "ms": ms, "forwards": middle.stats.forwards,
            "tokens_per_forward": middle.tokens_per_forward(0)}),
        );
    }
    Ok(rows)
}

/// A model directory on `--device`: full and canvas-only forwards at each length its positions
/// allow, a cached 16-slot window step and a 16-token middle end to end (cache on and off), at
/// about 1k tokens of context. Each timing waits for the device to finish.
fn time_model_dir(dir: &Path, args: &Args) -> anyhow::Result<serde_json::Value> {
    let device = args.model.device.resolve()?;
    let loading = Instant::now();
    // As every command loads a model (a file no check foresaw is an error, not a panic).
    let engine = redraft_runtime::default_model::load_or_default(Some(dir), args.model.device)?;
    let load_ms = loading.elapsed().as_secs_f64() * 1e3;
    let (model, config) = (engine.model(), engine.model().config().clone());
    let vocab = config.vocab_size;
    let positions = config.max_position_embeddings;
    redraft::to_stdout(|out| {
        writeln!(
            out,
            "== {}: {} layers, d {}, {}/{} heads, ffn {}, vocab {}, {:.1}M parameters, on {device:?} (loaded in {load_ms:.0}ms)",
            dir.display(),
            config.num_hidden_layers,
            config.hidden_size,
            config.num_attention_heads,
            config.num_kv_heads(),
            config.intermediate_size,
            vocab,
            config.num_parameters() as f64 / 1e6
        )
    })?;
    let sync = || -> anyhow::Result<()> { Ok(device.synchronize()?) };
    redraft::to_stdout(|out| {
        writeln!(
            out,
            "{:>6} | {:>9} {:>9} | {:>11}",
            "tokens", "full", "GFLOP/s", "canvas-only"
        )
    })?;
    let mut rows = vec![];
    for &len in args.lengths.iter().filter(|&&len| len > positions) {
        stderr_line(format_args!(
            "bench: --lengths {len} is past the {positions} positions of {}: not timed",
            dir.display()
        ));
    }
    for &len in args.lengths.iter().filter(|&&len| len <= positions) {
        let ids = vec![random_ids(len, vocab, len as u64)];
        let pass = |logits: std::ops::Range<usize>| {
            time_ms(args.repeats, || {
                model.forward(
                    &ids,
                    logits.clone(),
                    &mut ContextCache::default(),
                    Pass::Full { store: false },
                )?;
                sync()
            })
        };
        let full_ms = pass(0..len)?;
        let canvas_ms = pass(len * 3 / 4..len * 3 / 4 + CANVAS)?;
        let gflops = forward_flops(&config, len, len) / (full_ms * 1e6);
        redraft::to_stdout(|out| {
            writeln!(
                out,
                "{len:>6} | {full_ms:>7.2}ms {gflops:>9.1} | {canvas_ms:>9.2}ms"
            )
        })?;
        rows.push(json!({"tokens": len, "full_ms": full_ms, "gflops": gflops,
            "canvas_only_ms": canvas_ms}));
    }
    // A 16-token middle at up to 1,024 tokens of context, three quarters of it before.
    let context = positions.min(1024) - 16 - usize::from(engine.settings().bos_token_id.is_some());
    let before = context * 3 / 4;
    let canvas = Canvas::new(
        random_ids(before, vocab, 1),
        16,
        random_ids(context - before, vocab, 2),
    );
    let sampler = Sampler::new(*engine.settings(), &[]);
    let seq = vec![sampler.sequence(&canvas)];
    let at = seq[0].len() - (context - before) - 16;
    let window = at - 1..at + 16;
    let mut cache = ContextCache::default();
    model.forward(&seq, window.clone(), &mut cache, Pass::Full { store: true })?;
    let step_ms = time_ms(args.repeats, || {
        model.forward(&seq, window.clone(), &mut cache, Pass::Window)?;
        sync()
    })?;
    redraft::to_stdout(|out| {
        writeln!(
            out,
            "cached denoising step (16-slot window, {} tokens): {step_ms:.2}ms",
            seq[0].len()
        )
    })?;
    let e2e = time_middles(
        model,
        &sampler,
        &canvas,
        args.repeats,
        &format!("at {} tokens", seq[0].len()),
    )?;
    redraft::to_stdout(|out| writeln!(out))?;
    Ok(json!({
        "config": dir.display().to_string(), "device": format!("{device:?}"),
        "parameters": config.num_parameters(), "load_ms": load_ms, "forward": rows,
        "context_tokens": seq[0].len(), "cached_step_ms": step_ms, "end_to_end": e2e,
    }))
}

/// The file `real_completions` cuts and its rest-of-line cuts (cursor, end of line).
struct Cuts {
    file: PathBuf,
    text: String,
    cuts: Vec<(usize, usize)>,
}

/// `--fim-file`'s rest-of-line cuts: lines after the first with some code after their
/// indentation, spread evenly over the file. A file given that cannot be read or has no such line is an error; the
/// default (this repository's sampler.rs) is skipped with a warning where the binary runs
/// without its sources.
fn rest_of_line_cuts(args: &Args) -> anyhow::Result<Option<Cuts>> {
    let file = match &args.fim_file {
        Some(file) => file.clone(),
        None => {
            let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src/sampler.rs");
            if !file.is_file() {
                stderr_line(format_args!(
                    "warning: no completions timed: {} is not here (pass --fim-file)",
                    file.display()
                ));
                return Ok(None);
            }
            file
        }
    };
    let bytes =
        std::fs::read(&file).with_context(|| format!("reading --fim-file {}", file.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--fim-file {} is not UTF-8 text", file.display()))?;
    let starts: Vec<usize> = text
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .filter(|&i| {
            text[i..]
                .lines()
                .next()
                .is_some_and(|l| l.trim().len() >= 8)
        })
        .collect();
    if starts.is_empty() {
        bail!(
            "--fim-file {}: no line (after the first) with 8 characters of code or more to cut",
            file.display()
        );
    }
    let step = (starts.len() / args.fim_cuts.max(1)).max(1);
    let cuts = starts
        .iter()
        .step_by(step)
        .take(args.fim_cuts)
        .map(|&line| {
            let indent = text[line..].len() - text[line..].trim_start_matches([' ', '\t']).len();
            let end = text[line..].find('\n').map_or(text.len(), |e| line + e);
            (line + indent, end)
        })
        .collect();
    Ok(Some(Cuts { file, text, cuts }))
}

/// Rest-of-line completions with a real model: latency, model calls and tokens per call at each
/// effort, and how often the line came out exactly (a speed report, not the eval).
fn real_completions(args: &Args, cuts: &Cuts) -> anyhow::Result<serde_json::Value> {
    let Cuts { file, text, cuts } = cuts;
    let engine = args.model.load()?;
    redraft::to_stdout(|out| {
        writeln!(
            out,
            "== real completions: {} ({} rest-of-line cuts of {})",
            engine.dir().display(),
            cuts.len(),
            file.display()
        )
    })?;
    redraft::to_stdout(|out| {
        writeln!(
            out,
            "{:>6} | {:>9} {:>9} {:>8} {:>10} {:>7}",
            "effort", "p50", "p95", "calls", "tok/call", "exact"
        )
    })?;
    let mut rows = vec![];
    for effort in [Effort::Low, Effort::Medium, Effort::High] {
        let (mut latencies, mut calls, mut slots, mut exact) = (vec![], 0, 0, 0);
        for &(cursor, end) in cuts {
            let mut request = InfillRequest::new(&text[..cursor], &text[end..]);
            request.max_tokens = 24;
            request.sampler = SamplerConfig::effort(effort);
            let started = Instant::now();
            let completion =
                engine.complete(&request, &mut ContextCache::default(), Controls::default())?;
            latencies.push(started.elapsed().as_secs_f64() * 1e3);
            calls += completion.forwards;
            slots += completion.slots;
            exact += usize::from(completion.middle.trim_end() == text[cursor..end].trim_end());
        }
        latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
        let row = json!({
            "effort": effort, "p50_ms": pct(0.5), "p95_ms": pct(0.95),
            "calls_per_completion": calls as f64 / cuts.len() as f64,
            "tokens_per_call": slots as f64 / calls.max(1) as f64,
            "exact_line": exact as f64 / cuts.len() as f64,
        });
        redraft::to_stdout(|out| {
            writeln!(
                out,
                "{:>6} | {:>7.1}ms {:>7.1}ms {:>8.1} {:>10.2} {:>6.0}%",
                format!("{effort:?}").to_lowercase(),
                pct(0.5),
                pct(0.95),
                row["calls_per_completion"].as_f64().unwrap_or(0.0),
                row["tokens_per_call"].as_f64().unwrap_or(0.0),
                100.0 * row["exact_line"].as_f64().unwrap_or(0.0),
            )
        })?;
        rows.push(row);
    }
    Ok(
        json!({"model": engine.dir().display().to_string(), "file": file.display().to_string(), "efforts": rows}),
    )
}
