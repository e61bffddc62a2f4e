//! The scheduler between the doors and the model: one OS thread owns the [`Engine`] (and the
//! caches it leaves), fed by a bounded queue; nothing here runs on an async runtime.
//!
//! Whichever door a request came in by (`redraft serve`'s handlers, `redraft lsp`'s), it
//! becomes a [`Work`] the door [`Scheduler::submit`]s, and gets a [`Ticket`]: the answer's
//! channel, the draft stream if asked for, and a guard that raises the job's cancel flag when
//! the request goes away (a client that disconnects, or a keystroke that supersedes the
//! request, cancels its job at the sampler's next denoising step). A door that keeps cancel
//! flags of its own hands one in ([`Submit::cancel`]).
//!
//! The thread (`thread`) runs a loop over the queue, one job at a time (`serial`) or batched
//! (`batched`); both take jobs with [`Queue::next`] / [`Queue::try_next_if`], run them through
//! `run` (the `redraft_suggest` pipelines) under the cache policy `cache_policy` chooses, the
//! same in either loop, and answer each with [`Job::answer`]. A FIM job whose work names a
//! remote backend never reaches the model's loop: a few backend workers (`remote`) take it from
//! the same queue and answer it, so a slow backend delays no job of the model's. A job starts
//! from a cache an earlier one left ([`kept`]). [`Scheduler::load`] replaces the model while
//! the thread runs: the load waits its turn in the queue like a job, so jobs submitted after it
//! run on the new model; without a model, jobs are refused ([`Rejected::NoModel`]) or answered
//! [`JobError::NoModel`] once a load queued before them failed.
//!
//! Limits: at most `max_queue` jobs wait (past that, [`Rejected::Full`]), for the model or a
//! backend worker; a closed queue (shutting down) refuses new jobs but its loop and the backend
//! workers still answer every job it holds; an aborted one answers the queued jobs with
//! [`JobError::ShuttingDown`] and raises the running ones' cancel flags.

mod batched;
pub mod idle;
pub mod kept;
mod queue;
mod remote;
mod run;
mod serial;
mod thread;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redraft_context::edit::{EditBudget, HistoryEdit, RegionReason, TextEdit};
use redraft_context::{Language, Neighbour, Source};
use redraft_engine::sampler::{CachePolicy, Effort, Efforts, SamplerConfig};
use redraft_engine::{DeviceSpec, Engine};
use redraft_suggest::fim::{self, FimOptions};
use tokio::sync::{mpsc, oneshot};

use crate::backend::BackendConfig;
use crate::metrics::Metrics;
pub use queue::{Job, Queue, Waited};

/// A testing aid for every door: `REDRAFT_STEP_DELAY_MS=N` sleeps N ms after every denoising
/// step, so the end-to-end tests can disconnect, supersede, fill the queue or shut down while a
/// run is under way, however fast the model. Unset (always, outside tests) it costs nothing.
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
    /// An up-to-date parse of `text`, if the door keeps one (the language server does);
    /// without it the context layer parses around the cursor.
    pub tree: Option<tree_sitter::Tree>,
    /// Other files the client sent or has open (repo-level FIM headers).
    pub neighbours: Vec<Neighbour>,
    pub options: FimOptions,
    /// The answer is cut at the first of these.
    pub stop: Vec<String>,
    /// Fill the middle with a model another process serves instead of the loaded one (the
    /// same plan and post-processing, another run step); runs with no model loaded.
    pub backend: Option<BackendConfig>,
    /// The effort the door asked for: when the job runs, `options.sampler`'s schedule and step cap
    /// become this effort's preset of the model that runs it (its `redraft.json` may tune
    /// them: [`redraft_engine::Engine::effort`]), whichever model a load queued before the job
    /// brings. `None`: `options.sampler` as it is.
    pub effort: Option<Effort>,
}

