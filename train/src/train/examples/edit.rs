//! Next-edit examples: an [`EditCase`] planned by the context layer
//! ([`redraft_context::edit::plan_edit`]) and laid out by the engine
//! ([`redraft_engine::edit::EditLayout`]) exactly as a request in an editor is, the canvas being
//! the new region followed by EOS padding (long enough for the whole new region; the builder
//! cuts some that outgrow the engine's plan back to it, [`OUTGROWN_SHORT`]). A case without a
//! target ("no edit") teaches the model to write the region back unchanged.
//!
//! The region's line budget is drawn around the one requests use (a line or two more or less
//! above and below), so the model does not learn one region size; the rest of the layout is the
//! engine's.

use std::ops::Range;

use rand::rngs::StdRng;
use rand::Rng;
use redraft_context::edit::cut::EditCase;
use redraft_context::edit::{plan_edit, EditBudget, EditStyle};
use redraft_context::{Language, Source, TokenCounter};
use redraft_engine::edit::{canvas_length, EditMarkers, EditPieces, EditPrompt};
use redraft_engine::tokenizer::Tokenizer;

use super::super::TrainResult;

/// Share of next edits whose new region outgrows the canvas the engine plans for them
/// ([`canvas_length`] of the old region) that are laid out as the engine first sees them:
/// [`EditTokens::shorten_canvas`] to the plan's length or more (while `DataConfig::overflow` is
/// above 0).
pub const OUTGROWN_SHORT: f64 = 0.5;

/// Token counts for the context layer's budgets, from the tokenizer the model is trained with.
pub struct TokenizerCounter<'a>(pub &'a Tokenizer);

impl TokenCounter for TokenizerCounter<'_> {
    fn count_tokens(&self, text: &str) -> usize {
        self.0.encode(text).map_or(text.len(), |ids| ids.len())
    }
}

/// A laid-out next-edit example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditTokens {
    pub tokens: Vec<u32>,
    /// The canvas: the new region's tokens, then EOS (or, [`EditTokens::shorten_canvas`]d, its
    /// first tokens only).
    pub canvas: Range<usize>,
    /// Tokens of the new region the canvas holds.
    pub middle_len: usize,
    /// The case asks for no edit (the new region is the old one).
    pub no_edit: bool,
    /// The old region's tokens (the canvas's draft).
    pub draft: Vec<u32>,
}

impl EditTokens {
    /// The canvas planned too short: only the new region's first `keep` tokens (no EOS), the
    /// layout after the canvas unchanged. The engine plans an edit's canvas from the old
    /// region's length ([`canvas_length`]) and grows it when the model writes a token in the last
    /// slot, which an insertion longer than that plan needs; an example laid out for the whole
    /// new region never shows it.
    pub fn shorten_canvas(&mut self, keep: usize) {
        assert!(
            (1..=self.middle_len).contains(&keep),
            "keep {keep} of {}",
            self.middle_len
        );
        self.tokens.drain(self.canvas.start + keep..self.canvas.end);
        self.canvas.end = self.canvas.start + keep;
        self.middle_len = keep;
    }
}

