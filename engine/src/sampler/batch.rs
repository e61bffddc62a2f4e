//! Iteration-level batching: canvases join a running batch at the next denoising step and leave
//! when they are full or cancelled, so one model call serves whoever is in flight (what a server
//! needs; [`Sampler::run`] is a batch that every canvas joins before the first step).
//!
//! Each member carries its own [`SamplerConfig`] (schedule, confidence, step budget,
//! temperature, seed, draft bar), its own generator seeded from that config, its own step count,
//! cancel flag, deadline and stream; the batch owns what is one value for everyone: the cache
//! policy and the window (one range over every canvas in the call).
//!
//! The cache rule: a window pass reads keys/values stored by a full pass over the same rows, so
//! after a member joins or leaves (once the batch has made a pass) the next pass is a stored
//! full pass (`cache_covers` compares tokens: a member taking the place of a cancelled one over
//! the same context would pass it while the cache holds the other's commits); the first pass of
//! a new batch asks [`Denoiser::cache_covers`], which is how a caller's cache is reused across
//! requests. A member that is full leaves at once (its outcome is returned by the step that
//! filled it), but its row stays in the model call until the next full pass: dropping it earlier
//! would change the rows and cost a full pass, keeping it costs its share of the window.
//! Without the cache every pass is full, so such rows go at the next. `refresh_every` counts the
//! batch's steps, not a member's. With [`CachePolicy::realign`], a first pass over a cache whose
//! tokens differ by edits is a [`Pass::Realign`] when [`Denoiser::cache_realigns`] allows it, and
//! so is a later pass after a canvas grew (masked slots inserted at its end: on the default
//! preset's shape at 1k tokens ~20 ms instead of a ~150 ms stored full pass).
//!
//! With [`CachePolicy::prompt_chunk`], a stored full pass that would compute more than that many
//! positions past what the cache holds (a new prompt, on a causal or block-causal model) is
//! preceded by passes that each store one more piece of it and commit nothing: steps of the
//! batch that are no member's step (budgets do not count them, streams do not see them), with a
//! cancel checked before each.
//!
//! What a member gets: without the cache, the middle it gets alone (its rows of a call depend on
//! its own sequence only; it commits from them under its own config and generator). With the
//! cache, a window pass recomputes the window of the whole batch and joins and leaves force
//! full passes, so what it reads from the cache, and hence its middle, follows the batch; alone
//! in a batch it is what `run` gives.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use super::{
    view, CachePolicy, Canvas, CanvasView, Denoiser, Infill, Interrupt, ModelCall, Pass, Pressure,
    Rows, Sampler, SamplerConfig, Slots,
};
use crate::error::{Error, Result};

/// A member of a [`Batch`], unique within it (never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberId(u64);

/// How one member is steered from outside: owned, so a request can hand them over to the
/// thread that runs the batch.
#[derive(Default)]
pub struct MemberControls<'s> {
    /// Raised: the member leaves before the next pass with [`MemberOutcome::Cancelled`].
    pub cancel: Option<Arc<AtomicBool>>,
    /// Past it, the member's next step commits the argmax of everything it has left.
    pub deadline: Option<Instant>,
    /// This member's canvas after each step it takes part in.
    pub on_step: Option<CanvasStream<'s>>,
    /// Ends the member's middle once its committed lead decides it ([`super::StopRule`]).
    pub stop: Option<super::StopRule<'s>>,
}

/// A member's stream: its canvas after each step.
pub type CanvasStream<'s> = Box<dyn FnMut(&CanvasView) + Send + 's>;

/// Model calls and what they cost, for a member (the calls it took part in) or a whole batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PassStats {
    pub forwards: usize,
    pub full_passes: usize,
    pub window_passes: usize,
    /// First passes that realigned a cache across an edit ([`Pass::Realign`]).
    pub realign_passes: usize,
    /// Positions whose logits the passes returned: for a member, its own rows; for a batch,
    /// every row of every call.
    pub window_positions: usize,
    /// Whether a deadline forced the remaining slots.
    pub hit_deadline: bool,
    /// Time inside the model. A member is charged the whole of every call it took part in (the
    /// call serves the batch at once; a share per row would be a guess), so members' times add
    /// up to more than the batch's.
    pub model_time: Duration,
}

impl PassStats {
    fn record(&mut self, pass: Pass, elapsed: Duration, positions: usize) {
        self.forwards += 1;
        match pass {
            Pass::Full { .. } => self.full_passes += 1,
            Pass::Window => self.window_passes += 1,
            Pass::Realign { .. } => self.realign_passes += 1,
        }
        self.window_positions += positions;
        self.model_time += elapsed;
    }
}

