//! Next-edit cases from two versions of a tree (`--from-dirs OLD NEW`): files are paired by
//! relative path, each pair is diffed, and the diff is cut into cases written in Zed's
//! Markdown format (so Zed's own `ep` tool reads them too).
//!
//! The cut ([`cut_file`]) is the simple one until `redraft_context::edit::cut` lands: each
//! hunk after a file's first is a target, the hunks before it (of the same file) are the
//! history, the cursor sits at the end of the previous hunk's last change, and the excerpt is
//! the lines spanning that cursor and the target hunk with `context_lines` more either side.
//! After a file's last hunk comes one no-edit case (cursor at the end of the last change,
//! every hunk in the history): nothing more was done there.

use std::path::{Path, PathBuf};

use redraft_context::edit::diff::{self, FilePatch, Hunk, HunkLine};

use super::case::{ExpectedPatch, HistoryBlock, NextEditCase};
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Lines of the file kept above and below the cursor and the target hunk.
    pub context_lines: usize,
    /// A target farther than this many lines from the cursor (excerpt length) is skipped.
    pub max_excerpt_lines: usize,
    /// Also write the no-edit case after each file's last hunk.
    pub no_edit_cases: bool,
    /// Front matter of every case (where the two versions come from).
    pub repository_url: String,
    pub revision: String,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            context_lines: 8,
            max_excerpt_lines: 60,
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

/// Every case of every pair (see the module's description), in path order.
pub fn build_from_dirs(
    old: &Path,
    new: &Path,
    options: &BuildOptions,
) -> Result<Vec<NextEditCase>> {
    let mut cases = Vec::new();
    for pair in pair_files(old, new)? {
        cases.extend(cut_file(&pair, options));
    }
    Ok(cases)
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

/// Where a hunk sits: the 0-based index of its first old line and first new line.
fn firsts(hunk: &Hunk) -> (usize, usize) {
    let first = |start: usize, len: usize| if len > 0 { start - 1 } else { start };
    (
        first(hunk.old_start, hunk.old_len()),
        first(hunk.new_start, hunk.new_len()),
    )
}

/// The new-text line (0-based) and byte column where the hunk's last change ends: the end of
/// its last added line, or the start of the line where it removed lines.
fn change_end(hunk: &Hunk, new_lines: &[&str]) -> (usize, usize) {
    let (_, mut at) = firsts(hunk);
    let mut end = (at, 0);
    for line in &hunk.lines {
        match line {
            HunkLine::Context(_) => at += 1,
            HunkLine::Added(_) => {
                let text = new_lines.get(at).copied().unwrap_or("");
                end = (at, text.trim_end_matches(['\n', '\r']).len());
                at += 1;
            }
            HunkLine::Removed(_) => end = (at, 0),
        }
    }
    end
}

/// The simple cut of one file (the swap point for `redraft_context::edit::cut`).
pub fn cut_file(pair: &FilePair, options: &BuildOptions) -> Vec<NextEditCase> {
    let full = diff::diff_patch(&pair.path, &pair.old, &pair.new, 3);
    let old_lines: Vec<&str> = pair.old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = pair.new.split_inclusive('\n').collect();
    let hunks = &full.hunks;
    // The file with hunks[..k] applied: the new text up to hunk k, the old text after it.
    let version = |k: usize| -> String {
        match hunks.get(k) {
            Some(hunk) => {
                let (old_first, new_first) = firsts(hunk);
                new_lines[..new_first]
                    .iter()
                    .chain(&old_lines[old_first..])
                    .copied()
                    .collect()
            }
            None => pair.new.clone(),
        }
    };
    let history = |k: usize| -> Vec<HistoryBlock> {
        vec![HistoryBlock {
            diff: FilePatch {
                old_path: pair.path.clone(),
                new_path: pair.path.clone(),
                hunks: hunks[..k].to_vec(),
            }
            .to_string(),
            accepted_prediction: false,
        }]
    };
    let stem = name_stem(&pair.path);
    let mut cases = Vec::new();
    for k in 1..=hunks.len() {
        let target = hunks.get(k);
        if target.is_none() && !options.no_edit_cases {
            break;
        }
        let current = version(k);
        let lines: Vec<&str> = current.split_inclusive('\n').collect();
        let (cursor_line, cursor_column) = change_end(&hunks[k - 1], &new_lines);
        let (span_start, span_end) = match target {
            Some(hunk) => {
                let (_, new_first) = firsts(hunk);
                (
                    cursor_line.min(new_first),
                    cursor_line.max(new_first + hunk.old_len().max(1) - 1),
                )
            }
            None => (cursor_line, cursor_line),
        };
        let first = span_start.saturating_sub(options.context_lines);
        let last = (span_end + options.context_lines).min(lines.len().saturating_sub(1));
        if last + 1 - first > options.max_excerpt_lines || lines.is_empty() {
            continue;
        }
        let before: usize = lines[first..cursor_line.min(lines.len())]
            .iter()
            .map(|l| l.len())
            .sum();
        let mut excerpt: String = lines[first..=last].concat();
        excerpt.truncate(excerpt.trim_end_matches('\n').len());
        let cursor = (before + cursor_column).min(excerpt.len());
        let (name, expected_patches) = match target {
            Some(_) => (
                format!("{stem}--hunk-{}", k + 1),
                vec![ExpectedPatch::new(&diff::unified_diff(
                    &pair.path,
                    &current,
                    &version(k + 1),
                    3,
                ))],
            ),
            None => (format!("{stem}--after-last"), Vec::new()),
        };
        let case = NextEditCase {
            name,
            repository_url: options.repository_url.clone(),
            revision: options.revision.clone(),
            tags: Vec::new(),
            path: pair.path.clone(),
            excerpt,
            cursor,
            history: history(k),
            expected_patches,
            expected: Vec::new(),
            no_edit: false,
        };
        if !case.is_writable() {
            continue;
        }
        // What is kept is what reading the written file gives (a target whose patch does not
        // apply to the excerpt is dropped).
        if let Ok(read) = NextEditCase::from_markdown(&case.name, &case.to_markdown()) {
            if read.no_edit == target.is_none() {
                cases.push(read);
            }
        }
    }
    cases
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
