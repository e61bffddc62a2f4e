//! `redraft serve` end to end: the real binary on a free loopback port, on the embedded default
//! model, driven with the requests real clients send (Zed's OpenAI-compatible and Ollama
//! providers with their FIM templates and stop lists, Zed's Sweep and Zeta next-edit prompts,
//! Inception's Mercury shapes), with a remote FIM backend (`backend`), and with what broken or
//! hostile clients send.
//! `client` is the process and a small HTTP/1.1 client over raw TCP.

mod backend;
mod batching;
mod gate;
mod hostile;
mod mercury;
mod openai;
mod sdk;
mod slow;
mod text;
mod zed;

use redraft_tests::{cli, serve_client as client};

use serde_json::{json, Value};

/// A function body to fill: the cursor is where `// cursor` was.
pub const PREFIX: &str = "fn add(a: u32, b: u32) -> u32 {\n    ";
pub const SUFFIX: &str = "\n}\n\nfn main() {\n    println!(\"{}\", add(1, 2));\n}\n";

/// Qwen's FIM template around [`PREFIX`] and [`SUFFIX`], as Zed writes it.
pub fn qwen_prompt() -> String {
    format!("<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>")
}

/// Zed's Qwen stop list (`crates/edit_prediction/src/fim.rs` in zed-industries/zed).
pub fn qwen_stops() -> Value {
    json!([
        "<|endoftext|>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>"
    ])
}

/// Runs `redraft complete --next-edit --stdin-json --json` on `request` (the oracle the
/// next-edit endpoints are held to: the same pipeline from the command line).
pub fn cli_next_edit(request: &Value) -> Value {
    let args = ["complete", "--next-edit", "--stdin-json", "--json"];
    cli::json_ok(&cli::redraft(&args, &request.to_string()))
}

/// `text[region]` with the CLI's edits that lie inside it applied.
pub fn apply_in_region(text: &str, cli: &Value, region: std::ops::Range<usize>) -> String {
    let mut out = String::new();
    let mut at = region.start;
    for edit in cli["edits"].as_array().unwrap() {
        let (start, end) = (
            edit["start"].as_u64().unwrap() as usize,
            edit["end"].as_u64().unwrap() as usize,
        );
        if start < at || end > region.end {
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(edit["text"].as_str().unwrap());
        at = end;
    }
    out.push_str(&text[at..region.end]);
    out
}
