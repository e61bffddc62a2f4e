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

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::config::{DiffusionSettings, EditCanvas};
use crate::error::{Error, Result};

mod batch;

pub use batch::{
    step_together, Batch, CanvasStream, MemberControls, MemberId, MemberOutcome, PassStats,
};

/// Which positions a forward pass recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Every position; when `store` is set, the cache is refilled from this pass.
    Full { store: bool },
    /// Only the window; every other position comes from the cache of the last stored pass.
    Window,
    /// A stored pass over tokens that differ from the cached ones by edits: the cache is
    /// realigned with them (runs of unchanged tokens keep their keys/values, moved ones with
    /// their keys re-rotated to the new positions) and only `radius` tokens on each side of
    /// each change and the window are recomputed. Approximate wherever a kept position attends
    /// to a changed one (see [`EditReuse`]).
    Edit { radius: usize },
}

/// A model as the sampler sees it.
pub trait Denoiser {
    /// Whatever the model keeps between passes (keys/values); owned by the caller.
    type Cache: Default;

    fn vocab_size(&self) -> usize;

    /// Logits for positions `window` of every sequence, row-major `[batch][window][vocab]`.
    /// Row j is the model's output at position j (no shift applied).
    fn logits(
        &self,
        tokens: &[Vec<u32>],
        window: Range<usize>,
        cache: &mut Self::Cache,
        pass: Pass,
    ) -> Result<Vec<f32>>;

    /// The logits of several independent calls (each its own sequences, window, cache and
    /// pass), in order: what [`Denoiser::logits`] gives each alone. A model that can serve them
    /// in one pass (sharing its weights' trip through memory) says so here; the default makes
    /// the calls one after the other. An error fails them all.
    fn logits_many(&self, calls: &mut [ModelCall<'_, Self::Cache>]) -> Result<Vec<Vec<f32>>> {
        calls
            .iter_mut()
            .map(|call| self.logits(call.tokens, call.window.clone(), call.cache, call.pass))
            .collect()
    }

    /// Whether `cache` holds a stored pass that a window pass over `tokens` may reuse.
    fn cache_covers(&self, cache: &Self::Cache, tokens: &[Vec<u32>], window: &Range<usize>)
        -> bool;

    /// Whether a [`Pass::Edit`] over `tokens` may start from `cache` under `reuse`: the cache
    /// holds a pass over tokens these differ from by edits, it has taken fewer than
    /// `reuse.refresh_after` approximate passes since its last exact one, and realigning it
    /// keeps positions an exact stored pass could not. A model that cannot realign its cache
    /// says no (the default), and the sampler makes a stored full pass instead.
    fn cache_realigns(
        &self,
        _cache: &Self::Cache,
        _tokens: &[Vec<u32>],
        _window: &Range<usize>,
        _reuse: EditReuse,
    ) -> bool {
        false
    }

    /// How many leading positions of every sequence a stored full pass over `tokens` would
    /// take from `cache` as they are, when the model can compute a prompt in pieces (causal
    /// or block-causal attention: a position reads only what precedes it, so stored pieces
    /// are what one pass computes); `None` when it cannot (the default: bidirectional
    /// attention reads every position from every other).
    fn stored_prefix(
        &self,
        _cache: &Self::Cache,
        _tokens: &[Vec<u32>],
        _window: &Range<usize>,
    ) -> Option<usize> {
        None
    }
}

/// One call of [`Denoiser::logits_many`]: the arguments of [`Denoiser::logits`].
pub struct ModelCall<'a, C> {
    pub tokens: &'a [Vec<u32>],
    pub window: Range<usize>,
    pub cache: &'a mut C,
    pub pass: Pass,
}

/// The row whose logits score the token at `position`: Dream-style models (shift) read the
/// hidden state one to the left; position 0 keeps its own.
pub fn score_row(logit_shift: bool, position: usize) -> usize {
    if logit_shift {
        position.saturating_sub(1)
    } else {
        position
    }
}

/// What "confident" means when choosing which slots to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    /// Probability of the chosen token.
    Probability,
    /// Top-1 minus top-2 probability.
    Margin,
    /// Negative entropy of the slot's distribution, in nats (0 is certain).
    NegEntropy,
}

/// How many slots a step commits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Schedule {
    /// Every slot whose confidence is at least `tau`, and at least one.
    Threshold { tau: f32 },
    /// The `k` most confident slots.
    TopK { k: usize },
}

