//! The pipelines on the shipped model: what `prepare` plans is what `run` fills and `finish`
//! keeps, under the caller's limits.

use std::path::Path;

use redraft_context::edit::{EditBudget, HistoryEdit};
use redraft_context::{Language, Source};
use redraft_engine::sampler::{Controls, Effort, SamplerConfig};
use redraft_engine::tokenizer::Tokenizer;
use redraft_engine::ContextCache;
use redraft_engine::{Completion, Engine};
use redraft_suggest::edit::{apply, next_edit, EditInput};
use redraft_suggest::fim::{self, FimOptions};

fn engine() -> Engine {
    Engine::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model")).unwrap()
}

const TEXT: &str = "use std::collections::HashMap;\n\nfn count(words: &[&str]) -> HashMap<String, usize> {\n    let mut counts = HashMap::new();\n    for word in words {\n        \n    }\n    counts\n}\n";

fn source(text: &str) -> Source<'_> {
    let cursor = text.find("        \n").unwrap() + 8;
    Source {
        text,
        cursor,
        language: Language::Rust,
        tree: None,
    }
}

fn greedy() -> SamplerConfig {
    let mut sampler = SamplerConfig::effort(Effort::High);
    sampler.cache.enabled = false;
    sampler
}

#[test]
fn complete_is_prepare_run_finish() {
    let engine = engine();
    let options = FimOptions::new(24, greedy());
    let outcome = fim::complete(
        &engine,
        &source(TEXT),
        &[],
        &options,
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    let prepared = fim::prepare(&engine, &source(TEXT), &[], &options);
    assert_eq!(prepared.request.prefix, outcome.prepared.request.prefix);
    assert_eq!(prepared.lengths, vec![prepared.plan.canvas.tokens]);
    let completions = fim::run(
        &engine,
        &prepared,
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    assert_eq!(completions[0].middle, outcome.completions[0].middle);
    let finished = fim::finish(engine.tokenizer(), &prepared, &completions);
    assert_eq!(finished.texts, outcome.texts);
    assert_eq!(finished.judged, outcome.judged);
    // The request is the text around the cursor.
    assert!(TEXT[..source(TEXT).cursor].ends_with(&prepared.request.prefix));
    assert!(TEXT[source(TEXT).cursor..].starts_with(&prepared.request.suffix));
}

#[test]
fn candidates_are_distinct_lengths_in_one_batch() {
    let engine = engine();
    let options = FimOptions {
        candidates: 3,
        ..FimOptions::new(24, greedy())
    };
    let outcome = fim::complete(
        &engine,
        &source(TEXT),
        &[],
        &options,
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    let lengths = &outcome.prepared.lengths;
    assert_eq!(lengths.len(), 3);
    assert_eq!(outcome.completions.len(), 3);
    assert!(lengths.iter().all(|&l| (1..=24).contains(&l)));
    // Duplicates are dropped, so there are at most as many texts as lengths, none repeated.
    assert!(outcome.texts.len() <= 3);
    for (i, text) in outcome.texts.iter().enumerate() {
        assert!(!outcome.texts[i + 1..].contains(text));
    }
}

/// A suggestion's confidence is the lowest probability among the tokens of what is shown:
/// what `finish` cut off after it does not count, nor do carriage returns the document's line
/// endings put in.
#[test]
fn the_confidence_of_a_suggestion_is_its_least_sure_shown_token() {
    let engine = engine();
    let tokenizer = engine.tokenizer();
    let shown_part = "let total = count + 1;";
    let middle = format!("{shown_part}\n}} zzz qqq");
    // The shown tokens at 0.9 but the second at 0.6; everything after them at 0.01.
    let completion = written(tokenizer, &middle, |i, start, _| match i {
        _ if start >= shown_part.len() => 0.01,
        1 => 0.6,
        _ => 0.9,
    });
    let inside = completion
        .probabilities
        .iter()
        .filter(|&&p| p > 0.01)
        .count();
    assert!(inside > 2 && inside < completion.tokens.len());
    assert_eq!(
        fim::confidence(tokenizer, &completion, shown_part),
        Some(0.6)
    );
    // The whole middle shown: its last tokens count.
    assert_eq!(fim::confidence(tokenizer, &completion, &middle), Some(0.01));
    // A document with CRLF line endings is shown the middle's lines with them: the last token
    // of the shown lines at 0.5.
    let shown_lines = "let a = 1;\nlet b = 2;";
    let last_shown = tokenizer
        .encode(shown_lines)
        .unwrap()
        .len()
        .saturating_sub(1);
    let completion = written(tokenizer, &format!("{shown_lines}\nzzz"), |i, start, _| {
        if start >= shown_lines.len() {
            0.01
        } else if i == last_shown {
            0.5
        } else {
            0.9
        }
    });
    assert_eq!(
        fim::confidence(tokenizer, &completion, "let a = 1;\r\nlet b = 2;"),
        Some(0.5)
    );
    // A character the tokens spell in pieces: the pieces are shown, so they count.
    let shown_part = "let s = \"é\";";
    let ascii = |t: u32| tokenizer.decode(&[t]).unwrap().is_ascii();
    let accented = written(
        tokenizer,
        &format!("{shown_part}\nzzz"),
        |_, start, token| {
            if start >= shown_part.len() {
                0.01
            } else if ascii(token) {
                0.9
            } else {
                0.4
            }
        },
    );
    assert!(accented.tokens.iter().any(|&t| !ascii(t)));
    assert_eq!(fim::confidence(tokenizer, &accented, shown_part), Some(0.4));
    // Without probabilities (another process's middle), no confidence.
    let bare = Completion {
        probabilities: Vec::new(),
        ..completion
    };
    assert_eq!(fim::confidence(tokenizer, &bare, "let a = 1;"), None);
}

/// `middle` as the engine would have written it, token `i` (starting at byte `start`)
/// committed at `probability(i, start, token)`.
fn written(
    tokenizer: &Tokenizer,
    middle: &str,
    probability: impl Fn(usize, usize, u32) -> f32,
) -> Completion {
    let tokens = tokenizer.encode(middle).unwrap();
    let probabilities = (0..tokens.len())
        .map(|i| {
            let start = tokenizer.decode(&tokens[..i]).unwrap().len();
            probability(i, start, tokens[i])
        })
        .collect();
    Completion {
        middle: middle.into(),
        tokens,
        probabilities,
        ..Completion::default()
    }
}

/// The bar: the caller's, else the model's (the fixture states none: 0); a suggestion below it
/// is judged unsure and not shown, one at it is.
#[test]
fn an_inline_completion_the_model_is_unsure_of_is_not_shown() {
    let engine = engine();
    let options = |bar| FimOptions {
        min_confidence: bar,
        ..FimOptions::new(24, greedy())
    };
    let prepared = fim::prepare(&engine, &source(TEXT), &[], &options(None));
    assert_eq!(prepared.min_confidence, 0.0, "the fixture states no bar");
    assert_eq!(
        fim::prepare(&engine, &source(TEXT), &[], &options(Some(0.4))).min_confidence,
        0.4
    );
    let outcome = fim::complete(
        &engine,
        &source(TEXT),
        &[],
        &options(None),
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    let judged = &outcome.judged[0];
    let text = judged
        .text
        .clone()
        .expect("the fixture suggests something here");
    let confidence = judged
        .confidence
        .expect("the engine's middle has probabilities");
    assert!(confidence > 0.0 && confidence <= 1.0, "{confidence}");
    assert!(!judged.unsure);
    assert_eq!(outcome.texts, std::slice::from_ref(&text));
    let at = |bar: f32| {
        let mut prepared = outcome.prepared.clone();
        prepared.min_confidence = bar;
        fim::finish(engine.tokenizer(), &prepared, &outcome.completions)
    };
    assert_eq!(
        at(confidence).texts,
        [text],
        "a suggestion at the bar is shown"
    );
    // The fixture is far from sure here, so a bar above it exists.
    assert!(confidence < 0.9, "{confidence}");
    let above = at(confidence + (1.0 - confidence) / 2.0);
    assert!(above.texts.is_empty(), "{above:?}");
    assert!(above.judged[0].unsure);
    assert_eq!(above.judged[0].shown(), None);
    assert_eq!(above.judged[0].confidence, Some(confidence));
}

#[test]
fn a_fixed_length_and_a_context_cap_are_kept() {
    let engine = engine();
    let long = format!(
        "{}{TEXT}{}",
        "// filler line\n".repeat(200),
        "// after\n".repeat(200)
    );
    let options = FimOptions {
        fixed_length: Some(5),
        context_tokens: Some(40),
        ..FimOptions::new(24, greedy())
    };
    let prepared = fim::prepare(&engine, &source(&long), &[], &options);
    assert_eq!(prepared.plan.canvas.tokens, 5);
    assert_eq!(prepared.request.max_tokens, 5);
    assert_eq!(prepared.lengths, vec![5]);
    assert!(
        prepared.plan.prefix_tokens + prepared.plan.suffix_tokens <= 40,
        "{} + {} context tokens",
        prepared.plan.prefix_tokens,
        prepared.plan.suffix_tokens
    );
    let uncapped = fim::prepare(&engine, &source(&long), &[], &FimOptions::new(24, greedy()));
    assert!(uncapped.plan.prefix_tokens + uncapped.plan.suffix_tokens > 40);
}

/// A `max_tokens` as large as the model's window (an HTTP client's 2048, `--max-tokens 256`
/// on the 256-position default) does not take the context's positions: the plan's largest
/// canvas is a quarter of them, and the prefix the same as under that cap.
#[test]
fn a_large_max_tokens_leaves_the_context_its_positions() {
    let engine = engine();
    let positions = engine.model().config().max_position_embeddings;
    let longest = fim::longest_middle(positions);
    assert_eq!(longest, positions / 4);
    let long = format!("{}{TEXT}", "// filler line\n".repeat(400));
    let capped = fim::prepare(
        &engine,
        &source(&long),
        &[],
        &FimOptions::new(longest, greedy()),
    );
    for asked in [longest + 1, positions, 2048] {
        let prepared = fim::prepare(
            &engine,
            &source(&long),
            &[],
            &FimOptions::new(asked, greedy()),
        );
        assert_eq!(
            prepared.budget.max_canvas_tokens, longest,
            "max_tokens {asked}"
        );
        assert!(prepared.request.max_tokens <= longest, "max_tokens {asked}");
        assert_eq!(
            prepared.plan.prefix, capped.plan.prefix,
            "max_tokens {asked}"
        );
        assert_eq!(
            fim::budget(&engine, &FimOptions::new(asked, greedy())),
            capped.budget
        );
    }
    assert!(
        capped.plan.prefix_tokens >= positions / 2,
        "{}",
        capped.plan.prefix_tokens
    );
    // A length the caller fixes is its own business.
    let fixed = FimOptions {
        fixed_length: Some(longest + 8),
        ..FimOptions::new(longest + 8, greedy())
    };
    let prepared = fim::prepare(&engine, &source(&long), &[], &fixed);
    assert_eq!(prepared.plan.canvas.tokens, longest + 8);
}

/// Where the suffix is short, the plan gives its unused share to the prefix, and the engine
/// keeps all the plan chose: it does not cut the prefix window back to the budget's share.
#[test]
fn the_engine_keeps_the_windows_the_plan_chose() {
    let engine = engine();
    let long_before = format!("{}{TEXT}", "// filler line\n".repeat(400));
    let prepared = fim::prepare(
        &engine,
        &source(&long_before),
        &[],
        &FimOptions::new(24, greedy()),
    );
    assert!(
        prepared.plan.prefix_tokens > prepared.budget.prefix_tokens,
        "the prefix took the suffix's unused share: {} of {}",
        prepared.plan.prefix_tokens,
        prepared.budget.prefix_tokens
    );
    let canvas = engine.canvas(&prepared.request).unwrap();
    let layout = engine.layout();
    let prefix = engine.tokenizer().encode(&prepared.plan.prefix).unwrap();
    let suffix = engine.tokenizer().encode(&prepared.plan.suffix).unwrap();
    let markers = layout.added_tokens();
    assert_eq!(
        canvas.prefix.len() + canvas.suffix.len(),
        prefix.len() + suffix.len() + markers,
        "every token of both windows is in the canvas"
    );
}

/// A cursor line too long for the context budget is cut by bytes, and text of about a token a
/// byte then measures more tokens than the budget: the engine keeps the budget's shares, the
/// context the caller asked for (`contextTokens`), not what the plan measured.
#[test]
fn a_cursor_line_longer_than_the_budget_keeps_the_asked_context() {
    let engine = engine();
    let line = "字".repeat(3000);
    let text = format!("fn f() {{\n    let s = \"{line}\";\n}}\n");
    let cursor = text.find("字").unwrap() + "字".len() * 1500;
    let source = Source {
        text: &text,
        cursor,
        language: Language::Rust,
        tree: None,
    };
    let options = FimOptions {
        context_tokens: Some(64),
        ..FimOptions::new(24, greedy())
    };
    let prepared = fim::prepare(&engine, &source, &[], &options);
    let budget = &prepared.budget;
    assert!(
        prepared.plan.prefix_tokens + prepared.plan.suffix_tokens
            > budget.prefix_tokens + budget.suffix_tokens,
        "the plan measured more than the budget: {:?}",
        (prepared.plan.prefix_tokens, prepared.plan.suffix_tokens)
    );
    assert_eq!(
        (
            prepared.request.max_prefix_tokens,
            prepared.request.max_suffix_tokens
        ),
        (
            budget.prefix_tokens + budget.neighbour_tokens,
            budget.suffix_tokens
        )
    );
}

#[test]
fn a_next_edit_applies_inside_the_region_or_is_no_edit() {
    let engine = engine();
    let history = [HistoryEdit {
        path: "src/count.rs".into(),
        old: "fn count(words: &[&str]) -> HashMap<String, usize> {\n".into(),
        new: "fn count(items: &[&str]) -> HashMap<String, usize> {\n".into(),
    }];
    let text = TEXT.replace("count(words", "count(items");
    let mut sampler = greedy();
    sampler.draft_tau = Some(redraft_suggest::edit::DRAFT_TAU);
    let input = EditInput {
        source: source(&text),
        path: "src/count.rs",
        history: &history,
    };
    // Unguarded, the rewrite is whatever the model wrote for the region.
    let unguarded = EditBudget {
        max_changed_fraction: 1.0,
        ..EditBudget::default()
    };
    let outcome = next_edit(
        &engine,
        &input,
        &unguarded,
        sampler.clone(),
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    let region = outcome.plan.region_range.clone();
    // The region keeps its final newline (a rewrite is lines).
    let mut new_region = outcome.new_region.clone();
    if text[region.clone()].ends_with('\n') && !new_region.ends_with('\n') {
        new_region.push('\n');
    }
    let rewritten = format!(
        "{}{new_region}{}",
        &text[..region.start],
        &text[region.end..]
    );
    assert_eq!(apply(&text, &outcome.suggestion), rewritten);
    assert!(!outcome.rewrote_too_much);
    for edit in &outcome.suggestion.edits {
        assert!(region.start <= edit.range.start && edit.range.end <= region.end);
    }
    // A guard that allows no change turns any rewrite into no edit.
    let strict = EditBudget {
        max_changed_fraction: 0.0,
        ..EditBudget::default()
    };
    let guarded = next_edit(
        &engine,
        &input,
        &strict,
        sampler,
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    assert_eq!(guarded.new_region, outcome.new_region);
    assert_eq!(
        guarded.rewrote_too_much,
        !outcome.suggestion.edits.is_empty()
    );
    assert!(guarded.suggestion.edits.is_empty());
    assert_eq!(apply(&text, &guarded.suggestion), text);
}

/// A next edit with the cursor in a megabyte line (minified code): the region is that line,
/// more tokens than the model has positions, and the request is refused saying so; the line is
/// counted only as far as the positions go (`Tokenizer::count_up_to`: a head of it, not its
/// ~300k tokens, which took seconds on the thread that runs the model).
#[test]
fn a_region_past_the_models_positions_is_refused_unencoded() {
    let engine = engine();
    let positions = engine.model().config().max_position_embeddings;
    let unit = "function b(c){return c+1};var x=[1,2,3].map(function(d){return d*2});";
    let line = unit.repeat(1 << 14);
    let text = format!("// a bundle\n{line}\n");
    let tokenizer = engine.tokenizer();
    let counted = tokenizer.count_up_to(&line, positions).unwrap();
    assert!(
        counted > positions && counted < 16 * positions,
        "{counted} tokens counted for a budget of {positions}"
    );
    let small = "let x = [1, 2, 3];\n";
    assert_eq!(
        tokenizer.count_up_to(small, positions).unwrap(),
        tokenizer.encode(small).unwrap().len()
    );
    let input = EditInput {
        source: Source {
            text: &text,
            cursor: text.len() / 2,
            language: Language::Plain,
            tree: None,
        },
        path: "bundle.min.js",
        history: &[],
    };
    let prepared =
        redraft_suggest::edit::prepare(&engine, &input, &EditBudget::default(), greedy());
    assert_eq!(prepared.plan.region, format!("{line}\n"));
    assert!(prepared.old_tokens.is_empty());
    // The guard's longest rewrite, from the count of the region's head.
    let region = tokenizer
        .count_up_to(&prepared.plan.region, positions)
        .unwrap();
    assert_eq!(
        prepared.request.max_tokens,
        Some((region as f64 * 1.5).ceil() as usize + 8)
    );
    let error = engine
        .edit_canvas(&prepared.request)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!(
            "the editable region ({} bytes) is more tokens than the model's {positions} positions",
            prepared.plan.region.len()
        )) && error.contains("choose a smaller region (this one is the cursor's line alone"),
        "{error}"
    );
}

/// A batch-run next edit (prepare, then the engine's batch, then finish) suggests what the
/// whole pipeline does.
/// A next-edit request run alone through a batch, as the servers' schedulers run it.
fn batched_edit(
    engine: &Engine,
    request: &redraft_engine::EditRequest,
) -> redraft_engine::Completion {
    let mut batch = engine.batch(greedy().cache);
    batch
        .join_edit(request, redraft_engine::sampler::MemberControls::default())
        .unwrap();
    let mut done = Vec::new();
    while !batch.is_empty() {
        done.extend(batch.step().unwrap());
    }
    done.pop().unwrap().1.unwrap()
}

#[test]
fn a_next_edit_prepared_and_finished_around_a_batch_equals_the_pipeline() {
    use redraft_suggest::edit::{finish, prepare};
    let engine = engine();
    let history = [HistoryEdit {
        path: "src/count.rs".into(),
        old: "    let mut counts = HashMap::new();\n".into(),
        new: "    let mut tally = HashMap::new();\n".into(),
    }];
    let text = TEXT.replace("let mut counts", "let mut tally");
    let input = EditInput {
        source: source(&text),
        path: "src/count.rs",
        history: &history,
    };
    let budget = EditBudget {
        max_changed_fraction: 1.0,
        ..EditBudget::default()
    };
    let whole = next_edit(
        &engine,
        &input,
        &budget,
        greedy(),
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let prepared = prepare(&engine, &input, &budget, greedy());
    let completion = batched_edit(&engine, &prepared.request);
    let outcome = finish(&input, prepared, completion, &budget, started);
    assert_eq!(outcome.new_region, whole.new_region);
    assert_eq!(outcome.suggestion, whole.suggestion);
    assert_eq!(outcome.plan.region_range, whole.plan.region_range);
}

/// A rewrite is kept only when the model was sure enough of what it changes: the least
/// probable changed token against the bar (the budget's, else the model's own, 0 for the
/// fixture); the engine reports a probability for every token it wrote.
#[test]
fn a_rewrite_the_model_is_unsure_of_is_no_edit() {
    use redraft_suggest::edit::{finish, prepare};
    let engine = engine();
    let input = EditInput {
        source: source(TEXT),
        path: "src/count.rs",
        history: &[],
    };
    let budget = |bar| EditBudget {
        max_changed_fraction: 1.0,
        min_confidence: bar,
        ..EditBudget::default()
    };
    let prepared = prepare(&engine, &input, &budget(None), greedy());
    assert_eq!(prepared.min_confidence, 0.0, "the fixture states no bar");
    assert_eq!(
        prepare(&engine, &input, &budget(Some(0.4)), greedy()).min_confidence,
        0.4
    );
    let written = batched_edit(&engine, &prepared.request);
    assert_eq!(written.probabilities.len(), written.tokens.len());
    assert!(written
        .probabilities
        .iter()
        .all(|p| *p > 0.0 && *p <= 1.0 + 1e-6));
    // What the engine makes of a rewrite that renames `word` (its new tokens: probability 0.3),
    // the rest copied surely (0.9).
    let tokenizer = engine.tokenizer();
    let old = tokenizer.encode(&prepared.plan.region).unwrap();
    assert_eq!(prepared.old_tokens, old);
    assert_eq!(old, engine.edit_canvas(&prepared.request).unwrap().draft);
    let renamed = prepared
        .plan
        .region
        .replace("word in words", "item in items");
    assert_ne!(renamed, prepared.plan.region, "the region holds the loop");
    let new = tokenizer.encode(&renamed).unwrap();
    let differ = |j: usize| !old.contains(&new[j]);
    let probabilities: Vec<f32> = (0..new.len())
        .map(|j| if differ(j) { 0.3 } else { 0.9 })
        .collect();
    let outcome = |bar| {
        let prepared = prepare(&engine, &input, &budget(bar), greedy());
        let mut completion = written.clone();
        completion.middle = renamed.clone();
        completion.tokens = new.clone();
        completion.probabilities = probabilities.clone();
        completion.ended_by_eos = true;
        finish(
            &input,
            prepared,
            completion,
            &budget(bar),
            std::time::Instant::now(),
        )
    };
    let kept = outcome(Some(0.25));
    assert!(!kept.suggestion.is_empty() && !kept.unsure);
    assert!(
        (kept.confidence.unwrap() - 0.3).abs() < 1e-6,
        "{:?}",
        kept.confidence
    );
    let withheld = outcome(Some(0.5));
    assert!(withheld.suggestion.is_empty() && withheld.unsure);
    assert_eq!(
        withheld.new_region, renamed,
        "what the model wrote is still reported"
    );
    assert!(
        !outcome(None).unsure,
        "the fixture's own bar, 0, withholds nothing"
    );
}

/// A rewrite whose bytes stopped being UTF-8 half-way (`Completion::invalid_text`: the middle
/// ends before them) is no edit, not a rewrite that deletes the rest of the region.
#[test]
fn a_rewrite_whose_bytes_stop_being_text_is_no_edit() {
    use redraft_suggest::edit::{finish, prepare};
    let engine = engine();
    let input = EditInput {
        source: source(TEXT),
        path: "src/count.rs",
        history: &[],
    };
    let budget = EditBudget {
        max_changed_fraction: 1.0,
        ..EditBudget::default()
    };
    let prepared = prepare(&engine, &input, &budget, greedy());
    let mut completion = batched_edit(&engine, &prepared.request);
    // What the engine makes of a copy of the region whose second half went wrong byte-wise.
    let region = prepared.plan.region.clone();
    let half = (0..=region.len() / 2)
        .rev()
        .find(|&at| region.is_char_boundary(at))
        .unwrap();
    completion.middle = region[..half].to_string();
    completion.invalid_text = true;
    let outcome = finish(
        &input,
        prepared,
        completion,
        &budget,
        std::time::Instant::now(),
    );
    assert!(outcome.rewrote_too_much);
    assert!(
        outcome.suggestion.edits.is_empty(),
        "{:?}",
        outcome.suggestion
    );
    assert_eq!(apply(TEXT, &outcome.suggestion), TEXT);
}

/// The stop rule `fim::run` applies (a canvas ends once its committed lead decides the finished
/// suggestion) never changes a finished suggestion, and saves passes: at many cursors of real
/// code, at each effort, with the shipped model (bidirectional) and the same weights attending
/// causally (decoded left to right, where the lead grows every step).
#[test]
fn stopping_at_a_decided_lead_changes_no_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(shipped.join(file), dir.path().join(file)).unwrap();
    }
    std::fs::write(
        dir.path().join("redraft.json"),
        r#"{"eos_token_id": 1, "mask_token_id": 0, "pad_token_id": 1, "logit_shift": true, "attention": "causal"}"#,
    )
    .unwrap();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src/tokenizer.rs"),
    )
    .unwrap();
    let never = |_: &[u32]| false;
    let (mut with, mut without, mut stopped) = (0, 0, 0);
    for engine in [engine(), Engine::load(dir.path()).unwrap()] {
        for effort in [Effort::Low, Effort::High] {
            let options = FimOptions::new(24, SamplerConfig::effort(effort));
            // Mid-line and line-start cursors through the file.
            for cursor in (200..text.len().min(4200)).step_by(97) {
                let cursor = (cursor..).find(|&c| text.is_char_boundary(c)).unwrap();
                let source = Source {
                    text: &text,
                    cursor,
                    language: Language::Rust,
                    tree: None,
                };
                let run = |controls| {
                    fim::complete(
                        &engine,
                        &source,
                        &[],
                        &options,
                        &mut ContextCache::default(),
                        controls,
                    )
                    .unwrap()
                };
                let stopping = run(Controls::default());
                let full = run(Controls {
                    stop: Some(&never),
                    ..Controls::default()
                });
                assert_eq!(stopping.texts, full.texts, "cursor {cursor}, {effort:?}");
                with += stopping.completions[0].forwards;
                without += full.completions[0].forwards;
                stopped += usize::from(stopping.completions[0].steps < full.completions[0].steps);
            }
        }
    }
    assert!(
        stopped > 0 && with < without,
        "{stopped} stopped early; {with} passes against {without}"
    );
}

/// The default model's files as an autoregressive checkpoint without redraft's edit markers
/// (the vocabulary keeps `<|file_sep|>`): how Qwen2.5-Coder and the Sweep Next-Edit models
/// built on it look to the engine.
fn sweep_engine() -> (tempfile::TempDir, Engine) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/small-model");
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        from.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    // Room for a window shown three times (positions past the trained 256 are only RoPE
    // angles; this is about the layout, not the quality).
    let config = std::fs::read_to_string(from.join("config.json"))
        .unwrap()
        .replace(
            "\"max_position_embeddings\": 256",
            "\"max_position_embeddings\": 2048",
        );
    assert!(config.contains("2048"));
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let tokenizer = std::fs::read_to_string(from.join("tokenizer.json"))
        .unwrap()
        .replace("<|edit_start|>", "<|unused_0|>")
        .replace("<|edit_end|>", "<|unused_1|>")
        .replace("<|cursor|>", "<|unused_2|>");
    std::fs::write(dir.path().join("tokenizer.json"), tokenizer).unwrap();
    let redraft = r#"{"eos_token_id": 1, "pad_token_id": 1, "mask_token_id": 0,
        "logit_shift": true, "attention": "causal"}"#;
    std::fs::write(dir.path().join("redraft.json"), redraft).unwrap();
    let engine = Engine::load(dir.path()).unwrap();
    (dir, engine)
}

