//! The `backend` setting: inline completions filled by another process's model over HTTP, the
//! same plan and post-processing around it; a backend that fails costs that request only.

use std::net::TcpListener;

use serde_json::json;

use super::client::{items, Lsp, Start};

const URI: &str = "file:///tmp/backend.rs";
const TEXT: &str = "fn main() {\n    let total = \n}\n";

#[tokio::test]
async fn inline_completions_come_from_the_backend_through_the_same_plan_and_finish() {
    let (url, seen) =
        redraft_tests::fake_openai::start("items.len() + 1;\n    println!(\"{total}\");");
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
async fn other_documents_are_named_in_the_prompt_relative_to_their_workspace_folder() {
    let (url, seen) = redraft_tests::fake_openai::start("items.len() + 1;");
    let lsp = Lsp::start(Start {
        options: json!({
            "effort": "low", "maxTokens": 12,
            "backend": {"url": url, "model": "fake-coder", "template": "qwen"},
        }),
        root: Some("file:///home/alice/demo"),
        ..Start::default()
    })
    .await;
    let capability = &lsp.initialize_result["capabilities"]["workspace"]["workspaceFolders"];
    assert_eq!(
        capability,
        &json!({"supported": true, "changeNotifications": true})
    );
    let main = "file:///home/alice/demo/src/main.rs";
    // Neighbours share the identifiers around the cursor, so their snippets are chosen.
    let neighbour = "fn total(items: &[u32]) -> usize {\n    items.len()\n}\n";
    lsp.open("file:///home/alice/demo/src/items.rs", "rust", neighbour);
    lsp.open("file:///home/alice/lib/src/lib.rs", "rust", neighbour);
    lsp.open(main, "rust", TEXT);

    lsp.inline(main, 1, 16, true).await.answer().await.unwrap();
    let first = last_prompt(&seen);
    assert!(first.contains("// src/items.rs\n"), "{first}");
    assert!(first.contains("// /home/alice/lib/src/lib.rs\n"), "{first}");

    // The client adds the library's folder and removes the first.
    lsp.notify::<super::client::DidChangeWorkspaceFolders>(json!({"event": {
        "added": [{"uri": "file:///home/alice/lib", "name": "lib"}],
        "removed": [{"uri": "file:///home/alice/demo", "name": "workspace"}],
    }}));
    lsp.change(main, 2, [[1, 16], [1, 16]], " ");
    lsp.inline(main, 1, 17, true).await.answer().await.unwrap();
    let second = last_prompt(&seen);
    assert!(
        second.contains("// /home/alice/demo/src/items.rs\n"),
        "{second}"
    );
    assert!(second.contains("// src/lib.rs\n"), "{second}");
    lsp.shutdown().await;
}

/// The prompt of the last request the fake backend was sent.
fn last_prompt(seen: &std::sync::Mutex<Vec<serde_json::Value>>) -> String {
    seen.lock().unwrap().last().unwrap()["prompt"]
        .as_str()
        .unwrap()
        .to_string()
}

/// With VS Code's suggest widget open on an item, the client shows only a suggestion that
/// extends the item over its range: the model is asked as if the item were accepted, and each
/// suggestion comes back as the item's text and what follows it, over the item's range.
#[tokio::test]
async fn a_suggestion_extends_the_item_selected_in_the_suggest_widget() {
    let (url, seen) = redraft_tests::fake_openai::start("(items);");
    let lsp = Lsp::start(Start {
        options: json!({
            "effort": "low", "maxTokens": 12,
            "backend": {"url": url, "model": "fake-coder", "template": "qwen"},
        }),
        ..Start::default()
    })
    .await;
    // The user has typed `dr`; the widget's item is `drop`, replacing `dr` (and the `op` of
    // a word the cursor is inside: VS Code's replace mode).
    lsp.open(URI, "rust", "fn main() {\n    drop\n}\n");
    let inline = |selected: serde_json::Value| {
        lsp.send::<super::client::InlineCompletion>(json!({
            "textDocument": {"uri": URI},
            "position": {"line": 1, "character": 6},
            "context": {"triggerKind": 2, "selectedCompletionInfo": selected},
        }))
    };
    let answer = inline(json!({
        "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 8}},
        "text": "drop_in_place",
    }))
    .await
    .answer()
    .await
    .unwrap();
    let prompt = last_prompt(&seen);
    assert!(
        prompt.contains("    drop_in_place<|fim_suffix|>\n}"),
        "{prompt}"
    );
    assert_eq!(
        items(&answer),
        [json!({
            "insertText": "drop_in_place(items);",
            "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 8}},
        })],
        "{answer}"
    );

    // An item whose range is not around the cursor is not applied: the suggestion is the
    // cursor's own.
    let answer = inline(json!({
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 2}},
        "text": "pub fn",
    }))
    .await
    .answer()
    .await
    .unwrap();
    let prompt = last_prompt(&seen);
    assert!(prompt.contains("    dr<|fim_suffix|>op\n}"), "{prompt}");
    for item in items(&answer) {
        assert_eq!(
            item["range"]["start"],
            json!({"line": 1, "character": 6}),
            "{answer}"
        );
    }
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
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"backend": null}}));
    let local = lsp.inline(URI, 1, 16, true).await.answer().await.unwrap();
    let plain = Lsp::start(Start::default()).await;
    plain.open(URI, "rust", TEXT);
    let expected = plain.inline(URI, 1, 16, true).await.answer().await.unwrap();
    assert_eq!(items(&local), items(&expected));
    plain.shutdown().await;
    lsp.shutdown().await;
}
