//! The workspace folders the client named, at `initialize` and through
//! `workspace/didChangeWorkspaceFolders`: a document under one is named relative to it, the way
//! `git diff` and the training data name files, in the next-edit history and in the snippets
//! of other documents an inline completion's prompt carries (so a prompt never spells out the
//! user's home directory, to a local model or a remote backend).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tower_lsp_server::ls_types::{InitializeParams, Uri, WorkspaceFoldersChangeEvent};

/// The folders, shared by the server and the jobs that name documents (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct Workspace(Arc<Mutex<Vec<PathBuf>>>);

impl Workspace {
    /// The folders `initialize` names (or its root, from clients that send only that).
    pub fn set_from(&self, params: &InitializeParams) {
        let folders = params.workspace_folders.iter().flatten().map(|f| &f.uri);
        #[allow(deprecated)]
        let root = params.root_uri.iter();
        let mut roots = Vec::new();
        for path in folders.chain(root).filter_map(file_path) {
            if !roots.contains(&path) {
                roots.push(path);
            }
        }
        *self.roots() = roots;
    }

    /// Applies a `workspace/didChangeWorkspaceFolders`: the removed folders go, then the added
    /// ones come last (a folder named twice is kept once).
    pub fn change(&self, event: &WorkspaceFoldersChangeEvent) {
        let mut roots = self.roots();
        let removed: Vec<PathBuf> = event
            .removed
            .iter()
            .filter_map(|f| file_path(&f.uri))
            .collect();
        roots.retain(|root| !removed.contains(root));
        for path in event.added.iter().filter_map(|f| file_path(&f.uri)) {
            if !roots.contains(&path) {
                roots.push(path);
            }
        }
    }

    /// `uri`'s name: its path relative to the first folder holding it, else its path, else
    /// the URI itself.
    pub fn name(&self, uri: &Uri) -> String {
        display_path(uri, &self.roots())
    }

    fn roots(&self) -> MutexGuard<'_, Vec<PathBuf>> {
        // Poisoning only says another handler panicked; the list is never left half-written.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn file_path(uri: &Uri) -> Option<PathBuf> {
    uri.to_file_path().map(|p| p.into_owned())
}

/// VS Code's scheme for a notebook's cells: the notebook's path, and a fragment per cell.
const NOTEBOOK_CELL_SCHEME: &str = "vscode-notebook-cell";

fn display_path(uri: &Uri, roots: &[PathBuf]) -> String {
    let path = match uri.scheme().as_str() {
        "file" => file_path(uri),
        // A cell is named as its notebook is: its edits, and its text among other documents',
        // are the notebook file's.
        NOTEBOOK_CELL_SCHEME => {
            let host = uri.authority().map_or("", |authority| authority.as_str());
            format!("file://{host}{}", uri.path().as_str())
                .parse::<Uri>()
                .ok()
                .and_then(|file| file_path(&file))
        }
        _ => None,
    };
    let Some(path) = path else {
        return uri.as_str().to_string();
    };
    let relative = roots
        .iter()
        .find_map(|root| path.strip_prefix(root).ok())
        .filter(|rest| !rest.as_os_str().is_empty());
    relative.unwrap_or(&path).display().to_string()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use serde_json::json;
    use tower_lsp_server::ls_types::WorkspaceFolder;

    use super::*;

    fn uri(text: &str) -> Uri {
        Uri::from_str(text).unwrap()
    }

    fn folder(text: &str) -> WorkspaceFolder {
        WorkspaceFolder {
            uri: uri(text),
            name: "folder".into(),
        }
    }

    fn initialized(params: serde_json::Value) -> Workspace {
        let workspace = Workspace::default();
        workspace.set_from(&serde_json::from_value(params).unwrap());
        workspace
    }

    #[test]
    fn documents_are_named_relative_to_their_workspace_folder() {
        let workspace = initialized(json!({
            "capabilities": {},
            "workspaceFolders": [
                {"uri": "file:///work/other", "name": "other"},
                {"uri": "file:///work/demo", "name": "demo"},
            ],
        }));
        let name = |text| workspace.name(&uri(text));
        assert_eq!(name("file:///work/demo/src/lib.rs"), "src/lib.rs");
        assert_eq!(name("file:///elsewhere/main.rs"), "/elsewhere/main.rs");
        assert_eq!(name("untitled:Untitled-1"), "untitled:Untitled-1");
        assert_eq!(name("file:///work/demo/caf%C3%A9.rs"), "café.rs");
        // The folder itself has no relative name.
        assert_eq!(name("file:///work/demo"), "/work/demo");
        // A notebook's cell, by its notebook.
        let cell = "vscode-notebook-cell:/work/demo/an%20analysis.ipynb#W2sZmlsZQ%3D%3D";
        assert_eq!(name(cell), "an analysis.ipynb");
        let elsewhere = "vscode-notebook-cell:/elsewhere/nb.ipynb#W0sZmlsZQ%3D%3D";
        assert_eq!(name(elsewhere), "/elsewhere/nb.ipynb");
        // On a share, as the notebook's file there is named.
        let shared = "vscode-notebook-cell://server/share/nb.ipynb#W0sZmlsZQ%3D%3D";
        assert_eq!(name(shared), name("file://server/share/nb.ipynb"));
        // An untitled notebook's cell has no file: it keeps its URI.
        let untitled = "vscode-notebook-cell:Untitled-1.ipynb#W0sdW50aXRsZWQ%3D";
        assert_eq!(name(untitled), untitled);
    }

    #[test]
    fn a_client_sending_only_a_root_uri_names_files_relative_to_it() {
        let workspace = initialized(json!({
            "capabilities": {},
            "rootUri": "file:///work/demo",
        }));
        assert_eq!(
            workspace.name(&uri("file:///work/demo/src/main.rs")),
            "src/main.rs"
        );
    }

    #[test]
    fn folders_added_and_removed_later_rename_their_documents() {
        let workspace = initialized(json!({
            "capabilities": {},
            "workspaceFolders": [{"uri": "file:///work/demo", "name": "demo"}],
            "rootUri": "file:///work/demo",
        }));
        let lib = uri("file:///work/lib/src/lib.rs");
        assert_eq!(workspace.name(&lib), "/work/lib/src/lib.rs");

        workspace.change(&WorkspaceFoldersChangeEvent {
            added: vec![folder("file:///work/lib")],
            removed: vec![],
        });
        assert_eq!(workspace.name(&lib), "src/lib.rs");
        let demo = uri("file:///work/demo/src/main.rs");
        assert_eq!(workspace.name(&demo), "src/main.rs");

        workspace.change(&WorkspaceFoldersChangeEvent {
            added: vec![folder("file:///work/lib")],
            removed: vec![folder("file:///work/demo")],
        });
        assert_eq!(workspace.name(&demo), "/work/demo/src/main.rs");
        assert_eq!(workspace.name(&lib), "src/lib.rs");
        assert_eq!(workspace.roots().len(), 1, "{:?}", workspace.roots());
    }

    #[test]
    fn a_nested_folder_names_its_files_as_the_first_folder_holding_them_does() {
        let workspace = initialized(json!({
            "capabilities": {},
            "workspaceFolders": [
                {"uri": "file:///work/demo", "name": "demo"},
                {"uri": "file:///work/demo/crates/core", "name": "core"},
            ],
        }));
        assert_eq!(
            workspace.name(&uri("file:///work/demo/crates/core/src/lib.rs")),
            "crates/core/src/lib.rs"
        );
    }
}
