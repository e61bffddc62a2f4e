//! Iteration-level batching with the real model: requests joining a running [`EngineBatch`]
//! (fill-in-the-middle and next edits together) against the same requests run alone through
//! `Engine::complete` / `Engine::next_edit`, on the small test model in `fixtures/small-model`.
//!
//! Without the cache a request's rows do not depend on who else is in the call (padding is
//! masked out, each sequence reads its own rows), so a member ends with exactly its middle
//! alone. With the cache, a window pass recomputes the window of the whole batch and a join
//! forces a stored full pass, so what a member reads from the cache follows the batch: alone it
//! equals `complete`; with others, it still finishes with a valid middle.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redraft_engine::engine::EngineBatch;
use redraft_engine::sampler::{
    CachePolicy, Canvas, CanvasView, Controls, Effort, MemberControls, MemberId, Realign,
    SamplerConfig,
};
use redraft_engine::ContextCache;
use redraft_engine::{Completion, EditRequest, Engine, Error, InfillRequest};

fn engine() -> Engine {
    Engine::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model"))
        .expect("the default model loads")
}

const CACHE_OFF: CachePolicy = CachePolicy {
    enabled: false,
    refresh_every: None,
    realign: None,
    prompt_chunk: None,
};

const CACHE_ON: CachePolicy = CachePolicy {
    enabled: true,
    refresh_every: None,
    realign: None,
    prompt_chunk: None,
};

/// One token per step, greedy, under `cache`.
fn high(cache: CachePolicy) -> SamplerConfig {
    SamplerConfig {
        cache,
        ..SamplerConfig::effort(Effort::High)
    }
}

fn infill(prefix: &str, suffix: &str, canvas: usize, sampler: SamplerConfig) -> InfillRequest {
    InfillRequest {
        canvas_tokens: canvas,
        max_tokens: 24,
        sampler,
        ..InfillRequest::new(prefix, suffix)
    }
}

fn edit(sampler: SamplerConfig) -> EditRequest {
    EditRequest {
        history: Vec::new(),
        path: "src/lib.rs".into(),
        before: "pub fn area(width: u32, height: u32) -> u32 {\n".into(),
        region: "    width * heigth\n".into(),
        original: "    width * heigth\n".into(),
        cursor: 4,
        after: "}\n".into(),
        max_tokens: None,
        sampler: SamplerConfig {
            draft_tau: Some(0.5),
            ..sampler
        },
    }
}

/// A request of either kind, and how it runs alone.
enum Request {
    Infill(InfillRequest),
    Edit(EditRequest),
}

impl Request {
    fn alone(&self, engine: &Engine) -> Completion {
        let mut cache = ContextCache::default();
        match self {
            Request::Infill(r) => engine.complete(r, &mut cache, Controls::default()),
            Request::Edit(r) => engine.next_edit(r, &mut cache, Controls::default()),
        }
        .expect("runs alone")
    }

    fn canvas(&self, engine: &Engine) -> Canvas {
        match self {
            Request::Infill(r) => engine.canvas(r),
            Request::Edit(r) => engine.edit_canvas(r),
        }
        .expect("a valid request")
    }

    fn join<'e>(
        &self,
        batch: &mut EngineBatch<'e>,
        controls: MemberControls<'e>,
    ) -> redraft_engine::Result<MemberId> {
        match self {
            Request::Infill(r) => batch.join(r, controls),
            Request::Edit(r) => batch.join_edit(r, controls),
        }
    }
}

/// Steps `batch` until it is empty, `requests[i]` joining before step `at[i]`; each request's
/// result and the step it left in.
fn staggered<'e>(
    batch: &mut EngineBatch<'e>,
    requests: &[Request],
    at: &[usize],
    mut controls: impl FnMut(usize) -> MemberControls<'e>,
) -> Vec<(redraft_engine::Result<Completion>, usize)> {
    let mut ids = vec![None; requests.len()];
    let mut done: Vec<Option<(redraft_engine::Result<Completion>, usize)>> =
        (0..requests.len()).map(|_| None).collect();
    for step in 0.. {
        for (index, request) in requests.iter().enumerate() {
            if at[index] == step {
                ids[index] = Some(request.join(batch, controls(index)).expect("joins"));
            }
        }
        if batch.is_empty() && at.iter().all(|&a| a <= step) {
            break;
        }
        for (id, completion) in batch.step().expect("the step succeeds") {
            let index = ids.iter().position(|&i| i == Some(id)).expect("a member");
            done[index] = Some((completion, step));
        }
        assert!(step < 500, "the batch never emptied");
    }
    done.into_iter()
        .map(|d| d.expect("every request left"))
        .collect()
}

