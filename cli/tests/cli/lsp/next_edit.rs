//! Next edits over LSP as Copilot's clients drive them: `textDocument/copilotInlineEdit` after
//! typing (the answer is what `redraft complete --next-edit` suggests for the same document,
//! cursor and history, in any position encoding), the accept command, stale versions, the
//! setting that turns it off, cancellation by typing, and next edits next to inline
//! completions.

use std::time::Duration;

use redraft_context::edit::unified_diff;
use serde_json::{json, Value};

use super::client::{items, ExecuteCommand, Lsp, NotebookDidChange, NotebookDidOpen, Start};

const ROOT: &str = "file:///work/demo";
const URI: &str = "file:///work/demo/src/lib.rs";
/// `URI` as the history names it (relative to the workspace folder).
const PATH: &str = "src/lib.rs";

/// Low effort, the model's own guard turned off (the shipped model rarely suggests an edit
/// small enough to pass it, and these tests need edits to compare) and no precomputing unless
/// a test asks for it.
fn options() -> Value {
    json!({"effort": "low", "logLevel": "debug", "nextEdit": {"maxChange": null, "debounceMs": 0}})
}

/// A document, and a rename typed in it: `typed` inserted after `at` (the cursor ends after it).
/// Non-ASCII text before the cursor on its line, so a position counted in the wrong encoding
/// lands elsewhere.
struct Rename {
    before: &'static str,
    at: &'static str,
    typed: &'static str,
}

const RENAMES: [Rename; 3] = [
    Rename {
        before: "/* é 😀 */ fn area(w: u32, h: u32) -> u32 {\n    let s = w * h;\n    s + w\n}\n",
        at: "(w",
        typed: "idth",
    },
    Rename {
        before: "fn aire_é(w: u32, h: u32) -> u32 {\n    let é = 1;\n    w * h * é\n}\n",
        at: "(w",
        typed: "idth",
    },
    Rename {
        before: "struct Point {\n    x: f64,\n    y: f64,\n}\n\n/// Norme — 😀\nfn norm(p: &Point) -> f64 {\n    (p.x * p.x + p.y * p.y).sqrt()\n}\n",
        at: "(p",
        typed: "oint",
    },
];

impl Rename {
    /// Byte offset of the cursor once the rename is typed, and the text then.
    fn after(&self) -> (usize, String) {
        let at = self.before.find(self.at).unwrap() + self.at.len();
        let mut text = self.before.to_string();
        text.insert_str(at, self.typed);
        (at + self.typed.len(), text)
    }
}

/// Columns of `text` in `encoding`.
fn width(text: &str, encoding: &str) -> u32 {
    let n = match encoding {
        "utf-8" => text.len(),
        "utf-16" => text.encode_utf16().count(),
        _ => text.chars().count(),
    };
    n as u32
}

/// The LSP position of byte `at` of `text` (lines split at `\n`; the fixtures have no `\r`).
fn position(text: &str, at: usize, encoding: &str) -> (u32, u32) {
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() as u32,
        width(&before[line_start..], encoding),
    )
}

/// The byte offset of an LSP position (the oracle, written without the server's code).
fn offset(text: &str, position: &Value, encoding: &str) -> usize {
    let line = position["line"].as_u64().unwrap() as usize;
    let character = position["character"].as_u64().unwrap() as u32;
    let line_start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
    let rest = &text[line_start..];
    let content = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let mut used = 0;
    for (i, c) in content.char_indices() {
        if used >= character {
            return line_start + i;
        }
        used += width(c.encode_utf8(&mut [0; 4]), encoding);
    }
    line_start + content.len()
}

/// `text` with the answer's edits applied as a client applies them.
fn apply_lsp(text: &str, edits: &[Value], encoding: &str) -> String {
    let mut text = text.to_string();
    let mut ranges: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            (
                offset(&text, &e["range"]["start"], encoding),
                offset(&text, &e["range"]["end"], encoding),
                e["text"].as_str().unwrap(),
            )
        })
        .collect();
    ranges.sort_by_key(|r| std::cmp::Reverse(r.0));
    for (start, end, new) in ranges {
        text.replace_range(start..end, new);
    }
    text
}

/// `redraft complete --next-edit --json` for the same question: the text with the cursor, the
/// file's name and the rename as a unified diff; the text with its edits applied.
fn command_line_answer(rename: &Rename) -> String {
    let (cursor, text) = rename.after();
    let edits = command_line_edits(&text, cursor, PATH, rename.before);
    apply(&text, edits)
}

