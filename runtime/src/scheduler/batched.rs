//! The batched loop: iteration-level batching over the engine's [`EngineBatch`]. Before every
//! denoising step it admits queued FIM jobs while there is room (`--max-batch` canvases in
//! all; a job with `n` candidates takes `n`), runs one step for everyone, answers the jobs
//! whose canvases are all full, and lets go of those whose client left (their cancel flag makes
//! their canvases leave before the next model call). So a request that arrives while others are
//! being decoded joins them at the next step instead of waiting for them to finish.
//!
//! Each job runs in a lane of its own, one `EngineBatch` with its own cache (a FIM job's
//! candidate canvases together, over one context), and every lane steps in every round, all of
//! them in one model call ([`EngineBatch::step_together`]): each lane keeps its own window and
//! kind of pass, the projections multiply every lane's rows together, so requests share the
//! weights' trip through memory wherever their canvases start, and a job joining never disturbs
//! another's cache. The one exception to "every lane steps": a new prompt on a causal model is
//! computed in pieces (`--prompt-chunk`), and a call carries one lane's piece, the oldest
//! lane's (lanes are passed oldest first; the rule is `step_together`'s); the other lanes whose
//! next step is a piece sit that call out. A call of every new lane's piece cost the lanes
//! being decoded, the slowest requests among them, several pieces at each of their steps (on
//! the 0.5B on 2 AVX2 cores, a 256-token piece is ~2 s). (Before lanes shared a call, canvases
//! starting at about the same position shared a lane, and so its cache: every join cost the
//! lane's other rows a full pass; the lanes took turns oldest first, since stepping each in a
//! call of its own made everyone slower.)
//!
//! A lane that empties leaves its cache behind ([`KeptCaches`]; a recent one refreshed while
//! nothing runs, [`idle`]), and a new lane starts from the kept cache of the job most like its
//! first one: a client typing sends requests that differ by
//! a few characters, and the new lane's first pass realigns the cache across that edit (the edit
//! reuse every other door has) instead of recomputing the whole context.
//!
//! Jobs go through the same pipelines as alone, split where a batch needs it: FIM jobs through
//! [`fim::prepare`] (each candidate length joins as its own canvas) and [`fim::finish`] per
//! candidate ([`finish_fim`]), next edits through [`edit::prepare`] (one canvas, the old region
//! its draft) and [`edit::finish`] ([`finish_edit`]); FIM and next-edit canvases share lanes.
//! Each lane's cache runs under its job's policy, as [`cache_policy`] chooses it for either loop
//! (so a job is cached as it would be alone, `--max-batch 1`), but for the prompt's pieces,
//! which are the loop's for every lane. A FIM job sent to a remote backend never comes here:
//! the backend workers run it while the lanes step.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redraft_engine::engine::EngineBatch;
use redraft_engine::sampler::{
    CachePolicy, Canvas, CanvasView, MemberControls, MemberId, StopRule,
};
use redraft_engine::{Completion, Engine};
use redraft_suggest::{edit, fim};

use super::idle;
use super::kept::{self, KeptCaches, KeyBuf};
use super::run::{draft_text, edit_budget, edit_input, finish_edit, finish_fim, job_error};
use super::{cache_policy, Answer, Draft, Job, JobError, LoopConfig, Queue, Work};

/// What a job in a lane was planned as.
enum Plan {
    Fim(fim::Prepared),
    Edit {
        prepared: edit::Prepared,
        started: Instant,
    },
}

/// A job in a lane: its plan and its canvases' completions as they come.
struct Member {
    job: Job,
    plan: Plan,
    completions: Vec<Option<Completion>>,
    /// When its canvases joined.
    joined: Instant,
}

/// Canvases a job takes: one per FIM candidate, one for a next edit.
fn canvases(job: &Job) -> usize {
    match &job.work {
        Work::Fim(work) => work.options.candidates.max(1),
        Work::Edit(_) => 1,
    }
}

/// A job's canvases, decoded together over a cache of their own.
struct Lane<'e> {
    id: u64,
    /// What the lane's job is matched on ([`kept::key`]): its cache is kept under it.
    key: KeyBuf,
    /// The job's cache policy ([`cache_policy`]).
    policy: CachePolicy,
    batch: EngineBatch<'e>,
}

