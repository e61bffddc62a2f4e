//! The alignment of old and new tokens, the RoPE shift, and realigning passes held to full passes on
//! the shipped model's weights (bidirectional, and the same weights attending causally); and
//! several calls made in one pass held to the same calls made alone.

use std::path::Path;

use candle_core::{DType, Device};

use super::*;
use crate::checkpoint::Weights;
use crate::config::{AttentionPattern, ModelConfig};
use crate::ops::Kernels;
use crate::sampler::{Denoiser, ModelCall, Pass, Realign};

fn model(pattern: AttentionPattern) -> Qwen2 {
    model_on(pattern, Kernels::Cpu)
}

fn model_on(pattern: AttentionPattern, kernels: Kernels) -> Qwen2 {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    let config = ModelConfig::load(&dir.join("config.json")).unwrap();
    let weights = Weights::load(&dir, DType::F32, &Device::Cpu).unwrap();
    Qwen2::new(&config, &weights, &Device::Cpu)
        .unwrap()
        .with_attention(pattern)
        .with_kernels(kernels)
        .unwrap()
}

/// `n` token ids from `seed` (a fixed pseudo-random walk over the vocabulary, no mask or EOS).
fn ids(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| 2 + (seed.wrapping_mul(7919) + i.wrapping_mul(2654435761)) % 4000)
        .collect()
}

fn cat(parts: &[&[u32]]) -> Vec<u32> {
    parts.concat()
}

