//! `redraft eval`: fill-in-the-middle benchmarks scored by execution (Python, Rust) or by match
//! (tasks without tests), with latency, for the embedded model, a model directory, or
//! completions produced elsewhere; `--backend` fills the middles with a model served by another
//! process ([`redraft_runtime::backend`]); `--next-edit` scores next-edit suggestions instead ([`next_edit`]).
//! The work is `redraft_eval`'s; this file is the command line.

mod next_edit;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Parser;
use redraft_eval::fingerprint;
use redraft_eval::generate::{Filler, Setting};
use redraft_eval::run::{self, Completions, Run, RunIdentity, ScoringFlags};
use redraft_eval::score::{Scorer, ScorerConfig};
use redraft_eval::task::{read_tasks, Task, TaskLanguage};
use redraft_runtime::stderr_line;

use redraft_engine::sampler::Efforts;
use redraft_engine::Engine;
use redraft_runtime::backend::Backend;
use redraft_runtime::backend_args::BackendArgs;
use redraft_runtime::model_args::ModelArgs;
use redraft_runtime::sampler_args::{parse_at_least_one, SamplerArgs};

/// The engine-only decoding flags, which a remote backend (an autoregressive server) has no
/// use for: `--temperature` and `--seed` are what it is sent.
const ENGINE_ONLY: [&str; 14] = [
    "effort",
    "tau",
    "per_step",
    "steps",
    "confidence",
    "no_cache",
    "refresh_every",
    "edit_reuse",
    "edit_refresh",
    "typed",
    "draft_tau",
    "no_draft",
    "no_guess",
    "max_change",
];

/// The rest of the flags that say how a model is run: what a backend is sent too, the
/// next-edit bar, and a FIM run's canvas and settings. Where no model runs (`--canonical`,
/// `--completions`, `--baseline`) these and [`ENGINE_ONLY`] would change nothing, so they are
/// refused there as the engine's flags are with `--backend`.
const MODEL_RUN: [&str; 7] = [
    "temperature",
    "seed",
    "min_edit_confidence",
    "oracle_length",
    "max_tokens",
    "typed",
    "sweep",
];

#[derive(clap::Args)]
#[command(mut_arg("backend", |arg| arg
    .conflicts_with_all(["model", "device", "completions", "canonical", "next_edit"])
    .conflicts_with_all(ENGINE_ONLY)))]
#[command(mut_arg("canonical", |arg| arg
    .conflicts_with_all(ENGINE_ONLY)
    .conflicts_with_all(MODEL_RUN)))]
#[command(mut_arg("completions", |arg| arg
    .conflicts_with_all(ENGINE_ONLY)
    .conflicts_with_all(MODEL_RUN)))]
#[command(mut_arg("baseline", |arg| arg
    .conflicts_with_all(ENGINE_ONLY)
    .conflicts_with_all(MODEL_RUN)))]
