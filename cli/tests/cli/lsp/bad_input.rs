//! What a broken or hostile client sends: positions past the end of a line or the file,
//! unknown documents, malformed params, unknown methods, a 50 MB document, binary content, and
//! (written as raw bytes) bodies that are not JSON or not UTF-8, lone surrogates, bad or missing
//! headers, lengths that lie, garbage between frames and random noise. Each gets an error
//! response or an empty result, never a crash, and the server answers afterwards. Also the exit
//! statuses: only `shutdown` then `exit` (or the end of input after `shutdown`) is 0. The
//! next-edit request and its accept command are held to the same.

use serde_json::{json, Value};

use super::client::{
    frame, items, spawn_server, CopilotInlineEdit, DidShowInlineEdit, ExecuteCommand,
    InlineCompletion, Lsp, Raw, Start, Unknown, INVALID_PARAMS,
};

const URI: &str = "file:///work/demo/src/bad.rs";

/// After each bad message the server still completes a good request.
async fn still_answers(lsp: &Lsp) {
    let answer = lsp.inline(URI, 1, 12, false).await.answer().await;
    assert!(answer.is_ok(), "{answer:?}\nstderr:\n{}", lsp.stderr());
}

#[tokio::test]
async fn bad_positions_documents_params_and_methods_get_errors_not_crashes() {
    let lsp = Lsp::start(Start::default()).await;
    lsp.open(URI, "rust", "fn main() {\n    let x = \n}\n");
    still_answers(&lsp).await;

    // A column past the end of its line means the line's end (the protocol says so).
    let answer = lsp.inline(URI, 1, 999, false).await.answer().await.unwrap();
    for item in items(&answer) {
        assert_eq!(item["range"]["start"], json!({"line": 1, "character": 12}));
    }
    // A line past the end of the file, an unknown document: invalid params.
    // (Line 3 is the empty line after the last newline; line 4 is past the end.)
    for (uri, line) in [(URI, 4), (URI, 4_000_000_000u32), ("file:///nowhere.rs", 0)] {
        let err = lsp
            .inline(uri, line, 0, false)
            .await
            .answer()
            .await
            .unwrap_err();
        assert_eq!(err.code.0, INVALID_PARAMS, "{uri}:{line}: {err:?}");
    }
    // Params of the wrong shape.
    for params in [
        json!({"textDocument": {"uri": URI}, "position": "1:2", "context": {"triggerKind": 2}}),
        json!({"textDocument": {"uri": URI}, "position": {"line": -1, "character": 0}, "context": {"triggerKind": 2}}),
        json!({"position": {"line": 0, "character": 0}}),
        json!([1, 2, 3]),
        json!(null),
    ] {
        let err = lsp
            .send::<InlineCompletion>(params.clone())
            .await
            .answer()
            .await
            .unwrap_err();
        assert_eq!(err.code.0, INVALID_PARAMS, "{params}: {err:?}");
    }
    let err = lsp
        .send::<Unknown>(json!({}))
        .await
        .answer()
        .await
        .unwrap_err();
    assert_eq!(err.code.0, -32601, "method not found");
    // Edits that name no place, of documents that are not open, malformed notifications.
    lsp.change(URI, 1, [[1, 9], [0, 0]], "reversed");
    lsp.change("file:///nowhere.rs", 1, [[0, 0], [0, 0]], "x");
    lsp.notify::<super::client::DidChange>(
        json!({"textDocument": {"uri": URI}, "contentChanges": "no"}),
    );
    lsp.notify::<super::client::DidOpen>(json!({"textDocument": 5}));
    still_answers(&lsp).await;
    // The reversed edit did not apply, so the server's text may no longer be the client's:
    // no completion for the document until the client sends its whole text again.
    let answer = lsp.inline(URI, 1, 40, false).await.answer().await.unwrap();
    assert!(items(&answer).is_empty(), "{answer}");
    lsp.notify::<super::client::DidChange>(json!({
        "textDocument": {"uri": URI, "version": 2},
        "contentChanges": [{"text": "fn main() {\n    let long_name = \n}\n"}],
    }));
    // In sync again, with the whole text's lines: line 1 col 40 is the end of `let long_name = `.
    let answer = lsp.inline(URI, 1, 40, false).await.answer().await.unwrap();
    assert!(
        !items(&answer).is_empty(),
        "{answer}\nstderr:\n{}",
        lsp.stderr()
    );
    for item in items(&answer) {
        assert_eq!(item["range"]["start"], json!({"line": 1, "character": 20}));
    }
    lsp.shutdown().await;
}

