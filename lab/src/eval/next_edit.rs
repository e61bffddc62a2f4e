//! `redraft eval --next-edit CASES`: next-edit suggestions scored on a set of Zed-format cases
//! (a directory of `.md` files, or one), from the model, a completions file or a baseline; and
//! `redraft eval --next-edit DIR --from-dirs OLD NEW`, which writes cases cut from two versions
//! of a tree into DIR instead. The work is `redraft_eval::next_edit`'s; this file is the
//! command line.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::builder::TypedValueParser;
use redraft_engine::DeviceSpec;
use redraft_eval::next_edit::build::{build_from_dirs, write_cases, BuildOptions};
use redraft_eval::next_edit::case::read_cases;
use redraft_eval::next_edit::model::EngineModel;
use redraft_eval::next_edit::report::table;
use redraft_eval::next_edit::run::{evaluate, read_completions};
use redraft_eval::next_edit::{Baseline, NextEditSource};
use redraft_eval::run::slug;

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
    )]
    from_dirs: Vec<PathBuf>,
    /// Built cases: the front matter's repository_url (where OLD and NEW come from).
    #[arg(long, requires = "from_dirs", default_value = "")]
    repository_url: String,
    /// Built cases: the front matter's revision.
    #[arg(long, requires = "from_dirs", default_value = "")]
    revision: String,
    /// Built cases: lines kept above and below the cursor and the target hunk.
    #[arg(long, requires = "from_dirs", default_value_t = 8)]
    context_lines: usize,
    /// Built cases: leave out the no-edit cases.
    #[arg(long, requires = "from_dirs")]
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
    let mut cases = read_cases(common.cases)?;
    if let Some(limit) = common.limit {
        cases.truncate(limit);
    }
    let set = common.cases.display().to_string();
    let stem = case_set_stem(common.cases);
    let out_for = |name: &str| -> PathBuf {
        common.out.map(Path::to_path_buf).unwrap_or_else(|| {
            Path::new("target/eval").join(format!("next-edit-{stem}-{}", slug(name)))
        })
    };
    let (summary, out) = if let Some(baseline) = args.baseline {
        let source = NextEditSource::Baseline(baseline);
        let out = out_for(baseline.name());
        (evaluate(&cases, &source, &source.identity(&set), &out), out)
    } else if let Some(file) = common.completions {
        let given = read_completions(file, &cases)?;
        let before = cases.len();
        cases.retain(|c| given.contains_key(&c.name));
        if cases.is_empty() {
            bail!(
                "{} has no completion for the selected cases",
                file.display()
            );
        }
        if cases.len() < before {
            eprintln!(
                "eval --next-edit: {} of {before} cases have no completion in {}; scoring the {} that do",
                before - cases.len(),
                file.display(),
                cases.len()
            );
        }
        let source = NextEditSource::Completions {
            file,
            given: &given,
        };
        let out = out_for("completions");
        (evaluate(&cases, &source, &source.identity(&set), &out), out)
    } else {
        let engine = redraft_runtime::default_model::load_or_default(common.model, common.device)?;
        let model = EngineModel {
            engine: &engine,
            budget: common
                .sampler
                .edit_budget(engine.model().config().max_position_embeddings),
            sampler: common.sampler.edit_config(engine.settings().efforts),
            setting: common.sampler.describe(),
        };
        let source = NextEditSource::Model(&model);
        let out = out_for(&model.setting);
        (evaluate(&cases, &source, &source.identity(&set), &out), out)
    };
    let summary = summary.with_context(|| format!("evaluating into {}", out.display()))?;
    eprintln!("eval --next-edit: results in {}", out.display());
    print!("{}", table(std::slice::from_ref(&summary)));
    Ok(())
}

fn build(dir: &Path, old: &Path, new: &Path, args: &NextEditArgs) -> anyhow::Result<()> {
    let options = BuildOptions {
        context_lines: args.context_lines,
        no_edit_cases: !args.no_no_edit_cases,
        repository_url: args.repository_url.clone(),
        revision: args.revision.clone(),
        ..BuildOptions::default()
    };
    let built = build_from_dirs(old, new, &options)?;
    let cases = &built.cases;
    if cases.is_empty() {
        bail!(
            "no cases: no file under both {} and {} differs (pairs are by relative path)",
            old.display(),
            new.display()
        );
    }
    let files = write_cases(dir, cases)?;
    let no_edit = cases.iter().filter(|c| c.no_edit).count();
    println!(
        "{} cases ({no_edit} no-edit) from {} -> {} in {}",
        files.len(),
        old.display(),
        new.display(),
        dir.display()
    );
    let dropped: Vec<String> = built
        .dropped
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    if !dropped.is_empty() {
        eprintln!("eval --next-edit: changes dropped: {}", dropped.join(", "));
    }
    if built.unwritable > 0 {
        eprintln!(
            "eval --next-edit: {} cut cases left out (not writable faithfully in Zed's format)",
            built.unwritable
        );
    }
    Ok(())
}

/// `benchmarks/zed-next-edit` -> `zed-next-edit`; `x/case.md` -> `case`.
fn case_set_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(|| "cases".into(), |n| n.to_string_lossy().into_owned());
    name.strip_suffix(".md").unwrap_or(&name).to_string()
}
