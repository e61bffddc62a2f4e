//! What a loaded model is, as Ollama describes one (the `details` of its `/api/tags` and
//! `/api/show`): the form its weights came in, their quantization level, its architecture, its
//! parameter count and the bytes of its files. Only formatting: what the weights are is what
//! the engine recorded as it loaded them ([`Engine::weights`]).

use redraft_engine::Engine;

/// A model's description, fixed at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDetails {
    /// The form the weights were read from: `gguf` or `safetensors`.
    pub format: &'static str,
    /// The weights' type as llama.cpp and Ollama name it
    /// ([`redraft_engine::checkpoint::WeightsSummary::type_name`]): a GGUF's `general.file_type`
    /// (`Q8_0`, `Q4_K_M`), else the type of most of the matrices' elements, token embedding
    /// aside (`F16`, `BF16`, `F32`, `Q8_0`).
    pub quantization: Option<String>,
    /// The architecture (`config.json`'s `model_type`, a GGUF's `general.architecture`):
    /// `qwen2`, `dream`, `llada`.
    pub family: String,
    pub parameters: u64,
    /// The positions it reads at most.
    pub context_length: usize,
    /// Bytes of the files it was loaded from: weights, config, `redraft.json` and tokenizer.
    pub size: u64,
}

impl ModelDetails {
    /// The description of `engine`, from its configuration and what its load recorded of its
    /// files.
    pub fn of(engine: &Engine) -> ModelDetails {
        let config = engine.model().config();
        let weights = engine.weights();
        ModelDetails {
            format: weights.format.name(),
            quantization: weights.type_name().map(str::to_string),
            family: config.model_type.clone(),
            parameters: config.num_parameters() as u64,
            context_length: config.max_position_embeddings,
            size: weights.model_file_bytes,
        }
    }

    /// The parameter count as Ollama writes it (`format.HumanNumber`): `494.03M`, `1.5B`, `7B`.
    pub fn parameter_size(&self) -> String {
        human_number(self.parameters)
    }
}

/// Ollama's `format.HumanNumber`: whole numbers bare, else one decimal for billions and two for
/// millions; thousands rounded.
pub fn human_number(n: u64) -> String {
    const THOUSAND: u64 = 1_000;
    const MILLION: u64 = 1_000_000;
    const BILLION: u64 = 1_000_000_000;
    let scaled = |unit: u64, decimals: usize, suffix: &str| {
        let number = n as f64 / unit as f64;
        let decimals = if number == number.floor() {
            0
        } else {
            decimals
        };
        format!("{number:.decimals$}{suffix}")
    };
    match n {
        n if n >= BILLION => scaled(BILLION, 1, "B"),
        n if n >= MILLION => scaled(MILLION, 2, "M"),
        n if n >= THOUSAND => format!("{:.0}K", n as f64 / THOUSAND as f64),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests;
