//! The held-out crates' code read on its own, for text the corpus did not read (the earlier
//! crate versions next-edit data is cut from): the same sources, selection and reading as
//! [`build`], indexed for the passage check.

use rayon::prelude::*;

use super::held_out_passages::{HeldOutPassages, SharedPassage};
use super::read::{read_crate, ReadFile};
use super::*;

/// The held-out crates' code: every `.rs` file of every version of them that a corpus's sources
/// hold (read as [`build`] reads them: the lockfile filter, no file filter), indexed for the
/// passage check [`build`] drops corpus files by (see `held_out_passages`). For text the corpus
/// did not read: the earlier crate versions next-edit data is cut from ([`crate::edits`]).
pub struct HeldOutCode {
    passages: HeldOutPassages,
    files: usize,
}

impl HeldOutCode {
    /// The held-out crates of `options`' sources, whole sources and lockfiles (its other
    /// fields are not read).
    pub fn read(options: &CorpusOptions) -> Result<HeldOutCode> {
        if options.sources.is_empty() && options.whole_sources.is_empty() {
            return Err(CorpusError::NoSources);
        }
        let locked = read_lockfiles(&options.lockfiles)?;
        let found = discover(&source_list(options))?;
        // Near-duplicate signatures are of no use here.
        let options = CorpusOptions {
            near_duplicate_jaccard: None,
            ..options.clone()
        };
        let (selected, _) = select(found, locked.as_ref(), &options)?;
        let mut held_out: Vec<SelectedCrate> = selected
            .into_iter()
            .filter(|krate| krate.owner == Owner::HeldOut)
            .collect();
        // The order `gather` reads them in, so a passage is named after the same file.
        held_out.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
        let nothing_yet = HeldOutPassages::new(HELD_OUT_PASSAGE_TOKENS, PASSAGE_DISTINCT_TOKENS);
        let read: Vec<Result<Vec<ReadFile>>> = held_out
            .par_iter()
            .map(|krate| read_crate(krate, &options, &nothing_yet))
            .collect();
        let mut code = HeldOutCode {
            passages: HeldOutPassages::new(HELD_OUT_PASSAGE_TOKENS, PASSAGE_DISTINCT_TOKENS),
            files: 0,
        };
        for (krate, files) in held_out.iter().zip(read) {
            for file in files? {
                if let Ok(kept) = file.verdict {
                    code.passages
                        .insert(held_out_source(krate, &file.relative), &kept.text);
                    code.files += 1;
                }
            }
        }
        Ok(code)
    }

    /// No held-out code: nothing shares a passage with it.
    pub fn none() -> HeldOutCode {
        HeldOutCode {
            passages: HeldOutPassages::new(HELD_OUT_PASSAGE_TOKENS, PASSAGE_DISTINCT_TOKENS),
            files: 0,
        }
    }

    /// Held-out files read.
    pub fn files(&self) -> usize {
        self.files
    }

    /// The longest run of held-out code in `text`, when it shares a passage with it (the rule
    /// [`build`] drops a corpus file by).
    pub fn shared_passage(&self, text: &str) -> Option<SharedPassage> {
        self.passages.find(text)
    }
}
