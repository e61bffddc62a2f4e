//! Next-edit suggestions, the text layer: the engine proposes the next edit near the cursor as
//! a rewrite of an editable region, having seen the recent edits, the file around the region
//! and the region's current text.
//!
//! - [`diff`]: unified diffs (parse several files' worth, apply to an excerpt, write one).
//! - [`history`]: the recent edits as whole lines, and their rendering for the model.
//! - [`region`]: the editable region, the whole lines around the cursor the model rewrites.
//! - [`plan`]: one request: history, region and the windows before and after it, in budget.
//! - [`extract`]: the model's new region back to minimal text edits and a jump target.
//!
//! Not here: the model, the prompt's special tokens, LSP types. Byte offsets are the
//! document's; every range is on char boundaries.

pub mod cut;
pub mod diff;
pub mod extract;
pub mod history;
pub mod plan;
pub mod region;

pub use diff::{apply, parse_patches, unified_diff, DiffError, FilePatch, Hunk, HunkLine};
pub use extract::{suggestion_from_region, EditSuggestion, TextEdit};
pub use history::{render_blocks, render_history, HistoryEdit};
pub use plan::{plan_edit, EditBudget, EditPlan, EditStyle, EDIT_POSITIONS};
pub use region::{edit_region, Cut, EditRegion, RegionReason};
