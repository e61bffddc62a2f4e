//! A kept cache across an edit of the context (`CachePolicy::realign`, `Pass::Realign`) through
//! `Engine::complete`, the path the language server's worker and `redraft complete` take, on the
//! default model (bidirectional) and on its weights attending causally: off, a changed context
//! costs today's exact stored full pass; on, the first pass realigns the cache and recomputes
//! around the edit, until the refresh schedule asks for an exact pass again. And the alignment
//! itself, over the tokens of text edited where byte-level BPE splits and merges characters
//! differently, held exact on a one-layer model.

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

/// Code before and after the cursor in characters of one to four bytes, combining marks and
/// zero-width joiners: each edit of [`multibyte_session`] changes one of them where byte-level
/// BPE merges it with its neighbours.
const BEFORE_MB: &str = "// Grüße — 字符串 🦀 naïve café\nfn greet(name: &str) -> String {\n    let s = \"héllo wörld 👨\u{200d}👩\u{200d}👧 日本語\";\n    let sel";
const AFTER_MB: &str = "\n    format!(\"{s}, {name} — ok ✓\")\n}\n// fin e\u{301}";

/// A session of edits from `(BEFORE_MB, AFTER_MB)`, each the whole text after it: a character
/// replaced by one of another byte length, a combining mark, a ZWJ emoji's last person, CJK
/// inserted, a character added and removed at the very start and at the very end, a keystroke
/// that merges with the token before it (`sel` + `f`: the token before the edit changes), undo
/// back to the first text, redo, and all of it replaced.
fn multibyte_session() -> Vec<(&'static str, String, String)> {
    let (b, a) = (BEFORE_MB.to_string(), AFTER_MB.to_string());
    let b1 = b.replacen("héllo", "h€llo", 1);
    let b2 = b1.replacen("Grüße", "Gru\u{308}ße", 1);
    let b3 = b2.replacen('👧', "👦", 1);
    let b4 = b3.replacen("字符串", "字符串列表", 1);
    let b5 = format!("🦀{b4}");
    let a6 = format!("{a}é");
    let b7: String = b5.chars().skip(1).collect();
    let b8 = format!("{b7}f");
    vec![
        ("the first text", b.clone(), a.clone()),
        ("é for €", b1, a.clone()),
        ("ü for u and a combining mark", b2, a.clone()),
        ("the emoji's last person", b3, a.clone()),
        ("CJK inserted", b4, a.clone()),
        ("inserted at the start", b5.clone(), a.clone()),
        ("appended at the end", b5, a6.clone()),
        ("deleted at the start", b7, a6.clone()),
        ("a merge before the edit", b8.clone(), a6.clone()),
        ("undone", b.clone(), a.clone()),
        ("redone", b8, a6),
        (
            "the combining mark composed",
            b.clone(),
            a.replacen("e\u{301}", "é", 1),
        ),
        ("all new", "x".into(), "y".into()),
        ("the first text again", b, a),
    ]
}

/// In one layer a token's keys and values depend on the token and its position only, so every
/// row a realigning pass keeps is exact wherever the alignment put it, if it put it under the
/// same token: each pass of a session of edits in multi-byte text gives a fresh pass's logits
/// with no margin at all, in place and in the prefix-suffix-middle layout (canvas last), under
/// every pattern; and so do the window passes between (the sampler's, committing the canvas).
/// A row kept under another token, or at a position the shift got wrong, shows in the logits.
#[test]
fn one_layer_realigning_keeps_only_rows_of_the_same_tokens_across_multibyte_edits() {
    use crate::reference::{call, config, max_diff, model, random_weights};
    use redraft_engine::config::AttentionPattern;
    use redraft_engine::ops::Kernels;

    let tok = crate::tokenizer();
    let mut config = config(16, 2, 1, 8, tok.vocab_size(), 256);
    config.num_hidden_layers = 1;
    let tensors = random_weights(&config, 12);
    let canvas = [0u32; 8];
    // The sequence of a text, and where its canvas lies.
    let layouts = |before: &str, after: &str| {
        let (p, s) = (tok.encode(before).unwrap(), tok.encode(after).unwrap());
        let in_place = [&p[..], &canvas, &s].concat();
        let psm = [&[3][..], &p, &[5], &s, &[6], &canvas].concat();
        let last = psm.len() - 8..psm.len();
        [(in_place, p.len()..p.len() + 8), (psm, last)]
    };
    for pattern in [
        AttentionPattern::Bidirectional,
        AttentionPattern::Causal,
        AttentionPattern::Block(4),
    ] {
        let model = model(&config, &tensors, pattern, Kernels::Cpu);
        for layout in 0..2 {
            for radius in [0, 4] {
                let mut cache = ContextCache::default();
                for (i, (edit, before, after)) in multibyte_session().into_iter().enumerate() {
                    let (mut ids, window) = layouts(&before, &after)[layout].clone();
                    let case = format!("{pattern:?}, layout {layout}, radius {radius}, {edit}");
                    let fresh = |ids: &[u32]| {
                        let pass = Pass::Full { store: false };
                        call(
                            &model,
                            ids,
                            window.clone(),
                            &mut ContextCache::default(),
                            pass,
                        )
                    };
                    let pass = match i {
                        0 => Pass::Full { store: true },
                        _ => Pass::Realign { radius },
                    };
                    let got = call(&model, &ids, window.clone(), &mut cache, pass);
                    let diff = max_diff(&got, &fresh(&ids));
                    assert!(diff < 1e-4, "{case}: realigned {diff}");
                    for (k, t) in ids[window.clone()].iter_mut().enumerate() {
                        *t = 100 + (i * 8 + k) as u32;
                    }
                    let got = call(&model, &ids, window.clone(), &mut cache, Pass::Window);
                    let diff = max_diff(&got, &fresh(&ids));
                    assert!(diff < 1e-4, "{case}: window pass after {diff}");
                }
                // About half the session's ~1,700 positions came from the cache: the passes
                // realigned, rather than recomputed everything.
                let reused = cache.reused_positions();
                assert!(reused > 700, "{pattern:?}, layout {layout}: {reused}");
            }
        }
    }
}
