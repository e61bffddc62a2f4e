//! Zed's requests, exactly as its edit-prediction providers build them (`crates/edit_prediction`
//! in <https://github.com/zed-industries/zed>), and the checks its parsers make on the answers.

use serde_json::{json, Value};

use super::client::Server;
use super::{apply_in_region, cli_next_edit, qwen_prompt, qwen_stops, PREFIX, SUFFIX};

/// What Zed's `RawCompletionResponse` requires: `id`, `object`, `created` (u64), `model`,
/// `choices[].text`, `usage` with three u32 counts. Returns `choices[0].text`.
#[track_caller]
fn zed_parses(body: &Value) -> String {
    assert!(
        body["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{body}"
    );
    assert_eq!(body["object"], "text_completion", "{body}");
    assert!(body["created"].as_u64().is_some(), "{body}");
    assert!(body["model"].is_string(), "{body}");
    for key in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        let count = body["usage"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {body}"));
        assert!(u32::try_from(count).is_ok());
    }
    assert_eq!(
        body["usage"]["total_tokens"].as_u64(),
        Some(
            body["usage"]["prompt_tokens"].as_u64().unwrap()
                + body["usage"]["completion_tokens"].as_u64().unwrap()
        )
    );
    let choices = body["choices"].as_array().expect("choices");
    assert!(!choices.is_empty());
    for choice in choices {
        assert!(choice["text"].is_string(), "{body}");
        assert!(choice["logprobs"].is_null());
    }
    choices[0]["text"].as_str().unwrap().to_string()
}

/// `send_custom_server_request`'s body: model, prompt with the FIM tokens, max_tokens, stop;
/// no temperature, no suffix.
#[test]
fn zeds_openai_compatible_fim_request_gets_the_response_zed_parses() {
    let server = Server::start(&[]);
    let response = server.request(
        "POST",
        "/v1/completions",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", "Bearer ignored-without-a-server-key"),
        ],
        json!({
            "model": "qwen2.5-coder:redraft",
            "prompt": qwen_prompt(),
            "max_tokens": 256,
            "stop": qwen_stops(),
        })
        .to_string()
        .as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(response
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let body = response.json();
    let text = zed_parses(&body);
    assert_eq!(body["model"], "qwen2.5-coder:redraft");
    assert!(body["id"].as_str().unwrap().starts_with("cmpl-"));
    for token in ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"] {
        assert!(!text.contains(token), "{text:?}");
    }
    // The model saw the prefix and suffix, not the template: the prompt is a few dozen tokens.
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 10);
}

/// The same prefix and suffix wrapped in each template Zed (and others) write, and given as
/// `prompt` + `suffix`, are the same request to the model: the same greedy completion. Between
/// two of them a request over other code, so no run reuses the cache of an identical one; edit
/// reuse is off, since a cache realigned from another request's is close, not equal (an
/// untrained 27M model's near-tied logits told the difference).
#[test]
fn every_fim_template_and_the_suffix_field_give_the_same_completion() {
    let server = Server::start(&["--edit-reuse", "off"]);
    let complete = |body: Value| {
        let other = server.post(
            "/v1/completions",
            &json!({"prompt": "struct Other {\n    ", "suffix": "\n}\n"}),
        );
        assert_eq!(other.status, 200);
        let response = server.post("/v1/completions", &body);
        assert_eq!(response.status, 200, "{body}: {}", response.text());
        zed_parses(&response.json())
    };
    let expected = complete(json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 256}));
    let templates = [
        qwen_prompt(),
        format!("<|repo_name|>demo\n<|file_sep|>src/main.rs\n<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>"),
        format!("<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>"),
        format!("<PRE> {PREFIX} <SUF>{SUFFIX} <MID>"),
        format!("<｜fim▁begin｜>{PREFIX}<｜fim▁hole｜>{SUFFIX}<｜fim▁end｜>"),
        format!("[SUFFIX]{SUFFIX}[PREFIX]{PREFIX}"),
        format!("<|code_prefix|>{PREFIX}<|code_suffix|>{SUFFIX}<|code_middle|>"),
    ];
    for prompt in templates {
        assert_eq!(
            complete(json!({"prompt": prompt, "max_tokens": 256})),
            expected,
            "{prompt:?}"
        );
    }
    // A template and a suffix field: the suffix would be in two places.
    assert_eq!(
        server
            .post(
                "/v1/completions",
                &json!({"prompt": qwen_prompt(), "suffix": "x"})
            )
            .status,
        400
    );
}

