//! Training corpus for redraft's own code model: hand-written, MIT / Apache-2.0 Rust taken from
//! unpacked crate sources, deduplicated (exactly and approximately), and split into train and
//! validation by whole crates.
//!
//! Two kinds of source ([`CorpusOptions`]): [`CorpusOptions::sources`], such as
//! `~/.cargo/registry/src/*/` where `cargo fetch` unpacks crates, filtered by
//! [`CorpusOptions::lockfiles`] so the corpus does not depend on whatever else a machine once
//! unpacked; and [`CorpusOptions::whole_sources`], fixed snapshots taken whole, such as Debian's
//! `usr/share/cargo/registry` (`scripts/fetch-corpus-sources` fetches both).
//!
//! [`build`] writes four files to the output directory:
//! - [`TRAIN_FILE`] and [`VALID_FILE`]: JSON Lines, one [`CorpusRecord`] per source file, sorted
//!   by crate then path;
//! - [`MANIFEST_FILE`]: the [`CorpusManifest`]: every crate used (name, version, licence, split,
//!   files, bytes), every crate and file dropped with the reason, and the totals;
//! - [`MANIFEST_TSV_FILE`]: one row per crate used, small enough to commit.
//!
//! The same sources and options give byte-identical files. What is dropped, in order: crates of
//! [`CorpusOptions::sources`] not pinned by the lockfiles; every version of the crates reserved
//! for held-out measurement ([`HELD_OUT_CRATES`], whatever the options say); older versions of a
//! crate (across all sources); crates matching [`CorpusOptions::excluded_crates`] (the
//! repositories the benchmarks come from) or [`CorpusOptions::generated_crates`] (bindgen-style
//! bindings); crates whose licence has no MIT or Apache-2.0 alternative. Then per file the
//! [`FileDropReason`]s: paths (vendored, build output, a distribution's `debian/` packaging,
//! generated), size and content (generated markers, data tables), and last copies: files the
//! same as, or near copies of (MinHash over token 5-grams, see `near_duplicates`), a file kept
//! before them, and files sharing a passage of [`HELD_OUT_PASSAGE_TOKENS`] code tokens with a
//! held-out crate's file (see `held_out_passages`).
//!
//! Files claim their text in a fixed order: the held-out crates' files first (never written, so
//! that a vendored copy of one, or of a passage of one, cannot leak it), then training crates',
//! then validation crates'.
//! Validation holds out whole crate families ([`split_for`]), so no validation file is a copy or
//! near copy of a training one. Sources that are, or lead into, benchmark data (`benchmarks/`,
//! `*humaneval*`) are refused outright.
//!
//! Files are read, filtered and signed in parallel (rayon, see `read`), a batch of crates at a
//! time; the decisions that depend on other files are taken in the order above, so threads change
//! nothing.

mod cargo_files;
mod filter;
mod held_out_code;
mod held_out_passages;
mod license;
mod near_duplicates;
mod read;

pub use filter::{FileDropReason, MARKER_LINES, MAX_LINE_CHARS, MAX_MEAN_LINE_CHARS};
pub use held_out_code::HeldOutCode;
pub use held_out_passages::{SharedPassage, HELD_OUT_PASSAGE_TOKENS, PASSAGE_DISTINCT_TOKENS};
pub use license::allows_mit_or_apache;
pub use near_duplicates::{
    BANDS, DEFAULT_JACCARD as NEAR_DUPLICATE_JACCARD, MIN_SHINGLES, PERMUTATIONS, SHINGLE_TOKENS,
};
pub(crate) use read::{crate_version_files, CrateVersionFiles};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Component, Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use cargo_files::Version;
use held_out_passages::HeldOutPassages;
use read::{read_crate, FileText, ReadFile};

/// Training split, JSON Lines of [`CorpusRecord`].
pub const TRAIN_FILE: &str = "train.jsonl";
/// Validation split (crates kept out of training; not [`HELD_OUT_CRATES`], which are in neither
/// split), JSON Lines of [`CorpusRecord`].
pub const VALID_FILE: &str = "valid.jsonl";
/// The [`CorpusManifest`], pretty-printed JSON.
pub const MANIFEST_FILE: &str = "manifest.json";
/// One tab-separated row per kept crate (crate, version, license, split, files, bytes) under a
/// header row, sorted by crate: the compact form of the manifest, small enough to commit.
pub const MANIFEST_TSV_FILE: &str = "manifest.tsv";

