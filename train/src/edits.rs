//! Next-edit training data: [`EditCase`]s (recent edits, the file with them applied, the cursor,
//! the edit that comes next or none) cut from the corpus's crates.
//!
//! - [`versions`]: real edits. Earlier published versions of the corpus's own crates (the same
//!   crates, the same licence filter, the same train/validation split; fetched with cargo), each
//!   file paired with the next version's, cut by [`redraft_context::edit::cut::cut_versions`].
//! - [`synthetic`]: edits made up from the corpus's code with tree-sitter (a rename carried to
//!   the other uses, a parameter or field added and its call sites or initialisers updated,
//!   `.unwrap()` turned into `?`, a repeated change applied once more, a new enum variant and its
//!   match arms). Seeded, deterministic.
//! - No-edit cases (target `None`) come from both: a group of real changes with nothing after
//!   it, a synthetic edit already fully applied.
//!
//! Kept apart from what measures the model, as the corpus is:
//! - No case is made from a file that shares a passage with the held-out crates' code
//!   ([`corpus::HeldOutCode`], the corpus's own rule: a run of 100 code tokens): the corpus
//!   drops such files, but the earlier versions are fetched afterwards, and a crate that copied
//!   held-out code may have dropped the copy since. A version pair is dropped when either file
//!   shares one (`versions/held_out_passage`, the files listed with their version).
//! - No training case makes a change a validation case makes ([`EditRecord::change`]: the
//!   same lines, and the ones above and below, before and after): the training copy is dropped
//!   (`.../validation_change`), so validation stays what it was and measures no change training
//!   taught verbatim, while training, which has cases to spare, loses a few. The validation
//!   cases are the build's own and those of [`EditsOptions::validation_cases`] (a build of the
//!   validation crates alone, as `scripts/build-pack` makes).
//!
//! [`build`] writes [`TRAIN_FILE`] and [`VALID_FILE`] (JSON Lines of [`EditRecord`], split by
//! crate as the corpus is, so no validation crate's edits are in training) and
//! [`MANIFEST_FILE`] ([`EditsManifest`]: counts per kind and split, versions used and skipped,
//! drops by reason). A case's text is the file cut to whole lines around the cursor and target
//! ([`EditsOptions::excerpt_lines`]; the model sees only a few lines beyond the region). The
//! same corpus, downloads and options give byte-identical files.

pub mod synthetic;
pub mod versions;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use redraft_context::edit::cut::{CutOptions, EditCase};
use redraft_context::edit::{HistoryEdit, TextEdit};
use serde::{Deserialize, Serialize};

use crate::corpus::{
    self, CorpusError, CorpusManifest, CorpusOptions, CorpusRecord, HeldOutCode, Split,
};

/// Training cases, JSON Lines of [`EditRecord`].
pub const TRAIN_FILE: &str = "edits-train.jsonl";
/// Validation cases (the corpus's validation crates), JSON Lines of [`EditRecord`].
pub const VALID_FILE: &str = "edits-valid.jsonl";
/// The [`EditsManifest`].
pub const MANIFEST_FILE: &str = "edits-manifest.json";

/// Where a case comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditKind {
    /// Two published versions of a crate.
    Versions,
    /// A local renamed at its declaration; its other uses follow.
    Rename,
    /// A parameter added to a fn; its call sites follow.
    AddParameter,
    /// A field added to a struct; its initialisers follow.
    AddField,
    /// `.unwrap()` turned into `?` in a fn returning `Result`; the next one follows.
    UnwrapToTry,
    /// The same change made to similar lines in a run; the next line follows.
    RepeatPattern,
    /// A variant added to an enum; the match arms for it follow.
    EnumVariant,
}

impl EditKind {
    /// The kind as JSON and drop reasons name it.
    pub fn name(self) -> &'static str {
        match self {
            EditKind::Versions => "versions",
            EditKind::Rename => "rename",
            EditKind::AddParameter => "add_parameter",
            EditKind::AddField => "add_field",
            EditKind::UnwrapToTry => "unwrap_to_try",
            EditKind::RepeatPattern => "repeat_pattern",
            EditKind::EnumVariant => "enum_variant",
        }
    }

    /// Where the kind's drop reasons are tallied in [`EditsManifest::dropped`].
    fn drop_prefix(self) -> String {
        match self {
            EditKind::Versions => "versions".to_string(),
            kind => format!("synthetic/{}", kind.name()),
        }
    }

    pub const ALL: [EditKind; 7] = [
        EditKind::Versions,
        EditKind::Rename,
        EditKind::AddParameter,
        EditKind::AddField,
        EditKind::UnwrapToTry,
        EditKind::RepeatPattern,
        EditKind::EnumVariant,
    ];
}

