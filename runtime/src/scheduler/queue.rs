//! The bounded queue between the doors and the inference thread: jobs, and the model loads
//! ordered among them, with what the thread last said about its model (so a door is refused at
//! once when no model is loaded or coming).
//!
//! Two kinds of takers share it: the model thread's loop ([`Queue::next`],
//! [`Queue::try_next_if`], [`Queue::next_load`]) takes the jobs that need the model and the
//! loads, in order, and never sees a FIM job sent to a remote backend; the backend workers
//! ([`Queue::next_remote`]) take those, in order, past any load (they need no model). So a slow
//! backend holds up neither the lanes being decoded nor the jobs queued behind it, and one bound
//! (`max_queue`) still holds for every job waiting, whoever takes it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use redraft_engine::sampler::Efforts;
use redraft_engine::{DeviceSpec, Engine};
use tokio::sync::{mpsc, oneshot};

use super::{Answer, Draft, JobError, LoadFailure, Loaded, Rejected, Work};
use crate::metrics::Metrics;

/// A queued request.
pub struct Job {
    pub work: Work,
    pub cancel: Arc<AtomicBool>,
    pub deadline: Option<Instant>,
    pub drafts: Option<mpsc::UnboundedSender<Draft>>,
    /// Who the job is for, when the door can tell ([`super::Submit::client`]).
    pub client: Option<String>,
    /// Raised once someone waits for the answer ([`super::Submit::wanted`]).
    wanted: Option<Arc<AtomicBool>>,
    reply: oneshot::Sender<Result<Answer, JobError>>,
    /// When it was submitted (a job's whole time, `redraft_job_duration_seconds`)...
    queued: Instant,
    /// ...and when it was last queued (its wait, `redraft_queue_wait_seconds`): later than
    /// `queued` for a job put back ([`Queue::put_back`]).
    waiting_since: Instant,
}

impl Job {
    pub(super) fn new(
        work: Work,
        cancel: Arc<AtomicBool>,
        deadline: Option<Instant>,
        drafts: Option<mpsc::UnboundedSender<Draft>>,
        reply: oneshot::Sender<Result<Answer, JobError>>,
        client: Option<String>,
        wanted: Option<Arc<AtomicBool>>,
    ) -> Job {
        Job {
            work,
            cancel,
            deadline,
            drafts,
            client,
            wanted,
            reply,
            queued: Instant::now(),
            waiting_since: Instant::now(),
        }
    }

    /// Whether someone waits for the answer: always, but for a job run ahead of any request
    /// until its flag goes up ([`super::Submit::wanted`]).
    pub fn is_wanted(&self) -> bool {
        self.wanted
            .as_ref()
            .is_none_or(|flag| flag.load(Ordering::Relaxed))
    }

    /// The flag of a job run ahead of any request, down while nobody waits for the answer (it
    /// goes up when a request joins, and down again when that request leaves): what the serial
    /// loop watches to let such a job make way for a request.
    pub(super) fn ahead_of_requests(&self) -> Option<Arc<AtomicBool>> {
        self.wanted.as_ref().map(Arc::clone)
    }

    /// Whether nobody waits for the answer any more (the client left).
    pub fn abandoned(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || self.reply.is_closed()
    }

    /// Sends the answer and records how the job ended. The draft stream closes after the
    /// answer is sent: a door reads the drafts sent before it from the channel.
    pub fn answer(self, result: Result<Answer, JobError>, metrics: &Metrics) {
        let kind = self.work.kind();
        let outcome = match &result {
            Ok(_) => "answered",
            Err(JobError::Cancelled) => "cancelled",
            Err(JobError::ShuttingDown) => "rejected_shutdown",
            Err(JobError::NoModel(_)) => "no_model",
            Err(JobError::Invalid(_)) => "invalid",
            Err(JobError::Failed(_)) => "failed",
            Err(JobError::Backend(_)) => "backend_failed",
        };
        metrics.job(kind, outcome);
        metrics.job_done(kind, self.queued.elapsed());
        let _ = self.reply.send(result);
    }
}