/// Crates that are machine-generated bindings as a whole (`*` at the end matches any suffix; `-`
/// and `_` are the same): megabytes of `extern` blocks and constants that would teach the model
/// FFI tables rather than Rust.
pub const GENERATED_CRATES: &[&str] = &[
    "libc",
    "linux-raw-sys",
    "windows",
    "windows-*",
    "winapi",
    "winapi-*",
    "web-sys",
];

/// Crates published from the repositories the benchmarks were taken from
/// (`benchmarks/zed-next-edit` edits tree-sitter's `crates/loader/src/loader.rs` and
/// codex-acp's `src/prompt_args.rs`): training on them would leak the expected answers.
pub const BENCHMARK_SOURCE_CRATES: &[&str] = &["tree-sitter*", "codex-acp"];

/// Crates reserved for held-out measurement: never in the training or validation data, whatever
/// [`CorpusOptions`] say (its lists can add exclusions, never remove these), and neither are
/// crates named after them ([`is_held_out`]). Names match as [`matches_crate_pattern`] does, so
/// `csv_core` is `csv-core`.
pub const HELD_OUT_CRATES: &[&str] = &[
    "chrono",
    "csv",
    "csv-core",
    "textwrap",
    "quick-xml",
    "pulldown-cmark",
    "roxmltree",
    "comfy-table",
    "humantime",
];

/// Errors of [`build`].
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
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
    #[error("no corpus sources: pass at least one directory of unpacked crates, such as ~/.cargo/registry/src/index.crates.io-* or Debian's usr/share/cargo/registry")]
    NoSources,
    #[error("corpus source {path} looks like benchmark data ({why}): benchmarks must never enter the training corpus, pass directories of unpacked crates only")]
    BenchmarkSource { path: PathBuf, why: &'static str },
    #[error("holdout fraction {0} is not in [0, 1): pass a fraction such as 0.05")]
    HoldoutFraction(f64),
    #[error("near-duplicate threshold {0} is not in (0, 1]: pass an estimated Jaccard similarity such as 0.8")]
    NearDuplicateThreshold(f64),
    #[error("{count} crate(s) pinned by the lockfiles are not unpacked under any source (first: {first}): run `cargo fetch --manifest-path` on the manifests next to those lockfiles")]
    MissingLockedCrates { count: usize, first: String },
    #[error("no crate fell into the validation split (holdout fraction {fraction}, seed {seed}): raise the fraction, pick another seed or add crates")]
    EmptyValidation { fraction: f64, seed: u64 },
    #[error(
        "no file is left for training: check the sources, the lockfiles and the exclusion lists"
    )]
    EmptyTraining,
}

/// Result of corpus building.
pub type Result<T, E = CorpusError> = std::result::Result<T, E>;

/// What to read and how to split it.
#[derive(Debug, Clone)]
pub struct CorpusOptions {
    /// Directories whose subdirectories are unpacked crates (`name-1.2.3/Cargo.toml`), such as
    /// `~/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f`, filtered by the lockfiles.
    /// When one crate version is in several sources, the earliest source wins (these before
    /// [`CorpusOptions::whole_sources`]).
    pub sources: Vec<PathBuf>,
    /// Directories of unpacked crates taken whole, whatever the lockfiles pin: a fixed snapshot
    /// such as Debian's `usr/share/cargo/registry` (what its `librust-*-dev` packages unpack).
    /// As everywhere, only the newest version of a crate is kept.
    pub whole_sources: Vec<PathBuf>,
    /// When non-empty, only the registry crates pinned by these `Cargo.lock` files are used
    /// from [`CorpusOptions::sources`], so the corpus does not depend on whatever else the
    /// machine once unpacked.
    pub lockfiles: Vec<PathBuf>,
    /// Chance that a crate family goes to the validation split (see [`split_for`]).
    pub holdout_fraction: f64,
    /// Seed of the holdout hash: another seed holds out other crates.
    pub seed: u64,
    /// Larger files are dropped ([`FileDropReason::TooLarge`]).
    pub max_file_bytes: usize,
    /// Files whose estimated Jaccard similarity to a kept file reaches this are dropped
    /// ([`FileDropReason::NearDuplicate`]); `None` keeps them. Defaults to
    /// [`NEAR_DUPLICATE_JACCARD`].
    pub near_duplicate_jaccard: Option<f64>,
    /// Crate-name patterns dropped as generated bindings; defaults to [`GENERATED_CRATES`].
    pub generated_crates: Vec<String>,
    /// Further crate-name patterns to drop; defaults to [`BENCHMARK_SOURCE_CRATES`].
    pub excluded_crates: Vec<String>,
}