/// Rows `rows` of layer `layer`, sequence 0, as numbers.
fn rows(cache: &ContextCache, layer: usize, rows: Range<usize>) -> Vec<Vec<f32>> {
    cache.layers[layer]
        .get(0)
        .unwrap()
        .narrow(0, rows.start, rows.len())
        .unwrap()
        .to_vec2()
        .unwrap()
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn max_abs(a: &[Vec<f32>]) -> f32 {
    a.iter().flatten().map(|x| x.abs()).fold(0.0, f32::max)
}

fn stored(model: &Qwen2, tokens: &[u32], window: Range<usize>) -> (ContextCache, Vec<Vec<f32>>) {
    let mut cache = ContextCache::default();
    let logits = model
        .forward(
            &[tokens.to_vec()],
            window,
            &mut cache,
            Pass::Full { store: true },
        )
        .unwrap();
    (cache, logits.squeeze(0).unwrap().to_vec2().unwrap())
}

fn edited(
    model: &Qwen2,
    cache: &mut ContextCache,
    tokens: &[u32],
    window: Range<usize>,
    radius: usize,
) -> Vec<Vec<f32>> {
    model
        .forward(&[tokens.to_vec()], window, cache, Pass::Realign { radius })
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec2()
        .unwrap()
}

#[test]
fn the_alignment_keeps_the_head_the_tail_and_a_moved_run_between() {
    let (head, tail, canvas) = (ids(1, 20), ids(2, 40), ids(3, 5));
    // Prefix-suffix-middle: the edit in the prefix, the canvas at the end changed too.
    let old = cat(&[&head, &[7, 8, 9], &tail, &canvas]);
    let new = cat(&[&head, &[7, 10, 11, 9], &tail, &[0; 5]]);
    let runs = matching_runs(&old, &new);
    assert_eq!(
        runs,
        [
            Kept { new: 0..21, old: 0 },
            Kept {
                new: 23..64,
                old: 22
            },
        ]
    );
    assert_eq!(changes(&runs, old.len(), new.len()), [21..23, 64..69]);
    // A deletion is a change of no tokens; a front trim moves everything.
    let cut = cat(&[&head[..10], &head[12..], &tail]);
    let runs = matching_runs(&cat(&[&head, &tail]), &cut);
    assert_eq!(changes(&runs, 60, cut.len()), vec![10..10]);
    let trimmed = matching_runs(&cat(&[&head, &tail]), &tail);
    assert_eq!(
        trimmed,
        [Kept {
            new: 0..40,
            old: 20
        }]
    );
    assert_eq!(changes(&trimmed, 60, 40), vec![0..0]);
    // Nothing long enough in common: nothing kept.
    assert_eq!(matching_runs(&ids(4, 30), &ids(5, 30)), []);
}

#[test]
fn recomputed_spans_cover_the_changes_their_margins_and_blocks() {
    assert_eq!(recomputed(20..23, 4, None, 100), 16..27);
    assert_eq!(recomputed(20..23, 4, Some(1), 100), 20..27);
    assert_eq!(recomputed(20..23, 4, Some(8), 100), 16..27);
    assert_eq!(recomputed(20..23, 1, Some(8), 100), 16..24);
    assert_eq!(recomputed(10..10, 4, None, 100), 6..14);
    assert_eq!(recomputed(95..100, 16, None, 100), 79..100);
    assert_eq!(
        merged(vec![30..40, 0..5, 5..8, 35..50, 60..60]),
        [0..8, 30..50]
    );
    let runs = [
        Kept { new: 0..10, old: 0 },
        Kept {
            new: 20..40,
            old: 25,
        },
    ];
    assert_eq!(
        outside(&runs, &[8..22, 30..32]),
        [
            Kept { new: 0..8, old: 0 },
            Kept {
                new: 22..30,
                old: 27
            },
            Kept {
                new: 32..40,
                old: 37
            },
        ]
    );
}

/// Layer 0's keys depend only on a token and its position: a run's cached keys moved by
/// ±7 positions are the keys a pass computes there, up to float rounding; values are the same.
#[test]
fn rope_shift_equals_keys_computed_at_the_new_positions() {
    let model = model(AttentionPattern::Bidirectional);
    let run = ids(9, 30);
    let (at10, _) = stored(&model, &cat(&[&ids(1, 10), &run]), 0..1);
    for lead in [17, 3] {
        let (fresh, _) = stored(&model, &cat(&[&ids(2, lead), &run]), 0..1);
        let old = at10.layers[0].get(0).unwrap().narrow(0, 10, 30).unwrap();
        let moved: Vec<Vec<f32>> = model.shifted(&old, 10, lead).unwrap().to_vec2().unwrap();
        let expected = rows(&fresh, 0, lead..lead + 30);
        let scale = max_abs(&expected);
        assert!(
            max_diff(&moved, &expected) <= 1e-6 * scale.max(1.0),
            "moved to {lead}: {} of {scale}",
            max_diff(&moved, &expected)
        );
        // Unmoved, the keys differ by a lot: the shift is doing the work.
        assert!(max_diff(&old.to_vec2().unwrap(), &expected) > 1e-2 * scale);
    }
}

/// The shift's angle is the difference of the two positions' table angles, so a key rotated
/// for one position and shifted reads as one rotated for the other, also past the precomputed
/// tables and backwards.
#[test]
fn rope_shift_composes_to_the_new_positions_rotation() {
    let rope = Rope::new(1e6, 64);
    let half = 32;
    let x: Vec<f32> = (0..64)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) / 3.0)
        .collect();
    let rotate = |x: &[f32], cos: &[f32], sin: &[f32]| -> Vec<f32> {
        let mut out = x.to_vec();
        for j in 0..half {
            out[j] = x[j] * cos[j] - x[j + half] * sin[j];
            out[j + half] = x[j + half] * cos[j] + x[j] * sin[j];
        }
        out
    };
    for (from, to) in [(5, 900), (900, 5), (4000, 9000), (12345, 12346)] {
        let (c, s) = rope.at(from..from + 1);
        let (cs, ss) = rope.shift(from, to, 1);
        let shifted = rotate(&rotate(&x, &c, &s), &cs, &ss);
        let (c, s) = rope.at(to..to + 1);
        let direct = rotate(&x, &c, &s);
        let diff = shifted
            .iter()
            .zip(&direct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(diff < 2e-6, "{from} -> {to}: {diff}");
    }
}

