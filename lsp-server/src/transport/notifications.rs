//! Notifications tower-lsp-server would drop without a word. Its router reads a method's params
//! into the handler's type before the handler runs, and when they do not read it answers a
//! request with -32602 but, a notification having nobody to answer, ignores it: no handler, no
//! log, not even a `tracing` event (`MethodHandler::call` in its `src/jsonrpc/router.rs`). A
//! `didOpen` whose `uri` is not a URI (a raw space, no scheme) so left its document unopened and
//! every request on it failing, with nothing anywhere to say why. The transport asks
//! [`unreadable`] of every notification and logs the answer as a warning; the notification
//! still goes on to the service, which drops it as before.
//!
//! Checked: the notifications the server acts on whose params tower-lsp-server reads into a
//! type, read here into that same type (`textDocument/didFocus` and `didShowInlineEdit` take any
//! JSON, and change nothing). That reads a `didOpen`'s or full `didChange`'s text once more, a
//! copy on the dispatcher: 3.5 ms for a 5 MB document, ~30 ms for 50 MB (reading the frame
//! itself takes ~120 ms there).
//!
//! Requests whose params do not read are answered -32602 by tower-lsp-server, but with serde's
//! message alone; the transport asks [`unreadable_params`] of the requests clients build by hand
//! most and answers those itself, naming the field or the URI. That reads an inline
//! completion's small params twice a keystroke (here and in the service): 0.7 µs a check in a
//! release build (2026-12-07, this project's 2-core machine), the price of not keeping each
//! request to rewrite the service's error afterwards.

use serde::de::DeserializeOwned;
use serde_json::Value;
use tower_lsp_server::jsonrpc::Request;
use tower_lsp_server::ls_types::notification::{
    Cancel, DidChangeConfiguration, DidChangeNotebookDocument, DidChangeTextDocument,
    DidChangeWorkspaceFolders, DidCloseNotebookDocument, DidCloseTextDocument,
    DidOpenNotebookDocument, DidOpenTextDocument, Initialized, Notification,
};
use tower_lsp_server::ls_types::Uri;

/// Reads a notification's params, or says why they do not read.
type Reader = fn(Option<&Value>) -> Result<(), String>;

/// Why tower-lsp-server will ignore `request`, if it will for its params: the warning to log,
/// naming the method and why. `None` for requests ([`unreadable_params`]), methods not checked
/// here, and params that read.
pub fn unreadable(request: &Request) -> Option<String> {
    if request.id().is_some() {
        return None;
    }
    let read = reader(request.method())?;
    Some(format!(
        "{} ignored: {}",
        request.method(),
        read(request.params()).err()?
    ))
}

/// Why `request`'s params do not read as its method's, for the -32602 answer: tower-lsp-server
/// answers one with serde's message alone ("unexpected character at index 3", "invalid type:
/// string \"utf-8\", expected a sequence"), which names neither the field nor the value.
/// `None` for notifications, methods not checked here, and params that read.
pub fn unreadable_params(request: &Request) -> Option<String> {
    request.id()?;
    let read = request_reader(request.method())?;
    Some(format!(
        "`{}`: {}",
        request.method(),
        read(request.params()).err()?
    ))
}

/// The requests whose params are checked: those a client builds by hand most.
fn request_reader(method: &str) -> Option<Reader> {
    fn of<R: tower_lsp_server::ls_types::request::Request>() -> (&'static str, Reader) {
        (R::METHOD, reads::<R::Params>)
    }
    use tower_lsp_server::ls_types::request::{
        Completion, ExecuteCommand, Initialize, InlineCompletionRequest,
    };
    [
        of::<Initialize>(),
        of::<InlineCompletionRequest>(),
        of::<Completion>(),
        of::<ExecuteCommand>(),
        (
            crate::next_edit::INLINE_EDIT_METHOD,
            reads::<crate::next_edit::InlineEditParams>,
        ),
    ]
    .into_iter()
    .find(|(name, _)| *name == method)
    .map(|(_, read)| read)
}

fn reader(method: &str) -> Option<Reader> {
    fn of<N: Notification>() -> (&'static str, Reader) {
        (N::METHOD, reads::<N::Params>)
    }
    [
        of::<Initialized>(),
        of::<DidOpenTextDocument>(),
        of::<DidChangeTextDocument>(),
        of::<DidCloseTextDocument>(),
        of::<DidChangeConfiguration>(),
        of::<DidChangeWorkspaceFolders>(),
        of::<DidOpenNotebookDocument>(),
        of::<DidChangeNotebookDocument>(),
        of::<DidCloseNotebookDocument>(),
        of::<Cancel>(),
    ]
    .into_iter()
    .find(|(name, _)| *name == method)
    .map(|(_, read)| read)
}

