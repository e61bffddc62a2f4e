//! `redraft pull NAME` (download a model into the cache everything else shares, run nothing)
//! and `redraft models` (what can be run here: the embedded model, the Hugging Face hub cache,
//! Ollama's store, each with what it is and whether redraft runs it). Names and caches are
//! `redraft_models`'; what a checkpoint is, the engine's [`inspect`].

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;
use redraft_engine::config::AttentionPattern;
use redraft_engine::edit::EditFormat;
use redraft_engine::engine::{inspect, ModelSummary};
use redraft_engine::prompt::FimLayout;
use redraft_engine::sampler::{Effort, Efforts};
use redraft_models::{human_bytes, ModelFormat, ModelName, Resolver, TerminalProgress};
use redraft_runtime::stderr_line;
use serde::Serialize;

#[derive(clap::Args)]
pub struct PullArgs {
    /// `hf:ORG/REPO`, `hf:ORG/REPO:QUANT`, `hf:ORG/REPO/FILE.gguf` (each with `@REVISION` if
    /// wanted) or `ollama:NAME[:TAG]` (already pulled by Ollama: only checked).
    name: String,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// One JSON object per model instead of the table.
    #[arg(long)]
    json: bool,
}

/// Downloads `name`'s files (what the cache lacks; the revision looked up again on the Hub)
/// and prints where they are and whether redraft runs them.
pub fn pull(args: PullArgs) -> anyhow::Result<()> {
    let name = ModelName::parse(&args.name)?;
    let resolver = Resolver::from_env();
    let model = resolver
        .pull(&name, &mut TerminalProgress::new())
        .with_context(|| format!("pulling {}", args.name))?;
    let row = Row::new(args.name, format_name(model.format), 0, &model.path, false);
    crate::to_stdout(|out| writeln!(out, "{}", model.path.display()))?;
    // A note for whoever watches; the path above is the answer.
    match &row.runs {
        Ok(()) => stderr_line(format_args!(
            "redraft pull: {} is {}; redraft runs it",
            row.name, row.kind
        )),
        Err(why) => stderr_line(format_args!(
            "redraft pull: {} is in place, but redraft cannot run it: {why}",
            row.name
        )),
    }
    Ok(())
}

/// Prints what is available locally; on stderr, what looked like a model but was passed over,
/// and why.
pub fn list(args: ListArgs) -> anyhow::Result<()> {
    let scan = Resolver::from_env().scan_local();
    let mut rows = vec![embedded()];
    rows.extend(
        scan.models
            .into_iter()
            .map(|m| Row::new(m.name, format_name(m.format), m.size, &m.path, true)),
    );
    let printed = if args.json {
        crate::to_stdout(|out| {
            for row in &rows {
                serde_json::to_writer(&mut *out, &row.json())?;
                writeln!(out)?;
            }
            Ok(())
        })
    } else {
        crate::to_stdout(|out| table(out, &rows))
    };
    for skipped in &scan.skipped {
        stderr_line(format_args!(
            "redraft models: skipped {}: {}",
            skipped.path.display(),
            skipped.why
        ));
    }
    printed
}

/// The rows as a table, a header first, columns separated by tabs.
fn table(out: &mut dyn Write, rows: &[Row]) -> io::Result<()> {
    writeln!(
        out,
        "NAME\tSIZE\tFORMAT\tKIND\tFIM\tNEXT EDIT\tEFFORTS\tRUNS"
    )?;
    for row in rows {
        writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            row.name,
            if row.size == 0 {
                "-".to_string()
            } else {
                human_bytes(row.size)
            },
            row.format,
            row.kind,
            row.fim,
            row.next_edit,
            row.efforts,
            match &row.runs {
                Ok(()) => "yes".to_string(),
                Err(why) => format!("no: {why}"),
            }
        )?;
    }
    Ok(())
}

