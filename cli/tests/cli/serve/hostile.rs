//! What broken, hostile or impatient clients do, and load: bad JSON and fields, oversized
//! bodies, unknown models and routes, missing keys, garbage on the socket, hanging up
//! mid-stream, a full queue, SIGTERM with work in flight. The server answers each with the right
//! status and error body, and keeps serving; a model that does not load stops it at start-up.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{json, Value};

use redraft_tests::cli::redraft;

use super::client::{refused_start, Server, Start};
use super::{qwen_prompt, PREFIX, SUFFIX};

#[track_caller]
fn openai_error(response: &super::client::Response, status: u16, code: &str) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    let body = response.json();
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    assert!(body["error"]["type"].is_string());
    body
}

#[track_caller]
fn ollama_error(response: &super::client::Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    response.json()["error"]
        .as_str()
        .unwrap_or_else(|| panic!("Ollama's error is a string: {}", response.text()))
        .to_string()
}

/// The server still answers a plain request.
#[track_caller]
fn still_serving(server: &Server) {
    let response = server.post(
        "/v1/completions",
        &json!({"prompt": PREFIX, "max_tokens": 8}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
}

/// A 400 for a body says what is wrong in a client's words: not JSON at all, or which field
/// holds what kind of value where it wants another (the message and `param` name it), or which
/// field is missing. They said "data did not match any variant of untagged enum PromptField",
/// "expected i64", and "not valid JSON" of valid JSON lacking a field.
#[test]
fn a_bad_body_is_named_in_the_clients_words() {
    let server = Server::start(&[]);
    for (path, body, param, says) in [
        (
            "/v1/completions",
            json!({"prompt": 5}),
            "prompt",
            "`prompt` is not what this route takes: expected a string, or a list holding one string",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "stop": 5}),
            "stop",
            "expected a string or a list of strings",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": "ten"}),
            "max_tokens",
            "`max_tokens` is not what this route takes: invalid type: string \"ten\", expected an integer",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "temperature": "hot"}),
            "temperature",
            "expected a number",
        ),
    ] {
        let body = openai_error(&server.post(path, &body), 400, "invalid_json");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{path}: {message}");
        assert_eq!(body["error"]["param"], param, "{body}");
    }
    let body = openai_error(
        &server.post("/v1/edit/completions", &json!({})),
        400,
        "invalid_json",
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("the request body is not what this route takes: missing field `messages`"),
        "{message}"
    );
    let body = openai_error(
        &server.post_raw("/v1/completions", b"{\"prompt\": \"x\",}"),
        400,
        "invalid_json",
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the request body is not valid JSON: "),
        "{message}"
    );
    // Ollama's shape names the field too: `options.stop` inside the options.
    let message = ollama_error(
        &server.post(
            "/api/generate",
            &json!({"prompt": "x", "options": {"stop": 5}, "stream": false}),
        ),
        400,
    );
    assert!(
        message.contains("expected a string or a list of strings"),
        "{message}"
    );
    // A completion needs its prompt: a misspelt one was answered 200 with a middle of nothing.
    for body in [json!({}), json!({"promt": "fn main() {"})] {
        let body = openai_error(&server.post("/v1/completions", &body), 400, "invalid_value");
        assert_eq!(body["error"]["message"], "prompt is required", "{body}");
        assert_eq!(body["error"]["param"], "prompt", "{body}");
    }
    still_serving(&server);
}

