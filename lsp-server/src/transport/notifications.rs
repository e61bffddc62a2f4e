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

use serde::de::DeserializeOwned;
use serde_json::Value;
use tower_lsp_server::jsonrpc::Request;
use tower_lsp_server::ls_types::notification::{
    Cancel, DidChangeConfiguration, DidChangeTextDocument, DidCloseTextDocument,
    DidOpenTextDocument, Initialized, Notification,
};
use tower_lsp_server::ls_types::Uri;

/// Reads a notification's params, or says why they do not read.
type Reader = fn(Option<&Value>) -> Result<(), String>;

/// Why tower-lsp-server will ignore `request`, if it will for its params: the warning to log,
/// naming the method and why. `None` for requests (they are answered with the error), methods
/// not checked here, and params that read.
pub fn unreadable(request: &Request) -> Option<String> {
    if request.id().is_some() {
        return None;
    }
    let method = request.method();
    let read = reader(method)?;
    let params = request.params();
    let why = read(params).err()?;
    // A `uri` that is not a URI is the one seen in practice: name it, and what a client must do.
    let uri = params
        .and_then(|p| p.get("textDocument"))
        .and_then(|d| d.get("uri"))
        .and_then(Value::as_str);
    if let Some((uri, err)) = uri.and_then(|uri| Some((uri, uri.parse::<Uri>().err()?))) {
        return Some(format!(
            "{method} ignored: its uri `{uri}` is not a URI ({err}); RFC 3986 wants a space and characters like it percent-encoded, a space as %20"
        ));
    }
    Some(format!("{method} ignored: {why}"))
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
        of::<Cancel>(),
    ]
    .into_iter()
    .find(|(name, _)| *name == method)
    .map(|(_, read)| read)
}

/// Whether `params` read as a `P`, as tower-lsp-server reads them (`params` absent is an error,
/// `null` is read as a value).
fn reads<P: DeserializeOwned>(params: Option<&Value>) -> Result<(), String> {
    let params = params.ok_or("it has no params")?;
    P::deserialize(params)
        .map(drop)
        .map_err(|err| format!("its params do not match the protocol ({err})"))
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

    #[test]
    fn params_of_another_shape_or_none_are_named() {
        let change =
            json!({"textDocument": {"uri": "file:///a.rs", "version": 1}, "contentChanges": "no"});
        assert_eq!(
            check("textDocument/didChange", Some(change)).as_deref(),
            Some("textDocument/didChange ignored: its params do not match the protocol (invalid type: string \"no\", expected a sequence)")
        );
        assert_eq!(
            check("textDocument/didOpen", Some(json!({"textDocument": 5}))).as_deref(),
            Some("textDocument/didOpen ignored: its params do not match the protocol (invalid type: integer `5`, expected struct TextDocumentItem)")
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
