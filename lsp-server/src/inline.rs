//! `textDocument/inlineCompletion` (LSP 3.18): the request behind every suggestion.
//!
//! Order of business: register as the newest request on the document (cancelling the older
//! one) and queue for a snapshot, both before the first `.await`; answer nothing for a document
//! out of sync with the client (a change that did not apply: the client's text is another);
//! convert the position; answer from the type-through cache if the user is typing through the
//! last suggestion, or with the answer of the job a request of the other kind (a menu's) is
//! running at the same place (`running`); otherwise queue a job in the runtime (`inference`)
//! and wait for it or for cancellation, whichever comes first.
//!
//! With the client's suggest widget open on an item (VS Code's `selectedCompletionInfo`), the
//! request is about the document with the item applied: the type-through cache is asked and
//! told on that text (so once the user accepts the item, the next request is answered from
//! what was shown with it), and the job gets that text and the document's tree edited and
//! re-parsed to match, off the async workers.
//!
//! Next to next edits, the completion has the cursor: a precomputed next edit nobody asked for
//! yet makes way for its job on the model (the runtime's serial loop stops it within a layer and
//! runs it again after the completion), and the line its answer shows on is remembered, so that
//! a next edit touching that line is not shown while it is (`next_edit.rs`).

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use ropey::Rope;
use tower_lsp_server::jsonrpc;
use tower_lsp_server::ls_types::{
    InlineCompletionItem, InlineCompletionParams, InlineCompletionResponse,
    InlineCompletionTriggerKind, Range, SelectedCompletionInfo,
};

use super::cancel::InFlight;
use super::document_key::DocumentKey;
use super::documents::Snapshots;
use super::encoding::{line_content, PositionEncoding};
use super::inference::{handed_over_whole, Job, JobError};
use super::running::{Answer, Place, Turn};
use super::server::Server;
use super::stream::{DraftKind, StreamTarget};
use super::type_through::Basis;

/// The most a request with the suggest widget's item spends re-parsing the document's tree
/// edited for the item (a millisecond for small files, tens for half a megabyte): past it, the
/// context layer parses around the cursor itself, which a longer wait would not beat.
const ITEM_PARSE_BUDGET: Duration = Duration::from_millis(30);

/// The suggestions for a request and where they go in the document, for either answer: inline
/// completion items, or completion items for a client without them (`completion_items.rs`).
pub(crate) struct Answered {
    /// The document's text the suggestions are for.
    pub rope: Rope,
    /// Where they are shown: inserted at `start..end` (the cursor), after `lead` (the selected
    /// item's text over its range).
    pub start: usize,
    pub end: usize,
    pub lead: String,
    pub encoding: PositionEncoding,
    pub texts: Vec<String>,
    /// The document's LSP language id.
    pub language: String,
}

impl Server {
    pub async fn inline_completion(
        &self,
        params: InlineCompletionParams,
    ) -> jsonrpc::Result<Option<InlineCompletionResponse>> {
        let answered = self.suggest_inline(params, &self.in_flight).await?;
        Ok(answered.map(|answered| response(&answered)))
    }

    /// The suggestions for `params` (see the module's documentation), or none (a language not
    /// completed, a document out of sync, no model). The request is the newest in `slot` for its
    /// document, cancelling the one before it there.
    pub(crate) async fn suggest_inline(
        &self,
        params: InlineCompletionParams,
        slot: &Arc<InFlight>,
    ) -> jsonrpc::Result<Option<Answered>> {
        // A bug in here must cost one answer, not the server.
        match AssertUnwindSafe(self.inline_completion_inner(params, slot))
            .catch_unwind()
            .await
        {
            Ok(answer) => answer,
            Err(_) => {
                self.log.error("inline completion failed unexpectedly (a bug): answered with an internal error");
                Err(jsonrpc::Error::internal_error())
            }
        }
    }

