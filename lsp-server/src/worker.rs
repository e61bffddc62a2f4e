//! The inference worker: one OS thread that owns the model (`Engine`) and a `KvCache` reused
//! across requests, fed by a channel. Nothing here runs on the async runtime.
//!
//! Each job goes through the one FIM pipeline (`redraft_suggest::fim`), as `redraft eval` and
//! `redraft serve` do: the context layer plans the request from the snapshot (windows,
//! neighbour snippets, the canvas size and why), the engine fills the canvas(es), the context
//! layer cleans each middle. A next-edit job goes through the one next-edit pipeline
//! (`redraft_suggest::edit::next_edit`), as `redraft complete --next-edit` and `redraft eval
//! --next-edit` do. Both kinds share the queue and the sampler controls: a job whose cancel flag
//! is set is answered without running the model, and a running one stops at the sampler's next
//! denoising step.

use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use redraft_context::edit::{EditBudget, HistoryEdit, TextEdit};
use redraft_context::{Neighbour, Source};
use redraft_engine::qwen2::KvCache;
use redraft_engine::sampler::{Controls, DenoiseStep, SamplerConfig};
use redraft_engine::{DeviceSpec, Engine};
use redraft_suggest::edit::{next_edit, EditInput, DRAFT_TAU};
use redraft_suggest::fim::{self, FimOptions};
use tokio::sync::oneshot;

use super::config::Settings;
use super::document::Snapshot;
use super::documents::Snapshots;
use super::log::Log;
use super::stream::JobStream;
use redraft_runtime::backend::{Backend, BackendConfig, BackendError};

/// Above this size only a window of text around the cursor is handed to the context layer
/// (without the tree, which would describe the whole text): no budget reaches that far, and
/// copying a huge rope per keystroke would dominate the request.
const MAX_SOURCE_BYTES: usize = 1 << 20;
const SOURCE_WINDOW_BYTES: usize = 256 << 10;
/// The most of each other open document offered as neighbour context.
const MAX_NEIGHBOUR_BYTES: usize = 128 << 10;
/// A testing aid: `REDRAFT_STEP_DELAY_MS=N` makes the worker sleep N ms after every denoising
/// step, so the end-to-end tests can cancel or supersede a run mid-way on any machine, however
/// fast the model. Unset (always, outside tests) it costs nothing.
const STEP_DELAY_ENV: &str = "REDRAFT_STEP_DELAY_MS";

fn step_delay() -> Option<Duration> {
    let ms: u64 = std::env::var(STEP_DELAY_ENV).ok()?.trim().parse().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// One inline completion to compute.
pub struct Job {
    pub snapshots: Snapshots,
    /// Byte offset of the cursor in `snapshots.document`.
    pub cursor: usize,
    /// How many different suggestions to compute (one batch).
    pub candidates: usize,
    pub settings: Settings,
    pub cancel: Arc<AtomicBool>,
    /// Where each step's draft goes, for clients that opted in.
    pub stream: Option<JobStream>,
}

type Reply = oneshot::Sender<Result<Suggestions, JobError>>;

/// One next edit to compute.
pub struct EditJob {
    pub document: Snapshot,
    /// The document's name, as the history names it.
    pub path: String,
    /// Byte offset of the cursor in `document`.
    pub cursor: usize,
    /// The recent edits of the open documents, oldest first.
    pub history: Vec<HistoryEdit>,
    pub settings: Settings,
    pub cancel: Arc<AtomicBool>,
    pub stream: Option<JobStream>,
}

type EditReply = oneshot::Sender<Result<NextEdit, JobError>>;

/// A suggested next edit: `edits` in document byte offsets, in order, not overlapping; none
/// when the model sees nothing to change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NextEdit {
    pub edits: Vec<TextEdit>,
    /// The editable region the model rewrote.
    pub region: Range<usize>,
    /// The rewrite changed more than `nextEdit.maxChange` of the region, so it is no edit.
    pub rewrote_too_much: bool,
    pub steps: usize,
    pub latency_ms: f64,
}

/// What the model suggested, cleaned, best first; empty when nothing was worth showing.
#[derive(Debug, Clone)]
pub struct Suggestions {
    pub texts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("cancelled")]
    Cancelled,
    #[error("no model is loaded ({0})")]
    NoModel(String),
    #[error("{0}")]
    Failed(String),
}

enum Message {
    Load {
        model: Option<PathBuf>,
        device: DeviceSpec,
        reply: oneshot::Sender<Result<String, String>>,
    },
    Job(Box<Job>, Reply),
    Edit(Box<EditJob>, EditReply),
}

