//! The language server's side of the one runtime (`redraft_runtime::scheduler`), which owns the
//! model, its queue, its caches and any remote backend, as it does for `redraft serve`: this
//! module turns a document snapshot and a cursor (with the other open documents, the edit
//! history and the settings) into the runtime's [`FimWork`] / [`EditWork`], submits it, forwards
//! the runtime's drafts to the request's [`JobStream`], and turns the answer into what
//! `inline.rs` and `next_edit/jobs.rs` need, with the `--debug` log line of each job.
//!
//! What stays here is what is about ropes and the protocol: the window of a huge document handed
//! to the runtime (and the byte offsets of its answer shifted back into the document), the other
//! documents as neighbour snippets, the request's settings as the work's options. A request's
//! cancel flag ([`crate::cancel`]) is its job's: a newer keystroke, an edit or `$/cancelRequest`
//! stops the job at the sampler's next denoising step, and a job cancelled while queued is
//! answered without running the model.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use redraft_context::edit::{HistoryEdit, TextEdit};
use redraft_context::Neighbour;
use redraft_engine::sampler::SamplerConfig;
use redraft_engine::DeviceSpec;
use redraft_runtime::metrics::Metrics;
use redraft_runtime::scheduler::{
    idle, kept, Answer, EditWork, FimWork, Loaded, LoopConfig, Rejected, Scheduler, Submit, Ticket,
    Work,
};
use redraft_suggest::edit::DRAFT_TAU;
use redraft_suggest::fim::FimOptions;
use tokio::sync::{mpsc, oneshot};

pub use redraft_runtime::scheduler::JobError;

use super::config::Settings;
use super::document::Snapshot;
use super::documents::Snapshots;
use super::log::Log;
use super::stream::JobStream;

/// Above this size only a window of text around the cursor is handed to the context layer
/// (without the tree, which would describe the whole text): no budget reaches that far, and
/// copying a huge rope per keystroke would dominate the request.
const MAX_SOURCE_BYTES: usize = 1 << 20;
const SOURCE_WINDOW_BYTES: usize = 256 << 10;
/// The most of each other open document offered as neighbour context.
const MAX_NEIGHBOUR_BYTES: usize = 128 << 10;
/// Jobs that may wait for the model. A keystroke's request cancels the one before it on its
/// document, and a cancelled job leaves the queue as soon as the thread reaches it, so while an
/// editor types only a few wait; past this many the request is answered at once with an error
/// (logged) and no suggestion.
const MAX_QUEUE: usize = 64;

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
    /// For a job precomputed before any request: raised once a request waits for it
    /// ([`redraft_runtime::scheduler::Submit::wanted`]); `None` when one waits already.
    pub wanted: Option<Arc<AtomicBool>>,
}

/// A suggested next edit: `edits` in document byte offsets, in order, not overlapping; none
/// when the model sees nothing to change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NextEdit {
    pub edits: Vec<TextEdit>,
    /// The editable region the model rewrote.
    pub region: Range<usize>,
    /// The rewrite changed more than `nextEdit.maxChange` of the region, so it is no edit.
    pub rewrote_too_much: bool,
    /// The model was less sure of the change than `nextEdit.minConfidence` (or the model's own
    /// bar), so it is no edit.
    pub unsure: bool,
    /// How sure the model was of the change (the lowest probability of a changed token).
    pub confidence: Option<f32>,
    pub steps: usize,
    pub latency_ms: f64,
}

/// What the model suggested, cleaned, best first; empty when nothing was worth showing.
#[derive(Debug, Clone)]
pub struct Suggestions {
    pub texts: Vec<String>,
}

/// A job's answer, once it comes (the job is queued already).
pub type Pending<T> = BoxFuture<'static, Result<T, JobError>>;

/// A model load under way: its answer, and the messages of its downloads (a named model the
/// Hugging Face cache lacks) before it.
pub struct Loading {
    pub answer: oneshot::Receiver<Loaded>,
    pub downloads: mpsc::UnboundedReceiver<String>,
}

