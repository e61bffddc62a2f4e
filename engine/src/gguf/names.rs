//! The one table of tensor names: llama.cpp's GGUF names, `transformers`' Qwen2 names and
//! LLaDA's OLMo-style names, each a [`Naming`], and [`rename`] between them. Also the row order
//! (`rope_pair_rows`) that llama.cpp's converter gives `llada`'s query and key projections, and
//! which tensors it applies to (`is_query_or_key`).

/// How a checkpoint names its tensors. The engine's own names are `transformers`'; every other
/// naming is one column of `TOP_NAMES` and `LAYER_NAMES`, the one table of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// llama.cpp's GGUF names (`blk.N.attn_q.weight`), shared by its `qwen2`, `dream` and
    /// `llada` architectures.
    LlamaCpp,
    /// Hugging Face `transformers`' Qwen2 names (`model.layers.N.self_attn.q_proj.weight`).
    Transformers,
    /// LLaDA's OLMo-style names (`model.transformer.blocks.N.q_proj.weight`).
    Llada,
}

impl Naming {
    fn column(self) -> usize {
        self as usize
    }

    /// What every per-layer name starts with, before the layer's number.
    fn layers(self) -> &'static str {
        ["blk.", "model.layers.", "model.transformer.blocks."][self.column()]
    }
}

/// `name` as `from` names it, as `to` does (`None`: a tensor with no counterpart, which this
/// engine does not use). A per-layer name is `{layers}{N}.{part}.{kind}`.
pub fn rename(name: &str, from: Naming, to: Naming) -> Option<String> {
    let (f, t) = (from.column(), to.column());
    if let Some(row) = TOP_NAMES.iter().find(|row| row[f] == name) {
        return Some(row[t].to_string());
    }
    let (layer, rest) = name.strip_prefix(from.layers())?.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (part, kind) = rest.rsplit_once('.')?;
    let row = LAYER_NAMES.iter().find(|row| row[f] == part)?;
    Some(format!("{}{layer}.{}.{kind}", to.layers(), row[t]))
}

/// llama.cpp's tensor name -> `transformers`'.
pub fn transformers_name(gguf: &str) -> Option<String> {
    rename(gguf, Naming::LlamaCpp, Naming::Transformers)
}

/// `transformers`' name -> llama.cpp's (for writing, and for error messages).
pub fn gguf_name(ours: &str) -> Option<String> {
    rename(ours, Naming::Transformers, Naming::LlamaCpp)
}

/// `transformers`' name -> LLaDA's, for error messages.
pub fn llada_name(ours: &str) -> Option<String> {
    rename(ours, Naming::Transformers, Naming::Llada)
}

/// Whole-model tensors: llama.cpp's name, `transformers`', LLaDA's (llama.cpp's
/// `gguf-py/gguf/tensor_mapping.py`).
const TOP_NAMES: &[[&str; 3]] = &[
    [
        "token_embd.weight",
        "model.embed_tokens.weight",
        "model.transformer.wte.weight",
    ],
    [
        "output_norm.weight",
        "model.norm.weight",
        "model.transformer.ln_f.weight",
    ],
    [
        "output.weight",
        "lm_head.weight",
        "model.transformer.ff_out.weight",
    ],
];

/// Per-layer parts: llama.cpp's name, `transformers`', LLaDA's. LLaDA's gate is `ff_proj` (the
/// SiLU goes on it, `LLaDALlamaBlock.forward`) and its down projection the block's `ff_out`.
const LAYER_NAMES: &[[&str; 3]] = &[
    ["attn_norm", "input_layernorm", "attn_norm"],
    ["attn_q", "self_attn.q_proj", "q_proj"],
    ["attn_k", "self_attn.k_proj", "k_proj"],
    ["attn_v", "self_attn.v_proj", "v_proj"],
    ["attn_output", "self_attn.o_proj", "attn_out"],
    ["ffn_norm", "post_attention_layernorm", "ff_norm"],
    ["ffn_gate", "mlp.gate_proj", "ff_proj"],
    ["ffn_up", "mlp.up_proj", "up_proj"],
    ["ffn_down", "mlp.down_proj", "ff_out"],
];

/// Row order of a query or key projection (`rows` = heads x `head_dim`) between `transformers`'
/// RoPE layout, where a head's rotated pairs are `(i, i + head_dim / 2)` (`rotate_half`), and
/// llama.cpp's `NORM` RoPE, where they are `(2i, 2i + 1)`: llama.cpp's converter reorders
/// LLaMA-family q/k rows so (`LlamaModel.permute`, which its `LLaDAModel` applies). Entry `d` is
/// the source row of destination row `d`: `to_interleaved` the converter's way, else back.
pub(crate) fn rope_pair_rows(rows: usize, head_dim: usize, to_interleaved: bool) -> Vec<u32> {
    let half = head_dim / 2;
    (0..rows)
        .map(|d| {
            let (head, p) = (d / head_dim * head_dim, d % head_dim);
            let source = if to_interleaved {
                (p % 2) * half + p / 2
            } else {
                2 * (p % half) + p / half
            };
            (head + source) as u32
        })
        .collect()
}