    async fn inline_completion_inner(
        &self,
        params: InlineCompletionParams,
        slot: &Arc<InFlight>,
    ) -> jsonrpc::Result<Option<Answered>> {
        // `uri` as the client spelled it, for what goes back; `key` for the server's own books.
        let uri = params.text_document_position.text_document.uri;
        let key = DocumentKey::of(&uri);
        let position = params.text_document_position.position;
        // Both before any `.await`: see the module comment.
        let ticket = slot.begin(&key);
        let snapshot = self.documents.snapshot(key.clone(), false);
        let token = ticket.token().clone();
        // A cancel (an edit, a newer request) that came while the snapshot was on its way wins
        // over it: the snapshot is of the old text, and the type-through answer below is made
        // without another `.await` to notice it.
        let snapshots = tokio::select! {
            biased;
            () = token.cancelled() => return Err(jsonrpc::Error::request_cancelled()),
            answer = snapshot => answer.ok().flatten(),
        };
        let Some(snapshots) = snapshots else {
            return Err(jsonrpc::Error::invalid_params(format!(
                "{} is not open (send textDocument/didOpen first)",
                uri.as_str()
            )));
        };
        // Read together under the cache's lock, which a settings change holds while it publishes
        // the new ones and clears the cache: the generation names the settings this request
        // runs under, so an answer made under them is kept out of the cache after a change (a
        // re-parse for the suggest widget's item may take a while) and is not shared with a
        // request under the new ones (`running.rs`).
        let (generation, settings) = {
            let type_through = self.type_through();
            (type_through.generation(), self.settings())
        };
        let document = &snapshots.document;
        if !settings.enabled_for(&document.language_id) {
            return Ok(None);
        }
        // The client's text under this version is another: a suggestion (the type-through
        // cache's too) would be of the server's text, its range perhaps on another line.
        if let Some(since) = document.out_of_sync_since {
            if self.first_told_out_of_sync(&key, since) {
                self.log.info(format!(
                    "{} v{}: a change did not apply, so the client's text is another: no inline completions until it sends the whole text (or opens the document again)",
                    uri.as_str(),
                    document.version
                ));
            }
            return Ok(None);
        }
        let encoding = self.encoding();
        let cursor = encoding
            .offset(&document.rope, position)
            .map_err(|err| jsonrpc::Error::invalid_params(err.to_string()))?;

        // The client's suggest widget is open on an item (VS Code): it shows only a suggestion
        // that extends that item over the item's range, so the model is asked as if the item
        // were accepted. Not streamed (drafts would be of the other text).
        let selected = match params.context.selected_completion_info.as_ref() {
            Some(info) => match Selected::resolve(info, &document.rope, cursor, encoding) {
                Ok(selected) => Some(selected),
                Err(why) => {
                    self.log.debug(|| {
                        format!(
                            "{} v{}: the selected completion item is not used: {why}",
                            uri.as_str(),
                            document.version
                        )
                    });
                    None
                }
            },
            None => None,
        };

        let candidates = if params.context.trigger_kind == InlineCompletionTriggerKind::INVOKED {
            settings.candidates
        } else {
            1
        };
        let (edited_at, line) = (document.edited_at, document.rope.byte_to_line(cursor));
        let language = document.language_id.clone();
        let rope = document.rope.clone();
        let shown_at = Shown::at(cursor, selected.as_ref());
        // The text the model is asked about and the cursor in it. The type-through cache
        // answers and remembers on that text, so the answer shown with an item serves the
        // request that comes once the item is accepted (the document is then that text), and
        // an answer on the document's own text serves an item only where the item makes it
        // what the user would have typed.
        let (basis, asked, asked_cursor) = match &selected {
            Some(selected) => {
                let (text, cursor) = selected.apply(&rope);
                (Basis::Item, text, cursor)
            }
            None => (Basis::Document, rope.clone(), cursor),
        };
        let version = document.version;
        let answered = |texts: Vec<String>, how: &str| {
            self.next_edits
                .inline_answered(&key, edited_at, line, !texts.is_empty());
            self.log
                .debug(|| format!("{} v{version}: answered from {how}", uri.as_str()));
            Ok(Some(shown_at.answered(
                rope.clone(),
                encoding,
                texts,
                &language,
            )))
        };
        let cached = self
            .type_through()
            .answer(&key, &asked, asked_cursor, candidates);
        if let Some(texts) = cached {
            return answered(texts, "the type-through cache");
        }
        // A request of the other kind (a menu's beside an inline one) at the same place has its
        // job running: its answer is this one's.
        let place = Place { edited_at, cursor };
        let mut running = None;
        while selected.is_none() && running.is_none() {
            match self.running.turn(&key, place, candidates, &token) {
                Turn::Run(registered) => running = Some(registered),
                Turn::Wait(job) => {
                    self.log.debug(|| {
                        format!(
                            "{} v{version}: waits for the job of a request at the same place",
                            uri.as_str()
                        )
                    });
                    let shared = tokio::select! {
                        biased;
                        () = token.cancelled() => return Err(jsonrpc::Error::request_cancelled()),
                        shared = job.ended() => shared,
                    };
                    // Cancelled, or under other settings: ask again (another may run there now).
                    let Some(shared) = shared.filter(|shared| shared.generation == generation)
                    else {
                        continue;
                    };
                    let how = "the job of a request at the same place";
                    return match shared.texts {
                        Some(mut texts) => {
                            texts.truncate(candidates);
                            answered(texts, how)
                        }
                        None => {
                            self.log.debug(|| {
                                format!("{} v{version}: no answer, as {how} failed", uri.as_str())
                            });
                            Ok(None)
                        }
                    };
                }
            }
        }

        let snapshots = match &selected {
            Some(selected) => {
                let (snapshots, reparse) = tokio::select! {
                    biased;
                    () = token.cancelled() => return Err(jsonrpc::Error::request_cancelled()),
                    applied = selected.applied(snapshots) => applied?,
                };
                self.log.debug(|| {
                    format!(
                        "{} v{version}: the selected completion item applied, {reparse}",
                        uri.as_str()
                    )
                });
                snapshots
            }
            None => snapshots,
        };

        let stream = (settings.stream_steps && selected.is_none()).then(|| {
            self.drafts.start(StreamTarget {
                uri: uri.clone(),
                version,
                position,
                kind: DraftKind::Inline,
            })
        });
        let streaming = stream.is_some();
        // A model switch clears the cache before it queues the load: whatever model this job
        // runs on, a switch since `generation` was taken keeps its answer out.
        let answer = self.inference.submit(Job {
            snapshots,
            cursor: asked_cursor,
            candidates,
            settings,
            cancel: token.flag(),
            stream,
            workspace: self.workspace.clone(),
        });
        // A cancel (an edit, a newer request) wins over an answer ready at the same moment: the
        // answer's ranges are the old version's.
        let answer = tokio::select! {
            biased;
            () = token.cancelled() => return Err(jsonrpc::Error::request_cancelled()),
            answer = answer => answer,
        };
        if streaming {
            self.drafts.flush().await;
            // The flush waits on the client: an edit may have come meanwhile.
            if token.is_cancelled() {
                return Err(jsonrpc::Error::request_cancelled());
            }
        }
        match answer {
            Ok(suggestions) => {
                self.type_through().remember(
                    &key,
                    (basis, &asked, asked_cursor),
                    (&suggestions.texts, candidates),
                    generation,
                );
                if let Some(running) = &running {
                    running.answered(Answer {
                        texts: Some(suggestions.texts.clone()),
                        generation,
                    });
                }
                self.next_edits.inline_answered(
                    &key,
                    edited_at,
                    line,
                    !suggestions.texts.is_empty(),
                );
                Ok(Some(shown_at.answered(
                    rope,
                    encoding,
                    suggestions.texts,
                    &language,
                )))
            }
            // The server never shuts the runtime down while requests come.
            Err(JobError::Cancelled | JobError::ShuttingDown) => {
                Err(jsonrpc::Error::request_cancelled())
            }
            Err(failed) => {
                // Those waiting answer nothing too, not run the same job again.
                if let Some(running) = &running {
                    running.answered(Answer {
                        texts: None,
                        generation,
                    });
                }
                match failed {
                    JobError::NoModel(reason) => self
                        .log
                        .debug(|| format!("no suggestion for {}: {reason}", uri.as_str())),
                    // Invalid, Failed or Backend: each displays as its reason.
                    failed => self
                        .log
                        .warn(format!("completion in {} failed: {failed}", uri.as_str())),
                }
                Ok(None)
            }
        }
    }
}

