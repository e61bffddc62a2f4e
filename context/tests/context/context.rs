//! The context layer's behaviour: windows, canvas sizes, neighbour snippets, post-processing.
//! Fixtures mark the cursor with `$0` (as rust-analyzer's do).

use crate::plan_for_text;
use proptest::prelude::*;
use redraft_context::{
    finish, parse_rust, plan, Budget, ByteEstimate, CanvasPlan, Language, Neighbour, Plan, Source,
    TokenCounter, Unit,
};

const ROOMY: Budget = Budget {
    prefix_tokens: 4000,
    suffix_tokens: 1000,
    neighbour_tokens: 0,
    max_canvas_tokens: 64,
};

fn split(fixture: &str) -> (String, usize) {
    let cursor = fixture.find("$0").expect("fixture has a $0 cursor");
    (fixture.replacen("$0", "", 1), cursor)
}

fn plan_for(fixture: &str, language: Language, budget: Budget) -> Plan {
    let (text, cursor) = split(fixture);
    let source = Source {
        text: &text,
        cursor,
        language,
        tree: None,
    };
    plan(&source, &budget, &ByteEstimate, &[])
}

fn rust(fixture: &str) -> Plan {
    plan_for(fixture, Language::Rust, ROOMY)
}

#[test]
fn canvas_size_follows_the_syntax_around_the_cursor() {
    let cases = [
        ("fn f() {\n    let x = $0\n}\n", Unit::RestOfLine),
        ("fn f() {\n    call(a, $0)\n}\n", Unit::RestOfLine),
        ("fn f() {\n    g();\n    $0\n    h();\n}\n", Unit::Line),
        ("fn f() {\n    g();\n$0    h();\n}\n", Unit::Line),
        ("fn f() {\n    $0\n}\n", Unit::Block),
        ("fn f() {\n    $0", Unit::Block),
        (
            "fn f(x: u8) {\n    match x {\n        $0\n    }\n}\n",
            Unit::Block,
        ),
        ("impl S {\n    $0\n}\n", Unit::Block),
    ];
    for (fixture, unit) in cases {
        let plan = rust(fixture);
        assert_eq!(
            plan.canvas.unit, unit,
            "{fixture:?}: {}",
            plan.canvas.reason
        );
    }
    let sizes: Vec<usize> = [
        "fn f() {\n    let x = $0\n}\n",
        "fn f() {\n    g();\n    $0\n    h();\n}\n",
        "fn f() {\n    $0\n}\n",
    ]
    .iter()
    .map(|fixture| rust(fixture).canvas.tokens)
    .collect();
    assert!(
        sizes[0] < sizes[1] && sizes[1] < sizes[2],
        "rest of line < line < block: {sizes:?}"
    );
}

#[test]
fn plain_text_and_python_use_indentation_for_empty_bodies() {
    let python = plan_for(
        "def f(x):\n    $0\n\ndef g():\n    pass\n",
        Language::Python,
        ROOMY,
    );
    assert_eq!(python.canvas.unit, Unit::Block, "{}", python.canvas.reason);
    let filled = plan_for("def f(x):\n    $0\n    return x\n", Language::Python, ROOMY);
    assert_eq!(filled.canvas.unit, Unit::Line, "{}", filled.canvas.reason);
    let braces = plan_for("function f() {\n  $0\n}\n", Language::Plain, ROOMY);
    assert_eq!(braces.canvas.unit, Unit::Block);
}

#[test]
fn the_reason_explains_the_choice_and_the_cap() {
    let plan = rust("fn f() {\n    let total = $0\n}\n");
    assert!(
        plan.canvas.reason.contains("let total ="),
        "{}",
        plan.canvas.reason
    );
    let capped = plan_for(
        "fn f() {\n    $0\n}\n",
        Language::Rust,
        Budget {
            max_canvas_tokens: 5,
            ..ROOMY
        },
    );
    assert_eq!(capped.canvas.tokens, 5);
    assert!(
        capped.canvas.reason.contains("capped"),
        "{}",
        capped.canvas.reason
    );
}

#[test]
fn a_small_document_is_sent_whole() {
    let (text, cursor) = split("use std::fmt;\n\nfn f() {\n    let x = $0;\n}\n");
    let plan = rust("use std::fmt;\n\nfn f() {\n    let x = $0;\n}\n");
    assert_eq!(plan.prefix, text[..cursor]);
    assert_eq!(plan.suffix, text[cursor..]);
    assert_eq!((plan.prefix_start, plan.suffix_end), (0, text.len()));
    assert_eq!(plan.line_prefix, "    let x = ");
    assert_eq!(plan.line_suffix, ";");
}

/// A file of many small functions whose bodies span several lines, cursor in the middle.
fn long_file() -> (String, usize) {
    let mut text = String::new();
    for i in 0..200 {
        text += &format!(
            "fn f{i}(a: u32) -> u32 {{\n    let b = g(\n        a,\n        {i},\n    );\n    b + 1\n}}\n\n"
        );
    }
    let cursor = text.find("fn f100").unwrap()
        + "fn f100(a: u32) -> u32 {\n    let b = g(\n        a,\n        100,\n    );\n    b + "
            .len();
    (text, cursor)
}

#[test]
fn windows_fit_the_budget_and_cut_at_items_or_statements() {
    let (text, cursor) = long_file();
    let tree = parse_rust(&text).unwrap();
    for prefix_tokens in [20, 37, 55, 90, 140] {
        let budget = Budget {
            prefix_tokens,
            suffix_tokens: prefix_tokens / 3,
            neighbour_tokens: 0,
            max_canvas_tokens: 16,
        };
        let source = Source {
            text: &text,
            cursor,
            language: Language::Rust,
            tree: Some(&tree),
        };
        let plan = plan(&source, &budget, &ByteEstimate, &[]);
        assert!(plan.prefix_tokens <= prefix_tokens);
        // Per-line counts round up, so the whole window counts no more than their sum.
        assert!(ByteEstimate.count_tokens(&plan.prefix) <= plan.prefix_tokens);
        assert!(plan.suffix_tokens <= budget.suffix_tokens);
        assert!(plan.prefix.ends_with("    b + ") && plan.suffix.starts_with("1\n}"));
        let first = text[plan.prefix_start..]
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap()
            .trim_start();
        assert!(
            first.starts_with("fn ") || first.starts_with("let ") || first.starts_with("b + 1"),
            "prefix of {prefix_tokens} tokens starts mid-statement: {first:?}"
        );
        let last = text[..plan.suffix_end].lines().last().unwrap().trim_end();
        assert!(
            last.ends_with('}') || last.ends_with(';') || last.is_empty() || last.ends_with("+ 1"),
            "suffix ends mid-statement: {last:?}"
        );
    }
}