/// One line of [`TRAIN_FILE`] / [`VALID_FILE`]: an [`EditCase`] and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditRecord {
    pub kind: EditKind,
    #[serde(rename = "crate")]
    pub krate: String,
    /// The version whose code this is (for [`EditKind::Versions`], the newer one).
    pub version: String,
    /// For [`EditKind::Versions`], the older version the edits start from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    pub path: String,
    /// The file with the history applied: whole lines around the cursor and the target (see
    /// [`EditsOptions::excerpt_lines`]), starting at line `excerpt_line` (0-based) of the file.
    pub text: String,
    #[serde(default)]
    pub excerpt_line: usize,
    /// Byte offset in `text`.
    pub cursor: usize,
    /// Oldest first.
    pub history: Vec<HistoryRecord>,
    /// `None`: the history is complete, nothing follows.
    pub target: Option<TargetRecord>,
}

/// [`HistoryEdit`] as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    pub path: String,
    pub old: String,
    pub new: String,
}

/// The change a case asks for as it reads in the code ([`EditRecord::change`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Change {
    pub before: String,
    pub after: String,
}

/// [`TextEdit`] as JSON: `text[start..end]` becomes `new_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    pub start: usize,
    pub end: usize,
    pub new_text: String,
}

impl EditRecord {
    pub fn new(kind: EditKind, krate: &str, version: &str, case: EditCase) -> EditRecord {
        EditRecord {
            kind,
            krate: krate.to_string(),
            version: version.to_string(),
            from_version: None,
            path: case.path,
            text: case.text,
            excerpt_line: 0,
            cursor: case.cursor,
            history: case
                .history
                .into_iter()
                .map(|edit| HistoryRecord {
                    path: edit.path,
                    old: edit.old,
                    new: edit.new,
                })
                .collect(),
            target: case.target.map(|edit| TargetRecord {
                start: edit.range.start,
                end: edit.range.end,
                new_text: edit.new_text,
            }),
        }
    }

    /// Cuts `text` down to whole lines from `lines` above the cursor's line to `lines` below
    /// the cursor's or the target's last line, whichever is lower; offsets follow.
    pub fn trim_to_excerpt(&mut self, lines: usize) {
        let line_of = |offset: usize| self.text[..offset].matches('\n').count();
        let cursor_line = line_of(self.cursor);
        let last_line = self
            .target
            .as_ref()
            .map_or(cursor_line, |t| line_of(t.end).max(cursor_line));
        let first = cursor_line.saturating_sub(lines);
        let starts: Vec<usize> = std::iter::once(0)
            .chain(self.text.match_indices('\n').map(|(at, _)| at + 1))
            .collect();
        let start = starts[first.min(starts.len() - 1)];
        let end = starts
            .get(last_line + lines + 1)
            .copied()
            .unwrap_or(self.text.len());
        self.text = self.text[start..end].to_string();
        self.cursor -= start;
        if let Some(target) = &mut self.target {
            target.start -= start;
            target.end -= start;
        }
        self.excerpt_line += first.min(starts.len() - 1);
    }

    /// The change the case asks for, as it reads in the code: the lines its target touches
    /// and one line on either side, before and after the target is applied, whitespace runs
    /// read as one space; `None` for a no-edit case. Two cases with the same change make the same
    /// edit in the same code, whatever their histories, excerpts and files: one whose text is
    /// known can be answered from memory. The target's lines alone would not do: `x` becoming
    /// `x_out`, `.unwrap()` becoming `?` are every crate's, and a line either side already
    /// tells two crates apart (131 of the next-edit data's 3,223 validation cases change a line
    /// as a training case does, 4 with the line either side too, none with two lines).
    pub fn change(&self) -> Option<Change> {
        let target = self.target.as_ref()?;
        let text = self.text.as_str();
        let line_start = |at: usize| text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line_end = |at: usize| text[at..].find('\n').map_or(text.len(), |i| at + i);
        let first = line_start(target.start);
        let start = first.checked_sub(1).map_or(0, line_start);
        let last = line_end(target.end);
        let end = if last < text.len() {
            line_end(last + 1)
        } else {
            last
        };
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let after = [
            &text[start..target.start],
            target.new_text.as_str(),
            &text[target.end..end],
        ]
        .concat();
        Some(Change {
            before: words(&text[start..end]),
            after: words(&after),
        })
    }