/// The completion item selected in the client's suggest widget, as the request's
/// `selectedCompletionInfo` gives it: its range of the cursor's line, in bytes, and its text.
struct Selected {
    start: usize,
    end: usize,
    text: String,
}

impl Selected {
    /// `info` where it can be applied: a range of the cursor's line holding the cursor.
    fn resolve(
        info: &SelectedCompletionInfo,
        rope: &Rope,
        cursor: usize,
        encoding: PositionEncoding,
    ) -> Result<Selected, String> {
        let offset = |position| {
            encoding
                .offset(rope, position)
                .map_err(|err| format!("its range: {err}"))
        };
        let (start, end) = (offset(info.range.start)?, offset(info.range.end)?);
        let line = rope.byte_to_line(cursor);
        if !(start <= cursor && cursor <= end)
            || rope.byte_to_line(start) != line
            || rope.byte_to_line(end) != line
        {
            return Err("its range is not around the cursor on the cursor's line".into());
        }
        Ok(Selected {
            start,
            end,
            text: info.text.clone(),
        })
    }

    /// The document's text with the item accepted, and the cursor after it.
    fn apply(&self, rope: &Rope) -> (Rope, usize) {
        let mut rope = rope.clone();
        let (start, end) = (rope.byte_to_char(self.start), rope.byte_to_char(self.end));
        rope.remove(start..end);
        rope.insert(start, &self.text);
        (rope, self.start + self.text.len())
    }