#[test]
fn plain_text_windows_cut_at_any_line() {
    let (text, cursor) = long_file();
    let budget = Budget {
        prefix_tokens: 37,
        suffix_tokens: 12,
        neighbour_tokens: 0,
        max_canvas_tokens: 16,
    };
    let source = Source {
        text: &text,
        cursor,
        language: Language::Plain,
        tree: None,
    };
    let plan = plan(&source, &budget, &ByteEstimate, &[]);
    assert!(plan.prefix_start == 0 || text.as_bytes()[plan.prefix_start - 1] == b'\n');
    // With no syntax the window takes every line that fits, so it is at least as long.
    let rust = plan_for_text(&text, cursor, Language::Rust, budget);
    assert!(plan.prefix.len() >= rust.prefix.len());
}

#[test]
fn unused_budget_on_one_side_goes_to_the_other() {
    let (text, _) = long_file();
    let near_top = text.find("a,").unwrap();
    let budget = Budget {
        prefix_tokens: 90,
        suffix_tokens: 30,
        neighbour_tokens: 0,
        max_canvas_tokens: 16,
    };
    let top = plan_for_text(&text, near_top, Language::Rust, budget);
    assert_eq!(top.prefix_start, 0);
    assert!(
        top.suffix_tokens > 30,
        "suffix got the spare: {}",
        top.suffix_tokens
    );
    let near_end = text.len() - 5;
    let bottom = plan_for_text(&text, near_end, Language::Rust, budget);
    assert_eq!(bottom.suffix_end, text.len());
    assert!(
        bottom.prefix_tokens > 90,
        "prefix got the spare: {}",
        bottom.prefix_tokens
    );
}

#[test]
fn huge_lines_and_odd_cursors_stay_bounded() {
    let line = "x".repeat(5 << 20);
    let text = format!("{line}\n{line}");
    let plan = plan_for_text(&text, line.len() / 2, Language::Rust, ROOMY);
    assert!(plan.prefix.len() <= 4000 * 4 && plan.suffix.len() <= 1000 * 4);
    assert!(!plan.prefix.is_empty() && !plan.suffix.is_empty());

    let text = "fn é() { ü }";
    let inside_e = text.find('é').unwrap() + 1;
    let plan = plan_for_text(text, inside_e, Language::Rust, ROOMY);
    assert_eq!(plan.prefix, "fn ");
    let plan = plan_for_text(text, text.len() + 10, Language::Rust, ROOMY);
    assert_eq!((plan.prefix.as_str(), plan.suffix.as_str()), (text, ""));
}

#[test]
fn budget_for_positions_leaves_room_for_the_canvas() {
    let small = Budget::for_positions(256, 48);
    assert_eq!(small.neighbour_tokens, 0);
    assert_eq!(small.prefix_tokens + small.suffix_tokens + 48 + 1, 256);
    assert!(small.prefix_tokens > 2 * small.suffix_tokens);
    let large = Budget::for_positions(8192, 64);
    assert!(large.neighbour_tokens > 0);
    assert_eq!(
        large.prefix_tokens + large.suffix_tokens + large.neighbour_tokens + 64 + 1,
        8192
    );
    assert_eq!(Budget::for_positions(8, 100).max_canvas_tokens, 7);
}

/// [`ByteEstimate`]'s counts, noting the longest text it counted; within a budget it counts
/// only the first 8 bytes a token of the budget allows (as the engine's tokenizer encodes a
/// head of a text: `Tokenizer::count_up_to`).
#[derive(Default)]
pub(crate) struct Bounded {
    pub(crate) longest_counted: std::cell::Cell<usize>,
}

impl TokenCounter for Bounded {
    fn count_tokens(&self, text: &str) -> usize {
        self.longest_counted
            .set(self.longest_counted.get().max(text.len()));
        ByteEstimate.count_tokens(text)
    }

    fn count_within(&self, text: &str, budget: usize) -> usize {
        let mut head = text.len().min(budget.saturating_add(1) * 8);
        while !text.is_char_boundary(head) {
            head -= 1;
        }
        self.count_tokens(&text[..head])
    }
}

/// A megabyte line of minified code around the cursor, and megabyte lines beside it: the
/// windows are planned as for any long line (cut inside the cursor's, the others left out)
/// without counting more than the budget's worth of bytes of any of them, and agree with the
/// plan of a counter that counts everything.
#[test]
fn megabyte_lines_are_never_counted_whole() {
    let unit = "function b(c){return c+1};var x=[1,2,3].map(function(d){return d*2});";
    let line = unit.repeat(1 << 20 >> 6);
    let text = format!("{line}\n{line}{line}\n{line}\n");
    let cursor = line.len() + 1 + line.len();
    let budget = Budget::for_positions(1024, 64);
    let source = Source {
        text: &text,
        cursor,
        language: Language::Plain,
        tree: None,
    };
    let counter = Bounded::default();
    let bounded = plan(&source, &budget, &counter, &[]);
    // A side's budget with the other side's spare share, a token's 8 bytes each.
    let most = (budget.prefix_tokens + budget.suffix_tokens + 1) * 8;
    assert!(
        counter.longest_counted.get() <= most,
        "counted {} bytes at once",
        counter.longest_counted.get()
    );
    let whole = plan(&source, &budget, &ByteEstimate, &[]);
    assert_eq!(
        (bounded.prefix, bounded.suffix),
        (whole.prefix.clone(), whole.suffix.clone())
    );
    assert!(!whole.prefix.is_empty() && !whole.suffix.is_empty());
    assert!(whole.prefix.len() < 8 * budget.prefix_tokens);
}

fn neighbour(path: &str, text: &str, edited_at: u64) -> Neighbour {
    Neighbour {
        path: path.into(),
        text: text.into(),
        edited_at,
    }
}