/// What must agree between a member and the same request alone.
fn decoded(
    c: &Completion,
) -> (
    &str,
    &[u32],
    bool,
    usize,
    usize,
    Option<usize>,
    usize,
    usize,
) {
    (
        &c.middle,
        &c.tokens,
        c.ended_by_eos,
        c.steps,
        c.slots,
        c.steps_after_end,
        c.prefix_tokens,
        c.suffix_tokens,
    )
}

fn mixed(cache: CachePolicy) -> Vec<Request> {
    let warm = SamplerConfig {
        temperature: 1.0,
        seed: 7,
        ..high(cache)
    };
    vec![
        Request::Infill(infill(
            "fn add(a: u32, b: u32) -> u32 {\n    ",
            "\n}\n",
            6,
            high(cache),
        )),
        Request::Edit(edit(high(cache))),
        Request::Infill(infill(
            "let total: u32 = items.iter().map(|item| ",
            ").sum();\n",
            10,
            warm,
        )),
        Request::Infill(infill(
            "struct Point {\n    x: f32,\n",
            "}\n",
            8,
            high(cache),
        )),
    ]
}

/// The second request joins after the first one's second step, the third after the second's
/// first, the fourth later still: each ends with its middle alone, greedy or sampled, a next
/// edit among infills.
#[test]
fn requests_joining_mid_run_complete_as_they_do_alone() {
    let engine = engine();
    let requests = mixed(CACHE_OFF);
    let mut batch = engine.batch(CACHE_OFF);
    let out = staggered(&mut batch, &requests, &[0, 2, 3, 5], |_| {
        MemberControls::default()
    });
    for (index, (request, (batched, left_at))) in requests.iter().zip(&out).enumerate() {
        let batched = batched.as_ref().expect("completes");
        let alone = request.alone(&engine);
        assert_eq!(decoded(batched), decoded(&alone), "request {index}");
        assert_eq!(batched.forwards, alone.forwards, "request {index}");
        assert_eq!(
            batched.full_passes, batched.forwards,
            "no cache: every pass is full"
        );
        assert!(!batched.hit_deadline);
        assert!(*left_at >= [0, 2, 3, 5][index] + batched.steps - 1);
    }
    // The batch shared its calls: fewer than the requests alone.
    let alone: usize = out.iter().map(|(c, _)| c.as_ref().unwrap().forwards).sum();
    assert!(batch.stats().forwards < alone, "{:?}", batch.stats());
    assert!(
        out[0].1 >= 3,
        "the first request was still running when the third joined"
    );
}

/// With the cache on, a request alone in a batch is `complete`, pass for pass.
#[test]
fn with_the_cache_a_request_alone_in_a_batch_equals_complete() {
    let engine = engine();
    for request in mixed(CACHE_ON).into_iter().take(2) {
        let mut batch = engine.batch(CACHE_ON);
        let out = staggered(&mut batch, std::slice::from_ref(&request), &[0], |_| {
            MemberControls::default()
        });
        let batched = out[0].0.as_ref().expect("completes");
        let alone = request.alone(&engine);
        assert_eq!(decoded(batched), decoded(&alone));
        assert_eq!(
            (batched.forwards, batched.full_passes, batched.window_passes),
            (alone.forwards, alone.full_passes, alone.window_passes)
        );
        assert!(batched.window_passes > 0, "the cache was used");
    }
}

