//! A next-edit case in Zed's Markdown format (`crates/edit_prediction_cli/evals/*.md`, read by
//! Zed's `ExampleSpec::from_markdown`), read the way Zed reads it and written so Zed's own
//! tool reads it back.
//!
//! The format, as Zed's parser reads it: optional TOML front matter between `+++` lines
//! (`repository_url`, `revision`, `tags`); an optional `# name`; then `##` sections, of which
//! three matter:
//! - `## Edit History`: diff code blocks, oldest first (concatenated unified diffs). A
//!   paragraph `// User accepted prediction:` right before a block marks it as a prediction the
//!   user accepted (Zed records the marker as a line of its history text).
//! - `## Cursor Position`: one code block whose info string is the file's path, holding an
//!   excerpt of that file plus a marker line below the cursor's line: `^[CURSOR_POSITION]`
//!   puts the cursor at the column of the `^`, `<[CURSOR_POSITION]` at the marker line's first
//!   non-blank column (an inline `<|user_cursor|>` is also read). The marker line is removed
//!   and trailing newlines trimmed to get the excerpt.
//! - `## Expected Patch`: one or more diff blocks, each an acceptable answer. A comment line
//!   `#   ^[CURSOR_POSITION]` inside one marks where the cursor should end up; it is not part
//!   of the patch.
//!
//! Headings of level 5 and 6 are errors, as in Zed; other sections and prose are ignored.
//! Zed applies expected patches to the whole file (a checkout of `repository_url` at
//! `revision`); a case here is self-contained: the patches are applied to the excerpt with
//! [`redraft_context::edit::diff::apply`], which finds each hunk's lines nearest the line the
//! hunk states, where Zed looks for the hunk's text anywhere in the file and breaks ties by the
//! stated line. The two agree whenever a hunk's lines occur once in the excerpt (see
//! [`super::place`] for changes that reach past the excerpt).

use std::path::{Path, PathBuf};

use redraft_context::edit::diff::{DiffError, FilePatch};

use super::markdown::{self, Block, TomlValue};
use super::place::{apply_to_excerpt, changed_line_count, with_hunk_headers};
use crate::error::{Error, Result};

/// The marker of the cursor's column in a case's cursor block and expected patches.
pub const CURSOR_MARKER: &str = "[CURSOR_POSITION]";
/// The cursor written inside the excerpt's text (an alternative Zed also reads).
pub const INLINE_CURSOR_MARKER: &str = "<|user_cursor|>";
/// The paragraph before an edit-history block that the user accepted as a prediction.
pub const ACCEPTED_PREDICTION_MARKER: &str = "// User accepted prediction:";

/// One next-edit case: an excerpt of a file with the cursor in it, the edits that led there
/// and the acceptable next edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextEditCase {
    /// The `# heading`, else the file's stem.
    pub name: String,
    pub repository_url: String,
    pub revision: String,
    pub tags: Vec<String>,
    /// The path of the excerpt's file (the cursor block's info string).
    pub path: String,
    /// The file around the cursor, without trailing newlines.
    pub excerpt: String,
    /// Byte offset of the cursor in `excerpt`.
    pub cursor: usize,
    /// The recent edits, oldest first, one entry per code block.
    pub history: Vec<HistoryBlock>,
    /// The acceptable next edits, as written in the case.
    pub expected_patches: Vec<ExpectedPatch>,
    /// The excerpt after each of `expected_patches`, in order.
    pub expected: Vec<String>,
    /// The right answer is no edit: the case has no expected patch (or none changes the
    /// excerpt).
    pub no_edit: bool,
}

/// One code block of the edit history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryBlock {
    /// Unified diffs, as written.
    pub diff: String,
    /// The user accepted this edit as a suggestion (rather than typing it).
    pub accepted_prediction: bool,
}

impl HistoryBlock {
    /// The block's file patches.
    pub fn patches(&self) -> std::result::Result<Vec<FilePatch>, DiffError> {
        redraft_context::edit::diff::parse_patches(&with_hunk_headers(&self.diff))
    }
}

/// One acceptable next edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedPatch {
    /// The diff as the case writes it, cursor comment line included.
    pub written: String,
    /// Changed lines of the patch that lie outside the excerpt (Zed's whole-file patches can
    /// reach past it), each `-` or `+` and the line as the patch writes it; set when the case
    /// is read. No system sees or changes them, so the changed-line counts leave them out.
    pub outside: Vec<String>,
}

impl ExpectedPatch {
    /// A patch with no cursor mark.
    pub fn new(patch: &str) -> ExpectedPatch {
        ExpectedPatch {
            written: patch.to_string(),
            outside: Vec::new(),
        }
    }

