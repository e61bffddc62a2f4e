//! `redraft tasks`: benchmark task sets in the [`crate::task`] schema.
//!
//! - [`humanevalpack()`] (cutting with [`mod@humanevalpack`]): execution-scored Rust tasks cut from whole solutions with tests;
//! - [`from_dir`]: match-scored tasks cut from any Rust source tree at syntax boundaries.

pub mod from_dir;
pub mod humanevalpack;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::score::{score_all, Outcome, Scorer};
use crate::task::{read_jsonl, write_jsonl, Task, TaskLanguage};
use humanevalpack::{Kind, Problem};

/// Runs of each problem's own solution that must all pass.
pub const SOLUTION_RUNS: usize = 10;

/// What a HumanEvalPack-style build did, written next to the task files as `build.json`.
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    pub input: PathBuf,
    pub seed: u64,
    pub problems: usize,
    /// Problems dropped because their own solution does not pass its tests here every time,
    /// with why.
    pub failing_solutions: BTreeMap<String, String>,
    pub sets: BTreeMap<String, SetReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SetReport {
    pub file: PathBuf,
    pub candidates: usize,
    /// Cuts dropped because the program with an empty middle still passes (random-span-light:
    /// candidates are problems, dropped ones those with no kept span).
    pub empty_passes: usize,
    pub tasks: usize,
}

/// How [`humanevalpack()`] cuts and writes.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub kinds: Vec<Kind>,
    /// Seeds random spans and `max_tasks` samples.
    pub seed: u64,
    /// `.jsonl.gz` instead of `.jsonl`.
    pub gzip: bool,
    /// Scoring workers for the checks.
    pub jobs: usize,
    /// Each set is a seeded sample of at most this many cuts, drawn before the empty-middle
    /// check (so a set may end up smaller): the multi-line set has ~13k cuts to check, a
    /// sample of a few hundred gives a pass@1 within a few points in minutes.
    /// random-span-light picks from the random-span cuts that were checked.
    pub max_tasks: Option<usize>,
}

