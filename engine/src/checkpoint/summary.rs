//! What a loaded model's weights are ([`WeightsSummary`], `Engine::weights`): their format, their
//! types as llama.cpp names them, their bytes. Recorded while the weights are read
//! ([`WeightsTally`]), so nothing reads a header a second time to say what was loaded.

use std::collections::BTreeMap;

use crate::gguf::file_type_name;

/// The `transformers` name of the token embedding, which [`WeightsTally`] leaves out.
const TOKEN_EMBEDDING: &str = "model.embed_tokens.weight";

/// The form a model's weights were read from (the embedded default's: what it was compiled from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsFormat {
    /// `model.safetensors` or its shards (f32, f16, bf16).
    Safetensors,
    /// One GGUF file (llama.cpp's format, [`crate::gguf`]).
    Gguf,
}

impl WeightsFormat {
    /// `safetensors` or `gguf`, as Ollama and the Hub write a format.
    pub fn name(self) -> &'static str {
        match self {
            WeightsFormat::Safetensors => "safetensors",
            WeightsFormat::Gguf => "gguf",
        }
    }
}

/// What an [`crate::Engine`]'s weights are, as its load read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsSummary {
    pub format: WeightsFormat,
    /// A GGUF's `general.file_type` ([`file_type_name`]), where it states one as an integer.
    pub file_type: Option<u64>,
    /// Elements of each stored type ([`crate::gguf::type_name`]: `F16`, `Q8_0`, `Q4_K`) over the
    /// matrices, every tensor of the files counted, the token embedding aside (a quantizer often
    /// keeps its type apart) and vectors (norms, biases) too.
    pub matrix_elements: BTreeMap<&'static str, u64>,
    /// Bytes of the weight files: the GGUF file, or `model.safetensors`, or the shards and their
    /// index.
    pub weight_file_bytes: u64,
    /// Bytes of every file the model was loaded from: the weights, and the `config.json`,
    /// `redraft.json` and `tokenizer.json` read with them (only those beside a GGUF that it
    /// read; its config is its metadata).
    pub model_file_bytes: u64,
}

impl WeightsSummary {
    /// The weights' type as llama.cpp names it on load (and Ollama as a quantization level): the
    /// stated `general.file_type` (`Q4_K_M`), else the [`WeightsSummary::dominant_type`], as
    /// llama.cpp guesses a file type a file does not state.
    pub fn type_name(&self) -> Option<&'static str> {
        self.file_type
            .and_then(file_type_name)
            .or_else(|| self.dominant_type())
    }

    /// The type holding the most matrix elements ([`WeightsSummary::matrix_elements`]); a tie
    /// goes to the name that sorts first. `None` without matrices, which no model that loads
    /// lacks (it has at least one layer).
    pub fn dominant_type(&self) -> Option<&'static str> {
        self.matrix_elements
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(name, _)| *name)
    }
}

/// What a load sees of its weight files as it reads them, for its [`WeightsSummary`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WeightsTally {
    pub(crate) file_type: Option<u64>,
    pub(crate) matrix_elements: BTreeMap<&'static str, u64>,
    pub(crate) bytes: u64,
}

impl WeightsTally {
    /// Counts a tensor of the files: `ours` is its `transformers` name (`None`: one the engine
    /// does not use), `type_name` its stored type's name.
    pub(crate) fn tensor(&mut self, ours: Option<&str>, type_name: &'static str, dims: &[usize]) {
        if dims.len() < 2 || ours == Some(TOKEN_EMBEDDING) {
            return;
        }
        let elements = dims.iter().map(|&d| d as u64).product::<u64>();
        *self.matrix_elements.entry(type_name).or_default() += elements;
    }

    /// The summary of weights read in `format`, with `companion_bytes` of config, settings and
    /// tokenizer files read beside them.
    pub(crate) fn summary(&self, format: WeightsFormat, companion_bytes: u64) -> WeightsSummary {
        WeightsSummary {
            format,
            file_type: self.file_type,
            matrix_elements: self.matrix_elements.clone(),
            weight_file_bytes: self.bytes,
            model_file_bytes: self.bytes + companion_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(tensors: &[(&str, &'static str, &[usize])]) -> WeightsSummary {
        let mut tally = WeightsTally::default();
        for &(name, type_name, dims) in tensors {
            tally.tensor(Some(name), type_name, dims);
        }
        tally.summary(WeightsFormat::Safetensors, 0)
    }

    /// The linear weights decide, not the embedding (a large f32 table here) or the norms.
    #[test]
    fn the_linear_weights_decide_over_the_embedding_and_the_norms() {
        let mixed = summary_of(&[
            ("model.embed_tokens.weight", "F32", &[151_936, 896]),
            ("model.layers.0.mlp.up_proj.weight", "BF16", &[4864, 896]),
            ("model.layers.0.self_attn.q_proj.weight", "F16", &[896, 896]),
            ("model.layers.0.input_layernorm.weight", "F32", &[896]),
        ]);
        assert_eq!(
            mixed.matrix_elements,
            BTreeMap::from([("BF16", 4864 * 896), ("F16", 896 * 896)])
        );
        assert_eq!(mixed.dominant_type(), Some("BF16"));
        assert_eq!(mixed.type_name(), Some("BF16"));
        // A tie goes to the name that sorts first, whatever the order read.
        let tie = summary_of(&[
            ("model.layers.0.self_attn.q_proj.weight", "Q8_0", &[32, 32]),
            ("model.layers.0.self_attn.k_proj.weight", "F16", &[32, 32]),
        ]);
        assert_eq!(tie.dominant_type(), Some("F16"));
        assert_eq!(summary_of(&[]).dominant_type(), None);
    }

    /// A stated file type wins over the count (a Q4_K_M file is mostly Q4_K), unless llama.cpp
    /// never gave the number.
    #[test]
    fn a_stated_file_type_names_the_weights() {
        let mut summary = summary_of(&[("model.layers.0.mlp.up_proj.weight", "Q4_K", &[32, 256])]);
        assert_eq!(summary.type_name(), Some("Q4_K"));
        summary.file_type = Some(15);
        assert_eq!(summary.type_name(), Some("Q4_K_M"));
        summary.file_type = Some(999);
        assert_eq!(summary.type_name(), Some("Q4_K"));
    }
}
