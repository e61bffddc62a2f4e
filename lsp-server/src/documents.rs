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
//! Parsing (seconds for a huge file) happens here, never on the async runtime, and only when a
//! snapshot needs its document's tree (for at most [`SNAPSHOT_PARSE_BUDGET`]) or nothing is
//! queued (in [`IDLE_PARSE_SLICE`]s; a `didOpen`'s first parse too): a client
//! typing faster than its file parses leaves a backlog of changes that cost one parse
//! together, and a snapshot whose request was cancelled while it waited is not made at all, so
//! the owner catches up instead of falling further behind with every keystroke.
//!
//! Documents are kept by their [`DocumentKey`]: a `didOpen`, `didChange` or `didClose` comes
//! with the URI as the client spelled it, and is keyed here; a snapshot or an offer, the
//! server's own, names the key.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc as async_mpsc, oneshot};
use tower_lsp_server::ls_types::{TextDocumentContentChangeEvent, Uri};

use super::document::{Document, Offer, Snapshot};
use super::document_key::DocumentKey;
use super::encoding::PositionEncoding;
use super::history::EditGroup;
use super::log::Log;

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
    /// does not apply).
    pub history_generation: u64,
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
            Event::Encoding(_) => None,
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
                    let mut neighbours: Vec<&Document> = self
                        .documents
                        .iter()
                        .filter(|(other, _)| **other != key)
                        .map(|(_, d)| d)
                        .collect();
                    neighbours.sort_by_key(|d| std::cmp::Reverse(d.edited_at()));
                    let history = if with_history {
                        history(document, &neighbours)
                    } else {
                        Vec::new()
                    };
                    Snapshots {
                        document: document.snapshot(),
                        neighbours: neighbours
                            .into_iter()
                            .take(MAX_NEIGHBOURS)
                            .map(Document::snapshot)
                            .collect(),
                        history,
                        history_generation: self.history_generation,
                    }
                });
                // The request may have been cancelled meanwhile; nobody is waiting then.
                let _ = reply.send(answer);
            }
        }
    }
}