#[test]
fn related_open_documents_are_added_most_recent_nearest() {
    let (text, cursor) = split(
        "use crate::shapes::Circle;\n\nfn area_sum(circles: &[Circle]) -> f64 {\n    circles.iter().map(|circle| circle.$0).sum()\n}\n",
    );
    let shapes = neighbour(
        "src/shapes.rs",
        "pub struct Circle {\n    pub radius: f64,\n}\n\nimpl Circle {\n    pub fn area(&self) -> f64 {\n        std::f64::consts::PI * self.radius * self.radius\n    }\n}\n",
        2,
    );
    let older = neighbour(
        "src/circles.rs",
        "fn circles_total(circles: &[Circle]) -> usize {\n    circles.len()\n}\n",
        1,
    );
    let unrelated = neighbour(
        "src/net.rs",
        "fn connect(host: &str, port: u16) -> TcpStream {\n    TcpStream::connect((host, port)).unwrap()\n}\n",
        3,
    );
    let source = Source {
        text: &text,
        cursor,
        language: Language::Rust,
        tree: None,
    };
    let budget = Budget {
        neighbour_tokens: 400,
        ..ROOMY
    };
    let plan = plan(&source, &budget, &ByteEstimate, &[older, unrelated, shapes]);
    assert!(plan.prefix.ends_with(&text[..cursor]));
    let snippets = &plan.prefix[..plan.snippets_len];
    assert!(
        snippets.contains("// src/shapes.rs\npub struct Circle"),
        "{snippets}"
    );
    assert!(
        !snippets.contains("net.rs"),
        "unrelated document added: {snippets}"
    );
    let older_at = snippets
        .find("src/circles.rs")
        .expect("older related document");
    assert!(
        older_at < snippets.find("src/shapes.rs").unwrap(),
        "most recent nearest"
    );
    assert!(plan.neighbour_tokens <= 400 && plan.neighbour_tokens > 0);

    let none = plan_for_text(&text, cursor, Language::Rust, ROOMY);
    assert_eq!(none.snippets_len, 0);
}

// --- post-processing ---------------------------------------------------------------------

fn finished(fixture: &str, middle: &str) -> Option<String> {
    finish(middle, &rust(fixture))
}

#[test]
fn whitespace_only_middles_are_no_suggestion() {
    assert_eq!(finished("fn f() {\n    let x = $0\n}\n", "  \n\t"), None);
    assert_eq!(finished("fn f() {\n    let x = $0\n}\n", ""), None);
}

#[test]
fn line_completions_stop_at_the_end_of_their_unit() {
    let fixture = "fn f() {\n    let x = $0\n}\n";
    assert_eq!(
        finished(fixture, "g(1);\n    let y = 2;\n").as_deref(),
        Some("g(1);")
    );
    assert_eq!(
        finished(
            fixture,
            "vec![\n        1,\n        2,\n    ];\n    junk();"
        )
        .as_deref(),
        Some("vec![\n        1,\n        2,\n    ];"),
        "a bracket opened in the middle keeps the line going"
    );
    let blank = "fn f() {\n    g();\n    $0\n}\n";
    assert_eq!(
        finished(blank, "x += 1;\n}\n\nfn other() {}").as_deref(),
        Some("x += 1;")
    );
    assert_eq!(
        finished(blank, "\n    x += 1;\n    y();").as_deref(),
        Some("\n    x += 1;"),
        "a leading blank line does not end the unit"
    );
}

#[test]
fn block_completions_stop_before_the_body_closes_or_dedents() {
    let fixture = "fn f() -> u32 {\n    $0\n}\n";
    assert_eq!(
        finished(fixture, "let a = 1;\n    a + 1\n}\n\nfn junk() {}").as_deref(),
        Some("let a = 1;\n    a + 1")
    );
    let python = plan_for("def f(x):\n    $0\n", Language::Python, ROOMY);
    assert_eq!(
        finish("y = x * 2\n    return y\n\ndef h():\n    pass\n", &python).as_deref(),
        Some("y = x * 2\n    return y")
    );
}

/// A block whose middle holds a multi-line raw string: the string's lines, at whatever
/// indentation, are not the code's dedent.
#[test]
fn a_block_is_not_cut_inside_a_multi_line_string() {
    let fixture = "#[test]\nfn strike() {\n    $0\n}\n";
    let middle = "let original = r##\"~~Hi~~ Hello,\n~there~ world!\n\"##;\n    assert_eq!(render(original), \"<p>\");\n";
    assert_eq!(
        finished(fixture, middle).as_deref(),
        Some(middle.trim_end()),
    );
}

/// A Python block written inside a docstring still ends where it dedents: the plan says the
/// cursor's line starts inside the string, so the middle's quotes close it.
#[test]
fn a_python_block_in_a_docstring_ends_at_its_dedent() {
    let plan = plan_for(
        "def f(x):\n    \"\"\"Returns:\n    $0",
        Language::Python,
        ROOMY,
    );
    assert_eq!(plan.canvas.unit, Unit::Block);
    let middle = "x doubled.\n    \"\"\"\n    return 2 * x\n\n\ndef g():\n    pass\n";
    assert_eq!(
        finish(middle, &plan).as_deref(),
        Some("x doubled.\n    \"\"\"\n    return 2 * x")
    );
}

fn python(fixture: &str) -> Plan {
    plan_for(fixture, Language::Python, ROOMY)
}

/// A docstring the middle writes into a Python body, its lines at column 0: they are the
/// string's text, not a dedent, and the code after it still ends at its own dedent.
#[test]
fn a_docstring_written_at_column_0_is_no_dedent() {
    let fixture =
        "class Shape:\n    def area(self):\n        $0\n\n    def name(self):\n        return 1\n";
    for quotes in ["\"\"\"", "'''"] {
        let plan = python(fixture);
        assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
        let body = format!(
            "{quotes}The area.\n\nFor example:\n>>> Shape().area()\n0\n{quotes}\n        return 0"
        );
        let middle = format!("{body}\n\n    def perimeter(self):\n        return 0\n");
        assert_eq!(finish(&middle, &plan).as_deref(), Some(body.as_str()));
    }
}

/// The cursor inside an open docstring: the middle's quotes close it (they open nothing), its
/// lines at column 0 are the string's, and the block ends at the code's real dedent.
#[test]
fn a_middle_closing_the_docstring_at_the_cursor_ends_at_the_real_dedent() {
    for quotes in ["\"\"\"", "'''"] {
        let plan = python(&format!(
            "class Shape:\n    def area(self):\n        {quotes}The area, for example:\n        $0\n\n    def name(self):\n        return 1\n"
        ));
        assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
        assert_eq!(plan.line_start_mode.map(|mode| mode.in_code()), Some(false));
        let body =
            format!(">>> Shape(2, 3).area()\n6\n        {quotes}\n        return self.w * self.h");
        let middle = format!("{body}\n\n    def perimeter(self):\n        return 0\n");
        assert_eq!(finish(&middle, &plan).as_deref(), Some(body.as_str()));
    }
}

