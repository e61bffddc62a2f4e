use super::*;
use crate::document::{Document, MAX_PARSED_BYTES};
use proptest::prelude::*;
use redraft_context::{plan, Budget, ByteEstimate, Plan, Source};

/// A notebook's cell goes to the context layer in its place among the cells around it,
/// without its tree (which is the cell's alone); a next edit's region is held to the cell's
/// lines, and its answer keeps only what lies inside the cell, in the cell's offsets.
#[test]
fn a_notebook_cell_is_handed_over_among_its_cells_and_answered_inside_it() {
    let uri: tower_lsp_server::ls_types::Uri =
        "vscode-notebook-cell:/t/nb.ipynb#C1".parse().unwrap();
    let text = "let x = 1;\nlet y = x + 1;\nx + ";
    let cell = Document::new(uri, "rust", 0, text, 0).snapshot();
    assert!(cell.tree.is_some());
    let surround = Surround {
        before: "fn f() {}\n\n".into(),
        after: "\nprintln!();\n".into(),
    };
    let cursor = "let x = 1;\nlet y".len();
    let handed = Handed::from(&cell, cursor, Some(&surround));
    assert_eq!(
        handed.text,
        format!("fn f() {{}}\n\n{text}\n\nprintln!();\n")
    );
    assert_eq!(
        &handed.text[..handed.cursor],
        "fn f() {}\n\nlet x = 1;\nlet y"
    );
    assert!(handed.tree.is_none());
    // The region: one line above the cursor's in the cell, one below, whatever the setting.
    let limits = handed.edit_limits(EditLimits::default());
    assert_eq!((limits.lines_above, limits.lines_below), (1, 1));
    let narrow = EditLimits {
        lines_above: 0,
        ..EditLimits::default()
    };
    assert_eq!(handed.edit_limits(narrow).lines_above, 0);

    let place = handed.place;
    let before = surround.before.len();
    let edit = |range: Range<usize>, text: &str| {
        place
            .edit(&range, text)
            .map(|edit| (edit.range, edit.new_text))
    };
    // `x` renamed inside the cell: kept, in the cell's offsets.
    let x = before + "let ".len();
    assert_eq!(edit(x..x + 1, "xs"), Some((4..5, "xs".into())));
    // An insertion at the cell's end is the cell's; an edit of the next cell, or one reaching
    // into the cell before, is not.
    let end = before + text.len();
    assert_eq!(
        edit(end..end, "1;"),
        Some((text.len()..text.len(), "1;".into()))
    );
    assert_eq!(edit(end + 2..end + 3, "p"), None);
    assert_eq!(edit(0..3, "fn"), None);
    assert_eq!(edit(before - 1..before + 2, "le"), None);
    // The cell has no newline at its end and is handed over with one: a line added after its
    // last line is that line added at the cell's end, and a last line rewritten through that
    // newline is rewritten up to the cell's end.
    assert_eq!(
        edit(end + 1..end + 1, "z;\n"),
        Some((text.len()..text.len(), "\nz;".into()))
    );
    let last = before + text.rfind('\n').unwrap() + 1;
    assert_eq!(
        edit(last..end + 1, "x + 2\n"),
        Some((text.len() - 4..text.len(), "x + 2".into()))
    );
    assert_eq!(edit(last..end + 1, "x + 2"), None);
    // A region over several cells is cut to the cell's.
    assert_eq!(place.to_document(&(0..handed.text.len())), 0..text.len());

    // Without a notebook: the document whole, with its tree and the limits as set.
    let alone = Handed::from(&cell, cursor, None);
    assert_eq!(alone.text, text);
    assert_eq!(alone.cursor, cursor);
    assert!(alone.tree.is_some());
    assert_eq!(
        alone.edit_limits(EditLimits::default()),
        EditLimits::default()
    );
    assert_eq!(alone.place.edit(&(4..5), "xs").unwrap().range, 4..5);
    assert_eq!(alone.place.edit(&(0..text.len() + 1), "x"), None);
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
            "\"#", "br\"", "/*", "*/", "//", "#", "\\", "\n", "a", " ", "é", "words ", "`", "--",
            "/",
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
