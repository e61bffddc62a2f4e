//! One next-edit evaluation: each case's suggestion (from the model, a completions file or a
//! baseline) is scored and appended to `cases.jsonl` as it comes, so a stopped run resumes
//! where it stopped and a different source or setting is refused; at the end the file is
//! rewritten in case order (two runs diff cleanly) and `summary.json` and `summary.md` (the
//! table) written.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use redraft_context::edit::diff;
use serde::{Deserialize, Serialize};

use super::baseline::Baseline;
use super::case::{case_files, NextEditCase};
use super::report::{table, CaseResult, NextEditStats, NextEditSummary};
use super::score::score;
use crate::error::{Error, Result};
use crate::fingerprint;
use crate::progress::Progress;
use crate::run::{check_selection, in_order, resume};
use crate::task::{read_jsonl, write_atomic, write_jsonl};

pub const RESULTS_FILE: &str = "cases.jsonl";
pub const SUMMARY_FILE: &str = "summary.json";
pub const TABLE_FILE: &str = "summary.md";
pub use crate::run::RUN_FILE;

/// The model arm: the one next-edit pipeline (plan -> engine -> edits) that the language
/// server also calls, behind a trait so this crate's runner does not fix its settings.
/// Implemented over [`redraft_suggest::edit::next_edit`] by [`super::model`].
pub trait NextEditModel {
    /// The setting as the user wrote it (`--effort low`): the table's column and part of the
    /// run's identity.
    fn setting(&self) -> String;
    /// The model directory (part of the run's identity).
    fn model(&self) -> String;
    /// A fingerprint of the model's files ([`crate::fingerprint`]; part of the run's
    /// identity: the directory alone does not say which weights it held).
    fn fingerprint(&self) -> String;
    /// The case's excerpt as the model's suggestion leaves it (unchanged: no suggestion).
    fn suggest(&self, case: &NextEditCase) -> Result<Suggestion>;
}

/// What the model suggested for one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// The whole excerpt after the suggested edits.
    pub excerpt: String,
    pub stats: NextEditStats,
}

/// Where suggestions come from.
pub enum NextEditSource<'a> {
    Model(&'a dyn NextEditModel),
    /// Case name -> the excerpt after another system's suggestion (see [`read_completions`]),
    /// and the file it came from.
    Completions {
        file: &'a Path,
        given: &'a HashMap<String, String>,
    },
    Baseline(Baseline),
}

impl NextEditSource<'_> {
    /// The table's column name.
    pub fn setting(&self) -> String {
        match self {
            NextEditSource::Model(model) => model.setting(),
            NextEditSource::Completions { file, .. } => format!("completions {}", file.display()),
            NextEditSource::Baseline(baseline) => baseline.name().to_string(),
        }
    }

    /// What the run's results depend on: the case set at `cases` (its path and its files'
    /// bytes, every case file, whatever `--limit` takes) and this source (a completions file's
    /// bytes too).
    pub fn identity(&self, cases: &Path) -> Result<RunIdentity> {
        let (source, setting, model_fingerprint, completions_hash) = match self {
            NextEditSource::Model(model) => (
                model.model(),
                Some(model.setting()),
                Some(model.fingerprint()),
                None,
            ),
            NextEditSource::Completions { file, .. } => (
                file.display().to_string(),
                None,
                None,
                Some(fingerprint::of_input(file)?),
            ),
            NextEditSource::Baseline(baseline) => {
                (format!("baseline {baseline}"), None, None, None)
            }
        };
        Ok(RunIdentity {
            cases: cases.display().to_string(),
            cases_hash: Some(fingerprint::of_inputs(&case_files(cases)?)?),
            source,
            completions_hash,
            setting,
            model_fingerprint,
        })
    }

    fn suggest(&self, case: &NextEditCase) -> Result<(String, Option<NextEditStats>)> {
        Ok(match self {
            NextEditSource::Model(model) => {
                let suggestion = model.suggest(case)?;
                (suggestion.excerpt, Some(suggestion.stats))
            }
            // A case the file has no row for is no suggestion, as `no-edit` suggests: scored,
            // not left out, so every source is scored over the same cases.
            NextEditSource::Completions { given, .. } => (
                given
                    .get(&case.name)
                    .cloned()
                    .unwrap_or_else(|| case.excerpt.clone()),
                None,
            ),
            NextEditSource::Baseline(baseline) => (baseline.suggest(case), None),
        })
    }
}

/// What identifies a run: a directory holding results of another run is not resumed into.
/// Input files are recorded by path and by a hash of their bytes ([`fingerprint`]): a case or
/// completions file rewritten under the same path is another run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// The case directory or file.
    pub cases: String,
    /// The case files' names and bytes, hashed. Absent from runs before it was kept, which are
    /// then refused.
    #[serde(default)]
    pub cases_hash: Option<String>,
    /// The model directory, the completions file, or `baseline NAME`.
    pub source: String,
    /// The completions file's bytes, hashed, when suggestions come from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions_hash: Option<String>,
    /// The model's setting.
    pub setting: Option<String>,
    /// The model's files ([`crate::fingerprint`]); absent for completions and baselines, and
    /// from runs before it was kept (which are then refused: their model cannot be told).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_fingerprint: Option<String>,
}