#[test]
fn a_sweep_checkpoint_compares_a_rewrite_with_the_block_its_canvas_shows() {
    use redraft_suggest::edit::prepare;
    let (_dir, engine) = sweep_engine();
    // The region is the last lines of a text without a final newline: a Sweep canvas shows it
    // as a block, newline added, and that is what a rewrite is told apart from.
    let text = TEXT.trim_end_matches('\n');
    let input = EditInput {
        source: Source {
            cursor: text.len() - 1,
            ..source(text)
        },
        path: "src/count.rs",
        history: &[],
    };
    let prepared = prepare(&engine, &input, &EditBudget::default(), greedy());
    assert!(
        !prepared.plan.region.ends_with('\n'),
        "{:?}",
        prepared.plan.region
    );
    let draft = engine.edit_canvas(&prepared.request).unwrap().draft;
    assert_eq!(prepared.old_tokens, draft);
    assert_ne!(
        draft,
        engine.tokenizer().encode(&prepared.plan.region).unwrap()
    );
}

/// A checkpoint that reads Sweep's prompt gets Sweep's window and history from the same
/// pipeline, and its rewrite of the window becomes edits inside it.
#[test]
fn a_sweep_checkpoint_gets_a_sweep_plan_through_the_same_pipeline() {
    use redraft_context::edit::EditStyle;
    use redraft_suggest::edit::prepare;
    let (_dir, engine) = sweep_engine();
    let history = [HistoryEdit {
        path: "src/count.rs".into(),
        old: "fn count(words: &[&str]) -> HashMap<String, usize> {\n".into(),
        new: "fn count(items: &[&str]) -> HashMap<String, usize> {\n".into(),
    }];
    // Enough lines that the window is not the whole text, short enough that 21 of them fit
    // the default model's 512 positions three times over.
    let filler = "//\n".repeat(30);
    let text = format!(
        "{filler}{}{filler}",
        TEXT.replace("count(words", "count(items")
    );
    let input = EditInput {
        source: source(&text),
        path: "src/count.rs",
        history: &history,
    };
    let mut sampler = greedy();
    sampler.draft_tau = Some(redraft_suggest::edit::DRAFT_TAU);
    let budget = EditBudget {
        max_changed_fraction: 1.0,
        ..EditBudget::default()
    };
    let prepared = prepare(&engine, &input, &budget, sampler.clone());
    let plan = &prepared.plan;
    assert_eq!(
        prepared.request.max_tokens, None,
        "no guard, the engine's limit"
    );
    // A rewrite is told apart from the draft the canvas holds.
    assert_eq!(
        prepared.old_tokens,
        engine.edit_canvas(&prepared.request).unwrap().draft
    );
    // Under the guard, a rewrite longer than the guard lets through is not decoded.
    let guarded = prepare(&engine, &input, &EditBudget::default(), sampler.clone());
    let region = engine
        .tokenizer()
        .encode(&guarded.plan.region)
        .unwrap()
        .len();
    assert_eq!(
        guarded.request.max_tokens,
        Some((region as f64 * 1.5).ceil() as usize + 8)
    );
    assert_eq!(plan.style, EditStyle::Sweep);
    assert_eq!(plan.region.lines().count(), 21, "{}", plan.region);
    assert_eq!(
        plan.history,
        ["src/count.rs.diff\noriginal:\nfn count(words: &[&str]) -> HashMap<String, usize> {\nupdated:\nfn count(items: &[&str]) -> HashMap<String, usize> {"]
    );
    assert_eq!(
        plan.original,
        plan.region.replace("count(items", "count(words"),
        "the window before the rename"
    );
    let outcome = next_edit(
        &engine,
        &input,
        &budget,
        sampler,
        &mut ContextCache::default(),
        Controls::default(),
    )
    .unwrap();
    let region = outcome.plan.region_range.clone();
    for edit in &outcome.suggestion.edits {
        assert!(region.start <= edit.range.start && edit.range.end <= region.end);
    }
}
