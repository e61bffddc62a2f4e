//! The `backend` setting: inline completions filled by another process's model over HTTP, the
//! same plan and post-processing around it; a backend that fails costs that request only. The
//! fake backend also shows the tests each prompt and how often the model ran: the suggest
//! widget's item, its type-through and its tree are tested here.

use std::sync::{Arc, Mutex};

use redraft_tests::refused::RefusedPort;
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
    let (lsp, seen) = on_fake_backend_in("items.len() + 1;", Some("file:///home/alice/demo")).await;
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
pub(super) fn last_prompt(seen: &std::sync::Mutex<Vec<serde_json::Value>>) -> String {
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

/// A session on the fake backend answering `middle`, with the debug log on.
async fn on_fake_backend(middle: &'static str) -> (Lsp, Arc<Mutex<Vec<serde_json::Value>>>) {
    on_fake_backend_in(middle, None).await
}

/// [`on_fake_backend`] with `root` as the workspace folder; the prompts the backend is sent.
pub(super) async fn on_fake_backend_in(
    middle: &'static str,
    root: Option<&'static str>,
) -> (Lsp, Arc<Mutex<Vec<serde_json::Value>>>) {
    let (url, seen) = redraft_tests::fake_openai::start(middle);
    let lsp = Lsp::start(Start {
        options: json!({
            "effort": "low", "maxTokens": 12, "logLevel": "debug",
            "backend": {"url": url, "model": "fake-coder", "template": "qwen"},
        }),
        root,
        ..Start::default()
    })
    .await;
    (lsp, seen)
}

/// The answer to an automatic request at `line`:`character` of `uri` with the suggest widget
/// open on an item: `text` over `line`:`start`..`end`.
async fn with_item(
    lsp: &Lsp,
    uri: &str,
    [line, character]: [u32; 2],
    (start, end, text): (u32, u32, &str),
) -> serde_json::Value {
    lsp.send::<super::client::InlineCompletion>(json!({
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 2, "selectedCompletionInfo": {
            "range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
            "text": text,
        }},
    }))
    .await
    .answer()
    .await
    .unwrap()
}

/// One item inserted over `line`:`start`..`end`, as the answers' JSON has it.
fn item(text: &str, line: u32, [start, end]: [u32; 2]) -> serde_json::Value {
    json!({
        "insertText": text,
        "range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
    })
}

/// The suggestion shown with the suggest widget's item is remembered on the text with the item
/// applied: once the user accepts the item, the request at the cursor after it is answered from
/// the type-through cache, as if the user had typed the item, and the model does not run again.
#[tokio::test]
async fn the_suggestion_shown_with_a_selected_item_is_typed_through_once_it_is_accepted() {
    let (lsp, seen) = on_fake_backend("(items);").await;
    let runs = || seen.lock().unwrap().len();
    // The user has typed `dr`; the widget's item is `drop_in_place`.
    lsp.open(URI, "rust", "fn main() {\n    dr\n}\n");
    let answer = with_item(&lsp, URI, [1, 6], (4, 6, "drop_in_place")).await;
    assert_eq!(
        items(&answer),
        [item("drop_in_place(items);", 1, [4, 6])],
        "{answer}"
    );
    assert_eq!(runs(), 1);
    // The item accepted, then the suggestion typed through.
    lsp.change(URI, 1, [[1, 4], [1, 6]], "drop_in_place");
    let answer = lsp.inline(URI, 1, 17, false).await.answer().await.unwrap();
    assert_eq!(items(&answer), [item("(items);", 1, [17, 17])], "{answer}");
    lsp.change(URI, 2, [[1, 17], [1, 17]], "(");
    let answer = lsp.inline(URI, 1, 18, false).await.answer().await.unwrap();
    assert_eq!(items(&answer), [item("items);", 1, [18, 18])], "{answer}");
    assert_eq!(runs(), 1, "answered from the type-through cache");
    lsp.shutdown().await;
}

