//! How a fill-in-the-middle request becomes the model's token sequence, defined once: the
//! engine lays out requests with it ([`crate::Engine::canvas`]) and the trainers lay out their
//! FIM examples with it (`redraft-train`'s `examples`), so what a model is trained on is what it
//! is asked. (Next edits have their layouts in [`crate::edit`].)

use redraft_prompts::markers;
use serde::Serialize;

use crate::config::AttentionPattern;
use crate::tokenizer::Tokenizer;

/// Where the canvas (the masked middle) sits among the prefix and suffix tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FimLayout {
    /// `prefix [canvas] suffix`: a bidirectional model fills the middle in place.
    Infill,
    /// The model's own FIM tokens, `<|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|>
    /// [canvas]`: how a causal (autoregressive) or block-causal checkpoint sees the suffix.
    PrefixSuffixMiddle {
        prefix: u32,
        suffix: u32,
        middle: u32,
    },
}

impl FimLayout {
    /// The layout for a model attending as `attention` with `tokenizer`'s vocabulary: in place
    /// for bidirectional models; the FIM template for causal and block-causal ones whose
    /// vocabulary has it (one without it fills in place, seeing the suffix only after the
    /// canvas).
    pub fn for_model(attention: AttentionPattern, tokenizer: &Tokenizer) -> FimLayout {
        let id = |t: &str| tokenizer.token_to_id(t);
        match (
            attention.block(),
            id(markers::FIM_PREFIX),
            id(markers::FIM_SUFFIX),
            id(markers::FIM_MIDDLE),
        ) {
            (Some(_), Some(prefix), Some(suffix), Some(middle)) => FimLayout::PrefixSuffixMiddle {
                prefix,
                suffix,
                middle,
            },
            _ => FimLayout::Infill,
        }
    }

    /// The tokens before the canvas and after it, for `prefix` and `suffix`.
    pub fn around(self, prefix: Vec<u32>, suffix: Vec<u32>) -> (Vec<u32>, Vec<u32>) {
        match self {
            FimLayout::Infill => (prefix, suffix),
            FimLayout::PrefixSuffixMiddle {
                prefix: p,
                suffix: s,
                middle: m,
            } => {
                let mut before = Vec::with_capacity(prefix.len() + suffix.len() + 3);
                before.push(p);
                before.extend(prefix);
                before.push(s);
                before.extend(suffix);
                before.push(m);
                (before, Vec::new())
            }
        }
    }

    /// Tokens the layout adds to the prefix, canvas and suffix.
    pub fn added_tokens(self) -> usize {
        match self {
            FimLayout::Infill => 0,
            FimLayout::PrefixSuffixMiddle { .. } => 3,
        }
    }

    /// The FIM tokens (prefix, suffix, middle), for a layout that has them.
    pub fn markers(self) -> Option<[u32; 3]> {
        match self {
            FimLayout::Infill => None,
            FimLayout::PrefixSuffixMiddle {
                prefix,
                suffix,
                middle,
            } => Some([prefix, suffix, middle]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_suffix_middle_puts_the_canvas_last_and_infill_between() {
        let psm = FimLayout::PrefixSuffixMiddle {
            prefix: 100,
            suffix: 101,
            middle: 102,
        };
        assert_eq!(
            psm.around(vec![1, 2], vec![3]),
            (vec![100, 1, 2, 101, 3, 102], vec![])
        );
        assert_eq!(psm.added_tokens(), 3);
        assert_eq!(
            FimLayout::Infill.around(vec![1, 2], vec![3]),
            (vec![1, 2], vec![3])
        );
        assert_eq!(FimLayout::Infill.added_tokens(), 0);
        assert_eq!(psm.markers(), Some([100, 101, 102]));
    }
}
