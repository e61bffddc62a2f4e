//! The model held to a plain reference: a slow, obviously-written Qwen2 forward in f64 (RMSNorm,
//! q/k/v with biases, RoPE with `rotate_half`, grouped-query attention under the pattern's mask,
//! SwiGLU, the head) on tiny random models of awkward shapes (a single head, one key head for
//! five query heads, widths and vocabularies that are no multiple of a block or a SIMD width),
//! under every attention pattern and both kernel sets, also at positions past RoPE's
//! precomputed tables; and the cached passes (a window pass, a stored pass keeping a causal
//! prefix, several calls made in one pass) held to fresh passes.

use std::collections::HashMap;
use std::ops::Range;

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use redraft_engine::checkpoint::Weights;
use redraft_engine::config::{AttentionPattern, ModelConfig};
use redraft_engine::ops::Kernels;
use redraft_engine::qwen2::Qwen2;
use redraft_engine::sampler::{ModelCall, Pass};
use redraft_engine::ContextCache;

/// A random model's config: `heads` query heads of `head_dim` over `kv_heads` key heads.
pub(super) fn config(
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    vocab: usize,
    positions: usize,
) -> ModelConfig {
    serde_json::from_value(serde_json::json!({
        "model_type": "qwen2", "vocab_size": vocab, "hidden_size": hidden,
        "intermediate_size": hidden * 2 + 6, "num_hidden_layers": 2,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "max_position_embeddings": positions, "rope_theta": 1000.0, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": false
    }))
    .unwrap()
}

/// Weights for `config`, every tensor random (biases and norms too), scaled so attention is far
/// from uniform and the logits spread over a few units.
pub(super) fn random_weights(config: &ModelConfig, seed: u64) -> HashMap<String, Tensor> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut tensor = |shape: &[usize], centre: f32, scale: f32| {
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|_| centre + scale * (rng.random::<f32>() * 2.0 - 1.0))
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    };
    let (d, v, ffn, hd) = (
        config.hidden_size,
        config.vocab_size,
        config.intermediate_size,
        config.head_dim(),
    );
    let (q, kv) = (config.num_attention_heads * hd, config.num_kv_heads() * hd);
    let matrix = |rows: usize, cols: usize| (rows, cols, 1.7 / (cols as f32).sqrt());
    let mut w = HashMap::new();
    w.insert(
        "model.embed_tokens.weight".into(),
        tensor(&[v, d], 0.0, 1.0),
    );
    for i in 0..config.num_hidden_layers {
        let p = format!("model.layers.{i}");
        for (name, (rows, cols, scale)) in [
            ("self_attn.q_proj.weight", matrix(q, d)),
            ("self_attn.k_proj.weight", matrix(kv, d)),
            ("self_attn.v_proj.weight", matrix(kv, d)),
            ("self_attn.o_proj.weight", matrix(d, q)),
            ("mlp.gate_proj.weight", matrix(ffn, d)),
            ("mlp.up_proj.weight", matrix(ffn, d)),
            ("mlp.down_proj.weight", matrix(d, ffn)),
        ] {
            w.insert(format!("{p}.{name}"), tensor(&[rows, cols], 0.0, scale));
        }
        for (name, n) in [
            ("self_attn.q_proj.bias", q),
            ("self_attn.k_proj.bias", kv),
            ("self_attn.v_proj.bias", kv),
        ] {
            w.insert(format!("{p}.{name}"), tensor(&[n], 0.0, 0.5));
        }
        for name in ["input_layernorm.weight", "post_attention_layernorm.weight"] {
            w.insert(format!("{p}.{name}"), tensor(&[d], 1.0, 0.3));
        }
    }
    w.insert("model.norm.weight".into(), tensor(&[d], 1.0, 0.3));
    w.insert("lm_head.weight".into(), tensor(&[v, d], 0.0, 1.0));
    w
}

pub(super) fn model(
    config: &ModelConfig,
    tensors: &HashMap<String, Tensor>,
    pattern: AttentionPattern,
    kernels: Kernels,
) -> Qwen2 {
    let weights = Weights::from_tensors(tensors.clone(), "random");
    Qwen2::new(config, &weights, &Device::Cpu)
        .unwrap()
        .with_attention(pattern)
        .with_kernels(kernels)
        .unwrap()
}