impl FimWork {
    /// The document the pipeline plans from.
    pub fn source(&self) -> Source<'_> {
        Source {
            text: &self.text,
            cursor: self.cursor,
            language: self.language,
            tree: self.tree.as_ref(),
        }
    }
}

/// What a door may set of a next edit's budget; the token shares follow the model's positions
/// ([`EditBudget::for_positions`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EditLimits {
    /// The editable region's lines above and below the cursor's line, at most.
    pub lines_above: usize,
    pub lines_below: usize,
    /// A rewrite changing more than this share of the region is no suggestion
    /// ([`EditBudget::max_changed_fraction`]).
    pub max_changed_fraction: f64,
    /// A rewrite the model is less sure of is no suggestion ([`EditBudget::min_confidence`]);
    /// `None`: the model's own bar.
    pub min_confidence: Option<f32>,
}

impl Default for EditLimits {
    fn default() -> EditLimits {
        let budget = EditBudget::default();
        EditLimits {
            lines_above: budget.lines_above,
            lines_below: budget.lines_below,
            max_changed_fraction: budget.max_changed_fraction,
            min_confidence: budget.min_confidence,
        }
    }
}

impl EditLimits {
    /// The budget of a model of `positions` positions under these limits.
    pub fn budget(&self, positions: usize) -> EditBudget {
        EditBudget {
            lines_above: self.lines_above,
            lines_below: self.lines_below,
            max_changed_fraction: self.max_changed_fraction,
            min_confidence: self.min_confidence,
            ..EditBudget::for_positions(positions)
        }
    }
}

/// A next-edit request: a document (or an excerpt of one), the cursor and the recent edits.
#[derive(Debug, Clone)]
pub struct EditWork {
    pub document: String,
    pub cursor: usize,
    /// The region the answer's `new_region` covers: the client's (it diffs the answer against
    /// it), or `None` for the one the plan chose around the cursor.
    pub region: Option<Range<usize>>,
    pub path: String,
    pub language: Language,
    /// An up-to-date parse of `document`, if the door keeps one.
    pub tree: Option<tree_sitter::Tree>,
    pub history: Vec<HistoryEdit>,
    pub sampler: SamplerConfig,
    pub limits: EditLimits,
    /// The effort the door asked for: when the job runs, `sampler`'s schedule and step cap
    /// become this effort's preset of the model that runs it (its `redraft.json` may tune
    /// them: [`redraft_engine::Engine::effort`]), whichever model a load queued before the job
    /// brings. `None`: `sampler` as it is.
    pub effort: Option<Effort>,
}

#[derive(Debug, Clone)]
pub enum Work {
    Fim(FimWork),
    Edit(EditWork),
}

impl Work {
    /// The job's sampler with its effort ([`FimWork::effort`]) taken from `efforts`, the
    /// presets of the model it is about to run on.
    pub(crate) fn bind_effort(&mut self, efforts: &Efforts) {
        let (sampler, effort) = match self {
            Work::Fim(work) => (&mut work.options.sampler, work.effort),
            Work::Edit(work) => (&mut work.sampler, work.effort),
        };
        if let Some(effort) = effort {
            let preset = efforts.get(effort);
            sampler.schedule = preset.schedule;
            sampler.max_steps = preset.max_steps;
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Work::Fim(_) => "fim",
            Work::Edit(_) => "edit",
        }
    }

