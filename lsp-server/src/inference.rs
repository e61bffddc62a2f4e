//! The language server's side of the one runtime (`redraft_runtime::scheduler`), which owns the
//! model, its queue, its caches and any remote backend, as it does for `redraft serve`: this
//! module turns a document snapshot and a cursor (with the other open documents, the edit
//! history and the settings) into the runtime's [`FimWork`] / [`EditWork`], submits it, forwards
//! the runtime's drafts to the request's [`JobStream`], and turns the answer into what
//! `inline.rs` and `next_edit/jobs.rs` need, with the `--debug` log line of each job.
//!
//! What stays here is what is about ropes and the protocol: the window of a huge document handed
//! to the runtime (starting where a line starts in code, and the byte offsets of its answer
//! shifted back into the document), the other
//! documents as neighbour snippets, the request's settings as the work's options. A request's
//! cancel flag ([`crate::cancel`]) is its job's: a newer keystroke, an edit or `$/cancelRequest`
//! stops the job at the sampler's next denoising step, and a job cancelled while queued is
//! answered without running the model.

use std::ops::{ControlFlow, Range};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use redraft_context::edit::{HistoryEdit, TextEdit};
use redraft_context::{Language, LexMode, Neighbour, BRACKET_CONTEXT_BYTES};
use redraft_engine::sampler::SamplerConfig;
use redraft_engine::DeviceSpec;
use redraft_runtime::metrics::Metrics;
use redraft_runtime::scheduler::{
    idle, kept, Answer, EditWork, FimWork, Loaded, LoopConfig, Rejected, Scheduler, Submit, Ticket,
    Work,
};
use redraft_suggest::edit::DRAFT_TAU;
use redraft_suggest::fim::FimOptions;
use ropey::Rope;
use tokio::sync::{mpsc, oneshot};
use tree_sitter::{Node, Tree};

pub use redraft_runtime::scheduler::JobError;

use super::config::Settings;
use super::document::Snapshot;
use super::documents::Snapshots;
use super::log::Log;
use super::notebook::Surround;
use super::stream::JobStream;
use super::workspace::Workspace;

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
    /// Names the other documents whose snippets the prompt carries.
    pub workspace: Workspace,
}