/// The reference: every position's logits `[T][V]` of `tokens` alone, in f64.
pub(super) fn reference(
    config: &ModelConfig,
    tensors: &HashMap<String, Tensor>,
    pattern: AttentionPattern,
    tokens: &[u32],
) -> Vec<Vec<f32>> {
    let get = |name: &str| -> Vec<f64> {
        tensors[name]
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect()
    };
    let (d, hd) = (config.hidden_size, config.head_dim());
    let (heads, kv_heads) = (config.num_attention_heads, config.num_kv_heads());
    let eps = config.rms_norm_eps;
    let theta = config.rope_theta();
    let t = tokens.len();
    // y = x W^T (+ b), W `[out, inp]`.
    let linear = |x: &[Vec<f64>], w: &[f64], b: Option<&[f64]>| -> Vec<Vec<f64>> {
        let inp = x[0].len();
        let out = w.len() / inp;
        x.iter()
            .map(|row| {
                (0..out)
                    .map(|o| {
                        let dot: f64 = (0..inp).map(|i| row[i] * w[o * inp + i]).sum();
                        dot + b.map_or(0.0, |b| b[o])
                    })
                    .collect()
            })
            .collect()
    };
    let norm = |x: &[Vec<f64>], g: &[f64]| -> Vec<Vec<f64>> {
        x.iter()
            .map(|row| {
                let ms = row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64;
                let r = 1.0 / (ms + eps).sqrt();
                row.iter().zip(g).map(|(v, g)| v * r * g).collect()
            })
            .collect()
    };
    // transformers' rotate_half: pairs (i, i + hd/2), angle pos * theta^(-2i/hd).
    let rope = |v: &mut [f64], pos: usize| {
        let half = hd / 2;
        for i in 0..half {
            let inv = 1.0 / theta.powf((2 * i) as f64 / hd as f64);
            let a = pos as f64 * inv;
            let (c, s) = (a.cos(), a.sin());
            let (x1, x2) = (v[i], v[i + half]);
            v[i] = x1 * c - x2 * s;
            v[i + half] = x2 * c + x1 * s;
        }
    };
    let embed = get("model.embed_tokens.weight");
    let mut x: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&tok| embed[tok as usize * d..(tok as usize + 1) * d].to_vec())
        .collect();
    for l in 0..config.num_hidden_layers {
        let p = |name: &str| get(&format!("model.layers.{l}.{name}"));
        let h = norm(&x, &p("input_layernorm.weight"));
        let mut q = linear(
            &h,
            &p("self_attn.q_proj.weight"),
            Some(&p("self_attn.q_proj.bias")),
        );
        let mut k = linear(
            &h,
            &p("self_attn.k_proj.weight"),
            Some(&p("self_attn.k_proj.bias")),
        );
        let v = linear(
            &h,
            &p("self_attn.v_proj.weight"),
            Some(&p("self_attn.v_proj.bias")),
        );
        for pos in 0..t {
            for head in 0..heads {
                rope(&mut q[pos][head * hd..(head + 1) * hd], pos);
            }
            for head in 0..kv_heads {
                rope(&mut k[pos][head * hd..(head + 1) * hd], pos);
            }
        }
        let group = heads / kv_heads;
        let mut attn = vec![vec![0f64; heads * hd]; t];
        for (i, out) in attn.iter_mut().enumerate() {
            let seen = pattern.visible_keys(i, t);
            for head in 0..heads {
                let g = head / group;
                let qh = &q[i][head * hd..(head + 1) * hd];
                let scores: Vec<f64> = (0..seen)
                    .map(|j| {
                        let kh = &k[j][g * hd..(g + 1) * hd];
                        qh.iter().zip(kh).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                for (j, e) in e.iter().enumerate() {
                    for c in 0..hd {
                        out[head * hd + c] += e / sum * v[j][g * hd + c];
                    }
                }
            }
        }
        let o = linear(&attn, &p("self_attn.o_proj.weight"), None);
        for (x, o) in x.iter_mut().zip(&o) {
            for (x, o) in x.iter_mut().zip(o) {
                *x += o;
            }
        }
        let h = norm(&x, &p("post_attention_layernorm.weight"));
        let gate = linear(&h, &p("mlp.gate_proj.weight"), None);
        let up = linear(&h, &p("mlp.up_proj.weight"), None);
        let act: Vec<Vec<f64>> = gate
            .iter()
            .zip(&up)
            .map(|(g, u)| {
                g.iter()
                    .zip(u)
                    .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                    .collect()
            })
            .collect();
        let down = linear(&act, &p("mlp.down_proj.weight"), None);
        for (x, o) in x.iter_mut().zip(&down) {
            for (x, o) in x.iter_mut().zip(o) {
                *x += o;
            }
        }
    }
    let h = norm(&x, &get("model.norm.weight"));
    linear(&h, &get("lm_head.weight"), None)
        .into_iter()
        .map(|row| row.into_iter().map(|v| v as f32).collect())
        .collect()
}

/// `n` tokens of a vocabulary of `vocab` from `seed`.
pub(super) fn tokens(seed: u64, n: usize, vocab: usize) -> Vec<u32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(0..vocab as u32)).collect()
}