    /// `snapshots` with the item accepted ([`Selected::apply`]), the document's tree edited and
    /// re-parsed to match on a blocking thread (a millisecond or so for small files, tens for
    /// half a megabyte: the context layer's own parse for want of a tree costs more, on the
    /// model's thread), within [`ITEM_PARSE_BUDGET`]; and how that went. A cancelled request's
    /// re-parse runs out its budget on its thread and is dropped.
    async fn applied(&self, mut snapshots: Snapshots) -> jsonrpc::Result<(Snapshots, Reparse)> {
        let (bytes, text) = (self.start..self.end, self.text.clone());
        let len = snapshots.document.rope.len_bytes() - bytes.len() + text.len();
        if snapshots.document.tree.is_none() || !handed_over_whole(len) {
            // Nothing to re-parse, or a tree the job would not use: the text alone, at once.
            snapshots.document.tree = None;
            snapshots.document = snapshots.document.replaced(bytes, &text, ITEM_PARSE_BUDGET);
            return Ok((snapshots, Reparse::NoTree));
        }
        let started = Instant::now();
        let reparsed = tokio::task::spawn_blocking(move || {
            snapshots.document = snapshots.document.replaced(bytes, &text, ITEM_PARSE_BUDGET);
            snapshots
        })
        .await;
        match reparsed {
            Ok(snapshots) => {
                let reparse = match snapshots.document.tree {
                    Some(_) => Reparse::Parsed(started.elapsed()),
                    None => Reparse::OverBudget,
                };
                Ok((snapshots, reparse))
            }
            // A panic in the re-parse is a bug: it costs this answer, as one in the handler
            // does (`inline_completion` catches it).
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(_) => Err(jsonrpc::Error::request_cancelled()),
        }
    }
}

/// What became of the document's tree for a request with the suggest widget's item, for the
/// debug log.
enum Reparse {
    /// Edited and re-parsed, in this long.
    Parsed(Duration),
    /// The snapshot had none up to date (or the text goes to the model as a window, without
    /// one): the context layer parses around the cursor.
    NoTree,
    /// The re-parse ran over its budget: the context layer parses around the cursor.
    OverBudget,
}

impl fmt::Display for Reparse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reparse::Parsed(took) => write!(
                f,
                "its tree edited and re-parsed in {:.1} ms",
                took.as_secs_f64() * 1e3
            ),
            Reparse::NoTree => f.write_str("without a tree"),
            Reparse::OverBudget => write!(
                f,
                "without a tree (its re-parse ran over {} ms)",
                ITEM_PARSE_BUDGET.as_millis()
            ),
        }
    }
}

/// Where the model's suggestions go in the document: inserted at the cursor, or, with an item
/// selected in the suggest widget, after that item's text over its range.
struct Shown<'a> {
    start: usize,
    end: usize,
    lead: &'a str,
}