/// The newest [`MAX_HISTORY_GROUPS`] edit groups of `document` and `others`, oldest first.
fn history(document: &Document, others: &[&Document]) -> Vec<(Uri, EditGroup)> {
    let mut groups: Vec<(&Uri, &EditGroup)> = std::iter::once(document)
        .chain(others.iter().copied())
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
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use tower_lsp_server::ls_types::{Position, Range};

    use super::*;

    /// A clock the test moves.
    #[derive(Clone, Default)]
    struct TestClock(Arc<AtomicU64>);

    impl Clock for TestClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    struct Fixture {
        owner: Owner,
        clock: TestClock,
        changed: async_mpsc::UnboundedReceiver<Changed>,
        version: i32,
    }

    fn uri(name: &str) -> Uri {
        format!("file:///w/{name}").parse().unwrap()
    }

    fn key(name: &str) -> DocumentKey {
        DocumentKey::of(&uri(name))
    }

    /// `[line, character]..[line, character]` replaced with `text`.
    fn replace(range: [[u32; 2]; 2], text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: Some(Range::new(
                Position::new(range[0][0], range[0][1]),
                Position::new(range[1][0], range[1][1]),
            )),
            range_length: None,
            text: text.into(),
        }
    }

    /// The whole text replaced with `text`.
    fn whole(text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: None,
            range_length: None,
            text: text.into(),
        }
    }

    impl Fixture {
        fn new() -> Fixture {
            let (log, _) = Log::new(crate::log::Level::Info);
            let (tx, changed) = async_mpsc::unbounded_channel();
            let clock = TestClock::default();
            let mut owner = Owner::new(log, Box::new(clock.clone()), tx);
            // Whether a parse fits a budget is the machine's business; see
            // `a_parse_cut_by_the_snapshot_budget_goes_on_in_idle_slices` for a cut one.
            owner.snapshot_parse_budget = None;
            owner.idle_parse_slice = None;
            Fixture {
                owner,
                clock,
                changed,
                version: 0,
            }
        }

        fn open(&mut self, name: &str, text: &str) {
            self.owner.handle(Event::Open {
                uri: uri(name),
                language_id: "rust".into(),
                version: 0,
                text: text.into(),
            });
        }

        /// Replaces `[line, character]..[line, character]` with `text` at `at_ms`.
        fn change(&mut self, name: &str, range: [[u32; 2]; 2], text: &str, at_ms: u64) -> Changed {
            self.clock.0.store(at_ms, Ordering::Relaxed);
            self.changes(name, vec![replace(range, text)])
        }

        /// One `didChange` of `changes`, at the clock's time.
        fn changes(&mut self, name: &str, changes: Vec<TextDocumentContentChangeEvent>) -> Changed {
            self.version += 1;
            self.owner.handle(Event::Change {
                uri: uri(name),
                version: self.version,
                changes,
            });
            self.changed.try_recv().expect("every change is reported")
        }

        fn generation(&mut self, name: &str) -> u64 {
            let (reply, mut rx) = oneshot::channel();
            self.owner.handle(Event::Snapshot {
                key: key(name),
                with_history: true,
                reply,
            });
            rx.try_recv().unwrap().unwrap().history_generation
        }

        fn document(&self, name: &str) -> &Document {
            &self.owner.documents[&key(name)]
        }

        /// Offers `text` for `range` (bytes) of the document as it is now.
        fn offer(&mut self, name: &str, id: u64, range: std::ops::Range<usize>, text: &str) {
            let edited_at = self.document(name).edited_at();
            self.owner.handle(Event::Offer {
                key: key(name),
                offer: Offer {
                    id,
                    edited_at,
                    range,
                    text: text.into(),
                },
            });
        }

        fn snapshot_history(&mut self, name: &str) -> Vec<(Uri, EditGroup)> {
            let (reply, mut rx) = oneshot::channel();
            self.owner.handle(Event::Snapshot {
                key: key(name),
                with_history: true,
                reply,
            });
            rx.try_recv().unwrap().unwrap().history
        }
    }

    /// The change that applies the offered edit is an accepted group of its own; an offer the
    /// next change does not apply, or one for an older text, marks nothing.
    #[test]
    fn the_change_applying_an_offered_edit_is_recorded_as_accepted() {
        let mut f = Fixture::new();
        f.open("a.rs", "fn f(w: u32) {\n    w * 2\n}\n");
        // Rename the parameter (two keystrokes, one group).
        f.change("a.rs", [[0, 6], [0, 6]], "i", 0);
        f.change("a.rs", [[0, 7], [0, 7]], "d", 100);
        // The server offered the use's rename; the client applies it right away.
        let at = "fn f(wid: u32) {\n    ".len();
        f.offer("a.rs", 7, at..at + 1, "wid");
        let changed = f.change("a.rs", [[1, 4], [1, 5]], "wid", 150);
        assert_eq!(changed.accepted, Some(7));
        let history = f.document("a.rs").history();
        assert_eq!(history.groups().len(), 2, "not coalesced with the typing");
        assert!(history.last_accepted());
        // The next keystroke, right after and on the same line, starts a group of its own.
        let changed = f.change("a.rs", [[1, 7], [1, 7]], "th", 200);
        assert_eq!(changed.accepted, None);
        assert_eq!(f.document("a.rs").history().groups().len(), 3);
        assert_eq!(
            f.document("a.rs").rope().to_string(),
            "fn f(wid: u32) {\n    width * 2\n}\n"
        );

        // An offer the next change does not apply: consumed, nothing accepted.
        let len = f.document("a.rs").rope().len_bytes();
        f.offer("a.rs", 8, 0..0, "// x\n");
        let changed = f.change("a.rs", [[0, 0], [0, 0]], "// y\n", 5_000);
        assert_eq!(changed.accepted, None);
        assert!(!f.document("a.rs").history().last_accepted());
        // An offer made for an older text: dropped.
        f.offer("a.rs", 9, 0..0, "");
        f.change("a.rs", [[0, 0], [0, 0]], "x", 9_000);
        let stale = Offer {
            id: 10,
            edited_at: 1,
            range: len..len,
            text: "z".into(),
        };
        f.owner.handle(Event::Offer {
            key: key("a.rs"),
            offer: stale,
        });
        let end = f.document("a.rs").rope().len_lines() as u32 - 1;
        let changed = f.change("a.rs", [[end, 0], [end, 0]], "z", 9_500);
        assert_eq!(changed.accepted, None);
    }

    /// The history generation moves with whatever changes some document's history (a change
    /// of any document, a close or an open over a document with a history) and with nothing
    /// else, so a next edit computed in one document is not taken as current after an edit in
    /// another, and one precomputed in a pause still is after a look at another file.
    #[test]
    fn the_history_generation_moves_with_every_history_and_nothing_else() {
        let mut f = Fixture::new();
        f.open("a.rs", "let a = 1;\n");
        let start = f.generation("a.rs");
        // Snapshots, offers, and documents opened and closed unedited leave it.
        f.open("b.rs", "let b = 2;\n");
        f.offer("a.rs", 1, 0..0, "x");
        f.open("c.rs", "let c = 3;\n");
        f.owner.handle(Event::Close { uri: uri("c.rs") });
        assert_eq!(f.generation("a.rs"), start);
        // A change of another document moves it, as does one of this document.
        f.change("b.rs", [[0, 8], [0, 9]], "20", 0);
        let after_b = f.generation("a.rs");
        assert_ne!(after_b, start);
        f.change("a.rs", [[0, 8], [0, 9]], "10", 5_000);
        let after_a = f.generation("a.rs");
        assert_ne!(after_a, after_b);
        // Closing a document takes its history away; opening one again replaces it.
        f.owner.handle(Event::Close { uri: uri("b.rs") });
        let closed = f.generation("a.rs");
        assert_ne!(closed, after_a);
        f.open("a.rs", "let a = 10;\n");
        assert_ne!(f.generation("a.rs"), closed);
    }

    /// A change that records nothing in its document's history leaves the generation, so a
    /// next edit computed in another document is still current after it: no changes at all,
    /// the same whole text again (some clients send it on save), a first range that does not
    /// apply. The owner's report of each change says where the generation is.
    #[test]
    fn a_change_that_records_nothing_leaves_the_history_generation() {
        let mut f = Fixture::new();
        f.open("a.rs", "let a = 1;\n");
        f.open("b.rs", "let b = 2;\n");
        f.change("a.rs", [[0, 8], [0, 9]], "10", 0);
        let start = f.generation("b.rs");
        for (what, changes) in [
            ("no changes", vec![]),
            ("the same whole text", vec![whole("let a = 10;\n")]),
            (
                "a range that does not apply",
                vec![replace([[0, 5], [0, 1]], "x")],
            ),
        ] {
            let changed = f.changes("a.rs", changes);
            assert_eq!(changed.history_generation, start, "{what}");
            assert_eq!(f.generation("b.rs"), start, "{what}");
        }
        // The bad range put the document out of sync; its whole text, changed, records it.
        let changed = f.changes("a.rs", vec![whole("let a = 11;\n")]);
        assert_ne!(changed.history_generation, start);
        assert_eq!(f.generation("b.rs"), changed.history_generation);
    }

    /// A change or a close that spells the URI otherwise than the open did reaches the opened
    /// document, and a snapshot names it as the open did.
    #[test]
    fn messages_spelling_the_uri_otherwise_reach_the_opened_document() {
        let mut f = Fixture::new();
        let opened: Uri = "file:///w/caf%c3%a9.rs".parse().unwrap();
        f.owner.handle(Event::Open {
            uri: opened.clone(),
            language_id: "rust".into(),
            version: 0,
            text: "let a = 1;\n".into(),
        });
        f.owner.handle(Event::Change {
            uri: "FILE:///w/caf%C3%A9.rs".parse().unwrap(),
            version: 1,
            changes: vec![replace([[0, 8], [0, 9]], "2")],
        });
        let changed = f.changed.try_recv().expect("the change applied");
        assert_eq!(changed.key, DocumentKey::of(&opened));
        let (reply, mut rx) = oneshot::channel();
        f.owner.handle(Event::Snapshot {
            key: DocumentKey::parse("file:///w/caf%C3%A9.rs"),
            with_history: true,
            reply,
        });
        let snapshots = rx.try_recv().unwrap().expect("open");
        assert_eq!(snapshots.document.rope.to_string(), "let a = 2;\n");
        assert_eq!(snapshots.document.uri, opened);
        assert_eq!(snapshots.history[0].0, opened);
        f.owner.handle(Event::Close {
            uri: "file:///w/caf%C3%A9.rs".parse().unwrap(),
        });
        assert!(f.owner.documents.is_empty(), "closed");
    }

    /// A next edit is asked with the recent edits of every open document, oldest first.
    #[test]
    fn history_spans_the_open_documents_oldest_first() {
        let mut f = Fixture::new();
        f.open("a.rs", "let a = 1;\n");
        f.open("b.rs", "let b = 2;\n");
        f.change("a.rs", [[0, 8], [0, 9]], "10", 0);
        f.change("b.rs", [[0, 8], [0, 9]], "20", 10);
        f.change("a.rs", [[0, 0], [0, 0]], "pub ", 5_000);
        let history: Vec<(String, String)> = f
            .snapshot_history("a.rs")
            .into_iter()
            .map(|(uri, g)| (uri.as_str().rsplit('/').next().unwrap().to_string(), g.new))
            .collect();
        assert_eq!(
            history,
            [
                ("a.rs".into(), "10".into()),
                ("b.rs".into(), "20".into()),
                ("a.rs".into(), "pub ".into())
            ]
        );
        // A completion's snapshot goes without.
        let (reply, mut rx) = oneshot::channel();
        f.owner.handle(Event::Snapshot {
            key: key("a.rs"),
            with_history: false,
            reply,
        });
        assert!(rx.try_recv().unwrap().unwrap().history.is_empty());
    }

    /// Open documents keep trees for at most `max_tree_text_bytes` of text, those edited or
    /// asked for last; the others are not parsed (5,000 open files held a GB of trees), until a
    /// request asks for one, which gets its tree (a fresh parse) and drops the least recently
    /// used one's. An edit of a document without a tree parses it again.
    #[test]
    fn trees_are_kept_for_the_documents_used_last_up_to_a_bound() {
        let mut f = Fixture::new();
        let text = |name: &str| format!("fn {name}() -> u32 {{\n    1\n}}\n");
        f.owner.max_tree_text_bytes = 2 * text("a").len();
        for name in ["a", "b", "c"] {
            f.open(&format!("{name}.rs"), &text(name));
        }
        f.owner.parse_pending(None, None);
        let trees = |f: &Fixture| -> Vec<bool> {
            ["a.rs", "b.rs", "c.rs"]
                .map(|name| f.document(name).tree().is_some())
                .to_vec()
        };
        assert_eq!(
            trees(&f),
            [false, true, true],
            "the oldest open is over the bound"
        );
        assert_eq!(f.document("a.rs").parses(), 0, "and never parsed");
        assert!(!f.document("a.rs").needs_parse(), "nor due");

        let (reply, mut rx) = oneshot::channel();
        f.owner.handle(Event::Snapshot {
            key: key("a.rs"),
            with_history: false,
            reply,
        });
        let snapshot = rx.try_recv().unwrap().unwrap().document;
        assert_eq!(
            snapshot
                .tree
                .expect("asked for: parsed")
                .root_node()
                .to_sexp(),
            fresh_sexp(&text("a"))
        );
        assert_eq!(
            trees(&f),
            [true, false, true],
            "b is now the least recently used"
        );

        f.change("b.rs", [[1, 4], [1, 5]], "2", 0);
        f.owner.parse_pending(None, None);
        assert_eq!(
            trees(&f),
            [true, true, false],
            "c, opened before a was asked for, goes"
        );
        assert_eq!(
            f.document("b.rs").tree().unwrap().root_node().to_sexp(),
            fresh_sexp("fn b() -> u32 {\n    2\n}\n")
        );
    }

    /// A fresh parse of `text`, as an S-expression.
    fn fresh_sexp(text: &str) -> String {
        redraft_context::parse_rust(text)
            .unwrap()
            .root_node()
            .to_sexp()
    }

    /// A client typing faster than its file parses: the owner finds the file's `didOpen` and
    /// keystrokes queued, each with the completion request's snapshot, every one but the last
    /// cancelled by the keystroke after it. They cost one parse together (they cost one each,
    /// the open's too, and on a file of a few MB a parse each put the owner seconds behind per
    /// keystroke), and the snapshot that is answered has the tree of the text it shows.
    #[test]
    fn a_backlog_of_keystrokes_costs_one_parse() {
        let mut f = Fixture::new();
        let (tx, rx) = mpsc::channel();
        tx.send(Event::Open {
            uri: uri("a.rs"),
            language_id: "rust".to_string(),
            version: 0,
            text: "fn main() {\n    \n}\n".to_string(),
        })
        .unwrap();
        let typed = "let v = vec![1, 2, 3].iter().map(|x| x * 2).sum::<i32>();";
        let mut answered = None;
        for (at, c) in typed.chars().enumerate() {
            let column = 4 + at as u32;
            tx.send(Event::Change {
                uri: uri("a.rs"),
                version: 1 + at as i32,
                changes: vec![replace([[1, column], [1, column]], &c.to_string())],
            })
            .unwrap();
            let (reply, wait) = oneshot::channel();
            tx.send(Event::Snapshot {
                key: key("a.rs"),
                with_history: false,
                reply,
            })
            .unwrap();
            // The next keystroke cancels this request; only the last one is still waited for.
            if at + 1 == typed.chars().count() {
                answered = Some(wait);
            }
        }
        drop(tx);
        f.owner.run(rx);
        assert_eq!(
            f.document("a.rs").parses(),
            1,
            "one for the open and the whole backlog"
        );
        let snapshot = answered.unwrap().try_recv().unwrap().unwrap().document;
        let expected = format!("fn main() {{\n    {typed}\n}}\n");
        assert_eq!(snapshot.rope.to_string(), expected);
        assert_eq!(
            snapshot.tree.expect("a tree").root_node().to_sexp(),
            fresh_sexp(&expected)
        );
    }
    /// A snapshot whose document does not parse within the budget goes without a tree (never
    /// the edited, unparsed one); the idle owner goes on with that parse in slices, each
    /// followed by a look at the queue, and ends in the tree of a fresh parse of the text.
    #[test]
    fn a_parse_cut_by_the_snapshot_budget_goes_on_in_idle_slices() {
        let mut f = Fixture::new();
        f.owner.snapshot_parse_budget = Some(Duration::ZERO);
        f.owner.idle_parse_slice = Some(Duration::ZERO);
        let unit = "fn filler(x: u32) -> u32 { let y = x * 2; if y > 3 { y } else { x } }\n";
        f.open(
            "a.rs",
            &format!("fn main() {{\n    \n}}\n{}", unit.repeat(300)),
        );
        f.change("a.rs", [[1, 4], [1, 4]], "let s = \"", 0);
        let (reply, mut answer) = oneshot::channel();
        f.owner.handle(Event::Snapshot {
            key: key("a.rs"),
            with_history: false,
            reply,
        });
        let snapshot = answer.try_recv().unwrap().unwrap().document;
        assert!(snapshot.tree.is_none(), "cut: no tree");
        assert_eq!(f.document("a.rs").parses(), 0, "the open's parse waits too");

        // Something queued: one slice, then the event.
        let (tx, rx) = mpsc::channel();
        tx.send(Event::Encoding(PositionEncoding::Utf8)).unwrap();
        let next = f.owner.parse_while_idle(&rx);
        assert!(matches!(next, Ok(Some(Event::Encoding(_)))));
        assert!(
            f.document("a.rs").tree().is_none(),
            "one slice is not enough"
        );
        // Nothing queued: slices until it is done.
        assert!(matches!(f.owner.parse_while_idle(&rx), Ok(None)));
        assert_eq!(f.document("a.rs").parses(), 1);
        let text = f.document("a.rs").rope().to_string();
        assert_eq!(
            f.document("a.rs").tree().unwrap().root_node().to_sexp(),
            fresh_sexp(&text)
        );
    }
}