/// Stop strings cut the answer at the first one found; any number of them is fine (Zed once
/// sent 14; OpenAI allows 4).
#[test]
fn stop_strings_cut_the_answer_and_any_number_are_accepted() {
    let server = Server::start(&[]);
    let ask = |stop: Value| {
        // Another request first, so each run starts from a full pass (no cache reuse).
        server.post(
            "/v1/completions",
            &json!({"prompt": "let v = ", "suffix": ";\n"}),
        );
        let response = server.post(
            "/v1/completions",
            &json!({"prompt": qwen_prompt(), "max_tokens": 64, "stop": stop}),
        );
        assert_eq!(response.status, 200, "{}", response.text());
        let body = response.json();
        (
            zed_parses(&body),
            body["choices"][0]["finish_reason"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    };
    let (full, _) = ask(Value::Null);
    let chars: Vec<char> = full.chars().collect();
    assert!(chars.len() >= 3, "the model wrote {full:?}");
    // Stop at the text's second character: the answer is its first.
    let stop: String = chars[1..3].iter().collect();
    let (cut, reason) = ask(json!(stop));
    assert_eq!(cut, full[..full.find(&stop).unwrap()]);
    assert_eq!(reason, "stop");
    let mut many: Vec<String> = (0..13).map(|i| format!("<|never-{i}|>")).collect();
    many.push(stop.clone());
    let (cut_by_many, _) = ask(json!(many));
    assert_eq!(cut_by_many, cut);
}

/// `ollama::make_request`: raw prompt with the FIM tokens, `stream: false`, `num_predict`,
/// temperature 0.2 and the stop list. Zed reads `created_at` (its prediction id) and
/// `response`.
#[test]
fn zeds_ollama_request_gets_created_at_and_response() {
    let server = Server::start(&[]);
    let response = server.post(
        "/api/generate",
        &json!({
            "model": "qwen2.5-coder:redraft",
            "prompt": qwen_prompt(),
            "raw": true,
            "stream": false,
            "options": {"num_predict": 256, "temperature": 0.2, "stop": qwen_stops()},
        }),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    let created_at = body["created_at"].as_str().unwrap();
    assert_eq!(
        created_at.len(),
        "2026-12-01T16:36:31.437519164Z".len(),
        "{created_at}"
    );
    assert!(created_at.ends_with('Z') && created_at.as_bytes()[10] == b'T');
    assert!(body["response"].is_string());
    assert_eq!(body["done"], true);
    assert_eq!(body["model"], "qwen2.5-coder:redraft");
    assert!(body["prompt_eval_count"].as_u64().unwrap() > 10);
    // Two requests, two ids.
    let again = server.post(
        "/api/generate",
        &json!({"model": "qwen2.5-coder:redraft", "prompt": qwen_prompt(), "raw": true, "stream": false}),
    );
    assert_ne!(again.json()["created_at"], body["created_at"]);
}

/// Ollama streams by default: NDJSON lines of `response` pieces, the last with `done: true`
/// and the counts; together they say what the non-streamed answer says.
#[test]
fn ollama_streams_ndjson_by_default_ending_with_done() {
    let server = Server::start(&[]);
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX, "options": {"temperature": 0}});
    let response = server.post("/api/generate", &request);
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("application/x-ndjson")
    );
    let text = response.text();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (last, pieces) = lines.split_last().unwrap();
    assert_eq!(last["done"], true);
    assert!(last["done_reason"].is_string());
    assert!(last["eval_count"].is_u64() && last["total_duration"].is_u64());
    assert!(pieces.iter().all(|p| p["done"] == false));
    let streamed: String = lines
        .iter()
        .map(|l| l["response"].as_str().unwrap())
        .collect();
    // Another request in between, so the non-streamed run starts from a full pass too.
    server.post(
        "/api/generate",
        &json!({"prompt": "let v = ", "stream": false}),
    );
    let mut whole = request.clone();
    whole["stream"] = json!(false);
    assert_eq!(
        server.post("/api/generate", &whole).json()["response"],
        streamed
    );
}