/// One next edit to compute.
pub struct EditJob {
    pub document: Snapshot,
    /// The document's name, as the history names it.
    pub path: String,
    /// For a notebook's code cell, the cells around it: the model sees the cell in its place,
    /// and only its edits inside the cell are the answer's.
    pub notebook: Option<Surround>,
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
        let handed = Handed::from(document, job.cursor, job.snapshots.notebook.as_ref());
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
            neighbours(&job.snapshots.neighbours, &job.workspace)
        } else {
            Vec::new()
        };
        let work = FimWork {
            cursor: handed.cursor,
            text: handed.text,
            language: document.language,
            tree: handed.tree,
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
        let handed = Handed::from(document, job.cursor, job.notebook.as_ref());
        let place = handed.place;
        let mut sampler = SamplerConfig::effort(job.settings.effort);
        sampler.draft_tau = Some(DRAFT_TAU);
        // The kept cache's first pass is exact (never realigned across an edit, which is an
        // approximation): the command line runs from a fresh cache, and a next edit is compared
        // with it.
        sampler.cache.realign = None;
        let history = job.history.len();
        let work = EditWork {
            cursor: handed.cursor,
            document: handed.text,
            region: None,
            path: job.path,
            language: document.language,
            tree: handed.tree,
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
            let next = NextEdit {
                edits: answer
                    .edits
                    .iter()
                    .filter(|edit| place.holds(&edit.range))
                    .map(|edit| TextEdit {
                        range: place.to_document(&edit.range),
                        new_text: edit.new_text.clone(),
                    })
                    .collect(),
                region: place.to_document(&report.region),
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

/// What the context layer is handed for a request: the text, the cursor in it, and the tree
/// when the text is the whole document's.
struct Handed {
    text: String,
    cursor: usize,
    tree: Option<Tree>,
    place: Place,
}

/// Where the document's text lies in the text handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    /// The document's byte offset the handed part starts at (a huge document's window).
    base: usize,
    /// The bytes of the document handed over.
    len: usize,
    /// The bytes before them: a notebook's cells before the cell.
    before: usize,
}

impl Handed {
    /// The whole document (a window of a huge one, [`source_text`]), and a notebook's cell in
    /// its place among the cells around it, without its own tree (the context layer parses the
    /// whole around the cursor).
    fn from(document: &Snapshot, cursor: usize, notebook: Option<&Surround>) -> Handed {
        let (text, base) = source_text(document, cursor);
        let len = text.len();
        match notebook {
            Some(surround) => Handed {
                cursor: cursor - base + surround.before.len(),
                text: surround.wrap(&text),
                tree: None,
                place: Place {
                    base,
                    len,
                    before: surround.before.len(),
                },
            },
            None => Handed {
                cursor: cursor - base,
                tree: tree(document, &text),
                text,
                place: Place {
                    base,
                    len,
                    before: 0,
                },
            },
        }
    }
}

impl Place {
    /// Whether `range` of the handed text lies in the document's part of it.
    fn holds(&self, range: &Range<usize>) -> bool {
        self.before <= range.start && range.end <= self.before + self.len
    }

    /// `range` of the handed text in the document's offsets, cut to the document's part.
    fn to_document(self, range: &Range<usize>) -> Range<usize> {
        let at =
            |at: usize| at.clamp(self.before, self.before + self.len) - self.before + self.base;
        at(range.start)..at(range.end)
    }
}

/// The document's tree, when the text handed over is the whole document (`source_text` cuts a
/// window of a large one, at `base` 0 too when the cursor is near its start; the context layer
/// then parses around the cursor itself).
fn tree(document: &Snapshot, text: &str) -> Option<Tree> {
    if text.len() == document.rope.len_bytes() {
        document.tree.clone()
    } else {
        None
    }
}

/// Whether a document of `len` bytes is handed to the context layer whole, with its tree (else
/// a window of it, without: [`source_text`]).
pub fn handed_over_whole(len: usize) -> bool {
    len <= MAX_SOURCE_BYTES
}

/// The text handed to the context layer and the byte offset in the document where it starts:
/// the whole document, or for a huge one whole lines around the cursor, starting where a line
/// starts in code ([`window_start`]).
fn source_text(document: &Snapshot, cursor: usize) -> (String, usize) {
    let rope = &document.rope;
    if handed_over_whole(rope.len_bytes()) {
        return (rope.to_string(), 0);
    }
    let naive = line_start(rope, cursor.saturating_sub(SOURCE_WINDOW_BYTES));
    let start = window_start(document, naive, line_start(rope, cursor));
    let last = rope.byte_to_line((cursor + SOURCE_WINDOW_BYTES).min(rope.len_bytes()));
    let end = rope.line_to_byte((last + 1).min(rope.len_lines()));
    (rope.byte_slice(start..end).to_string(), start)
}

/// Where a huge document's window starts: at `naive` (a line start) unless that lies inside a
/// comment or string, else at the first line start in code after it, up to `limit` (the
/// cursor's line start, so the cursor stays inside). The context layer reads the window as a
/// text of its own, from code: one starting inside a block comment or a docstring would be
/// lexed inside out (the prose's brackets and quotes counted, a docstring's closing quotes read
/// as an opener), and so would the brackets open at the cursor's line and the mode that line
/// starts in, which `finish` cuts the middle by (and Rust's window is parsed from its start).
///
/// Where no line start up to the cursor's is in code (the cursor is inside the same comment, or
/// an unclosed `/*` or quote above it turned the rest inside out while the user types), the
/// window starts further back than the context layer's scan reaches ([`BRACKET_CONTEXT_BYTES`]
/// before the cursor's line), so it says no mode rather than a wrong one, and the window stays
/// a window. Later rather than earlier otherwise: a start moved earlier is out of that reach
/// too, and one moved later drops only text no budget reaches.
///
/// Rust asks the document's tree; every other language the context layer lexes by its own
/// rules (Python, JavaScript, Go, C, shell, ...: any but [`Language::Plain`]), and Rust too
/// large to parse, that lexer ([`LexMode::after`]) over the text before `naive`, up to
/// [`MAX_LEXED_BYTES`]. Plain text keeps `naive`: the context layer trusts no lexer there.
fn window_start(document: &Snapshot, naive: usize, limit: usize) -> usize {
    let rope = &document.rope;
    let later = match (document.language, &document.tree) {
        (Language::Plain, _) => return naive,
        (Language::Rust, Some(tree)) => start_in_tree(rope, tree, naive, limit),
        (language, _) if rope.len_bytes() <= MAX_LEXED_BYTES => {
            start_lexed(rope, language, naive, limit)
        }
        // Not lexed: its mode is not known, so none is said.
        _ => None,
    };
    later.unwrap_or_else(|| line_start(rope, naive.saturating_sub(BRACKET_CONTEXT_BYTES + 1)))
}

/// The largest document whose window start the lexer looks for: it lexes from the document's
/// start on every request, 8-16 ms per 5 MiB on the 2-core machine (release build, Rust,
/// Python, JavaScript, shell, PHP and C++, 2026-12-07), next to a model run of hundreds. A larger one's window starts out of the
/// context layer's reach, which then says no mode.
const MAX_LEXED_BYTES: usize = 8 << 20;

/// The tree-sitter-rust nodes whose text is no code.
const LITERALS: [&str; 5] = [
    "block_comment",
    "line_comment",
    "string_literal",
    "raw_string_literal",
    "char_literal",
];

/// [`window_start`] from `tree`: a comment or string that a line start lies inside moves it to
/// the first line start at or after the literal's end, and so on while that lies inside
/// another; `None` past `limit`.
fn start_in_tree(rope: &Rope, tree: &Tree, naive: usize, limit: usize) -> Option<usize> {
    let mut later = naive;
    while let Some(literal) = literal_around(tree, later) {
        later = next_line_start(rope, literal.end_byte());
        if later > limit {
            return None;
        }
    }
    Some(later)
}

/// The comment or string of `tree` that `at` lies inside, past its first byte: the innermost
/// one on the way down to the smallest node at `at`. Found from the root down: `Node::parent`
/// searches from the root each time, so climbing from a leaf costs the depth squared (1.4 s in
/// a 3 MB file whose unclosed `r#"` left an error tree 6000 deep).
fn literal_around(tree: &Tree, at: usize) -> Option<Node<'_>> {
    let mut cursor = tree.walk();
    let mut innermost = None;
    loop {
        let node = cursor.node();
        if LITERALS.contains(&node.kind()) {
            innermost = Some(node);
        }
        if cursor.goto_first_child_for_byte(at).is_none() || cursor.node().start_byte() > at {
            break;
        }
    }
    innermost.filter(|node| node.start_byte() < at && at < node.end_byte())
}

/// [`window_start`] from the context layer's lexer: the text before `naive` from the
/// document's start (a rope chunk of whole lines at a time), then, when `naive` is not in code,
/// the lines after it up to `limit` one at a time; `None` where none of them starts in code.
fn start_lexed(rope: &Rope, language: Language, naive: usize, limit: usize) -> Option<usize> {
    let mut mode = LexMode::default();
    feed_lines(rope, 0..naive, Pieces::Chunks, |_, piece| {
        mode = mode.after(language, piece);
        ControlFlow::Continue(())
    });
    let mut later = None;
    feed_lines(rope, naive..limit, Pieces::Lines, |start, line| {
        if mode.in_code() {
            later = Some(start);
            return ControlFlow::Break(());
        }
        mode = mode.after(language, line);
        ControlFlow::Continue(())
    });
    later.or(mode.in_code().then_some(limit))
}

/// How [`feed_lines`] cuts the text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pieces {
    /// One line at a time.
    Lines,
    /// As many whole lines as a rope chunk holds (under a KiB): the fast way through megabytes.
    Chunks,
}

