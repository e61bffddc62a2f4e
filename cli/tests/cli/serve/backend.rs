//! `redraft serve --backend URL`: every FIM route's request is planned here, filled by a remote
//! OpenAI-compatible completions server in the chosen template and cleaned here, next edits
//! stay on the local model, a backend that fails costs that request (a 502 with the backend's
//! message) and not the server, and the `--backend-*` flags need `--backend`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use redraft_tests::refused::RefusedPort;
use serde_json::{json, Value};

use super::client::{refused_start, Server, Start};
use super::{qwen_prompt, qwen_stops, PREFIX, SUFFIX};

/// What the backends here write for the middle: `finish` keeps its first line.
const MIDDLE: &str = "a + b\n}\n\nfn sub(a: u32, b: u32) -> u32 {";

/// Mercury's tagged next-edit message, as Zed writes it.
const EDIT_MESSAGE: &str = "<|current_file_content|>\ncurrent_file_path: src/lib.rs\n<|code_to_edit|>\nfn area(w: u32, h: u32) -> u32 {\n    width<|cursor|> * height\n}\n\n<|/code_to_edit|>\n\n<|/current_file_content|>\n<|edit_diff_history|>\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-fn area(width: u32, height: u32) -> u32 {\n+fn area(w: u32, h: u32) -> u32 {\n\n<|/edit_diff_history|>\n";

/// The completions requests `seen` holds (the fake also keeps a `null` for any request that is
/// not one, such as a models listing).
fn completions(seen: &Mutex<Vec<Value>>) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|body| !body.is_null())
        .cloned()
        .collect()
}

#[test]
fn fim_routes_are_filled_by_the_backend_in_its_template_and_next_edits_stay_local() {
    let (url, seen) = redraft_tests::fake_openai::start(MIDDLE);
    let server = Server::start(&[
        "--backend",
        &url,
        "--backend-model",
        "fake-coder",
        "--backend-template",
        "starcoder",
    ]);
    assert!(
        server.stderr().contains("FIM requests go to the backend"),
        "{}",
        server.stderr()
    );
    let health = server.get("/health").json();
    assert_eq!(health["fim"], "backend", "{health}");
    assert!(
        !health.to_string().contains(&url),
        "the open route names no backend address: {health}"
    );

    // Zed's request: a Qwen-wrapped prompt, split here, sent on in the backend's template.
    let response = server.post(
        "/v1/completions",
        &json!({"model": "qwen2.5-coder:redraft", "prompt": qwen_prompt(),
                "max_tokens": 48, "stop": qwen_stops()}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(
        body["choices"][0]["text"], "a + b",
        "the backend's middle, cleaned by the same finish as a local one: {body}"
    );
    assert_eq!(body["usage"]["completion_tokens"], 5, "the backend's usage");
    let sent = completions(&seen);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0]["model"], "fake-coder");
    assert_eq!(sent[0]["max_tokens"], 48);
    let prompt = sent[0]["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with(&format!("<fim_prefix>{PREFIX}<fim_suffix>\n}}\n"))
            && prompt.ends_with("<fim_middle>"),
        "StarCoder's template around the request's prefix and suffix: {prompt:?}"
    );
    assert!(prompt.contains("fn main() {"), "{prompt:?}");

    // The Ollama and Mercury FIM routes go the same way.
    let ollama = server.post(
        "/api/generate",
        &json!({"prompt": PREFIX, "suffix": SUFFIX, "stream": false}),
    );
    assert_eq!(ollama.status, 200, "{}", ollama.text());
    assert_eq!(ollama.json()["response"], "a + b");
    let mercury = server.post(
        "/v1/fim/completions",
        &json!({"prompt": PREFIX, "suffix": SUFFIX}),
    );
    assert_eq!(mercury.status, 200, "{}", mercury.text());
    assert_eq!(mercury.json()["choices"][0]["text"], "a + b");
    assert_eq!(completions(&seen).len(), 3);

    // A next edit runs on the local model: the backend hears nothing of it.
    let edit = server.post(
        "/v1/edit/completions",
        &json!({"messages": [{"role": "user", "content": EDIT_MESSAGE}]}),
    );
    assert_eq!(edit.status, 200, "{}", edit.text());
    assert_eq!(edit.json()["object"], "edit.completion");
    assert_eq!(
        completions(&seen).len(),
        3,
        "a next edit went to the backend"
    );
}

