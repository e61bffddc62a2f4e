//! The protocol as an editor drives it: initialize (encoding negotiation, progress), open,
//! incremental edits, inline completion, the three kinds of cancellation, type-through,
//! streaming, configuration, shutdown and exit.

use std::time::Duration;

use serde_json::{json, Value};

use super::client::{items, Lsp, Start, CANCELLED, INVALID_PARAMS};

const URI: &str = "file:///work/demo/src/lib.rs";

/// A Rust file with the cursor after `let total = ` on line 2.
const SOURCE: &str = "fn sum(values: &[u32]) -> u32 {\n    let mut total = 0;\n    for v in values {\n        total += \n    }\n    total\n}\n";

/// Settings under which a request runs long enough to be cancelled mid-way: one token per
/// step over a large canvas.
fn slow() -> Value {
    json!({"effort": "high", "maxTokens": 200, "streamSteps": true})
}

/// A server whose runs take a while whatever the machine and model: high effort, and a pause
/// after every denoising step, so cancels and edits land while the sampler is running.
async fn slow_server() -> Lsp {
    Lsp::start(Start {
        options: slow(),
        step_delay_ms: Some(25),
        ..Start::default()
    })
    .await
}

fn assert_one_line_items(answer: &Value, line: u32, character: u32) -> Vec<String> {
    items(answer)
        .iter()
        .map(|item| {
            let range = &item["range"];
            assert_eq!(
                range["start"],
                json!({"line": line, "character": character}),
                "{item}"
            );
            assert_eq!(
                range["end"]["line"],
                json!(line),
                "a range stays on one line: {item}"
            );
            let text = item["insertText"].as_str().unwrap().to_string();
            assert!(
                !text.trim().is_empty(),
                "no whitespace-only suggestion: {item}"
            );
            text
        })
        .collect()
}

/// Asks for a suggestion at (`line`, `character`) and checks every item as
/// `assert_one_line_items` does; the items' texts.
async fn one_line_suggestions(lsp: &Lsp, uri: &str, line: u32, character: u32) -> Vec<String> {
    let answer = lsp.inline(uri, line, character, false).await.answer().await;
    assert_one_line_items(&answer.unwrap(), line, character)
}

#[tokio::test]
async fn initialize_negotiates_the_position_encoding() {
    for (offered, chosen) in [
        (None, "utf-16"),
        (Some(vec!["utf-16", "utf-8"]), "utf-8"),
        (Some(vec!["utf-32", "utf-16"]), "utf-32"),
    ] {
        let lsp = Lsp::start(Start {
            encodings: offered,
            wait_for_model: false,
            ..Start::default()
        })
        .await;
        let capabilities = &lsp.initialize_result["capabilities"];
        assert_eq!(capabilities["positionEncoding"], json!(chosen));
        assert_eq!(
            capabilities["textDocumentSync"],
            json!(2),
            "incremental sync"
        );
        assert_eq!(capabilities["inlineCompletionProvider"], json!(true));
        assert_eq!(
            lsp.initialize_result["serverInfo"]["name"],
            json!("redraft")
        );
        lsp.shutdown().await;
    }
}

#[tokio::test]
async fn open_edit_complete_and_exit() {
    let lsp = Lsp::start(Start::default()).await;
    // The model load was reported as work-done progress, begun and ended (the end may come
    // after the log line the start waited for).
    let end = lsp
        .wait_for("$/progress", |p| p["value"]["kind"] == json!("end"))
        .await;
    let message = end["value"]["message"].as_str().unwrap();
    assert!(
        message.contains("model loaded from <embedded>"),
        "{message}"
    );
    let progress = lsp.received("$/progress");
    assert_eq!(progress.first().unwrap()["value"]["kind"], json!("begin"));

    lsp.open(URI, "rust", "fn sum(values: &[u32]) -> u32 {\n}\n");
    // Line 3 does not exist yet.
    let err = lsp
        .inline(URI, 3, 17, false)
        .await
        .answer()
        .await
        .unwrap_err();
    assert_eq!(err.code.0, INVALID_PARAMS, "{err:?}");
    // Type the body in three incremental edits (one with an emoji, counted in UTF-16).
    lsp.change(URI, 1, [[0, 31], [0, 31]], "\n    let mut total = 0;");
    lsp.change(
        URI,
        2,
        [[1, 22], [1, 22]],
        "\n    for v in values {\n        total += \n    }\n    total",
    );
    lsp.change(URI, 3, [[0, 0], [0, 0]], "// 😀 sums\n");
    lsp.change(URI, 4, [[0, 0], [1, 0]], "");
    let answer = lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    let texts = assert_one_line_items(&answer, 3, 17);
    assert_eq!(
        texts.len(),
        1,
        "an automatic trigger gets one item: {answer}"
    );

    // An explicit trigger gets several candidates from one batch, all different.
    let answer = lsp.inline(URI, 3, 17, true).await.answer().await.unwrap();
    let texts = assert_one_line_items(&answer, 3, 17);
    assert!(!texts.is_empty(), "{answer}");
    let mut distinct = texts.clone();
    distinct.dedup();
    assert_eq!(distinct, texts);

    lsp.notify::<super::client::DidClose>(json!({"textDocument": {"uri": URI}}));
    let err = lsp
        .inline(URI, 3, 17, false)
        .await
        .answer()
        .await
        .unwrap_err();
    assert_eq!(
        err.code.0, INVALID_PARAMS,
        "closed documents are unknown: {err:?}"
    );
    lsp.shutdown().await;
}

