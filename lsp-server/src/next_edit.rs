//! Next-edit suggestions in the shape of Copilot's language server, so clients written for it
//! can use redraft: the request `textDocument/copilotInlineEdit`, the notification
//! `textDocument/didShowInlineEdit`, and the accept command (`redraft.didAcceptNextEdit`, run
//! by the client through `workspace/executeCommand` after it applied the edit). The README's
//! "Protocol: next edits" section is the contract.
//!
//! Order of business for a request, as for an inline completion: note the document's edit
//! stamp and queue for a snapshot (with the edit history) before the first `.await`; answer
//! no edits for a version that is not the document's, or for a document out of sync with the
//! client (a change that did not apply: the client's text under this version is another);
//! convert the position; wait for the document's one next-edit job (`jobs`: started here, or
//! already under way or done for this text, history and cursor; none if the document changed
//! since the snapshot); answer no edits if the document changed meanwhile. An answer is one edit,
//! the whole suggestion as one replacement (it may span lines and lie away from the cursor),
//! which Copilot's clients apply as given.

pub mod jobs;

use std::ops::Range;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use redraft_context::edit::TextEdit;
use ropey::Rope;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::jsonrpc;
use tower_lsp_server::ls_types::{
    Command, Position, Range as LspRange, Uri, VersionedTextDocumentIdentifier,
};

use super::document_key::DocumentKey;
use super::encoding::{around_line_breaks, PositionEncoding};
use super::inference::JobError;
use super::server::Server;
use super::stream::{DraftKind, StreamTarget};
use jobs::{NotStarted, Origin};

/// The command a client runs after applying a next edit (listed in `executeCommandProvider`).
/// Not a name a user would bind: VS Code's language client registers every listed command as
/// its own, so an extension's `redraft.acceptNextEdit` key command stays free.
pub const ACCEPT_COMMAND: &str = "redraft.didAcceptNextEdit";

/// Copilot's next-edit request.
pub const INLINE_EDIT_METHOD: &str = "textDocument/copilotInlineEdit";

/// `textDocument/copilotInlineEdit` params. Other fields (sidekick's `context`) are ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineEditParams {
    pub text_document: VersionedTextDocumentIdentifier,
    pub position: Position,
}

/// The answer: no edits, or one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InlineEditList {
    pub edits: Vec<InlineEdit>,
}