/// With margins covering every position, a realigning pass recomputes everything over the
/// realigned cache: the full pass's logits (and cache) up to float rounding, on both kernels.
#[test]
fn an_edit_pass_recomputing_everything_equals_a_full_pass() {
    for (pattern, kernels) in [
        (AttentionPattern::Bidirectional, Kernels::Cpu),
        (AttentionPattern::Causal, Kernels::Cpu),
        (AttentionPattern::Block(4), Kernels::Cpu),
        (AttentionPattern::Bidirectional, Kernels::Portable),
        (AttentionPattern::Causal, Kernels::Portable),
    ] {
        let model = model_on(pattern, kernels);
        let (head, tail) = (ids(1, 40), ids(2, 60));
        let old = cat(&[&head, &[5, 6], &tail, &[0; 8]]);
        let new = cat(&[&head, &[5, 7, 6], &tail, &[0; 8]]);
        let window = new.len() - 9..new.len();
        let (mut cache, _) = stored(&model, &old, old.len() - 9..old.len());
        let (fresh, exact) = stored(&model, &new, window.clone());
        let logits = edited(&model, &mut cache, &new, window, new.len());
        assert_eq!(cache.drifted_positions(), 0, "{pattern:?}");
        assert!(max_diff(&logits, &exact) < 1e-4, "{pattern:?}");
        for layer in 0..2 {
            let all = 0..new.len();
            let diff = max_diff(&rows(&cache, layer, all.clone()), &rows(&fresh, layer, all));
            assert!(diff < 1e-4, "{pattern:?} layer {layer}: {diff}");
        }
    }
}