/// The approximate context cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachePolicy {
    pub enabled: bool,
    /// Recompute every position (and refill the cache) every this many steps.
    pub refresh_every: Option<usize>,
    /// Reuse of a caller's cache across an edit of the context ([`Pass::Edit`]); `None`: a
    /// changed context costs a stored full pass (exact).
    #[serde(default)]
    pub edit: Option<EditReuse>,
    /// A stored full pass computes at most this many positions past those it takes from the
    /// cache: a longer prompt is computed over several passes first, steps in which no slot
    /// commits ([`Denoiser::stored_prefix`]: causal and block-causal models only). Between
    /// them a cancel is seen, and in a model call shared with other requests a new prompt
    /// costs the others one piece's rows a step instead of all of its rows at once. `None`:
    /// one pass.
    #[serde(default)]
    pub prompt_chunk: Option<usize>,
}

/// How a request's first pass reuses a cache whose tokens differ from the request's by edits
/// (a keystroke): positions in unchanged runs keep their cached keys/values (moved ones
/// re-rotated to their new positions), `radius` tokens on each side of each change and the
/// window are recomputed. Before the first change of a causal or block-causal model that is
/// exact; everywhere else the kept positions attended to the old tokens, which is the
/// approximation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditReuse {
    /// Tokens recomputed on each side of each changed run.
    pub radius: usize,
    /// Approximate passes a cache may take in a row: the request after that many pays an exact
    /// stored full pass (0: never approximate).
    pub refresh_after: usize,
}

impl EditReuse {
    /// The shipped setting (docs/reports/real-weights/keystroke.md): on the real 0.5B at 1k tokens
    /// a keystroke's first pass costs about 2x a cached step at radius 8 (1.5x at 4, 2.5x at
    /// 16); on the default model 93% of HumanEval single-line middles after three keystrokes are
    /// the exact pass's (90% at 4, 96% at 16).
    pub const DEFAULT: EditReuse = EditReuse {
        radius: 8,
        refresh_after: 8,
    };
}

/// Quality/speed presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effort {
    Low,
    Medium,
    High,
}

impl std::str::FromStr for Effort {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Effort, String> {
        match s {
            "low" => Ok(Effort::Low),
            "medium" => Ok(Effort::Medium),
            "high" => Ok(Effort::High),
            other => Err(format!("unknown effort `{other}` (low, medium or high)")),
        }
    }
}

/// Everything that decides how the sampler decodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerConfig {
    pub schedule: Schedule,
    pub confidence: Confidence,
    /// Cap on denoising steps (model calls) per request; `None`: as many as there are slots.
    pub max_steps: Option<usize>,
    /// 0 is greedy.
    pub temperature: f32,
    pub seed: u64,
    pub cache: CachePolicy,
    /// The bar for a slot whose vote agrees with the canvas's [`Canvas::draft`] (the text it
    /// rewrites), in place of the schedule's: a copied token is committed once the model is
    /// this sure of it. `None`: drafts are ignored.
    #[serde(default)]
    pub draft_tau: Option<f32>,
    /// Causal greedy decoding of a canvas without a draft guesses its next tokens from the
    /// request's own context, where the lead's last tokens occur there (prompt lookup; see
    /// `Sampler::speculate`): fewer passes, the same tokens.
    #[serde(default)]
    pub guess_context: bool,
}

impl SamplerConfig {
    /// The presets behind `--effort`: fewer steps and a lower bar at `low`, one token per step
    /// (the quality ceiling) at `high`.
    pub fn effort(effort: Effort) -> SamplerConfig {
        let (schedule, max_steps) = match effort {
            // Measured on the default model (scripts/decoding-bench, docs/performance.md "Decoding"): a step
            // cap that makes weak slots commit several per step wrote better middles than
            // waiting for confidence, at a third of the forward passes.
            Effort::Low => (Schedule::Threshold { tau: 0.7 }, Some(4)),
            Effort::Medium => (Schedule::Threshold { tau: 0.9 }, Some(8)),
            Effort::High => (Schedule::TopK { k: 1 }, None),
        };
        SamplerConfig {
            schedule,
            confidence: Confidence::Probability,
            max_steps,
            temperature: 0.0,
            seed: 0,
            cache: CachePolicy {
                enabled: true,
                refresh_every: None,
                edit: Some(EditReuse::DEFAULT),
                prompt_chunk: None,
            },
            draft_tau: None,
            guess_context: true,
        }
    }
}

