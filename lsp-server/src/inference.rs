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
    idle, kept, Answer, EditLimits, EditWork, FimWork, Loaded, LoopConfig, Rejected, Scheduler,
    Submit, Ticket, Work,
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
        let limits = handed.edit_limits(job.settings.next_edit.limits());
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
            limits,
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
                    .filter_map(|edit| place.edit(&edit.range, &edit.new_text))
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
    /// A newline follows them that the document lacks: a notebook's cell without one at its
    /// end, before the cells after it.
    newline: bool,
}

impl Handed {
    /// The whole document (a window of a huge one, [`source_text`]), and a notebook's cell in
    /// its place among the cells around it, without its own tree (the context layer parses the
    /// whole around the cursor). A window of a huge cell goes alone: the cells around it are
    /// beyond any budget.
    fn from(document: &Snapshot, cursor: usize, notebook: Option<&Surround>) -> Handed {
        let (text, base) = source_text(document, cursor);
        let len = text.len();
        let whole = len == document.rope.len_bytes();
        match notebook.filter(|_| whole) {
            Some(surround) => Handed {
                cursor: cursor - base + surround.before.len(),
                place: Place {
                    base,
                    len,
                    before: surround.before.len(),
                    newline: surround.adds_newline(&text),
                },
                text: surround.wrap(&text),
                tree: None,
            },
            None => Handed {
                cursor: cursor - base,
                tree: tree(document, &text),
                text,
                place: Place {
                    base,
                    len,
                    before: 0,
                    newline: false,
                },
            },
        }
    }

    /// `limits` for a next edit: in a notebook's cell, the region held to the cell's lines
    /// (the model's rewrite, its verdict and its drafts are then the cell's alone).
    fn edit_limits(&self, mut limits: EditLimits) -> EditLimits {
        let place = &self.place;
        if self.text.len() > place.len {
            let cell = &self.text[place.before..place.before + place.len];
            let cursor = self.cursor - place.before;
            limits.lines_above = limits.lines_above.min(cell[..cursor].matches('\n').count());
            let below = cell[cursor..].lines().count().saturating_sub(1);
            limits.lines_below = limits.lines_below.min(below);
        }
        limits
    }
}

impl Place {
    /// An edit of the handed text as an edit of the document: `None` where it is not inside
    /// the document's part. A line added after a cell's last line (after the newline handed
    /// over that the cell lacks) is the same line added at the cell's end.
    fn edit(&self, range: &Range<usize>, text: &str) -> Option<TextEdit> {
        let end = self.before + self.len;
        let (range, text) = match self.newline && range.end == end + 1 {
            true if range.start == end + 1 => (
                end..end,
                format!("\n{}", text.strip_suffix('\n').unwrap_or(text)),
            ),
            true if range.start <= end && text.ends_with('\n') => {
                (range.start..end, text[..text.len() - 1].to_string())
            }
            true => return None,
            false => (range.clone(), text.to_string()),
        };
        (self.before <= range.start && range.end <= end).then(|| TextEdit {
            range: self.to_document(&range),
            new_text: text,
        })
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
mod tests;
