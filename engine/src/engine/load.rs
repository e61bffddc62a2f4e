//! Loading: a model directory (safetensors and JSON), a GGUF file, or files already in memory
//! (the embedded model) become an [`Engine`]; [`inspect`] reads what a checkpoint is without
//! building the model.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device};

use super::{Engine, CONFIG_FILE, REDRAFT_FILE, TOKENIZER_FILE};
use crate::checkpoint::{Weights, WeightsFormat, WeightsSummary};
use crate::config::{DiffusionSettings, ModelConfig, RedraftJson};
use crate::edit::EditFormat;
use crate::error::{Error, Result};
use crate::prompt::FimLayout;
use crate::qwen2::Qwen2;
use crate::tokenizer::Tokenizer;

/// The files of a model compiled into the binary (the embedded default model).
#[derive(Debug, Clone, Copy)]
pub struct ModelFiles {
    /// Where the files came from (a directory, named in error messages).
    pub origin: &'static str,
    pub weights: WeightsFile,
    /// `redraft.json`: the diffusion settings, as beside a model directory's weights.
    pub redraft: Option<&'static str>,
    /// `tokenizer.json` (for a GGUF file: it replaces the file's vocabulary).
    pub tokenizer: &'static [u8],
}

/// The weights of a [`ModelFiles`], in either form a model directory holds them.
#[derive(Debug, Clone, Copy)]
pub enum WeightsFile {
    /// `config.json` and one `model.safetensors` (f32/f16/bf16).
    Safetensors {
        config: &'static str,
        weights: &'static [u8],
    },
    /// One GGUF file (`model.gguf`): the config is its metadata, and its tensors (quantized
    /// ones too) are read in place, as from a map: its first byte aligned to
    /// [`crate::gguf::STATIC_ALIGNMENT`].
    Gguf(&'static [u8]),
}

impl ModelFiles {
    /// Bytes in all.
    pub fn size(&self) -> usize {
        let weights = match self.weights {
            WeightsFile::Safetensors { weights, .. } => weights.len(),
            WeightsFile::Gguf(bytes) => bytes.len(),
        };
        weights + self.beside_weights()
    }

    /// Bytes of the files read with the weights: the config (a GGUF's is its metadata),
    /// `redraft.json` and `tokenizer.json`.
    fn beside_weights(&self) -> usize {
        let config = match self.weights {
            WeightsFile::Safetensors { config, .. } => config.len(),
            WeightsFile::Gguf(_) => 0,
        };
        config + self.redraft.map_or(0, str::len) + self.tokenizer.len()
    }

    /// `safetensors` or `gguf`.
    pub fn format(&self) -> &'static str {
        self.weights_format().name()
    }

    fn weights_format(&self) -> WeightsFormat {
        match self.weights {
            WeightsFile::Safetensors { .. } => WeightsFormat::Safetensors,
            WeightsFile::Gguf(_) => WeightsFormat::Gguf,
        }
    }

    /// The config, settings, weights (f32, or a GGUF's blocks as stored) and tokenizer, read
    /// as [`Engine::from_files_on`] reads them; errors name the files as if they sat in
    /// `origin`.
    pub fn read(
        &self,
        device: &Device,
    ) -> Result<(ModelConfig, DiffusionSettings, Weights, Tokenizer)> {
        let dir = Path::new(self.origin);
        let extra = self
            .redraft
            .map(|text| RedraftJson::parse(text, &dir.join(REDRAFT_FILE)))
            .transpose()?;
        let tokenizer = Tokenizer::from_bytes(self.tokenizer, &dir.join(TOKENIZER_FILE))?;
        match self.weights {
            WeightsFile::Safetensors { config, weights } => {
                let config = ModelConfig::parse(config, &dir.join(CONFIG_FILE))?;
                let settings = DiffusionSettings::resolve(&config, extra.as_ref())?;
                let weights = Weights::from_safetensors_bytes(
                    weights,
                    &dir.join(crate::checkpoint::SINGLE_FILE),
                    DType::F32,
                    device,
                )?;
                Ok((config, settings, weights, tokenizer))
            }
            WeightsFile::Gguf(bytes) => {
                let file = dir.join(GGUF_FILE);
                let checkpoint = crate::gguf::from_static(bytes, &file, Some(tokenizer), device)?;
                gguf_parts(checkpoint, extra.unwrap_or_default())
            }
        }
    }
}

