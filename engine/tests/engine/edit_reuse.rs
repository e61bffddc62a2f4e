//! A kept cache across an edit of the context (`CachePolicy::realign`, `Pass::Realign`) through
//! `Engine::complete`, the path the language server's worker and `redraft complete` take, on the
//! default model (bidirectional) and on its weights attending causally: off, a changed context
//! costs today's exact stored full pass; on, the first pass realigns the cache and recomputes
//! around the edit, until the refresh schedule asks for an exact pass again.

use std::path::{Path, PathBuf};

use redraft_engine::sampler::{Controls, Denoiser, Effort, Pass, Realign, SamplerConfig};
use redraft_engine::ContextCache;
use redraft_engine::{Completion, Engine, InfillRequest};

fn small_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model")
}

/// The default model's files with `redraft.json` saying `attention` (and the shift a causal
/// model needs).
fn attending(attention: &str) -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(small_model().join(file), dir.path().join(file)).unwrap();
    }
    let settings = format!(
        r#"{{"eos_token_id": 1, "mask_token_id": 0, "pad_token_id": 1, "logit_shift": true, "attention": {attention}}}"#
    );
    std::fs::write(dir.path().join("redraft.json"), settings).unwrap();
    let engine = Engine::load(dir.path()).unwrap();
    (dir, engine)
}

const BEFORE: &str = "use std::collections::HashMap;\n\n/// Counts the words of `text`.\npub fn word_counts(text: &str) -> HashMap<String, usize> {\n    let mut counts = HashMap::new();\n    for word in text.split_whitespace() {\n        let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();\n        if word.is_empty() {\n            continue;\n        }\n        ";
const AFTER: &str = "\n    }\n    counts\n}\n\n/// The `n` most frequent words, most frequent first.\npub fn top_words(counts: &HashMap<String, usize>, n: usize) -> Vec<(String, usize)> {\n    let mut words: Vec<_> = counts.iter().map(|(w, c)| (w.clone(), *c)).collect();\n    words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));\n    words.truncate(n);\n    words\n}\n";

/// `typed` characters of the body typed at the cursor (the prefix grows), under `edit`.
fn request(typed: &str, edit: Option<Realign>) -> InfillRequest {
    let mut request = InfillRequest::new(format!("{BEFORE}{typed}"), AFTER);
    (request.canvas_tokens, request.max_tokens) = (8, 8);
    request.sampler = SamplerConfig::effort(Effort::Medium);
    request.sampler.cache.realign = edit;
    request
}

fn complete(engine: &Engine, request: &InfillRequest, cache: &mut ContextCache) -> Completion {
    engine
        .complete(request, cache, Controls::default())
        .unwrap()
}

/// Edit reuse recomputing 4 tokens on each side of a change, exact again after
/// `refresh_after` approximate passes.
fn reuse(refresh_after: usize) -> Realign {
    Realign {
        radius: 4,
        refresh_after,
    }
}

const KEYS: [&str; 5] = ["*", "*c", "*co", "*cou", "*coun"];

/// Off, an edit costs a stored full pass: the same middle as a fresh cache gives, token for
/// token. On, the first pass is a realigning pass keeping most positions.
#[test]
fn off_is_todays_exact_pass_and_on_realigns_the_cache() {
    let engine = Engine::load(&small_model()).unwrap();
    let reuse = reuse(8);
    for edit in [None, Some(reuse)] {
        let mut cache = ContextCache::default();
        complete(&engine, &request("", edit), &mut cache);
        for typed in KEYS {
            let reused = cache.reused_positions();
            let kept = complete(&engine, &request(typed, edit), &mut cache);
            let fresh = complete(&engine, &request(typed, edit), &mut ContextCache::default());
            let context = kept.prefix_tokens + kept.suffix_tokens;
            if edit.is_none() {
                assert_eq!(kept.tokens, fresh.tokens, "{typed:?}");
                assert_eq!((kept.realign_passes, kept.full_passes), (0, 1), "{typed:?}");
                assert_eq!(cache.reused_positions(), 0);
            } else {
                assert_eq!((kept.realign_passes, kept.full_passes), (1, 0), "{typed:?}");
                // Around the edit and the canvas (8 slots) at most 2 x 4 + a few tokens each.
                let from_cache = cache.reused_positions() - reused;
                assert!(
                    from_cache + 40 >= context,
                    "{typed:?}: {from_cache} of {context}"
                );
                assert!(!kept.tokens.is_empty());
            }
        }
    }
}