/// Where a canvas belongs: its job, and which candidate it is.
type Slot = (u64, usize);

struct Loop<'e> {
    engine: &'e Engine,
    queue: &'e Queue,
    door: &'static str,
    /// The loop's part of every job's cache policy ([`cache_policy`]).
    cache: CachePolicy,
    max_batch: usize,
    delay: Option<Duration>,
    lanes: Vec<Lane<'e>>,
    /// Caches of emptied lanes.
    kept: KeptCaches,
    /// When nothing runs, how long before a recent kept cache is refreshed ([`idle`]).
    idle_refresh: Option<Duration>,
    jobs: HashMap<u64, Member>,
    /// Keyed by lane and member.
    canvases: HashMap<(u64, MemberId), Slot>,
    next_job: u64,
    next_lane: u64,
    /// The jobs this loop counts in the `running` gauge (the backend workers count theirs).
    counted: usize,
}

/// Runs jobs until a model load is next (and the running ones are done) or the queue holds no
/// job for the model and is closed.
pub fn run(engine: &Engine, queue: &Queue, config: LoopConfig, delay: Option<Duration>) {
    let mut state = Loop {
        engine,
        queue,
        door: config.door,
        cache: config.cache,
        max_batch: config.max_batch.max(1),
        delay,
        lanes: Vec::new(),
        kept: KeptCaches::new(config.kept_bytes),
        idle_refresh: config.idle_refresh,
        jobs: HashMap::new(),
        canvases: HashMap::new(),
        next_job: 0,
        next_lane: 0,
        counted: 0,
    };
    while state.admit() {
        state.step();
    }
    state.count_running();
}

impl<'e> Loop<'e> {
    /// Brings the `running` gauge to this loop's jobs, leaving the workers' count alone.
    fn count_running(&mut self) {
        let running = self.jobs.len();
        let gauge = &self.queue.metrics().running;
        gauge.inc_by(running as i64 - self.counted as i64);
        self.counted = running;
    }

    /// Canvases being decoded, over all lanes.
    fn running(&self) -> usize {
        self.lanes.iter().map(|lane| lane.batch.len()).sum()
    }

    /// Fills the lanes from the queue: waits for a job when nothing runs, else takes what is
    /// queued while there is room. `false` once the queue is closed and drained.
    fn admit(&mut self) -> bool {
        loop {
            let room = self.max_batch.saturating_sub(self.running());
            // A job waits in the queue until its canvases fit, unless nothing runs.
            let fits = |job: &Job| job.abandoned() || canvases(job) <= room;
            let job = if self.running() == 0 {
                match idle::next_job(self.engine, self.queue, &mut self.kept, self.idle_refresh) {
                    Some(job) => job,
                    None => return false,
                }
            } else {
                match self.queue.try_next_if(fits) {
                    Some(job) => job,
                    None => return true,
                }
            };
            if job.abandoned() {
                job.answer(Err(JobError::Cancelled), self.queue.metrics());
                continue;
            }
            self.join(job);
        }
    }

    /// A new lane for a job matched on `key` whose cache runs under `policy`, from the kept
    /// cache of the job most like it.
    fn new_lane(&mut self, key: KeyBuf, policy: CachePolicy) -> usize {
        for client in self.queue.take_forgotten() {
            self.kept.forget(&client, self.queue.metrics());
        }
        let cache = self.kept.take(&key.key(), self.queue.metrics());
        self.lanes.push(Lane {
            id: self.next_lane,
            key,
            policy,
            batch: self.engine.batch_from(policy, cache),
        });
        self.next_lane += 1;
        self.lanes.len() - 1
    }

