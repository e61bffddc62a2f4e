//! What one keystroke costs: a completion at ~1k tokens of context, then the same file with one
//! more character typed at the cursor, again and again, through one kept cache (as the
//! language server's worker keeps it). Reports the cold completion's first pass, each
//! keystroke's first pass (p50/p95) next to a cached decoding step timed beside it, and how
//! many positions the cache gave back, for two caches typed into key by key: edit reuse off (exact: a causal or block-causal checkpoint keeps
//! everything before the edit, a bidirectional one recomputes everything) and on (the cache is
//! realigned across the edit and only `--radius` tokens around it and the canvas are
//! recomputed; `CachePolicy::realign`), with the ratio of a keystroke to a cached step.
//!
//! ```sh
//! cargo bench -p redraft --bench keystroke -- --model ~/.cache/redraft-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
//! cargo bench -p redraft --bench keystroke -- --keys 10 --context 1024 --file F.rs --radius 8 --refresh 8 --slots 16
//! ```
//!
//! Run by `cargo test` (without `--bench`) it types three keys on the embedded model as a
//! smoke test.

use std::path::{Path, PathBuf};
use std::time::Instant;

use redraft_engine::sampler::{Controls, Effort, Pass, Realign, SamplerConfig};
use redraft_engine::ContextCache;
use redraft_engine::{Engine, InfillRequest};

