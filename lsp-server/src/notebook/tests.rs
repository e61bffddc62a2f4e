use std::collections::HashMap;

use tower_lsp_server::ls_types::Uri;

use super::*;

fn uri(n: usize) -> Uri {
    format!("vscode-notebook-cell:/w/nb.ipynb#C{n}")
        .parse()
        .unwrap()
}

fn key(n: usize) -> DocumentKey {
    DocumentKey::of(&uri(n))
}

fn notebook() -> DocumentKey {
    DocumentKey::of(&"file:///w/nb.ipynb".parse().unwrap())
}

/// Open documents for `cells` (language id, text), and a notebook of them in order, each a code
/// cell unless its language is markdown.
fn open(cells: &[(&str, &str)]) -> (Notebooks, HashMap<DocumentKey, Document>) {
    let documents = cells
        .iter()
        .enumerate()
        .map(|(n, (language, text))| (key(n), Document::new(uri(n), language, 1, text, 0)))
        .collect();
    let mut notebooks = Notebooks::default();
    let cells = cells
        .iter()
        .enumerate()
        .map(|(n, (language, _))| Cell {
            key: key(n),
            code: *language != "markdown",
        })
        .collect();
    notebooks
        .apply(NotebookEvent::Open {
            notebook: notebook(),
            cells,
        })
        .unwrap();
    (notebooks, documents)
}

#[test]
fn a_code_cell_sits_among_the_code_and_the_commented_prose_of_the_others() {
    let (notebooks, documents) = open(&[
        ("markdown", "# Data\n\nRead it.\n"),
        ("python", "import csv"),
        ("shellscript", "ls -l\n"),
        ("python", "total = "),
        ("markdown", "  "),
        ("python", "print(total)\n"),
    ]);
    let surround = notebooks.surround(&key(3), &documents).unwrap();
    assert_eq!(surround.before, "# # Data\n#\n# Read it.\n\nimport csv\n\n");
    assert_eq!(surround.after, "\nprint(total)\n");
    assert_eq!(
        surround.wrap("total = "),
        "# # Data\n#\n# Read it.\n\nimport csv\n\ntotal = \n\nprint(total)\n"
    );
    // A markdown cell is no program, and a cell of another language has the prose around it
    // but not this language's code.
    assert_eq!(notebooks.surround(&key(0), &documents), None);
    let shell = notebooks.surround(&key(2), &documents).unwrap();
    assert_eq!(shell.before, "# # Data\n#\n# Read it.\n\n");
    assert_eq!(shell.after, "");
    // A document that is no cell has no surround.
    let file = DocumentKey::of(&"file:///w/a.py".parse().unwrap());
    assert_eq!(notebooks.surround(&file, &documents), None);
}

#[test]
fn a_cell_without_its_last_newline_is_wrapped_with_one() {
    let surround = Surround {
        before: "a = 1\n\n".into(),
        after: "\nb = 2\n".into(),
    };
    assert_eq!(surround.wrap("x"), "a = 1\n\nx\n\nb = 2\n");
    assert_eq!(surround.wrap("x\n"), "a = 1\n\nx\n\nb = 2\n");
    assert_eq!(surround.wrap(""), "a = 1\n\n\nb = 2\n");
    let last = Surround {
        before: "a = 1\n\n".into(),
        after: String::new(),
    };
    assert_eq!(last.wrap("x"), "a = 1\n\nx");
}

#[test]
fn the_nearest_whole_cells_that_fit_are_taken() {
    let big = |c: char| format!("{}\n", c.to_string().repeat(MAX_SURROUND_BYTES / 2 - 100));
    let (a, b, c) = (big('a'), big('b'), big('c'));
    let (notebooks, documents) = open(&[
        ("python", &a),
        ("python", &b),
        ("python", &c),
        ("python", "x = "),
        ("python", &a),
        ("python", &b),
        ("python", &c),
    ]);
    let surround = notebooks.surround(&key(3), &documents).unwrap();
    assert_eq!(surround.before, format!("{b}\n{c}\n"));
    assert_eq!(surround.after, format!("\n{a}\n{b}"));
    assert!(surround.before.len() <= MAX_SURROUND_BYTES);
    assert!(surround.after.len() <= MAX_SURROUND_BYTES);
}

#[test]
fn cells_follow_splices_and_kind_changes() {
    let (mut notebooks, mut documents) = open(&[("python", "a = 1\n"), ("python", "x = ")]);
    assert!(notebooks.together(&key(0), &key(1)));
    documents.insert(key(7), Document::new(uri(7), "markdown", 1, "Why.", 0));
    notebooks
        .apply(NotebookEvent::Splice {
            notebook: notebook(),
            start: 0,
            delete: 1,
            cells: vec![Cell {
                key: key(7),
                code: false,
            }],
        })
        .unwrap();
    assert!(!notebooks.together(&key(0), &key(1)));
    assert!(notebooks.together(&key(7), &key(1)));
    let surround = notebooks.surround(&key(1), &documents).unwrap();
    assert_eq!(surround.before, "# Why.\n\n");
    let kinds = |code| NotebookEvent::Kinds {
        notebook: notebook(),
        cells: vec![Cell { key: key(7), code }],
    };
    assert_eq!(notebooks.apply(kinds(true)), Ok(true));
    // A code cell now, but markdown's own document: not this language's code.
    assert_eq!(notebooks.surround(&key(1), &documents).unwrap().before, "");
    // The same kind again (VS Code sends a cell's data when it runs): no change.
    assert_eq!(notebooks.apply(kinds(true)), Ok(false));
}

#[test]
fn a_change_that_cannot_be_placed_changes_nothing() {
    let (mut notebooks, documents) = open(&[("python", "a = 1\n"), ("python", "x = ")]);
    let past = notebooks.apply(NotebookEvent::Splice {
        notebook: notebook(),
        start: 1,
        delete: usize::MAX,
        cells: Vec::new(),
    });
    assert!(past.unwrap_err().contains("replaces cells 1..1+"));
    let elsewhere = DocumentKey::of(&"file:///w/other.ipynb".parse().unwrap());
    let closed = notebooks.apply(NotebookEvent::Kinds {
        notebook: elsewhere.clone(),
        cells: Vec::new(),
    });
    assert!(closed.unwrap_err().contains("which is not open"));
    assert_eq!(
        notebooks.surround(&key(1), &documents).unwrap().before,
        "a = 1\n\n"
    );
    notebooks
        .apply(NotebookEvent::Close {
            notebook: notebook(),
        })
        .unwrap();
    assert_eq!(notebooks.surround(&key(1), &documents), None);
    assert!(!notebooks.together(&key(0), &key(1)));
}

/// Languages the server does not know are told apart by the client's ids, and their markdown
/// is left out (the server cannot write their comments).
#[test]
fn cells_of_languages_the_server_does_not_know_go_by_their_ids() {
    let (notebooks, documents) = open(&[
        ("julia", "x = 1\n"),
        ("markdown", "Why."),
        ("raw", "not code\n"),
        ("julia", "y = "),
    ]);
    let surround = notebooks.surround(&key(3), &documents).unwrap();
    assert_eq!(surround.before, "x = 1\n\n");
}