#[test]
fn bad_json_and_bad_fields_are_400_in_each_apis_shape() {
    let server = Server::start(&[]);
    for path in [
        "/v1/completions",
        "/v1/fim/completions",
        "/v1/edit/completions",
    ] {
        openai_error(
            &server.post_raw(path, b"{\"prompt\": "),
            400,
            "invalid_json",
        );
        openai_error(
            &server.post_raw(path, b"\xff\xfe not utf-8"),
            400,
            "invalid_json",
        );
        openai_error(&server.post_raw(path, b""), 400, "invalid_json");
    }
    ollama_error(&server.post_raw("/api/generate", b"[1, 2"), 400);
    // serde's derived structs would take an array of the fields in order: a body is an object.
    let array = json!(["redraft-default", PREFIX]).to_string();
    let edit = json!(["redraft-default", [{"role": "user", "content": "x"}]]).to_string();
    for (path, body) in [
        ("/v1/completions", &array),
        ("/v1/fim/completions", &array),
        ("/v1/edit/completions", &edit),
    ] {
        let body = openai_error(&server.post_raw(path, body.as_bytes()), 400, "invalid_json");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("expected a JSON object"),
            "{path}: {message}"
        );
    }
    for (path, body) in [
        ("/api/generate", array.as_str()),
        ("/api/show", r#"["redraft-default"]"#),
        ("/api/generate", r#""fn main() {""#),
        ("/api/show", " null "),
    ] {
        let message = ollama_error(&server.post_raw(path, body.as_bytes()), 400);
        assert!(
            message.contains("expected a JSON object"),
            "{path}: {message}"
        );
    }
    // Nor are the objects inside one: serde would read `[128]` as `num_predict`.
    for (path, body) in [
        (
            "/api/generate",
            json!({"prompt": PREFIX, "options": [128], "stream": false}),
        ),
        (
            "/v1/completions",
            json!({"prompt": PREFIX, "stream": true, "stream_options": [true]}),
        ),
        ("/v1/edit/completions", json!({"messages": [["user", "x"]]})),
        (
            "/v1/edit/completions",
            json!({"messages": [{"role": "user", "content": [["x"]]}]}),
        ),
    ] {
        let answer = server.post(path, &body);
        assert_eq!(answer.status, 400, "{path} {body}: {}", answer.text());
        let text = answer.text();
        assert!(
            text.contains("expected a JSON object") || text.contains("did not match any variant"),
            "{path} {body}: {text}"
        );
    }
    // Where they are objects (or null), they are read.
    let options = json!({"prompt": PREFIX, "options": {"num_predict": 4}, "stream": false});
    assert_eq!(server.post("/api/generate", &options).status, 200);
    let options = json!({"prompt": PREFIX, "options": null, "stream": false});
    assert_eq!(server.post("/api/generate", &options).status, 200);
    let cases = [
        (
            json!({"prompt": PREFIX, "max_tokens": "many"}),
            "invalid_json",
        ),
        (json!({"prompt": PREFIX, "max_tokens": 0}), "invalid_value"),
        (json!({"prompt": PREFIX, "max_tokens": -5}), "invalid_value"),
        (
            json!({"prompt": PREFIX, "temperature": 7.5}),
            "invalid_value",
        ),
        (json!({"prompt": PREFIX, "stop": [1, 2]}), "invalid_json"),
        (
            json!({"prompt": PREFIX, "effort": "maximal"}),
            "invalid_value",
        ),
        (
            json!({"prompt": PREFIX, "echo": true}),
            "unsupported_parameter",
        ),
        (json!({"prompt": {"text": PREFIX}}), "invalid_json"),
    ];
    for (body, code) in cases {
        openai_error(&server.post("/v1/completions", &body), 400, code);
    }
    let message = ollama_error(
        &server.post(
            "/api/generate",
            &json!({"prompt": PREFIX, "options": {"num_predict": -7}}),
        ),
        400,
    );
    assert!(
        message.contains("options.num_predict must be at least 1, or -1 or -2"),
        "{message}"
    );
    // Ollama's -1 is "as long as allowed".
    let unbounded = server.post(
        "/api/generate",
        &json!({"prompt": PREFIX, "stream": false, "options": {"num_predict": -1}}),
    );
    assert_eq!(unbounded.status, 200);
    still_serving(&server);
}

/// A key sent twice is a 400 naming it, at any depth: at the top level serde's derived structs
/// refuse it, and the objects inside one (`options`, `stream_options`, a message, a content part)
/// are read the same way, not through a `serde_json::Value` that would keep the last of the two
/// (`num_predict` 1 and 2 answered as 2).
#[test]
fn a_key_sent_twice_is_400_at_any_depth() {
    let server = Server::start(&[]);
    let prompt = serde_json::to_string(PREFIX).unwrap();
    let edit = r#""<|current_file_content|>\ncurrent_file_path: a.rs\n<|code_to_edit|>\nfn a() {}\n<|/code_to_edit|>\n<|/current_file_content|>\n""#;
    for (path, body, key) in [
        (
            "/v1/completions",
            format!(r#"{{"prompt": {prompt}, "prompt": "let v = "}}"#),
            "prompt",
        ),
        (
            "/api/generate",
            format!(
                r#"{{"prompt": {prompt}, "stream": false, "options": {{"num_predict": 1, "num_predict": 2}}}}"#
            ),
            "num_predict",
        ),
        (
            "/v1/completions",
            format!(
                r#"{{"prompt": {prompt}, "stream": true, "stream_options": {{"include_usage": true, "include_usage": false}}}}"#
            ),
            "include_usage",
        ),
        (
            "/v1/edit/completions",
            format!(r#"{{"messages": [{{"role": "user", "role": "user", "content": {edit}}}]}}"#),
            "role",
        ),
        (
            "/v1/edit/completions",
            format!(
                r#"{{"messages": [{{"role": "user", "content": [{{"type": "text", "text": {edit}, "text": "x"}}]}}]}}"#
            ),
            "text",
        ),
    ] {
        let response = server.post_raw(path, body.as_bytes());
        let message = if path.starts_with("/api/") {
            ollama_error(&response, 400)
        } else {
            let body = openai_error(&response, 400, "invalid_json");
            body["error"]["message"].as_str().unwrap().to_string()
        };
        assert!(
            message.contains(&format!("duplicate field `{key}`")),
            "{path} {body}: {message}"
        );
    }
    // Each of them once is read (the edit's tags are its own business: 200 or 422, not 400).
    let once = format!(
        r#"{{"prompt": {prompt}, "stream": false, "options": {{"num_predict": 1, "seed": 3}}}}"#
    );
    assert_eq!(
        server.post_raw("/api/generate", once.as_bytes()).status,
        200
    );
    let once = format!(
        r#"{{"messages": [{{"role": "user", "content": [{{"type": "text", "text": {edit}}}]}}]}}"#
    );
    let answer = server.post_raw("/v1/edit/completions", once.as_bytes());
    assert_ne!(answer.status, 400, "{}", answer.text());
    still_serving(&server);
}

#[test]
fn oversized_bodies_are_413() {
    let server = Server::start(&["--max-body", "2000"]);
    let big = json!({"prompt": "x".repeat(5000)});
    let body = openai_error(
        &server.post("/v1/completions", &big),
        413,
        "request_too_large",
    );
    assert!(body["error"]["message"].as_str().unwrap().contains("2000"));
    ollama_error(&server.post("/api/generate", &big), 413);
    // A length header far past the limit is refused before any body is read.
    let mut socket = server.connect();
    socket
        .write_all(
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 999999999\r\n\r\n",
        )
        .unwrap();
    let mut head = [0u8; 12];
    socket.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    still_serving(&server);
}

#[test]
fn unknown_models_are_404_model_not_found() {
    let server = Server::start(&[]);
    for path in ["/v1/completions", "/v1/fim/completions"] {
        let body = openai_error(
            &server.post(path, &json!({"model": "gpt-4", "prompt": PREFIX})),
            404,
            "model_not_found",
        );
        assert_eq!(body["error"]["param"], "model");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("qwen2.5-coder:redraft"));
    }
    openai_error(
        &server.post(
            "/v1/edit/completions",
            &json!({"model": "mercury-coder", "messages": []}),
        ),
        404,
        "model_not_found",
    );
    let message = ollama_error(
        &server.post(
            "/api/generate",
            &json!({"model": "qwen2.5-coder:1.5b", "prompt": PREFIX}),
        ),
        404,
    );
    assert!(message.contains("qwen2.5-coder:1.5b"));
    // Absent or empty: the served model.
    for model in [Value::Null, json!("")] {
        let response = server.post(
            "/v1/completions",
            &json!({"model": model, "prompt": PREFIX, "max_tokens": 4}),
        );
        assert_eq!(response.status, 200);
        assert_eq!(response.json()["model"], "redraft-default");
    }
}

#[test]
fn unknown_routes_and_methods_have_json_errors() {
    let server = Server::start(&[]);
    openai_error(&server.get("/v1/chat/completions"), 404, "unknown_route");
    // A chat request is told what to send instead.
    let chat = server.post(
        "/v1/chat/completions",
        &serde_json::json!({"model": "redraft-default", "messages": [{"role": "user", "content": "hi"}]}),
    );
    let body = openai_error(&chat, 404, "unknown_route");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/v1/completions") && message.contains("no chat"),
        "{message}"
    );
    openai_error(&server.get("/v1/completions"), 405, "method_not_allowed");
    ollama_error(&server.get("/api/pull"), 404);
    assert_eq!(server.get("/").status, 200);
    // Unknown paths share one label, whatever they are.
    assert_eq!(
        server.metric("redraft_http_requests_total{endpoint=\"other\",status=\"404\"}"),
        3.0
    );
    assert_eq!(
        server.metric("redraft_http_requests_total{endpoint=\"/v1/completions\",status=\"405\"}"),
        1.0
    );
    // HEAD: hyper never takes the answer's body, and the request is no hang-up.
    let head = format!(
        "HEAD /health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    let answer = server.raw(head.as_bytes());
    assert_eq!(answer.status, 200);
    assert!(answer.body.is_empty());
    let health = |status: u16| {
        server.metric(&format!(
            "redraft_http_requests_total{{endpoint=\"/health\",status=\"{status}\"}}"
        ))
    };
    assert_eq!((health(200), health(499)), (1.0, 0.0));
    // So is the Ollama libraries' `chat` (ollama-python's bytes), in Ollama's shape.
    let chat = server.post_raw(
        "/api/chat",
        br#"{"model":"qwen2.5-coder:redraft","stream":false,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    let message = ollama_error(&chat, 404);
    assert!(
        message.contains("/api/generate") && message.contains("no chat"),
        "{message}"
    );
}

#[test]
fn the_api_key_is_required_as_a_bearer_token() {
    for start in [
        Start {
            args: &["--api-key", "s3cret"],
            ..Start::default()
        },
        Start {
            env: &[("REDRAFT_API_KEY", "s3cret")],
            ..Start::default()
        },
    ] {
        let server = Server::start_with(start);
        let body = json!({"prompt": PREFIX, "max_tokens": 4}).to_string();
        let ask = |headers: &[(&str, &str)], path: &str| {
            let headers = [headers, &[("Content-Type", "application/json")]].concat();
            server.request("POST", path, &headers, body.as_bytes())
        };
        let missing = ask(&[], "/v1/completions");
        openai_error(&missing, 401, "invalid_api_key");
        // The scheme to answer with (RFC 9110 section 15.5.2).
        assert_eq!(missing.header("www-authenticate"), Some("Bearer"));
        openai_error(
            &ask(&[("Authorization", "Bearer wrong")], "/v1/completions"),
            401,
            "invalid_api_key",
        );
        openai_error(
            &ask(&[("Authorization", "s3cret")], "/v1/completions"),
            401,
            "invalid_api_key",
        );
        let ollama = ask(&[], "/api/generate");
        ollama_error(&ollama, 401);
        assert_eq!(ollama.header("www-authenticate"), Some("Bearer"));
        let models = server.get("/v1/models");
        assert_eq!(models.status, 401);
        assert_eq!(models.header("www-authenticate"), Some("Bearer"));
        assert_eq!(
            ask(&[("Authorization", "Bearer s3cret")], "/v1/completions").status,
            200
        );
        // Load balancers probe /health without a key.
        assert_eq!(server.get("/health").status, 200);
    }
}

/// Bytes no HTTP client sends: the server answers (400) or hangs up, and serves the next
/// connection. A fixed seed, so a failure reproduces.
#[test]
fn garbage_on_the_socket_leaves_the_server_serving() {
    let server = Server::start(&[]);
    let mut seed: u64 = 0x5eed;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect()
    };
    let mut payloads: Vec<Vec<u8>> = (0..20).map(|i| noise(1 + i * 97)).collect();
    payloads.extend([
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"POST /v1/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n".to_vec(),
        b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
        b"\r\n\r\n\r\n".to_vec(),
        [b"GET /".as_slice(), &[b'a'; 100_000], b" HTTP/1.1\r\n\r\n"].concat(),
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\"pro".to_vec(),
    ]);
    for payload in payloads {
        let mut socket = server.connect();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = socket.write_all(&payload);
        let _ = socket.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer);
        if !answer.is_empty() {
            let head = String::from_utf8_lossy(&answer[..answer.len().min(12)]).to_string();
            assert!(
                head.starts_with("HTTP/1.1 4"),
                "garbage got {head:?} from {:?}",
                String::from_utf8_lossy(&payload[..payload.len().min(40)])
            );
        }
    }
    still_serving(&server);
    assert_eq!(server.get("/health").json()["status"], "ok");
}

/// A client that hangs up cancels its job at the next denoising step (slow steps here, so the
/// job is still running): streamed or not, the server counts the job as cancelled and the
/// request as 499 ("client closed request"), and goes on.
#[test]
fn a_client_that_disconnects_mid_stream_cancels_its_job() {
    let server = Server::start_with(Start {
        step_delay_ms: Some(150),
        ..Start::default()
    });
    let cancelled = "redraft_jobs_total{kind=\"fim\",outcome=\"cancelled\"}";
    let body = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 32, "stream": true,
                      "diffusing": true})
    .to_string();
    let mut stream = server.open(
        "POST",
        "/v1/fim/completions",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(stream.status, 200);
    // One draft arrives: the job is running. Then hang up.
    let first = stream.event().unwrap();
    assert!(first.contains("diffusion_meta"), "{first}");
    drop(stream);
    server.wait_for_metric(cancelled, 1.0);
    assert_eq!(server.metric("redraft_running_jobs"), 0.0);
    let requests = |endpoint: &str, status: u16| {
        format!("redraft_http_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}}")
    };
    server.wait_for_metric(&requests("/v1/fim/completions", 499), 1.0);
    assert_eq!(server.metric(&requests("/v1/fim/completions", 200)), 0.0);
    // Not streamed: the handler is dropped with the connection.
    let body = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 32}).to_string();
    let waiting = server.open_later("POST", "/v1/completions", body.as_bytes());
    server.wait_for_metric("redraft_running_jobs", 1.0);
    drop(waiting);
    server.wait_for_metric(cancelled, 2.0);
    server.wait_for_metric(&requests("/v1/completions", 499), 1.0);
    still_serving(&server);
    assert_eq!(
        server.metric("redraft_jobs_total{kind=\"fim\",outcome=\"answered\"}"),
        1.0
    );
}