impl InlineEditList {
    fn none() -> InlineEditList {
        InlineEditList { edits: Vec::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InlineEdit {
    /// Replaces `range`.
    pub text: String,
    /// The document and the version the edit is for.
    pub text_document: VersionedTextDocumentIdentifier,
    pub range: LspRange,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Command>,
}

impl Server {
    pub async fn copilot_inline_edit(
        &self,
        params: InlineEditParams,
    ) -> jsonrpc::Result<InlineEditList> {
        // A bug in here must cost one answer, not the server.
        match AssertUnwindSafe(self.copilot_inline_edit_inner(params))
            .catch_unwind()
            .await
        {
            Ok(answer) => answer,
            Err(_) => {
                self.log.error(
                    "next edit failed unexpectedly (a bug): answered with an internal error",
                );
                Err(jsonrpc::Error::internal_error())
            }
        }
    }

    async fn copilot_inline_edit_inner(
        &self,
        params: InlineEditParams,
    ) -> jsonrpc::Result<InlineEditList> {
        // `uri` as the client spelled it, for what goes back; `key` for the server's own books.
        let VersionedTextDocumentIdentifier { uri, version } = params.text_document;
        let key = DocumentKey::of(&uri);
        let position = params.position;
        let settings = self.settings();
        if !settings.next_edit.enabled {
            return Ok(InlineEditList::none());
        }
        // Both before any `.await`: see the module comment.
        let edits_before = self.next_edits.stamp(&key);
        let snapshot = self.documents.snapshot(key.clone(), true);
        let Some(snapshots) = snapshot.await.ok().flatten() else {
            return Err(jsonrpc::Error::invalid_params(format!(
                "{} is not open (send textDocument/didOpen first)",
                uri.as_str()
            )));
        };
        let document = &snapshots.document;
        if document.version != version {
            self.log.debug(|| {
                format!(
                    "{}: next edit asked for version {version}, the document is at {}: no edits",
                    uri.as_str(),
                    document.version
                )
            });
            return Ok(InlineEditList::none());
        }
        if !settings.enabled_for(&document.language_id) {
            return Ok(InlineEditList::none());
        }
        if !document.in_sync() {
            self.log.debug(|| {
                format!(
                    "{} v{version}: a change did not apply, so the client's text is another: no edits until it sends the whole text (or opens the document again)",
                    uri.as_str()
                )
            });
            return Ok(InlineEditList::none());
        }
        let encoding = self.encoding();
        let rope = document.rope.clone();
        let edited_at = document.edited_at;
        let cursor = encoding
            .offset(&rope, position)
            .map_err(|err| jsonrpc::Error::invalid_params(err.to_string()))?;
        let stream = settings.stream_steps.then(|| {
            self.drafts.start(StreamTarget {
                uri: uri.clone(),
                version,
                position,
                kind: DraftKind::NextEdit,
            })
        });
        let streaming = stream.is_some();
        let (answer, _waiter) =
            match self
                .next_edits
                .job(snapshots, edits_before, cursor, Origin::Request, stream)
            {
                Ok(job) => job,
                // Edited (or closed) since the snapshot: the answer would be for the old text.
                Err(NotStarted::Stale) => return Ok(InlineEditList::none()),
                Err(NotStarted::GivesWay(_)) => unreachable!("only a precompute gives way"),
            };
        let answer = answer.await;
        if streaming {
            self.drafts.flush().await;
        }
        if self.next_edits.stamp(&key) != edits_before {
            self.log.debug(|| {
                format!(
                    "{} v{version}: edited while the next edit was computed: no edits",
                    uri.as_str()
                )
            });
            return Ok(InlineEditList::none());
        }
        let next = match answer {
            Ok(next) => next,
            Err(JobError::Cancelled | JobError::ShuttingDown) => return Ok(InlineEditList::none()),
            Err(JobError::NoModel(reason)) => {
                self.log
                    .debug(|| format!("no next edit for {}: {reason}", uri.as_str()));
                return Ok(InlineEditList::none());
            }
            Err(
                JobError::Invalid(reason) | JobError::Failed(reason) | JobError::Backend(reason),
            ) => {
                self.log
                    .warn(format!("next edit in {} failed: {reason}", uri.as_str()));
                return Ok(InlineEditList::none());
            }
        };
        let Some((range, text)) = merged(&rope, &next.edits) else {
            return Ok(InlineEditList::none());
        };
        let (range, text) = around_line_breaks(&rope, range, text);
        let inline_line = self.next_edits.inline_line(&key, edited_at);
        if hidden_by_inline(&rope, &range, inline_line) {
            self.log.debug(|| {
                format!(
                    "{} v{version}: the next edit touches the line an inline completion shows on: not shown",
                    uri.as_str()
                )
            });
            return Ok(InlineEditList::none());
        }
        let id = self
            .next_edits
            .offer(&key, &uri, edited_at, range.clone(), text.clone());
        Ok(InlineEditList {
            edits: vec![inline_edit(&rope, encoding, &uri, version, range, text, id)],
        })
    }

    /// `textDocument/didShowInlineEdit`: `{item}`, only `item.command.arguments[0]` (the
    /// suggestion's id) counts; recorded in the log.
    pub async fn did_show_inline_edit(&self, params: Value) {
        let id = params["item"]["command"]["arguments"][0].clone();
        self.log.debug(|| format!("next edit {id} shown"));
    }

    /// `textDocument/didFocus` (Copilot's clients send it when a buffer gets focus): nothing to
    /// do, accepted so it is not an unknown method.
    pub async fn did_focus(&self, _params: Value) {}

    /// `workspace/executeCommand` with [`ACCEPT_COMMAND`] and the suggestion's id: records the
    /// acceptance and precomputes the next suggestion for the text the edit left. (The history
    /// marks the change that applied the edit as accepted whether or not this comes; Copilot's
    /// clients send it after that change.)
    pub(super) async fn accepted_next_edit(&self, arguments: &[Value]) -> jsonrpc::Result<()> {
        // The id as sent (a string), or as a client that parsed it may echo it (a number).
        let id = arguments
            .first()
            .and_then(|id| id.as_str().and_then(|id| id.parse::<u64>().ok()).or(id.as_u64()))
            .ok_or_else(|| {
                jsonrpc::Error::invalid_params(format!(
                    "{ACCEPT_COMMAND} takes the suggestion's id (the edit's command.arguments[0]), got {}",
                    Value::Array(arguments.to_vec())
                ))
            })?;
        let Some((key, uri)) = self.next_edits.offered(id) else {
            self.log.debug(|| {
                format!("next edit {id} accepted, but it is no longer the latest offered")
            });
            return Ok(());
        };
        self.log
            .info(format!("next edit {id} accepted in {}", uri.as_str()));
        self.next_edits
            .precompute(key, "after an accepted suggestion")
            .await;
        Ok(())
    }
}

/// The suggestion's edits (document order, not overlapping) as one replacement: from the
/// first edit's start to the last one's end, the text between them kept.
fn merged(rope: &Rope, edits: &[TextEdit]) -> Option<(Range<usize>, String)> {
    let (first, last) = (edits.first()?, edits.last()?);
    let mut text = String::new();
    let mut at = first.range.start;
    for edit in edits {
        text.push_str(&rope.byte_slice(at..edit.range.start).to_string());
        text.push_str(&edit.new_text);
        at = edit.range.end;
    }
    Some((first.range.start..last.range.end, text))
}

/// Copilot's rule when both are on: an inline completion at the cursor wins there, so a next
/// edit touching the line it shows on is not shown while it is.
fn hidden_by_inline(rope: &Rope, range: &Range<usize>, inline_line: Option<usize>) -> bool {
    inline_line.is_some_and(|line| {
        (rope.byte_to_line(range.start)..=rope.byte_to_line(range.end)).contains(&line)
    })
}

/// The protocol's edit for `text` in place of bytes `range`, positions in `encoding`.
fn inline_edit(
    rope: &Rope,
    encoding: PositionEncoding,
    uri: &Uri,
    version: i32,
    range: Range<usize>,
    text: String,
    id: u64,
) -> InlineEdit {
    InlineEdit {
        text,
        text_document: VersionedTextDocumentIdentifier {
            uri: uri.clone(),
            version,
        },
        range: encoding.range(rope, range),
        command: Some(Command {
            title: "Accept next edit".into(),
            command: ACCEPT_COMMAND.into(),
            arguments: Some(vec![Value::String(id.to_string())]),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::TestServer;
    use crate::inference::NextEdit;
    use serde_json::json;

    fn uri() -> Uri {
        "file:///t/lib.rs".parse().unwrap()
    }

    /// A rename carried to two lines below the cursor ($0), with non-ASCII text before it on
    /// the same lines: one multi-line edit, columns counted in each encoding.
    #[test]
    fn a_multi_line_edit_away_from_the_cursor_is_one_range() {
        let text = "fn f(wïdth: u32) {$0\n    let 😀 = w;\n    let é = w + 1;\n}\n";
        let rope = Rope::from_str(&text.replace("$0", ""));
        let source = rope.to_string();
        let at = |needle: &str| source.find(needle).unwrap();
        let edits = [
            TextEdit {
                range: at("w;")..at("w;") + 1,
                new_text: "wïdth".into(),
            },
            TextEdit {
                range: at("w + 1")..at("w + 1") + 1,
                new_text: "wïdth".into(),
            },
        ];
        let (range, new) = merged(&rope, &edits).unwrap();
        assert_eq!(new, "wïdth;\n    let é = wïdth");
        let edit = |encoding| {
            serde_json::to_value(inline_edit(
                &rope,
                encoding,
                &uri(),
                7,
                range.clone(),
                new.clone(),
                3,
            ))
            .unwrap()
        };
        assert_eq!(
            edit(PositionEncoding::Utf16),
            json!({
                "text": "wïdth;\n    let é = wïdth",
                "textDocument": {"uri": "file:///t/lib.rs", "version": 7},
                "range": {"start": {"line": 1, "character": 13}, "end": {"line": 2, "character": 13}},
                "command": {"title": "Accept next edit", "command": "redraft.didAcceptNextEdit", "arguments": ["3"]},
            })
        );
        assert_eq!(
            edit(PositionEncoding::Utf8)["range"],
            json!({"start": {"line": 1, "character": 15}, "end": {"line": 2, "character": 14}})
        );
        assert_eq!(
            edit(PositionEncoding::Utf32)["range"],
            json!({"start": {"line": 1, "character": 12}, "end": {"line": 2, "character": 13}})
        );
        // Applied as a client applies it, the edit gives the suggestion.
        let mut applied = source.clone();
        applied.replace_range(range, &new);
        assert_eq!(
            applied,
            "fn f(wïdth: u32) {\n    let 😀 = wïdth;\n    let é = wïdth + 1;\n}\n"
        );
        assert_eq!(merged(&rope, &[]), None);
    }

    #[test]
    fn a_next_edit_on_the_inline_completions_line_is_hidden() {
        let rope = Rope::from_str("a\nb\nc\nd\n");
        // Lines 1..=2.
        let range = 2..5;
        assert!(hidden_by_inline(&rope, &range, Some(1)));
        assert!(hidden_by_inline(&rope, &range, Some(2)));
        assert!(!hidden_by_inline(&rope, &range, Some(0)));
        assert!(!hidden_by_inline(&rope, &range, Some(3)));
        assert!(!hidden_by_inline(&rope, &range, None));
    }

    /// In a document that mixes line endings, a rewrite of a `\r\n` line in a region whose
    /// lines end in `\n` comes from the context layer as an edit that ends between the `\r`
    /// and the `\n` (the line's new text takes the region's `\n`). No position names that
    /// place: a client reads the end as the line's end, before the `\r`, and kept it. The edit
    /// is answered with the whole line break in it, and the change a client makes of it is
    /// the accepted suggestion.
    #[tokio::test]
    async fn a_next_edit_never_ends_inside_a_crlf() {
        const URI: &str = "file:///w/src/lib.rs";
        let (mut lsp, mut jobs) = TestServer::start(json!({"nextEdit": {"debounceMs": 0}})).await;
        let text = "let a = 1;\nlet b = 2;\r\nlet c = 3;\n";
        lsp.open(URI, text).await;
        let asked = tokio::spawn(lsp.next_edit(URI, 0, 0, 10).await.answer());
        let job = jobs.next().await;
        // `let b = 2;\r\n` rewritten `let b = 3;\n`, narrowed as the context layer does.
        let at = text.find("2;").unwrap();
        job.answer(Ok(NextEdit {
            edits: vec![TextEdit {
                range: at..at + "2;\r".len(),
                new_text: "3;".into(),
            }],
            ..NextEdit::default()
        }));
        let answer = asked.await.unwrap().unwrap();
        let edit = &answer["edits"][0];
        assert_eq!(
            (&edit["range"], &edit["text"]),
            (
                &json!({"start": {"line": 1, "character": 8}, "end": {"line": 2, "character": 0}}),
                &json!("3;\n")
            ),
            "{answer}"
        );
        lsp.change(URI, 1, Some([[1, 8], [2, 0]]), "3;\n").await;
        lsp.wait_for_log("the change applied next edit").await;
    }

    /// A `didChange` whose second change does not apply (a reversed range) leaves the server
    /// with text the client does not have under that version: a next edit computed on it would
    /// replace the wrong text in the client's. No edits, none computed (on request or ahead),
    /// until the client sends the whole text.
    #[tokio::test]
    async fn a_document_a_change_did_not_apply_to_gets_no_next_edits_until_its_whole_text() {
        const URI: &str = "file:///w/src/lib.rs";
        let (mut lsp, mut jobs) = TestServer::start(json!({"nextEdit": {"debounceMs": 0}})).await;
        lsp.open(URI, "fn area(w: u32) -> u32 {\n    w * w\n}\n")
            .await;
        let change = |range: [[u32; 2]; 2], text: &str| {
            json!({"range": {"start": {"line": range[0][0], "character": range[0][1]},
                             "end": {"line": range[1][0], "character": range[1][1]}},
                   "text": text})
        };
        lsp.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": 1},
                   "contentChanges": [change([[0, 9], [0, 9]], "idth"), change([[1, 9], [1, 4]], "width")]}),
        )
        .await;
        lsp.wait_for_log("does not apply").await;
        let answer = lsp.next_edit(URI, 1, 0, 13).await.answer().await;
        assert_eq!(answer, Ok(json!({"edits": []})));
        lsp.wait_for_log("a change did not apply, so the client's text is another")
            .await;
        lsp.server()
            .next_edits
            .precompute(DocumentKey::parse(URI), "after an edit pause")
            .await;
        jobs.assert_none_started();

        let whole = "fn area(width: u32) -> u32 {\n    w * w\n}\n";
        lsp.change(URI, 2, None, whole).await;
        let asked = tokio::spawn(lsp.next_edit(URI, 2, 0, 13).await.answer());
        let job = jobs.next().await;
        let at = whole.find("w *").unwrap();
        job.answer(Ok(NextEdit {
            edits: vec![TextEdit {
                range: at..at + 1,
                new_text: "width".into(),
            }],
            ..NextEdit::default()
        }));
        let answer = asked.await.unwrap().unwrap();
        assert_eq!(answer["edits"][0]["text"], json!("width"), "{answer}");
    }
}