pub(super) fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Logits `[window][V]` of a call over one sequence.
pub(super) fn call(
    model: &Qwen2,
    ids: &[u32],
    window: Range<usize>,
    cache: &mut ContextCache,
    pass: Pass,
) -> Vec<Vec<f32>> {
    model
        .forward(&[ids.to_vec()], window, cache, pass)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec2()
        .unwrap()
}

/// Logits `[window][V]` of an uncached full pass over one sequence: what every cached pass is
/// held to.
fn fresh(model: &Qwen2, ids: &[u32], window: Range<usize>) -> Vec<Vec<f32>> {
    call(
        model,
        ids,
        window,
        &mut ContextCache::default(),
        Pass::Full { store: false },
    )
}

const PATTERNS: [AttentionPattern; 4] = [
    AttentionPattern::Bidirectional,
    AttentionPattern::Causal,
    AttentionPattern::Block(4),
    AttentionPattern::Block(3),
];

/// Shapes no real model has but every kernel must take: (hidden, heads, kv heads, head dim,
/// vocabulary).
const SHAPES: [(usize, usize, usize, usize, usize); 4] = [
    (40, 5, 1, 8, 101),
    (48, 1, 1, 48, 70),
    (36, 3, 3, 12, 33),
    (64, 4, 2, 32, 97),
];

/// Every position's logits of a full pass are the reference's (measured: at most 1.1e-5 of
/// logits up to 18), whatever the shape, pattern and kernels: the few-query kernel and the
/// blocked one, key heads shared by five query heads or by none, widths the tiles do not divide.
#[test]
fn full_passes_match_the_reference_on_odd_shapes_and_every_pattern() {
    for (s, &(hidden, heads, kv, hd, vocab)) in SHAPES.iter().enumerate() {
        let config = config(hidden, heads, kv, hd, vocab, 48);
        let tensors = random_weights(&config, s as u64);
        // Up to the model's last position, and few enough rows for the few-query kernel.
        for len in [48, 5] {
            let ids = tokens(100 + s as u64, len, vocab);
            for pattern in PATTERNS {
                let expected = reference(&config, &tensors, pattern, &ids);
                let scale = expected.iter().flatten().fold(0f32, |m, v| m.max(v.abs()));
                for kernels in [Kernels::Cpu, Kernels::Portable] {
                    let model = model(&config, &tensors, pattern, kernels);
                    let got = fresh(&model, &ids, 0..len);
                    let diff = max_diff(&got, &expected);
                    assert!(
                        diff <= 1e-4 * scale.max(1.0),
                        "shape {s}, {len} tokens, {pattern:?}, {kernels:?}: {diff} (logits up to {scale})"
                    );
                }
            }
        }
    }
}

