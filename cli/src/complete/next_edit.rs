//! `redraft complete --next-edit`: one next-edit suggestion from the command line, through the
//! same pipeline as the eval and the language server (`redraft_suggest::edit`).

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context};
use redraft_context::edit::{parse_patches, unified_diff, HistoryEdit};
use redraft_context::{Language, Source};
use redraft_engine::ContextCache;
use redraft_suggest::edit::{apply, next_edit, EditInput};
use serde::Serialize;

use super::{
    cursor_offset, language_of_file, print_out, read_text, read_text_and_bom, stderr_line,
    with_controls, Args, BOM,
};

/// The request: a document, its name, the cursor and the recent edits as a unified diff.
struct Request {
    /// The document's text, without the byte order mark its file may start with.
    text: String,
    path: String,
    cursor: usize,
    history: String,
    /// The file started with a byte order mark ([`BOM`]), dropped from `text`.
    bom: bool,
    /// The language the request names, over the one `path`'s extension says (a notebook's
    /// `.ipynb` holds Python, or Rust).
    language: Option<Language>,
}

fn request(args: &Args) -> anyhow::Result<Request> {
    if args.stdin_json {
        #[derive(serde::Deserialize)]
        struct Json {
            text: String,
            /// Byte offset of the cursor.
            cursor: usize,
            #[serde(default)]
            path: String,
            /// Unified diffs of the recent edits, oldest first.
            #[serde(default)]
            history: String,
            /// An LSP language id.
            language: Option<String>,
        }
        let json: Json =
            super::read_stdin_json(&["text", "cursor", "path", "history", "language"]).context(
                "stdin must hold {\"text\": \"...\", \"cursor\": BYTE, \"path\": \"...\", \"history\": \"unified diff\", \"language\": \"rust\"}",
            )?;
        if json.cursor > json.text.len() {
            bail!(
                "cursor {} is past the end of the {}-byte text (the cursor is a byte offset, \
                 from 0 to the text's length)",
                json.cursor,
                json.text.len()
            );
        }
        if !json.text.is_char_boundary(json.cursor) {
            bail!(
                "cursor {} is not a character boundary of the {}-byte text",
                json.cursor,
                json.text.len()
            );
        }
        return Ok(Request {
            text: json.text,
            path: json.path,
            cursor: json.cursor,
            history: json.history,
            bom: false,
            language: json.language.as_deref().map(super::language_of_id),
        });
    }
    let Some(file) = &args.file else {
        bail!("say where the cursor is: --file F --line L --column C [--history H.diff], or --stdin-json");
    };
    let (text, bom) = read_text_and_bom(file)?;
    let (line, column) = (args.line.unwrap_or(1), args.column.unwrap_or(1));
    let cursor = cursor_offset(&text, line, column)
        .with_context(|| format!("cursor in {}", file.display()))?;
    let history = match &args.history {
        Some(path) => read_text(path)?,
        None => String::new(),
    };
    Ok(Request {
        text,
        path: display_path(file),
        cursor,
        history,
        bom,
        language: None,
    })
}

/// The edit as a unified diff of the file as it is: a byte order mark dropped on reading is put
/// back on both sides, so that the first line is the file's own and `git apply` takes the diff.
fn file_diff(request: &Request, new: &str) -> String {
    let path = if request.path.is_empty() {
        "document"
    } else {
        &request.path
    };
    if request.bom {
        let (old, new) = (format!("{BOM}{}", request.text), format!("{BOM}{new}"));
        unified_diff(path, &old, &new, 3)
    } else {
        unified_diff(path, &request.text, new, 3)
    }
}

/// The file's name as the history names files: relative to the working directory when it is
/// under it (as `git diff` writes paths), else as given.
fn display_path(file: &Path) -> String {
    let relative = std::env::current_dir().ok().and_then(|cwd| {
        std::fs::canonicalize(file)
            .ok()?
            .strip_prefix(cwd)
            .ok()
            .map(Path::to_path_buf)
    });
    relative.as_deref().unwrap_or(file).display().to_string()
}

/// 1-based line and character column of byte `at`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