/// With the model busy (a job of two candidates, which fills a `--max-batch 2` batch, or any job
/// one at a time) and one job queued (`--max-queue 1`), the next request is refused with 429
/// and `Retry-After`, and the others are still answered.
#[test]
fn a_full_queue_answers_429_with_retry_after() {
    for max_batch in ["1", "2"] {
        let server = Server::start_with(Start {
            args: &["--max-queue", "1", "--max-batch", max_batch],
            step_delay_ms: Some(300),
            ..Start::default()
        });
        // One token per step: at least two steps (content, then the end), so the busy job
        // outlasts the requests below.
        let busy = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16, "n": 2,
                          "effort": "high"});
        let busy = server.open_later("POST", "/v1/completions", busy.to_string().as_bytes());
        server.wait_for_metric("redraft_running_jobs", 1.0);
        let body = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16}).to_string();
        let queued = server.open_later("POST", "/v1/completions", body.as_bytes());
        server.wait_for_metric("redraft_queue_depth", 1.0);
        let refused = server.post_raw("/v1/completions", body.as_bytes());
        openai_error(&refused, 429, "queue_full");
        assert!(refused
            .header("retry-after")
            .is_some_and(|s| s.parse::<u64>().is_ok()));
        let ollama = server.post_raw("/api/generate", body.as_bytes());
        ollama_error(&ollama, 429);
        assert_eq!(busy.finish().status, 200);
        assert_eq!(queued.finish().status, 200);
        assert_eq!(
            server.metric("redraft_jobs_total{kind=\"fim\",outcome=\"rejected_full\"}"),
            2.0,
            "--max-batch {max_batch}"
        );
    }
}

