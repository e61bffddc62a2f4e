//! Notebooks (`notebookDocument/*`, as VS Code's client sends them for a Jupyter notebook): a
//! cell's suggestion reads the other cells around it, markdown as comments, and follows the
//! cells as they are added, edited, moved, re-kinded, removed and closed. The fake backend shows the prompts.

use serde_json::{json, Value};

use super::backend::{last_prompt, on_fake_backend_in};
use super::client::{
    items, Lsp, NotebookDidChange, NotebookDidClose, NotebookDidOpen, INVALID_PARAMS,
};

const NOTEBOOK: &str = "file:///home/alice/analysis.ipynb";

/// A cell's URI as VS Code spells it: the notebook's path and a fragment naming the cell.
fn cell(n: usize) -> String {
    format!("vscode-notebook-cell:/home/alice/analysis.ipynb#W{n}sZmlsZQ%3D%3D")
}

fn item(n: usize, language: &str, version: i32, text: &str) -> Value {
    json!({"uri": cell(n), "languageId": language, "version": version, "text": text})
}

/// `kind`: 1 markdown, 2 code.
fn entry(n: usize, kind: u8) -> Value {
    json!({"kind": kind, "document": cell(n)})
}

/// A change of the notebook's cells (`cells`, the protocol's `NotebookDocumentCellChange`).
fn change_cells(lsp: &Lsp, version: i32, cells: Value) {
    lsp.notify::<NotebookDidChange>(json!({
        "notebookDocument": {"uri": NOTEBOOK, "version": version},
        "change": {"cells": cells},
    }));
}

/// Types `text` into cell `n` where `at` (line, character) is, through the notebook.
fn type_into(lsp: &Lsp, version: i32, n: usize, at: [u32; 2], text: &str) {
    let position = json!({"line": at[0], "character": at[1]});
    change_cells(
        lsp,
        version,
        json!({"textContent": [{
            "document": {"uri": cell(n), "version": version},
            "changes": [{"range": {"start": position, "end": position}, "text": text}],
        }]}),
    );
}

/// Asks for an inline completion in cell `n` at `character` of its first line; the prompt the
/// backend was sent.
async fn prompt_at(
    lsp: &Lsp,
    seen: &std::sync::Mutex<Vec<Value>>,
    n: usize,
    character: u32,
) -> String {
    lsp.inline(&cell(n), 0, character, true)
        .await
        .answer()
        .await
        .unwrap();
    last_prompt(seen)
}

async fn backed() -> (Lsp, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    on_fake_backend_in("sum(int(r[1]) for r in rows)", Some("file:///home/alice")).await
}