/// A notification whose params do not read (a `uri` with a raw space, or no URI at all) was
/// dropped by tower-lsp-server without a word: the document never opened and every request on
/// it failed, with nothing in any log. Each is now a warning naming the method and why; the
/// server goes on serving.
#[tokio::test]
async fn notifications_that_do_not_read_are_warned_about() {
    const SPACED: &str = "file:///work/demo/src/a b.rs";
    let lsp = Lsp::start(Start::default()).await;
    lsp.open(URI, "rust", "fn main() {\n    let x = \n}\n");
    let warning = |needle: String| {
        let lsp = &lsp;
        async move {
            lsp.wait_for("window/logMessage", |p| {
                p["message"].as_str().unwrap_or("").contains(&needle)
            })
            .await
        }
    };
    lsp.open(SPACED, "rust", "fn main() {}\n");
    let logged = warning(format!(
        "textDocument/didOpen ignored: its uri `{SPACED}` is not a URI"
    ))
    .await;
    assert_eq!(logged["type"], json!(2), "a warning: {logged}");
    // A request naming it is answered with the error, saying what is wrong with which uri
    // (it was serde's "unexpected character at index 9" alone).
    let err = lsp
        .inline(SPACED, 0, 0, false)
        .await
        .answer()
        .await
        .unwrap_err();
    assert_eq!(err.code.0, INVALID_PARAMS, "{err:?}");
    assert!(
        err.message.starts_with(&format!(
            "`textDocument/inlineCompletion`: its uri `{SPACED}` is not a URI"
        )),
        "{err:?}"
    );
    lsp.change("not a uri", 1, [[0, 0], [0, 0]], "x");
    warning("textDocument/didChange ignored: its uri `not a uri` is not a URI".into()).await;
    lsp.notify::<super::client::DidClose>(json!({"textDocument": {"uri": "not a uri"}}));
    warning("textDocument/didClose ignored: its uri `not a uri` is not a URI".into()).await;
    lsp.notify::<super::client::DidChange>(
        json!({"textDocument": {"uri": URI, "version": 1}, "contentChanges": "no"}),
    );
    warning("textDocument/didChange ignored: its params do not match the protocol".into()).await;
    still_answers(&lsp).await;
    lsp.shutdown().await;
}

/// The next-edit methods get the same treatment: errors for what names nothing, no edits for
/// what is merely stale, and the server keeps serving both features.
#[tokio::test]
async fn bad_next_edit_requests_and_commands_get_errors_or_no_edits() {
    let lsp = Lsp::start(Start::default()).await;
    lsp.open(URI, "rust", "fn main() {\n    let x = \n}\n");
    let next_edit =
        |params: Value| async { lsp.send::<CopilotInlineEdit>(params).await.answer().await };
    let at = |uri: &str, version: i32, line: u32, character: u32| {
        json!({"textDocument": {"uri": uri, "version": version},
               "position": {"line": line, "character": character}})
    };
    // A column past the end of its line is the line's end; a version the document is not at
    // gets no edits.
    assert!(next_edit(at(URI, 0, 1, 999)).await.is_ok());
    assert_eq!(
        next_edit(at(URI, 7, 1, 0)).await.unwrap(),
        json!({"edits": []})
    );
    // A line past the end, an unknown document, params of the wrong shape: invalid params.
    for params in [
        at(URI, 0, 4, 0),
        at(URI, 0, 4_000_000_000, 0),
        at("file:///nowhere.rs", 0, 0, 0),
        json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}),
        json!({"textDocument": {"uri": URI, "version": "0"}, "position": {"line": 0, "character": 0}}),
        json!({"textDocument": {"uri": URI, "version": 0}, "position": "1:2"}),
        json!({"textDocument": {"uri": URI, "version": 0}, "position": {"line": -1, "character": 0}}),
        json!([1, 2, 3]),
        json!(null),
    ] {
        let err = next_edit(params.clone()).await.unwrap_err();
        assert_eq!(err.code.0, INVALID_PARAMS, "{params}: {err:?}");
    }
    // Shown notifications of any shape are only logged.
    for params in [
        json!(null),
        json!(5),
        json!({"item": {"command": 3}}),
        json!({"item": {}}),
    ] {
        lsp.notify::<DidShowInlineEdit>(params);
    }
    // Unknown commands and accept commands without a suggestion's id are refused; an id that
    // is no longer offered is accepted and ignored.
    for (command, arguments) in [
        ("redraft.noSuchCommand", json!([])),
        ("redraft.didAcceptNextEdit", json!([])),
        ("redraft.didAcceptNextEdit", json!([true])),
        ("redraft.didAcceptNextEdit", json!(["not a number"])),
    ] {
        let err = lsp
            .send::<ExecuteCommand>(json!({"command": command, "arguments": arguments}))
            .await
            .answer()
            .await
            .unwrap_err();
        assert_eq!(err.code.0, INVALID_PARAMS, "{command} {arguments}: {err:?}");
        if command != "redraft.noSuchCommand" {
            // The arguments as the client sent them, in JSON (not Rust's `[Bool(true)]`).
            assert!(
                err.message.ends_with(&format!("got {arguments}")),
                "{err:?}"
            );
        }
    }
    // The id as sent (a string), or as a number from a client that parsed it.
    for id in [json!("999"), json!(999)] {
        let answer = lsp
            .send::<ExecuteCommand>(
                json!({"command": "redraft.didAcceptNextEdit", "arguments": [id]}),
            )
            .await
            .answer()
            .await;
        assert_eq!(answer.unwrap(), Value::Null, "{id}");
    }
    still_answers(&lsp).await;
    assert!(next_edit(at(URI, 0, 1, 12)).await.is_ok());
    lsp.shutdown().await;
}

