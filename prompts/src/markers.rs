//! The special tokens of redraft's layouts, by their names in a checkpoint's vocabulary.
//!
//! FIM (Qwen2.5-Coder's PSM order, which Dream-Coder and redraft's own checkpoints keep):
//!
//! ```text
//! <|fim_prefix|> before <|fim_suffix|> after <|fim_middle|> [canvas]
//! ```
//!
//! redraft's next-edit layout (`redraft_engine::edit`) adds the cursor and the region's
//! bounds, and `<|file_sep|>` starts a file's block there as in Qwen2.5-Coder's
//! repository-level pretraining (and in Sweep's layout, [`crate::sweep`]).

pub const FIM_PREFIX: &str = "<|fim_prefix|>";
pub const FIM_SUFFIX: &str = "<|fim_suffix|>";
pub const FIM_MIDDLE: &str = "<|fim_middle|>";
/// The mask token of checkpoints adapted from Qwen2.5-Coder, which has no `<|mask|>`.
pub const FIM_PAD: &str = "<|fim_pad|>";
pub const FILE_SEP: &str = "<|file_sep|>";
pub const CURSOR: &str = "<|cursor|>";
pub const EDIT_START: &str = "<|edit_start|>";
pub const EDIT_END: &str = "<|edit_end|>";