struct Options {
    model: PathBuf,
    file: PathBuf,
    keys: usize,
    context: usize,
    /// Edit reuse: the radius recomputed around an edit and the refresh schedule.
    reuse: Realign,
    /// The keystrokes' canvas (1: the first pass alone is the suggestion).
    slots: usize,
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
        model: value("--model").map_or_else(|| repo.join("assets/default-model"), PathBuf::from),
        file: value("--file").map_or_else(|| repo.join("engine/src/sampler.rs"), PathBuf::from),
        keys: value("--keys")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if bench { 8 } else { 3 }),
        context: value("--context")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1024),
        reuse: Realign {
            radius: value("--radius")
                .and_then(|v| v.parse().ok())
                .unwrap_or(Realign::DEFAULT.radius),
            refresh_after: value("--refresh")
                .and_then(|v| v.parse().ok())
                .unwrap_or(Realign::DEFAULT.refresh_after),
        },
        slots: value("--slots").and_then(|v| v.parse().ok()).unwrap_or(1),
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
/// medium effort with edit reuse `edit`, nothing trimmed.
fn request(
    text: &str,
    (start, cursor, end): (usize, usize, usize),
    slots: usize,
    edit: Option<Realign>,
) -> InfillRequest {
    let mut r = InfillRequest::new(&text[start..cursor], &text[cursor..end]);
    (r.canvas_tokens, r.max_tokens) = (slots, slots);
    (r.max_prefix_tokens, r.max_suffix_tokens) = (1 << 20, 1 << 20);
    r.sampler = SamplerConfig::effort(Effort::Medium);
    r.sampler.cache.realign = edit;
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
    let mut first = text.len() * 2 / 3;
    while !text[..first].ends_with('\n') {
        first += 1;
    }
    let complete = |engine: &Engine, request: &InfillRequest, cache: &mut ContextCache| {
        let done = engine
            .complete(request, cache, Controls::default())
            .unwrap();
        (
            done.timings.model_ms,
            done.prefix_tokens + done.suffix_tokens,
        )
    };

    let first_pass = |engine: &Engine, request: &InfillRequest, cache: &mut ContextCache| {
        let mut stepped = None;
        let mut on_step = |_: &redraft_engine::sampler::DenoiseStep| {
            stepped.get_or_insert(Instant::now());
        };
        let started = Instant::now();
        let controls = Controls {
            on_step: Some(&mut on_step),
            ..Controls::default()
        };
        let done = engine.complete(request, cache, controls).unwrap();
        // From the start, less tokenizing, to the end of the first step.
        let ms = stepped.map_or(done.timings.model_ms, |t| {
            (t - started).as_secs_f64() * 1e3 - done.timings.tokenize_ms
        });
        (ms, done.prefix_tokens + done.suffix_tokens)
    };
    let start = context_start(&engine, &text, first, o.context * 3 / 4);
    let mut end = first;
    while end < text.len()
        && engine.tokenizer().encode(&text[first..end]).unwrap().len() < o.context / 4
    {
        end = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    }
    let at = |cursor: usize, slots: usize, edit: Option<Realign>| {
        request(&text, (start, cursor, end), slots, edit)
    };
    let (one, context) = complete(&engine, &at(first, 1, None), &mut ContextCache::default());
    println!("context {context} tokens: cold first pass {one:.1} ms");

    // A cached step, timed next to each keystroke (the machine's load moves): a window pass
    // over a 16-slot canvas of the same context, as decoding makes them (the canvas for a
    // bidirectional model; the row scoring the next slot and the slot committed last for a
    // causal one).
    let model = engine.model();
    let canvas = engine.canvas(&at(first, 16, None)).unwrap();
    let seq = vec![engine.sampler().sequence(&canvas)];
    let canvas_start = seq[0].len() - canvas.suffix.len() - canvas.length;
    let shift = usize::from(engine.settings().logit_shift);
    let step_window = match engine.settings().attention.block() {
        Some(_) => canvas_start - shift..canvas_start + 1,
        None => canvas_start - shift..canvas_start + canvas.length,
    };
    let mut step_cache = ContextCache::default();
    model
        .forward(
            &seq,
            step_window.clone(),
            &mut step_cache,
            Pass::Full { store: true },
        )
        .unwrap();
    let mut cached_step = || {
        let started = Instant::now();
        model
            .forward(&seq, step_window.clone(), &mut step_cache, Pass::Window)
            .unwrap();
        started.elapsed().as_secs_f64() * 1e3
    };

    // The same keys typed twice from the same place, key by key in turn: edit reuse off (exact)
    // and on.
    let modes = [("exact", None), ("edit reuse", Some(o.reuse))];
    let r = o.reuse;
    println!(
        "edit reuse: radius {}, an exact pass after {} approximate ones",
        r.radius, r.refresh_after
    );
    let mut caches: Vec<ContextCache> = modes
        .iter()
        .map(|&(_, edit)| {
            let mut cache = ContextCache::default();
            complete(&engine, &at(first, o.slots, edit), &mut cache);
            cache
        })
        .collect();
    let mut times = vec![Vec::new(); modes.len()];
    let mut ratios = vec![Vec::new(); modes.len()];
    let mut steps = Vec::new();
    let mut cursor = first;
    for _ in 0..o.keys {
        let next = text[cursor..].chars().next().map_or(0, char::len_utf8);
        cursor += next;
        let step = cached_step();
        steps.push(step);
        let mut line = format!(
            "  key {:?}: cached step {step:.1} ms",
            &text[cursor - next..cursor]
        );
        for (m, (&(name, edit), cache)) in modes.iter().zip(&mut caches).enumerate() {
            let (reused, drifted) = (cache.reused_positions(), cache.drifted_positions());
            // The first pass's time (the rest of a longer canvas is cached steps).
            let (ms, _) = first_pass(&engine, &at(cursor, o.slots, edit), cache);
            line.push_str(&format!(
                "; {name} {ms:.1} ms ({} from the cache, {} approximate)",
                cache.reused_positions() - reused,
                cache.drifted_positions() - drifted
            ));
            times[m].push(ms);
            ratios[m].push(ms / step.max(1e-9));
        }
        println!("{line}");
    }
    steps.sort_by(f64::total_cmp);
    println!(
        "cached step p50 {:.1} ms (16-slot canvas, window {:?})",
        percentile(&steps, 50.0),
        step_window
    );
    for (m, &(name, _)) in modes.iter().enumerate() {
        times[m].sort_by(f64::total_cmp);
        ratios[m].sort_by(f64::total_cmp);
        let p50 = percentile(&times[m], 50.0);
        println!(
            "{name}: keystroke first pass p50 {p50:.1} ms, p95 {:.1} ms: {:.2}x the cold pass, {:.1}x the cached step next to it (p50 of the ratios)",
            percentile(&times[m], 95.0),
            p50 / one,
            percentile(&ratios[m], 50.0)
        );
    }
}