impl Default for CorpusOptions {
    fn default() -> Self {
        CorpusOptions {
            sources: Vec::new(),
            whole_sources: Vec::new(),
            lockfiles: Vec::new(),
            holdout_fraction: 0.05,
            seed: 0,
            max_file_bytes: 200 * 1024,
            near_duplicate_jaccard: Some(NEAR_DUPLICATE_JACCARD),
            generated_crates: GENERATED_CRATES.iter().map(|s| s.to_string()).collect(),
            excluded_crates: BENCHMARK_SOURCE_CRATES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// Train or validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Train,
    Valid,
}

/// One line of [`TRAIN_FILE`] / [`VALID_FILE`]: a source file, line endings normalised to LF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusRecord {
    #[serde(rename = "crate")]
    pub krate: String,
    pub version: String,
    /// Relative to the crate root, `/`-separated.
    pub path: String,
    pub text: String,
}

/// A crate in the corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusCrate {
    pub name: String,
    pub version: String,
    pub license: String,
    pub split: Split,
    pub files: usize,
    /// UTF-8 bytes of its files as written to the corpus.
    pub bytes: u64,
}

/// Why a crate version is not in the corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrateDropReason {
    /// `Cargo.toml` gives no usable name and version (nor does the directory name).
    UnreadableManifest,
    /// One of [`HELD_OUT_CRATES`], reserved for held-out measurement.
    HeldOut,
    /// A newer version of the crate is in the sources.
    OlderVersion,
    /// The same version was already found in an earlier source.
    DuplicateSource,
    /// Matches [`CorpusOptions::excluded_crates`].
    Excluded,
    /// Matches [`CorpusOptions::generated_crates`].
    GeneratedBindings,
    /// No `license` field, or one without an MIT or Apache-2.0 alternative.
    License,
    /// Every file was dropped.
    NoFilesLeft,
}

/// A crate version left out, with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedCrate {
    pub name: String,
    pub version: String,
    pub license: Option<String>,
    pub reason: CrateDropReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A `.rs` file of a kept crate left out, with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedFile {
    #[serde(rename = "crate")]
    pub krate: String,
    pub path: String,
    pub reason: FileDropReason,
    pub bytes: u64,
    /// The marker found, or the file this one duplicates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Files and bytes dropped for one reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DropTally {
    pub files: usize,
    pub bytes: u64,
}

/// Totals of a corpus build.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CorpusStats {
    pub crates_train: usize,
    pub crates_valid: usize,
    pub files_train: usize,
    pub files_valid: usize,
    pub bytes_train: u64,
    pub bytes_valid: u64,
    pub crates_dropped: BTreeMap<CrateDropReason, usize>,
    pub files_dropped: BTreeMap<FileDropReason, DropTally>,
}

/// Everything about a corpus build; written as [`MANIFEST_FILE`]. Source paths are left out so
/// that the same crates give the same manifest on any machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusManifest {
    pub holdout_fraction: f64,
    pub seed: u64,
    pub max_file_bytes: usize,
    /// [`CorpusOptions::near_duplicate_jaccard`].
    #[serde(default)]
    pub near_duplicate_jaccard: Option<f64>,
    /// [`HELD_OUT_PASSAGE_TOKENS`] and [`PASSAGE_DISTINCT_TOKENS`]; absent (0) in manifests
    /// written before that check.
    #[serde(default)]
    pub held_out_passage_tokens: usize,
    #[serde(default)]
    pub held_out_passage_distinct_tokens: usize,
    pub generated_crates: Vec<String>,
    pub excluded_crates: Vec<String>,
    pub stats: CorpusStats,
    /// Sorted by name.
    pub crates: Vec<CorpusCrate>,
    /// Sorted by name, then version.
    pub dropped_crates: Vec<DroppedCrate>,
    /// Sorted by crate, then path.
    pub dropped_files: Vec<DroppedFile>,
}

