//! `redraft eval --next-edit CASES`: next-edit suggestions scored on a set of Zed-format cases
//! (a directory of `.md` files, or one), from the model, a completions file or a baseline; and
//! `redraft eval --next-edit DIR --from-dirs OLD NEW`, which writes cases cut from two versions
//! of a tree into DIR instead. The work is `redraft_eval::next_edit`'s; this file is the
//! command line.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::builder::TypedValueParser;
use redraft_engine::DeviceSpec;
use redraft_eval::next_edit::build::{
    build_from_cases, build_from_dirs, write_cases, BuildOptions, Built,
};
use redraft_eval::next_edit::case::read_cases;
use redraft_eval::next_edit::model::EngineModel;
use redraft_eval::next_edit::report::{bar_table, table};
use redraft_eval::next_edit::run::{evaluate, read_completions};
use redraft_eval::next_edit::{Baseline, NextEditSource};
use redraft_eval::run::slug;
use redraft_runtime::stderr_line;

use redraft_runtime::sampler_args::SamplerArgs;

/// The flags only next edits have (shown under their own heading).
#[derive(clap::Args)]
#[command(next_help_heading = "Next-edit suggestions (with --next-edit)")]
pub struct NextEditArgs {
    /// Score a baseline instead of the model: no-edit (always suggest nothing) or repeat-last
    /// (the last history change, word for word, at its next occurrence after the cursor, else
    /// before it).
    #[arg(
        long,
        requires = "next_edit",
        conflicts_with_all = ["model", "completions"],
        value_parser = clap::builder::PossibleValuesParser::new(["no-edit", "repeat-last"])
            .map(|name| name.parse::<Baseline>().expect("a listed baseline")),
    )]
    baseline: Option<Baseline>,
    /// Build cases instead of scoring them: pair the files of OLD and NEW by relative path,
    /// cut each pair's diff as training data is cut (changes a few lines apart are one train of
    /// thought: each change after a group's first is a target with the earlier ones as history,
    /// a finished group is a no-edit case, churn is dropped), and write the cases in Zed's
    /// format into the --next-edit directory.
    #[arg(
        long,
        num_args = 2,
        value_names = ["OLD", "NEW"],
        requires = "next_edit",
        conflicts_with_all = ["baseline", "model", "completions", "out", "limit"],
        group = "building",
    )]
    from_dirs: Vec<PathBuf>,
    /// Build cases instead of scoring them, from next-edit training records (what
    /// `scripts/build-pack` writes with `redraft-train`'s `build_edits` example:
    /// `edits-valid.jsonl`), one case per
    /// record, named `<kind>-<crate>-<version>--<path>--<line>`.
    #[arg(
        long,
        value_name = "JSONL",
        requires = "next_edit",
        conflicts_with_all = ["baseline", "model", "completions", "out", "limit"],
        group = "building",
    )]
    from_records: Option<PathBuf>,
    /// Built cases: the front matter's repository_url (where OLD and NEW come from).
    #[arg(long, requires = "building", default_value = "")]
    repository_url: String,
    /// Built cases: the front matter's revision.
    #[arg(long, requires = "building", default_value = "")]
    revision: String,
    /// Built cases: lines kept above and below the cursor and the target hunk.
    #[arg(long, requires = "building", default_value_t = 8)]
    context_lines: usize,
    /// Built cases: leave out the no-edit cases.
    #[arg(long, requires = "building")]
    no_no_edit_cases: bool,
}

impl NextEditArgs {
    /// The first next-edit flag given, if any (clap does not enforce their `requires` when
    /// `--tasks`, which conflicts with `--next-edit`, is there).
    pub fn given(&self) -> Option<&'static str> {
        if self.baseline.is_some() {
            Some("--baseline")
        } else if !self.from_dirs.is_empty() {
            Some("--from-dirs")
        } else if self.from_records.is_some() {
            Some("--from-records")
        } else {
            None
        }
    }
}

/// The flags `redraft eval` shares with next edits.
pub struct Common<'a> {
    pub cases: &'a Path,
    pub model: Option<&'a Path>,
    pub device: DeviceSpec,
    pub completions: Option<&'a Path>,
    pub out: Option<&'a Path>,
    pub limit: Option<usize>,
    pub sampler: &'a SamplerArgs,
}

