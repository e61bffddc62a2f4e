//! Next-edit cases from two versions of a tree (`--from-dirs OLD NEW`): files are paired by
//! relative path, each pair is cut by [`redraft_context::edit::cut`] (the cutter training data
//! comes from too: changes grouped into trains of thought, earlier changes of a group the
//! history, the next one the target, a finished group a no-edit case, churn dropped), and each
//! cut case is written in Zed's Markdown format (so Zed's own `ep` tool reads them too): the
//! file's lines around the cursor and the target as the excerpt, each history edit as a diff of
//! its lines, the target as a diff of the file.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use redraft_context::edit::cut::{cut_versions, CutOptions, DropReason, EditCase};
use redraft_context::edit::diff;

use super::case::{ExpectedPatch, HistoryBlock, NextEditCase};
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// How changes are grouped and what is churn.
    pub cut: CutOptions,
    /// Lines of the file kept above and below the cursor and the target.
    pub context_lines: usize,
    /// Also keep the no-edit cases (after a group's last change).
    pub no_edit_cases: bool,
    /// Front matter of every case (where the two versions come from).
    pub repository_url: String,
    pub revision: String,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            cut: CutOptions::default(),
            context_lines: 8,
            no_edit_cases: true,
            repository_url: String::new(),
            revision: String::new(),
        }
    }
}

/// A file in both trees whose text differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePair {
    /// Relative, `/`-separated.
    pub path: String,
    pub old: String,
    pub new: String,
}

/// The files under both `old` and `new` (same relative path) that are UTF-8 text and differ,
/// in path order. Hidden entries and `target/` are skipped; a file in one tree only is not a
/// pair (a created or deleted file is not an edit to predict).
pub fn pair_files(old: &Path, new: &Path) -> Result<Vec<FilePair>> {
    for dir in [old, new] {
        if !dir.is_dir() {
            return Err(Error::Input {
                path: dir.to_path_buf(),
                message: "not a directory: --from-dirs takes the old and the new version of a tree"
                    .into(),
            });
        }
    }
    let mut relative = Vec::new();
    walk(old, Path::new(""), &mut relative)?;
    relative.sort();
    let mut pairs = Vec::new();
    for rel in relative {
        let new_file = new.join(&rel);
        if !new_file.is_file() {
            continue;
        }
        let old_file = old.join(&rel);
        let read = |file: &Path| -> Result<Option<String>> {
            let bytes = std::fs::read(file).map_err(|e| Error::io(file, e))?;
            Ok(String::from_utf8(bytes).ok().filter(|t| !t.contains('\0')))
        };
        let (Some(old_text), Some(new_text)) = (read(&old_file)?, read(&new_file)?) else {
            continue;
        };
        if old_text != new_text {
            let path = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            pairs.push(FilePair {
                path,
                old: old_text,
                new: new_text,
            });
        }
    }
    Ok(pairs)
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        if name_str.starts_with('.') || name_str == "target" {
            continue;
        }
        let kind = entry.file_type().map_err(|e| Error::io(&entry.path(), e))?;
        if kind.is_dir() {
            walk(root, &rel.join(&name), out)?;
        } else if kind.is_file() {
            out.push(rel.join(&name));
        }
    }
    Ok(())
}

/// What a build made: the cases, in path order, and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Built {
    pub cases: Vec<NextEditCase>,
    /// Files that differ between the trees ([`build_from_dirs`]; 0 from records).
    pub pairs: usize,
    /// Changes the cutter dropped, by reason ([`DropReason::name`]).
    pub dropped: BTreeMap<&'static str, usize>,
    /// Cut cases that could not be written faithfully (a cursor marker in the text, an excerpt
    /// that reads back differently).
    pub unwritable: usize,
}

/// Every case of every pair (see the module's description).
pub fn build_from_dirs(old: &Path, new: &Path, options: &BuildOptions) -> Result<Built> {
    let mut built = Built::default();
    let pairs = pair_files(old, new)?;
    built.pairs = pairs.len();
    for pair in pairs {
        let cut = cut_versions(&pair.path, &pair.old, &pair.new, &options.cut);
        for (reason, count) in &cut.dropped {
            *built.dropped.entry(DropReason::name(*reason)).or_insert(0) += count;
        }
        let stem = name_stem(&pair.path);
        for (i, case) in cut.cases.iter().enumerate() {
            if case.target.is_none() && !options.no_edit_cases {
                continue;
            }
            let suffix = if case.target.is_none() {
                "-no-edit"
            } else {
                ""
            };
            let name = format!("{stem}--{}{suffix}", i + 1);
            match written_case(&name, case, options) {
                Some(case) => built.cases.push(case),
                None => built.unwritable += 1,
            }
        }
    }
    Ok(built)
}

