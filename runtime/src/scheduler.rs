//! The scheduler between the HTTP handlers and the model: one OS thread owns the [`Engine`]
//! (and its `KvCache`), fed by a bounded queue; nothing here runs on the async runtime.
//!
//! The interface is small so the loop that drains the queue can be swapped: handlers
//! [`Scheduler::submit`] a [`Work`] and get a [`Ticket`] (the answer's channel, the draft
//! stream if asked for, and a guard that raises the job's cancel flag when the request goes
//! away: a client that disconnects cancels its job at the sampler's next denoising step). The
//! inference thread takes jobs with [`Queue::next`] / [`Queue::try_next_if`] and answers each with
//! [`Job::answer`]. `serial` runs them one at a time through `redraft_suggest`'s pipelines;
//! a batched loop would admit queued jobs into a running batch between steps through the same
//! calls.
//!
//! Limits: at most `max_queue` jobs wait (past that, [`Rejected::Full`] -> 429); a closed queue
//! (shutting down) refuses new jobs but its loop still answers every job it holds; an aborted
//! one answers the queued jobs with [`JobError::ShuttingDown`] and raises the running ones'
//! cancel flags.

mod batched;
pub mod kept;
mod run;
mod serial;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use redraft_context::edit::HistoryEdit;
use redraft_context::{Language, Neighbour, Source};
use redraft_engine::sampler::{CachePolicy, SamplerConfig};
use redraft_engine::Engine;
use redraft_suggest::fim::FimOptions;
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;

/// A testing aid shared with `redraft lsp`'s worker: `REDRAFT_STEP_DELAY_MS=N` sleeps N ms
/// after every denoising step, so the end-to-end tests can disconnect, fill the queue or shut
/// down while a run is under way, however fast the model. Unset (always, outside tests) it
/// costs nothing.
const STEP_DELAY_ENV: &str = "REDRAFT_STEP_DELAY_MS";

fn step_delay() -> Option<Duration> {
    let ms: u64 = std::env::var(STEP_DELAY_ENV).ok()?.trim().parse().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// A fill-in-the-middle request: a document with the cursor, as the pipeline takes it.
#[derive(Debug, Clone)]
pub struct FimWork {
    pub text: String,
    pub cursor: usize,
    pub language: Language,
    /// Other files the client sent (repo-level FIM headers).
    pub neighbours: Vec<Neighbour>,
    pub options: FimOptions,
    /// The answer is cut at the first of these.
    pub stop: Vec<String>,
}

impl FimWork {
    /// The document the pipeline plans from (no tree: the server parses around the cursor).
    pub fn source(&self) -> Source<'_> {
        Source {
            text: &self.text,
            cursor: self.cursor,
            language: self.language,
            tree: None,
        }
    }
}

/// A next-edit request: an excerpt of a file, the cursor, the region the client diffs the
/// answer against, and the recent edits.
#[derive(Debug, Clone)]
pub struct EditWork {
    pub document: String,
    pub cursor: usize,
    pub region: std::ops::Range<usize>,
    pub path: String,
    pub language: Language,
    pub history: Vec<HistoryEdit>,
    pub sampler: SamplerConfig,
}

#[derive(Debug, Clone)]
pub enum Work {
    Fim(FimWork),
    Edit(EditWork),
}

impl Work {
    pub fn kind(&self) -> &'static str {
        match self {
            Work::Fim(_) => "fim",
            Work::Edit(_) => "edit",
        }
    }
}