pub fn run(common: Common<'_>, args: &NextEditArgs) -> anyhow::Result<()> {
    if let [old, new] = args.from_dirs.as_slice() {
        return build(common.cases, old, new, args);
    }
    if let Some(records) = &args.from_records {
        return build_records(common.cases, records, args);
    }
    let all = read_cases(common.cases)?;
    // Checked against the whole case set: a row for a case `--limit` left out is no mistake.
    let given = match common.completions {
        Some(file) => Some((file, read_completions(file, &all)?)),
        None => None,
    };
    let mut cases = all;
    if let Some(limit) = common.limit {
        cases.truncate(limit);
    }
    let set = common.cases;
    let stem = case_set_stem(common.cases);
    let out_for = |name: &str| -> PathBuf {
        common.out.map(Path::to_path_buf).unwrap_or_else(|| {
            Path::new("target/eval").join(format!("next-edit-{stem}-{}", slug(name)))
        })
    };
    let (summary, out) = if let Some(baseline) = args.baseline {
        let source = NextEditSource::Baseline(baseline);
        let out = out_for(baseline.name());
        (evaluate(&cases, &source, &source.identity(set)?, &out), out)
    } else if let Some((file, given)) = &given {
        super::check_rows(
            "eval --next-edit",
            cases.iter().map(|c| c.name.as_str()),
            given,
            file,
            ("selected cases", "no suggestion"),
        )?;
        let source = NextEditSource::Completions { file, given };
        let out = out_for("completions");
        (evaluate(&cases, &source, &source.identity(set)?, &out), out)
    } else {
        let engine = redraft_runtime::default_model::load_or_default(common.model, common.device)?;
        let model = EngineModel {
            engine: &engine,
            budget: common
                .sampler
                .edit_budget(engine.model().config().max_position_embeddings),
            sampler: common.sampler.edit_config(engine.settings().efforts),
            setting: common.sampler.describe(),
            fingerprint: super::model_fingerprint(common.model, &engine)?,
        };
        let source = NextEditSource::Model(&model);
        let out = out_for(&model.setting);
        (evaluate(&cases, &source, &source.identity(set)?, &out), out)
    };
    let summary = summary.with_context(|| format!("evaluating into {}", out.display()))?;
    stderr_line(format_args!(
        "eval --next-edit: results in {}",
        out.display()
    ));
    let bars = bar_table(&summary);
    redraft::to_stdout(|out| {
        write!(out, "{}", table(std::slice::from_ref(&summary)))?;
        if !bars.is_empty() {
            write!(out, "\n{bars}")?;
        }
        Ok(())
    })
}

fn build_options(args: &NextEditArgs) -> BuildOptions {
    BuildOptions {
        context_lines: args.context_lines,
        no_edit_cases: !args.no_no_edit_cases,
        repository_url: args.repository_url.clone(),
        revision: args.revision.clone(),
        ..BuildOptions::default()
    }
}

fn build_records(dir: &Path, records_path: &Path, args: &NextEditArgs) -> anyhow::Result<()> {
    let records = redraft_train::edits::read_edit_records(records_path)
        .with_context(|| format!("reading next-edit records from {}", records_path.display()))?;
    let named = records.iter().map(|record| {
        let line = record.excerpt_line + record.text[..record.cursor].matches('\n').count() + 1;
        let kind = serde_json::to_value(record.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let name = format!(
            "{kind}-{}-{}--{}--{line}",
            record.krate, record.version, record.path
        );
        (name, record.case())
    });
    let built = build_from_cases(named, &build_options(args));
    if built.cases.is_empty() {
        bail!("no cases: no record could be written as a case");
    }
    write_built(dir, &built, &records_path.display().to_string())
}

fn build(dir: &Path, old: &Path, new: &Path, args: &NextEditArgs) -> anyhow::Result<()> {
    let built = build_from_dirs(old, new, &build_options(args))?;
    if built.cases.is_empty() && built.pairs == 0 {
        bail!(
            "no cases: no file under both {} and {} differs (pairs are by relative path)",
            old.display(),
            new.display()
        );
    }
    if built.cases.is_empty() {
        bail!(
            "no cases: {} file(s) under both {} and {} differ, but no change in them made a \
             case ({})",
            built.pairs,
            old.display(),
            new.display(),
            left_out(&built).join("; ")
        );
    }
    write_built(
        dir,
        &built,
        &format!("{} -> {}", old.display(), new.display()),
    )
}

/// Writes `built`'s cases into `dir` and says what was written from `source`, and what not.
fn write_built(dir: &Path, built: &Built, source: &str) -> anyhow::Result<()> {
    let cases = &built.cases;
    let files = write_cases(dir, cases)?;
    let no_edit = cases.iter().filter(|c| c.no_edit).count();
    redraft::to_stdout(|out| {
        writeln!(
            out,
            "{} cases ({no_edit} no-edit) from {source} in {}",
            files.len(),
            dir.display()
        )
    })?;
    for line in left_out(built) {
        stderr_line(format_args!("eval --next-edit: {line}"));
    }
    Ok(())
}

/// What the cutter dropped, by reason, and the cut cases not written: a line each.
fn left_out(built: &Built) -> Vec<String> {
    let dropped: Vec<String> = built
        .dropped
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    let mut lines = Vec::new();
    if !dropped.is_empty() {
        lines.push(format!("changes dropped: {}", dropped.join(", ")));
    }
    if built.unwritable > 0 {
        lines.push(format!(
            "{} cut cases left out (not writable faithfully in Zed's format)",
            built.unwritable
        ));
    }
    lines
}

/// `benchmarks/zed-next-edit` -> `zed-next-edit`; `x/case.md` -> `case`.
fn case_set_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(|| "cases".into(), |n| n.to_string_lossy().into_owned());
    name.strip_suffix(".md").unwrap_or(&name).to_string()
}