    /// Whether the job runs on the loaded model (else it is a FIM job sent to a remote
    /// backend, for the backend workers).
    fn needs_model(&self) -> bool {
        !matches!(
            self,
            Work::Fim(FimWork {
                backend: Some(_),
                ..
            })
        )
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

/// How a FIM job was planned and run, for a door's logs.
#[derive(Debug, Clone, PartialEq)]
pub struct FimReport {
    /// The canvas the context layer chose, in tokens, and why.
    pub canvas_tokens: usize,
    pub canvas_reason: String,
    /// The canvas lengths filled, one per candidate.
    pub lengths: Vec<usize>,
    /// Context tokens by part: snippets of other files, the prefix, the suffix.
    pub neighbour_tokens: usize,
    pub prefix_tokens: usize,
    pub suffix_tokens: usize,
    /// The first canvas's model passes by kind: how the kept cache served the job (an edit
    /// pass realigned it across the edit since its last job).
    pub full_passes: usize,
    pub window_passes: usize,
    pub realign_passes: usize,
    /// Positions taken from the kept cache instead of computed; `None` where the loop does not
    /// count them (the batched one).
    pub cached_positions: Option<usize>,
    /// The model's (or the backend's) part of the job.
    pub model_ms: f64,
    /// The completions endpoint that filled the middle, when a remote backend did.
    pub backend: Option<String>,
    /// Per candidate, how sure the model was of its suggestion ([`fim::confidence`]; `None`:
    /// nothing to show, or a backend's middle).
    pub confidences: Vec<Option<f32>>,
    /// Candidates withheld as below the bar ([`fim::Prepared::min_confidence`]).
    pub withheld: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FimAnswer {
    /// One per candidate asked for (an empty text when post-processing kept nothing).
    pub choices: Vec<FimChoice>,
    /// What an editor shows: the candidates' cleaned texts, best first, without duplicates or
    /// the ones post-processing dropped (no stop strings applied).
    pub suggestions: Vec<String>,
    /// Context tokens the model saw.
    pub prompt_tokens: usize,
    /// Tokens of the returned texts.
    pub completion_tokens: usize,
    pub report: FimReport,
}

/// How a next edit was planned and run, for a door's logs.
#[derive(Debug, Clone, PartialEq)]
pub struct EditReport {
    /// The region the model rewrote (the plan's), in the work's document offsets, and why.
    pub region: Range<usize>,
    pub reason: RegionReason,
    /// The rewrite changed more of the region than the limits allow, so it is no edit.
    pub rewrote_too_much: bool,
    /// How sure the model was of the rewrite's change (`EditOutcome::confidence`).
    pub confidence: Option<f32>,
    /// The confidence was below the bar, so it is no edit.
    pub unsure: bool,
    pub steps: usize,
    /// Plan + model + extraction.
    pub latency_ms: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EditAnswer {
    /// The work's region with the suggested edits that lie inside it applied (unchanged: no
    /// edit).
    pub new_region: String,
    pub changed: bool,
    /// Every suggested edit, in the work's document offsets, in order, not overlapping; none
    /// when the model sees nothing to change.
    pub edits: Vec<TextEdit>,
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub report: EditReport,
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
    /// The job needs a model and none is loaded: why.
    #[error("no model is loaded ({0})")]
    NoModel(String),
    /// The request cannot be run on this model (the engine's `InvalidRequest`).
    #[error("{0}")]
    Invalid(String),
    /// A bug or a model failure.
    #[error("{0}")]
    Failed(String),
    /// A remote backend gave no completion for a FIM job sent to it: down, timed out, an HTTP
    /// error (with the backend's own message), an answer that is not a completion, or a client
    /// that cannot be built for its configuration.
    #[error("{0}")]
    Backend(String),
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

/// Why a job was not queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// The queue holds `max_queue` jobs.
    Full,
    ShuttingDown,
    /// No model is loaded (and none is being loaded), and why.
    NoModel(String),
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
    /// The job's cancel flag, when the door raises it itself too (the language server, when a
    /// newer keystroke supersedes the request); `None`: a new one, raised by the ticket's guard
    /// only.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Who the job is for, when the door can tell (the language server: the document): the job
    /// starts from the cache its client's last job of its kind left ([`kept`]).
    pub client: Option<String>,
    /// `Some` for a job the door runs before anyone asks for its answer (the language server's
    /// next edit, precomputed in a typing pause), with the flag the door raises once a request
    /// waits for it; `None`: someone waits already. Until its flag is up, such a job neither
    /// stops the loop's idle refresh nor goes before one that is due ([`idle`]): the refresh
    /// spares the next keystroke an exact pass, the job speeds up a request that may not come.
    pub wanted: Option<Arc<AtomicBool>>,
}

/// How the loop runs jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopConfig {
    /// Canvases a batched loop admits at most; 1 is one job at a time.
    pub max_batch: usize,
    pub max_queue: usize,
    /// What the loop holds every job's context cache to, whichever loop it is
    /// (`cache_policy`): a cache or edit reuse turned off here is off for every job, and a
    /// new prompt is computed in `prompt_chunk` pieces; `refresh_every` and edit reuse's
    /// settings are each job's own (its sampler's).
    pub cache: CachePolicy,
    /// Bytes the caches finished jobs leave for the next ones may hold ([`kept`]).
    pub kept_bytes: usize,
    /// After this long with no job for the model, the newest kept cache a realigning pass left
    /// approximate is recomputed exactly ([`idle`]); `None`: never.
    pub idle_refresh: Option<Duration>,
    /// The command whose loop it is, as its messages on stderr name it (`redraft serve`).
    pub door: &'static str,
}

/// The context cache policy `work` runs under in a loop configured with `in_loop`, the one
/// place it is decided, so a job is cached the same whether it runs alone (`serial`: the
/// pipeline's own run) or in a lane of its own (`batched`: the lane's `EngineBatch`).
///
/// The job's own policy (its sampler's: a FIM job's `options.sampler`, a next edit's
/// `sampler`), as its door set it (the language server's `editReuse` setting; `redraft
/// serve`'s `--no-cache` and `--edit-reuse`; a next edit's exact first pass, `realign: None`,
/// which keeps a kept cache from changing its answer), within the loop's:
/// - `enabled`: the job's, unless the loop turns the cache off;
/// - `edit`: the job's, unless the loop turns edit reuse off (then every first pass over a
///   changed context is exact);
/// - `refresh_every`: the job's;
/// - `prompt_chunk`: the loop's: how a new prompt shares the model's calls with the jobs being
///   decoded meanwhile is the loop's business, not one job's.
fn cache_policy(work: &Work, in_loop: &CachePolicy) -> CachePolicy {
    let asked = match work {
        Work::Fim(work) => &work.options.sampler.cache,
        Work::Edit(work) => &work.sampler.cache,
    };
    CachePolicy {
        enabled: asked.enabled && in_loop.enabled,
        refresh_every: asked.refresh_every,
        realign: in_loop.realign.and(asked.realign),
        prompt_chunk: in_loop.prompt_chunk,
    }
}

/// What a model load answers: where the model came from and the device it runs on, or why it
/// did not load.
pub type Loaded = Result<String, LoadFailure>;

/// Why a model did not load, and what serves instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFailure {
    pub reason: String,
    /// The model that still serves (where it came from and its device): a model that fails
    /// before the old one is dropped (not found, not downloaded, a header, configuration or
    /// tokenizer that does not read) leaves the old one loaded. `None`: no model is loaded.
    pub kept: Option<String>,
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)?;
        if let Some(kept) = &self.kept {
            write!(f, " (the model from {kept} still serves)")?;
        }
        Ok(())
    }
}