/// The handle the server holds; cheap to clone.
#[derive(Clone)]
pub struct Worker {
    tx: mpsc::Sender<Message>,
}

impl Worker {
    pub fn spawn(log: Log) -> Worker {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("redraft-inference".into())
            .spawn(move || Inference::new(log).run(rx))
            .expect("spawning the inference thread");
        Worker { tx }
    }

    /// Loads (or replaces) the model; the answer names what was loaded or why it failed. Jobs
    /// queued after this wait for it.
    pub fn load(
        &self,
        model: Option<PathBuf>,
        device: DeviceSpec,
    ) -> oneshot::Receiver<Result<String, String>> {
        let (reply, rx) = oneshot::channel();
        let _ = self.tx.send(Message::Load {
            model,
            device,
            reply,
        });
        rx
    }

    /// Queues `job`; the answer comes on the returned channel (closed if the thread is gone).
    pub fn submit(&self, job: Job) -> oneshot::Receiver<Result<Suggestions, JobError>> {
        let (reply, rx) = oneshot::channel();
        let _ = self.tx.send(Message::Job(Box::new(job), reply));
        rx
    }

    /// Queues a next edit, in the same queue as completions.
    pub fn submit_edit(&self, job: EditJob) -> oneshot::Receiver<Result<NextEdit, JobError>> {
        let (reply, rx) = oneshot::channel();
        let _ = self.tx.send(Message::Edit(Box::new(job), reply));
        rx
    }
}

struct Inference {
    engine: Option<Engine>,
    /// See [`STEP_DELAY_ENV`].
    step_delay: Option<Duration>,
    /// Why there is no engine (shown in results' logs).
    missing: String,
    cache: KvCache,
    /// The remote FIM backend of the settings last seen, built once per configuration.
    backend: Option<Backend>,
    log: Log,
}

