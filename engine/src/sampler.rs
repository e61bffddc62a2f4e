//! The diffusion sampler: fills the masked slots of one or more canvases over a few denoising
//! steps, committing several tokens per model call where the model is confident.
//!
//! Generic over [`Denoiser`] (token ids in, logits out), so it runs any model and is tested with
//! a scripted fake. What it implements:
//! - threshold parallel decoding (Fast-dLLM): commit every masked slot whose confidence reaches
//!   `tau`, at least one; or a fixed `k` per step; one per step is the quality ceiling;
//! - a step budget: each step commits at least `ceil(masked / steps_left)` so the canvas is full
//!   when the budget runs out;
//! - variable length as one decision: the masked slots at the right end that all vote for EOS
//!   (or pad) are committed together as the end of the middle, ranked by their least confident
//!   vote; EOS is suppressed until the middle holds a non-whitespace token and left of any
//!   committed token (an end never overwrites one);
//! - length during decoding: once the end is committed, later passes stop before it (the window
//!   shrinks); a canvas whose last slot receives a token grows by a block, up to its
//!   `max_length`;
//! - the approximate context cache (full pass, then window passes, optional refresh);
//! - cancellation between steps, a deadline (commit the argmax of what is left), a per-step
//!   stream of the canvas, greedy or seeded temperature sampling, batches of canvases;
//! - iteration-level batching ([`Batch`], in `sampler/batch.rs`): canvases join a running batch
//!   at the next step and leave when full or cancelled, each with its own config, generator,
//!   step budget, deadline and stream. [`Sampler::run`] is a batch every canvas joins at once.
//!
//! Where each part is: this file is the decoding (a step's votes, the actions taken on them,
//! commits, the end, growth); `config` the configuration ([`SamplerConfig`], [`Effort`],
//! [`CachePolicy`]); `model` the [`Denoiser`] interface and [`Pass`]es; `canvas` the canvases,
//! their views, the caller's [`Controls`] and draft alignment; `slots` a canvas's decoding
//! state; `speculation` guessing ahead on causal canvases; `batch` the running batch.

use std::ops::Range;
use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::Rng;

use crate::config::{DiffusionSettings, EditCanvas};
use crate::error::{Error, Result};

mod batch;
mod canvas;
mod config;
mod model;
mod slots;
mod speculation;

pub use batch::{
    step_together, Batch, CanvasStream, MemberControls, MemberId, MemberOutcome, PassStats,
};
pub use canvas::*;
pub use config::*;
pub use model::*;
use slots::*;
use speculation::*;

/// The sampler: the model-independent half of the engine.
#[derive(Clone, Copy)]
pub struct Sampler<'a> {
    settings: DiffusionSettings,
    /// Per token id: decodes to whitespace only (no content yet).
    whitespace: &'a [bool],
    /// Per token id: never committed to a canvas (markers and other special tokens).
    banned: &'a [bool],
    /// A token that ends the middle besides EOS and pad (see [`Sampler::ending_at`]).
    also_end: Option<u32>,
}

impl<'a> Sampler<'a> {
    /// `whitespace[id]` says whether a token is whitespace only (it may be empty, then every
    /// non-EOS token counts as content).
    pub fn new(settings: DiffusionSettings, whitespace: &'a [bool]) -> Sampler<'a> {
        Sampler {
            settings,
            whitespace,
            banned: &[],
            also_end: None,
        }
    }

    /// The same sampler, taking `token` as the end of the middle too (committed as an end, it
    /// fills the slots after it with EOS): what an autoregressive checkpoint writes when the
    /// text it was writing is over, such as Qwen2.5-Coder's `<|file_sep|>` after a file.
    pub fn ending_at(self, token: u32) -> Sampler<'a> {
        Sampler {
            also_end: Some(token),
            ..self
        }
    }