/// Why a FIM choice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model ended the middle, the context layer cut it at its unit, or a stop string did.
    Stop,
    /// The canvas ran out (the middle may go on).
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FimChoice {
    pub text: String,
    pub finish_reason: FinishReason,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FimAnswer {
    /// One per candidate asked for (an empty text when post-processing kept nothing).
    pub choices: Vec<FimChoice>,
    /// Context tokens the model saw.
    pub prompt_tokens: usize,
    /// Tokens of the returned texts.
    pub completion_tokens: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EditAnswer {
    /// The client's region with the suggested edits applied (unchanged: no edit).
    pub new_region: String,
    pub changed: bool,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Fim(FimAnswer),
    Edit(EditAnswer),
}

/// A job that ended without an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("cancelled")]
    Cancelled,
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The request cannot be run on this model (the engine's `InvalidRequest`).
    #[error("{0}")]
    Invalid(String),
    /// A bug or a model failure.
    #[error("{0}")]
    Failed(String),
}

/// One denoising step's draft of the (first) canvas: the raw middle so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub step: usize,
    /// Committed text, U+2591 for each slot still masked, nothing past the end of the middle.
    pub text: String,
    pub masked: usize,
    pub slots: usize,
}

/// A queued request.
pub struct Job {
    pub work: Work,
    pub cancel: Arc<AtomicBool>,
    pub deadline: Option<Instant>,
    pub drafts: Option<mpsc::UnboundedSender<Draft>>,
    reply: oneshot::Sender<Result<Answer, JobError>>,
    queued: Instant,
}

impl Job {
    /// Whether nobody waits for the answer any more (the client left).
    pub fn abandoned(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || self.reply.is_closed()
    }

    /// Sends the answer and records how the job ended.
    pub fn answer(self, result: Result<Answer, JobError>, metrics: &Metrics) {
        let kind = self.work.kind();
        let outcome = match &result {
            Ok(_) => "answered",
            Err(JobError::Cancelled) => "cancelled",
            Err(JobError::ShuttingDown) => "rejected_shutdown",
            Err(JobError::Invalid(_)) => "invalid",
            Err(JobError::Failed(_)) => "failed",
        };
        metrics.job(kind, outcome);
        metrics.job_done(kind, self.queued.elapsed());
        let _ = self.reply.send(result);
    }
}

/// Why a job was not queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// The queue holds `max_queue` jobs.
    Full,
    ShuttingDown,
    /// No model is loaded, and why.
    NoModel(String),
}

struct QueueState {
    jobs: VecDeque<Job>,
    open: bool,
}

/// The bounded queue between the handlers and the inference thread.
pub struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
    capacity: usize,
    metrics: Arc<Metrics>,
    /// Cancel flags of jobs handed out and not yet answered, raised by [`Queue::abort`].
    running: Mutex<Vec<Weak<AtomicBool>>>,
}