/// The edits `redraft complete --next-edit --json` suggests for the Rust `text` at `cursor`, the
/// file `path` having been `before` it: (start, end, new text).
fn command_line_edits(
    text: &str,
    cursor: usize,
    path: &str,
    before: &str,
) -> Vec<(usize, usize, String)> {
    let request = json!({
        "text": text,
        "cursor": cursor,
        "path": path,
        "language": "rust",
        "history": unified_diff(path, before, text, 3),
    });
    let args = [
        "complete",
        "--next-edit",
        "--stdin-json",
        "--json",
        "--effort",
        "low",
        "--max-change",
        "1000000",
    ];
    let answer = super::cli::json_ok(&super::cli::redraft(&args, &request.to_string()));
    assert_eq!(answer["history_edits"], json!(1), "{answer}");
    answer["edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["start"].as_u64().unwrap() as usize,
                e["end"].as_u64().unwrap() as usize,
                e["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `text` with `edits` (byte ranges, not overlapping) applied.
fn apply(text: &str, mut edits: Vec<(usize, usize, String)>) -> String {
    let mut applied = text.to_string();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    for (start, end, new) in edits {
        applied.replace_range(start..end, &new);
    }
    applied
}

async fn server(encoding: &'static str, options: Value) -> Lsp {
    Lsp::start(Start {
        options,
        encodings: Some(vec![encoding]),
        root: Some(ROOT),
        ..Start::default()
    })
    .await
}

/// A UTF-16 server that pauses 100 ms after every denoising step, so that a test acts while a
/// job runs.
async fn slow_server(options: Value) -> Lsp {
    stepping_server(options, 100).await
}

/// [`slow_server`] with steps of `step_delay_ms`.
async fn stepping_server(options: Value, step_delay_ms: u64) -> Lsp {
    Lsp::start(Start {
        options,
        encodings: Some(vec!["utf-16"]),
        root: Some(ROOT),
        step_delay_ms: Some(step_delay_ms),
        ..Start::default()
    })
    .await
}

/// Opens the rename's document on `lsp` and types the rename a character at a time; the last
/// version.
fn type_rename(lsp: &Lsp, rename: &Rename, encoding: &str) -> i32 {
    lsp.open(URI, "rust", rename.before);
    let mut text = rename.before.to_string();
    let mut at = text.find(rename.at).unwrap() + rename.at.len();
    let mut version = 0;
    for c in rename.typed.chars() {
        let (line, character) = position(&text, at, encoding);
        version += 1;
        lsp.change(
            URI,
            version,
            [[line, character], [line, character]],
            c.encode_utf8(&mut [0; 4]),
        );
        text.insert(at, c);
        at += c.len_utf8();
    }
    version
}

/// A rename after which the command line suggests an edit (which rename depends on the
/// shipped model), and the text that edit leaves.
fn a_rename_with_an_edit() -> (&'static Rename, String) {
    for rename in &RENAMES {
        let answer = command_line_answer(rename);
        if answer != rename.after().1 {
            return (rename, answer);
        }
    }
    panic!("the shipped model suggests no edit after any of the renames (even without the guard)");
}

/// The edits of a `copilotInlineEdit` answer, checked for shape.
fn edits(answer: &Value, version: i32) -> Vec<Value> {
    edits_of(answer, URI, version)
}

/// [`edits`] of the document `uri`.
fn edits_of(answer: &Value, uri: &str, version: i32) -> Vec<Value> {
    let edits = answer["edits"]
        .as_array()
        .unwrap_or_else(|| panic!("not a copilotInlineEdit answer: {answer}"));
    assert!(edits.len() <= 1, "one suggestion at most: {answer}");
    for edit in edits {
        assert_eq!(
            edit["textDocument"],
            json!({"uri": uri, "version": version}),
            "{edit}"
        );
        assert_eq!(
            edit["command"]["command"],
            json!("redraft.didAcceptNextEdit")
        );
        assert!(edit["command"]["arguments"][0].is_string(), "{edit}");
    }
    edits.clone()
}

#[tokio::test]
async fn a_next_edit_is_what_the_command_line_suggests_in_every_encoding() {
    let (rename, expected) = a_rename_with_an_edit();
    let (cursor, text) = rename.after();
    for encoding in ["utf-16", "utf-8", "utf-32"] {
        let lsp = server(encoding, options()).await;
        assert_eq!(
            lsp.initialize_result["capabilities"]["executeCommandProvider"]["commands"],
            json!(["redraft.didAcceptNextEdit"])
        );
        let version = type_rename(&lsp, rename, encoding);
        let (line, character) = position(&text, cursor, encoding);
        let answer = lsp
            .next_edit(URI, version, line, character)
            .await
            .answer()
            .await
            .unwrap();
        let edits = edits(&answer, version);
        assert_eq!(edits.len(), 1, "{encoding}: {answer}");
        assert_eq!(
            apply_lsp(&text, &edits, encoding),
            expected,
            "{encoding}: {answer}"
        );
        // The model saw the typed rename: one edit of src/lib.rs in its history.
        lsp.wait_for_log(|m| m.contains("next edit over lines") && m.contains("history 1 edit(s)"))
            .await;
        lsp.shutdown().await;
    }
}

/// In a notebook the cell is read in its place among the others: the next edit is what the
/// command line suggests for the notebook's code as one text (the markdown cell a comment, the
/// history the cell's rename, named by the notebook), in the cell's own positions. (The rename
/// is far enough inside the last cell that the region, which a cell's next edit is held to,
/// and the history's context lines are the cell's both ways.)
const NOTEBOOK_RENAME: Rename = Rename {
    before: "struct Point {\n    x: f64,\n    y: f64,\n}\n\n/// Norme — 😀\nfn norm(p: &Point) -> f64 {\n    (p.x * p.x + p.y * p.y).sqrt()\n}\n\nfn origin() -> Point {\n    Point { x: 0.0, y: 0.0 }\n}\n\nfn unit() -> Point {\n    Point { x: 1.0, y: 0.0 }\n}\n\nfn diagonal() -> Point {\n    Point { x: 1.0, y: 1.0 }\n}\n",
    at: "(p",
    typed: "oint",
};

#[tokio::test]
async fn a_next_edit_in_a_notebook_cell_is_the_command_lines_for_the_whole_notebook() {
    let rename = &NOTEBOOK_RENAME;
    let (cursor, text) = rename.after();
    let cell =
        |n: usize| format!("vscode-notebook-cell:/work/demo/analysis.ipynb#W{n}sZmlsZQ%3D%3D");
    let main =
        "fn main() {\n    let p = Point { x: 3.0, y: 4.0 };\n    println!(\"{}\", norm(&p));\n}";
    let lsp = server("utf-16", options()).await;
    lsp.notify::<NotebookDidOpen>(json!({
        "notebookDocument": {
            "uri": "file:///work/demo/analysis.ipynb", "notebookType": "jupyter-notebook",
            "version": 0,
            "cells": [
                {"kind": 2, "document": cell(0)},
                {"kind": 1, "document": cell(1)},
                {"kind": 2, "document": cell(2)},
            ],
        },
        "cellTextDocuments": [
            {"uri": cell(0), "languageId": "rust", "version": 0, "text": main},
            {"uri": cell(1), "languageId": "markdown", "version": 0, "text": "The norm of a point."},
            {"uri": cell(2), "languageId": "rust", "version": 0, "text": rename.before},
        ],
    }));
    let mut typed = rename.before.to_string();
    let mut at = typed.find(rename.at).unwrap() + rename.at.len();
    let mut version = 0;
    for c in rename.typed.chars() {
        let (line, character) = position(&typed, at, "utf-16");
        let place = json!({"line": line, "character": character});
        version += 1;
        lsp.notify::<NotebookDidChange>(json!({
            "notebookDocument": {"uri": "file:///work/demo/analysis.ipynb", "version": version},
            "change": {"cells": {"textContent": [{
                "document": {"uri": cell(2), "version": version},
                "changes": [{"range": {"start": place, "end": place}, "text": c.to_string()}],
            }]}},
        }));
        typed.insert(at, c);
        at += c.len_utf8();
    }
    assert_eq!((typed.as_str(), at), (text.as_str(), cursor));

    let (line, character) = position(&text, cursor, "utf-16");
    let answer = lsp
        .next_edit(&cell(2), version, line, character)
        .await
        .answer()
        .await
        .unwrap();
    let before = format!("{main}\n\n// The norm of a point.\n\n");
    let suggested = command_line_edits(
        &format!("{before}{text}"),
        before.len() + cursor,
        "analysis.ipynb",
        &format!("{before}{}", rename.before),
    );
    let in_cell: Vec<(usize, usize, String)> = suggested
        .into_iter()
        .map(|(start, end, new)| (start - before.len(), end - before.len(), new))
        .collect();
    let expected = apply(&text, in_cell);
    assert_ne!(
        expected, text,
        "the shipped model suggests no edit here: pick another case"
    );
    assert_eq!(
        apply_lsp(&text, &edits_of(&answer, &cell(2), version), "utf-16"),
        expected,
        "{answer}"
    );
    lsp.wait_for_log(|m| m.contains("next edit over lines") && m.contains("history 1 edit(s)"))
        .await;
    lsp.shutdown().await;
}

/// The runtime keeps a cache per document between jobs (completions and next edits apart), and
/// a next edit's first pass over its kept cache is exact: asked at every keystroke of the rename
/// (a completion among them), and again for the same text, the answer is still the command
/// line's, which runs on a fresh cache.
#[tokio::test]
async fn a_next_edit_from_the_documents_kept_cache_is_what_the_command_line_suggests() {
    let (rename, expected) = a_rename_with_an_edit();
    let (cursor, text) = rename.after();
    let lsp = server("utf-16", options()).await;
    lsp.open(URI, "rust", rename.before);
    let mut typed = rename.before.to_string();
    let mut at = typed.find(rename.at).unwrap() + rename.at.len();
    let mut version = 0;
    for c in rename.typed.chars() {
        let (line, character) = position(&typed, at, "utf-16");
        version += 1;
        lsp.change(
            URI,
            version,
            [[line, character], [line, character]],
            c.encode_utf8(&mut [0; 4]),
        );
        typed.insert(at, c);
        at += c.len_utf8();
        let (line, character) = position(&typed, at, "utf-16");
        if version == 1 {
            lsp.inline(URI, line, character, true)
                .await
                .answer()
                .await
                .unwrap();
        }
        lsp.next_edit(URI, version, line, character)
            .await
            .answer()
            .await
            .unwrap();
    }
    assert_eq!((typed.as_str(), at), (text.as_str(), cursor));
    let (line, character) = position(&text, cursor, "utf-16");
    for round in 0..3 {
        if round > 0 {
            // Other settings: the finished job is forgotten, and the same text asked again.
            lsp.notify::<super::client::DidChangeConfiguration>(
                json!({"settings": {"candidates": round + 1}}),
            );
        }
        let answer = lsp
            .next_edit(URI, version, line, character)
            .await
            .answer()
            .await
            .unwrap();
        let edits = edits(&answer, version);
        assert_eq!(edits.len(), 1, "round {round}: {answer}");
        assert_eq!(
            apply_lsp(&text, &edits, "utf-16"),
            expected,
            "round {round}: {answer}"
        );
    }
    // Computed three times: while typing, and once per settings change.
    let computed = format!("{URI} v{version} @{cursor}: next edit over lines");
    let mut logged = 0;
    for _ in 0..600 {
        logged = lsp
            .received("window/logMessage")
            .iter()
            .filter(|m| m["message"].as_str().unwrap().starts_with(&computed))
            .count();
        if logged >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(logged, 3, "{computed}");
    lsp.shutdown().await;
}

#[tokio::test]
async fn an_accepted_next_edit_is_recorded_and_the_next_one_precomputed() {
    let (rename, expected) = a_rename_with_an_edit();
    let (cursor, text) = rename.after();
    let lsp = server("utf-16", options()).await;
    let version = type_rename(&lsp, rename, "utf-16");
    let (line, character) = position(&text, cursor, "utf-16");
    let answer = lsp
        .next_edit(URI, version, line, character)
        .await
        .answer()
        .await
        .unwrap();
    let edit = edits(&answer, version).remove(0);
    let command = &edit["command"];
    let id = command["arguments"][0].as_str().unwrap().to_string();
    // The client shows it, applies it, then runs its command (Copilot's order).
    lsp.notify::<super::client::DidShowInlineEdit>(json!({"item": {"command": command}}));
    lsp.wait_for_log(|m| m == format!("next edit \"{id}\" shown"))
        .await;
    let (start, end) = (&edit["range"]["start"], &edit["range"]["end"]);
    let range = |p: &Value| {
        [
            p["line"].as_u64().unwrap() as u32,
            p["character"].as_u64().unwrap() as u32,
        ]
    };
    lsp.change(
        URI,
        version + 1,
        [range(start), range(end)],
        edit["text"].as_str().unwrap(),
    );
    let ran = lsp
        .send::<ExecuteCommand>(
            json!({"command": command["command"], "arguments": command["arguments"]}),
        )
        .await
        .answer()
        .await
        .unwrap();
    assert_eq!(ran, Value::Null);
    // The history took the change as the accepted suggestion, and the server said so.
    lsp.wait_for_log(|m| m.contains(&format!("the change applied next edit {id} (accepted)")))
        .await;
    lsp.wait_for_log(|m| m == format!("next edit {id} accepted in {URI}"))
        .await;
    lsp.wait_for_log(|m| m.contains("next edit precomputed (after an accepted suggestion)"))
        .await;
    // A request where the edit left the cursor is answered by the precomputed job.
    let applied = apply_lsp(&text, std::slice::from_ref(&edit), "utf-16");
    assert_eq!(applied, expected);
    let end_of_edit = offset(&text, start, "utf-16") + edit["text"].as_str().unwrap().len();
    let (line, character) = position(&applied, end_of_edit, "utf-16");
    let answer = lsp
        .next_edit(URI, version + 1, line, character)
        .await
        .answer()
        .await
        .unwrap();
    edits(&answer, version + 1);
    lsp.wait_for_log(|m| m.contains("the request joins the"))
        .await;
    lsp.shutdown().await;
}

#[tokio::test]
async fn stale_versions_and_the_setting_off_get_no_edits() {
    let (rename, _) = a_rename_with_an_edit();
    let (cursor, text) = rename.after();
    let lsp = server("utf-16", options()).await;
    let version = type_rename(&lsp, rename, "utf-16");
    let (line, character) = position(&text, cursor, "utf-16");
    for stale in [version - 1, version + 1] {
        let answer = lsp
            .next_edit(URI, stale, line, character)
            .await
            .answer()
            .await
            .unwrap();
        assert_eq!(answer, json!({"edits": []}), "version {stale} of {version}");
    }
    lsp.wait_for_log(|m| m.contains(&format!("the document is at {version}: no edits")))
        .await;

    // Off: no edits, and nothing computed (a completion queued after it, in another document so
    // that it shows nowhere near this one's edits, finds the worker idle).
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"nextEdit": false}}));
    let answer = lsp
        .next_edit(URI, version, line, character)
        .await
        .answer()
        .await
        .unwrap();
    assert_eq!(answer, json!({"edits": []}));
    let other = "file:///work/demo/src/other.rs";
    lsp.open(other, "rust", "fn main() {\n    let x = \n}\n");
    lsp.inline(other, 1, 12, false)
        .await
        .answer()
        .await
        .unwrap();
    let computed: Vec<Value> = lsp
        .received("window/logMessage")
        .into_iter()
        .filter(|m| {
            m["message"]
                .as_str()
                .unwrap()
                .contains("next edit over lines")
        })
        .collect();
    assert!(computed.is_empty(), "{computed:?}");
    // On again: answered.
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"nextEdit": true}}));
    let answer = lsp
        .next_edit(URI, version, line, character)
        .await
        .answer()
        .await
        .unwrap();
    assert_eq!(edits(&answer, version).len(), 1, "{answer}");
    lsp.shutdown().await;
}

