//! Requests the transport amends or answers itself, where tower-lsp-server would break the
//! protocol.
//!
//! - `shutdown` and `exit` take no params, yet tower-lsp-server's `ShutdownService` puts the
//!   session in its shut-down state before the params are read (`src/service/layers.rs`): a
//!   `shutdown` with `{}` was answered -32602 with the session shut down all the same, so the
//!   client's correct `shutdown` after it was refused (-32600) and `exit` ended with status 1.
//!   Both are handed on without their params ([`without_void_params`]): a client that sends any
//!   means to shut down.
//! - `shutdown` is a request. Sent as a notification (no id), it put `ShutdownService` in its
//!   shut-down state all the same, and the router then dropped it without running
//!   `Server::shutdown`: every later request was refused (-32600), the real `shutdown` too, and
//!   `exit` ended with status 1. It is dropped here, with a warning ([`dropped_here`]): the
//!   protocol has no `shutdown` notification, and the session goes on.
//! - A request whose method starts with `$/` that the server does not implement must be
//!   answered with MethodNotFound (LSP 3.17, "$ Notifications and Requests"); only such
//!   notifications may be ignored. tower-lsp-server answers none of them (`LspService::call`
//!   drops every MethodNotFound of a `$/` method, request or not), so the client waited
//!   forever. redraft implements no `$/` request: each is answered here ([`answered_here`]),
//!   but for `$/cancelRequest`, the one `$/` method the service knows: sent with an id, it
//!   still cancels, and is answered InvalidRequest as any notification sent as a request is.
//! - A request reusing the id of one still running is InvalidRequest, answered by the
//!   transport (`id_in_use`): tower-lsp-server refuses it too, but only after its layers acted
//!   on it, and a `shutdown` so refused left the session shut down without `Server::shutdown`
//!   having run (every later request refused, `exit` with status 1).
//! - A notification the service acts on sent as a request (with an id) is InvalidRequest:
//!   tower-lsp-server answers it a bare "Invalid request" and drops it, which named neither the
//!   method nor the mistake; it is answered here, saying both ([`NOTIFICATIONS`]).
//! - After a `shutdown` the service accepted, every request but `exit` is InvalidRequest
//!   (LSP 3.17, "Shutdown Request"); tower-lsp-server answers a method it does not know with
//!   MethodNotFound there, so those are answered here too.

use std::borrow::Cow;

use serde_json::Value;
use tower_lsp_server::jsonrpc::{self, ErrorCode, Request, Response};

/// The methods whose params the protocol makes void.
const VOID_PARAMS: [&str; 2] = ["shutdown", "exit"];

/// The `$/` methods the service handles (as notifications).
const SERVICE_DOLLAR_METHODS: [&str; 1] = ["$/cancelRequest"];

/// The notifications the service acts on but `exit` (which ends the session however it comes)
/// and `$/cancelRequest` (which cancels however it comes): sent with an id, no handler runs.
const NOTIFICATIONS: [&str; 11] = [
    "initialized",
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "textDocument/didSave",
    "workspace/didChangeConfiguration",
    "workspace/didChangeWorkspaceFolders",
    "notebookDocument/didOpen",
    "notebookDocument/didChange",
    "notebookDocument/didSave",
    "notebookDocument/didClose",
];

/// `request` without its params if its method takes none (`shutdown`, `exit`), and whether
/// params were dropped (`null` is how some clients say "none", and tower-lsp-server reads it so:
/// not counted).
pub fn without_void_params(request: Request) -> (Request, bool) {
    if !VOID_PARAMS.contains(&request.method()) || request.params().is_none_or(Value::is_null) {
        return (request, false);
    }
    let (method, id, _) = request.into_parts();
    let request = Request::build(method);
    let request = match id {
        Some(id) => request.id(id),
        None => request,
    };
    (request.finish(), true)
}

/// Why the transport drops `request` instead of handing it to the service, if it does: a
/// `shutdown` without an id (see the module comment), for the log.
pub fn dropped_here(request: &Request) -> Option<String> {
    (request.method() == "shutdown" && request.id().is_none()).then(|| {
        "`shutdown` came as a notification (no id) and is ignored: the session goes on; \
         send it as a request, with an id, before `exit`"
            .to_string()
    })
}

/// The answer the transport gives `request` instead of handing it to the service, if any (an
/// error): after an accepted `shutdown` (`shut_down`), InvalidRequest for every request but
/// `exit`; before it, MethodNotFound for a `$/` request the service does not know.
/// Notifications go on to the service.
pub fn answered_here(request: &Request, shut_down: bool) -> Option<Response> {
    let id = request.id()?.clone();
    let error = refusal(request.method(), shut_down)?;
    Some(Response::from_error(id, error))
}

