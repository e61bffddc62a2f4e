//! The `backend` setting: inline completions filled by another process's model over HTTP, the
//! same plan and post-processing around it; a backend that fails costs that request only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::client::{items, Lsp, Start};

/// A stand-in OpenAI-compatible server on loopback: answers every request with `middle` and
/// keeps the request bodies.
fn fake_server(middle: &'static str) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            log.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            let answer = json!({
                "id": "cmpl-1", "object": "text_completion", "created": 0, "model": "fake",
                "choices": [{"text": middle, "index": 0, "finish_reason": "stop", "logprobs": null}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, seen)
}

const URI: &str = "file:///tmp/backend.rs";
const TEXT: &str = "fn main() {\n    let total = \n}\n";

#[tokio::test]
async fn inline_completions_come_from_the_backend_through_the_same_plan_and_finish() {
    let (url, seen) = fake_server("items.len() + 1;\n    println!(\"{total}\");");
    let lsp = Lsp::start(Start {
        options: json!({
            "effort": "low", "maxTokens": 12,
            "backend": {"url": url, "model": "fake-coder", "template": "qwen"},
        }),
        ..Start::default()
    })
    .await;
    lsp.open(URI, "rust", TEXT);
    let answer = lsp.inline(URI, 1, 16, true).await.answer().await.unwrap();
    let texts: Vec<String> = items(&answer)
        .iter()
        .map(|i| i["insertText"].as_str().unwrap().to_string())
        .collect();
    // The context layer's finish cut the middle where its line ends, as for a local model.
    assert_eq!(texts, ["items.len() + 1;"], "{answer}");
    let requests = seen.lock().unwrap().clone();
    assert!(!requests.is_empty());
    let request = &requests[0];
    assert_eq!(request["model"], json!("fake-coder"));
    let prompt = request["prompt"].as_str().unwrap();
    assert!(
        prompt.starts_with("<|fim_prefix|>") && prompt.ends_with("<|fim_middle|>"),
        "{prompt}"
    );
    assert!(
        prompt.contains("    let total = <|fim_suffix|>\n}"),
        "{prompt}"
    );
    lsp.shutdown().await;
}

#[tokio::test]
async fn a_backend_that_is_down_costs_the_request_not_the_session() {
    // A port nothing listens on (bound, then closed).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let lsp = Lsp::start(Start {
        options: json!({"effort": "low", "maxTokens": 12, "backend": format!("http://127.0.0.1:{port}")}),
        ..Start::default()
    })
    .await;
    lsp.open(URI, "rust", TEXT);
    let answer = lsp.inline(URI, 1, 16, true).await.answer().await;
    assert!(
        answer.as_ref().map_or(true, |a| items(a).is_empty()),
        "{answer:?}"
    );
    let logged = lsp
        .wait_for_log(|m| m.contains(&format!("127.0.0.1:{port}")))
        .await;
    assert!(logged.contains("backend"), "{logged}");
    // Back to the local model: the same session completes again, as it does without a backend.
    lsp.notify::<crate::client::DidChangeConfiguration>(json!({"settings": {"backend": null}}));
    let local = lsp.inline(URI, 1, 16, true).await.answer().await.unwrap();
    let plain = Lsp::start(Start::default()).await;
    plain.open(URI, "rust", TEXT);
    let expected = plain.inline(URI, 1, 16, true).await.answer().await.unwrap();
    assert_eq!(items(&local), items(&expected));
    plain.shutdown().await;
    lsp.shutdown().await;
}