/// What a model directory's one GGUF file is called when it is compiled in ([`WeightsFile::Gguf`]).
pub const GGUF_FILE: &str = "model.gguf";

impl Engine {
    /// Loads `config.json`, `redraft.json` (if present), the weights and `tokenizer.json`, to
    /// run on the CPU.
    pub fn load(dir: &Path) -> Result<Engine> {
        Engine::load_on(dir, &Device::Cpu)
    }

    /// [`Engine::load`] onto `device` (see [`crate::DeviceSpec`]). `dir` may also be a GGUF
    /// file, or a directory holding one GGUF file and no `config.json` ([`Engine::load_gguf`]).
    pub fn load_on(dir: &Path, device: &Device) -> Result<Engine> {
        if let Some(file) = gguf_in(dir)? {
            return Engine::load_gguf(&file, device);
        }
        let (config, settings) = load_settings(dir)?;
        let weights = Weights::load(dir, DType::F32, device)?;
        let tokenizer = Tokenizer::load(&dir.join(TOKENIZER_FILE))?;
        let summary = weights.tally().summary(
            WeightsFormat::Safetensors,
            file_bytes(dir, &[CONFIG_FILE, REDRAFT_FILE, TOKENIZER_FILE]),
        );
        Engine::assemble(dir, config, settings, &weights, summary, tokenizer, device)
    }

    /// A GGUF file onto `device`: config, settings and vocabulary from its metadata, quantized
    /// weights kept quantized ([`crate::gguf`]). A `redraft.json` beside the file supplies or
    /// overrides the diffusion settings (the mask id, the logit shift, the attention pattern);
    /// a `tokenizer.json` beside it replaces the file's vocabulary.
    pub fn load_gguf(file: &Path, device: &Device) -> Result<Engine> {
        let (config, settings, weights, tokenizer) =
            read_gguf(file, device, crate::gguf::Tensors::Read)?;
        // Its config is its metadata: a `config.json` beside it is not read, so not counted.
        let summary = weights.tally().summary(
            WeightsFormat::Gguf,
            file_bytes(beside(file), &[REDRAFT_FILE, TOKENIZER_FILE]),
        );
        Engine::assemble(file, config, settings, &weights, summary, tokenizer, device)
    }

    /// A model whose files are compiled into the binary (the default model); errors name the
    /// files as if they sat in `files.origin`.
    pub fn from_files(files: &ModelFiles) -> Result<Engine> {
        Engine::from_files_on(files, &Device::Cpu)
    }

    /// [`Engine::from_files`] onto `device`.
    pub fn from_files_on(files: &ModelFiles, device: &Device) -> Result<Engine> {
        let (config, settings, weights, tokenizer) = files.read(device)?;
        let summary = weights
            .tally()
            .summary(files.weights_format(), files.beside_weights() as u64);
        Engine::assemble(
            Path::new(files.origin),
            config,
            settings,
            &weights,
            summary,
            tokenizer,
            device,
        )
    }