fn refusal(method: &str, shut_down: bool) -> Option<jsonrpc::Error> {
    if shut_down && method != "exit" {
        return Some(jsonrpc::Error {
            code: ErrorCode::InvalidRequest,
            message: Cow::Owned(format!(
                "`{method}` after shutdown: the server is shut down and takes only `exit` now"
            )),
            data: None,
        });
    }
    if NOTIFICATIONS.contains(&method) {
        return Some(jsonrpc::Error {
            code: ErrorCode::InvalidRequest,
            message: Cow::Owned(format!(
                "`{method}` is a notification: send it without an id (this one was not acted on)"
            )),
            data: None,
        });
    }
    if method.starts_with("$/") && !SERVICE_DOLLAR_METHODS.contains(&method) {
        return Some(jsonrpc::Error {
            code: ErrorCode::MethodNotFound,
            message: Cow::Owned(format!(
                "method not found: `{method}` (redraft implements no `$/` request)"
            )),
            // As tower-lsp-server's own MethodNotFound: the method.
            data: Some(Value::String(method.to_string())),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The error `request` is answered with here, if any.
    fn refused(request: &Request, shut_down: bool) -> Option<jsonrpc::Error> {
        let response = answered_here(request, shut_down)?;
        assert_eq!(response.id(), request.id().unwrap());
        Some(response.error().expect("an error").clone())
    }

    fn request(method: &'static str, id: Option<i64>, params: Option<Value>) -> Request {
        let request = Request::build(method);
        let request = match id {
            Some(id) => request.id(id),
            None => request,
        };
        match params {
            Some(params) => request.params(params).finish(),
            None => request.finish(),
        }
    }

    #[test]
    fn shutdown_and_exit_lose_their_params_and_nothing_else_does() {
        for method in ["shutdown", "exit"] {
            for params in [json!({}), json!([]), json!("x"), json!({"a": 1})] {
                let (read, dropped) = without_void_params(request(method, Some(3), Some(params)));
                assert!(dropped, "{method}");
                assert_eq!(read, request(method, Some(3), None), "{method}");
            }
            let (read, dropped) = without_void_params(request(method, None, Some(json!({}))));
            assert!(dropped);
            assert_eq!(read, request(method, None, None));
            for params in [None, Some(Value::Null)] {
                let asked = request(method, Some(1), params);
                let (read, dropped) = without_void_params(asked.clone());
                assert!(!dropped, "{method}: {asked:?}");
                assert_eq!(read, asked);
            }
        }
        let asked = request("initialized", None, Some(json!({})));
        assert_eq!(without_void_params(asked.clone()), (asked, false));
    }

    /// A `shutdown` notification shut the session half down (tower-lsp-server's shut-down
    /// state without `Server::shutdown`); it never reaches the service.
    #[test]
    fn a_shutdown_without_an_id_is_dropped_and_nothing_else_is() {
        for params in [None, Some(json!({}))] {
            let warning = dropped_here(&request("shutdown", None, params)).unwrap();
            assert!(
                warning.contains("`shutdown` came as a notification"),
                "{warning}"
            );
        }
        for (method, id) in [
            ("shutdown", Some(1)),
            ("exit", None),
            ("exit", Some(2)),
            ("initialized", None),
            ("textDocument/didOpen", None),
        ] {
            assert_eq!(dropped_here(&request(method, id, None)), None, "{method}");
        }
    }

    #[test]
    fn dollar_requests_are_method_not_found_and_dollar_notifications_pass() {
        let error = refused(&request("$/foo", Some(1), Some(json!({}))), false).unwrap();
        assert_eq!(error.code, ErrorCode::MethodNotFound);
        assert_eq!(error.data, Some(json!("$/foo")));
        // The service's own: sent as a request, it still cancels (and is InvalidRequest).
        assert!(refused(&request("$/cancelRequest", Some(2), None), false).is_none());
        for notification in ["$/cancelRequest", "$/setTrace", "$/foo"] {
            assert!(refused(&request(notification, None, None), false).is_none());
        }
        for method in ["foo/bar", "shutdown", "textDocument/inlineCompletion"] {
            assert!(refused(&request(method, Some(1), None), false).is_none());
        }
    }

    /// A notification sent with an id is refused with the reason (tower-lsp-server said a
    /// bare "Invalid request"); sent as one, it goes on to the service.
    #[test]
    fn a_notification_sent_as_a_request_is_refused_with_why() {
        for method in [
            "initialized",
            "textDocument/didOpen",
            "notebookDocument/didChange",
        ] {
            let error = refused(&request(method, Some(3), Some(json!({}))), false).unwrap();
            assert_eq!(error.code, ErrorCode::InvalidRequest, "{method}");
            assert_eq!(
                error.message,
                format!("`{method}` is a notification: send it without an id (this one was not acted on)")
            );
            assert!(refused(&request(method, None, Some(json!({}))), false).is_none());
        }
    }

    #[test]
    fn after_shutdown_every_request_but_exit_is_invalid() {
        for method in [
            "foo/bar",
            "$/foo",
            "shutdown",
            "textDocument/inlineCompletion",
        ] {
            let error = refused(&request(method, Some(1), None), true).unwrap();
            assert_eq!(error.code, ErrorCode::InvalidRequest, "{method}");
        }
        // `exit` ends the session, with an id or not; notifications are the service's.
        assert!(refused(&request("exit", Some(1), None), true).is_none());
        assert!(refused(&request("exit", None, None), true).is_none());
        assert!(refused(&request("textDocument/didOpen", None, None), true).is_none());
    }
}
