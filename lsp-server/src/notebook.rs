//! Notebooks (LSP 3.17's `notebookDocument/*`): a Jupyter notebook is one program cut into
//! cells, and a suggestion in one cell reads the code of the cells around it as the text before
//! and after its own, as it would read the rest of a file.
//!
//! Each cell's text is an ordinary open document: the server opens, changes and closes it as
//! the client's `textDocument/*` messages would ([`Server::notebook_opened`] and the rest),
//! so history, next edits, type-through and every answer's positions stay the cell's own. The
//! document owner keeps, beside the documents, which cells make up each notebook in order
//! ([`Notebooks`]); a snapshot of a code cell carries the text around it ([`Surround`]), which
//! the inference step wraps the cell's text in for the context layer (a next edit's region is
//! then held to the cell's lines, and its answer to the cell). The same notebook's other cells
//! are not offered again as other documents, though their edits are in a next edit's history;
//! another notebook is offered once, as the code around its most recently edited code cell.
//!
//! Around a cell: the other code cells of its language (as the client names it), each followed
//! by a blank line, and the markdown cells as line comments of that language (a notebook's
//! prose says what the code is for); code cells of another language (one the user set to SQL)
//! are left out, and so is markdown around a language the server does not know. At most
//! [`MAX_SURROUND_BYTES`] each side, in whole cells, the nearest first.

use std::collections::HashMap;

use redraft_context::Language;
use tower_lsp_server::ls_types::{
    DidChangeNotebookDocumentParams, DidChangeTextDocumentParams, DidCloseNotebookDocumentParams,
    DidOpenNotebookDocumentParams, Notebook, NotebookCell, NotebookCellKind,
    NotebookDocumentSyncOptions, NotebookSelector,
};

use super::document::Document;
use super::document_key::DocumentKey;
use super::server::Server;

/// The most text taken from the cells before a cell, and from those after it.
pub const MAX_SURROUND_BYTES: usize = 128 << 10;

/// What the server announces: every notebook, every cell (the markdown cells are context too).
pub fn sync_options() -> NotebookDocumentSyncOptions {
    NotebookDocumentSyncOptions {
        notebook_selector: vec![NotebookSelector::ByNotebook {
            notebook: Notebook::String("*".into()),
            cells: None,
        }],
        save: None,
    }
}

/// One cell of a notebook, as the owner keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub key: DocumentKey,
    pub code: bool,
}

impl Cell {
    fn of(cell: &NotebookCell) -> Cell {
        Cell {
            key: DocumentKey::of(&cell.document),
            code: cell.kind == NotebookCellKind::CODE,
        }
    }
}

/// A change of a notebook's cells, queued on the document owner after the cell documents the
/// same message opens or closes.
#[derive(Debug)]
pub enum NotebookEvent {
    Open {
        notebook: DocumentKey,
        cells: Vec<Cell>,
    },
    /// `delete` cells from `start` are replaced by `cells`.
    Splice {
        notebook: DocumentKey,
        start: usize,
        delete: usize,
        cells: Vec<Cell>,
    },
    /// These cells' kinds, as they are now.
    Kinds {
        notebook: DocumentKey,
        cells: Vec<Cell>,
    },
    Close {
        notebook: DocumentKey,
    },
}

/// The text a code cell sits in: `before` ends with a blank line (or is empty), `after` starts
/// with one (or is empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Surround {
    pub before: String,
    pub after: String,
}

impl Surround {
    /// Whether [`wrap`](Self::wrap) ends `cell`'s last line with a newline of its own (before
    /// the cells after it).
    pub fn adds_newline(&self, cell: &str) -> bool {
        !self.after.is_empty() && !cell.is_empty() && !cell.ends_with('\n')
    }

    /// `cell`, the cell's text, in its place.
    pub fn wrap(&self, cell: &str) -> String {
        let newline = self.adds_newline(cell);
        let mut text = String::with_capacity(self.before.len() + cell.len() + self.after.len() + 1);
        text.push_str(&self.before);
        text.push_str(cell);
        if newline {
            text.push('\n');
        }
        text.push_str(&self.after);
        text
    }
}