impl<'a> Shown<'a> {
    fn at(cursor: usize, selected: Option<&'a Selected>) -> Shown<'a> {
        match selected {
            Some(selected) => Shown {
                start: selected.start,
                end: selected.end,
                lead: &selected.text,
            },
            None => Shown {
                start: cursor,
                end: cursor,
                lead: "",
            },
        }
    }

    fn answered(
        &self,
        rope: Rope,
        encoding: PositionEncoding,
        texts: Vec<String>,
        language: &str,
    ) -> Answered {
        Answered {
            rope,
            start: self.start,
            end: self.end,
            lead: self.lead.to_string(),
            encoding,
            texts,
            language: language.to_string(),
        }
    }
}

/// The items for `texts` where `shown` puts them. Each item's range stays on the cursor's line
/// (the protocol requires it): an insertion at the cursor (or over the selected item's range),
/// or, when the suggestion's first line ends with the rest of the cursor's line (a closing
/// bracket the model wrote again), a replacement of that rest too, so accepting it does not
/// double it.
fn response(answered: &Answered) -> InlineCompletionResponse {
    let items = answered
        .texts
        .iter()
        .map(|text| InlineCompletionItem {
            insert_text: format!("{}{text}", answered.lead),
            filter_text: None,
            range: Some(answered.range(text)),
            command: None,
            insert_text_format: None,
        })
        .collect();
    InlineCompletionResponse::Array(items)
}

impl Answered {
    /// The range `text` replaces: from the start to the cursor, or to the end of the line when
    /// the suggestion's first line ends with the rest of the line.
    pub fn range(&self, text: &str) -> Range {
        let (rest, line_end) = self.rest_of_line();
        let end = if covers(text, &rest) {
            line_end
        } else {
            self.end
        };
        Range::new(
            self.encoding.position(&self.rope, self.start),
            self.encoding.position(&self.rope, end),
        )
    }

