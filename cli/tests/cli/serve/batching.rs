//! Iteration-level batching: requests in flight together share model calls and get what they
//! would get alone. Both servers run without the approximate cache (`--no-cache`): with it,
//! which passes are full follows the batch's membership, so results may differ in the last
//! digits; without it every pass recomputes everything and rows do not affect each other.

use serde_json::{json, Value};

use super::client::{Server, Start};

/// Different FIM requests, as an editor team would send them: three prefixes, each under two
/// suffixes (so canvases start at the same place and share a lane), a candidate pair among them.
fn requests() -> Vec<Value> {
    let prefixes = [
        "fn add(a: u32, b: u32) -> u32 {\n    ",
        "impl Point {\n    fn norm(&self) -> f64 {\n        ",
        "for (i, line) in text.lines().enumerate() {\n    ",
    ];
    let suffixes = ["\n}\n", "\n}\n\nfn main() {\n    run();\n}\n"];
    let mut requests = Vec::new();
    for (p, prefix) in prefixes.iter().enumerate() {
        for (s, suffix) in suffixes.iter().enumerate() {
            let n = if (p, s) == (1, 1) { 2 } else { 1 };
            requests.push(json!({"prompt": prefix, "suffix": suffix, "max_tokens": 24, "n": n}));
        }
    }
    requests
}

fn texts(response: &super::client::Response) -> Vec<String> {
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect()
}

/// The answers of `requests` sent one after another to a server without batching, started
/// with `flags`.
fn one_at_a_time(requests: &[Value], flags: &[&str]) -> Vec<Vec<String>> {
    let server = Server::start(&[flags, &["--max-batch", "1"]].concat());
    requests
        .iter()
        .map(|r| texts(&server.post("/v1/completions", r)))
        .collect()
}

/// The answers of `requests` sent together to a batching server started with `flags`, whose
/// steps are slow so that they are decoded together; and the server, for its metrics.
fn all_at_once(requests: &[Value], flags: &[&str]) -> (Vec<Vec<String>>, Server) {
    let server = Server::start_with(Start {
        args: &[flags, &["--max-batch", "8"]].concat(),
        step_delay_ms: Some(40),
        ..Start::default()
    });
    let pending: Vec<_> = requests
        .iter()
        .map(|r| server.open_later("POST", "/v1/completions", r.to_string().as_bytes()))
        .collect();
    let together = pending.into_iter().map(|p| texts(&p.finish())).collect();
    (together, server)
}

/// Mean canvases per model call so far.
fn mean_batch(server: &Server) -> f64 {
    server.metric("redraft_batch_size_sum") / server.metric("redraft_batch_size_count")
}

#[test]
fn batched_greedy_results_equal_one_at_a_time() {
    let requests = requests();
    let alone = one_at_a_time(&requests, &["--no-cache"]);
    let (together, server) = all_at_once(&requests, &["--no-cache"]);
    assert_eq!(together, alone);
    let mean = mean_batch(&server);
    assert!(
        mean > 2.0,
        "requests were not batched: {mean} canvases per call"
    );
    // The one-at-a-time server's calls hold one canvas, or a request's candidates.
    assert!(server.metric("redraft_forwards_total") > 0.0);
}

/// A Mercury next-edit message for a rename in `area`, the cursor at byte `cursor` of the
/// region.
fn edit_request(name: &str, cursor: usize) -> Value {
    let region = format!("fn area({name}: u32, height: u32) -> u32 {{\n    width * height\n}}\n");
    let message = format!(
        "<|current_file_content|>\ncurrent_file_path: src/lib.rs\nuse std::fmt;\n\n<|code_to_edit|>\n{}<|cursor|>{}\n<|/code_to_edit|>\n\nfn main() {{}}\n\n<|/current_file_content|>\n<|edit_diff_history|>\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -3 +3 @@\n-fn area(width: u32, height: u32) -> u32 {{\n+fn area({name}: u32, height: u32) -> u32 {{\n\n<|/edit_diff_history|>\n",
        &region[..cursor],
        &region[cursor..]
    );
    json!({"messages": [{"role": "user", "content": message}], "stream": true, "diffusing": true})
}

