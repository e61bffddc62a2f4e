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

/// The answers of `requests` sent one after another to a server without batching.
fn one_at_a_time(requests: &[Value]) -> Vec<Vec<String>> {
    let server = Server::start(&["--max-batch", "1", "--no-cache"]);
    requests
        .iter()
        .map(|r| texts(&server.post("/v1/completions", r)))
        .collect()
}

/// Mean canvases per model call so far.
fn mean_batch(server: &Server) -> f64 {
    server.metric("redraft_batch_size_sum") / server.metric("redraft_batch_size_count")
}

#[test]
fn batched_greedy_results_equal_one_at_a_time() {
    let requests = requests();
    let alone = one_at_a_time(&requests);
    // Slow steps, so requests sent together are decoded together.
    let server = Server::start_with(Start {
        args: &["--max-batch", "8", "--no-cache"],
        step_delay_ms: Some(40),
        ..Start::default()
    });
    let pending: Vec<_> = requests
        .iter()
        .map(|r| server.open_later("POST", "/v1/completions", r.to_string().as_bytes()))
        .collect();
    let together: Vec<Vec<String>> = pending.into_iter().map(|p| texts(&p.finish())).collect();
    assert_eq!(together, alone);
    let mean = mean_batch(&server);
    assert!(
        mean > 2.0,
        "requests were not batched: {mean} canvases per call"
    );
    // The one-at-a-time server's calls hold one canvas, or a request's candidates.
    assert!(server.metric("redraft_forwards_total") > 0.0);
}

/// One client hangs up while its request is being decoded with others: it leaves the batch at
/// the next step, and the others' answers are what they are alone.
#[test]
fn cancelling_one_member_leaves_the_others_unchanged() {
    let requests = requests();
    // The first two share a lane (one prefix); the third has a lane of its own.
    let alone = one_at_a_time(&requests[..3]);
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
