//! One open document: its text as a rope, its version, for Rust a tree-sitter tree kept up to
//! date incrementally (every edit becomes an `InputEdit` at once; the re-parse waits until a
//! snapshot needs the tree or the owner has nothing else to do, so a backlog of `didChange`s
//! costs one parse, not one each: [`Document::parse_within`]),
//! and its recent edits (`history`), with the next edit last offered for it so that the change
//! applying it is recorded as an accepted suggestion.
//!
//! Requests never see a `Document`, only a [`Snapshot`]: cloning a rope or a tree is O(1), so
//! a snapshot is cheap and the owner can go on applying edits while a request works.

use std::ops::{ControlFlow, Range};
use std::time::{Duration, Instant};

use redraft_context::Language;
use ropey::Rope;
use tower_lsp_server::ls_types::{TextDocumentContentChangeEvent, Uri};
use tree_sitter::{InputEdit, ParseOptions, ParseState, Parser, Point, Tree};

use super::document_key::DocumentKey;
use super::encoding::{PositionEncoding, PositionError};
use super::history::{changed_span, EditHistory, HistoryLimits, Stamp};

/// Above this size a document is plain text: a tree for it would cost seconds per full parse
/// and far more memory than the text, and the context windows never need more than a few KB
/// around the cursor.
pub const MAX_PARSED_BYTES: usize = 4 << 20;

/// An open document as one request sees it.
#[derive(Clone)]
pub struct Snapshot {
    /// As the client spelled it when it opened the document: what the server says of the
    /// document on its own names it so (and the runtime's caches are kept under it).
    pub uri: Uri,
    pub version: i32,
    /// As the client named it (the enabled-languages setting matches on it).
    pub language_id: String,
    pub language: Language,
    pub rope: Rope,
    /// An up-to-date parse of `rope`, when the language has a grammar, the text is small
    /// enough and its parse finished within the owner's budget (else the context layer parses
    /// around the cursor itself).
    pub tree: Option<Tree>,
    /// Larger is more recent (a counter over all documents, not a clock). Every change sets
    /// it anew, so it names this text exactly, whatever versions the client sends.
    pub edited_at: u64,
    /// Byte offset just after the text the last change inserted (where the editor's cursor
    /// usually is after it); `None` before the first change.
    pub last_edit_end: Option<usize>,
    /// `None` while the text is the client's; after a change that did not apply (see
    /// [`Document::apply_changes`]), the `edited_at` of the first such change, until a change
    /// sends the whole text again.
    pub out_of_sync_since: Option<u64>,
}

impl Snapshot {
    /// The text is the client's (see [`out_of_sync_since`](Self::out_of_sync_since)).
    pub fn in_sync(&self) -> bool {
        self.out_of_sync_since.is_none()
    }

    /// This snapshot with `bytes` (on char boundaries) replaced by `text`, a text the client
    /// has not sent (the item selected in its suggest widget, applied), and its tree edited to
    /// match and re-parsed for at most `budget`, reusing what the edit left of the old one (a
    /// millisecond or so where a fresh parse costs tens: the context layer's, for want of a
    /// tree, on the model's thread). Without a tree, or with the parse cut by `budget`, it has
    /// none. Blocking: a request calls it off the async workers.
    pub fn replaced(mut self, bytes: Range<usize>, text: &str, budget: Duration) -> Snapshot {
        // Only with a tree to edit: the account counts the lines up to the edit.
        let edit = self
            .tree
            .is_some()
            .then(|| input_edit(&self.rope, bytes.clone(), text));
        let start = self.rope.byte_to_char(bytes.start);
        let end = self.rope.byte_to_char(bytes.end);
        self.rope.remove(start..end);
        self.rope.insert(start, text);
        if let (Some(mut tree), Some(edit)) = (self.tree.take(), edit) {
            tree.edit(&edit);
            let mut parser = Parser::new();
            self.tree = parser.set_language(&tree.language()).ok().and_then(|()| {
                parse(
                    &mut parser,
                    &self.rope,
                    Some(&tree),
                    Some(Instant::now() + budget),
                )
            });
        }
        self
    }
}