/// A causal or block-causal window pass recomputes the whole blocks its window touches: a row
/// of a block sees every other row of it, so one kept from before the window's tokens changed
/// (before the window's start, or after its end) is stale. Then the window's logits are a
/// fresh pass's, and so are a later stored pass's that keeps what the cache calls exact: rows
/// computed past the window saw its old tokens, and the cache stops vouching for them.
#[test]
fn causal_window_passes_give_fresh_logits_and_keep_only_exact_rows() {
    let (hidden, heads, kv, hd, vocab) = SHAPES[0];
    let config = config(hidden, heads, kv, hd, vocab, 48);
    let tensors = random_weights(&config, 7);
    let old = tokens(1, 48, vocab);
    let changed = |window: Range<usize>| {
        let mut new = old.clone();
        for t in &mut new[window] {
            *t = (*t * 7 + 3) % vocab as u32;
        }
        new
    };
    for pattern in &PATTERNS[1..] {
        let model = model(&config, &tensors, *pattern, Kernels::Cpu);
        // Windows starting and ending inside blocks (of 3 and 4), the last at the sequence's end.
        for window in [30..38, 25..31, 13..14, 41..48] {
            let mut cache = ContextCache::default();
            call(&model, &old, 0..48, &mut cache, Pass::Full { store: true });
            let new = changed(window.clone());
            let got = call(&model, &new, window.clone(), &mut cache, Pass::Window);
            let diff = max_diff(&got, &fresh(&model, &new, window.clone()));
            assert!(diff < 1e-4, "{pattern:?}, window {window:?}: {diff}");
            let got = call(&model, &new, 40..48, &mut cache, Pass::Full { store: true });
            let diff = max_diff(&got, &fresh(&model, &new, 40..48));
            assert!(
                diff < 1e-4,
                "{pattern:?}, stored after window {window:?}: {diff}"
            );
        }
    }
}

/// The sampler's block-by-block decoding reads, from every window pass, rows a fresh pass
/// would give: those scoring the masked slots of the active block. A block finished by the
/// last step's commit, or a block shared with tokens after the canvas, once left rows in the
/// cache that had seen masks (0.1 to 0.3 off in these runs).
#[test]
fn block_decoding_reads_exact_rows_from_window_passes() {
    use redraft_engine::sampler::{Canvas, Controls, Denoiser, Effort, Sampler, SamplerConfig};
    /// The model, each window pass's rows for the active block held to a fresh pass's.
    struct Checked<'m> {
        model: &'m Qwen2,
        mask: u32,
        worst: std::cell::Cell<f32>,
        windows: std::cell::Cell<usize>,
    }
    impl Denoiser for Checked<'_> {
        type Cache = ContextCache;
        fn vocab_size(&self) -> usize {
            self.model.vocab_size()
        }
        fn logits(
            &self,
            tokens: &[Vec<u32>],
            window: Range<usize>,
            cache: &mut ContextCache,
            pass: Pass,
        ) -> redraft_engine::Result<Vec<f32>> {
            let got = self.model.logits(tokens, window.clone(), cache, pass)?;
            let seq = &tokens[0];
            let (Pass::Window, Some(first)) = (pass, seq.iter().position(|&t| t == self.mask))
            else {
                return Ok(got);
            };
            let mut fresh_cache = ContextCache::default();
            let full = Pass::Full { store: false };
            let fresh = self
                .model
                .logits(tokens, window.clone(), &mut fresh_cache, full)?;
            let (v, n) = (self.vocab_size(), self.model.attention().block().unwrap());
            let end = ((first / n + 1) * n).min(seq.len());
            // The logit shift: position p is scored by row p - 1.
            for row in (first..end).filter(|&p| seq[p] == self.mask).map(|p| p - 1) {
                let i = row - window.start;
                let diff = max_diff(
                    &[got[i * v..(i + 1) * v].to_vec()],
                    &[fresh[i * v..(i + 1) * v].to_vec()],
                );
                self.worst.set(self.worst.get().max(diff));
            }
            self.windows.set(self.windows.get() + 1);
            Ok(got)
        }
        fn cache_covers(
            &self,
            cache: &ContextCache,
            tokens: &[Vec<u32>],
            window: &Range<usize>,
        ) -> bool {
            self.model.cache_covers(cache, tokens, window)
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    let (config, mut settings) = redraft_engine::engine::load_settings(&dir).unwrap();
    let weights = Weights::load(&dir, candle_core::DType::F32, &Device::Cpu).unwrap();
    let vocab = config.vocab_size;
    for pattern in [AttentionPattern::Block(4), AttentionPattern::Block(3)] {
        let model = Qwen2::new(&config, &weights, &Device::Cpu)
            .unwrap()
            .with_attention(pattern);
        settings.attention = pattern;
        settings.logit_shift = true;
        let sampler = Sampler::new(settings, &[]);
        // Canvases ending the sequence, and one followed by text (a next edit's layout).
        for (prefix, canvas, suffix) in [(37, 12, 0), (40, 9, 0), (30, 10, 7)] {
            let text =
                |seed: u64, n: usize| tokens(seed, n, vocab - 2).iter().map(|t| t + 2).collect();
            let checked = Checked {
                model: &model,
                mask: settings.mask_token_id,
                worst: 0.0.into(),
                windows: 0.into(),
            };
            let config = SamplerConfig {
                guess_context: false,
                ..SamplerConfig::effort(Effort::High)
            };
            let shape = (pattern, prefix, canvas, suffix);
            let canvas = Canvas::new(text(1, prefix), canvas, text(2, suffix));
            let mut cache = ContextCache::default();
            sampler
                .run(
                    &checked,
                    &mut cache,
                    &[canvas],
                    &config,
                    Controls::default(),
                )
                .unwrap();
            assert!(checked.windows.get() > 1, "{shape:?}: window passes");
            let worst = checked.worst.get();
            assert!(worst < 1e-4, "{shape:?}: rows off by {worst}");
        }
    }
}

