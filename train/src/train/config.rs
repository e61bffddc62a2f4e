//! The settings of a training run ([`TrainConfig`]): model shape, data, optimiser and schedule,
//! stored in every checkpoint so a resumed run can refuse settings that would change its course.

use serde::{Deserialize, Serialize};

use super::examples::DataConfig;
use super::optim::OptimConfig;
use super::{TrainError, TrainResult, EOS_ID, MASK_ID, SPECIAL_TOKENS};
use redraft_engine::config::{AttentionPattern, ModelConfig, SlidingWindow, TokenIds};

/// The model's shape (the vocabulary size comes from the tokenizer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelShape {
    pub vocab_size: usize,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub ffn: usize,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    /// The head is the embedding matrix (redraft's own models) rather than its own
    /// `lm_head.weight` (Qwen2.5-Coder's GGUF, LLaDA).
    #[serde(default = "tied_by_default")]
    pub tied_head: bool,
    /// Positions the exported model states (`max_position_embeddings`); `None`: the training
    /// length. A run from a pretrained checkpoint keeps the checkpoint's: it learned those
    /// positions before this run.
    #[serde(default)]
    pub max_positions: Option<usize>,
}

fn tied_by_default() -> bool {
    true
}

impl Default for ModelShape {
    fn default() -> Self {
        ModelShape {
            vocab_size: 4096,
            layers: 4,
            hidden: 256,
            heads: 4,
            kv_heads: 4,
            ffn: 1024,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-6,
            tied_head: true,
            max_positions: None,
        }
    }
}

impl ModelShape {
    /// The model config of this shape with redraft's own ids (mask 0, EOS/pad 1, no BOS).
    /// `max_position_embeddings` is [`ModelShape::max_positions`], else the training length:
    /// positions past it were never seen, so a caller should keep prefix + canvas + suffix
    /// within it. [`TrainConfig::model_config`] puts in the run's ids.
    pub fn model_config(&self, seq_len: usize) -> ModelConfig {
        ModelConfig {
            model_type: "qwen2".into(),
            vocab_size: self.vocab_size,
            hidden_size: self.hidden,
            intermediate_size: self.ffn,
            num_hidden_layers: self.layers,
            num_attention_heads: self.heads,
            num_key_value_heads: Some(self.kv_heads),
            head_dim: None,
            max_position_embeddings: self.max_positions.unwrap_or(seq_len),
            rope_theta: Some(self.rope_theta),
            rope_parameters: None,
            rope_scaling: None,
            rms_norm_eps: self.rms_norm_eps,
            tie_word_embeddings: self.tied_head,
            hidden_act: "silu".into(),
            mask_token_id: Some(MASK_ID),
            eos_token_id: Some(TokenIds::One(EOS_ID)),
            pad_token_id: Some(EOS_ID),
            bos_token_id: None,
            attention_bias: None,
            sliding: SlidingWindow::default(),
        }
    }
}

/// How the model reads a sequence: the ids that mask a slot and end a middle (also padding),
/// which row scores a slot, and which keys each position sees. redraft's own models: mask 0,
/// EOS 1, no shift, bidirectional. A run from another checkpoint takes them from it and from
/// the adaptation flags ([`super::init`]); the exported `config.json` and `redraft.json` say
/// them, so the engine decodes the way the model was trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffusionSetup {
    pub mask_id: u32,
    /// Ends a middle (a canvas is the middle, then this id to its end) and pads sequences.
    pub eos_id: u32,
    /// Dream-style: the row before a slot scores it (`redraft_engine::sampler::logit_row`),
    /// as an autoregressive checkpoint's head was trained to.
    pub logit_shift: bool,
    pub attention: AttentionPattern,
}

impl Default for DiffusionSetup {
    fn default() -> Self {
        DiffusionSetup {
            mask_id: MASK_ID,
            eos_id: EOS_ID,
            logit_shift: false,
            attention: AttentionPattern::Bidirectional,
        }
    }
}

impl DiffusionSetup {
    /// Whether the ids are redraft's own (its tokenizer's [`SPECIAL_TOKENS`]).
    pub fn uses_redraft_ids(&self) -> bool {
        self.mask_id == MASK_ID && self.eos_id == EOS_ID
    }
}

/// Everything that decides a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub model: ModelShape,
    /// Absent in checkpoints written before runs could start from other checkpoints: those
    /// are redraft's defaults.
    #[serde(default)]
    pub diffusion: DiffusionSetup,
    pub data: DataConfig,
    pub optim: OptimConfig,
    /// Sequences per step.
    pub batch: usize,
    /// Total optimizer steps (the cosine schedule ends here).
    pub steps: usize,
    pub seed: u64,
    /// Evaluate on the held-out split every this many steps.
    pub eval_every: usize,
    /// Size of the fixed held-out sample.
    pub eval_examples: usize,
    /// Write a checkpoint (and export the model) every this many steps.
    pub save_every: usize,
    /// A model directory (redraft's, or a Qwen2-layout safetensors one) or a GGUF file whose
    /// weights a fresh run starts from (its shape and tokenizer are the run's), instead of
    /// random ones ([`super::init`]).
    #[serde(default)]
    pub init: Option<std::path::PathBuf>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            model: ModelShape::default(),
            diffusion: DiffusionSetup::default(),
            data: DataConfig::default(),
            optim: OptimConfig::default(),
            batch: 8,
            steps: 10_000,
            seed: 0,
            eval_every: 200,
            eval_examples: 128,
            save_every: 500,
            init: None,
        }
    }
}