impl Default for SamplerConfig {
    fn default() -> SamplerConfig {
        SamplerConfig::effort(Effort::Medium)
    }
}

/// One infilling request: `prefix`, `length` masked slots, `suffix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canvas {
    pub prefix: Vec<u32>,
    /// Masked slots laid down at the start (the length prior).
    pub length: usize,
    pub suffix: Vec<u32>,
    /// The most slots the canvas may grow to when the model writes up to its last slot;
    /// `length` (or less) never grows.
    pub max_length: usize,
    /// Tokens the middle is expected to mostly repeat (a next edit's old region); empty for a
    /// plain infill. See [`SamplerConfig::draft_tau`].
    pub draft: Vec<u32>,
}

impl Canvas {
    /// A canvas of `length` slots that never grows.
    pub fn new(prefix: Vec<u32>, length: usize, suffix: Vec<u32>) -> Canvas {
        Canvas {
            prefix,
            length,
            suffix,
            max_length: length,
            draft: Vec::new(),
        }
    }

    /// The same canvas, allowed to grow to `max_length` slots.
    pub fn growing_to(self, max_length: usize) -> Canvas {
        Canvas { max_length, ..self }
    }

    /// The same canvas, expected to repeat much of `draft`.
    pub fn with_draft(self, draft: Vec<u32>) -> Canvas {
        Canvas { draft, ..self }
    }
}

/// The state of one canvas after a denoising step (for streaming the "diffusing" view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanvasView {
    /// Each slot's token, `None` while still masked; longer after the canvas grew.
    pub slots: Vec<Option<u32>>,
    /// Slots committed in this step (an end commits the whole run of EOS after it).
    pub committed: Vec<usize>,
}

/// What the stream callback sees after each step.
#[derive(Debug, Clone)]
pub struct DenoiseStep {
    pub step: usize,
    pub canvases: Vec<CanvasView>,
}

/// How a run is steered from outside: cancellation, a deadline and the per-step stream.
#[derive(Default)]
pub struct Controls<'a> {
    pub cancel: Option<&'a AtomicBool>,
    pub deadline: Option<Instant>,
    pub on_step: Option<&'a mut dyn FnMut(&DenoiseStep)>,
    /// Every canvas's stop rule ([`StopRule`]).
    pub stop: Option<&'a StopFn<'a>>,
}

/// Says of a canvas's committed lead (its tokens from slot 0 up to the first masked slot or the
/// end) whether it already decides what the caller makes of the middle: then the canvas ends
/// there, at the step that committed it, instead of spending passes on slots whose tokens
/// would be thrown away (a line completion cut at its line's end). The lead never changes
/// once committed, so a rule that decides on it alone changes no finished result.
pub type StopRule<'s> = Box<dyn Fn(&[u32]) -> bool + Send + Sync + 's>;

/// A borrowed stop rule ([`StopRule`]), as [`Controls`] carry it.
pub type StopFn<'a> = dyn Fn(&[u32]) -> bool + Sync + 'a;

/// The filled middle of one canvas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Infill {
    /// Tokens before the first EOS.
    pub tokens: Vec<u32>,
    /// Whether the model ended the middle with EOS before the canvas ran out.
    pub ended_by_eos: bool,
    /// Steps in which this canvas committed something.
    pub steps: usize,
    /// Slots the canvas had at the end (its length plus what it grew by).
    pub slots: usize,
    /// Steps this canvas committed something in after the one that first committed its end:
    /// the work left once the length was decided (`None` without an end).
    pub steps_after_end: Option<usize>,
    /// Whether a stop rule ended the middle after its committed lead (`ended_by_eos` is then
    /// false).
    pub stopped: bool,
}

/// The outcome of a run over a batch of canvases.
#[derive(Debug, Clone, Serialize)]
pub struct Sampled {
    pub infills: Vec<Infill>,
    /// The run's model calls, as a [`Batch`] counts them (positions summed over the batch's
    /// calls: what the window shrinking saves shows there).
    pub stats: PassStats,
}

impl Sampled {
    /// Slots of canvas `index` (EOS padding included) committed per model call.
    pub fn tokens_per_forward(&self, index: usize) -> f64 {
        self.infills[index].slots as f64 / self.stats.forwards.max(1) as f64
    }
}