/// Whether `params` read as a `P`, as tower-lsp-server reads them (`params` absent is an error,
/// `null` is read as a value); why not names the field (`capabilities.general`), and a `uri`
/// that is not a URI (the failure seen in practice: a document's, a notebook's, a workspace
/// folder's) by its value and what a client must do.
fn reads<P: DeserializeOwned>(params: Option<&Value>) -> Result<(), String> {
    let params = params.ok_or("it has no params")?;
    let Err(err) = serde_path_to_error::deserialize::<_, P>(params) else {
        return Ok(());
    };
    // The value where reading stopped, when that is a `uri` (a workspace folder's, a document's);
    // else a document's or a notebook's own, which a flattened field (an inline completion's
    // `textDocument`) leaves out of the path.
    let at_uri = err.path().iter().next_back().is_some_and(|segment| {
        matches!(segment, serde_path_to_error::Segment::Map { key } if key == "uri" || key.ends_with("Uri"))
    });
    let document_uri = || {
        params
            .get("textDocument")
            .or_else(|| params.get("notebookDocument"))?
            .get("uri")
    };
    let uri = value_at(params, err.path())
        .filter(|_| at_uri)
        .or_else(document_uri)
        .and_then(Value::as_str)
        .and_then(|text| Some((text, text.parse::<Uri>().err()?)));
    if let Some((uri, why)) = uri {
        return Err(format!(
            "its uri `{uri}` is not a URI ({why}); RFC 3986 wants a space and characters like it percent-encoded, a space as %20"
        ));
    }
    Err(match err.path().to_string().as_str() {
        "." => format!("its params do not match the protocol ({})", err.inner()),
        field => format!(
            "its params do not match the protocol (`{field}`: {})",
            err.inner()
        ),
    })
}