/// One document however the client escapes its URI: opened with lowercase percent-encoding
/// and an escaped `-`, asked for, edited and closed under other spellings (uppercase
/// percent-encoding, `-` itself, the scheme in capitals). The drafts streamed for a request
/// name the document as that request did.
#[tokio::test]
async fn a_document_is_one_however_its_uri_is_escaped() {
    const OPENED: &str = "file:///work/demo/src/caf%c3%a9%2Dlib.rs";
    const ASKED: &str = "file:///work/demo/src/caf%C3%A9-lib.rs";
    const EDITED: &str = "FILE:///work/demo/src/caf%C3%a9%2dlib.rs";
    let lsp = Lsp::start(Start {
        options: json!({"effort": "low", "maxTokens": 12, "streamSteps": true}),
        ..Start::default()
    })
    .await;
    lsp.open(OPENED, "rust", SOURCE);
    let answer = lsp.inline(ASKED, 3, 17, false).await.answer().await;
    assert!(answer.is_ok(), "{answer:?}\nstderr:\n{}", lsp.stderr());
    let drafts = lsp.received("redraft/draftStep");
    assert!(!drafts.is_empty(), "drafts were streamed");
    for draft in &drafts {
        assert_eq!(draft["textDocument"]["uri"], json!(ASKED), "{draft}");
    }
    // Line 8 is there only once the edit under a third spelling has applied.
    lsp.change(EDITED, 1, [[0, 0], [0, 0]], "// sums\n");
    let answer = lsp.inline(ASKED, 8, 0, false).await.answer().await;
    assert!(answer.is_ok(), "{answer:?}\nstderr:\n{}", lsp.stderr());
    lsp.notify::<super::client::DidClose>(json!({"textDocument": {"uri": EDITED}}));
    let err = lsp
        .inline(OPENED, 3, 17, false)
        .await
        .answer()
        .await
        .unwrap_err();
    assert_eq!(err.code.0, INVALID_PARAMS, "closed: {err:?}");
    lsp.shutdown().await;
}

#[tokio::test]
async fn cancel_request_stops_the_sampler_and_answers_with_the_cancel_error() {
    let lsp = slow_server().await;
    lsp.open(URI, "rust", SOURCE);
    // Uncancelled, the same request takes this many denoising steps.
    let full = lsp.inline(URI, 3, 17, false).await.answer().await;
    assert!(full.is_ok(), "{full:?}");
    let full_steps = lsp.received("redraft/draftStep").len();
    assert!(
        full_steps >= 8,
        "the slow settings need several steps ({full_steps})"
    );
    // Delete what precedes the cursor, so the next request is not answered by type-through.
    lsp.change(URI, 1, [[3, 16], [3, 17]], "");

    let pending = lsp.inline(URI, 3, 16, false).await;
    // Cancel once the sampler has started.
    lsp.wait_for("redraft/draftStep", |p| {
        p["textDocument"]["version"] == json!(1)
    })
    .await;
    lsp.cancel(pending.id);
    let err = pending.answer().await.unwrap_err();
    assert_eq!(err.code.0, CANCELLED, "{err:?}");
    // The sampler stopped early: fewer drafts than a full run.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let steps = lsp
        .received("redraft/draftStep")
        .iter()
        .filter(|p| p["textDocument"]["version"] == json!(1))
        .count();
    // (Typically 2 of 15 here; the bound leaves room for a loaded machine.)
    assert!(
        steps < full_steps,
        "{steps} of {full_steps} steps ran despite the cancel"
    );
    // The stream still ends with a draft that has nothing masked, so clients take the preview down.
    let closing = lsp
        .wait_for("redraft/draftStep", |p| {
            p["textDocument"]["version"] == json!(1) && p["masked"] == json!(0)
        })
        .await;
    assert_eq!(closing["draft"], json!(""), "{closing}");
    // And the server goes on answering.
    let again = lsp.inline(URI, 3, 16, false).await.answer().await;
    assert!(again.is_ok(), "{again:?}");
    lsp.shutdown().await;
}

