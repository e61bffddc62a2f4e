//! Inception's Mercury shapes (<https://api.inceptionlabs.ai/openapi.json>):
//! `/v1/fim/completions` with its usage fields and the `diffusing` stream,
//! `/v1/edit/completions` with the tagged edit message Zed's `mercury.rs` builds.

use serde_json::{json, Value};

use super::client::{Server, Start};
use super::{apply_in_region, cli_next_edit, PREFIX, SUFFIX};

#[test]
fn mercury_fim_has_inceptions_usage_fields() {
    let server = Server::start(&[]);
    let response = server.post(
        "/v1/fim/completions",
        &json!({"model": "redraft-default", "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 512,
                "presence_penalty": 1.5, "stop": ["\n\n", "\n \n"]}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], "text_completion");
    assert!(body["id"].as_str().unwrap().starts_with("cmpl-"));
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    let text = choice["text"].as_str().unwrap();
    assert!(!text.contains("\n\n"), "{text:?}");
    assert!(choice["finish_reason"].is_string());
    for key in [
        "prompt_tokens",
        "reasoning_tokens",
        "completion_tokens",
        "total_tokens",
        "cached_input_tokens",
    ] {
        assert!(body["usage"][key].is_u64(), "{key}: {body}");
    }
    let missing = server.post("/v1/fim/completions", &json!({"suffix": SUFFIX}));
    assert_eq!(missing.status, 400);
    assert_eq!(missing.json()["error"]["param"], "prompt");
}

/// `diffusing`: every denoising step's whole draft (masked slots as `░`), committed share
/// growing, then the final answer (the one the plain request gets) and `[DONE]`.
#[test]
fn mercury_diffusing_stream_shows_each_step_then_the_answer() {
    let server = Server::start(&[]);
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 24,
                         "stream": true, "diffusing": true});
    let events = server.post("/v1/fim/completions", &request).events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let (last, drafts) = chunks.split_last().unwrap();
    assert!(drafts.len() >= 2, "one event per step: {events:?}");
    assert!(drafts[0]["choices"][0]["text"]
        .as_str()
        .unwrap()
        .contains('░'));
    let mut progress = 0.0;
    for draft in drafts {
        assert_eq!(draft["diffusion_meta"]["diffusion_content"], true);
        assert!(draft["choices"][0]["finish_reason"].is_null());
        let p = draft["diffusion_meta"]["diffusion_progress"]
            .as_f64()
            .unwrap();
        assert!(p >= progress && p <= 1.0, "{p} after {progress}");
        progress = p;
    }
    assert_eq!(progress, 1.0, "the last draft has nothing masked");
    assert_eq!(last["diffusion_meta"]["diffusion_content"], false);
    assert!(last["choices"][0]["finish_reason"].is_string());
    let final_text = last["choices"][0]["text"].as_str().unwrap();
    assert!(!final_text.contains('░'));
    server.post("/v1/fim/completions", &json!({"prompt": "let v = "}));
    let plain = server
        .post(
            "/v1/fim/completions",
            &json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 24}),
        )
        .json();
    assert_eq!(plain["choices"][0]["text"], final_text);
    assert_eq!(
        server.metric("redraft_stream_drafts_total"),
        drafts.len() as f64
    );
}

