//! The one owner of the open documents: a thread that applies `didOpen`/`didChange`/`didClose`
//! in the order the client sent them and hands out snapshots, with the recent edits of every
//! open document when a next edit asks for them. It also keeps the next edit offered for each
//! document, so the change that applies it is recorded as accepted, and tells the server about
//! each change it applied (`Changed`), which is what precomputing next edits waits on.
//!
//! tower-lsp runs handlers concurrently, so edits must not be applied from the handlers
//! themselves; each handler only queues its event (a synchronous send, in the order the
//! handlers start, which is the order the messages arrived). A snapshot request goes through
//! the same queue, so a request always sees every edit that came before it and none after.
//! Parsing (seconds for a huge file) happens here, never on the async runtime (a request's
//! re-parse of its snapshot with the suggest widget's item applied, `inline.rs`, runs on a
//! blocking thread), and only when a snapshot needs its document's tree (for at most
//! [`SNAPSHOT_PARSE_BUDGET`]) or nothing is queued (in [`IDLE_PARSE_SLICE`]s; a `didOpen`'s
//! first parse too): a client typing faster than its file parses leaves a backlog of changes
//! that cost one parse together, and a snapshot whose request was cancelled while it waited is
//! not made at all, so the owner catches up instead of falling further behind with every
//! keystroke.
//!
//! Documents are kept by their [`DocumentKey`]: a `didOpen`, `didChange` or `didClose` comes
//! with the URI as the client spelled it, and is keyed here; a snapshot or an offer, the
//! server's own, names the key.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ropey::Rope;
use tokio::sync::{mpsc as async_mpsc, oneshot};
use tower_lsp_server::ls_types::{TextDocumentContentChangeEvent, Uri};

use super::document::{Document, Offer, Snapshot};
use super::document_key::DocumentKey;
use super::encoding::PositionEncoding;
use super::history::EditGroup;
use super::log::Log;
use super::notebook::{NotebookEvent, Notebooks, Surround};

/// How many other open documents a request may draw context from.
const MAX_NEIGHBOURS: usize = 8;
/// How long a snapshot waits for its document's parse: a parse of a large file in a state
/// tree-sitter's error recovery finds hard can take seconds, and the request does better with
/// the context layer's own, smaller parse around the cursor than waiting. Ordinary parses, even
/// of megabyte files, take a fraction of this.
const SNAPSHOT_PARSE_BUDGET: Duration = Duration::from_millis(150);
/// An idle owner parses in slices this long, looking at its queue between them.
const IDLE_PARSE_SLICE: Duration = Duration::from_millis(20);
/// The most edit groups, over all documents, a next edit is asked with.
const MAX_HISTORY_GROUPS: usize = 48;
/// The most text, over all documents, kept parsed: a tree takes tens of times the memory of its
/// text (about 40 times for ordinary Rust), so 5,000 open files of 5 KB held a GB of trees and
/// every 4 MB one another 150 MB. The trees of the documents edited or asked for most recently
/// are kept up to this, the size of the largest parsed one (the latest one's always); the
/// others' are dropped, and parsed again when a request asks for that document (a request uses
/// only its own document's tree, never a neighbour's).
const MAX_TREE_TEXT_BYTES: usize = 4 << 20;

/// What a request works on: its document and the other open ones, most recently edited first,
/// and for a next edit the recent edits of all of them, oldest first.
pub struct Snapshots {
    pub document: Snapshot,
    pub neighbours: Vec<Snapshot>,
    /// Each group with its document's URI as the document was opened.
    pub history: Vec<(Uri, EditGroup)>,
    /// Names the open documents' histories as they are: it moves with every change of any
    /// document that changed its history and every close (or open over it) of a document with
    /// a history, so two snapshots with the same one (and the same `document.edited_at`) would
    /// show a next edit the same history. It never moves back. Opening, closing or looking at
    /// documents nobody edited leaves it, and so does a change that records nothing (no
    /// changes, the same whole text again as some clients send on save, a first range that
    /// does not apply). A change of a notebook's cells (opened, added, moved, removed,
    /// re-kinded) moves it too: a cell's next edit is shown the cells around it.
    pub history_generation: u64,
    /// For a code cell of a notebook, the text of the cells around it (`notebook.rs`).
    pub notebook: Option<Surround>,
}

