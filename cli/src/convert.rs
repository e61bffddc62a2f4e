//! `redraft convert`: a model (a safetensors directory, or the embedded default model in either form) written
//! as one GGUF file, its matrices in the block type asked for (`f32`, `f16`, `q8_0`, `q4_0`,
//! `q4_k`, `q5_k`, `q6_k`). A diffusion model is written as llama.cpp's `dream` architecture
//! (bidirectional, with `diffusion.shift_logits` and the mask id), so `llama-diffusion-cli`
//! and redraft both read it; a LLaDA model (`model_type` llada) as `llada`, the way llama.cpp's
//! own converter writes one; a causal one as `qwen2`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device};
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::{AttentionPattern, DiffusionSettings, ModelConfig};
use redraft_engine::engine::{load_settings, TOKENIZER_FILE};
use redraft_engine::gguf::{type_name, GgufWriter};
use redraft_runtime::stderr_line;

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
    /// Block type of the matrices: q8_0, q4_0, q4_k, q5_k, q6_k, f16 or f32 (norms and biases
    /// stay f32; a matrix whose width the blocks do not divide stays f32).
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
    // Before the model is read (a big one takes minutes to quantize): a place that cannot be
    // written is said at once.
    check_out(&args.out)?;
    let (config, settings, weights, tokenizer) = match &args.model {
        Some(model) => {
            let dir = redraft_runtime::default_model::locate(model)?;
            if !dir.exists() {
                bail!("no such file or directory: {}", dir.display());
            }
            if dir.is_dir() {
                check_out_is_not_the_models(&args.out, &dir)?;
            }
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
    let mut writer = GgufWriter::new(
        arch,
        &config,
        &settings,
        &tokenizer,
        &weights.dense_tensors()?,
        args.dtype,
    )?;
    let matrices = matrix_types(writer.tensors_mut());
    writer
        .write(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let bytes = std::fs::metadata(&args.out)?.len();
    // Said when all is done: a stderr that cannot take it (2>/dev/full) changes nothing.
    stderr_line(format_args!(
        "redraft convert: wrote {} ({arch}, {:.1} MB): {}",
        args.out.display(),
        bytes as f64 / 1e6,
        describe_matrices(args.dtype, &matrices)
    ));
    Ok(())
}

/// How many matrices (rank-2 tensors: norms and biases are always f32) each block type got.
fn matrix_types(tensors: &[(String, QTensor)]) -> Vec<(GgmlDType, usize)> {
    let mut counts: Vec<(GgmlDType, usize)> = Vec::new();
    for (_, tensor) in tensors.iter().filter(|(_, t)| t.shape().rank() == 2) {
        match counts
            .iter_mut()
            .find(|(dtype, _)| *dtype == tensor.dtype())
        {
            Some((_, n)) => *n += 1,
            None => counts.push((tensor.dtype(), 1)),
        }
    }
    counts
}

/// `15 matrices Q8_0`, or, when the asked type's blocks do not divide some matrices' width
/// (the writer keeps those in f32), `2 of 15 matrices Q4_K, 13 F32 (...)`: a file that may be
/// bigger than an F16 one, which says why.
fn describe_matrices(asked: GgmlDType, counts: &[(GgmlDType, usize)]) -> String {
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let got = counts
        .iter()
        .find(|(dtype, _)| *dtype == asked)
        .map_or(0, |(_, n)| *n);
    if got == total {
        return format!("{total} matrices {}", type_name(asked));
    }
    let others: Vec<String> = counts
        .iter()
        .filter(|(dtype, _)| *dtype != asked)
        .map(|(dtype, n)| format!("{n} {}", type_name(*dtype)))
        .collect();
    format!(
        "{got} of {total} matrices {}, {} (widths that {}'s {}-value blocks do not divide stay \
         F32)",
        type_name(asked),
        others.join(", "),
        type_name(asked),
        asked.block_size()
    )
}

/// `--out` must name a file that can be written: an existing one is replaced (the GGUF is
/// written beside it and renamed over it), so a directory, a device or a pipe is refused rather
/// than replaced, and a missing directory is said as such rather than as a temporary file's.
fn check_out(out: &Path) -> anyhow::Result<()> {
    if out.file_name().is_none() {
        bail!(
            "cannot write {}: --out must name a file (like model-q8_0.gguf)",
            out.display()
        );
    }
    if let Ok(meta) = std::fs::metadata(out) {
        if meta.is_dir() {
            bail!(
                "cannot write {}: it is a directory; name the file to write (like --out {})",
                out.display(),
                out.join("model.gguf").display()
            );
        }
        if !meta.is_file() {
            bail!(
                "cannot write {}: it is not a regular file (a device, a pipe or a socket), and \
                 `redraft convert` replaces --out with the file it writes; name a file",
                out.display()
            );
        }
    }
    let parent = parent_dir(out);
    match std::fs::metadata(parent) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => bail!(
            "cannot write {}: {} is not a directory",
            out.display(),
            parent.display()
        ),
        Err(_) => bail!(
            "cannot write {}: the directory {} does not exist; create it first (mkdir -p {})",
            out.display(),
            parent.display(),
            parent.display()
        ),
    }
}

/// The directory `out` is written in (`.` for a bare file name).
fn parent_dir(out: &Path) -> &Path {
    match out.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// An `--out` inside the model's own directory must not replace a file of the model (its
/// weights, config or tokenizer): the conversion would destroy what it converts. A GGUF
/// there is fine (convert never reads one).
fn check_out_is_not_the_models(out: &Path, model: &Path) -> anyhow::Result<()> {
    let Some(name) = out.file_name() else {
        return Ok(());
    };
    let parent = parent_dir(out);
    // The link itself, not what it points to: a hub snapshot's files are links into blobs/.
    let (Ok(parent), Ok(model)) = (std::fs::canonicalize(parent), std::fs::canonicalize(model))
    else {
        return Ok(());
    };
    let target = parent.join(name);
    let is_gguf = target
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if target.starts_with(&model) && target.symlink_metadata().is_ok() && !is_gguf {
        bail!(
            "cannot write {}: it is a file of the model being converted ({}), which the GGUF \
             would replace; write the GGUF under another name (like model-q8_0.gguf)",
            out.display(),
            model.display()
        );
    }
    Ok(())
}

fn read_dir(dir: &Path) -> anyhow::Result<(ModelConfig, DiffusionSettings, Weights, String)> {
    let (config, settings) = load_settings(dir)?;
    // Read as the engine reads it, so a missing or broken tokenizer is said as a load says it,
    // before the weights are read.
    let path = dir.join(TOKENIZER_FILE);
    redraft_engine::tokenizer::Tokenizer::load(&path)?;
    let weights = Weights::load(dir, DType::F32, &Device::Cpu)?;
    let tokenizer =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok((config, settings, weights, tokenizer))
}