/// A Rust document between 1 MiB and the parse limit (4 MiB) is kept with a tree but handed to
/// the context layer as a window around the cursor: a window starting at the document's start
/// is not the whole document, and the tree of the whole one must not come with it (on a blank
/// line in an impl body that ends past the window, it made every completion an internal error).
#[tokio::test]
async fn a_parsed_rust_document_over_a_mebibyte_is_completed_at_its_start() {
    let lsp = Lsp::start(Start {
        options: json!({"effort": "low", "maxTokens": 12, "logLevel": "debug"}),
        ..Start::default()
    })
    .await;
    let mut big = String::from("struct S;\nimpl S {\n    fn a() {}\n\n    fn b() {}\n");
    let method = "    fn m(&self) -> u32 {\n        let x = 1;\n        x + 1\n    }\n";
    while big.len() < (1 << 20) + (400 << 10) {
        big.push_str(method);
    }
    big.push_str("}\n");
    let big_uri = "file:///work/demo/src/big.rs";
    lsp.open(big_uri, "rust", &big);
    let cursor = big.find("\n\n").unwrap() + 1;
    drop(big);
    let answer = lsp.inline(big_uri, 3, 4, false).await.answer().await;
    assert!(answer.is_ok(), "{answer:?}");
    let done = lsp
        .wait_for_log(|m| {
            m.contains(&format!("{big_uri} v0 @{cursor}: canvas"))
                || m.contains(&format!("completion in {big_uri} failed"))
        })
        .await;
    assert!(done.contains(": canvas"), "{done}");
    lsp.shutdown().await;
}

#[tokio::test]
async fn huge_and_binary_documents_are_served() {
    let lsp = Lsp::start(Start::default()).await;
    lsp.open(URI, "rust", "fn main() {\n    let x = \n}\n");
    // 50 MB of Rust: too large to parse, completed as plain text around the cursor.
    let function = "fn f(a: u32) -> u32 {\n    a + 1\n}\n";
    let big = function.repeat(50_000_000 / function.len());
    let lines = big.lines().count() as u32;
    let big_uri = "file:///work/demo/src/big.rs";
    lsp.open(big_uri, "rust", &big);
    drop(big);
    for (line, character) in [(lines / 2, 9), (lines - 1, 1), (0, 0)] {
        let answer = lsp
            .inline(big_uri, line, character, false)
            .await
            .answer()
            .await;
        assert!(answer.is_ok(), "{line}:{character}: {answer:?}");
    }
    lsp.change(big_uri, 1, [[lines / 2, 0], [lines / 2, 0]], "    let y = ");
    let answer = lsp
        .inline(big_uri, lines / 2, 12, false)
        .await
        .answer()
        .await;
    assert!(answer.is_ok(), "{answer:?}");
    lsp.notify::<super::client::DidClose>(json!({"textDocument": {"uri": big_uri}}));

    // Binary content: NULs, control characters, lone surrogates' replacement characters,
    // invalid-UTF-8 bytes as the client decoded them.
    let binary: String = (0u8..=255)
        .cycle()
        .take(20_000)
        .map(char::from)
        .chain("\u{fffd}\u{0}\u{1b}[31m\r\r\n\u{2028}😀".chars())
        .collect();
    let bin_uri = "file:///work/demo/blob.bin";
    for language in ["rust", "plaintext"] {
        lsp.open(bin_uri, language, &binary);
        for (line, character) in [(0, 0), (1, 5), (3, 2)] {
            let answer = lsp
                .inline(bin_uri, line, character, true)
                .await
                .answer()
                .await;
            match answer {
                Ok(_) => {}
                Err(err) => assert_eq!(err.code.0, INVALID_PARAMS, "{err:?}"),
            }
        }
        lsp.change(bin_uri, 1, [[0, 3], [1, 1]], "\u{0}\u{0}");
        lsp.notify::<super::client::DidClose>(json!({"textDocument": {"uri": bin_uri}}));
    }
    still_answers(&lsp).await;
    lsp.shutdown().await;
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// `shutdown` is answered null and `exit` ends the session with status 0: it was served
/// normally to its end.
async fn shuts_down_and_exits_0(raw: &mut Raw) {
    let id = raw.request("shutdown", Value::Null).await;
    let answer = raw.answer(id).await;
    assert_eq!(answer.get("result"), Some(&Value::Null), "{answer}");
    raw.notify("exit", Value::Null).await;
    assert_eq!(raw.exit_code().await, Some(0), "{}", raw.stderr());
}

/// Before `initialize` a request is answered server not initialized (-32002), its params read
/// or not (the transport's own -32602 for params that do not read waits for `initialize`); an
/// `initialize` whose params do not read is answered -32602 naming the field, and the session
/// can still be initialized.
#[tokio::test]
async fn before_initialize_requests_are_not_initialized_and_a_bad_initialize_can_be_redone() {
    let mut raw = Raw::uninitialized(None);
    for params in [
        json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0},
            "context": {"triggerKind": 1}}),
        json!({"textDocument": {"uri": "not a uri"}}),
    ] {
        let id = raw.request("textDocument/inlineCompletion", params).await;
        let answer = raw.answer(id).await;
        assert_eq!(answer["error"]["code"], -32002, "{answer}");
    }
    let bad = json!({"capabilities": {"general": {"positionEncodings": "utf-8"}}});
    let id = raw.request("initialize", bad).await;
    let answer = raw.answer(id).await;
    assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`capabilities.general.positionEncodings`")),
        "{answer}"
    );
    let id = raw
        .request("initialize", json!({"processId": null, "capabilities": {}}))
        .await;
    let answer = raw.answer(id).await;
    assert!(answer["result"]["capabilities"].is_object(), "{answer}");
    raw.notify("initialized", json!({})).await;
    shuts_down_and_exits_0(&mut raw).await;
}