#[tokio::test]
async fn typing_cancels_a_running_next_edit_at_its_next_step() {
    let (rename, _) = a_rename_with_an_edit();
    let (cursor, text) = rename.after();
    let lsp = slow_server(
        json!({"effort": "high", "streamSteps": true, "logLevel": "debug",
                                 "nextEdit": {"maxChange": null, "debounceMs": 0}}),
    )
    .await;
    let version = type_rename(&lsp, rename, "utf-16");
    let (line, character) = position(&text, cursor, "utf-16");
    let drafts = |version: i32| {
        lsp.received("redraft/nextEditDraftStep")
            .into_iter()
            .filter(|d| d["textDocument"]["version"] == json!(version))
            .collect::<Vec<_>>()
    };
    // Uncancelled, the request takes this many steps; its drafts come on their own method.
    let full = lsp
        .next_edit(URI, version, line, character)
        .await
        .answer()
        .await;
    assert!(full.is_ok(), "{full:?}");
    let full_steps = drafts(version).len();
    assert!(
        full_steps >= 3,
        "the slow settings need several steps ({full_steps})"
    );
    assert!(
        lsp.received("redraft/draftStep").is_empty(),
        "a next edit's drafts are not an inline completion's"
    );

    // A keystroke (so the next request is not the finished job's), then one mid-run.
    lsp.change(
        URI,
        version + 1,
        [[line, character], [line, character]],
        "s",
    );
    let running = lsp.next_edit(URI, version + 1, line, character + 1).await;
    lsp.wait_for("redraft/nextEditDraftStep", |d| {
        d["textDocument"]["version"] == json!(version + 1)
    })
    .await;
    lsp.change(
        URI,
        version + 2,
        [[line, character], [line, character + 1]],
        "",
    );
    let answer = running.answer().await.unwrap();
    assert_eq!(answer, json!({"edits": []}), "a stale answer is no edit");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let steps = drafts(version + 1).len();
    assert!(
        steps < full_steps,
        "{steps} of {full_steps} steps ran despite the edit"
    );
    // The stream ends with a draft that has nothing masked, so a preview comes down.
    let closing = lsp
        .wait_for("redraft/nextEditDraftStep", |d| {
            d["textDocument"]["version"] == json!(version + 1) && d["masked"] == json!(0)
        })
        .await;
    assert_eq!(closing["draft"], json!(""), "{closing}");
    lsp.shutdown().await;
}