    /// The same sampler, never committing a token `banned[id]` marks: a middle or a rewritten
    /// region is text, and a marker the prompt holds (`<|cursor|>`, `<|fim_middle|>`) is not.
    pub fn banning(self, banned: &'a [bool]) -> Sampler<'a> {
        Sampler { banned, ..self }
    }

    /// The token sequence the model sees for `canvas` (BOS if the model uses one).
    pub fn sequence(&self, canvas: &Canvas) -> Vec<u32> {
        let mut seq =
            Vec::with_capacity(canvas.prefix.len() + canvas.length + canvas.suffix.len() + 1);
        seq.extend(self.settings.bos_token_id);
        seq.extend_from_slice(&canvas.prefix);
        seq.extend((0..canvas.length).map(|slot| self.uncommitted(&canvas.draft, slot)));
        seq.extend_from_slice(&canvas.suffix);
        seq
    }

    /// What an uncommitted slot shows the model: the mask, or for a model trained with
    /// [`EditCanvas::Draft`] the draft's token at that slot (the mask past its end).
    fn uncommitted(&self, draft: &[u32], slot: usize) -> u32 {
        match self.settings.edit_canvas {
            EditCanvas::Draft => draft.get(slot).copied(),
            EditCanvas::Masked => None,
        }
        .unwrap_or(self.settings.mask_token_id)
    }

    /// Fills every canvas of the batch in one run, sharing each model call: a [`Batch`] that
    /// every canvas joins before the first step, stepped until it is empty. Each canvas draws
    /// its samples from its own generator seeded with `config.seed`, so it gets the middle it
    /// would get alone.
    pub fn run<M: Denoiser>(
        &self,
        model: &M,
        cache: &mut M::Cache,
        canvases: &[Canvas],
        config: &SamplerConfig,
        mut controls: Controls<'_>,
    ) -> Result<Sampled> {
        if canvases.is_empty() {
            return Err(Error::InvalidRequest("no canvas to fill".into()));
        }
        // Each member's stream writes its view here; the batch-wide stream is assembled from
        // them after each step (a finished canvas shows its last view, nothing committed).
        let fresh: Mutex<Vec<Option<CanvasView>>> = Mutex::new(vec![None; canvases.len()]);
        let streaming = controls.on_step.is_some();
        let mut batch = self.batch(config.cache);
        if let Some(cancel) = controls.cancel {
            batch.cancel_on(cancel);
        }
        if let Some(interrupt) = controls.interrupt {
            batch.interrupt_on(interrupt);
        }
        let mut ids = Vec::with_capacity(canvases.len());
        for (index, canvas) in canvases.iter().enumerate() {
            let fresh = &fresh;
            let on_step = streaming.then(|| {
                Box::new(move |view: &CanvasView| {
                    fresh.lock().expect("stream slot")[index] = Some(view.clone());
                }) as CanvasStream<'_>
            });
            let stop = controls
                .stop
                .map(|rule| Box::new(move |lead: &[u32]| rule(lead)) as StopRule<'_>);
            let controls = MemberControls {
                cancel: None,
                deadline: controls.deadline,
                on_step,
                stop,
            };
            ids.push(batch.join(canvas, config.clone(), controls)?);
        }
        let mut infills: Vec<Option<Infill>> = vec![None; canvases.len()];
        let mut views: Vec<CanvasView> = Vec::new();
        let mut step = 0;
        while !batch.is_empty() {
            for (id, outcome) in batch.step(model, cache)? {
                let index = ids
                    .iter()
                    .position(|&i| i == id)
                    .expect("a member of this run");
                match outcome {
                    MemberOutcome::Filled { infill, .. } => infills[index] = Some(infill),
                    MemberOutcome::Cancelled => return Err(Error::Cancelled),
                }
            }
            if let Some(on_step) = controls.on_step.as_mut() {
                let mut fresh = fresh.lock().expect("stream slots");
                if fresh.iter().all(Option::is_none) {
                    // A piece of the prompt ([`CachePolicy::prompt_chunk`]): nothing to show.
                    continue;
                }
                if views.is_empty() {
                    views = fresh
                        .iter_mut()
                        .map(|v| v.take().expect("every canvas takes part in the first step"))
                        .collect();
                } else {
                    for (view, new) in views.iter_mut().zip(fresh.iter_mut()) {
                        match new.take() {
                            Some(new) => *view = new,
                            None => view.committed.clear(),
                        }
                    }
                }
                let denoised = DenoiseStep {
                    step,
                    canvases: std::mem::take(&mut views),
                };
                on_step(&denoised);
                views = denoised.canvases;
            }
            step += 1;
        }
        Ok(Sampled {
            infills: infills
                .into_iter()
                .map(|i| i.expect("every canvas finished"))
                .collect(),
            stats: batch.stats(),
        })
    }

    /// A batch that canvases join and leave between steps, sharing each model call (see
    /// [`Batch`]); `cache` is its policy for every member.
    pub fn batch(&self, cache: CachePolicy) -> Batch<'a> {
        Batch::new(*self, cache)
    }

    /// Rejects a canvas or a config the sampler cannot run, before any model call.
    fn validate(canvas: &Canvas, config: &SamplerConfig) -> Result<()> {
        if canvas.length == 0 {
            return Err(Error::InvalidRequest(format!(
                "a canvas needs at least one masked slot (prefix of {} tokens)",
                canvas.prefix.len()
            )));
        }
        if let Schedule::TopK { k: 0 } = config.schedule {
            return Err(Error::InvalidRequest("top-k schedule with k = 0".into()));
        }
        if config.max_steps == Some(0) {
            return Err(Error::InvalidRequest("max_steps is 0".into()));
        }
        Ok(())
    }

    /// The bookkeeping of `canvas` before its first step.
    fn slots(&self, canvas: &Canvas) -> Slots {
        let bos = usize::from(self.settings.bos_token_id.is_some());
        Slots {
            start: bos + canvas.prefix.len(),
            values: vec![None; canvas.length],
            probabilities: vec![0.0; canvas.length],
            max_length: canvas.max_length.max(canvas.length),
            growth: canvas.length.div_ceil(2),
            end: None,
            first_content: None,
            last_token: None,
            touched: Vec::new(),
            steps: 0,
            steps_at_end: None,
            block_steps: 0,
            stopped: false,
            lead_checked: 0,
            guesses: Vec::new(),
            draft_shift: 0,
            context: if canvas.draft.is_empty() && self.block() == Some(1) {
                canvas
                    .prefix
                    .iter()
                    .chain(&canvas.suffix)
                    .copied()
                    .collect()
            } else {
                Vec::new()
            },
            // A draft is mostly copied; a context only here and there.
            guess_limit: if canvas.draft.is_empty() {
                CONTEXT_GUESSES
            } else {
                SPECULATED
            },
            settled: 0,
            draft: if canvas.draft.is_empty() {
                Vec::new()
            } else {
                canvas
                    .draft
                    .iter()
                    .copied()
                    .chain([self.settings.eos_token_id])
                    .collect()
            },
        }
    }

    /// One denoising step of one canvas with masked slots, from its rows of the pass: votes,
    /// the schedule and the budget decide what is committed, then the canvas may grow and `seq`
    /// is brought up to date. The slots committed are left in `state.touched`, in order.
    fn advance(
        &self,
        state: &mut Slots,
        seq: &mut Vec<u32>,
        rows: Rows<'_>,
        config: &SamplerConfig,
        pressure: Pressure,
        rng: &mut StdRng,
    ) {
        let shift = self.settings.logit_shift;
        // Block decoding commits only in the block holding the first masked slot: later slots'
        // rows have not seen what this block will hold.
        let reach = self
            .block()
            .map_or(state.values.len(), |n| state.active_end(n));
        let masked = state.masked().filter(|&s| s < reach).count();
        debug_assert!(masked > 0, "a full canvas takes no step");
        let (forced, hit_deadline) = (pressure.forced(), pressure.past_deadline);
        let start = state.start;
        let row = |slot: usize| rows.at(logit_row(shift, start + slot));
        let mut votes: Vec<Choice> = state
            .masked()
            .filter(|&slot| slot < reach)
            .map(|slot| {
                self.choose(
                    row(slot),
                    slot,
                    state.end_votable(slot),
                    config,
                    hit_deadline,
                    rng,
                )
            })
            .collect();
        // Where the model sees the middle end before there is content, that slot takes its best
        // token instead and the slots after it wait: the middle is not empty.
        if let Some(i) = votes.iter().position(|v| self.is_end(v.token)) {
            let slot = votes[i].slot;
            if !state.end_allowed(slot) {
                votes[i] = self.choose(row(slot), slot, false, config, hit_deadline, rng);
                votes.truncate(i + 1);
            }
        }
        let copies = match config.draft_tau {
            Some(_) if !state.draft.is_empty() => self.draft_copies(state, &votes),
            _ => Vec::new(),
        };
        let mut actions = self.actions(votes, config, forced);
        // An action clears its bar: the schedule's threshold, or `draft_tau` for a copy of the
        // draft. Those that clear it go first, then by confidence.
        let clears = |a: &Action| {
            let copy = copies.get(a.slot).copied().unwrap_or(false);
            match (copy, config.draft_tau, config.schedule) {
                (true, Some(bar), _) => a.confidence >= bar,
                (_, _, Schedule::Threshold { tau }) => a.confidence >= tau,
                (_, _, Schedule::TopK { .. }) => false,
            }
        };
        actions.sort_by(|a, b| {
            clears(b)
                .cmp(&clears(a))
                .then(b.confidence.total_cmp(&a.confidence))
                .then(a.slot.cmp(&b.slot))
        });
        let take = if forced {
            actions.len()
        } else {
            let cleared = actions.iter().take_while(|a| clears(a)).count();
            let by_schedule = match config.schedule {
                Schedule::Threshold { .. } => cleared,
                Schedule::TopK { k } => k.max(cleared),
            };
            // The budget counts slots: an end fills many at once.
            let wanted = pressure.steps_left.map_or(1, |left| masked.div_ceil(left));
            let mut filled = 0;
            let by_budget = actions
                .iter()
                .take_while(|a| {
                    let more = filled < wanted;
                    filled += a.fills;
                    more
                })
                .count();
            by_schedule.max(by_budget).max(1)
        };
        let mut committed = Vec::new();
        for action in actions.into_iter().take(take) {
            committed.extend(self.commit(state, action.slot, action.token, action.probability));
        }
        // Guesses the pass confirmed are committed with it (see `speculate`).
        let settled = if forced {
            0
        } else {
            self.verify(state, &mut committed, rows, config, rng)
        };
        if forced {
            // A forced step leaves nothing masked within reach: the slots that waited for
            // content to their left (see the votes above) are filled left to right.
            while let Some(slot) = state.first_masked().filter(|&s| s < reach) {
                let choice =
                    self.choose(row(slot), slot, state.end_allowed(slot), config, true, rng);
                committed.extend(self.commit(state, slot, choice.token, choice.probability));
            }
            // Past the deadline, block decoding ends the middle after the block: the slots
            // beyond it have no rows that saw it.
            if hit_deadline {
                if let Some(slot) = state.first_masked() {
                    // Not the model's choice: an end it put no probability on.
                    committed.extend(self.commit(state, slot, self.settings.eos_token_id, 0.0));
                }
            }
        }
        state.steps += 1;
        state.block_steps += 1;
        if self.block().is_some() && state.first_masked().is_none_or(|s| s >= reach) {
            state.block_steps = 0;
        }
        if state.end.is_some() && state.steps_at_end.is_none() {
            state.steps_at_end = Some(state.steps);
        }
        // A budget-forced step ends only its block when decoding in blocks; the canvas may
        // still grow.
        if !forced || (self.block().is_some() && !hit_deadline) {
            self.grow(state, seq);
        }
        // The state's draft ends with the end it aligns to; the canvas shows only the draft.
        let draft = &state.draft[..state.draft.len().saturating_sub(1)];
        // A guessing causal canvas keeps showing old guesses past the new ones: no row reads
        // them, and the cache still holds them there, so the next pass is a window pass.
        let guessing = self.guess_source(state, config).is_some();
        for (slot, value) in state.values.iter().enumerate() {
            match value {
                Some(token) => seq[state.start + slot] = *token,
                None if guessing => {}
                None => seq[state.start + slot] = self.uncommitted(draft, slot),
            }
        }
        committed.sort_unstable();
        state.touched = committed;
        state.settled = settled;
        self.speculate(state, seq, config);
    }

    /// Positions the next pass must return: for every canvas with masked slots or slots
    /// committed in the last step, from the row that scores its first slot to its last such
    /// slot. A committed end (and a finished canvas) drops out one pass after it was committed,
    /// once the cache holds its tokens. `None` when no canvas needs a pass.
    ///
    /// Block decoding needs less: positions before the first masked or just-committed slot are
    /// exact in the cache (nothing before them changed, and they see nothing after them), and
    /// positions past the active block do not score it.
    fn window<'s>(&self, slots: impl Iterator<Item = &'s Slots>) -> Option<Range<usize>> {
        let shift = self.settings.logit_shift;
        slots
            .filter_map(|s| {
                let end = s.live_end()?;
                let Some(n) = self.block() else {
                    return Some((logit_row(shift, s.start), s.start + end));
                };
                // The rows scoring the active block's slots; the whole block, whose positions see
                // each other (blocks of 1 see nothing after them); and the slots committed last
                // step (recomputed so the cache holds their tokens).
                let scoring = s.first_masked().map(|first| {
                    // Guesses are scored too: the row after each one says whether it holds.
                    let last = (s.active_end(n) - 1).max(first + s.guesses.len());
                    let last = last.min(s.values.len() - 1);
                    let rows =
                        logit_row(shift, s.start + first)..logit_row(shift, s.start + last) + 1;
                    if n == 1 {
                        return rows;
                    }
                    let block = (s.start + first) / n * n..s.start + last + 1;
                    rows.start.min(block.start)..rows.end.max(block.end)
                });
                let touched = s
                    .touched
                    .iter()
                    .filter(|&&t| t >= s.settled)
                    .map(|&t| s.start + t..s.start + t + 1)
                    .reduce(|a, b| a.start.min(b.start)..a.end.max(b.end));
                let rows = match (scoring, touched) {
                    (Some(a), Some(b)) => a.start.min(b.start)..a.end.max(b.end),
                    (a, b) => a.or(b)?,
                };
                Some((rows.start, rows.end))
            })
            .fold(None, |range: Option<Range<usize>>, (start, end)| {
                Some(match range {
                    None => start..end,
                    Some(r) => r.start.min(start)..r.end.max(end),
                })
            })
    }