const BEFORE: &str = "use std::fmt;\n\n";
const REGION: &str = "fn area(w: u32, height: u32) -> u32 {\n    width * height\n}\n";
const AFTER: &str = "\nfn main() {}\n";
const HISTORY: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -3,1 +3,1 @@\n-fn area(width: u32, height: u32) -> u32 {\n+fn area(w: u32, height: u32) -> u32 {\n";

/// Zed's `mercury::build_prompt`: every section opened by its tag line and closed by a newline
/// and its closing tag.
fn zed_mercury_prompt(cursor_in_region: usize) -> String {
    format!(
        "<|recently_viewed_code_snippets|>\n<|recently_viewed_code_snippet|>\ncode_snippet_file_path: src/util.rs\npub fn one() -> u32 {{ 1 }}\n\n<|/recently_viewed_code_snippet|>\n\n<|/recently_viewed_code_snippets|>\n<|current_file_content|>\ncurrent_file_path: src/lib.rs\n{BEFORE}<|code_to_edit|>\n{}<|cursor|>{}\n<|/code_to_edit|>\n{AFTER}\n<|/current_file_content|>\n<|edit_diff_history|>\n{HISTORY}\n<|/edit_diff_history|>\n",
        &REGION[..cursor_in_region],
        &REGION[cursor_in_region..]
    )
}

/// The answer is the `code_to_edit` region rewritten (tags gone), held to `redraft complete
/// --next-edit` on the same file, cursor and history.
#[test]
fn mercury_edit_answers_the_rewritten_region() {
    let server = Server::start(&[]);
    let cursor_in_region = "fn area(w: u32, height: u32) -> u32 {\n    width".len();
    let response = server.post(
        "/v1/edit/completions",
        &json!({"model": "redraft-default", "max_tokens": 1024, "temperature": 0.0,
                "messages": [{"role": "user", "content": zed_mercury_prompt(cursor_in_region)}]}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let body = response.json();
    assert_eq!(body["object"], "edit.completion");
    assert!(body["id"].as_str().unwrap().starts_with("cmpl-"));
    let choice = &body["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["finish_reason"], "stop");
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let content = choice["message"]["content"].as_str().unwrap();
    let text = format!("{BEFORE}{REGION}{AFTER}");
    let cli = cli_next_edit(&json!({
        "text": text, "cursor": BEFORE.len() + cursor_in_region,
        "path": "src/lib.rs", "history": HISTORY,
    }));
    assert_eq!(
        content,
        apply_in_region(&text, &cli, BEFORE.len()..BEFORE.len() + REGION.len())
    );
    // Content as a list of text parts (chat clients send that too) is the same message.
    let parts = server.post(
        "/v1/edit/completions",
        &json!({"messages": [{"role": "user", "content": [{"type": "text", "text": zed_mercury_prompt(cursor_in_region)}]}]}),
    );
    assert_eq!(parts.status, 200, "{}", parts.text());
}

#[test]
fn mercury_edit_rejects_what_is_not_one_tagged_user_message() {
    let server = Server::start(&[]);
    let prompt = zed_mercury_prompt(0);
    let two = server.post(
        "/v1/edit/completions",
        &json!({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]}),
    );
    assert_eq!(two.status, 400);
    assert_eq!(two.json()["error"]["param"], "messages");
    let assistant = server.post(
        "/v1/edit/completions",
        &json!({"messages": [{"role": "assistant", "content": prompt}]}),
    );
    assert_eq!(assistant.status, 400);
    let untagged = server.post(
        "/v1/edit/completions",
        &json!({"messages": [{"role": "user", "content": "make it faster"}]}),
    );
    assert_eq!(untagged.status, 422);
    assert_eq!(untagged.json()["error"]["code"], "unprocessable");
    let no_messages = server.post("/v1/edit/completions", &json!({"model": "redraft-default"}));
    assert_eq!(no_messages.status, 400);
}

/// A stream's request duration is the whole stream's, not the time to its head (sent before
/// the first step runs): with a pause after every denoising step, the drafts it carried prove
/// a lower bound on how long it lasted.
#[test]
fn a_streams_request_duration_covers_all_its_events() {
    const STEP_DELAY_MS: u64 = 400;
    let server = Server::start_with(Start {
        step_delay_ms: Some(STEP_DELAY_MS),
        ..Start::default()
    });
    let request = json!({"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 24, "effort": "high",
                         "stream": true, "diffusing": true});
    let events = server.post("/v1/fim/completions", &request).events();
    let drafts = events
        .iter()
        .filter(|e| e.contains("\"diffusion_content\":true"))
        .count();
    assert!(drafts >= 3, "{events:?}");
    // Between the first draft and the last, a pause after each step but the last.
    let lasted_at_least = (drafts - 1) as f64 * STEP_DELAY_MS as f64 / 1e3;
    let recorded = server
        .metric("redraft_http_request_duration_seconds_sum{endpoint=\"/v1/fim/completions\"}");
    assert!(
        recorded >= lasted_at_least,
        "{recorded} s recorded for a stream of {drafts} drafts {STEP_DELAY_MS} ms apart"
    );
}
