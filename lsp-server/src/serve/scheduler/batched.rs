//! The batched loop: iteration-level batching over the engine's [`EngineBatch`]. Before every
//! denoising step it admits queued FIM jobs while the batch has room (`--max-batch` canvases;
//! a job with `n` candidates takes `n`), runs one step for everyone, answers the jobs whose
//! canvases are all full, and lets go of those whose client left (their cancel flag makes
//! their canvases leave before the next model call). So a request that arrives while others
//! are being decoded joins them at the next step instead of waiting for them to finish.
//!
//! FIM jobs go through the same pipeline as alone: [`fim::prepare`] makes the engine request,
//! each candidate length joins as its own canvas, [`fim::finish`] cleans the middles
//! ([`finish_fim`], shared with the one-at-a-time loop). Next edits run alone between two steps
//! through `redraft_suggest::edit::next_edit`, the one next-edit pipeline: it has no
//! prepare/finish split to batch through yet.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redraft_context::Source;
use redraft_engine::engine::EngineBatch;
use redraft_engine::qwen2::KvCache;
use redraft_engine::sampler::{CachePolicy, CanvasView, MemberControls, MemberId};
use redraft_engine::{Completion, Engine};
use redraft_suggest::fim::{self, Prepared};

use super::run::{draft_text, edit_job, finish_fim, job_error};
use super::{Answer, Draft, Job, JobError, Queue, Work};

/// A FIM job in the batch: its plan and its candidates' completions as they come.
struct Member {
    job: Job,
    prepared: Prepared,
    completions: Vec<Option<Completion>>,
}

/// Canvases a job takes in the batch: one per FIM candidate; a next edit runs alone.
fn canvases(job: &Job) -> usize {
    match &job.work {
        Work::Fim(work) => work.options.candidates.max(1),
        Work::Edit(_) => 0,
    }
}

/// Where a canvas of the batch belongs: its job, and which candidate it is.
type Slot = (u64, usize);

struct Loop<'e> {
    engine: &'e Engine,
    queue: &'e Queue,
    policy: CachePolicy,
    max_batch: usize,
    delay: Option<Duration>,
    batch: EngineBatch<'e>,
    jobs: HashMap<u64, Member>,
    canvases: HashMap<MemberId, Slot>,
    next_job: u64,
    /// The cache next edits run with between steps.
    edit_cache: KvCache,
}

pub fn run(
    engine: &Engine,
    queue: &Queue,
    max_batch: usize,
    policy: CachePolicy,
    delay: Option<Duration>,
) {
    let mut state = Loop {
        engine,
        queue,
        policy,
        max_batch: max_batch.max(1),
        delay,
        batch: engine.batch(policy),
        jobs: HashMap::new(),
        canvases: HashMap::new(),
        next_job: 0,
        edit_cache: KvCache::default(),
    };
    while state.admit() {
        state.step();
    }
}

impl<'e> Loop<'e> {
    /// Fills the batch from the queue: waits for a job when the batch is empty, else takes
    /// what is queued while there is room. `false` once the queue is closed and drained.
    fn admit(&mut self) -> bool {
        loop {
            let room = self.max_batch.saturating_sub(self.batch.len());
            // A job waits in the queue until its canvases fit, unless the batch is empty.
            let fits = |job: &Job| job.abandoned() || canvases(job) <= room;
            let job = if self.batch.is_empty() {
                match self.queue.next() {
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
            match &job.work {
                Work::Edit(_) => self.edit_alone(job),
                Work::Fim(_) => self.join(job),
            }
        }
    }

    /// A next edit, run to its end while the batch waits.
    fn edit_alone(&mut self, job: Job) {
        let metrics = self.queue.metrics();
        let Work::Edit(work) = &job.work else {
            unreachable!("edit_alone takes next edits")
        };
        let (engine, delay, cache) = (self.engine, self.delay, &mut self.edit_cache);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            edit_job(engine, cache, &job, work, delay, metrics)
        }))
        .unwrap_or_else(|_| {
            *cache = KvCache::default();
            eprintln!("redraft serve: a next edit failed unexpectedly (a bug); the server goes on");
            Err(JobError::Failed("internal error".into()))
        });
        job.answer(result, metrics);
    }

    /// Plans a FIM job and adds one canvas per candidate length.
    fn join(&mut self, job: Job) {
        let Work::Fim(work) = &job.work else {
            unreachable!("only FIM jobs join the batch")
        };
        let engine = self.engine;
        let source = Source {
            text: &work.text,
            cursor: work.cursor,
            language: work.language,
            tree: None,
        };
        let prepared = fim::prepare(engine, &source, &work.neighbours, &work.options);
        let key = self.next_job;
        self.next_job += 1;
        let mut joined = Vec::new();
        for (index, &length) in prepared.lengths.iter().enumerate() {
            let mut request = prepared.request.clone();
            request.canvas_tokens = length;
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
            };
            match self.batch.join(&request, controls) {
                Ok(id) => joined.push((id, index)),
                Err(err) => {
                    // Canvases already in leave at the next step, unanswered.
                    job.cancel.store(true, Ordering::Relaxed);
                    for (id, _) in joined {
                        self.canvases.remove(&id);
                    }
                    job.answer(Err(job_error(err)), self.queue.metrics());
                    return;
                }
            }
        }
        for &(id, index) in &joined {
            self.canvases.insert(id, (key, index));
        }
        self.jobs.insert(
            key,
            Member {
                completions: vec![None; prepared.lengths.len()],
                prepared,
                job,
            },
        );
    }

    /// One denoising step for the whole batch; answers the jobs it finished.
    fn step(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let metrics = self.queue.metrics();
        let canvases = self.batch.len();
        metrics.running.set(self.jobs.len() as i64);
        let stepped = std::panic::catch_unwind(AssertUnwindSafe(|| self.batch.step()));
        metrics.model_calls(1, canvases, 0);
        let left = match stepped {
            Ok(Ok(left)) => left,
            Ok(Err(err)) => return self.fail_all(JobError::Failed(format!("{err:#}"))),
            Err(_) => {
                eprintln!(
                    "redraft serve: a batch step failed unexpectedly (a bug); the server goes on"
                );
                return self.fail_all(JobError::Failed("internal error".into()));
            }
        };
        for (id, result) in left {
            let Some((key, index)) = self.canvases.remove(&id) else {
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
                        let Work::Fim(work) = &member.job.work else {
                            unreachable!("only FIM jobs join the batch")
                        };
                        let answer =
                            finish_fim(self.engine, &member.prepared, &completions, work, metrics);
                        member.job.answer(Ok(Answer::Fim(answer)), metrics);
                    }
                }
                Err(err) => {
                    // Cancelled (its client left) or failed: the job's other canvases go too.
                    let member = self.jobs.remove(&key).expect("present");
                    member.job.cancel.store(true, Ordering::Relaxed);
                    self.canvases.retain(|_, slot| slot.0 != key);
                    member.job.answer(Err(job_error(err)), metrics);
                }
            }
        }
        metrics.running.set(self.jobs.len() as i64);
        if let Some(delay) = self.delay {
            std::thread::sleep(delay);
        }
    }

    /// A step that failed for everyone: every job in the batch gets the error, and a fresh
    /// batch (and cache) starts.
    fn fail_all(&mut self, error: JobError) {
        let metrics = self.queue.metrics();
        for (_, member) in self.jobs.drain() {
            member.job.cancel.store(true, Ordering::Relaxed);
            member.job.answer(Err(error.clone()), metrics);
        }
        self.canvases.clear();
        self.batch = self.engine.batch(self.policy);
        metrics.running.set(0);
    }
}
