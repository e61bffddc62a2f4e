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
        tower_lsp_server::ls_types::Position::new(line, enc.width(&text[line_start..byte]) as u32)
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
    if byte > 0 && text.as_bytes()[byte - 1] == b'\r' && text.as_bytes().get(byte) == Some(&b'\n') {
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
fn check_trees(doc: &mut Document, text: &str, oracle: &StringTree) -> Result<(), TestCaseError> {
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A snapshot with a replacement the client never sent (the suggest widget's item) has
    /// the replaced text and its tree edited and re-parsed to match: tree-sitter's own
    /// incremental parse of the same edit on a string, and a fresh parse where the text parses
    /// without errors (what the context layer would make for want of a tree).
    #[test]
    fn a_snapshot_with_a_replacement_has_the_tree_of_the_replaced_text(
        initial in proptest::collection::vec(piece(), 0..20),
        edits in edits(),
    ) {
        let text = initial.concat();
        let mut doc = Document::new(uri(), "rust", 0, &text, 0);
        let edit = &edits[0];
        let chars = text.chars().count();
        let start = match edit.anchor { 0 => 0, 1 => chars, _ => snap(&text, edit.start.min(chars)) };
        let end = snap(&text, (start + edit.len).min(chars)).max(start);
        let byte = |char_idx| text.char_indices().nth(char_idx).map_or(text.len(), |(b, _)| b);
        let (bs, be) = (byte(start), byte(end));
        let mut replaced = text.clone();
        replaced.replace_range(bs..be, &edit.text);
        let mut oracle = StringTree::new(&text);
        oracle.edit(&text, bs..be, &edit.text, &replaced);
        oracle.reparse(&replaced);

        doc.parse_pending();
        let snapshot = doc.snapshot().replaced(bs..be, &edit.text, Duration::from_secs(60));
        prop_assert_eq!(snapshot.rope.to_string(), replaced.clone());
        let tree = snapshot.tree.expect("re-parsed within the budget");
        prop_assert_eq!(nodes(&tree), nodes(&oracle.tree));
        let fresh = redraft_context::parse_rust(&replaced).unwrap();
        if !fresh.root_node().has_error() {
            prop_assert_eq!(sexp(&tree), sexp(&fresh));
        }
        // Without a tree (not parsed in time, another language), only the text is replaced.
        let mut bare = doc.snapshot();
        bare.tree = None;
        let bare = bare.replaced(bs..be, &edit.text, Duration::from_secs(60));
        prop_assert_eq!(bare.rope.to_string(), replaced);
        prop_assert!(bare.tree.is_none());
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