/// The raw rewrite (the last draft of a diffusing stream) and the answer's content: the answer
/// alone is most often the region unchanged with this model, the raw rewrite never.
fn edit_content(response: &super::client::Response) -> (String, String) {
    assert_eq!(response.status, 200, "{}", response.text());
    let events = response.events();
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let content = |chunk: &Value| {
        chunk["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (answer, drafts) = chunks.split_last().unwrap();
    assert!(!drafts.is_empty());
    (content(drafts.last().unwrap()), content(answer))
}

/// Next edits are canvases in the batch too: sent together with FIM requests, each gets what
/// it gets alone.
#[test]
fn batched_next_edits_equal_one_at_a_time() {
    let edits = [
        edit_request("w", 9),
        edit_request("wd", 10),
        edit_request("w", 30),
    ];
    let fims = requests();
    let serial = Server::start(&["--max-batch", "1", "--no-cache"]);
    let alone: Vec<(String, String)> = edits
        .iter()
        .map(|e| edit_content(&serial.post("/v1/edit/completions", e)))
        .collect();
    let server = Server::start_with(Start {
        args: &["--max-batch", "8", "--no-cache"],
        step_delay_ms: Some(40),
        ..Start::default()
    });
    let pending_fim: Vec<_> = fims[..2]
        .iter()
        .map(|r| server.open_later("POST", "/v1/completions", r.to_string().as_bytes()))
        .collect();
    let pending: Vec<_> = edits
        .iter()
        .map(|e| server.open_later("POST", "/v1/edit/completions", e.to_string().as_bytes()))
        .collect();
    let together: Vec<(String, String)> = pending
        .into_iter()
        .map(|p| edit_content(&p.finish()))
        .collect();
    assert_eq!(together, alone);
    for p in pending_fim {
        assert_eq!(p.finish().status, 200);
    }
    assert_eq!(
        server.metric("redraft_jobs_total{kind=\"edit\",outcome=\"answered\"}"),
        3.0
    );
    assert!(mean_batch(&server) > 1.0, "nothing was batched");
}

/// One client hangs up while its request is being decoded with others: it leaves the batch at
/// the next step, and the others' answers are what they are alone.
#[test]
fn cancelling_one_member_leaves_the_others_unchanged() {
    let requests = requests();
    // The first two share a lane (one prefix); the third has a lane of its own.
    let alone = one_at_a_time(&requests[..3], &["--no-cache"]);
    let server = Server::start_with(Start {
        args: &["--max-batch", "8", "--no-cache"],
        step_delay_ms: Some(60),
        ..Start::default()
    });
    let first = server.open_later(
        "POST",
        "/v1/completions",
        requests[0].to_string().as_bytes(),
    );
    let mut leaving = requests[1].clone();
    leaving["stream"] = json!(true);
    leaving["diffusing"] = json!(true);
    let mut stream = server.open(
        "POST",
        "/v1/fim/completions",
        &[("Content-Type", "application/json")],
        leaving.to_string().as_bytes(),
    );
    let third = server.open_later(
        "POST",
        "/v1/completions",
        requests[2].to_string().as_bytes(),
    );
    // Its first draft: it is in the batch. Then hang up.
    assert!(stream.event().unwrap().contains("diffusion_meta"));
    drop(stream);
    let (first, third) = (texts(&first.finish()), texts(&third.finish()));
    assert_eq!(first, alone[0]);
    assert_eq!(third, alone[2]);
    server.wait_for_metric(
        "redraft_jobs_total{kind=\"fim\",outcome=\"cancelled\"}",
        1.0,
    );
    assert!(mean_batch(&server) > 1.0);
}

/// A request that arrives while another is being decoded joins it at the next step when its
/// canvas starts where the other's does (the same prefix here): once the first has sent a draft
/// with slots still masked, the second is sent, and some model call then holds both canvases.
#[test]
fn a_late_request_joins_the_running_batch() {
    let server = Server::start_with(Start {
        args: &["--max-batch", "8"],
        step_delay_ms: Some(200),
        ..Start::default()
    });
    let requests = requests();
    let mut early = requests[0].clone();
    early["stream"] = json!(true);
    early["diffusing"] = json!(true);
    let mut stream = server.open(
        "POST",
        "/v1/fim/completions",
        &[("Content-Type", "application/json")],
        early.to_string().as_bytes(),
    );
    let first: Value = serde_json::from_str(&stream.event().unwrap()).unwrap();
    let draft = first["choices"][0]["text"].as_str().unwrap();
    assert!(
        draft.contains('░'),
        "the first step left nothing masked: {draft:?}"
    );
    let late = server.open_later(
        "POST",
        "/v1/completions",
        requests[1].to_string().as_bytes(),
    );
    assert_eq!(late.finish().status, 200);
    while stream.event().is_some() {}
    assert!(
        server.metric("redraft_batch_size_sum") > server.metric("redraft_batch_size_count"),
        "no model call held both canvases"
    );
}

/// A client typing sends requests a few characters apart. With the cache on (the default), the
/// lane of the next request starts from the cache the last one left, and its first pass
/// realigns it across the edit (`pass="realign"`) instead of recomputing everything; a request for
/// other text, or `--edit-reuse off`, pays a full pass.
#[test]
fn a_clients_next_keystroke_realigns_the_cache_its_last_request_left() {
    let prefix = "use std::collections::HashMap;\n\n/// Counts the words of `text`.\nfn count(text: &str) -> HashMap<&str, usize> {\n    let mut counts = HashMap::new();\n    for word in text.split_whitespace() {\n        *counts.entry(word).or_insert(0) += 1;\n    }\n    counts\n}\n\nfn main() {\n    let text = std::fs::read_to_string(\"words.txt\").unwrap();\n    let counts = count(&text);\n    for (word, n) in &counts {\n        println!(\"{word}: {n}\");\n    }\n    let total: usize = counts.values().sum();\n    let lo";
    let suffix = "\n    println!(\"{total}\");\n}\n";
    let request = |typed: &str| json!({"prompt": format!("{prefix}{typed}"), "suffix": suffix, "max_tokens": 16});
    let realign = "redraft_passes_total{pass=\"realign\"}";
    let full = "redraft_passes_total{pass=\"full\"}";
    for (args, edits) in [(&[][..], 1.0), (&["--edit-reuse", "off"][..], 0.0)] {
        let server = Server::start(args);
        for typed in ["", "n"] {
            let response = server.post("/v1/completions", &request(typed));
            assert_eq!(response.status, 200, "{}", response.text());
        }
        assert_eq!(server.metric(realign), edits, "{args:?}");
        assert_eq!(server.metric(full), 2.0 - edits, "{args:?}");
        // Another document shares nothing with the kept cache: a full pass.
        let other = json!({"prompt": "def f(x):\n    return ", "suffix": "\n", "max_tokens": 8});
        assert_eq!(server.post("/v1/completions", &other).status, 200);
        assert_eq!(server.metric(realign), edits, "{args:?}");
        assert_eq!(server.metric(full), 3.0 - edits, "{args:?}");
    }
}

/// More clients typing at once than a count of caches would hold (each client's cache the
/// oldest when its next request comes) each find the cache their last request left: only
/// `--cache-memory` bounds them, batching on or off. With no memory for them, every request
/// starts cold.
#[test]
fn every_client_typing_at_once_finds_its_own_cache() {
    let clients = 40;
    let request = |client: usize, typed: &str| {
        json!({
            "prompt": format!("fn client_{client}() -> u32 {{\n    let total = {typed}"),
            "suffix": "\n}\n",
            "max_tokens": 4,
        })
    };
    let kept = "redraft_cache_starts_total{start=\"kept\"}";
    let cold = "redraft_cache_starts_total{start=\"cold\"}";
    for args in [&[][..], &["--max-batch", "1"][..]] {
        let server = Server::start(args);
        for typed in ["", "1"] {
            for client in 0..clients {
                let response = server.post("/v1/completions", &request(client, typed));
                assert_eq!(response.status, 200, "{}", response.text());
            }
        }
        assert_eq!(server.metric(cold), clients as f64, "{args:?}");
        assert_eq!(server.metric(kept), clients as f64, "{args:?}");
        assert_eq!(server.metric("redraft_kept_caches"), clients as f64);
    }
    let server = Server::start(&["--cache-memory", "0"]);
    for typed in ["", "1"] {
        assert_eq!(
            server.post("/v1/completions", &request(0, typed)).status,
            200
        );
    }
    assert_eq!((server.metric(kept), server.metric(cold)), (0.0, 2.0));
}

/// The default model's weights attending causally (as an autoregressive checkpoint does), in a
/// directory of its own: a model whose new prompts are computed in pieces.
fn causal_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(from.join(file), dir.path().join(file)).unwrap();
    }
    std::fs::write(
        dir.path().join("redraft.json"),
        r#"{"eos_token_id": 1, "mask_token_id": 0, "pad_token_id": 1,
            "logit_shift": true, "attention": "causal"}"#,
    )
    .unwrap();
    dir
}