    /// The diff without its cursor comment lines (what Zed scores changed lines on), with a
    /// hunk header wherever Zed reads hunk lines without one (see [`with_hunk_headers`]).
    pub fn patch(&self) -> String {
        let mut clean = String::new();
        for line in self.written.lines() {
            if !(line.starts_with('#') && line.contains(CURSOR_MARKER)) {
                clean.push_str(line);
                clean.push('\n');
            }
        }
        with_hunk_headers(&clean)
    }
}

/// Why a case file is not a case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaseError {
    #[error("no `## Cursor Position` code block (its info string is the file's path)")]
    MissingCursorBlock,
    #[error(
        "the cursor block has no `[CURSOR_POSITION]` marker line (or inline `<|user_cursor|>`)"
    )]
    MissingCursorMarker,
    #[error("the cursor marker line needs `^` (cursor column) or `<` (first non-blank column) before `[CURSOR_POSITION]`")]
    MarkerWithoutArrow,
    #[error("heading of level {0}: Zed's format has `#` to `####` only")]
    HeadingLevel(usize),
    #[error("expected patch {alternative}: {source}")]
    Patch {
        /// 1-based.
        alternative: usize,
        source: DiffError,
    },
    #[error(
        "expected patch {0} changes nothing inside the cursor block's excerpt: widen the excerpt"
    )]
    PatchOutsideExcerpt(usize),
    #[error("edit history: {0}")]
    History(DiffError),
}