    /// One step's candidate commits from each masked slot's vote (in slot order): a token per
    /// slot voting for one inside the middle, and one end of the middle.
    ///
    /// Under EOS padding, slot j holding EOS means the middle ended at or before j, so a vote
    /// for the end at j is the model's confidence that the end lies there or earlier, and it
    /// decides every slot after j at once. A token voted past the first end vote lies outside
    /// the middle the model now sees; it waits (committed, it would pin the end after it, since
    /// an end never overwrites a token). Among the end votes (the candidates), the end goes to
    /// the leftmost whose vote clears `tau` (threshold schedule, something clears it), or, when
    /// it is the single most confident decision the step can take (top-k, or a threshold nothing
    /// clears), to the leftmost candidate surer than every token, and then over the unbroken run
    /// of end votes to its left: those slots would end the middle one per step otherwise. When
    /// no candidate is surer than every token, the most confident one is the action, ranked
    /// below them; in a forced step, the leftmost, which fills every slot after it.
    fn actions(&self, votes: Vec<Choice>, config: &SamplerConfig, forced: bool) -> Vec<Action> {
        let is_end = |v: &Choice| self.is_end(v.token);
        let first_end = votes.iter().position(is_end).unwrap_or(votes.len());
        let (tokens, ends) = votes.split_at(first_end);
        let best_token = most_confident(tokens.iter());
        let best_end = most_confident(ends.iter().filter(|v| is_end(v)));
        // (bar, whether the end spreads over the run of end votes to its left)
        let (bar, spread) = match config.schedule {
            _ if forced => (f32::NEG_INFINITY, false),
            Schedule::Threshold { tau } if best_token >= tau || best_end >= tau => (tau, false),
            Schedule::Threshold { .. } | Schedule::TopK { .. } => {
                (best_token.min(best_end), best_end >= best_token)
            }
        };
        let end = ends
            .iter()
            .position(|v| is_end(v) && v.confidence >= bar)
            .map(|anchor| {
                let mut first = anchor;
                while spread && first > 0 && is_end(&ends[first - 1]) {
                    first -= 1;
                }
                Action {
                    slot: ends[first].slot,
                    token: ends[first].token,
                    confidence: ends[anchor].confidence,
                    probability: ends[anchor].probability,
                    fills: ends.len() - first,
                }
            });
        tokens
            .iter()
            .map(|v| Action {
                slot: v.slot,
                token: v.token,
                confidence: v.confidence,
                probability: v.probability,
                fills: 1,
            })
            .chain(end)
            .collect()
    }

