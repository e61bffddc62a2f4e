//! What a broken or hostile client sends: positions past the end of a line or the file,
//! unknown documents, malformed params, unknown methods, a 50 MB document, binary content. Each
//! gets an error response or an empty result, never a crash, and the server answers afterwards.

use serde_json::json;

use crate::client::{items, InlineCompletion, Lsp, Start, Unknown, INVALID_PARAMS};

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
    lsp.notify::<crate::client::DidChange>(
        json!({"textDocument": {"uri": URI}, "contentChanges": "no"}),
    );
    lsp.notify::<crate::client::DidOpen>(json!({"textDocument": 5}));
    still_answers(&lsp).await;
    // The reversed edit was refused as a whole, so the text is as it was: line 1 col 12 is
    // still the end of `let x = `.
    let answer = lsp.inline(URI, 1, 40, false).await.answer().await.unwrap();
    for item in items(&answer) {
        assert_eq!(item["range"]["start"], json!({"line": 1, "character": 12}));
    }
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
    lsp.notify::<crate::client::DidClose>(json!({"textDocument": {"uri": big_uri}}));

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
        lsp.notify::<crate::client::DidClose>(json!({"textDocument": {"uri": bin_uri}}));
    }
    still_answers(&lsp).await;
    lsp.shutdown().await;
}