impl NextEditCase {
    /// Reads a case as Zed's `ExampleSpec::from_markdown` + `cursor_excerpt` do; `name` is used
    /// when the text has no `# heading`. The expected patches must apply to the excerpt.
    pub fn from_markdown(name: &str, input: &str) -> std::result::Result<NextEditCase, CaseError> {
        let (front, body) = markdown::split_front_matter(input);
        let mut repository_url = String::new();
        let mut revision = String::new();
        let mut tags = Vec::new();
        // Zed's front matter needs both fields, else it is ignored as a whole.
        if let Some(values) = front.and_then(markdown::front_matter) {
            let string = |key: &str| {
                values.iter().find_map(|(k, v)| match v {
                    TomlValue::String(s) if k == key => Some(s.clone()),
                    _ => None,
                })
            };
            if let (Some(url), Some(rev)) = (string("repository_url"), string("revision")) {
                repository_url = url;
                revision = rev;
                tags = values
                    .iter()
                    .find_map(|(k, v)| match v {
                        TomlValue::Array(items) if k == "tags" => Some(items.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
            }
        }

        #[derive(PartialEq)]
        enum Section {
            Start,
            EditHistory,
            CursorPosition,
            ExpectedPatch,
            Other,
        }
        let mut section = Section::Start;
        let mut heading_name = None;
        let mut history = Vec::new();
        let mut cursor_block: Option<(String, String)> = None;
        let mut expected_patches = Vec::new();
        let mut previous: Option<&Block> = None;
        let blocks = markdown::blocks(body);
        for block in &blocks {
            match block {
                Block::Heading { level: 1, text } => heading_name = Some(text.clone()),
                Block::Heading { level: 2, text } => {
                    section = match text.to_ascii_lowercase().as_str() {
                        "edit history" => Section::EditHistory,
                        "cursor position" => Section::CursorPosition,
                        "expected patch" => Section::ExpectedPatch,
                        _ => Section::Other,
                    }
                }
                Block::Heading { level: 3 | 4, .. } => {}
                Block::Heading { level, .. } => return Err(CaseError::HeadingLevel(*level)),
                Block::Paragraph(_) => {}
                Block::Code { info, text } => match section {
                    Section::EditHistory => {
                        let accepted = matches!(previous, Some(Block::Paragraph(p))
                            if p.trim() == ACCEPTED_PREDICTION_MARKER);
                        history.extend(split_history(text, accepted));
                    }
                    Section::CursorPosition => cursor_block = Some((info.clone(), text.clone())),
                    Section::ExpectedPatch => expected_patches.push(ExpectedPatch::new(text)),
                    Section::Start | Section::Other => {}
                },
            }
            previous = Some(block);
        }
        let (path, cursor_text) = cursor_block
            .filter(|(path, text)| !path.is_empty() && !text.is_empty())
            .ok_or(CaseError::MissingCursorBlock)?;
        let (excerpt, cursor) = cursor_excerpt(&cursor_text)?;
        for block in &history {
            block.patches().map_err(CaseError::History)?;
        }
        let mut expected = Vec::with_capacity(expected_patches.len());
        for (i, patch) in expected_patches.iter_mut().enumerate() {
            let clean = patch.patch();
            let (text, outside) =
                apply_to_excerpt(&excerpt, &path, &clean, cursor).map_err(|source| {
                    CaseError::Patch {
                        alternative: i + 1,
                        source,
                    }
                })?;
            let changes = changed_line_count(&clean);
            if changes > 0 && outside.len() == changes {
                return Err(CaseError::PatchOutsideExcerpt(i + 1));
            }
            patch.outside = outside;
            expected.push(text);
        }
        let no_edit = expected.iter().all(|e| *e == excerpt);
        Ok(NextEditCase {
            name: heading_name
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| name.to_string()),
            repository_url,
            revision,
            tags,
            path,
            excerpt,
            cursor,
            history,
            expected_patches,
            expected,
            no_edit,
        })
    }

    /// Reads one case file; its name is the file's stem unless it has a `# heading`.
    pub fn read(path: &Path) -> Result<NextEditCase> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let stem = path
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        NextEditCase::from_markdown(&stem, &text).map_err(|e| Error::Input {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// The alternatives a suggestion is scored against: the expected excerpts, or the excerpt
    /// itself when the right answer is no edit.
    pub fn alternatives(&self) -> Vec<&str> {
        if self.no_edit {
            vec![self.excerpt.as_str()]
        } else {
            self.expected.iter().map(String::as_str).collect()
        }
    }

    /// The case in Zed's Markdown format, as Zed's `ExampleSpec::to_markdown` lays it out (one
    /// block per history entry, so accepted predictions keep their marker paragraph). Reading
    /// the text back gives the same case, provided the excerpt has no trailing newline and
    /// contains no cursor marker (see [`NextEditCase::is_writable`]).
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("+++\n");
        out.push_str(&format!(
            "repository_url = {}\n",
            markdown::toml_quote(&self.repository_url)
        ));
        out.push_str(&format!(
            "revision = {}\n",
            markdown::toml_quote(&self.revision)
        ));
        if !self.tags.is_empty() {
            let tags: Vec<String> = self.tags.iter().map(|t| markdown::toml_quote(t)).collect();
            out.push_str(&format!("tags = [{}]\n", tags.join(", ")));
        }
        out.push_str("+++\n\n");
        out.push_str(&format!("# {}\n\n", self.name));
        out.push_str("## Edit History\n\n");
        if self.history.is_empty() {
            out.push_str("(No edit history)\n\n");
        }
        for block in &self.history {
            if block.accepted_prediction {
                out.push_str(ACCEPTED_PREDICTION_MARKER);
                out.push('\n');
            }
            push_code(&mut out, "diff", &block.diff);
        }
        out.push_str("## Cursor Position\n\n");
        let prefix = line_comment(&self.path);
        push_code(
            &mut out,
            &self.path,
            &format_cursor_excerpt(&self.excerpt, self.cursor, prefix),
        );
        out.push_str("## Expected Patch\n\n");
        for patch in &self.expected_patches {
            push_code(&mut out, "diff", &patch.written);
        }
        out
    }

    /// Whether [`NextEditCase::to_markdown`] writes this case faithfully: the excerpt ends in
    /// no newline, holds no cursor marker, and the path is one line.
    pub fn is_writable(&self) -> bool {
        !self.excerpt.ends_with('\n')
            && !self.excerpt.contains(CURSOR_MARKER)
            && !self.excerpt.contains(INLINE_CURSOR_MARKER)
            && self.excerpt.is_char_boundary(self.cursor)
            && self.cursor <= self.excerpt.len()
            && !self.path.is_empty()
            && !self.path.contains(['\n', '`'])
    }
}

/// A history code block, split at marker lines inside it (Zed writes its history as one
/// block, the markers as lines of it).
fn split_history(text: &str, accepted: bool) -> Vec<HistoryBlock> {
    let mut blocks = Vec::new();
    let mut current = HistoryBlock {
        diff: String::new(),
        accepted_prediction: accepted,
    };
    for line in text.split_inclusive('\n') {
        if line.trim() == ACCEPTED_PREDICTION_MARKER {
            if !current.diff.trim().is_empty() {
                blocks.push(current);
            }
            current = HistoryBlock {
                diff: String::new(),
                accepted_prediction: true,
            };
        } else {
            current.diff.push_str(line);
        }
    }
    if !current.diff.trim().is_empty() {
        blocks.push(current);
    }
    blocks
}

fn push_code(out: &mut String, info: &str, text: &str) {
    let fence = markdown::fence_for(text);
    out.push_str(&fence);
    out.push_str(info);
    out.push('\n');
    out.push_str(text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&fence);
    out.push_str("\n\n");
}

/// The excerpt and cursor offset of a cursor block, as Zed's `ExampleSpec::cursor_excerpt`
/// computes them. A column past the end of the excerpt (Zed would keep it) is clamped to it.
pub fn cursor_excerpt(block: &str) -> std::result::Result<(String, usize), CaseError> {
    if let Some(at) = block.find(INLINE_CURSOR_MARKER) {
        let excerpt = format!(
            "{}{}",
            &block[..at],
            &block[at + INLINE_CURSOR_MARKER.len()..]
        );
        return Ok((excerpt, at));
    }
    let marker = block
        .find(CURSOR_MARKER)
        .ok_or(CaseError::MissingCursorMarker)?;
    let line_start = block[..marker].rfind('\n').map_or(0, |at| at + 1);
    let line_end = block[line_start..]
        .find('\n')
        .map_or(block.len(), |at| line_start + at + 1);
    let marker_line = block[line_start..line_end].trim_end_matches('\n');
    let column = if let Some(caret) = marker_line.find('^') {
        caret
    } else if let Some(less) = marker_line.find('<') {
        marker_line
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(less)
    } else {
        return Err(CaseError::MarkerWithoutArrow);
    };
    let mut excerpt = format!("{}{}", &block[..line_start], &block[line_end..]);
    excerpt.truncate(excerpt.trim_end_matches('\n').len());
    // The cursor is on the line above the marker line.
    let cursor_line_end = line_start.saturating_sub(1).min(excerpt.len());
    let cursor_line_start = excerpt[..cursor_line_end]
        .rfind('\n')
        .map_or(0, |at| at + 1);
    let mut cursor = (cursor_line_start + column).min(excerpt.len());
    while !excerpt.is_char_boundary(cursor) {
        cursor -= 1;
    }
    Ok((excerpt, cursor))
}

/// The cursor block for `excerpt` with the cursor at byte `cursor`: the marker line goes
/// below the cursor's line, as a `prefix` comment, in the form Zed's `set_cursor_excerpt`
/// writes (`<` when the cursor's column is left of where the comment could put a `^`).
pub fn format_cursor_excerpt(excerpt: &str, cursor: usize, prefix: &str) -> String {
    let line_start = excerpt[..cursor].rfind('\n').map_or(0, |at| at + 1);
    let line_end = excerpt[line_start..]
        .find('\n')
        .map_or(excerpt.len(), |at| line_start + at + 1);
    let line = &excerpt[line_start..line_end];
    let indent = &line[..line.len() - line.trim_start().len()];
    let column = cursor - line_start;
    let mut marker = String::new();
    if column < prefix.len() {
        marker.push_str(&" ".repeat(column));
        marker.push_str(prefix);
        marker.push_str(" <");
    } else {
        if column >= indent.len() + prefix.len() {
            marker.push_str(indent);
        }
        marker.push_str(prefix);
        while marker.len() < column {
            marker.push(' ');
        }
        marker.push('^');
    }
    marker.push_str(CURSOR_MARKER);
    let mut out = excerpt[..line_end].to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&marker);
    if line_end < excerpt.len() {
        out.push('\n');
        out.push_str(&excerpt[line_end..]);
    }
    out
}

/// The line-comment prefix for the marker line of a file (by extension; `#` for anything
/// unknown, as Zed's own README case has it). The marker line is removed on reading, so this
/// only decides how the case looks.
pub fn line_comment(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let extension = name.rsplit_once('.').map_or("", |(_, ext)| ext);
    match extension.to_ascii_lowercase().as_str() {
        "rs" | "c" | "h" | "cc" | "cpp" | "hpp" | "cxx" | "cs" | "go" | "java" | "js" | "jsx"
        | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "kt" | "kts" | "swift" | "scala" | "dart"
        | "zig" | "proto" | "php" | "groovy" | "gradle" | "sol" | "v" | "jsonc" => "//",
        "sql" | "lua" | "hs" | "elm" | "ada" => "--",
        "lisp" | "el" | "clj" | "cljs" | "scm" | "rkt" | "asm" | "s" => ";",
        "erl" | "hrl" | "tex" | "m" => "%",
        _ => "#",
    }
}

/// Reads a case set: every `.md` file of a directory (not its subdirectories), in name order,
/// or one file.
pub fn read_cases(path: &Path) -> Result<Vec<NextEditCase>> {
    let files = case_files(path)?;
    let cases: Vec<NextEditCase> = files
        .iter()
        .map(|f| NextEditCase::read(f))
        .collect::<Result<_>>()?;
    let mut names = std::collections::HashSet::new();
    for (case, file) in cases.iter().zip(&files) {
        if !names.insert(case.name.as_str()) {
            return Err(Error::Input {
                path: file.clone(),
                message: format!(
                    "a second case named `{}`: names identify results",
                    case.name
                ),
            });
        }
    }
    Ok(cases)
}

/// The files of a case set, as [`read_cases`] reads them: every `.md` file of a directory (not
/// its subdirectories), in name order, or the one file.
pub fn case_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(path, e))?;
        let file = entry.path();
        if file.is_file() && file.extension().is_some_and(|e| e == "md") {
            files.push(file);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(Error::Input {
            path: path.to_path_buf(),
            message: "no .md case files here: pass a directory of Zed-format next-edit cases or one case file".into(),
        });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zed's own examples of marker lines (its `test_cursor_excerpt_with_caret`), each written
    /// and read back.
    #[test]
    fn cursor_marker_lines_are_written_and_read_as_zed_does() {
        let excerpt = "fn main() {\n    let x = 42;\n    println!(\"{}\", x);\n}";
        let check = |offset: usize, marker: &str| {
            let block = format_cursor_excerpt(excerpt, offset, "//");
            let line = block.lines().nth(2).unwrap();
            assert_eq!(line, marker, "{block}");
            assert_eq!(
                cursor_excerpt(&format!("{block}\n")).unwrap(),
                (excerpt.to_string(), offset)
            );
        };
        check(
            excerpt.find("42").unwrap(),
            "    //      ^[CURSOR_POSITION]",
        );
        check(excerpt.find("et x").unwrap(), "//   ^[CURSOR_POSITION]");
        check(excerpt.find("let").unwrap(), "//  ^[CURSOR_POSITION]");
        check(excerpt.find("    let").unwrap(), "// <[CURSOR_POSITION]");
        check(
            excerpt.find(';').unwrap() + 1,
            "    //         ^[CURSOR_POSITION]",
        );
        // At the end of the excerpt, with no line after the marker.
        let short = "fn main() {\n    let x = 42;";
        let block = format_cursor_excerpt(short, short.len(), "//");
        assert!(block.ends_with("\n    //         ^[CURSOR_POSITION]"));
        assert_eq!(cursor_excerpt(&block).unwrap(), (short.into(), short.len()));
    }

    #[test]
    fn the_less_than_marker_takes_the_first_non_blank_column() {
        // Zed's column is the marker line's, even past the end of the cursor's line: here the
        // cursor line is `\t/` and the column 3, the start of the next line.
        let (excerpt, cursor) =
            cursor_excerpt("a\n\t/\n   // <[CURSOR_POSITION]\n\tresult\n").unwrap();
        assert_eq!(excerpt, "a\n\t/\n\tresult");
        assert_eq!(&excerpt[cursor..], "\tresult");
        assert_eq!(
            cursor_excerpt("x <|user_cursor|>y\n").unwrap(),
            ("x y\n".into(), 2)
        );
        assert_eq!(cursor_excerpt("x\n"), Err(CaseError::MissingCursorMarker));
        assert_eq!(
            cursor_excerpt("x\n// [CURSOR_POSITION]\n"),
            Err(CaseError::MarkerWithoutArrow)
        );
    }

    #[test]
    fn history_blocks_split_at_marker_lines_zed_writes_inside_them() {
        let blocks = split_history(
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n// User accepted prediction:\n--- a/x\n",
            false,
        );
        assert_eq!(blocks.len(), 2);
        assert!(!blocks[0].accepted_prediction && blocks[1].accepted_prediction);
        assert_eq!(blocks[1].diff, "--- a/x\n");
    }

    #[test]
    fn cursor_comment_lines_are_not_part_of_the_patch() {
        let patch = ExpectedPatch::new("@@ -1 +1 @@\n-a\n+b\n#^[CURSOR_POSITION]\n c\n");
        assert_eq!(patch.patch(), "@@ -1 +1 @@\n-a\n+b\n c\n");
    }

    #[test]
    fn comment_prefixes_follow_the_extension() {
        assert_eq!(line_comment("src/lib.rs"), "//");
        assert_eq!(line_comment("tests/test_basic.py"), "#");
        assert_eq!(line_comment("README"), "#");
        assert_eq!(line_comment("a.b/init.lua"), "--");
    }
}