/// A client that sends `initialized` on the heels of `initialize`, in one write, not waiting for
/// the answer, gets the session a client that waits gets: the service dropped a notification
/// that came before it had answered `initialize`, so this one started with no log, no drafts and
/// no word that its model did not load.
#[tokio::test]
async fn initialized_sent_before_initialize_is_answered_still_starts_the_session() {
    let mut raw = Raw::uninitialized(None);
    let (mut bytes, id) = raw.request_bytes(
        "initialize",
        json!({"processId": null, "capabilities": {},
            "initializationOptions": {"model": "/nonexistent/model"}}),
    );
    let initialized = json!({"jsonrpc": "2.0", "method": "initialized", "params": {}});
    bytes.extend(frame(initialized.to_string().as_bytes()));
    raw.write(&bytes).await;
    assert!(raw.answer(id).await["result"]["capabilities"].is_object());
    let shown = raw
        .wait_for(|m| {
            m["method"] == "window/showMessage"
                && m["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("could not load its model"))
        })
        .await;
    assert!(
        shown["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("/nonexistent/model")),
        "{shown}"
    );
    raw.wait_for_log(|m| m.contains("model not loaded")).await;
    shuts_down_and_exits_0(&mut raw).await;
}

/// A raw-bytes client with `URI` open.
async fn raw_server(options: Value) -> Raw {
    let mut raw = Raw::start(options).await;
    raw.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 0, "text": "fn main() {\n    let x = \n}\n"}}),
    )
    .await;
    raw
}

/// Asks for a suggestion in `uri` at (`line`, `character`); the answer must be a result.
async fn raw_answers(raw: &mut Raw, uri: &str, line: u32, character: u32, after: &str) {
    let (request, id) = raw.inline_bytes(uri, line, character);
    raw.write(&request).await;
    let answer = raw.answer(id).await;
    assert!(
        answer.get("result").is_some(),
        "after {after}: {answer}\nstderr:\n{}",
        raw.stderr()
    );
}

/// Writes `bytes`, then a normal request, which must be answered; the codes of the errors with a
/// null id that `bytes` brought (they come before the request's answer).
async fn after_bytes_a_request_is_answered(raw: &mut Raw, what: &str, bytes: &[u8]) -> Vec<i64> {
    let before = raw.unaddressed_errors().len();
    raw.write(bytes).await;
    raw_answers(raw, URI, 1, 12, what).await;
    raw.unaddressed_errors()[before..]
        .iter()
        .map(|e| e["code"].as_i64().unwrap())
        .collect()
}

/// A JSON string literal of text, raw bytes (sent as they are, not UTF-8) and `\uXXXX` escapes
/// of lone surrogates, as a client would send it; and the text the server should hold for it
/// (one U+FFFD per bad byte or lone surrogate).
enum Piece<'a> {
    Text(&'a str),
    Byte(u8),
    Lone(u16),
}

fn json_string(pieces: &[Piece]) -> (Vec<u8>, String) {
    let mut json = vec![b'"'];
    let mut text = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => {
                let quoted = serde_json::to_string(t).unwrap();
                json.extend_from_slice(&quoted.as_bytes()[1..quoted.len() - 1]);
                text.push_str(t);
            }
            Piece::Byte(b) => {
                json.push(*b);
                text.push('\u{fffd}');
            }
            Piece::Lone(unit) => {
                json.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
                text.push('\u{fffd}');
            }
        }
    }
    json.push(b'"');
    (json, text)
}

/// `message` with its string `"@TEXT@"` replaced by `json` (raw bytes), framed.
fn frame_with_text(message: Value, json: &[u8]) -> Vec<u8> {
    let body = message.to_string();
    let at = body
        .find("\"@TEXT@\"")
        .expect("the message holds the placeholder");
    let mut bytes = body.as_bytes()[..at].to_vec();
    bytes.extend_from_slice(json);
    bytes.extend_from_slice(&body.as_bytes()[at + "\"@TEXT@\"".len()..]);
    frame(&bytes)
}

fn did_open(uri: &str, text: &[u8]) -> Vec<u8> {
    frame_with_text(
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "rust", "version": 0, "text": "@TEXT@"}}}),
        text,
    )
}