/// One model as listed.
struct Row {
    name: String,
    size: u64,
    format: &'static str,
    /// `diffusion`, `block diffusion (N)`, `causal` or `-`.
    kind: String,
    /// `in place` (bidirectional infill) or `FIM tokens` (prefix, suffix, middle).
    fim: &'static str,
    /// `redraft` (edit markers), `sweep` (`<|file_sep|>`) or `none`.
    next_edit: &'static str,
    /// `built-in`, or the presets its `redraft.json` tunes (`tuned: low, medium`), or `-`.
    efforts: String,
    /// Whether redraft runs it, or why not.
    runs: Result<(), String>,
}

#[derive(Serialize)]
struct RowJson<'a> {
    name: &'a str,
    size: u64,
    format: &'a str,
    kind: &'a str,
    fim: &'a str,
    next_edit: &'a str,
    efforts: &'a str,
    runs: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    why_not: Option<&'a str>,
}

impl Row {
    /// `name`'s row, from its files at `path`. In a listing (`refetch`), a damaged download
    /// says how to fetch it again, as a load of it does; after a pull, which fetched again what
    /// differed from the Hub, it does not.
    fn new(name: String, format: &'static str, size: u64, path: &Path, refetch: bool) -> Row {
        let mut summary = inspect(path).map_err(anyhow::Error::from);
        if refetch {
            summary = redraft_runtime::default_model::with_repair_hint(Path::new(&name), summary);
        }
        Row::from_summary(name, format, size, summary.map_err(|e| format!("{e:#}")))
    }

    fn from_summary(
        name: String,
        format: &'static str,
        size: u64,
        summary: Result<ModelSummary, String>,
    ) -> Row {
        match summary {
            Ok(summary) => Row {
                name,
                size,
                format,
                kind: kind(summary.settings.attention),
                fim: match summary.layout {
                    FimLayout::Infill => "in place",
                    FimLayout::PrefixSuffixMiddle { .. } => "FIM tokens",
                },
                next_edit: match summary.edit_format {
                    Ok(EditFormat::Markers(_)) => "redraft",
                    Ok(EditFormat::Sweep { .. }) => "sweep",
                    Err(_) => "none",
                },
                efforts: efforts(&summary.settings.efforts),
                runs: Ok(()),
            },
            Err(why) => Row {
                name,
                size,
                format,
                kind: "-".into(),
                fim: "-",
                next_edit: "-",
                efforts: "-".into(),
                runs: Err(why),
            },
        }
    }

    fn json(&self) -> RowJson<'_> {
        RowJson {
            name: &self.name,
            size: self.size,
            format: self.format,
            kind: &self.kind,
            fim: self.fim,
            next_edit: self.next_edit,
            efforts: &self.efforts,
            runs: self.runs.is_ok(),
            why_not: self.runs.as_ref().err().map(String::as_str),
        }
    }
}

/// The model compiled into the binary.
fn embedded() -> Row {
    let files = redraft_runtime::default_model::FILES;
    let size = files.size() as u64;
    let summary =
        redraft_runtime::default_model::load_or_default(None, redraft_engine::DeviceSpec::Cpu)
            .map(|engine| ModelSummary {
                config: engine.model().config().clone(),
                settings: *engine.settings(),
                layout: engine.layout(),
                edit_format: engine.edit_format().map_err(|e| e.to_string()),
            })
            .map_err(|e| format!("{e:#}"));
    Row::from_summary("(embedded default)".into(), files.format(), size, summary)
}

/// Which effort presets a model tunes (`redraft.json`'s `efforts`), or `built-in`.
fn efforts(efforts: &Efforts) -> String {
    let tuned: Vec<&str> = Effort::ALL
        .into_iter()
        .filter(|&effort| efforts.get(effort) != Efforts::BUILT_IN.get(effort))
        .map(Effort::name)
        .collect();
    if tuned.is_empty() {
        "built-in".into()
    } else {
        format!("tuned: {}", tuned.join(", "))
    }
}

fn kind(attention: AttentionPattern) -> String {
    match attention {
        AttentionPattern::Bidirectional => "diffusion".into(),
        AttentionPattern::Block(n) => format!("block diffusion ({n})"),
        AttentionPattern::Causal => "causal".into(),
    }
}

fn format_name(format: ModelFormat) -> &'static str {
    match format {
        ModelFormat::Gguf => "gguf",
        ModelFormat::SafetensorsDir => "safetensors",
    }
}