#[tokio::test]
async fn inline_completions_and_next_edits_asked_together_both_answer() {
    let (rename, _) = a_rename_with_an_edit();
    let (cursor, text) = rename.after();
    // Precomputing on, as in an editor: it makes way for the inline completion's job.
    let lsp = server(
        "utf-16",
        json!({"effort": "low", "maxTokens": 12, "logLevel": "debug", "nextEdit": {"maxChange": null, "debounceMs": 50}}),
    )
    .await;
    let version = type_rename(&lsp, rename, "utf-16");
    let (line, character) = position(&text, cursor, "utf-16");
    let inline = lsp.inline(URI, line, character, true).await;
    let next = lsp.next_edit(URI, version, line, character).await;
    let (inline, next) = (inline.answer().await.unwrap(), next.answer().await.unwrap());
    let shown = items(&inline);
    let next = edits(&next, version);
    // Whichever came first, the rule holds from then on: a next edit touching the line an
    // inline completion shows on is not shown.
    if !shown.is_empty() {
        let again = lsp
            .next_edit(URI, version, line, character)
            .await
            .answer()
            .await
            .unwrap();
        for edit in edits(&again, version) {
            let (start, end) = (
                edit["range"]["start"]["line"].as_u64().unwrap(),
                edit["range"]["end"]["line"].as_u64().unwrap(),
            );
            assert!(
                !(start..=end).contains(&u64::from(line)),
                "{edit} shown next to {shown:?}"
            );
        }
    }
    assert!(next.len() <= 1);
    lsp.shutdown().await;
}

