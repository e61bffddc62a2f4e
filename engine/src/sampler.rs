//! The diffusion sampler: fills the masked slots of one or more canvases over a few denoising
//! steps, committing several tokens per model call where the model is confident.
//!
//! Generic over [`Denoiser`] (token ids in, logits out), so it runs any model and is tested with
//! a scripted fake. What it implements:
//! - threshold parallel decoding (Fast-dLLM): commit every masked slot whose confidence reaches
//!   `tau`, at least one; or a fixed `k` per step; one per step is the quality ceiling;
//! - a step budget: each step commits at least `ceil(masked / steps_left)` so the canvas is full
//!   when the budget runs out;
//! - variable length: the middle ends at the first committed EOS (or pad); later slots are forced
//!   to EOS; EOS is suppressed until the middle holds a non-whitespace token;
//! - the approximate context cache (full pass, then window passes, optional refresh);
//! - cancellation between steps, a deadline (commit the argmax of what is left), a per-step
//!   stream of the canvas, greedy or seeded temperature sampling, batches of canvases.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::DiffusionSettings;
use crate::error::{Error, Result};

/// Which positions a forward pass recomputes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Every position; when `store` is set, the cache is refilled from this pass.
    Full { store: bool },
    /// Only the window; every other position comes from the cache of the last stored pass.
    Window,
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

    /// Whether `cache` holds a stored pass that a window pass over `tokens` may reuse.
    fn cache_covers(&self, cache: &Self::Cache, tokens: &[Vec<u32>], window: &Range<usize>)
        -> bool;
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
}

impl SamplerConfig {
    /// The presets behind `--effort`: fewer steps and a lower bar at `low`, one token per step
    /// (the quality ceiling) at `high`.
    pub fn effort(effort: Effort) -> SamplerConfig {
        let (schedule, max_steps) = match effort {
            Effort::Low => (Schedule::Threshold { tau: 0.7 }, Some(8)),
            Effort::Medium => (Schedule::Threshold { tau: 0.9 }, Some(32)),
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
            },
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
    pub length: usize,
    pub suffix: Vec<u32>,
}

/// The state of one canvas after a denoising step (for streaming the "diffusing" view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanvasView {
    /// Each slot's token, `None` while still masked.
    pub slots: Vec<Option<u32>>,
    /// Slots committed in this step.
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
}

/// The filled middle of one canvas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Infill {
    /// Tokens before the first EOS.
    pub tokens: Vec<u32>,
    /// Whether the model ended the middle with EOS before the canvas ran out.
    pub ended_by_eos: bool,
    /// Steps in which this canvas committed something.
    pub steps: usize,
}

/// The outcome of a run over a batch of canvases.
#[derive(Debug, Clone, Serialize)]
pub struct Sampled {
    pub infills: Vec<Infill>,
    /// Model calls made.
    pub forwards: usize,
    pub full_passes: usize,
    pub window_passes: usize,
    /// Whether the deadline forced the remaining slots.
    pub hit_deadline: bool,
    /// Time inside the model.
    pub model_time: Duration,
}

impl Sampled {
    /// Tokens committed per model call (slots of all canvases, EOS padding included).
    pub fn tokens_per_forward(&self, slots: usize) -> f64 {
        slots as f64 / self.forwards.max(1) as f64
    }
}

/// Per-canvas bookkeeping during a run.
struct Slots {
    /// Absolute position of slot 0 in the sequence.
    start: usize,
    values: Vec<Option<u32>>,
    /// First slot holding EOS or pad.
    end: Option<usize>,
    /// Leftmost slot holding a non-whitespace token. EOS is allowed only to its right: content
    /// further right would be overwritten by the EOS and could leave the middle empty.
    first_content: Option<usize>,
    steps: usize,
}

impl Slots {
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
}

/// A candidate commit for one slot.
struct Choice {
    slot: usize,
    token: u32,
    confidence: f32,
}

