//! Model and diffusion settings, read from a Hugging Face model directory.
//!
//! `config.json` is mirrored by [`ModelConfig`] (the Qwen2 layout that Dream, Dream-Coder,
//! DiffuCoder, DreamOn and Open-dCoder ship in). LLaDA's own config (`model_type` "llada",
//! OLMo's field names: `d_model`, `n_layers`, `mlp_hidden_size`, ...; `configuration_llada.py`)
//! is read by [`LladaConfig`] into the same [`ModelConfig`]. The diffusion settings (mask, EOS,
//! pad, BOS ids and the logit shift) come from `config.json` where the checkpoint states them
//! and otherwise from a small `redraft.json` beside it; [`DiffusionSettings::resolve`] merges
//! the two and rejects anything missing or contradictory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::sampler::{Effort, Efforts, Preset};

/// Architectures this engine runs, by `config.json`'s `model_type`.
const SUPPORTED_MODEL_TYPES: &[&str] = &["qwen2", "Dream", "llada"];

/// Upper limits `ModelConfig::validate` puts on a config's sizes: far above any real
/// model's, low enough that nothing sized from them overflows.
pub const MAX_LAYERS: usize = 1024;
pub const MAX_VOCAB: usize = 16 << 20;
/// Hidden size, and query heads x head size.
pub const MAX_WIDTH: usize = 1 << 20;
pub const MAX_MLP: usize = 16 << 20;
pub const MAX_HEADS: usize = 1 << 16;
pub const MAX_HEAD_DIM: usize = 1 << 16;
pub const MAX_POSITIONS: usize = 16 << 20;

/// LLaDA's mask token (`<|mdm_mask|>`), used when neither its config nor `redraft.json` names one.
pub const LLADA_MASK_ID: u32 = 126336;
/// LLaDA's end of text (`<|endoftext|>`), the same fallback.
pub const LLADA_EOS_ID: u32 = 126081;

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
    /// The older name of `rope_type` (`rope_scaling`'s), which transformers reads where
    /// `rope_type` is absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub legacy_type: Option<String>,
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
    /// Whether q/k/v carry biases (Llama's `attention_bias`; LLaDA's `include_qkv_bias`).
    /// Unset means Qwen2's, which do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_bias: Option<bool>,
    /// Qwen2's sliding-window attention settings (transformers' names, flattened).
    #[serde(flatten)]
    pub sliding: SlidingWindow,
}

/// Qwen2's sliding-window attention (transformers' `use_sliding_window`, `sliding_window`,
/// `max_window_layers`, or the newer per-layer `layer_types`): layers that slide attend only
/// to the last `sliding_window` positions. The engine attends in full, which is the same up to
/// that many positions, so [`ModelConfig::parse`] caps `max_position_embeddings` at the window
/// when any layer slides.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SlidingWindow {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_sliding_window: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_window_layers: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer_types: Option<Vec<String>>,
}