/// Several calls in one pass (`forward_many`: a server's batches stepped together) give each
/// call the logits and the cache it gets alone, on shapes whose heads share one key head or
/// stand alone, under every pattern and kind of pass, with padded batches among them.
#[test]
fn calls_made_together_equal_calls_made_alone_on_odd_shapes() {
    for (s, &(hidden, heads, kv, hd, vocab)) in SHAPES.iter().enumerate() {
        let config = config(hidden, heads, kv, hd, vocab, 48);
        let tensors = random_weights(&config, 11 + s as u64);
        let (a, b) = (tokens(1, 40, vocab), tokens(2, 23, vocab));
        let mut edited = a.clone();
        edited[30] = (edited[30] + 1) % vocab as u32;
        edited.insert(5, 3);
        let mut typed = b.clone();
        typed[2] = (typed[2] + 5) % vocab as u32;
        // Each call: its tokens, window and pass, and the stored pass its cache starts from.
        type Call = (
            Vec<Vec<u32>>,
            Range<usize>,
            Pass,
            Option<(Vec<Vec<u32>>, Range<usize>)>,
        );
        let specs: Vec<Call> = vec![
            (
                vec![a.clone(), b.clone()],
                16..24,
                Pass::Full { store: true },
                Some((vec![a.clone(), b.clone()], 8..16)),
            ),
            (
                vec![b.clone()],
                20..23,
                Pass::Window,
                Some((vec![b.clone()], 20..23)),
            ),
            (
                vec![edited.clone()],
                32..41,
                Pass::Realign { radius: 2 },
                Some((vec![a.clone()], 32..40)),
            ),
            (
                vec![typed.clone(), a.clone()],
                0..23,
                Pass::Full { store: false },
                None,
            ),
            (
                vec![typed.clone()],
                9..12,
                Pass::Full { store: true },
                Some((vec![b.clone()], 9..12)),
            ),
        ];
        for pattern in PATTERNS {
            for kernels in [Kernels::Cpu, Kernels::Portable] {
                let model = model(&config, &tensors, pattern, kernels);
                let caches = || -> Vec<ContextCache> {
                    specs
                        .iter()
                        .map(|(_, _, _, from)| {
                            let mut cache = ContextCache::default();
                            if let Some((tokens, window)) = from {
                                let pass = Pass::Full { store: true };
                                model
                                    .forward(tokens, window.clone(), &mut cache, pass)
                                    .unwrap();
                            }
                            cache
                        })
                        .collect()
                };
                let (mut alone_caches, mut together_caches) = (caches(), caches());
                let flat = |t: &Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
                let alone: Vec<Vec<f32>> = specs
                    .iter()
                    .zip(&mut alone_caches)
                    .map(|((t, w, p, _), c)| flat(&model.forward(t, w.clone(), c, *p).unwrap()))
                    .collect();
                let mut calls: Vec<ModelCall<'_, ContextCache>> = specs
                    .iter()
                    .zip(together_caches.iter_mut())
                    .map(|((tokens, window, pass, _), cache)| ModelCall {
                        tokens,
                        window: window.clone(),
                        cache,
                        pass: *pass,
                    })
                    .collect();
                let together = model.forward_many(&mut calls).unwrap();
                for (i, (alone, together)) in alone.iter().zip(&together).enumerate() {
                    let diff = max_diff(std::slice::from_ref(alone), &[flat(together)]);
                    assert!(
                        diff < 1e-5,
                        "shape {s}, {pattern:?}, {kernels:?}, call {i}: {diff}"
                    );
                    let (x, y) = (&alone_caches[i], &together_caches[i]);
                    assert_eq!(x.tokens(), y.tokens(), "call {i}");
                    assert_eq!(x.computed_rows(), y.computed_rows(), "call {i}");
                }
            }
        }
    }
}