impl Inference {
    fn new(log: Log) -> Inference {
        Inference {
            engine: None,
            step_delay: step_delay(),
            missing: "the model is still loading".into(),
            cache: KvCache::default(),
            backend: None,
            log,
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Message>) {
        while let Ok(message) = rx.recv() {
            match message {
                Message::Load {
                    model,
                    device,
                    reply,
                } => {
                    let answer = self.load(model, device);
                    let _ = reply.send(answer);
                }
                Message::Job(mut job, reply) => {
                    let live = !reply.is_closed() && !job.cancel.load(Ordering::Relaxed);
                    let answer = self.guarded(live, "a completion", |me| me.complete(&mut job));
                    // Its stream closes first, so the answer's flush covers the closing draft.
                    drop(job);
                    let _ = reply.send(answer);
                }
                Message::Edit(mut job, reply) => {
                    let live = !reply.is_closed() && !job.cancel.load(Ordering::Relaxed);
                    let answer = self.guarded(live, "a next edit", |me| me.next_edit(&mut job));
                    drop(job);
                    let _ = reply.send(answer);
                }
            }
        }
    }

    /// Runs a job unless it is no longer wanted (`live` false: cancelled, or nobody waits),
    /// and survives a bug in it: one request must not end suggestions for the session.
    fn guarded<T>(
        &mut self,
        live: bool,
        what: &str,
        run: impl FnOnce(&mut Self) -> Result<T, JobError>,
    ) -> Result<T, JobError> {
        if !live {
            return Err(JobError::Cancelled);
        }
        std::panic::catch_unwind(AssertUnwindSafe(|| run(self))).unwrap_or_else(|_| {
            self.cache = KvCache::default();
            self.log.error(format!(
                "{what} failed unexpectedly (a bug); the worker goes on"
            ));
            Err(JobError::Failed("internal error".into()))
        })
    }

    fn load(&mut self, model: Option<PathBuf>, device: DeviceSpec) -> Result<String, String> {
        self.engine = None;
        self.cache = KvCache::default();
        match redraft_runtime::default_model::load_or_default(model.as_deref(), device) {
            Ok(engine) => {
                let origin = format!(
                    "{} on {}",
                    engine.dir().display(),
                    redraft_engine::device::describe(engine.model().device())
                );
                self.engine = Some(engine);
                Ok(origin)
            }
            Err(err) => {
                self.missing = format!("{err:#}");
                Err(self.missing.clone())
            }
        }
    }

    fn complete(&mut self, job: &mut Job) -> Result<Suggestions, JobError> {
        let document = &job.snapshots.document;
        let (text, base) = source_text(document, job.cursor);
        let cursor = job.cursor - base;
        let source = Source {
            text: &text,
            cursor,
            language: document.language,
            tree: if base == 0 {
                document.tree.as_ref()
            } else {
                None
            },
        };
        let options = FimOptions {
            max_tokens: job.settings.max_tokens,
            context_tokens: job.settings.context_tokens,
            fixed_length: None,
            candidates: job.candidates,
            sampler: {
                let mut sampler = SamplerConfig::effort(job.settings.effort);
                sampler.cache.edit = job.settings.edit_reuse;
                sampler
            },
        };
        if let Some(config) = &job.settings.backend {
            // The same plan and post-processing around another process's model: only the run
            // step differs. A cancel closes the HTTP request.
            let backend = backend_for(&mut self.backend, config)?;
            let neighbours =
                if fim::budget_for(backend.positions(&options), &options).neighbour_tokens > 0 {
                    neighbours(&job.snapshots.neighbours)
                } else {
                    Vec::new()
                };
            let outcome = backend
                .complete(&source, &neighbours, &options, Some(&job.cancel))
                .map_err(|e| match e {
                    BackendError::Cancelled => JobError::Cancelled,
                    other => JobError::Failed(other.to_string()),
                })?;
            self.log.debug(|| {
                format!(
                    "{} v{} @{}: backend {}, {:.1} ms, {} suggestion(s)",
                    document.uri.as_str(),
                    document.version,
                    job.cursor,
                    backend.endpoint(),
                    outcome.latency_ms,
                    outcome.texts.len()
                )
            });
            return Ok(Suggestions {
                texts: outcome.texts,
            });
        }
        let Some(engine) = &self.engine else {
            return Err(JobError::NoModel(self.missing.clone()));
        };
        // Copying other documents is skipped when the model has no room for them.
        let neighbours = if fim::budget(engine, &options).neighbour_tokens > 0 {
            neighbours(&job.snapshots.neighbours)
        } else {
            Vec::new()
        };
        let prepared = fim::prepare(engine, &source, &neighbours, &options);
        let started = Instant::now();
        let reused = self.cache.reused_positions();
        let cache = &mut self.cache;
        let completions = with_controls(
            engine,
            &job.cancel,
            &mut job.stream,
            self.step_delay,
            |controls| fim::run(engine, &prepared, cache, controls),
        )
        .map_err(job_error)?;
        let model_ms = started.elapsed().as_secs_f64() * 1e3;
        let plan = &prepared.plan;
        let texts = fim::finish(completions.iter().map(|c| c.middle.as_str()), plan);
        // How the kept cache served the request (an edit pass reuses it across the edit).
        let passes = completions.first().map_or((0, 0, 0), |c| {
            (c.full_passes, c.window_passes, c.edit_passes)
        });
        let from_cache = self.cache.reused_positions() - reused;
        self.log.debug(|| {
            format!(
                "{} v{} @{}: canvas {} ({}), lengths {:?}, context {}+{}+{} tokens, passes {}/{}/{} full/window/edit ({from_cache} positions from the cache), {:.1} ms, {} suggestion(s)",
                document.uri.as_str(),
                document.version,
                job.cursor,
                plan.canvas.tokens,
                plan.canvas.reason,
                prepared.lengths,
                plan.neighbour_tokens,
                plan.prefix_tokens,
                plan.suffix_tokens,
                passes.0,
                passes.1,
                passes.2,
                model_ms,
                texts.len()
            )
        });
        Ok(Suggestions { texts })
    }

    /// The next edit for `job`, through the pipeline `redraft complete --next-edit` runs, with
    /// the same defaults (the model's budget shares, the draft bar, a fresh cache), so both
    /// suggest the same edit for the same document, cursor and history.
    fn next_edit(&mut self, job: &mut EditJob) -> Result<NextEdit, JobError> {
        let Some(engine) = &self.engine else {
            return Err(JobError::NoModel(self.missing.clone()));
        };
        let document = &job.document;
        let (text, base) = source_text(document, job.cursor);
        let input = EditInput {
            source: Source {
                text: &text,
                cursor: job.cursor - base,
                language: document.language,
                tree: if base == 0 {
                    document.tree.as_ref()
                } else {
                    None
                },
            },
            path: &job.path,
            history: &job.history,
        };
        let positions = engine.model().config().max_position_embeddings;
        let budget = job
            .settings
            .next_edit
            .apply_to(EditBudget::for_positions(positions));
        let mut sampler = SamplerConfig::effort(job.settings.effort);
        sampler.draft_tau = Some(DRAFT_TAU);
        // Not the completions' cache: a next edit's context is another prompt, and reusing a
        // cache across requests is an approximation the command line does not make.
        let mut cache = KvCache::default();
        let outcome = with_controls(
            engine,
            &job.cancel,
            &mut job.stream,
            self.step_delay,
            |controls| next_edit(engine, &input, &budget, sampler, &mut cache, controls),
        )
        .map_err(job_error)?;
        let shift = |range: &Range<usize>| range.start + base..range.end + base;
        let answer = NextEdit {
            edits: outcome
                .suggestion
                .edits
                .iter()
                .map(|edit| TextEdit {
                    range: shift(&edit.range),
                    new_text: edit.new_text.clone(),
                })
                .collect(),
            region: shift(&outcome.plan.region_range),
            rewrote_too_much: outcome.rewrote_too_much,
            steps: outcome.completion.steps,
            latency_ms: outcome.latency_ms,
        };
        self.log.debug(|| {
            format!(
                "{} v{} @{}: next edit over lines {}..{} ({}), history {} edit(s), {} step(s), {:.1} ms, {}",
                document.uri.as_str(),
                document.version,
                job.cursor,
                document.rope.byte_to_line(answer.region.start),
                document.rope.byte_to_line(answer.region.end),
                outcome.plan.reason,
                job.history.len(),
                answer.steps,
                answer.latency_ms,
                if answer.rewrote_too_much {
                    "rewrote too much: no edit".to_string()
                } else {
                    format!("{} edit(s)", answer.edits.len())
                }
            )
        });
        Ok(answer)
    }
}

/// Runs the sampler with the controls every job gets: its cancel flag, its stream of drafts
/// (if the client asked for them) and the testing aid's pause after each step.
fn with_controls<T>(
    engine: &Engine,
    cancel: &AtomicBool,
    stream: &mut Option<JobStream>,
    delay: Option<Duration>,
    run: impl FnOnce(Controls<'_>) -> T,
) -> T {
    let watched = stream.is_some() || delay.is_some();
    let mut on_step = |step: &DenoiseStep| {
        if let (Some(stream), Some(view)) = (stream.as_mut(), step.canvases.first()) {
            stream.step(engine, step.step, view);
        }
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
    };
    run(Controls {
        cancel: Some(cancel),
        deadline: None,
        on_step: watched.then_some(&mut on_step as &mut dyn FnMut(&DenoiseStep)),
        stop: None,
    })
}

/// The backend for `config` in `slot`, built again when the configuration changed.
fn backend_for<'a>(
    slot: &'a mut Option<Backend>,
    config: &BackendConfig,
) -> Result<&'a Backend, JobError> {
    if slot.as_ref().is_none_or(|b| b.config() != config) {
        *slot = None;
        let backend =
            Backend::new(config.clone()).map_err(|e| JobError::Failed(format!("backend: {e}")))?;
        *slot = Some(backend);
    }
    Ok(slot.as_ref().expect("built above"))
}

