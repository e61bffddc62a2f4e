//! `redraft complete`: one fill-in-the-middle suggestion from the command line, through the
//! same pipeline as the editor's (`redraft_suggest::fim`: the context plan, the engine, the
//! finished text under the confidence bar); with `--raw` the engine alone on the whole prefix
//! and suffix (what the parity scripts compare); with `--next-edit` one next-edit suggestion
//! (`complete/next_edit.rs`).

mod next_edit;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use redraft_context::{Language, Source, Unit};
use redraft_engine::sampler::{CanvasView, Controls, DenoiseStep};
use redraft_engine::ContextCache;
use redraft_engine::{Engine, InfillRequest, MASK_GLYPH};
use redraft_suggest::fim::{self, FimOptions, FimOutcome};

use redraft_runtime::model_args::ModelArgs;
use redraft_runtime::sampler_args::{parse_at_least_one, parse_probability, SamplerArgs};
use redraft_runtime::stderr_line;

/// Where to complete is said once: `--file` with `--line` and `--column`, `--prefix-file`
/// (with `--suffix-file` if wanted), or `--stdin-json`. A flag that would be ignored (a
/// `--line` without `--file`, a `--history` beside `--stdin-json`, a fill-in-the-middle flag
/// with `--next-edit` or a next-edit flag without it, a `--canvas-tokens` over `--max-tokens`)
/// is refused as clap refuses it, so a mistake on the command line is always exit status 2,
/// before anything is read.
#[derive(clap::Args)]
#[command(group(
    clap::ArgGroup::new("input")
        .required(true)
        .args(["file", "prefix_file", "stdin_json"])
))]
#[command(mut_args(next_edit_only))]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Source file holding the cursor.
    #[arg(long, requires_all = ["line", "column"])]
    file: Option<PathBuf>,
    /// Cursor line, 1-based.
    #[arg(
        long,
        requires = "file",
        conflicts_with_all = ["stdin_json", "prefix_file"],
        value_parser = parse_at_least_one
    )]
    line: Option<usize>,
    /// Cursor column, 1-based, in characters (one past the last character is the line's end).
    #[arg(
        long,
        requires = "file",
        conflicts_with_all = ["stdin_json", "prefix_file"],
        value_parser = parse_at_least_one
    )]
    column: Option<usize>,
    /// The text before the cursor.
    #[arg(long, conflicts_with = "file")]
    prefix_file: Option<PathBuf>,
    /// The text after the cursor.
    #[arg(long, requires = "prefix_file", conflicts_with = "file")]
    suffix_file: Option<PathBuf>,
    /// Read `{"prefix": "...", "suffix": "...", "language": "rust"}` from stdin (`suffix` and
    /// `language`, an LSP language id, may be left out; with --next-edit: `{"text": "...",
    /// "cursor": BYTE, "path": "...", "history": "unified diff", "language": "rust"}`, the
    /// language, when given, over the one the path's extension says).
    #[arg(long, conflicts_with_all = ["file", "prefix_file", "suffix_file"])]
    stdin_json: bool,
    /// Suggest the next edit near the cursor instead of filling in at it: prints the edit as a
    /// unified diff (nothing when the model sees no edit to make).
    #[arg(long, conflicts_with_all = FILL_IN_ONLY)]
    next_edit: bool,
    /// The recent edits, oldest first, as unified diffs (`git diff` output), for --next-edit
    /// with --file (--stdin-json carries its own `history`).
    #[arg(long, conflicts_with = "stdin_json")]
    history: Option<PathBuf>,
    /// Longest middle in tokens, the editor's `maxTokens` (the syntax around the cursor usually
    /// asks for less; the model may end earlier with EOS).
    #[arg(long, default_value_t = redraft_runtime::DEFAULT_MAX_TOKENS, value_parser = parse_at_least_one)]
    max_tokens: usize,
    /// A canvas of exactly this many slots (at most --max-tokens) instead of the length the
    /// syntax asks for. With --raw: masked slots laid down at the start (default: --max-tokens);
    /// when the model writes the last one, the canvas grows a block at a time up to
    /// --max-tokens.
    #[arg(long, value_parser = parse_at_least_one)]
    canvas_tokens: Option<usize>,
    /// The engine alone: the whole prefix and suffix, the raw middle printed (no context plan,
    /// no cleaning, no confidence bar, no stop rule); what the parity scripts compare.
    #[arg(long, conflicts_with = "next_edit")]
    raw: bool,
    /// A suggestion the model is less sure of than this (0 to 1) is not shown [default: the
    /// model's own bar, `fim_min_confidence` in its redraft.json, else 0].
    #[arg(long, value_parser = parse_probability, conflicts_with_all = ["raw", "next_edit"])]
    min_confidence: Option<f32>,
    #[command(flatten)]
    sampler: SamplerArgs,
    /// Stop refining after this many milliseconds and commit the best guess for what is left.
    #[arg(long, value_parser = redraft_runtime::sampler_args::parse_millis)]
    deadline_ms: Option<u64>,
    /// Print each denoising step's canvas to stderr as it happens.
    #[arg(long)]
    steps_view: bool,
    /// Print a JSON object (the suggestion, its confidence, the plan, the raw middle, steps,
    /// tokens per forward, timings) instead of the text.
    #[arg(long)]
    json: bool,
}

