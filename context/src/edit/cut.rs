//! Next-edit cases cut from two versions of a file: what training data and the eval's case
//! builder both make from real history.
//!
//! [`cut_versions`] line-diffs the two texts into changes (maximal runs of removed and added
//! lines), drops the churn a model should not learn to predict ([`DropReason`]), groups the
//! changes that are at most [`CutOptions::group_lines`] unchanged lines apart, and within a group
//! makes one [`EditCase`] per change after the first: the group's earlier changes are the history
//! (applied, oldest first, in file order), the change is the target. A group of several changes
//! also gives a case with the whole group as history and no target (nothing follows it).
//! Changes outside a group's history that come before its target in the file (earlier groups,
//! dropped churn) are part of the text, as if done long before.
//!
//! [`case_from_edits`] is the same assembly for edits someone made up (synthetic cases): edits
//! as ranges of one base text in, an [`EditCase`] out. Pure text; no model, no tree-sitter.

use std::collections::BTreeMap;
use std::ops::Range;

use similar::{capture_diff_slices, Algorithm, DiffTag};

use super::extract::{narrowed, TextEdit};
use super::history::HistoryEdit;
use super::plan::EditBudget;

/// One next-edit example: a file after some recent edits, and what comes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditCase {
    pub path: String,
    /// The file with the history applied.
    pub text: String,
    /// Byte offset in `text`: the end of the last history edit's inserted text (where its start
    /// is, for a deletion), where an editor's cursor is after typing it.
    pub cursor: usize,
    /// Oldest first, each as [`HistoryEdit::from_change`] makes it from the text before it.
    pub history: Vec<HistoryEdit>,
    /// The next edit, narrowed to the characters that change (range in `text`); `None` when the
    /// history is complete.
    pub target: Option<TextEdit>,
}

/// How changes are grouped and what counts as churn.
#[derive(Debug, Clone, PartialEq)]
pub struct CutOptions {
    /// Changes at most this many unchanged lines apart are one group (one train of thought).
    pub group_lines: usize,
    /// A change that removes or adds more lines is a rewrite, not a next edit.
    pub max_change_lines: usize,
    /// A file whose changed lines (removed + added) are more than this fraction of both
    /// versions' lines, and more than [`CutOptions::max_change_lines`], was rewritten: no cases
    /// from it.
    pub max_changed_fraction: f64,
    /// History edits per case, at most (the most recent are kept; older ones stay applied).
    pub max_history: usize,
    /// The target must lie within this many lines above the cursor's line...
    pub lines_above: usize,
    /// ...and this many below, as the editable region does ([`EditBudget`]).
    pub lines_below: usize,
    /// Groups of at least this many kept changes also give a no-edit case.
    pub no_edit_min_group: usize,
}

impl Default for CutOptions {
    fn default() -> CutOptions {
        let budget = EditBudget::default();
        CutOptions {
            group_lines: 8,
            max_change_lines: 24,
            max_changed_fraction: 0.5,
            max_history: 6,
            lines_above: budget.lines_above,
            lines_below: budget.lines_below,
            no_edit_min_group: 2,
        }
    }
}

/// Why a change is not a target (nor a history edit); counted per change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The file is a changelog or release notes (by name).
    Changelog,
    /// The file's changes are most of it ([`CutOptions::max_changed_fraction`]).
    Rewrite,
    /// More lines than [`CutOptions::max_change_lines`].
    Giant,
    /// Only whitespace differs.
    Whitespace,
    /// Neither side has a letter or digit outside comments (moved braces, blank lines).
    NoCode,
    /// Only comments differ (doc comments included).
    Comment,
    /// Only version numbers differ (`"1.2.3"`, `html_root_url`).
    Version,
    /// A target outside the editable region around the cursor ([`CutOptions::lines_below`]).
    OutOfReach,
}

impl DropReason {
    /// The reason's name in manifests.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Changelog => "changelog",
            DropReason::Rewrite => "rewrite",
            DropReason::Giant => "giant",
            DropReason::Whitespace => "whitespace",
            DropReason::NoCode => "no_code",
            DropReason::Comment => "comment",
            DropReason::Version => "version",
            DropReason::OutOfReach => "out_of_reach",
        }
    }
}

/// What [`cut_versions`] made of a pair of versions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionCut {
    /// File order: each group's cases by target, then its no-edit case.
    pub cases: Vec<EditCase>,
    /// Changes dropped, by reason (an out-of-reach target counts once per case left out).
    pub dropped: BTreeMap<DropReason, usize>,
    /// Changes found, dropped or not.
    pub changes: usize,
}