/// Without a local model a server with a backend still serves FIM (its `/health` is a 200 that
/// says `degraded`, not a 503); next edits are 503.
#[test]
fn without_a_local_model_fim_requests_still_go_to_the_backend_and_next_edits_are_503() {
    let (url, seen) = redraft_tests::fake_openai::start(MIDDLE);
    let server = Server::start(&["--model", "/nonexistent/model-dir", "--backend", &url]);
    let health = server.get("/health");
    assert_eq!(health.status, 200, "FIM is served: {}", health.text());
    let health = health.json();
    assert_eq!(health["status"], "degraded", "{health}");
    let why = health["error"].as_str().unwrap();
    assert!(
        why.contains("next edits") && why.contains("nonexistent"),
        "{why}"
    );
    let response = server.post(
        "/v1/completions",
        &json!({"prompt": PREFIX, "suffix": SUFFIX}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["choices"][0]["text"], "a + b");
    let sent = completions(&seen);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(
        sent[0]["max_tokens"], 64,
        "the default length, not one capped by the missing local model's positions"
    );
    assert!(
        sent[0].get("model").is_none(),
        "no model named, none listed: none sent: {}",
        sent[0]
    );
    let edit = server.post(
        "/v1/edit/completions",
        &json!({"messages": [{"role": "user", "content": EDIT_MESSAGE}]}),
    );
    assert_eq!(edit.status, 503, "{}", edit.text());
    assert_eq!(edit.json()["error"]["code"], "model_not_loaded");
    // Ollama's clients still see the names; without a model no context length is claimed.
    let shown = server.post("/api/show", &json!({"model": "qwen2.5-coder:redraft"}));
    assert_eq!(shown.status, 200, "{}", shown.text());
    let info = shown.json()["model_info"].clone();
    assert!(
        info.as_object()
            .unwrap()
            .keys()
            .all(|k| !k.ends_with("context_length")),
        "{info}"
    );
}

/// Another `redraft serve` is a backend with no `--backend-model`: it lists its model under its
/// id and aliases, each naming the id as its `root`, and the id is what is asked for.
#[test]
fn another_redraft_serve_is_a_backend_without_naming_its_model() {
    let remote = Server::start(&[]);
    let listed = remote.get("/v1/models").json();
    for entry in listed["data"].as_array().unwrap() {
        assert_eq!(entry["root"], "redraft-default", "{listed}");
    }
    let url = format!("http://{}/v1", remote.addr);
    let server = Server::start(&["--backend", &url]);
    let response = server.post(
        "/v1/completions",
        &json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 8}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["object"], "text_completion");
}

/// One request a scripted backend got.
#[derive(Debug, Clone)]
struct Heard {
    authorization: String,
    body: Value,
}

/// A backend that answers each connection's one request with the next of `replies` (status and
/// JSON body), recording each request.
fn scripted_backend(replies: Vec<(u16, Value)>) -> (String, Arc<Mutex<Vec<Heard>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Heard>>> = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut replies = replies.into_iter();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut length, mut authorization) = (0, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    match name.to_ascii_lowercase().as_str() {
                        "content-length" => length = value.trim().parse().unwrap_or(0),
                        "authorization" => authorization = value.trim().to_string(),
                        _ => {}
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log.lock().unwrap().push(Heard {
                authorization,
                body,
            });
            let (status, answer) = replies
                .next()
                .unwrap_or((500, json!({"error": {"message": "no reply scripted"}})));
            let answer = answer.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, seen)
}

fn completion(text: &str) -> Value {
    json!({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m",
           "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": null}],
           "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}})
}