/// Hands `rope[range]` to `each` in pieces that end after a `\n` (the last one where `range`
/// ends), with the byte offset each starts at, until `each` breaks. Pieces so cut read as one
/// scan of the whole does ([`LexMode::after`]).
fn feed_lines(
    rope: &Rope,
    range: Range<usize>,
    pieces: Pieces,
    mut each: impl FnMut(usize, &str) -> ControlFlow<()>,
) {
    let mut at = range.start;
    // A line that runs across chunks.
    let mut line = String::new();
    for chunk in rope.byte_slice(range).chunks() {
        let mut rest = chunk;
        while let Some(newline) = match pieces {
            Pieces::Lines => rest.find('\n'),
            Pieces::Chunks => rest.rfind('\n'),
        } {
            let (piece, after) = rest.split_at(newline + 1);
            rest = after;
            let piece = if line.is_empty() {
                piece
            } else {
                line.push_str(piece);
                line.as_str()
            };
            let flow = each(at, piece);
            at += piece.len();
            line.clear();
            if flow.is_break() {
                return;
            }
        }
        line.push_str(rest);
    }
    if !line.is_empty() {
        let _ = each(at, &line);
    }
}

/// The start of the line `at` is on.
fn line_start(rope: &Rope, at: usize) -> usize {
    rope.line_to_byte(rope.byte_to_line(at))
}