/// New prompts arriving together are computed a piece per model call, oldest first, while the
/// others wait (`redraft_held_steps_total`): each request still gets what it gets alone.
#[test]
fn new_prompts_take_turns_and_still_answer_as_alone() {
    let model = causal_model();
    let model = model.path().to_str().unwrap();
    // Exact passes only (no realigned caches), so a lane's passes are its own alone or not.
    let flags = [
        "--model",
        model,
        "--prompt-chunk",
        "8",
        "--edit-reuse",
        "off",
    ];
    let requests = requests();
    let alone = one_at_a_time(&requests, &flags);
    let (together, server) = all_at_once(&requests, &flags);
    assert_eq!(together, alone);
    assert!(
        server.metric("redraft_held_steps_total") > 0.0,
        "no prompt piece waited for another's"
    );
    assert!(mean_batch(&server) > 1.0, "nothing was batched");
}

/// A request's `effort` means the loaded model's preset: a model whose `redraft.json` tunes `low`
/// to one step answers a `low` request in one model call, where the same model untuned takes
/// several (the built-in `low`: a 0.7 bar within 4 steps).
#[test]
fn a_requests_effort_is_the_loaded_models_preset() {
    let fixture = redraft_tests::cli::repo().join("fixtures/small-model");
    let tuned = redraft_tests::cli::tuned_small_model(
        json!({"low": {"schedule": {"kind": "top-k", "k": 1}, "max_steps": 1}}),
    );
    let request = json!({"prompt": "fn add(a: u32, b: u32) -> u32 {\n    ", "suffix": "\n}\n",
                         "max_tokens": 8, "effort": "low"});
    let calls = |model: &std::path::Path| {
        let server = Server::start(&["--model", model.to_str().unwrap(), "--no-cache"]);
        let response = server.post("/v1/completions", &request);
        assert_eq!(response.status, 200, "{}", response.text());
        server.metric("redraft_passes_total{pass=\"full\"}")
            + server.metric("redraft_passes_total{pass=\"window\"}")
    };
    assert_eq!(calls(tuned.path()), 1.0);
    assert!(calls(&fixture) > 1.0);
}