#[tokio::test]
async fn every_undecodable_message_is_answered_and_the_server_keeps_serving() {
    let mut raw = raw_server(json!({"effort": "low", "maxTokens": 12})).await;
    let request = |raw: &mut Raw| raw.inline_bytes(URI, 1, 12);
    // Not an inline request: the next request would cancel that one.
    let (late, late_id) = raw.request_bytes("redraft/noSuchMethod", json!({}));
    let mut overstated = b"Content-Length: 500\r\n\r\n".to_vec();
    overstated
        .extend_from_slice(&late[late.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..]);
    let text = "fn f() {}\n".repeat(100_000);
    let big_open = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": "file:///work/demo/src/big.rs", "languageId": "rust",
                         "version": 0, "text": text}}});
    let over_the_limit = [
        &b"Content-Length: 300000000\r\n\r\n"[..],
        big_open.to_string().as_bytes(),
    ]
    .concat();
    let cases: Vec<(&str, Vec<u8>, Vec<i64>)> = vec![
        (
            "a body that is not JSON",
            frame(b"this is not JSON"),
            vec![PARSE_ERROR],
        ),
        (
            "JSON that is not JSON-RPC",
            frame(br#"{"hello":"world"}"#),
            vec![INVALID_REQUEST],
        ),
        (
            "a request of JSON-RPC 1.0",
            frame(br#"{"jsonrpc":"1.0","id":77,"method":"shutdown"}"#),
            vec![],
        ),
        (
            "an invalid UTF-8 byte in a method name",
            frame(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}"),
            vec![],
        ),
        ("an empty body", frame(b""), vec![PARSE_ERROR]),
        (
            "a header without Content-Length",
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{\"jsonrpc\":\"2.0\"}"
                .to_vec(),
            vec![PARSE_ERROR],
        ),
        (
            "a Content-Length that is not a number",
            b"Content-Length: twelve\r\n\r\n{}".to_vec(),
            vec![PARSE_ERROR],
        ),
        (
            "a huge Content-Length",
            b"Content-Length: 99999999999999999999\r\n\r\n{}".to_vec(),
            vec![PARSE_ERROR],
        ),
        (
            "a large Content-Length with nothing behind it",
            b"Content-Length: 200000000\r\n\r\n".to_vec(),
            vec![PARSE_ERROR],
        ),
        (
            // Read in 64 KiB pieces: it was one parse error per read.
            "a Content-Length over the limit with a megabyte of its body behind it",
            over_the_limit,
            vec![PARSE_ERROR],
        ),
        ("a Content-Length larger than its body", overstated, vec![]),
        (
            "garbage between frames",
            b"\x00\x01 garbage {}}}\r\n\r\n\xff\xfe".to_vec(),
            vec![PARSE_ERROR],
        ),
    ];
    for (what, bytes, expect) in cases {
        let errors = after_bytes_a_request_is_answered(&mut raw, what, &bytes).await;
        assert_eq!(errors, expect, "{what}\nstderr:\n{}", raw.stderr());
    }
    // Junk with nothing after it is answered as soon as it is read, not when the next message
    // comes (it was one message late).
    let before = raw.unaddressed_errors().len();
    raw.write(b"\x00\x01 garbage {}}}\r\n\r\n\xff\xfe").await;
    let errors = raw.wait_for_unaddressed_errors(before + 1).await;
    assert_eq!(errors[before]["code"], json!(PARSE_ERROR), "{errors:?}");
    // The request read out of the overstated frame was answered too.
    assert_eq!(raw.answer(late_id).await["error"]["code"], json!(-32601));
    // Invalid requests with a readable id are answered with that id.
    let answer = raw.answer(77).await;
    assert_eq!(answer["error"]["code"], json!(INVALID_REQUEST), "{answer}");

    // A Content-Type without a charset (the base protocol allows it), and one with another.
    for content_type in ["application/vscode-jsonrpc", "text/plain; charset=latin1"] {
        let (request, id) = request(&mut raw);
        let body = &request[request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
        let mut bytes = format!(
            "Content-Length: {}\r\nContent-Type: {content_type}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        raw.write(&bytes).await;
        assert!(
            raw.answer(id).await.get("result").is_some(),
            "{content_type}"
        );
    }

    // Documents whose text is not UTF-8, or holds lone surrogates, open and are served.
    for (uri, pieces) in [
        (
            "file:///work/demo/src/latin1.rs",
            vec![
                Piece::Text("fn f() {\n    let s = \""),
                Piece::Byte(0xe9),
                Piece::Byte(0xff),
                Piece::Text("\";\n    \n}\n"),
            ],
        ),
        (
            "file:///work/demo/src/lone.rs",
            vec![
                Piece::Text("fn f() {\n    let s = \""),
                Piece::Lone(0xd83d),
                Piece::Lone(0xdc00),
                Piece::Text("\";\n    \n}\n"),
            ],
        ),
    ] {
        let (json, _) = json_string(&pieces);
        raw.write(&did_open(uri, &json)).await;
        raw_answers(&mut raw, uri, 2, 4, uri).await;
    }

    // Garbage interleaved with valid frames: every frame is still read.
    let mut bytes = Vec::new();
    let mut ids = Vec::new();
    for garbage in [
        &b"junk"[..],
        b"\r\n\r\n\r\n",
        b"Content-Length: x\r\n\r\n",
        b"{\"a\":1}",
        b"\x80\x80\x80",
    ] {
        let (request, id) = request(&mut raw);
        bytes.extend_from_slice(&request);
        bytes.extend_from_slice(garbage);
        ids.push(id);
    }
    raw.write(&bytes).await;
    // Each is answered; all but the last are cancelled by the next (a newer request on the same
    // document cancels the older one, as for keystrokes).
    for (n, id) in ids.iter().enumerate() {
        let answer = raw.answer(*id).await;
        if n + 1 < ids.len() {
            assert!(
                answer.get("result").is_some() || answer["error"]["code"] == json!(-32800),
                "{answer}"
            );
        } else {
            assert!(answer.get("result").is_some(), "{answer}");
        }
    }
    assert!(raw.running());
}

#[tokio::test]
async fn random_noise_between_requests_never_stops_the_server() {
    let mut raw = raw_server(json!({"effort": "low", "maxTokens": 12})).await;
    // A fixed-seed xorshift: the same noise every run.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..150 {
        let mut noise = Vec::new();
        for _ in 0..next() % 96 {
            match next() % 12 {
                0 => noise.push(b'\n'),
                1 => noise.extend_from_slice(b"\r\n"),
                2 => noise.push(b':'),
                3 => noise.extend_from_slice(b"Content-Length: "),
                4 => noise.extend_from_slice((next() % 80).to_string().as_bytes()),
                5 => noise.extend_from_slice(next().to_string().as_bytes()),
                6 => noise.extend_from_slice(br#"{"jsonrpc":"2.0","#),
                7 => noise.extend_from_slice(br"\ud83d"),
                _ => noise.push(next() as u8),
            }
        }
        // The same cheap request twice: noise can swallow the first (a header in it whose
        // length ends inside the request's first line), never the second.
        let (first, _) = raw.request_bytes("redraft/noSuchMethod", json!({}));
        let (second, id) = raw.request_bytes("redraft/noSuchMethod", json!({}));
        raw.write(&[noise, first, second].concat()).await;
        let answer = raw.answer(id).await;
        assert_eq!(
            answer["error"]["code"],
            json!(-32601),
            "round {round}: {answer}"
        );
    }
    raw_answers(&mut raw, URI, 1, 12, "the noise").await;
    assert!(raw.running());
    assert!(!raw.stderr().contains("panicked"), "{}", raw.stderr());
}

/// A document with bytes that are not UTF-8 and lone surrogates, edited incrementally (with more
/// of both), stays where the client thinks it is: every position the client names maps to the
/// byte the server's debug log reports for it, computed here on the client's view of the text
/// (one character per bad byte or lone surrogate, positions in UTF-16).
#[tokio::test]
async fn documents_that_are_not_utf8_or_hold_lone_surrogates_stay_in_sync_through_edits() {
    let mut raw = raw_server(json!({"effort": "low", "maxTokens": 8, "logLevel": "debug"})).await;
    let uri = "file:///work/demo/src/odd.rs";
    let (json, mut text) = json_string(&[
        Piece::Text("fn main() {\n    let s = \""),
        Piece::Byte(0xff),
        Piece::Byte(0xfe),
        Piece::Text("\";\n    let t = \""),
        Piece::Lone(0xd83d),
        Piece::Text("\";\n    let e = \"😀\";\n    let u = \""),
        Piece::Byte(0xe2),
        Piece::Byte(0x82),
        Piece::Text("\";\n}\n"),
    ]);
    raw.write(&did_open(uri, &json)).await;

    // (byte range in the client's text, replacement)
    let find = |text: &str, needle: &str| text.find(needle).unwrap();
    let edits: Vec<(RangeIn, Vec<Piece>)> = vec![
        (
            Box::new(move |t| {
                let at = find(t, "\u{fffd}\u{fffd}\"") + 6;
                (at, at)
            }),
            vec![Piece::Text("x"), Piece::Byte(0xc3)],
        ),
        (
            Box::new(move |t| {
                let at = find(t, "t = \"\u{fffd}") + 5;
                (at, at + 3)
            }),
            vec![Piece::Lone(0xdc00), Piece::Text("y😀")],
        ),
        (
            Box::new(move |t| {
                let at = find(t, "😀\";") + 4;
                (at, at)
            }),
            vec![
                Piece::Text("\n    let v = \""),
                Piece::Lone(0xdbff),
                Piece::Text("\";"),
            ],
        ),
        (
            Box::new(move |t| (find(t, "let s"), find(t, "let t"))),
            vec![Piece::Byte(0x80)],
        ),
    ];
    for (version, (range, pieces)) in edits.into_iter().enumerate() {
        let (start, end) = range(&text);
        let (json, inserted) = json_string(&pieces);
        let message = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version + 1},
            "contentChanges": [{"range": {"start": utf16_position(&text, start), "end": utf16_position(&text, end)}, "text": "@TEXT@"}],
        }});
        raw.write(&frame_with_text(message, &json)).await;
        text.replace_range(start..end, &inserted);
    }

    // Each line's end (a column past it means the end) and each position after a replacement
    // character, probed from the end of the text backwards so no answer comes from the
    // type-through cache (which only answers at or after its last suggestion).
    let mut probes: Vec<(Value, usize)> = Vec::new();
    let mut line_start = 0;
    for (line, content) in text.split('\n').enumerate() {
        probes.push((
            json!({"line": line, "character": 999}),
            line_start + content.len(),
        ));
        for (at, _) in content.match_indices('\u{fffd}') {
            let byte = line_start + at + '\u{fffd}'.len_utf8();
            probes.push((utf16_position(&text, byte), byte));
        }
        line_start += content.len() + 1;
    }
    probes.sort_by_key(|(_, byte)| std::cmp::Reverse(*byte));
    probes.dedup_by_key(|(_, byte)| *byte);
    assert!(probes.len() > 8, "{probes:?}");
    let runs = |raw: &Raw| {
        raw.logs()
            .into_iter()
            .filter(|m| m.starts_with(uri) && m.contains("canvas"))
            .collect::<Vec<_>>()
    };
    for (position, byte) in probes {
        let before = runs(&raw).len();
        let (request, id) = raw.request_bytes(
            "textDocument/inlineCompletion",
            json!({"textDocument": {"uri": uri}, "position": position, "context": {"triggerKind": 2}}),
        );
        raw.write(&request).await;
        let answer = raw.answer(id).await;
        assert!(answer.get("result").is_some(), "{position}: {answer}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while runs(&raw).len() <= before {
            assert!(
                std::time::Instant::now() < deadline,
                "no debug line for {position}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let log = runs(&raw).pop().unwrap();
        assert!(
            log.starts_with(&format!("{uri} v4 @{byte}:")),
            "{position} should be byte {byte} of version 4 of {text:?}; the server says: {log}"
        );
    }
}

/// Where an edit goes: its byte range in the client's text as it is then.
type RangeIn = Box<dyn Fn(&str) -> (usize, usize)>;

/// The LSP position (UTF-16 columns) of byte `at` of `text`.
fn utf16_position(text: &str, at: usize) -> Value {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..at].matches('\n').count();
    let character: usize = text[line_start..at].chars().map(char::len_utf16).sum();
    json!({"line": line, "character": character})
}

#[tokio::test]
async fn a_frame_cut_short_by_the_end_of_input_still_lets_earlier_requests_be_answered() {
    let mut raw = raw_server(json!({"effort": "low", "maxTokens": 12})).await;
    let (request, id) = raw.inline_bytes(URI, 1, 12);
    raw.write(&request).await;
    raw.write(b"Content-Length: 100\r\n\r\n{\"jsonrpc\":\"2.0\",")
        .await;
    raw.close_stdin();
    assert!(raw.answer(id).await.get("result").is_some());
    // No shutdown, no exit: the client went away, which is not a clean end.
    assert_eq!(raw.exit_code().await, Some(1), "{}", raw.stderr());
    let stderr = raw.stderr();
    assert!(stderr.contains("cut short by the end of input"), "{stderr}");
    assert!(stderr.contains("stdin closed without shutdown"), "{stderr}");
}

#[tokio::test]
async fn exit_statuses_follow_the_protocol() {
    // `exit` without `shutdown`: 1, as the protocol says.
    let mut raw = Raw::start(json!({})).await;
    raw.notify("exit", Value::Null).await;
    assert_eq!(raw.exit_code().await, Some(1), "{}", raw.stderr());
    assert!(
        raw.stderr().contains("exit without shutdown"),
        "{}",
        raw.stderr()
    );

    // `shutdown` with `exit` right behind it, before its answer: a clean end, and the answer
    // still comes.
    let mut raw = Raw::start(json!({})).await;
    let (shutdown, id) = raw.request_bytes("shutdown", Value::Null);
    let exit = frame(
        json!({"jsonrpc": "2.0", "method": "exit"})
            .to_string()
            .as_bytes(),
    );
    raw.write(&[shutdown, exit].concat()).await;
    assert_eq!(raw.exit_code().await, Some(0), "{}", raw.stderr());
    assert_eq!(raw.answer(id).await["result"], Value::Null);

    // `shutdown`, then the end of input without `exit`: a clean end.
    let mut raw = Raw::start(json!({})).await;
    let id = raw.request("shutdown", Value::Null).await;
    assert_eq!(raw.answer(id).await["result"], Value::Null);
    raw.close_stdin();
    assert_eq!(raw.exit_code().await, Some(0), "{}", raw.stderr());

    // Stdout gone (the client closed its end): a fatal transport error, logged, status 1.
    let (mut child, stderr, stderr_reader) = spawn_server(None, &[]);
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let initialize =
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}});
    tokio::io::AsyncWriteExt::write_all(&mut stdin, &frame(initialize.to_string().as_bytes()))
        .await
        .unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits when stdout is gone")
        .unwrap();
    stderr_reader.await.unwrap();
    let stderr = stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write to stdout"), "{stderr}");
}