/// A change the owner applied, for the server to precompute the next edit on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub key: DocumentKey,
    /// The change applied the offered next edit with this id.
    pub accepted: Option<u64>,
    /// [`Snapshots::history_generation`] after the change: a next edit computed with an older
    /// one can never be current again.
    pub history_generation: u64,
}

/// Milliseconds for the edit history (coalescing keystrokes); tests drive their own.
pub trait Clock: Send {
    fn now_ms(&self) -> u64;
}

/// Milliseconds since the server started.
pub struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

enum Event {
    Encoding(PositionEncoding),
    Open {
        uri: Uri,
        language_id: String,
        version: i32,
        text: String,
    },
    Change {
        uri: Uri,
        version: i32,
        changes: Vec<TextDocumentContentChangeEvent>,
    },
    Close {
        uri: Uri,
    },
    Offer {
        key: DocumentKey,
        offer: Offer,
    },
    Notebook(NotebookEvent),
    Snapshot {
        key: DocumentKey,
        with_history: bool,
        reply: oneshot::Sender<Option<Snapshots>>,
    },
    /// The owner waits until the sender is dropped (see [`Documents::hold`]).
    #[cfg(test)]
    Hold(mpsc::Receiver<()>),
}

impl Event {
    /// The document the event is about, and for a message of the client's its URI as spelled.
    fn document(&self) -> Option<(DocumentKey, Option<Uri>)> {
        match self {
            Event::Encoding(_) | Event::Notebook(_) => None,
            #[cfg(test)]
            Event::Hold(_) => None,
            Event::Open { uri, .. } | Event::Change { uri, .. } | Event::Close { uri } => {
                Some((DocumentKey::of(uri), Some(uri.clone())))
            }
            Event::Offer { key, .. } | Event::Snapshot { key, .. } => Some((key.clone(), None)),
        }
    }
}

/// The handle the handlers use; cheap to clone.
#[derive(Clone)]
pub struct Documents {
    tx: mpsc::Sender<Event>,
}

impl Documents {
    /// Starts the owner thread; each change it applies is reported on `changed`.
    pub fn spawn(log: Log, changed: async_mpsc::UnboundedSender<Changed>) -> Documents {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("redraft-documents".into())
            .spawn(move || Owner::new(log, Box::<SystemClock>::default(), changed).run(rx))
            .expect("spawning the document thread");
        Documents { tx }
    }

    pub fn set_encoding(&self, encoding: PositionEncoding) {
        self.send(Event::Encoding(encoding));
    }

    pub fn open(&self, uri: Uri, language_id: String, version: i32, text: String) {
        self.send(Event::Open {
            uri,
            language_id,
            version,
            text,
        });
    }

    pub fn change(&self, uri: Uri, version: i32, changes: Vec<TextDocumentContentChangeEvent>) {
        self.send(Event::Change {
            uri,
            version,
            changes,
        });
    }

    pub fn close(&self, uri: Uri) {
        self.send(Event::Close { uri });
    }

    /// The next edit answered for the text at `offer.edited_at`: if the next change applies
    /// it, the history records an accepted suggestion.
    pub fn offer(&self, key: DocumentKey, offer: Offer) {
        self.send(Event::Offer { key, offer });
    }

    /// A notebook's cells changed (sent after the cell documents the message opens or
    /// closes).
    pub fn notebook(&self, event: NotebookEvent) {
        self.send(Event::Notebook(event));
    }

    /// Queues a snapshot request now (so it is ordered after every event already sent) and
    /// returns the answer to await. `None`: the document is not open. `with_history`: with the
    /// recent edits of the open documents (a next edit needs them, a completion does not).
    pub fn snapshot(
        &self,
        key: DocumentKey,
        with_history: bool,
    ) -> oneshot::Receiver<Option<Snapshots>> {
        let (reply, rx) = oneshot::channel();
        self.send(Event::Snapshot {
            key,
            with_history,
            reply,
        });
        rx
    }