/// Builds the corpus from `options.sources` and `options.whole_sources` into `out_dir` (created
/// if needed) and returns the manifest it wrote.
pub fn build(options: &CorpusOptions, out_dir: &Path) -> Result<CorpusManifest> {
    if options.sources.is_empty() && options.whole_sources.is_empty() {
        return Err(CorpusError::NoSources);
    }
    if !(0.0..1.0).contains(&options.holdout_fraction) {
        return Err(CorpusError::HoldoutFraction(options.holdout_fraction));
    }
    if let Some(threshold) = options.near_duplicate_jaccard {
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(CorpusError::NearDuplicateThreshold(threshold));
        }
    }
    let locked = read_lockfiles(&options.lockfiles)?;
    let found = discover(&source_list(options))?;
    let (kept, mut dropped_crates) = select(found, locked.as_ref(), options)?;
    let gathered = gather(kept, options, &mut dropped_crates)?;
    dropped_crates.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));

    let mut stats = CorpusStats::default();
    for krate in &gathered.crates {
        let (crates, files, bytes) = match krate.split {
            Split::Train => (
                &mut stats.crates_train,
                &mut stats.files_train,
                &mut stats.bytes_train,
            ),
            Split::Valid => (
                &mut stats.crates_valid,
                &mut stats.files_valid,
                &mut stats.bytes_valid,
            ),
        };
        *crates += 1;
        *files += krate.files;
        *bytes += krate.bytes;
    }
    for dropped in &dropped_crates {
        *stats.crates_dropped.entry(dropped.reason).or_default() += 1;
    }
    for dropped in &gathered.dropped_files {
        let tally = stats.files_dropped.entry(dropped.reason).or_default();
        tally.files += 1;
        tally.bytes += dropped.bytes;
    }
    if stats.files_train == 0 {
        return Err(CorpusError::EmptyTraining);
    }
    if options.holdout_fraction > 0.0 && stats.files_valid == 0 {
        return Err(CorpusError::EmptyValidation {
            fraction: options.holdout_fraction,
            seed: options.seed,
        });
    }

    let manifest = CorpusManifest {
        holdout_fraction: options.holdout_fraction,
        seed: options.seed,
        max_file_bytes: options.max_file_bytes,
        near_duplicate_jaccard: options.near_duplicate_jaccard,
        held_out_passage_tokens: HELD_OUT_PASSAGE_TOKENS,
        held_out_passage_distinct_tokens: PASSAGE_DISTINCT_TOKENS,
        generated_crates: options.generated_crates.clone(),
        excluded_crates: options.excluded_crates.clone(),
        stats,
        crates: gathered.crates,
        dropped_crates,
        dropped_files: gathered.dropped_files,
    };
    write_corpus(out_dir, &gathered.records, &manifest)?;
    Ok(manifest)
}

/// Each source with whether the lockfiles filter it.
fn source_list(options: &CorpusOptions) -> Vec<(&Path, bool)> {
    (options.sources.iter().map(|s| (s.as_path(), true)))
        .chain(options.whole_sources.iter().map(|s| (s.as_path(), false)))
        .collect()
}

/// How a held-out file is named in the drops it causes: `crate/path (version)`.
fn held_out_source(krate: &SelectedCrate, relative: &str) -> String {
    format!("{}/{relative} ({})", krate.name, krate.version)
}

/// Crates whose names share the part before the first `-` or `_` (`serde`, `serde_core`,
/// `serde_derive`; `regex`, `regex-automata`) often share or copy code, so they are held out
/// together: validating on `serde_core` after training on `serde` would measure memory.
pub fn holdout_family(name: &str) -> String {
    name.split(['-', '_'])
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase()
}

/// The split of crate `name`: a seeded hash of its [`holdout_family`], mapped to [0, 1), is
/// compared with `holdout_fraction`. A crate's split does not depend on which other crates are
/// in the corpus, so adding crates never moves existing ones between splits.
pub fn split_for(name: &str, seed: u64, holdout_fraction: f64) -> Split {
    let hash = splitmix64(fnv1a(holdout_family(name).as_bytes()) ^ seed);
    let unit = (hash >> 11) as f64 / (1u64 << 53) as f64;
    if unit < holdout_fraction {
        Split::Valid
    } else {
        Split::Train
    }
}