    /// Plans a job and adds its canvases (one per FIM candidate length, one for a next edit)
    /// in a lane of their own.
    fn join(&mut self, job: Job) {
        let engine = self.engine;
        let metrics = self.queue.metrics();
        let policy = cache_policy(&job.work, &self.cache);
        // The canvases as the engine builds them (`Engine::canvas`, `Engine::edit_canvas`).
        let planned = match &job.work {
            Work::Fim(work) => {
                let source = work.source();
                let prepared = fim::prepare(engine, &source, &work.neighbours, &work.options);
                let built: Result<Vec<Canvas>, _> = prepared
                    .lengths
                    .iter()
                    .map(|&length| {
                        let mut request = prepared.request.clone();
                        request.canvas_tokens = length;
                        engine.canvas(&request)
                    })
                    .collect();
                let sampler = prepared.request.sampler.clone();
                built.map(|built| (Plan::Fim(prepared), built, sampler))
            }
            Work::Edit(work) => {
                let started = Instant::now();
                let prepared = edit::prepare(
                    engine,
                    &edit_input(work),
                    &edit_budget(engine, work),
                    work.sampler.clone(),
                );
                let sampler = prepared.request.sampler.clone();
                engine
                    .edit_canvas(&prepared.request)
                    .map(|canvas| (Plan::Edit { prepared, started }, vec![canvas], sampler))
            }
        };
        let (plan, built, mut sampler) = match planned {
            Ok(planned) => planned,
            Err(err) => return job.answer(Err(job_error(err)), metrics),
        };
        // The lane's policy is what holds (a member's own is ignored); the same, for the record.
        sampler.cache = policy;
        // A FIM canvas stops once its lead decides the finished suggestion, as `fim::run` does.
        let stop = || match &plan {
            Plan::Fim(prepared) => {
                Some(Box::new(fim::stop_rule(engine, &prepared.plan)) as StopRule<'e>)
            }
            Plan::Edit { .. } => None,
        };
        let at_lane = self.new_lane(kept::key(&job).to_buf(), policy);
        let key = self.next_job;
        self.next_job += 1;
        let mut joined = Vec::new();
        for (index, canvas) in built.iter().enumerate() {
            let on_step = match (&job.drafts, index) {
                (Some(tx), 0) => {
                    let tx = tx.clone();
                    let mut step = 0;
                    Some(Box::new(move |view: &CanvasView| {
                        let (text, masked) = draft_text(engine, view);
                        let _ = tx.send(Draft {
                            step,
                            text,
                            masked,
                            slots: view.slots.len(),
                        });
                        step += 1;
                    })
                        as Box<dyn FnMut(&CanvasView) + Send + 'e>)
                }
                _ => None,
            };
            let controls = MemberControls {
                cancel: Some(job.cancel.clone()),
                deadline: job.deadline,
                on_step,
                stop: stop(),
            };
            let lane = &mut self.lanes[at_lane];
            match lane.batch.join_canvas(canvas, sampler.clone(), controls) {
                Ok(id) => joined.push(((lane.id, id), index)),
                Err(err) => {
                    // Canvases already in leave at the next step, unanswered.
                    job.cancel.store(true, Ordering::Relaxed);
                    return job.answer(Err(job_error(err)), metrics);
                }
            }
        }
        for (at, index) in joined {
            self.canvases.insert(at, (key, index));
        }
        self.jobs.insert(
            key,
            Member {
                completions: vec![None; built.len()],
                plan,
                job,
                joined: Instant::now(),
            },
        );
    }

    /// One denoising step for every lane (but those whose prompt piece waits for an older
    /// lane's), in one model call; answers the jobs it finished.
    fn step(&mut self) {
        self.count_running();
        let metrics = self.queue.metrics();
        let before: Vec<_> = (self.lanes.iter())
            .map(|lane| (lane.batch.stats(), lane.batch.len()))
            .collect();
        // Lanes oldest first: the oldest lane's prompt piece goes in the call, the others'
        // wait (`step_together`).
        let mut batches: Vec<&mut EngineBatch<'e>> =
            self.lanes.iter_mut().map(|lane| &mut lane.batch).collect();
        let stepped = std::panic::catch_unwind(AssertUnwindSafe(|| {
            EngineBatch::step_together(&mut batches)
        }));
        drop(batches);
        let (mut calls, mut canvases) = (0, 0);
        for (lane, (before, len)) in self.lanes.iter().zip(before) {
            let after = lane.batch.stats();
            calls = calls.max(after.forwards - before.forwards);
            if after.forwards > before.forwards {
                canvases += len;
            } else if !lane.batch.is_empty() {
                // Its prompt piece waited for an older lane's.
                metrics.held_steps.inc();
            }
            metrics.passes(
                after.full_passes - before.full_passes,
                after.window_passes - before.window_passes,
                after.realign_passes - before.realign_passes,
            );
        }
        metrics.model_calls(calls, canvases, 0);
        let mut left = Vec::new();
        // Answered once the gauge no longer counts them.
        let mut answered = Vec::new();
        let error = match stepped {
            Ok(Ok(done)) => {
                for (lane, done) in self.lanes.iter().zip(done) {
                    left.extend(done.into_iter().map(|(id, r)| ((lane.id, id), r)));
                }
                None
            }
            Ok(Err(err)) => Some(JobError::Failed(format!("{err:#}"))),
            Err(_) => {
                crate::stderr_line(format_args!(
                    "{}: a batch step failed unexpectedly (a bug); the server goes on",
                    self.door
                ));
                Some(JobError::Failed("internal error".into()))
            }
        };
        if let Some(error) = error {
            // A step that failed fails every lane in its call: each job gets the error, and
            // the lanes start afresh (with new caches).
            for lane in &mut self.lanes {
                lane.batch = self.engine.batch(lane.policy);
            }
            self.canvases.clear();
            for (_, member) in self.jobs.drain() {
                member.job.cancel.store(true, Ordering::Relaxed);
                answered.push((member.job, Err(error.clone())));
            }
        }
        let (emptied, running) = std::mem::take(&mut self.lanes)
            .into_iter()
            .partition(|lane| lane.batch.is_empty());
        self.lanes = running;
        for lane in emptied.into_iter().filter(|lane| lane.policy.enabled) {
            self.kept
                .keep(&lane.key.key(), lane.batch.into_cache(), metrics);
        }
        for (at, result) in left {
            let Some((key, index)) = self.canvases.remove(&at) else {
                continue;
            };
            let Some(member) = self.jobs.get_mut(&key) else {
                continue;
            };
            match result {
                Ok(completion) => {
                    metrics.canvas_tokens.inc_by(completion.slots as u64);
                    member.completions[index] = Some(completion);
                    if member.completions.iter().all(Option::is_some) {
                        let member = self.jobs.remove(&key).expect("present");
                        let completions: Vec<Completion> =
                            member.completions.into_iter().flatten().collect();
                        let answer = finish(
                            self.engine,
                            &member.job.work,
                            member.plan,
                            completions,
                            member.joined,
                            metrics,
                        );
                        answered.push((member.job, Ok(answer)));
                    }
                }
                Err(err) => {
                    // Cancelled (its client left) or failed: the job's other canvases go too.
                    let member = self.jobs.remove(&key).expect("present");
                    member.job.cancel.store(true, Ordering::Relaxed);
                    self.canvases.retain(|_, slot| slot.0 != key);
                    answered.push((member.job, Err(job_error(err))));
                }
            }
        }
        // The gauge first: a door that reads it once answered sees the job done.
        self.count_running();
        for (job, result) in answered {
            job.answer(result, metrics);
        }
        if let Some(delay) = self.delay {
            std::thread::sleep(delay);
        }
    }
}

/// A job's answer from its canvases' completions, through its pipeline's finish.
fn finish(
    engine: &Engine,
    work: &Work,
    plan: Plan,
    completions: Vec<Completion>,
    joined: Instant,
    metrics: &crate::metrics::Metrics,
) -> Answer {
    match (work, plan) {
        (Work::Fim(work), Plan::Fim(prepared)) => {
            let mut answer = finish_fim(engine, &prepared, &completions, work, metrics);
            answer.report.model_ms = joined.elapsed().as_secs_f64() * 1e3;
            Answer::Fim(answer)
        }
        (Work::Edit(work), Plan::Edit { prepared, started }) => {
            let completion = completions
                .into_iter()
                .next()
                .expect("a next edit has one canvas");
            let outcome = edit::finish(
                &edit_input(work),
                prepared,
                completion,
                &edit_budget(engine, work),
                started,
            );
            Answer::Edit(finish_edit(engine, work, &outcome, metrics))
        }
        _ => unreachable!("a job is planned by its own kind"),
    }
}