/// The same over a padded batch of two sequences, each realigned with its own old one.
#[test]
fn a_batch_edit_pass_recomputing_everything_equals_a_full_pass() {
    for pattern in [AttentionPattern::Bidirectional, AttentionPattern::Causal] {
        let model = model(pattern);
        let (head, tail) = (ids(1, 40), ids(2, 60));
        let old = vec![
            cat(&[&head, &[5, 6], &tail, &[0; 8]]),
            cat(&[&head, &[5, 6], &tail[..50], &[0; 8]]),
        ];
        let new = vec![
            cat(&[&head, &[5, 7, 6], &tail, &[0; 8]]),
            cat(&[&head, &[6], &tail[..50], &[0; 8]]),
        ];
        let window = 90..99;
        let forward = |tokens: &[Vec<u32>], cache: &mut ContextCache, pass: Pass| -> Vec<f32> {
            model
                .forward(tokens, window.clone(), cache, pass)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        let mut cache = ContextCache::default();
        forward(&old, &mut cache, Pass::Full { store: true });
        let exact = forward(
            &new,
            &mut ContextCache::default(),
            Pass::Full { store: false },
        );
        let logits = forward(&new, &mut cache, Pass::Realign { radius: 200 });
        let diff = logits
            .iter()
            .zip(&exact)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(diff < 1e-4, "{pattern:?}: {diff}");
        // A small radius keeps rows of both sequences: all of them with bidirectional
        // attention; causal attention keeps those before the window and stops at its end.
        let mut cache = ContextCache::default();
        forward(&old, &mut cache, Pass::Full { store: true });
        forward(&new, &mut cache, Pass::Realign { radius: 2 });
        if pattern == AttentionPattern::Causal {
            assert_eq!(cache.drifted_positions(), (90 - 45) + (90 - 43));
            assert_eq!(cache.computed_rows(), window.end);
        } else {
            assert!(cache.drifted_positions() > 100, "{pattern:?}");
            assert_eq!(cache.computed_rows(), usize::MAX);
        }
    }
}

/// A causal model's kept rows before the edit are the fresh pass's bit for bit (they are
/// copied from a pass over the same tokens before them), the recomputed ones after it match it
/// (so each recomputed span attends as its own positions may), and the rows kept past those are
/// the approximation.
#[test]
fn causal_rows_before_the_edit_are_bitwise_those_of_a_fresh_pass() {
    for kernels in [Kernels::Cpu, Kernels::Portable] {
        causal_rows_before_the_edit_are_exact(kernels);
    }
}

fn causal_rows_before_the_edit_are_exact(kernels: Kernels) {
    let model = model_on(AttentionPattern::Causal, kernels);
    let (head, tail) = (ids(1, 50), ids(2, 80));
    let old = cat(&[&head, &[5, 6], &tail, &[0; 4]]);
    let new = cat(&[&head, &[5, 7, 8, 6], &tail, &[0; 4]]);
    let window = new.len() - 5..new.len() - 4;
    let (mut cache, _) = stored(&model, &old, window.clone());
    let (fresh, exact) = stored(&model, &new, window.clone());
    let radius = 8;
    assert!(model.cache_realigns(
        &cache,
        std::slice::from_ref(&new),
        &window,
        Realign {
            radius,
            refresh_after: 1
        }
    ));
    let logits = edited(&model, &mut cache, &new, window.clone(), radius);
    let edit = 51..53;
    for layer in 0..2 {
        assert_eq!(
            rows(&cache, layer, 0..edit.start),
            rows(&fresh, layer, 0..edit.start),
            "layer {layer}"
        );
        let recomputed = edit.start..edit.end + radius;
        let diff = max_diff(
            &rows(&cache, layer, recomputed.clone()),
            &rows(&fresh, layer, recomputed),
        );
        assert!(diff < 1e-5, "layer {layer}: {diff}");
    }
    assert_eq!(cache.exact_rows, edit.end + radius);
    // Kept rows past the exact ones drifted; the rows past the window were not computed.
    assert_eq!(
        cache.drifted_positions(),
        window.start - (edit.end + radius)
    );
    assert_eq!(cache.computed_rows(), window.end);
    // The window's logits are approximate, but close.
    assert!(
        max_diff(&logits, &exact) < 0.5,
        "{}",
        max_diff(&logits, &exact)
    );
    // The next stored full pass trusts only the exact rows.
    let before = cache.reused_positions();
    model
        .forward(
            std::slice::from_ref(&new),
            new.len() - 1..new.len(),
            &mut cache,
            Pass::Full { store: true },
        )
        .unwrap();
    assert_eq!(cache.reused_positions() - before, edit.end + radius);
    assert_eq!(cache.approximate_passes(), 0);
    // (The fresh pass stopped at its window's end, 4 rows before this one's.)
    assert_eq!(fresh.computed_rows(), new.len() - 4);
    for layer in 0..2 {
        let all = 0..new.len() - 4;
        let diff = max_diff(&rows(&cache, layer, all.clone()), &rows(&fresh, layer, all));
        assert!(diff < 1e-5, "layer {layer}: {diff}");
    }
}

/// The bidirectional approximation: an edit far from the canvas moves the canvas's logits by
/// little (the kept rows attended to the old tokens), while the pass recomputes a small part.
#[test]
fn an_edit_far_from_the_canvas_barely_moves_the_canvas_logits() {
    let model = model(AttentionPattern::Bidirectional);
    let (a, b, suffix) = (ids(1, 30), ids(2, 150), ids(3, 40));
    // The old canvas holds the last request's middle, the new one masks.
    let old = cat(&[&a, &[5, 6], &b, &ids(4, 8), &suffix]);
    let new = cat(&[&a, &[5, 7, 8, 6], &b, &[0; 8], &suffix]);
    let window = 184..192;
    let (mut cache, _) = stored(&model, &old, window.clone());
    let (_, exact) = stored(&model, &new, window.clone());
    let logits = edited(&model, &mut cache, &new, window.clone(), 4);
    // Recomputed: 4 + 2 + 4 around the edit, the canvas and 4 either side of it; the rest was
    // kept.
    let kept = new.len() - 10 - (window.len() + 8);
    assert_eq!(cache.reused_positions(), kept);
    assert_eq!(cache.drifted_positions(), kept);
    let diff = max_diff(&logits, &exact);
    eprintln!(
        "far edit: max |logit difference| {diff}, logits up to {}",
        max_abs(&exact)
    );
    let spread = max_abs(&exact);
    assert!(diff > 0.0, "kept rows attended to the old tokens");
    assert!(
        diff < 0.05 * spread,
        "canvas logits moved {diff} (logits up to {spread})"
    );
    let argmax = |row: &Vec<f32>| {
        row.iter()
            .enumerate()
            .max_by(|x, y| x.1.total_cmp(y.1))
            .unwrap()
            .0
    };
    let agree = logits
        .iter()
        .zip(&exact)
        .filter(|(x, y)| argmax(x) == argmax(y))
        .count();
    assert_eq!(agree, window.len());
}

/// Every kind of pass, over caches of their own, made together by `forward_many` and one by
/// one by `forward`: the same logits, and caches that answer the next window pass the same.
#[test]
fn calls_made_together_equal_the_same_calls_made_alone() {
    for (pattern, kernels) in [
        (AttentionPattern::Bidirectional, Kernels::Cpu),
        (AttentionPattern::Causal, Kernels::Cpu),
        (AttentionPattern::Block(4), Kernels::Portable),
    ] {
        let model = model_on(pattern, kernels);
        let (head, tail) = (ids(11, 60), ids(12, 30));
        let old = cat(&[&head, &[5, 6, 7], &tail, &[0; 8]]);
        let new = cat(&[&head, &[5, 9, 9, 7], &tail, &[0; 8]]);
        // A window pass after a commit in the canvas.
        let mut committed = old.clone();
        committed[95] = 42;
        let short = cat(&[&ids(13, 40), &[0; 6]]);
        let long = cat(&[&ids(14, 70), &[0; 6]]);
        // Each call: its tokens, window, pass, and the tokens its cache was stored from.
        type Setup = (Vec<Vec<u32>>, Range<usize>, Pass, Option<Vec<Vec<u32>>>);
        let setups: Vec<Setup> = vec![
            (
                vec![short.clone(), long.clone()],
                40..46,
                Pass::Full { store: true },
                None,
            ),
            (
                vec![committed.clone()],
                93..101,
                Pass::Window,
                Some(vec![old.clone()]),
            ),
            (
                vec![new.clone()],
                94..102,
                Pass::Realign { radius: 4 },
                Some(vec![old.clone()]),
            ),
            (
                vec![new.clone()],
                94..102,
                Pass::Full { store: true },
                Some(vec![old.clone()]),
            ),
            (
                vec![long.clone()],
                70..76,
                Pass::Full { store: false },
                None,
            ),
        ];
        let fresh_caches = || -> Vec<ContextCache> {
            setups
                .iter()
                .map(|(_, _, _, before)| {
                    let mut cache = ContextCache::default();
                    if let Some(before) = before {
                        let len = before[0].len();
                        let canvas = len - 8..len;
                        model
                            .forward(before, canvas, &mut cache, Pass::Full { store: true })
                            .unwrap();
                    }
                    cache
                })
                .collect()
        };
        let (mut alone, mut together) = (fresh_caches(), fresh_caches());
        let each: Vec<Vec<f32>> = setups
            .iter()
            .zip(&mut alone)
            .map(|((tokens, window, pass, _), cache)| {
                let logits = model.forward(tokens, window.clone(), cache, *pass).unwrap();
                logits.flatten_all().unwrap().to_vec1().unwrap()
            })
            .collect();
        let mut calls: Vec<ModelCall<'_, ContextCache>> = setups
            .iter()
            .zip(&mut together)
            .map(|((tokens, window, pass, _), cache)| ModelCall {
                tokens,
                window: window.clone(),
                cache,
                pass: *pass,
            })
            .collect();
        let all = model.logits_many(&mut calls).unwrap();
        for (i, (a, b)) in each.iter().zip(&all).enumerate() {
            assert_eq!(a.len(), b.len(), "{pattern:?}: call {i}");
            let diff = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f32::max);
            assert!(diff < 1e-4, "{pattern:?}: call {i} differs by {diff}");
        }
        // The caches left behind serve the next step alike.
        for (i, (((tokens, window, pass, _), a), b)) in
            setups.iter().zip(&mut alone).zip(&mut together).enumerate()
        {
            if *pass == (Pass::Full { store: false }) {
                assert!(a.is_empty() && b.is_empty());
                continue;
            }
            assert_eq!(
                a.reused_positions(),
                b.reused_positions(),
                "{pattern:?}: call {i}"
            );
            let next = |cache: &mut ContextCache| -> Vec<f32> {
                model
                    .forward(tokens, window.clone(), cache, Pass::Window)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1()
                    .unwrap()
            };
            let (x, y) = (next(a), next(b));
            let diff = redraft_kernels::testing::max_abs_diff(&x, &y);
            assert!(
                diff < 1e-4,
                "{pattern:?}: the cache of call {i} differs by {diff}"
            );
        }
    }
}