/// The sampler: the model-independent half of the engine.
pub struct Sampler<'a> {
    settings: DiffusionSettings,
    /// Per token id: decodes to whitespace only (no content yet).
    whitespace: &'a [bool],
}

impl<'a> Sampler<'a> {
    /// `whitespace[id]` says whether a token is whitespace only (it may be empty, then every
    /// non-EOS token counts as content).
    pub fn new(settings: DiffusionSettings, whitespace: &'a [bool]) -> Sampler<'a> {
        Sampler {
            settings,
            whitespace,
        }
    }

    /// The token sequence the model sees for `canvas` (BOS if the model uses one).
    pub fn sequence(&self, canvas: &Canvas) -> Vec<u32> {
        let mut seq =
            Vec::with_capacity(canvas.prefix.len() + canvas.length + canvas.suffix.len() + 1);
        seq.extend(self.settings.bos_token_id);
        seq.extend_from_slice(&canvas.prefix);
        seq.extend(std::iter::repeat_n(
            self.settings.mask_token_id,
            canvas.length,
        ));
        seq.extend_from_slice(&canvas.suffix);
        seq
    }

    /// Fills every canvas of the batch in one run, sharing each model call.
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
        if let Some(c) = canvases.iter().find(|c| c.length == 0) {
            return Err(Error::InvalidRequest(format!(
                "a canvas needs at least one masked slot (prefix of {} tokens)",
                c.prefix.len()
            )));
        }
        if let Schedule::TopK { k: 0 } = config.schedule {
            return Err(Error::InvalidRequest("top-k schedule with k = 0".into()));
        }
        if config.max_steps == Some(0) {
            return Err(Error::InvalidRequest("max_steps is 0".into()));
        }
        let vocab = model.vocab_size();
        let mut seqs: Vec<Vec<u32>> = canvases.iter().map(|c| self.sequence(c)).collect();
        let bos = usize::from(self.settings.bos_token_id.is_some());
        let mut slots: Vec<Slots> = canvases
            .iter()
            .map(|c| Slots {
                start: bos + c.prefix.len(),
                values: vec![None; c.length],
                end: None,
                first_content: None,
                steps: 0,
            })
            .collect();
        let window = self.window(&slots);
        let shift = self.settings.logit_shift;
        let mut rng = StdRng::seed_from_u64(config.seed);
        let mut out = Sampled {
            infills: Vec::new(),
            forwards: 0,
            full_passes: 0,
            window_passes: 0,
            hit_deadline: false,
            model_time: Duration::ZERO,
        };
        let mut step = 0;
        while !slots.iter().all(Slots::is_done) {
            if controls.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(Error::Cancelled);
            }
            let pass = if !config.cache.enabled {
                Pass::Full { store: false }
            } else if config
                .cache
                .refresh_every
                .is_some_and(|r| r > 0 && step > 0 && step % r == 0)
                || !model.cache_covers(cache, &seqs, &window)
            {
                Pass::Full { store: true }
            } else {
                Pass::Window
            };
            let started = Instant::now();
            let logits = model.logits(&seqs, window.clone(), cache, pass)?;
            out.model_time += started.elapsed();
            out.forwards += 1;
            match pass {
                Pass::Full { .. } => out.full_passes += 1,
                Pass::Window => out.window_passes += 1,
            }
            if logits.len() != seqs.len() * window.len() * vocab {
                return Err(Error::InvalidRequest(format!(
                    "model returned {} logits, expected {}",
                    logits.len(),
                    seqs.len() * window.len() * vocab
                )));
            }
            let hit_deadline = controls.deadline.is_some_and(|d| Instant::now() >= d);
            out.hit_deadline |= hit_deadline;
            let steps_left = config.max_steps.map(|m| m.saturating_sub(step).max(1));
            let mut views = Vec::with_capacity(slots.len());
            for (b, state) in slots.iter_mut().enumerate() {
                let rows = &logits[b * window.len() * vocab..(b + 1) * window.len() * vocab];
                let mut choices: Vec<Choice> = state
                    .masked()
                    .map(|slot| {
                        let row = score_row(shift, state.start + slot) - window.start;
                        let logits = &rows[row * vocab..(row + 1) * vocab];
                        self.choose(
                            logits,
                            slot,
                            state.first_content.is_some_and(|c| c < slot),
                            config,
                            hit_deadline,
                            &mut rng,
                        )
                    })
                    .collect();
                let masked = choices.len();
                if masked == 0 {
                    views.push(view(state, Vec::new()));
                    continue;
                }
                choices.sort_by(|a, b| {
                    b.confidence
                        .total_cmp(&a.confidence)
                        .then(a.slot.cmp(&b.slot))
                });
                let wanted = if hit_deadline || steps_left == Some(1) {
                    masked
                } else {
                    let by_schedule = match config.schedule {
                        Schedule::Threshold { tau } => {
                            choices.iter().take_while(|c| c.confidence >= tau).count()
                        }
                        Schedule::TopK { k } => k,
                    };
                    let by_budget = steps_left.map_or(1, |left| masked.div_ceil(left));
                    by_schedule.max(by_budget).max(1).min(masked)
                };
                let mut committed = Vec::with_capacity(wanted);
                for choice in choices.into_iter().take(wanted) {
                    // An EOS committed earlier in this step has already forced this slot.
                    if state.values[choice.slot].is_some() {
                        continue;
                    }
                    self.commit(state, choice.slot, choice.token);
                    committed.push(choice.slot);
                }
                state.steps += 1;
                for (slot, value) in state.values.iter().enumerate() {
                    seqs[b][state.start + slot] = value.unwrap_or(self.settings.mask_token_id);
                }
                committed.sort_unstable();
                views.push(view(state, committed));
            }
            if let Some(on_step) = controls.on_step.as_mut() {
                on_step(&DenoiseStep {
                    step,
                    canvases: views,
                });
            }
            step += 1;
        }
        out.infills = slots
            .into_iter()
            .map(|s| {
                let end = s.end.unwrap_or(s.values.len());
                Infill {
                    tokens: s.values[..end]
                        .iter()
                        .map(|v| v.expect("all slots filled"))
                        .collect(),
                    ended_by_eos: s.end.is_some(),
                    steps: s.steps,
                }
            })
            .collect();
        Ok(out)
    }

    /// Positions every pass must return: the canvases, plus the rows that score them.
    fn window(&self, slots: &[Slots]) -> Range<usize> {
        let shift = self.settings.logit_shift;
        let start = slots
            .iter()
            .map(|s| score_row(shift, s.start))
            .min()
            .unwrap_or(0);
        let end = slots
            .iter()
            .map(|s| s.start + s.values.len())
            .max()
            .unwrap_or(0);
        start..end
    }

    fn is_end(&self, token: u32) -> bool {
        token == self.settings.eos_token_id || token == self.settings.pad_token_id
    }

    /// Picks the token for one slot and how confident the model is in it.
    fn choose(
        &self,
        logits: &[f32],
        slot: usize,
        has_content: bool,
        config: &SamplerConfig,
        force_argmax: bool,
        rng: &mut StdRng,
    ) -> Choice {
        let suppressed = |id: usize| {
            id as u32 == self.settings.mask_token_id || (!has_content && self.is_end(id as u32))
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

    fn commit(&self, state: &mut Slots, slot: usize, token: u32) {
        state.values[slot] = Some(token);
        if self.is_end(token) {
            let end = state.end.map_or(slot, |e| e.min(slot));
            state.end = Some(end);
            for later in &mut state.values[end + 1..] {
                *later = Some(self.settings.eos_token_id);
            }
        } else if !self
            .whitespace
            .get(token as usize)
            .copied()
            .unwrap_or(false)
        {
            state.first_content = Some(state.first_content.map_or(slot, |c| c.min(slot)));
        }
    }
}

fn view(state: &Slots, committed: Vec<usize>) -> CanvasView {
    CanvasView {
        slots: state.values.clone(),
        committed,
    }
}