/// With the cache on and members joining, every request finishes with a valid middle; each
/// join costs the members already running a stored full pass.
#[test]
fn with_the_cache_and_joins_every_request_finishes_with_a_valid_middle() {
    let engine = engine();
    let requests = mixed(CACHE_ON);
    let mut batch = engine.batch(CACHE_ON);
    let at = [0, 2, 3, 5];
    let out = staggered(&mut batch, &requests, &at, |_| MemberControls::default());
    let mask = engine.settings().mask_token_id;
    let eos = engine.settings().eos_token_id;
    for (index, (completion, left_at)) in out.iter().enumerate() {
        let c = completion.as_ref().expect("completes");
        assert!(
            c.tokens.iter().all(|&t| t != mask && t != eos),
            "request {index}: {c:?}"
        );
        let canvas = requests[index].canvas(&engine);
        assert!(c.tokens.len() <= c.slots, "request {index}: {c:?}");
        assert!(
            (canvas.length..=canvas.max_length).contains(&c.slots),
            "request {index}: {c:?}"
        );
        assert_eq!(
            c.forwards, c.steps,
            "request {index}: one commit at least per step"
        );
        assert_eq!(c.full_passes + c.window_passes, c.forwards);
        assert_eq!(engine.tokenizer().decode(&c.tokens).unwrap(), c.middle);
        // Every later join while it ran forced a full pass on it.
        let joins_seen = at
            .iter()
            .filter(|&&a| a > at[index] && a <= *left_at)
            .count();
        assert!(
            c.full_passes > joins_seen,
            "request {index}: {} full passes, {joins_seen} joins",
            c.full_passes
        );
    }
    assert!(batch.stats().window_passes > 0);
}

/// A cancelled request leaves at the next step with `Error::Cancelled`; the others end as they
/// do alone.
#[test]
fn a_cancelled_request_leaves_and_the_others_complete_as_alone() {
    let engine = engine();
    let requests = mixed(CACHE_OFF);
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let steps_seen = Arc::new(Mutex::new(0));
    let seen = steps_seen.clone();
    let mut batch = engine.batch(CACHE_OFF);
    let out = staggered(&mut batch, &requests, &[0, 0, 0, 0], |index| {
        if index != 1 {
            return MemberControls::default();
        }
        let (flag, seen) = (flag.clone(), seen.clone());
        MemberControls {
            cancel: Some(cancel.clone()),
            deadline: None,
            on_step: Some(Box::new(move |_: &CanvasView| {
                let mut seen = seen.lock().unwrap();
                *seen += 1;
                if *seen == 2 {
                    flag.store(true, Ordering::Relaxed);
                }
            })),
            stop: None,
        }
    });
    assert!(matches!(out[1].0, Err(Error::Cancelled)), "{:?}", out[1].0);
    assert_eq!(out[1].1, 2, "left before the third step's call");
    assert_eq!(*steps_seen.lock().unwrap(), 2);
    for index in [0, 2, 3] {
        let batched = out[index].0.as_ref().expect("completes");
        assert_eq!(decoded(batched), decoded(&requests[index].alone(&engine)));
    }
}

/// A request past its deadline is forced in its first step; the others are not.
#[test]
fn a_requests_deadline_forces_only_that_request() {
    let engine = engine();
    let requests = mixed(CACHE_OFF);
    let past = Instant::now();
    std::thread::sleep(Duration::from_millis(1));
    let mut batch = engine.batch(CACHE_OFF);
    let out = staggered(&mut batch, &requests, &[0, 0, 0, 0], |index| {
        MemberControls {
            deadline: (index == 0).then_some(past),
            ..MemberControls::default()
        }
    });
    let late = out[0].0.as_ref().unwrap();
    assert!(late.hit_deadline);
    assert_eq!((late.steps, late.forwards, out[0].1), (1, 1, 0));
    for index in 1..4 {
        let batched = out[index].0.as_ref().unwrap();
        assert!(!batched.hit_deadline);
        assert_eq!(decoded(batched), decoded(&requests[index].alone(&engine)));
    }
}

/// A request the engine refuses (an empty canvas, a next edit with no room) is refused at join;
/// the batch carries on as if it had never been asked.
#[test]
fn a_refused_request_does_not_disturb_the_batch() {
    let engine = engine();
    let requests = mixed(CACHE_ON);
    let mut batch = engine.batch(CACHE_ON);
    requests[0]
        .join(&mut batch, MemberControls::default())
        .unwrap();
    batch.step().unwrap();
    let empty = infill("a", "b", 0, high(CACHE_ON));
    assert!(matches!(
        batch.join(&empty, MemberControls::default()),
        Err(Error::InvalidRequest(_))
    ));
    let no_room = EditRequest {
        max_tokens: Some(0),
        ..edit(high(CACHE_ON))
    };
    assert!(matches!(
        batch.join_edit(&no_room, MemberControls::default()),
        Err(Error::InvalidRequest(_))
    ));
    assert_eq!(batch.len(), 1);
    let mut last = Vec::new();
    while !batch.is_empty() {
        last = batch.step().unwrap();
    }
    let batched = last[0].1.as_ref().unwrap();
    let alone = requests[0].alone(&engine);
    assert_eq!(decoded(batched), decoded(&alone));
    assert_eq!(
        (batched.full_passes, batched.window_passes),
        (alone.full_passes, alone.window_passes),
        "no full pass for the refused joins"
    );
}