    /// Holds the owner until the returned sender is dropped: whatever is queued meanwhile
    /// (a handler's snapshot) waits, so a test can run another handler while one's snapshot is
    /// on its way, however quick the owner would be.
    #[cfg(test)]
    pub fn hold(&self) -> mpsc::Sender<()> {
        let (release, held) = mpsc::channel();
        self.send(Event::Hold(held));
        release
    }

    fn send(&self, event: Event) {
        // The owner thread only stops when every handle is gone.
        let _ = self.tx.send(event);
    }
}

struct Owner {
    documents: HashMap<DocumentKey, Document>,
    notebooks: Notebooks,
    encoding: PositionEncoding,
    /// Orders events across documents (recency for neighbours and the history).
    seq: u64,
    /// See [`Snapshots::history_generation`].
    history_generation: u64,
    clock: Box<dyn Clock>,
    changed: async_mpsc::UnboundedSender<Changed>,
    log: Log,
    /// [`SNAPSHOT_PARSE_BUDGET`] and [`IDLE_PARSE_SLICE`]; the tests set zero or unbounded
    /// ones, so what they see does not hang on how busy the machine is.
    snapshot_parse_budget: Option<Duration>,
    idle_parse_slice: Option<Duration>,
    /// [`MAX_TREE_TEXT_BYTES`]; the tests set their own.
    max_tree_text_bytes: usize,
}

impl Owner {
    fn new(
        log: Log,
        clock: Box<dyn Clock>,
        changed: async_mpsc::UnboundedSender<Changed>,
    ) -> Owner {
        Owner {
            documents: HashMap::new(),
            notebooks: Notebooks::default(),
            encoding: PositionEncoding::default(),
            seq: 0,
            history_generation: 0,
            clock,
            changed,
            log,
            snapshot_parse_budget: Some(SNAPSHOT_PARSE_BUDGET),
            idle_parse_slice: Some(IDLE_PARSE_SLICE),
            max_tree_text_bytes: MAX_TREE_TEXT_BYTES,
        }
    }