pub struct Args {
    /// Task file: HumanEval-infilling JSONL (plain or .gz), e.g. one `redraft tasks` wrote.
    #[arg(long, required_unless_present = "next_edit")]
    tasks: Option<PathBuf>,
    /// Score next-edit suggestions on these cases instead of fill-in-the-middle tasks: a
    /// directory of Zed-format `.md` cases (e.g. the repository's benchmarks/zed-next-edit) or
    /// one case file. With --from-dirs, the directory the built cases are written to.
    #[arg(
        long,
        value_name = "CASES",
        conflicts_with_all = [
            "tasks", "language", "canonical", "sweep", "oracle_length", "sample", "jobs",
            "timeout_s", "python", "rust_deps", "work_dir", "sandbox_read", "max_tokens", "typed",
        ],
    )]
    next_edit: Option<PathBuf>,
    /// Language of tasks that do not say (OpenAI's Python files are recognised by their ids).
    #[arg(long)]
    language: Option<TaskLanguage>,
    #[command(flatten)]
    model: ModelArgs,
    /// Score these completions (JSONL of `task_id`, `completion`) instead of generating: the
    /// same scorer for any other system. With --next-edit: JSONL of `case` (its name) and
    /// `excerpt` (the case's excerpt after the suggestion), or `region` (the rewritten text of
    /// `range`, a [start, end] byte range of the excerpt).
    #[arg(long, conflicts_with_all = ["canonical", "model"])]
    completions: Option<PathBuf>,
    /// Score each task's own middle (checks a task file and the scorer: everything should pass).
    #[arg(long, conflicts_with = "model")]
    canonical: bool,
    /// Output directory (per-task `tasks.jsonl`, `summary.json`); rerunning the same command
    /// resumes. Default: `target/eval/<task file>-<setting>`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Scoring workers (default: the machine's cores).
    #[arg(long, value_parser = parse_at_least_one)]
    jobs: Option<usize>,
    /// Only the first N tasks (cases).
    #[arg(long, conflicts_with = "sample", value_parser = parse_at_least_one)]
    limit: Option<usize>,
    /// A seeded random sample of N tasks (kept in file order).
    #[arg(long, value_parser = parse_at_least_one)]
    sample: Option<usize>,
    /// Seed of `--sample`.
    #[arg(long, default_value_t = 0)]
    sample_seed: u64,
    /// Canvas = the true middle's length in tokens, instead of the context layer's choice.
    #[arg(long)]
    oracle_length: bool,
    /// Largest canvas the context layer may choose (the editor's "max tokens").
    #[arg(long, default_value_t = redraft_runtime::DEFAULT_MAX_TOKENS)]
    max_tokens: usize,
    /// Before each task, complete it with its prompt N characters shorter and type them one at
    /// a time, each a completion through one kept cache (as an editor's worker keeps it), then
    /// score the real task: what --edit-reuse costs in quality against exact recomputation.
    #[arg(long, default_value_t = 0)]
    typed: usize,
    /// `--backend URL` and the `--backend-*` flags (the engine's own flags conflict with it:
    /// `Args`' `mut_arg`).
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    sampler: SamplerArgs,
    /// Run several settings side by side, each written like these flags (and parsed on its
    /// own, from the defaults): `--sweep "--effort low" --sweep "--effort high --oracle-length"`.
    #[arg(long, allow_hyphen_values = true, value_parser = parse_sweep)]
    sweep: Vec<String>,
    /// Wall-clock limit per program run, seconds, 0.5 to 86400 (default: 3 Python, 10 Rust).
    #[arg(long, value_parser = parse_timeout_s)]
    timeout_s: Option<f64>,
    /// Address-space limit per program run, MiB, 64 to 16777216.
    #[arg(
        long,
        default_value_t = redraft_eval::score::DEFAULT_MEMORY_MB,
        value_parser = parse_memory_mb
    )]
    memory_mb: u64,
    /// Python interpreter (default: python3 on PATH).
    #[arg(long)]
    python: Option<PathBuf>,
    /// deps.json of scripts/setup-eval, or its directory (default: $REDRAFT_EVAL_DEPS, else
    /// target/eval-deps of the source tree this binary was built from, wherever it runs).
    #[arg(long)]
    rust_deps: Option<PathBuf>,
    /// Where per-program scratch directories go (default: the system temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// A path every program and compiler may also read and execute in the sandbox (repeat for
    /// more): what an interpreter installed with your home directory as its prefix reads.
    #[arg(long, value_name = "PATH")]
    sandbox_read: Vec<PathBuf>,
    /// Last: its heading would carry over to the flags after it.
    #[command(flatten)]
    next: next_edit::NextEditArgs,
}

/// One `--sweep` value, parsed with the same flags as the command line.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct SweepSetting {
    #[command(flatten)]
    sampler: SamplerArgs,
    #[arg(long)]
    oracle_length: bool,
    #[arg(long, default_value_t = redraft_runtime::DEFAULT_MAX_TOKENS)]
    max_tokens: usize,
    #[arg(long, default_value_t = 0)]
    typed: usize,
}