#[tokio::test]
async fn a_newer_request_or_an_edit_cancels_the_older_request() {
    let lsp = slow_server().await;
    lsp.open(URI, "rust", SOURCE);
    let older = lsp.inline(URI, 3, 17, false).await;
    let newer = lsp.inline(URI, 3, 17, false).await;
    assert_eq!(older.answer().await.unwrap_err().code.0, CANCELLED);
    assert!(newer.answer().await.is_ok());

    // Delete what precedes the cursor, so the next request is not answered by type-through
    // (it would otherwise be, from `newer`'s suggestion, without running the model).
    lsp.change(URI, 1, [[3, 16], [3, 17]], "");
    let running = lsp.inline(URI, 3, 16, false).await;
    lsp.wait_for("redraft/draftStep", |p| {
        p["textDocument"]["version"] == json!(1)
    })
    .await;
    lsp.change(URI, 2, [[3, 16], [3, 16]], "1");
    assert_eq!(running.answer().await.unwrap_err().code.0, CANCELLED);

    // Requests on another document are left alone.
    let other = "file:///work/demo/src/other.rs";
    lsp.open(other, "rust", "fn main() {\n    let x = \n}\n");
    let first = lsp.inline(other, 1, 12, false).await;
    let second = lsp.inline(URI, 3, 17, false).await;
    assert!(first.answer().await.is_ok());
    assert!(second.answer().await.is_ok());
    lsp.shutdown().await;
}

/// A place where the default model suggests at least two characters, so that typing the first
/// leaves something to type through (which place depends on the shipped model): the document,
/// line, column and suggestion. The documents are opened on `lsp`.
async fn a_place_to_type_through(lsp: &Lsp) -> (&'static str, u32, u32, String) {
    let places = [
        (URI, SOURCE, 3, 17),
        (
            "file:///work/demo/src/main.rs",
            "fn main() {\n    let names = vec![\"a\", \"b\"];\n    for name in \n}\n",
            2,
            16,
        ),
        (
            "file:///work/demo/src/util.rs",
            "pub fn greet(name: &str) -> String {\n    format!(\n}\n",
            1,
            12,
        ),
    ];
    for (uri, text, line, column) in places {
        lsp.open(uri, "rust", text);
        let texts = one_line_suggestions(lsp, uri, line, column).await;
        if let Some(first) = texts.first().filter(|t| t.chars().count() >= 2) {
            return (uri, line, column, first.clone());
        }
    }
    panic!("the default model suggests two or more characters at one of the places");
}

#[tokio::test]
async fn typing_through_a_suggestion_is_answered_without_the_model() {
    let lsp = Lsp::start(Start {
        options: json!({"effort": "low", "maxTokens": 12, "streamSteps": true, "logLevel": "debug"}),
        ..Start::default()
    })
    .await;
    let (uri, line, column, first) = a_place_to_type_through(&lsp).await;
    // The debug log says how the canvas was sized and why.
    let log = lsp
        .wait_for_log(|m| m.contains("v0 @") && m.contains("canvas") && m.contains(uri))
        .await;
    assert!(log.contains("canvas"), "{log}");
    let typed: String = first.chars().take(1).collect();
    // The drafts reached the client before the answer, the last one with nothing masked.
    let drafts = lsp.received("redraft/draftStep");
    let last = drafts.last().expect("drafts were streamed");
    assert_eq!(last["masked"], json!(0), "{last}");
    let drafts_before = lsp.received("redraft/draftStep").len();
    lsp.change(uri, 1, [[line, column], [line, column]], &typed);
    let column = column + typed.encode_utf16().count() as u32;
    let rest = one_line_suggestions(&lsp, uri, line, column).await;
    assert_eq!(rest, vec![first[typed.len()..].to_string()]);
    assert_eq!(
        lsp.received("redraft/draftStep").len(),
        drafts_before,
        "the model did not run"
    );
    lsp.wait_for_log(|m| m.contains("type-through cache")).await;
    // "Suggest now" over it asks for more candidates (`candidates`, 3) than the automatic
    // request computed: the model runs for them.
    let invoked = lsp.inline(uri, line, column, true).await.answer().await;
    assert!(invoked.is_ok(), "{invoked:?}");
    assert!(
        lsp.received("redraft/draftStep").len() > drafts_before,
        "the model ran for the explicit request"
    );
    lsp.shutdown().await;
}

