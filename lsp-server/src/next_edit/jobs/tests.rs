//! The next-edit jobs' bookkeeping, driven through the server in process (`crate::harness`):
//! who joins which job, what a precompute gives way to and when it runs after all, and what
//! is never computed.

use serde_json::json;

use super::*;
use crate::harness::{begin, Jobs, TestServer, CANCELLED};

const URI: &str = "file:///w/src/lib.rs";
const OTHER: &str = "file:///w/src/other.rs";
const TEXT: &str = "fn area(w: u32, h: u32) -> u32 {\n    let s = w * h;\n    s + w\n}\n";
/// Where the typing ([`typed`]) ended: the pause precomputes here.
const TYPED_END: usize = "fn area(width".len();

fn uri(s: &str) -> Uri {
    s.parse().unwrap()
}

/// A server with `URI` open and `w` renamed to `width` on its first line (version 1); no
/// pause of its own (the tests precompute when they mean to).
async fn typed() -> (TestServer, Jobs) {
    let (mut lsp, jobs) = TestServer::start(json!({"nextEdit": {"debounceMs": 0}})).await;
    lsp.open(URI, TEXT).await;
    lsp.change(URI, 1, Some([[0, 9], [0, 9]]), "idth").await;
    (lsp, jobs)
}

/// What the edit pause does.
async fn precompute(lsp: &TestServer) {
    lsp.server()
        .next_edits
        .precompute(uri(URI), "after an edit pause")
        .await;
}

/// A request at another cursor than where the typing ended (inside the body, as after a
/// click) is running when the pause ends: the precompute gives way to it, and runs once
/// the request went away (`$/cancelRequest`) without an answer, on the text it was for.
#[tokio::test]
async fn a_precompute_that_gave_way_to_a_request_runs_once_the_request_went_away() {
    let (mut lsp, mut jobs) = typed().await;
    let asked = lsp.next_edit(URI, 1, 1, 4).await;
    let id = asked.id;
    let asked = tokio::spawn(asked.answer());
    let requested = jobs.next().await;
    assert_ne!(requested.job.cursor, TYPED_END);
    precompute(&lsp).await;
    lsp.wait_for_log("a request waits for the next-edit job: not precomputed until it ends")
        .await;
    jobs.assert_none_started();

    lsp.cancel(id).await;
    assert_eq!(asked.await.unwrap(), Err(CANCELLED));
    assert!(requested.cancelled(), "nobody waits for the request's job");
    // As the runtime answers a job it stopped.
    requested.answer(Err(JobError::Cancelled));
    let retried = jobs.next().await;
    assert_eq!(
        (retried.job.cursor, retried.job.document.version),
        (TYPED_END, 1)
    );
    assert!(retried.job.wanted.is_some(), "it makes way for requests");
    lsp.wait_for_log("next edit precomputed (after the request it gave way to)")
        .await;
}

/// A request at another cursor answered for this text keeps its answer: the precompute at
/// the end of the typing, tried again after it or asked for after it, is not needed (the
/// user is where the request asked), and a request there again takes the answer.
#[tokio::test]
async fn a_request_answered_for_the_text_keeps_its_answer_over_a_precompute() {
    let (mut lsp, mut jobs) = typed().await;
    let asked = tokio::spawn(lsp.next_edit(URI, 1, 1, 4).await.answer());
    let requested = jobs.next().await;
    precompute(&lsp).await;
    requested.answer(Ok(NextEdit::default()));
    assert_eq!(asked.await.unwrap(), Ok(json!({"edits": []})));
    lsp.wait_for_log("a request's next edit for this text is kept: not precomputed")
        .await;
    precompute(&lsp).await;
    jobs.assert_none_started();

    let again = lsp.next_edit(URI, 1, 1, 4).await.answer().await;
    assert_eq!(again, Ok(json!({"edits": []})));
    lsp.wait_for_log("the request joins the finished next-edit job")
        .await;
    jobs.assert_none_started();
}

/// A precompute that gave way is never run on text the user has left: the edit's own
/// pause is the one to precompute for the new text.
#[tokio::test]
async fn a_precompute_that_gave_way_is_not_run_after_an_edit() {
    let (mut lsp, mut jobs) = typed().await;
    let asked = tokio::spawn(lsp.next_edit(URI, 1, 1, 4).await.answer());
    let requested = jobs.next().await;
    precompute(&lsp).await;
    lsp.change(URI, 2, Some([[0, 13], [0, 13]]), "s").await;
    assert!(requested.cancelled(), "the edit stops the request's job");
    requested.answer(Err(JobError::Cancelled));
    assert_eq!(asked.await.unwrap(), Ok(json!({"edits": []})));
    lsp.wait_for_log("edited while the request's next-edit job ran: not precomputed again")
        .await;
    jobs.assert_none_started();
}