/// SIGTERM with a job running: it is answered, the server stops accepting and exits 0.
#[test]
fn sigterm_finishes_in_flight_work_and_exits_0() {
    let server = Server::start_with(Start {
        step_delay_ms: Some(100),
        ..Start::default()
    });
    let addr = server.addr;
    let body = json!({"prompt": qwen_prompt(), "max_tokens": 16}).to_string();
    let running = server.open_later("POST", "/v1/completions", body.as_bytes());
    server.wait_for_metric("redraft_running_jobs", 1.0);
    let status = {
        let pid = server.pid() as i32;
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let answer = running.finish();
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert!(answer.json()["choices"][0]["text"].is_string());
        server.terminate()
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(std::net::TcpStream::connect(addr).is_err());
}

/// SIGTERM while a large answer is still being written to a client that reads slowly (a small
/// receive window, nothing read yet): the handler is done and hyper has taken the whole body
/// in one frame, most of it not yet in the socket. It is all written before the connection
/// closes, not cut where the socket's buffers ended.
#[test]
fn sigterm_finishes_writing_a_large_answer_to_a_slow_reader() {
    let server = Server::start(&["--max-body", "64000000", "--shutdown-grace-ms", "60000"]);
    // A Zeta 2 prompt whose region is about 16 MB: the answer is the whole region, well past
    // what the kernel's buffers hold (a few MB).
    let region: String = (0..600_000)
        .map(|i| format!("fn f{i}() -> u32 {{ {i} }}\n"))
        .collect();
    let prompt = format!(
        "<|file_sep|>src/lib.rs\n<|fim_prefix|>fn area(w: u32, h: u32) -> u32 {{\n<|fim_suffix|>\n<|fim_middle|><<<<<<< CURRENT\n    w<|user_cursor|> * h\n}}\n{region}=======\n"
    );
    let body = json!({"prompt": prompt, "max_tokens": 64}).to_string();
    let answering =
        server.open_later_with_receive_buffer(16 << 10, "POST", "/v1/completions", body.as_bytes());
    // Counted once hyper has taken the response body's last frame.
    server.wait_for_metric(
        "redraft_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"}",
        1.0,
    );
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
    let answer = answering.finish();
    assert_eq!(answer.status, 200);
    let length: usize = answer.header("content-length").unwrap().parse().unwrap();
    assert!(length > 16_000_000, "{length}");
    assert_eq!(answer.body.len(), length, "the answer was cut off");
    let text = answer.json()["choices"][0]["text"].as_str().unwrap().len();
    assert!(
        text > region.len() / 2,
        "the region comes back: {text} bytes"
    );
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
}