/// `at` if a line starts there, else the start of the next line (the end of the text after the
/// last).
fn next_line_start(rope: &Rope, at: usize) -> usize {
    let line = rope.byte_to_line(at);
    match rope.line_to_byte(line) {
        start if start == at => at,
        _ => rope.line_to_byte(line + 1),
    }
}

fn neighbours(snapshots: &[Snapshot], workspace: &Workspace) -> Vec<Neighbour> {
    snapshots
        .iter()
        .map(|s| {
            let len = s.rope.len_bytes().min(MAX_NEIGHBOUR_BYTES);
            let end = s.rope.char_to_byte(s.rope.byte_to_char(len));
            Neighbour {
                path: workspace.name(&s.uri),
                text: s.rope.byte_slice(..end).to_string(),
                edited_at: s.edited_at,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{Document, MAX_PARSED_BYTES};
    use proptest::prelude::*;
    use redraft_context::{plan, Budget, ByteEstimate, Plan, Source};

    /// A notebook's cell goes to the context layer in its place among the cells around it,
    /// without its tree (which is the cell's alone), and a next edit's answer keeps only what
    /// lies inside the cell, in the cell's offsets.
    #[test]
    fn a_notebook_cell_is_handed_over_among_its_cells_and_answered_inside_it() {
        let uri: tower_lsp_server::ls_types::Uri =
            "vscode-notebook-cell:/t/nb.ipynb#C1".parse().unwrap();
        let cell = Document::new(uri, "rust", 0, "let x = 1;\nx + ", 0).snapshot();
        assert!(cell.tree.is_some());
        let surround = Surround {
            before: "fn f() {}\n\n".into(),
            after: "\nprintln!();\n".into(),
        };
        let cursor = "let x = 1;\nx + ".len();
        let handed = Handed::from(&cell, cursor, Some(&surround));
        assert_eq!(
            handed.text,
            "fn f() {}\n\nlet x = 1;\nx + \n\nprintln!();\n"
        );
        assert_eq!(
            &handed.text[..handed.cursor],
            "fn f() {}\n\nlet x = 1;\nx + "
        );
        assert!(handed.tree.is_none());
        let place = handed.place;
        let before = surround.before.len();
        // `x` renamed inside the cell: kept, in the cell's offsets.
        let x = before + "let ".len();
        assert!(place.holds(&(x..x + 1)));
        assert_eq!(place.to_document(&(x..x + 1)), 4..5);
        // An insertion at the cell's end is the cell's; an edit of the next cell, or one
        // reaching into the cell before, is not.
        let end = before + cursor;
        assert!(place.holds(&(end..end)));
        assert!(!place.holds(&(end..end + 1)));
        assert!(!place.holds(&(0..3)));
        assert!(!place.holds(&(before - 1..before + 2)));
        // A region over several cells is cut to the cell's.
        assert_eq!(place.to_document(&(0..handed.text.len())), 0..cursor);

        // Without a notebook: the document whole, with its tree.
        let alone = Handed::from(&cell, cursor, None);
        assert_eq!(alone.text, "let x = 1;\nx + ");
        assert_eq!(alone.cursor, cursor);
        assert!(alone.tree.is_some());
        assert!(alone.place.holds(&(0..cursor)));
        assert_eq!(alone.place.to_document(&(4..5)), 4..5);
    }

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

    /// A huge document ([`huge`]) and the places its fixture marked.
    struct Huge {
        document: Snapshot,
        cursor: usize,
        /// `$^`: where the window started before it was moved out of comments and strings.
        naive: usize,
        /// `$>`: where it should start (where it is in code after `$^`).
        start: usize,
    }

    /// A document of `language_id` over `MAX_SOURCE_BYTES`: filler functions for `head_bytes`,
    /// then `fixture`, in which `$pad` becomes copies of `pad` (and one line of spaces) so that
    /// the line of the cursor (`$0`) starts exactly 256 KiB after `$^`. The naive window then
    /// starts at `$^`, and the context layer's bracket scan reaches back to the window's start.
    fn huge(language_id: &str, head_bytes: usize, fixture: &str, pad: &str) -> Huge {
        let filler = match language_id {
            "python" => "def m():\n    return 1\n",
            _ => "fn m() -> u32 {\n    1\n}\n",
        };
        let mut text = filler.repeat(head_bytes.div_ceil(filler.len()));
        // `$^`, `$>`, `$0`.
        let mut at = [None; 3];
        let (before, after) = fixture.split_once("$pad").expect("a $pad");
        for (part, padded) in [(before, false), (after, true)] {
            if padded {
                let cursor = after.find("$0").expect("a $0 after $pad");
                let cursor_line = after[..cursor].rfind('\n').map_or(0, |newline| newline + 1);
                let markers = after[..cursor_line].matches("$>").count() * 2;
                let naive = at[0].expect("a $^ before $pad");
                let len = SOURCE_WINDOW_BYTES - (text.len() - naive) - (cursor_line - markers);
                text.push_str(&pad.repeat(len / pad.len()));
                let spaces = len % pad.len();
                if spaces > 0 {
                    text.push_str(&" ".repeat(spaces - 1));
                    text.push('\n');
                }
            }
            let mut rest = part;
            while let Some(dollar) = rest.find('$') {
                text.push_str(&rest[..dollar]);
                let slot = ["$^", "$>", "$0"]
                    .iter()
                    .position(|marker| rest[dollar..].starts_with(marker))
                    .expect("a known marker");
                at[slot] = Some(text.len());
                rest = &rest[dollar + 2..];
            }
            text.push_str(rest);
        }
        let (naive, cursor) = (at[0].unwrap(), at[2].unwrap());
        let rope = Rope::from_str(&text);
        assert_eq!(line_start(&rope, cursor - SOURCE_WINDOW_BYTES), naive);
        let uri: tower_lsp_server::ls_types::Uri = "file:///t/huge".parse().unwrap();
        let document = Document::new(uri, language_id, 0, &text, 0).snapshot();
        assert_eq!(
            document.tree.is_some(),
            language_id == "rust" && text.len() <= MAX_PARSED_BYTES
        );
        Huge {
            document,
            cursor,
            naive,
            start: at[1].unwrap(),
        }
    }

    /// What the context layer makes of the window the server hands it (as `submit` does: the
    /// window, no tree): where it starts, and the plan.
    fn window_plan(huge: &Huge) -> (usize, Plan) {
        let document = &huge.document;
        let (window, base) = source_text(document, huge.cursor);
        let tree = tree(document, &window);
        let source = Source {
            text: &window,
            cursor: huge.cursor - base,
            language: document.language,
            tree: tree.as_ref(),
        };
        let plan = plan(
            &source,
            &Budget::for_positions(4096, 64),
            &ByteEstimate,
            &[],
        );
        (base, plan)
    }

    /// Heads that leave a Rust document a tree (the server's) and none (the lexer's way).
    const RUST_HEADS: [usize; 2] = [MAX_SOURCE_BYTES, MAX_PARSED_BYTES];

    /// The naive window of a huge Rust document starts inside a block comment, or a raw
    /// string, whose prose holds an unbalanced `{` and a quote: the context layer would scan
    /// the rest as code from there, the quote opening a string that never closes, so the
    /// cursor's line would start "inside a string" under the prose's `{`. The window starts
    /// after the literal instead, with the tree and without.
    #[test]
    fn a_rust_window_starts_past_a_comment_or_raw_string_it_would_start_in() {
        let fixtures = [
            "/* Notes on the format.\n   Open with {, and\n$^   a { in prose and a \" quote.\n*/\n$>fn after() {}\n$padfn f() {\n    g(1,\n    $0\n}\n",
            "const NOTES: &str = r#\"Notes.\n$^a { in prose, a \"quote\" and a */ too\n\"#;\n$>$padfn f() {\n    g(1,\n    $0\n}\n",
        ];
        for head in RUST_HEADS {
            for fixture in fixtures {
                let huge = huge("rust", head, fixture, "fn m() -> u32 {\n    1\n}\n");
                let (base, plan) = window_plan(&huge);
                let tree = huge.document.tree.is_some();
                assert_eq!(
                    base as isize - huge.naive as isize,
                    huge.start as isize - huge.naive as isize,
                    "tree {tree}: {fixture}"
                );
                assert_eq!(plan.open_brackets, "{(", "tree {tree}: {fixture}");
                assert_eq!(
                    plan.line_start_mode.map(LexMode::in_code),
                    Some(true),
                    "tree {tree}: {fixture}"
                );
            }
        }
    }

    /// The naive window of a huge Python document starts inside a docstring holding an
    /// unbalanced `[` and an apostrophe: scanned as code from there, the docstring's closing
    /// quotes would open one that never closes. The window starts at the line after it.
    #[test]
    fn a_python_window_starts_past_a_docstring_it_would_start_in() {
        let fixture = "def documented():\n    \"\"\"Notes.\n$^    An unbalanced [ and it's prose.\n    \"\"\"\n$>    return 1\n$padx = g(1,\n    $0\n";
        let huge = huge(
            "python",
            MAX_SOURCE_BYTES,
            fixture,
            "def m():\n    return 1\n",
        );
        let (base, plan) = window_plan(&huge);
        assert_eq!(
            base as isize - huge.naive as isize,
            huge.start as isize - huge.naive as isize
        );
        assert_eq!(plan.open_brackets, "(");
        assert_eq!(plan.line_start_mode.map(LexMode::in_code), Some(true));
    }

    /// The cursor's own line inside the comment or docstring the naive start is in: no line
    /// after that start begins in code before the cursor, so the window starts further back
    /// than the context layer's scan reaches, which then says no mode rather than a wrong one.
    #[test]
    fn a_window_whose_cursor_is_in_the_same_literal_says_no_mode() {
        let rust = "$>/* A long note.\n   It opens { here\n$^   and a \" goes on past the window's start\n$pad   to the cursor $0\n*/\n";
        let python = "def documented():\n$>    \"\"\"A long note.\n    It opens [ here\n$^    and it's long, past the window's start\n$pad    to the cursor $0\n    \"\"\"\n";
        let cases = RUST_HEADS
            .map(|head| huge("rust", head, rust, "   prose (\n"))
            .into_iter()
            .chain([huge("python", MAX_SOURCE_BYTES, python, "    prose (\n")]);
        for huge in cases {
            let (base, plan) = window_plan(&huge);
            let what = (huge.document.language, huge.document.tree.is_some());
            assert!(base + BRACKET_CONTEXT_BYTES < huge.naive, "{what:?}");
            assert_eq!(plan.line_start_mode, None, "{what:?}");
        }
    }

    /// A window stays a window when no line near the cursor starts in code: the fall-back
    /// start reaches back only as far as the context layer's scan needs to say no mode.
    #[test]
    fn a_window_stays_bounded_when_no_line_before_the_cursor_starts_in_code() {
        let body = "fn m() -> u32 {\n    let s = \"a { string\";\n    1\n}\n";
        let cases = [
            // Rust too large to parse: the lexer's way.
            ("/* an unclosed comment\n", MAX_PARSED_BYTES + (1 << 20)),
            // Rust with a tree.
            ("/* an unclosed comment\n", MAX_SOURCE_BYTES + (1 << 20)),
            ("const S: &str = \"unclosed\n", MAX_SOURCE_BYTES + (1 << 20)),
        ];
        for (head, bytes) in cases {
            let text = format!("fn a() {{}}\n{head}{}", body.repeat(bytes / body.len()));
            let uri: tower_lsp_server::ls_types::Uri = "file:///t/huge".parse().unwrap();
            let document = Document::new(uri, "rust", 0, &text, 0).snapshot();
            let cursor = text.len() - 1000;
            let (window, base) = source_text(&document, cursor);
            let tree = document.tree.is_some();
            assert!(base <= cursor, "tree {tree}, {head:?}");
            assert!(
                window.len() <= 3 * SOURCE_WINDOW_BYTES,
                "tree {tree}, {head:?}: a window of {} KiB from {base}",
                window.len() >> 10
            );
        }
    }

    /// Plain text is not lexed (no lexer the context layer trusts): its window starts where it
    /// always did.
    #[test]
    fn a_plain_text_window_starts_where_it_falls() {
        let fixture = "/* Notes.\n$^$>   a { and a \" in prose.\n*/\n$padfn f() {\n    $0\n}\n";
        let huge = huge("plaintext", MAX_SOURCE_BYTES, fixture, "fn m() {}\n");
        assert_eq!(window_plan(&huge).0, huge.naive);
    }

    /// Nor is a document too large to lex from its start on every request: its window starts
    /// out of the context layer's reach, which says no mode rather than a wrong one.
    #[test]
    fn a_document_over_the_lexing_limit_says_no_mode() {
        let fixture = "def documented():\n    \"\"\"Notes.\n$^    An unbalanced [ and it's prose.\n    \"\"\"\n$>    return 1\n$padx = g(1,\n    $0\n";
        let lexed = huge("python", MAX_SOURCE_BYTES, fixture, "    prose (\n");
        let (base, plan) = window_plan(&lexed);
        assert_eq!(base, lexed.start);
        assert_eq!(plan.line_start_mode.map(LexMode::in_code), Some(true));
        let too_large = huge("python", MAX_LEXED_BYTES, fixture, "    prose (\n");
        let (base, plan) = window_plan(&too_large);
        assert!(base + BRACKET_CONTEXT_BYTES < too_large.naive);
        assert_eq!(plan.line_start_mode, None);
    }

    /// Text a line at a time, from the context layer's bracket scanner tests: pieces that a
    /// Rust `'` would read across a line end are left out (the scanner reads such a char
    /// literal differently when a scan stops at the line break).
    fn code_lines() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "(", ")", "{", "}", "[", "]", "\"", "'x'", "'\\n'", "'a ", "\"\"\"", "'''", "r#\"",
                "\"#", "br\"", "/*", "*/", "//", "#", "\\", "\n", "a", " ", "é", "words ", "`",
                "--", "/",
            ]),
            0..1500,
        )
        .prop_map(|pieces| pieces.concat())
    }

    fn line_starts(text: &str) -> Vec<usize> {
        std::iter::once(0)
            .chain(text.match_indices('\n').map(|(at, _)| at + 1))
            .collect()
    }

    /// The oracle of [`start_lexed`]: one scan from the text's start to each line start.
    fn lexed_start(text: &str, language: Language, naive: usize, limit: usize) -> Option<usize> {
        let in_code = |at: usize| LexMode::default().after(language, &text[..at]).in_code();
        if in_code(naive) {
            return Some(naive);
        }
        line_starts(text)
            .into_iter()
            .find(|&at| naive < at && at <= limit && in_code(at))
    }

    /// Two line starts of `text`, in order: a naive start and the cursor's line.
    fn naive_and_limit(text: &str, picks: [prop::sample::Index; 2]) -> (usize, usize) {
        let starts = line_starts(text);
        let (a, b) = (*picks[0].get(&starts), *picks[1].get(&starts));
        (a.min(b), a.max(b))
    }

    /// The oracle of [`literal_around`]: the smallest node at `at`, then up through its parents
    /// to the first comment or string (what `e02f0de` did: right, but quadratic in the depth).
    fn literal_climbing(tree: &Tree, at: usize) -> Option<Node<'_>> {
        let mut node = tree.root_node().descendant_for_byte_range(at, at)?;
        loop {
            if LITERALS.contains(&node.kind()) {
                return (node.start_byte() < at && at < node.end_byte()).then_some(node);
            }
            node = node.parent()?;
        }
    }

    proptest! {
        /// Going down from the root finds the comment or string a point lies inside that
        /// climbing from the smallest node there does, at every char boundary.
        #[test]
        fn a_literal_found_from_the_root_is_the_one_found_climbing(text in code_lines()) {
            let tree = redraft_context::parse_rust(&text).expect("a tree");
            for at in (0..=text.len()).filter(|&at| text.is_char_boundary(at)) {
                prop_assert_eq!(
                    literal_around(&tree, at).map(|node| node.id()),
                    literal_climbing(&tree, at).map(|node| node.id()),
                    "at {}", at
                );
            }
        }

        /// The lexer's window start is the first line start in code from the naive one up to
        /// the cursor's line, as one scan of the text says.
        #[test]
        fn a_lexed_window_start_is_the_nearest_line_start_in_code(
            text in code_lines(),
            picks in any::<[prop::sample::Index; 2]>(),
            language in prop::sample::select(
                Language::all().filter(|&l| l != Language::Plain).collect::<Vec<_>>()
            ),
        ) {
            let rope = Rope::from_str(&text);
            let (naive, limit) = naive_and_limit(&text, picks);
            prop_assert_eq!(
                start_lexed(&rope, language, naive, limit),
                lexed_start(&text, language, naive, limit)
            );
        }
    }
}