    fn assemble(
        dir: &Path,
        config: ModelConfig,
        settings: DiffusionSettings,
        weights: &Weights,
        summary: WeightsSummary,
        tokenizer: Tokenizer,
        device: &Device,
    ) -> Result<Engine> {
        // Every id the tokenizer can produce needs a row of the model's embedding and logits.
        // A tokenizer with more tokens than the model, or with an id past its rows (ids may
        // be sparse), belongs to another model; checked before the model is built.
        let foreign = |message: String| Error::Tokenizer {
            path: tokenizer.origin().to_path_buf(),
            message: format!("{message}: the tokenizer does not belong to this model"),
        };
        if tokenizer.vocab_size() > config.vocab_size {
            return Err(foreign(format!(
                "{} tokens, more than the model's vocab_size {}",
                tokenizer.vocab_size(),
                config.vocab_size
            )));
        }
        if let Some((id, token)) = tokenizer
            .largest_id()
            .filter(|&(id, _)| id as usize >= config.vocab_size)
        {
            return Err(foreign(format!(
                "token `{token}` has id {id}, past the model's vocab_size {} (ids 0 to {})",
                config.vocab_size,
                config.vocab_size.saturating_sub(1)
            )));
        }
        let model = Qwen2::new(&config, weights, device)?.with_attention(settings.attention);
        let edit_format = EditFormat::of(&tokenizer, settings.attention).ok();
        // An autoregressive checkpoint ends a file it writes with `<|file_sep|>`: an end of the
        // middle like EOS (a next edit's rewritten window ends there; so may an infill).
        let also_end = match edit_format {
            Some(EditFormat::Sweep { file_sep }) => Some(file_sep),
            _ => None,
        };
        let mut banned = tokenizer.special().to_vec();
        for id in [settings.eos_token_id, settings.pad_token_id]
            .into_iter()
            .chain(also_end)
        {
            if let Some(slot) = banned.get_mut(id as usize) {
                *slot = false;
            }
        }
        Ok(Engine {
            model,
            edit_format,
            also_end,
            layout: FimLayout::for_model(settings.attention, &tokenizer),
            tokenizer,
            settings,
            banned,
            dir: dir.to_path_buf(),
            weights: summary,
        })
    }
}

/// The directory a GGUF file's `redraft.json` and `tokenizer.json` are read from.
fn beside(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new("."))
}

/// Bytes of the files `names` in `dir` that are there (sizes of files the load has just read,
/// for [`WeightsSummary::model_file_bytes`]; an optional one absent counts 0).
fn file_bytes(dir: &Path, names: &[&str]) -> u64 {
    names
        .iter()
        .map(|name| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len()))
        .sum()
}

/// The GGUF file `path` names: the file itself, or the one `.gguf` (a split one's first part)
/// in a directory without safetensors weights. `None` for a safetensors model directory; an error for a path that is
/// neither a model directory nor a GGUF file (none at all, or another kind of file).
fn gguf_in(path: &Path) -> Result<Option<PathBuf>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(Error::io(path, e)),
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) if !meta.is_file() => {
            return Err(Error::NotAModel {
                path: path.to_path_buf(),
            })
        }
        Ok(_) => {
            if crate::gguf::is_gguf(path) {
                return Ok(Some(path.to_path_buf()));
            }
            if path.extension().is_some_and(|e| e == "gguf") {
                return Err(Error::CorruptGguf {
                    path: path.to_path_buf(),
                    message: "it does not start with the GGUF magic bytes".into(),
                });
            }
            return Err(Error::NotAModel {
                path: path.to_path_buf(),
            });
        }
    }
    // A safetensors checkpoint's weights win; without them, a GGUF beside its config.json (a
    // checkpoint converted in place) is the model, not "model.safetensors is missing".
    let safetensors = [
        crate::checkpoint::SINGLE_FILE,
        crate::checkpoint::INDEX_FILE,
    ];
    if safetensors.iter().any(|file| path.join(file).exists()) {
        return Ok(None);
    }
    // A split file's later parts are read with its first (`gguf::split`).
    let later_part =
        |p: &Path| crate::gguf::split::part_name(p).is_some_and(|(_, part, _)| part > 1);
    let mut found: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io(path, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gguf") && !later_part(p))
        .collect();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        count => Err(Error::SeveralGgufs {
            path: path.to_path_buf(),
            count,
        }),
    }
}

/// A GGUF file's config, settings, weights (still in the file's map) and vocabulary: the
/// metadata's, with a `redraft.json` beside the file supplying or overriding the diffusion
/// settings and a `tokenizer.json` beside it replacing the vocabulary.
fn read_gguf(
    file: &Path,
    device: &Device,
    tensors: crate::gguf::Tensors,
) -> Result<(ModelConfig, DiffusionSettings, Weights, Tokenizer)> {
    let dir = beside(file);
    let tokenizer_json = Some(dir.join(TOKENIZER_FILE)).filter(|p| p.exists());
    let checkpoint = crate::gguf::load(file, tokenizer_json.as_deref(), device, tensors)?;
    let extra_path = dir.join(REDRAFT_FILE);
    let extra = if extra_path.exists() {
        RedraftJson::load(&extra_path)?
    } else {
        RedraftJson::default()
    };
    gguf_parts(checkpoint, extra)
}