/// Whether the `transformers`-named tensor is a query or key projection (weight or bias),
/// whose rows [`rope_pair_rows`] reorders.
pub(crate) fn is_query_or_key(ours: &str) -> bool {
    [".self_attn.q_proj.", ".self_attn.k_proj."]
        .iter()
        .any(|p| ours.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_names_map_both_ways() {
        for (gguf, ours) in [
            ("token_embd.weight", "model.embed_tokens.weight"),
            ("output.weight", "lm_head.weight"),
            ("blk.0.attn_q.bias", "model.layers.0.self_attn.q_proj.bias"),
            (
                "blk.23.ffn_down.weight",
                "model.layers.23.mlp.down_proj.weight",
            ),
            (
                "blk.7.ffn_norm.weight",
                "model.layers.7.post_attention_layernorm.weight",
            ),
        ] {
            assert_eq!(transformers_name(gguf).as_deref(), Some(ours));
            assert_eq!(gguf_name(ours).as_deref(), Some(gguf));
        }
        for unused in [
            "rope_freqs.weight",
            "blk.x.attn_q.weight",
            "blk.0.attn_qkv.weight",
        ] {
            assert_eq!(transformers_name(unused), None, "{unused}");
        }
    }

    /// LLaDA's names as `modeling_llada.py` writes them, against llama.cpp's
    /// (`tensor_mapping.py`'s `# llada` rows): the same table both ways.
    #[test]
    fn llada_names_map_both_ways() {
        for (llada, gguf) in [
            ("model.transformer.wte.weight", "token_embd.weight"),
            ("model.transformer.ln_f.weight", "output_norm.weight"),
            ("model.transformer.ff_out.weight", "output.weight"),
            (
                "model.transformer.blocks.0.attn_norm.weight",
                "blk.0.attn_norm.weight",
            ),
            (
                "model.transformer.blocks.3.q_proj.weight",
                "blk.3.attn_q.weight",
            ),
            (
                "model.transformer.blocks.3.k_proj.bias",
                "blk.3.attn_k.bias",
            ),
            (
                "model.transformer.blocks.1.attn_out.weight",
                "blk.1.attn_output.weight",
            ),
            (
                "model.transformer.blocks.1.ff_norm.weight",
                "blk.1.ffn_norm.weight",
            ),
            (
                "model.transformer.blocks.31.ff_proj.weight",
                "blk.31.ffn_gate.weight",
            ),
            (
                "model.transformer.blocks.31.up_proj.weight",
                "blk.31.ffn_up.weight",
            ),
            (
                "model.transformer.blocks.31.ff_out.weight",
                "blk.31.ffn_down.weight",
            ),
        ] {
            assert_eq!(
                rename(llada, Naming::Llada, Naming::LlamaCpp).as_deref(),
                Some(gguf)
            );
            let ours = transformers_name(gguf).unwrap();
            assert_eq!(
                rename(llada, Naming::Llada, Naming::Transformers),
                Some(ours.clone())
            );
            assert_eq!(llada_name(&ours).as_deref(), Some(llada));
        }
        for other in [
            "model.transformer.wpe.weight",
            "model.layers.0.self_attn.q_proj.weight",
            "model.transformer.blocks.0.att_proj.weight",
        ] {
            assert_eq!(
                rename(other, Naming::Llada, Naming::Transformers),
                None,
                "{other}"
            );
        }
    }

    /// The converter's permutation (`LlamaModel.permute`: rows `[heads, 2, half]` swapped to
    /// `[heads, half, 2]`) and its inverse.
    #[test]
    fn rope_pair_rows_are_the_converters_permutation() {
        let (heads, head_dim) = (3, 8);
        let to = rope_pair_rows(heads * head_dim, head_dim, true);
        // Head 1: rows 8..16 become 8, 12, 9, 13, 10, 14, 11, 15.
        assert_eq!(&to[8..16], &[8, 12, 9, 13, 10, 14, 11, 15]);
        let back = rope_pair_rows(heads * head_dim, head_dim, false);
        let round: Vec<u32> = back.iter().map(|&r| to[r as usize]).collect();
        assert_eq!(round, (0..24).collect::<Vec<u32>>());
    }
}