/// `--timeout-s`: a wall clock a program can start in (an interpreter takes tenths of a second
/// to start) and at most a day (a longer one is a mistake; and `inf`, `nan` and `1e30` are no
/// `Duration`).
fn parse_timeout_s(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| (MIN_TIMEOUT_S..=MAX_TIMEOUT_S).contains(s))
        .ok_or_else(|| {
            format!("expected a number of seconds from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S}, got `{text}`")
        })
}

const MIN_TIMEOUT_S: f64 = 0.5;
const MAX_TIMEOUT_S: f64 = 86_400.0;

/// `--memory-mb`: room for an interpreter or a test binary to start (Python alone maps about
/// 30 MiB), and few enough MiB that their bytes fit a `u64`.
fn parse_memory_mb(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .filter(|mb| (MIN_MEMORY_MB..=MAX_MEMORY_MB).contains(mb))
        .ok_or_else(|| {
            format!("expected a whole number of MiB from {MIN_MEMORY_MB} to {MAX_MEMORY_MB}, got `{text}`")
        })
}

const MIN_MEMORY_MB: u64 = 64;
const MAX_MEMORY_MB: u64 = 1 << 24;

/// A `--sweep` value, checked as the command line is read (a mistake in it is one on the
/// command line) and kept as written: [`Args::settings`] parses it again with the model's
/// presets.
fn parse_sweep(spec: &str) -> Result<String, String> {
    match SweepSetting::try_parse_from(spec.split_whitespace()) {
        Ok(_) => Ok(spec.to_string()),
        // clap's message and tips, without the usage of a command no one typed.
        Err(mistake) => {
            let rendered = mistake.render().to_string();
            let said = rendered.split("\n\nUsage:").next().unwrap_or_default();
            // The tip to try `--help` is the outer parser's to give, once, at the end.
            let said: Vec<&str> = said
                .lines()
                .map(|line| line.trim().trim_start_matches("error: "))
                .filter(|line| !line.is_empty() && !line.starts_with("For more information"))
                .collect();
            Err(said.join("; "))
        }
    }
}

/// The setting of a run. With a backend its name says which one, and of the decoding flags only
/// what the backend is sent (`--temperature`, `--seed`).
fn setting(
    sampler: &SamplerArgs,
    efforts: Efforts,
    oracle_length: bool,
    max_tokens: usize,
    typed: usize,
    backend: Option<&str>,
) -> Setting {
    let mut name = match backend {
        None => sampler.describe(),
        Some(backend) => {
            let mut name = format!("backend {backend}");
            if sampler.temperature != 0.0 {
                name.push_str(&format!(" --temperature {}", sampler.temperature));
            }
            if sampler.seed != 0 {
                name.push_str(&format!(" --seed {}", sampler.seed));
            }
            name
        }
    };
    if oracle_length {
        name.push_str(" --oracle-length");
    }
    if max_tokens != redraft_runtime::DEFAULT_MAX_TOKENS {
        name.push_str(&format!(" --max-tokens {max_tokens}"));
    }
    if typed > 0 {
        name.push_str(&format!(" --typed {typed}"));
    }
    Setting {
        name,
        sampler: sampler.config(efforts),
        oracle_length,
        max_tokens,
        typed,
    }
}

impl Args {
    /// The settings to run, each effort meaning its preset in `efforts` (the model's); `backend`
    /// names the backend in their names.
    fn settings(&self, backend: Option<&str>, efforts: Efforts) -> anyhow::Result<Vec<Setting>> {
        if self.sweep.is_empty() {
            return Ok(vec![setting(
                &self.sampler,
                efforts,
                self.oracle_length,
                self.max_tokens,
                self.typed,
                backend,
            )]);
        }
        self.sweep
            .iter()
            .map(|spec| {
                let parsed =
                    SweepSetting::try_parse_from(spec.split_whitespace()).map_err(|e| {
                        anyhow::anyhow!("--sweep {spec:?}: {}", e.render().to_string().trim())
                    })?;
                Ok(setting(
                    &parsed.sampler,
                    efforts,
                    parsed.oracle_length,
                    parsed.max_tokens,
                    parsed.typed,
                    backend,
                ))
            })
            .collect()
    }

