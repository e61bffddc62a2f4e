//! What the OpenAI SDKs (openai-python 3.63, openai-node 6.49) and ollama-python (0.6.3) send,
//! byte for byte as they serialise it: a parameter asking for something the server does not do
//! is a 400 in the API's error shape naming it, the values the SDKs and editors send by default
//! still work, `ollama.ps()` has its `/api/ps`, and an SSE stream with nothing to send for a
//! while sends comments the SDKs' parsers skip.

use serde_json::{json, Value};

use super::client::{Server, Start};
use super::{PREFIX, SUFFIX};

/// `PREFIX` as a JSON string, for bodies written as the SDKs write them.
fn prompt() -> String {
    serde_json::to_string(PREFIX).unwrap()
}

/// An OpenAI-shaped 400 with `code`, naming `param`, whose message says why.
#[track_caller]
fn refused(response: &super::client::Response, code: &str, param: &str, says: &str) {
    assert_eq!(response.status, 400, "{param}: {}", response.text());
    let error = &response.json()["error"];
    assert_eq!(error["param"], param, "{error}");
    assert_eq!(error["type"], "invalid_request_error", "{error}");
    assert_eq!(error["code"], code, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(says), "{param}: {message}");
}

/// `logprobs` (openai-python's `logprobs=2`; chat-style clients' `true`), `top_logprobs`,
/// `best_of` past `n` and `echo` ask for what the server does not do: each is refused naming
/// itself (code `unsupported_parameter`, as OpenAI's own), on `/v1/completions` and Mercury's
/// `/v1/fim/completions`, rather than answered with
/// `logprobs: null` or one decoding per candidate. What asks for nothing (`null`, `0`, `false`,
/// `best_of` 1 or equal to `n`) is answered.
#[test]
fn what_the_server_does_not_do_is_refused_naming_the_parameter() {
    let server = Server::start(&[]);
    let p = prompt();
    let asked = [
        (
            format!(r#"{{"model":"redraft-default","prompt":{p},"logprobs":2,"max_tokens":8}}"#),
            "logprobs",
            "logprobs is not supported",
        ),
        (
            format!(r#"{{"prompt":{p},"logprobs":true,"max_tokens":8}}"#),
            "logprobs",
            "no token log probabilities",
        ),
        (
            format!(r#"{{"prompt":{p},"top_logprobs":3,"max_tokens":8}}"#),
            "top_logprobs",
            "top_logprobs is not supported",
        ),
        (
            format!(r#"{{"model":"redraft-default","prompt":{p},"best_of":2,"max_tokens":8}}"#),
            "best_of",
            "best_of is not supported",
        ),
        (
            format!(r#"{{"prompt":{p},"best_of":3,"n":2,"max_tokens":8}}"#),
            "best_of",
            "not the best of 3",
        ),
        (
            format!(r#"{{"prompt":{p},"echo":true,"max_tokens":8}}"#),
            "echo",
            "echo is not supported",
        ),
    ];
    for route in ["/v1/completions", "/v1/fim/completions"] {
        for (body, param, says) in &asked {
            let response = server.post_raw(route, body.as_bytes());
            refused(&response, "unsupported_parameter", param, says);
        }
    }
    let nothing = [
        json!({"logprobs": null, "top_logprobs": null, "best_of": null, "echo": null}),
        json!({"logprobs": 0, "top_logprobs": 0, "best_of": 1, "echo": false}),
        json!({"logprobs": false}),
        json!({"best_of": 2, "n": 2}),
        json!({"best_of": 1, "n": 2}),
    ];
    for route in ["/v1/completions", "/v1/fim/completions"] {
        for fields in &nothing {
            let mut body = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 4});
            body.as_object_mut()
                .unwrap()
                .extend(fields.as_object().unwrap().clone());
            let answered = server.post(route, &body);
            assert_eq!(
                answered.status,
                200,
                "{route} {fields}: {}",
                answered.text()
            );
            assert!(answered.json()["choices"][0]["text"].is_string());
        }
    }
}

/// `stream_options` belongs to a stream: openai-python's `stream_options={...}` without
/// `stream=True` is refused as OpenAI refuses it, on both OpenAI-shaped FIM routes; `null` (or
/// none) is no stream options, and with `stream: true` they are read as before.
#[test]
fn stream_options_without_a_stream_is_refused() {
    let server = Server::start(&[]);
    let p = prompt();
    let without = format!(
        r#"{{"model":"redraft-default","prompt":{p},"max_tokens":8,"stream_options":{{"include_usage":true}}}}"#
    );
    let not_streamed = format!(
        r#"{{"prompt":{p},"max_tokens":8,"stream":false,"stream_options":{{"include_usage":false}}}}"#
    );
    for route in ["/v1/completions", "/v1/fim/completions"] {
        for body in [&without, &not_streamed] {
            refused(
                &server.post_raw(route, body.as_bytes()),
                "invalid_value",
                "stream_options",
                "stream_options is only allowed when stream is true",
            );
        }
        let none = format!(r#"{{"prompt":{p},"max_tokens":8,"stream_options":null}}"#);
        let answered = server.post_raw(route, none.as_bytes());
        assert_eq!(answered.status, 200, "{route}: {}", answered.text());
        let streamed = format!(
            r#"{{"prompt":{p},"max_tokens":8,"stream":true,"stream_options":{{"include_usage":true}}}}"#
        );
        let answered = server.post_raw(route, streamed.as_bytes());
        assert_eq!(answered.status, 200, "{route}: {}", answered.text());
        assert!(answered.text().contains("\"usage\""), "{route}");
    }
}

/// ollama-python's `format="json"`, `format={schema}`, `think=True` and `logprobs=True` ask for a
/// constrained answer, a model's thinking and log probabilities: refused in Ollama's shape, the
/// message naming the field (for `think`, Ollama's own "does not support thinking", which
/// clients look for to retry without it). The default values (`think=False`, `format=""`,
/// `images=[]`, ...) are answered, and a load request is refused as a generation is.
#[test]
fn ollama_refuses_format_think_and_logprobs() {
    let server = Server::start(&[]);
    let p = prompt();
    let asked = [
        (
            format!(
                r#"{{"model":"qwen2.5-coder:redraft","stream":false,"format":"json","prompt":{p}}}"#
            ),
            "format is not supported",
        ),
        (
            format!(
                r#"{{"model":"qwen2.5-coder:redraft","stream":false,"format":{{"type":"object"}},"prompt":{p}}}"#
            ),
            "format is not supported",
        ),
        (
            format!(
                r#"{{"model":"qwen2.5-coder:redraft","stream":false,"prompt":{p},"think":true}}"#
            ),
            "\"qwen2.5-coder:redraft\" does not support thinking: leave think out",
        ),
        (
            format!(r#"{{"stream":false,"prompt":{p},"think":"high"}}"#),
            "\"redraft-default\" does not support thinking",
        ),
        (
            format!(
                r#"{{"model":"qwen2.5-coder:redraft","stream":false,"prompt":{p},"logprobs":true,"top_logprobs":2}}"#
            ),
            "logprobs is not supported",
        ),
        (
            format!(r#"{{"stream":false,"prompt":{p},"top_logprobs":2}}"#),
            "top_logprobs is not supported",
        ),
        (
            format!(r#"{{"stream":false,"prompt":{p},"images":["iVBORw0KGgo="]}}"#),
            "images is not supported",
        ),
        (
            r#"{"model":"qwen2.5-coder:redraft","think":true}"#.to_string(),
            "does not support thinking",
        ),
    ];
    for (body, says) in asked {
        let response = server.post_raw("/api/generate", body.as_bytes());
        assert_eq!(response.status, 400, "{body}: {}", response.text());
        let error = response.json();
        let message = error["error"].as_str().unwrap_or_else(|| panic!("{error}"));
        assert!(message.contains(says), "{body}: {message}");
    }
    let nothing = format!(
        r#"{{"model":"qwen2.5-coder:redraft","stream":false,"prompt":{p},"think":false,"format":"","logprobs":false,"top_logprobs":0,"images":[],"options":{{"num_predict":4}}}}"#
    );
    let answered = server.post_raw("/api/generate", nothing.as_bytes());
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert!(answered.json()["response"].is_string());
    let nulls = json!({"prompt": PREFIX, "stream": false, "think": null, "format": null,
                       "logprobs": null, "top_logprobs": null, "images": null,
                       "options": {"num_predict": 4}});
    assert_eq!(server.post("/api/generate", &nulls).status, 200);
}

/// `ollama.ps()` (`GET /api/ps`): the model loaded, once, under its id, described as `/api/tags`
/// lists that name and `/api/show` shows it; it never unloads, so it expires centuries ahead,
/// as Ollama writes a model kept loaded for good.
#[test]
fn ps_lists_the_loaded_model_as_tags_and_show_describe_it() {
    let server = Server::start(&[]);
    let response = server.get("/api/ps");
    assert_eq!(response.status, 200, "{}", response.text());
    let ps = response.json();
    let models = ps["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{ps}");
    let loaded = &models[0];
    assert_eq!(loaded["name"], "redraft-default");
    assert_eq!(loaded["model"], "redraft-default");
    let tags = server.get("/api/tags").json();
    let listed = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "redraft-default")
        .unwrap();
    for key in ["size", "digest", "details"] {
        assert_eq!(loaded[key], listed[key], "{key}: {ps} / {tags}");
    }
    let shown = server.post("/api/show", &json!({"model": "redraft-default"}));
    assert_eq!(loaded["details"], shown.json()["details"]);
    let size = loaded["size"].as_u64().unwrap();
    assert!(size > 0, "{ps}");
    let vram = loaded["size_vram"].as_u64().unwrap();
    assert!(vram == 0 || vram == size, "{ps}");
    let year: u32 = loaded["expires_at"].as_str().unwrap()[..4].parse().unwrap();
    assert!(year > 2200, "{ps}");
    assert_eq!(
        loaded["context_length"],
        shown.json()["model_info"]["qwen2.context_length"]
    );
}

/// A streamed completion that has nothing to send for a while sends `: keep-alive` comments,
/// which SSE parsers skip, so a client's read timeout or a proxy's idle timeout does not end it;
/// the events after them are the answer's as ever, ending with `[DONE]`. Every denoising step
/// here is followed by a pause twice `KEEP_ALIVE_INTERVAL` (3 s), so the answer comes at least
/// one interval after the first comment is due.
#[test]
fn a_silent_sse_stream_sends_keep_alive_comments() {
    let server = Server::start_with(Start {
        step_delay_ms: Some(6000),
        ..Start::default()
    });
    let body = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 2, "effort": "high",
                      "stream": true})
    .to_string();
    let mut stream = server.open(
        "POST",
        "/v1/completions",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(stream.status, 200);
    let mut lines = Vec::new();
    while let Some(line) = stream.line() {
        lines.push(line);
    }
    let first_data = lines.iter().position(|l| l.starts_with("data: ")).unwrap();
    let comments = lines[..first_data]
        .iter()
        .filter(|l| l.as_str() == ": keep-alive")
        .count();
    assert!(comments >= 1, "{lines:?}");
    // Each comment is an event of its own: a line, then the blank line that ends it.
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with(':') {
            assert_eq!(line, ": keep-alive");
            assert_eq!(lines[i + 1], "", "{lines:?}");
        }
    }
    let data: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{lines:?}");
    for chunk in &data[..data.len() - 1] {
        let chunk: Value = serde_json::from_str(chunk).unwrap();
        assert_eq!(chunk["object"], "text_completion");
    }
}