/// Per-canvas bookkeeping during a run.
struct Slots {
    /// Absolute position of slot 0 in the sequence.
    start: usize,
    values: Vec<Option<u32>>,
    max_length: usize,
    /// Slots added at a time when the canvas grows.
    growth: usize,
    /// First slot holding EOS or pad.
    end: Option<usize>,
    /// Leftmost slot holding a non-whitespace token: the middle may end only to its right, so
    /// it is never empty.
    first_content: Option<usize>,
    /// Rightmost slot holding anything but EOS or pad: the middle may end only to its right, so
    /// an end never overwrites a committed token.
    last_token: Option<usize>,
    /// Slots committed in the last step: the next pass still recomputes them, so the cache
    /// holds their new tokens before the window leaves them.
    touched: Vec<usize>,
    steps: usize,
    /// `steps` when the end was first committed.
    steps_at_end: Option<usize>,
    /// The canvas's draft followed by the end (EOS), or empty.
    draft: Vec<u32>,
    /// Block decoding: steps taken in the current block (the step budget is per block).
    block_steps: usize,
    /// A stop rule ended the middle at `end`.
    stopped: bool,
    /// Length of the longest lead the stop rule has said no to: it is asked again only once
    /// the lead grows.
    lead_checked: usize,
    /// Causal decoding with a draft (see `Sampler::speculate`): the tokens the slots from the
    /// first masked one show the next pass, the draft's continuation of what is committed.
    guesses: Vec<u32>,
    /// Draft position minus slot where the lead last copied the draft (see [`draft_position`]).
    draft_shift: isize,
    /// The tokens around the canvas (prefix, then suffix) a causal canvas without a draft
    /// guesses from; empty otherwise.
    context: Vec<u32>,
    /// Guesses the next pass shows at most: doubled after a pass confirmed them all, cut to
    /// twice what a pass confirmed otherwise (a row costs little, but not nothing).
    guess_limit: usize,
    /// Touched slots before this one had their rows computed with the token they now hold
    /// (accepted guesses): the next pass need not recompute them.
    settled: usize,
}

impl Slots {
    /// The first masked slot.
    fn first_masked(&self) -> Option<usize> {
        self.values.iter().position(Option::is_none)
    }

    /// Block decoding with blocks of `block` positions: one past the last slot of the block
    /// holding the first masked slot (the only block a step may commit in), clipped to the
    /// canvas. Blocks are counted in absolute positions, as the attention pattern counts them.
    fn active_end(&self, block: usize) -> usize {
        let first = self.first_masked().unwrap_or(self.values.len());
        let end = ((self.start + first) / block + 1) * block;
        (end - self.start).min(self.values.len())
    }

    fn masked(&self) -> impl Iterator<Item = usize> + '_ {
        self.values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_none())
            .map(|(i, _)| i)
    }

    fn is_done(&self) -> bool {
        self.values.iter().all(Option::is_some)
    }

    /// Whether the end may be committed at `slot`: after content (the middle is not empty), and
    /// after every committed token.
    fn end_allowed(&self, slot: usize) -> bool {
        self.first_content.is_some_and(|c| c < slot) && self.end_votable(slot)
    }

    /// Whether `slot` may vote for the end: not left of a committed token (an end there would
    /// overwrite it).
    fn end_votable(&self, slot: usize) -> bool {
        self.last_token.is_none_or(|t| t < slot)
    }

    /// The middle of a full canvas.
    fn infill(&self) -> Infill {
        let end = self.end.unwrap_or(self.values.len());
        Infill {
            tokens: self.values[..end]
                .iter()
                .map(|v| v.expect("all slots filled"))
                .collect(),
            ended_by_eos: self.end.is_some() && !self.stopped,
            steps: self.steps,
            slots: self.values.len(),
            steps_after_end: self.steps_at_end.map(|at| self.steps - at),
            stopped: self.stopped,
        }
    }

    /// The committed slots from slot 0 up to the first masked slot or the end.
    fn lead(&self) -> &[Option<u32>] {
        let end = self.end.unwrap_or(self.values.len());
        let len = self.values[..end]
            .iter()
            .take_while(|v| v.is_some())
            .count();
        &self.values[..len]
    }

    /// One past the last slot the next pass must recompute: the last masked or just-committed
    /// slot (an end committed earlier lies beyond it, so later passes are shorter).
    fn live_end(&self) -> Option<usize> {
        let masked = self.values.iter().rposition(Option::is_none);
        let touched = self.touched.iter().max().copied();
        masked.max(touched).map(|last| last + 1)
    }
}