/// `shutdown` and `exit` take no params, and tower-lsp-server shuts the session down before it
/// reads them: a `shutdown` with params was answered -32602 with the session shut down all the
/// same, so every request after it was refused, the correct `shutdown` too, and `exit` ended
/// with status 1. One with params is a shutdown, and an `exit` with params an exit.
#[tokio::test]
async fn a_shutdown_or_exit_with_params_is_one() {
    for params in [json!({}), json!([]), json!("x")] {
        let mut raw = Raw::start(json!({})).await;
        let id = raw.request("shutdown", params.clone()).await;
        let answer = raw.answer(id).await;
        assert_eq!(
            answer.get("result"),
            Some(&Value::Null),
            "{params}: {answer}"
        );
        raw.notify("exit", params.clone()).await;
        assert_eq!(raw.exit_code().await, Some(0), "{params}: {}", raw.stderr());
        assert!(
            raw.stderr()
                .contains("`shutdown` came with params, which it takes none of"),
            "{}",
            raw.stderr()
        );
    }
}

/// `shutdown` is a request. Sent as a notification (no id), it put tower-lsp-server's session in
/// its shut-down state without running the server's shutdown: every request after it was
/// refused (-32600), the real `shutdown` too, and `exit` ended with status 1. It is ignored,
/// with a warning, and the session goes on.
#[tokio::test]
async fn a_shutdown_sent_as_a_notification_is_ignored() {
    let mut raw = Raw::start(json!({})).await;
    raw.notify("shutdown", Value::Null).await;
    // Served: an unknown command is invalid params, not a request after shutdown.
    let id = raw
        .request("workspace/executeCommand", json!({"command": "nothing"}))
        .await;
    let answer = raw.answer(id).await;
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    raw.wait_for_log(|m| m.contains("`shutdown` came as a notification (no id) and is ignored"))
        .await;
    shuts_down_and_exits_0(&mut raw).await;
}