/// Why a member left the batch.
#[derive(Debug, Clone, PartialEq)]
pub enum MemberOutcome {
    /// Its canvas is full.
    Filled { infill: Infill, stats: PassStats },
    /// Its cancel flag was up before a pass; it took no part in that pass.
    Cancelled,
}

/// What a member still being filled keeps between steps.
struct Live<'s> {
    config: SamplerConfig,
    rng: StdRng,
    /// Steps taken (passes taken part in): its budget counts these.
    steps: usize,
    stats: PassStats,
    controls: MemberControls<'s>,
}

/// One sequence of the model call: a member being filled (`live`), or one that is full and
/// whose row waits for the next full pass to leave.
struct Row<'s> {
    id: MemberId,
    slots: Slots,
    live: Option<Live<'s>>,
}

/// Canvases being filled together, one denoising step at a time: see the module docs.
pub struct Batch<'s> {
    sampler: Sampler<'s>,
    cache: CachePolicy,
    rows: Vec<Row<'s>>,
    /// The model's input, one sequence per row (kept apart: the model takes them as a slice).
    seqs: Vec<Vec<u32>>,
    next_id: u64,
    /// Passes made.
    steps: usize,
    /// The rows changed since the last stored pass: the cache no longer matches them.
    stale: bool,
    stats: PassStats,
    /// What cancels every member at once ([`Batch::cancel_on`], [`Batch::interrupt_on`]).
    whole: Whole<'s>,
}