/// The handle the doors hold; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    queue: Arc<Queue>,
}

impl Scheduler {
    /// Starts the inference thread on `engine` (or, without one, with the reason: then every
    /// job that needs a model is refused with [`Rejected::NoModel`] until a
    /// [`Scheduler::load`]). The thread ends once the queue is closed and drained; join it to
    /// wait for that.
    pub fn start(
        engine: Result<Engine, String>,
        config: LoopConfig,
        metrics: Arc<Metrics>,
    ) -> (Scheduler, std::thread::JoinHandle<()>) {
        Scheduler::start_with(engine, config, metrics, step_delay())
    }

    /// [`Scheduler::start`] with the testing delay after every step given (`STEP_DELAY_ENV`).
    fn start_with(
        engine: Result<Engine, String>,
        config: LoopConfig,
        metrics: Arc<Metrics>,
        delay: Option<Duration>,
    ) -> (Scheduler, std::thread::JoinHandle<()>) {
        let model = match &engine {
            Ok(engine) => Ok(queue::ModelFacts::of(engine)),
            Err(why) => Err(why.clone()),
        };
        let queue = Arc::new(Queue::new(config.max_queue.max(1), metrics, model));
        let thread_queue = Arc::clone(&queue);
        let handle = std::thread::Builder::new()
            .name("redraft-inference".into())
            .spawn(move || thread::run(engine.ok(), &thread_queue, config, delay))
            .expect("spawning the inference thread");
        (Scheduler { queue }, handle)
    }