/// The server's handle on the runtime; cheap to clone.
#[derive(Clone)]
pub struct Inference {
    scheduler: Scheduler,
    log: Log,
    /// The documents forgotten so far, for tests (the runtime's own list is its loop's).
    #[cfg(test)]
    forgotten: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Inference {
    /// Starts the runtime's thread with no model yet (the server loads one at `initialize`):
    /// one job at a time, each from the kept cache its document's last job of its kind left.
    pub fn start(log: Log) -> Inference {
        let config = LoopConfig {
            max_batch: 1,
            max_queue: MAX_QUEUE,
            cache: SamplerConfig::default().cache,
            kept_bytes: kept::DEFAULT_MIB << 20,
            idle_refresh: Some(idle::DEFAULT_IDLE_REFRESH),
            door: "redraft lsp",
        };
        // The thread lives as long as the process: `run` ends without waiting for it.
        let (scheduler, _thread) = Scheduler::start(
            Err("the model is still loading".into()),
            config,
            Arc::new(Metrics::new()),
        );
        Inference {
            scheduler,
            log,
            #[cfg(test)]
            forgotten: Arc::default(),
        }
    }

    /// Loads (or replaces) the model; the answer names what was loaded or why it failed, and
    /// the downloads of a named model are reported as messages on the way. Jobs queued after
    /// this wait for it.
    pub fn load(&self, model: Option<PathBuf>, device: DeviceSpec) -> Loading {
        let (tx, downloads) = mpsc::unbounded_channel();
        let progress = redraft_models::Messages::new(move |message| {
            let _ = tx.send(message);
        });
        Loading {
            answer: self
                .scheduler
                .load_reporting(model, device, Some(Box::new(progress))),
            downloads,
        }
    }

    /// The document `uri` closed: the model's caches for it are dropped, making room for the
    /// open documents' (jobs name their document as their client).
    pub fn forget(&self, uri: &tower_lsp_server::ls_types::Uri) {
        self.scheduler.forget(uri.as_str());
        #[cfg(test)]
        self.forgotten
            .lock()
            .unwrap()
            .push(uri.as_str().to_string());
    }

    /// The documents [`forget`](Self::forget) was called for, in order.
    #[cfg(test)]
    pub fn forgotten(&self) -> Vec<String> {
        self.forgotten.lock().unwrap().clone()
    }

    /// Queues `job` now; its answer comes with the returned future.
    pub fn submit(&self, job: Job) -> Pending<Suggestions> {
        let document = &job.snapshots.document;
        let (text, base) = source_text(document, job.cursor);
        let tree = tree(document, &text);
        let settings = &job.settings;
        let options = FimOptions {
            max_tokens: settings.max_tokens,
            context_tokens: settings.context_tokens,
            fixed_length: None,
            candidates: job.candidates,
            sampler: {
                let mut sampler = SamplerConfig::effort(settings.effort);
                sampler.cache.realign = settings.edit_reuse;
                sampler
            },
            min_confidence: settings.min_confidence,
        };
        let backend = settings.backend.clone();
        // Copying other documents is skipped when the model has no room for them.
        let neighbours = if self
            .scheduler
            .room_for_neighbours(&options, backend.as_ref())
        {
            neighbours(&job.snapshots.neighbours)
        } else {
            Vec::new()
        };
        let work = FimWork {
            cursor: job.cursor - base,
            text,
            language: document.language,
            tree,
            neighbours,
            options,
            stop: Vec::new(),
            backend,
            effort: Some(settings.effort),
        };
        let at = format!(
            "{} v{} @{}",
            document.uri.as_str(),
            document.version,
            job.cursor
        );
        let ticket = self.queue(
            Work::Fim(work),
            document,
            job.cancel,
            job.stream.is_some(),
            None,
        );
        let log = self.log.clone();
        async move {
            let Answer::Fim(answer) = answer(ticket?, job.stream).await? else {
                unreachable!("a FIM job is answered as one");
            };
            let r = &answer.report;
            let texts = answer.suggestions;
            log.debug(|| match &r.backend {
                Some(endpoint) => format!(
                    "{at}: backend {endpoint}, {:.1} ms, {} suggestion(s)",
                    r.model_ms,
                    texts.len()
                ),
                None => format!(
                    "{at}: canvas {} ({}), lengths {:?}, context {}+{}+{} tokens, passes {}/{}/{} full/window/realign ({} positions from the cache), {:.1} ms, {} suggestion(s), confidence {}{}",
                    r.canvas_tokens,
                    r.canvas_reason,
                    r.lengths,
                    r.neighbour_tokens,
                    r.prefix_tokens,
                    r.suffix_tokens,
                    r.full_passes,
                    r.window_passes,
                    r.realign_passes,
                    r.cached_positions.unwrap_or(0),
                    r.model_ms,
                    texts.len(),
                    confidences(&r.confidences),
                    match r.withheld {
                        0 => String::new(),
                        n => format!(", {n} withheld as unsure"),
                    }
                ),
            });
            Ok(Suggestions { texts })
        }
        .boxed()
    }

    /// Queues a next edit now, in the same queue as completions, through the pipeline
    /// `redraft complete --next-edit` runs with the same defaults (the model's budget shares,
    /// the draft bar), so both suggest the same edit for the same document, cursor and history.
    pub fn submit_edit(&self, job: EditJob) -> Pending<NextEdit> {
        let document = &job.document;
        let (text, base) = source_text(document, job.cursor);
        let tree = tree(document, &text);
        let mut sampler = SamplerConfig::effort(job.settings.effort);
        sampler.draft_tau = Some(DRAFT_TAU);
        // The kept cache's first pass is exact (never realigned across an edit, which is an
        // approximation): the command line runs from a fresh cache, and a next edit is compared
        // with it.
        sampler.cache.realign = None;
        let history = job.history.len();
        let work = EditWork {
            cursor: job.cursor - base,
            document: text,
            region: None,
            path: job.path,
            language: document.language,
            tree,
            history: job.history,
            sampler,
            limits: job.settings.next_edit.limits(),
            effort: Some(job.settings.effort),
        };
        let at = format!(
            "{} v{} @{}",
            document.uri.as_str(),
            document.version,
            job.cursor
        );
        let rope = document.rope.clone();
        let ticket = self.queue(
            Work::Edit(work),
            document,
            job.cancel,
            job.stream.is_some(),
            job.wanted,
        );
        let log = self.log.clone();
        async move {
            let Answer::Edit(answer) = answer(ticket?, job.stream).await? else {
                unreachable!("a next edit is answered as one");
            };
            let report = &answer.report;
            let shift = |range: &Range<usize>| range.start + base..range.end + base;
            let next = NextEdit {
                edits: answer
                    .edits
                    .iter()
                    .map(|edit| TextEdit {
                        range: shift(&edit.range),
                        new_text: edit.new_text.clone(),
                    })
                    .collect(),
                region: shift(&report.region),
                rewrote_too_much: report.rewrote_too_much,
                unsure: report.unsure,
                confidence: report.confidence,
                steps: report.steps,
                latency_ms: report.latency_ms,
            };
            log.debug(|| {
                format!(
                    "{at}: next edit over lines {}..{} ({}), history {history} edit(s), {} step(s), {:.1} ms, {}",
                    rope.byte_to_line(next.region.start),
                    rope.byte_to_line(next.region.end),
                    report.reason,
                    next.steps,
                    next.latency_ms,
                    match (next.rewrote_too_much, next.unsure, next.confidence) {
                        (true, _, _) => "rewrote too much: no edit".to_string(),
                        (_, true, Some(c)) => format!("unsure ({c:.2}): no edit"),
                        (_, _, Some(c)) => format!("{} edit(s), confidence {c:.2}", next.edits.len()),
                        _ => format!("{} edit(s)", next.edits.len()),
                    }
                )
            });
            Ok(next)
        }
        .boxed()
    }

    /// Submits `work` for `document` under the request's cancel flag (and, for a precomputed
    /// job, the flag a request raises when it comes to wait for it); each document's jobs
    /// start from the cache its last job of their kind left.
    fn queue(
        &self,
        work: Work,
        document: &Snapshot,
        cancel: Arc<AtomicBool>,
        drafts: bool,
        wanted: Option<Arc<AtomicBool>>,
    ) -> Result<Ticket, JobError> {
        let submit = Submit {
            deadline: None,
            drafts,
            cancel: Some(cancel),
            client: Some(document.uri.as_str().to_string()),
            wanted,
        };
        self.scheduler
            .submit(work, submit)
            .map_err(|rejected| match rejected {
                Rejected::Full => JobError::Failed(format!(
                    "{MAX_QUEUE} jobs already wait for the model, so this one was dropped (the next keystroke asks again)"
                )),
                Rejected::ShuttingDown => JobError::ShuttingDown,
                Rejected::NoModel(why) => JobError::NoModel(why),
            })
    }
}

/// Where next-edit jobs run: the runtime ([`Inference`]); the next-edit bookkeeping's tests
/// answer them by hand.
pub trait EditRunner: Send + Sync {
    /// Queues `job` now; its answer comes with the returned future.
    fn submit_edit(&self, job: EditJob) -> Pending<NextEdit>;
}

impl EditRunner for Inference {
    fn submit_edit(&self, job: EditJob) -> Pending<NextEdit> {
        Inference::submit_edit(self, job)
    }
}

/// Waits for `ticket`'s answer, handing each draft to `stream` as it comes. The stream closes
/// (its closing draft sent, if a preview shows) before the answer returns, so the handler's
/// flush after it covers every draft; dropping this future (the request was cancelled) closes
/// it too, and raises the job's cancel flag.
async fn answer(mut ticket: Ticket, stream: Option<JobStream>) -> Result<Answer, JobError> {
    let (Some(mut stream), Some(mut drafts)) = (stream, ticket.drafts.take()) else {
        return ticket.answer().await;
    };
    let result = loop {
        tokio::select! {
            biased;
            draft = drafts.recv() => match draft {
                Some(draft) => stream.step(&draft),
                None => break ticket.answer().await,
            },
            result = ticket.answer() => break result,
        }
    };
    // The drafts sent before the answer.
    while let Ok(draft) = drafts.try_recv() {
        stream.step(&draft);
    }
    drop(stream);
    result
}

/// Each candidate's confidence for the debug log: `[0.82, 0.31]`, `-` where none was measured.
fn confidences(values: &[Option<f32>]) -> String {
    let each: Vec<String> = values
        .iter()
        .map(|c| c.map_or("-".to_string(), |c| format!("{c:.2}")))
        .collect();
    format!("[{}]", each.join(", "))
}

/// The document's tree, when the text handed over is the whole document (`source_text` cuts a
/// window of a large one, at `base` 0 too when the cursor is near its start; the context layer
/// then parses around the cursor itself).
fn tree(document: &Snapshot, text: &str) -> Option<tree_sitter::Tree> {
    if text.len() == document.rope.len_bytes() {
        document.tree.clone()
    } else {
        None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;

    /// A Rust document over `MAX_SOURCE_BYTES` (and under the parse limit) keeps a tree, but the
    /// context layer gets a window of it: one starting at the document's start is no more the
    /// whole document than any other, and gets no tree (the tree's bodies would end past it).
    #[test]
    fn only_the_whole_document_comes_with_its_tree() {
        let uri: tower_lsp_server::ls_types::Uri = "file:///t/big.rs".parse().unwrap();
        let method = "fn m() -> u32 {\n    1\n}\n";
        let text = method.repeat((MAX_SOURCE_BYTES + (400 << 10)) / method.len());
        let big = Document::new(uri.clone(), "rust", 0, &text, 0).snapshot();
        assert!(big.tree.is_some());
        let (window, base) = source_text(&big, 10);
        assert_eq!(base, 0);
        assert!(window.len() < text.len());
        assert!(tree(&big, &window).is_none());

        let small = Document::new(uri, "rust", 0, method, 0).snapshot();
        let (whole, _) = source_text(&small, 10);
        assert!(tree(&small, &whole).is_some());
    }
}
