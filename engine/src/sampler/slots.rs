//! The decoding state of one canvas ([`Slots`]: committed and masked slots, the end, growth)
//! and of one step (the votes, the actions taken on them, the rows a pass computed).

use super::*;

/// Per-canvas bookkeeping during a run.
pub(super) struct Slots {
    /// Absolute position of slot 0 in the sequence.
    pub(super) start: usize,
    pub(super) values: Vec<Option<u32>>,
    /// Per slot, the model's probability of the token it holds when it was committed (0 while
    /// masked).
    pub(super) probabilities: Vec<f32>,
    pub(super) max_length: usize,
    /// Slots added at a time when the canvas grows.
    pub(super) growth: usize,
    /// First slot holding EOS or pad.
    pub(super) end: Option<usize>,
    /// Leftmost slot holding a non-whitespace token: the middle may end only to its right, so
    /// it is never empty.
    pub(super) first_content: Option<usize>,
    /// Rightmost slot holding anything but EOS or pad: the middle may end only to its right, so
    /// an end never overwrites a committed token.
    pub(super) last_token: Option<usize>,
    /// Slots committed in the last step: the next pass still recomputes them, so the cache
    /// holds their new tokens before the window leaves them.
    pub(super) touched: Vec<usize>,
    pub(super) steps: usize,
    /// `steps` when the end was first committed.
    pub(super) steps_at_end: Option<usize>,
    /// The canvas's draft followed by the end (EOS), or empty.
    pub(super) draft: Vec<u32>,
    /// Block decoding: steps taken in the current block (the step budget is per block).
    pub(super) block_steps: usize,
    /// A stop rule ended the middle at `end`.
    pub(super) stopped: bool,
    /// Length of the longest lead the stop rule has said no to: it is asked again only once
    /// the lead grows.
    pub(super) lead_checked: usize,
    /// Causal decoding with a draft (see `Sampler::speculate`): the tokens the slots from the
    /// first masked one show the next pass, the draft's continuation of what is committed.
    pub(super) guesses: Vec<u32>,
    /// Draft position minus slot where the lead last copied the draft (see [`draft_position`]).
    pub(super) draft_shift: isize,
    /// The tokens around the canvas (prefix, then suffix) a causal canvas without a draft
    /// guesses from; empty otherwise.
    pub(super) context: Vec<u32>,
    /// Guesses the next pass shows at most: doubled after a pass confirmed them all, cut to
    /// twice what a pass confirmed otherwise (a row costs little, but not nothing).
    pub(super) guess_limit: usize,
    /// Touched slots before this one had their rows computed with the token they now hold
    /// (accepted guesses): the next pass need not recompute them.
    pub(super) settled: usize,
}

impl Slots {
    /// The first masked slot.
    pub(super) fn first_masked(&self) -> Option<usize> {
        self.values.iter().position(Option::is_none)
    }

    /// Block decoding with blocks of `block` positions: one past the last slot of the block
    /// holding the first masked slot (the only block a step may commit in), clipped to the
    /// canvas. Blocks are counted in absolute positions, as the attention pattern counts them.
    pub(super) fn active_end(&self, block: usize) -> usize {
        let first = self.first_masked().unwrap_or(self.values.len());
        let end = ((self.start + first) / block + 1) * block;
        (end - self.start).min(self.values.len())
    }

    pub(super) fn masked(&self) -> impl Iterator<Item = usize> + '_ {
        self.values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_none())
            .map(|(i, _)| i)
    }

    pub(super) fn is_done(&self) -> bool {
        self.values.iter().all(Option::is_some)
    }

    /// Whether the end may be committed at `slot`: after content (the middle is not empty), and
    /// after every committed token.
    pub(super) fn end_allowed(&self, slot: usize) -> bool {
        self.first_content.is_some_and(|c| c < slot) && self.end_votable(slot)
    }

    /// Whether `slot` may vote for the end: not left of a committed token (an end there would
    /// overwrite it).
    pub(super) fn end_votable(&self, slot: usize) -> bool {
        self.last_token.is_none_or(|t| t < slot)
    }

    /// The middle of a full canvas.
    pub(super) fn infill(&self) -> Infill {
        let end = self.end.unwrap_or(self.values.len());
        Infill {
            tokens: self.values[..end]
                .iter()
                .map(|v| v.expect("all slots filled"))
                .collect(),
            probabilities: self.probabilities[..end].to_vec(),
            ended_by_eos: self.end.is_some() && !self.stopped,
            steps: self.steps,
            slots: self.values.len(),
            steps_after_end: self.steps_at_end.map(|at| self.steps - at),
            stopped: self.stopped,
        }
    }

    /// The committed slots from slot 0 up to the first masked slot or the end.
    pub(super) fn lead(&self) -> &[Option<u32>] {
        let end = self.end.unwrap_or(self.values.len());
        let len = self.values[..end]
            .iter()
            .take_while(|v| v.is_some())
            .count();
        &self.values[..len]
    }

    /// One past the last slot the next pass must recompute: the last masked or just-committed
    /// slot (an end committed earlier lies beyond it, so later passes are shorter).
    pub(super) fn live_end(&self) -> Option<usize> {
        let masked = self.values.iter().rposition(Option::is_none);
        let touched = self.touched.iter().max().copied();
        masked.max(touched).map(|last| last + 1)
    }
}

/// A candidate commit for one slot.
pub(super) struct Choice {
    pub(super) slot: usize,
    pub(super) token: u32,
    /// By the run's measure (`SamplerConfig::confidence`): what the schedule ranks.
    pub(super) confidence: f32,
    /// The model's own probability of `token` (at temperature 1, whatever it was sampled at;
    /// the suppressed tokens left out): what the middle reports of it.
    pub(super) probability: f32,
}

/// What one step may commit in a canvas: a token in one slot, or the end of the middle, which
/// fills every masked slot after `slot` with EOS at once.
pub(super) struct Action {
    pub(super) slot: usize,
    pub(super) token: u32,
    pub(super) confidence: f32,
    pub(super) probability: f32,
    /// Slots this action fills.
    pub(super) fills: usize,
}

/// One canvas's rows of a pass's logits: row j is position `first + j`.
#[derive(Clone, Copy)]
pub(super) struct Rows<'l> {
    pub(super) logits: &'l [f32],
    pub(super) first: usize,
    pub(super) vocab: usize,
}

impl<'l> Rows<'l> {
    pub(super) fn at(&self, position: usize) -> &'l [f32] {
        let row = position - self.first;
        &self.logits[row * self.vocab..(row + 1) * self.vocab]
    }
}

/// Where a canvas stands against its limits in a step.
#[derive(Clone, Copy)]
pub(super) struct Pressure {
    /// Past the deadline: commit the argmax of everything left.
    pub(super) past_deadline: bool,
    /// Steps left in the budget, this one included; `None` without a cap.
    pub(super) steps_left: Option<usize>,
}

impl Pressure {
    /// The last step this canvas gets: everything left is committed.
    pub(super) fn forced(&self) -> bool {
        self.past_deadline || self.steps_left == Some(1)
    }
}