/// Posts `body` to `route`, asserts the answer is the 502 a failed backend costs, and returns
/// its OpenAI-shaped error message.
fn backend_failure(server: &Server, route: &str, body: &Value) -> String {
    let failed = server.post(route, body);
    assert_eq!(failed.status, 502, "{}", failed.text());
    failed.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_failing_backend_is_a_502_with_its_message_and_the_next_request_is_served() {
    let out_of_memory = json!({"error": {"message": "the GPU is out of memory"}});
    let (url, seen) = scripted_backend(vec![
        (500, out_of_memory.clone()),
        (500, out_of_memory),
        (200, completion(MIDDLE)),
    ]);
    let server = Server::start_with(Start {
        args: &["--backend", &url, "--backend-model", "m"],
        env: &[("REDRAFT_BACKEND_API_KEY", "k-env")],
        ..Start::default()
    });
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX});

    let failed = server.post("/v1/completions", &request);
    assert_eq!(failed.status, 502, "{}", failed.text());
    let error = &failed.json()["error"];
    assert_eq!(error["code"], "backend_error");
    assert_eq!(error["type"], "server_error");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "{url}/v1/completions answered HTTP 500: the GPU is out of memory"
        )),
        "the backend's own message: {message}"
    );

    // A stream has answered 200 before the backend fails: the error is its last event.
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let events = server.post("/v1/completions", &streamed).events();
    assert_eq!(events.len(), 2, "{events:?}");
    let event: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(event["error"]["code"], "backend_error", "{event}");
    assert_eq!(events[1], "[DONE]");

    // The server goes on, and so does the backend once it answers again.
    let served = server.post("/v1/completions", &request);
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(served.json()["choices"][0]["text"], "a + b");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:#?}");
    for heard in &seen {
        assert_eq!(heard.authorization, "Bearer k-env", "the variable's key");
        assert_eq!(heard.body["model"], "m");
    }
    server.wait_for_stderr("a backend request failed");
    let metrics = server.get("/metrics").text();
    for line in [
        "redraft_jobs_total{kind=\"fim\",outcome=\"backend_failed\"} 2",
        "redraft_jobs_total{kind=\"fim\",outcome=\"answered\"} 1",
        // The stream that ended with the backend's error counts as what it ended with.
        "redraft_http_requests_total{endpoint=\"/v1/completions\",status=\"502\"} 2",
        "redraft_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
    assert!(
        !metrics.contains("outcome=\"failed\""),
        "a backend's failure is not a bug of ours: {metrics}"
    );
}

#[test]
fn a_backend_that_is_down_is_a_502_naming_it_and_the_server_stays_up() {
    let refused = RefusedPort::new();
    let port = refused.port();
    let server = Server::start(&[
        "--backend",
        &format!("http://127.0.0.1:{port}/v1"),
        "--backend-model",
        "m",
    ]);
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX});
    for _ in 0..2 {
        let message = backend_failure(&server, "/v1/fim/completions", &request);
        assert!(
            message.contains(&format!(
                "127.0.0.1:{port}/v1/completions: connection refused"
            )),
            "{message}"
        );
    }
    let ollama = server.post("/api/generate", &json!({"prompt": PREFIX, "stream": false}));
    assert_eq!(ollama.status, 502, "{}", ollama.text());
    assert!(
        ollama.json()["error"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "Ollama's error shape: {}",
        ollama.text()
    );
    assert_eq!(server.get("/health").json()["status"], "ok");
}

#[test]
fn backend_flags_need_a_backend_and_a_usable_url_and_timeout() {
    for flags in [
        &["--backend-model", "m"][..],
        &["--backend-template", "starcoder"],
        &["--backend-context", "512"],
        &["--backend-timeout-s", "5"],
        &["--backend-api-key", "k"],
    ] {
        let (status, stderr) = refused_start(flags, &[]);
        assert!(!status.success());
        assert!(
            stderr.contains("the following required arguments were not provided")
                && stderr.contains("--backend <URL>"),
            "{flags:?}: {stderr}"
        );
    }
    let (status, stderr) = refused_start(&["--backend", "gpu-box:8000"], &[]);
    assert!(!status.success());
    assert!(stderr.contains("write it as http://HOST:PORT"), "{stderr}");
    let (status, stderr) = refused_start(
        &[
            "--backend",
            "http://gpu-box:8000",
            "--backend-timeout-s",
            "0",
        ],
        &[],
    );
    assert!(!status.success());
    assert!(
        stderr.contains("--backend-timeout-s must be a positive number of seconds, not 0"),
        "{stderr}"
    );
}

