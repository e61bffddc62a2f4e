//! A cancel (or a run's interrupt) that lands while a model call runs: once every request in a
//! call without edit reuse
//! (a next edit's exact pass) is cancelled, the engine gives the call up before its next layer
//! (or before its next layer's projections) instead of finishing a pass nobody waits for, and
//! empties the cache the call half wrote. What a keystroke superseding such a job waits for: a
//! fraction of its pass. With edit reuse on, the call ends: its cache is what the next request
//! realigns.

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redraft_engine::qwen2::Qwen2;
use redraft_engine::sampler::{
    Controls, Denoiser, MemberControls, MemberOutcome, ModelCall, Pass, Realign, SamplerConfig,
};
use redraft_engine::{ContextCache, Engine, Error, InfillRequest};

fn engine() -> Engine {
    Engine::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model"))
        .expect("the default model loads")
}

/// The engine's model, raising `raise` at the `raise_at`-th time a call asks whether to stop,
/// as a keystroke's cancel lands part way through a pass. Counts the asks, and the calls that
/// ran to their end.
struct CancelledMidPass<'m> {
    model: &'m Qwen2,
    raise: Vec<Arc<AtomicBool>>,
    raise_at: usize,
    asked: Cell<usize>,
    finished: Cell<usize>,
}

impl<'m> CancelledMidPass<'m> {
    fn new(model: &'m Qwen2, raise: &[&Arc<AtomicBool>], raise_at: usize) -> Self {
        CancelledMidPass {
            model,
            raise: raise.iter().map(|&flag| Arc::clone(flag)).collect(),
            raise_at,
            asked: Cell::new(0),
            finished: Cell::new(0),
        }
    }
}

impl Denoiser for CancelledMidPass<'_> {
    type Cache = ContextCache;

    fn vocab_size(&self) -> usize {
        self.model.vocab_size()
    }

    fn logits(
        &self,
        tokens: &[Vec<u32>],
        window: std::ops::Range<usize>,
        cache: &mut ContextCache,
        pass: Pass,
    ) -> redraft_engine::Result<Vec<f32>> {
        self.model.logits(tokens, window, cache, pass)
    }

    fn logits_many_unless(
        &self,
        calls: &mut [ModelCall<'_, ContextCache>],
        stop: &dyn Fn() -> bool,
    ) -> redraft_engine::Result<Option<Vec<Vec<f32>>>> {
        let asking = || {
            self.asked.set(self.asked.get() + 1);
            if self.asked.get() == self.raise_at {
                for flag in &self.raise {
                    flag.store(true, Ordering::Relaxed);
                }
            }
            stop()
        };
        let logits = self.model.logits_many_unless(calls, &asking)?;
        self.finished
            .set(self.finished.get() + usize::from(logits.is_some()));
        Ok(logits)
    }

    fn cache_covers(
        &self,
        cache: &ContextCache,
        tokens: &[Vec<u32>],
        window: &std::ops::Range<usize>,
    ) -> bool {
        self.model.cache_covers(cache, tokens, window)
    }

    fn cache_realigns(
        &self,
        cache: &ContextCache,
        tokens: &[Vec<u32>],
        window: &std::ops::Range<usize>,
        reuse: Realign,
    ) -> bool {
        self.model.cache_realigns(cache, tokens, window, reuse)
    }
}

/// Exact passes only, as a next edit asks (edit reuse off).
fn request(prefix: &str) -> InfillRequest {
    let mut request = InfillRequest {
        canvas_tokens: 8,
        max_tokens: 8,
        ..InfillRequest::new(prefix, "\n    total\n}\n")
    };
    request.sampler.cache.realign = None;
    request
}

/// How a run watches the flag the model raises.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Watch {
    /// As its cancel flag.
    Cancel,
    /// Through its interrupt ([`Controls::interrupt`]), which reads the flag.
    Interrupt,
    Not,
}