/// VS Code asks again at each keystroke while its suggest widget stays on an item: the text with
/// the item applied is the same, and so is the answer, from the type-through cache.
#[tokio::test]
async fn the_same_item_asked_about_again_as_the_user_types_is_answered_without_the_model() {
    let (lsp, seen) = on_fake_backend("(items);").await;
    let runs = || seen.lock().unwrap().len();
    lsp.open(URI, "rust", "fn main() {\n    dr\n}\n");
    with_item(&lsp, URI, [1, 6], (4, 6, "drop_in_place")).await;
    assert_eq!(runs(), 1);
    lsp.change(URI, 1, [[1, 6], [1, 6]], "o");
    let answer = with_item(&lsp, URI, [1, 7], (4, 7, "drop_in_place")).await;
    assert_eq!(
        items(&answer),
        [item("drop_in_place(items);", 1, [4, 7])],
        "{answer}"
    );
    assert_eq!(runs(), 1, "answered from the type-through cache");
    lsp.shutdown().await;
}

/// The answer remembered with an item serves only the text with that item, and an answer on the
/// document's own text serves an item only where the item makes the text one it types through:
/// everywhere else the model runs.
#[tokio::test]
async fn a_selected_items_suggestion_serves_only_the_text_with_that_item() {
    let (lsp, seen) = on_fake_backend("(items);").await;
    let runs = || seen.lock().unwrap().len();
    let text = "fn main() {\n    drop\n}\n";
    // The item replaces the word the cursor is in (VS Code's replace mode), but the client
    // inserts it before the word's rest (insert mode): `drop_in_placeop`.
    let replaces = "file:///tmp/replaces.rs";
    lsp.open(replaces, "rust", text);
    with_item(&lsp, replaces, [1, 6], (4, 8, "drop_in_place")).await;
    assert_eq!(runs(), 1);
    lsp.change(replaces, 1, [[1, 4], [1, 6]], "drop_in_place");
    let answer = lsp
        .inline(replaces, 1, 17, false)
        .await
        .answer()
        .await
        .unwrap();
    assert_eq!(runs(), 2, "the model ran: {answer}");

    // Another item accepted than the one the suggestion was shown with.
    let other = "file:///tmp/other.rs";
    lsp.open(other, "rust", text);
    with_item(&lsp, other, [1, 8], (4, 8, "drop_in_place")).await;
    lsp.change(other, 1, [[1, 4], [1, 8]], "drop_in");
    lsp.inline(other, 1, 11, false)
        .await
        .answer()
        .await
        .unwrap();
    assert_eq!(runs(), 4, "the model ran");

    // A suggestion on the document's own text (`(items);` after `drop`) is not the item's.
    let own = "file:///tmp/own.rs";
    lsp.open(own, "rust", text);
    lsp.inline(own, 1, 8, false).await.answer().await.unwrap();
    assert_eq!(runs(), 5);
    let answer = with_item(&lsp, own, [1, 8], (4, 8, "drop_in_place")).await;
    assert_eq!(runs(), 6, "the model ran: {answer}");
    lsp.shutdown().await;
}

/// The job for a request with the suggest widget's item gets the document's tree edited for the
/// item and re-parsed (rather than none, which leaves the context layer a whole parse to make
/// on the model's thread), and is planned as the same text with the item typed: the same prompt.
#[tokio::test]
async fn a_selected_item_gets_the_documents_tree_edited_and_the_prompt_of_the_text_with_it() {
    let (lsp, seen) = on_fake_backend("(items);").await;
    let text = "fn main() {\n    let items = [1, 2];\n    dr\n}\n";
    lsp.open(URI, "rust", text);
    with_item(&lsp, URI, [2, 6], (4, 6, "drop")).await;
    let logged = lsp
        .wait_for_log(|m| m.contains("the selected completion item applied"))
        .await;
    assert!(
        logged.contains("its tree edited and re-parsed in"),
        "{logged}"
    );
    let with_item = last_prompt(&seen);
    // The same text typed, in a document of its own (closed first: not a neighbour).
    lsp.notify::<super::client::DidClose>(json!({"textDocument": {"uri": URI}}));
    lsp.open(URI, "rust", &text.replace("    dr\n", "    drop\n"));
    lsp.inline(URI, 2, 8, false).await.answer().await.unwrap();
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "the model ran for the typed text too"
    );
    assert_eq!(with_item, last_prompt(&seen));
    lsp.shutdown().await;
}