/// Whether crate `name` matches `pattern`: exact, or a prefix when the pattern ends in `*`;
/// case-insensitive, with `-` and `_` equal as on crates.io.
pub fn matches_crate_pattern(pattern: &str, name: &str) -> bool {
    let canonical = |s: &str| s.to_ascii_lowercase().replace('_', "-");
    let (pattern, name) = (canonical(pattern), canonical(name));
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// Whether crate `name` is one of [`HELD_OUT_CRATES`] or named after one (`chrono-tz` after
/// `chrono`, `pulldown-cmark-to-cmark` after `pulldown-cmark`, `csv-sniffer` after `csv`):
/// such crates may share or copy its code, and measuring on `chrono` after training on
/// `chrono-tz` would measure memory. The whole name leads (`quick-error` is not `quick-xml`'s),
/// unlike the validation split's coarser [`holdout_family`].
pub fn is_held_out(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('_', "-");
    HELD_OUT_CRATES.iter().any(|held_out| {
        matches_crate_pattern(held_out, &name)
            || name
                .strip_prefix(held_out)
                .is_some_and(|rest| rest.starts_with('-'))
    })
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn read_error(path: &Path) -> impl FnOnce(io::Error) -> CorpusError + '_ {
    move |source| CorpusError::Read {
        path: path.to_path_buf(),
        source,
    }
}

/// Refuses paths that are, or resolve into, benchmark data.
fn guard_against_benchmarks(path: &Path) -> Result<()> {
    let canonical = fs::canonicalize(path).map_err(read_error(path))?;
    for component in canonical.components() {
        let Component::Normal(part) = component else {
            continue;
        };
        let part = part.to_string_lossy().to_lowercase();
        let why = if part == "benchmarks" {
            "a directory named `benchmarks`"
        } else if part.contains("humaneval") {
            "a directory named like HumanEval"
        } else {
            continue;
        };
        return Err(CorpusError::BenchmarkSource {
            path: path.to_path_buf(),
            why,
        });
    }
    Ok(())
}

fn read_lockfiles(lockfiles: &[PathBuf]) -> Result<Option<BTreeSet<(String, String)>>> {
    if lockfiles.is_empty() {
        return Ok(None);
    }
    let mut locked = BTreeSet::new();
    for path in lockfiles {
        let text = fs::read_to_string(path).map_err(read_error(path))?;
        locked.extend(cargo_files::locked_registry_packages(&text));
    }
    Ok(Some(locked))
}

/// A crate directory found in a source.
struct FoundCrate {
    name: String,
    version: String,
    parsed: Version,
    license: Option<String>,
    license_file: Option<String>,
    dir: PathBuf,
    source_index: usize,
    /// From one of [`CorpusOptions::sources`], so subject to the lockfiles.
    lock_filtered: bool,
}

/// Every crate directory of every source (with whether the lockfiles filter it), plus the
/// unreadable ones as drops.
fn discover(sources: &[(&Path, bool)]) -> Result<(Vec<FoundCrate>, Vec<DroppedCrate>)> {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    for (source_index, &(source, lock_filtered)) in sources.iter().enumerate() {
        guard_against_benchmarks(source)?;
        let mut dirs: Vec<PathBuf> = fs::read_dir(source)
            .map_err(read_error(source))?
            .map(|entry| entry.map(|e| e.path()).map_err(read_error(source)))
            .collect::<Result<_>>()?;
        dirs.sort();
        for dir in dirs {
            let cargo_toml = dir.join("Cargo.toml");
            if !dir.is_dir() || !cargo_toml.is_file() {
                continue;
            }
            guard_against_benchmarks(&dir)?;
            let text = fs::read_to_string(&cargo_toml).map_err(read_error(&cargo_toml))?;
            let fields = cargo_files::package_fields(&text);
            let dir_name = dir.file_name().unwrap_or_default().to_string_lossy();
            let from_dir = cargo_files::split_dir_name(&dir_name);
            let name = fields.name.or_else(|| from_dir.map(|(n, _)| n.to_string()));
            let version = fields
                .version
                .or_else(|| from_dir.map(|(_, v)| v.to_string()));
            let parsed = version.as_deref().and_then(Version::parse);
            match (name, version, parsed) {
                (Some(name), Some(version), Some(parsed)) => found.push(FoundCrate {
                    name,
                    version,
                    parsed,
                    license: fields.license,
                    license_file: fields.license_file,
                    dir,
                    source_index,
                    lock_filtered,
                }),
                (name, version, _) => unreadable.push(DroppedCrate {
                    name: name.unwrap_or_else(|| dir_name.to_string()),
                    version: version.unwrap_or_default(),
                    license: fields.license,
                    reason: CrateDropReason::UnreadableManifest,
                    detail: Some("no semver `name`/`version` in Cargo.toml".to_string()),
                }),
            }
        }
    }
    Ok((found, unreadable))
}

/// A crate chosen for the corpus, or a held-out crate whose files are read only to keep copies
/// of them out, before its files are read.
struct SelectedCrate {
    name: String,
    version: String,
    license: String,
    owner: Owner,
    dir: PathBuf,
}

/// Whose files a crate's are: a split's, or a held-out crate's, which claim their text before any
/// corpus crate so that no copy or near copy of them enters the corpus, and are never written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    HeldOut,
    Split(Split),
}