/// Zed's model picker keeps the `/api/tags` names it infers a prompt format from.
#[test]
fn tags_and_version_list_names_zed_infers_a_format_from() {
    let server = Server::start(&[]);
    let tags = server.get("/api/tags").json();
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "redraft-default",
            "qwen2.5-coder:redraft",
            "sweep-next-edit:redraft"
        ]
    );
    for model in tags["models"].as_array().unwrap() {
        assert!(model["modified_at"].is_string() && model["size"].is_u64());
        assert_eq!(model["digest"].as_str().unwrap().len(), 64);
        assert!(model["details"]["parameter_size"].is_string());
    }
    let version = server.get("/api/version").json();
    assert!(version["version"].as_str().unwrap().starts_with("0."));
}

/// Zed's Ollama provider is usable once `/api/tags` and then `POST /api/show` of every listed
/// name succeed (`crates/language_models/src/provider/ollama.rs`); it reads `capabilities`.
#[test]
fn show_answers_every_listed_name_with_its_capabilities() {
    let server = Server::start(&[]);
    let tags = server.get("/api/tags").json();
    for model in tags["models"].as_array().unwrap() {
        let name = model["name"].as_str().unwrap();
        let shown = server.post("/api/show", &json!({ "model": name }));
        assert_eq!(shown.status, 200, "{name}: {}", shown.text());
        let shown = shown.json();
        let capabilities = shown["capabilities"].as_array().unwrap();
        assert!(capabilities.contains(&json!("completion")), "{shown}");
        assert!(capabilities.contains(&json!("insert")), "{shown}");
        assert_eq!(shown["details"], model["details"]);
        let family = shown["details"]["family"].as_str().unwrap();
        assert_eq!(family, "qwen2");
        assert!(
            shown["model_info"][format!("{family}.context_length")]
                .as_u64()
                .unwrap()
                >= 256
        );
        assert!(
            shown["model_info"]["general.parameter_count"]
                .as_u64()
                .unwrap()
                > 1_000_000
        );
        assert!(shown["modelfile"].is_string() && shown["template"].is_string());
    }
    // Older clients send `name`.
    let by_name = server.post("/api/show", &json!({"name": "redraft-default"}));
    assert_eq!(by_name.status, 200, "{}", by_name.text());
    let unknown = server.post("/api/show", &json!({"model": "llama3.2"}));
    assert_eq!(unknown.status, 404);
    assert!(unknown.json()["error"]
        .as_str()
        .unwrap()
        .contains("llama3.2"));
    let nameless = server.post("/api/show", &json!({}));
    assert_eq!(nameless.status, 400);
    assert!(nameless.json()["error"].is_string());
    let shows = "redraft_http_requests_total{endpoint=\"/api/show\",status=\"200\"}";
    assert_eq!(server.metric(shows), 4.0);
}

/// An empty prompt is Ollama's "load the model" (`keep_alive` 0: "unload it"): one `done` line
/// at once, nothing generated, even when streaming was asked for.
#[test]
fn an_empty_prompt_loads_or_unloads_without_generating() {
    let server = Server::start(&[]);
    for (request, reason) in [
        (json!({"model": "qwen2.5-coder:redraft"}), "load"),
        (
            json!({"model": "redraft-default", "prompt": "", "stream": false}),
            "load",
        ),
        (
            json!({"model": "redraft-default", "keep_alive": 0}),
            "unload",
        ),
        (
            json!({"model": "redraft-default", "prompt": "", "keep_alive": "0s"}),
            "unload",
        ),
    ] {
        let response = server.post("/api/generate", &request);
        assert_eq!(response.status, 200, "{request}: {}", response.text());
        let text = response.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{request}: {lines:?}");
        let body: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(body["done"], true, "{body}");
        assert_eq!(body["response"], "", "{body}");
        assert_eq!(body["done_reason"], reason, "{body}");
        assert_eq!(body["model"], request["model"], "{body}");
    }
    assert_eq!(server.metric("redraft_forwards_total"), 0.0, "nothing ran");
    // A suffix alone is a fill at the start of a file, as on the other routes.
    let fill = server.post(
        "/api/generate",
        &json!({"prompt": "", "suffix": "fn main() {}\n", "stream": false}),
    );
    assert_eq!(fill.status, 200, "{}", fill.text());
    assert_ne!(fill.json()["done_reason"], "load");
    assert!(
        server.metric("redraft_forwards_total") > 0.0,
        "the model ran"
    );
    // Each route is counted under its own name.
    assert_eq!(
        server.metric("redraft_http_requests_total{endpoint=\"/api/generate\",status=\"200\"}"),
        5.0
    );
    let unknown = server.post("/api/generate", &json!({"model": "llama3.2"}));
    assert_eq!(unknown.status, 404, "a load of a model not served");
}