/// Cuts `options.kinds` from the solutions in `input` into `out` (`<Kind>.jsonl`), checking
/// each problem's own solution and dropping every cut an empty middle passes.
pub fn humanevalpack(
    input: &Path,
    out: &Path,
    options: &BuildOptions,
    scorer: &Scorer,
) -> Result<BuildReport> {
    let BuildOptions {
        ref kinds,
        gzip,
        jobs,
        ..
    } = *options;
    let problems: Vec<Problem> = read_jsonl(input)?;
    if problems.is_empty() {
        return Err(Error::Input {
            path: input.to_path_buf(),
            message: "no problems".into(),
        });
    }
    for problem in &problems {
        if problem.test.trim().is_empty() || problem.canonical_solution.trim().is_empty() {
            return Err(Error::Input {
                path: input.to_path_buf(),
                message: format!(
                    "`{}` needs a `canonical_solution` and a `test`: the builder keeps only cuts the tests can tell apart",
                    problem.task_id
                ),
            });
        }
    }
    // Two problems with one id would give a set with every cut of it twice, which `eval`
    // refuses: said now, before the checks run.
    let mut ids: HashMap<&str, &str> = HashMap::new();
    for problem in &problems {
        if let Some(first) = ids.insert(problem.short_id(), &problem.task_id) {
            return Err(Error::Input {
                path: input.to_path_buf(),
                message: format!(
                    "`{}` and `{first}` would both be cut into tasks `<set>/{}/...`: each problem needs its own id",
                    problem.task_id,
                    problem.short_id()
                ),
            });
        }
    }
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;

    // A solution is a reference only if it passes every time: a test drawing random inputs
    // can make one pass only sometimes (HumanEvalPack's Rust/32 hangs in about half its runs).
    let wholes: Vec<Task> = problems.iter().map(Problem::whole).collect();
    let progress = Progress::new("solutions", wholes.len());
    let verdicts = crate::parallel::map(&wholes, jobs, |whole| {
        let verdict = scorer.score_runs(
            whole,
            TaskLanguage::Rust,
            &whole.canonical_solution,
            SOLUTION_RUNS,
        );
        progress.tick(verdict.as_ref().is_ok_and(|v| v.outcome == Outcome::Pass));
        verdict
    });
    progress.finish();
    let verdicts = verdicts.into_iter().collect::<Result<Vec<_>>>()?;
    let mut failing_solutions = BTreeMap::new();
    let mut good = Vec::new();
    for (problem, verdict) in problems.iter().zip(verdicts) {
        if verdict.outcome == Outcome::Pass {
            good.push(problem);
        } else {
            failing_solutions.insert(
                problem.task_id.clone(),
                format!("{}: {}", verdict.outcome.name(), verdict.detail),
            );
        }
    }

    let mut sets = BTreeMap::new();
    let mut spans: Option<(usize, Vec<Task>, usize)> = None;
    for &kind in kinds.iter() {
        let (candidates, kept, empty_passes) = match kind {
            Kind::RandomSpanLight => {
                if spans.is_none() {
                    spans = Some(keep_failing_empty(
                        scorer,
                        &good,
                        Kind::RandomSpan,
                        options,
                    )?);
                }
                let (_, kept, _) = spans.as_ref().expect("just filled");
                // The first kept span of each problem.
                let mut light: Vec<Task> = Vec::new();
                let mut last_problem = None;
                for task in kept {
                    let problem = problem_of(&task.task_id);
                    if last_problem != Some(problem) {
                        last_problem = Some(problem);
                        light.push(humanevalpack::as_light(task));
                    }
                }
                // One candidate per problem: its first kept span, if any.
                let dropped = good.len() - light.len();
                (good.len(), light, dropped)
            }
            Kind::RandomSpan => {
                let filtered = keep_failing_empty(scorer, &good, kind, options)?;
                spans = Some(filtered.clone());
                filtered
            }
            _ => keep_failing_empty(scorer, &good, kind, options)?,
        };
        let file = out.join(format!(
            "{}.jsonl{}",
            kind.name(),
            if gzip { ".gz" } else { "" }
        ));
        write_jsonl(&file, &kept)?;
        sets.insert(
            kind.name().to_string(),
            SetReport {
                file,
                candidates,
                empty_passes,
                tasks: kept.len(),
            },
        );
    }
    let report = BuildReport {
        input: input.to_path_buf(),
        seed: options.seed,
        problems: problems.len(),
        failing_solutions,
        sets,
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| Error::Invalid(e.to_string()))?;
    crate::task::write_atomic(&out.join("build.json"), json.as_bytes())?;
    Ok(report)
}

/// `RustSingleLine/12/L3` -> `RustSingleLine/12`.
fn problem_of(task_id: &str) -> &str {
    task_id.rsplit_once('/').map_or(task_id, |(head, _)| head)
}

/// (candidates, the cuts an empty middle fails, how many it passed).
fn keep_failing_empty(
    scorer: &Scorer,
    problems: &[&Problem],
    kind: Kind,
    options: &BuildOptions,
) -> Result<(usize, Vec<Task>, usize)> {
    let mut candidates: Vec<Task> = problems
        .iter()
        .flat_map(|p| humanevalpack::candidates(p, kind, options.seed))
        .collect();
    if let Some(n) = options.max_tasks {
        let seed = options.seed ^ crate::rng::fnv1a(kind.name().as_bytes());
        candidates = crate::rng::sample(candidates, n, seed);
    }
    let empty: Vec<(&Task, &str)> = candidates.iter().map(|t| (t, "")).collect();
    let verdicts = score_all(scorer, &empty, options.jobs, kind.name())?;
    let total = candidates.len();
    let kept: Vec<Task> = candidates
        .into_iter()
        .zip(verdicts)
        .filter(|(_, v)| v.outcome != Outcome::Pass)
        .map(|(t, _)| t)
        .collect();
    let dropped = total - kept.len();
    Ok((total, kept, dropped))
}
