//! Errors as HTTP clients parse them. OpenAI-shaped routes answer
//! `{"error": {"message", "type", "param", "code"}}` (what OpenAI's SDKs, Zed and Inception's
//! clients read); Ollama-shaped routes (`/api/...`) answer `{"error": "message"}`, which is what
//! Ollama itself sends and its client libraries read. Either way the status code says whose
//! fault it is: 4xx for the request, 429/503 (with `Retry-After`) for load and shutdown, and
//! 500 only for a bug of ours, never for anything a client sent.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

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

    /// A body that is not JSON, or not the JSON this route takes (400).
    pub fn bad_json(err: &serde_json::Error) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_json",
            format!("the request body is not valid JSON for this route: {err}"),
        )
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

    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "missing or wrong API key: send it as `Authorization: Bearer KEY`".into(),
        )
    }

    pub fn unknown_route(method: &str, path: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "unknown_route",
            format!("no route {method} {path} (see the README's \"Serving over HTTP\" for the endpoints)"),
        )
    }

    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method_not_allowed",
            format!("{path} does not take {method}"),
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
                    "model `{asked}` is not served here; use one of: {}",
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
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }}),
            Dialect::Ollama => json!({"error": self.message}),
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
