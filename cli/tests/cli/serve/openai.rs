//! OpenAI's completions API beyond what Zed sends: `/v1/models`, `n`, streaming as
//! server-sent events ending with `[DONE]`, usage in the stream.

use serde_json::{json, Value};

use super::client::Server;
use super::{PREFIX, SUFFIX};

#[test]
fn models_lists_the_served_id_and_its_aliases() {
    let server = Server::start(&[]);
    let models = server.get("/v1/models").json();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["object"], "model");
            assert!(m["created"].is_u64() && m["owned_by"].is_string());
            m["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        ids,
        [
            "redraft-default",
            "qwen2.5-coder:redraft",
            "sweep-next-edit:redraft"
        ]
    );
    // Each name says which model it serves; one is retrieved by name, and Mercury's listing
    // routes list the same.
    for entry in models["data"].as_array().unwrap() {
        assert_eq!(entry["root"], "redraft-default");
        let name = entry["id"].as_str().unwrap();
        let one = server.get(&format!("/v1/models/{name}"));
        assert_eq!(one.status, 200, "{}", one.text());
        assert_eq!(one.json(), *entry);
    }
    let missing = server.get("/v1/models/gpt-4o");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "model_not_found");
    // A name that is no UTF-8 is a JSON error too, and every name shares one metrics label.
    let garbled = server.get("/v1/models/%FF");
    assert_eq!(garbled.status, 400, "{}", garbled.text());
    assert_eq!(garbled.json()["error"]["param"], "model");
    let label = "redraft_http_requests_total{endpoint=\"/v1/models/{name}\",status=\"200\"}";
    assert_eq!(server.metric(label), 3.0);
    for listing in ["/v1/fim/completions/models", "/v1/edit/completions/models"] {
        assert_eq!(server.get(listing).json(), models, "{listing}");
    }
    // A model directory is served under its name.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    let named = Server::start(&["--model", dir.to_str().unwrap()]);
    assert_eq!(
        named.get("/v1/models").json()["data"][0]["id"],
        "small-model"
    );
    let answer = named.post(
        "/v1/completions",
        &json!({"model": "small-model", "prompt": PREFIX}),
    );
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["model"], "small-model");
}

/// `n` candidates are `n` choices, indexed in order, each with a finish reason.
#[test]
fn n_candidates_come_back_as_n_choices() {
    let server = Server::start(&[]);
    let body = server
        .post(
            "/v1/completions",
            &json!({"prompt": PREFIX, "suffix": SUFFIX, "n": 3, "max_tokens": 16}),
        )
        .json();
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3, "{body}");
    for (i, choice) in choices.iter().enumerate() {
        assert_eq!(choice["index"], i);
        assert!(matches!(
            choice["finish_reason"].as_str(),
            Some("stop" | "length")
        ));
    }
    for n in [0, 9] {
        let response = server.post("/v1/completions", &json!({"prompt": PREFIX, "n": n}));
        assert_eq!(response.status, 400);
        assert_eq!(response.json()["error"]["param"], "n");
    }
}

/// `stream: true`: `data: {chunk}` events (each a `text_completion` with the same id), the
/// finish reason in a last chunk per choice, usage when `stream_options.include_usage`, then
/// `data: [DONE]`. The texts put together are the non-streamed answer's.
#[test]
fn openai_stream_is_sse_ending_with_done() {
    let server = Server::start(&[]);
    let request = json!({
        "prompt": PREFIX, "suffix": SUFFIX, "n": 2, "max_tokens": 16,
        "stream": true, "stream_options": {"include_usage": true},
    });
    let response = server.post("/v1/completions", &request);
    assert_eq!(response.status, 200);
    assert!(response
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let events = response.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let id = chunks[0]["id"].as_str().unwrap();
    let mut texts = [String::new(), String::new()];
    let mut reasons = [None, None];
    for chunk in &chunks {
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["object"], "text_completion");
        for choice in chunk["choices"].as_array().unwrap() {
            let i = choice["index"].as_u64().unwrap() as usize;
            assert!(reasons[i].is_none(), "text after the finish reason");
            texts[i].push_str(choice["text"].as_str().unwrap());
            reasons[i] = choice["finish_reason"].as_str().map(str::to_string);
        }
    }
    assert!(reasons.iter().all(Option::is_some));
    let usage = &chunks.last().unwrap()["usage"];
    assert!(usage["total_tokens"].as_u64().unwrap() > 0);
    // Another request first, so the next run starts from a full pass as the first did.
    server.post("/v1/completions", &json!({"prompt": "let v = "}));
    // Not streamed, without the stream's options (OpenAI refuses them without `stream`).
    let mut whole = request.clone();
    whole["stream"] = json!(false);
    whole.as_object_mut().unwrap().remove("stream_options");
    let whole = server.post("/v1/completions", &whole).json();
    for (i, text) in texts.iter().enumerate() {
        assert_eq!(whole["choices"][i]["text"], text.as_str());
    }
}