/// `case` as a training sequence of at most `seq_len` tokens, or `None` when its target lies
/// outside the region the context layer chose, or the region is too long for `seq_len`.
pub fn edit_tokens(
    tokenizer: &Tokenizer,
    markers: EditMarkers,
    case: &EditCase,
    seq_len: usize,
    eos_id: u32,
    rng: &mut StdRng,
) -> TrainResult<Option<EditTokens>> {
    let defaults = EditBudget::default();
    let budget = EditBudget {
        lines_above: rng
            .random_range(defaults.lines_above.saturating_sub(2)..=defaults.lines_above + 1),
        lines_below: rng
            .random_range(defaults.lines_below.saturating_sub(4)..=defaults.lines_below + 2),
        ..defaults
    };
    let source = Source {
        text: &case.text,
        cursor: case.cursor,
        language: Language::from_path(std::path::Path::new(&case.path)),
        tree: None,
    };
    let counter = TokenizerCounter(tokenizer);
    let plan = plan_edit(
        &source,
        &case.path,
        &case.history,
        &budget,
        EditStyle::Redraft,
        &counter,
    );
    let region = plan.region_range.clone();
    let new_region = match &case.target {
        None => plan.region.clone(),
        Some(target) => {
            if target.range.start < region.start || target.range.end > region.end {
                return Ok(None);
            }
            let (a, b) = (
                target.range.start - region.start,
                target.range.end - region.start,
            );
            format!(
                "{}{}{}",
                &plan.region[..a],
                target.new_text,
                &plan.region[b..]
            )
        }
    };
    let prompt = EditPrompt {
        history: &plan.history,
        path: &case.path,
        before: &plan.before,
        region: &plan.region,
        original: &plan.original,
        cursor: plan.cursor_in_region,
        after: &plan.after,
    };
    let pieces = EditPieces::tokenize(tokenizer, markers, &prompt, seq_len)?;
    let new = tokenizer.encode(&new_region)?;
    let canvas_len = canvas_length(pieces.draft.len()).max((new.len() + 1).next_multiple_of(8));
    if canvas_len > seq_len / 2 {
        return Ok(None);
    }
    let layout = match pieces.fit(seq_len - canvas_len) {
        Ok(layout) => layout,
        // The region with its markers does not fit beside its canvas.
        Err(redraft_engine::Error::InvalidRequest(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let draft = layout.draft;
    let mut tokens = layout.prefix;
    let canvas = tokens.len()..tokens.len() + canvas_len;
    tokens.extend_from_slice(&new);
    tokens.resize(canvas.end, eos_id);
    tokens.extend_from_slice(&layout.suffix);
    Ok(Some(EditTokens {
        tokens,
        canvas,
        middle_len: new.len(),
        no_edit: case.target.is_none(),
        draft,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use rand::SeedableRng;
    use redraft_context::edit::{HistoryEdit, TextEdit};

    use super::*;
    use crate::train::tokens::train_tokenizer;
    use crate::train::EOS_ID;

    const TEXT: &str = "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n\nfn main() {\n    let width = 3;\n    let h = 4;\n    println!(\"{}\", area(w, h));\n}\n";

    fn tokenizer() -> Tokenizer {
        train_tokenizer(&[TEXT.repeat(4)], 300).unwrap()
    }

    fn case(target: Option<TextEdit>) -> EditCase {
        renamed_width(TEXT, target)
    }

    /// `text` (holding `let width = 3;`) just after `w` was renamed `width` there, the cursor
    /// at the end of the new name.
    pub(crate) fn renamed_width(text: &str, target: Option<TextEdit>) -> EditCase {
        EditCase {
            path: "src/main.rs".into(),
            text: text.into(),
            cursor: text.find("width = 3").unwrap() + "width".len(),
            history: vec![HistoryEdit {
                path: "src/main.rs".into(),
                old: "    let w = 3;\n".into(),
                new: "    let width = 3;\n".into(),
            }],
            target,
        }
    }

    fn tokens_of(case: &EditCase, seq_len: usize) -> Option<EditTokens> {
        let tokenizer = tokenizer();
        let markers = EditMarkers::of(&tokenizer).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        edit_tokens(&tokenizer, markers, case, seq_len, EOS_ID, &mut rng).unwrap()
    }

    /// The canvas holds the region with the target applied, then EOS; the old region sits
    /// between the markers just before it, with the cursor marker where the cursor is.
    #[test]
    fn the_canvas_is_the_new_region_after_the_marked_old_one() {
        let at = TEXT.find("area(w, h)").unwrap() + "area(".len();
        let target = TextEdit {
            range: at..at + 1,
            new_text: "width".into(),
        };
        let ex = tokens_of(&case(Some(target)), 512).expect("the target is in the region");
        let tokenizer = tokenizer();
        let markers = EditMarkers::of(&tokenizer).unwrap();
        assert!(!ex.no_edit);
        let canvas = &ex.tokens[ex.canvas.clone()];
        let (middle, padding) = canvas.split_at(ex.middle_len);
        assert!(!padding.is_empty() && padding.iter().all(|&t| t == EOS_ID));
        let new_region = tokenizer.decode(middle).unwrap();
        assert!(new_region.contains("area(width, h)"), "{new_region}");
        let before = &ex.tokens[..ex.canvas.start];
        assert_eq!(before.last(), Some(&markers.edit_end));
        let start = before
            .iter()
            .rposition(|&t| t == markers.edit_start)
            .unwrap();
        let old = &before[start + 1..before.len() - 1];
        let cursor = old.iter().position(|&t| t == markers.cursor).unwrap();
        let old_text = format!(
            "{}{}",
            tokenizer.decode(&old[..cursor]).unwrap(),
            tokenizer.decode(&old[cursor + 1..]).unwrap()
        );
        assert!(old_text.contains("area(w, h)"), "{old_text}");
        assert_eq!(
            old_text.replace("area(w, h)", "area(width, h)"),
            new_region,
            "the rewrite is the old region with the target applied"
        );
        assert!(tokenizer
            .decode(&old[..cursor])
            .unwrap()
            .ends_with("let width"));
        // The history comes first, the file header after it.
        let history = tokenizer.decode(&before[..start]).unwrap();
        assert!(history.contains("+    let width = 3;"), "{history}");
        assert!(ex.tokens.len() <= 512);
    }

    #[test]
    fn a_case_without_a_target_rewrites_the_region_unchanged() {
        let ex = tokens_of(&case(None), 512).unwrap();
        assert!(ex.no_edit);
        let tokenizer = tokenizer();
        let new_region = tokenizer
            .decode(&ex.tokens[ex.canvas.start..ex.canvas.start + ex.middle_len])
            .unwrap();
        assert!(TEXT.contains(&new_region) && new_region.contains("let h = 4;"));
    }

    #[test]
    fn targets_outside_the_region_and_regions_too_long_for_the_sequence_are_skipped() {
        let target = TextEdit {
            range: 3..7,
            new_text: "surface".into(),
        };
        assert_eq!(tokens_of(&case(Some(target)), 512), None);
        assert_eq!(tokens_of(&case(None), 24), None);
    }
}

#[cfg(test)]
mod builder_tests {
    use super::super::{DataConfig, ExampleBuilder, ExampleKind, Stream};
    use crate::train::tokens::{train_tokenizer, CorpusSplit};
    use crate::train::EOS_ID;
    use redraft_context::edit::cut::EditCase;
    use redraft_engine::edit::canvas_length;
    use redraft_engine::tokenizer::Tokenizer;

    /// A small file as the training split and one no-edit case in it.
    fn one_case() -> (Tokenizer, CorpusSplit, Vec<EditCase>) {
        let text =
            "fn main() {\n    let width = 3;\n    let h = 4;\n    println!(\"{}\", w * h);\n}\n";
        let tokenizer = train_tokenizer(&[text.repeat(8)], 300).unwrap();
        let split = CorpusSplit::from_texts(vec![text.repeat(6)], &tokenizer).unwrap();
        (
            tokenizer,
            split,
            vec![super::tests::renamed_width(text, None)],
        )
    }

    /// At an edit rate of one half, about half the examples are next edits, each masked only
    /// inside its canvas; with the rate at zero the stream is the one without edit cases.
    #[test]
    fn the_builder_mixes_in_next_edits_at_their_rate() {
        let (tokenizer, split, cases) = one_case();
        let mixed = DataConfig {
            seq_len: 256,
            edit_rate: 0.5,
            ..DataConfig::default()
        };
        let builder = ExampleBuilder::new(&split, &tokenizer, mixed.clone(), 1, Stream::Train)
            .with_edits(&cases)
            .unwrap();
        let examples = builder.batch(0, 64).unwrap();
        let edits = examples
            .iter()
            .filter(|e| matches!(e.kind, ExampleKind::Edit { no_edit: true }))
            .count();
        assert!((20..=44).contains(&edits), "{edits} of 64");
        for ex in &examples {
            assert!(ex.masked.iter().all(|p| ex.canvas.contains(p)));
            assert!(ex.tokens.len() <= 256);
        }
        let off = DataConfig {
            edit_rate: 0.0,
            ..mixed
        };
        let with = ExampleBuilder::new(&split, &tokenizer, off.clone(), 1, Stream::Train)
            .with_edits(&cases)
            .unwrap();
        let without = ExampleBuilder::new(&split, &tokenizer, off, 1, Stream::Train);
        assert_eq!(with.batch(3, 8).unwrap(), without.batch(3, 8).unwrap());
    }

    /// A next edit whose new region outgrows the canvas the engine plans (from the old region)
    /// is, half the time, laid out as the engine first sees it: the plan's length or more,
    /// filled with the new region's first tokens, no EOS, the layout after the canvas as it
    /// was. One that fits the plan is never shortened, nor anything at an `overflow` of 0.
    #[test]
    fn edits_outgrowing_the_engines_plan_are_laid_out_as_it_plans_them() {
        let (tokenizer, split, mut cases) = one_case();
        let text = cases[0].text.clone();
        let at = text.find("    println!").unwrap();
        let grown = super::tests::renamed_width(
            &text,
            Some(redraft_context::edit::TextEdit {
                range: at..at,
                new_text: "    let depth = 5;\n    let volume = width * h * depth;\n    \
                           println!(\"{}\", volume);\n"
                    .into(),
            }),
        );
        let examples = |cases: &[EditCase], overflow| {
            let config = DataConfig {
                seq_len: 1024,
                edit_rate: 1.0,
                overflow,
                // Only so each example carries its draft; the tokens are the same.
                edit_draft: true,
                ..DataConfig::default()
            };
            ExampleBuilder::new(&split, &tokenizer, config, 1, Stream::Train)
                .with_edits(cases)
                .unwrap()
                .batch(0, 200)
                .unwrap()
        };
        // The no-edit case fits its plan: never shortened.
        for ex in examples(&cases, 0.3) {
            assert_eq!(ex.tokens[ex.canvas.end - 1], EOS_ID);
        }
        cases[0] = grown;
        // One case: every whole example is the same layout.
        let whole = examples(&cases, 0.0);
        let full = &whole[0];
        for ex in &whole {
            assert_eq!(ex.tokens[ex.canvas.end - 1], EOS_ID);
            assert_eq!(ex.tokens, full.tokens);
        }
        // The engine's plan: from the old region tokenized whole (the draft `edit_draft` shows).
        let planned = canvas_length(full.draft.len());
        assert!(
            full.middle_len >= planned,
            "{} fits {planned}",
            full.middle_len
        );
        let mut short = 0;
        for ex in &examples(&cases, 0.1) {
            if ex.tokens == full.tokens {
                continue;
            }
            short += 1;
            let canvas = &ex.tokens[ex.canvas.clone()];
            assert!(!canvas.contains(&EOS_ID));
            assert_eq!(canvas.len(), ex.middle_len);
            assert!((planned..=full.middle_len).contains(&ex.middle_len));
            assert_eq!(ex.tokens[..ex.canvas.end], full.tokens[..ex.canvas.end]);
            assert_eq!(ex.tokens[ex.canvas.end..], full.tokens[full.canvas.end..]);
            assert!(ex.masked.iter().all(|p| ex.canvas.contains(p)));
        }
        assert!((70..=130).contains(&short), "{short} of 200");
    }

    /// Under `edit_draft` a next edit's masked slots show the old region's token at that slot
    /// (the mask past its end) and nothing else changes; without it they show the mask.
    #[test]
    fn edit_draft_shows_the_old_region_at_masked_slots() {
        use super::super::super::MASK_ID;
        let (tokenizer, split, cases) = one_case();
        let config = |edit_draft| DataConfig {
            seq_len: 256,
            edit_rate: 1.0,
            edit_draft,
            ..DataConfig::default()
        };
        let batch = |edit_draft| {
            ExampleBuilder::new(&split, &tokenizer, config(edit_draft), 1, Stream::Train)
                .with_edits(&cases)
                .unwrap()
                .batch(0, 8)
                .unwrap()
        };
        let (drafted, masked) = (batch(true), batch(false));
        for (d, m) in drafted.iter().zip(&masked) {
            assert_eq!((&d.tokens, &d.masked, d.t), (&m.tokens, &m.masked, m.t));
            assert!(m.draft.is_empty());
            assert!(!d.draft.is_empty() && d.draft.len() < d.canvas.len());
            let (input, plain) = (d.input(MASK_ID), m.input(MASK_ID));
            for &p in &d.masked {
                assert_eq!(plain[p], MASK_ID);
                let slot = p - d.canvas.start;
                let shown = d.draft.get(slot).copied().unwrap_or(MASK_ID);
                assert_eq!(input[p], shown, "slot {slot}");
            }
            // A no-edit case's draft is its target: what is shown at a masked slot is the answer.
            let slots = d.draft.len().min(d.canvas.len());
            assert_eq!(
                d.draft[..slots],
                d.tokens[d.canvas.start..d.canvas.start + slots]
            );
        }
    }
}