/// Cases cut beforehand (the next-edit training data's records, say), each under its given
/// name (a no-edit case's with `-no-edit` after it; a name given before gets `-2`, `-3`...),
/// written as [`build_from_dirs`] writes its own.
pub fn build_from_cases(
    cases: impl IntoIterator<Item = (String, EditCase)>,
    options: &BuildOptions,
) -> Built {
    let mut built = Built::default();
    let mut seen = BTreeMap::<String, usize>::new();
    for (name, case) in cases {
        if case.target.is_none() && !options.no_edit_cases {
            continue;
        }
        let stem = name_stem(&name);
        let times = seen.entry(stem.clone()).or_insert(0);
        *times += 1;
        let stem = match *times {
            1 => stem,
            n => format!("{stem}-{n}"),
        };
        let name = if case.target.is_none() {
            format!("{stem}-no-edit")
        } else {
            stem
        };
        match written_case(&name, &case, options) {
            Some(case) => built.cases.push(case),
            None => built.unwritable += 1,
        }
    }
    built
}

/// A file's case name stem: Zed's file-name sanitising of the path.
fn name_stem(path: &str) -> String {
    path.chars()
        .map(|c| match c {
            ' ' | ':' | '~' | '^' | '?' | '*' | '[' | '\\' | '@' | '{' | '/' | '<' | '>' | '|'
            | '"' => '-',
            c => c,
        })
        .collect()
}

/// The line (0-based) holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count()
}

/// `case` in Zed's format, as reading it back gives it; `None` when that is not the case cut
/// (so only faithful cases are written).
fn written_case(name: &str, case: &EditCase, options: &BuildOptions) -> Option<NextEditCase> {
    let text = &case.text;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let cursor_line = line_of(text, case.cursor);
    let (first, last) = match &case.target {
        Some(edit) => (
            cursor_line.min(line_of(text, edit.range.start)),
            cursor_line.max(line_of(text, edit.range.end)),
        ),
        None => (cursor_line, cursor_line),
    };
    let first = first.saturating_sub(options.context_lines);
    let last = (last + options.context_lines).min(lines.len().saturating_sub(1));
    let start: usize = lines[..first].iter().map(|l| l.len()).sum();
    let end: usize = start + lines[first..=last].iter().map(|l| l.len()).sum::<usize>();
    let mut excerpt = text[start..end].to_string();
    excerpt.truncate(excerpt.trim_end_matches('\n').len());
    let cursor = case.cursor.checked_sub(start)?.min(excerpt.len());
    let history = case
        .history
        .iter()
        .map(|edit| HistoryBlock {
            // The edit's own lines (no file line numbers: the cut keeps none).
            diff: diff::unified_diff(&edit.path, &edit.old, &edit.new, 1),
            accepted_prediction: false,
        })
        .filter(|block| !block.diff.is_empty())
        .collect();
    let (expected_patches, expected_excerpt) = match &case.target {
        Some(edit) => {
            let range = edit.range.start.checked_sub(start)?..edit.range.end.checked_sub(start)?;
            let mut after = excerpt.clone();
            after.get(range.clone())?;
            after.replace_range(range, &edit.new_text);
            let mut next = text.clone();
            next.replace_range(edit.range.clone(), &edit.new_text);
            let patch = diff::unified_diff(&case.path, text, &next, 3);
            (vec![ExpectedPatch::new(&patch)], Some(after))
        }
        None => (Vec::new(), None),
    };
    let written = NextEditCase {
        name: name.to_string(),
        repository_url: options.repository_url.clone(),
        revision: options.revision.clone(),
        tags: Vec::new(),
        path: case.path.clone(),
        excerpt,
        cursor,
        history,
        expected_patches,
        // Worked out by reading the case back, below.
        expected: Vec::new(),
        no_edit: false,
    };
    if !written.is_writable() {
        return None;
    }
    let read = NextEditCase::from_markdown(name, &written.to_markdown()).ok()?;
    let faithful = match expected_excerpt {
        Some(after) => {
            read.expected.len() == 1
                && read.expected[0].trim_end_matches('\n') == after.trim_end_matches('\n')
                && !read.no_edit
        }
        None => read.no_edit,
    };
    faithful.then_some(read)
}

/// Writes each case to `dir/<name>.md` (the directory is created) and returns the files.
pub fn write_cases(dir: &Path, cases: &[NextEditCase]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut files = Vec::new();
    for case in cases {
        let file = dir.join(format!("{}.md", case.name));
        crate::task::write_atomic(&file, case.to_markdown().as_bytes())?;
        files.push(file);
    }
    Ok(files)
}
