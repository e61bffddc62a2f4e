//! Sweep Next-Edit's prompt, for autoregressive checkpoints of the Qwen2.5-Coder family: the
//! files of the request as Qwen2.5-Coder's repository-level pretraining writes them, one
//! `<|file_sep|>` block each, and the model writes the updated window after an open header.
//!
//! ```text
//! <|file_sep|>{path}\n{before}{region}{after}\n            the file around the region
//! <|file_sep|>{path}.diff\noriginal:\n…\nupdated:\n…\n      one block per recent edit, oldest first
//! <|file_sep|>original/{path}\n{original}\n               the region before the latest edit in it
//! <|file_sep|>current/{path}\n{region}\n                  the region now
//! <|file_sep|>updated/{path}\n [canvas]                   the rewrite, ended by `<|file_sep|>`
//! ```
//!
//! The history blocks, the windows and their headers are Zed's `sweep_prompt.rs` (what Zed
//! sends a Sweep model over its OpenAI-compatible provider); the first block, the file around
//! the region, stands where Zed puts related files. The context layer renders the history
//! blocks (`EditStyle::Sweep`) and picks the window (lines around the cursor); a `\n` ends every
//! block that does not end in one. The old region is the canvas's draft: an autoregressive
//! model copying it commits a run of copies per forward pass (see the sampler's speculation).

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

/// `text` with a `\n` at its end if it has none, as Zed writes a file block.
fn block(text: &str) -> String {
    if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

impl SweepPieces {
    pub fn tokenize(
        tokenizer: &Tokenizer,
        file_sep: u32,
        prompt: &EditPrompt<'_>,
    ) -> Result<SweepPieces> {
        let header = |name: String| -> Result<Vec<u32>> {
            let mut tokens = vec![file_sep];
            tokens.extend(tokenizer.encode(&format!("{name}\n"))?);
            Ok(tokens)
        };
        let path = prompt.path;
        let file_text = format!("{}{}{}", prompt.before, prompt.region, prompt.after);
        let mut windows = header(format!("original/{path}"))?;
        windows.extend(tokenizer.encode(&block(prompt.original))?);
        windows.extend(header(format!("current/{path}"))?);
        windows.extend(tokenizer.encode(&block(prompt.region))?);
        windows.extend(header(format!("updated/{path}"))?);
        let history = prompt
            .history
            .iter()
            .map(|text| {
                let mut tokens = vec![file_sep];
                tokens.extend(tokenizer.encode(&block(text))?);
                Ok(tokens)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SweepPieces {
            file_header: header(path.to_string())?,
            before: tokenizer.encode(prompt.before)?,
            region: tokenizer.encode(prompt.region)?,
            after: tokenizer.encode(prompt.after)?,
            file_end: if file_text.ends_with('\n') || file_text.is_empty() {
                Vec::new()
            } else {
                tokenizer.encode("\n")?
            },
            history,
            windows,
            draft: tokenizer.encode(&block(prompt.region))?,
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
