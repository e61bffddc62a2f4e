//! Model and diffusion settings, read from a Hugging Face model directory.
//!
//! `config.json` is mirrored by [`ModelConfig`] (the Qwen2 layout that Dream, Dream-Coder,
//! DiffuCoder, DreamOn and Open-dCoder ship in). The diffusion settings (mask, EOS, pad, BOS ids
//! and the logit shift) come from `config.json` where the checkpoint states them and otherwise
//! from a small `redraft.json` beside it; [`DiffusionSettings::resolve`] merges the two and
//! rejects anything missing or contradictory.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Architectures this engine runs, by `config.json`'s `model_type`.
const SUPPORTED_MODEL_TYPES: &[&str] = &["qwen2", "Dream"];

/// A token id or a list of them (`eos_token_id` is a list in some checkpoints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    fn first(&self) -> Option<u32> {
        match self {
            TokenIds::One(id) => Some(*id),
            TokenIds::Many(ids) => ids.first().copied(),
        }
    }
}

/// `rope_parameters` as written by transformers 5 (older checkpoints use `rope_theta` and
/// `rope_scaling` at the top level).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RopeParameters {
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_type: Option<String>,
}

/// Mirror of a Qwen2-style `config.json`; unknown keys are ignored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelConfig {
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_parameters: Option<RopeParameters>,
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default = "default_rms_eps")]
    pub rms_norm_eps: f64,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default)]
    pub mask_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<TokenIds>,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
}

fn default_max_positions() -> usize {
    32768
}
fn default_rms_eps() -> f64 {
    1e-6
}
fn default_act() -> String {
    "silu".to_string()
}

impl ModelConfig {
    /// Reads and validates `config.json`.
    pub fn load(path: &Path) -> Result<ModelConfig> {
        let config: ModelConfig = read_json(path, "the model config")?;
        config.validate(path)?;
        Ok(config)
    }

    /// Parses and validates `config.json` text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<ModelConfig> {
        let config: ModelConfig = parse_json(text, path, "the model config")?;
        config.validate(path)?;
        Ok(config)
    }

    pub fn num_kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn head_dim(&self) -> usize {
        // 0 heads gives 0 here rather than a division by zero; `validate` rejects both.
        self.head_dim.unwrap_or(
            self.hidden_size
                .checked_div(self.num_attention_heads)
                .unwrap_or(0),
        )
    }

    pub fn rope_theta(&self) -> f64 {
        self.rope_parameters
            .as_ref()
            .and_then(|p| p.rope_theta)
            .or(self.rope_theta)
            .unwrap_or(10_000.0)
    }

    /// Number of parameters, counting a tied head once.
    pub fn num_parameters(&self) -> usize {
        let (d, hd) = (self.hidden_size, self.head_dim());
        let (q, kv) = (self.num_attention_heads * hd, self.num_kv_heads() * hd);
        let attn = d * (q + 2 * kv) + (q + 2 * kv) + q * d;
        let mlp = 3 * d * self.intermediate_size;
        let layer = attn + mlp + 2 * d;
        let embed = self.vocab_size * d;
        let head = if self.tie_word_embeddings { 0 } else { embed };
        embed + head + d + self.num_hidden_layers * layer
    }

    pub(crate) fn validate(&self, path: &Path) -> Result<()> {
        let unsupported = |message: String| Error::UnsupportedConfig {
            path: path.to_path_buf(),
            message,
        };
        if !SUPPORTED_MODEL_TYPES.contains(&self.model_type.as_str()) {
            return Err(unsupported(format!(
                "model_type `{}` (supported: {})",
                self.model_type,
                SUPPORTED_MODEL_TYPES.join(", ")
            )));
        }
        if self.hidden_act != "silu" {
            return Err(unsupported(format!(
                "hidden_act `{}` (only silu is supported)",
                self.hidden_act
            )));
        }
        let rope_type = self
            .rope_parameters
            .as_ref()
            .and_then(|p| p.rope_type.as_deref());
        if let Some(rope_type) = rope_type.filter(|&t| t != "default") {
            return Err(unsupported(format!(
                "rope_parameters.rope_type `{rope_type}` (only default RoPE is supported)"
            )));
        }
        if let Some(scaling) = self.rope_scaling.as_ref().filter(|s| !s.is_null()) {
            return Err(unsupported(format!(
                "rope_scaling {scaling} (only default RoPE is supported; remove it or set it to null)"
            )));
        }
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_kv_heads()),
            ("head_dim", self.head_dim()),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(unsupported(format!("{name} is 0")));
        }
        if !self.num_attention_heads.is_multiple_of(self.num_kv_heads()) {
            return Err(unsupported(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.num_attention_heads,
                self.num_kv_heads()
            )));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(unsupported(format!(
                "head_dim {} is odd; RoPE needs an even head_dim",
                self.head_dim()
            )));
        }
        Ok(())
    }
}

