//! The diffusion sampler against a scripted fake model: commit order, schedules, confidence
//! kinds, the step budget, variable length (EOS runs, the shrinking window, growth), the logit
//! shift and BOS, the context cache,
//! cancellation, the deadline, batching, temperature, invalid requests, the effort presets,
//! drafts (a next edit's old region, committed at a lower bar where the model copies it) and
//! iteration-level batching (members joining a running batch and leaving it, each as if alone).
//!
//! The fake ([`ScriptedModel`]) answers each (sequence, position) from a script and records every
//! call, so a test states what the model believes and asserts what the sampler did with it. The
//! per-step stream is rendered one line per step, `slots | committed`, with `_` for a masked slot.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redraft_engine::config::{AttentionPattern, DiffusionSettings, EditCanvas};
use redraft_engine::sampler::{
    logit_row, CachePolicy, Canvas, CanvasView, Confidence, Controls, DenoiseStep, Denoiser,
    Effort, Infill, MemberControls, MemberId, MemberOutcome, Pass, PassStats, Realign, Sampled,
    Sampler, SamplerConfig, Schedule, StopFn,
};
use redraft_engine::{Error, Result};

// The fake's vocabulary: ten letters, two whitespace tokens, then the special ids.
const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;
const D: u32 = 3;
const E: u32 = 4;
const F: u32 = 5;
const G: u32 = 6;
const J: u32 = 9;
const SPACE: u32 = 10;
const NEWLINE: u32 = 11;
const BOS: u32 = 12;
const PAD: u32 = 13;
const EOS: u32 = 14;
const MASK: u32 = 15;
const VOCAB: usize = 16;
const NAMES: [&str; VOCAB] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "sp", "nl", "BOS", "PAD", "EOS", "MASK",
];

// ---------------------------------------------------------------------------------------------
// Distributions: logits are ln of chosen probabilities.

/// Logits putting `probs` on the listed tokens and spreading what is left evenly over the
/// ordinary tokens (letters and whitespace) not listed; special tokens get nothing unless listed.
fn dist(probs: &[(u32, f32)]) -> Vec<f32> {
    let listed: f32 = probs.iter().map(|(_, p)| p).sum();
    let rest: Vec<u32> = (0..BOS)
        .filter(|t| probs.iter().all(|(l, _)| l != t))
        .collect();
    let each = (1.0 - listed).max(0.0) / rest.len() as f32;
    let mut p = [0.0f32; VOCAB];
    for t in rest {
        p[t as usize] = each;
    }
    for &(t, q) in probs {
        p[t as usize] = q;
    }
    p.iter().map(|q| q.ln()).collect()
}

/// Probability `p` on `token`, the rest spread.
fn peaked(token: u32, p: f32) -> Vec<f32> {
    dist(&[(token, p)])
}

/// Every ordinary token equally likely.
fn flat() -> Vec<f32> {
    dist(&[])
}

// ---------------------------------------------------------------------------------------------
// The fake model.

/// One model call as the fake saw it.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    pass: Pass,
    window: Range<usize>,
    tokens: Vec<Vec<u32>>,
}

impl Call {
    fn render(&self) -> String {
        let pass = match self.pass {
            Pass::Full { store: true } => "full+store",
            Pass::Full { store: false } => "full",
            Pass::Window => "window",
            Pass::Realign { .. } => "edit",
        };
        format!("{pass} {:?}", self.window)
    }
}

/// The tokens the cache's keys/values were computed for: the last stored pass
/// (`Pass::Full { store: true }`) with every later window pass's window; `None` before any.
#[derive(Debug, Default)]
struct FakeCache {
    stored: Option<Vec<Vec<u32>>>,
}

type Script = Box<dyn Fn(&[u32], usize) -> Vec<f32>>;

/// A model whose row at `position` of `sequence` is whatever the script says.
struct ScriptedModel {
    script: Script,
    calls: RefCell<Vec<Call>>,
    /// Whether it says a stored cache may be realigned across an edit.
    realigns: bool,
}

impl ScriptedModel {
    fn new(script: impl Fn(&[u32], usize) -> Vec<f32> + 'static) -> ScriptedModel {
        ScriptedModel {
            script: Box::new(script),
            calls: RefCell::new(Vec::new()),
            realigns: false,
        }
    }

    /// Row `first + i` is `rows[i]` whatever the tokens; every other row is flat.
    fn rows(first: usize, rows: Vec<Vec<f32>>) -> ScriptedModel {
        ScriptedModel::new(move |_, pos| {
            pos.checked_sub(first)
                .and_then(|i| rows.get(i))
                .cloned()
                .unwrap_or_else(flat)
        })
    }

    fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.calls.borrow_mut())
    }
}

impl Denoiser for ScriptedModel {
    type Cache = FakeCache;

    fn vocab_size(&self) -> usize {
        VOCAB
    }