impl<'s> Batch<'s> {
    pub(super) fn new(sampler: Sampler<'s>, cache: CachePolicy) -> Batch<'s> {
        Batch {
            sampler,
            cache,
            rows: Vec::new(),
            seqs: Vec::new(),
            next_id: 0,
            steps: 0,
            stale: false,
            stats: PassStats::default(),
            whole: Whole::default(),
        }
    }

    /// A cancel flag for the whole batch, beside each member's own: raised, every member leaves
    /// as [`MemberOutcome::Cancelled`] at the next step (what [`Sampler::run`]'s cancel does).
    pub fn cancel_on(&mut self, flag: &'s AtomicBool) {
        self.whole.flag = Some(flag);
    }

    /// An interrupt for the whole batch, asked wherever the cancel flags are read: `true`, every
    /// member leaves as [`MemberOutcome::Cancelled`], as with [`Batch::cancel_on`] (what
    /// [`Sampler::run`]'s [`super::Controls::interrupt`] does).
    pub fn interrupt_on(&mut self, interrupt: &'s Interrupt<'s>) {
        self.whole.interrupt = Some(interrupt);
    }

    /// Adds `canvas` to the batch from the next step on, decoded under `config` (its `cache` is
    /// ignored: the batch's policy holds for everyone). A canvas or config [`Sampler::run`] would
    /// refuse is refused here with [`Error::InvalidRequest`], and the batch is left as it was.
    pub fn join(
        &mut self,
        canvas: &Canvas,
        config: SamplerConfig,
        controls: MemberControls<'s>,
    ) -> Result<MemberId> {
        Sampler::validate(canvas, &config)?;
        let id = MemberId(self.next_id);
        self.next_id += 1;
        let mut seq = self.sampler.sequence(canvas);
        let mut slots = self.sampler.slots(canvas);
        self.sampler.speculate(&mut slots, &mut seq, &config);
        self.seqs.push(seq);
        self.rows.push(Row {
            id,
            slots,
            live: Some(Live {
                rng: StdRng::seed_from_u64(config.seed),
                config,
                steps: 0,
                stats: PassStats::default(),
                controls,
            }),
        });
        self.stale |= self.steps > 0;
        Ok(id)
    }

    /// Members still being filled.
    pub fn len(&self) -> usize {
        self.rows.iter().filter(|r| r.live.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.iter().all(|r| r.live.is_none())
    }

    /// Every model call the batch has made so far.
    pub fn stats(&self) -> PassStats {
        self.stats
    }

    /// One denoising step: members whose cancel flag is up leave first, then one model call
    /// over the rows and each member's commits, as [`Sampler::run`] makes them. Returns the
    /// members that left in this step: cancelled, or filled (with their infill and the calls
    /// they took part in). An empty batch makes no call. Once every member of the call is
    /// cancelled, the model may give the call up part way ([`step_together`] says when): they
    /// leave as cancelled and `cache` is emptied. A model error fails the step for every
    /// member; the batch is then best dropped (members that left as cancelled before the call
    /// are not reported).
    pub fn step<M: Denoiser>(
        &mut self,
        model: &M,
        cache: &mut M::Cache,
    ) -> Result<Vec<(MemberId, MemberOutcome)>> {
        let mut left = step_together(model, &mut [(self, cache)])?;
        Ok(left.pop().expect("one batch, one answer"))
    }

    /// The first half of a step: cancelled members leave (into `left`), and the pass and window
    /// of the model call, or `None` when no member is left to fill.
    fn begin<M: Denoiser>(
        &mut self,
        model: &M,
        cache: &M::Cache,
        left: &mut Vec<(MemberId, MemberOutcome)>,
    ) -> Option<Planned> {
        self.leave_cancelled(left);
        if self.is_empty() {
            return None;
        }
        let refresh = self
            .cache
            .refresh_every
            .is_some_and(|r| r > 0 && self.steps > 0 && self.steps.is_multiple_of(r));
        let pass = if !self.cache.enabled {
            Pass::Full { store: false }
        } else if self.stale || refresh || !model.cache_covers(cache, &self.seqs, &self.window()) {
            // A batch's first pass meets a cache left by another request's tokens; a later one
            // that is no refresh and not stale (no member joined or left) one left by its own
            // canvases before they grew (`Sampler::grow` appended masked slots): realigned
            // across the edit either way, rather than recomputed.
            match self.cache.realign {
                Some(reuse)
                    if !self.stale
                        && !refresh
                        && model.cache_realigns(cache, &self.seqs, &self.window(), reuse) =>
                {
                    Pass::Realign {
                        radius: reuse.radius,
                    }
                }
                _ => Pass::Full { store: true },
            }
        } else {
            Pass::Window
        };
        if let Pass::Full { .. } = pass {
            // Nothing is reused from the cache: the rows of full members may go for free.
            let mut b = 0;
            while b < self.rows.len() {
                if self.rows[b].live.is_none() {
                    self.remove(b);
                } else {
                    b += 1;
                }
            }
        }
        let window = self.window();
        if let (Pass::Full { store: true }, Some(chunk)) = (pass, self.cache.prompt_chunk) {
            // A member past its deadline wants its slots now, not after the prompt's pieces.
            let now = Instant::now();
            let rushed = self
                .rows
                .iter()
                .filter_map(|r| r.live.as_ref())
                .any(|live| live.controls.deadline.is_some_and(|d| now >= d));
            let kept = (!rushed)
                .then(|| model.stored_prefix(cache, &self.seqs, &window))
                .flatten();
            if let Some(kept) = kept {
                let end = kept.saturating_add(chunk.max(1));
                if end < window.start {
                    // One piece: the pass computes up to `end` and reads out one row.
                    return Some(Planned {
                        pass,
                        window: end - 1..end,
                        prompt: true,
                    });
                }
            }
        }
        Some(Planned {
            pass,
            window,
            prompt: false,
        })
    }

    /// The second half of a step: each member commits from the call's `logits` (all rows of
    /// `window`), and those that are full leave (into `left`).
    fn commit(
        &mut self,
        planned: Planned,
        logits: &[f32],
        vocab: usize,
        elapsed: Duration,
        left: &mut Vec<(MemberId, MemberOutcome)>,
    ) {
        let Planned {
            pass,
            window,
            prompt,
        } = planned;
        self.stale = false;
        self.stats
            .record(pass, elapsed, self.seqs.len() * window.len());
        if prompt {
            // A piece of the prompt: a pass every member took part in, and no step of theirs.
            for live in self.rows.iter_mut().filter_map(|r| r.live.as_mut()) {
                live.stats.record(pass, elapsed, window.len());
            }
            return;
        }
        let now = Instant::now();
        let per_row = window.len() * vocab;
        for (b, (row, seq)) in self.rows.iter_mut().zip(&mut self.seqs).enumerate() {
            row.slots.touched.clear();
            let Some(live) = row.live.as_mut() else {
                continue;
            };
            live.stats.record(pass, elapsed, window.len());
            let past_deadline = live.controls.deadline.is_some_and(|d| now >= d);
            live.stats.hit_deadline |= past_deadline;
            self.stats.hit_deadline |= past_deadline;
            // Block decoding spends the step budget per block.
            let taken = match self.sampler.block() {
                Some(_) => row.slots.block_steps,
                None => live.steps,
            };
            let pressure = Pressure {
                past_deadline,
                steps_left: live
                    .config
                    .max_steps
                    .map(|m| m.saturating_sub(taken).max(1)),
            };
            let rows = Rows {
                logits: &logits[b * per_row..(b + 1) * per_row],
                first: window.start,
                vocab,
            };
            self.sampler.advance(
                &mut row.slots,
                seq,
                rows,
                &live.config,
                pressure,
                &mut live.rng,
            );
            live.steps += 1;
            if let Some(rule) = live.controls.stop.as_deref() {
                self.sampler.stop(&mut row.slots, rule);
            }
            if let Some(on_step) = live.controls.on_step.as_mut() {
                on_step(&view(&row.slots, row.slots.touched.clone()));
            }
            if row.slots.is_done() {
                let stats = live.stats;
                row.live = None;
                left.push((
                    row.id,
                    MemberOutcome::Filled {
                        infill: row.slots.infill(),
                        stats,
                    },
                ));
            }
        }
        self.steps += 1;
        if self.is_empty() {
            while !self.rows.is_empty() {
                self.remove(0);
            }
        }
    }

    /// The window of the next pass over every row.
    fn window(&self) -> Range<usize> {
        self.sampler
            .window(self.rows.iter().map(|r| &r.slots))
            .expect("a member being filled has masked slots")
    }

    /// Members whose cancel flag (or the batch's, or its interrupt) is up leave, into `left`;
    /// once none is left, neither are the rows of full members.
    fn leave_cancelled(&mut self, left: &mut Vec<(MemberId, MemberOutcome)>) {
        let batch = self.whole.raised();
        let mut b = 0;
        while b < self.rows.len() {
            let cancelled = self.rows[b].live.as_ref().is_some_and(|live| {
                batch
                    || live
                        .controls
                        .cancel
                        .as_ref()
                        .is_some_and(|c| c.load(Ordering::Relaxed))
            });
            if cancelled {
                left.push((self.remove(b).id, MemberOutcome::Cancelled));
            } else {
                b += 1;
            }
        }
        if self.is_empty() {
            while !self.rows.is_empty() {
                self.remove(0);
            }
        }
    }

    /// The flags that cancel every member at once, read while a model call runs: the batch's
    /// own (its flag, its interrupt), or, when each member has one, all of theirs; `None` when no flag can (a member
    /// without one goes on whatever happens to the others) or when the call should end anyway:
    /// with edit reuse on, the cache it leaves is what the request superseding it realigns
    /// (~20 ms on the default preset at 1k tokens), where an emptied one would cost that
    /// request a stored full pass (~150 ms) and, typed over again, the next one too. Without
    /// edit reuse (a next edit's exact pass) a later request over changed text cannot use it.
    fn cancels(&self) -> Option<Cancels<'s>> {
        if self.cache.enabled && self.cache.realign.is_some() {
            return None;
        }
        if self.whole.is_set() {
            return Some(Cancels::Batch(self.whole));
        }
        let members = self
            .rows
            .iter()
            .filter_map(|r| r.live.as_ref())
            .map(|live| live.controls.cancel.clone())
            .collect::<Option<Vec<_>>>()?;
        Some(Cancels::Members(members))
    }

    /// Takes row `b` out of the model call; once a pass was made, the cache no longer matches.
    fn remove(&mut self, b: usize) -> Row<'s> {
        self.seqs.remove(b);
        self.stale |= self.steps > 0;
        self.rows.remove(b)
    }
}