/// The flags only a fill-in-the-middle request reads: each refuses `--next-edit`.
const FILL_IN_ONLY: [&str; 5] = [
    "prefix_file",
    "suffix_file",
    "canvas_tokens",
    "raw",
    "min_confidence",
];

/// The flags only a next-edit request reads (the last four are the shared decoding flags'):
/// each requires `--next-edit` ([`next_edit_only`]).
const NEXT_EDIT_ONLY: [&str; 5] = [
    "history",
    "draft_tau",
    "no_draft",
    "max_change",
    "min_edit_confidence",
];

/// A flag of [`NEXT_EDIT_ONLY`] requires `--next-edit`, and refuses the flags that refuse
/// `--next-edit`: clap waives a requirement that conflicts with a flag given (`--next-edit`
/// beside `--prefix-file`), so a requirement alone would let `--prefix-file P --max-change 1`
/// through, the flag unread.
fn next_edit_only(arg: clap::Arg) -> clap::Arg {
    if NEXT_EDIT_ONLY.contains(&arg.get_id().as_str()) {
        arg.requires("next_edit").conflicts_with_all(FILL_IN_ONLY)
    } else {
        arg
    }
}

/// The most a source file or a request may hold. Far more than any model's context reads (the
/// context is cut around the cursor), and a bound on what `--file /dev/zero` or an endless pipe
/// can make redraft hold in memory.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The document and the cursor a FIM request is about.
struct Document {
    /// The prefix, then the suffix.
    text: String,
    /// Byte offset where the prefix ends.
    cursor: usize,
    language: Language,
}

impl Document {
    fn new(prefix: String, suffix: &str, language: Language) -> Document {
        let cursor = prefix.len();
        let mut text = prefix;
        text.push_str(suffix);
        Document {
            text,
            cursor,
            language,
        }
    }
}

impl Args {
    fn document(&self) -> anyhow::Result<Document> {
        if let Some(file) = &self.file {
            let text = read_text(file)?;
            let (line, column) = (self.line.unwrap_or(1), self.column.unwrap_or(1));
            let cursor = cursor_offset(&text, line, column)
                .with_context(|| format!("cursor in {}", file.display()))?;
            return Ok(Document {
                text,
                cursor,
                language: language_of_file(file, Language::UNSAID),
            });
        }
        if self.stdin_json {
            #[derive(serde::Deserialize)]
            struct Request {
                prefix: String,
                #[serde(default)]
                suffix: String,
                #[serde(default)]
                language: Option<String>,
            }
            let request: Request = read_stdin_json(&["prefix", "suffix", "language"]).context(
                "stdin must hold {\"prefix\": \"...\", \"suffix\": \"...\", \"language\": \"rust\"}",
            )?;
            let language = request
                .language
                .as_deref()
                .map_or(Language::UNSAID, language_of_id);
            return Ok(Document::new(request.prefix, &request.suffix, language));
        }
        if let Some(prefix) = &self.prefix_file {
            let suffix = match &self.suffix_file {
                Some(path) => read_text(path)?,
                None => String::new(),
            };
            return Ok(Document::new(
                read_text(prefix)?,
                &suffix,
                language_of_file(prefix, Language::UNSAID),
            ));
        }
        bail!("say where to complete: --file F --line L --column C, --prefix-file P [--suffix-file S], or --stdin-json")
    }
}