/// A line completion inside a docstring finishes its line: the string was open before the
/// middle, so the middle leaves nothing open at that line end (and the sampler may stop).
#[test]
fn a_line_completion_inside_a_docstring_ends_with_its_line() {
    let plan = python("def f(x):\n    \"\"\"Doubles x.\n\n    $0\n    \"\"\"\n    return 2 * x\n");
    assert_eq!(plan.canvas.unit, Unit::Line, "{}", plan.canvas.reason);
    assert_eq!(
        finish("Raises if x isn't a number.\n    More.\n", &plan).as_deref(),
        Some("Raises if x isn't a number.")
    );
    assert!(redraft_context::decided(
        "Raises if x isn't a number.\n",
        &plan
    ));
}

/// The cursor between quotes the editor closed (`"""|"""`), a middle that writes the closing
/// quotes too: all of them are the suffix's, not the last one or two (`Doc.""` + `"""` is the
/// docstring `Doc.` then an empty string). The cut ends where a token of the suffix ends.
#[test]
fn a_middle_repeating_the_closing_quotes_drops_all_of_them() {
    for quotes in ["\"\"\"", "'''"] {
        let plan = python(&format!(
            "def f(x):\n    {quotes}$0{quotes}\n    return x\n"
        ));
        assert_eq!(plan.canvas.unit, Unit::RestOfLine, "{}", plan.canvas.reason);
        assert_eq!(
            finish(&format!("Returns x.{quotes}\n    return x\n"), &plan).as_deref(),
            Some("Returns x."),
            "{quotes}"
        );
    }
    let comment = rust("fn f() {\n    /* $0*/\n}\n");
    assert_eq!(
        finish("note */", &comment).as_deref(),
        Some("note "),
        "a comment's closer likewise (the blank before it is the line's)"
    );
}

/// The cursor inside a Rust block comment: a quote in the comment's text opens no string, so
/// the body's closer still ends the block.
#[test]
fn a_middle_closing_the_block_comment_at_the_cursor_ends_at_the_closer() {
    let plan =
        rust("fn area(w: u32, h: u32) -> u32 {\n    /* Why the product, for example:\n    $0\n}\n");
    assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
    let middle = "a 6\" tile is 36 square inches.\n    */\n    w * h\n}\n\nfn junk() {}\n";
    assert_eq!(
        finish(middle, &plan).as_deref(),
        Some("a 6\" tile is 36 square inches.\n    */\n    w * h")
    );
}

/// The cursor at the start of a line inside a multi-line Rust string: the middle's quote
/// closes it, and the body's closer ends the block.
#[test]
fn a_middle_closing_the_rust_string_at_the_cursor_ends_at_the_closer() {
    let plan =
        rust("fn usage() -> &'static str {\n    \"Usage: redraft [OPTIONS]\nOptions:\n$0\n}\n");
    assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
    let middle = "  -h, --help  Print help (and exit)\n\"\n}\n\nfn junk() {}\n";
    assert_eq!(
        finish(middle, &plan).as_deref(),
        Some("  -h, --help  Print help (and exit)\n\"")
    );
}

/// More than the bracket scan's reach before the cursor's line: the plan cannot tell whether
/// the line starts in a string, and `finish` takes every line for code, ending a block at the
/// first line left of it (early rather than never).
#[test]
fn a_line_start_past_the_scans_reach_takes_every_line_for_code() {
    let filler = "x = 1\n".repeat((300 << 10) / 6);
    let (text, cursor) = split(&format!("{filler}def f():\n    $0\n"));
    let plan = plan_for_text(&text, cursor, Language::Python, ROOMY);
    assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
    assert_eq!(plan.line_start_mode, None);
    assert_eq!(
        finish("\"\"\"Doc.\n\nMore.\n\"\"\"\n    return 1\n", &plan).as_deref(),
        Some("\"\"\"Doc.")
    );
    let near = plan_for("def f():\n    $0\n", Language::Python, ROOMY);
    assert_eq!(near.line_start_mode.map(|mode| mode.in_code()), Some(true));
}

/// Past the scan's reach in Rust, the block still ends at its closer, not at a raw string's
/// line at column 0 (Rust's closers end blocks, so the scanner's guess of code is kept).
#[test]
fn a_rust_line_start_past_the_scans_reach_keeps_raw_strings_whole() {
    let filler = "const X: u8 = 1;\n".repeat((300 << 10) / 17);
    let (text, cursor) = split(&format!(
        "{filler}fn usage() -> &'static str {{\n    $0\n}}\n"
    ));
    let plan = plan_for_text(&text, cursor, Language::Rust, ROOMY);
    assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
    assert_eq!(plan.line_start_mode, None);
    let body = "let s = r#\"Usage:\nredraft [OPTIONS]\n\"#;\n    s";
    let middle = format!("{body}\n}}\n\nfn junk() {{}}\n");
    assert_eq!(finish(&middle, &plan).as_deref(), Some(body));
}

/// Plain text (JavaScript, Go, Markdown, ...) is scanned with Rust's rules, which a stray
/// quote would leave inside a string for the rest of the file: no line-start mode is trusted
/// there, so the brackets still end the block.
#[test]
fn a_stray_quote_in_plain_text_does_not_hide_the_brackets() {
    let plan = plan_for(
        "A 5\" screen.\nfunction f() {\n    $0\n}\n",
        Language::Plain,
        ROOMY,
    );
    assert_eq!(plan.canvas.unit, Unit::Block, "{}", plan.canvas.reason);
    assert_eq!(plan.line_start_mode, None);
    assert_eq!(
        finish("a();\n    b();\n}\n\nfunction junk() {}\n", &plan).as_deref(),
        Some("a();\n    b();")
    );
}