/// A candidate commit for one slot.
struct Choice {
    slot: usize,
    token: u32,
    confidence: f32,
}

/// What one step may commit in a canvas: a token in one slot, or the end of the middle, which
/// fills every masked slot after `slot` with EOS at once.
struct Action {
    slot: usize,
    token: u32,
    confidence: f32,
    /// Slots this action fills.
    fills: usize,
}

/// One canvas's rows of a pass's logits: row j is position `first + j`.
#[derive(Clone, Copy)]
struct Rows<'l> {
    logits: &'l [f32],
    first: usize,
    vocab: usize,
}

impl<'l> Rows<'l> {
    fn at(&self, position: usize) -> &'l [f32] {
        let row = position - self.first;
        &self.logits[row * self.vocab..(row + 1) * self.vocab]
    }
}

/// Where a canvas stands against its limits in a step.
#[derive(Clone, Copy)]
struct Pressure {
    /// Past the deadline: commit the argmax of everything left.
    past_deadline: bool,
    /// Steps left in the budget, this one included; `None` without a cap.
    steps_left: Option<usize>,
}

impl Pressure {
    /// The last step this canvas gets: everything left is committed.
    fn forced(&self) -> bool {
        self.past_deadline || self.steps_left == Some(1)
    }
}

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
            if controls.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(Error::Cancelled);
            }
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
        let row = |slot: usize| rows.at(score_row(shift, start + slot));
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
            committed.extend(self.commit(state, action.slot, action.token));
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
                committed.extend(self.commit(state, slot, choice.token));
            }
            // Past the deadline, block decoding ends the middle after the block: the slots
            // beyond it have no rows that saw it.
            if hit_deadline {
                if let Some(slot) = state.first_masked() {
                    committed.extend(self.commit(state, slot, self.settings.eos_token_id));
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

    /// Guessing, for causal greedy decoding (n-gram speculative decoding): after the committed
    /// lead, the canvas shows the tokens its source says come next, up to [`SPECULATED`] (fewer
    /// after a pass that confirmed few: `Slots::guess_limit`), so one pass scores them all and
    /// [`Self::verify`] commits every guess the model would have written itself. The source is
    /// the canvas's draft (a next edit's old region, with drafts on: `draft_tau`), followed
    /// through the lead by [`draft_position`], so a rewrite that is mostly copies takes a pass
    /// per change, not per token; without a draft, the request's own context
    /// (`guess_context`, [`context_position`]). Each row sees only the guesses before it, so a
    /// confirmed guess's token is the one a pass per token would commit: greedy results do not
    /// change, only the number of passes.
    fn speculate(&self, state: &mut Slots, seq: &mut [u32], config: &SamplerConfig) {
        state.guesses.clear();
        let Some(source) = self.guess_source(state, config) else {
            return;
        };
        let Some(first) = state.first_masked() else {
            return;
        };
        if state.values[first..].iter().any(Option::is_some) {
            return;
        }
        // Both lookups read only the lead's length and its last three tokens.
        let mut last = [0u32; 3];
        let n = first.min(3);
        for (token, value) in last.iter_mut().zip(&state.values[first - n..first]) {
            *token = value.expect("causal decoding commits left to right");
        }
        let tail = &last[..n];
        let (tokens, at) = match source {
            GuessSource::Draft => {
                let (at, shift) = draft_position(first, tail, &state.draft, state.draft_shift);
                state.draft_shift = shift;
                (&state.draft, at)
            }
            GuessSource::Context => match context_position(tail, &state.context) {
                Some(at) => (&state.context, at),
                None => return,
            },
        };
        let room = state.values.len() - first;
        state.guesses = tokens[at..]
            .iter()
            .copied()
            .take(state.guess_limit.min(room.saturating_sub(1)))
            .collect();
        for (i, &guess) in state.guesses.iter().enumerate() {
            seq[state.start + first + i] = guess;
        }
    }

    /// Where `state`'s guesses come from, if it is a causal canvas decoded greedily that
    /// guesses (see [`Self::speculate`]): its draft when drafts are on, else its context.
    fn guess_source(&self, state: &Slots, config: &SamplerConfig) -> Option<GuessSource> {
        if self.block() != Some(1) || config.temperature > 0.0 {
            return None;
        }
        if !state.draft.is_empty() && config.draft_tau.is_some() {
            Some(GuessSource::Draft)
        } else if !state.context.is_empty() && config.guess_context {
            Some(GuessSource::Context)
        } else {
            None
        }
    }

    /// Commits, after the step's own commit, each guessed slot whose row saw only confirmed
    /// guesses and the committed lead: while the token committed at a slot equals its guess,
    /// the next slot's row is what a pass after that commit would give, so its choice is
    /// committed too. Returns the first slot whose row the pass did not compute with its final
    /// token (the slots before it are settled in the cache).
    fn verify(
        &self,
        state: &mut Slots,
        committed: &mut Vec<usize>,
        rows: Rows<'_>,
        config: &SamplerConfig,
        rng: &mut StdRng,
    ) -> usize {
        let guesses = std::mem::take(&mut state.guesses);
        let Some(&first) = committed.first().filter(|_| !guesses.is_empty()) else {
            return 0;
        };
        let mut slot = first;
        let mut confirmed = 0;
        for (i, &guess) in guesses.iter().enumerate() {
            let next = first + i + 1;
            if state.values[slot] != Some(guess) {
                break;
            }
            confirmed += 1;
            if self.is_end(guess) || next >= state.values.len() || state.values[next].is_some() {
                break;
            }
            let row = rows.at(score_row(self.settings.logit_shift, state.start + next));
            let choice = self.choose(row, next, state.end_allowed(next), config, false, rng);
            committed.extend(self.commit(state, next, choice.token));
            slot = next;
        }
        state.guess_limit = if confirmed == guesses.len() {
            2 * state.guess_limit
        } else {
            2 * confirmed
        }
        .clamp(2, SPECULATED);
        // Slot `slot`'s row was computed with its guess (or a mask); it and what follows are
        // recomputed by the next pass.
        slot
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
                    return Some((score_row(shift, s.start), s.start + end));
                };
                // The rows scoring the active block's slots; the whole block, whose positions see
                // each other (blocks of 1 see nothing after them); and the slots committed last
                // step (recomputed so the cache holds their tokens).
                let scoring = s.first_masked().map(|first| {
                    // Guesses are scored too: the row after each one says whether it holds.
                    let last = (s.active_end(n) - 1).max(first + s.guesses.len());
                    let last = last.min(s.values.len() - 1);
                    let rows =
                        score_row(shift, s.start + first)..score_row(shift, s.start + last) + 1;
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

    /// Which slots' votes copy the draft: the canvas as it would read with every vote taken
    /// (committed slots, then each masked slot's vote; EOS after the first end vote), aligned to
    /// the draft plus its end by a longest common subsequence. A masked slot copies when its
    /// vote is aligned and so is a neighbour, each to the next draft token: one aligned token
    /// alone is too often a coincidence (whitespace, a bracket). Indexed by slot.
    fn draft_copies(&self, state: &Slots, votes: &[Choice]) -> Vec<bool> {
        let mut guess: Vec<u32> = state
            .values
            .iter()
            .map(|v| v.unwrap_or(self.settings.mask_token_id))
            .collect();
        let mut ended = false;
        for vote in votes {
            guess[vote.slot] = if ended {
                self.settings.eos_token_id
            } else {
                vote.token
            };
            ended |= self.is_end(vote.token);
        }
        // Only the first end counts: the draft ends once.
        if let Some(end) = guess.iter().position(|&t| self.is_end(t)) {
            guess.truncate(end + 1);
            guess[end] = self.settings.eos_token_id;
        }
        let pairs = lcs_pairs(&guess, &state.draft);
        let mut aligned = vec![None; state.values.len()];
        for &(slot, at) in &pairs {
            aligned[slot] = Some(at);
        }
        let follows = |a: usize, b: usize| match (aligned[a], aligned[b]) {
            (Some(x), Some(y)) => y == x + 1,
            _ => false,
        };
        (0..state.values.len())
            .map(|slot| {
                state.values[slot].is_none()
                    && aligned[slot].is_some()
                    && ((slot > 0 && follows(slot - 1, slot))
                        || (slot + 1 < aligned.len() && follows(slot, slot + 1)))
            })
            .collect()
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
                    fills: ends.len() - first,
                }
            });
        tokens
            .iter()
            .map(|v| Action {
                slot: v.slot,
                token: v.token,
                confidence: v.confidence,
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
        let temperature = if force_argmax {
            0.0
        } else {
            config.temperature
        };
        let scale = if temperature > 0.0 {
            1.0 / temperature
        } else {
            1.0
        };
        let max = logits
            .iter()
            .enumerate()
            .filter(|(id, _)| !suppressed(*id))
            .map(|(_, &l)| l * scale)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut probs: Vec<f32> = logits
            .iter()
            .enumerate()
            .map(|(id, &l)| {
                if suppressed(id) {
                    0.0
                } else {
                    (l * scale - max).exp()
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
        Choice {
            slot,
            token: token as u32,
            confidence,
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

    /// Commits `token` at `slot`; an end token also fills every slot after it with EOS. Returns
    /// the slots filled.
    fn commit(&self, state: &mut Slots, slot: usize, token: u32) -> Vec<usize> {
        let mut filled = vec![slot];
        state.values[slot] = Some(token);
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

/// Guesses a causal canvas shows a pass at most (see `Sampler::speculate`). On the 2-core
/// CPU a pass over 17 rows of the 0.5B Q4_K_M costs about 2.9 times one over a single row
/// (docs/reports/real-weights/next-edit.md), so guesses pay when the model copies and the limit
/// shrinks while it does not; a run of copies longer than this takes another pass.
pub const SPECULATED: usize = 16;

/// Guesses a causal canvas without a draft starts from (see [`SamplerConfig::guess_context`]):
/// its context repeats only here and there, and a pass over few rows costs about one over one.
pub const CONTEXT_GUESSES: usize = 4;

/// Where in `context` the slot after the lead may continue from: after the last occurrence of
/// the lead's last three or two tokens (`tail`, its last three or fewer; the occurrence nearest
/// the canvas: the context is the prefix and then the suffix), or `None`. A single token is too
/// common a match to guess from.
fn context_position(tail: &[u32], context: &[u32]) -> Option<usize> {
    (2..=tail.len()).rev().find_map(|n| {
        let tail = &tail[tail.len() - n..];
        context
            .windows(n)
            .rposition(|w| w == tail)
            .map(|i| i + n)
            .filter(|&end| end < context.len())
    })
}

/// Where in `draft` the slot after a lead of `lead` tokens is expected to copy from, and the
/// shift between slots and draft positions that says so (`shift`: the one found for an earlier
/// lead). The lead's last three, two or one tokens (`tail`) are looked up in the draft, the occurrence nearest
/// where the shift expects it winning, so copying goes on, and an insertion or deletion
/// resynchronises once the lead copies again; with none (a token the draft does not have),
/// the shift stays: the draft is assumed to go on after a substitution.
fn draft_position(lead: usize, tail: &[u32], draft: &[u32], shift: isize) -> (usize, isize) {
    let expected = (lead as isize + shift).clamp(0, draft.len() as isize) as usize;
    for n in (1..=tail.len()).rev() {
        let tail = &tail[tail.len() - n..];
        let nearest = draft
            .windows(n)
            .enumerate()
            .filter(|(_, w)| *w == tail)
            .map(|(i, _)| i + n)
            .min_by_key(|&end| end.abs_diff(expected));
        if let Some(end) = nearest {
            return (end, end as isize - lead as isize);
        }
    }
    (expected, shift)
}

/// What a guessing canvas guesses from (see [`Sampler::speculate`]).
#[derive(Clone, Copy)]
enum GuessSource {
    Draft,
    Context,
}

/// The matched index pairs of a longest common subsequence of `a` and `b`, in order (ties go to
/// the earliest match in `b`). Quadratic: canvases and drafts are a few hundred tokens.
fn lcs_pairs(a: &[u32], b: &[u32]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    // lengths[i][j]: LCS of a[i..] and b[j..].
    let mut lengths = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lengths[at(i, j)] = if a[i] == b[j] {
                lengths[at(i + 1, j + 1)] + 1
            } else {
                lengths[at(i + 1, j)].max(lengths[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut pairs = Vec::new();
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if lengths[at(i + 1, j)] >= lengths[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
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