/// A client without inline completions (Helix, Kakoune, Sublime) is offered the suggestion as
/// completion items: the text an inline completion shows there, in an item that starts where
/// the word at the cursor starts (a menu is filtered by what was typed of that word), in a list
/// the client asks for again as the user types, which the type-through cache then answers.
#[tokio::test]
async fn a_client_without_inline_completions_gets_the_suggestion_as_completion_items() {
    let lsp = Lsp::start(Start {
        inline: false,
        options: json!({"effort": "low", "maxTokens": 12, "logLevel": "debug"}),
        ..Start::default()
    })
    .await;
    let provider = &lsp.initialize_result["capabilities"]["completionProvider"];
    let triggers = provider["triggerCharacters"].as_array().unwrap();
    assert!(
        triggers.contains(&json!("(")) && triggers.contains(&json!(".")),
        "{provider}"
    );
    // (uri, text, line, cursor column, where the word typed at the cursor starts)
    let places = [
        (
            "file:///work/demo/src/main.rs",
            "fn main() {\n    let names = vec![\"a\", \"b\"];\n    for name in na\n}\n",
            2,
            18,
            16,
        ),
        (URI, SOURCE, 3, 17, 17),
        (
            "file:///work/demo/src/util.rs",
            "pub fn greet(name: &str) -> String {\n    format!(\n}\n",
            1,
            12,
            12,
        ),
    ];
    for (uri, text, line, column, word) in places {
        lsp.open(uri, "rust", text);
        // Invoked (`triggerKind` 1), as Helix asks while the user types: one suggestion all the
        // same, as the automatic inline request below gets, not the `candidates` (3) of an
        // invoked inline request.
        let answer = lsp.completion(uri, line, column, true).await.answer().await;
        let answer = answer.unwrap();
        assert_eq!(answer["isIncomplete"], json!(true), "{answer}");
        let menu = answer["items"].as_array().unwrap().clone();
        assert!(
            menu.len() <= 1,
            "one suggestion for an invoked menu: {answer}"
        );
        // The inline completion at the same place: the same suggestion (from the cache).
        let inline = items(
            &lsp.inline(uri, line, column, false)
                .await
                .answer()
                .await
                .unwrap(),
        );
        // Each inline item as a menu shows it: after the word typed at the cursor; a one-line
        // suggestion that ends with the rest of the line without that rest, up to the cursor
        // (a menu that replaces only up to the cursor would leave it twice).
        let this_line = text.lines().nth(line as usize).unwrap();
        let typed = &this_line[word as usize..column as usize];
        let rest = this_line[column as usize..].trim_end();
        let cursor = json!({"line": line, "character": column});
        let expected: Vec<(String, Value)> = inline
            .iter()
            .map(|shown| {
                let text = shown["insertText"].as_str().unwrap();
                let end = shown["range"]["end"].clone();
                match text.trim_end().strip_suffix(rest) {
                    Some(kept) if end != cursor && !text.contains('\n') => {
                        (format!("{typed}{kept}"), cursor.clone())
                    }
                    _ => (format!("{typed}{text}"), end),
                }
            })
            .filter(|(new_text, _)| !new_text[typed.len()..].trim().is_empty())
            .collect();
        assert_eq!(menu.len(), expected.len(), "{answer}");
        for (rank, (item, (new_text, end))) in menu.iter().zip(&expected).enumerate() {
            // Ahead of other servers' items, in the model's order, the first preselected: Helix
            // orders a menu by how well an item matches what was typed, a preselected one first.
            assert_eq!(item["sortText"], json!(format!("!{rank}")), "{item}");
            assert_eq!(item["preselect"], json!(rank == 0), "{item}");
            let edit = &item["textEdit"];
            assert_eq!(edit["newText"], json!(new_text), "{item}");
            assert_eq!(item["filterText"], json!(new_text), "{item}");
            assert_eq!(
                edit["range"]["start"],
                json!({"line": line, "character": word}),
                "{item}"
            );
            assert_eq!(&edit["range"]["end"], end, "{item}");
            assert_eq!(item["insertTextFormat"], json!(1), "plain text: {item}");
            let first_line = new_text.lines().next().unwrap().trim_end();
            assert!(
                item["label"].as_str().unwrap().starts_with(first_line)
                    || first_line.chars().count() > 60,
                "{item}"
            );
        }
        let Some(first) = menu.first() else {
            continue;
        };
        // Typing the suggestion's first character: the menu's next list comes from the cache.
        let suggestion = &first["textEdit"]["newText"].as_str().unwrap()[typed.len()..];
        let next: String = suggestion.chars().take(1).collect();
        lsp.change(uri, 1, [[line, column], [line, column]], &next);
        let column = column + next.encode_utf16().count() as u32;
        let again = lsp
            .completion(uri, line, column, false)
            .await
            .answer()
            .await;
        let again = again.unwrap();
        // The word at the cursor goes on if a letter was typed, else a new one starts.
        let rest = &suggestion[next.len()..];
        let expected = if next.chars().all(|c| c.is_alphanumeric() || c == '_') {
            format!("{typed}{next}{rest}")
        } else {
            rest.to_string()
        };
        assert_eq!(
            again["items"][0]["textEdit"]["newText"],
            json!(expected),
            "{again}"
        );
        lsp.wait_for_log(|m| m.contains("type-through cache")).await;
        lsp.shutdown().await;
        return;
    }
    panic!("the default model suggests something at one of the places");
}