/// A slow server (`slow_server`) precomputing next edits 50 ms into a pause, `rename` typed,
/// its next edit's precompute started; the last version.
async fn precomputing(rename: &Rename) -> (Lsp, i32) {
    let lsp = slow_server(json!({"effort": "high", "logLevel": "debug",
                                 "nextEdit": {"maxChange": null, "debounceMs": 50}}))
    .await;
    let version = type_rename(&lsp, rename, "utf-16");
    lsp.wait_for_log(|m| m.contains(&format!("{URI} v{version}: next edit precomputed")))
        .await;
    (lsp, version)
}

/// An inline completion asked for in another document, opened for it.
async fn inline_elsewhere(lsp: &Lsp) -> super::client::Pending {
    let other = "file:///work/demo/src/other.rs";
    lsp.open(other, "rust", "fn main() {\n    let total = \n}\n");
    lsp.inline(other, 1, 16, true).await
}

/// A next edit precomputed in a pause in one document outlives an inline completion asked for
/// in another: the completion's job goes first (the precompute, running, makes way for it on
/// the model and runs again after it), and the precomputed edit is ready afterwards instead of
/// thrown away.
#[tokio::test]
async fn a_precomputed_next_edit_makes_way_for_a_completion_elsewhere_and_finishes_after_it() {
    let (lsp, version) = precomputing(&RENAMES[0]).await;
    // Nothing else is queued: the precompute runs at once; let it be past its first step.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let ready = format!("{URI} v{version}: precomputed next edit ready");
    let is_ready = |lsp: &Lsp| {
        lsp.received("window/logMessage")
            .iter()
            .any(|m| m["message"].as_str().unwrap_or("").contains(&ready))
    };
    let inline = inline_elsewhere(&lsp).await.answer().await;
    assert!(inline.is_ok(), "{inline:?}");
    assert!(!is_ready(&lsp), "the completion waited for the precompute");
    lsp.wait_for_log(|m| m.contains(&ready)).await;
    lsp.shutdown().await;
}