    /// The cursor's line after the shown range, and where the line's text ends.
    pub fn rest_of_line(&self) -> (String, usize) {
        let rope = &self.rope;
        let line = rope.byte_to_line(self.end);
        let content = line_content(rope.line(line));
        let line_end = rope.line_to_byte(line) + content.len_bytes();
        (rope.byte_slice(self.end..line_end).to_string(), line_end)
    }
}

/// Whether a suggestion `text`'s first line ends with `rest`, the line's text after the cursor
/// (a closing bracket the model wrote again).
pub fn covers(text: &str, rest: &str) -> bool {
    let first_line = text.split('\n').next().unwrap_or_default();
    !rest.trim().is_empty() && first_line.trim_end().ends_with(rest.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{TestServer, CANCELLED};
    use serde_json::{json, Value};
    use tower_lsp_server::ls_types::Position;

    fn items(text: &str, suggestions: &[&str]) -> Vec<(String, Range)> {
        let cursor = text.find("$0").unwrap();
        let rope = Rope::from_str(&text.replace("$0", ""));
        let texts: Vec<String> = suggestions.iter().map(|s| s.to_string()).collect();
        let answered =
            Shown::at(cursor, None).answered(rope, PositionEncoding::Utf16, texts, "rust");
        match response(&answered) {
            InlineCompletionResponse::Array(items) => items
                .into_iter()
                .map(|i| (i.insert_text, i.range.unwrap()))
                .collect(),
            InlineCompletionResponse::List(_) => unreachable!("always an array"),
        }
    }

    #[test]
    fn ranges_stay_on_the_cursor_line() {
        let at = |l, c| Position::new(l, c);
        assert_eq!(
            items("fn f() {\n    let 😀 = $0\n}", &["1;\n    let b = 2;"]),
            vec![(
                "1;\n    let b = 2;".to_string(),
                Range::new(at(1, 13), at(1, 13))
            )]
        );
        // The suggestion repeats the closing bracket: it replaces the rest of the line.
        assert_eq!(
            items("call(a, $0)\r\nnext", &["b)", "b, c"]),
            vec![
                ("b)".to_string(), Range::new(at(0, 8), at(0, 9))),
                ("b, c".to_string(), Range::new(at(0, 8), at(0, 8))),
            ]
        );
    }

    /// An edit that comes while a completion waits for its snapshot cancels it, even where the
    /// type-through cache could answer at once: the snapshot and so the answer are of the text
    /// before the edit. (Both are ready when the request goes on; the cancel must win every
    /// time, not by a coin toss.)
    #[tokio::test]
    async fn an_edit_while_a_completion_waits_for_its_snapshot_cancels_it_even_typed_through() {
        const URI: &str = "file:///w/src/lib.rs";
        let (mut lsp, _jobs) = TestServer::start(json!({})).await;
        // More than the type-through's guard after the cursor: edits at the end of the
        // document leave the remembered suggestion standing.
        let text = format!(
            "fn f() {{\n    let total = \n}}\n{}",
            "// filler\n".repeat(60)
        );
        let last_line = text.matches('\n').count() as u32;
        lsp.open(URI, &text).await;
        remember_after_equals(&lsp, URI, &text, "1 + 2;").await;
        let answer = lsp.inline(URI, 1, 16).await.answer().await.unwrap();
        assert_eq!(answer[0]["insertText"], json!("1 + 2;"), "{answer}");

        for round in 0..24 {
            let held = lsp.hold_documents();
            let asked = lsp.inline(URI, 1, 16).await;
            lsp.change(URI, round + 1, Some([[last_line, 0], [last_line, 0]]), "x")
                .await;
            drop(held);
            // The owner has answered the request's snapshot too.
            lsp.settled(URI).await;
            assert_eq!(asked.answer().await, Err(CANCELLED), "round {round}");
        }
        // Without an edit, still answered from the cache.
        let answer = lsp.inline(URI, 1, 16).await.answer().await.unwrap();
        assert_eq!(answer[0]["insertText"], json!("1 + 2;"), "{answer}");
    }

    /// The type-through cache remembers `shown` as the suggestion after the first `= ` of the
    /// open document `uri` (whose text is `text`), as if a request there had answered it.
    async fn remember_after_equals(lsp: &TestServer, uri: &str, text: &str, shown: &str) {
        let key = DocumentKey::parse(uri);
        let snapshots = lsp
            .server()
            .documents
            .snapshot(key.clone(), false)
            .await
            .unwrap()
            .unwrap();
        let mut cache = lsp.server().type_through();
        let generation = cache.generation();
        let cursor = text.find("= ").unwrap() + 2;
        let shown = [shown.to_string()];
        cache.remember(
            &key,
            (Basis::Document, &snapshots.document.rope, cursor),
            (&shown, 1),
            generation,
        );
    }

    /// A document out of sync with the client (a change did not apply) gets no inline
    /// completion, not even from the type-through cache: its text is not the client's, and a
    /// range on it may be on another line there. Why is logged once for each change that put it
    /// out of sync, not at every request; its whole text brings completions back.
    #[tokio::test]
    async fn a_document_out_of_sync_gets_no_inline_completion_until_its_whole_text_comes() {
        const URI: &str = "file:///w/src/lib.rs";
        const TOLD: &str = "no inline completions until it sends the whole text";
        let (mut lsp, _jobs) = TestServer::start(json!({})).await;
        let text = "fn f() {\n    let total = \n}\n";
        lsp.open(URI, text).await;
        remember_after_equals(&lsp, URI, text, "1 + 2;").await;
        async fn answer(lsp: &mut TestServer) -> Value {
            lsp.inline(URI, 1, 16).await.answer().await.unwrap()
        }
        let cached = answer(&mut lsp).await;
        assert_eq!(cached[0]["insertText"], json!("1 + 2;"), "{cached}");

        // Refused whole: the text is as it was, the client's is not.
        lsp.change(URI, 1, Some([[1, 9], [0, 0]]), "reversed").await;
        for _ in 0..3 {
            assert_eq!(answer(&mut lsp).await, Value::Null);
        }
        lsp.change(URI, 2, None, text).await;
        let cached = answer(&mut lsp).await;
        assert_eq!(cached[0]["insertText"], json!("1 + 2;"), "{cached}");
        lsp.change(URI, 3, Some([[1, 9], [0, 0]]), "reversed").await;
        assert_eq!(answer(&mut lsp).await, Value::Null);
        // The log keeps its order: every line before this one has come.
        lsp.server().log.info("the requests are answered");
        lsp.wait_for_log("the requests are answered").await;
        let told = lsp.logs().iter().filter(|l| l.contains(TOLD)).count();
        assert_eq!(told, 2, "{:#?}", lsp.logs());
    }
}
