//! What one keystroke costs: a completion at ~1k tokens of context, then the same file with one
//! more character typed at the cursor, again and again, through one kept cache (as the
//! language server's worker keeps it). Reports the cold completion's first pass, each
//! keystroke's first pass (p50/p95), a cached decoding step, and how many positions the cache
//! gave back. A causal or block-causal checkpoint keeps everything before the edit exactly; a
//! bidirectional one recomputes everything (its cache is reused only when the context is
//! unchanged).
//!
//! ```sh
//! cargo bench -p redraft --bench keystroke -- --model ~/.cache/redraft-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
//! cargo bench -p redraft --bench keystroke -- --keys 10 --context 1024 --file F.rs
//! ```
//!
//! Run by `cargo test` (without `--bench`) it types three keys on the embedded model as a
//! smoke test.

use std::path::{Path, PathBuf};
use std::time::Instant;

use redraft_engine::qwen2::KvCache;
use redraft_engine::sampler::{Controls, Effort, SamplerConfig};
use redraft_engine::{Engine, InfillRequest};

struct Options {
    model: PathBuf,
    file: PathBuf,
    keys: usize,
    context: usize,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    Options {
        model: value("--model").map_or_else(|| repo.join("fixtures/default-model"), PathBuf::from),
        file: value("--file").map_or_else(|| repo.join("engine/src/sampler.rs"), PathBuf::from),
        keys: value("--keys")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if bench { 8 } else { 3 }),
        context: value("--context")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1024),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The context around `cursor`: whole lines back from it holding about `tokens` tokens (a
/// start that stays put while the user types, as the context layer's line-wise window does).
fn context_start(engine: &Engine, text: &str, cursor: usize, tokens: usize) -> usize {
    let mut start = cursor;
    while start > 0 {
        let line = text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
        start = line;
        if engine
            .tokenizer()
            .encode(&text[start..cursor])
            .unwrap()
            .len()
            >= tokens
        {
            break;
        }
    }
    start
}

/// `text[start..cursor]` before the cursor, `text[cursor..end]` after, `slots` tokens to write,
/// medium effort, nothing trimmed.
fn request(text: &str, start: usize, cursor: usize, end: usize, slots: usize) -> InfillRequest {
    let mut r = InfillRequest::new(&text[start..cursor], &text[cursor..end]);
    (r.canvas_tokens, r.max_tokens) = (slots, slots);
    (r.max_prefix_tokens, r.max_suffix_tokens) = (1 << 20, 1 << 20);
    r.sampler = SamplerConfig::effort(Effort::Medium);
    r
}

fn main() {
    let o = options();
    let text = std::fs::read_to_string(&o.file)
        .unwrap()
        .replace("\r\n", "\n");
    let started = Instant::now();
    let engine = Engine::load(&o.model).unwrap();
    println!(
        "model {} ({:?} attention, {:.0} MB of weights), loaded in {:.0} ms",
        o.model.display(),
        engine.settings().attention,
        engine.model().weight_bytes() as f64 / 1e6,
        started.elapsed().as_secs_f64() * 1e3
    );
    // The cursor at the start of a line two thirds in; the keys are the file's own next
    // characters.
    let mut cursor = text.len() * 2 / 3;
    while !text[..cursor].ends_with('\n') {
        cursor += 1;
    }
    let complete = |engine: &Engine, request: &InfillRequest, cache: &mut KvCache| {
        let done = engine
            .complete(request, cache, Controls::default())
            .unwrap();
        (
            done.timings.model_ms,
            done.prefix_tokens + done.suffix_tokens,
        )
    };

    let start = context_start(&engine, &text, cursor, o.context * 3 / 4);
    let mut end = cursor;
    while end < text.len()
        && engine.tokenizer().encode(&text[cursor..end]).unwrap().len() < o.context / 4
    {
        end = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    }
    // A cached step: 17 slots minus 1 slot, over a fresh cache each (the same first pass).
    let at = |cursor: usize, slots: usize| request(&text, start, cursor, end, slots);
    let (one, context) = complete(&engine, &at(cursor, 1), &mut KvCache::default());
    let (many, _) = complete(&engine, &at(cursor, 17), &mut KvCache::default());
    let step = (many - one) / 16.0;
    println!("context {context} tokens: cold first pass {one:.1} ms, cached step {step:.2} ms");

    let mut cache = KvCache::default();
    complete(&engine, &at(cursor, 1), &mut cache);
    let mut keystrokes = Vec::new();
    for _ in 0..o.keys {
        let next = text[cursor..].chars().next().map_or(0, char::len_utf8);
        cursor += next;
        let reused = cache.reused_positions();
        let (ms, _) = complete(&engine, &at(cursor, 1), &mut cache);
        println!(
            "  key {:?}: first pass {ms:.1} ms, {} positions from the cache",
            &text[cursor - next..cursor],
            cache.reused_positions() - reused
        );
        keystrokes.push(ms);
    }
    keystrokes.sort_by(f64::total_cmp);
    let p50 = percentile(&keystrokes, 50.0);
    println!(
        "keystroke first pass p50 {p50:.1} ms, p95 {:.1} ms: {:.2}x the cold pass, {:.1}x a cached step",
        percentile(&keystrokes, 95.0),
        p50 / one,
        p50 / step.max(1e-9)
    );
}