/// A Python string continued with a backslash goes on to the next line with CRLF line endings
/// as with LF: what it holds is no bracket.
#[test]
fn a_continued_python_string_reads_the_same_with_crlf() {
    for nl in ["\n", "\r\n"] {
        let plan = plan_for(
            &format!("def f():{nl}    s = 'a \\{nl}(b'{nl}    x = g(1,{nl}$0{nl}    return x{nl}"),
            Language::Python,
            ROOMY,
        );
        assert_eq!(plan.open_brackets, "(", "line endings {nl:?}");
    }
}

/// A comment nested inside the block comment the cursor is in is the middle's own: the line
/// that opens it is not finished while it is open.
#[test]
fn a_comment_nested_in_the_cursors_comment_is_the_middles() {
    let plan = rust("fn f() {\n    /* outer\n    g($0);\n}\n");
    assert_eq!(plan.line_start_mode.map(|mode| mode.in_code()), Some(false));
    let middle = "see /* nested\n more */ text\n";
    assert_eq!(
        finish(middle, &plan).as_deref(),
        Some("see /* nested\n more */ text")
    );
}

/// A middle written after a line's indentation, with code after the cursor, that wrote no line
/// break is part of that line: no break is added after it. One that wrote a break, or one at
/// the start of the line, is a line inserted before the code and keeps it.
#[test]
fn a_middle_inside_a_line_gets_no_line_break_added() {
    let fixture = "fn f() -> u32 {\n    $0.expect(\"overflow\")\n}\n";
    assert_eq!(
        finished(fixture, "self.checked_add(rhs)").as_deref(),
        Some("self.checked_add(rhs)")
    );
    assert_eq!(
        finished(fixture, "let v = g();\n    ").as_deref(),
        Some("let v = g();\n    "),
        "the code after the cursor keeps its indentation"
    );
}

#[test]
fn repeats_of_the_suffix_go_when_that_balances_brackets() {
    assert_eq!(
        finished("fn f() {\n    call(a, $0)\n}\n", "b, c)").as_deref(),
        Some("b, c")
    );
    assert_eq!(
        finished("fn f() {\n    outer($0)\n}\n", "inner()").as_deref(),
        Some("inner()"),
        "the middle's own closer stays"
    );
    assert_eq!(
        finished("fn f() {\n    let x = $0;\n}\n", "5;").as_deref(),
        Some("5")
    );
    assert_eq!(
        finished("fn f() {\n    let v = [$0];\n}\n", "1, 2];").as_deref(),
        Some("1, 2")
    );
    let lines = plan_for(
        "def f(x):\n    y = x\n$0    return y\n",
        Language::Python,
        ROOMY,
    );
    assert_eq!(lines.canvas.unit, Unit::Line);
    assert_eq!(
        finish("    y += 1\n", &lines).as_deref(),
        Some("    y += 1\n"),
        "a line inserted before existing text keeps its line break"
    );
    assert_eq!(
        finish("    return y", &lines),
        None,
        "repeating the next line is no suggestion"
    );
    let mut fixed = lines.clone();
    fixed.canvas = CanvasPlan::fixed(12);
    assert_eq!(
        finish("    y += 1\n    return y\n", &fixed).as_deref(),
        Some("    y += 1\n"),
        "fixed-length canvases still drop repeated suffix lines"
    );
    assert_eq!(
        finish("    y += 1\n    z = 2\n", &fixed).as_deref(),
        Some("    y += 1\n    z = 2\n"),
        "fixed-length canvases keep everything else, whitespace included"
    );
}

/// Ruby and Lua close their blocks with `end`, which no bracket count weighs: a middle's `end`
/// at another column than the suffix's next `end` closes another block and stays; one at the
/// same column repeats it and goes (the line's text decides where a column is not known, and
/// for any line but a bare word). Judged by text alone before, every `end` before an `end`
/// was dropped (1.9% of the whole lines cut from Debian's `libruby3.1`).
#[test]
fn an_end_one_level_out_is_no_repeat_of_the_suffixs_end() {
    let ruby = plan_for("def f\n  if x\n    y\n$0end\n", Language::Ruby, ROOMY);
    assert_eq!(finish("  end\n", &ruby).as_deref(), Some("  end\n"));
    assert_eq!(finish("end\n", &ruby), None, "the same line repeated");
    let after_indent = plan_for("def f\n  if x\n    y\n  $0\nend\n", Language::Ruby, ROOMY);
    assert_eq!(finish("end", &after_indent).as_deref(), Some("end"));
    let lua = plan_for(
        "function f(x)\n  for i = 1, x do\n    g(i)\n$0end\n",
        Language::Lua,
        ROOMY,
    );
    assert_eq!(finish("  end\n", &lua).as_deref(), Some("  end\n"));
    assert_eq!(finish("end\n", &lua), None, "the same line repeated");
    // After the cursor line's indentation, a middle repeating that line's code is a repeat: the
    // code after the cursor keeps its place after the inserted line, at the same column.
    for (fixture, language, middle) in [
        (
            "def f\n  if x\n    y\n  $0end\nend\n",
            Language::Ruby,
            "end\n",
        ),
        (
            "function f(x)\n  for i = 1, x do\n    g(i)\n  $0end\nend\n",
            Language::Lua,
            "end\n",
        ),
        (
            "fn f() {\n    g();\n    $0h();\n}\n",
            Language::Rust,
            "h();\n",
        ),
        ("fn f() {\n\tg();\n\t$0h();\n}\n", Language::Rust, "h();\n"),
        (
            "def f(x):\n    y = x\n    $0return y\n",
            Language::Python,
            "return y\n",
        ),
        (
            "def f(x):\r\n    y = x\r\n    $0return y\r\n",
            Language::Python,
            "return y\r\n",
        ),
        ("a:\n  b: 1\n  $0c: 2\n", Language::Yaml, "c: 2\n"),
        ("a:\n  b: 1\n  $0c: 2\n", Language::Yaml, "c: 2\n  "),
    ] {
        let plan = plan_for(fixture, language, ROOMY);
        assert_eq!(finish(middle, &plan), None, "{fixture:?} {middle:?}");
    }
    // A line of code repeated at another column is a repeat still (a model that wrote the
    // next line without its indentation); only a bare word's column tells lines apart.
    let arm = rust("fn f(x: R) {\n    match x {\n        $0return Err(e);\n    }\n}\n");
    assert_eq!(
        finish("Err(e) => {\nreturn Err(e);\n", &arm),
        finish("Err(e) => {\n", &arm)
    );
    // Where brackets weigh, they still decide: a `}` that closes what the suffix closes goes,
    // at whatever column.
    let rust = rust("fn f() {\n    g();\n$0}\n");
    assert_eq!(finish("    }\n", &rust), None);
}

