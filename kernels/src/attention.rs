//! Attention, fused, straight from projection rows: for each (sequence, head, block of queries)
//! one task computes the block's scores against every key it sees, their softmax and the
//! weighted values, so no `[heads, queries, keys]` tensor is ever materialised, nothing is
//! transposed, and grouped-query heads read their shared keys in place. Keys past a sequence's
//! length (padding) are left out entirely, and so are the keys a query may not see
//! ([`Shapes::visible`]: causal or block-causal patterns). A decoding step's few query rows (at
//! most `FEW` a sequence) take the kernel of `attention/few_queries.rs` instead, where these
//! blocks would be tiny matrix products; on a CPU with AVX-512 the blocks are computed by
//! `attention/tiles.rs` rather than through `gemm`, whose packing of each block's keys and
//! values is most of a product only `head_dim` deep.

mod few_queries;
#[cfg(target_arch = "x86_64")]
mod tiles;

use rayon::prelude::*;

use crate::rows::softmax_rows;
use crate::{DisjointOutput, Error, Result};

/// Which columns of the fused projection rows hold what (see [`attention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLayout {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

impl HeadLayout {
    /// Values in a fused q|k|v row: the query heads, then the key heads, then the value heads.
    pub fn qkv_width(self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
}

/// The shapes of one call: `q` holds `batch` sequences of `q_len` rows of `q_stride` values
/// (each query head's `head_dim` values side by side from column 0); `kv` holds `batch`
/// sequences of `keys` rows of `kv_stride` values (the key heads from column `k_col`, the value
/// heads right after them).
pub struct Shapes<'a> {
    pub layout: HeadLayout,
    pub batch: usize,
    pub q_len: usize,
    pub q_stride: usize,
    pub keys: usize,
    pub kv_stride: usize,
    pub k_col: usize,
    /// The query rows computed, of `q_len`.
    pub queries: std::ops::Range<usize>,
    /// Sequence `b` attends to its first `key_lens[b]` keys (in `1..=keys`).
    pub key_lens: &'a [usize],
    /// `visible(row, n)`: how many of the first `n` keys query row `row` (of `q_len`) sees; at
    /// most `n`, and not fewer for a later row (a causal or block pattern). Every key for
    /// bidirectional attention: `&|_, n| n`.
    pub visible: &'a (dyn Fn(usize, usize) -> usize + Sync),
}

impl Shapes<'_> {
    /// An error unless `q` and `kv` hold what the shapes say, which every read of the kernels
    /// relies on.
    fn check(&self, q: &[f32], kv: &[f32]) -> Result<()> {
        let HeadLayout {
            heads,
            kv_heads,
            head_dim: hd,
        } = self.layout;
        let (batch, keys) = (self.batch, self.keys);
        let q_rows = batch * self.q_len;
        if self.q_stride < heads * hd
            || self.kv_stride < self.k_col + 2 * kv_heads * hd
            || self.queries.end > self.q_len
        {
            return Err(Error::Shape(format!(
                "rows of {} / {} values do not hold {heads} query and {kv_heads} key heads of {hd} \
                 from column {} (queries {:?} of {})",
                self.q_stride, self.kv_stride, self.k_col, self.queries, self.q_len
            )));
        }
        if q.len() < q_rows * self.q_stride || kv.len() < batch * keys * self.kv_stride {
            return Err(Error::Shape(format!(
                "{} query and {} key values for {batch} sequences of {} rows of {} and {keys} \
                 of {}",
                q.len(),
                kv.len(),
                self.q_len,
                self.q_stride,
                self.kv_stride
            )));
        }
        if kv_heads == 0 || heads % kv_heads != 0 || self.key_lens.len() != batch {
            return Err(Error::Shape(format!(
                "{heads} heads, {kv_heads} key heads, {} key lengths for {batch} sequences",
                self.key_lens.len()
            )));
        }
        if let Some(&bad) = self.key_lens.iter().find(|&&l| l == 0 || l > keys) {
            return Err(Error::Shape(format!("key length {bad} outside 1..={keys}")));
        }
        Ok(())
    }
}

/// Attention output `[batch, queries.len(), heads * head_dim]` for queries `s.queries` of `q`
/// against the keys and values of `kv`, as [`Shapes`] lays them out; an error when the buffers
/// do not hold what the shapes say.
pub fn attention(q: &[f32], kv: &[f32], s: &Shapes<'_>) -> Result<Vec<f32>> {
    s.check(q, kv)?;
    if s.queries.len() <= few_queries::FEW {
        return Ok(few_queries::attention(q, kv, s));
    }
    #[cfg(target_arch = "x86_64")]
    if tiles::available(s.layout.head_dim) {
        return Ok(tiles::attention(q, kv, s));
    }
    Ok(blocks(q, kv, s))
}