/// A request reusing the id of one still running is InvalidRequest, saying so, and nothing else
/// happens to the session: a `shutdown` so refused used to leave it shut down without the
/// server's shutdown (every later request refused, `exit` with status 1).
#[tokio::test]
async fn a_request_reusing_a_running_requests_id_is_refused_alone() {
    let options = json!({"effort": "high", "maxTokens": 200});
    let mut raw = Raw::start_stepping(options, Some(100)).await;
    raw.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "rust", "version": 0, "text": "fn main() {\n    let x = \n}\n"}}),
    )
    .await;
    // Seconds of denoising: still running when the rest is read.
    let (running, id) = raw.inline_bytes(URI, 1, 12);
    let again = json!({"jsonrpc": "2.0", "id": id, "method": "shutdown"});
    raw.write(&[running, frame(again.to_string().as_bytes())].concat())
        .await;
    let refused = raw.answer(id).await;
    assert_eq!(
        refused["error"]["code"],
        json!(INVALID_REQUEST),
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("in use by a request still running"),
        "{message}"
    );
    raw.notify("$/cancelRequest", json!({"id": id})).await;
    // The running request's own answer (cancelled) still comes, under its id.
    raw.wait_for(|m| m["id"] == json!(id) && m["error"]["code"] != json!(INVALID_REQUEST))
        .await;
    shuts_down_and_exits_0(&mut raw).await;
}

