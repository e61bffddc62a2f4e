//! A cancellation storm: hundreds of overlapping requests over two documents, most cancelled by
//! `$/cancelRequest`, by a newer request or by an edit. Every request is answered, and the
//! server's memory stays flat across repeated storms.

use std::time::Duration;

use serde_json::json;

use super::client::{Lsp, Pending, Start, CANCELLED};

const A: &str = "file:///work/demo/src/a.rs";
const B: &str = "file:///work/demo/src/b.rs";

/// One storm of `n` requests; returns (answered with a result, answered cancelled).
async fn storm(lsp: &Lsp, n: usize, version: &mut i32) -> (usize, usize) {
    let mut pending: Vec<Pending> = Vec::with_capacity(n);
    for i in 0..n {
        let uri = if i % 3 == 0 { B } else { A };
        let request = lsp.inline(uri, 1, 12, i % 7 == 0).await;
        match i % 5 {
            // Cancelled right away.
            0 | 1 => lsp.cancel(request.id),
            // Superseded by an edit of its document (typed, then deleted again).
            2 => {
                *version += 1;
                lsp.change(A, *version, [[1, 12], [1, 12]], "1");
                *version += 1;
                lsp.change(A, *version, [[1, 12], [1, 13]], "");
            }
            // Cancelled a little later, maybe while the model runs.
            3 => {
                tokio::time::sleep(Duration::from_millis(2)).await;
                lsp.cancel(request.id);
            }
            // Left to be superseded by the next request on the same document, or to finish.
            _ => {}
        }
        pending.push(request);
    }
    let (mut ok, mut cancelled) = (0, 0);
    for request in pending {
        match request.answer().await {
            Ok(_) => ok += 1,
            Err(err) if err.code.0 == CANCELLED => cancelled += 1,
            Err(err) => panic!("unexpected error {err:?}"),
        }
    }
    (ok, cancelled)
}

#[tokio::test]
async fn a_cancellation_storm_answers_everything_and_memory_stays_flat() {
    let lsp = Lsp::start(Start::default()).await;
    let text = "fn main() {\n    let x = \n}\n";
    lsp.open(A, "rust", text);
    lsp.open(B, "rust", text);
    let mut version = 0;
    // A first storm warms up every allocation pool, then the measured ones run.
    let (ok, cancelled) = storm(&lsp, 150, &mut version).await;
    assert_eq!(ok + cancelled, 150);
    let before = lsp.rss();
    let mut totals = (0, 0);
    for _ in 0..2 {
        let (ok, cancelled) = storm(&lsp, 300, &mut version).await;
        assert_eq!(ok + cancelled, 300, "every request is answered");
        totals = (totals.0 + ok, totals.1 + cancelled);
    }
    let after = lsp.rss();
    // Two in five are cancelled right after being sent, while the worker is busy with earlier
    // ones; how many of the rest are cancelled depends on how fast the model is (about half of
    // all with the default model on 2 cores, most with a slower one).
    assert!(
        totals.1 >= 600 / 5,
        "the cancellations took effect: {totals:?}"
    );
    assert!(totals.0 >= 1, "some requests ran to the end: {totals:?}");
    assert!(
        after <= before + (64 << 20),
        "memory grew from {} MB to {} MB over 600 requests",
        before >> 20,
        after >> 20
    );
    // Still in sync and answering.
    let answer = lsp.inline(A, 1, 12, false).await.answer().await;
    assert!(answer.is_ok(), "{answer:?}");
    lsp.notify::<super::client::DidChange>(json!({
        "textDocument": {"uri": A, "version": version + 1},
        "contentChanges": [{"text": "fn main() {}\n"}],
    }));
    let err = lsp.inline(A, 2, 0, false).await.answer().await.unwrap_err();
    assert_eq!(
        err.code.0,
        super::client::INVALID_PARAMS,
        "line 2 is gone after the full sync"
    );
    lsp.shutdown().await;
}
