//! The one inference runtime: whichever door a suggestion comes through (the language server,
//! the HTTP server, the command line), the model is loaded, queued and run here.
//!
//! - [`scheduler`]: the thread that owns the [`redraft_engine::Engine`] and runs every job from
//!   a bounded queue (serially or batched), with the memory-bounded kept caches
//!   (`scheduler::kept`), the job's controls (cancel flag, deadline, draft stream) and one error
//!   type.
//! - [`backend`]: a remote FIM server (OpenAI-compatible `/v1/completions`) as the run step of
//!   the pipeline, with its prompt templates in [`fim_template`].
//! - [`default_model`]: the embedded model and the one way any door loads a model.
//! - [`sampler_args`]: the decoding flags the commands share.
//! - [`metrics`]: counters and histograms of the jobs (the HTTP server exposes them).

pub mod backend;
pub mod default_model;
pub mod fim_template;
pub mod metrics;
pub mod sampler_args;
pub mod scheduler;