/// A model to load in place of the thread's.
pub struct Load {
    pub model: Option<PathBuf>,
    pub device: DeviceSpec,
    /// Where a named model's downloads are reported (`None`: stderr).
    pub progress: Option<Box<dyn redraft_models::Progress + Send>>,
    pub reply: oneshot::Sender<Loaded>,
}

enum Queued {
    Job(Box<Job>),
    Load(Load),
}

/// What the queue keeps of a loaded model: what the doors ask of it and what a job it hands
/// out is bound to.
#[derive(Debug, Clone, Copy)]
pub(super) struct ModelFacts {
    pub positions: usize,
    /// The model's effort presets, which a job's effort is bound to when it is taken
    /// ([`Work::bind_effort`]).
    pub efforts: Efforts,
}

impl ModelFacts {
    pub fn of(engine: &Engine) -> ModelFacts {
        ModelFacts {
            positions: engine.model().config().max_position_embeddings,
            efforts: engine.settings().efforts,
        }
    }
}

/// The thread's model as the doors see it.
#[derive(Debug, Clone, Default)]
pub(super) struct ModelState {
    /// Why there is no model, if there is none.
    pub missing: Option<String>,
    /// The loaded model's positions (0 without one).
    pub positions: usize,
    /// A load is queued or under way.
    pub loading: bool,
}

struct QueueState {
    items: VecDeque<Queued>,
    /// Jobs in `items` (what the capacity bounds).
    jobs: usize,
    /// Loads in `items`.
    loads: usize,
    /// The thread is loading a model.
    loading: bool,
    open: bool,
    /// The loaded model, or why there is none.
    model: Result<ModelFacts, String>,
}

/// What the model thread is to take next.
enum ForModel {
    /// The job at this index: the first one someone waits for, else the first run ahead of
    /// any request ([`Job::is_wanted`]), before any load.
    Job(usize),
    /// A model load, before any job for the model.
    Load(usize),
    Nothing,
}

impl QueueState {
    /// The model thread's next item: the first load or job that needs the model (the backend
    /// workers take the others).
    fn for_model(&self) -> ForModel {
        // A request goes before a job nobody asked for yet (a precomputed next edit for
        // another document must not hold up a keystroke's completion), nothing before a load.
        let mut ahead = None;
        for (at, item) in self.items.iter().enumerate() {
            match item {
                Queued::Job(job) if job.work.needs_model() => {
                    if job.is_wanted() {
                        return ForModel::Job(at);
                    }
                    ahead.get_or_insert(at);
                }
                Queued::Job(_) => {}
                Queued::Load(_) => return ahead.map_or(ForModel::Load(at), ForModel::Job),
            }
        }
        ahead.map_or(ForModel::Nothing, ForModel::Job)
    }

    /// Whether a load or a job for the model that someone waits for is queued
    /// ([`Job::is_wanted`]): work that may not wait for an idle refresh.
    fn urgent(&self) -> bool {
        self.items.iter().any(|item| match item {
            Queued::Job(job) => job.work.needs_model() && job.is_wanted(),
            Queued::Load(_) => true,
        })
    }

    /// The first job for the backend workers.
    fn for_remote(&self) -> Option<usize> {
        self.items
            .iter()
            .position(|item| matches!(item, Queued::Job(job) if !job.work.needs_model()))
    }
}

/// How often a wait for a wanted job looks at the flags of queued jobs nobody waits for yet
/// ([`Queue::next_within`]).
const WANTED_POLL: Duration = Duration::from_millis(10);

/// What waiting for the model's next job found ([`Queue::next_within`]).
pub enum Waited {
    Job(Box<Job>),
    /// Nothing for the model within the time asked.
    Idle,
    /// A model load is next, or the queue is closed and holds no job for the model.
    Ended,
}