/// `redraft.json`: the diffusion settings a checkpoint's own config does not state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedraftJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos_token_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_shift: Option<bool>,
    /// How the model was trained to see a next edit's canvas: `masked` (the default) or
    /// `draft` (uncommitted slots show the old region's token at that slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_canvas: Option<EditCanvas>,
    /// Which keys a position attends to (default: the checkpoint's own, else bidirectional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionPattern>,
}

/// Which keys each position attends to.
///
/// Masked-diffusion models (Dream, LLaDA) are bidirectional; block-diffusion models (SDAR,
/// Fast-dLLM v2) attend causally between blocks of `n` positions and fully within one, so the
/// blocks before a canvas block are exact cache; an autoregressive checkpoint is the case
/// `n = 1` (`causal`). Blocks are counted from position 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionPattern {
    #[default]
    Bidirectional,
    /// Block-causal with blocks of this many positions.
    Block(usize),
    /// Every position sees itself and the ones before it (blocks of 1).
    Causal,
}

impl AttentionPattern {
    /// The block size, or `None` for bidirectional attention.
    pub fn block(self) -> Option<usize> {
        match self {
            AttentionPattern::Bidirectional => None,
            AttentionPattern::Block(n) => Some(n),
            AttentionPattern::Causal => Some(1),
        }
    }

    /// How many keys (counted from position 0) the query at `position` sees, of `keys`.
    pub fn visible_keys(self, position: usize, keys: usize) -> usize {
        match self.block() {
            None => keys,
            Some(n) => keys.min((position / n + 1) * n),
        }
    }
}

/// What a next edit's uncommitted canvas slots show the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EditCanvas {
    /// The mask token, as a FIM canvas.
    #[default]
    Masked,
    /// The draft's token at that slot (the old region's), the mask past its end.
    Draft,
}

impl RedraftJson {
    pub fn load(path: &Path) -> Result<RedraftJson> {
        read_json(path, "redraft's diffusion settings")
    }

    /// Parses `redraft.json` text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<RedraftJson> {
        parse_json(text, path, "redraft's diffusion settings")
    }
}

/// How a masked-diffusion checkpoint wants to be driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffusionSettings {
    pub mask_token_id: u32,
    pub eos_token_id: u32,
    pub pad_token_id: u32,
    /// Prepended to every canvas when the model was trained with one.
    pub bos_token_id: Option<u32>,
    /// Dream family: the hidden state at position j-1 scores the token at j.
    /// LLaDA family: position j scores j.
    pub logit_shift: bool,
    /// What a canvas with a draft shows at its uncommitted slots.
    #[serde(default)]
    pub edit_canvas: EditCanvas,
    #[serde(default)]
    pub attention: AttentionPattern,
}