    /// The case, as `redraft_context` has it.
    pub fn case(&self) -> EditCase {
        EditCase {
            path: self.path.clone(),
            text: self.text.clone(),
            cursor: self.cursor,
            history: self
                .history
                .iter()
                .map(|edit| HistoryEdit {
                    path: edit.path.clone(),
                    old: edit.old.clone(),
                    new: edit.new.clone(),
                })
                .collect(),
            target: self.target.as_ref().map(|edit| TextEdit {
                range: edit.start..edit.end,
                new_text: edit.new_text.clone(),
            }),
        }
    }
}

/// Errors of next-edit data building and reading.
#[derive(Debug, thiserror::Error)]
pub enum EditsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}: not an edit case: {message}")]
    BadRecord {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}:{line}: the case's cursor or target is not on a char boundary of its text")]
    BadOffsets { path: PathBuf, line: usize },
    #[error("{path} is not a corpus manifest ({message}): pass the directory build_corpus wrote")]
    BadManifest { path: PathBuf, message: String },
    #[error("cannot run cargo ({command}): {source}; is cargo on PATH?")]
    Cargo {
        command: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Corpus(#[from] CorpusError),
}

/// Result of next-edit data building.
pub type Result<T, E = EditsError> = std::result::Result<T, E>;

/// Reads a [`TRAIN_FILE`] or [`VALID_FILE`] with where each case came from.
pub fn read_edit_records(path: &Path) -> Result<Vec<EditRecord>> {
    let read_error = |source| EditsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(read_error)?;
    let mut records = Vec::new();
    for (at, line) in io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read_error)?;
        if line.trim().is_empty() {
            continue;
        }
        let record: EditRecord =
            serde_json::from_str(&line).map_err(|e| EditsError::BadRecord {
                path: path.to_path_buf(),
                line: at + 1,
                message: e.to_string(),
            })?;
        let on_boundary = |offset: usize| record.text.is_char_boundary(offset);
        let target_ok = record
            .target
            .as_ref()
            .is_none_or(|t| t.start <= t.end && on_boundary(t.start) && on_boundary(t.end));
        if !on_boundary(record.cursor) || !target_ok {
            return Err(EditsError::BadOffsets {
                path: path.to_path_buf(),
                line: at + 1,
            });
        }
        records.push(record);
    }
    Ok(records)
}

/// Reads a [`TRAIN_FILE`] or [`VALID_FILE`]: the cases alone.
pub fn read_edit_cases(path: &Path) -> Result<Vec<EditCase>> {
    Ok(read_edit_records(path)?
        .iter()
        .map(EditRecord::case)
        .collect())
}

/// What to build from.
#[derive(Debug, Clone)]
pub struct EditsOptions {
    /// A directory [`corpus::build`] wrote (its manifest and splits).
    pub corpus: PathBuf,
    /// Earlier versions per crate to fetch and pair (0: synthetic cases only).
    pub versions: usize,
    /// Where scratch manifests and their lockfiles live (a rerun reuses their resolutions);
    /// default `<out>/versions-work`.
    pub work_dir: Option<PathBuf>,
    /// `CARGO_HOME` for the downloads; default: cargo's own (`~/.cargo`).
    pub cargo_home: Option<PathBuf>,
    /// Only crates whose name is listed (all when empty): for tests and trials.
    pub only_crates: Vec<String>,
    pub cut: CutOptions,
    pub synthetic: synthetic::SyntheticOptions,
    /// Lines of the file kept above the cursor and below the cursor or target (the model sees
    /// a few lines on either side of the region); `None` keeps whole files.
    pub excerpt_lines: Option<usize>,
    /// The corpus's sources (its sources, whole sources and lockfiles; the rest is not read),
    /// where the held-out crates' code is read from: no case is made from a file sharing a
    /// passage with it. `None` checks nothing (the manifest's `held_out_files` says 0).
    pub held_out: Option<CorpusOptions>,
    /// Validation cases of other builds ([`VALID_FILE`]s): no training case makes one of their
    /// changes, nor one of this build's own validation cases' ([`EditRecord::change`]).
    pub validation_cases: Vec<PathBuf>,
}

