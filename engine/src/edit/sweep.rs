//! Sweep Next-Edit's prompt, for autoregressive checkpoints of the Qwen2.5-Coder family, as
//! tokens: the text layout is [`redraft_prompts::sweep`]'s (its module doc draws it), each of
//! its pieces tokenized on its own here and fitted to the model's positions. The context layer
//! renders the history blocks (`EditStyle::Sweep`) and picks the window (lines around the
//! cursor). The old region is the canvas's draft: an autoregressive model copying it commits a
//! run of copies per forward pass (see the sampler's speculation).

use redraft_prompts::sweep::Prompt;

use super::{EditLayout, EditPrompt};
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// A Sweep prompt tokenized, each piece on its own, before it is fitted to the model's
/// positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepPieces {
    /// `<|file_sep|>` and the path line of the file block.
    file_header: Vec<u32>,
    before: Vec<u32>,
    /// The region inside the file block.
    region: Vec<u32>,
    after: Vec<u32>,
    /// `\n` when the file block would not end in one.
    file_end: Vec<u32>,
    /// One block per recent edit, oldest first, each starting with `<|file_sep|>`.
    history: Vec<Vec<u32>>,
    /// The original and current windows and the open `updated/` header.
    windows: Vec<u32>,
    /// The current window as the model is to rewrite it: the canvas's draft.
    pub draft: Vec<u32>,
}

impl SweepPieces {
    /// As [`super::EditPieces::tokenize`]: of the code before and after the region, the
    /// `room` tokens nearest it at least.
    pub fn tokenize(
        tokenizer: &Tokenizer,
        file_sep: u32,
        prompt: &EditPrompt<'_>,
        room: usize,
    ) -> Result<SweepPieces> {
        let text = Prompt::new(
            prompt.path,
            prompt.before,
            prompt.region,
            prompt.after,
            prompt.original,
            prompt.history,
        );
        // Each text once: `encode("")` still runs the tokenizer's pipeline, and the current
        // window's body is the draft (tokenized once for both).
        let encode = |text: &str| -> Result<Vec<u32>> {
            if text.is_empty() {
                Ok(Vec::new())
            } else {
                tokenizer.encode(text)
            }
        };
        let separated = |text: &str| -> Result<Vec<u32>> {
            let mut tokens = vec![file_sep];
            tokens.extend(encode(text)?);
            Ok(tokens)
        };
        let draft = encode(&text.draft)?;
        let mut windows = separated(&text.original_header)?;
        windows.extend(encode(&text.original)?);
        windows.extend(separated(&text.current_header)?);
        windows.extend_from_slice(&draft);
        windows.extend(separated(&text.updated_header)?);
        Ok(SweepPieces {
            file_header: separated(&text.file_header)?,
            before: tokenizer.encode_tail(text.before, room)?,
            region: encode(text.region)?,
            after: tokenizer.encode_head(text.after, room)?,
            file_end: encode(text.file_end)?,
            history: text
                .history
                .iter()
                .map(|block| separated(block))
                .collect::<Result<_>>()?,
            windows,
            draft,
        })
    }

    /// Tokens that are always kept: the file block's header, the region in it, the windows.
    pub fn fixed_len(&self) -> usize {
        self.file_header.len() + self.region.len() + self.file_end.len() + self.windows.len()
    }

    /// Lays the pieces out in at most `budget` tokens besides the canvas: the fixed pieces
    /// whole (an error when they alone do not fit), then the newest history blocks that fit in
    /// half of what is left (whole blocks: a cut block would misquote an edit), and the code on
    /// either side of the region in the rest.
    pub fn fit(self, budget: usize) -> Result<EditLayout> {
        let fixed = self.fixed_len();
        let Some(rest) = budget.checked_sub(fixed) else {
            return Err(Error::InvalidRequest(format!(
                "the editable window takes {fixed} tokens in its three copies, more than the \
                 {budget} the model has room for besides the new window: choose a smaller region"
            )));
        };
        let mut kept = 0;
        let mut history: Vec<Vec<u32>> = self
            .history
            .into_iter()
            .rev()
            .take_while(|block| {
                kept += block.len();
                kept <= rest / 2
            })
            .collect();
        history.reverse();
        let history_len: usize = history.iter().map(Vec::len).sum();
        let (keep_before, keep_after) =
            crate::engine::fit_context(self.before.len(), self.after.len(), rest - history_len);
        let mut prefix = self.file_header;
        prefix.extend_from_slice(&self.before[self.before.len() - keep_before..]);
        prefix.extend(self.region);
        prefix.extend_from_slice(&self.after[..keep_after]);
        prefix.extend(self.file_end);
        prefix.extend(history.into_iter().flatten());
        prefix.extend(self.windows);
        Ok(EditLayout {
            prefix,
            suffix: Vec::new(),
            draft: self.draft,
        })
    }
}
