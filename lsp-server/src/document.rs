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

    #[cfg(test)]
    pub fn rope(&self) -> &Rope {
        &self.rope
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
        let edit = tracked.then(|| {
            let start_position = ts_point(&self.rope, bytes.start);
            let removed = self.rope.byte_slice(bytes.clone());
            InputEdit {
                start_byte: bytes.start,
                old_end_byte: bytes.end,
                new_end_byte: bytes.start + text.len(),
                start_position,
                old_end_position: advance(start_position, removed.chunks()),
                new_end_position: advance(start_position, [text]),
            }
        });
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tower_lsp_server::ls_types::Range as LspRange;

    use crate::history::replay;

    fn uri() -> Uri {
        "file:///t/lib.rs".parse().unwrap()
    }

    /// An edit as a test writes it: replace chars `start..end` (char indices into the current
    /// text, so every edit is valid whatever came before) with `text`.
    #[derive(Debug, Clone)]
    struct Edit {
        start: usize,
        len: usize,
        text: String,
        /// 0: at the start of the text, 1: at its end, else at `start`.
        anchor: u8,
    }

    fn piece() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("x"),
            Just("é"),
            Just("😀"),
            Just("\t"),
            Just("\n"),
            Just("\r\n"),
            Just("\r"),
            Just(" "),
            Just("fn f() {"),
            Just("}"),
            Just("let a = 1;"),
            Just("\"s"),
            Just("//"),
            Just("("),
        ]
    }

    fn edits() -> impl Strategy<Value = Vec<Edit>> {
        proptest::collection::vec(
            (
                0usize..200,
                0usize..6,
                proptest::collection::vec(piece(), 0..4),
                0u8..4,
            )
                .prop_map(|(start, len, parts, anchor)| Edit {
                    start,
                    len,
                    text: parts.concat(),
                    anchor,
                }),
            1..25,
        )
    }

    /// The LSP range of chars `start..end` of `text`, computed without ropey: the oracle side.
    fn lsp_range(text: &str, start: usize, end: usize, enc: PositionEncoding) -> LspRange {
        let pos = |char_idx: usize| {
            let byte = text
                .char_indices()
                .nth(char_idx)
                .map_or(text.len(), |(b, _)| b);
            let before = &text[..byte];
            let mut line = 0u32;
            let mut line_start = 0;
            let bytes = before.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\n'
                    || (bytes[i] == b'\r' && text.as_bytes().get(i + 1) != Some(&b'\n'))
                {
                    line += 1;
                    line_start = i + 1;
                }
                i += 1;
            }
            tower_lsp_server::ls_types::Position::new(
                line,
                enc.width(&text[line_start..byte]) as u32,
            )
        };
        LspRange::new(pos(start), pos(end))
    }

    /// Snaps a char index so that the edit never starts or ends between `\r` and `\n` (no LSP
    /// position names that place).
    fn snap(text: &str, char_idx: usize) -> usize {
        let byte = text
            .char_indices()
            .nth(char_idx)
            .map_or(text.len(), |(b, _)| b);
        if byte > 0
            && text.as_bytes()[byte - 1] == b'\r'
            && text.as_bytes().get(byte) == Some(&b'\n')
        {
            char_idx - 1
        } else {
            char_idx
        }
    }

    fn sexp(tree: &Tree) -> String {
        tree.root_node().to_sexp()
    }

    /// The same edits applied to a tree over a plain `String`, points counted on the string:
    /// tree-sitter's own incremental result, which the rope-driven tree must equal exactly.
    struct StringTree {
        parser: Parser,
        tree: Tree,
    }

    impl StringTree {
        fn new(text: &str) -> StringTree {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_rust::LANGUAGE.into())
                .unwrap();
            let tree = parser.parse(text, None).unwrap();
            StringTree { parser, tree }
        }

        /// `old` is the text before the edit, `new_text` after it.
        fn edit(&mut self, old: &str, bytes: Range<usize>, inserted: &str, new_text: &str) {
            let point = |text: &str, byte: usize| {
                let before = &text[..byte];
                Point::new(
                    before.matches('\n').count(),
                    byte - before.rfind('\n').map_or(0, |i| i + 1),
                )
            };
            self.tree.edit(&InputEdit {
                start_byte: bytes.start,
                old_end_byte: bytes.end,
                new_end_byte: bytes.start + inserted.len(),
                start_position: point(old, bytes.start),
                old_end_position: point(old, bytes.end),
                new_end_position: point(new_text, bytes.start + inserted.len()),
            });
        }

        fn reparse(&mut self, text: &str) {
            self.tree = self.parser.parse(text, Some(&self.tree)).unwrap();
        }
    }

    /// The rope-driven tree equals tree-sitter's incremental parse of the same edits on a
    /// string (kinds, byte ranges and points of every node), and a fresh parse whenever the text
    /// parses without errors (with errors, tree-sitter's recovery may legitimately differ
    /// between an incremental and a fresh parse).
    fn check_trees(
        doc: &mut Document,
        text: &str,
        oracle: &StringTree,
    ) -> Result<(), TestCaseError> {
        doc.parse_pending();
        let incremental = doc
            .tree()
            .expect("a Rust document under the size limit has a tree");
        prop_assert_eq!(nodes(incremental), nodes(&oracle.tree));
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_rust::LANGUAGE.into())
            .unwrap();
        let fresh = parser.parse(text, None).unwrap();
        if !fresh.root_node().has_error() {
            prop_assert_eq!(sexp(incremental), sexp(&fresh));
            prop_assert_eq!(nodes(incremental), nodes(&fresh));
        }
        Ok(())
    }

    fn nodes(tree: &Tree) -> Vec<(u16, Range<usize>, Point, Point)> {
        let mut out = Vec::new();
        let mut cursor = tree.walk();
        'walk: loop {
            let node = cursor.node();
            out.push((
                node.kind_id(),
                node.byte_range(),
                node.start_position(),
                node.end_position(),
            ));
            if cursor.goto_first_child() || cursor.goto_next_sibling() {
                continue;
            }
            loop {
                if !cursor.goto_parent() {
                    break 'walk;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn edits_through_sync_equal_edits_on_a_string(initial in proptest::collection::vec(piece(), 0..20), edits in edits()) {
            let initial = initial.concat();
            for enc in PositionEncoding::ALL {
                let mut text = initial.clone();
                let mut doc = Document::new(uri(), "rust", 0, &text, 0);
                let mut oracle = StringTree::new(&text);
                // The text before each change, by its sequence number (the history's base).
                let mut texts = vec![text.clone()];
                for (version, edit) in edits.iter().enumerate() {
                    let chars = text.chars().count();
                    let start = match edit.anchor { 0 => 0, 1 => chars, _ => snap(&text, edit.start.min(chars)) };
                    let end = snap(&text, (start + edit.len).min(chars)).max(start);
                    let range = lsp_range(&text, start, end, enc);
                    let (bs, be) = (
                        text.char_indices().nth(start).map_or(text.len(), |(b, _)| b),
                        text.char_indices().nth(end).map_or(text.len(), |(b, _)| b),
                    );
                    let old = text.clone();
                    texts.push(old.clone());
                    text.replace_range(bs..be, &edit.text);
                    oracle.edit(&old, bs..be, &edit.text, &text);
                    oracle.reparse(&text);
                    let seq = version as u64 + 1;
                    doc.apply_changes(version as i32 + 1, &[TextDocumentContentChangeEvent {
                        range: Some(range),
                        range_length: None,
                        text: edit.text.clone(),
                    }], enc, seq, 300 * seq).unwrap();
                    prop_assert_eq!(doc.rope().to_string(), text.clone(), "{:?} after {:?}", enc, edit);
                    check_trees(&mut doc, &text, &oracle)?;
                    // The history, recorded from the LSP ranges, replays to the same text.
                    let base = doc.history().groups().next().map_or(&text, |g| &texts[g.first_seq as usize]);
                    prop_assert_eq!(&replay(base, doc.history().groups()), &text);
                }
            }
        }

        #[test]
        fn several_changes_in_one_notification_apply_in_order(edits in edits()) {
            let mut text = String::from("fn main() {\r\n\tlet 😀 = 1;\n}\n");
            let mut doc = Document::new(uri(), "rust", 0, &text, 0);
            let mut oracle = StringTree::new(&text);
            let mut changes = Vec::new();
            for edit in &edits {
                let chars = text.chars().count();
                let start = snap(&text, edit.start.min(chars));
                let end = snap(&text, (start + edit.len).min(chars)).max(start);
                let range = lsp_range(&text, start, end, PositionEncoding::Utf16);
                let (bs, be) = (
                    text.char_indices().nth(start).map_or(text.len(), |(b, _)| b),
                    text.char_indices().nth(end).map_or(text.len(), |(b, _)| b),
                );
                let old = text.clone();
                text.replace_range(bs..be, &edit.text);
                oracle.edit(&old, bs..be, &edit.text, &text);
                changes.push(TextDocumentContentChangeEvent { range: Some(range), range_length: None, text: edit.text.clone() });
            }
            doc.apply_changes(1, &changes, PositionEncoding::Utf16, 1, 0).unwrap();
            prop_assert_eq!(doc.rope().to_string(), text.clone());
            oracle.reparse(&text);
            check_trees(&mut doc, &text, &oracle)?;
        }
    }

    /// A parse cut by its budget leaves the document without a tree, and the next parse
    /// finishes it: resumed where the text is the same, started over from the edited tree where
    /// it changed (tree-sitter's progress is on the old text then), either way the tree of a
    /// fresh parse of the text.
    #[test]
    fn a_parse_cut_by_its_budget_resumes_or_starts_over_and_ends_in_the_right_tree() {
        let unit = "fn filler(x: u32) -> u32 { let y = x * 2; if y > 3 { y } else { x } }\n";
        let text = format!("fn main() {{\n    \n}}\n{}", unit.repeat(3000));
        let fresh = |text: &str| sexp(&redraft_context::parse_rust(text).unwrap());
        for edit_between in [false, true] {
            let mut doc = Document::new(uri(), "rust", 0, &text, 0);
            // A change that makes the rest of the file hard to recover from: an open string.
            doc.replace(16..16, "let s = \"");
            assert!(!doc.parse_within(Some(Duration::ZERO)), "cut at once");
            assert!(doc.tree().is_none(), "no tree while cut");
            let mut expected = doc.rope().to_string();
            if edit_between {
                doc.replace(16..26, "let s = 1;");
                expected = doc.rope().to_string();
            }
            assert!(doc.parse_within(None));
            assert_eq!(
                sexp(doc.tree().unwrap()),
                fresh(&expected),
                "{edit_between}"
            );
            assert_eq!(doc.parses(), 2, "the open's and this one");
        }
    }

    /// Whoever edits the text, the tree it had is not handed out again until re-parsed: an
    /// edited tree (`InputEdit`s applied, not re-parsed) is no parse of the new text.
    #[test]
    fn an_edited_tree_is_not_served_until_parsed_again() {
        let mut doc = Document::new(uri(), "rust", 0, "fn a() {}\n", 0);
        assert!(doc.tree().is_some());
        doc.replace(0..0, "struct S;\n");
        assert!(doc.tree().is_none(), "the tree was stale");
        doc.parse_pending();
        assert_eq!(
            sexp(doc.tree().unwrap()),
            "(source_file (struct_item name: (type_identifier)) (function_item name: (identifier) parameters: (parameters) body: (block)))"
        );
    }

    #[test]
    fn full_replacement_and_bad_ranges() {
        let mut doc = Document::new(uri(), "rust", 0, "fn a() {}\n", 0);
        let full = TextDocumentContentChangeEvent {
            range: None,
            range_length: None,
            text: "struct S;\n".into(),
        };
        doc.apply_changes(1, &[full], PositionEncoding::Utf16, 1, 0)
            .unwrap();
        assert_eq!(doc.rope().to_string(), "struct S;\n");
        assert!(doc.tree().is_none(), "not parsed until asked");
        doc.parse_pending();
        assert_eq!(
            sexp(doc.tree().unwrap()),
            "(source_file (struct_item name: (type_identifier)))"
        );
        // A reversed range is refused and stops the sequence; the text is unchanged.
        let reversed = TextDocumentContentChangeEvent {
            range: Some(LspRange::new(
                tower_lsp_server::ls_types::Position::new(0, 5),
                tower_lsp_server::ls_types::Position::new(0, 1),
            )),
            range_length: None,
            text: "x".into(),
        };
        assert!(doc
            .apply_changes(2, &[reversed], PositionEncoding::Utf16, 2, 0)
            .is_err());
        assert_eq!(doc.rope().to_string(), "struct S;\n");
        // Ranges past the end clamp to the end of the document.
        let past = TextDocumentContentChangeEvent {
            range: Some(LspRange::new(
                tower_lsp_server::ls_types::Position::new(9, 0),
                tower_lsp_server::ls_types::Position::new(12, 4),
            )),
            range_length: None,
            text: "fn b() {}".into(),
        };
        doc.apply_changes(3, &[past], PositionEncoding::Utf16, 3, 0)
            .unwrap();
        assert_eq!(doc.rope().to_string(), "struct S;\nfn b() {}");
        assert_eq!(doc.version(), 3);
    }

    /// A change that does not apply leaves the server with other text than the client's under
    /// the new version: out of sync, whatever incremental changes follow, until a change sends
    /// the whole text.
    #[test]
    fn a_change_that_does_not_apply_puts_the_document_out_of_sync_until_the_whole_text_comes() {
        let at = |line, character| tower_lsp_server::ls_types::Position::new(line, character);
        let change = |range: Option<(
            tower_lsp_server::ls_types::Position,
            tower_lsp_server::ls_types::Position,
        )>,
                      text: &str| {
            TextDocumentContentChangeEvent {
                range: range.map(|(start, end)| LspRange::new(start, end)),
                range_length: None,
                text: text.into(),
            }
        };
        let mut doc = Document::new(uri(), "rust", 0, "fn a() {}\n", 0);
        assert!(doc.snapshot().in_sync());
        // The first change applies, the reversed second one does not: half of the
        // notification is in.
        let half = [
            change(Some((at(0, 0), at(0, 0))), "pub "),
            change(Some((at(0, 9), at(0, 2))), "x"),
        ];
        assert!(doc
            .apply_changes(1, &half, PositionEncoding::Utf16, 1, 0)
            .is_err());
        assert_eq!(doc.rope().to_string(), "pub fn a() {}\n");
        assert!(!doc.snapshot().in_sync());
        doc.apply_changes(
            2,
            &[change(Some((at(0, 0), at(0, 0))), "// x\n")],
            PositionEncoding::Utf16,
            2,
            0,
        )
        .unwrap();
        assert!(
            !doc.snapshot().in_sync(),
            "an incremental change does not mend it"
        );
        doc.apply_changes(
            3,
            &[change(None, "fn b() {}\n")],
            PositionEncoding::Utf16,
            3,
            0,
        )
        .unwrap();
        assert!(doc.snapshot().in_sync());
        // A whole text followed by a change that does not apply is out of sync again.
        let mixed = [
            change(None, "fn c() {}\n"),
            change(Some((at(0, 5), at(0, 1))), ""),
        ];
        assert!(doc
            .apply_changes(4, &mixed, PositionEncoding::Utf16, 4, 0)
            .is_err());
        assert!(!doc.snapshot().in_sync());
    }

    /// A whole text later in the notification than a change that does not apply is the
    /// client's text again: it is applied with what follows it (the changes between refer to
    /// text the bad change would have left, and only the last whole text counts), the error is
    /// still reported, and the document is back in sync. A change after that whole text that
    /// does not apply puts it out of sync again.
    #[test]
    fn a_whole_text_after_a_change_that_does_not_apply_brings_the_document_back_in_sync() {
        let at = |line, character| tower_lsp_server::ls_types::Position::new(line, character);
        let change = |range: Option<[(u32, u32); 2]>, text: &str| TextDocumentContentChangeEvent {
            range: range.map(|[(l0, c0), (l1, c1)]| LspRange::new(at(l0, c0), at(l1, c1))),
            range_length: None,
            text: text.into(),
        };
        let mut doc = Document::new(uri(), "rust", 0, "fn a() {}\n", 0);
        let notification = [
            change(Some([(0, 0), (0, 0)]), "pub "),
            change(Some([(0, 9), (0, 2)]), "x"),
            change(Some([(0, 0), (0, 0)]), "// lost\n"),
            change(None, "fn b() {}\n"),
            change(Some([(0, 0), (0, 0)]), "// lost too\n"),
            change(None, "fn c() {}\n"),
            change(Some([(0, 3), (0, 4)]), "d"),
        ];
        let err = doc
            .apply_changes(1, &notification, PositionEncoding::Utf16, 1, 0)
            .unwrap_err();
        assert!(matches!(err, PositionError::Reversed { .. }), "{err}");
        assert_eq!(doc.rope().to_string(), "fn d() {}\n");
        assert!(doc.snapshot().in_sync());
        assert_eq!(doc.version(), 1);
        assert_eq!(
            replay("fn a() {}\n", doc.history().groups()),
            "fn d() {}\n",
            "the history holds what was applied"
        );

        let out_again = [
            change(Some([(0, 5), (0, 1)]), ""),
            change(None, "fn e() {}\n"),
            change(Some([(0, 5), (0, 1)]), ""),
        ];
        assert!(doc
            .apply_changes(2, &out_again, PositionEncoding::Utf16, 2, 0)
            .is_err());
        assert_eq!(doc.rope().to_string(), "fn e() {}\n");
        assert!(!doc.snapshot().in_sync());
    }

    #[test]
    fn plain_text_and_oversized_documents_have_no_tree() {
        let doc = Document::new(uri(), "markdown", 0, "# hi\n", 0);
        assert!(doc.tree().is_none());
        let big = "x".repeat(MAX_PARSED_BYTES + 1);
        let mut doc = Document::new(uri(), "rust", 0, &big, 0);
        assert!(doc.tree().is_none());
        doc.apply_changes(
            1,
            &[TextDocumentContentChangeEvent {
                range: None,
                range_length: None,
                text: "fn small() {}".into(),
            }],
            PositionEncoding::Utf8,
            1,
            0,
        )
        .unwrap();
        doc.parse_pending();
        assert!(doc.tree().is_some(), "back under the limit, parsed again");
    }
}