/// Standard input's JSON object as `T`. A field `T` has no place for (a misspelled
/// `"langauge"`, which would leave the default in force without a word) is said on stderr,
/// naming `fields`, and passed over: scripts may send more than a request needs.
fn read_stdin_json<T: serde::de::DeserializeOwned>(fields: &[&str]) -> anyhow::Result<T> {
    let input = read_stdin()?;
    let mut unknown = Vec::new();
    let mut json = serde_json::Deserializer::from_str(&input);
    let value = serde_ignored::deserialize(&mut json, |path| unknown.push(path.to_string()))?;
    // Nothing but white space after the object, as `serde_json::from_str` checks.
    json.end()?;
    for field in unknown {
        stderr_line(format_args!(
            "redraft complete: stdin's `{field}` is no field of a request ({}); passed over",
            fields.join(", ")
        ));
    }
    Ok(value)
}

/// The language of a request's `language` id; an id the context layer does not know is plain
/// text, said on stderr.
fn language_of_id(id: &str) -> Language {
    let language = Language::from_lsp_id(id);
    if language == Language::Plain && id != Language::Plain.lsp_id() {
        let known: Vec<&str> = known_languages().map(Language::lsp_id).collect();
        stderr_line(format_args!(
            "redraft complete: language `{id}` is not one redraft knows the syntax of ({}); \
             read as plain text",
            known.join(", ")
        ));
    }
    language
}

/// The languages the context layer reads by their own rules (all but plain text).
fn known_languages() -> impl Iterator<Item = Language> {
    Language::all().filter(|&language| language != Language::Plain)
}

/// The language of a source file by its extension, in any case (`.RS` is Rust, as editors read
/// it), or `unnamed` for a name without one. An extension the context layer does not know is
/// plain text, said on stderr as an unknown `language` id is (`.txt`, plain text by name as
/// the id `plaintext` is, is not said).
fn language_of_file(path: &Path, unnamed: Language) -> Language {
    let Some(extension) = path.extension() else {
        return unnamed;
    };
    let as_written = Language::from_path(path);
    let extension = extension.to_string_lossy().to_lowercase();
    let language = match as_written {
        Language::Plain => Language::from_path(&path.with_extension(&extension)),
        known => known,
    };
    if language == Language::Plain && extension != "txt" {
        let known: Vec<String> = known_languages()
            .flat_map(Language::extensions)
            .map(|extension| format!(".{extension}"))
            .collect();
        stderr_line(format_args!(
            "redraft complete: extension `.{extension}` (of {}) is not one redraft knows the \
             syntax of ({}); read as plain text",
            path.display(),
            known.join(", ")
        ));
    }
    language
}

/// The byte offset of 1-based (`line`, `column`), columns counted in characters.
pub fn cursor_offset(text: &str, line: usize, column: usize) -> anyhow::Result<usize> {
    if line == 0 || column == 0 {
        bail!("--line and --column are 1-based");
    }
    let mut start = 0;
    for _ in 1..line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            // Counted as the cursor counts them: after a final newline is one more (empty) line.
            None => bail!(
                "line {line} is past the end of the file: the cursor can be on lines 1 to {}",
                text.matches('\n').count() + 1
            ),
        }
    }
    let line_text = text[start..].split('\n').next().unwrap_or("");
    let line_text = line_text.strip_suffix('\r').unwrap_or(line_text);
    let chars = line_text.chars().count();
    if column > chars + 1 {
        bail!(
            "column {column} is past the end of line {line}: it has {chars} characters, so the \
             cursor can be in columns 1 to {}",
            chars + 1
        );
    }
    let within = line_text
        .char_indices()
        .nth(column - 1)
        .map_or(line_text.len(), |(i, _)| i);
    Ok(start + within)
}

/// The UTF-8 byte order mark some editors write at the start of a file. It is not text: editors
/// neither show it nor count it in a line's columns, and the model is not given it. It is
/// dropped on reading (a file, standard input), and put back where the file's bytes matter (a
/// next-edit diff, which `git apply` matches against the file).
const BOM: &str = "\u{feff}";