/// A next edit the server answered with for the text at `edited_at`: `text` in place of
/// `range`. The next change is an accepted suggestion if it makes the document what applying
/// this would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub id: u64,
    pub edited_at: u64,
    pub range: Range<usize>,
    pub text: String,
}

/// How one `didChange` went: whether it applied the offered next edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// The id of the offer the change accepted.
    pub accepted: Option<u64>,
}

pub struct Document {
    uri: Uri,
    version: i32,
    language_id: String,
    language: Language,
    rope: Rope,
    syntax: Option<Syntax>,
    edited_at: u64,
    /// The later of `edited_at` and the last request's snapshot (see
    /// [`Document::asked`]): which documents' trees are worth keeping.
    used_at: u64,
    history: EditHistory,
    offer: Option<Offer>,
    last_edit_end: Option<usize>,
    out_of_sync_since: Option<u64>,
}

/// The parser and its last tree; the tree is `None` while the text is too large to parse.
struct Syntax {
    parser: Parser,
    tree: Option<Tree>,
    /// The text changed since `tree` was parsed (the tree has the edits, not the re-parse).
    stale: bool,
    /// A parse of the current text was cut by its time budget: the parser holds its progress,
    /// and the next parse of the same text goes on from there (a change resets it).
    resumable: bool,
    /// The tree was dropped to bound the memory trees take (see
    /// [`Document::drop_tree`]): no parse is due until a request asks for one.
    dropped: bool,
    /// Parses made, for the tests that count them.
    #[cfg(test)]
    parses: usize,
}

impl Document {
    /// An opened document, parsed (the tests'; the owner opens [`Document::unparsed`]).
    #[cfg(test)]
    pub fn new(uri: Uri, language_id: &str, version: i32, text: &str, edited_at: u64) -> Document {
        let mut document = Document::unparsed(uri, language_id, version, text, edited_at);
        document.parse_pending();
        document
    }