/// The cases of [`cut_versions`], without the tallies.
pub fn cases_from_versions(
    path: &str,
    old: &str,
    new: &str,
    options: &CutOptions,
) -> Vec<EditCase> {
    cut_versions(path, old, new, options).cases
}

/// Cuts `old` -> `new` (two versions of the file at `path`) into next-edit cases (module doc).
pub fn cut_versions(path: &str, old: &str, new: &str, options: &CutOptions) -> VersionCut {
    let changes = line_changes(old, new);
    let mut cut = VersionCut {
        changes: changes.len(),
        ..VersionCut::default()
    };
    if changes.is_empty() {
        return cut;
    }
    let whole_file = if is_changelog(path) {
        Some(DropReason::Changelog)
    } else {
        let changed: usize = changes
            .iter()
            .map(|c| c.old_lines.len() + c.new_lines.len())
            .sum();
        let total = old.lines().count() + new.lines().count();
        (changed > options.max_change_lines
            && changed as f64 > options.max_changed_fraction * total as f64)
            .then_some(DropReason::Rewrite)
    };
    if let Some(reason) = whole_file {
        cut.dropped.insert(reason, changes.len());
        return cut;
    }

    let depths = (comment_depths(old), comment_depths(new));
    let kept: Vec<usize> = (0..changes.len())
        .filter(
            |&i| match churn(&changes[i], (&depths.0, &depths.1), options) {
                Some(reason) => {
                    *cut.dropped.entry(reason).or_default() += 1;
                    false
                }
                None => true,
            },
        )
        .collect();
    let edits: Vec<TextEdit> = changes.iter().map(|c| c.edit.clone()).collect();

    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &i in &kept {
        match groups.last_mut() {
            Some(group)
                if changes[i].old_lines.start
                    - changes[*group.last().expect("groups are never empty")]
                        .old_lines
                        .end
                    <= options.group_lines =>
            {
                group.push(i)
            }
            _ => groups.push(vec![i]),
        }
    }

    for group in &groups {
        for k in 1..group.len() {
            let history = &group[k.saturating_sub(options.max_history)..k];
            let case = assemble(path, old, &edits, history, Some(group[k]));
            if in_reach(&case, options) {
                cut.cases.push(case);
            } else {
                *cut.dropped.entry(DropReason::OutOfReach).or_default() += 1;
            }
        }
        if group.len() >= options.no_edit_min_group.max(1) {
            let history = &group[group.len().saturating_sub(options.max_history)..];
            cut.cases.push(assemble(path, old, &edits, history, None));
        }
    }
    cut
}

/// The case of `history` edits (in order) then `target`, all ranges in `base`: they must not
/// overlap (two insertions at one offset apply in the order given).
pub fn case_from_edits(
    path: &str,
    base: &str,
    history: &[TextEdit],
    target: Option<TextEdit>,
) -> EditCase {
    let mut text = base.to_string();
    let mut applied: Vec<(Range<usize>, isize)> = Vec::new();
    let mut records = Vec::with_capacity(history.len());
    let mut cursor = 0;
    for edit in history {
        let start = shifted(edit.range.start, &applied);
        let range = start..start + edit.range.len();
        records.push(HistoryEdit::from_change(
            path,
            &text,
            range.clone(),
            &edit.new_text,
        ));
        // Just after the last character the edit changes.
        let changed = narrowed(start, &text[range.clone()], &edit.new_text);
        cursor = changed.range.start + changed.new_text.len();
        text.replace_range(range, &edit.new_text);
        applied.push((
            edit.range.clone(),
            edit.new_text.len() as isize - edit.range.len() as isize,
        ));
    }
    let target = target.map(|edit| {
        let start = shifted(edit.range.start, &applied);
        narrowed(
            start,
            &text[start..start + edit.range.len()],
            &edit.new_text,
        )
    });
    if history.is_empty() {
        cursor = target.as_ref().map_or(0, |t| t.range.start);
    }
    EditCase {
        path: path.to_string(),
        text,
        cursor,
        history: records,
        target,
    }
}