/// A server moves a batch (and the controls in it) to its inference thread.
#[test]
fn a_batch_can_move_to_another_thread() {
    fn sendable<T: Send>(_: &T) {}
    let engine = engine();
    let batch = engine.batch(CACHE_ON);
    sendable(&batch);
    sendable(&MemberControls::default());
}

/// Batches of their own, one request each (the cache on: a server's lanes), stepped together in
/// one model call, with the third joining later and the fourth cancelled after two steps: each
/// request ends as it does alone, pass for pass, and the cancelled one leaves the others alone.
#[test]
fn batches_stepped_together_complete_as_alone() {
    let engine = engine();
    let requests = mixed(CACHE_ON);
    let cancel = Arc::new(AtomicBool::new(false));
    let mut batches: Vec<EngineBatch<'_>> =
        requests.iter().map(|_| engine.batch(CACHE_ON)).collect();
    let mut ids = vec![None; requests.len()];
    let mut done: Vec<Option<redraft_engine::Result<Completion>>> =
        requests.iter().map(|_| None).collect();
    let joins_at = [0, 0, 2, 0];
    for step in 0..500 {
        for (index, request) in requests.iter().enumerate() {
            if joins_at[index] == step {
                let controls = MemberControls {
                    cancel: (index == 3).then(|| cancel.clone()),
                    ..MemberControls::default()
                };
                ids[index] = Some(request.join(&mut batches[index], controls).unwrap());
            }
        }
        if step == 2 {
            cancel.store(true, Ordering::Relaxed);
        }
        if step > 2 && batches.iter().all(EngineBatch::is_empty) {
            break;
        }
        let mut all: Vec<&mut EngineBatch<'_>> = batches.iter_mut().collect();
        let left = EngineBatch::step_together(&mut all).expect("the step succeeds");
        for (index, left) in left.into_iter().enumerate() {
            for (id, completion) in left {
                assert_eq!(Some(id), ids[index]);
                done[index] = Some(completion);
            }
        }
    }
    for (index, (request, out)) in requests.iter().zip(done).enumerate() {
        let out = out.expect("every request left");
        if index == 3 {
            assert!(matches!(out, Err(Error::Cancelled)), "{out:?}");
            continue;
        }
        let batched = out.expect("completes");
        let alone = request.alone(&engine);
        assert_eq!(decoded(&batched), decoded(&alone), "request {index}");
        assert_eq!(
            (batched.forwards, batched.full_passes, batched.window_passes),
            (alone.forwards, alone.full_passes, alone.window_passes),
            "request {index}"
        );
    }
}

/// The default model's weights attending causally, its logits shifted (as an autoregressive
/// checkpoint's are), loaded from a directory of its own.
fn causal_engine() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(from.join(file), dir.path().join(file)).unwrap();
    }
    std::fs::write(
        dir.path().join("redraft.json"),
        r#"{"eos_token_id": 1, "mask_token_id": 0, "pad_token_id": 1,
            "logit_shift": true, "attention": "causal"}"#,
    )
    .unwrap();
    let engine = Engine::load(dir.path()).expect("the causal model loads");
    (dir, engine)
}

/// Runs `canvas` alone in a batch under `chunk` (and a server's reuse of a cache across edits)
/// until it leaves.
fn run_canvas(
    engine: &Engine,
    canvas: &Canvas,
    chunk: Option<usize>,
    controls: MemberControls<'_>,
) -> Completion {
    let cache = CachePolicy {
        prompt_chunk: chunk,
        realign: Some(Realign::DEFAULT),
        ..CACHE_ON
    };
    let mut batch = engine.batch(cache);
    batch.join_canvas(canvas, high(cache), controls).unwrap();
    for _ in 0..100 {
        if let Some((_, completion)) = batch.step().unwrap().pop() {
            return completion.unwrap();
        }
    }
    panic!("the canvas never filled");
}

