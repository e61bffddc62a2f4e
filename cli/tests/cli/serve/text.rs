//! The server's text is always valid: around 4-byte characters and NUL escapes the default
//! model writes byte tokens that do not form UTF-8, which came back as runs of U+FFFD. Now no
//! answer, stream draft or Ollama line holds a character the model did not write.

use serde_json::{json, Value};

use super::client::Server;

/// The prompts that brought replacement characters back: NULs and emoji around the cursor, and
/// emoji around Qwen's FIM tokens.
pub fn cases() -> Vec<Value> {
    vec![
        json!({"prompt": "\u{0}\u{0}😀\u{0}", "suffix": "\u{0}😀😀", "max_tokens": 32}),
        json!({"prompt": "<|fim_prefix|>😀😀😀😀<|fim_suffix|>🦀🦀🦀<|fim_middle|>",
               "max_tokens": 32}),
        json!({"prompt": "let s = \"🦀\u{0}🦀\u{0}", "suffix": "\";\n", "max_tokens": 32}),
    ]
}

#[track_caller]
fn valid(text: &str, context: &str) {
    assert!(
        !text.contains(char::REPLACEMENT_CHARACTER),
        "{context}: {text:?}"
    );
}

#[test]
fn answers_drafts_and_lines_around_4_byte_characters_and_nul_are_valid_text() {
    let server = Server::start(&[]);
    for case in cases() {
        let answer = server.post("/v1/completions", &case);
        assert_eq!(answer.status, 200, "{}", answer.text());
        valid(
            answer.json()["choices"][0]["text"].as_str().unwrap(),
            &format!("/v1/completions {case}"),
        );
        let mut streamed = case.clone();
        streamed["stream"] = json!(true);
        streamed["diffusing"] = json!(true);
        let events = server.post("/v1/fim/completions", &streamed).events();
        assert!(events.len() > 2, "{events:?}");
        for event in &events[..events.len() - 1] {
            let chunk: Value = serde_json::from_str(event).unwrap();
            valid(
                chunk["choices"][0]["text"].as_str().unwrap(),
                &format!("a diffusing draft for {case}"),
            );
        }
        let mut ollama = case.clone();
        ollama["stream"] = json!(false);
        let answer = server.post("/api/generate", &ollama);
        assert_eq!(answer.status, 200, "{}", answer.text());
        valid(
            answer.json()["response"].as_str().unwrap(),
            &format!("/api/generate {case}"),
        );
    }
}
