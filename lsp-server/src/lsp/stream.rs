//! `redraft/draftStep`: a protocol extension that streams each denoising step's draft of the
//! suggestion to clients that opt in (`"streamSteps": true`), so an editor can show the
//! masked-diffusion "developing photo" while the final answer is on its way. Documented in the
//! README; the final `textDocument/inlineCompletion` answer is unchanged by it.

use redraft_engine::sampler::CanvasView;
use redraft_engine::Engine;
use serde::{Deserialize, Serialize};
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::{Position, Uri, VersionedTextDocumentIdentifier};

/// What a still-masked slot looks like in a draft.
pub const MASK: char = '\u{2591}';

/// The notification (server -> client).
#[derive(Debug)]
pub enum DraftStep {}

impl Notification for DraftStep {
    type Params = StepDraft;
    const METHOD: &'static str = "redraft/draftStep";
}

/// The request a draft belongs to: the document version and the cursor it was asked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamTarget {
    pub uri: Uri,
    pub version: i32,
    pub position: Position,
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
    /// [`MASK`] for each slot still masked, nothing for slots past the end of the middle.
    pub draft: String,
    /// Slots still masked; 0 on the last step.
    pub masked: u32,
}

impl StepDraft {
    pub fn render(engine: &Engine, target: &StreamTarget, step: usize, view: &CanvasView) -> Self {
        let settings = engine.settings();
        let is_end = |t: u32| t == settings.eos_token_id || t == settings.pad_token_id;
        let mut draft = String::new();
        let mut run: Vec<u32> = Vec::new();
        let flush = |run: &mut Vec<u32>, draft: &mut String| {
            // Byte-level tokens only decode cleanly in runs (a character may span tokens).
            if !run.is_empty() {
                draft.push_str(&engine.tokenizer().decode(run).unwrap_or_default());
                run.clear();
            }
        };
        let mut masked = 0u32;
        for slot in &view.slots {
            match slot {
                Some(t) if is_end(*t) => flush(&mut run, &mut draft),
                Some(t) => run.push(*t),
                None => {
                    flush(&mut run, &mut draft);
                    draft.push(MASK);
                    masked += 1;
                }
            }
        }
        flush(&mut run, &mut draft);
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
