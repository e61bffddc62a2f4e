//! Reading a crate's files: every `.rs` file under its directory (symlinks not followed), read
//! and put through the filters that need no other file (path, size, content), with the MinHash
//! signature near duplicates are found by. What depends on other files (exact and near copies,
//! held-out copies) is decided afterwards, in one order, by the corpus's `gather`; next-edit data
//! reads older crate versions through [`crate_version_files`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{
    allows_mit_or_apache, cargo_files, filter, near_duplicates, read_error, CorpusOptions,
    FileDropReason, Result, SelectedCrate,
};

/// A `.rs` file of a selected crate, read and filtered on its own.
pub(super) struct ReadFile {
    pub(super) relative: String,
    pub(super) size: u64,
    /// The normalised text and its MinHash signature (when near duplicates are looked for and
    /// the file is long enough), or why the file is dropped.
    pub(super) verdict: FileVerdict,
}

/// A file's normalised text and signature, or the reason (and detail) it is dropped.
type FileVerdict = std::result::Result<
    (String, Option<near_duplicates::Signature>),
    (FileDropReason, Option<String>),
>;

/// Reads every `.rs` file of `krate` (in parallel: one large crate must not hold up a batch)
/// and applies the filters that need no other file.
pub(super) fn read_crate(krate: &SelectedCrate, options: &CorpusOptions) -> Result<Vec<ReadFile>> {
    rust_files(&krate.dir)?
        .into_par_iter()
        .map(|file| {
            let size = fs::metadata(&file.absolute)
                .map_err(read_error(&file.absolute))?
                .len();
            let verdict = read_file(&file, size, options)?;
            Ok(ReadFile {
                relative: file.relative,
                size,
                verdict,
            })
        })
        .collect()
}

fn read_file(file: &RustFile, size: u64, options: &CorpusOptions) -> Result<FileVerdict> {
    let early = if !file.utf8_path {
        Some(FileDropReason::NotUtf8)
    } else {
        filter::path_drop(&file.relative)
    };
    if let Some(reason) = early {
        return Ok(Err((reason, None)));
    }
    if size > options.max_file_bytes as u64 {
        // Most oversized files are generated tables: say so when the header does.
        let head = read_head(&file.absolute)?;
        return Ok(Err(match filter::generated_marker(&head) {
            Some(marker) => (
                FileDropReason::GeneratedMarker,
                Some(format!("marker `{marker}`")),
            ),
            None => (FileDropReason::TooLarge, None),
        }));
    }
    let raw = fs::read(&file.absolute).map_err(read_error(&file.absolute))?;
    let Ok(raw) = String::from_utf8(raw) else {
        return Ok(Err((FileDropReason::NotUtf8, None)));
    };
    let text = filter::normalise(&raw);
    if let Some(reason) = filter::content_drop(&text) {
        let detail = (reason == FileDropReason::GeneratedMarker)
            .then(|| filter::generated_marker(&text))
            .flatten()
            .map(|marker| format!("marker `{marker}`"));
        return Ok(Err((reason, detail)));
    }
    let signature = options
        .near_duplicate_jaccard
        .and_then(|_| near_duplicates::Signature::of(&text));
    Ok(Ok((text, signature)))
}

/// One unpacked crate version's licence (its SPDX `license`, when that allows MIT or
/// Apache-2.0 use, as [`build`](super::build) requires) and its `.rs` files that pass the
/// corpus's file filters, as `(relative path, normalised text)` sorted by path. No
/// deduplication: that is a corpus-wide decision. Next-edit data reads earlier versions of corpus
/// crates through this.
pub(crate) fn crate_version_files(dir: &Path, max_file_bytes: usize) -> Result<CrateVersionFiles> {
    let cargo_toml = dir.join("Cargo.toml");
    let manifest = fs::read_to_string(&cargo_toml).map_err(read_error(&cargo_toml))?;
    let license = cargo_files::package_fields(&manifest)
        .license
        .filter(|license| allows_mit_or_apache(license));
    let mut files = Vec::new();
    for file in rust_files(dir)? {
        if !file.utf8_path || filter::path_drop(&file.relative).is_some() {
            continue;
        }
        let size = fs::metadata(&file.absolute)
            .map_err(read_error(&file.absolute))?
            .len();
        if size > max_file_bytes as u64 {
            continue;
        }
        let raw = fs::read(&file.absolute).map_err(read_error(&file.absolute))?;
        let Ok(raw) = String::from_utf8(raw) else {
            continue;
        };
        let text = filter::normalise(&raw);
        if filter::content_drop(&text).is_none() {
            files.push((file.relative, text));
        }
    }
    Ok(CrateVersionFiles { license, files })
}

/// What [`crate_version_files`] read.
pub(crate) struct CrateVersionFiles {
    pub license: Option<String>,
    pub files: Vec<(String, String)>,
}

/// The first 16 KiB of a file, enough for its header comment.
fn read_head(path: &Path) -> Result<String> {
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|file| io::Read::read_to_end(&mut io::Read::take(file, 16 * 1024), &mut head))
        .map_err(read_error(path))?;
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// A `.rs` file under a crate directory.
struct RustFile {
    /// Relative to the crate root, `/`-separated (lossy when `utf8_path` is false).
    relative: String,
    absolute: PathBuf,
    utf8_path: bool,
}

/// Every `.rs` file under `root`, sorted by relative path. Symlinks are not followed: a
/// package's files are real files, and a link could lead out of it (or in a circle).
fn rust_files(root: &Path) -> Result<Vec<RustFile>> {
    let mut files = Vec::new();
    let mut pending = vec![(root.to_path_buf(), String::new(), true)];
    while let Some((dir, prefix, utf8)) = pending.pop() {
        for entry in fs::read_dir(&dir).map_err(read_error(&dir))? {
            let entry = entry.map_err(read_error(&dir))?;
            let file_type = entry.file_type().map_err(read_error(&entry.path()))?;
            let name = entry.file_name();
            let utf8 = utf8 && name.to_str().is_some();
            let relative = format!("{prefix}{}", name.to_string_lossy());
            if file_type.is_dir() {
                pending.push((entry.path(), format!("{relative}/"), utf8));
            } else if file_type.is_file() && relative.ends_with(".rs") {
                files.push(RustFile {
                    relative,
                    absolute: entry.path(),
                    utf8_path: utf8,
                });
            }
        }
    }
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok(files)
}