/// [`attention`] with every block of queries through `gemm`, whatever the CPU: the path of CPUs
/// without AVX-512, and what benchmarks compare the AVX-512 tiles against.
pub fn attention_through_gemm(q: &[f32], kv: &[f32], s: &Shapes<'_>) -> Result<Vec<f32>> {
    s.check(q, kv)?;
    Ok(blocks(q, kv, s))
}

/// The blocked path without AVX-512: one task per (sequence, head, block of up to 64 queries),
/// two matrix products through `gemm` with the block's scores in between.
fn blocks(q: &[f32], kv: &[f32], s: &Shapes<'_>) -> Vec<f32> {
    let HeadLayout {
        heads,
        kv_heads,
        head_dim: hd,
    } = s.layout;
    let (q_len, q_stride, keys, kv_stride) = (s.q_len, s.q_stride, s.keys, s.kv_stride);
    let queries = s.queries.len();
    let group = heads / kv_heads;
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0f32; s.batch * queries * heads * hd];
    let shared = DisjointOutput::new(&mut out);
    // Blocks small enough to keep a block's scores in L2, and enough tasks for every thread.
    let block = queries.clamp(1, 64);
    let blocks = queries.div_ceil(block);
    (0..s.batch * heads * blocks)
        .into_par_iter()
        .for_each(|task| {
            let (b, rest) = (task / (heads * blocks), task % (heads * blocks));
            let (h, blk) = (rest / blocks, rest % blocks);
            let q0 = blk * block;
            let rows = block.min(queries - q0);
            // Query rows see a prefix of the keys each (all of them when bidirectional); the
            // block's last row sees the most. At most the sequence's keys whatever `visible`
            // says: the reads below rely on it.
            let row0 = s.queries.start + q0;
            let kl = (s.visible)(row0 + rows - 1, s.key_lens[b]).min(s.key_lens[b]);
            let g = h / group;
            let q_at = (b * q_len + row0) * q_stride + h * hd;
            let k_at = b * keys * kv_stride + s.k_col + g * hd;
            let v_at = k_at + kv_heads * hd;
            let out_at = ((b * queries + q0) * heads + h) * hd;
            let mut scores = vec![0f32; rows * kl];
            // SAFETY: `check` holds q to batch * q_len rows of q_stride >= heads * hd values, so
            // rows row0..row0 + rows (< q_len) of sequence b, columns h * hd..(h + 1) * hd, lie
            // in `q`; it holds kv to batch * keys rows of kv_stride >= k_col + 2 * kv_heads * hd,
            // so keys 0..kl (kl <= key_lens[b] <= keys) of key head g (< kv_heads) and their
            // values lie in `kv`; `scores` holds rows * kl floats. Both products run on this
            // thread (`Parallelism::None`).
            unsafe {
                gemm::gemm(
                    rows,
                    kl,
                    hd,
                    scores.as_mut_ptr(),
                    1,
                    kl as isize,
                    false,
                    q.as_ptr().add(q_at),
                    1,
                    q_stride as isize,
                    kv.as_ptr().add(k_at),
                    kv_stride as isize,
                    1,
                    0.0,
                    scale,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
            if (s.visible)(row0, kl) == kl {
                softmax_rows(&mut scores, kl);
            } else {
                for (r, row) in scores.chunks_mut(kl).enumerate() {
                    let seen = (s.visible)(row0 + r, kl);
                    softmax_rows(&mut row[..seen], seen);
                    row[seen..].fill(0.0);
                }
            }
            // SAFETY: the values are read as the keys above. The destination rows
            // (b, q0..q0 + rows, head h, 0..hd), heads * hd apart, lie in `out` (b < batch,
            // q0 + rows <= queries, h < heads) and belong to this task alone: no other task
            // has this (b, h, block), so `shared`'s contract holds.
            unsafe {
                gemm::gemm(
                    rows,
                    hd,
                    kl,
                    shared.at(out_at),
                    1,
                    (heads * hd) as isize,
                    false,
                    scores.as_ptr(),
                    1,
                    kl as isize,
                    kv.as_ptr().add(v_at),
                    1,
                    kv_stride as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{max_abs_diff, random};

    /// The textbook formula, one (sequence, query row, head) at a time in f64.
    fn reference(q: &[f32], kv: &[f32], s: &Shapes<'_>) -> Vec<f32> {
        let HeadLayout {
            heads,
            kv_heads,
            head_dim: hd,
        } = s.layout;
        let group = heads / kv_heads;
        let mut out = Vec::new();
        for b in 0..s.batch {
            for row in s.queries.clone() {
                let seen = (s.visible)(row, s.key_lens[b]);
                for h in 0..heads {
                    let qh = &q[(b * s.q_len + row) * s.q_stride + h * hd..][..hd];
                    let key = |j: usize, values: bool| {
                        let col = s.k_col + (h / group + if values { kv_heads } else { 0 }) * hd;
                        &kv[(b * s.keys + j) * s.kv_stride + col..][..hd]
                    };
                    let scores: Vec<f64> = (0..seen)
                        .map(|j| {
                            let dot: f64 = qh
                                .iter()
                                .zip(key(j, false))
                                .map(|(&a, &k)| a as f64 * k as f64)
                                .sum();
                            dot / (hd as f64).sqrt()
                        })
                        .collect();
                    let max = scores.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
                    let weights: Vec<f64> = scores.iter().map(|v| (v - max).exp()).collect();
                    let sum: f64 = weights.iter().sum();
                    for c in 0..hd {
                        let v: f64 = (0..seen).map(|j| weights[j] * key(j, true)[c] as f64).sum();
                        out.push((v / sum) as f32);
                    }
                }
            }
        }
        out
    }

    /// Every path this CPU runs (a few query rows, blocks of them through `gemm`, and blocks in
    /// AVX-512 tiles) equals the formula, with grouped and ungrouped heads, the head sizes the
    /// vector paths have code for and ones they have not, padding, a block pattern, blocks
    /// that end on and off the tiles' 48 rows and 8 keys, and keys from a separate cache.
    #[test]
    fn every_path_matches_the_formula() {
        let block_of_4 = |row: usize, n: usize| n.min((row / 4 + 1) * 4);
        let bidirectional = |_: usize, n: usize| n;
        let patterns: [&(dyn Fn(usize, usize) -> usize + Sync); 2] = [&bidirectional, &block_of_4];
        for (heads, kv_heads, head_dim) in
            [(14, 2, 64), (4, 4, 32), (8, 2, 128), (6, 3, 24), (2, 1, 20)]
        {
            let layout = HeadLayout {
                heads,
                kv_heads,
                head_dim,
            };
            let width = layout.qkv_width();
            for (keys, queries) in [
                (17, 16..17),
                (70, 62..70),
                (70, 0..70),
                (130, 60..75),
                (103, 0..103),
                (9, 0..9),
            ] {
                let rows = random(2 * keys * width, keys as u64);
                let key_lens = [keys, keys.div_ceil(2).max(queries.end)];
                // Keys and values from a separate cache (no query columns).
                let cache: Vec<f32> = rows
                    .chunks(width)
                    .flat_map(|row| &row[heads * head_dim..])
                    .copied()
                    .collect();
                for visible in patterns {
                    for (kv, kv_stride, k_col) in [
                        (&rows, width, heads * head_dim),
                        (&cache, width - heads * head_dim, 0),
                    ] {
                        let shapes = Shapes {
                            layout,
                            batch: 2,
                            q_len: keys,
                            q_stride: width,
                            keys,
                            kv_stride,
                            k_col,
                            queries: queries.clone(),
                            key_lens: &key_lens,
                            visible,
                        };
                        let expected = reference(&rows, kv, &shapes);
                        let mut paths = vec![("chosen", attention(&rows, kv, &shapes).unwrap())];
                        if queries.len() > few_queries::FEW {
                            paths.push(("gemm", blocks(&rows, kv, &shapes)));
                        }
                        #[cfg(target_arch = "x86_64")]
                        if queries.len() > few_queries::FEW && tiles::available(head_dim) {
                            paths.push(("tiles", tiles::attention(&rows, kv, &shapes)));
                        }
                        for (path, got) in paths {
                            let diff = max_abs_diff(&got, &expected);
                            assert!(
                                diff < 1e-5,
                                "{path}: {layout:?}, {keys} keys, {queries:?}: {diff}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn buffers_that_do_not_hold_the_shapes_are_errors() {
        let layout = HeadLayout {
            heads: 6,
            kv_heads: 2,
            head_dim: 8,
        };
        let rows = vec![0f32; 3 * 80];
        let shapes = |queries: std::ops::Range<usize>, key_lens: &'static [usize]| Shapes {
            layout,
            batch: key_lens.len().max(1),
            q_len: 3,
            q_stride: 80,
            keys: 3,
            kv_stride: 80,
            k_col: 48,
            queries,
            key_lens,
            visible: &|_, n| n,
        };
        assert!(attention(&rows, &rows, &shapes(0..3, &[3])).is_ok());
        for (queries, lens, why) in [
            (0..3, &[4][..], "key length past the keys"),
            (0..3, &[0], "an empty sequence"),
            (0..3, &[3, 3], "two sequences in a buffer of one"),
            (0..4, &[3], "queries past the rows"),
        ] {
            let err = attention(&rows, &rows, &shapes(queries, lens));
            assert!(matches!(err, Err(Error::Shape(_))), "{why}");
        }
        let short = &rows[..200];
        assert!(attention(&rows, short, &shapes(0..3, &[3])).is_err());
        let far = Shapes {
            k_col: 49,
            ..shapes(0..3, &[3])
        };
        assert!(attention(&rows, &rows, &far).is_err());
    }
}