/// Completion items are offered to a client without inline completions, not to one with them
/// (an editor showing inline suggestions would get each one in its menu too, computed twice),
/// unless the `completionItems` setting says otherwise.
#[tokio::test]
async fn completion_items_follow_the_clients_capabilities_unless_the_setting_says() {
    for (inline, setting, offered) in [
        (true, None, false),
        (false, None, true),
        (false, Some(json!("auto")), true),
        (true, Some(json!(true)), true),
        (false, Some(json!(false)), false),
    ] {
        let mut options = json!({});
        if let Some(setting) = &setting {
            options["completionItems"] = setting.clone();
        }
        let lsp = Lsp::start(Start {
            inline,
            options,
            wait_for_model: false,
            ..Start::default()
        })
        .await;
        let capabilities = &lsp.initialize_result["capabilities"];
        assert_eq!(
            capabilities.get("completionProvider").is_some(),
            offered,
            "inline {inline}, completionItems {setting:?}: {capabilities}"
        );
        lsp.shutdown().await;
    }
}

/// `completionItems` changed after `initialize`: a menu announced then goes off and on with
/// it; one not announced cannot come (the capability is not registered again), and the user is
/// told how to get it.
#[tokio::test]
async fn completion_items_changed_later_turn_the_menu_off_and_on_or_say_how_to_get_it() {
    let lsp = Lsp::start(Start {
        inline: false,
        ..Start::default()
    })
    .await;
    lsp.open(URI, "rust", SOURCE);
    async fn menu(lsp: &Lsp) -> Value {
        let answer = lsp.completion(URI, 3, 17, true).await.answer().await;
        answer.unwrap()["items"].clone()
    }
    let on = menu(&lsp).await;
    assert!(!on.as_array().unwrap().is_empty(), "{on}");
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"completionItems": false}}),
    );
    assert_eq!(menu(&lsp).await, json!([]));
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"completionItems": "auto"}}),
    );
    assert_eq!(menu(&lsp).await, on);
    assert_eq!(lsp.received("window/showMessage"), Vec::<Value>::new());
    lsp.shutdown().await;

    // A client with inline completions: no menu was announced.
    let lsp = Lsp::start(Start {
        wait_for_model: false,
        ..Start::default()
    })
    .await;
    assert!(lsp.initialize_result["capabilities"]
        .get("completionProvider")
        .is_none());
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"completionItems": true}}),
    );
    let warning = lsp
        .wait_for("window/showMessage", |p| {
            p["message"].as_str().unwrap().contains("completionItems")
        })
        .await;
    let message = warning["message"].as_str().unwrap();
    assert!(
        warning["type"] == json!(2) && message.contains("initializationOptions"),
        "{warning}"
    );
    lsp.shutdown().await;
}

/// A server started with `options` (a debug log level among them), [`SOURCE`] opened and
/// completed at the loop's body: the server, and the log line that says how that job ran.
async fn first_completion(options: Value) -> (Lsp, String) {
    let lsp = Lsp::start(Start {
        options,
        ..Start::default()
    })
    .await;
    lsp.open(URI, "rust", SOURCE);
    lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    let log = lsp
        .wait_for_log(|m| m.contains("v0 @") && m.contains("full/window/realign"))
        .await;
    (lsp, log)
}

/// The full, window and realigning passes a job's log line counts.
fn passes(log: &str) -> [usize; 3] {
    let counts = log
        .split("passes ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no pass counts in {log}"));
    let counts: Vec<usize> = counts.split('/').map(|n| n.parse().unwrap()).collect();
    counts.try_into().unwrap()
}

