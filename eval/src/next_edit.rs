//! Next-edit suggestions measured: after the user edits something, does the suggestion
//! rewrite the code nearby the way the user went on to? `redraft eval --next-edit` over
//! Zed's case format, with Zed's metrics.
//!
//! - [`case`]: a case in Zed's Markdown format (`ExampleSpec::from_markdown`), read and written
//!   ([`markdown`]: the part of Markdown and TOML that takes; [`place`]: expected patches
//!   placed in the excerpt).
//! - [`score`]: exact match, Zed's delta-chrF and changed-line counts against the best
//!   expected alternative.
//! - [`baseline`]: `no-edit` and `repeat-last`.
//! - [`model`]: the model arm, through [`redraft_suggest::edit::next_edit`].
//! - [`run`]: a case set through a source (the model, a completions file, a baseline) into
//!   resumable per-case JSONL; [`report`]: the summary and its Markdown table.
//! - [`build`]: cases cut from two versions of a tree.

pub mod baseline;
pub mod build;
pub mod case;
pub mod markdown;
pub mod model;
pub mod place;
pub mod report;
pub mod run;
pub mod score;

pub use baseline::Baseline;
pub use case::NextEditCase;
pub use run::{NextEditModel, NextEditSource, Suggestion};
