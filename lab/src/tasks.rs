//! `redraft-lab tasks` (`bench build` before): benchmark task sets for `redraft eval`, cut from HumanEvalPack-Rust
//! (or any JSONL of Rust solutions with tests) or from any Rust source tree.

use std::path::PathBuf;

use anyhow::bail;
use redraft_eval::build::from_dir::{self, FromDirOptions};
use redraft_eval::build::humanevalpack::Kind;
use redraft_eval::build::BuildOptions;
use redraft_eval::score::{Scorer, ScorerConfig};
use redraft_eval::task::{write_jsonl, TaskLanguage};
use redraft_runtime::sampler_args::parse_at_least_one;
use redraft_runtime::stderr_line;

/// What to cut tasks from.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Source {
    /// Whole Rust solutions with tests (`task_id`, `prompt`, `canonical_solution`, `test`).
    HumanevalpackRust,
}

#[derive(clap::Args)]
pub struct Args {
    /// A benchmark of whole solutions to cut.
    #[arg(value_enum, required_unless_present = "from_dir")]
    source: Option<Source>,
    /// Cut match-scored tasks from the Rust sources under this directory instead.
    #[arg(long, conflicts_with = "source")]
    from_dir: Option<PathBuf>,
    /// The solutions (humanevalpack-rust). The default is the copy kept in the repository, a
    /// path relative to the current directory: run from the repository root, or pass --input.
    #[arg(
        long,
        default_value = "benchmarks/humanevalpack-rust/humanevalpack.jsonl"
    )]
    input: PathBuf,
    /// Output: a directory for humanevalpack-rust (one file per set, plus build.json); a
    /// .jsonl or .jsonl.gz file for --from-dir. Default: target/benchmarks(/from-dir.jsonl.gz).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Task sets to build (humanevalpack-rust): single-line, multi-line (~13k programs to
    /// check, about half an hour on 2 cores), random-span, random-span-light.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "single-line,multi-line,random-span,random-span-light"
    )]
    sets: Vec<String>,
    /// Seed for random spans and --from-dir samples.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write plain .jsonl instead of .jsonl.gz (humanevalpack-rust).
    #[arg(long)]
    plain: bool,
    /// Scoring workers for the checks (default: the machine's cores).
    #[arg(long, value_parser = parse_at_least_one)]
    jobs: Option<usize>,
    /// deps.json of scripts/setup-eval, or its directory (default: $REDRAFT_EVAL_DEPS, else
    /// target/eval-deps of the source tree this binary was built from, wherever it runs).
    #[arg(long)]
    rust_deps: Option<PathBuf>,
    /// --from-dir: tasks sampled per file.
    #[arg(long, default_value_t = 8, value_parser = parse_at_least_one)]
    per_file: usize,
    /// A seeded sample: --from-dir, at most this many tasks overall; humanevalpack-rust, at most
    /// this many cuts per set, sampled before the empty-middle check (e.g. 600 makes the
    /// multi-line set a few minutes to build instead of half an hour).
    #[arg(long, value_parser = parse_at_least_one)]
    max_tasks: Option<usize>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Ctrl-C leaves no program running and no scratch directory.
    redraft_eval::interrupt::install();
    if let Some(dir) = &args.from_dir {
        let options = FromDirOptions {
            seed: args.seed,
            per_file: args.per_file,
            max_tasks: args.max_tasks,
            ..FromDirOptions::default()
        };
        let tasks = from_dir::build(dir, &options)?;
        let out = args
            .out
            .unwrap_or_else(|| PathBuf::from("target/benchmarks/from-dir.jsonl.gz"));
        let name = out.to_string_lossy();
        if !(name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")) {
            bail!("--out for --from-dir names a .jsonl or .jsonl.gz file, not {name}");
        }
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        write_jsonl(&out, &tasks)?;
        return redraft::to_stdout(|stdout| {
            writeln!(
                stdout,
                "{} tasks from {} -> {}",
                tasks.len(),
                dir.display(),
                out.display()
            )
        });
    }
    let kinds = args
        .sets
        .iter()
        .map(|s| s.parse::<Kind>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<Kind>>>()?;
    if !args.input.is_file() {
        bail!(
            "{} not found: run from the repository root (its benchmarks/ holds the default), or pass --input with HumanEvalPack's Rust humanevalpack.jsonl (or any JSONL of Rust solutions with tests)",
            args.input.display()
        );
    }
    let config = ScorerConfig {
        rust_deps: args.rust_deps.clone(),
        ..ScorerConfig::default()
    };
    let scorer = Scorer::new(&config, &[TaskLanguage::Rust])?;
    let jobs = args
        .jobs
        .unwrap_or_else(redraft_eval::parallel::default_jobs);
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("target/benchmarks"));
    let options = BuildOptions {
        kinds,
        seed: args.seed,
        gzip: !args.plain,
        jobs,
        max_tasks: args.max_tasks,
    };
    let report = redraft_eval::build::humanevalpack(&args.input, &out, &options, &scorer)?;
    for (problem, why) in &report.failing_solutions {
        stderr_line(format_args!(
            "tasks: dropped {problem}: its solution does not pass every time ({why})"
        ));
    }
    redraft::to_stdout(|out| {
        for (name, set) in &report.sets {
            writeln!(
                out,
                "{name}: {} tasks ({} cuts, {} dropped because an empty middle passes) -> {}",
                set.tasks,
                set.candidates,
                set.empty_passes,
                set.file.display()
            )?;
        }
        Ok(())
    })
}