/// `http://user:password@host` is how some gateways take their credentials: they go to the
/// backend as basic auth, and neither the password nor the API key reaches a client's 502 or
/// the server's log, even when the backend quotes them back.
#[test]
fn credentials_in_the_backend_url_are_sent_but_never_shown() {
    let echo = json!({"error": {"message": "no access for team:hunter2 with key k-env-secret"}});
    let (url, seen) = scripted_backend(vec![(403, echo.clone()), (403, echo)]);
    let with_credentials = url.replace("http://", "http://team:hunter2@");
    let server = Server::start(&["--backend", &with_credentials, "--backend-model", "m"]);
    let message = backend_failure(
        &server,
        "/v1/completions",
        &json!({"prompt": PREFIX, "suffix": SUFFIX}),
    );
    assert!(
        message.contains(&format!(
            "{url}/v1/completions answered HTTP 403: no access for team:[redacted] with key k-env-secret"
        )),
        "the backend named without its password, which is redacted where quoted: {message}"
    );
    // "team:hunter2", the one Authorization sent.
    assert_eq!(
        seen.lock().unwrap()[0].authorization,
        "Basic dGVhbTpodW50ZXIy"
    );
    server.wait_for_stderr("a backend request failed");
    let stderr = server.stderr();
    assert!(!stderr.contains("hunter2"), "{stderr}");

    // With an API key the key is what is sent, and it is redacted in turn.
    let server = Server::start_with(Start {
        args: &["--backend", &with_credentials, "--backend-model", "m"],
        env: &[("REDRAFT_BACKEND_API_KEY", "k-env-secret")],
        ..Start::default()
    });
    let failed = server.post(
        "/v1/completions",
        &json!({"prompt": PREFIX, "suffix": SUFFIX}),
    );
    let text = failed.text();
    assert!(
        text.contains("no access for team:[redacted] with key [redacted]"),
        "{text}"
    );
    assert_eq!(seen.lock().unwrap()[1].authorization, "Bearer k-env-secret");
    server.wait_for_stderr("a backend request failed");
    let stderr = server.stderr();
    assert!(
        !stderr.contains("hunter2") && !stderr.contains("k-env-secret"),
        "{stderr}"
    );
}

/// The start-up line naming the backend names it as messages do: without the URL's password
/// or the values of its secret query keys (a hosted endpoint may take its key as `?api_key=`),
/// and, with no local model, says next edits answer 503 (it said they ran on the local model).
#[test]
fn the_start_up_line_names_the_backend_without_its_secrets() {
    let (url, _) = redraft_tests::fake_openai::start(MIDDLE);
    let secret = url.replace("http://", "http://team:hunter2@") + "/v1?api_key=abc123&region=eu";
    let server = Server::start(&["--backend", &secret, "--model", "/nonexistent/model"]);
    let stderr = server.stderr();
    let named = stderr
        .lines()
        .find(|line| line.contains("FIM requests go to the backend http"))
        .unwrap_or_else(|| panic!("no line names the backend: {stderr}"));
    assert!(
        named.contains(&format!(
            "{url}/v1/completions?api_key=[redacted]&region=eu"
        )) && named.ends_with("next edits answer 503 (no local model)"),
        "{named}"
    );
    assert!(
        !stderr.contains("hunter2") && !stderr.contains("abc123"),
        "{stderr}"
    );
    let health = server.get("/health").json();
    assert_eq!(health["fim"], "backend", "{health}");
}

/// A backend whose answer never ends costs its request a 502 once the answer passes the limit,
/// not the server's memory until the timeout.
#[test]
fn an_endless_backend_answer_is_a_502_without_waiting_for_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.read(&mut [0; 4096]);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                let frame = [b"100000\r\n".as_slice(), &[b' '; 1 << 20], b"\r\n"].concat();
                // At most 64 MiB, then held open: a server that reads on meets its timeout.
                let mut open = stream.write_all(head.as_bytes()).is_ok();
                for _ in 0..64 {
                    open = open && stream.write_all(&frame).is_ok();
                }
                if open {
                    let _ = stream.read(&mut [0; 1]);
                }
            });
        }
    });
    let server = Server::start(&[
        "--backend",
        &url,
        "--backend-model",
        "m",
        "--backend-timeout-s",
        "600",
    ]);
    let message = backend_failure(
        &server,
        "/v1/completions",
        &json!({"prompt": PREFIX, "suffix": SUFFIX}),
    );
    assert!(
        message.contains(&format!(
            "{url}/v1/completions: the answer is longer than 16777216 bytes"
        )),
        "{message}"
    );
}