    /// Loads `model` (a path or a model name; `None`: the embedded default model) on `device`,
    /// in place of the model there is, once the jobs queued before it are answered; the jobs
    /// submitted after it wait for it. The answer names what was loaded or why it failed (then
    /// jobs that need a model fail with [`JobError::NoModel`] until another load).
    pub fn load(&self, model: Option<PathBuf>, device: DeviceSpec) -> oneshot::Receiver<Loaded> {
        self.load_reporting(model, device, None)
    }

    /// [`Scheduler::load`], reporting a named model's downloads to `progress` (an editor's
    /// `$/progress`) instead of stderr.
    pub fn load_reporting(
        &self,
        model: Option<PathBuf>,
        device: DeviceSpec,
        progress: Option<Box<dyn redraft_models::Progress + Send>>,
    ) -> oneshot::Receiver<Loaded> {
        let (reply, answer) = oneshot::channel();
        self.queue.push_load(queue::Load {
            model,
            device,
            progress,
            reply,
        });
        answer
    }

    /// `client` ([`Submit::client`]) is gone: the caches its jobs left are dropped before the
    /// next job (the language server's closed documents).
    pub fn forget(&self, client: &str) {
        self.queue.forget(client);
    }

    /// Queues `work`; the ticket's guard cancels it if dropped before the answer.
    pub fn submit(&self, work: Work, submit: Submit) -> Result<Ticket, Rejected> {
        let kind = work.kind();
        let cancel = submit
            .cancel
            .unwrap_or_else(|| Arc::new(AtomicBool::new(false)));
        let (reply, rx) = oneshot::channel();
        let (drafts_tx, drafts_rx) = if submit.drafts {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let job = Job::new(
            work,
            Arc::clone(&cancel),
            submit.deadline,
            drafts_tx,
            reply,
            submit.client,
            submit.wanted,
        );
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
                    Rejected::Full => Some("rejected_full"),
                    Rejected::ShuttingDown => Some("rejected_shutdown"),
                    Rejected::NoModel(_) => None,
                };
                if let Some(outcome) = outcome {
                    self.queue.metrics().job(kind, outcome);
                }
                Err(rejected)
            }
        }
    }

    /// The loaded model's positions (0 without a model).
    pub fn positions(&self) -> usize {
        self.queue.model().positions
    }

    /// Why there is no model, if there is none.
    pub fn missing(&self) -> Option<String> {
        self.queue.model().missing
    }

    /// Whether a FIM job under `options` (sent to `backend`, if given) would show the model any
    /// snippets of other files: a door whose neighbours are costly to gather may skip them when
    /// not. While a load is pending the next model is unknown: yes.
    pub fn room_for_neighbours(
        &self,
        options: &FimOptions,
        backend: Option<&BackendConfig>,
    ) -> bool {
        let budget = match backend {
            Some(config) => fim::budget_for(config.positions(options), options),
            None => {
                let model = self.queue.model();
                if model.loading {
                    return true;
                }
                fim::budget_for(
                    model.positions,
                    &fim::fit_to_model(model.positions, options),
                )
            }
        };
        budget.neighbour_tokens > 0
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

#[cfg(test)]
mod tests;