/// The worker keeps its cache across requests: after an edit elsewhere in the file, the next
/// completion's first pass realigns it (a realigning pass, most positions from the cache) instead of
/// recomputing everything; `"editReuse": "off"` restores the exact full pass. (A canvas that grows
/// mid-run realigns its own cache too, with reuse on, or pays another full pass, off.)
#[tokio::test]
async fn a_completion_after_an_edit_reuses_the_kept_cache() {
    for reuse in [true, false] {
        let options = if reuse {
            json!({"logLevel": "debug"})
        } else {
            json!({"logLevel": "debug", "editReuse": "off"})
        };
        let (lsp, log) = first_completion(options).await;
        // A cold cache: one full pass (more if the canvas grew without reuse).
        let [full, _, realigned] = passes(&log);
        assert!(log.contains("(0 positions") || reuse, "{log}");
        if reuse {
            assert_eq!(full, 1, "{log}");
        } else {
            assert!(full >= 1 && realigned == 0, "{log}");
        }
        // `fn sum` becomes `fn sum_`: far from the cursor, no type-through.
        lsp.change(URI, 1, [[0, 6], [0, 6]], "_");
        lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
        let log = lsp
            .wait_for_log(|m| m.contains("v1 @") && m.contains("full/window/realign"))
            .await;
        let [full, _, realigned] = passes(&log);
        if reuse {
            assert!(full == 0 && realigned >= 1, "{log}");
        } else {
            assert!(
                full >= 1 && realigned == 0 && log.contains("(0 positions"),
                "{log}"
            );
        }
        lsp.shutdown().await;
    }
}

#[tokio::test]
async fn a_model_switch_forgets_the_old_models_suggestions() {
    let lsp = Lsp::start(Start::default()).await;
    let (uri, line, column, first) = a_place_to_type_through(&lsp).await;
    // Switch to a model that does not build (after the old one went): any suggestion after the
    // switch can only be the old model's, served from the type-through cache.
    let unbuildable = redraft_tests::cli::unbuildable_model();
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"model": unbuildable.path()}}),
    );
    lsp.wait_for_log(|m| m.contains("model not loaded")).await;
    let typed: String = first.chars().take(1).collect();
    lsp.change(uri, 1, [[line, column], [line, column]], &typed);
    let column = column + typed.encode_utf16().count() as u32;
    let answer = lsp
        .inline(uri, line, column, false)
        .await
        .answer()
        .await
        .unwrap();
    assert!(
        items(&answer).is_empty(),
        "typed through the old model's {first:?} after the switch: {answer}"
    );
    lsp.shutdown().await;
}

/// `logLevel` is a level: at `error` the info lines (the model loaded) and the warning for a
/// setting it ignores stay out of the log, stderr and `window/logMessage` alike (the user still
/// gets the setting's problem as a message); at `info` both are there.
#[tokio::test]
async fn log_level_error_keeps_info_and_warnings_out_of_the_log() {
    for (level, quiet) in [("error", true), ("info", false)] {
        let lsp = Lsp::start(Start {
            options: json!({"logLevel": level, "maxTokens": "many"}),
            wait_for_model: false,
            ..Start::default()
        })
        .await;
        lsp.wait_for("window/showMessage", |p| {
            p["message"]
                .as_str()
                .is_some_and(|m| m.contains("maxTokens"))
        })
        .await;
        // The load logs before its progress ends: past the end, the line was logged if it was
        // going to be.
        lsp.wait_for("$/progress", |p| p["value"]["kind"] == json!("end"))
            .await;
        if !quiet {
            lsp.wait_for_log(|m| m.contains("model loaded from")).await;
        }
        // Then an error, which every level logs: once it is in the log and on stderr, so is
        // whatever was logged before it.
        lsp.notify::<super::client::DidChangeConfiguration>(
            json!({"settings": {"model": "/nonexistent/model"}}),
        );
        let kept = "model kept: the one from <embedded>";
        lsp.wait_for_log(|m| m.contains(kept)).await;
        let stderr = lsp.wait_for_stderr(|s| s.contains(kept)).await;
        let logged: Vec<String> = lsp
            .received("window/logMessage")
            .iter()
            .map(|p| p["message"].as_str().unwrap().to_string())
            .collect();
        for said in ["model loaded from", "maxTokens"] {
            assert_eq!(
                !logged.iter().any(|m| m.contains(said)),
                quiet,
                "{level}: {said}: {logged:?}"
            );
            assert_eq!(!stderr.contains(said), quiet, "{level}: {said}: {stderr}");
        }
        lsp.shutdown().await;
    }
}

/// A mistyped `model` setting (nothing there) is found out before the loaded model goes: that
/// one keeps answering, and the user is warned which model serves.
#[tokio::test]
async fn a_model_that_is_not_there_leaves_the_loaded_one_serving() {
    let lsp = Lsp::start(Start {
        options: json!({"logLevel": "debug"}),
        ..Start::default()
    })
    .await;
    lsp.open(URI, "rust", SOURCE);
    lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"model": "/nonexistent/model"}}),
    );
    let warning = lsp
        .wait_for("window/showMessage", |p| p["type"] == json!(2))
        .await;
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains("/nonexistent/model")
            && message.contains("Suggestions still come from the model loaded before (<embedded>"),
        "{message}"
    );
    lsp.wait_for_log(|m| m.contains("model kept: the one from <embedded>"))
        .await;
    // The model still runs the requests: its job report, not "no model is loaded".
    lsp.change(URI, 1, [[0, 0], [0, 0]], "\n");
    lsp.inline(URI, 4, 17, false).await.answer().await.unwrap();
    lsp.wait_for_log(|m| m.contains("v1 @") && m.contains("full/window/realign"))
        .await;
    lsp.shutdown().await;
}