/// The value `path` leads to in `params`, where every step of it is a key or an index there.
fn value_at<'a>(params: &'a Value, path: &serde_path_to_error::Path) -> Option<&'a Value> {
    use serde_path_to_error::Segment;
    path.iter()
        .try_fold(params, |value, segment| match segment {
            Segment::Map { key } => value.get(key),
            Segment::Seq { index } => value.get(index),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(method: &'static str, params: Option<Value>) -> Option<String> {
        let request = Request::build(method);
        let request = match params {
            Some(params) => request.params(params),
            None => request,
        };
        unreadable(&request.finish())
    }

    fn open(uri: &str) -> Value {
        json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 0, "text": ""}})
    }

    #[test]
    fn a_uri_that_is_not_one_is_named() {
        assert_eq!(
            check("textDocument/didOpen", Some(open("file:///a b.rs"))).as_deref(),
            Some("textDocument/didOpen ignored: its uri `file:///a b.rs` is not a URI (unexpected character at index 9); RFC 3986 wants a space and characters like it percent-encoded, a space as %20")
        );
        for (method, params) in [
            (
                "textDocument/didChange",
                json!({"textDocument": {"uri": "not a uri", "version": 1}, "contentChanges": []}),
            ),
            (
                "textDocument/didClose",
                json!({"textDocument": {"uri": "not a uri"}}),
            ),
        ] {
            let warning = check(method, Some(params)).unwrap();
            assert!(
                warning.starts_with(&format!(
                    "{method} ignored: its uri `not a uri` is not a URI ("
                )),
                "{warning}"
            );
        }
    }

    /// A notebook's notifications and a workspace folder change are read as the documents'
    /// are: one that does not read left its notebook unopened with no word in the log, and
    /// every request in its cells said the cell was not open.
    #[test]
    fn notebook_and_workspace_folder_notifications_are_checked_too() {
        let notebook = |uri: &str| {
            json!({"notebookDocument": {"uri": uri, "notebookType": "jupyter-notebook",
                "version": 1, "cells": []}, "cellTextDocuments": []})
        };
        assert!(check(
            "notebookDocument/didOpen",
            Some(notebook("file:///n.ipynb"))
        )
        .is_none());
        let warning = check(
            "notebookDocument/didOpen",
            Some(notebook("file:///a b.ipynb")),
        );
        assert!(
            warning.as_deref().is_some_and(|w| w.starts_with(
                "notebookDocument/didOpen ignored: its uri `file:///a b.ipynb` is not a URI ("
            )),
            "{warning:?}"
        );
        for method in [
            "notebookDocument/didOpen",
            "notebookDocument/didChange",
            "notebookDocument/didClose",
            "workspace/didChangeWorkspaceFolders",
        ] {
            let warning = check(method, Some(json!({"bogus": 1})));
            assert!(
                warning.as_deref().is_some_and(|w| w.starts_with(&format!(
                    "{method} ignored: its params do not match the protocol (missing field"
                ))),
                "{method}: {warning:?}"
            );
        }
        // The folder's URI is named, as a document's is (serde said "unexpected character at
        // index 1" and no more).
        let folders = json!({"event": {"added": [{"uri": "a b", "name": "x"}], "removed": []}});
        let warning = check("workspace/didChangeWorkspaceFolders", Some(folders));
        assert!(
            warning.as_deref().is_some_and(|w| w.starts_with(
                "workspace/didChangeWorkspaceFolders ignored: its uri `a b` is not a URI ("
            )),
            "{warning:?}"
        );
    }

    /// A request's params that do not read are named as a notification's are, for the -32602
    /// answer: the field and the value (tower-lsp-server said "unexpected character at index
    /// 3", or "invalid type: string \"utf-8\", expected a sequence" and no more).
    #[test]
    fn a_requests_params_that_do_not_read_are_named() {
        let ask = |method: &'static str, params: Value| {
            unreadable_params(&Request::build(method).id(1).params(params).finish())
        };
        let initialize = json!({"capabilities": {"general": {"positionEncodings": "utf-8"}}});
        assert_eq!(
            ask("initialize", initialize).as_deref(),
            Some("`initialize`: its params do not match the protocol (`capabilities.general.positionEncodings`: invalid type: string \"utf-8\", expected a sequence)")
        );
        let inline = json!({"textDocument": {"uri": "not a uri"},
            "position": {"line": 0, "character": 0}, "context": {"triggerKind": 1}});
        let why = ask("textDocument/inlineCompletion", inline).unwrap();
        assert!(
            why.starts_with("`textDocument/inlineCompletion`: its uri `not a uri` is not a URI ("),
            "{why}"
        );
        let edit = json!({"textDocument": {"uri": "file:///a.rs"}, "position": {"line": 0}});
        let why = ask("textDocument/copilotInlineEdit", edit).unwrap();
        assert!(
            why.contains("`textDocument.version`") || why.contains("missing field"),
            "{why}"
        );
        // Params that read, a notification, and methods not checked here pass.
        let fine = json!({"textDocument": {"uri": "file:///a.rs"},
            "position": {"line": 0, "character": 0}, "context": {"triggerKind": 1}});
        assert_eq!(ask("textDocument/inlineCompletion", fine.clone()), None);
        let notification = Request::build("textDocument/inlineCompletion").params(json!(5));
        assert_eq!(unreadable_params(&notification.finish()), None);
        assert_eq!(ask("foo/bar", json!(5)), None);
    }

    #[test]
    fn params_of_another_shape_or_none_are_named() {
        let change =
            json!({"textDocument": {"uri": "file:///a.rs", "version": 1}, "contentChanges": "no"});
        assert_eq!(
            check("textDocument/didChange", Some(change)).as_deref(),
            Some("textDocument/didChange ignored: its params do not match the protocol (`contentChanges`: invalid type: string \"no\", expected a sequence)")
        );
        assert_eq!(
            check("textDocument/didOpen", Some(json!({"textDocument": 5}))).as_deref(),
            Some("textDocument/didOpen ignored: its params do not match the protocol (`textDocument`: invalid type: integer `5`, expected struct TextDocumentItem)")
        );
        assert_eq!(
            check("textDocument/didClose", None).as_deref(),
            Some("textDocument/didClose ignored: it has no params")
        );
        // tower-lsp-server reads `null` as the params, which an `initialized` is not.
        assert!(check("initialized", Some(Value::Null)).is_some());
        assert!(check("$/cancelRequest", Some(json!({"id": [1]}))).is_some());
        assert!(check("workspace/didChangeConfiguration", Some(json!({}))).is_some());
    }

    #[test]
    fn what_reads_requests_and_other_methods_pass() {
        assert_eq!(
            check("textDocument/didOpen", Some(open("file:///a%20b.rs"))),
            None
        );
        assert_eq!(check("initialized", Some(json!({}))), None);
        assert_eq!(check("$/cancelRequest", Some(json!({"id": 3}))), None);
        assert_eq!(
            check(
                "workspace/didChangeConfiguration",
                Some(json!({"settings": null}))
            ),
            None
        );
        // Not checked: any JSON does for these, and `exit` reads none.
        assert_eq!(check("textDocument/didFocus", Some(json!(5))), None);
        assert_eq!(check("exit", Some(json!({"x": 1}))), None);
        // A request with params that do not read is answered with -32602 by tower-lsp-server.
        let request = Request::build("textDocument/didOpen")
            .id(1)
            .params(open("not a uri"))
            .finish();
        assert_eq!(unreadable(&request), None);
    }
}