/// Whether the target lies on the lines of the editable region the cursor would get.
pub fn in_reach(case: &EditCase, options: &CutOptions) -> bool {
    let Some(target) = &case.target else {
        return true;
    };
    let line_of = |offset: usize| case.text[..offset].matches('\n').count();
    let cursor_line = line_of(case.cursor);
    let first = line_of(target.range.start);
    // A range that ends at a line start does not touch that line.
    let end = target.range.end;
    let last = if end > target.range.start && case.text[..end].ends_with('\n') {
        line_of(end) - 1
    } else {
        line_of(end)
    };
    first + options.lines_above >= cursor_line && last <= cursor_line + options.lines_below
}

/// `offset` of the base text, moved by the applied edits that end at or before it.
fn shifted(offset: usize, applied: &[(Range<usize>, isize)]) -> usize {
    let delta: isize = applied
        .iter()
        .filter(|(range, _)| range.end <= offset)
        .map(|(_, delta)| delta)
        .sum();
    (offset as isize + delta) as usize
}

/// `old` with the target's predecessors applied: every change before the target (or, for no
/// target, up to the end of the history) that is not in the history, then the history.
fn assemble(
    path: &str,
    old: &str,
    edits: &[TextEdit],
    history: &[usize],
    target: Option<usize>,
) -> EditCase {
    let until = target.unwrap_or_else(|| history.last().map_or(0, |&last| last + 1));
    let silent: Vec<TextEdit> = (0..until)
        .filter(|i| !history.contains(i))
        .map(|i| edits[i].clone())
        .collect();
    // Silent changes are applied first, into the base: shift the rest accordingly.
    let mut base = old.to_string();
    let mut applied = Vec::new();
    for edit in &silent {
        let start = shifted(edit.range.start, &applied);
        base.replace_range(start..start + edit.range.len(), &edit.new_text);
        applied.push((
            edit.range.clone(),
            edit.new_text.len() as isize - edit.range.len() as isize,
        ));
    }
    let rebase = |edit: &TextEdit| {
        let start = shifted(edit.range.start, &applied);
        TextEdit {
            range: start..start + edit.range.len(),
            new_text: edit.new_text.clone(),
        }
    };
    let history: Vec<TextEdit> = history.iter().map(|&i| rebase(&edits[i])).collect();
    case_from_edits(path, &base, &history, target.map(|i| rebase(&edits[i])))
}

/// One run of removed and added lines: lines as indices, and the edit of the old text.
struct Change {
    old_lines: Range<usize>,
    new_lines: Range<usize>,
    removed: String,
    added: String,
    edit: TextEdit,
}

/// The line diff's changes, in file order. Lines keep their endings, so a changed ending is a
/// change (a whole-file CRLF conversion is then a rewrite).
fn line_changes(old: &str, new: &str) -> Vec<Change> {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let offsets = |lines: &[&str]| {
        let mut at = vec![0];
        for line in lines {
            at.push(at.last().copied().unwrap_or(0) + line.len());
        }
        at
    };
    let old_at = offsets(&old_lines);
    let mut changes = Vec::new();
    let mut run: Option<(Range<usize>, Range<usize>)> = None;
    let mut flush = |run: Option<(Range<usize>, Range<usize>)>| {
        if let Some((o, n)) = run {
            let removed = old_lines[o.clone()].concat();
            let added = new_lines[n.clone()].concat();
            changes.push(Change {
                edit: TextEdit {
                    range: old_at[o.start]..old_at[o.end],
                    new_text: added.clone(),
                },
                old_lines: o,
                new_lines: n,
                removed,
                added,
            });
        }
    };
    for op in capture_diff_slices(Algorithm::Myers, &old_lines, &new_lines) {
        let (tag, o, n) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            flush(run.take());
            continue;
        }
        run = Some(match run.take() {
            Some((ro, rn)) => (ro.start..o.end, rn.start..n.end),
            None => (o, n),
        });
    }
    flush(run);
    changes
}

/// Why a change is churn, if it is.
fn churn(
    change: &Change,
    depths: (&[usize], &[usize]),
    options: &CutOptions,
) -> Option<DropReason> {
    if change.old_lines.len() > options.max_change_lines
        || change.new_lines.len() > options.max_change_lines
    {
        return Some(DropReason::Giant);
    }
    let squeeze = |text: &str| {
        text.chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
    };
    if squeeze(&change.removed) == squeeze(&change.added) {
        return Some(DropReason::Whitespace);
    }
    let old_code = strip_comments(&change.removed, depths.0[change.old_lines.start]).0;
    let new_code = strip_comments(&change.added, depths.1[change.new_lines.start]).0;
    let has_code = |code: &str| code.chars().any(char::is_alphanumeric);
    if !has_code(&old_code) && !has_code(&new_code) {
        return Some(if squeeze(&old_code) == squeeze(&new_code) {
            DropReason::Comment
        } else {
            DropReason::NoCode
        });
    }
    if squeeze(&old_code) == squeeze(&new_code) {
        return Some(DropReason::Comment);
    }
    let both = |f: &dyn Fn(&str) -> bool| f(&change.removed) && f(&change.added);
    if without_versions(&change.removed) == without_versions(&change.added)
        || both(&|text: &str| text.contains("html_root_url"))
    {
        return Some(DropReason::Version);
    }
    None
}

