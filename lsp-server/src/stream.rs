//! `redraft/draftStep`: a protocol extension that streams each denoising step's draft of the
//! suggestion to clients that opt in (`"streamSteps": true`), so an editor can show the
//! masked-diffusion "developing photo" while the final answer is on its way. Documented in the
//! README; the final `textDocument/inlineCompletion` answer is unchanged by it. A next edit's
//! drafts (its rewrite of the region) go the same way as `redraft/nextEditDraftStep`, so a
//! client never shows one as the other.
//!
//! The drafts are the runtime's ([`redraft_runtime::scheduler::Draft`]: the step, the raw middle
//! as the engine renders it, the slots still masked), forwarded by the request's job as they
//! come. Every stream ends with a draft that has `masked: 0`, so a client can always take its
//! preview down: the last denoising step, or an empty closing draft when the request was
//! cancelled or failed mid-way ([`JobStream`]'s drop). Drafts travel on their own channel; the
//! request handler [`Drafts::flush`]es it before answering so the drafts reach the client
//! first.

use std::time::Duration;

use redraft_runtime::scheduler::Draft;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::{Position, Uri, VersionedTextDocumentIdentifier};

/// The notification (server -> client).
#[derive(Debug)]
pub enum DraftStep {}

impl Notification for DraftStep {
    type Params = StepDraft;
    const METHOD: &'static str = "redraft/draftStep";
}

/// The notification for next edits' drafts (server -> client).
#[derive(Debug)]
pub enum NextEditDraftStep {}

impl Notification for NextEditDraftStep {
    type Params = StepDraft;
    const METHOD: &'static str = "redraft/nextEditDraftStep";
}

/// Which request a stream belongs to, which says which notification carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftKind {
    /// `textDocument/inlineCompletion`: `redraft/draftStep`.
    Inline,
    /// `textDocument/copilotInlineEdit`: `redraft/nextEditDraftStep`.
    NextEdit,
}

/// The request a draft belongs to: the document version and the cursor it was asked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamTarget {
    pub uri: Uri,
    pub version: i32,
    pub position: Position,
    pub kind: DraftKind,
}

/// One step's draft of the (first) suggestion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepDraft {
    pub text_document: VersionedTextDocumentIdentifier,
    pub position: Position,
    /// 0-based denoising step.
    pub step: u32,
    /// The middle as drafted so far, raw model output before post-processing: committed text,
    /// [`redraft_engine::MASK_GLYPH`] for each slot still masked, nothing for slots past
    /// the end of the middle (always valid text: [`redraft_engine::Engine::draft`]).
    pub draft: String,
    /// Slots still masked; 0 on the last step.
    pub masked: u32,
}

impl StepDraft {
    pub fn of(target: &StreamTarget, draft: &Draft) -> Self {
        StepDraft::new(
            target,
            draft.step,
            draft.text.clone(),
            u32::try_from(draft.masked).unwrap_or(u32::MAX),
        )
    }

    /// The end of a stream that stopped before its last step: nothing drafted, nothing masked.
    pub fn closing(target: &StreamTarget, step: usize) -> Self {
        StepDraft::new(target, step, String::new(), 0)
    }

    fn new(target: &StreamTarget, step: usize, draft: String, masked: u32) -> Self {
        StepDraft {
            text_document: VersionedTextDocumentIdentifier {
                uri: target.uri.clone(),
                version: target.version,
            },
            position: target.position,
            step: u32::try_from(step).unwrap_or(u32::MAX),
            draft,
            masked,
        }
    }
}

/// What the drafts channel carries to the task that sends notifications.
#[derive(Debug)]
pub enum Outgoing {
    Draft(DraftKind, StepDraft),
    /// Answered once every draft queued before it has been handed to the client.
    Flush(oneshot::Sender<()>),
}

/// The sending end of the drafts channel, shared by all requests.
#[derive(Debug, Clone)]
pub struct Drafts(mpsc::UnboundedSender<Outgoing>);

impl Drafts {
    pub fn channel() -> (Drafts, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Drafts(tx), rx)
    }

    /// The stream of one request.
    pub fn start(&self, target: StreamTarget) -> JobStream {
        JobStream {
            target,
            tx: self.clone(),
            next_step: 0,
            open: false,
        }
    }

    /// Waits until the drafts queued so far are with the client, so an answer sent after this
    /// does not overtake them. Bounded: a client that never sent `initialized` has no sender
    /// task yet, and the answer must not wait on that.
    pub async fn flush(&self) {
        const MAX_WAIT: Duration = Duration::from_millis(500);
        let (done, flushed) = oneshot::channel();
        if self.0.send(Outgoing::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(MAX_WAIT, flushed).await;
        }
        // The notifications now wait in the transport's queue, which shares a task with the
        // request handlers and picks between queued notifications and answers in turn: give it
        // one turn to write them before this handler's answer joins the race.
        tokio::task::yield_now().await;
    }

    fn send(&self, kind: DraftKind, draft: StepDraft) {
        let _ = self.0.send(Outgoing::Draft(kind, draft));
    }
}

/// One request's drafts. Dropping it while a draft still shows masked slots sends the closing
/// draft, so a cancelled or failed run does not leave a preview behind.
#[derive(Debug)]
pub struct JobStream {
    target: StreamTarget,
    tx: Drafts,
    next_step: usize,
    /// A draft with masked slots was sent and no draft with none has followed.
    open: bool,
}

impl JobStream {
    pub fn step(&mut self, draft: &Draft) {
        self.next_step = draft.step + 1;
        let draft = StepDraft::of(&self.target, draft);
        self.open = draft.masked > 0;
        self.tx.send(self.target.kind, draft);
    }
}

impl Drop for JobStream {
    fn drop(&mut self) {
        if self.open {
            self.tx.send(
                self.target.kind,
                StepDraft::closing(&self.target, self.next_step),
            );
        }
    }
}