/// The open notebooks: each one's cells in order, and each cell's notebook.
#[derive(Debug, Default)]
pub struct Notebooks {
    notebooks: HashMap<DocumentKey, Vec<Cell>>,
    notebook_of: HashMap<DocumentKey, DocumentKey>,
}

impl Notebooks {
    /// Applies `event`: whether the cells changed (a `data` change that only ran a cell, or
    /// changed its metadata, leaves them). A problem (a splice past the cells, a notebook not
    /// open) is returned for the log, with the cells left as they were.
    pub fn apply(&mut self, event: NotebookEvent) -> Result<bool, String> {
        match event {
            NotebookEvent::Open { notebook, cells } => {
                self.close(&notebook);
                for cell in &cells {
                    self.notebook_of.insert(cell.key.clone(), notebook.clone());
                }
                self.notebooks.insert(notebook, cells);
            }
            NotebookEvent::Splice {
                notebook,
                start,
                delete,
                cells,
            } => {
                let Some(list) = self.notebooks.get_mut(&notebook) else {
                    return Err(format!(
                        "a change of {} which is not open",
                        notebook.as_str()
                    ));
                };
                let end = start.checked_add(delete).filter(|&end| end <= list.len());
                let Some(end) = end else {
                    return Err(format!(
                        "a change of {} replaces cells {start}..{start}+{delete} of {}",
                        notebook.as_str(),
                        list.len()
                    ));
                };
                for removed in list.splice(start..end, cells.iter().cloned()) {
                    self.notebook_of.remove(&removed.key);
                }
                for cell in cells {
                    self.notebook_of.insert(cell.key, notebook.clone());
                }
            }
            NotebookEvent::Kinds { notebook, cells } => {
                let Some(list) = self.notebooks.get_mut(&notebook) else {
                    return Err(format!(
                        "a change of {} which is not open",
                        notebook.as_str()
                    ));
                };
                let mut kinds = false;
                for changed in cells {
                    if let Some(cell) = list.iter_mut().find(|cell| cell.key == changed.key) {
                        kinds |= cell.code != changed.code;
                        cell.code = changed.code;
                    }
                }
                return Ok(kinds);
            }
            NotebookEvent::Close { notebook } => self.close(&notebook),
        }
        Ok(true)
    }

    fn close(&mut self, notebook: &DocumentKey) {
        for cell in self.notebooks.remove(notebook).unwrap_or_default() {
            self.notebook_of.remove(&cell.key);
        }
    }

    /// The notebook `key` is a cell of, and whether it is a code cell.
    pub fn cell(&self, key: &DocumentKey) -> Option<(DocumentKey, bool)> {
        let notebook = self.notebook_of.get(key)?;
        let code = self
            .notebooks
            .get(notebook)?
            .iter()
            .any(|cell| &cell.key == key && cell.code);
        Some((notebook.clone(), code))
    }

