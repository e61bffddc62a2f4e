//! Starting a run from a checkpoint's weights instead of random ones: redraft's own model
//! directory, a safetensors directory of another Qwen2-layout model (grouped-query attention,
//! an untied head, q/k/v biases, its own RoPE base and positions), or a GGUF file (its matrices
//! dequantized to f32, its vocabulary written out as the run's `tokenizer.json`).
//!
//! An autoregressive checkpoint (one that attends causally: a GGUF of architecture `qwen2`, or a
//! directory whose config and `redraft.json` name no mask token) is adapted to masked diffusion
//! the way Dream and Open-dCoder adapted Qwen2.5:
//!
//! - attention becomes bidirectional, unless the run asks for block-causal (or causal)
//!   attention ([`DiffusionSetup::attention`]);
//! - the logit shift stays: row j-1 scores token j, as the checkpoint's head was trained to;
//! - the mask is a token the vocabulary already has and text never produces (`<|fim_pad|>`
//!   unless the run names another), not a new row in the embeddings;
//! - a middle ends (and sequences are padded) with the checkpoint's padding id when it has one,
//!   its EOS otherwise: Qwen's `<|endoftext|>`, not the instruct model's `<|im_end|>`.
//!
//! A diffusion checkpoint (redraft's, Dream's) keeps its own ids, shift and attention unless the
//! run overrides them. Training prepends no BOS, so a diffusion checkpoint that wants one is
//! refused; an autoregressive one's BOS is dropped with its causal attention.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use super::config::{DiffusionSetup, ModelShape, TrainConfig};
use super::{checkpoint, tokens, TrainError, TrainPaths, TrainResult};
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::{AttentionPattern, DiffusionSettings, ModelConfig, RedraftJson};
use redraft_engine::engine::{CONFIG_FILE, REDRAFT_FILE, TOKENIZER_FILE};
use redraft_engine::tokenizer::Tokenizer;
use redraft_prompts::markers;

/// The mask an autoregressive Qwen-vocabulary checkpoint is adapted with when the run names
/// none (what the engine, too, masks a causal GGUF's canvas with).
pub const DEFAULT_MASK_TOKEN: &str = markers::FIM_PAD;

/// A checkpoint a run may start from, opened: its config, vocabulary and what it says about
/// diffusion.
pub struct InitCheckpoint {
    /// As given (the run records it).
    path: PathBuf,
    config: ModelConfig,
    tokenizer: Tokenizer,
    /// The `tokenizer.json` the vocabulary was read from (`None`: a GGUF's own vocabulary).
    tokenizer_file: Option<PathBuf>,
    /// What the checkpoint states beyond its config (its `redraft.json`, a GGUF's metadata).
    stated: RedraftJson,
    /// It attends causally: it is adapted rather than trained further as it is.
    autoregressive: bool,
}

/// What the run asks of the adaptation (the `redraft train` flags).
#[derive(Debug, Clone, Default)]
pub struct Adaptation {
    /// The token to mask with (its text, e.g. `<|fim_pad|>`), instead of the checkpoint's own
    /// or [`DEFAULT_MASK_TOKEN`].
    pub mask_token: Option<String>,
    /// The attention to train, instead of the checkpoint's own (a diffusion checkpoint) or
    /// bidirectional (an autoregressive one).
    pub attention: Option<AttentionPattern>,
}

impl InitCheckpoint {
    /// Opens `path`: a GGUF file, a directory holding one GGUF file and no `config.json`, or a
    /// model directory (`config.json`, safetensors weights, `tokenizer.json`, an optional
    /// `redraft.json`).
    pub fn open(path: &Path) -> TrainResult<InitCheckpoint> {
        match gguf_file(path)? {
            Some(file) => open_gguf(path, &file),
            None => open_dir(path),
        }
    }

