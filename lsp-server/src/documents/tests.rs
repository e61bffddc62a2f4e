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

/// Cell `n` of the notebook `name`.ipynb, as VS Code names it.
fn cell(name: &str, n: usize) -> Uri {
    format!("vscode-notebook-cell:/w/{name}.ipynb#C{n}")
        .parse()
        .unwrap()
}

fn notebook_key(name: &str) -> DocumentKey {
    DocumentKey::of(&format!("file:///w/{name}.ipynb").parse().unwrap())
}

impl Fixture {
    /// Opens the notebook `name` of `cells` (language id, text) as the server does: each cell a
    /// document, then the cells in order (markdown ones not code).
    fn open_notebook(&mut self, name: &str, cells: &[(&str, &str)]) {
        for (n, (language, text)) in cells.iter().enumerate() {
            self.owner.handle(Event::Open {
                uri: cell(name, n),
                language_id: language.to_string(),
                version: 0,
                text: text.to_string(),
            });
        }
        self.owner.handle(Event::Notebook(NotebookEvent::Open {
            notebook: notebook_key(name),
            cells: cells
                .iter()
                .enumerate()
                .map(|(n, (language, _))| crate::notebook::Cell {
                    key: DocumentKey::of(&cell(name, n)),
                    code: *language != "markdown",
                })
                .collect(),
        }));
    }

    fn snapshots(&mut self, uri: &Uri) -> Snapshots {
        let (reply, mut rx) = oneshot::channel();
        self.owner.handle(Event::Snapshot {
            key: DocumentKey::of(uri),
            with_history: true,
            reply,
        });
        rx.try_recv().unwrap().unwrap()
    }
}

/// A rename in one cell is in the history a next edit in the cell after it is asked with (the
/// cells are the text around it, never other documents, but their edits are edits).
#[test]
fn a_cells_history_holds_the_edits_of_the_other_cells() {
    let mut f = Fixture::new();
    f.open_notebook("nb", &[("python", "wid = 1\n"), ("python", "print(wid)\n")]);
    f.version += 1;
    f.owner.handle(Event::Change {
        uri: cell("nb", 0),
        version: f.version,
        changes: vec![replace([[0, 3], [0, 3]], "th")],
    });
    let snapshots = f.snapshots(&cell("nb", 1));
    let history: Vec<(&str, &str)> = snapshots
        .history
        .iter()
        .map(|(uri, group)| (uri.as_str(), group.new.as_str()))
        .collect();
    assert_eq!(history, [(cell("nb", 0).as_str(), "th")]);
    assert_eq!(snapshots.notebook.unwrap().before, "width = 1\n\n");
    assert!(snapshots.neighbours.is_empty());
}

/// Another notebook is one neighbour however many cells it has: the code around its most
/// recently edited code cell, named by that cell. Files opened before it keep their places.
#[test]
fn another_notebook_is_one_neighbour_of_its_code() {
    let mut f = Fixture::new();
    f.open("a.rs", "fn a() {}\n");
    f.open("helpers.rs", "fn helper() {}\n");
    let cells: Vec<(&str, String)> = (0..10)
        .map(|n| match n % 2 {
            0 => ("markdown", String::new()),
            _ => ("python", format!("x{n} = {n}")),
        })
        .collect();
    let cells: Vec<(&str, &str)> = cells.iter().map(|(l, t)| (*l, t.as_str())).collect();
    f.open_notebook("nb", &cells);
    let neighbours = f.snapshots(&uri("a.rs")).neighbours;
    let names: Vec<&str> = neighbours.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(names, [cell("nb", 9).as_str(), "file:///w/helpers.rs"]);
    assert_eq!(
        neighbours[0].rope.to_string(),
        "x1 = 1\n\nx3 = 3\n\nx5 = 5\n\nx7 = 7\n\nx9 = 9"
    );
    assert!(neighbours[0].tree.is_none());
    // From a cell of it, the files alone.
    let names: Vec<String> = f
        .snapshots(&cell("nb", 3))
        .neighbours
        .iter()
        .map(|s| s.uri.as_str().to_string())
        .collect();
    assert_eq!(names, ["file:///w/helpers.rs", "file:///w/a.rs"]);
}

/// What a cell's next edit is shown around it changes with the notebook's cells: a change of
/// them moves the history generation (one that cannot be placed does not).
#[test]
fn a_change_of_a_notebooks_cells_moves_the_history_generation() {
    let mut f = Fixture::new();
    f.open_notebook("nb", &[("python", "a = 1\n"), ("python", "b = 2\n")]);
    let before = f.snapshots(&cell("nb", 1)).history_generation;
    f.owner.handle(Event::Notebook(NotebookEvent::Splice {
        notebook: notebook_key("nb"),
        start: 0,
        delete: 2,
        cells: [1, 0]
            .map(|n| crate::notebook::Cell {
                key: DocumentKey::of(&cell("nb", n)),
                code: true,
            })
            .into(),
    }));
    let moved = f.snapshots(&cell("nb", 1));
    assert_eq!(moved.history_generation, before + 1);
    assert_eq!(moved.notebook.unwrap().after, "\na = 1\n");
    f.owner.handle(Event::Notebook(NotebookEvent::Splice {
        notebook: notebook_key("nb"),
        start: 5,
        delete: 1,
        cells: Vec::new(),
    }));
    assert_eq!(f.snapshots(&cell("nb", 1)).history_generation, before + 1);
}