/// Batches stepped together put at most one prompt piece in a call, the first batch's: with
/// two new 200-token prompts under 48, the second makes no pass during the first's four
/// pieces, then starts its own; each still gets its middle and its passes as alone. A
/// bidirectional model has no pieces: both batches are in every call.
#[test]
fn batches_stepped_together_take_turns_at_their_prompt_pieces() {
    let prompt: Vec<u32> = (0..200u32).map(|i| 2 + i * 7919 % 4000).collect();
    let canvas = Canvas::new(prompt, 8, Vec::new());
    let cache = CachePolicy {
        prompt_chunk: Some(48),
        ..CACHE_ON
    };
    // The calls each batch took part in, until both are done, and their completions.
    let together = |engine: &Engine| {
        let (mut first, mut second) = (engine.batch(cache), engine.batch(cache));
        for batch in [&mut first, &mut second] {
            batch
                .join_canvas(&canvas, high(cache), MemberControls::default())
                .unwrap();
        }
        let (mut calls, mut done) = (Vec::new(), Vec::new());
        while !first.is_empty() || !second.is_empty() {
            let before = [first.stats().forwards, second.stats().forwards];
            let left = EngineBatch::step_together(&mut [&mut first, &mut second]).unwrap();
            calls.push([
                first.stats().forwards > before[0],
                second.stats().forwards > before[1],
            ]);
            done.extend(left.into_iter().flatten().map(|(_, c)| c.unwrap()));
        }
        (calls, done)
    };
    let (_dir, causal) = causal_engine();
    let alone = run_canvas(&causal, &canvas, Some(48), MemberControls::default());
    let (calls, done) = together(&causal);
    assert_eq!(
        calls[..5],
        [[true, false]; 4]
            .into_iter()
            .chain([[true, true]])
            .collect::<Vec<_>>()
    );
    assert_eq!(done.len(), 2);
    for completion in &done {
        assert_eq!(decoded(completion), decoded(&alone));
        assert_eq!(completion.forwards, alone.forwards);
    }
    let (calls, _) = together(&engine());
    assert!(calls.iter().all(|&call| call == [true, true]), "{calls:?}");
}

/// With `prompt_chunk`, a causal model computes a long prompt in pieces first, steps in which
/// nothing commits: the middle, the member's steps and every pass after the pieces are those of
/// one pass; a cancel raised between pieces ends the request before its canvas is read; a member
/// past its deadline and a bidirectional model get one pass.
#[test]
fn a_prompt_computed_in_pieces_decodes_as_in_one_pass() {
    let (_dir, causal) = causal_engine();
    let prompt: Vec<u32> = (0..200u32).map(|i| 2 + i * 7919 % 4000).collect();
    let canvas = Canvas::new(prompt, 8, Vec::new());
    let whole = run_canvas(&causal, &canvas, None, MemberControls::default());
    let pieces = run_canvas(&causal, &canvas, Some(48), MemberControls::default());
    assert_eq!(decoded(&pieces), decoded(&whole));
    // The first slot is scored from position 199: pieces end at 48, 96, 144 and 192.
    assert_eq!(
        (pieces.full_passes, pieces.window_passes),
        (whole.full_passes + 4, whole.window_passes)
    );
    assert_eq!(pieces.forwards, whole.forwards + 4);

    let cancel = Arc::new(AtomicBool::new(false));
    let cache = CachePolicy {
        prompt_chunk: Some(48),
        ..CACHE_ON
    };
    let mut batch = causal.batch(cache);
    let controls = MemberControls {
        cancel: Some(cancel.clone()),
        ..MemberControls::default()
    };
    let id = batch.join_canvas(&canvas, high(cache), controls).unwrap();
    assert!(batch.step().unwrap().is_empty(), "a piece fills nothing");
    cancel.store(true, Ordering::Relaxed);
    let left = batch.step().unwrap();
    assert!(
        matches!(&left[..], [(left, Err(Error::Cancelled))] if *left == id),
        "{left:?}"
    );
    assert_eq!(batch.stats().forwards, 1, "no pass after the cancel");

    let rushed = || MemberControls {
        deadline: Some(Instant::now()),
        ..MemberControls::default()
    };
    let late = run_canvas(&causal, &canvas, Some(48), rushed());
    assert_eq!(
        decoded(&late),
        decoded(&run_canvas(&causal, &canvas, None, rushed()))
    );
    assert_eq!(late.forwards, 1);

    let bidirectional = engine();
    let whole = run_canvas(&bidirectional, &canvas, None, MemberControls::default());
    let asked = run_canvas(&bidirectional, &canvas, Some(48), MemberControls::default());
    assert_eq!(decoded(&asked), decoded(&whole));
    assert_eq!(asked.forwards, whole.forwards);
}