    /// An opened document whose first parse waits, as a change's does, for
    /// [`Document::parse_within`] (the owner's: a snapshot's budget or an idle moment), so a
    /// `didOpen` of a large half-typed file holds no request behind it.
    pub fn unparsed(
        uri: Uri,
        language_id: &str,
        version: i32,
        text: &str,
        edited_at: u64,
    ) -> Document {
        let language = Language::from_lsp_id(language_id);
        let syntax = (language == Language::Rust).then(|| {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_rust::LANGUAGE.into())
                .expect("the bundled Rust grammar matches the tree-sitter library");
            Syntax {
                parser,
                tree: None,
                stale: true,
                resumable: false,
                dropped: false,
                #[cfg(test)]
                parses: 0,
            }
        });
        Document {
            uri,
            version,
            language_id: language_id.to_string(),
            language,
            rope: Rope::from_str(text),
            syntax,
            edited_at,
            used_at: edited_at,
            history: EditHistory::new(HistoryLimits::default()),
            offer: None,
            last_edit_end: None,
            out_of_sync_since: None,
        }
    }

    pub fn rope(&self) -> &Rope {
        &self.rope
    }

    pub fn language(&self) -> Language {
        self.language
    }

    /// The language as the client named it.
    pub fn language_id(&self) -> &str {
        &self.language_id
    }

    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    pub fn key(&self) -> DocumentKey {
        DocumentKey::of(&self.uri)
    }

    pub fn version(&self) -> i32 {
        self.version
    }

    pub fn edited_at(&self) -> u64 {
        self.edited_at
    }

    /// Whether the text changed since its last parse (a parse is due).
    pub fn needs_parse(&self) -> bool {
        self.syntax.as_ref().is_some_and(|syntax| syntax.stale)
    }

    /// The bytes of text whose tree this document holds or has a parse due for: what its
    /// tree costs, roughly (tens of times as much memory as its text).
    pub fn tree_text_bytes(&self) -> usize {
        match &self.syntax {
            Some(syntax) if syntax.stale || syntax.tree.is_some() => self.rope.len_bytes(),
            _ => 0,
        }
    }

    /// Drops the tree (and any parse due or under way): the document is one of many open
    /// ones nobody has asked for lately. [`Document::want_tree`] brings it back.
    pub fn drop_tree(&mut self) {
        if let Some(syntax) = &mut self.syntax {
            syntax.tree = None;
            syntax.stale = false;
            syntax.dropped = true;
            if syntax.resumable {
                syntax.parser.reset();
                syntax.resumable = false;
            }
        }
    }

    /// See `used_at`.
    pub fn used_at(&self) -> u64 {
        self.used_at
    }

    /// A request asked for the document at `seq` and needs its tree: one dropped by
    /// [`Document::drop_tree`] is due again (a fresh parse).
    pub fn asked(&mut self, seq: u64) {
        self.used_at = seq;
        if let Some(syntax) = &mut self.syntax {
            if syntax.dropped {
                syntax.dropped = false;
                syntax.stale = true;
            }
        }
    }

    /// The parse of the text, if it is up to date ([`Document::parse_within`] makes it so).
    pub fn tree(&self) -> Option<&Tree> {
        let syntax = self.syntax.as_ref()?;
        if syntax.stale {
            return None;
        }
        syntax.tree.as_ref()
    }

    /// Parses made so far.
    #[cfg(test)]
    pub fn parses(&self) -> usize {
        self.syntax.as_ref().map_or(0, |syntax| syntax.parses)
    }

    pub fn history(&self) -> &EditHistory {
        &self.history
    }

    /// See [`Snapshot::in_sync`].
    pub fn in_sync(&self) -> bool {
        self.out_of_sync_since.is_none()
    }

    /// Remembers the next edit offered for the current text (replacing any older offer); an
    /// offer for an older text is dropped.
    pub fn offer(&mut self, offer: Offer) {
        if offer.edited_at == self.edited_at {
            self.offer = Some(offer);
        }
    }

    /// Applies one `didChange` in order: each change's range refers to the text left by the
    /// previous one. A change that names no place in the text is reported (the first such
    /// error is returned) and puts the document out of sync ([`Snapshot::in_sync`]): the
    /// client holds some other text under this version, so an edit computed here would land in
    /// the wrong place there. What was applied before it stays applied; the ranges after it
    /// refer to text this one would have left, so they are skipped up to the last full-text
    /// change after it, which is applied with what follows it. A full-text change is applied
    /// (and recorded) as the span that differs, and brings the text back in sync. `seq` orders
    /// the change among all documents' (it becomes `edited_at`), `at_ms` is the clock for the
    /// history.
    ///
    /// The changes go into the history one by one, unless together they applied the offered
    /// next edit: then they are one accepted group.
    pub fn apply_changes(
        &mut self,
        version: i32,
        changes: &[TextDocumentContentChangeEvent],
        encoding: PositionEncoding,
        seq: u64,
        at_ms: u64,
    ) -> Result<Applied, PositionError> {
        let before = self.rope.clone();
        let offer = self
            .offer
            .take()
            .filter(|offer| offer.edited_at == self.edited_at);
        self.version = version;
        self.edited_at = seq;
        self.used_at = seq;
        let mut result = Ok(());
        // Each change with the text it applied to (a rope clone is O(1)).
        let mut applied: Vec<(Rope, Range<usize>, &str)> = Vec::with_capacity(changes.len());
        let mut next = 0;
        while let Some(change) = changes.get(next) {
            next += 1;
            let (range, text) = match change.range {
                None => {
                    self.out_of_sync_since = None;
                    let (old, new) = changed_span(&self.rope, &change.text);
                    (old, &change.text[new])
                }
                Some(range) => match encoding.edit_range(&self.rope, range) {
                    Ok(bytes) => (bytes, change.text.as_str()),
                    Err(err) => {
                        self.out_of_sync_since.get_or_insert(seq);
                        if result.is_ok() {
                            result = Err(err);
                        }
                        let whole = changes[next..]
                            .iter()
                            .rposition(|change| change.range.is_none());
                        match whole {
                            Some(whole) => {
                                next += whole;
                                continue;
                            }
                            None => break,
                        }
                    }
                },
            };
            applied.push((self.rope.clone(), range.clone(), text));
            self.replace(range, text);
        }
        let accepted = offer.filter(|offer| result.is_ok() && self.rope == offered(&before, offer));
        let stamp = Stamp {
            seq,
            at_ms,
            accepted: accepted.is_some(),
        };
        match &accepted {
            Some(offer) => {
                self.history
                    .record(&before, offer.range.clone(), &offer.text, stamp);
                self.last_edit_end = Some(offer.range.start + offer.text.len());
            }
            None => {
                for (rope, range, text) in &applied {
                    self.history.record(rope, range.clone(), text, stamp);
                }
                if let Some((_, range, text)) = applied.last() {
                    self.last_edit_end = Some(range.start + text.len());
                }
            }
        }
        result.map(|()| Applied {
            accepted: accepted.map(|offer| offer.id),
        })
    }

    /// Replaces `bytes` (on char boundaries) with `text`, editing the tree to match and marking
    /// it stale: [`Document::tree`] has none until [`Document::parse_within`] re-parses it.
    pub fn replace(&mut self, bytes: Range<usize>, text: &str) {
        let tracked = self
            .syntax
            .as_ref()
            .is_some_and(|syntax| syntax.tree.is_some());
        let edit = tracked.then(|| input_edit(&self.rope, bytes.clone(), text));
        let start = self.rope.byte_to_char(bytes.start);
        let end = self.rope.byte_to_char(bytes.end);
        self.rope.remove(start..end);
        self.rope.insert(start, text);
        if let Some(syntax) = &mut self.syntax {
            syntax.stale = true;
            syntax.dropped = false;
            if syntax.resumable {
                // The progress was on the old text.
                syntax.parser.reset();
                syntax.resumable = false;
            }
            if let (Some(edit), Some(tree)) = (edit, &mut syntax.tree) {
                tree.edit(&edit);
            }
        }
    }

    /// [`Document::parse_within`] with no budget (the tests').
    #[cfg(test)]
    pub fn parse_pending(&mut self) {
        self.parse_within(None);
    }

    /// Brings the tree up to date with the text if it changed since the last parse, reusing
    /// what the edits left of the old one, for at most `budget`: whether the tree is now up to
    /// date. The owner calls this before a snapshot and whenever it is idle; a run of changes
    /// queued back to back (a client typing faster than a large file parses) costs one parse,
    /// so the owner never falls further and further behind. A
    /// parse cut short leaves the document without a tree (its requests do without one) and
    /// goes on where it stopped at the next call, unless the text changed in between; so a file
    /// whose parse takes seconds (tree-sitter's error recovery over a megabyte of half-typed
    /// code) costs each request at most the budget, and is parsed in slices while idle.
    pub fn parse_within(&mut self, budget: Option<Duration>) -> bool {
        let Some(syntax) = &mut self.syntax else {
            return true;
        };
        if !syntax.stale {
            return true;
        }
        if self.rope.len_bytes() > MAX_PARSED_BYTES {
            syntax.stale = false;
            syntax.tree = None;
            if syntax.resumable {
                syntax.parser.reset();
                syntax.resumable = false;
            }
            return true;
        }
        let deadline = budget.map(|budget| Instant::now() + budget);
        match parse(
            &mut syntax.parser,
            &self.rope,
            syntax.tree.as_ref(),
            deadline,
        ) {
            Some(tree) => {
                #[cfg(test)]
                {
                    syntax.parses += 1;
                }
                syntax.tree = Some(tree);
                syntax.stale = false;
                syntax.resumable = false;
                true
            }
            // Cut by the deadline: resumable.
            None if deadline.is_some_and(|deadline| Instant::now() >= deadline) => {
                syntax.resumable = true;
                false
            }
            // tree-sitter gave up otherwise (it does not, with a language set): no tree, and no
            // retry until the text changes, rather than a loop of failing parses.
            None => {
                syntax.parser.reset();
                syntax.tree = None;
                syntax.stale = false;
                syntax.resumable = false;
                true
            }
        }
    }

    /// The document as a request sees it; its tree only if parsed since the last change
    /// ([`Document::parse_within`] first).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            uri: self.uri.clone(),
            version: self.version,
            language_id: self.language_id.clone(),
            language: self.language,
            rope: self.rope.clone(),
            tree: self.tree().cloned(),
            edited_at: self.edited_at,
            last_edit_end: self.last_edit_end,
            out_of_sync_since: self.out_of_sync_since,
        }
    }
}

