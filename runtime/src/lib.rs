//! The one inference runtime: whichever door a suggestion comes through (the language server,
//! the HTTP server), the model is loaded, queued and run here, and the answer comes back in one
//! shape; a door only turns its protocol into [`scheduler::Work`] and the answer back.
//!
//! - [`scheduler`]: the thread that owns the [`redraft_engine::Engine`] and runs every job from
//!   a bounded queue (serially or batched): loading or replacing the model while it runs, the
//!   memory-bounded kept caches (`scheduler::kept`), FIM jobs sent to a remote backend, the
//!   job's controls (cancel flag, deadline, draft stream), one error type, and a report of how
//!   each job ran for the doors' logs.
//! - [`backend`]: a remote FIM server (OpenAI-compatible `/v1/completions`) as the run step of
//!   the pipeline, with its prompt templates in [`redraft_prompts::fim_template`].
//! - [`backend_args`]: the `--backend` flags the commands share.
//! - [`default_model`]: the embedded model and the one way any door loads a model.
//! - [`flag_error`]: a flag's value found wrong after clap read it, as a command-line mistake.
//! - [`stderr_line`]: a line of log or note on stderr that never panics.
//! - [`model_args`]: the `--model` and `--device` flags the commands share.
//! - [`model_details`]: what a loaded model is (format, quantization, architecture, size), as
//!   the doors describe it.
//! - [`sampler_args`]: the decoding flags the commands share.
//! - [`metrics`]: counters and histograms of the jobs (the HTTP server exposes them).

pub mod backend;
pub mod backend_args;
pub mod default_model;
mod flag_error;
pub mod metrics;
pub mod model_args;
pub mod model_details;
pub mod sampler_args;
pub mod scheduler;
mod stderr_line;

pub use flag_error::flag_error;
pub use stderr_line::stderr_line;

/// The longest FIM middle, in tokens, when a request or setting says nothing (`maxTokens` of
/// the language server, `max_tokens` of the HTTP APIs, `redraft complete --max-tokens`). A
/// canvas starts at the length the syntax asks for (16, 24 or 48 slots) and grows to this only
/// when the model writes its last slot, so short answers take no more steps for it; the context
/// gives up the positions it reserves (on the 2M default's 256 positions, 191 tokens of context
/// instead of 223; on the GPU preset's 1,024, 3%). At 32, a perfect model lost 2-3% of
/// HumanEvalPack-Rust single-line and ~6% of held-out cuts (block bodies most) to the cap, at
/// 64 0.1% and 2.5% (measured with the GPU pack's 8k tokenizer, 2026-12-06).
pub const DEFAULT_MAX_TOKENS: usize = 64;