/// SIGTERM with a job that outlasts the grace period (`--shutdown-grace-ms`): past it the job is
/// cancelled at its next step, its client gets a 503 saying so, and the server exits 0 long
/// before the job would have ended.
#[test]
fn sigterm_cancels_work_past_the_grace_period() {
    let server = Server::start_with(Start {
        args: &["--shutdown-grace-ms", "200"],
        step_delay_ms: Some(1500),
        ..Start::default()
    });
    let body = json!({"prompt": qwen_prompt(), "max_tokens": 32}).to_string();
    let running = server.open_later("POST", "/v1/completions", body.as_bytes());
    server.wait_for_metric("redraft_running_jobs", 1.0);
    let started = std::time::Instant::now();
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
    let answer = running.finish();
    openai_error(&answer, 503, "shutting_down");
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
    // One step's delay after the grace period, not the job's steps nor the default 10 s.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn health_reports_the_batching_settings() {
    let settings = |health: &Value| {
        (
            health["max_batch"].clone(),
            health["prompt_chunk"].clone(),
            health["cache_memory_mib"].clone(),
            health["idle_refresh_ms"].clone(),
        )
    };
    let health = Server::start(&[]).get("/health").json();
    assert_eq!(
        settings(&health),
        (json!(8), json!(256), json!(1024), json!(200))
    );
    assert_eq!(
        health["fim"], "local",
        "no --backend: the local model answers FIM"
    );
    let health = Server::start(&[
        "--max-batch",
        "3",
        "--prompt-chunk",
        "0",
        "--cache-memory",
        "64",
        "--idle-refresh-ms",
        "0",
    ])
    .get("/health")
    .json();
    assert_eq!(
        settings(&health),
        (json!(3), Value::Null, json!(64), Value::Null)
    );
}

