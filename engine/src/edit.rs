//! Next-edit requests: the model rewrites an editable region of a file, seeing the recent edit
//! history, the file around the region and the region's current text.
//!
//! Two layouts, one per kind of checkpoint ([`EditFormat`]): redraft's own, for models trained
//! with its edit markers, and Sweep Next-Edit's ([`sweep`]), for autoregressive checkpoints of
//! the Qwen2.5-Coder family (the Sweep Next-Edit models are fine-tunes of it on that prompt).
//!
//! redraft's layout, built by [`EditPieces`] for inference and training alike:
//!
//! ```text
//! history <|file_sep|> path "\n" before <|edit_start|> old[..cursor] <|cursor|> old[cursor..] <|edit_end|> [canvas] after
//! ```
//!
//! The canvas, between the marked old region and the code after it, is the new region followed
//! by EOS padding: to the model a next edit is an infill whose prefix also shows the text being
//! rewritten and what the user did just before. Unchanged text is mostly copies, which a
//! denoiser commits in the first steps, and a region the model rewrites as it was is "no
//! edit". The old region's tokens are the canvas's draft (see
//! [`crate::sampler::SamplerConfig::draft_tau`]). Each piece is tokenized on its own, as the
//! prefix and suffix of an infill are, so the markers are always their own ids, whatever the
//! text holds.

use crate::config::AttentionPattern;
use crate::error::{Error, Result};
use crate::sampler::SamplerConfig;
use crate::tokenizer::Tokenizer;

pub mod sweep;

/// A next-edit request in text (see [`crate::Engine::next_edit`]).
#[derive(Debug, Clone)]
pub struct EditRequest {
    /// The recent edits, oldest first, one rendered block each, as the model's format writes
    /// them (the context layer's `EditStyle`).
    pub history: Vec<String>,
    pub path: String,
    pub before: String,
    pub region: String,
    /// The region as it read before the user's latest edit in it (Sweep's "original" window);
    /// the region itself when that edit lies elsewhere.
    pub original: String,
    /// Byte offset of the cursor in `region`.
    pub cursor: usize,
    pub after: String,
    /// The longest new region, in tokens; `None`: twice the old region's plus 16, within what
    /// the model's positions leave.
    pub max_tokens: Option<usize>,
    pub sampler: SamplerConfig,
}

impl EditRequest {
    pub fn prompt(&self) -> EditPrompt<'_> {
        EditPrompt {
            history: &self.history,
            path: &self.path,
            before: &self.before,
            region: &self.region,
            original: &self.original,
            cursor: self.cursor,
            after: &self.after,
        }
    }
}

/// How a model reads a next-edit request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditFormat {
    /// redraft's own layout (module docs): a model trained with its edit markers.
    Markers(EditMarkers),
    /// Sweep Next-Edit's prompt ([`sweep`]): an autoregressive checkpoint with Qwen2.5-Coder's
    /// `<|file_sep|>` and no edit markers.
    Sweep { file_sep: u32 },
}

impl EditFormat {
    /// The format of a model attending as `attention` with `tokenizer`'s vocabulary; a model
    /// with neither redraft's markers nor (causal) `<|file_sep|>` cannot make next edits.
    pub fn of(tokenizer: &Tokenizer, attention: AttentionPattern) -> Result<EditFormat> {
        let markers = EditMarkers::of(tokenizer);
        match (markers, tokenizer.token_to_id(FILE_SEP)) {
            (Ok(markers), _) => Ok(EditFormat::Markers(markers)),
            (Err(_), Some(file_sep)) if attention.block().is_some() => {
                Ok(EditFormat::Sweep { file_sep })
            }
            (Err(e), _) => Err(e),
        }
    }
}

/// The marker tokens of the layout, by name in the tokenizer's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditMarkers {
    pub file_sep: u32,
    pub cursor: u32,
    pub edit_start: u32,
    pub edit_end: u32,
}

pub use redraft_prompts::markers::{CURSOR, EDIT_END, EDIT_START, FILE_SEP};

impl EditMarkers {
    /// The markers of `tokenizer`; a model without them was not trained for next edits.
    pub fn of(tokenizer: &Tokenizer) -> Result<EditMarkers> {
        let id = |name: &str| {
            tokenizer.token_to_id(name).ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "this model has no `{name}` token: it was not trained for next-edit suggestions"
                ))
            })
        };
        Ok(EditMarkers {
            file_sep: id(FILE_SEP)?,
            cursor: id(CURSOR)?,
            edit_start: id(EDIT_START)?,
            edit_end: id(EDIT_END)?,
        })
    }
}