    fn logits(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut FakeCache,
        pass: Pass,
    ) -> Result<Vec<f32>> {
        self.calls.borrow_mut().push(Call {
            pass,
            window: window.clone(),
            tokens: tokens.to_vec(),
        });
        match pass {
            Pass::Full { store: true } | Pass::Realign { .. } => {
                cache.stored = Some(tokens.to_vec())
            }
            Pass::Full { store: false } => {}
            // As the real model does: a window pass needs a stored pass over the same context.
            Pass::Window if !self.cache_covers(cache, tokens, &window) => {
                return Err(Error::InvalidRequest(
                    "window pass without a stored pass for these tokens".into(),
                ));
            }
            // As the real cache does: a window pass leaves the window's keys/values (here: its
            // tokens) in the cache.
            Pass::Window => {
                for (stored, new) in cache.stored.iter_mut().flatten().zip(tokens) {
                    let end = window.end.min(new.len());
                    if window.start < end {
                        stored[window.start..end].copy_from_slice(&new[window.start..end]);
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(tokens.len() * window.len() * VOCAB);
        for seq in tokens {
            for pos in window.clone() {
                // A shorter sequence of the batch is padded, as the real model pads it.
                let row = if pos < seq.len() {
                    (self.script)(seq, pos)
                } else {
                    flat()
                };
                assert_eq!(row.len(), VOCAB, "script row for position {pos}");
                out.extend(row);
            }
        }
        Ok(out)
    }

    fn cache_realigns(
        &self,
        cache: &FakeCache,
        _tokens: &[Vec<u32>],
        _window: &Range<usize>,
        _reuse: Realign,
    ) -> bool {
        self.realigns && cache.stored.is_some()
    }

    fn cache_covers(&self, cache: &FakeCache, tokens: &[Vec<u32>], window: &Range<usize>) -> bool {
        cache.stored.as_ref().is_some_and(|stored| {
            stored.len() == tokens.len()
                && stored.iter().zip(tokens).all(|(old, new)| {
                    let (start, end) = (window.start.min(new.len()), window.end.min(new.len()));
                    old.len() == new.len()
                        && old[..start] == new[..start]
                        && old[end..] == new[end..]
                })
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Running the sampler.

fn settings(logit_shift: bool, bos_token_id: Option<u32>) -> DiffusionSettings {
    DiffusionSettings {
        mask_token_id: MASK,
        eos_token_id: EOS,
        pad_token_id: PAD,
        bos_token_id,
        logit_shift,
        edit_canvas: Default::default(),
        attention: Default::default(),
        efforts: Default::default(),
        edit_min_confidence: 0.0,
        fim_min_confidence: 0.0,
    }
}

/// `SPACE` and `NEWLINE` are whitespace only.
fn whitespace() -> Vec<bool> {
    (0..VOCAB as u32)
        .map(|t| t == SPACE || t == NEWLINE)
        .collect()
}

/// One token per step, greedy, probability confidence, cache on, no step cap.
fn one_per_step() -> SamplerConfig {
    SamplerConfig {
        schedule: Schedule::TopK { k: 1 },
        confidence: Confidence::Probability,
        max_steps: None,
        temperature: 0.0,
        seed: 0,
        cache: CachePolicy {
            enabled: true,
            refresh_every: None,
            realign: None,
            prompt_chunk: None,
        },
        draft_tau: None,
        guess_context: false,
    }
}

fn canvas(prefix: &[u32], length: usize, suffix: &[u32]) -> Canvas {
    Canvas::new(prefix.to_vec(), length, suffix.to_vec())
}

/// How the sampler is set up for a run; `Setup::new()` is what most tests use.
struct Setup {
    settings: DiffusionSettings,
    whitespace: Vec<bool>,
    /// Tokens never committed (`Sampler::banning`); empty: none.
    banned: Vec<bool>,
    config: SamplerConfig,
    /// Every canvas's stop rule (`Controls::stop`).
    stop: Option<fn(&[u32]) -> bool>,
}

/// Everything one run left behind.
struct Outcome {
    result: Result<Sampled>,
    stream: Vec<DenoiseStep>,
    calls: Vec<Call>,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            settings: settings(false, None),
            whitespace: whitespace(),
            banned: Vec::new(),
            config: one_per_step(),
            stop: None,
        }
    }

    fn run(&self, model: &ScriptedModel, canvases: &[Canvas]) -> Outcome {
        self.run_in(model, &mut FakeCache::default(), canvases, None)
    }

    fn run_in(
        &self,
        model: &ScriptedModel,
        cache: &mut FakeCache,
        canvases: &[Canvas],
        deadline: Option<Instant>,
    ) -> Outcome {
        let mut stream = Vec::new();
        let mut on_step = |step: &DenoiseStep| stream.push(step.clone());
        let stop = self.stop.map(|rule| move |lead: &[u32]| rule(lead));
        let controls = Controls {
            cancel: None,
            interrupt: None,
            deadline,
            on_step: Some(&mut on_step),
            stop: stop.as_ref().map(|rule| rule as &StopFn<'_>),
        };
        let result = Sampler::new(self.settings, &self.whitespace)
            .banning(&self.banned)
            .run(model, cache, canvases, &self.config, controls);
        Outcome {
            result,
            stream,
            calls: model.take_calls(),
        }
    }
}

impl Outcome {
    fn sampled(&self) -> &Sampled {
        self.result.as_ref().expect("run succeeds")
    }

    /// Filled middles of the batch, one per canvas.
    fn tokens(&self) -> Vec<Vec<u32>> {
        self.sampled()
            .infills
            .iter()
            .map(|i| i.tokens.clone())
            .collect()
    }

    /// Slots committed per step, for canvas 0.
    fn committed(&self) -> Vec<Vec<usize>> {
        self.stream
            .iter()
            .map(|s| s.canvases[0].committed.clone())
            .collect()
    }

    /// The stream, one line per step; canvases of a batch separated by ` ; `.
    fn lines(&self) -> Vec<String> {
        self.stream
            .iter()
            .enumerate()
            .map(|(i, s)| {
                assert_eq!(s.step, i, "steps are numbered from 0");
                s.canvases
                    .iter()
                    .map(render)
                    .collect::<Vec<_>>()
                    .join(" ; ")
            })
            .collect()
    }
}

fn render(view: &CanvasView) -> String {
    let slots: Vec<&str> = view
        .slots
        .iter()
        .map(|s| s.map_or("_", |t| NAMES[t as usize]))
        .collect();
    format!("{} | {:?}", slots.join(" "), view.committed)
}

// ---------------------------------------------------------------------------------------------
// Commit order under one token per step.

/// `confidences[i]` is slot i's probability of `a`; `expect` lists the slots in commit order.
fn check_commit_order(confidences: &[f32], expect: &[usize]) {
    let model = ScriptedModel::rows(0, confidences.iter().map(|&p| peaked(A, p)).collect());
    let out = Setup::new().run(&model, &[canvas(&[], confidences.len(), &[])]);
    let committed = out.committed();
    assert!(
        committed.iter().all(|c| c.len() == 1),
        "one slot per step: {committed:?}"
    );
    assert_eq!(committed.concat(), expect);
    assert_eq!(out.sampled().stats.forwards, confidences.len());
    assert_eq!(out.tokens(), [vec![A; confidences.len()]]);
}

/// A banned token (a marker the prompt holds) is never committed, however sure the model is: the
/// slot takes its best other token, and a forced step does the same.
#[test]
fn banned_tokens_are_never_committed() {
    let rows = vec![
        peaked(BOS, 0.9),
        dist(&[(PAD, 0.5), (B, 0.3)]),
        peaked(C, 0.95),
    ];
    let model = ScriptedModel::rows(0, rows.clone());
    let mut setup = Setup::new();
    let plain = setup.run(&model, &[canvas(&[], 3, &[])]);
    assert_eq!(
        plain.tokens()[0][0],
        BOS,
        "sanity: the model prefers BOS at slot 0"
    );
    setup.banned = (0..VOCAB as u32).map(|t| t == BOS || t == PAD).collect();
    let out = setup.run(
        &ScriptedModel::rows(0, rows.clone()),
        &[canvas(&[], 3, &[])],
    );
    assert_eq!(out.tokens(), [vec![A, B, C]], "{:?}", out.committed());
    setup.config.max_steps = Some(1);
    let forced = setup.run(&ScriptedModel::rows(0, rows), &[canvas(&[], 3, &[])]);
    assert_eq!(forced.tokens(), [vec![A, B, C]]);
}

#[test]
fn one_per_step_commits_in_decreasing_confidence() {
    check_commit_order(&[0.3, 0.9, 0.5, 0.7], &[1, 3, 2, 0]);
    check_commit_order(&[0.9, 0.8, 0.7, 0.6], &[0, 1, 2, 3]);
    check_commit_order(&[0.6, 0.7, 0.8, 0.9], &[3, 2, 1, 0]);
}

#[test]
fn one_per_step_breaks_ties_by_the_leftmost_slot() {
    check_commit_order(&[0.6, 0.8, 0.6, 0.8], &[1, 3, 0, 2]);
    check_commit_order(&[0.5; 4], &[0, 1, 2, 3]);
}

// ---------------------------------------------------------------------------------------------
// Threshold schedule.

/// Slots committed per step under `Threshold { tau }`, slot i's row being `rows[i]`.
fn check_threshold(tau: f32, rows: Vec<Vec<f32>>, expect: &[&[usize]]) {
    let length = rows.len();
    let setup = Setup {
        config: SamplerConfig {
            schedule: Schedule::Threshold { tau },
            ..one_per_step()
        },
        ..Setup::new()
    };
    let out = setup.run(&ScriptedModel::rows(0, rows), &[canvas(&[], length, &[])]);
    assert_eq!(out.committed(), expect);
    assert_eq!(out.sampled().stats.forwards, expect.len());
}

#[test]
fn threshold_commits_every_slot_at_or_above_tau_in_one_step() {
    // Slot 1 splits evenly between two tokens: its confidence is exactly 0.5, i.e. at tau.
    let rows = vec![
        peaked(A, 0.9),
        dist(&[(A, 0.5), (B, 0.5)]),
        peaked(A, 0.3),
        peaked(A, 0.6),
        peaked(A, 0.45),
    ];
    check_threshold(0.5, rows, &[&[0, 1, 3], &[4], &[2]]);
}

#[test]
fn threshold_commits_the_most_confident_slot_when_none_reaches_tau() {
    let rows = vec![peaked(A, 0.3), peaked(A, 0.6), peaked(A, 0.5)];
    check_threshold(0.95, rows, &[&[1], &[2], &[0]]);
}

#[test]
fn threshold_commits_everything_at_once_when_all_are_confident() {
    check_threshold(0.8, vec![peaked(A, 0.9); 4], &[&[0, 1, 2, 3]]);
}

// ---------------------------------------------------------------------------------------------
// Confidence kinds.

/// Three slots on which the kinds disagree about who is most confident:
/// - slot 0: `a` 0.52, `b` 0.46 (highest probability, small margin);
/// - slot 1: `c` 0.45, the rest flat (lowest probability, largest margin, highest entropy);
/// - slot 2: `d` 0.5, `e` 0.49 (tiniest margin, but nearly all mass on two tokens: lowest entropy).
fn disagreeing_rows() -> Vec<Vec<f32>> {
    vec![
        dist(&[(A, 0.52), (B, 0.46)]),
        peaked(C, 0.45),
        dist(&[(D, 0.5), (E, 0.49)]),
    ]
}

fn check_confidence(confidence: Confidence, expect: &[usize]) {
    let setup = Setup {
        config: SamplerConfig {
            confidence,
            ..one_per_step()
        },
        ..Setup::new()
    };
    let out = setup.run(
        &ScriptedModel::rows(0, disagreeing_rows()),
        &[canvas(&[], 3, &[])],
    );
    assert_eq!(out.committed().concat(), expect, "{confidence:?}");
    // The kind decides the order, never the token.
    assert_eq!(out.tokens(), [vec![A, C, D]]);
}

#[test]
fn probability_ranks_by_the_chosen_token() {
    // 0.52 > 0.5 > 0.45
    check_confidence(Confidence::Probability, &[0, 2, 1]);
}

#[test]
fn margin_ranks_by_top1_minus_top2() {
    // 0.45 - 0.05 = 0.40 > 0.52 - 0.46 = 0.06 > 0.5 - 0.49 = 0.01
    check_confidence(Confidence::Margin, &[1, 0, 2]);
}

#[test]
fn neg_entropy_ranks_by_how_concentrated_the_distribution_is() {
    // entropies: slot 2 ~0.77 < slot 0 ~0.82 < slot 1 ~2.0 nats
    check_confidence(Confidence::NegEntropy, &[2, 0, 1]);
}

/// Each token of the middle carries the model's probability of it in the step that committed
/// it, whatever measure ranked the commits: slot 1 is committed after slot 0, when its row is
/// surer than it was at first; the end is not a token of the middle.
#[test]
fn the_middle_reports_each_tokens_probability_when_it_was_committed() {
    for confidence in [
        Confidence::Probability,
        Confidence::Margin,
        Confidence::NegEntropy,
    ] {
        let model = ScriptedModel::new(|seq, pos| match pos {
            0 => peaked(A, 0.9),
            // Surer of `b` once slot 0 holds `a`.
            1 if seq[0] == A => peaked(B, 0.7),
            1 => peaked(B, 0.3),
            _ => peaked(EOS, 0.95),
        });
        let setup = Setup {
            config: SamplerConfig {
                confidence,
                ..one_per_step()
            },
            ..Setup::new()
        };
        let out = setup.run(&model, &[canvas(&[], 3, &[])]);
        assert_eq!(out.committed()[0], [0], "{confidence:?}");
        let infill = &out.sampled().infills[0];
        assert_eq!(infill.tokens, [A, B], "{confidence:?}");
        let expected = [0.9, 0.7];
        assert_eq!(infill.probabilities.len(), 2);
        for (got, want) in infill.probabilities.iter().zip(expected) {
            assert!((got - want).abs() < 1e-4, "{confidence:?}: {infill:?}");
        }
    }
}

/// A token sampled at a temperature carries the model's own probability of it (temperature 1),
/// not the tempered one it was drawn from: a confidence bar means the same at any temperature.
#[test]
fn a_sampled_tokens_probability_is_the_models_own() {
    let rest = 0.7 / (BOS as f32 - 1.0);
    for temperature in [0.5, 2.0] {
        for seed in 0..4 {
            let setup = sampling(temperature, seed);
            let out = setup.run(&unsure_rows(6), &[canvas(&[], 6, &[])]);
            let infill = &out.sampled().infills[0];
            assert_eq!(infill.probabilities.len(), infill.tokens.len());
            for (slot, (&token, &p)) in infill.tokens.iter().zip(&infill.probabilities).enumerate()
            {
                let want = if token == slot as u32 { 0.3 } else { rest };
                assert!(
                    (p - want).abs() < 1e-4,
                    "temperature {temperature}, seed {seed}, slot {slot}: {p} for {want}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Step budget.

/// `length` slots, none confident (0.5), under `schedule` with `max_steps`: `expect` is how many
/// slots each step commits; the last step must leave nothing masked.
fn check_budget(schedule: Schedule, length: usize, max_steps: usize, expect: &[usize]) {
    let setup = Setup {
        config: SamplerConfig {
            schedule,
            max_steps: Some(max_steps),
            ..one_per_step()
        },
        ..Setup::new()
    };
    let out = setup.run(
        &ScriptedModel::rows(0, vec![peaked(A, 0.5); length]),
        &[canvas(&[], length, &[])],
    );
    let per_step: Vec<usize> = out.committed().iter().map(Vec::len).collect();
    assert_eq!(per_step, expect);
    let sampled = out.sampled();
    assert!(
        sampled.stats.forwards <= max_steps,
        "{} calls for a budget of {max_steps}",
        sampled.stats.forwards
    );
    assert_eq!(sampled.stats.forwards, expect.len());
    assert_eq!(out.calls.len(), expect.len());
    let last = &out.stream.last().unwrap().canvases[0];
    assert!(
        last.slots.iter().all(Option::is_some),
        "canvas full after the last step: {}",
        render(last)
    );
    assert_eq!(out.tokens(), [vec![A; length]]);
}

#[test]
fn step_budget_spreads_the_slots_and_the_last_step_commits_the_rest() {
    // ceil(7/3) = 3, ceil(4/2) = 2, then everything left.
    check_budget(Schedule::TopK { k: 1 }, 7, 3, &[3, 2, 2]);
    check_budget(Schedule::Threshold { tau: 0.9 }, 5, 2, &[3, 2]);
    check_budget(Schedule::Threshold { tau: 0.9 }, 5, 1, &[5]);
}

#[test]
fn step_budget_larger_than_needed_changes_nothing() {
    check_budget(Schedule::TopK { k: 1 }, 3, 10, &[1, 1, 1]);
    check_budget(Schedule::TopK { k: 2 }, 5, 3, &[2, 2, 1]);
}

// ---------------------------------------------------------------------------------------------
// Variable length: the middle ends where a run of EOS (or pad) starts, decided in one step; EOS
// is suppressed until there is content, and never overwrites a committed token.

/// Runs one canvas of `rows.len()` slots (slot i scored by `rows[i]`) under `config`, with
/// `whitespace` as the whitespace table; checks the stream and the infill.
fn check_variable_length_with(
    config: SamplerConfig,
    whitespace: &[bool],
    rows: Vec<Vec<f32>>,
    stream: &[&str],
    tokens: &[u32],
    ended_by_eos: bool,
) {
    let length = rows.len();
    let setup = Setup {
        whitespace: whitespace.to_vec(),
        config,
        ..Setup::new()
    };
    let out = setup.run(&ScriptedModel::rows(0, rows), &[canvas(&[], length, &[])]);
    assert_eq!(out.lines(), stream);
    let infill = &out.sampled().infills[0];
    assert_eq!(infill.tokens, tokens);
    assert_eq!(infill.ended_by_eos, ended_by_eos);
    assert_eq!(infill.steps, stream.len());
    assert_eq!(out.sampled().stats.forwards, stream.len());
    assert_eq!(infill.slots, length, "no growth without room");
    // Whatever came after the end's step: the stream shows which step committed it.
    let end_step = out.stream.iter().position(|s| {
        s.canvases[0]
            .slots
            .iter()
            .any(|t| t.is_some_and(|t| t == EOS || t == PAD))
    });
    assert_eq!(
        infill.steps_after_end,
        end_step.map(|at| stream.len() - at - 1)
    );
}

/// [`check_variable_length_with`] one token (or one end) per step.
fn check_variable_length(
    whitespace: &[bool],
    rows: Vec<Vec<f32>>,
    stream: &[&str],
    tokens: &[u32],
    ended_by_eos: bool,
) {
    check_variable_length_with(
        one_per_step(),
        whitespace,
        rows,
        stream,
        tokens,
        ended_by_eos,
    );
}

fn threshold(tau: f32) -> SamplerConfig {
    SamplerConfig {
        schedule: Schedule::Threshold { tau },
        ..one_per_step()
    }
}

#[test]
fn an_eos_run_ends_the_middle_in_one_step() {
    // Step 0: EOS is still suppressed (no content yet), so `a` goes first; then the three slots
    // voting EOS are one decision, committed together even at one token per step.
    let rows = vec![
        peaked(A, 0.9),
        peaked(EOS, 0.95),
        peaked(EOS, 0.9),
        peaked(EOS, 0.99),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ _ _ | [0]", "a EOS EOS EOS | [1, 2, 3]"],
        &[A],
        true,
    );
}

#[test]
fn pad_ends_the_middle_too() {
    let rows = vec![
        peaked(A, 0.9),
        peaked(PAD, 0.95),
        peaked(PAD, 0.95),
        peaked(EOS, 0.95),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ _ _ | [0]", "a PAD EOS EOS | [1, 2, 3]"],
        &[A],
        true,
    );
}

#[test]
fn one_per_step_commits_an_eos_run_as_one_decision() {
    // Step 1: the end at slot 2 (0.95) is surer than `b` (0.6): slots 2-4 are decided in one
    // step, even at one token per step; `b` follows. Three model calls for five slots.
    let rows = vec![
        peaked(A, 0.99),
        peaked(B, 0.6),
        peaked(EOS, 0.95),
        peaked(EOS, 0.7),
        peaked(EOS, 0.99),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &[
            "a _ _ _ _ | [0]",
            "a _ EOS EOS EOS | [2, 3, 4]",
            "a b EOS EOS EOS | [1]",
        ],
        &[A, B],
        true,
    );
    // `b` surer than any end vote goes first; then the whole run, not a slot per step.
    let rows = vec![
        peaked(A, 0.99),
        peaked(B, 0.98),
        peaked(EOS, 0.6),
        peaked(EOS, 0.7),
        peaked(EOS, 0.8),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &[
            "a _ _ _ _ | [0]",
            "a b _ _ _ | [1]",
            "a b EOS EOS EOS | [2, 3, 4]",
        ],
        &[A, B],
        true,
    );
}

#[test]
fn a_run_of_end_votes_below_tau_is_one_decision_when_nothing_clears_tau() {
    // Nothing reaches 0.9. The surest decision is the end (0.8 at slot 4, above `b`'s 0.5): it
    // takes the unbroken run of end votes to its left with it (slots 2-3, less sure), so the
    // middle does not shrink by one slot per step.
    let rows = vec![
        peaked(A, 0.95),
        peaked(B, 0.5),
        peaked(EOS, 0.3),
        peaked(EOS, 0.6),
        peaked(EOS, 0.8),
    ];
    check_variable_length_with(
        threshold(0.9),
        &whitespace(),
        rows,
        &[
            "a _ _ _ _ | [0]",
            "a _ EOS EOS EOS | [2, 3, 4]",
            "a b EOS EOS EOS | [1]",
        ],
        &[A, B],
        true,
    );
}

#[test]
fn threshold_commits_the_confident_part_of_an_eos_run() {
    // Slot 2's EOS (0.5) is below tau; slots 3-4 clear it, so they end the middle at once.
    // Next step slot 2's EOS (0.5) is the most confident action left, above `b` (0.3).
    let rows = vec![
        peaked(A, 0.99),
        peaked(B, 0.3),
        peaked(EOS, 0.5),
        peaked(EOS, 0.95),
        peaked(EOS, 0.9),
    ];
    check_variable_length_with(
        threshold(0.8),
        &whitespace(),
        rows,
        &[
            "a _ _ _ _ | [0]",
            "a _ _ EOS EOS | [3, 4]",
            "a _ EOS EOS EOS | [2]",
            "a b EOS EOS EOS | [1]",
        ],
        &[A, B],
        true,
    );
}

#[test]
fn an_end_decides_the_masked_slots_after_it() {
    // Slot 1's EOS (0.95) means the middle ends at or before slot 1: the masked slots after it
    // become EOS whatever they voted (nothing committed is overwritten).
    let rows = vec![
        peaked(A, 0.9),
        peaked(EOS, 0.95),
        peaked(B, 0.5),
        peaked(C, 0.5),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ _ _ | [0]", "a EOS EOS EOS | [1, 2, 3]"],
        &[A],
        true,
    );
}

/// Stops once the committed lead holds a line break (a line completion's rule, in tokens).
fn at_a_line_break(lead: &[u32]) -> bool {
    lead.contains(&NEWLINE)
}

/// One canvas with a slot per row, decoded under [`at_a_line_break`].
fn stopping_at_line_breaks(rows: Vec<Vec<f32>>) -> Outcome {
    let setup = Setup {
        stop: Some(at_a_line_break),
        ..Setup::new()
    };
    let length = rows.len();
    setup.run(&ScriptedModel::rows(0, rows), &[canvas(&[], length, &[])])
}

#[test]
fn a_stop_rule_ends_the_middle_at_the_step_its_lead_decides_it() {
    // Left to right, one token a step: the lead `a nl` decides the middle at step 1; the two
    // masked slots become the end without a pass of their own.
    let rows = vec![
        peaked(A, 0.99),
        peaked(NEWLINE, 0.98),
        peaked(B, 0.97),
        peaked(C, 0.96),
    ];
    let out = stopping_at_line_breaks(rows.clone());
    assert_eq!(out.lines(), ["a _ _ _ | [0]", "a nl EOS EOS | [1, 2, 3]"]);
    let infill = &out.sampled().infills[0];
    assert_eq!(infill.tokens, [A, NEWLINE]);
    assert!(infill.stopped && !infill.ended_by_eos, "{infill:?}");
    assert_eq!(out.sampled().stats.forwards, 2);
    // Without the rule the same model spends two more passes on slots the rule throws away.
    let full = Setup::new().run(&ScriptedModel::rows(0, rows), &[canvas(&[], 4, &[])]);
    assert_eq!(full.tokens(), [vec![A, NEWLINE, B, C]]);
    assert!(!full.sampled().infills[0].stopped);
    assert_eq!(full.sampled().stats.forwards, 4);
}

#[test]
fn a_stop_rule_reads_only_the_lead_before_the_first_masked_slot() {
    // The line break at slot 2 is committed first, but slot 1 is still masked: the lead is `a`
    // until slot 1 is committed, and only then does the rule end the middle, after slot 2.
    let rows = vec![
        peaked(A, 0.98),
        peaked(B, 0.90),
        peaked(NEWLINE, 0.99),
        peaked(C, 0.5),
    ];
    let out = stopping_at_line_breaks(rows);
    assert_eq!(
        out.lines(),
        ["_ _ nl _ | [2]", "a _ nl _ | [0]", "a b nl EOS | [1, 3]"]
    );
    assert_eq!(out.tokens(), [vec![A, B, NEWLINE]]);
}

#[test]
fn a_stop_rule_that_never_fires_changes_nothing() {
    let rows = vec![
        peaked(A, 0.9),
        peaked(NEWLINE, 0.8),
        peaked(EOS, 0.95),
        peaked(EOS, 0.9),
    ];
    let never = Setup {
        stop: Some(|_| false),
        ..Setup::new()
    };
    let with = never.run(
        &ScriptedModel::rows(0, rows.clone()),
        &[canvas(&[], 4, &[])],
    );
    let without = Setup::new().run(&ScriptedModel::rows(0, rows), &[canvas(&[], 4, &[])]);
    assert_eq!(with.lines(), without.lines());
    assert_eq!(with.tokens(), without.tokens());
    assert!(with.sampled().infills[0].ended_by_eos && !with.sampled().infills[0].stopped);
}

#[test]
fn middle_without_eos_fills_the_canvas() {
    let rows = vec![peaked(A, 0.9), peaked(B, 0.8)];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ | [0]", "a b | [1]"],
        &[A, B],
        false,
    );
}

#[test]
fn eos_is_suppressed_until_content_is_committed() {
    // The model wants EOS everywhere (0.9); the first commit is still content.
    let rows = vec![
        dist(&[(EOS, 0.9), (A, 0.06)]),
        dist(&[(EOS, 0.9), (B, 0.05)]),
        dist(&[(EOS, 0.9), (C, 0.04)]),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ _ | [0]", "a EOS EOS | [1, 2]"],
        &[A],
        true,
    );
}

#[test]
fn pad_is_suppressed_until_content_is_committed() {
    let rows = vec![
        dist(&[(PAD, 0.9), (A, 0.06)]),
        dist(&[(PAD, 0.9), (B, 0.05)]),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ | [0]", "a PAD | [1]"],
        &[A],
        true,
    );
}

#[test]
fn whitespace_only_commit_does_not_lift_eos_suppression() {
    // After `sp` (whitespace) EOS stays suppressed, so slot 1 gets `a`, not EOS.
    let rows = vec![
        dist(&[(EOS, 0.9), (SPACE, 0.08)]),
        dist(&[(EOS, 0.9), (A, 0.05)]),
        dist(&[(EOS, 0.9), (NEWLINE, 0.03)]),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["sp _ _ | [0]", "sp a _ | [1]", "sp a EOS | [2]"],
        &[SPACE, A],
        true,
    );
}

#[test]
fn empty_whitespace_table_counts_every_token_as_content() {
    // Same model as above; without a whitespace table `sp` is content and EOS may follow it.
    let rows = vec![
        dist(&[(EOS, 0.9), (SPACE, 0.08)]),
        dist(&[(EOS, 0.9), (A, 0.05)]),
        dist(&[(EOS, 0.9), (NEWLINE, 0.03)]),
    ];
    check_variable_length(
        &[],
        rows,
        &["sp _ _ | [0]", "sp EOS EOS | [1, 2]"],
        &[SPACE],
        true,
    );
}

#[test]
fn an_end_never_overwrites_a_committed_token() {
    // `b` at slot 2 goes first. The model then wants EOS at slot 1 (0.9), but that would erase
    // `b`: EOS is suppressed left of a committed token, so slot 1 gets content and the end can
    // only come after `b`.
    let model = ScriptedModel::new(|seq, pos| match pos {
        0 => peaked(A, 0.8),
        1 if seq[2] == B => dist(&[(EOS, 0.9), (C, 0.05)]),
        1 => peaked(C, 0.6),
        2 => peaked(B, 0.95),
        _ => peaked(EOS, 0.6),
    });
    let out = Setup::new().run(&model, &[canvas(&[], 4, &[])]);
    assert_eq!(
        out.lines(),
        [
            "_ _ b _ | [2]",
            "a _ b _ | [0]",
            "a _ b EOS | [3]",
            "a c b EOS | [1]",
        ]
    );
    assert_eq!(out.tokens(), [vec![A, C, B]]);
}

#[test]
fn an_end_wanted_before_any_content_takes_a_token_and_later_slots_wait() {
    // The model would end the middle at slot 0 (0.99): the middle would be empty, so slot 0
    // takes its best token, and `b` (0.95, past that end) waits for the next step.
    let rows = vec![
        dist(&[(EOS, 0.99), (A, 0.005)]),
        peaked(C, 0.1),
        peaked(B, 0.95),
    ];
    check_variable_length(
        &whitespace(),
        rows,
        &["a _ _ | [0]", "a _ b | [2]", "a c b | [1]"],
        &[A, C, B],
        false,
    );
}

#[test]
fn an_end_and_tokens_before_it_commit_in_the_same_step() {
    // Slot 1 becomes confident only once slot 0 holds content, in the same step as the run.
    let model = ScriptedModel::new(|seq, pos| {
        let content = seq[0] != MASK;
        match pos {
            0 => peaked(A, 0.99),
            1 => peaked(B, if content { 0.9 } else { 0.5 }),
            2 => peaked(C, 0.3),
            _ => peaked(EOS, 0.95),
        }
    });
    let out = Setup {
        config: threshold(0.8),
        ..Setup::new()
    }
    .run(&model, &[canvas(&[], 6, &[])]);
    assert_eq!(
        out.lines(),
        [
            "a _ _ _ _ _ | [0]",
            "a b _ EOS EOS EOS | [1, 3, 4, 5]",
            "a b c EOS EOS EOS | [2]",
        ]
    );
    // The model sees the end as EOS tokens from the next call on.
    assert_eq!(out.calls[2].tokens, [vec![A, B, MASK, EOS, EOS, EOS]]);
}

#[test]
fn tokens_voted_past_the_first_end_vote_wait() {
    // Once slot 0 holds content, `b` and `c` clear tau, but slot 1 votes for the end (0.6):
    // they lie outside the middle the model now sees and are not committed (committed, they
    // would pin the end after them). The end is then the only action, and the step's one commit.
    let model = ScriptedModel::new(|seq, pos| {
        let content = seq[0] != MASK;
        let sure = |p| if content { p } else { 0.5 };
        match pos {
            0 => peaked(A, 0.99),
            1 => peaked(EOS, 0.6),
            2 => peaked(B, sure(0.95)),
            _ => peaked(C, sure(0.9)),
        }
    });
    let out = Setup {
        config: threshold(0.8),
        ..Setup::new()
    }
    .run(&model, &[canvas(&[], 4, &[])]);
    assert_eq!(out.lines(), ["a _ _ _ | [0]", "a EOS EOS EOS | [1, 2, 3]"]);
    assert_eq!(out.tokens(), [vec![A]]);
}

/// What every run must keep, whatever the model says: a committed slot never changes, the
/// middle holds no end or mask token, an end follows content, slots after it are EOS, the step
/// budget and the growth limit hold.
#[test]
fn random_models_keep_the_sampler_invariants() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let tokens = [A, B, SPACE, NEWLINE, EOS, PAD];
    for seed in 0..300u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let length = rng.random_range(1..7);
        let max_length = length + rng.random_range(0..6);
        let schedule = if rng.random_bool(0.5) {
            Schedule::TopK {
                k: rng.random_range(1..3),
            }
        } else {
            Schedule::Threshold {
                tau: rng.random_range(0.2..0.95),
            }
        };
        let max_steps = rng.random_bool(0.5).then(|| rng.random_range(1..8));
        let script_seed = rng.random::<u64>();
        // The model's row depends on the whole sequence, so commits change what it says.
        let model = ScriptedModel::new(move |seq, pos| {
            let key = seq.iter().fold(script_seed ^ pos as u64, |h, &t| {
                h.wrapping_mul(31).wrapping_add(t as u64)
            });
            let mut rng = StdRng::seed_from_u64(key);
            let token = tokens[rng.random_range(0..tokens.len())];
            dist(&[(token, rng.random_range(0.3..0.99))])
        });
        let setup = Setup {
            config: SamplerConfig {
                schedule,
                max_steps,
                ..one_per_step()
            },
            ..Setup::new()
        };
        let out = setup.run(&model, &[canvas(&[J], length, &[J]).growing_to(max_length)]);
        let context = format!("seed {seed}: {:?}", out.lines());
        let sampled = out.sampled();
        if let Some(max) = max_steps {
            assert!(sampled.stats.forwards <= max, "{context}");
        }
        for pair in out.stream.windows(2) {
            let (before, after) = (&pair[0].canvases[0].slots, &pair[1].canvases[0].slots);
            for (slot, value) in before.iter().enumerate() {
                if value.is_some() {
                    assert_eq!(*value, after[slot], "slot {slot} changed; {context}");
                }
            }
        }
        let last = &out.stream.last().expect("at least one step").canvases[0];
        assert!(last.slots.iter().all(Option::is_some), "{context}");
        let infill = &sampled.infills[0];
        assert!(
            infill.slots <= max_length && infill.slots >= length,
            "{context}"
        );
        assert_eq!(infill.slots, last.slots.len(), "{context}");
        assert!(
            infill
                .tokens
                .iter()
                .all(|&t| ![EOS, PAD, MASK].contains(&t)),
            "{context}"
        );
        if infill.ended_by_eos {
            assert!(
                infill.tokens.iter().any(|&t| t != SPACE && t != NEWLINE),
                "an end before content; {context}"
            );
            let after = &last.slots[infill.tokens.len()..];
            assert!(
                after.iter().all(|&t| t == Some(EOS) || t == Some(PAD)),
                "{context}"
            );
        } else {
            assert_eq!(infill.tokens.len(), infill.slots, "{context}");
        }
    }
}

#[test]
fn passes_after_the_end_cover_only_the_slots_before_it() {
    // Prefix `j`, six slots, suffix `j`. The end (slots 3-5) is committed at step 1; step 2 still
    // recomputes it (the cache must hold the EOS tokens before the window leaves them); step 3's
    // window stops after slot 2. No full pass is needed for that.
    let model = ScriptedModel::new(|_, pos| match pos {
        1 => peaked(A, 0.99),
        2 => peaked(B, 0.6),
        3 => peaked(C, 0.5),
        _ => peaked(EOS, 0.95),
    });
    let out = Setup::new().run(&model, &[canvas(&[J], 6, &[J])]);
    assert_eq!(
        out.lines(),
        [
            "a _ _ _ _ _ | [0]",
            "a _ _ EOS EOS EOS | [3, 4, 5]",
            "a b _ EOS EOS EOS | [1]",
            "a b c EOS EOS EOS | [2]",
        ]
    );
    let passes: Vec<String> = out.calls.iter().map(Call::render).collect();
    assert_eq!(
        passes,
        [
            "full+store 1..7",
            "window 1..7",
            "window 1..7",
            "window 1..4"
        ]
    );
    assert_eq!(out.sampled().stats.window_positions, 6 + 6 + 6 + 3);
    // The end was decided in the second of four steps: two steps of work were left.
    assert_eq!(out.sampled().infills[0].steps_after_end, Some(2));
}

#[test]
fn eos_runs_end_each_canvas_of_a_batch_in_one_step() {
    // Each canvas: one letter, then EOS (canvas 1's end with pad first).
    let model = ScriptedModel::new(|seq, pos| match (seq[0], pos) {
        (A, 1) | (C, 1) => peaked(F, 0.99),
        (C, 2) => peaked(PAD, 0.9),
        _ => peaked(EOS, 0.95),
    });
    let out = Setup::new().run(&model, &[canvas(&[A], 4, &[]), canvas(&[C], 3, &[B])]);
    assert_eq!(
        out.lines(),
        [
            "f _ _ _ | [0] ; f _ _ | [0]",
            "f EOS EOS EOS | [1, 2, 3] ; f PAD EOS | [1, 2]",
        ]
    );
    assert_eq!(out.tokens(), [vec![F], vec![F]]);
    assert_eq!(out.sampled().stats.forwards, 2);
}

// ---------------------------------------------------------------------------------------------
// Length during decoding: a canvas whose last slot receives a token grows.

/// A canvas of `length` slots allowed to reach `max_length`, over a model that writes `a` at
/// every position before `end_at` and EOS from there; one token per step unless `max_steps`.
fn grow(length: usize, max_length: usize, end_at: usize, max_steps: Option<usize>) -> Outcome {
    let model = ScriptedModel::new(move |_, pos| {
        if pos < end_at {
            peaked(A, 0.9)
        } else {
            peaked(EOS, 0.95)
        }
    });
    let setup = Setup {
        config: SamplerConfig {
            max_steps,
            ..one_per_step()
        },
        ..Setup::new()
    };
    setup.run(&model, &[canvas(&[], length, &[]).growing_to(max_length)])
}

#[test]
fn a_canvas_whose_last_slot_holds_a_token_grows_by_a_block() {
    // Two slots filled with `a` (the second is the last slot: grow by one, half the canvas);
    // the third `a` again at the last slot (grow by one); then the model ends the middle.
    let out = grow(2, 8, 3, None);
    assert_eq!(
        out.lines(),
        [
            "a _ | [0]",
            "a a _ | [1]",
            "a a a _ | [2]",
            "a a a EOS | [3]"
        ]
    );
    let infill = &out.sampled().infills[0];
    assert_eq!(infill.tokens, [A, A, A]);
    assert!(infill.ended_by_eos);
    assert_eq!(infill.slots, 4);
    // A grown canvas shifts the suffix: the next pass is a full one.
    let passes: Vec<String> = out.calls.iter().map(Call::render).collect();
    assert_eq!(
        passes,
        [
            "full+store 0..2",
            "window 0..2",
            "full+store 0..3",
            "full+store 0..4"
        ]
    );
    assert_eq!(out.sampled().tokens_per_forward(0), 1.0);
}

#[test]
fn growth_stops_at_max_length() {
    let out = grow(4, 7, usize::MAX, None);
    let infill = &out.sampled().infills[0];
    assert_eq!(infill.tokens, [A; 7]);
    assert!(!infill.ended_by_eos);
    assert_eq!(infill.slots, 7);
    // 4 slots, then +2 (half of 4), then +1 (what is left).
    let lengths: Vec<usize> = out
        .stream
        .iter()
        .map(|s| s.canvases[0].slots.len())
        .collect();
    assert_eq!(lengths, [4, 4, 4, 6, 6, 7, 7]);
    // Without room it never grows.
    let fixed = grow(4, 4, usize::MAX, None);
    assert_eq!(fixed.sampled().infills[0].slots, 4);
}

#[test]
fn a_forced_step_never_grows_the_canvas() {
    // Two steps allowed: the second commits everything left and the run ends there.
    let out = grow(2, 8, usize::MAX, Some(2));
    assert_eq!(out.sampled().stats.forwards, 2);
    assert_eq!(out.tokens(), [vec![A, A]]);
    assert_eq!(out.sampled().infills[0].slots, 2);
}

// ---------------------------------------------------------------------------------------------
// The mask token.

#[test]
fn mask_token_is_never_emitted() {
    let rows = vec![
        dist(&[(MASK, 0.9), (B, 0.05)]),
        dist(&[(MASK, 0.99)]),
        peaked(MASK, 0.6),
    ];
    for temperature in [0.0, 1.0] {
        for seed in 0..4 {
            let setup = sampling(temperature, seed);
            let out = setup.run(
                &ScriptedModel::rows(0, rows.clone()),
                &[canvas(&[], 3, &[])],
            );
            let seen: Vec<u32> = out
                .stream
                .iter()
                .flat_map(|s| s.canvases[0].slots.iter().flatten().copied())
                .collect();
            assert!(
                !seen.contains(&MASK),
                "temperature {temperature}, seed {seed}: {:?}",
                out.lines()
            );
            if temperature == 0.0 {
                // Greedy takes the best of what is left: `b`, then `a` (lowest id of a flat rest).
                assert_eq!(out.tokens(), [vec![B, A, A]]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Logit shift and BOS.

/// Row j of the model says letter j; the middle shows which row scored each slot.
fn letter_per_row() -> ScriptedModel {
    ScriptedModel::new(|_, pos| {
        if pos <= J as usize {
            peaked(pos as u32, 0.9)
        } else {
            flat()
        }
    })
}

fn check_shift(logit_shift: bool, bos: Option<u32>, prefix: &[u32], length: usize, expect: &[u32]) {
    let setup = Setup {
        settings: settings(logit_shift, bos),
        ..Setup::new()
    };
    let out = setup.run(&letter_per_row(), &[canvas(prefix, length, &[J])]);
    assert_eq!(
        out.tokens(),
        [expect.to_vec()],
        "logit_shift {logit_shift}, bos {bos:?}, prefix {prefix:?}"
    );
}

#[test]
fn unshifted_model_scores_a_slot_from_its_own_row() {
    check_shift(false, None, &[A, B], 2, &[C, D]);
    check_shift(false, None, &[], 2, &[A, B]);
}

#[test]
fn shifted_model_scores_a_slot_from_the_row_to_its_left() {
    check_shift(true, None, &[A, B], 2, &[B, C]);
    // Position 0 has no row to its left: it keeps row 0.
    check_shift(true, None, &[], 2, &[A, A]);
}

#[test]
fn bos_moves_every_slot_one_position_right() {
    check_shift(false, Some(BOS), &[A], 2, &[C, D]);
    check_shift(true, Some(BOS), &[A], 2, &[B, C]);
    check_shift(true, Some(BOS), &[], 1, &[A]);
}

#[test]
fn score_row_reads_one_to_the_left_when_shifted() {
    assert_eq!([0, 1, 5].map(|p| logit_row(true, p)), [0, 0, 4]);
    assert_eq!([0, 1, 5].map(|p| logit_row(false, p)), [0, 1, 5]);
}

#[test]
fn bos_is_prepended_to_what_the_model_sees() {
    let request = canvas(&[A, B], 2, &[C]);
    let with_bos = Sampler::new(settings(true, Some(BOS)), &[]);
    assert_eq!(with_bos.sequence(&request), [BOS, A, B, MASK, MASK, C]);
    let without = Sampler::new(settings(true, None), &[]);
    assert_eq!(without.sequence(&request), [A, B, MASK, MASK, C]);

    let setup = Setup {
        settings: settings(true, Some(BOS)),
        ..Setup::new()
    };
    let out = setup.run(&letter_per_row(), std::slice::from_ref(&request));
    assert_eq!(out.calls[0].tokens, [with_bos.sequence(&request)]);
    // Later calls see the committed slots in place of masks, BOS still first.
    assert_eq!(out.calls[1].tokens, [vec![BOS, A, B, C, MASK, C]]);
}

// ---------------------------------------------------------------------------------------------
// The context cache.

/// Prefix `a b`, four or five slots, suffix `c`, one token per step: the passes the model was
/// asked for, as `kind window`.
fn check_passes(cache: CachePolicy, logit_shift: bool, length: usize, expect: &[&str]) {
    let setup = Setup {
        settings: settings(logit_shift, None),
        config: SamplerConfig {
            cache,
            ..one_per_step()
        },
        ..Setup::new()
    };
    let model = ScriptedModel::new(|_, pos| peaked(D, 0.9 - 0.01 * pos as f32));
    let mut fake_cache = FakeCache::default();
    let out = setup.run_in(
        &model,
        &mut fake_cache,
        &[canvas(&[A, B], length, &[C])],
        None,
    );
    let passes: Vec<String> = out.calls.iter().map(Call::render).collect();
    assert_eq!(passes, expect);
    let sampled = out.sampled();
    let full = expect.iter().filter(|p| p.starts_with("full")).count();
    assert_eq!(
        (sampled.stats.full_passes, sampled.stats.window_passes),
        (full, expect.len() - full)
    );
    assert_eq!(sampled.stats.forwards, expect.len());
    // The cache holds what the last pass saw (window passes update their window), and nothing
    // when nothing was stored.
    let stored_any = out
        .calls
        .iter()
        .any(|c| c.pass == Pass::Full { store: true });
    let last_seen = out.calls.last().map(|c| c.tokens.clone());
    assert_eq!(fake_cache.stored, last_seen.filter(|_| stored_any));
}

fn cache_on(refresh_every: Option<usize>) -> CachePolicy {
    CachePolicy {
        enabled: true,
        refresh_every,
        realign: None,
        prompt_chunk: None,
    }
}

#[test]
fn cache_stores_one_full_pass_then_runs_windows_over_the_canvas() {
    check_passes(
        cache_on(None),
        false,
        4,
        &[
            "full+store 2..6",
            "window 2..6",
            "window 2..6",
            "window 2..6",
        ],
    );
}

#[test]
fn shifted_window_includes_the_row_before_the_canvas() {
    check_passes(
        cache_on(None),
        true,
        4,
        &[
            "full+store 1..6",
            "window 1..6",
            "window 1..6",
            "window 1..6",
        ],
    );
}

#[test]
fn disabled_cache_recomputes_everything_and_stores_nothing() {
    let disabled = CachePolicy {
        enabled: false,
        refresh_every: None,
        realign: None,
        prompt_chunk: None,
    };
    check_passes(
        disabled,
        false,
        4,
        &["full 2..6", "full 2..6", "full 2..6", "full 2..6"],
    );
}

#[test]
fn cache_refresh_runs_a_stored_full_pass_every_n_steps() {
    check_passes(
        cache_on(Some(2)),
        false,
        5,
        &[
            "full+store 2..7",
            "window 2..7",
            "full+store 2..7",
            "window 2..7",
            "full+store 2..7",
        ],
    );
    check_passes(
        cache_on(Some(3)),
        false,
        5,
        &[
            "full+store 2..7",
            "window 2..7",
            "window 2..7",
            "full+store 2..7",
            "window 2..7",
        ],
    );
}

#[test]
fn cache_is_reused_across_requests_over_the_same_context() {
    let setup = Setup::new();
    let model = ScriptedModel::new(|_, pos| peaked(D, 0.9 - 0.01 * pos as f32));
    let mut cache = FakeCache::default();
    let request = canvas(&[A, B], 2, &[C]);

    let first = setup.run_in(&model, &mut cache, std::slice::from_ref(&request), None);
    let passes: Vec<String> = first.calls.iter().map(Call::render).collect();
    assert_eq!(passes, ["full+store 2..4", "window 2..4"]);

    // Same context: the stored pass covers it, so no full pass at all.
    let again = setup.run_in(&model, &mut cache, std::slice::from_ref(&request), None);
    let passes: Vec<String> = again.calls.iter().map(Call::render).collect();
    assert_eq!(passes, ["window 2..4", "window 2..4"]);
    assert_eq!(again.tokens(), first.tokens());

    // A different suffix: the cache no longer covers the context.
    let edited = setup.run_in(&model, &mut cache, &[canvas(&[A, B], 2, &[E])], None);
    let passes: Vec<String> = edited.calls.iter().map(Call::render).collect();
    assert_eq!(passes, ["full+store 2..4", "window 2..4"]);
}

/// With edit reuse on, a request's first pass over a cache the model can realign is an edit
/// pass, and the rest of the request runs windows over it; off, or where the model says no, it
/// is a stored full pass.
#[test]
fn an_edited_context_is_an_edit_pass_when_the_model_realigns_the_cache() {
    let reuse = Realign {
        radius: 2,
        refresh_after: 4,
    };
    for (edit, realigns, first) in [
        (Some(reuse), true, "edit 2..4"),
        (None, true, "full+store 2..4"),
        (Some(reuse), false, "full+store 2..4"),
    ] {
        let mut setup = Setup::new();
        setup.config.cache.realign = edit;
        let mut model = ScriptedModel::new(|_, pos| peaked(D, 0.9 - 0.01 * pos as f32));
        model.realigns = realigns;
        let mut cache = FakeCache::default();
        // A fresh cache holds nothing to realign.
        let cold = setup.run_in(&model, &mut cache, &[canvas(&[A, B], 2, &[C])], None);
        assert_eq!(cold.calls[0].render(), "full+store 2..4");
        let edited = setup.run_in(&model, &mut cache, &[canvas(&[A, B], 2, &[E])], None);
        let passes: Vec<String> = edited.calls.iter().map(Call::render).collect();
        assert_eq!(passes, [first, "window 2..4"]);
        let stats = edited.sampled().stats;
        assert_eq!(
            (stats.realign_passes, stats.full_passes, stats.window_passes),
            (
                usize::from(first == "edit 2..4"),
                usize::from(first != "edit 2..4"),
                1
            )
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Cancellation.

/// Five slots, one per step; the cancel flag is set before the run (`None`) or from the stream
/// callback after step `after_step`. `expect_calls` model calls happen before `run` gives up.
fn check_cancel(after_step: Option<usize>, expect_calls: usize) {
    let model = ScriptedModel::rows(0, vec![peaked(A, 0.9); 5]);
    let cancel = AtomicBool::new(after_step.is_none());
    let mut seen_steps = Vec::new();
    let mut on_step = |step: &DenoiseStep| {
        seen_steps.push(step.step);
        if Some(step.step) == after_step {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let controls = Controls {
        cancel: Some(&cancel),
        interrupt: None,
        deadline: None,
        on_step: Some(&mut on_step),
        stop: None,
    };
    let config = one_per_step();
    let sampler = Sampler::new(settings(false, None), &[]);
    let result = sampler.run(
        &model,
        &mut FakeCache::default(),
        &[canvas(&[], 5, &[])],
        &config,
        controls,
    );
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(model.take_calls().len(), expect_calls);
    assert_eq!(seen_steps, (0..expect_calls).collect::<Vec<_>>());
}

#[test]
fn cancel_from_the_stream_stops_before_the_next_model_call() {
    check_cancel(Some(1), 2);
    check_cancel(Some(0), 1);
}

#[test]
fn cancel_before_the_run_makes_no_model_call() {
    check_cancel(None, 0);
}

// ---------------------------------------------------------------------------------------------
// Deadline.

/// Every slot's best token (`a`, `b`, ...) has only 0.3, so temperature sampling strays from it.
fn unsure_rows(length: usize) -> ScriptedModel {
    ScriptedModel::rows(0, (0..length as u32).map(|t| peaked(t, 0.3)).collect())
}

fn warm(seed: u64) -> Setup {
    sampling(1.0, seed)
}

/// One commit per step, sampled at `temperature` from `seed`.
fn sampling(temperature: f32, seed: u64) -> Setup {
    Setup {
        config: SamplerConfig {
            temperature,
            seed,
            ..one_per_step()
        },
        ..Setup::new()
    }
}

#[test]
fn past_deadline_commits_the_argmax_of_everything_after_one_call() {
    let argmax = vec![A, B, C, D, E, F];
    let past = Instant::now();
    std::thread::sleep(Duration::from_millis(1));
    let out = warm(3).run_in(
        &unsure_rows(6),
        &mut FakeCache::default(),
        &[canvas(&[], 6, &[])],
        Some(past),
    );
    let sampled = out.sampled();
    assert_eq!(sampled.stats.forwards, 1);
    assert!(sampled.stats.hit_deadline);
    assert_eq!(out.tokens()[0], argmax);
    assert_eq!(out.lines(), ["a b c d e f | [0, 1, 2, 3, 4, 5]"]);
    assert_eq!(sampled.infills[0].steps, 1);

    // Without the deadline the same seed does not give the argmax: the deadline forced it.
    let free = warm(3).run(&unsure_rows(6), &[canvas(&[], 6, &[])]);
    assert!(!free.sampled().stats.hit_deadline);
    assert_ne!(free.tokens()[0], argmax);
}

#[test]
fn future_deadline_changes_nothing() {
    let later = Instant::now() + Duration::from_secs(3600);
    let out = Setup::new().run_in(
        &unsure_rows(3),
        &mut FakeCache::default(),
        &[canvas(&[], 3, &[])],
        Some(later),
    );
    assert!(!out.sampled().stats.hit_deadline);
    assert_eq!(out.sampled().stats.forwards, 3);
    assert_eq!(out.tokens(), [vec![A, B, C]]);
}

// ---------------------------------------------------------------------------------------------
// Batching.

#[test]
fn batch_shares_model_calls_and_fills_each_canvas_from_its_own_rows() {
    // A sequence starting with `a` is filled with `f`, one starting with `c` with `g`; confidence
    // falls with the position so each canvas commits left to right, one per step.
    let model = ScriptedModel::new(|seq, pos| {
        let p = 0.9 - 0.01 * pos as f32;
        match seq[0] {
            A => peaked(F, p),
            C => peaked(G, p),
            _ => flat(),
        }
    });
    let short = canvas(&[A], 2, &[B, C]);
    let long = canvas(&[C, D, E], 4, &[]);
    let setup = Setup::new();
    let out = setup.run(&model, &[short.clone(), long.clone()]);

    assert_eq!(out.tokens(), [vec![F, F], vec![G, G, G, G]]);
    let sampled = out.sampled();
    assert_eq!(
        sampled.stats.forwards, 4,
        "the longer canvas's steps, not 2 + 4"
    );
    assert_eq!(
        sampled.infills.iter().map(|i| i.steps).collect::<Vec<_>>(),
        [2, 4]
    );
    assert_eq!(
        out.lines(),
        [
            "f _ | [0] ; g _ _ _ | [0]",
            "f f | [1] ; g g _ _ | [1]",
            "f f | [] ; g g g _ | [2]",
            "f f | [] ; g g g g | [3]",
        ]
    );
    let sampler = Sampler::new(setup.settings, &setup.whitespace);
    assert_eq!(
        out.calls[0].tokens,
        [sampler.sequence(&short), sampler.sequence(&long)]
    );
    // One window over both canvases, from the short one's first slot to the long one's last,
    // until the short one is filled and its last commit is in the cache.
    let windows: Vec<Range<usize>> = out.calls.iter().map(|c| c.window.clone()).collect();
    assert_eq!(windows, [1..7, 1..7, 1..7, 3..7]);
    assert!(out.calls.iter().all(|c| c.tokens.len() == 2));
}

// ---------------------------------------------------------------------------------------------
// Temperature.

/// Eight slots where every ordinary token is equally likely.
fn sample_flat(temperature: f32, seed: u64) -> Vec<u32> {
    sampling(temperature, seed)
        .run(&ScriptedModel::new(|_, _| flat()), &[canvas(&[], 8, &[])])
        .tokens()
        .remove(0)
}

#[test]
fn same_seed_samples_the_same_middle() {
    for seed in [0, 1, 42] {
        assert_eq!(
            sample_flat(1.0, seed),
            sample_flat(1.0, seed),
            "seed {seed}"
        );
    }
}

#[test]
fn different_seeds_sample_different_middles() {
    let middles: HashSet<Vec<u32>> = (0..4).map(|seed| sample_flat(1.0, seed)).collect();
    assert!(middles.len() > 1, "four seeds, one middle: {middles:?}");
}

#[test]
fn temperature_zero_is_greedy_whatever_the_seed() {
    for seed in 0..4 {
        let out = Setup {
            config: SamplerConfig {
                seed,
                ..one_per_step()
            },
            ..Setup::new()
        }
        .run(&unsure_rows(4), &[canvas(&[], 4, &[])]);
        assert_eq!(out.tokens(), [vec![A, B, C, D]], "seed {seed}");
    }
    // On a flat distribution greedy takes the lowest id.
    assert_eq!(sample_flat(0.0, 7), vec![A; 8]);
}

/// A temperature near zero is greedy, down to the smallest an f32 holds: the tempered
/// distribution cannot overflow (it came out all NaN below ~1e-38, and the canvas kept its
/// masks). Each committed token still reports the model's own probability.
#[test]
fn a_tiny_temperature_samples_the_argmax() {
    for temperature in [1e-3, 1e-30, 1e-38, 1e-39, 1e-45] {
        for seed in 0..3 {
            let out = sampling(temperature, seed).run(&unsure_rows(4), &[canvas(&[], 4, &[])]);
            assert_eq!(
                out.tokens(),
                [vec![A, B, C, D]],
                "temperature {temperature}, seed {seed}"
            );
            let probabilities = &out.sampled().infills[0].probabilities;
            assert!(
                probabilities.iter().all(|p| (p - 0.3).abs() < 1e-4),
                "temperature {temperature}: {probabilities:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Invalid requests.

fn check_invalid(canvases: &[Canvas], config: SamplerConfig) {
    let setup = Setup {
        config,
        ..Setup::new()
    };
    let model = ScriptedModel::rows(0, Vec::new());
    let out = setup.run(&model, canvases);
    assert!(
        matches!(out.result, Err(Error::InvalidRequest(_))),
        "{:?}",
        out.result
    );
    assert!(out.calls.is_empty());
    assert!(out.stream.is_empty());
}

#[test]
fn invalid_requests_are_rejected_before_any_model_call() {
    check_invalid(&[], one_per_step());
    check_invalid(&[canvas(&[A], 0, &[B])], one_per_step());
    check_invalid(
        &[canvas(&[A], 2, &[]), canvas(&[A], 0, &[])],
        one_per_step(),
    );
    check_invalid(
        &[canvas(&[A], 2, &[])],
        SamplerConfig {
            schedule: Schedule::TopK { k: 0 },
            ..one_per_step()
        },
    );
    check_invalid(
        &[canvas(&[A], 2, &[])],
        SamplerConfig {
            max_steps: Some(0),
            ..one_per_step()
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Effort presets.

#[test]
fn effort_presets_trade_steps_for_quality() {
    let [low, medium, high] =
        [Effort::Low, Effort::Medium, Effort::High].map(SamplerConfig::effort);
    let tau = |c: &SamplerConfig| match c.schedule {
        Schedule::Threshold { tau } => tau,
        Schedule::TopK { .. } => panic!("expected a threshold schedule, got {:?}", c.schedule),
    };
    assert!(low.max_steps.unwrap() < medium.max_steps.unwrap());
    assert!(tau(&low) < tau(&medium), "a lower bar at low");
    assert_eq!(
        (high.schedule, high.max_steps),
        (Schedule::TopK { k: 1 }, None)
    );
    assert_eq!(SamplerConfig::default(), medium);
    assert_eq!(
        ["low", "medium", "high"].map(|s| s.parse::<Effort>().unwrap()),
        [Effort::Low, Effort::Medium, Effort::High]
    );
    assert!("fast".parse::<Effort>().is_err());
}

#[test]
fn effort_presets_cap_model_calls() {
    // 40 slots, none confident enough for either threshold: the budget alone decides.
    let calls = |effort| {
        let setup = Setup {
            config: SamplerConfig::effort(effort),
            ..Setup::new()
        };
        setup
            .run(
                &ScriptedModel::rows(0, vec![peaked(A, 0.5); 40]),
                &[canvas(&[], 40, &[])],
            )
            .sampled()
            .stats
            .forwards
    };
    assert_eq!(
        [Effort::Low, Effort::Medium, Effort::High].map(calls),
        [4, 8, 40]
    );
}

// ---------------------------------------------------------------------------------------------
// Drafts: the text a next edit rewrites.

/// Steps of a threshold-0.9 run over one canvas of `rows.len()` slots with `draft`, with drafts
/// honoured at `draft_tau`.
fn check_draft(draft_tau: Option<f32>, draft: &[u32], rows: Vec<Vec<f32>>, expect: &[&str]) {
    let length = rows.len();
    let setup = Setup {
        config: SamplerConfig {
            schedule: Schedule::Threshold { tau: 0.9 },
            draft_tau,
            ..one_per_step()
        },
        ..Setup::new()
    };
    let canvas = canvas(&[], length, &[]).with_draft(draft.to_vec());
    let out = setup.run(&ScriptedModel::rows(0, rows), &[canvas]);
    assert_eq!(out.lines(), expect);
}

/// A model trained with `edit_canvas: draft` sees the draft's token at each uncommitted slot
/// (the mask past the draft's end) and the committed tokens as they come; other models, and
/// canvases without a draft, see masks.
#[test]
fn uncommitted_slots_show_the_draft_to_a_draft_trained_model() {
    let rows = vec![peaked(D, 0.9), flat(), flat(), flat()];
    let run = |edit_canvas: EditCanvas, draft: Vec<u32>| {
        let setup = Setup {
            settings: DiffusionSettings {
                edit_canvas,
                ..settings(false, None)
            },
            ..Setup::new()
        };
        let canvas = canvas(&[G], 4, &[J]).with_draft(draft);
        setup
            .run(&ScriptedModel::rows(1, rows.clone()), &[canvas])
            .calls
    };
    let calls = run(EditCanvas::Draft, vec![A, B, C]);
    assert_eq!(calls[0].tokens[0], [G, A, B, C, MASK, J]);
    assert_eq!(
        calls[1].tokens[0],
        [G, D, B, C, MASK, J],
        "slot 0 committed D"
    );
    let masked = run(EditCanvas::Masked, vec![A, B, C]);
    assert_eq!(masked[0].tokens[0], [G, MASK, MASK, MASK, MASK, J]);
    let no_draft = run(EditCanvas::Draft, Vec::new());
    assert_eq!(no_draft[0].tokens[0], [G, MASK, MASK, MASK, MASK, J]);
}

#[test]
fn slots_that_copy_the_draft_commit_at_the_draft_bar() {
    let rows = vec![
        peaked(A, 0.6),
        peaked(B, 0.6),
        peaked(C, 0.6),
        peaked(D, 0.6),
    ];
    check_draft(
        Some(0.5),
        &[A, B, C, D],
        rows.clone(),
        &["a b c d | [0, 1, 2, 3]"],
    );
    // Below the draft bar, or with drafts off, they wait for the schedule: one per step.
    check_draft(
        Some(0.7),
        &[A, B, C, D],
        rows.clone(),
        &[
            "a _ _ _ | [0]",
            "a b _ _ | [1]",
            "a b c _ | [2]",
            "a b c d | [3]",
        ],
    );
    check_draft(
        None,
        &[A, B, C, D],
        rows,
        &[
            "a _ _ _ | [0]",
            "a b _ _ | [1]",
            "a b c _ | [2]",
            "a b c d | [3]",
        ],
    );
}

/// One aligned token alone is no copy (a coincidence as often as not); a run of two is.
#[test]
fn a_lone_aligned_token_is_not_a_copy() {
    let rows = vec![
        peaked(A, 0.6),
        peaked(E, 0.6),
        peaked(C, 0.6),
        peaked(D, 0.6),
    ];
    check_draft(
        Some(0.5),
        &[A, B, C, D],
        rows,
        &["_ _ c d | [2, 3]", "a _ c d | [0]", "a e c d | [1]"],
    );
}

/// Copies are aligned, not compared slot by slot: an insertion before them shifts them, and the
/// draft's end is copied once the middle has content.
#[test]
fn copies_are_found_after_an_insertion_and_the_end_is_copied_too() {
    let rows = vec![
        peaked(E, 0.6),
        peaked(A, 0.6),
        peaked(B, 0.6),
        peaked(C, 0.6),
        peaked(EOS, 0.6),
        peaked(EOS, 0.6),
    ];
    check_draft(
        Some(0.5),
        &[A, B, C],
        rows,
        &[
            "_ a b c _ _ | [1, 2, 3]",
            "_ a b c EOS EOS | [4, 5]",
            "e a b c EOS EOS | [0]",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Iteration-level batching: members join a running batch and leave when full or cancelled.

/// A member of a staggered batch: it joins before batch step `at`.
struct Joiner {
    at: usize,
    canvas: Canvas,
    config: SamplerConfig,
    controls: MemberControls<'static>,
}

impl Joiner {
    fn new(at: usize, canvas: Canvas, config: SamplerConfig) -> Joiner {
        Joiner {
            at,
            canvas,
            config,
            controls: MemberControls::default(),
        }
    }
}

/// What a staggered batch left behind, by joiner.
struct Staggered {
    outcomes: Vec<MemberOutcome>,
    /// The batch step each joiner left in.
    left_at: Vec<usize>,
    calls: Vec<Call>,
}

impl Staggered {
    fn infill(&self, joiner: usize) -> &Infill {
        match &self.outcomes[joiner] {
            MemberOutcome::Filled { infill, .. } => infill,
            MemberOutcome::Cancelled => panic!("joiner {joiner} was cancelled"),
        }
    }

    fn stats(&self, joiner: usize) -> PassStats {
        match &self.outcomes[joiner] {
            MemberOutcome::Filled { stats, .. } => *stats,
            MemberOutcome::Cancelled => panic!("joiner {joiner} was cancelled"),
        }
    }

    fn passes(&self) -> Vec<String> {
        self.calls.iter().map(Call::render).collect()
    }

    fn rows(&self) -> Vec<usize> {
        self.calls.iter().map(|c| c.tokens.len()).collect()
    }
}

/// Steps a batch under `cache`, each joiner joining before its step, until everyone has left.
fn staggered(
    settings: DiffusionSettings,
    model: &ScriptedModel,
    cache: CachePolicy,
    joiners: Vec<Joiner>,
) -> Staggered {
    let whitespace = whitespace();
    let sampler = Sampler::new(settings, &whitespace);
    let mut batch = sampler.batch(cache);
    let mut fake_cache = FakeCache::default();
    let count = joiners.len();
    let mut waiting: Vec<(usize, Joiner)> = joiners.into_iter().enumerate().collect();
    let mut ids: Vec<Option<MemberId>> = vec![None; count];
    let mut outcomes: Vec<Option<MemberOutcome>> = vec![None; count];
    let mut left_at = vec![usize::MAX; count];
    let mut step = 0;
    while !(batch.is_empty() && waiting.is_empty()) {
        let (now, later): (Vec<_>, Vec<_>) = waiting.into_iter().partition(|(_, j)| j.at == step);
        waiting = later;
        for (index, joiner) in now {
            let id = batch
                .join(&joiner.canvas, joiner.config, joiner.controls)
                .expect("a valid member");
            assert!(ids.iter().all(|&other| other != Some(id)), "ids are unique");
            ids[index] = Some(id);
        }
        let live = batch.len();
        let left = batch
            .step(model, &mut fake_cache)
            .expect("the step succeeds");
        assert_eq!(batch.len(), live - left.len());
        for (id, outcome) in left {
            let index = ids.iter().position(|&i| i == Some(id)).expect("a joiner");
            assert!(outcomes[index].is_none(), "joiner {index} left twice");
            outcomes[index] = Some(outcome);
            left_at[index] = step;
        }
        step += 1;
        assert!(step < 1000, "the batch never emptied");
    }
    Staggered {
        outcomes: outcomes
            .into_iter()
            .map(|o| o.expect("everyone left"))
            .collect(),
        left_at,
        calls: model.take_calls(),
    }
}

/// `canvas` filled by `Sampler::run` on its own (the cache as `config` says), with its stream.
fn alone(
    settings: DiffusionSettings,
    model: &ScriptedModel,
    canvas: &Canvas,
    config: &SamplerConfig,
) -> (Sampled, Vec<String>) {
    let setup = Setup {
        settings,
        whitespace: whitespace(),
        config: config.clone(),
        ..Setup::new()
    };
    let out = setup.run(model, std::slice::from_ref(canvas));
    let stream = out.lines();
    (out.result.expect("the run succeeds"), stream)
}

fn cache_off() -> CachePolicy {
    CachePolicy {
        enabled: false,
        refresh_every: None,
        realign: None,
        prompt_chunk: None,
    }
}

fn greedy_cache_off() -> SamplerConfig {
    SamplerConfig {
        cache: cache_off(),
        ..one_per_step()
    }
}

/// Each sequence is filled by the letter after its first token (`a` → `b`, `c` → `d`, ...);
/// confidence falls with the position, so one per step goes left to right.
fn letter_after_the_first() -> ScriptedModel {
    ScriptedModel::new(|seq, pos| peaked(seq[0] + 1, 0.9 - 0.01 * pos as f32))
}

/// A model whose rows hang on the whole sequence (so every commit changes what it says), mixing
/// letters, whitespace and ends.
fn hashed(script_seed: u64) -> ScriptedModel {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let tokens = [A, B, SPACE, NEWLINE, EOS, PAD];
    ScriptedModel::new(move |seq, pos| {
        let key = seq.iter().fold(script_seed ^ pos as u64, |h, &t| {
            h.wrapping_mul(31).wrapping_add(t as u64)
        });
        let mut rng = StdRng::seed_from_u64(key);
        let token = tokens[rng.random_range(0..tokens.len())];
        dist(&[(token, rng.random_range(0.3..0.99))])
    })
}

#[test]
fn members_joining_mid_run_get_the_infills_they_get_alone() {
    // `a` runs alone for two steps, `c` joins after them, `e` after `c`'s first step.
    let model = letter_after_the_first();
    let members = [
        (0, canvas(&[A], 4, &[J])),
        (2, canvas(&[C, D], 3, &[])),
        (3, canvas(&[E], 2, &[J, J])),
    ];
    let joiners = members
        .iter()
        .map(|(at, c)| Joiner::new(*at, c.clone(), greedy_cache_off()))
        .collect();
    let out = staggered(settings(false, None), &model, cache_off(), joiners);
    for (index, (_, canvas)) in members.iter().enumerate() {
        let (sampled, _) = alone(settings(false, None), &model, canvas, &greedy_cache_off());
        assert_eq!(out.infill(index), &sampled.infills[0], "member {index}");
        assert_eq!(
            out.stats(index).forwards,
            sampled.stats.forwards,
            "member {index}"
        );
    }
    assert_eq!(out.infill(1).tokens, [D, D, D]);
    assert_eq!(out.left_at, [3, 4, 4]);
    // `a`'s row is in step 3's call (its last), gone from step 4's: without the cache every
    // pass is full, so a full member's row leaves at the next.
    assert_eq!(out.rows(), [1, 1, 2, 3, 2]);
    assert_eq!(out.calls[4].tokens[0][..3], [C, D, D]);
    assert!(out
        .calls
        .iter()
        .all(|c| c.pass == Pass::Full { store: false }));
}

/// Random members (canvases, schedules, budgets, temperatures, drafts, settings) joining at
/// random steps under a random cache policy: each ends with the infill it gets alone, in as
/// many model calls. The fake's rows do not depend on the cache, so this holds with the cache
/// on too (where the fake also refuses a window pass the cache does not cover); what the cache
/// changes for a real model is in tests/batch.rs.
#[test]
fn random_staggered_batches_give_every_member_its_infill_alone() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    for seed in 0..150u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let settings = settings(rng.random_bool(0.5), rng.random_bool(0.5).then_some(BOS));
        let cache = match rng.random_range(0..3) {
            0 => cache_off(),
            1 => cache_on(None),
            _ => cache_on(Some(2)),
        };
        let model = hashed(rng.random());
        let letters = |rng: &mut StdRng, n: usize| -> Vec<u32> {
            (0..n)
                .map(|_| [A, B, C, D, J][rng.random_range(0..5)])
                .collect()
        };
        let mut members = Vec::new();
        for _ in 0..rng.random_range(1..5) {
            let n = rng.random_range(0..4);
            let prefix = letters(&mut rng, n);
            let n = rng.random_range(0..3);
            let suffix = letters(&mut rng, n);
            let n = rng.random_range(0..3);
            let draft = letters(&mut rng, n);
            let length = rng.random_range(1..6);
            let canvas = Canvas::new(prefix, length, suffix)
                .growing_to(length + rng.random_range(0..5))
                .with_draft(draft);
            let config = SamplerConfig {
                schedule: if rng.random_bool(0.5) {
                    Schedule::TopK {
                        k: rng.random_range(1..3),
                    }
                } else {
                    Schedule::Threshold {
                        tau: rng.random_range(0.2..0.95),
                    }
                },
                max_steps: rng.random_bool(0.5).then(|| rng.random_range(1..6)),
                temperature: if rng.random_bool(0.3) { 1.0 } else { 0.0 },
                seed: rng.random(),
                draft_tau: rng.random_bool(0.5).then_some(0.5),
                cache,
                ..one_per_step()
            };
            members.push((rng.random_range(0..5), canvas, config));
        }
        let joiners = members
            .iter()
            .map(|(at, canvas, config)| Joiner::new(*at, canvas.clone(), config.clone()))
            .collect();
        let out = staggered(settings, &model, cache, joiners);
        for (index, (_, canvas, config)) in members.iter().enumerate() {
            let (sampled, _) = alone(settings, &model, canvas, config);
            let context = format!("seed {seed}, member {index}: {canvas:?} {config:?}");
            assert_eq!(out.infill(index), &sampled.infills[0], "{context}");
            assert_eq!(
                out.stats(index).forwards,
                sampled.stats.forwards,
                "{context}"
            );
        }
    }
}

/// With the cache on: a join (once the batch has made a pass) is followed by a stored full
/// pass; a full member's row stays in the window passes after it and leaves at the next full
/// pass.
#[test]
fn a_join_forces_a_stored_full_pass_and_a_full_row_waits_for_it() {
    let model = letter_after_the_first();
    let members = [
        (0, canvas(&[A], 4, &[])),
        (2, canvas(&[C, D, E], 5, &[])),
        (5, canvas(&[D], 1, &[])),
    ];
    let joiners = members
        .iter()
        .map(|(at, c)| Joiner::new(*at, c.clone(), one_per_step()))
        .collect();
    let out = staggered(settings(false, None), &model, cache_on(None), joiners);
    assert_eq!(
        out.passes(),
        [
            "full+store 1..5",
            "window 1..5",
            "full+store 1..8",
            "window 1..8",
            "window 1..8",
            "full+store 1..8",
            "window 1..8",
        ]
    );
    assert_eq!(out.left_at, [3, 6, 5]);
    assert_eq!(out.rows(), [1, 1, 2, 2, 2, 2, 2]);
    // `a` (full at step 3) is still row 0 at step 4 and gone at step 5's full pass.
    assert_eq!(out.calls[4].tokens[0], [A, B, B, B, B]);
    assert_eq!(out.calls[5].tokens[0][..3], [C, D, E]);
    for (index, (_, canvas)) in members.iter().enumerate() {
        let (sampled, _) = alone(settings(false, None), &model, canvas, &one_per_step());
        assert_eq!(out.infill(index), &sampled.infills[0], "member {index}");
    }
    let b = out.stats(1);
    assert_eq!(
        (b.forwards, b.full_passes, b.window_passes),
        (5, 2, 3),
        "the calls `c` took part in"
    );
    assert_eq!(
        b.window_positions,
        5 * 7,
        "its own rows of five windows 1..8"
    );

    // A member alone in a batch makes the passes `run` makes.
    let only = staggered(
        settings(false, None),
        &model,
        cache_on(None),
        vec![Joiner::new(0, members[1].1.clone(), one_per_step())],
    );
    let setup = Setup::new();
    let run = setup.run(&model, std::slice::from_ref(&members[1].1));
    assert_eq!(only.calls, run.calls);
    assert_eq!(only.infill(0), &run.sampled().infills[0]);
}

/// A member that takes the place of a cancelled one with the same canvas leaves the rows
/// looking the same to `cache_covers` outside the window, but the cache holds the other
/// member's commits: the pass is a stored full pass all the same.
#[test]
fn a_member_replacing_a_cancelled_one_gets_a_stored_full_pass() {
    let model = letter_after_the_first();
    let request = canvas(&[A], 4, &[J]);
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let mut first = Joiner::new(0, request.clone(), one_per_step());
    first.controls.cancel = Some(cancel);
    first.controls.on_step = Some(Box::new(move |view: &CanvasView| {
        if view.slots.iter().filter(|s| s.is_some()).count() == 2 {
            flag.store(true, Ordering::Relaxed);
        }
    }));
    let out = staggered(
        settings(false, None),
        &model,
        cache_on(None),
        vec![first, Joiner::new(2, request.clone(), one_per_step())],
    );
    assert_eq!(out.outcomes[0], MemberOutcome::Cancelled);
    assert_eq!(out.left_at[0], 2);
    assert_eq!(
        out.passes(),
        [
            "full+store 1..5",
            "window 1..5",
            "full+store 1..5",
            "window 1..5",
            "window 1..5",
            "window 1..5",
        ]
    );
    assert_eq!(out.calls[2].tokens, [vec![A, MASK, MASK, MASK, MASK, J]]);
    let (sampled, _) = alone(settings(false, None), &model, &request, &one_per_step());
    assert_eq!(out.infill(1), &sampled.infills[0]);
}

#[test]
fn a_cancelled_member_leaves_before_the_next_pass_and_the_others_are_untouched() {
    let model = letter_after_the_first();
    let members = [
        canvas(&[A], 4, &[]),
        canvas(&[C], 5, &[J]),
        canvas(&[E, E], 3, &[]),
    ];
    for policy in [cache_off(), cache_on(None)] {
        let config = SamplerConfig {
            cache: policy,
            ..one_per_step()
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let mut joiners: Vec<Joiner> = members
            .iter()
            .map(|c| Joiner::new(0, c.clone(), config.clone()))
            .collect();
        // `c` raises its own flag from its stream after its second step.
        let flag = cancel.clone();
        let mut seen = 0;
        joiners[1].controls.cancel = Some(cancel);
        joiners[1].controls.on_step = Some(Box::new(move |_: &CanvasView| {
            seen += 1;
            if seen == 2 {
                flag.store(true, Ordering::Relaxed);
            }
        }));
        let out = staggered(settings(false, None), &model, policy, joiners);
        assert_eq!(out.outcomes[1], MemberOutcome::Cancelled, "{policy:?}");
        assert_eq!(out.left_at, [3, 2, 2], "{policy:?}");
        // Step 2's call has no row of `c`'s.
        assert_eq!(out.rows()[..3], [3, 3, 2], "{policy:?}");
        assert!(out.calls[2].tokens.iter().all(|t| t[0] != C), "{policy:?}");
        if policy.enabled {
            assert_eq!(out.calls[2].pass, Pass::Full { store: true });
        }
        for index in [0, 2] {
            let (sampled, _) = alone(settings(false, None), &model, &members[index], &config);
            assert_eq!(out.infill(index), &sampled.infills[0], "{policy:?} {index}");
        }
    }
}

#[test]
fn a_members_deadline_forces_only_that_member() {
    let model = letter_after_the_first();
    let past = Instant::now();
    std::thread::sleep(Duration::from_millis(1));
    let members = [canvas(&[A], 4, &[]), canvas(&[C], 4, &[])];
    let mut late = Joiner::new(0, members[0].clone(), one_per_step());
    late.controls.deadline = Some(past);
    let mut relaxed = Joiner::new(0, members[1].clone(), one_per_step());
    relaxed.controls.deadline = Some(Instant::now() + Duration::from_secs(3600));
    let out = staggered(
        settings(false, None),
        &model,
        cache_on(None),
        vec![late, relaxed],
    );
    // The late member commits all four slots in the first step; the other goes one per step.
    assert_eq!(out.left_at, [0, 3]);
    assert_eq!(out.infill(0).tokens, [B, B, B, B]);
    assert_eq!(out.infill(0).steps, 1);
    assert!(out.stats(0).hit_deadline);
    assert!(!out.stats(1).hit_deadline);
    let (sampled, _) = alone(settings(false, None), &model, &members[1], &one_per_step());
    assert_eq!(out.infill(1), &sampled.infills[0]);
    assert_eq!(sampled.stats.forwards, 4);
}

/// Each member draws from its own generator seeded from its config: the same seed and canvas
/// sample the same middle whoever else is in the batch and whenever it joins.
#[test]
fn a_seeded_member_samples_the_same_middle_alone_or_batched() {
    let model = ScriptedModel::new(|_, _| flat());
    let warm = |seed| SamplerConfig {
        temperature: 1.0,
        seed,
        ..one_per_step()
    };
    let members = [
        (0, canvas(&[], 8, &[]), warm(1)),
        (1, canvas(&[A], 6, &[B]), warm(2)),
        (3, canvas(&[], 8, &[]), warm(1)),
    ];
    let joiners = members
        .iter()
        .map(|(at, c, config)| Joiner::new(*at, c.clone(), config.clone()))
        .collect();
    let out = staggered(settings(false, None), &model, cache_on(None), joiners);
    for (index, (_, canvas, config)) in members.iter().enumerate() {
        let (sampled, _) = alone(settings(false, None), &model, canvas, config);
        assert_eq!(out.infill(index), &sampled.infills[0], "member {index}");
    }
    assert_eq!(out.infill(0).tokens, out.infill(2).tokens);
    assert_ne!(out.infill(0).tokens, vec![A; 8], "sampled, not greedy");
}

#[test]
fn a_member_rejected_at_join_does_not_disturb_the_batch() {
    let model = letter_after_the_first();
    let whitespace = whitespace();
    let sampler = Sampler::new(settings(false, None), &whitespace);
    let members = [canvas(&[A], 4, &[]), canvas(&[C], 4, &[])];
    let run = |with_bad_joins: bool| {
        let mut batch = sampler.batch(cache_on(None));
        let mut fake_cache = FakeCache::default();
        let mut left = Vec::new();
        let first = batch
            .join(&members[0], one_per_step(), MemberControls::default())
            .unwrap();
        for step in 0.. {
            // Refused joins at step 1 (after a pass: a member that did join would force a
            // stored full pass), the second member at step 2.
            if step == 1 && with_bad_joins {
                let bad = [
                    (canvas(&[A], 0, &[]), one_per_step()),
                    (
                        members[1].clone(),
                        SamplerConfig {
                            schedule: Schedule::TopK { k: 0 },
                            ..one_per_step()
                        },
                    ),
                    (
                        members[1].clone(),
                        SamplerConfig {
                            max_steps: Some(0),
                            ..one_per_step()
                        },
                    ),
                ];
                for (canvas, config) in bad {
                    let refused = batch.join(&canvas, config, MemberControls::default());
                    assert!(
                        matches!(refused, Err(Error::InvalidRequest(_))),
                        "{refused:?}"
                    );
                    assert_eq!(batch.len(), 1);
                }
            }
            if step == 2 {
                batch
                    .join(&members[1], one_per_step(), MemberControls::default())
                    .unwrap();
            }
            if batch.is_empty() {
                break;
            }
            for (id, mut outcome) in batch.step(&model, &mut fake_cache).unwrap() {
                // Time is the one thing two runs do not share.
                if let MemberOutcome::Filled { stats, .. } = &mut outcome {
                    stats.model_time = Duration::ZERO;
                }
                left.push((id == first, step, outcome));
            }
        }
        let stats = PassStats {
            model_time: Duration::ZERO,
            ..batch.stats()
        };
        (left, model.take_calls(), stats)
    };
    let (clean, clean_calls, clean_stats) = run(false);
    let (disturbed, disturbed_calls, disturbed_stats) = run(true);
    assert_eq!(disturbed, clean);
    assert_eq!(disturbed_calls, clean_calls);
    assert_eq!(disturbed_stats, clean_stats);
    assert_eq!(clean.len(), 2);
    let passes: Vec<String> = clean_calls.iter().map(Call::render).collect();
    assert_eq!(
        passes[..3],
        ["full+store 1..5", "window 1..5", "full+store 1..5"]
    );
}

/// A member's stream sees that member's canvas only, step for step what `run` streams for it
/// alone.
#[test]
fn a_members_stream_sees_its_own_canvas_only() {
    let model = letter_after_the_first();
    let members = [(0, canvas(&[A], 3, &[])), (1, canvas(&[C, C], 4, &[J]))];
    let streams: Vec<Arc<Mutex<Vec<String>>>> = members
        .iter()
        .map(|_| Arc::new(Mutex::new(Vec::new())))
        .collect();
    let joiners = members
        .iter()
        .zip(&streams)
        .map(|((at, c), stream)| {
            let mut joiner = Joiner::new(*at, c.clone(), one_per_step());
            let stream = stream.clone();
            joiner.controls.on_step = Some(Box::new(move |view: &CanvasView| {
                stream.lock().unwrap().push(render(view));
            }));
            joiner
        })
        .collect();
    let out = staggered(settings(false, None), &model, cache_on(None), joiners);
    assert_eq!(
        *streams[0].lock().unwrap(),
        ["b _ _ | [0]", "b b _ | [1]", "b b b | [2]"]
    );
    assert_eq!(
        *streams[1].lock().unwrap(),
        [
            "d _ _ _ | [0]",
            "d d _ _ | [1]",
            "d d d _ | [2]",
            "d d d d | [3]"
        ]
    );
    for (index, (_, canvas)) in members.iter().enumerate() {
        let (_, stream) = alone(settings(false, None), &model, canvas, &one_per_step());
        assert_eq!(*streams[index].lock().unwrap(), stream, "member {index}");
    }
    assert_eq!(out.left_at, [2, 4]);
}

// ---------------------------------------------------------------------------------------------
// Block decoding (block-causal and causal attention).

/// A causal model: the row at `pos` reads only `seq[..=pos]`. Over a committed token it votes,
/// fairly sure, for the next letter; over a mask it is certain of `J` (what a row that has not
/// seen the block's tokens would say).
fn causal_letters() -> ScriptedModel {
    ScriptedModel::new(|seq, pos| {
        if seq[pos] == MASK {
            peaked(J, 0.99)
        } else {
            peaked((seq[pos] + 1) % 6, 0.6)
        }
    })
}

fn block_settings(attention: AttentionPattern) -> DiffusionSettings {
    DiffusionSettings {
        attention,
        ..settings(true, None)
    }
}

#[test]
fn causal_decoding_commits_left_to_right_one_row_a_step() {
    let setup = Setup {
        settings: block_settings(AttentionPattern::Causal),
        // A bar every vote clears: without block decoding the sure `J`s would all commit.
        config: threshold(0.5),
        ..Setup::new()
    };
    let out = setup.run(&causal_letters(), &[canvas(&[A], 4, &[])]);
    assert_eq!(out.tokens(), [vec![B, C, D, E]]);
    assert_eq!(out.committed(), [[0], [1], [2], [3]]);
    let calls: Vec<String> = out.calls.iter().map(Call::render).collect();
    // Each step reads the row scoring the next slot, which is the slot committed last.
    assert_eq!(
        calls,
        [
            "full+store 0..1",
            "window 1..2",
            "window 2..3",
            "window 3..4"
        ]
    );
    // A step budget applies per block: one slot a block, so it changes nothing.
    let budgeted = Setup {
        config: SamplerConfig {
            max_steps: Some(2),
            ..threshold(0.5)
        },
        ..setup
    };
    assert_eq!(
        budgeted
            .run(&causal_letters(), &[canvas(&[A], 4, &[])])
            .tokens(),
        [vec![B, C, D, E]]
    );
}

#[test]
fn block_decoding_fills_a_block_before_the_next_and_recomputes_it() {
    // Blocks of 2 positions; the canvas starts at position 1, so its blocks are slot 0
    // (sharing a block with the prefix), slots 1-2, and slot 3.
    let model = ScriptedModel::new(|seq, pos| {
        // Within a block every position sees the block; a row votes for the letter after the
        // last committed token it sees, certain of `J` when it sees none.
        let seen = (pos / 2 + 1) * 2;
        match seq[..seen.min(seq.len())]
            .iter()
            .rev()
            .find(|&&t| t != MASK)
        {
            Some(&t) => peaked((t + 1) % 6, 0.95),
            None => peaked(J, 0.99),
        }
    });
    let setup = Setup {
        settings: block_settings(AttentionPattern::Block(2)),
        config: threshold(0.9),
        ..Setup::new()
    };
    let out = setup.run(&model, &[canvas(&[A], 4, &[])]);
    let calls: Vec<String> = out.calls.iter().map(Call::render).collect();
    assert_eq!(out.committed(), [vec![0], vec![1, 2], vec![3]]);
    assert_eq!(out.tokens(), [vec![B, C, C, D]]);
    assert_eq!(
        calls,
        ["full+store 0..2", "window 1..4", "window 2..5"],
        "each pass recomputes the active block (from its start) and what was committed"
    );
}

#[test]
fn a_deadline_in_block_decoding_ends_the_middle_after_the_block() {
    let setup = Setup {
        settings: block_settings(AttentionPattern::Causal),
        ..Setup::new()
    };
    let out = setup.run_in(
        &causal_letters(),
        &mut FakeCache::default(),
        &[canvas(&[A], 4, &[])],
        Some(Instant::now()),
    );
    let infill = &out.sampled().infills[0];
    assert_eq!(
        infill.tokens,
        [B],
        "no slot is filled from a row that saw only masks"
    );
    assert!(infill.ended_by_eos);
    assert_eq!(out.calls.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Causal decoding with a draft: the draft's continuation is guessed, a pass confirms it.

/// Causal decoding under `draft_tau` (drafts on) or not.
fn causal_with_draft(draft_tau: Option<f32>) -> Setup {
    Setup {
        settings: block_settings(AttentionPattern::Causal),
        config: SamplerConfig {
            draft_tau,
            ..threshold(0.5)
        },
        ..Setup::new()
    }
}

#[test]
fn a_draft_lets_causal_decoding_confirm_several_slots_a_pass_and_changes_no_token() {
    // The model writes the letter after the one it sees: b c d e f a. The draft agrees for
    // three slots, then has `a` where the model writes `e`, then agrees again.
    let canvas = canvas(&[A], 6, &[]).with_draft(vec![B, C, D, A, F, A]);
    let plain = causal_with_draft(None).run(&causal_letters(), std::slice::from_ref(&canvas));
    let out = causal_with_draft(Some(0.5)).run(&causal_letters(), &[canvas]);
    assert_eq!(plain.tokens(), [vec![B, C, D, E, F, A]]);
    assert_eq!(out.tokens(), plain.tokens(), "the same tokens");
    assert_eq!(plain.calls.len(), 6);
    let calls: Vec<String> = out.calls.iter().map(Call::render).collect();
    // Pass 1 scores slots 0-5 over the guesses b c d a f: b c d hold, slot 3 takes the model's
    // `e` over the guess. Pass 2 starts at the row slot 3's guess spoiled and guesses `f`
    // (the draft goes on after a substitution), which holds, and slot 5 takes the model's `a`.
    assert_eq!(calls, ["full+store 0..6", "window 4..6"]);
    assert_eq!(out.committed(), [vec![0, 1, 2, 3], vec![4, 5]]);
    assert_eq!(
        out.calls[0].tokens[0][1..6],
        [B, C, D, A, F],
        "the guesses shown"
    );
}

#[test]
fn a_guessed_end_is_confirmed_like_a_token() {
    // The model writes b c then ends; the draft says the same, so one pass does it all.
    let model = ScriptedModel::new(|seq, pos| match seq[pos] {
        MASK => peaked(J, 0.99),
        A => peaked(B, 0.9),
        B => peaked(C, 0.9),
        _ => peaked(EOS, 0.9),
    });
    let canvas = canvas(&[A], 5, &[]).with_draft(vec![B, C]);
    let plain = causal_with_draft(None).run(&model, std::slice::from_ref(&canvas));
    let out = causal_with_draft(Some(0.5)).run(&model, &[canvas]);
    assert_eq!(out.tokens(), [vec![B, C]]);
    assert_eq!(out.tokens(), plain.tokens());
    assert!(out.sampled().infills[0].ended_by_eos);
    assert_eq!(out.calls.len(), 1, "b, c and the end in one pass");
    assert_eq!(plain.calls.len(), 3);
}

#[test]
fn guessing_stays_off_when_sampling_or_without_draft_tau() {
    let canvas = canvas(&[A], 4, &[]).with_draft(vec![B, C, D, E]);
    for setup in [
        causal_with_draft(None),
        Setup {
            config: SamplerConfig {
                temperature: 0.7,
                ..causal_with_draft(Some(0.5)).config
            },
            ..causal_with_draft(Some(0.5))
        },
    ] {
        let out = setup.run(&causal_letters(), std::slice::from_ref(&canvas));
        assert_eq!(out.calls.len(), 4, "one pass a slot");
        assert!(out.calls[0].tokens[0][1..].iter().all(|&t| t == MASK));
    }
}

#[test]
fn random_causal_models_decode_the_same_tokens_with_any_draft() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    for seed in 0..200u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        // A deterministic causal model: the next token is a function of the last two it sees
        // (the second-to-last is the prefix's at the first slot), sometimes the end.
        let table: Vec<u32> = (0..VOCAB * VOCAB)
            .map(|_| {
                if rng.random_bool(0.08) {
                    EOS
                } else {
                    rng.random_range(A..=G)
                }
            })
            .collect();
        let model = ScriptedModel::new(move |seq, pos| {
            if seq[pos] == MASK {
                return peaked(J, 0.99);
            }
            let before = if pos > 0 { seq[pos - 1] } else { A };
            peaked(table[before as usize * VOCAB + seq[pos] as usize], 0.8)
        });
        let length = rng.random_range(1..12);
        let max_length = length + rng.random_range(0..8);
        let prefix: Vec<u32> = (0..rng.random_range(1..16))
            .map(|_| rng.random_range(A..=G))
            .collect();
        let base = Canvas::new(prefix, length, vec![]).growing_to(max_length);
        let plain = causal_with_draft(None).run(&model, std::slice::from_ref(&base));
        let truth = plain.tokens()[0].clone();
        // Guessing from the context changes nothing either.
        let from_context = Setup {
            config: SamplerConfig {
                guess_context: true,
                ..causal_with_draft(None).config
            },
            ..causal_with_draft(None)
        }
        .run(&model, std::slice::from_ref(&base));
        assert_eq!(
            from_context.tokens(),
            plain.tokens(),
            "seed {seed}: context"
        );
        assert!(from_context.calls.len() <= plain.calls.len(), "seed {seed}");
        // Drafts: the true middle edited (substitutions, insertions, deletions), or noise.
        let mut draft = truth.clone();
        for _ in 0..rng.random_range(0..4) {
            let at = rng.random_range(0..=draft.len());
            match rng.random_range(0..3) {
                0 if at < draft.len() => draft[at] = rng.random_range(A..=G),
                1 => draft.insert(at, rng.random_range(A..=G)),
                _ if at < draft.len() => {
                    draft.remove(at);
                }
                _ => {}
            }
        }
        if rng.random_bool(0.2) {
            draft = (0..rng.random_range(1..10))
                .map(|_| rng.random_range(A..=G))
                .collect();
        }
        if draft.is_empty() {
            draft.push(A);
        }
        let out = causal_with_draft(Some(0.5)).run(&model, &[base.with_draft(draft.clone())]);
        assert_eq!(
            out.tokens(),
            plain.tokens(),
            "seed {seed}: draft {draft:?}, truth {truth:?}"
        );
        assert_eq!(
            out.sampled().infills[0].ended_by_eos,
            plain.sampled().infills[0].ended_by_eos,
            "seed {seed}"
        );
        assert!(out.calls.len() <= plain.calls.len(), "seed {seed}");
    }
}

#[test]
fn a_token_the_sampler_ends_at_ends_the_middle_like_eos() {
    // The model writes b c, then `j` (standing for `<|file_sep|>`).
    let model = ScriptedModel::new(|seq, pos| match seq[pos] {
        MASK => peaked(A, 0.99),
        A => peaked(B, 0.9),
        B => peaked(C, 0.9),
        _ => peaked(J, 0.9),
    });
    let setup = causal_with_draft(None);
    let whitespace = whitespace();
    let run = |sampler: Sampler<'_>| {
        sampler
            .run(
                &model,
                &mut FakeCache::default(),
                &[canvas(&[A], 5, &[])],
                &setup.config,
                Controls::default(),
            )
            .unwrap()
            .infills
            .remove(0)
    };
    let plain = run(Sampler::new(setup.settings, &whitespace));
    assert_eq!(plain.tokens, [B, C, J, J, J]);
    let ending = run(Sampler::new(setup.settings, &whitespace).ending_at(J));
    assert_eq!(ending.tokens, [B, C]);
    assert!(ending.ended_by_eos);
}

#[test]
fn without_a_draft_causal_decoding_guesses_from_the_context_where_the_lead_repeats_it() {
    // The model writes the letter after the one it sees: d e f a b c d e after the prefix.
    let prefix = [A, B, C, D, E, F, A, B, C];
    let setup = |guess_context| Setup {
        config: SamplerConfig {
            guess_context,
            ..causal_with_draft(None).config
        },
        ..causal_with_draft(None)
    };
    let plain = setup(false).run(&causal_letters(), &[canvas(&prefix, 8, &[])]);
    let out = setup(true).run(&causal_letters(), &[canvas(&prefix, 8, &[])]);
    assert_eq!(plain.tokens(), [vec![D, E, F, A, B, C, D, E]]);
    assert_eq!(out.tokens(), plain.tokens());
    assert_eq!(plain.calls.len(), 8);
    // Two tokens of lead (d e) are found in the context, whose next four (f a b c) the third
    // pass confirms with the model's own next token; the last slot takes a pass of its own.
    assert_eq!(
        out.committed(),
        [vec![0], vec![1], vec![2, 3, 4, 5, 6], vec![7]]
    );
    assert_eq!(
        out.calls[2].tokens[0][11..15],
        [F, A, B, C],
        "the guesses shown"
    );
}