/// A model that does not load leaves nothing to answer with: the server says why and exits 1
/// before it listens, as `complete` does (docs/cli.md), rather than listening to answer 503.
/// (With `--backend` it starts without one: `backend.rs`.)
#[test]
fn a_model_that_does_not_load_stops_the_server_before_it_listens() {
    let (status, stderr) = refused_start(&["--model", "/nonexistent/model-dir"], &[]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("Error: the model did not load")
            && stderr.contains("/nonexistent/model-dir")
            && stderr.contains("--backend"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");
}

#[test]
fn binding_beyond_loopback_without_a_key_warns() {
    let open = Server::start(&["--bind", "0.0.0.0:0"]);
    assert!(open.stderr().contains("warning"), "{}", open.stderr());
    drop(open);
    let keyed = Server::start(&["--bind", "0.0.0.0:0", "--api-key", "k"]);
    assert!(!keyed.stderr().contains("warning"), "{}", keyed.stderr());
    let local = Server::start(&[]);
    assert!(!local.stderr().contains("warning"));
}

/// `--bind` takes a name (`localhost` is 127.0.0.1) or a port alone as well as an address; a
/// value that is none of them is a command-line mistake (exit 2) naming the shapes it takes.
#[test]
fn bind_takes_localhost_a_port_alone_or_an_address() {
    for bind in ["localhost:0", "LOCALHOST:0", "0"] {
        let server = Server::start(&["--bind", bind]);
        assert!(server.addr.ip().is_loopback(), "{bind}: {}", server.addr);
        assert!(server.addr.is_ipv4(), "{bind}: {}", server.addr);
        assert_eq!(server.get("/health").status, 200, "{bind}");
    }
    for (bind, says) in [
        ("localhost:notaport", "`notaport` is not a port"),
        ("localhost:70000", "`70000` is not a port"),
        (":8717", "no host before `:8717`"),
        ("localhost", "expected IP:PORT, NAME:PORT or PORT"),
        // An IPv6 address without a port: "`1]` is not a port" (which went on "expected ...").
        (
            "[::1]",
            "'--bind <BIND>': expected IP:PORT, NAME:PORT or PORT",
        ),
        (
            "::1",
            "'--bind <BIND>': expected IP:PORT, NAME:PORT or PORT",
        ),
    ] {
        let out = redraft(&["serve", "--bind", bind], "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bind}: {stderr}");
        assert!(stderr.contains(says), "{bind}: {stderr}");
    }
    // `--host` and `--port`, as llama.cpp's server takes the address; not with `--bind`.
    for args in [
        &["--port", "0"][..],
        &["--host", "localhost", "--port", "0"],
        &["--host", "127.0.0.1", "--port", "0"],
    ] {
        let server = Server::start(args);
        assert!(server.addr.ip().is_loopback(), "{args:?}: {}", server.addr);
        assert_eq!(server.get("/health").status, 200, "{args:?}");
    }
    for (args, says) in [
        (&["--bind", "0", "--port", "0"][..], "cannot be used with"),
        (
            &["--host", "", "--port", "0"],
            "--host : no host before `:0`",
        ),
        (&["--port", "70000"], "70000 is not in 0..=65535"),
        (&["--port", "-1"], "-1 is not in 0..=65535"),
        // A negative count is read as a number, so the range is what the error says.
        (&["--max-batch", "-1"], "-1 is not in 1..=64"),
        (&["--header-timeout-ms", "-5"], "-5 is not in 1.."),
        (&["--prompt-chunk", "-1"], "-1 is not in 0.."),
        (&["--cache-memory", "-1"], "-1 is not in 0.."),
        (&["--idle-refresh-ms", "-200"], "-200 is not in 0.."),
        (&["--shutdown-grace-ms", "-1"], "-1 is not in 0.."),
        // A timeout of 0 would cut every connection off at once: refused, not read as 1 ms.
        (&["--body-timeout-ms", "0"], "0 is not in 1.."),
        (&["--write-timeout-ms", "0"], "0 is not in 1.."),
    ] {
        let out = redraft(&[&["serve"][..], args].concat(), "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let out = redraft(&["serve", "--max-body", "0"], "");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