/// A next-edit prompt in text: what the context layer chose.
#[derive(Debug, Clone, Copy)]
pub struct EditPrompt<'a> {
    /// The rendered edit history, one block an edit, oldest first.
    pub history: &'a [String],
    /// The file's name, as the history names files.
    pub path: &'a str,
    /// The file before the region.
    pub before: &'a str,
    /// The region's current text.
    pub region: &'a str,
    /// The region before the user's latest edit in it (see [`EditRequest::original`]).
    pub original: &'a str,
    /// Byte offset of the cursor in `region` (clamped, moved back to a char boundary).
    pub cursor: usize,
    /// The file after the region.
    pub after: &'a str,
}

/// A next-edit prompt tokenized, each piece on its own, before it is fitted to the model's
/// positions ([`EditPieces::fit`]). Every text is tokenized once: callers size the canvas from
/// `draft` before fitting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPieces {
    history: Vec<u32>,
    /// `<|file_sep|>` and the path line.
    header: Vec<u32>,
    before: Vec<u32>,
    /// The old region between its markers, with the cursor marker.
    marked: Vec<u32>,
    after: Vec<u32>,
    /// The old region's tokens (tokenized whole, as the new region is): the canvas's draft.
    pub draft: Vec<u32>,
}

/// The tokens of a next-edit request around its canvas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditLayout {
    /// History, file header, the code before and the marked old region.
    pub prefix: Vec<u32>,
    /// The code after the region.
    pub suffix: Vec<u32>,
    /// The old region's tokens: the canvas's draft.
    pub draft: Vec<u32>,
}

impl EditPieces {
    /// The pieces of `prompt` for a model of `room` positions: of the code on either side and
    /// of the history, the tokens nearest the region, at least `room` of each where it holds
    /// that many (no more can be kept), so a huge text costs what those cost
    /// ([`Tokenizer::encode_tail`]).
    pub fn tokenize(
        tokenizer: &Tokenizer,
        markers: EditMarkers,
        prompt: &EditPrompt<'_>,
        room: usize,
    ) -> Result<EditPieces> {
        let mut cursor = prompt.cursor.min(prompt.region.len());
        while !prompt.region.is_char_boundary(cursor) {
            cursor -= 1;
        }
        let mut header = vec![markers.file_sep];
        header.extend(tokenizer.encode(&format!("{}\n", prompt.path))?);
        let mut marked = vec![markers.edit_start];
        marked.extend(tokenizer.encode(&prompt.region[..cursor])?);
        marked.push(markers.cursor);
        marked.extend(tokenizer.encode(&prompt.region[cursor..])?);
        marked.push(markers.edit_end);
        Ok(EditPieces {
            history: tokenizer.encode_tail(&prompt.history.concat(), room)?,
            header,
            before: tokenizer.encode_tail(prompt.before, room)?,
            marked,
            after: tokenizer.encode_head(prompt.after, room)?,
            draft: tokenizer.encode(prompt.region)?,
        })
    }

    /// Tokens that are always kept: the file header and the marked old region.
    pub fn fixed_len(&self) -> usize {
        self.header.len() + self.marked.len()
    }

    /// Lays the pieces out in at most `budget` tokens besides the canvas. The marked old region
    /// and the file header are kept whole (an error when they alone do not fit); of what is left,
    /// the newest history gets up to half, the code on either side the rest (the nearest lines
    /// kept, three quarters before), and what either leaves unused goes to the other.
    pub fn fit(self, budget: usize) -> Result<EditLayout> {
        let fixed = self.fixed_len();
        let Some(rest) = budget.checked_sub(fixed) else {
            return Err(Error::InvalidRequest(format!(
                "the editable region takes {fixed} tokens with its markers, more than the {budget} \
                 the model has room for besides the new region: choose a smaller region"
            )));
        };
        let EditPieces {
            mut history,
            header,
            mut before,
            marked,
            mut after,
            draft,
        } = self;
        let history_share = history.len().min(rest / 2);
        let (keep_before, keep_after) =
            crate::engine::fit_context(before.len(), after.len(), rest - history_share);
        let keep_history = history.len().min(rest - keep_before - keep_after);
        history.drain(..history.len() - keep_history);
        before.drain(..before.len() - keep_before);
        after.truncate(keep_after);
        let mut prefix = history;
        prefix.extend(header);
        prefix.extend(before);
        prefix.extend(marked);
        Ok(EditLayout {
            prefix,
            suffix: after,
            draft,
        })
    }
}

/// Masked slots laid down for a region of `draft` tokens: room for the rewrite to be somewhat
/// longer (the canvas grows beyond it when the model writes its last slot), in blocks of 8 so
/// training and use see the same few lengths.
pub fn canvas_length(draft: usize) -> usize {
    (draft + draft / 4 + 4).next_multiple_of(8)
}