/// `text` without its comments (`//` to the end of the line, `/* */` nested), starting inside
/// `depth` block comments; and the depth at its end. Quotes are tracked within a line only, so
/// a stray one (a lifetime, a multi-line string) cannot hide the rest of the file.
fn strip_comments(text: &str, mut depth: usize) -> (String, usize) {
    let bytes = text.as_bytes();
    let mut code = Vec::with_capacity(bytes.len());
    let mut in_string = false;
    let mut at = 0;
    while at < bytes.len() {
        let (b, next) = (bytes[at], bytes.get(at + 1).copied());
        if depth > 0 {
            if b == b'*' && next == Some(b'/') {
                depth -= 1;
                at += 2;
            } else if b == b'/' && next == Some(b'*') {
                depth += 1;
                at += 2;
            } else {
                if b == b'\n' {
                    code.push(b);
                }
                at += 1;
            }
            continue;
        }
        match b {
            b'\n' => in_string = false,
            b'\\' if in_string => {
                code.push(b);
                at += 1;
            }
            b'"' => in_string = !in_string,
            // `'"'` is a char, not a string.
            b'\'' if next == Some(b'"') && bytes.get(at + 2) == Some(&b'\'') => {
                code.extend_from_slice(&bytes[at..at + 3]);
                at += 3;
                continue;
            }
            b'/' if !in_string && next == Some(b'/') => {
                while at < bytes.len() && bytes[at] != b'\n' {
                    at += 1;
                }
                continue;
            }
            b'/' if !in_string && next == Some(b'*') => {
                depth += 1;
                at += 2;
                continue;
            }
            _ => {}
        }
        if at < bytes.len() {
            code.push(bytes[at]);
        }
        at += 1;
    }
    (String::from_utf8_lossy(&code).into_owned(), depth)
}

/// The block-comment depth at the start of each line of `text` (and after the last).
fn comment_depths(text: &str) -> Vec<usize> {
    let mut depths = vec![0];
    for line in text.split_inclusive('\n') {
        let depth = *depths.last().unwrap_or(&0);
        depths.push(strip_comments(line, depth).1);
    }
    depths
}

/// `text` with every version-like number (`0.3.17`, `v1.2.3`, `1.0.0-beta.2`) replaced by `#`,
/// whitespace dropped.
fn without_versions(text: &str) -> String {
    let chars: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = String::with_capacity(chars.len());
    let mut at = 0;
    while at < chars.len() {
        // `v1.2.3` is a version too.
        let before = match at.checked_sub(1).map(|b| chars[b]) {
            Some('v') => at.checked_sub(2).map(|b| chars[b]),
            other => other,
        };
        let starts_number = chars[at].is_ascii_digit() && !before.is_some_and(is_word);
        if starts_number {
            let mut end = at;
            let mut dots = 0;
            while end < chars.len()
                && (chars[end].is_ascii_digit()
                    || (chars[end] == '.' && chars.get(end + 1).is_some_and(char::is_ascii_digit)))
            {
                dots += usize::from(chars[end] == '.');
                end += 1;
            }
            // Two dots at least: `1.5` is more often a float than a version.
            if dots >= 2 {
                // A pre-release or build suffix belongs to the version.
                if end < chars.len() && (chars[end] == '-' || chars[end] == '+') {
                    end += 1;
                    while end < chars.len()
                        && (chars[end].is_ascii_alphanumeric() || chars[end] == '.')
                    {
                        end += 1;
                    }
                }
                out.push('#');
                at = end;
                continue;
            }
        }
        out.push(chars[at]);
        at += 1;
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_changelog(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let stem = file.split('.').next().unwrap_or(&file);
    matches!(
        stem,
        "changelog" | "changes" | "history" | "releases" | "release-notes" | "news"
    ) || file.ends_with(".md")
}