/// After realigning passes (any edit: text inserted or deleted at either end or between,
/// replaced, appended, all of it new), a stored full pass keeps only rows the cache can vouch
/// for: its logits are a fresh pass's, over the same tokens and over a further edit; and a
/// realigning pass whose radius covers every change is itself a fresh pass.
#[test]
fn stored_passes_after_realigning_are_exact() {
    let (hidden, heads, kv, hd, vocab) = SHAPES[0];
    let config = config(hidden, heads, kv, hd, vocab, 64);
    let tensors = random_weights(&config, 21);
    let old = tokens(31, 50, vocab);
    let other = |n: usize, seed: u64| tokens(seed, n, vocab);
    let edits: Vec<(&str, Vec<u32>)> = vec![
        ("identical", old.clone()),
        ("inserted at the start", [other(3, 1), old.clone()].concat()),
        ("deleted at the start", old[2..].to_vec()),
        (
            "replaced between",
            [&old[..20], &other(2, 2)[..], &old[22..]].concat(),
        ),
        ("deleted between", [&old[..20], &old[23..]].concat()),
        ("deleted at the end", old[..46].to_vec()),
        ("appended", [old.clone(), other(6, 3)].concat()),
        ("all new", other(50, 5)),
    ];
    for pattern in PATTERNS {
        let model = model(&config, &tensors, pattern, Kernels::Cpu);
        for (name, new) in &edits {
            let len = new.len();
            let window = len - 6..len;
            let mut further = new.clone();
            further[len / 2] = (further[len / 2] + 1) % vocab as u32;
            for radius in [0, 3, 100] {
                for stored in [42..50, 10..18] {
                    let start = |cache: &mut ContextCache| {
                        let pass = Pass::Full { store: true };
                        call(&model, &old, stored.clone(), cache, pass);
                        let pass = Pass::Realign { radius };
                        call(&model, new, window.clone(), cache, pass)
                    };
                    let case = format!("{pattern:?}, {name}, radius {radius}, from {stored:?}");
                    let mut cache = ContextCache::default();
                    let realigned = start(&mut cache);
                    if radius == 100 {
                        let diff = max_diff(&realigned, &fresh(&model, new, window.clone()));
                        assert!(diff < 1e-4, "{case}: realigned {diff}");
                    }
                    let pass = Pass::Full { store: true };
                    let got = call(&model, new, window.clone(), &mut cache, pass);
                    let diff = max_diff(&got, &fresh(&model, new, window.clone()));
                    assert!(diff < 1e-4, "{case}: stored {diff}");
                    let mut cache = ContextCache::default();
                    start(&mut cache);
                    let got = call(&model, &further, window.clone(), &mut cache, pass);
                    let diff = max_diff(&got, &fresh(&model, &further, window.clone()));
                    assert!(diff < 1e-4, "{case}: stored after a further edit {diff}");
                }
            }
        }
    }
}

