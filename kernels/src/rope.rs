//! The projection bias and rotary position embedding of fused q|k|v rows, in one pass.

use rayon::prelude::*;

use crate::attention::HeadLayout;
use crate::{Error, Result};

/// Adds `bias` to every fused q|k|v row of `qkv` (sequences of `rows` rows of
/// [`HeadLayout::qkv_width`] values), then rotates its query and key heads (RoPE, the
/// `rotate_half` convention) with `cos`/`sin` rows (`[rows, head_dim / 2]`) for the rows'
/// positions. An error when the buffers do not match the layout.
pub fn bias_rope(
    qkv: &mut [f32],
    rows: usize,
    layout: HeadLayout,
    bias: &[f32],
    cos: &[f32],
    sin: &[f32],
) -> Result<()> {
    let HeadLayout {
        heads,
        kv_heads,
        head_dim: hd,
    } = layout;
    let width = layout.qkv_width();
    let half = hd / 2;
    if bias.len() != width
        || cos.len() != rows * half
        || sin.len() != rows * half
        || rows == 0
        || !qkv.len().is_multiple_of(rows * width.max(1))
    {
        return Err(Error::Shape(format!(
            "{} values for rows of {width}, bias {}, {} rotations for {rows} rows",
            qkv.len(),
            bias.len(),
            cos.len()
        )));
    }
    let rotated = (heads + kv_heads) * hd;
    qkv.par_chunks_mut(width.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            let t = i % rows;
            let (cos, sin) = (
                &cos[t * half..(t + 1) * half],
                &sin[t * half..(t + 1) * half],
            );
            for (x, b) in row.iter_mut().zip(bias) {
                *x += b;
            }
            for head in row[..rotated].chunks_mut(hd) {
                let (x1, x2) = head.split_at_mut(half);
                for j in 0..half {
                    let (a, b) = (x1[j], x2[j]);
                    x1[j] = a * cos[j] - b * sin[j];
                    x2[j] = b * cos[j] + a * sin[j];
                }
            }
        });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn biases_every_head_and_rotates_queries_and_keys() {
        let layout = HeadLayout {
            heads: 2,
            kv_heads: 1,
            head_dim: 4,
        };
        // Two sequences of two rows; head values 1..=4, bias 1 everywhere.
        let row: Vec<f32> = (0..4).flat_map(|_| [1.0, 2.0, 3.0, 4.0]).collect();
        let mut qkv: Vec<f32> = row.iter().cycle().take(4 * 16).copied().collect();
        let bias = vec![1.0; 16];
        // Position 0: no rotation; position 1: a quarter turn (cos 0, sin 1).
        let (cos, sin) = ([1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]);
        bias_rope(&mut qkv, 2, layout, &bias, &cos, &sin).unwrap();
        let unrotated = [2.0, 3.0, 4.0, 5.0];
        // (a, b) -> (a cos - b sin, b cos + a sin) with a in the first half, b in the second.
        let turned = [-4.0, -5.0, 2.0, 3.0];
        for (i, row) in qkv.chunks(16).enumerate() {
            let expected = if i % 2 == 0 { unrotated } else { turned };
            for head in row[..12].chunks(4) {
                assert_eq!(head, expected, "row {i}");
            }
            assert_eq!(&row[12..], unrotated, "the value head only gets the bias");
        }
        assert!(bias_rope(&mut qkv, 3, layout, &bias, &cos, &sin).is_err());
        assert!(bias_rope(&mut qkv, 2, layout, &bias[1..], &cos, &sin).is_err());
    }
}
