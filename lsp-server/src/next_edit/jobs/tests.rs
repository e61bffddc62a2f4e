//! The next-edit jobs' bookkeeping, driven through the server in process (`crate::harness`):
//! who joins which job, what a precompute gives way to and when it runs after all, and what
//! is never computed.

use serde_json::json;

use super::*;
use crate::harness::{begin, Jobs, TestServer, CANCELLED};

const URI: &str = "file:///w/src/lib.rs";
const OTHER: &str = "file:///w/src/other.rs";
const THIRD: &str = "file:///w/src/third.rs";
const TEXT: &str = "fn area(w: u32, h: u32) -> u32 {\n    let s = w * h;\n    s + w\n}\n";
/// Where the typing ([`typed`]) ended: the pause precomputes here.
const TYPED_END: usize = "fn area(width".len();

fn uri(s: &str) -> Uri {
    s.parse().unwrap()
}

fn key(s: &str) -> DocumentKey {
    DocumentKey::parse(s)
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
        .precompute(key(URI), "after an edit pause")
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
        begin(async move { next_edits.precompute(key(URI), "after an edit pause").await });
    lsp.change(URI, 2, Some([[0, 13], [0, 13]]), "s").await;
    drop(held);
    precomputing.await;
    jobs.assert_none_started();
    lsp.wait_for_log("changed while its snapshot was taken: no next-edit job started")
        .await;
}

/// An edit of another document moves the history on: no request can join a next edit
/// computed with the older one. As soon as the document owner reports the edit, a precompute
/// still under way is stopped (it would hold one of the places and run ahead of the next
/// precompute in the runtime's queue) and a finished answer nobody waits for is forgotten; a
/// request's job someone waits for runs on and is answered.
#[tokio::test]
async fn an_edit_elsewhere_stops_the_next_edits_no_request_can_join_any_more() {
    let (mut lsp, mut jobs) = typed().await;
    lsp.open(OTHER, "fn other() {}\n").await;
    lsp.open(THIRD, "fn third() {}\n").await;
    precompute(&lsp).await;
    let ahead = jobs.next().await;
    assert_eq!(ahead.job.document.uri, uri(URI));
    let asked = tokio::spawn(lsp.next_edit(THIRD, 0, 0, 3).await.answer());
    let requested = jobs.next().await;

    lsp.change(OTHER, 1, Some([[0, 3], [0, 8]]), "renamed")
        .await;
    lsp.wait_for_log(&format!(
        "{URI}: its precomputed next edit was computed with an older history"
    ))
    .await;
    assert!(ahead.cancelled(), "nobody can join the precompute any more");
    assert!(!requested.cancelled(), "a request waits for its job");
    requested.answer(Ok(NextEdit::default()));
    assert_eq!(asked.await.unwrap(), Ok(json!({"edits": []})));

    let answered = tokio::spawn(lsp.next_edit(URI, 1, 0, 13).await.answer());
    jobs.next().await.answer(Ok(NextEdit::default()));
    assert_eq!(answered.await.unwrap(), Ok(json!({"edits": []})));
    let holds = |lsp: &TestServer, document: &str| {
        lsp.server()
            .next_edits
            .state()
            .jobs
            .contains_key(&key(document))
    };
    assert!(holds(&lsp, URI), "kept for a request there again");
    lsp.change(OTHER, 2, Some([[0, 0], [0, 0]]), "pub ").await;
    lsp.wait_for_log(&format!(
        "{URI}: its finished next edit was computed with an older history"
    ))
    .await;
    assert!(!holds(&lsp, URI) && !holds(&lsp, THIRD));
    jobs.assert_none_started();
}

/// A close of an edited document moves the history too (its edits are shown no more), with no
/// change for the document owner to report: the next job to start stops the precomputes the
/// older history left nobody to join.
#[tokio::test]
async fn a_job_starting_stops_the_precomputes_of_an_older_history() {
    let (mut lsp, mut jobs) = typed().await;
    lsp.open(OTHER, "fn other() {}\n").await;
    lsp.change(OTHER, 1, Some([[0, 3], [0, 8]]), "renamed")
        .await;
    precompute(&lsp).await;
    let ahead = jobs.next().await;
    assert_eq!(ahead.job.history.len(), 2);
    let closed = json!({"textDocument": {"uri": OTHER}});
    lsp.notify("textDocument/didClose", closed).await;
    lsp.open(THIRD, "fn third() {}\n").await;
    let asked = tokio::spawn(lsp.next_edit(THIRD, 0, 0, 3).await.answer());
    let requested = jobs.next().await;
    assert!(ahead.cancelled(), "computed with a history that is gone");
    requested.answer(Ok(NextEdit::default()));
    assert_eq!(asked.await.unwrap(), Ok(json!({"edits": []})));
}

/// Edit stamps come from one counter for all documents and a document's goes with its close,
/// so only open documents have one (a change of a document that is not open adds none), and a
/// request whose stamp was read before a close and an open of its document starts nothing on
/// its snapshot of the old text.
#[tokio::test]
async fn edit_stamps_are_kept_for_open_documents_only_and_never_match_after_a_reopen() {
    let (mut lsp, mut jobs) = TestServer::start(json!({"nextEdit": {"debounceMs": 0}})).await;
    let stamped = |lsp: &TestServer| {
        let state = lsp.server().next_edits.state();
        let mut uris: Vec<String> = state.stamps.keys().map(|u| u.as_str().into()).collect();
        uris.sort();
        uris
    };
    for n in 0..4 {
        let name = format!("file:///w/src/m{n}.rs");
        lsp.open(&name, "fn m() {}\n").await;
        lsp.change(&name, 1, Some([[0, 3], [0, 4]]), "n").await;
        let closed = json!({"textDocument": {"uri": name}});
        lsp.notify("textDocument/didClose", closed).await;
    }
    lsp.change("file:///w/src/never-opened.rs", 1, None, "x")
        .await;
    lsp.open(URI, TEXT).await;
    assert_eq!(stamped(&lsp), [URI]);

    let held = lsp.hold_documents();
    let asked = lsp.next_edit(URI, 0, 0, 13).await;
    let closed = json!({"textDocument": {"uri": URI}});
    lsp.notify("textDocument/didClose", closed).await;
    lsp.open(URI, TEXT).await;
    drop(held);
    tokio::select! {
        answer = asked.answer() => assert_eq!(answer, Ok(json!({"edits": []}))),
        job = jobs.next() => panic!(
            "a job started on the text before the close (v{})",
            job.job.document.version
        ),
    }
    lsp.wait_for_log("changed while its snapshot was taken: no next-edit job started")
        .await;
    jobs.assert_none_started();
    assert_eq!(stamped(&lsp), [URI]);
}