/// A `device` or `model` that fails to load while the model before it serves is not kept in
/// the settings: they are put back to what the serving model was loaded with, so the next change
/// of the other one loads with those (it loaded with the failed one, and failed again).
#[tokio::test]
async fn a_failed_load_puts_back_the_settings_of_the_model_that_serves() {
    let lsp = Lsp::start(Start::default()).await;
    let loading = |what: String| {
        let lsp = &lsp;
        async move {
            lsp.wait_for_log(|m| m.starts_with("loading the model from") && m.contains(&what))
                .await
        }
    };
    // No machine has a 100th GPU: refused before the loaded model goes.
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"device": "cuda:99"}}));
    lsp.wait_for_log(|m| m.contains("model kept: the one from <embedded>"))
        .await;
    let small = redraft_tests::cli::repo().join("fixtures/small-model");
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"model": small}}));
    let line = loading(small.display().to_string()).await;
    assert!(line.ends_with("(device auto)"), "{line}");
    lsp.wait_for_log(|m| m.contains(&format!("model loaded from {}", small.display())))
        .await;

    // A model that is not there, then another device: the model that serves, on that device.
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"model": "/nonexistent/model"}}),
    );
    lsp.wait_for_log(|m| m.contains("model kept: the one from") && m.contains("small-model"))
        .await;
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"device": "cpu"}}));
    let line = loading("(device cpu)".into()).await;
    assert!(line.contains(&small.display().to_string()), "{line}");
    lsp.wait_for_log(|m| m.contains(&format!("model loaded from {} on cpu", small.display())))
        .await;
    lsp.shutdown().await;
}

#[tokio::test]
async fn configuration_changes_apply_and_a_model_that_fails_to_load_is_reported() {
    let lsp = Lsp::start(Start {
        // No bar: it switches to the embedded model, whose tuned bar is not what this is about.
        options: json!({"model": "/nonexistent/model", "effort": "fast", "maxTokens": 8,
                        "minConfidence": 0}),
        ..Start::default()
    })
    .await;
    let shown = lsp
        .wait_for("window/showMessage", |p| p["type"] == json!(1))
        .await;
    let message = shown["message"].as_str().unwrap();
    assert!(message.contains("/nonexistent/model"), "{message}");
    let warning = lsp
        .wait_for("window/showMessage", |p| p["type"] == json!(2))
        .await;
    assert!(warning["message"]
        .as_str()
        .unwrap()
        .contains("unknown effort `fast`"));
    // No model: requests still get answers, empty ones.
    lsp.open(URI, "rust", SOURCE);
    let answer = lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    assert!(items(&answer).is_empty(), "{answer}");

    // Back to the embedded model through didChangeConfiguration (nested, as VS Code sends it).
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"redraft": {"model": null, "languages": ["python"]}}}),
    );
    lsp.wait_for_log(|m| m.contains("model loaded from <embedded>"))
        .await;
    // Rust is no longer enabled.
    let answer = lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    assert!(items(&answer).is_empty(), "{answer}");
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"languages": null}}));
    // Rust again: the same request is answered, so the filter was what emptied it.
    assert!(!one_line_suggestions(&lsp, URI, 3, 17).await.is_empty());
    assert!(!lsp.stderr().is_empty(), "logs go to stderr");
    lsp.shutdown().await;
}

#[tokio::test]
async fn a_device_this_binary_lacks_is_reported_and_switching_to_the_cpu_recovers() {
    if cfg!(feature = "cuda") {
        return;
    }
    let lsp = Lsp::start(Start {
        options: json!({"device": "cuda:0"}),
        ..Start::default()
    })
    .await;
    let shown = lsp
        .wait_for("window/showMessage", |p| p["type"] == json!(1))
        .await;
    let message = shown["message"].as_str().unwrap();
    assert!(message.contains("--features cuda"), "{message}");
    lsp.open(URI, "rust", SOURCE);
    let answer = lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    assert!(items(&answer).is_empty(), "{answer}");

    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"device": "cpu"}}));
    lsp.wait_for_log(|m| m.contains("model loaded from <embedded>/assets/default-model on cpu"))
        .await;
    one_line_suggestions(&lsp, URI, 3, 17).await;
    lsp.shutdown().await;
}