impl EditsOptions {
    pub fn new(corpus: impl Into<PathBuf>) -> EditsOptions {
        EditsOptions {
            corpus: corpus.into(),
            versions: 4,
            work_dir: None,
            cargo_home: None,
            only_crates: Vec::new(),
            cut: CutOptions::default(),
            synthetic: synthetic::SyntheticOptions::default(),
            excerpt_lines: Some(40),
            held_out: None,
            validation_cases: Vec::new(),
        }
    }
}

/// Cases with and without a target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseCounts {
    pub edit: usize,
    pub no_edit: usize,
}

/// Everything about a build; written as [`MANIFEST_FILE`]. No paths or timings, so the same
/// inputs give the same manifest anywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditsManifest {
    /// The corpus's holdout settings, which decide the split.
    pub holdout_fraction: f64,
    pub holdout_seed: u64,
    pub synthetic_seed: u64,
    /// Per split, per kind.
    pub counts: BTreeMap<Split, BTreeMap<EditKind, CaseCounts>>,
    /// Changes or opportunities not made into cases, by reason (`versions/...` from real
    /// version pairs, `synthetic/...` from made-up edits). The cutter's reasons count changes;
    /// `held_out_passage` (a file sharing a passage with held-out code) and
    /// `validation_change` (a training case making a validation case's change) count cases.
    pub dropped: BTreeMap<String, usize>,
    /// Held-out files whose code no case's file may share a passage of
    /// [`corpus::HELD_OUT_PASSAGE_TOKENS`] with; 0: not checked.
    #[serde(default)]
    pub held_out_files: usize,
    /// Different changes of validation cases ([`EditRecord::change`]) training cases were
    /// checked against.
    #[serde(default)]
    pub validation_changes: usize,
    /// Per corpus crate: the versions paired and why the chain stopped.
    pub versions: Vec<versions::CrateVersions>,
}

/// What [`build`] did, for the caller's summary.
#[derive(Debug, Clone)]
pub struct EditsReport {
    pub manifest: EditsManifest,
    /// Seconds spent resolving and fetching versions with cargo.
    pub fetch_seconds: f64,
    /// Bytes of the `.crate` files of the earlier versions used.
    pub crate_bytes: u64,
}