/// What cancels a batch's every member at once: its flag, its interrupt, either.
#[derive(Clone, Copy, Default)]
struct Whole<'s> {
    flag: Option<&'s AtomicBool>,
    interrupt: Option<&'s Interrupt<'s>>,
}

impl Whole<'_> {
    fn is_set(&self) -> bool {
        self.flag.is_some() || self.interrupt.is_some()
    }

    fn raised(&self) -> bool {
        self.flag.is_some_and(|flag| flag.load(Ordering::Relaxed))
            || self.interrupt.is_some_and(|interrupt| interrupt())
    }
}

/// What cancels a whole batch ([`Batch::cancels`]).
enum Cancels<'s> {
    Batch(Whole<'s>),
    Members(Vec<Arc<AtomicBool>>),
}

impl Cancels<'_> {
    fn raised(&self) -> bool {
        match self {
            Cancels::Batch(whole) => whole.raised(),
            Cancels::Members(flags) => flags.iter().all(|f| f.load(Ordering::Relaxed)),
        }
    }
}

/// A batch's part of a model call: its pass, the positions read out, and whether it is a
/// piece of the prompt ([`CachePolicy::prompt_chunk`]: no slot commits from it).
struct Planned {
    pass: Pass,
    window: Range<usize>,
    prompt: bool,
}