impl Queue {
    fn new(capacity: usize, metrics: Arc<Metrics>) -> Queue {
        Queue {
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                open: true,
            }),
            ready: Condvar::new(),
            capacity,
            metrics,
            running: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // A panic while holding the lock leaves the queue consistent (push/pop only).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, job: Job) -> Result<(), Rejected> {
        let mut state = self.lock();
        if !state.open {
            return Err(Rejected::ShuttingDown);
        }
        if state.jobs.len() >= self.capacity {
            return Err(Rejected::Full);
        }
        state.jobs.push_back(job);
        self.metrics.queue_depth.set(state.jobs.len() as i64);
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    fn taken(&self, job: &Job) {
        self.metrics
            .queue_wait_seconds
            .observe(job.queued.elapsed().as_secs_f64());
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|flag| flag.strong_count() > 0);
        running.push(Arc::downgrade(&job.cancel));
    }

    /// The next job, waiting for one; `None` once the queue is closed and empty.
    pub fn next(&self) -> Option<Job> {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                self.metrics.queue_depth.set(state.jobs.len() as i64);
                drop(state);
                self.taken(&job);
                return Some(job);
            }
            if !state.open {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The next job if one is queued and `fits` it (else it stays first in the queue).
    pub fn try_next_if(&self, fits: impl FnOnce(&Job) -> bool) -> Option<Job> {
        let mut state = self.lock();
        if !fits(state.jobs.front()?) {
            return None;
        }
        let job = state.jobs.pop_front()?;
        self.metrics.queue_depth.set(state.jobs.len() as i64);
        drop(state);
        self.taken(&job);
        Some(job)
    }

    /// Refuses new jobs; the loop answers those it holds, then ends.
    pub fn close(&self) {
        self.lock().open = false;
        self.ready.notify_all();
    }

    /// [`Queue::close`], then every queued job is answered as shut down and every running one
    /// cancelled.
    pub fn abort(&self) {
        let drained: Vec<Job> = {
            let mut state = self.lock();
            state.open = false;
            self.metrics.queue_depth.set(0);
            state.jobs.drain(..).collect()
        };
        self.ready.notify_all();
        for job in drained {
            job.answer(Err(JobError::ShuttingDown), &self.metrics);
        }
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for flag in running.iter().filter_map(Weak::upgrade) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Jobs waiting (not the running ones).
    pub fn len(&self) -> usize {
        self.lock().jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

/// Raises its job's cancel flag when dropped, unless the answer was received: dropping the
/// request (a client that disconnected) or its response stream cancels the job.
pub struct CancelGuard {
    flag: Arc<AtomicBool>,
    armed: bool,
}

impl CancelGuard {
    /// The job ended (answered or failed): nothing to cancel.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
}

/// A queued job's answer, drafts and guard.
pub struct Ticket {
    pub reply: oneshot::Receiver<Result<Answer, JobError>>,
    pub drafts: Option<mpsc::UnboundedReceiver<Draft>>,
    pub guard: CancelGuard,
}

impl Ticket {
    /// The answer; a closed channel (the inference thread is gone) is a failure.
    pub async fn answer(&mut self) -> Result<Answer, JobError> {
        let result = (&mut self.reply)
            .await
            .unwrap_or_else(|_| Err(JobError::Failed("the inference thread stopped".into())));
        self.guard.disarm();
        result
    }
}

/// What a job is asked with, apart from its work.
#[derive(Debug, Clone, Default)]
pub struct Submit {
    pub deadline: Option<Instant>,
    /// Send each denoising step's draft.
    pub drafts: bool,
}

/// How the loop runs jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopConfig {
    /// Canvases a batched loop admits at most; 1 is one job at a time.
    pub max_batch: usize,
    pub max_queue: usize,
    /// The approximate context cache, for every job.
    pub cache: CachePolicy,
    /// Bytes the caches finished jobs leave for the next ones may hold ([`kept`]).
    pub kept_bytes: usize,
}

/// The handle the HTTP side holds; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    queue: Arc<Queue>,
    /// Why there is no model, if there is none.
    missing: Option<String>,
    positions: usize,
}

impl Scheduler {
    /// Starts the inference thread on `engine` (or, without one, a scheduler that refuses
    /// every job with [`Rejected::NoModel`]). The thread ends once the queue is closed and
    /// drained; join it to wait for that.
    pub fn start(
        engine: Result<Engine, String>,
        config: LoopConfig,
        metrics: Arc<Metrics>,
    ) -> (Scheduler, Option<std::thread::JoinHandle<()>>) {
        let queue = Arc::new(Queue::new(config.max_queue.max(1), metrics));
        match engine {
            Ok(engine) => {
                let positions = engine.model().config().max_position_embeddings;
                let thread_queue = Arc::clone(&queue);
                let delay = step_delay();
                let handle = std::thread::Builder::new()
                    .name("redraft-serve-inference".into())
                    .spawn(move || {
                        if config.max_batch > 1 {
                            batched::run(&engine, &thread_queue, config, delay)
                        } else {
                            serial::run(&engine, &thread_queue, config.kept_bytes, delay)
                        }
                    })
                    .expect("spawning the inference thread");
                (
                    Scheduler {
                        queue,
                        missing: None,
                        positions,
                    },
                    Some(handle),
                )
            }
            Err(why) => {
                queue.close();
                (
                    Scheduler {
                        queue,
                        missing: Some(why),
                        positions: 0,
                    },
                    None,
                )
            }
        }
    }

    /// Queues `work`; the ticket's guard cancels it if dropped before the answer.
    pub fn submit(&self, work: Work, submit: Submit) -> Result<Ticket, Rejected> {
        if let Some(why) = &self.missing {
            return Err(Rejected::NoModel(why.clone()));
        }
        let kind = work.kind();
        let cancel = Arc::new(AtomicBool::new(false));
        let (reply, rx) = oneshot::channel();
        let (drafts_tx, drafts_rx) = if submit.drafts {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let job = Job {
            work,
            cancel: Arc::clone(&cancel),
            deadline: submit.deadline,
            drafts: drafts_tx,
            reply,
            queued: Instant::now(),
        };
        match self.queue.push(job) {
            Ok(()) => Ok(Ticket {
                reply: rx,
                drafts: drafts_rx,
                guard: CancelGuard {
                    flag: cancel,
                    armed: true,
                },
            }),
            Err(rejected) => {
                let outcome = match rejected {
                    Rejected::Full => "rejected_full",
                    _ => "rejected_shutdown",
                };
                self.queue.metrics().job(kind, outcome);
                Err(rejected)
            }
        }
    }

    /// The model's positions (0 without a model).
    pub fn positions(&self) -> usize {
        self.positions
    }

    pub fn missing(&self) -> Option<&str> {
        self.missing.as_deref()
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    pub fn close(&self) {
        self.queue.close();
    }

    pub fn abort(&self) {
        self.queue.abort();
    }
}