/// Applies the lockfile filter, newest-version choice and crate-level drops.
fn select(
    (found, mut dropped): (Vec<FoundCrate>, Vec<DroppedCrate>),
    locked: Option<&BTreeSet<(String, String)>>,
    options: &CorpusOptions,
) -> Result<(Vec<SelectedCrate>, Vec<DroppedCrate>)> {
    let mut by_name: BTreeMap<String, Vec<FoundCrate>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for krate in found {
        let key = (krate.name.clone(), krate.version.clone());
        if krate.lock_filtered && locked.is_some_and(|locked| !locked.contains(&key)) {
            continue;
        }
        seen.insert(key);
        by_name.entry(krate.name.clone()).or_default().push(krate);
    }
    if let Some(locked) = locked {
        let missing: Vec<_> = locked.difference(&seen).collect();
        if let Some((name, version)) = missing.first() {
            return Err(CorpusError::MissingLockedCrates {
                count: missing.len(),
                first: format!("{name} {version}"),
            });
        }
    }

    let mut selected = Vec::new();
    for (name, mut versions) in by_name {
        // Every version of a held-out crate is refused by name, before any option is read.
        if is_held_out(&name) {
            for krate in versions {
                selected.push(SelectedCrate {
                    name: krate.name.clone(),
                    version: krate.version.clone(),
                    license: krate.license.clone().unwrap_or_default(),
                    owner: Owner::HeldOut,
                    dir: krate.dir,
                });
                dropped.push(DroppedCrate {
                    name: krate.name,
                    version: krate.version,
                    license: krate.license,
                    reason: CrateDropReason::HeldOut,
                    detail: Some("reserved for held-out measurement".to_string()),
                });
            }
            continue;
        }
        versions.sort_by(|a, b| {
            b.parsed
                .cmp(&a.parsed)
                .then(a.source_index.cmp(&b.source_index))
        });
        let mut versions = versions.into_iter();
        let Some(newest) = versions.next() else {
            continue;
        };
        for other in versions {
            let (reason, detail) = if other.parsed == newest.parsed {
                (CrateDropReason::DuplicateSource, None)
            } else {
                (
                    CrateDropReason::OlderVersion,
                    Some(format!("kept {}", newest.version)),
                )
            };
            dropped.push(DroppedCrate {
                name: other.name,
                version: other.version,
                license: other.license,
                reason,
                detail,
            });
        }
        let matches_any = |patterns: &[String]| {
            patterns
                .iter()
                .find(|pattern| matches_crate_pattern(pattern, &name))
                .map(|pattern| format!("matches `{pattern}`"))
        };
        let verdict = if let Some(detail) = matches_any(&options.excluded_crates) {
            Err((CrateDropReason::Excluded, Some(detail)))
        } else if let Some(detail) = matches_any(&options.generated_crates) {
            Err((CrateDropReason::GeneratedBindings, Some(detail)))
        } else {
            match (&newest.license, &newest.license_file) {
                (Some(license), _) if allows_mit_or_apache(license) => Ok(license.clone()),
                (Some(_), _) => Err((
                    CrateDropReason::License,
                    Some("no MIT or Apache-2.0 alternative".to_string()),
                )),
                (None, Some(file)) => Err((
                    CrateDropReason::License,
                    Some(format!(
                        "only `license-file = \"{file}\"`, no SPDX expression"
                    )),
                )),
                (None, None) => Err((
                    CrateDropReason::License,
                    Some("no `license` field".to_string()),
                )),
            }
        };
        match verdict {
            Ok(license) => selected.push(SelectedCrate {
                owner: Owner::Split(split_for(&name, options.seed, options.holdout_fraction)),
                name,
                version: newest.version,
                license,
                dir: newest.dir,
            }),
            Err((reason, detail)) => dropped.push(DroppedCrate {
                name,
                version: newest.version,
                license: newest.license,
                reason,
                detail,
            }),
        }
    }
    Ok((selected, dropped))
}