/// A prompt given as a one-element list is the prompt; a batch of prompts is refused.
#[test]
fn prompt_lists_of_one_are_accepted() {
    let server = Server::start(&[]);
    let one = server.post(
        "/v1/completions",
        &json!({"prompt": [PREFIX], "max_tokens": 8}),
    );
    assert_eq!(one.status, 200, "{}", one.text());
    let many = server.post("/v1/completions", &json!({"prompt": [PREFIX, PREFIX]}));
    assert_eq!(many.status, 400);
    assert_eq!(many.json()["error"]["param"], "prompt");
    let tokens = server.post("/v1/completions", &json!({"prompt": [1, 2, 3]}));
    assert_eq!(tokens.status, 400);
}

/// `--deadline-ms`: past it the sampler commits its best guess for every slot left. One token
/// per step (`effort: high`) takes at least two model calls (content, then the end); with a
/// 1 ms budget the first call is already past it, and it is the only one.
#[test]
fn the_deadline_ends_decoding_at_the_next_step() {
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16, "effort": "high"});
    let free = Server::start(&[]);
    assert_eq!(free.post("/v1/completions", &request).status, 200);
    assert!(free.metric("redraft_forwards_total") >= 2.0);
    let hurried = Server::start(&["--deadline-ms", "1"]);
    let answer = hurried.post("/v1/completions", &request);
    assert_eq!(answer.status, 200);
    assert!(answer.json()["choices"][0]["text"].is_string());
    assert_eq!(hurried.metric("redraft_forwards_total"), 1.0);
}

/// A completion the model was less sure of than its own bar (`fim_min_confidence` in its
/// `redraft.json`) comes back empty, from the serial loop and the batched one alike; the same
/// model without the bar answers it, and so does `--min-confidence 0` over the model's bar. A
/// bar that is not a probability is refused at start.
#[test]
fn a_completion_below_the_models_bar_is_empty() {
    let fixture = redraft_tests::cli::repo().join("fixtures/small-model");
    let barred = redraft_tests::cli::small_model_with(json!({"fim_min_confidence": 0.99}));
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16, "n": 2,
                         "temperature": 0});
    let texts = |model: &std::path::Path, batch: &str, extra: &[&str]| -> Vec<String> {
        let args = [
            &["--model", model.to_str().unwrap(), "--max-batch", batch],
            extra,
        ]
        .concat();
        let server = Server::start(&args);
        let response = server.post("/v1/completions", &request);
        assert_eq!(response.status, 200, "{}", response.text());
        let body = response.json();
        body["choices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_string())
            .collect()
    };
    for batch in ["1", "4"] {
        let shown = texts(&fixture, batch, &[]);
        assert!(
            shown.iter().any(|t| !t.is_empty()),
            "the fixture answers this prompt: {shown:?}"
        );
        assert_eq!(
            texts(barred.path(), batch, &[]),
            ["", ""],
            "--max-batch {batch}"
        );
        assert_eq!(
            texts(barred.path(), batch, &["--min-confidence", "0"]),
            shown
        );
    }
    let refused = std::process::Command::new(redraft_tests::cli::redraft_binary())
        .args(["serve", "--bind", "127.0.0.1:0", "--min-confidence", "1.5"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("from 0 to 1"), "{stderr}");
}

/// `seed` is any 64-bit integer, as OpenAI's API takes it: the OpenAI SDKs pass `seed=-1` through
/// as it is (the bytes below are openai-python's), which was a 400 here. A negative seed is the
/// same 64 bits read unsigned, on `/v1/completions` and in Ollama's `options.seed` alike, so the
/// three requests sample the same text.
#[test]
fn a_negative_seed_is_a_seed() {
    // Kept caches would make the later requests start from the first one's.
    let server = Server::start(&["--no-cache"]);
    let prompt = serde_json::to_string(PREFIX).unwrap();
    let sdk = format!(
        r#"{{"model":"redraft-default","prompt":{prompt},"max_tokens":8,"seed":-1,"temperature":0.7}}"#
    );
    let negative = server.post_raw("/v1/completions", sdk.as_bytes());
    assert_eq!(negative.status, 200, "{}", negative.text());
    let text = &negative.json()["choices"][0]["text"];
    let unsigned = server.post(
        "/v1/completions",
        &json!({"model": "redraft-default", "prompt": PREFIX, "max_tokens": 8,
                "seed": u64::MAX, "temperature": 0.7}),
    );
    assert_eq!(unsigned.json()["choices"][0]["text"], *text);
    let ollama = server.post(
        "/api/generate",
        &json!({"model": "redraft-default", "prompt": PREFIX, "stream": false,
                "options": {"num_predict": 8, "seed": -1, "temperature": 0.7}}),
    );
    assert_eq!(ollama.status, 200, "{}", ollama.text());
    assert_eq!(ollama.json()["response"], *text);
    // A seed that is no integer is still refused, naming what it takes.
    let float = server.post("/v1/completions", &json!({"prompt": PREFIX, "seed": 1.5}));
    assert_eq!(float.status, 400, "{}", float.text());
    let message = float.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("an integer seed"), "{message}");
}
