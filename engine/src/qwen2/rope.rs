//! Rotary position embeddings as tables, in `transformers`' arithmetic.

use std::borrow::Cow;
use std::ops::Range;

/// RoPE rotations (`[position, head_dim / 2]` cos and sin), precomputed for the usual
/// lengths and computed on demand past them.
pub(super) struct Rope {
    pub(super) cos: Vec<f32>,
    pub(super) sin: Vec<f32>,
    pub(super) theta: f64,
    pub(super) head_dim: usize,
}

impl Rope {
    const PRECOMPUTED: usize = 4096;

    pub(super) fn new(theta: f64, head_dim: usize) -> Rope {
        let (cos, sin) = Rope::tables(theta, head_dim, 0..Rope::PRECOMPUTED);
        Rope {
            cos,
            sin,
            theta,
            head_dim,
        }
    }

    pub(super) fn tables(
        theta: f64,
        head_dim: usize,
        positions: Range<usize>,
    ) -> (Vec<f32>, Vec<f32>) {
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for pos in positions {
            for i in 0..half {
                // Same as transformers: inv_freq in f32, the product in f32.
                let inv_freq = (1.0 / theta.powf((2 * i) as f64 / head_dim as f64)) as f32;
                let angle = pos as f32 * inv_freq;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        (cos, sin)
    }

    /// The rotations for each of `spans`' positions, in order.
    pub(super) fn at_spans(&self, spans: &[Range<usize>]) -> (Cow<'_, [f32]>, Cow<'_, [f32]>) {
        if let [span] = spans {
            return self.at(span.clone());
        }
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for span in spans {
            let (c, s) = self.at(span.clone());
            cos.extend_from_slice(&c);
            sin.extend_from_slice(&s);
        }
        (Cow::Owned(cos), Cow::Owned(sin))
    }

    /// The rotations for `positions`.
    pub(super) fn at(&self, positions: Range<usize>) -> (Cow<'_, [f32]>, Cow<'_, [f32]>) {
        let half = self.head_dim / 2;
        if positions.end <= Rope::PRECOMPUTED {
            let span = positions.start * half..positions.end * half;
            (
                Cow::Borrowed(&self.cos[span.clone()]),
                Cow::Borrowed(&self.sin[span]),
            )
        } else {
            let (cos, sin) = Rope::tables(self.theta, self.head_dim, positions);
            (Cow::Owned(cos), Cow::Owned(sin))
        }
    }
}