/// The files of the selected crates, read and filtered.
struct Gathered {
    /// Sorted by crate, then path.
    crates: Vec<CorpusCrate>,
    /// Held-out records (never written), train records, then valid records, each sorted by
    /// crate, then version, then path.
    records: Vec<(Owner, CorpusRecord)>,
    dropped_files: Vec<DroppedFile>,
}

/// Crates read at once (on rayon's threads) before their files are deduplicated in order: enough
/// to keep the threads busy, few enough that only a batch of dropped files is ever in memory.
const CRATES_PER_BATCH: usize = 64;

fn gather(
    mut selected: Vec<SelectedCrate>,
    options: &CorpusOptions,
    dropped_crates: &mut Vec<DroppedCrate>,
) -> Result<Gathered> {
    // Held-out crates claim their files first, so that no copy of them enters the corpus; then
    // training crates, so a validation file is never a copy (or a near copy) of a training one:
    // the duplicate is dropped from the validation crate instead.
    selected.sort_by(|a, b| (a.owner, &a.name, &a.version).cmp(&(b.owner, &b.name, &b.version)));
    let mut records: Vec<(Owner, CorpusRecord)> = Vec::new();
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut near = options
        .near_duplicate_jaccard
        .map(near_duplicates::NearDuplicateIndex::new);
    let mut crates = Vec::new();
    let mut dropped_files = Vec::new();
    // Every window of every held-out file is in `passages` before a corpus crate is read: the
    // held-out crates sort first, and a batch never mixes them with corpus crates.
    let mut passages = HeldOutPassages::new(HELD_OUT_PASSAGE_TOKENS, PASSAGE_DISTINCT_TOKENS);
    let held_out_crates = selected.partition_point(|krate| krate.owner == Owner::HeldOut);
    let (held_out_crates, corpus_crates) = selected.split_at(held_out_crates);
    let batches =
        (held_out_crates.chunks(CRATES_PER_BATCH)).chain(corpus_crates.chunks(CRATES_PER_BATCH));
    for batch in batches {
        // Reading, filtering, signatures and held-out passages in parallel; every decision that
        // depends on other files in the one order above, so the output does not depend on the
        // threads.
        let read: Vec<Result<Vec<ReadFile>>> = batch
            .par_iter()
            .map(|krate| read_crate(krate, options, &passages))
            .collect();
        for (krate, files) in batch.iter().zip(read) {
            let held_out = krate.owner == Owner::HeldOut;
            let (mut files_kept, mut bytes) = (0, 0);
            for file in files? {
                let drop = |reason, detail| DroppedFile {
                    krate: krate.name.clone(),
                    path: file.relative.clone(),
                    reason,
                    bytes: file.size,
                    detail,
                };
                let FileText {
                    text,
                    signature,
                    held_out_passage,
                } = match file.verdict {
                    Err(_) if held_out => continue,
                    Err((reason, detail)) => {
                        dropped_files.push(drop(reason, detail));
                        continue;
                    }
                    Ok(kept) => kept,
                };
                if held_out {
                    // Every held-out file, even one dropped below as a near copy of another: its
                    // differences are held-out text too.
                    passages.insert(held_out_source(krate, &file.relative), &text);
                }
                let candidates = by_hash.entry(fnv1a(text.as_bytes())).or_default();
                let same = candidates.iter().find(|&&i| records[i].1.text == text);
                let near_copy = || {
                    let (index, signature) = (near.as_ref()?, signature.as_ref()?);
                    index.find(signature)
                };
                let original = match same.map(|&i| (i, None)) {
                    Some(found) => Some(found),
                    None => near_copy().map(|(i, similarity)| (i, Some(similarity))),
                };
                let held_out_original =
                    original.is_some_and(|(i, _)| records[i].0 == Owner::HeldOut);
                if let (Some(passage), false) = (held_out_passage, held_out_original) {
                    let detail = format!(
                        "shares {} consecutive code tokens with held-out {}",
                        passage.tokens, passage.source
                    );
                    dropped_files.push(drop(FileDropReason::HeldOutPassage, Some(detail)));
                    continue;
                }
                if let Some((original, similarity)) = original {
                    if held_out {
                        continue;
                    }
                    let (owner, original) = &records[original];
                    let (reason, of_held_out) = match owner {
                        Owner::HeldOut => (FileDropReason::HeldOutCopy, "held-out "),
                        Owner::Split(_) if similarity.is_some() => {
                            (FileDropReason::NearDuplicate, "")
                        }
                        Owner::Split(_) => (FileDropReason::Duplicate, ""),
                    };
                    let detail = match similarity {
                        None => {
                            format!("same as {of_held_out}{}/{}", original.krate, original.path)
                        }
                        Some(similarity) => format!(
                            "near copy of {of_held_out}{}/{} (estimated Jaccard {similarity:.2})",
                            original.krate, original.path
                        ),
                    };
                    dropped_files.push(drop(reason, Some(detail)));
                    continue;
                }
                candidates.push(records.len());
                if let (Some(index), Some(signature)) = (&mut near, signature) {
                    index.insert(records.len(), signature);
                }
                files_kept += 1;
                bytes += text.len() as u64;
                records.push((
                    krate.owner,
                    CorpusRecord {
                        krate: krate.name.clone(),
                        version: krate.version.clone(),
                        path: file.relative,
                        text,
                    },
                ));
            }
            let Owner::Split(split) = krate.owner else {
                continue;
            };
            if files_kept == 0 {
                dropped_crates.push(DroppedCrate {
                    name: krate.name.clone(),
                    version: krate.version.clone(),
                    license: Some(krate.license.clone()),
                    reason: CrateDropReason::NoFilesLeft,
                    detail: None,
                });
                continue;
            }
            crates.push(CorpusCrate {
                name: krate.name.clone(),
                version: krate.version.clone(),
                license: krate.license.clone(),
                split,
                files: files_kept,
                bytes,
            });
        }
    }
    crates.sort_by(|a, b| a.name.cmp(&b.name));
    dropped_files.sort_by(|a, b| (&a.krate, &a.path).cmp(&(&b.krate, &b.path)));
    Ok(Gathered {
        crates,
        records,
        dropped_files,
    })
}