    /// Appends a block of masked slots when the model wrote a token in the last slot (the middle
    /// does not end inside the canvas), up to the canvas's `max_length`. Never in a forced step
    /// (the last of the budget, or past the deadline): those end the run.
    fn grow(&self, state: &mut Slots, seq: &mut Vec<u32>) {
        let last_holds_token = state
            .values
            .last()
            .copied()
            .flatten()
            .is_some_and(|t| !self.is_end(t));
        let room = state.max_length.saturating_sub(state.values.len());
        if !last_holds_token || room == 0 {
            return;
        }
        let added = state.growth.clamp(1, room);
        let at = state.start + state.values.len();
        seq.splice(
            at..at,
            std::iter::repeat_n(self.settings.mask_token_id, added),
        );
        state.values.extend(std::iter::repeat_n(None, added));
        state.probabilities.extend(std::iter::repeat_n(0.0, added));
    }

    /// The block size when the model attends in blocks (causal is blocks of 1): the sampler
    /// then decodes block by block.
    fn block(&self) -> Option<usize> {
        self.settings.attention.block()
    }

    fn is_end(&self, token: u32) -> bool {
        token == self.settings.eos_token_id
            || token == self.settings.pad_token_id
            || Some(token) == self.also_end
    }

    /// Picks the token for one slot and how confident the model is in it; the end tokens (EOS,
    /// pad) only where `end_allowed`.
    fn choose(
        &self,
        logits: &[f32],
        slot: usize,
        end_allowed: bool,
        config: &SamplerConfig,
        force_argmax: bool,
        rng: &mut StdRng,
    ) -> Choice {
        let suppressed = |id: usize| {
            id as u32 == self.settings.mask_token_id
                || self.banned.get(id).copied().unwrap_or(false)
                || (!end_allowed && self.is_end(id as u32))
        };
        // A temperature so small that its inverse is no f32 (below ~3e-39) samples as greedily
        // as it would in exact arithmetic.
        let temperature = if force_argmax || !(1.0 / config.temperature).is_finite() {
            0.0
        } else {
            config.temperature
        };
        let scale = if temperature > 0.0 {
            1.0 / temperature
        } else {
            1.0
        };
        let untempered = scale != 1.0;
        let raw_max = logits
            .iter()
            .enumerate()
            .filter(|(id, _)| !suppressed(*id))
            .fold(f32::NEG_INFINITY, |m, (_, &l)| m.max(l));
        // The tempered distribution from each logit's distance to the model's own maximum, so a
        // large scale cannot overflow (the maximum's exponent is 0 at any temperature), and
        // the model's own total (temperature 1) in the same pass, for the probability a
        // committed token reports.
        let mut raw_total = 0.0f32;
        let mut probs: Vec<f32> = logits
            .iter()
            .enumerate()
            .map(|(id, &l)| {
                if suppressed(id) {
                    0.0
                } else {
                    if untempered {
                        raw_total += (l - raw_max).exp();
                    }
                    ((l - raw_max) * scale).exp()
                }
            })
            .collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        let argmax = |probs: &[f32]| {
            probs
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |best, (id, &p)| {
                    if p > best.1 {
                        (id, p)
                    } else {
                        best
                    }
                })
                .0
        };
        let token = if temperature > 0.0 {
            let mut u: f32 = rng.random();
            let mut pick = argmax(&probs);
            for (id, &p) in probs.iter().enumerate() {
                if u < p {
                    pick = id;
                    break;
                }
                u -= p;
            }
            pick
        } else {
            argmax(&probs)
        };
        let confidence = match config.confidence {
            Confidence::Probability => probs[token],
            Confidence::Margin => {
                let (mut first, mut second) = (0.0f32, 0.0f32);
                for &p in &probs {
                    if p > first {
                        second = first;
                        first = p;
                    } else if p > second {
                        second = p;
                    }
                }
                first - second
            }
            Confidence::NegEntropy => probs
                .iter()
                .filter(|&&p| p > 0.0)
                .map(|&p| p * p.ln())
                .sum::<f32>(),
        };
        // The model's own probability of the token (at temperature 1), whatever temperature it
        // was sampled at: what a confidence bar is tuned on and compared with.
        let probability = if untempered && !suppressed(token) {
            (logits[token] - raw_max).exp() / raw_total
        } else {
            probs[token]
        };
        Choice {
            slot,
            token: token as u32,
            confidence,
            probability,
        }
    }

    /// Ends `state`'s middle after its committed lead when `rule` says the lead decides it:
    /// every masked slot is filled with EOS (and counted as touched, so the step's view shows
    /// the end). Whether it stopped.
    fn stop(&self, state: &mut Slots, rule: &StopFn<'_>) -> bool {
        let lead = state.lead();
        if state.is_done() || lead.len() <= state.lead_checked {
            return false;
        }
        let tokens: Vec<u32> = lead.iter().flatten().copied().collect();
        if !rule(&tokens) {
            state.lead_checked = tokens.len();
            return false;
        }
        state.end = Some(tokens.len());
        for (slot, value) in state.values.iter_mut().enumerate() {
            if value.is_none() {
                *value = Some(self.settings.eos_token_id);
                state.touched.push(slot);
            }
        }
        state.stopped = true;
        true
    }

    /// Commits `token` at `slot`, which the model gave `probability`; an end token also fills
    /// every slot after it with EOS. Returns the slots filled.
    fn commit(&self, state: &mut Slots, slot: usize, token: u32, probability: f32) -> Vec<usize> {
        let mut filled = vec![slot];
        state.values[slot] = Some(token);
        state.probabilities[slot] = probability;
        if self.is_end(token) {
            debug_assert!(
                state.last_token.is_none_or(|t| t < slot),
                "an end at slot {slot} would overwrite the token at {:?}",
                state.last_token
            );
            state.end = Some(state.end.map_or(slot, |e| e.min(slot)));
            for (later, value) in state.values.iter_mut().enumerate().skip(slot + 1) {
                if value.is_none() {
                    *value = Some(self.settings.eos_token_id);
                    filled.push(later);
                }
            }
        } else {
            state.last_token = Some(state.last_token.map_or(slot, |t| t.max(slot)));
            if !self
                .whitespace
                .get(token as usize)
                .copied()
                .unwrap_or(false)
            {
                state.first_content = Some(state.first_content.map_or(slot, |c| c.min(slot)));
            }
        }
        filled
    }
}

/// The highest confidence among `votes`; minus infinity for none.
fn most_confident<'a>(votes: impl Iterator<Item = &'a Choice>) -> f32 {
    votes
        .map(|v| v.confidence)
        .fold(f32::NEG_INFINITY, f32::max)
}

fn view(state: &Slots, committed: Vec<usize>) -> CanvasView {
    CanvasView {
        slots: state.values.clone(),
        committed,
    }
}