/// A source file's text, without a leading byte order mark ([`BOM`]).
fn read_text(path: &Path) -> anyhow::Result<String> {
    read_text_and_bom(path).map(|(text, _)| text)
}

/// A source file's text without a leading byte order mark, and whether it had one: a
/// directory, a file over [`MAX_INPUT_BYTES`] or one that is not UTF-8 is refused saying so.
fn read_text_and_bom(path: &Path) -> anyhow::Result<(String, bool)> {
    if path.is_dir() {
        bail!(
            "{} is a directory; name a source file (--file, --prefix-file, --suffix-file, --history)",
            path.display()
        );
    }
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let bytes = read_capped(file, &path.display().to_string())?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not UTF-8 text (a byte that is not UTF-8 at offset {}); redraft completes \
             UTF-8 source files",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(without_bom(text))
}

/// Standard input as text, at most [`MAX_INPUT_BYTES`], without a leading byte order mark
/// (JSON has none, but a file saved by some editors and piped in does).
fn read_stdin() -> anyhow::Result<String> {
    let bytes = read_capped(std::io::stdin().lock(), "the request on stdin")?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "the request on stdin is not UTF-8 (a byte that is not UTF-8 at offset {}); JSON \
             is UTF-8",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(without_bom(text).0)
}

/// `text` without a leading [`BOM`], and whether it had one.
fn without_bom(mut text: String) -> (String, bool) {
    let bom = text.starts_with(BOM);
    if bom {
        text.drain(..BOM.len());
    }
    (text, bom)
}

fn read_capped(from: impl Read, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    from.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {what}"))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        bail!(
            "{what} holds more than {} MiB; redraft reads at most that much (the model sees only \
             the text around the cursor: pass that part)",
            MAX_INPUT_BYTES >> 20
        );
    }
    Ok(bytes)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.check()?;
    if args.next_edit {
        return next_edit::run(args);
    }
    let document = args.document()?;
    let load_started = Instant::now();
    let engine = args.model.load()?;
    let load_ms = load_started.elapsed().as_secs_f64() * 1e3;
    if args.raw {
        return raw(&args, &engine, document, load_ms);
    }
    let positions = engine.model().config().max_position_embeddings;
    let longest = fim::longest_middle(positions);
    // A fixed canvas is capped as the longest middle is (the library keeps a caller's fixed
    // length, the evaluation's true one): uncapped, 255 slots left a 256-position model no
    // context at all.
    let (flag, asked) = match args.canvas_tokens {
        Some(canvas) => ("--canvas-tokens", canvas),
        None => ("--max-tokens", args.max_tokens),
    };
    if asked > longest {
        stderr_line(format_args!(
            "note: {flag} {asked} is more than a middle may take of this model's {positions} \
             positions; at most {longest} (a quarter: the context keeps the rest)"
        ));
    }
    let options = FimOptions {
        fixed_length: args.canvas_tokens.map(|canvas| canvas.min(longest)),
        min_confidence: args.min_confidence,
        ..FimOptions::new(
            args.max_tokens,
            args.sampler.config(engine.settings().efforts),
        )
    };
    let source = Source {
        text: &document.text,
        cursor: document.cursor,
        language: document.language,
        tree: None,
    };
    let outcome = with_controls(&args, &engine, |controls| {
        fim::complete(
            &engine,
            &source,
            &[],
            &options,
            &mut ContextCache::default(),
            controls,
        )
    })?;
    let suggestion = outcome.texts.first();
    if args.json {
        let mut value = json_answer(&outcome)?;
        value["load_ms"] = load_ms.into();
        value["model"] = engine.dir().display().to_string().into();
        value["device"] = redraft_engine::device::describe(engine.model().device()).into();
        value["sampler"] = serde_json::to_value(&options.sampler)?;
        print_out(&format!("{value}\n"))?;
    } else if let Some(text) = suggestion {
        print_out(text)?;
    } else {
        stderr_line(format_args!("{}", why_none(&outcome)));
    }
    Ok(())
}