/// Once a request joins a precomputed next edit, someone waits for it: it no longer makes way
/// for other documents' requests, and is answered before an inline completion asked for in
/// another document after the join (the join raises the job's flag in the runtime).
#[tokio::test]
async fn a_precomputed_next_edit_a_request_joined_goes_on_before_a_completion_elsewhere() {
    let rename = &RENAMES[0];
    let (cursor, text) = rename.after();
    let (lsp, version) = precomputing(rename).await;
    let (line, character) = position(&text, cursor, "utf-16");
    let next = lsp.next_edit(URI, version, line, character).await;
    lsp.wait_for_log(|m| {
        m.contains(&format!(
            "{URI} v{version}: the request joins the running next-edit job"
        ))
    })
    .await;
    let inline = inline_elsewhere(&lsp).await;
    let timed = |pending: super::client::Pending| async move {
        let answer = pending.answer().await;
        (std::time::Instant::now(), answer)
    };
    let ((next_at, next), (inline_at, inline)) = tokio::join!(timed(next), timed(inline));
    assert!(next.is_ok() && inline.is_ok(), "{next:?} {inline:?}");
    assert!(
        next_at < inline_at,
        "the joined next edit made way for the completion"
    );
    lsp.shutdown().await;
}

/// The client asks for a next edit at another cursor than where the typing ended (an
/// auto-closed bracket, a click or an arrow key within the pause) before the server's own
/// pause (`nextEdit.debounceMs`) is over: the precompute for the end of the typing comes while
/// the request's job runs, and must not replace it (that cancelled it: no edits).
#[tokio::test]
async fn a_precompute_leaves_a_request_at_another_cursor_to_finish() {
    let rename = &RENAMES[0];
    let (cursor, text) = rename.after();
    // Steps slow enough that the pause is over while the request's job runs.
    let lsp = stepping_server(
        json!({"effort": "high", "logLevel": "debug",
                        "nextEdit": {"maxChange": null, "debounceMs": 1000}}),
        250,
    )
    .await;
    let version = type_rename(&lsp, rename, "utf-16");
    // One character to the left of where the typing ended.
    let asked = cursor - 1;
    let (line, character) = position(&text, asked, "utf-16");
    let answer = lsp
        .next_edit(URI, version, line, character)
        .await
        .answer()
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    // The request's own job ran to its end (cancelled, it logs nothing)...
    lsp.wait_for_log(|m| m.contains(&format!("{URI} v{version} @{asked}: next edit over lines")))
        .await;
    // ...while the pause ended.
    lsp.wait_for_log(|m| {
        m.contains(&format!(
            "{URI} v{version}: a request waits for the next-edit job: not precomputed"
        ))
    })
    .await;
    lsp.shutdown().await;
}