const WINDOW_ORIGINAL: &str = "fn area(width: u32, height: u32) -> u32 {\n    width * height\n}\n\nfn main() {\n    let a = area(2, 3);\n    println!(\"{a}\");\n}\n";
const WINDOW_CURRENT: &str = "fn area(w: u32, height: u32) -> u32 {\n    width * height\n}\n\nfn main() {\n    let a = area(2, 3);\n    println!(\"{a}\");\n}\n";

/// `sweep_prompt::build_prompt` with one recent change: the answer is the updated window,
/// which Zed diffs against the current one. Held to `redraft complete --next-edit` on the same
/// window, cursor and history.
#[test]
fn zed_sweep_prompt_is_answered_with_the_updated_window() {
    let server = Server::start(&[]);
    let prompt = format!(
        "<|file_sep|>src/util.rs\npub fn one() -> u32 {{ 1 }}\n<|file_sep|>src/lib.rs.diff\noriginal:\nfn area(width: u32, height: u32) -> u32 {{\nupdated:\nfn area(w: u32, height: u32) -> u32 {{\n<|file_sep|>original/src/lib.rs\n{WINDOW_ORIGINAL}<|file_sep|>current/src/lib.rs\n{WINDOW_CURRENT}<|file_sep|>updated/src/lib.rs\n"
    );
    let response = server.post(
        "/v1/completions",
        &json!({"model": "sweep-next-edit:redraft", "prompt": prompt, "max_tokens": 1024}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = zed_parses(&response.json());
    // The cursor is where the windows differ: after `w`.
    let cursor = "fn area(w".len();
    let cli = cli_next_edit(&json!({
        "text": WINDOW_CURRENT,
        "cursor": cursor,
        "path": "src/lib.rs",
        "history": "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-fn area(width: u32, height: u32) -> u32 {\n+fn area(w: u32, height: u32) -> u32 {\n",
    }));
    assert_eq!(
        answer,
        apply_in_region(WINDOW_CURRENT, &cli, 0..WINDOW_CURRENT.len())
    );
    assert_eq!(
        server.metric("redraft_jobs_total{kind=\"edit\",outcome=\"answered\"}"),
        1.0
    );
}

/// Zeta 2's merge-marker layout (Qwen tokens, as `v0120_git_merge_markers` writes it): the
/// answer is the new region and `>>>>>>> UPDATED`.
#[test]
fn zed_zeta_prompt_is_answered_with_the_new_region_and_end_marker() {
    let server = Server::start(&[]);
    let before = "fn area(w: u32, height: u32) -> u32 {\n";
    let region = "    width * height\n}\n";
    let after = "\nfn main() {}\n";
    let cursor_in_region = "    width".len();
    let prompt = format!(
        "<|file_sep|>edit history\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n-fn area(width: u32, height: u32) -> u32 {{\n+fn area(w: u32, height: u32) -> u32 {{\n<|file_sep|>src/lib.rs\n<|fim_prefix|>{before}<|fim_suffix|>{after}<|fim_middle|><<<<<<< CURRENT\n{}<|user_cursor|>{}=======\n",
        &region[..cursor_in_region],
        &region[cursor_in_region..]
    );
    let response = server.post(
        "/v1/completions",
        &json!({"model": "redraft-default", "prompt": prompt, "max_tokens": 1024}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = zed_parses(&response.json());
    let new_region = answer
        .strip_suffix(">>>>>>> UPDATED\n")
        .unwrap_or_else(|| panic!("no end marker: {answer:?}"));
    let text = format!("{before}{region}{after}");
    let cli = cli_next_edit(&json!({
        "text": text,
        "cursor": before.len() + cursor_in_region,
        "path": "src/lib.rs",
        "history": "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n-fn area(width: u32, height: u32) -> u32 {\n+fn area(w: u32, height: u32) -> u32 {\n",
    }));
    let expected = apply_in_region(&text, &cli, before.len()..before.len() + region.len());
    assert_eq!(new_region, expected);
}