/// `refresh_after` approximate passes in a row, then the next request pays an exact stored
/// full pass, and the count starts again.
#[test]
fn the_refresh_schedule_asks_for_a_full_pass_when_due() {
    let engine = Engine::load(&small_model()).unwrap();
    let reuse = reuse(2);
    let mut cache = ContextCache::default();
    complete(&engine, &request("", Some(reuse)), &mut cache);
    let mut passes = Vec::new();
    for typed in KEYS {
        let done = complete(&engine, &request(typed, Some(reuse)), &mut cache);
        passes.push((
            done.realign_passes,
            done.full_passes,
            cache.approximate_passes(),
        ));
    }
    assert_eq!(
        passes,
        [(1, 0, 1), (1, 0, 2), (0, 1, 0), (1, 0, 1), (1, 0, 2)]
    );
    // refresh_after 0 never approximates.
    let never = Realign {
        refresh_after: 0,
        ..reuse
    };
    let done = complete(&engine, &request("*c", Some(never)), &mut cache);
    assert_eq!((done.realign_passes, done.full_passes), (0, 1));
}

/// A causal model keeps the positions before the edit exactly, and computes nothing past its
/// canvas (the suffix here, which a causal canvas never reads): so a keystroke costs the rows
/// from the edit to the canvas and is exact, with or without edit reuse.
#[test]
fn a_causal_model_keeps_the_prefix_exactly_and_skips_what_follows_the_canvas() {
    let (_dir, engine) = attending(r#""causal""#);
    for edit in [None, Some(reuse(8))] {
        let mut cache = ContextCache::default();
        complete(&engine, &request("*c", edit), &mut cache);
        let reused = cache.reused_positions();
        let kept = complete(&engine, &request("*co", edit), &mut cache);
        let fresh = complete(&engine, &request("*co", edit), &mut ContextCache::default());
        assert_eq!(kept.tokens, fresh.tokens, "{edit:?}");
        assert_eq!((kept.realign_passes, kept.full_passes), (0, 1), "{edit:?}");
        assert_eq!(cache.drifted_positions(), 0);
        // Everything before the edit came from the cache.
        assert!(
            cache.reused_positions() - reused + 8 >= kept.prefix_tokens,
            "{edit:?}"
        );
        let context = kept.prefix_tokens + kept.suffix_tokens;
        assert!(
            cache.computed_rows() < context,
            "{edit:?}: {} rows computed of {context} and the canvas",
            cache.computed_rows()
        );
    }
}

/// A batch of canvas lengths (an invoked completion's candidates) realigns each sequence with
/// its own old one: the realigning pass runs over the padded batch; with a radius covering every
/// position nothing would be kept, so it is the exact stored pass and the exact middles.
#[test]
fn a_batch_of_lengths_realigns_every_sequence() {
    let engine = Engine::load(&small_model()).unwrap();
    let lengths = [3, 9, 5];
    for (radius, exact) in [(4, false), (1 << 12, true)] {
        let edit = Some(Realign {
            radius,
            refresh_after: 8,
        });
        let mut cache = ContextCache::default();
        let run = |typed: &str, cache: &mut ContextCache| {
            engine
                .complete_lengths(&request(typed, edit), &lengths, cache, Controls::default())
                .unwrap()
        };
        run("*", &mut cache);
        let kept = run("*co", &mut cache);
        let realign_passes = usize::from(!exact);
        assert!(
            kept.iter().all(|c| c.realign_passes == realign_passes),
            "radius {radius}"
        );
        let fresh = run("*co", &mut ContextCache::default());
        assert_eq!(kept.len(), fresh.len());
        if exact {
            for (k, f) in kept.iter().zip(&fresh) {
                assert_eq!(k.tokens, f.tokens);
            }
        }
    }
}

/// The logits of a window pass over the last 8 positions of `tokens` from `cache`.
fn window_logits(engine: &Engine, tokens: &[Vec<u32>], cache: &mut ContextCache) -> Vec<f32> {
    let len = tokens[0].len();
    engine
        .model()
        .logits(tokens, len - 8..len, cache, Pass::Window)
        .unwrap()
}

/// An idle refresh (`Engine::refresh`) leaves exactly the cache a stored full pass over the
/// same tokens makes, and only once every layer is through: stopped at any layer, or asked of
/// a cache that is exact already, it leaves the cache as it was.
#[test]
fn a_refresh_makes_a_realigned_cache_exact_unless_stopped() {
    let engine = Engine::load(&small_model()).unwrap();
    let reuse = reuse(8);
    let mut cache = ContextCache::default();
    complete(&engine, &request("", Some(reuse)), &mut cache);
    assert!(
        !engine.refresh(&mut cache, &|| false).unwrap(),
        "exact already"
    );
    for typed in &KEYS[..3] {
        complete(&engine, &request(typed, Some(reuse)), &mut cache);
    }
    assert_eq!(cache.approximate_passes(), 3);
    let tokens = cache.tokens().to_vec();
    let mut exact = ContextCache::default();
    let len = tokens[0].len();
    engine
        .model()
        .logits(
            &tokens,
            len - 8..len,
            &mut exact,
            Pass::Full { store: true },
        )
        .unwrap();
    let expected = window_logits(&engine, &tokens, &mut exact);
    let approximate = window_logits(&engine, &tokens, &mut cache);
    assert_ne!(approximate, expected, "the realigned cache drifted");

    // Stopped before the first layer, within it, and within the last: nothing changes.
    let asks = 2 * engine.model().config().num_hidden_layers;
    for stop_at in [0, 1, asks - 1] {
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > stop_at
        };
        assert!(!engine.refresh(&mut cache, &stop).unwrap());
        assert_eq!(asked.get(), stop_at + 1);
        assert_eq!(cache.approximate_passes(), 3);
        assert_eq!(window_logits(&engine, &tokens, &mut cache), approximate);
    }

    assert!(engine.refresh(&mut cache, &|| false).unwrap());
    assert_eq!(cache.approximate_passes(), 0);
    assert_eq!(cache.tokens(), &tokens[..]);
    assert_eq!(window_logits(&engine, &tokens, &mut cache), expected);
}

/// A canvas that grows mid-run (its last slot took a token: `Sampler::grow` appends masked
/// slots) changes the sequence its cache was computed for; with edit reuse on, the next pass
/// realigns the cache across the inserted slots instead of recomputing every position, and the
/// run still fills the grown canvas.
#[test]
fn a_canvas_that_grows_realigns_its_own_cache() {
    let engine = Engine::load(&small_model()).unwrap();
    let grown = |edit: Option<Realign>| {
        // Where the model writes past two slots (checked below).
        let mut request = request("counts.insert(", edit);
        (request.canvas_tokens, request.max_tokens) = (2, 24);
        complete(&engine, &request, &mut ContextCache::default())
    };
    let reuse = reuse(8);
    let on = grown(Some(reuse));
    let off = grown(None);
    assert!(off.full_passes >= 2, "the canvas grew: {off:?}");
    assert_eq!(on.full_passes, 1, "{on:?}");
    assert_eq!(on.realign_passes, off.full_passes - 1, "{on:?}");
    assert!(on.slots > 2, "{on:?}");
}