/// Builds the next-edit data from `options.corpus` into `out_dir` (created if needed).
pub fn build(options: &EditsOptions, out_dir: &Path) -> Result<EditsReport> {
    let manifest_path = options.corpus.join(corpus::MANIFEST_FILE);
    let corpus_manifest: CorpusManifest =
        serde_json::from_str(&fs::read_to_string(&manifest_path).map_err(|source| {
            EditsError::Read {
                path: manifest_path.clone(),
                source,
            }
        })?)
        .map_err(|e| EditsError::BadManifest {
            path: manifest_path.clone(),
            message: e.to_string(),
        })?;
    let wanted = |name: &str| {
        options.only_crates.is_empty() || options.only_crates.iter().any(|c| c == name)
    };
    let mut records_by_crate: BTreeMap<String, Vec<CorpusRecord>> = BTreeMap::new();
    for file in [corpus::TRAIN_FILE, corpus::VALID_FILE] {
        for record in read_corpus_records(&options.corpus.join(file))? {
            if wanted(&record.krate) {
                records_by_crate
                    .entry(record.krate.clone())
                    .or_default()
                    .push(record);
            }
        }
    }
    let crates: Vec<_> = corpus_manifest
        .crates
        .iter()
        .filter(|c| wanted(&c.name))
        .cloned()
        .collect();
    let split_of: BTreeMap<&str, Split> =
        crates.iter().map(|c| (c.name.as_str(), c.split)).collect();

    let held_out = match &options.held_out {
        Some(sources) => HeldOutCode::read(sources)?,
        None => HeldOutCode::none(),
    };
    let mut dropped = BTreeMap::new();
    let mut records: Vec<EditRecord> = Vec::new();

    let work_dir = options
        .work_dir
        .clone()
        .unwrap_or_else(|| out_dir.join("versions-work"));
    let real = versions::build(
        &crates,
        &records_by_crate,
        &held_out,
        &versions::VersionsOptions {
            versions: options.versions,
            work_dir,
            cargo_home: options.cargo_home.clone(),
            max_file_bytes: corpus_manifest.max_file_bytes,
            excluded_crates: corpus_manifest.excluded_crates.clone(),
            cut: options.cut.clone(),
        },
    )?;
    for (reason, count) in real.dropped {
        *dropped.entry(format!("versions/{reason}")).or_default() += count;
    }
    records.extend(real.records);

    for (krate, files) in &records_by_crate {
        for file in files {
            let made = synthetic::cases(
                &file.path,
                &file.text,
                &format!("{krate}/{}", file.path),
                &options.synthetic,
                &options.cut,
            );
            for (reason, count) in made.dropped {
                *dropped.entry(format!("synthetic/{reason}")).or_default() += count;
            }
            // The corpus dropped files sharing a passage already, against the same crates when
            // it was built from the same sources: this holds for one built otherwise.
            if held_out.shared_passage(&file.text).is_some() {
                *dropped
                    .entry("synthetic/held_out_passage".to_string())
                    .or_default() += made.cases.len();
                continue;
            }
            records.extend(
                made.cases
                    .into_iter()
                    .map(|(kind, case)| EditRecord::new(kind, krate, &file.version, case)),
            );
        }
    }

    let (mut train, mut valid) = (Vec::new(), Vec::new());
    for mut record in records {
        if let Some(lines) = options.excerpt_lines {
            record.trim_to_excerpt(lines);
        }
        match split_of.get(record.krate.as_str()) {
            Some(Split::Valid) => valid.push(record),
            Some(Split::Train) | None => train.push(record),
        }
    }
    let mut validation_changes: BTreeSet<Change> =
        valid.iter().filter_map(EditRecord::change).collect();
    for path in &options.validation_cases {
        validation_changes.extend(
            read_edit_records(path)?
                .iter()
                .filter_map(EditRecord::change),
        );
    }
    train.retain(|record| {
        let taught = record
            .change()
            .is_some_and(|change| validation_changes.contains(&change));
        if taught {
            let reason = format!("{}/validation_change", record.kind.drop_prefix());
            *dropped.entry(reason).or_default() += 1;
        }
        !taught
    });
    let mut counts: BTreeMap<Split, BTreeMap<EditKind, CaseCounts>> = BTreeMap::new();
    for (split, records) in [(Split::Train, &train), (Split::Valid, &valid)] {
        for record in records.iter() {
            let count = counts
                .entry(split)
                .or_default()
                .entry(record.kind)
                .or_default();
            if record.target.is_some() {
                count.edit += 1;
            } else {
                count.no_edit += 1;
            }
        }
    }
    fs::create_dir_all(out_dir).map_err(|source| EditsError::Write {
        path: out_dir.to_path_buf(),
        source,
    })?;
    write_records(&out_dir.join(TRAIN_FILE), &train)?;
    write_records(&out_dir.join(VALID_FILE), &valid)?;
    let manifest = EditsManifest {
        holdout_fraction: corpus_manifest.holdout_fraction,
        holdout_seed: corpus_manifest.seed,
        synthetic_seed: options.synthetic.seed,
        counts,
        dropped,
        held_out_files: held_out.files(),
        validation_changes: validation_changes.len(),
        versions: real.crates,
    };
    let path = out_dir.join(MANIFEST_FILE);
    let mut json = serde_json::to_string_pretty(&manifest).expect("the manifest serialises");
    json.push('\n');
    fs::write(&path, json).map_err(|source| EditsError::Write { path, source })?;
    Ok(EditsReport {
        manifest,
        fetch_seconds: real.fetch_seconds,
        crate_bytes: real.crate_bytes,
    })
}

fn read_corpus_records(path: &Path) -> Result<Vec<CorpusRecord>> {
    let read_error = |source| EditsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = fs::File::open(path).map_err(read_error)?;
    let mut records = Vec::new();
    for (at, line) in io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read_error)?;
        if line.trim().is_empty() {
            continue;
        }
        records.push(
            serde_json::from_str(&line).map_err(|e| EditsError::BadRecord {
                path: path.to_path_buf(),
                line: at + 1,
                message: e.to_string(),
            })?,
        );
    }
    Ok(records)
}

fn write_records(path: &Path, records: &[EditRecord]) -> Result<()> {
    let write_error = |source| EditsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut out = BufWriter::new(fs::File::create(path).map_err(write_error)?);
    for record in records {
        serde_json::to_writer(&mut out, record).expect("records serialise");
        out.write_all(b"\n").map_err(write_error)?;
    }
    out.flush().map_err(write_error)
}