/// A next edit's answer depends on the recent edits of every open document: after an
/// edit of another one, a request for the same text and cursor is computed again, with
/// that edit in its history, instead of taking the answer computed without it.
#[tokio::test]
async fn a_next_edit_is_computed_again_after_an_edit_in_another_document() {
    let (mut lsp, mut jobs) = typed().await;
    lsp.open(OTHER, "fn other() {}\n").await;
    async fn ask(lsp: &mut TestServer) -> tokio::task::JoinHandle<crate::harness::Answer> {
        tokio::spawn(lsp.next_edit(URI, 1, 0, 13).await.answer())
    }
    let first = ask(&mut lsp).await;
    let job = jobs.next().await;
    assert_eq!(job.job.history.len(), 1);
    job.answer(Ok(NextEdit::default()));
    assert_eq!(first.await.unwrap(), Ok(json!({"edits": []})));
    // Nothing changed anywhere: the finished job answers.
    ask(&mut lsp).await.await.unwrap().unwrap();
    lsp.wait_for_log("the request joins the finished next-edit job")
        .await;
    jobs.assert_none_started();

    lsp.change(OTHER, 1, Some([[0, 3], [0, 8]]), "renamed")
        .await;
    let again = ask(&mut lsp).await;
    let job = jobs.next().await;
    assert_eq!(
        job.job.history.len(),
        2,
        "the other document's edit is shown"
    );
    job.answer(Ok(NextEdit::default()));
    assert_eq!(again.await.unwrap(), Ok(json!({"edits": []})));
}

/// A request, or a precompute, whose snapshot was taken just before an edit, a close or an open
/// over the open document (a client that skipped the close) starts no job on the text they
/// replaced, its snapshot's reply having been on its way while their handler ran: the request
/// answers no edits at once.
#[tokio::test]
async fn nothing_is_computed_on_a_snapshot_an_edit_a_close_or_a_reopen_made_stale() {
    for how in ["an edit", "a close", "an open without a close"] {
        let (mut lsp, mut jobs) = typed().await;
        let held = lsp.hold_documents();
        let asked = lsp.next_edit(URI, 1, 0, 13).await;
        match how {
            "an edit" => lsp.change(URI, 2, Some([[0, 13], [0, 13]]), "s").await,
            "a close" => {
                let closed = json!({"textDocument": {"uri": URI}});
                lsp.notify("textDocument/didClose", closed).await;
            }
            _ => lsp.open(URI, "fn other() {}\n").await,
        }
        drop(held);
        tokio::select! {
            answer = asked.answer() => assert_eq!(answer, Ok(json!({"edits": []})), "{how}"),
            job = jobs.next() => panic!(
                "a job started on text {how} replaced (v{})",
                job.job.document.version
            ),
        }
        lsp.wait_for_log("changed while its snapshot was taken: no next-edit job started")
            .await;
        jobs.assert_none_started();
    }

    let (mut lsp, mut jobs) = typed().await;
    let next_edits = lsp.server().next_edits.clone();
    let held = lsp.hold_documents();
    let precomputing =
        begin(async move { next_edits.precompute(uri(URI), "after an edit pause").await });
    lsp.change(URI, 2, Some([[0, 13], [0, 13]]), "s").await;
    drop(held);
    precomputing.await;
    jobs.assert_none_started();
    lsp.wait_for_log("changed while its snapshot was taken: no next-edit job started")
        .await;
}

#[test]
fn documents_are_named_relative_to_their_workspace_folder() {
    let roots = vec![PathBuf::from("/work/other"), PathBuf::from("/work/demo")];
    assert_eq!(
        display_path(&uri("file:///work/demo/src/lib.rs"), &roots),
        "src/lib.rs"
    );
    assert_eq!(
        display_path(&uri("file:///elsewhere/main.rs"), &roots),
        "/elsewhere/main.rs"
    );
    assert_eq!(
        display_path(&uri("untitled:Untitled-1"), &roots),
        "untitled:Untitled-1"
    );
    assert_eq!(
        display_path(&uri("file:///work/demo/caf%C3%A9.rs"), &roots),
        "café.rs"
    );
}
