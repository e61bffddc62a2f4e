//! The one owner of the open documents: a thread that applies `didOpen`/`didChange`/`didClose`
//! in the order the client sent them and hands out snapshots.
//!
//! tower-lsp runs handlers concurrently, so edits must not be applied from the handlers
//! themselves; each handler only queues its event (a synchronous send, in the order the
//! handlers start, which is the order the messages arrived). A snapshot request goes through
//! the same queue, so a request always sees every edit that came before it and none after.
//! Parsing (seconds for a huge file) happens here, never on the async runtime.

use std::collections::HashMap;
use std::sync::mpsc;

use tokio::sync::oneshot;
use tower_lsp_server::ls_types::{TextDocumentContentChangeEvent, Uri};

use super::document::{Document, Snapshot};
use super::encoding::PositionEncoding;
use super::log::Log;

/// How many other open documents a request may draw context from.
const MAX_NEIGHBOURS: usize = 8;

/// What a request works on: its document and the other open ones, most recently edited first.
pub struct Snapshots {
    pub document: Snapshot,
    pub neighbours: Vec<Snapshot>,
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
    Snapshot {
        uri: Uri,
        reply: oneshot::Sender<Option<Snapshots>>,
    },
}

impl Event {
    fn uri(&self) -> Option<&Uri> {
        match self {
            Event::Encoding(_) => None,
            Event::Open { uri, .. }
            | Event::Change { uri, .. }
            | Event::Close { uri }
            | Event::Snapshot { uri, .. } => Some(uri),
        }
    }
}

/// The handle the handlers use; cheap to clone.
#[derive(Clone)]
pub struct Documents {
    tx: mpsc::Sender<Event>,
}

impl Documents {
    pub fn spawn(log: Log) -> Documents {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("redraft-documents".into())
            .spawn(move || Owner::new(log).run(rx))
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

    /// Queues a snapshot request now (so it is ordered after every event already sent) and
    /// returns the answer to await. `None`: the document is not open.
    pub fn snapshot(&self, uri: Uri) -> oneshot::Receiver<Option<Snapshots>> {
        let (reply, rx) = oneshot::channel();
        self.send(Event::Snapshot { uri, reply });
        rx
    }

    fn send(&self, event: Event) {
        // The owner thread only stops when every handle is gone.
        let _ = self.tx.send(event);
    }
}

struct Owner {
    documents: HashMap<Uri, Document>,
    encoding: PositionEncoding,
    /// Orders edits across documents (recency for neighbours).
    clock: u64,
    log: Log,
}

impl Owner {
    fn new(log: Log) -> Owner {
        Owner {
            documents: HashMap::new(),
            encoding: PositionEncoding::default(),
            clock: 0,
            log,
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Event>) {
        while let Ok(event) = rx.recv() {
            let uri = event.uri().cloned();
            let handled =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.handle(event)));
            if handled.is_err() {
                // The document may be half-edited: forget it rather than serve wrong text.
                if let Some(uri) = uri {
                    self.documents.remove(&uri);
                    self.log.error(format!(
                        "an edit of {} failed unexpectedly (a bug); the document is closed until the client opens it again",
                        uri.as_str()
                    ));
                }
            }
        }
    }

    fn handle(&mut self, event: Event) {
        self.clock += 1;
        match event {
            Event::Encoding(encoding) => self.encoding = encoding,
            Event::Open {
                uri,
                language_id,
                version,
                text,
            } => {
                let document = Document::new(uri.clone(), &language_id, version, &text, self.clock);
                self.documents.insert(uri, document);
            }
            Event::Change {
                uri,
                version,
                changes,
            } => {
                let Some(document) = self.documents.get_mut(&uri) else {
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
                if let Err(err) =
                    document.apply_changes(version, &changes, self.encoding, self.clock)
                {
                    self.log.error(format!(
                        "didChange for {} (version {version}) does not apply: {err}; the document may be out of sync until the client sends it whole",
                        uri.as_str()
                    ));
                }
            }
            Event::Close { uri } => {
                self.documents.remove(&uri);
            }
            Event::Snapshot { uri, reply } => {
                let answer = self.documents.get(&uri).map(|document| {
                    let mut neighbours: Vec<&Document> = self
                        .documents
                        .iter()
                        .filter(|(other, _)| **other != uri)
                        .map(|(_, d)| d)
                        .collect();
                    neighbours.sort_by_key(|d| std::cmp::Reverse(d.edited_at()));
                    Snapshots {
                        document: document.snapshot(),
                        neighbours: neighbours
                            .into_iter()
                            .take(MAX_NEIGHBOURS)
                            .map(Document::snapshot)
                            .collect(),
                    }
                });
                // The request may have been cancelled meanwhile; nobody is waiting then.
                let _ = reply.send(answer);
            }
        }
    }
}