#[derive(Serialize)]
struct JsonEdit {
    /// Byte offsets in the document.
    start: usize,
    end: usize,
    start_line: usize,
    start_column: usize,
    end_line: usize,
    end_column: usize,
    text: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let request = request(&args)?;
    let patches = parse_patches(&request.history).context("reading the edit history")?;
    let history: Vec<HistoryEdit> = patches.iter().flat_map(HistoryEdit::from_patch).collect();
    if history.is_empty() && !request.history.trim().is_empty() {
        stderr_line(format_args!(
            "redraft complete: warning: the history holds no edit (a unified-diff hunk, \
             `@@ ... @@` lines as `git diff` writes them, that changes a line; a merge's \
             combined `@@@` hunks are skipped): the next edit is computed without recent edits"
        ));
    }
    let load_started = Instant::now();
    let engine = args.model.load()?;
    let load_ms = load_started.elapsed().as_secs_f64() * 1e3;
    let sampler = args.sampler.edit_config(engine.settings().efforts);
    let input = EditInput {
        source: Source {
            text: &request.text,
            cursor: request.cursor,
            language: request
                .language
                .unwrap_or_else(|| language_of_file(Path::new(&request.path), Language::Plain)),
            tree: None,
        },
        path: &request.path,
        history: &history,
    };
    let budget = args
        .sampler
        .edit_budget(engine.model().config().max_position_embeddings);
    let outcome = with_controls(&args, &engine, |controls| {
        next_edit(
            &engine,
            &input,
            &budget,
            sampler.clone(),
            &mut ContextCache::default(),
            controls,
        )
    })?;
    let text = &request.text;
    if args.json {
        let edits: Vec<JsonEdit> = outcome
            .suggestion
            .edits
            .iter()
            .map(|e| {
                let (start_line, start_column) = line_column(text, e.range.start);
                let (end_line, end_column) = line_column(text, e.range.end);
                JsonEdit {
                    start: e.range.start,
                    end: e.range.end,
                    start_line,
                    start_column,
                    end_line,
                    end_column,
                    text: e.new_text.clone(),
                }
            })
            .collect();
        let jump = outcome.suggestion.jump.map(|at| {
            let (line, column) = line_column(text, at);
            serde_json::json!({"offset": at, "line": line, "column": column})
        });
        let (region_start, _) = line_column(text, outcome.plan.region_range.start);
        let (region_end, _) = line_column(text, outcome.plan.region_range.end);
        let c = &outcome.completion;
        let value = serde_json::json!({
            "edits": edits,
            "jump": jump,
            "region": {
                "start": outcome.plan.region_range.start,
                "end": outcome.plan.region_range.end,
                "start_line": region_start,
                "end_line": region_end,
                "reason": outcome.plan.reason.to_string(),
            },
            "new_region": outcome.new_region,
            "rewrote_too_much": outcome.rewrote_too_much,
            "confidence": outcome.confidence,
            "unsure": outcome.unsure,
            "steps": c.steps,
            "forwards": c.forwards,
            "tokens_per_forward": c.tokens_per_forward,
            "slots": c.slots,
            "ended_by_eos": c.ended_by_eos,
            "hit_deadline": c.hit_deadline,
            "history_edits": history.len(),
            "timings": c.timings,
            "latency_ms": outcome.latency_ms,
            "load_ms": load_ms,
            "model": engine.dir().display().to_string(),
            "device": redraft_engine::device::describe(engine.model().device()),
            "sampler": sampler,
        });
        print_out(&format!("{value}\n"))?;
    } else if !outcome.suggestion.is_empty() {
        print_out(&file_diff(&request, &apply(text, &outcome.suggestion)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use redraft_context::edit::{EditSuggestion, TextEdit};

    #[test]
    fn line_columns_are_1_based_and_count_characters() {
        let text = "ab\né x\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 2), (1, 3));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, 3 + "é ".len()), (2, 3));
        assert_eq!(line_column(text, text.len()), (3, 1));
    }

    #[test]
    fn edits_apply_in_document_order() {
        let suggestion = EditSuggestion {
            edits: vec![
                TextEdit {
                    range: 0..1,
                    new_text: "A".into(),
                },
                TextEdit {
                    range: 4..4,
                    new_text: "!".into(),
                },
            ],
            jump: None,
        };
        assert_eq!(apply("abc\ndef", &suggestion), "Abc\n!def");
    }
}