/// Around 4-byte characters and NULs the default model writes byte tokens that do not form
/// UTF-8 (they came back as runs of U+FFFD): no inline completion and no streamed draft holds a
/// character the model did not write.
#[tokio::test]
async fn completions_around_4_byte_characters_and_nul_are_valid_text() {
    let lsp = Lsp::start(Start {
        options: json!({"effort": "medium", "maxTokens": 32, "streamSteps": true}),
        ..Start::default()
    })
    .await;
    let cases = [
        ("\u{0}\u{0}😀\u{0}", "\u{0}😀😀"),
        ("let s = \"🦀\u{0}🦀\u{0}", "\";\n"),
        ("// 😀😀😀😀 ", "🦀🦀🦀\n"),
    ];
    for (i, (before, after)) in cases.iter().enumerate() {
        let uri = format!("file:///work/demo/src/text{i}.rs");
        lsp.open(&uri, "rust", &format!("{before}{after}"));
        let line = before.matches('\n').count() as u32;
        let column = before.rsplit('\n').next().unwrap().encode_utf16().count() as u32;
        let answer = lsp.inline(&uri, line, column, true).await.answer().await;
        for item in items(&answer.unwrap()) {
            let text = item["insertText"].as_str().unwrap();
            assert!(
                !text.contains(char::REPLACEMENT_CHARACTER),
                "{before:?}|{after:?}: {item}"
            );
        }
    }
    let drafts = lsp.received("redraft/draftStep");
    assert!(!drafts.is_empty());
    for draft in drafts {
        assert!(
            !draft["draft"]
                .as_str()
                .unwrap()
                .contains(char::REPLACEMENT_CHARACTER),
            "{draft}"
        );
    }
    lsp.shutdown().await;
}

/// The confidence a job's debug log line reports for its first candidate.
fn first_confidence(log: &str) -> f32 {
    log.split("confidence [")
        .nth(1)
        .and_then(|rest| rest.split([',', ']']).next())
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no confidence in {log}"))
}

/// An inline completion the model was less sure of than the bar is not shown: the editor's
/// `minConfidence`, else the model's own (`fim_min_confidence` in its `redraft.json`). The log
/// says how sure it was and what was withheld; a suggestion shown before the bar was raised is
/// not typed through after.
#[tokio::test]
async fn an_inline_completion_below_the_bar_is_not_shown() {
    let fixture = redraft_tests::cli::repo().join("fixtures/small-model");
    let (lsp, log) = first_completion(json!({"model": fixture, "logLevel": "debug"})).await;
    assert!(log.contains("1 suggestion(s)"), "{log}");
    let confidence = first_confidence(&log);
    // A bar above it must exist at two decimals (the fixture is far from sure: ~0.07).
    assert!(confidence > 0.0 && confidence < 0.99, "{log}");
    let bar = ((confidence + 1.0) / 2.0 * 100.0).floor() / 100.0;
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"minConfidence": bar}}),
    );
    let answer = lsp.inline(URI, 3, 17, false).await.answer().await.unwrap();
    assert!(items(&answer).is_empty(), "{answer}");
    lsp.wait_for_log(|m| m.contains("1 withheld as unsure"))
        .await;
    lsp.notify::<super::client::DidChangeConfiguration>(
        json!({"settings": {"minConfidence": null}}),
    );
    assert!(!one_line_suggestions(&lsp, URI, 3, 17).await.is_empty());
    lsp.shutdown().await;

    // The model's own bar, and the editor's setting over it.
    let barred = redraft_tests::cli::small_model_with(json!({"fim_min_confidence": bar}));
    let (lsp, log) = first_completion(json!({"model": barred.path(), "logLevel": "debug"})).await;
    assert!(
        log.contains("0 suggestion(s)") && log.contains("1 withheld"),
        "{log}"
    );
    assert_eq!(first_confidence(&log), confidence);
    lsp.notify::<super::client::DidChangeConfiguration>(json!({"settings": {"minConfidence": 0}}));
    assert!(!one_line_suggestions(&lsp, URI, 3, 17).await.is_empty());
    lsp.shutdown().await;
}

/// The editor's `effort` means the loaded model's preset: a model whose `redraft.json` tunes
/// `low` to one step answers in one model call; the same model untuned takes several.
#[tokio::test]
async fn the_effort_setting_is_the_loaded_models_preset() {
    let tuned = redraft_tests::cli::tuned_small_model(
        json!({"low": {"schedule": {"kind": "top-k", "k": 1}, "max_steps": 1}}),
    );
    let untuned = redraft_tests::cli::repo().join("fixtures/small-model");
    for (model, one_call) in [(tuned.path(), true), (untuned.as_path(), false)] {
        let (lsp, log) =
            first_completion(json!({"model": model, "effort": "low", "logLevel": "debug"})).await;
        assert_eq!(
            log.contains("passes 1/0/0 full/window/realign"),
            one_call,
            "{log}"
        );
        lsp.shutdown().await;
    }
}
