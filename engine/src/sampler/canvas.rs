//! What is decoded and what the caller sees: a [`Canvas`] (context, masked slots, an optional
//! draft), each step's [`CanvasView`] and [`DenoiseStep`], the caller's [`Controls`], and how
//! a draft's copies are recognised among the votes (`draft_copies`).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::Serialize;

use super::*;

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
    /// Asked wherever `cancel` is read (before each step, and between a pass's layers where a
    /// pass may be given up): `true` ends the run as cancelled just the same. For a caller whose
    /// reason to stop is no flag of the request's own: a scheduler making a job nobody waits for
    /// yet give way to a request, to run it again later.
    pub interrupt: Option<&'a Interrupt<'a>>,
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

/// A run's interrupt ([`Controls::interrupt`]).
pub type Interrupt<'a> = dyn Fn() -> bool + Sync + 'a;

/// The filled middle of one canvas.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Infill {
    /// Tokens before the first EOS.
    pub tokens: Vec<u32>,
    /// Per token, the model's own probability of it in the step that committed it (at
    /// temperature 1 whatever it was sampled at, with the tokens a canvas may not hold left
    /// out): how sure the model was.
    pub probabilities: Vec<f32>,
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

impl<'a> Sampler<'a> {
    /// Which slots' votes copy the draft: the canvas as it would read with every vote taken
    /// (committed slots, then each masked slot's vote; EOS after the first end vote), aligned to
    /// the draft plus its end by a longest common subsequence. A masked slot copies when its
    /// vote is aligned and so is a neighbour, each to the next draft token: one aligned token
    /// alone is too often a coincidence (whitespace, a bracket). Indexed by slot.
    pub(super) fn draft_copies(&self, state: &Slots, votes: &[Choice]) -> Vec<bool> {
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
}
