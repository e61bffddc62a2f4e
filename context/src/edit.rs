//! Next-edit suggestions, the text layer: the engine proposes the next edit near the cursor as
//! a rewrite of an editable region, having seen the recent edits, the file around the region
//! and the region's current text.
//!
//! - [`diff`]: unified diffs (parse several files' worth, apply to an excerpt, write one).

pub mod diff;
