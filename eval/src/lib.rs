//! redraft's fill-in-the-middle evaluation: benchmark builders, sandboxed execution scoring,
//! the generation driver and the reports behind `redraft eval` and `redraft tasks`.
//!
//! - [`task`]: the HumanEval-infilling JSONL schema every part reads and writes.
//! - [`build`]: HumanEvalPack-Rust cuts and `--from-dir` cuts.
//! - [`sandbox`] + [`score`]: run Python and Rust programs isolated and classify the outcome.
//! - [`generate`]: requests built by the context layer, as the language server builds them.
//! - [`run`]: parallel scoring, resumable per-task output, sweeps; [`report`]: summaries;
//!   [`fingerprint`]: what ties a resumed run to its model and its inputs.
//! - [`metrics`]: exact match and edit similarity.
//! - [`interrupt`]: a run stopped by Ctrl-C leaves no program running and no scratch directory.

pub mod build;
pub mod error;
pub mod fingerprint;
pub mod generate;
pub mod interrupt;
pub mod metrics;
pub mod next_edit;
pub mod parallel;
pub mod progress;
pub mod report;
pub mod rng;
pub mod run;
pub mod sandbox;
pub mod score;
pub mod task;

pub use error::{Error, Result};