    fn run(&mut self, rx: mpsc::Receiver<Event>) {
        loop {
            let event = match rx.try_recv() {
                Ok(event) => event,
                Err(mpsc::TryRecvError::Disconnected) => return,
                Err(mpsc::TryRecvError::Empty) => {
                    let Ok(next) = self.parse_while_idle(&rx) else {
                        return;
                    };
                    match next.map_or_else(|| rx.recv(), Ok) {
                        Ok(event) => event,
                        Err(_) => return,
                    }
                }
            };
            let document = event.document();
            let handled =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.handle(event)));
            if handled.is_err() {
                // The document may be half-edited: forget it rather than serve wrong text.
                if let Some((key, sent)) = document {
                    self.forget_broken(&key, sent);
                }
            }
        }
    }

    /// Nothing queued: parses what changed now, so the next request finds its tree ready
    /// (behind a backlog, parsing waits for a snapshot that needs it), in slices, looking at
    /// the queue between them. `Some`: the event that came in meanwhile (the rest of the parse
    /// waits for the next idle moment, or a snapshot that needs it); `None`: everything is
    /// parsed; `Err`: every handle is gone.
    fn parse_while_idle(
        &mut self,
        rx: &mpsc::Receiver<Event>,
    ) -> Result<Option<Event>, mpsc::TryRecvError> {
        while !self.parse_pending(None, self.idle_parse_slice) {
            match rx.try_recv() {
                Ok(event) => return Ok(Some(event)),
                Err(mpsc::TryRecvError::Empty) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(None)
    }

    /// Parses `only` that document, else every document, changed since its last parse, each
    /// for at most `budget` ([`Document::parse_within`]); whether all of them are now parsed.
    /// One whose parse fails (a bug) is forgotten as a failed edit is.
    fn parse_pending(&mut self, only: Option<&DocumentKey>, budget: Option<Duration>) -> bool {
        self.drop_old_trees();
        let keys: Vec<DocumentKey> = match only {
            Some(key) => vec![key.clone()],
            // Only those with a parse to do: this runs whenever the queue empties.
            None => self
                .documents
                .iter()
                .filter(|(_, document)| document.needs_parse())
                .map(|(key, _)| key.clone())
                .collect(),
        };
        let mut done = true;
        for key in keys {
            let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.documents
                    .get_mut(&key)
                    .is_none_or(|document| document.parse_within(budget))
            }));
            match parsed {
                Ok(parsed) => done &= parsed,
                Err(_) => self.forget_broken(&key, None),
            }
        }
        done
    }

    /// Drops the trees past [`MAX_TREE_TEXT_BYTES`] (kept or due), least recently used
    /// first; the most recently used document keeps its own whatever its size.
    fn drop_old_trees(&mut self) {
        let mut parsed: Vec<(u64, usize, &DocumentKey)> = self
            .documents
            .iter()
            .map(|(key, document)| (document.used_at(), document.tree_text_bytes(), key))
            .filter(|&(_, bytes, _)| bytes > 0)
            .collect();
        if parsed.iter().map(|&(_, bytes, _)| bytes).sum::<usize>() <= self.max_tree_text_bytes {
            return;
        }
        parsed.sort_unstable_by_key(|&(used_at, _, _)| std::cmp::Reverse(used_at));
        let mut kept = 0;
        let mut dropped = Vec::new();
        for (at, &(_, bytes, key)) in parsed.iter().enumerate() {
            kept += bytes;
            if at > 0 && kept > self.max_tree_text_bytes {
                kept -= bytes;
                dropped.push(key.clone());
            }
        }
        for key in dropped {
            if let Some(document) = self.documents.get_mut(&key) {
                document.drop_tree();
            }
        }
    }

    fn forget_broken(&mut self, key: &DocumentKey, sent: Option<Uri>) {
        let opened = self.documents.remove(key).map(|d| d.uri().clone());
        let name = opened.or(sent);
        self.log.error(format!(
            "an edit of {} failed unexpectedly (a bug); the document is closed until the client opens it again",
            name.as_ref().map_or(key.as_str(), |uri| uri.as_str())
        ));
    }

    fn handle(&mut self, event: Event) {
        self.seq += 1;
        match event {
            Event::Encoding(encoding) => self.encoding = encoding,
            #[cfg(test)]
            Event::Hold(held) => {
                let _ = held.recv();
            }
            Event::Open {
                uri,
                language_id,
                version,
                text,
            } => {
                let document = Document::unparsed(uri, &language_id, version, &text, self.seq);
                // Opened again without a close: the old one's history goes with it.
                let replaced = self.documents.insert(document.key(), document);
                if replaced.is_some_and(|old| old.history().groups().len() > 0) {
                    self.history_generation += 1;
                }
            }
            Event::Change {
                uri,
                version,
                changes,
            } => {
                let key = DocumentKey::of(&uri);
                let Some(document) = self.documents.get_mut(&key) else {
                    self.log.warn(format!(
                        "didChange for {} which is not open: ignored",
                        uri.as_str()
                    ));
                    return;
                };
                if version <= document.version() {
                    self.log.warn(format!(
                        "didChange for {} goes from version {} to {version}: applied anyway",
                        uri.as_str(),
                        document.version()
                    ));
                }
                let history_before = document.history().revision();
                let now = self.clock.now_ms();
                let accepted = match document.apply_changes(
                    version,
                    &changes,
                    self.encoding,
                    self.seq,
                    now,
                ) {
                    Ok(applied) => applied.accepted,
                    Err(err) => {
                        let now = if document.in_sync() {
                            "a whole text later in the notification was applied, so the document is in sync again"
                        } else {
                            "the server's text is no longer the client's: inline completions and next edits answer nothing for it until the client sends its whole text (or opens it again)"
                        };
                        self.log.error(format!(
                            "didChange for {} (version {version}) does not apply: {err}; {now}",
                            uri.as_str()
                        ));
                        None
                    }
                };
                if document.history().revision() != history_before {
                    self.history_generation += 1;
                }
                if let Some(id) = accepted {
                    self.log.debug(|| {
                        format!(
                            "{} v{version}: the change applied next edit {id} (accepted)",
                            uri.as_str()
                        )
                    });
                }
                // Nobody listens only while the server shuts down.
                let _ = self.changed.send(Changed {
                    key,
                    accepted,
                    history_generation: self.history_generation,
                });
            }
            Event::Close { uri } => {
                let closed = self.documents.remove(&DocumentKey::of(&uri));
                if closed.is_some_and(|old| old.history().groups().len() > 0) {
                    self.history_generation += 1;
                }
            }
            Event::Offer { key, offer } => {
                if let Some(document) = self.documents.get_mut(&key) {
                    document.offer(offer);
                }
            }
            Event::Notebook(event) => match self.notebooks.apply(event) {
                // A cell's next edit is shown the cells around it, which changed.
                Ok(true) => self.history_generation += 1,
                Ok(false) => {}
                Err(problem) => self
                    .log
                    .warn(format!("notebookDocument/didChange: {problem}; ignored")),
            },
            Event::Snapshot {
                key,
                with_history,
                reply,
            } => {
                if reply.is_closed() {
                    // Its request was cancelled (a newer keystroke, `$/cancelRequest`) while
                    // this waited: no parse for nobody.
                    return;
                }
                // Its own document's tree, within the budget (else it goes without); the
                // others' parses wait for an idle moment.
                if let Some(document) = self.documents.get_mut(&key) {
                    document.asked(self.seq);
                }
                self.parse_pending(Some(&key), self.snapshot_parse_budget);
                let answer = self.documents.get(&key).map(|document| {
                    let mut others: Vec<(&DocumentKey, &Document)> = self
                        .documents
                        .iter()
                        .filter(|(other, _)| **other != key)
                        .collect();
                    others.sort_by_key(|(_, d)| std::cmp::Reverse(d.edited_at()));
                    // Every other document's edits, the same notebook's cells' among them.
                    let history = if with_history {
                        history(document, others.iter().map(|&(_, d)| d))
                    } else {
                        Vec::new()
                    };
                    Snapshots {
                        document: document.snapshot(),
                        neighbours: self.neighbours(&key, &others),
                        history,
                        history_generation: self.history_generation,
                        notebook: self.notebooks.surround(&key, &self.documents),
                    }
                });
                // The request may have been cancelled meanwhile; nobody is waiting then.
                let _ = reply.send(answer);
            }
        }
    }
}