/// A run whose cancel (or interrupt) is raised within the second layer of its first pass ends
/// there, cancelled, with no pass finished and its cache (warm before, from another request)
/// empty; the same model raising a flag the run does not watch runs to its end; with edit
/// reuse on, the pass under way ends and leaves its cache.
#[test]
fn a_run_cancelled_mid_pass_stops_before_the_next_layer_and_empties_its_cache() {
    let engine = engine();
    let warm = || {
        let mut cache = ContextCache::default();
        engine
            .complete(
                &request("fn sum(xs: &[u32]) -> u32 {\n    let mut total = 0;\n"),
                &mut cache,
                Controls::default(),
            )
            .unwrap();
        assert!(!cache.is_empty());
        cache
    };
    let next = request("fn sum(xs: &[u64]) -> u64 {\n    let mut total = 0;\n    ");
    let canvas = engine.canvas(&next).unwrap();
    let config = next.sampler.clone();
    let raise_at = 3;

    // From a warm cache, a flag raised at the third ask, which the run watches or not.
    let run = |config: &SamplerConfig, watch: Watch| {
        let flag = Arc::new(AtomicBool::new(false));
        let model = CancelledMidPass::new(engine.model(), &[&flag], raise_at);
        let mut cache = warm();
        let before = cache.tokens().to_vec();
        let interrupt = || flag.load(Ordering::Relaxed);
        let controls = Controls {
            cancel: (watch == Watch::Cancel).then_some(&*flag),
            interrupt: (watch == Watch::Interrupt).then_some(&interrupt),
            ..Controls::default()
        };
        let ran = engine.sampler().run(
            &model,
            &mut cache,
            std::slice::from_ref(&canvas),
            config,
            controls,
        );
        let written = !cache.is_empty() && cache.tokens() != before;
        (ran, model.asked.get(), model.finished.get(), cache, written)
    };

    for watch in [Watch::Cancel, Watch::Interrupt] {
        let (ran, asked, finished, cache, _) = run(&config, watch);
        assert!(matches!(ran, Err(Error::Cancelled)), "{watch:?}: {ran:?}");
        assert_eq!(
            asked, raise_at,
            "{watch:?}: stopped at the ask after the raise"
        );
        assert_eq!(finished, 0, "{watch:?}");
        assert!(
            cache.is_empty(),
            "{watch:?}: a half-written cache is never kept"
        );
    }

    let (ran, asked, finished, _, written) = run(&config, Watch::Not);
    assert!(ran.is_ok(), "{ran:?}");
    assert!(finished >= 1 && asked > raise_at);
    assert!(written);

    let mut reusing = config.clone();
    reusing.cache.realign = Some(Realign::DEFAULT);
    let (ran, _, finished, _, written) = run(&reusing, Watch::Cancel);
    assert!(matches!(ran, Err(Error::Cancelled)), "{ran:?}");
    assert_eq!(finished, 1, "the pass under way ended");
    assert!(written, "it holds the pass's tokens");
}

/// In a batch, a call goes on while one member is still wanted (the cancelled one leaves at
/// the next step) and is given up once every member's own flag is up.
#[test]
fn a_batch_call_stops_only_once_every_member_is_cancelled() {
    let engine = engine();
    let canvases = [
        engine.canvas(&request("fn a() -> u32 {\n    ")).unwrap(),
        engine
            .canvas(&request("fn b() -> u32 {\n    let x = 1;\n    "))
            .unwrap(),
    ];
    let config = request("").sampler;
    let flags = [
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    ];
    let batch_of = |flags: &[Arc<AtomicBool>; 2]| {
        let mut batch = engine.sampler().batch(config.cache);
        let ids: Vec<_> = canvases
            .iter()
            .zip(flags)
            .map(|(canvas, flag)| {
                let controls = MemberControls {
                    cancel: Some(Arc::clone(flag)),
                    ..MemberControls::default()
                };
                batch.join(canvas, config.clone(), controls).unwrap()
            })
            .collect();
        (batch, ids)
    };

    // One member cancelled mid-call: the call ends, that member leaves at the next step.
    let (mut batch, ids) = batch_of(&flags);
    let model = CancelledMidPass::new(engine.model(), &[&flags[0]], 3);
    let mut cache = ContextCache::default();
    let left = batch.step(&model, &mut cache).unwrap();
    assert_eq!(model.finished.get(), 1);
    assert!(left
        .iter()
        .all(|(_, outcome)| !matches!(outcome, MemberOutcome::Cancelled)));
    let left = batch.step(&model, &mut cache).unwrap();
    assert!(
        left.contains(&(ids[0], MemberOutcome::Cancelled)),
        "{left:?}"
    );
    assert_eq!(model.finished.get(), 2, "the other member goes on");
    assert!(!cache.is_empty());

    // Both cancelled mid-call: the call is given up, both leave, the cache is emptied.
    let flags = [
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    ];
    let (mut batch, ids) = batch_of(&flags);
    let model = CancelledMidPass::new(engine.model(), &[&flags[0], &flags[1]], 3);
    let mut cache = ContextCache::default();
    let left = batch.step(&model, &mut cache).unwrap();
    assert_eq!(model.finished.get(), 0);
    assert_eq!(model.asked.get(), 3);
    let mut cancelled: Vec<_> = left
        .iter()
        .filter(|(_, outcome)| *outcome == MemberOutcome::Cancelled)
        .map(|(id, _)| *id)
        .collect();
    cancelled.sort();
    assert_eq!(cancelled, ids);
    assert!(batch.is_empty());
    assert!(cache.is_empty());
}