/// Positions past RoPE's precomputed tables (4,096; computed on demand past them, also for a
/// span that crosses them) against the reference on a one-layer model of 4,110 positions: a full
/// pass whose window straddles the tables' end on both kernels; a stored pass over a longer
/// sequence keeping a causal prefix and recomputing across the end; a window pass across it; a
/// realigning pass that moves every cached key across it (20 tokens inserted at the start; in one
/// layer a kept key is exact, so the pass is, with no margin); and a padded batch where one
/// sequence reaches past the tables and the other does not. Measured: at most 1.3e-5 of logits
/// up to 9.
#[test]
fn positions_past_the_rope_tables_match_the_reference() {
    let mut config = config(16, 2, 1, 8, 53, 4110);
    config.num_hidden_layers = 1;
    let tensors = random_weights(&config, 4);
    let old = tokens(6, 4090, 53);
    let new = [tokens(8, 20, 53), old.clone()].concat();
    let short = tokens(9, 300, 53);
    let batch = [new.clone(), short.clone()];
    let rows = |t: Tensor, b: usize| -> Vec<Vec<f32>> { t.get(b).unwrap().to_vec2().unwrap() };
    for pattern in PATTERNS[..3].iter().copied() {
        let expected = reference(&config, &tensors, pattern, &new);
        let expected_short = reference(&config, &tensors, pattern, &short);
        let scale = expected.iter().flatten().fold(0f32, |m, v| m.max(v.abs()));
        let check = |case: &str, got: &[Vec<f32>], expected: &[Vec<f32>]| {
            let diff = max_diff(got, expected);
            assert!(
                diff <= 1e-4 * scale.max(1.0),
                "{pattern:?}, {case}: {diff} (logits up to {scale})"
            );
        };
        for kernels in [Kernels::Cpu, Kernels::Portable] {
            let model = model(&config, &tensors, pattern, kernels);
            let got = fresh(&model, &new, 4080..4110);
            check(&format!("{kernels:?} full"), &got, &expected[4080..4110]);
        }
        let model = model(&config, &tensors, pattern, Kernels::Cpu);
        let stored = Pass::Full { store: true };
        let mut cache = ContextCache::default();
        call(&model, &new[..4090], 4080..4090, &mut cache, stored);
        let got = call(&model, &new, 4100..4110, &mut cache, stored);
        check("stored over a shorter one", &got, &expected[4100..4110]);
        let got = call(&model, &new, 4090..4100, &mut cache, Pass::Window);
        check("window", &got, &expected[4090..4100]);

        let mut cache = ContextCache::default();
        call(&model, &old, 4080..4090, &mut cache, stored);
        let realign = Pass::Realign { radius: 0 };
        let got = call(&model, &new, 4100..4110, &mut cache, realign);
        check("realigned", &got, &expected[4100..4110]);
        assert!(cache.reused_positions() > 4000, "{pattern:?}: kept keys");

        let full = Pass::Full { store: false };
        let mut cache = ContextCache::default();
        let got = model.forward(&batch, 250..300, &mut cache, full).unwrap();
        check("batch, long", &rows(got.clone(), 0), &expected[250..300]);
        check("batch, short", &rows(got, 1), &expected_short[250..300]);
        let got = model.forward(&batch, 4100..4110, &mut cache, full).unwrap();
        check("batch, long past", &rows(got, 0), &expected[4100..4110]);
        let mut cache = ContextCache::default();
        let older = [old.clone(), short[..290].to_vec()];
        model.forward(&older, 280..290, &mut cache, stored).unwrap();
        let got = model
            .forward(&batch, 290..300, &mut cache, realign)
            .unwrap();
        check(
            "batch realigned, long",
            &rows(got.clone(), 0),
            &expected[290..300],
        );
        check(
            "batch realigned, short",
            &rows(got, 1),
            &expected_short[290..300],
        );
    }
}