/// The bounded queue between the doors and the inference thread.
pub struct Queue {
    state: Mutex<QueueState>,
    /// Signalled for the model thread (a job that needs the model, a load, a close)...
    ready: Condvar,
    /// ...and for the backend workers (a job sent to a remote backend, a close).
    remote_ready: Condvar,
    capacity: usize,
    metrics: Arc<Metrics>,
    /// Cancel flags of jobs handed out and not yet answered, raised by [`Queue::abort`].
    running: Mutex<Vec<Weak<AtomicBool>>>,
    /// Clients gone (a document closed) whose kept caches the loops drop ([`Queue::forget`]).
    forgotten: Mutex<Vec<String>>,
}

impl Queue {
    /// An open queue for a thread holding `model` (or none, and why).
    pub(super) fn new(
        capacity: usize,
        metrics: Arc<Metrics>,
        model: Result<ModelFacts, String>,
    ) -> Queue {
        Queue {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                jobs: 0,
                loads: 0,
                loading: false,
                open: true,
                model,
            }),
            ready: Condvar::new(),
            remote_ready: Condvar::new(),
            capacity,
            metrics,
            running: Mutex::new(Vec::new()),
            forgotten: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // A panic while holding the lock leaves the queue consistent (push/pop only).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `client` is gone (the language server's document closed): the loops drop the caches
    /// its jobs left before their next job, so they make room for the clients still there.
    pub fn forget(&self, client: &str) {
        self.forgotten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(client.to_string());
    }

