//! The run step done elsewhere: a FIM server in another process fills a prepared plan's middle,
//! and [`crate::fim::finish_middles`] cleans it as [`crate::fim::finish`] cleans the engine's
//! (without a confidence bar: a remote middle comes without probabilities).

use redraft_context::TokenCounter;
use serde::{Deserialize, Serialize};

use crate::fim::{FimOptions, Prepared};

/// A FIM server in another process, as a pipeline caller sees it (the eval, the language server): the plan is made here, with the
/// backend's positions and token counter, and the backend only fills its middle. `redraft-runtime`
/// implements it over HTTP (its `backend` module), so this crate knows no protocol.
pub trait FimBackend: Sync {
    /// What identifies it in a run (a resumed run must not mix two backends).
    fn spec(&self) -> BackendSpec;
    /// The positions a plan under `options` may fill: the context sent plus the canvas.
    fn positions(&self, options: &FimOptions) -> usize;
    /// Counts tokens for the plan (the remote model's tokenizer is not at hand).
    fn counter(&self) -> &dyn TokenCounter;
    /// The raw middle for `prepared` (before [`crate::fim::finish_middles`]), or why there is none.
    fn fill(&self, prepared: &Prepared) -> std::result::Result<RemoteMiddle, String>;
}

/// A backend as a run's identity records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendSpec {
    /// The completions endpoint.
    pub url: String,
    /// The served model asked for, if any.
    pub model: Option<String>,
    /// The FIM template the prompt is written in (`qwen`, ..., or `suffix`).
    pub template: String,
    /// Context tokens sent (prefix, suffix, snippets), by the plan's count.
    pub context_tokens: usize,
}

/// A backend's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteMiddle {
    pub text: String,
    /// Tokens the server says it generated, if it says.
    pub tokens: Option<usize>,
    /// The middle ended by itself (an end token or a stop string), not at `max_tokens`.
    pub ended: bool,
}