    fn select(&self, mut tasks: Vec<Task>) -> Vec<Task> {
        if let Some(limit) = self.limit {
            tasks.truncate(limit);
        }
        match self.sample {
            Some(n) => redraft_eval::rng::sample(tasks, n, self.sample_seed),
            None => tasks,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    check_flags(&args)
        .map_err(|mistake| redraft::flag_error::<Args>("redraft-lab eval", mistake))?;
    // Ctrl-C leaves no program running and no scratch directory (results are whole lines).
    redraft_eval::interrupt::install();
    if let Some(cases) = &args.next_edit {
        let common = next_edit::Common {
            cases,
            model: args.model.model.as_deref(),
            device: args.model.device,
            completions: args.completions.as_deref(),
            out: args.out.as_deref(),
            limit: args.limit,
            sampler: &args.sampler,
        };
        return next_edit::run(common, &args.next);
    }
    let tasks_path = args
        .tasks
        .clone()
        .expect("clap requires --tasks without --next-edit");
    let all = read_tasks(&tasks_path)?;
    if all.is_empty() {
        bail!("{} holds no tasks", tasks_path.display());
    }
    // Checked against the whole task file: a row for a task `--limit` left out is no mistake.
    let from_file = match &args.completions {
        Some(path) => Some((path, run::read_completions(path, &all)?)),
        None => None,
    };
    let tasks = args.select(all);
    let given: Option<HashMap<String, String>> = match from_file {
        Some((path, given)) => {
            check_rows(
                "eval",
                tasks.iter().map(|t| t.task_id.as_str()),
                &given,
                path,
                ("selected tasks", "empty completions"),
            )?;
            Some(given)
        }
        None if args.canonical => Some(
            tasks
                .iter()
                .map(|t| (t.task_id.clone(), t.canonical_solution.clone()))
                .collect(),
        ),
        None => None,
    };
    let languages = tasks
        .iter()
        .map(|t| t.language(args.language))
        .collect::<Result<Vec<_>, _>>()?;
    let executed: BTreeSet<TaskLanguage> = tasks
        .iter()
        .zip(&languages)
        .filter(|(t, _)| t.is_executable())
        .map(|(_, l)| *l)
        .collect();
    let config = ScorerConfig {
        work_dir: args.work_dir.clone(),
        python: args.python.clone(),
        rust_deps: args.rust_deps.clone(),
        timeout: args.timeout_s.map(std::time::Duration::from_secs_f64),
        memory_mb: Some(args.memory_mb),
        sandbox_read: args.sandbox_read.clone(),
    };
    let executed: Vec<TaskLanguage> = executed.into_iter().collect();
    let scorer = Scorer::new(&config, &executed)?;
    for line in scorer.describe() {
        stderr_line(format_args!("eval: {line}"));
    }
    let jobs = args
        .jobs
        .unwrap_or_else(redraft_eval::parallel::default_jobs);
    let stem = task_file_stem(&tasks_path);
    let tasks_file = tasks_path.display().to_string();
    // What the results depend on besides the source: the task file's bytes and how it is scored.
    let tasks_hash = Some(
        fingerprint::of_input(&tasks_path)
            .with_context(|| format!("hashing the task file {}", tasks_path.display()))?,
    );
    let scoring = Some(ScoringFlags::of(&config, args.language));
    let run = Run {
        tasks: &tasks,
        languages: &languages,
        scorer: &scorer,
        jobs,
        label: stem.clone(),
    };

    let summaries = if let Some(given) = &given {
        let (source, name, completions_hash) = match &args.completions {
            Some(path) => {
                let hash = fingerprint::of_input(path)
                    .with_context(|| format!("hashing the completions {}", path.display()))?;
                (path.display().to_string(), "completions", Some(hash))
            }
            None => ("canonical".to_string(), "canonical", None),
        };
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| Path::new("target/eval").join(format!("{stem}-{name}")));
        let identity = RunIdentity {
            tasks: tasks_file,
            tasks_hash,
            source,
            completions_hash,
            model_fingerprint: None,
            setting: None,
            backend: None,
            scoring,
        };
        let summary = run::evaluate(&run, Completions::Given(given), &identity, &out)?;
        stderr_line(format_args!("eval: results in {}", out.display()));
        vec![summary]
    } else if args.backend.backend.is_some() {
        let backend = connect(&args.backend)?;
        let model = backend.resolve_model(None)?;
        // For tables and directory names: a model's last path part (llama-server lists its file,
        // Hugging Face ids have an owner); run.json keeps the whole name.
        let name = match &model {
            Some(model) => model.rsplit('/').next().unwrap_or(model).to_string(),
            // The server's host and port: never the URL's credentials (the endpoint names
            // none), and no path to nest directories.
            None => {
                let endpoint = backend.endpoint();
                let host = endpoint
                    .split_once("://")
                    .map_or(endpoint, |(_, rest)| rest);
                host.split('/').next().unwrap_or(host).to_string()
            }
        };
        stderr_line(format_args!(
            "eval: backend {} (model {}, template {}, {} context tokens)",
            backend.endpoint(),
            model.as_deref().unwrap_or("not named"),
            backend.config().template,
            backend.config().context_tokens
        ));
        let settings = args.settings(Some(&name), Efforts::BUILT_IN)?;
        let identity = RunIdentity {
            tasks: tasks_file,
            tasks_hash,
            source: backend.endpoint().to_string(),
            completions_hash: None,
            model_fingerprint: None,
            setting: None,
            backend: Filler::Backend(&backend).backend_spec(),
            scoring,
        };
        generate(
            &args,
            &run,
            Filler::Backend(&backend),
            &settings,
            &stem,
            &identity,
        )?
    } else {
        args.settings(None, Efforts::BUILT_IN)?; // a flag mistake is told before the model loads
        let engine = args.model.load()?;
        let settings = args.settings(None, engine.settings().efforts)?;
        let identity = RunIdentity {
            tasks: tasks_file,
            tasks_hash,
            source: engine.dir().display().to_string(),
            completions_hash: None,
            model_fingerprint: Some(model_fingerprint(args.model.model.as_deref(), &engine)?),
            setting: None,
            backend: None,
            scoring,
        };
        generate(
            &args,
            &run,
            Filler::Engine(&engine),
            &settings,
            &stem,
            &identity,
        )?
    };
    redraft::to_stdout(|out| {
        write!(out, "{}", redraft_eval::report::table(&summaries))?;
        for summary in &summaries {
            let bars = redraft_eval::report::bar_table(summary);
            if !bars.is_empty() {
                write!(
                    out,
                    "\nInline-completion confidence bars, `{}`:\n\n{bars}",
                    summary.setting
                )?;
            }
        }
        Ok(())
    })
}

/// What clap cannot check of the flags, as the command line is read: flags for one kind of run
/// given to another, and the backend's URL and timeout.
fn check_flags(args: &Args) -> anyhow::Result<()> {
    if args.next_edit.is_none() {
        if let Some(flag) = args.next.given() {
            bail!("{flag} goes with --next-edit CASES (next-edit suggestions), not --tasks");
        }
    }
    if args.backend.backend.is_some() {
        args.backend.config()?;
        for spec in &args.sweep {
            if let Some(flag) = engine_only_flag(spec) {
                bail!("--sweep {spec:?}: {flag} is a local-engine flag; a --backend is sent only --temperature, --seed, --max-tokens and --oracle-length");
            }
        }
    }
    Ok(())
}

/// The fingerprint of the model `--model` named (`None`: the embedded default), loaded as
/// `engine`, that ties a run's results to it ([`redraft_eval::fingerprint`]).
pub(crate) fn model_fingerprint(model: Option<&Path>, engine: &Engine) -> anyhow::Result<String> {
    Ok(match model {
        None => fingerprint::of_files(&redraft_runtime::default_model::FILES),
        Some(_) => fingerprint::of_path(engine.dir())
            .with_context(|| format!("fingerprinting the model {}", engine.dir().display()))?,
    })
}

/// The backend client of `--backend` and its flags.
fn connect(flags: &BackendArgs) -> anyhow::Result<Backend> {
    let config = flags.config()?.expect("called with --backend");
    Ok(Backend::new(config)?)
}

/// The first engine-only decoding flag in a `--sweep` value, as written.
fn engine_only_flag(spec: &str) -> Option<&str> {
    spec.split_whitespace().find(|word| {
        word.strip_prefix("--")
            .map(|flag| flag.split('=').next().unwrap_or(flag).replace('-', "_"))
            .is_some_and(|flag| ENGINE_ONLY.contains(&flag.as_str()))
    })
}

/// Generates and scores under each setting with `filler` (the engine or a backend), each run
/// `identity` with its setting: one setting into `--out` (default
/// `target/eval/<tasks>-<setting>`), a sweep into one directory per setting.
fn generate(
    args: &Args,
    run: &Run<'_>,
    filler: Filler<'_>,
    settings: &[Setting],
    stem: &str,
    identity: &RunIdentity,
) -> anyhow::Result<Vec<redraft_eval::report::Summary>> {
    if args.sweep.is_empty() {
        let setting = &settings[0];
        let out = args.out.clone().unwrap_or_else(|| {
            Path::new("target/eval").join(format!("{stem}-{}", run::setting_slug(setting)))
        });
        let identity = RunIdentity {
            setting: Some(setting.clone()),
            ..identity.clone()
        };
        let completions = Completions::Generate { filler, setting };
        let summary = run::evaluate(run, completions, &identity, &out)
            .with_context(|| format!("evaluating into {}", out.display()))?;
        stderr_line(format_args!("eval: results in {}", out.display()));
        Ok(vec![summary])
    } else {
        let out = args.out.clone().unwrap_or_else(|| {
            let kind = match filler {
                Filler::Engine(_) => "sweep",
                Filler::Backend(_) => "backend-sweep",
            };
            Path::new("target/eval").join(format!("{stem}-{kind}"))
        });
        let summaries = run::sweep(run, filler, settings, identity, &out)?;
        stderr_line(format_args!("eval: results in {}", out.display()));
        Ok(summaries)
    }
}

/// `HumanEval-SingleLineInfilling.jsonl.gz` -> `HumanEval-SingleLineInfilling`.
fn task_file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(|| "tasks".into(), |n| n.to_string_lossy().into_owned());
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.strip_suffix(".jsonl").unwrap_or(name).to_string()
}