/// A `$/` request the server does not implement is answered MethodNotFound (-32601), as LSP
/// 3.17 asks: tower-lsp-server answered none, and the client waited for ever (only a `$/`
/// notification may go unanswered). After `shutdown`, every request but `exit` is
/// InvalidRequest (-32600), one the server does not know too (it was MethodNotFound).
#[tokio::test]
async fn dollar_requests_are_answered_and_requests_after_shutdown_are_invalid() {
    const METHOD_NOT_FOUND: i64 = -32601;
    let mut raw = Raw::start(json!({})).await;
    let (dollar, dollar_id) = raw.request_bytes("$/foo", json!({}));
    let (trace, trace_id) = raw.request_bytes("$/setTrace", json!({"value": "off"}));
    let (unknown, unknown_id) = raw.request_bytes("redraft/noSuchMethod", json!({}));
    raw.write(&[dollar, trace, unknown].concat()).await;
    let answer = raw.answer(unknown_id).await;
    assert_eq!(answer["error"]["code"], json!(METHOD_NOT_FOUND), "{answer}");
    // The transport answers them before it reads on, so they came before that answer.
    for id in [dollar_id, trace_id] {
        let answer = raw
            .answered(id)
            .unwrap_or_else(|| panic!("the `$/` request {id} is unanswered"));
        assert_eq!(answer["error"]["code"], json!(METHOD_NOT_FOUND), "{answer}");
    }
    let id = raw.request("shutdown", Value::Null).await;
    assert_eq!(raw.answer(id).await.get("result"), Some(&Value::Null));
    for method in ["redraft/noSuchMethod", "$/foo", "shutdown"] {
        let id = raw.request(method, json!({})).await;
        let answer = raw.answer(id).await;
        assert_eq!(
            answer["error"]["code"],
            json!(INVALID_REQUEST),
            "{method}: {answer}"
        );
    }
    raw.notify("exit", Value::Null).await;
    assert_eq!(raw.exit_code().await, Some(0), "{}", raw.stderr());
}

/// A stderr that cannot be written (the editor stopped reading it, a full disk) loses the log,
/// never the server: at debug level every request logs, and the server used to die at the
/// first line (`eprintln!` panics when stderr fails).
#[test]
fn a_stderr_that_cannot_be_written_loses_the_log_not_the_server() {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(redraft_tests::cli::redraft_binary())
        .args(["lsp", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create("/dev/full").expect("/dev/full (Linux)"))
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Everything the server writes, read on a thread of its own until it closes stdout.
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 1 << 16];
        while let Ok(n @ 1..) = stdout.read(&mut chunk) {
            if tx.send(chunk[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // What it wrote so far; `answered(id)` reads on until the answer to `id` is among it.
    let mut output = Vec::new();
    let mut answered = |id: u32| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !String::from_utf8_lossy(&output).contains(&format!(r#""id":{id}}}"#)) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(bytes) => output.extend(bytes),
                Err(_) => panic!("no answer {id}: {}", String::from_utf8_lossy(&output)),
            }
        }
        String::from_utf8_lossy(&output).into_owned()
    };
    let mut send = |message: Value| {
        // A server that died makes this fail: the test's point.
        stdin
            .write_all(&frame(message.to_string().as_bytes()))
            .expect("the server reads its input");
    };
    let options = json!({"logLevel": "debug", "minConfidence": 0});
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"capabilities": {}, "initializationOptions": options}}));
    answered(1);
    send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    let document = json!({"uri": URI, "languageId": "rust", "version": 1,
                          "text": "fn main() {\n    let x = \n}\n"});
    send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                "params": {"textDocument": document}}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/inlineCompletion",
                "params": {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 12},
                           "context": {"triggerKind": 1}}}),
    );
    let output = answered(2);
    let answer = output
        .split("Content-Length")
        .find(|frame| frame.contains(r#""id":2}"#))
        .unwrap();
    assert!(answer.contains(r#""result":["#), "{answer}");
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}));
    send(json!({"jsonrpc": "2.0", "method": "exit"}));
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0), "{output}");
    reader.join().unwrap();
}