/// transformers' `Qwen2Config` default: layers from this one on slide when sliding is on.
const DEFAULT_MAX_WINDOW_LAYERS: usize = 28;

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
        ModelConfig::parse(&read_text(path, "the model config")?, path)
    }

    /// Parses and validates `config.json` text; `path` names it in errors. A LLaDA config in
    /// its own field names (`model_type` "llada" without `hidden_size`) goes through
    /// [`LladaConfig`].
    pub fn parse(text: &str, path: &Path) -> Result<ModelConfig> {
        let value: serde_json::Value = parse_json(text, path, "the model config")?;
        let mut config: ModelConfig = if LladaConfig::describes(&value) {
            from_value::<LladaConfig>(value, path, "the model config")?.model_config(path)?
        } else {
            from_value(value, path, "the model config")?
        };
        if let Some(window) = config.sliding_window_positions(path)? {
            config.max_position_embeddings = config.max_position_embeddings.min(window);
        }
        config.validate(path)?;
        Ok(config)
    }

    /// The window of the layers that slide, if any do (as transformers decides it: by
    /// `layer_types` where given, else layers from `max_window_layers` on when
    /// `use_sliding_window`); an error where a layer slides over no stated window.
    fn sliding_window_positions(&self, path: &Path) -> Result<Option<usize>> {
        let sliding = &self.sliding;
        let slides = match &sliding.layer_types {
            Some(types) => {
                if let Some(other) = types
                    .iter()
                    .find(|t| !matches!(t.as_str(), "full_attention" | "sliding_attention"))
                {
                    return Err(Error::UnsupportedConfig {
                        path: path.to_path_buf(),
                        message: format!(
                            "layer_types entry `{other}` (supported: full_attention, sliding_attention)"
                        ),
                    });
                }
                types.iter().any(|t| t == "sliding_attention")
            }
            None => {
                sliding.use_sliding_window
                    && self.num_hidden_layers
                        > sliding
                            .max_window_layers
                            .unwrap_or(DEFAULT_MAX_WINDOW_LAYERS)
            }
        };
        if !slides {
            return Ok(None);
        }
        match sliding.sliding_window {
            Some(window) if window > 0 => Ok(Some(window)),
            _ => Err(Error::UnsupportedConfig {
                path: path.to_path_buf(),
                message: "layers slide (use_sliding_window or layer_types) over no window: \
                          sliding_window is missing or 0"
                    .to_string(),
            }),
        }
    }

    /// Whether q/k/v carry biases.
    pub fn qkv_bias(&self) -> bool {
        self.attention_bias.unwrap_or(true)
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

    /// Number of parameters, counting a tied head once (`usize::MAX` for sizes past any real
    /// model, which `ModelConfig::validate` refuses).
    pub fn num_parameters(&self) -> usize {
        self.checked_parameters().unwrap_or(usize::MAX)
    }

    /// [`ModelConfig::num_parameters`], or `None` where a product or sum overflows.
    fn checked_parameters(&self) -> Option<usize> {
        let (d, hd) = (self.hidden_size, self.head_dim());
        let q = self.num_attention_heads.checked_mul(hd)?;
        let kv = self.num_kv_heads().checked_mul(hd)?;
        let qkv = kv.checked_mul(2)?.checked_add(q)?;
        let bias = if self.qkv_bias() { qkv } else { 0 };
        let attn = d
            .checked_mul(qkv)?
            .checked_add(bias)?
            .checked_add(q.checked_mul(d)?)?;
        let mlp = d.checked_mul(self.intermediate_size)?.checked_mul(3)?;
        let layer = attn.checked_add(mlp)?.checked_add(d.checked_mul(2)?)?;
        let embed = self.vocab_size.checked_mul(d)?;
        let head = if self.tie_word_embeddings { 0 } else { embed };
        embed
            .checked_add(head)?
            .checked_add(d)?
            .checked_add(self.num_hidden_layers.checked_mul(layer)?)
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
        let rope_type = self.rope_parameters.as_ref().and_then(|p| {
            (p.rope_type.as_deref().map(|t| ("rope_type", t)))
                .or(p.legacy_type.as_deref().map(|t| ("type", t)))
        });
        if let Some((name, rope_type)) = rope_type.filter(|&(_, t)| t != "default") {
            return Err(unsupported(format!(
                "rope_parameters.{name} `{rope_type}` (only default RoPE is supported)"
            )));
        }
        if let Some(scaling) = self.rope_scaling.as_ref().filter(|s| !s.is_null()) {
            return Err(unsupported(format!(
                "rope_scaling {scaling} (only default RoPE is supported; remove it or set it to null)"
            )));
        }
        // Limits far above any real model (the largest released have fewer than 200 layers,
        // vocabularies of ~260k, hidden sizes of ~16k, up to ~10M positions), so a number no
        // checkpoint means (a corrupt header, a typo) is refused by name instead of sizing an
        // allocation that aborts the process, or wrapping a product in a release build.
        let sizes = [
            ("vocab_size", self.vocab_size, MAX_VOCAB),
            ("hidden_size", self.hidden_size, MAX_WIDTH),
            ("intermediate_size", self.intermediate_size, MAX_MLP),
            ("num_hidden_layers", self.num_hidden_layers, MAX_LAYERS),
            ("num_attention_heads", self.num_attention_heads, MAX_HEADS),
            ("num_key_value_heads", self.num_kv_heads(), MAX_HEADS),
            ("head_dim", self.head_dim(), MAX_HEAD_DIM),
            (
                "max_position_embeddings",
                self.max_position_embeddings,
                MAX_POSITIONS,
            ),
        ];
        if let Some((name, _, _)) = sizes.iter().find(|(_, v, _)| *v == 0) {
            return Err(unsupported(format!("{name} is 0")));
        }
        if let Some((name, value, limit)) = sizes.iter().find(|(_, v, limit)| v > limit) {
            return Err(unsupported(format!(
                "{name} {value} is more than {limit}, far past any real model's (is the config corrupt?)"
            )));
        }
        let q_out = self.num_attention_heads.checked_mul(self.head_dim());
        if q_out.is_none_or(|q| q > MAX_WIDTH) {
            return Err(unsupported(format!(
                "num_attention_heads {} x head_dim {} is more than {MAX_WIDTH}, far past any real model's (is the config corrupt?)",
                self.num_attention_heads,
                self.head_dim()
            )));
        }
        if self.checked_parameters().is_none() {
            return Err(unsupported(
                "the parameter count overflows (is the config corrupt?)".into(),
            ));
        }
        let theta = self.rope_theta();
        if !(theta.is_finite() && theta > 0.0) {
            return Err(unsupported(format!(
                "rope_theta {theta}: RoPE needs a positive, finite base"
            )));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps >= 0.0) {
            return Err(unsupported(format!(
                "rms_norm_eps {}: RMSNorm needs a finite epsilon of at least 0",
                self.rms_norm_eps
            )));
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

/// Mirror of LLaDA's `config.json` (`configuration_llada.py`'s `ModelConfig`, OLMo's field
/// names); unknown keys are ignored. Defaults are that file's, but the ids: where the config
/// names none, [`DiffusionSettings::resolve`] takes LLaDA's own ([`LLADA_MASK_ID`],
/// [`LLADA_EOS_ID`]) rather than its GPT-2 defaults.
///
/// What redraft runs is LLaDA's `llama` block (`LLaDALlamaBlock`: RMSNorm, q/k/v without
/// biases unless `include_qkv_bias`, RoPE with `rotate_half`, SiLU(`ff_proj`) * `up_proj` into
/// `ff_out`): the Qwen2 model without its biases. Any other switch is refused by name.
#[derive(Debug, Clone, Deserialize)]
pub struct LladaConfig {
    pub d_model: usize,
    pub n_heads: usize,
    #[serde(default)]
    pub n_kv_heads: Option<usize>,
    #[serde(default)]
    pub multi_query_attention: Option<bool>,
    pub n_layers: usize,
    #[serde(default)]
    pub mlp_hidden_size: Option<usize>,
    #[serde(default = "llada_mlp_ratio")]
    pub mlp_ratio: usize,
    pub vocab_size: usize,
    /// Rows of the embedding and the head (may exceed `vocab_size`, padded).
    #[serde(default)]
    pub embedding_size: Option<usize>,
    #[serde(default = "llada_max_sequence_length")]
    pub max_sequence_length: usize,
    #[serde(default)]
    pub rope: bool,
    #[serde(default = "llada_rope_theta")]
    pub rope_theta: f64,
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default)]
    pub alibi: bool,
    #[serde(default)]
    pub yarn: bool,
    #[serde(default = "llada_rms_norm_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "llada_true")]
    pub weight_tying: bool,
    #[serde(default)]
    pub include_bias: bool,
    #[serde(default)]
    pub include_qkv_bias: Option<bool>,
    #[serde(default)]
    pub bias_for_layer_norm: Option<bool>,
    #[serde(default = "llada_true")]
    pub layer_norm_with_affine: bool,
    #[serde(default = "llada_layer_norm_type")]
    pub layer_norm_type: String,
    #[serde(default = "llada_activation_type")]
    pub activation_type: String,
    #[serde(default = "llada_block_type")]
    pub block_type: String,
    #[serde(default = "llada_block_group_size")]
    pub block_group_size: usize,
    #[serde(default)]
    pub attention_layer_norm: bool,
    #[serde(default)]
    pub scale_logits: bool,
    #[serde(default)]
    pub input_emb_norm: bool,
    #[serde(default)]
    pub mask_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<TokenIds>,
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
}

fn llada_mlp_ratio() -> usize {
    4
}
fn llada_max_sequence_length() -> usize {
    1024
}
fn llada_rope_theta() -> f64 {
    10_000.0
}
fn llada_rms_norm_eps() -> f64 {
    1e-5
}
fn llada_true() -> bool {
    true
}
fn llada_layer_norm_type() -> String {
    "default".into()
}
fn llada_activation_type() -> String {
    "swiglu".into()
}
fn llada_block_type() -> String {
    "sequential".into()
}
fn llada_block_group_size() -> usize {
    1
}

impl LladaConfig {
    /// Whether a parsed `config.json` is LLaDA's own layout: `model_type` "llada" without
    /// transformers' `hidden_size` (a [`ModelConfig`] redraft wrote for a LLaDA model has it).
    pub fn describes(value: &serde_json::Value) -> bool {
        value["model_type"] == "llada" && value.get("hidden_size").is_none()
    }

    /// The model in [`ModelConfig`]'s terms; `path` names the file in errors.
    pub fn model_config(&self, path: &Path) -> Result<ModelConfig> {
        let unsupported = |message: String| {
            Err(Error::UnsupportedConfig {
                path: path.to_path_buf(),
                message,
            })
        };
        let text = |field: &str, value: &str, want: &str, what: &str| {
            unsupported(format!(
                "{field} `{value}` (only `{want}`, {what}, is supported)"
            ))
        };
        if self.block_type != "llama" {
            return text("block_type", &self.block_type, "llama", "LLaDA's block");
        }
        if self.layer_norm_type != "rms" {
            return text("layer_norm_type", &self.layer_norm_type, "rms", "RMSNorm");
        }
        if self.activation_type != "silu" {
            return text(
                "activation_type",
                &self.activation_type,
                "silu",
                "SiLU(ff_proj) * up_proj",
            );
        }
        let switches = [
            (!self.rope, "rope = false (only RoPE positions are supported)"),
            (self.alibi, "alibi = true (only RoPE positions are supported)"),
            (self.yarn, "yarn = true (only default RoPE is supported)"),
            (
                self.include_bias,
                "include_bias = true (biases on every projection; only q/k/v biases, include_qkv_bias, are supported)",
            ),
            (
                self.bias_for_layer_norm == Some(true),
                "bias_for_layer_norm = true (RMSNorm with a bias is not supported)",
            ),
            (
                !self.layer_norm_with_affine,
                "layer_norm_with_affine = false (RMSNorm without a weight is not supported)",
            ),
            (
                self.attention_layer_norm,
                "attention_layer_norm = true (q/k norms are not supported)",
            ),
            (
                self.scale_logits,
                "scale_logits = true (scaled logits are not supported)",
            ),
            (
                self.input_emb_norm,
                "input_emb_norm = true (scaled embeddings are not supported)",
            ),
        ];
        if let Some((_, message)) = switches.iter().find(|(on, _)| *on) {
            return unsupported(message.to_string());
        }
        if self.block_group_size != 1 {
            return unsupported(format!(
                "block_group_size {} (only 1: grouped blocks name their tensors otherwise)",
                self.block_group_size
            ));
        }
        if self.n_heads == 0 || !self.d_model.is_multiple_of(self.n_heads) {
            return unsupported(format!(
                "d_model {} is not a multiple of n_heads {}",
                self.d_model, self.n_heads
            ));
        }
        // configuration_llada.py's `effective_n_kv_heads`.
        let kv_heads = match (self.n_kv_heads, self.multi_query_attention) {
            (None, Some(true)) => 1,
            (None, _) => self.n_heads,
            (Some(n), None) => n,
            (Some(n), Some(mqa)) if n == if mqa { 1 } else { self.n_heads } => n,
            (Some(n), Some(mqa)) => {
                return unsupported(format!(
                    "n_kv_heads {n} contradicts multi_query_attention = {mqa}"
                ))
            }
        };
        Ok(ModelConfig {
            model_type: "llada".into(),
            vocab_size: self.embedding_size.unwrap_or(self.vocab_size),
            hidden_size: self.d_model,
            intermediate_size: match self.mlp_hidden_size {
                Some(size) => size,
                None => match self.mlp_ratio.checked_mul(self.d_model) {
                    Some(size) => size,
                    None => {
                        return unsupported(format!(
                            "mlp_ratio {} x d_model {} overflows (is the config corrupt?)",
                            self.mlp_ratio, self.d_model
                        ))
                    }
                },
            },
            num_hidden_layers: self.n_layers,
            num_attention_heads: self.n_heads,
            num_key_value_heads: Some(kv_heads),
            head_dim: None,
            max_position_embeddings: self.max_sequence_length,
            rope_theta: Some(self.rope_theta),
            rope_parameters: None,
            rope_scaling: self.rope_scaling.clone(),
            rms_norm_eps: self.rms_norm_eps,
            tie_word_embeddings: self.weight_tying,
            hidden_act: "silu".into(),
            mask_token_id: self.mask_token_id,
            eos_token_id: self.eos_token_id.clone(),
            pad_token_id: self.pad_token_id,
            bos_token_id: self.bos_token_id,
            attention_bias: Some(self.include_qkv_bias.unwrap_or(false)),
            sliding: SlidingWindow::default(),
        })
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
    /// The model's own effort presets, where they were tuned on it (each one named replaces
    /// the built-in one): `{"medium": {"schedule": {"kind": "threshold", "tau": 0.85},
    /// "max_steps": 6}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efforts: Option<BTreeMap<Effort, Preset>>,
    /// The model's next-edit bar, where it was tuned on it: a suggestion whose least probable
    /// changed token is below this (0 to 1) is withheld. Default 0: none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_min_confidence: Option<f32>,
    /// The model's inline-completion bar, where it was tuned on it: a suggestion whose least
    /// probable token is below this (0 to 1) is not shown. Default 0: every one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fim_min_confidence: Option<f32>,
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    /// What `--effort` means for this model: [`Efforts::BUILT_IN`] with what `redraft.json`
    /// tunes.
    #[serde(default)]
    pub efforts: Efforts,
    /// A next edit the model is less sure of is withheld (`redraft.json`
    /// `edit_min_confidence`; 0: none is).
    #[serde(default)]
    pub edit_min_confidence: f32,
    /// An inline completion the model is less sure of is not shown (`redraft.json`
    /// `fim_min_confidence`; 0: every one is).
    #[serde(default)]
    pub fim_min_confidence: f32,
}

/// A confidence bar from `redraft.json` (0 without one), refused unless it is a probability.
fn bar(setting: &'static str, value: Option<f32>) -> Result<f32> {
    match value {
        None => Ok(0.0),
        Some(bar) if (0.0..=1.0).contains(&bar) => Ok(bar),
        Some(bar) => Err(Error::ContradictorySetting {
            setting,
            message: format!("{bar} is not a probability (0 to 1)"),
        }),
    }
}

impl DiffusionSettings {
    /// Merges what `config.json` says with `redraft.json` (if any).
    pub fn resolve(config: &ModelConfig, extra: Option<&RedraftJson>) -> Result<DiffusionSettings> {
        let extra = extra.cloned().unwrap_or_default();
        let family_shift = match config.model_type.as_str() {
            "Dream" => Some(true),
            "llada" => Some(false),
            _ => None,
        };
        // LLaDA's ids, where neither file names them and the vocabulary holds them.
        let family = |id: u32| {
            (config.model_type == "llada" && (id as usize) < config.vocab_size).then_some(id)
        };
        let mask_token_id = merge("mask_token_id", config.mask_token_id, extra.mask_token_id)?
            .or_else(|| family(LLADA_MASK_ID))
            .ok_or_else(|| missing("mask_token_id"))?;
        let eos_token_id = merge(
            "eos_token_id",
            config.eos_token_id.as_ref().and_then(TokenIds::first),
            extra.eos_token_id,
        )?
        .or_else(|| family(LLADA_EOS_ID))
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
            efforts: Efforts::BUILT_IN
                .tuned(&extra.efforts.unwrap_or_default())
                .map_err(|message| Error::ContradictorySetting {
                    setting: "efforts",
                    message,
                })?,
            edit_min_confidence: bar("edit_min_confidence", extra.edit_min_confidence)?,
            fim_min_confidence: bar("fim_min_confidence", extra.fim_min_confidence)?,
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
    parse_json(&read_text(path, what)?, path, what)
}

pub(crate) fn read_text(path: &Path, what: &'static str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::MissingFile {
                path: PathBuf::from(path),
                what,
            }
        } else {
            Error::io(path, source)
        }
    })
}

fn from_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    path: &Path,
    what: &'static str,
) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::BadJson {
        path: path.to_path_buf(),
        what,
        message: e.to_string(),
    })
}

pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
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