#[tokio::test]
async fn a_cell_is_completed_in_its_place_among_the_notebooks_cells() {
    let (lsp, seen) = backed().await;
    let sync = &lsp.initialize_result["capabilities"]["notebookDocumentSync"];
    assert_eq!(sync, &json!({"notebookSelector": [{"notebook": "*"}]}));
    lsp.notify::<NotebookDidOpen>(json!({
        "notebookDocument": {
            "uri": NOTEBOOK, "notebookType": "jupyter-notebook", "version": 0,
            "cells": [entry(0, 1), entry(1, 2), entry(2, 2), entry(3, 1), entry(4, 2), entry(6, 2)],
        },
        "cellTextDocuments": [
            item(0, "markdown", 1, "# Load the data\n\nRead the CSV."),
            item(1, "python", 1, "import csv\nrows = list(csv.reader(open(\"data.csv\")))"),
            item(2, "python", 1, "total = "),
            item(3, "markdown", 1, "Plot it."),
            item(4, "python", 1, "print(total)\n"),
            // A cell of another language (one the user set to shell) is not this program.
            item(6, "shellscript", 1, "ls -l data.csv\n"),
        ],
    }));
    // Another file open beside the notebook is still offered as one.
    lsp.open(
        "file:///home/alice/helpers.py",
        "python",
        "def load(path):\n    return list(csv.reader(open(path)))\n",
    );

    let answer = lsp
        .inline(&cell(2), 0, 8, true)
        .await
        .answer()
        .await
        .unwrap();
    let texts: Vec<Value> = items(&answer)
        .iter()
        .map(|i| i["insertText"].clone())
        .collect();
    assert_eq!(texts, [json!("sum(int(r[1]) for r in rows)")], "{answer}");
    let prompt = last_prompt(&seen);
    let around = "# # Load the data\n#\n# Read the CSV.\n\n\
                  import csv\nrows = list(csv.reader(open(\"data.csv\")))\n\n\
                  total = <|fim_suffix|>\n\n# Plot it.\n\nprint(total)\n";
    assert!(prompt.contains(around), "{prompt}");
    assert!(prompt.contains("# helpers.py\n"), "{prompt}");
    // The notebook's own cells are no other documents' snippets (those are headed by a name).
    assert!(!prompt.contains("# analysis.ipynb\n"), "{prompt}");
    assert!(!prompt.contains("vscode-notebook-cell"), "{prompt}");
    assert!(!prompt.contains("ls -l"), "{prompt}");

    // A cell added above, and the markdown cell removed.
    change_cells(
        &lsp,
        1,
        json!({"structure": {
            "array": {"start": 2, "deleteCount": 0, "cells": [entry(5, 2)]},
            "didOpen": [item(5, "python", 1, "rows = rows[1:]  # skip the header\n")],
        }}),
    );
    change_cells(
        &lsp,
        2,
        json!({"structure": {
            "array": {"start": 4, "deleteCount": 1},
            "didClose": [{"uri": cell(3)}],
        }}),
    );
    // The cell's own text changes too (the answer for the old one is not asked again).
    type_into(&lsp, 3, 2, [0, 8], " ");
    let prompt = prompt_at(&lsp, &seen, 2, 9).await;
    let around = "\"data.csv\")))\n\nrows = rows[1:]  # skip the header\n\n\
                  total =  <|fim_suffix|>\n\nprint(total)\n";
    assert!(prompt.contains(around), "{prompt}");
    assert!(!prompt.contains("Plot it."), "{prompt}");

    // A code cell made a markdown one (`data`) is read as prose.
    change_cells(&lsp, 4, json!({"data": [entry(4, 1)]}));
    type_into(&lsp, 5, 2, [0, 9], "l");
    let prompt = prompt_at(&lsp, &seen, 2, 10).await;
    assert!(
        prompt.contains("total =  l<|fim_suffix|>\n\n# print(total)\n"),
        "{prompt}"
    );

    // A cell moved below (VS Code's client sends the cells again, opening and closing none),
    // and in the same change another closed and opened again with a new text.
    change_cells(
        &lsp,
        6,
        json!({"structure": {
            "array": {"start": 1, "deleteCount": 3, "cells": [entry(1, 2), entry(2, 2), entry(5, 2)]},
            "didClose": [{"uri": cell(1)}],
            "didOpen": [item(1, "python", 2, "import csv\nimport sys\n")],
        }}),
    );
    type_into(&lsp, 7, 2, [0, 10], "x");
    let prompt = prompt_at(&lsp, &seen, 2, 11).await;
    let around = "# Read the CSV.\n\nimport csv\nimport sys\n\ntotal =  lx<|fim_suffix|>\n\n\
                  rows = rows[1:]  # skip the header\n\n# print(total)\n";
    assert!(prompt.contains(around), "{prompt}");

    // Closed with its cells: nothing is open under their names any more.
    let cells: Vec<Value> = [0, 1, 2, 4, 5, 6].map(|n| json!({"uri": cell(n)})).into();
    lsp.notify::<NotebookDidClose>(json!({
        "notebookDocument": {"uri": NOTEBOOK},
        "cellTextDocuments": cells,
    }));
    let closed = lsp.inline(&cell(2), 0, 10, true).await.answer().await;
    assert_eq!(closed.unwrap_err().code.0, INVALID_PARAMS);
    lsp.shutdown().await;
}

/// A change the server cannot place (past the cells, or of a notebook never opened) is logged
/// and changes nothing; the cells go on being read as they were.
#[tokio::test]
async fn a_change_past_the_cells_is_logged_and_changes_nothing() {
    let (lsp, seen) = backed().await;
    lsp.notify::<NotebookDidOpen>(json!({
        "notebookDocument": {
            "uri": NOTEBOOK, "notebookType": "jupyter-notebook", "version": 0,
            "cells": [entry(1, 2), entry(2, 2)],
        },
        "cellTextDocuments": [
            item(1, "python", 1, "import csv\n"),
            item(2, "python", 1, "total = "),
        ],
    }));
    change_cells(
        &lsp,
        1,
        json!({"structure": {"array": {"start": 1, "deleteCount": 5}}}),
    );
    lsp.wait_for_log(|line| line.contains("replaces cells 1..1+5 of 2"))
        .await;
    lsp.notify::<NotebookDidChange>(json!({
        "notebookDocument": {"uri": "file:///home/alice/other.ipynb", "version": 1},
        "change": {"cells": {"data": [entry(9, 2)]}},
    }));
    lsp.wait_for_log(|line| line.contains("other.ipynb which is not open"))
        .await;
    let prompt = prompt_at(&lsp, &seen, 2, 8).await;
    assert!(
        prompt.contains("import csv\n\ntotal = <|fim_suffix|>"),
        "{prompt}"
    );
    lsp.shutdown().await;
}