impl TrainConfig {
    pub fn validate(&self) -> TrainResult<()> {
        let m = &self.model;
        let bad = |msg: String| Err(TrainError::Config(msg));
        for (name, v) in [
            ("layers", m.layers),
            ("hidden", m.hidden),
            ("heads", m.heads),
            ("kv-heads", m.kv_heads),
            ("ffn", m.ffn),
            ("batch", self.batch),
            ("steps", self.steps),
            ("eval-every", self.eval_every),
            ("eval-examples", self.eval_examples),
            ("save-every", self.save_every),
        ] {
            if v == 0 {
                return bad(format!("--{name} must be at least 1"));
            }
        }
        if m.vocab_size <= SPECIAL_TOKENS.len() {
            return bad(format!("vocabulary of {} is too small", m.vocab_size));
        }
        if !m.hidden.is_multiple_of(m.heads) || !(m.hidden / m.heads).is_multiple_of(2) {
            return bad(format!(
                "--hidden {} must be --heads {} times an even head size",
                m.hidden, m.heads
            ));
        }
        if !m.heads.is_multiple_of(m.kv_heads) {
            return bad(format!(
                "--heads {} must be a multiple of --kv-heads {}",
                m.heads, m.kv_heads
            ));
        }
        if self.data.seq_len < 8 {
            return bad(format!(
                "--seq-len {} must be at least 8",
                self.data.seq_len
            ));
        }
        if !(0.0..=1.0).contains(&self.data.fim_rate) {
            return bad(format!("FIM rate {} is not in [0, 1]", self.data.fim_rate));
        }
        if !(0.0..=1.0).contains(&self.data.overflow) {
            return bad(format!(
                "overflow share {} is not in [0, 1]",
                self.data.overflow
            ));
        }
        if !(0.0..=1.0).contains(&self.data.edit_rate) {
            return bad(format!(
                "next-edit rate {} is not in [0, 1]",
                self.data.edit_rate
            ));
        }
        if !(self.data.t_min > 0.0 && self.data.t_min < 1.0) {
            return bad(format!("t_min {} is not in (0, 1)", self.data.t_min));
        }
        if !(self.optim.lr > 0.0 && self.optim.lr.is_finite()) {
            return bad(format!("--lr {} must be positive", self.optim.lr));
        }
        let setup = &self.diffusion;
        for (name, id) in [("mask", setup.mask_id), ("EOS", setup.eos_id)] {
            if id as usize >= m.vocab_size {
                return bad(format!(
                    "the {name} id {id} is outside the vocabulary of {}",
                    m.vocab_size
                ));
            }
        }
        if setup.mask_id == setup.eos_id {
            return bad(format!(
                "the mask and EOS share id {}: choose another --mask-token",
                setup.mask_id
            ));
        }
        match setup.attention {
            AttentionPattern::Block(0) => return bad("--attention block:0 has no positions".into()),
            AttentionPattern::Causal if !setup.logit_shift => {
                return bad("--attention causal needs the logit shift (a position sees only itself and earlier ones): start from an autoregressive checkpoint with --init".into())
            }
            _ => {}
        }
        if m.max_positions.is_some_and(|p| p < self.data.seq_len) {
            return bad(format!(
                "--seq-len {} is longer than the model's {} positions",
                self.data.seq_len,
                m.max_positions.unwrap_or_default()
            ));
        }
        Ok(())
    }

    /// The model config of this run: its shape, positions and ids.
    pub fn model_config(&self) -> ModelConfig {
        let mut config = self.model.model_config(self.data.seq_len);
        config.mask_token_id = Some(self.diffusion.mask_id);
        config.eos_token_id = Some(TokenIds::One(self.diffusion.eos_id));
        config.pad_token_id = Some(self.diffusion.eos_id);
        config
    }

    /// Differences that would change the trajectory of a resumed run (all but `steps`,
    /// `eval_every` and `save_every`), as `field: checkpoint -> now`.
    pub fn resume_conflicts(&self, saved: &TrainConfig) -> Vec<String> {
        let flexible = |c: &TrainConfig| TrainConfig {
            steps: 0,
            eval_every: 0,
            save_every: 0,
            ..c.clone()
        };
        let (a, b) = (
            serde_json::to_value(flexible(saved)).expect("json"),
            serde_json::to_value(flexible(self)).expect("json"),
        );
        let mut out = Vec::new();
        diff_json("", &a, &b, &mut out);
        out
    }
}

fn diff_json(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    match (a, b) {
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            for (k, va) in x {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match y.get(k) {
                    Some(vb) => diff_json(&sub, va, vb, out),
                    None => out.push(format!("{sub}: {va} -> (missing)")),
                }
            }
        }
        _ if a != b => out.push(format!("{path}: {a} -> {b}")),
        _ => {}
    }
}