impl Args {
    /// What clap's attributes cannot say: a flag's value bounded by another's, a mistake on
    /// the command line as a conflict between flags is ([`crate::flag_error`], exit status 2).
    fn check(&self) -> anyhow::Result<()> {
        match self.canvas_tokens {
            Some(canvas) if canvas > self.max_tokens => Err(crate::flag_error::<Args>(
                "redraft complete",
                format!(
                    "--canvas-tokens {canvas} is more than --max-tokens {}: the canvas is at \
                     most --max-tokens slots; lower --canvas-tokens or raise --max-tokens",
                    self.max_tokens
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// Writes the command's whole output to stdout ([`crate::to_stdout`]: a failure is an error,
/// never a suggestion lost in silence, and a reader that stopped reading ends the command
/// quietly).
fn print_out(text: &str) -> anyhow::Result<()> {
    crate::to_stdout(|out| out.write_all(text.as_bytes()))
}

/// `--raw`: the engine on the whole prefix and suffix, its middle printed as it came.
fn raw(args: &Args, engine: &Engine, document: Document, load_ms: f64) -> anyhow::Result<()> {
    let Document {
        mut text, cursor, ..
    } = document;
    let suffix = text.split_off(cursor);
    let mut request = InfillRequest::new(text, suffix);
    request.max_tokens = args.max_tokens;
    request.canvas_tokens = args.canvas_tokens.unwrap_or(args.max_tokens);
    request.sampler = args.sampler.config(engine.settings().efforts);
    let completion = with_controls(args, engine, |controls| {
        engine.complete(&request, &mut ContextCache::default(), controls)
    })?;
    if args.json {
        let mut value = serde_json::to_value(&completion)?;
        value["load_ms"] = load_ms.into();
        value["model"] = engine.dir().display().to_string().into();
        value["device"] = redraft_engine::device::describe(engine.model().device()).into();
        value["sampler"] = serde_json::to_value(&request.sampler)?;
        print_out(&format!("{value}\n"))
    } else {
        print_out(&completion.middle)
    }
}

/// The run's completion (the raw middle, steps, timings) with what the pipeline made of it:
/// the suggestion shown (`null` when none), the cleaned text even when withheld (`finished`),
/// the model's confidence in it, the bar, and the plan the request was made from.
fn json_answer(outcome: &FimOutcome) -> anyhow::Result<serde_json::Value> {
    let judged = &outcome.judged[0];
    let prepared = &outcome.prepared;
    let (plan, budget) = (&prepared.plan, &prepared.budget);
    let mut value = serde_json::to_value(&outcome.completions[0])?;
    value["suggestion"] = outcome.texts.first().cloned().into();
    value["finished"] = judged.text.clone().into();
    value["confidence"] = judged.confidence.into();
    value["withheld"] = judged.unsure.into();
    value["min_confidence"] = prepared.min_confidence.into();
    value["latency_ms"] = outcome.latency_ms.into();
    value["plan"] = serde_json::json!({
        "language": plan.language.lsp_id(),
        "unit": unit_name(plan.canvas.unit),
        "canvas_tokens": plan.canvas.tokens,
        "reason": plan.canvas.reason,
        "prefix_start": plan.prefix_start,
        "suffix_end": plan.suffix_end,
        "prefix_tokens": plan.prefix_tokens,
        "suffix_tokens": plan.suffix_tokens,
        "neighbour_tokens": plan.neighbour_tokens,
        "budget": {
            "prefix_tokens": budget.prefix_tokens,
            "suffix_tokens": budget.suffix_tokens,
            "neighbour_tokens": budget.neighbour_tokens,
            "max_canvas_tokens": budget.max_canvas_tokens,
        },
    });
    Ok(value)
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::RestOfLine => "rest-of-line",
        Unit::Line => "line",
        Unit::Block => "block",
        Unit::Fixed => "fixed",
    }
}

/// One line for stderr saying why nothing was printed.
fn why_none(outcome: &FimOutcome) -> String {
    let judged = &outcome.judged[0];
    match judged.confidence {
        Some(confidence) if judged.unsure => format!(
            "no suggestion: the model was {confidence:.3} sure of it, under the bar of {:.3} \
             (--min-confidence, else the model's fim_min_confidence)",
            outcome.prepared.min_confidence
        ),
        _ => "no suggestion: nothing of the model's middle was worth showing once cut to the \
              unit and cleaned (--json shows the middle)"
            .to_string(),
    }
}

/// Runs `run` under the flags' deadline, with each step's canvas printed to stderr under
/// `--steps-view`.
fn with_controls<T>(args: &Args, engine: &Engine, run: impl FnOnce(Controls<'_>) -> T) -> T {
    let mut on_step = |step: &DenoiseStep| {
        stderr_line(format_args!(
            "step {:>3}: {}",
            step.step,
            render(engine, &step.canvases[0])
        ));
    };
    run(Controls {
        cancel: None,
        interrupt: None,
        deadline: args
            .deadline_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms)),
        on_step: if args.steps_view {
            Some(&mut on_step)
        } else {
            None
        },
        stop: None,
    })
}

/// One line per step: committed text, `░` for a masked slot, `·` for an end-of-middle slot,
/// newlines shown as `↵`. Each run of committed tokens is shown as every door shows what the
/// model wrote ([`redraft_engine::tokenizer::Tokenizer::text`], after a gap
/// `text_after_gap`): a character split across tokens is one character, never a U+FFFD per
/// token as decoding the tokens one by one gave.
fn render(engine: &Engine, canvas: &CanvasView) -> String {
    let eos = engine.settings().eos_token_id;
    let tokenizer = engine.tokenizer();
    let mut line = String::new();
    let mut run = Vec::new();
    let mut after_gap = false;
    let flush = |run: &mut Vec<u32>, after_gap: bool, line: &mut String| {
        if run.is_empty() {
            return;
        }
        let text = if after_gap {
            tokenizer.text_after_gap(run)
        } else {
            tokenizer.text(run)
        };
        line.push_str(&text.map(|t| t.text).unwrap_or_default().replace('\n', "↵"));
        run.clear();
    };
    for slot in &canvas.slots {
        match slot {
            Some(t) if *t != eos => run.push(*t),
            end_or_masked => {
                flush(&mut run, after_gap, &mut line);
                after_gap = end_or_masked.is_none();
                line.push(if after_gap { MASK_GLYPH } else { '·' });
            }
        }
    }
    flush(&mut run, after_gap, &mut line);
    line
}

#[cfg(test)]
mod tests {
    use super::{cursor_offset, render};

    /// The step view shows a character the model wrote across several tokens as that
    /// character (decoding each token alone gave a U+FFFD apiece), `░` for masked slots and `·`
    /// for ends; a character cut by a mask is held back, as every door holds it.
    #[test]
    fn the_step_view_shows_characters_split_across_tokens() {
        let engine =
            redraft_runtime::default_model::load_or_default(None, redraft_engine::DeviceSpec::Cpu)
                .unwrap();
        let eos = engine.settings().eos_token_id;
        let ids = engine.tokenizer().encode("a\u{1F600}b").unwrap();
        assert!(ids.len() > 3, "the emoji takes several tokens: {ids:?}");
        let mut slots: Vec<Option<u32>> = ids.iter().copied().map(Some).collect();
        slots.extend([None, Some(eos), Some(eos)]);
        let view = redraft_engine::sampler::CanvasView {
            slots,
            committed: Vec::new(),
        };
        assert_eq!(render(&engine, &view), "a\u{1F600}b░··");
        // The emoji's first bytes alone, then a mask: held back, not shown as U+FFFD.
        let cut = ids.len() - 2;
        let mut slots: Vec<Option<u32>> = ids[..cut].iter().copied().map(Some).collect();
        slots.push(None);
        let view = redraft_engine::sampler::CanvasView {
            slots,
            committed: Vec::new(),
        };
        assert_eq!(render(&engine, &view), "a░");
    }

    #[test]
    fn cursor_offsets_count_characters_on_1_based_lines() {
        let text = "fn a() {}\r\nlet é = 1;\n";
        assert_eq!(cursor_offset(text, 1, 1).unwrap(), 0);
        assert_eq!(cursor_offset(text, 1, 10).unwrap(), 9);
        assert_eq!(cursor_offset(text, 2, 6).unwrap(), 11 + "let é".len());
        assert_eq!(cursor_offset(text, 3, 1).unwrap(), text.len());
        assert!(cursor_offset(text, 1, 11).is_err());
        assert!(cursor_offset(text, 4, 1).is_err());
        assert!(cursor_offset(text, 0, 1).is_err());
    }
}