/// A completions file against the items selected (`ids`): an item without a row is scored as
/// nothing suggested (`what.1`), not left out, so other systems are scored over the same items
/// as the model and the baselines; a file with a row for none of them is an error (the wrong
/// file), one missing some says how many.
fn check_rows<'a, V>(
    command: &str,
    ids: impl ExactSizeIterator<Item = &'a str>,
    given: &HashMap<String, V>,
    path: &Path,
    what: (&str, &str),
) -> anyhow::Result<()> {
    let selected = ids.len();
    let missing = ids.filter(|id| !given.contains_key(*id)).count();
    if missing == selected {
        bail!("{} has no completion for the {}", path.display(), what.0);
    }
    if missing > 0 {
        stderr_line(format_args!(
            "{command}: {missing} of {selected} {} have no completion in {}; scored as {}",
            what.0,
            path.display(),
            what.1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Args as _;

    use super::*;

    /// Every decoding flag is refused where no model runs: a flag added to [`SamplerArgs`] and
    /// left out of both lists would be accepted there and change nothing.
    #[test]
    fn every_decoding_flag_is_listed_for_the_runs_without_a_model() {
        let decoding = SamplerArgs::augment_args(clap::Command::new("eval"));
        let unlisted: Vec<&str> = decoding
            .get_arguments()
            .map(|arg| arg.get_id().as_str())
            .filter(|id| !ENGINE_ONLY.contains(id) && !MODEL_RUN.contains(id))
            .collect();
        assert_eq!(unlisted, Vec::<&str>::new());
    }
}