fn write_corpus(
    out_dir: &Path,
    records: &[(Owner, CorpusRecord)],
    manifest: &CorpusManifest,
) -> Result<()> {
    fs::create_dir_all(out_dir).map_err(|source| CorpusError::Write {
        path: out_dir.to_path_buf(),
        source,
    })?;
    for (split, file_name) in [(Split::Train, TRAIN_FILE), (Split::Valid, VALID_FILE)] {
        let path = out_dir.join(file_name);
        write_file(&path, |out| {
            for (_, record) in records
                .iter()
                .filter(|(owner, _)| *owner == Owner::Split(split))
            {
                serde_json::to_writer(&mut *out, record)?;
                out.write_all(b"\n")?;
            }
            Ok(())
        })?;
    }
    write_file(&out_dir.join(MANIFEST_FILE), |out| {
        serde_json::to_writer_pretty(&mut *out, manifest)?;
        out.write_all(b"\n")
    })?;
    write_file(&out_dir.join(MANIFEST_TSV_FILE), |out| {
        out.write_all(manifest_tsv(&manifest.crates).as_bytes())
    })
}

/// The [`MANIFEST_TSV_FILE`] of `crates` (already sorted by name).
fn manifest_tsv(crates: &[CorpusCrate]) -> String {
    let mut tsv = String::from("crate\tversion\tlicense\tsplit\tfiles\tbytes\n");
    for krate in crates {
        let split = match krate.split {
            Split::Train => "train",
            Split::Valid => "valid",
        };
        // Licence expressions never hold tabs or newlines; a malformed one must not add columns.
        let license = krate.license.replace(['\t', '\n'], " ");
        tsv += &format!(
            "{}\t{}\t{license}\t{split}\t{}\t{}\n",
            krate.name, krate.version, krate.files, krate.bytes
        );
    }
    tsv
}

fn write_file(
    path: &Path,
    contents: impl FnOnce(&mut BufWriter<fs::File>) -> io::Result<()>,
) -> Result<()> {
    let write = || {
        let mut out = BufWriter::new(fs::File::create(path)?);
        contents(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    write().map_err(|source| CorpusError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