    /// Whether the checkpoint attends causally (and is adapted).
    pub fn is_autoregressive(&self) -> bool {
        self.autoregressive
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The ids, shift and attention a run from this checkpoint trains with.
    pub fn setup(&self, adaptation: &Adaptation) -> TrainResult<DiffusionSetup> {
        let fail = |message: String| self.error(message);
        let named = adaptation
            .mask_token
            .as_deref()
            .map(|token| {
                self.tokenizer.token_to_id(token).ok_or_else(|| {
                    fail(format!(
                        "--mask-token `{token}` is not in its vocabulary: name one of its unused special tokens"
                    ))
                })
            })
            .transpose()?;
        let mut stated = self.stated.clone();
        if self.autoregressive {
            // The causal checkpoint's own guesses (see the module docs), where it says nothing.
            stated.mask_token_id = stated
                .mask_token_id
                .or(named)
                .or_else(|| self.tokenizer.token_to_id(DEFAULT_MASK_TOKEN));
            stated.logit_shift = stated.logit_shift.or(Some(true));
            stated.attention = Some(AttentionPattern::Causal);
            if stated.mask_token_id.is_none() && self.config.mask_token_id.is_none() {
                return Err(fail(format!(
                    "it names no mask token and its vocabulary has no `{DEFAULT_MASK_TOKEN}`: pass --mask-token with one of its unused special tokens"
                )));
            }
        }
        let settings = DiffusionSettings::resolve(&self.config, Some(&stated))?;
        if let (false, Some(bos)) = (self.autoregressive, settings.bos_token_id) {
            return Err(fail(format!(
                "it prepends a BOS token (id {bos}) to every canvas, which training does not do yet"
            )));
        }
        let attention = adaptation.attention.unwrap_or(if self.autoregressive {
            AttentionPattern::Bidirectional
        } else {
            settings.attention
        });
        let setup = DiffusionSetup {
            mask_id: named.unwrap_or(settings.mask_token_id),
            eos_id: settings.pad_token_id,
            logit_shift: settings.logit_shift,
            attention,
        };
        self.check_mask(&setup)?;
        Ok(setup)
    }

    /// The mask must never be what text encodes to (a user's code would put a mask on the
    /// canvas), nor a token the layout writes.
    fn check_mask(&self, setup: &DiffusionSetup) -> TrainResult<()> {
        let id = setup.mask_id;
        let name = self
            .tokenizer
            .decode(&[id])
            .unwrap_or_else(|_| format!("id {id}"));
        if id == setup.eos_id {
            return Err(self.error(format!(
                "the mask `{name}` is also its end of text: pass --mask-token with another token"
            )));
        }
        let fim = [
            markers::FIM_PREFIX,
            markers::FIM_SUFFIX,
            markers::FIM_MIDDLE,
        ];
        if setup.attention.block().is_some()
            && fim
                .iter()
                .any(|m| self.tokenizer.token_to_id(m) == Some(id))
        {
            return Err(self.error(format!(
                "the mask `{name}` lays out fill-in-the-middle prompts for a causal or block-causal model: pass --mask-token with another token"
            )));
        }
        if self.tokenizer.encode(&name)? == [id] {
            return Err(self.error(format!(
                "text encodes to the mask `{name}`: pass --mask-token with a special token of its vocabulary"
            )));
        }
        Ok(())
    }

    /// The settings of a run from this checkpoint: its shape, positions and vocabulary, the
    /// [`InitCheckpoint::setup`] of `adaptation`, the rest defaults.
    pub fn train_config(&self, adaptation: &Adaptation) -> TrainResult<TrainConfig> {
        let model = &self.config;
        if model.head_dim() * model.num_attention_heads != model.hidden_size {
            return Err(self.error(format!(
                "its head size {} times {} heads is not its hidden size {}: training needs head size = hidden / heads",
                model.head_dim(),
                model.num_attention_heads,
                model.hidden_size
            )));
        }
        if self.tokenizer.vocab_size() > model.vocab_size {
            return Err(self.error(format!(
                "its tokenizer has {} tokens, more than its {} embeddings",
                self.tokenizer.vocab_size(),
                model.vocab_size
            )));
        }
        let mut config = TrainConfig {
            model: ModelShape {
                vocab_size: model.vocab_size,
                layers: model.num_hidden_layers,
                hidden: model.hidden_size,
                heads: model.num_attention_heads,
                kv_heads: model.num_kv_heads(),
                ffn: model.intermediate_size,
                rope_theta: model.rope_theta(),
                rms_norm_eps: model.rms_norm_eps,
                tied_head: model.tie_word_embeddings,
                max_positions: Some(model.max_position_embeddings),
            },
            diffusion: self.setup(adaptation)?,
            init: Some(self.path.clone()),
            ..TrainConfig::default()
        };
        // A model's context is usually longer than the default training length.
        config.data.seq_len = config.data.seq_len.min(model.max_position_embeddings);
        Ok(config)
    }

    /// Writes the run's `tokenizer.json` (the checkpoint's, or a GGUF's vocabulary) into
    /// `paths.out` and returns it as read back. Refuses an output directory that already holds
    /// a checkpoint, before writing anything.
    pub fn write_tokenizer(&self, paths: &TrainPaths) -> TrainResult<Tokenizer> {
        checkpoint::refuse_existing(&paths.out)?;
        std::fs::create_dir_all(&paths.out).map_err(|e| TrainError::write(&paths.out, e))?;
        let dest = paths.tokenizer();
        match &self.tokenizer_file {
            Some(file) => {
                let bytes = std::fs::read(file).map_err(|e| TrainError::read(file, e))?;
                tokens::write_atomic(&dest, &bytes)?;
            }
            None => {
                let tmp = tokens::temp_sibling(&dest);
                self.tokenizer.save(&tmp)?;
                std::fs::rename(&tmp, &dest).map_err(|e| TrainError::write(&dest, e))?;
            }
        }
        Ok(Tokenizer::load(&dest)?)
    }

    fn error(&self, message: String) -> TrainError {
        TrainError::Init {
            path: self.path.clone(),
            message,
        }
    }
}

fn open_gguf(path: &Path, file: &Path) -> TrainResult<InitCheckpoint> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let tokenizer_file = Some(dir.join(TOKENIZER_FILE)).filter(|p| p.exists());
    let gguf = redraft_engine::gguf::load(
        file,
        tokenizer_file.as_deref(),
        &Device::Cpu,
        redraft_engine::gguf::Tensors::Read,
    )?;
    // As the engine loads a GGUF: a `redraft.json` beside it wins over what it infers.
    let extra = read_redraft(dir)?.unwrap_or_default();
    let inferred = gguf.stated;
    let stated = RedraftJson {
        mask_token_id: extra.mask_token_id.or(inferred.mask_token_id),
        logit_shift: extra.logit_shift.or(inferred.logit_shift),
        attention: extra.attention.or(inferred.attention),
        ..extra
    };
    let autoregressive = stated.attention == Some(AttentionPattern::Causal);
    Ok(InitCheckpoint {
        path: path.to_path_buf(),
        config: gguf.config,
        tokenizer: gguf.tokenizer,
        tokenizer_file,
        stated,
        autoregressive,
    })
}