/// A request joins a precomputed next edit and is cancelled: nobody waits for the job again, so
/// it makes way for a completion asked for in another document, as before the request came.
#[tokio::test]
async fn a_precomputed_next_edit_whose_request_left_makes_way_again() {
    let rename = &RENAMES[0];
    let (cursor, text) = rename.after();
    let (lsp, version) = precomputing(rename).await;
    // Let it be past its first step.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (line, character) = position(&text, cursor, "utf-16");
    let next = lsp.next_edit(URI, version, line, character).await;
    lsp.wait_for_log(|m| {
        m.contains(&format!(
            "{URI} v{version}: the request joins the running next-edit job"
        ))
    })
    .await;
    lsp.cancel(next.id);
    let cancelled = next.answer().await.unwrap_err();
    assert_eq!(cancelled.code.0, super::client::CANCELLED);
    let ready = format!("{URI} v{version}: precomputed next edit ready");
    let inline = inline_elsewhere(&lsp).await.answer().await;
    assert!(inline.is_ok(), "{inline:?}");
    let was_ready = lsp
        .received("window/logMessage")
        .iter()
        .any(|m| m["message"].as_str().unwrap_or("").contains(&ready));
    assert!(!was_ready, "the completion waited for the precompute");
    lsp.wait_for_log(|m| m.contains(&ready)).await;
    lsp.shutdown().await;
}

