//! Errors as HTTP clients parse them. OpenAI-shaped routes answer
//! `{"error": {"message", "type", "param", "code"}}` (what OpenAI's SDKs, Zed and Inception's
//! clients read); Ollama-shaped routes (`/api/...`) answer `{"error": "message"}`, which is what
//! Ollama itself sends and its client libraries read. Either way the status code says whose
//! fault it is: 4xx for the request, 429/503 (with `Retry-After`) for load and shutdown, 502 for
//! a remote backend's failure (`--backend`), and 500 only for a bug of ours, never for anything
//! a client sent. A message quotes at most [`QUOTED_CHARS`] characters of anything the client
//! sent ([`quote`]): an error never echoes a request back.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The most characters of a client's text an error message quotes.
pub const QUOTED_CHARS: usize = 64;

/// The longest message an error carries, whatever it quotes (a last guard: every quoting site
/// goes through [`quote`]).
const MAX_MESSAGE_CHARS: usize = 1024;

/// `text` as an error message may quote it: its first [`QUOTED_CHARS`] characters, with `…` when
/// there were more.
pub fn quote(text: &str) -> String {
    clip(text, QUOTED_CHARS)
}

fn clip(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// serde's message with the Rust type a number was expected as (`expected i64`) in words.
fn in_plain_words(message: &str) -> String {
    let mut message = message.to_string();
    for (rust, words) in [
        ("i64", "an integer"),
        ("u64", "a whole number (0 or more)"),
        ("u32", "a whole number (0 or more)"),
        ("usize", "a whole number (0 or more)"),
        ("f64", "a number"),
        ("f32", "a number"),
    ] {
        let typed = format!("expected {rust}");
        if let Some(at) = message.find(&typed) {
            let end = at + typed.len();
            // A whole word: `expected u64` but not `expected u64s`.
            if message[end..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric())
            {
                message.replace_range(at..end, &format!("expected {words}"));
            }
        }
    }
    message
}

/// `message` (serde's, which quotes whole strings of the request: `invalid type: string "..."`)
/// with every double-quoted or backquoted stretch longer than [`QUOTED_CHARS`] cut short.
fn quote_within(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * MAX_MESSAGE_CHARS));
    let mut rest = message;
    while let Some(open) = rest.find(['"', '`']) {
        let mark = rest[open..].chars().next().unwrap_or('"');
        out.push_str(&rest[..=open]);
        let inside = &rest[open + 1..];
        // The closing mark: the next one not escaped with a backslash.
        let mut escaped = false;
        let close = inside.char_indices().find(|&(_, c)| {
            let closes = c == mark && !escaped;
            escaped = c == '\\' && !escaped;
            closes
        });
        match close {
            Some((at, _)) => {
                out.push_str(&quote(&inside[..at]));
                out.push(mark);
                rest = &inside[at + 1..];
            }
            None => {
                out.push_str(&quote(inside));
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Which error body a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Ollama,
}

impl Dialect {
    /// Ollama's routes live under `/api/`; everything else speaks OpenAI's shape.
    pub fn of_path(path: &str) -> Dialect {
        if path.starts_with("/api/") {
            Dialect::Ollama
        } else {
            Dialect::OpenAi
        }
    }
}

/// A request that cannot be answered with a result.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `rate_limit_error`,
    /// `server_error`, `not_found_error`.
    pub kind: &'static str,
    /// A stable machine-readable code (`model_not_found`, `queue_full`, ...).
    pub code: &'static str,
    /// The request field at fault, if one is.
    pub param: Option<String>,
    /// Seconds, for 429 and 503.
    pub retry_after: Option<u64>,
    pub dialect: Dialect,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: String) -> Self {
        ApiError {
            status,
            message,
            kind,
            code,
            param: None,
            retry_after: None,
            dialect: Dialect::OpenAi,
        }
    }

    /// A field with a value the server cannot use (400).
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            param: Some(param.to_string()),
            ..ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_value",
                message.into(),
            )
        }
    }

    /// A field asking for something this server does not do (400, code
    /// `unsupported_parameter`, as OpenAI's API answers a parameter a model does not take), so
    /// a client can tell it from a value out of range and retry without it.
    pub fn unsupported(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            code: "unsupported_parameter",
            ..ApiError::invalid(param, message)
        }
    }

    /// A body that is not JSON, or not the JSON this route takes (400); `field` is where in
    /// the body a value did not fit (`options.stop`; empty or `.` for the body itself).
    pub fn bad_json(field: &str, err: &serde_json::Error) -> Self {
        let field = Some(field).filter(|field| !matches!(*field, "" | "."));
        let message = match err.classify() {
            serde_json::error::Category::Data => format!(
                "{} is not what this route takes: {}",
                field.map_or_else(|| "the request body".to_string(), |f| format!("`{f}`")),
                in_plain_words(&err.to_string())
            ),
            _ => format!("the request body is not valid JSON: {err}"),
        };
        ApiError {
            param: field.map(str::to_string),
            ..ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                quote_within(&message),
            )
        }
    }

    /// A well-formed request the server understood but cannot act on (422): an edit message
    /// without its tags, a region too big for the model.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request_error",
            "unprocessable",
            message.into(),
        )
    }

    /// A missing or wrong key (401; the response names the scheme, `WWW-Authenticate: Bearer`).
    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "missing or wrong API key: send it as `Authorization: Bearer KEY`".into(),
        )
    }

    /// A `Host` the server does not answer to (403): what a page that rebound its own name to
    /// this machine's address sends.
    pub fn host_not_allowed(host: &str) -> Self {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "host_not_allowed",
            format!(
                "Host `{}` is not a name this server answers to (loopback names and the address it \
                 listens on); if clients reach it by that name, start it with --allow-host NAME",
                quote(host)
            ),
        )
    }

    /// A request from a web page (an `Origin` header) that no `--allow-origin` names (403).
    pub fn origin_not_allowed(origin: &str) -> Self {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "origin_not_allowed",
            format!(
                "requests from web pages are refused (Origin `{}`); to let one page use this \
                 server, start it with --allow-origin ORIGIN",
                quote(origin)
            ),
        )
    }

    /// Request headers the server will not guess about (400): a missing or doubled `Host`, a
    /// doubled `Authorization`, a body framed by `Transfer-Encoding`.
    pub fn bad_headers(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "bad_headers",
            message.into(),
        )
    }

    /// A POST body that does not say it is JSON (415): what a page can send cross-origin
    /// without asking first (`text/plain`, forms), so it is refused before it is read.
    pub fn not_json(content_type: Option<&str>) -> Self {
        let got = match content_type {
            Some(value) => format!("`{}`", quote(value)),
            None => "none".to_string(),
        };
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            "unsupported_media_type",
            format!(
                "the body must be JSON sent with `Content-Type: application/json` (got {got}; \
                 curl: -H 'Content-Type: application/json')"
            ),
        )
    }

    /// A body that did not arrive within `--body-timeout-ms` (408).
    pub fn body_timeout(limit_ms: u64) -> Self {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "request_timeout",
            format!("the request body did not arrive within {limit_ms} ms (--body-timeout-ms)"),
        )
    }

    pub fn unknown_route(method: &str, path: &str) -> Self {
        // A chat client pointed here (an OpenAI SDK's chat call, Zed's Qwen "partial mode", the
        // Ollama libraries' `chat`) is told what the server does instead, in its API.
        let trimmed = path.trim_end_matches('/');
        let hint = if trimmed.ends_with("/chat/completions") {
            "this server fills in the middle of code and has no chat: send the code before the \
             cursor as `prompt` (and after it as `suffix`) to /v1/completions"
        } else if trimmed == "/api/chat" {
            "this server fills in the middle of code and has no chat: send the code before the \
             cursor as `prompt` (and after it as `suffix`) to /api/generate"
        } else {
            "the routes: POST /v1/completions, /api/generate, /v1/fim/completions, \
             /v1/edit/completions; GET /v1/models, /api/tags, /health, /metrics; all of them in \
             redraft's docs/http-api.md"
        };
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "unknown_route",
            format!("no route {} `{}` ({hint})", quote(method), quote(path)),
        )
    }

    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method_not_allowed",
            format!("`{}` does not take {}", quote(path), quote(method)),
        )
    }

    pub fn model_not_found(asked: &str, served: &[String]) -> Self {
        ApiError {
            param: Some("model".into()),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "model_not_found",
                format!(
                    "model `{}` is not served here; use one of: {}",
                    quote(asked),
                    served.join(", ")
                ),
            )
        }
    }

    pub fn too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("the request body is over the server's limit of {limit} bytes (--max-body)"),
        )
    }

    pub fn queue_full(retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "queue_full",
                "the server's queue is full (--max-queue); retry after the Retry-After seconds"
                    .into(),
            )
        }
    }

    pub fn shutting_down() -> Self {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "shutting_down",
                "the server is shutting down and takes no new requests".into(),
            )
        }
    }

    pub fn no_model(why: &str) -> Self {
        ApiError {
            retry_after: Some(30),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "model_not_loaded",
                format!("no model is loaded ({why}); fix --model and restart the server"),
            )
        }
    }

    /// The remote backend (`--backend`) gave no completion (502): `message` is its error (down,
    /// timed out, an HTTP error with the backend's own message, an answer that is not one).
    pub fn backend(message: &str) -> Self {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "server_error",
            "backend_error",
            format!("the backend failed on this request: {message}"),
        )
    }

    /// A bug of ours: logged, and never the answer to anything a client sent.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            message.into(),
        )
    }

    /// The same error in `dialect`'s body.
    pub fn in_dialect(self, dialect: Dialect) -> Self {
        ApiError { dialect, ..self }
    }

    /// The body, as the route's clients parse it.
    pub fn body(&self) -> serde_json::Value {
        match self.dialect {
            Dialect::OpenAi => json!({"error": {
                "message": clip(&self.message, MAX_MESSAGE_CHARS),
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }}),
            Dialect::Ollama => json!({"error": clip(&self.message, MAX_MESSAGE_CHARS)}),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body().to_string(),
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            // The scheme that would be accepted (RFC 9110 section 15.5.2).
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_the_route_dialect() {
        let error = ApiError::model_not_found("gpt-4", &["redraft-default".into()]);
        assert_eq!(error.status, StatusCode::NOT_FOUND);
        let body = error.body();
        assert_eq!(body["error"]["code"], "model_not_found");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "model");
        let ollama = error.in_dialect(Dialect::Ollama).body();
        assert!(ollama["error"].as_str().unwrap().contains("`gpt-4`"));
        assert_eq!(Dialect::of_path("/api/generate"), Dialect::Ollama);
        assert_eq!(Dialect::of_path("/v1/completions"), Dialect::OpenAi);
    }

    /// A client that took a wrong turn is told where to go in the answer itself: the README
    /// section the message once named is not on the client's machine.
    #[test]
    fn an_unknown_route_names_the_routes() {
        let body = ApiError::unknown_route("GET", "/v1/complete").body();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("no route GET `/v1/complete` (the routes: POST /v1/completions,"),
            "{message}"
        );
        assert!(message.contains("docs/http-api.md"), "{message}");
        let chat = ApiError::unknown_route("POST", "/v1/chat/completions").body();
        assert!(chat["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no chat"));
    }

    #[test]
    fn quotes_of_client_text_are_short() {
        let long = "é".repeat(100);
        assert_eq!(quote("gpt-4"), "gpt-4");
        assert_eq!(quote(&long), format!("{}…", "é".repeat(QUOTED_CHARS)));
        // serde's messages quote whole strings; every quoted stretch is cut, the rest kept.
        let message = format!(r#"invalid type: string "{long}", expected i64 at `{long}` end"#);
        let short = format!("{}…", "é".repeat(QUOTED_CHARS));
        assert_eq!(
            quote_within(&message),
            format!(r#"invalid type: string "{short}", expected i64 at `{short}` end"#)
        );
        assert_eq!(
            quote_within(r#"a "b\"c" d "#),
            r#"a "b\"c" d "#,
            "escaped marks stay inside"
        );
        assert_eq!(quote_within("open \"end"), "open \"end");
        let error = ApiError::model_not_found(&"m".repeat(100_000), &["a".into()]);
        assert!(error.body().to_string().len() < 300);
    }

    #[test]
    fn load_errors_say_when_to_retry() {
        let response = ApiError::queue_full(2).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        let response = ApiError::shutting_down().into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(response.headers().contains_key(header::RETRY_AFTER));
    }
}
