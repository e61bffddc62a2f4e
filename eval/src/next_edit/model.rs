//! The model arm of a next-edit run: each case goes through [`redraft_suggest::edit::next_edit`]
//! (plan -> engine -> edits), the pipeline the language server calls, with the case's excerpt
//! as the document, its cursor, and its history as [`HistoryEdit`]s; the suggestion's edits
//! applied to the excerpt are what is scored.

use std::path::Path;

use redraft_context::edit::{EditBudget, HistoryEdit};
use redraft_context::{Language, Source};
use redraft_engine::sampler::{Controls, SamplerConfig};
use redraft_engine::ContextCache;
use redraft_engine::Engine;

use super::case::NextEditCase;
use super::report::NextEditStats;
use super::run::{NextEditModel, Suggestion};
use crate::error::Result;
use redraft_suggest::edit::{apply, next_edit, EditInput};

/// The engine under one setting.
pub struct EngineModel<'a> {
    pub engine: &'a Engine,
    pub budget: EditBudget,
    pub sampler: SamplerConfig,
    /// The setting as the user wrote it (the table's column).
    pub setting: String,
    /// The model's fingerprint ([`crate::fingerprint`]): `of_path` of its directory, or
    /// `of_files` of the embedded model's files.
    pub fingerprint: String,
}

impl NextEditModel for EngineModel<'_> {
    fn setting(&self) -> String {
        self.setting.clone()
    }

    fn model(&self) -> String {
        self.engine.dir().display().to_string()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn suggest(&self, case: &NextEditCase) -> Result<Suggestion> {
        let history = case.history_edits();
        let input = EditInput {
            source: Source {
                text: &case.excerpt,
                cursor: case.cursor,
                language: Language::from_path(Path::new(&case.path)),
                tree: None,
            },
            path: &case.path,
            history: &history,
        };
        let outcome = next_edit(
            self.engine,
            &input,
            &self.budget,
            self.sampler.clone(),
            &mut ContextCache::default(),
            Controls::default(),
        )?;
        let completion = &outcome.completion;
        Ok(Suggestion {
            excerpt: apply(&case.excerpt, &outcome.suggestion),
            stats: NextEditStats {
                latency_ms: outcome.latency_ms,
                model_ms: completion.timings.model_ms,
                steps: completion.steps,
                forwards: completion.forwards,
                slots_per_forward: completion.tokens_per_forward,
                rewrite_tokens: completion.tokens.len(),
                confidence: outcome.confidence,
                unsure: outcome.unsure,
            },
        })
    }
}

impl NextEditCase {
    /// The history as the model reads it: every block's hunks, oldest first (blocks that do
    /// not parse were refused when the case was read).
    pub fn history_edits(&self) -> Vec<HistoryEdit> {
        self.history
            .iter()
            .filter_map(|block| block.patches().ok())
            .flatten()
            .flat_map(|patch| HistoryEdit::from_patch(&patch))
            .collect()
    }
}