/// A change of many open documents at once (a workspace-wide replace) keeps a few next edits
/// precomputing, each new one stopping the oldest, not one job per document in the runtime's
/// queue of 64, which completions share: a completion asked for after it is answered, not
/// refused as "queue full" (the stopped jobs' places are freed when a job finds it full).
#[tokio::test]
async fn precomputes_for_many_changed_documents_leave_room_for_a_completion() {
    let lsp = slow_server(json!({"effort": "high", "logLevel": "debug",
                                 "nextEdit": {"maxChange": null, "debounceMs": 50}}))
    .await;
    let before = RENAMES[0].before;
    for i in 0..80 {
        let uri = format!("file:///work/demo/src/f{i}.rs");
        lsp.open(&uri, "rust", before);
        lsp.change(&uri, 1, [[0, 17], [0, 17]], "_x");
    }
    lsp.wait_for_log(|m| m.contains("next edit precomputed (after an edit pause)"))
        .await;
    // Every pause is over.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = "file:///work/demo/src/other.rs";
    let answer = inline_elsewhere(&lsp).await.answer().await;
    assert!(answer.is_ok(), "{answer:?}");
    let done = lsp
        .wait_for_log(|m| {
            m.contains(&format!("{other} v0 @28: canvas"))
                || m.contains(&format!("completion in {other} failed"))
        })
        .await;
    assert!(done.contains(": canvas"), "{done}");
    let logged = |what: &str| {
        lsp.received("window/logMessage")
            .iter()
            .filter(|m| m["message"].as_str().unwrap_or("").contains(what))
            .count()
    };
    let (started, stopped) = (
        logged("next edit precomputed"),
        logged("its precomputed next edit stopped for"),
    );
    assert!(
        started - stopped <= 4,
        "{started} precomputes started, {stopped} stopped: more than 4 at once"
    );
    lsp.shutdown().await;
}

/// A job that ended in an error (here a precompute refused by a full queue) is not the answer
/// for the text and cursor it was for: a request there later computes again.
#[tokio::test]
async fn a_next_edit_job_that_failed_is_not_joined() {
    let rename = &RENAMES[0];
    let (cursor, text) = rename.after();
    // Steps of a second, so that the completion running holds the queue full for a while.
    let lsp = stepping_server(
        json!({"effort": "low", "logLevel": "debug",
                        "nextEdit": {"maxChange": null, "debounceMs": 100}}),
        1000,
    )
    .await;
    // One completion running, 64 queued, the rest refused.
    let mut completions = Vec::new();
    for i in 0..70 {
        let uri = format!("file:///work/demo/src/f{i}.rs");
        lsp.open(&uri, "rust", "fn main() {\n    let total = \n}\n");
        completions.push(lsp.inline(&uri, 1, 16, true).await);
    }
    lsp.wait_for_log(|m| m.contains("jobs already wait for the model"))
        .await;
    let version = type_rename(&lsp, rename, "utf-16");
    lsp.wait_for_log(|m| {
        m.contains(&format!("{URI} v{version}: precomputed next edit failed"))
            && m.contains("jobs already wait")
    })
    .await;
    for completion in &completions {
        lsp.cancel(completion.id);
    }
    drop(completions);
    // The queue still holds the cancelled completions until the loop reaches them, or until a
    // job finds it full: then they are answered at once and make room.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (line, character) = position(&text, cursor, "utf-16");
    let answer = lsp
        .next_edit(URI, version, line, character)
        .await
        .answer()
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    let done = lsp
        .wait_for_log(|m| {
            m.contains(&format!("{URI} v{version} @{cursor}: next edit over lines"))
                || m.contains(&format!("next edit in {URI} failed"))
        })
        .await;
    assert!(done.contains("next edit over lines"), "{done}");
    lsp.shutdown().await;
}