#[tokio::test]
async fn a_backend_that_is_down_costs_the_request_not_the_session() {
    let refused = RefusedPort::new();
    let port = refused.port();
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

/// An editor with both inline suggestions and the menu (`completionItems: true`) asks
/// for both at each keystroke, at the same place: the model runs once, for whichever came
/// first, and both show its suggestion.
#[tokio::test]
async fn a_menu_and_an_inline_request_at_one_place_run_the_model_once() {
    // Each answer held back until the second request waits for the first one's job.
    let (url, seen, release) = redraft_tests::fake_openai::start_held("items.len() + 1;");
    let lsp = with_menu_on(&url).await;
    let runs = || seen.lock().unwrap().len();
    lsp.open(URI, "rust", TEXT);
    let (inline, menu) = both_at_once(&lsp, &release, true, 0, 16).await;
    assert_eq!(shown(&inline), ["items.len() + 1;"]);
    assert_eq!(shown(&menu), ["items.len() + 1;"]);
    assert_eq!(runs(), 1, "the menu took the inline request's answer");

    // The other way round, after a keystroke the suggestion does not start with.
    lsp.change(URI, 1, [[1, 16], [1, 16]], "n");
    let (inline, menu) = both_at_once(&lsp, &release, false, 1, 17).await;
    assert_eq!(shown(&inline), ["items.len() + 1;"]);
    assert_eq!(shown(&menu), ["nitems.len() + 1;"], "after the word typed");
    assert_eq!(runs(), 2, "the inline request took the menu's answer");
    lsp.shutdown().await;
}

/// Where the job the second request waits for fails (the backend answers an error), the second
/// answers nothing too: it does not send the backend the same request again.
#[tokio::test]
async fn a_request_waiting_on_a_job_that_failed_answers_nothing_without_running_it_again() {
    let (url, seen, release) =
        redraft_tests::fake_openai::start_held_failing("the GPU is out of memory");
    let lsp = with_menu_on(&url).await;
    lsp.open(URI, "rust", TEXT);
    let (inline, menu) = both_at_once(&lsp, &release, true, 0, 16).await;
    assert!(shown(&inline).is_empty(), "{inline}");
    assert!(shown(&menu).is_empty(), "{menu}");
    assert_eq!(seen.lock().unwrap().len(), 1, "one request to the backend");
    lsp.wait_for_log(|m| m.contains("as the job of a request at the same place failed"))
        .await;
    lsp.shutdown().await;
}

/// A server offering the menu beside inline completions, on the backend at `url`.
async fn with_menu_on(url: &str) -> Lsp {
    Lsp::start(Start {
        options: json!({
            "effort": "low", "maxTokens": 12, "logLevel": "debug", "completionItems": true,
            "backend": {"url": url, "model": "fake-coder", "template": "qwen"},
        }),
        ..Start::default()
    })
    .await
}

/// An inline and a menu request at `column` of line 1 of the document's `version`, the inline
/// one first or not, the backend's answer let go once the second waits for the first one's
/// job: their answers, inline first.
async fn both_at_once(
    lsp: &Lsp,
    release: &std::sync::mpsc::Sender<()>,
    inline_first: bool,
    version: i32,
    column: u32,
) -> (serde_json::Value, serde_json::Value) {
    let (inline, menu) = if inline_first {
        let inline = lsp.inline(URI, 1, column, false).await;
        (inline, lsp.completion(URI, 1, column, false).await)
    } else {
        let menu = lsp.completion(URI, 1, column, false).await;
        (lsp.inline(URI, 1, column, false).await, menu)
    };
    let waits = format!("v{version}: waits for the job");
    lsp.wait_for_log(|m| m.contains(&waits)).await;
    release.send(()).unwrap();
    (inline.answer().await.unwrap(), menu.answer().await.unwrap())
}

/// The texts an inline answer or a menu's shows.
fn shown(answer: &serde_json::Value) -> Vec<String> {
    let menu = answer.get("isIncomplete").is_some();
    items(answer)
        .iter()
        .map(|item| {
            let text = if menu {
                &item["textEdit"]["newText"]
            } else {
                &item["insertText"]
            };
            text.as_str().unwrap().to_string()
        })
        .collect()
}