/// A line of a shell `case` ends at its pattern's `)` no longer: that `)` closes nothing the
/// suffix closes (the function's `}` is still open after it).
#[test]
fn a_case_arm_in_a_shell_function_is_kept_whole() {
    let plan = plan_for("f() {\n  case $1 in\n$0  esac\n}\n", Language::Shell, ROOMY);
    assert_eq!(
        finish("    start) run ;;\n", &plan).as_deref(),
        Some("    start) run ;;\n")
    );
}

/// A middle ending in a repeat of the suffix's closing line (`self.0` then a second `    }`)
/// loses it where the suffix window ends before the text does too: the brackets the text closes
/// after the window are open at its end, and the count there rewarded the extra `}` (Rust,
/// 150 files of the machine's crates: 6,770 of 6,901 such repeats dropped before, 6,853 now).
#[test]
fn a_repeated_closing_line_goes_where_the_suffix_window_ends_early() {
    let mut text = String::from("impl S {\n    fn f(&self) -> u32 {\n    $0}\n");
    for n in 0..40 {
        text.push_str(&format!(
            "\n    fn g{n}(&self) -> u32 {{\n        {n}\n    }}\n"
        ));
    }
    text.push_str("}\n");
    let short = Budget {
        prefix_tokens: 32,
        suffix_tokens: 32,
        ..ROOMY
    };
    let truncated = plan_for(&text, Language::Rust, short);
    assert!(
        !truncated.suffix.ends_with("}\n}\n"),
        "the window ends before the text"
    );
    assert_eq!(
        finish("self.0\n    }\n", &truncated).as_deref(),
        Some("self.0\n    ")
    );
}

/// A closer the document without the middle lacks, before the suffix's own closer one level
/// out, is the middle's and stays: a repeat of the suffix's closing line is a copy of it, at its
/// column. (A first version of the window-end rule above dropped these, on a fixed canvas
/// too.) And a repeat within a line is cut at a word's end: `else` before `else` is no `els`.
#[test]
fn a_closer_the_document_lacks_is_kept_before_the_suffixs_closer() {
    let line = rust("fn main() {\n    if x {\n        foo();\n$0}\n");
    assert_eq!(finish("    }\n", &line).as_deref(), Some("    }\n"));
    let crlf = rust("fn main() {\r\n    if x {\r\n        foo();\r\n$0}\r\n");
    assert_eq!(finish("    }\r\n", &crlf).as_deref(), Some("    }\r\n"));
    let mut fixed = rust("fn main() {\n    if x {\n$0}\n");
    fixed.canvas = CanvasPlan::fixed(16);
    assert_eq!(
        finish("        foo();\n    }\n", &fixed).as_deref(),
        Some("        foo();\n    }\n")
    );
    let python = plan_for(
        "d = {\n    \"a\": {\n        \"b\": 1,\n$0}\n",
        Language::Python,
        ROOMY,
    );
    assert_eq!(finish("    }\n", &python).as_deref(), Some("    }\n"));
    for language in [Language::Ruby, Language::Lua] {
        let plan = plan_for("if a then\n  b\n$0else\n  c\nend\n", language, ROOMY);
        assert_eq!(finish("else\n", &plan), None, "{language:?}");
    }
}

#[test]
fn crlf_documents_get_crlf_suggestions() {
    let plan = rust("fn f() {\r\n    $0\r\n}\r\n");
    assert_eq!(
        finish("let a = 1;\n    a", &plan).as_deref(),
        Some("let a = 1;\r\n    a")
    );
}

/// An LF document gets an LF suggestion whatever the middle's line endings: a model that
/// learned from CRLF files must not leave `\r`s in it.
#[test]
fn lf_documents_get_lf_suggestions() {
    let plan = rust("fn f() {\n    $0\n}\n");
    assert_eq!(
        finish("let a = 1;\r\n    a\r\n}\r\n", &plan).as_deref(),
        Some("let a = 1;\n    a")
    );
    let line = rust("fn f() {\n$0    g();\n}\n");
    assert_eq!(
        finish("    let a = 1;\r\n", &line).as_deref(),
        Some("    let a = 1;\n")
    );
    // With no line break in the document's text to go by, the middle's are kept.
    assert_eq!(
        finish("\r\nfn f() {}\r\n", &rust("$0")).as_deref(),
        Some("\r\nfn f() {}")
    );
}

/// Blanks a middle ends with before code that goes on after the cursor on its line are inside
/// that line: they stay, or two words run together (`let mutx`, `pub asyncfn`). Before a
/// closer or a separator, and at the end of a line, they go.
#[test]
fn blanks_before_the_code_after_the_cursor_stay() {
    assert_eq!(
        finished("fn f() {\n    let $0x = 5;\n}\n", "mut ").as_deref(),
        Some("mut ")
    );
    assert_eq!(
        finished("impl S {\n    pub $0fn f() {}\n}\n", "async ").as_deref(),
        Some("async ")
    );
    assert_eq!(
        finished("impl S {\n    $0fn f() {}\n}\n", "pub ").as_deref(),
        Some("pub "),
        "after the line's indentation"
    );
    assert_eq!(
        finished("fn f() {\n    let y = $0x;\n}\n", "2 * ").as_deref(),
        Some("2 * ")
    );
    assert_eq!(
        finished("fn f() {\n    g($0b);\n}\n", "a, b);").as_deref(),
        Some("a, "),
        "the repeat of the suffix goes, the blank before it stays"
    );
    assert_eq!(
        finished("fn f() {\n    g($0);\n}\n", "a, b ").as_deref(),
        Some("a, b")
    );
    assert_eq!(
        finished("fn f() {\n    let x = $0\n}\n", "1; ").as_deref(),
        Some("1;")
    );
}