impl DiffusionSettings {
    /// Merges what `config.json` says with `redraft.json` (if any).
    pub fn resolve(config: &ModelConfig, extra: Option<&RedraftJson>) -> Result<DiffusionSettings> {
        let extra = extra.cloned().unwrap_or_default();
        let family_shift = match config.model_type.as_str() {
            "Dream" => Some(true),
            _ => None,
        };
        let mask_token_id = merge("mask_token_id", config.mask_token_id, extra.mask_token_id)?
            .ok_or_else(|| missing("mask_token_id"))?;
        let eos_token_id = merge(
            "eos_token_id",
            config.eos_token_id.as_ref().and_then(TokenIds::first),
            extra.eos_token_id,
        )?
        .ok_or_else(|| missing("eos_token_id"))?;
        let pad_token_id =
            merge("pad_token_id", config.pad_token_id, extra.pad_token_id)?.unwrap_or(eos_token_id);
        let bos_token_id = merge("bos_token_id", config.bos_token_id, extra.bos_token_id)?;
        let logit_shift = match (family_shift, extra.logit_shift) {
            (Some(family), Some(stated)) if family != stated => {
                return Err(Error::ContradictorySetting {
                    setting: "logit_shift",
                    message: format!(
                        "model_type `{}` implies logit_shift = {family}, redraft.json says {stated}",
                        config.model_type
                    ),
                })
            }
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => return Err(missing("logit_shift")),
        };
        let settings = DiffusionSettings {
            mask_token_id,
            eos_token_id,
            pad_token_id,
            bos_token_id,
            logit_shift,
            edit_canvas: extra.edit_canvas.unwrap_or_default(),
            attention: extra.attention.unwrap_or_default(),
        };
        if settings.attention == AttentionPattern::Causal && !settings.logit_shift {
            return Err(Error::ContradictorySetting {
                setting: "attention",
                message: "causal attention needs logit_shift: a position sees only itself and \
                          earlier ones, so each slot must be scored from the row before it"
                    .into(),
            });
        }
        if settings.attention == AttentionPattern::Block(0) {
            return Err(Error::ContradictorySetting {
                setting: "attention",
                message: "a block of 0 positions".into(),
            });
        }
        for (setting, id) in [
            ("mask_token_id", Some(mask_token_id)),
            ("eos_token_id", Some(eos_token_id)),
            ("pad_token_id", Some(pad_token_id)),
            ("bos_token_id", bos_token_id),
        ] {
            if let Some(id) = id.filter(|&id| id as usize >= config.vocab_size) {
                return Err(Error::ContradictorySetting {
                    setting,
                    message: format!("id {id} is outside the vocabulary of {}", config.vocab_size),
                });
            }
        }
        // A mask that is also EOS, pad or BOS would be filled, ended or prepended as the other.
        for (other, id) in [
            ("EOS", Some(eos_token_id)),
            ("pad", Some(pad_token_id)),
            ("BOS", bos_token_id),
        ] {
            if id == Some(mask_token_id) {
                return Err(Error::ContradictorySetting {
                    setting: "mask_token_id",
                    message: format!("mask and {other} share id {mask_token_id}"),
                });
            }
        }
        Ok(settings)
    }
}

fn merge(setting: &'static str, config: Option<u32>, extra: Option<u32>) -> Result<Option<u32>> {
    match (config, extra) {
        (Some(a), Some(b)) if a != b => Err(Error::ContradictorySetting {
            setting,
            message: format!("config.json says {a}, redraft.json says {b}"),
        }),
        (a, b) => Ok(a.or(b)),
    }
}

fn missing(setting: &'static str) -> Error {
    Error::MissingSetting {
        setting,
        hint: format!(
            "add `\"{setting}\"` to redraft.json next to config.json (the checkpoint's config does not say)"
        ),
    }
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::MissingFile {
                path: PathBuf::from(path),
                what,
            }
        } else {
            Error::io(path, source)
        }
    })?;
    parse_json(&text, path, what)
}

fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
    what: &'static str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::BadJson {
        path: path.to_path_buf(),
        what,
        message: e.to_string(),
    })
}