    /// Whether `a` and `b` are cells of one notebook.
    pub fn together(&self, a: &DocumentKey, b: &DocumentKey) -> bool {
        match (self.notebook_of.get(a), self.notebook_of.get(b)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// The text around `key` if it is a code cell of an open notebook; the cells' texts are
    /// the open `documents`' (a cell not open is left out).
    pub fn surround(
        &self,
        key: &DocumentKey,
        documents: &HashMap<DocumentKey, Document>,
    ) -> Option<Surround> {
        let cells = self.notebooks.get(self.notebook_of.get(key)?)?;
        let at = cells.iter().position(|cell| &cell.key == key)?;
        let own = documents.get(key)?;
        if !cells[at].code {
            return None;
        }
        let piece = |cell: &Cell| -> Option<String> {
            let document = documents.get(&cell.key)?;
            let text = document.rope().to_string();
            if cell.code {
                // The language as the client names it: two it calls otherwise are two, even
                // where the server reads both as plain text.
                (document.language_id() == own.language_id()).then(|| with_newline(text))
            } else {
                commented(&text, own.language())
            }
        };
        let before = nearest(cells[..at].iter().rev(), piece);
        let after = nearest(cells[at + 1..].iter(), piece);
        let mut surround = Surround::default();
        for piece in before.iter().rev() {
            surround.before.push_str(piece);
            surround.before.push('\n');
        }
        for piece in &after {
            surround.after.push('\n');
            surround.after.push_str(piece);
        }
        Some(surround)
    }
}

/// The pieces of `cells`, nearest first, as long as they fit in [`MAX_SURROUND_BYTES`] together.
fn nearest<'c>(
    cells: impl Iterator<Item = &'c Cell>,
    piece: impl Fn(&Cell) -> Option<String>,
) -> Vec<String> {
    let mut taken = Vec::new();
    let mut bytes = 0;
    for text in cells.filter_map(piece) {
        bytes += text.len() + 1;
        if bytes > MAX_SURROUND_BYTES {
            break;
        }
        taken.push(text);
    }
    taken
}

fn with_newline(mut text: String) -> String {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// A markdown cell as line comments of `language`; `None` for an empty cell or a language the
/// server does not know (whose comments it cannot write).
fn commented(text: &str, language: Language) -> Option<String> {
    if language == Language::Plain || text.trim().is_empty() {
        return None;
    }
    let comment = language.line_comment();
    let mut out = String::with_capacity(text.len() + 8 * text.lines().count());
    for line in text.trim_end().lines() {
        out.push_str(comment);
        if !line.trim().is_empty() {
            out.push(' ');
            out.push_str(line.trim_end());
        }
        out.push('\n');
    }
    Some(out)
}

/// The `notebookDocument/*` handlers, each cell's document through the server's own document
/// sync, in the order the protocol gives each message's parts.
impl Server {
    pub(super) fn notebook_opened(&self, params: DidOpenNotebookDocumentParams) {
        for item in params.cell_text_documents {
            self.open_document(item);
        }
        let notebook = params.notebook_document;
        self.log.debug(|| {
            let code = notebook
                .cells
                .iter()
                .filter(|cell| Cell::of(cell).code)
                .count();
            format!(
                "notebook {} opened: {} cells, {code} of them code",
                notebook.uri.as_str(),
                notebook.cells.len()
            )
        });
        self.documents.notebook(NotebookEvent::Open {
            notebook: DocumentKey::of(&notebook.uri),
            cells: notebook.cells.iter().map(Cell::of).collect(),
        });
    }

    pub(super) fn notebook_changed(&self, params: DidChangeNotebookDocumentParams) {
        let notebook = DocumentKey::of(&params.notebook_document.uri);
        let Some(cells) = params.change.cells else {
            return;
        };
        if let Some(structure) = cells.structure {
            // Closed before the opens: a cell closed and opened again in one change (VS Code's
            // client sends neither for a moved cell, another client may send both) stays open.
            for closed in structure.did_close.unwrap_or_default() {
                self.close_document(closed.uri);
            }
            for item in structure.did_open.unwrap_or_default() {
                self.open_document(item);
            }
            let array = structure.array;
            self.documents.notebook(NotebookEvent::Splice {
                notebook: notebook.clone(),
                start: array.start as usize,
                delete: array.delete_count as usize,
                cells: array
                    .cells
                    .unwrap_or_default()
                    .iter()
                    .map(Cell::of)
                    .collect(),
            });
        }
        if let Some(data) = cells.data {
            self.documents.notebook(NotebookEvent::Kinds {
                notebook,
                cells: data.iter().map(Cell::of).collect(),
            });
        }
        for content in cells.text_content.unwrap_or_default() {
            self.change_document(DidChangeTextDocumentParams {
                text_document: content.document,
                content_changes: content.changes,
            });
        }
    }

    pub(super) fn notebook_closed(&self, params: DidCloseNotebookDocumentParams) {
        self.documents.notebook(NotebookEvent::Close {
            notebook: DocumentKey::of(&params.notebook_document.uri),
        });
        for cell in params.cell_text_documents {
            self.close_document(cell.uri);
        }
    }
}

#[cfg(test)]
mod tests;