/// The document's own line endings decide, not those of the neighbour snippets in front of its
/// prefix: a CRLF file open in another tab leaves an LF document's suggestion LF, and an LF one
/// leaves a CRLF document's CRLF. On the document's first line the suffix decides.
#[test]
fn line_endings_of_a_suggestion_are_the_documents_not_its_neighbours() {
    let with = |fixture: &str, neighbour_text: &str| {
        let (text, cursor) = split(fixture);
        let source = Source {
            text: &text,
            cursor,
            language: Language::Rust,
            tree: None,
        };
        let budget = Budget {
            neighbour_tokens: 400,
            ..ROOMY
        };
        let other = neighbour("src/other.rs", neighbour_text, 1);
        let plan = plan(&source, &budget, &ByteEstimate, &[other]);
        assert!(plan.snippets_len > 0, "the neighbour is shown: {plan:?}");
        plan
    };
    let total = "fn total_price(items: &[Item]) -> u32 {\n    let mut total_price = 0;\n    for item in items {\n        total_price += item.price;\n    }\n    total_price\n}\n";
    let middle = "total_price += item.price;\n        count += 1;";

    let lf = with(
        "fn total_price(items: &[Item]) -> u32 {\n    let mut total_price = 0;\n    for item in items {\n        $0\n    }\n    total_price\n}\n",
        &total.replace('\n', "\r\n"),
    );
    assert_eq!(
        finish(middle, &lf).as_deref(),
        Some("total_price += item.price;\n        count += 1;")
    );

    let crlf = with(
        "fn total_price(items: &[Item]) -> u32 {\r\n    let mut total_price = 0;\r\n    for item in items {\r\n        $0\r\n    }\r\n    total_price\r\n}\r\n",
        total,
    );
    assert_eq!(
        finish(middle, &crlf).as_deref(),
        Some("total_price += item.price;\r\n        count += 1;")
    );

    let first_line = with("fn total_price(items: &[Item]) -> u32 {$0\r\n}\r\n", total);
    assert!(
        !first_line.prefix[first_line.snippets_len..].contains('\n'),
        "{first_line:?}"
    );
    assert_eq!(
        finish("\n    let a = 1;", &first_line).as_deref(),
        Some("\r\n    let a = 1;")
    );
}

/// A long middle whose end repeats the start of a long rest of the line in many ways (a
/// minified array of the same item): each partial repeat is a candidate whose brackets are
/// scanned, so only those within the first bytes of the rest are looked for, and all of it.
/// (Trying every one took seconds for a 100 KB middle on a 100 KB line.)
#[test]
fn a_long_middle_repeating_a_long_line_is_cleaned_in_one_go() {
    let items = "g(1),".repeat(20_000);
    let whole_line = Budget {
        suffix_tokens: 50_000,
        ..ROOMY
    };
    let plan = plan_for(
        &format!("var a = [$0{items}];\n"),
        Language::Plain,
        whole_line,
    );
    assert!(
        plan.suffix.ends_with("];\n"),
        "the suffix holds all of the line"
    );
    let kept = finish(&items, &plan);
    assert!(
        kept.as_ref() == Some(&items),
        "not a repeat of all of the line"
    );
    let repeating = format!("g(0),{items}];");
    assert_eq!(finish(&repeating, &plan).as_deref(), Some("g(0),"));
}

/// A caller's tree may be of more than the text it hands over (the language server's tree of a
/// whole document with a window of it): a body that ends past the text is not read past it.
#[test]
fn a_tree_reaching_past_the_text_plans_without_reading_past_it() {
    let document = "struct S;\nimpl S {\n    fn a() {}\n\n    fn b() {}\n}\n";
    let tree = parse_rust(document).unwrap();
    // The blank line inside the impl body, in a text cut before the body ends.
    let cursor = document.find("\n\n").unwrap() + 1;
    let text = &document[..cursor + 1];
    let source = Source {
        text,
        cursor,
        language: Language::Rust,
        tree: Some(&tree),
    };
    let plan = plan(&source, &ROOMY, &ByteEstimate, &[]);
    assert_eq!(plan.prefix, &text[..cursor]);
    assert_eq!(plan.suffix, "\n");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn plans_are_slices_of_the_document_within_budget(
        text in "[a-z{}();\n é\t\r]{0,400}",
        cursor in 0usize..420,
        prefix_tokens in 0usize..80,
        suffix_tokens in 0usize..40,
    ) {
        let budget = Budget { prefix_tokens, suffix_tokens, neighbour_tokens: 0, max_canvas_tokens: 16 };
        for language in [Language::Rust, Language::Python, Language::Plain] {
            let source = Source { text: &text, cursor, language, tree: None };
            let plan = plan(&source, &budget, &ByteEstimate, &[]);
            let cursor = plan.prefix_start + plan.prefix.len();
            prop_assert!(plan.prefix_start <= cursor && cursor <= plan.suffix_end);
            prop_assert_eq!(&text[plan.prefix_start..cursor], plan.prefix.as_str());
            prop_assert_eq!(&text[cursor..plan.suffix_end], plan.suffix.as_str());
            prop_assert!(plan.prefix_tokens <= prefix_tokens + suffix_tokens);
            prop_assert!(plan.suffix_tokens <= prefix_tokens + suffix_tokens);
            prop_assert!(plan.canvas.tokens >= 1 && plan.canvas.tokens <= 16);
            let middle: String = text.chars().rev().take(30).collect();
            if let Some(done) = finish(&middle, &plan) {
                prop_assert!(!done.trim().is_empty());
            }
        }
    }
}

/// A line of a line or block completion that closes what the suffix closes itself (the last
/// argument written with the call's `)`, a tail expression with the body's `}`): the closer
/// and what follows are the suffix's, the code before it on that line is the middle's.
#[test]
fn code_before_a_closer_the_suffix_has_is_kept() {
    let argument = rust("fn f() {\n    g(\n        a,\n        $0\n    );\n}\n");
    assert_eq!(
        argument.canvas.unit,
        Unit::Line,
        "{}",
        argument.canvas.reason
    );
    assert_eq!(finish("b);\n", &argument).as_deref(), Some("b"));
    assert_eq!(finish("h(b))\n", &argument).as_deref(), Some("h(b)"));
    assert_eq!(
        finish("    );\n", &argument),
        None,
        "a line of nothing but the closer is all the suffix's"
    );
    let body = rust("fn f() -> u32 {\n    $0\n}\n");
    assert_eq!(
        finish("let a = 1;\n    a + 1 }\n\nfn junk() {}\n", &body).as_deref(),
        Some("let a = 1;\n    a + 1")
    );
    let list = python("def f():\n    xs = [\n        1,\n        $0\n    ]\n");
    assert_eq!(finish("2]\n", &list).as_deref(), Some("2"));
}