/// A GGUF checkpoint's config, settings, weights and vocabulary, with `extra` (a
/// `redraft.json`) merged into what its metadata states.
fn gguf_parts(
    mut checkpoint: crate::gguf::GgufCheckpoint,
    extra: RedraftJson,
) -> Result<(ModelConfig, DiffusionSettings, Weights, Tokenizer)> {
    // What redraft.json says wins over what the engine infers for a file that does not say
    // (an autoregressive checkpoint's causal attention and mask), and over the ids the
    // metadata states (`tokenizer.ggml.*_token_id`): a file is not edited as a config.json
    // is, so the file beside it is where a user corrects one. (A model directory's config.json
    // and redraft.json that disagree are an error instead: both are the user's to edit.)
    let config = &mut checkpoint.config;
    config.mask_token_id = extra.mask_token_id.or(config.mask_token_id);
    if let Some(id) = extra.eos_token_id {
        config.eos_token_id = Some(crate::config::TokenIds::One(id));
    }
    config.pad_token_id = extra.pad_token_id.or(config.pad_token_id);
    config.bos_token_id = extra.bos_token_id.or(config.bos_token_id);
    let stated = checkpoint.stated;
    let merged = RedraftJson {
        mask_token_id: extra.mask_token_id.or(stated.mask_token_id),
        eos_token_id: extra.eos_token_id,
        pad_token_id: extra.pad_token_id,
        bos_token_id: extra.bos_token_id,
        logit_shift: extra.logit_shift.or(stated.logit_shift),
        edit_canvas: extra.edit_canvas,
        attention: extra.attention.or(stated.attention),
        efforts: extra.efforts,
        edit_min_confidence: extra.edit_min_confidence,
        fim_min_confidence: extra.fim_min_confidence,
    };
    let settings = DiffusionSettings::resolve(&checkpoint.config, Some(&merged))?;
    Ok((
        checkpoint.config,
        settings,
        checkpoint.weights,
        checkpoint.tokenizer,
    ))
}

/// What a checkpoint is, read from its config, settings and vocabulary without building the
/// model (`redraft models`): how it attends, how it reads a FIM request and a next edit.
#[derive(Debug, Clone)]
pub struct ModelSummary {
    pub config: ModelConfig,
    pub settings: DiffusionSettings,
    pub layout: FimLayout,
    /// How it reads a next edit, or why it cannot make one.
    pub edit_format: std::result::Result<EditFormat, String>,
}

/// [`ModelSummary`] of what [`Engine::load`] would load from `path` (a model directory, a GGUF
/// file, or a directory holding one); an error says why it would not load, as loading would.
pub fn inspect(path: &Path) -> Result<ModelSummary> {
    let (config, settings, tokenizer) = match gguf_in(path)? {
        Some(file) => {
            // The header, the tensors' extents and the vocabulary; no tensor is read.
            let (config, settings, _none, tokenizer) =
                read_gguf(&file, &Device::Cpu, crate::gguf::Tensors::Checked)?;
            (config, settings, tokenizer)
        }
        None => {
            let (config, settings) = load_settings(path)?;
            let tokenizer = Tokenizer::load(&path.join(TOKENIZER_FILE))?;
            (config, settings, tokenizer)
        }
    };
    Ok(ModelSummary {
        layout: FimLayout::for_model(settings.attention, &tokenizer),
        edit_format: EditFormat::of(&tokenizer, settings.attention).map_err(|e| e.to_string()),
        config,
        settings,
    })
}

/// Reads `config.json` and resolves the diffusion settings with `redraft.json`.
pub fn load_settings(dir: &Path) -> Result<(ModelConfig, DiffusionSettings)> {
    let config = ModelConfig::load(&dir.join(CONFIG_FILE))?;
    let extra_path = dir.join(REDRAFT_FILE);
    let extra = if extra_path.exists() {
        Some(RedraftJson::load(&extra_path)?)
    } else {
        None
    };
    let settings = DiffusionSettings::resolve(&config, extra.as_ref())?;
    Ok((config, settings))
}