/// `before` with `offer` applied.
fn offered(before: &Rope, offer: &Offer) -> Rope {
    let mut rope = before.clone();
    let end = offer.range.end.min(rope.len_bytes());
    let start = rope.byte_to_char(offer.range.start.min(end));
    let end = rope.byte_to_char(end);
    rope.remove(start..end);
    rope.insert(start, &offer.text);
    rope
}

/// Parses the rope chunk by chunk (no contiguous copy of the text); `None` when `deadline`
/// passes first (the parser keeps its progress: a call with the same text resumes it).
pub fn parse(
    parser: &mut Parser,
    rope: &Rope,
    old: Option<&Tree>,
    deadline: Option<Instant>,
) -> Option<Tree> {
    let len = rope.len_bytes();
    let mut in_time = |_: &ParseState| match deadline {
        Some(deadline) if Instant::now() >= deadline => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    };
    parser.parse_with_options(
        &mut |byte: usize, _: Point| -> &[u8] {
            if byte >= len {
                return &[];
            }
            let (chunk, chunk_start, _, _) = rope.chunk_at_byte(byte);
            &chunk.as_bytes()[byte - chunk_start..]
        },
        old,
        Some(ParseOptions::new().progress_callback(&mut in_time)),
    )
}

/// tree-sitter's account of replacing `bytes` of `rope` with `text`.
fn input_edit(rope: &Rope, bytes: Range<usize>, text: &str) -> InputEdit {
    let start_position = ts_point(rope, bytes.start);
    let removed = rope.byte_slice(bytes.clone());
    InputEdit {
        start_byte: bytes.start,
        old_end_byte: bytes.end,
        new_end_byte: bytes.start + text.len(),
        start_position,
        old_end_position: advance(start_position, removed.chunks()),
        new_end_position: advance(start_position, [text]),
    }
}

/// tree-sitter's point for a byte offset: rows split at `\n` only (unlike LSP lines, a lone
/// `\r` does not start a row), columns in bytes.
fn ts_point(rope: &Rope, byte: usize) -> Point {
    advance(Point::new(0, 0), rope.byte_slice(..byte).chunks())
}

/// The point reached after `text`, starting from `from`.
fn advance<'a>(from: Point, text: impl IntoIterator<Item = &'a str>) -> Point {
    let mut point = from;
    for chunk in text {
        let bytes = chunk.as_bytes();
        match bytes.iter().rposition(|&b| b == b'\n') {
            Some(last) => {
                point.row += bytes.iter().filter(|&&b| b == b'\n').count();
                point.column = bytes.len() - last - 1;
            }
            None => point.column += bytes.len(),
        }
    }
    point
}

#[cfg(test)]
mod tests;