/// One denoising step of several batches, each over its own cache, in one model call
/// ([`Denoiser::logits_many`]): what [`Batch::step`] does for each, with every batch's rows
/// sharing the call (a model that fuses calls multiplies them by its weights together). Returns
/// each batch's members that left, in order. A model error fails the step for every batch.
///
/// The call may be given up part way once every member taking part in it is cancelled, unless
/// a batch in it has edit reuse on: the cache such a call leaves is what the request
/// superseding it realigns (~20 ms on the default preset at 1k tokens), where an emptied one
/// would cost that request a stored full pass. So a keystroke superseding a next edit's exact
/// pass waits a fraction of that pass, not all of it. The batches' members leave as
/// cancelled, and their caches, which the call may have half written, are emptied.
///
/// A call carries at most one piece of a prompt ([`CachePolicy::prompt_chunk`]), the first
/// batch's whose step is one: the other batches whose step would be a piece sit the call out
/// (their cancelled members still leave), so batches being decoded wait for one piece at each
/// step, not for every new prompt's. Callers pass their batches oldest first.
pub fn step_together<'s, M: Denoiser>(
    model: &M,
    batches: &mut [(&mut Batch<'s>, &mut M::Cache)],
) -> Result<Vec<Vec<(MemberId, MemberOutcome)>>> {
    let mut left: Vec<Vec<(MemberId, MemberOutcome)>> =
        batches.iter().map(|_| Vec::new()).collect();
    let mut piece = false;
    let passes: Vec<Option<Planned>> = batches
        .iter_mut()
        .zip(&mut left)
        .map(|((batch, cache), left)| {
            let planned = batch.begin(model, cache, left)?;
            // One batch's prompt piece a call, the first's.
            (!planned.prompt || !std::mem::replace(&mut piece, true)).then_some(planned)
        })
        .collect();
    let cancels: Option<Vec<Cancels<'s>>> = batches
        .iter()
        .zip(&passes)
        .filter(|(_, planned)| planned.is_some())
        .map(|((batch, _), _)| batch.cancels())
        .collect();
    let started = Instant::now();
    let mut calls: Vec<ModelCall<'_, M::Cache>> = batches
        .iter_mut()
        .zip(&passes)
        .filter_map(|((batch, cache), planned)| {
            let planned = planned.as_ref()?;
            Some(ModelCall {
                tokens: &batch.seqs,
                window: planned.window.clone(),
                cache: &mut **cache,
                pass: planned.pass,
            })
        })
        .collect();
    if calls.is_empty() {
        return Ok(left);
    }
    let expected: Vec<usize> = calls
        .iter()
        .map(|c| c.tokens.len() * c.window.len() * model.vocab_size())
        .collect();
    let stop = || {
        cancels
            .as_ref()
            .is_some_and(|all| all.iter().all(Cancels::raised))
    };
    let logits = model.logits_many_unless(&mut calls, &stop);
    drop(calls);
    let elapsed = started.elapsed();
    let logits = match logits {
        Ok(None) => {
            for (((batch, cache), pass), left) in batches.iter_mut().zip(&passes).zip(&mut left) {
                if pass.is_some() {
                    batch.stale = true;
                    **cache = M::Cache::default();
                    batch.leave_cancelled(left);
                }
            }
            return Ok(left);
        }
        Ok(Some(logits))
            if logits.len() == expected.len()
                && logits.iter().zip(&expected).all(|(l, &e)| l.len() == e) =>
        {
            logits
        }
        failed => {
            // The call may have left the caches half written.
            for ((batch, _), pass) in batches.iter_mut().zip(&passes) {
                batch.stale |= pass.is_some();
            }
            return Err(match failed {
                Err(e) => e,
                Ok(logits) => Error::InvalidRequest(format!(
                    "model returned {:?} logits, expected {expected:?}",
                    logits.iter().flatten().map(Vec::len).collect::<Vec<_>>()
                )),
            });
        }
    };
    let mut logits = logits.into_iter();
    for (((batch, _), pass), left) in batches.iter_mut().zip(passes).zip(&mut left) {
        if let Some(planned) = pass {
            let rows = logits.next().expect("one answer per call");
            batch.commit(planned, &rows, model.vocab_size(), elapsed, left);
        }
    }
    Ok(left)
}