    /// The clients forgotten since the last call.
    pub(super) fn take_forgotten(&self) -> Vec<String> {
        std::mem::take(&mut *self.forgotten.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn push(&self, job: Job) -> Result<(), Rejected> {
        let mut state = self.lock();
        if let Err(why) = &state.model {
            if !state.loading && state.loads == 0 && job.work.needs_model() {
                return Err(Rejected::NoModel(why.clone()));
            }
        }
        if !state.open {
            return Err(Rejected::ShuttingDown);
        }
        let mut left = Vec::new();
        if state.jobs >= self.capacity {
            // Jobs whose clients left (a cancelled request, a replaced precompute) hold places
            // a waiting client could use: they are answered now, not when the loop reaches them.
            let (gone, kept): (VecDeque<Queued>, VecDeque<Queued>) =
                std::mem::take(&mut state.items)
                    .into_iter()
                    .partition(|item| matches!(item, Queued::Job(job) if job.abandoned()));
            state.items = kept;
            state.jobs -= gone.len();
            self.metrics.queue_depth.set(state.jobs as i64);
            left.extend(gone);
        }
        let cancel_left = |left: Vec<Queued>| {
            for item in left {
                if let Queued::Job(job) = item {
                    job.answer(Err(JobError::Cancelled), &self.metrics);
                }
            }
        };
        if state.jobs >= self.capacity {
            drop(state);
            cancel_left(left);
            return Err(Rejected::Full);
        }
        let for_model = job.work.needs_model();
        state.items.push_back(Queued::Job(Box::new(job)));
        state.jobs += 1;
        self.metrics.queue_depth.set(state.jobs as i64);
        drop(state);
        cancel_left(left);
        if for_model {
            self.ready.notify_one();
        } else {
            self.remote_ready.notify_one();
        }
        Ok(())
    }

    /// Queues again a job the loop took and stopped before its answer (one run ahead of any
    /// request that made way for one): first in the queue, so it is the next job nobody waits
    /// for, behind the requests ([`Queue::next`]'s order). It held a place before, so the bound
    /// is not checked again, and a closed queue takes it too (the loop drains it).
    pub(super) fn put_back(&self, mut job: Job) {
        job.waiting_since = Instant::now();
        let mut state = self.lock();
        state.items.push_front(Queued::Job(Box::new(job)));
        state.jobs += 1;
        self.metrics.queue_depth.set(state.jobs as i64);
        drop(state);
        self.ready.notify_one();
    }

    /// Queues a model load after the jobs queued so far (answered at once when closed).
    pub(super) fn push_load(&self, load: Load) {
        let mut state = self.lock();
        if !state.open {
            drop(state);
            let _ = load.reply.send(Err(LoadFailure {
                reason: JobError::ShuttingDown.to_string(),
                kept: None,
            }));
            return;
        }
        state.items.push_back(Queued::Load(load));
        state.loads += 1;
        drop(state);
        self.ready.notify_one();
    }

    fn taken(&self, job: &Job) {
        self.metrics
            .queue_wait_seconds
            .observe(job.waiting_since.elapsed().as_secs_f64());
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|flag| flag.strong_count() > 0);
        running.push(Arc::downgrade(&job.cancel));
    }

    /// The job at `at`, taken out of `state`, its effort bound to the model's presets (the
    /// model it runs on: loads queued after it wait for it).
    fn pop_job(&self, state: &mut QueueState, at: usize) -> Job {
        let Some(Queued::Job(mut job)) = state.items.remove(at) else {
            unreachable!("a job is there");
        };
        state.jobs -= 1;
        self.metrics.queue_depth.set(state.jobs as i64);
        if let Ok(model) = &state.model {
            job.work.bind_effort(&model.efforts);
        }
        *job
    }

    /// The next job that needs the model, waiting for one; `None` once the queue holds none
    /// and is closed, or when a model load is next (the loop ends, and its thread loads). Jobs
    /// someone waits for come first, each kind in the order queued ([`Job::is_wanted`]). Jobs
    /// sent to a remote backend are left to the backend workers (`Queue::next_remote`).
    pub fn next(&self) -> Option<Job> {
        match self.wait_for_model(None) {
            Waited::Job(job) => Some(*job),
            Waited::Idle => unreachable!("no deadline"),
            Waited::Ended => None,
        }
    }

    /// [`Queue::next`], waiting at most `idle`: [`Waited::Idle`] when no job for the model that
    /// someone waits for came meanwhile (the loop's chance to refresh a kept cache, `idle`);
    /// jobs run ahead of any request ([`Job::is_wanted`]) stay queued then, in order.
    pub fn next_within(&self, idle: Duration) -> Waited {
        self.wait_for_model(Some(Instant::now() + idle))
    }

    fn wait_for_model(&self, deadline: Option<Instant>) -> Waited {
        let mut state = self.lock();
        loop {
            let queued = match state.for_model() {
                // With a deadline, only a job someone waits for ends the wait (or any, once
                // the queue closes: the loop drains it).
                ForModel::Job(at) if deadline.is_none() || !state.open || state.urgent() => {
                    let job = self.pop_job(&mut state, at);
                    drop(state);
                    self.taken(&job);
                    return Waited::Job(Box::new(job));
                }
                ForModel::Load(_) => return Waited::Ended,
                ForModel::Nothing if !state.open => return Waited::Ended,
                ForModel::Job(_) => true,
                ForModel::Nothing => false,
            };
            match deadline {
                None => state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Waited::Idle;
                    }
                    // A queued job's flag goes up without a signal: look again soon.
                    let wait = if queued { left.min(WANTED_POLL) } else { left };
                    state = match self.ready.wait_timeout(state, wait) {
                        Ok((state, _)) => state,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
            }
        }
    }

    /// Whether the model's loop has something to do: a job for the model that someone waits
    /// for ([`Job::is_wanted`]) or a load is queued, or the queue is closed. What stops an idle
    /// refresh between layers.
    pub fn model_work_waiting(&self) -> bool {
        let state = self.lock();
        !state.open || state.urgent()
    }

    /// Whether a job for the model that someone still waits for ([`Job::is_wanted`], not
    /// [`Job::abandoned`]) is queued in an open queue before any load: what a running job nobody
    /// waits for yet makes way for (the serial loop). A request behind a load waits for the
    /// jobs before the load, this one among them: making way for it would only hand this job
    /// out again, at once.
    pub fn request_waiting(&self) -> bool {
        let state = self.lock();
        state.open
            && state
                .items
                .iter()
                .take_while(|item| !matches!(item, Queued::Load(_)))
                .any(|item| {
                    matches!(item, Queued::Job(job)
                        if job.work.needs_model() && job.is_wanted() && !job.abandoned())
                })
    }

    /// The next job that needs the model, if one is queued before any load and `fits` it (else
    /// it stays where it is in the queue).
    pub fn try_next_if(&self, fits: impl FnOnce(&Job) -> bool) -> Option<Job> {
        let mut state = self.lock();
        let ForModel::Job(at) = state.for_model() else {
            return None;
        };
        let Some(Queued::Job(first)) = state.items.get(at) else {
            unreachable!("a job is there");
        };
        if !fits(first) {
            return None;
        }
        let job = self.pop_job(&mut state, at);
        drop(state);
        self.taken(&job);
        Some(job)
    }

    /// The next FIM job sent to a remote backend, for a backend worker, waiting for one (it
    /// passes any load: it needs no model); `None` once the queue holds none and is closed.
    pub(super) fn next_remote(&self) -> Option<Job> {
        let mut state = self.lock();
        loop {
            match state.for_remote() {
                Some(at) => {
                    let job = self.pop_job(&mut state, at);
                    drop(state);
                    self.taken(&job);
                    return Some(job);
                }
                None if !state.open => return None,
                None => {
                    state = self
                        .remote_ready
                        .wait(state)
                        .unwrap_or_else(|e| e.into_inner())
                }
            }
        }
    }

    /// The model load that is next for the model thread (no job that needs the model before
    /// it), taken out (the thread is loading from now on); `None` when none is.
    pub(super) fn next_load(&self) -> Option<Load> {
        let mut state = self.lock();
        let ForModel::Load(at) = state.for_model() else {
            return None;
        };
        let Some(Queued::Load(load)) = state.items.remove(at) else {
            unreachable!("a load is there");
        };
        state.loads -= 1;
        state.loading = true;
        Some(load)
    }

    /// The thread's load ended: a model, or none and why.
    pub(super) fn loaded(&self, model: Result<ModelFacts, String>) {
        let mut state = self.lock();
        state.loading = false;
        state.model = model;
    }

    /// The model as the last load left it.
    pub(super) fn model(&self) -> ModelState {
        let state = self.lock();
        ModelState {
            missing: state.model.as_ref().err().cloned(),
            positions: state.model.as_ref().map_or(0, |m| m.positions),
            loading: state.loading || state.loads > 0,
        }
    }

    /// Refuses new jobs; the loop and the backend workers answer those it holds, then end.
    pub fn close(&self) {
        self.lock().open = false;
        self.ready.notify_all();
        self.remote_ready.notify_all();
    }

    /// [`Queue::close`], then every queued job is answered as shut down (and every queued load
    /// as not made) and every running job cancelled.
    pub fn abort(&self) {
        let drained: Vec<Queued> = {
            let mut state = self.lock();
            state.open = false;
            state.jobs = 0;
            state.loads = 0;
            self.metrics.queue_depth.set(0);
            state.items.drain(..).collect()
        };
        self.ready.notify_all();
        self.remote_ready.notify_all();
        for item in drained {
            match item {
                Queued::Job(job) => job.answer(Err(JobError::ShuttingDown), &self.metrics),
                Queued::Load(load) => {
                    let _ = load.reply.send(Err(LoadFailure {
                        reason: JobError::ShuttingDown.to_string(),
                        kept: None,
                    }));
                }
            }
        }
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for flag in running.iter().filter_map(Weak::upgrade) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Jobs waiting (not the running ones, nor loads).
    pub fn len(&self) -> usize {
        self.lock().jobs
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