fn open_dir(dir: &Path) -> TrainResult<InitCheckpoint> {
    let config = ModelConfig::load(&dir.join(CONFIG_FILE))?;
    let stated = read_redraft(dir)?.unwrap_or_default();
    let tokenizer_file = dir.join(TOKENIZER_FILE);
    let tokenizer = Tokenizer::load(&tokenizer_file)?;
    // A checkpoint that was never a masked model states no mask token.
    let autoregressive = stated.attention == Some(AttentionPattern::Causal)
        || (config.mask_token_id.is_none() && stated.mask_token_id.is_none());
    Ok(InitCheckpoint {
        path: dir.to_path_buf(),
        config,
        tokenizer,
        tokenizer_file: Some(tokenizer_file),
        stated,
        autoregressive,
    })
}

fn read_redraft(dir: &Path) -> TrainResult<Option<RedraftJson>> {
    let path = dir.join(REDRAFT_FILE);
    Ok(if path.exists() {
        Some(RedraftJson::load(&path)?)
    } else {
        None
    })
}

/// The GGUF file `path` names: the file itself, or the one `.gguf` in a directory without a
/// `config.json` (as `redraft_engine::Engine::load` reads a path).
fn gguf_file(path: &Path) -> TrainResult<Option<PathBuf>> {
    if path.is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    if !path.is_dir() || path.join(CONFIG_FILE).exists() {
        return Ok(None);
    }
    let found: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| TrainError::read(path, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        _ => Err(TrainError::Init {
            path: path.to_path_buf(),
            message: format!(
                "it holds {} GGUF files: name the one to start from",
                found.len()
            ),
        }),
    }
}

/// The weights of the checkpoint at `path` for a model of `config`: every tensor the training
/// model has, in f32 (a GGUF's quantized blocks dequantized), its shape checked, so a
/// checkpoint of another shape or layout is an error naming the tensor (under the file's own
/// name: `blk.0.attn_k.weight` in a GGUF). Tensors the model does not use are left out.
pub fn load_weights(path: &Path, config: &ModelConfig) -> TrainResult<HashMap<String, Tensor>> {
    let weights = match gguf_file(path)? {
        Some(file) => {
            redraft_engine::gguf::load(
                &file,
                None,
                &Device::Cpu,
                redraft_engine::gguf::Tensors::Read,
            )?
            .weights
        }
        None => Weights::load(path, DType::F32, &Device::Cpu)?,
    };
    expected_tensors(config)
        .into_iter()
        .map(|(name, shape)| {
            let tensor = weights.get(&name, &shape)?;
            Ok((name, tensor))
        })
        .collect()
}

/// Every tensor of the training model of `config`, with its shape (the names and shapes
/// [`super::model::TrainModel::from_tensors`] takes).
pub fn expected_tensors(config: &ModelConfig) -> Vec<(String, Vec<usize>)> {
    let (d, v, ffn) = (
        config.hidden_size,
        config.vocab_size,
        config.intermediate_size,
    );
    let hd = config.head_dim();
    let (q, kv) = (config.num_attention_heads * hd, config.num_kv_heads() * hd);
    let mut out = vec![
        ("model.embed_tokens.weight".to_string(), vec![v, d]),
        ("model.norm.weight".to_string(), vec![d]),
    ];
    if !config.tie_word_embeddings {
        out.push(("lm_head.weight".to_string(), vec![v, d]));
    }
    for i in 0..config.num_hidden_layers {
        for (name, shape) in [
            ("input_layernorm.weight", vec![d]),
            ("self_attn.q_proj.weight", vec![q, d]),
            ("self_attn.k_proj.weight", vec![kv, d]),
            ("self_attn.v_proj.weight", vec![kv, d]),
            ("self_attn.q_proj.bias", vec![q]),
            ("self_attn.k_proj.bias", vec![kv]),
            ("self_attn.v_proj.bias", vec![kv]),
            ("self_attn.o_proj.weight", vec![d, q]),
            ("post_attention_layernorm.weight", vec![d]),
            ("mlp.gate_proj.weight", vec![ffn, d]),
            ("mlp.up_proj.weight", vec![ffn, d]),
            ("mlp.down_proj.weight", vec![d, ffn]),
        ] {
            out.push((format!("model.layers.{i}.{name}"), shape));
        }
    }
    out
}
