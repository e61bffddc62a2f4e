//! `redraft convert`: a model (a safetensors directory, or the embedded default model in either form) written
//! as one GGUF file, its matrices in the block type asked for (`f32`, `f16`, `q8_0`, `q4_0`,
//! `q4_k`, `q5_k`, `q6_k`). A diffusion model is written as llama.cpp's `dream` architecture
//! (bidirectional, with `diffusion.shift_logits` and the mask id), so `llama-diffusion-cli`
//! and redraft both read it; a LLaDA model (`model_type` llada) as `llada`, the way llama.cpp's
//! own converter writes one; a causal one as `qwen2`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device};
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::{AttentionPattern, DiffusionSettings, ModelConfig};
use redraft_engine::engine::{load_settings, TOKENIZER_FILE};
use redraft_engine::gguf::GgufWriter;

#[derive(clap::Args)]
pub struct Args {
    /// Model directory (config.json, model.safetensors, tokenizer.json, redraft.json), or the
    /// name of a safetensors checkpoint (`hf:ORG/REPO`); default: the model compiled into
    /// redraft.
    #[arg(long)]
    model: Option<PathBuf>,
    /// The GGUF file to write.
    #[arg(long)]
    out: PathBuf,
    /// Block type of the matrices (norms and biases stay f32; a matrix whose width the blocks
    /// do not divide stays f32).
    #[arg(long = "type", default_value = "q8_0", value_parser = parse_type)]
    dtype: GgmlDType,
}

fn parse_type(s: &str) -> Result<GgmlDType, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "f32" => GgmlDType::F32,
        "f16" => GgmlDType::F16,
        "q8_0" => GgmlDType::Q8_0,
        "q4_0" => GgmlDType::Q4_0,
        "q4_k" => GgmlDType::Q4K,
        "q5_k" => GgmlDType::Q5K,
        "q6_k" => GgmlDType::Q6K,
        other => {
            return Err(format!(
                "unknown type `{other}` (f32, f16, q8_0, q4_0, q4_k, q5_k, q6_k)"
            ))
        }
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (config, settings, weights, tokenizer) = match &args.model {
        Some(model) => {
            let dir = redraft_runtime::default_model::locate(model)?;
            if dir.is_file() {
                bail!(
                    "{} is a file: `redraft convert` writes a GGUF from a safetensors model \
                     directory (config.json, model.safetensors, tokenizer.json) or `hf:ORG/REPO`; \
                     a GGUF file is already what it writes (redraft loads one with --model as it is)",
                    dir.display()
                );
            }
            read_dir(&dir)?
        }
        None => {
            let files = redraft_runtime::default_model::FILES;
            let (config, settings, weights, _) = files.read(&Device::Cpu)?;
            let tokenizer = String::from_utf8(files.tokenizer.to_vec())?;
            (config, settings, weights, tokenizer)
        }
    };
    let arch = match settings.attention {
        AttentionPattern::Bidirectional if config.model_type == "llada" => "llada",
        AttentionPattern::Bidirectional => "dream",
        AttentionPattern::Causal => "qwen2",
        AttentionPattern::Block(n) => {
            bail!("this model attends in blocks of {n}, which no llama.cpp architecture records")
        }
    };
    let writer = GgufWriter::new(
        arch,
        &config,
        &settings,
        &tokenizer,
        &weights.dense_tensors()?,
        args.dtype,
    )?;
    writer
        .write(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let bytes = std::fs::metadata(&args.out)?.len();
    eprintln!(
        "redraft convert: wrote {} ({arch}, {:?} matrices, {:.1} MB)",
        args.out.display(),
        args.dtype,
        bytes as f64 / 1e6
    );
    Ok(())
}

fn read_dir(dir: &Path) -> anyhow::Result<(ModelConfig, DiffusionSettings, Weights, String)> {
    let (config, settings) = load_settings(dir)?;
    let weights = Weights::load(dir, DType::F32, &Device::Cpu)?;
    let path = dir.join(TOKENIZER_FILE);
    let tokenizer =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok((config, settings, weights, tokenizer))
}