/// Evaluates `cases` into `out` (created if needed) and returns the summary. Cases already in
/// `out/cases.jsonl` are not redone.
pub fn evaluate(
    cases: &[NextEditCase],
    source: &NextEditSource<'_>,
    identity: &RunIdentity,
    out: &Path,
) -> Result<NextEditSummary> {
    crate::run::make_out(out)?;
    let results_path = out.join(RESULTS_FILE);
    let mut previous = resume(out, RESULTS_FILE, identity, |r: &CaseResult| &r.case)?;
    let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    check_selection(out, &names, &previous, "cases")?;
    let label = source.setting();
    let done_before = cases
        .iter()
        .filter(|c| previous.contains_key(&c.name))
        .count();
    if done_before > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "eval --next-edit: resuming, {done_before} of {} cases already done",
            cases.len()
        );
    }
    let exact_before = cases
        .iter()
        .filter_map(|c| previous.get(&c.name))
        .filter(|r| r.exact)
        .count();
    let progress = Progress::resuming(&label, cases.len(), done_before, exact_before);
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&results_path)
        .map_err(|e| Error::io(&results_path, e))?;
    let todo: Vec<&NextEditCase> = cases
        .iter()
        .filter(|c| !previous.contains_key(&c.name))
        .collect();
    for case in todo {
        let (actual, generation) = source.suggest(case)?;
        let scored = score(case, &actual);
        let suggestion = diff::unified_diff(
            &case.path,
            &case.excerpt,
            super::score::normalise(case, &actual),
            3,
        );
        let result = CaseResult::new(&case.name, case.no_edit, suggestion, scored, generation);
        let line = serde_json::to_string(&result).expect("results serialise");
        writeln!(file, "{line}")
            .and_then(|()| file.flush())
            .map_err(|e| Error::io(&results_path, e))?;
        progress.tick(result.exact);
        previous.insert(result.case.clone(), result);
    }
    progress.finish();
    drop(file);
    let ordered = in_order(&names, &previous);
    write_jsonl(&results_path, &ordered)?;
    let summary = NextEditSummary::of(&label, &ordered);
    let json = serde_json::to_string_pretty(&summary).map_err(|e| Error::Invalid(e.to_string()))?;
    write_atomic(&out.join(SUMMARY_FILE), json.as_bytes())?;
    write_atomic(
        &out.join(TABLE_FILE),
        table(std::slice::from_ref(&summary)).as_bytes(),
    )?;
    Ok(summary)
}

/// Reads `--completions`: JSONL with one row per case, `case` (its name) and either
/// `excerpt` (the whole excerpt after the suggestion) or `region` (the rewritten text of
/// `range`, a `[start, end]` byte range of the excerpt; without `range`, the whole excerpt).
/// Every name must be one of `cases` (the whole case set, not the cases `--limit` kept: a row
/// of a case not run is not scored, not a mistake), once. Returns case name -> excerpt after
/// the suggestion; a case without a row is scored as no suggestion ([`NextEditSource`]).
pub fn read_completions(path: &Path, cases: &[NextEditCase]) -> Result<HashMap<String, String>> {
    #[derive(Deserialize)]
    struct Row {
        case: String,
        excerpt: Option<String>,
        region: Option<String>,
        range: Option<(usize, usize)>,
    }
    let rows: Vec<Row> = read_jsonl(path)?;
    let by_name: HashMap<&str, &NextEditCase> =
        cases.iter().map(|c| (c.name.as_str(), c)).collect();
    let bad = |message: String| Error::Input {
        path: path.to_path_buf(),
        message,
    };
    let mut given = HashMap::new();
    for row in rows {
        let case = by_name.get(row.case.as_str()).ok_or_else(|| {
            bad(format!(
                "a completion for `{}`, which is not a case here: are these completions for these cases?",
                row.case
            ))
        })?;
        let excerpt = match (row.excerpt, row.region, row.range) {
            (Some(excerpt), None, None) => excerpt,
            (None, Some(region), None) => region,
            (None, Some(region), Some((start, end))) => {
                let text = &case.excerpt;
                if start > end
                    || end > text.len()
                    || !text.is_char_boundary(start)
                    || !text.is_char_boundary(end)
                {
                    return Err(bad(format!(
                        "`{}`: range [{start}, {end}] is not a byte range of the excerpt ({} bytes)",
                        row.case,
                        text.len()
                    )));
                }
                format!("{}{region}{}", &text[..start], &text[end..])
            }
            _ => {
                return Err(bad(format!(
                    "`{}`: give `excerpt`, or `region` (with an optional `range`), not both",
                    row.case
                )))
            }
        };
        if given.insert(row.case.clone(), excerpt).is_some() {
            return Err(bad(format!(
                "two completions for `{}`: one suggestion per case is what is scored",
                row.case
            )));
        }
    }
    Ok(given)
}