fn job_error(err: redraft_engine::Error) -> JobError {
    match err {
        redraft_engine::Error::Cancelled => JobError::Cancelled,
        other => JobError::Failed(format!("{other:#}")),
    }
}

/// The text handed to the context layer and the byte offset in the document where it starts.
fn source_text(document: &Snapshot, cursor: usize) -> (String, usize) {
    let rope = &document.rope;
    if rope.len_bytes() <= MAX_SOURCE_BYTES {
        return (rope.to_string(), 0);
    }
    // Whole lines around the cursor.
    let first = rope.byte_to_line(cursor.saturating_sub(SOURCE_WINDOW_BYTES));
    let start = rope.line_to_byte(first);
    let last = rope.byte_to_line((cursor + SOURCE_WINDOW_BYTES).min(rope.len_bytes()));
    let end = rope.line_to_byte((last + 1).min(rope.len_lines()));
    (rope.byte_slice(start..end).to_string(), start)
}

fn neighbours(snapshots: &[Snapshot]) -> Vec<Neighbour> {
    snapshots
        .iter()
        .map(|s| {
            let len = s.rope.len_bytes().min(MAX_NEIGHBOUR_BYTES);
            let end = s.rope.char_to_byte(s.rope.byte_to_char(len));
            Neighbour {
                path: s
                    .uri
                    .to_file_path()
                    .map_or_else(|| s.uri.as_str().to_string(), |p| p.display().to_string()),
                text: s.rope.byte_slice(..end).to_string(),
                edited_at: s.edited_at,
            }
        })
        .collect()
}