#[test]
fn closers_the_suffix_lacks_are_kept() {
    let plan = rust("fn f() -> R {\n    let x = g(\n        a,\n$0    x\n}\n");
    assert_eq!(plan.canvas.unit, Unit::Line);
    assert_eq!(
        finish("    )?;\n", &plan).as_deref(),
        Some("    )?;\n"),
        "the call opened above is closed by the middle, not by the suffix"
    );
}

#[test]
fn bracket_context_comes_from_the_document_not_the_window() {
    let tiny = Budget {
        prefix_tokens: 2,
        suffix_tokens: 2,
        neighbour_tokens: 0,
        max_canvas_tokens: 48,
    };
    let plan = plan_for(
        "impl Never {\n    fn f(&self) -> ! {\n$0    }\n}\n",
        Language::Rust,
        tiny,
    );
    assert!(
        !plan.prefix.contains('{'),
        "the window holds no opener: {:?}",
        plan.prefix
    );
    assert_eq!(plan.open_brackets, "{{");
    assert_eq!(
        finish("        match *self {}\n", &plan).as_deref(),
        Some("        match *self {}\n"),
        "the suffix's `}}` closes the fn, not the match"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `decided` is the sampler's stop rule: whenever it says a lead decides the finished
    /// suggestion, every middle that starts with that lead finishes as the lead alone does.
    #[test]
    fn a_decided_lead_finishes_as_every_middle_that_extends_it(
        text in "(fn f\\(x: u8\\) \\{\n|    let y = g\\(x,\n|    if x \\{ |\\}\n|    z|\"a\\{\"|// \\(\n|def h\\(\\):\n|    return \\[\n){1,8}",
        cursor in 0usize..200,
        middle in "(a|b\\(|\\)|\\{|\\}|\\[|\\]|;|\"|//|\n|    |\t| |é|x = 1;\n|\\)\\?;\n){0,24}",
    ) {
        let cursor = (cursor.min(text.len())..=text.len()).find(|&c| text.is_char_boundary(c)).unwrap();
        for language in [Language::Rust, Language::Python, Language::Plain] {
            let plan = plan_for_text(&text, cursor, language, ROOMY);
            let whole = finish(&middle, &plan);
            for (at, _) in middle.char_indices().skip(1) {
                let lead = &middle[..at];
                if redraft_context::decided(lead, &plan) {
                    prop_assert_eq!(finish(lead, &plan), whole.clone(), "lead {:?} of {:?}, {:?}", lead, middle, plan.canvas.unit);
                }
            }
        }
    }
}

/// Pieces of documents that open and close strings and comments in each language's way: raw
/// strings, nested block comments, docstrings, f-strings, char literals beside lifetimes.
fn literal_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "fn f<'a>(x: &'a str) {\n",
            "    let y = g(x,\n",
            "    let s = r#\"(\n",
            "\"#;\n",
            "    /* ( /* nested\n",
            "*/ */\n",
            "    let c = '{';\n",
            "def h():\n",
            "    \"\"\"Doc (\n",
            "    '''\n",
            "    s = f\"{x}\"\n",
            "    return [\n",
            "}\n",
            "\tz",
            "    let é = \"",
            "mut ",
        ]),
        1..10,
    )
    .prop_map(|pieces| pieces.concat())
}

/// Pieces of middles: closers of every kind, line breaks of both kinds, blanks before words.
fn literal_middle() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "a",
            "b(",
            ")",
            "{",
            "}",
            "]",
            ";",
            "\"",
            "'",
            "\"\"\"",
            "'''",
            "\"#",
            "r#\"",
            "*/",
            "/*",
            "//",
            "#",
            "\\",
            "\n",
            "\r\n",
            "    ",
            "\t",
            " ",
            "é",
            "\u{301}",
            "\u{200d}👩",
            "'a ",
            "x = 1;\n",
            ")?;\r\n",
            "pass\n",
        ]),
        0..24,
    )
    .prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The stop rule holds where the cursor or the middle is inside a string or comment, in
    /// LF and CRLF documents alike; and a suggestion has the document's line endings, no lone
    /// `\r` and no `\r` in an LF document, whatever the middle wrote.
    #[test]
    fn a_decided_lead_finishes_alike_in_strings_comments_and_crlf(
        text in literal_text(),
        crlf in any::<bool>(),
        cursor in 0usize..300,
        middle in literal_middle(),
    ) {
        let text = if crlf { text.replace('\n', "\r\n") } else { text };
        let cursor = (cursor.min(text.len())..=text.len()).find(|&c| text.is_char_boundary(c)).unwrap();
        // Not between the two bytes of a line break: no editor position is there.
        let cursor = if text[..cursor].ends_with('\r') { cursor - 1 } else { cursor };
        for language in [Language::Rust, Language::Python, Language::Plain] {
            let plan = plan_for_text(&text, cursor, language, ROOMY);
            let whole = finish(&middle, &plan);
            if let (Some(shown), true) = (&whole, text.contains('\n')) {
                let bare = shown.replace("\r\n", "");
                prop_assert!(!bare.contains('\r'), "a lone CR in {:?}", shown);
                prop_assert!(crlf || !shown.contains('\r'), "CR in an LF document: {:?}", shown);
                prop_assert!(!crlf || !bare.contains('\n'), "LF in a CRLF document: {:?}", shown);
            }
            for (at, _) in middle.char_indices().skip(1) {
                let lead = &middle[..at];
                if redraft_context::decided(lead, &plan) {
                    prop_assert_eq!(finish(lead, &plan), whole.clone(), "lead {:?} of {:?}, {:?}", lead, middle, plan.canvas.unit);
                }
            }
        }
    }
}

/// The stop rule fires on the middles a line completion writes: once their line is done.
#[test]
fn a_finished_line_decides_a_line_completion_and_a_partial_one_does_not() {
    let plan = rust("fn f() {\n    let x = $0\n}\n");
    assert!(!redraft_context::decided("g(1", &plan));
    assert!(!redraft_context::decided("g(1);", &plan));
    assert!(
        !redraft_context::decided("g(1,\n", &plan),
        "the call is still open"
    );
    assert!(redraft_context::decided("g(1);\n", &plan));
    assert!(redraft_context::decided("g(1);\n    let", &plan));
    // A fixed canvas keeps whatever the model writes: nothing decides it early.
    let mut fixed = plan.clone();
    fixed.canvas.unit = Unit::Fixed;
    assert!(!redraft_context::decided("g(1);\n    let y = 2;\n", &fixed));
}
