//! The suggestion pipeline, the one path from a document to what an editor shows, whichever
//! front door a request comes through (`redraft lsp`, `redraft serve`, `redraft eval`,
//! `redraft complete`):
//!
//! - [`fim`]: document + cursor (+ other open documents) -> [`redraft_context::plan`] ->
//!   [`redraft_engine::Engine`] -> [`redraft_context::finish`] -> the texts to show at the
//!   cursor.
//! - [`edit`]: document + cursor + recent edits -> [`redraft_context::edit::plan_edit`] ->
//!   [`redraft_engine::Engine::next_edit`] -> minimal edits and a jump target.
//!
//! Text and byte offsets in, text out: no protocol types (LSP, HTTP) and no I/O. Each pipeline
//! is split where a server needs to batch: `prepare` makes the engine request, the caller runs
//! it (alone or in a batch), `finish` turns the engine's answer into the suggestion.

pub mod edit;
pub mod fim;
pub mod remote;

use redraft_context::{ByteEstimate, TokenCounter};
use redraft_engine::Engine;

/// Token counts from the model's own tokenizer, so the windows fit what the engine will see.
pub struct EngineTokens<'a>(pub &'a Engine);

impl TokenCounter for EngineTokens<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0
            .tokenizer()
            .encode(text)
            .map_or_else(|_| ByteEstimate.count_tokens(text), |ids| ids.len())
    }

    fn count_within(&self, text: &str, budget: usize) -> usize {
        self.0
            .tokenizer()
            .count_up_to(text, budget)
            .unwrap_or_else(|_| ByteEstimate.count_tokens(text))
    }
}