impl Owner {
    /// The other documents a request on `key` draws snippets from, most recently edited first
    /// (`others` is): not the cells of its own notebook, which are the text around it; another
    /// notebook once, as the code around its most recently edited code cell (its markdown and
    /// its other cells would crowd out the files).
    fn neighbours(&self, key: &DocumentKey, others: &[(&DocumentKey, &Document)]) -> Vec<Snapshot> {
        let mut notebooks = Vec::new();
        let mut neighbours = Vec::new();
        for &(other_key, other) in others {
            if neighbours.len() == MAX_NEIGHBOURS {
                break;
            }
            let Some((notebook, code)) = self.notebooks.cell(other_key) else {
                neighbours.push(other.snapshot());
                continue;
            };
            if !code || self.notebooks.together(key, other_key) || notebooks.contains(&notebook) {
                continue;
            }
            notebooks.push(notebook);
            let mut snapshot = other.snapshot();
            if let Some(surround) = self.notebooks.surround(other_key, &self.documents) {
                snapshot.rope = Rope::from_str(&surround.wrap(&snapshot.rope.to_string()));
                snapshot.tree = None;
            }
            neighbours.push(snapshot);
        }
        neighbours
    }
}

/// The newest [`MAX_HISTORY_GROUPS`] edit groups of `document` and `others`, oldest first.
fn history<'d>(
    document: &'d Document,
    others: impl Iterator<Item = &'d Document>,
) -> Vec<(Uri, EditGroup)> {
    let mut groups: Vec<(&Uri, &EditGroup)> = std::iter::once(document)
        .chain(others)
        .flat_map(|d| d.history().groups().map(move |g| (d.uri(), g)))
        .collect();
    groups.sort_by_key(|(_, g)| g.last_seq);
    let skip = groups.len().saturating_sub(MAX_HISTORY_GROUPS);
    groups
        .into_iter()
        .skip(skip)
        .map(|(uri, g)| (uri.clone(), g.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
