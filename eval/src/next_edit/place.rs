//! Where a case's expected patch goes in its excerpt. Zed applies a case's patches to the whole
//! file (a checkout of the case's repository); a case here is self-contained, so each run of
//! changed lines is placed in the excerpt on its own, with as much of its context as the
//! excerpt holds, and what lies outside the excerpt is counted instead of applied. Hunks
//! Zed's parser reads without a `@@` line get one first.

use redraft_context::edit::diff::{self, DiffError, FilePatch, Hunk, HunkLine};

/// The stated lines of a hunk header Zed's parser does without.
const NO_LOCATION: &str = "@@ -0,0 +0,0 @@";

/// `diff` with a hunk header where Zed's parser reads hunk lines without one: lines right
/// after a `--- `/`+++ ` file header that are not `@@` (Zed takes them as one hunk with no
/// stated line), and `@@ ... @@` (Zed's header without a location). Both get a header stating
/// no line, which [`diff::parse_patches`] reads.
pub fn with_hunk_headers(diff: &str) -> String {
    let lines: Vec<&str> = diff.lines().collect();
    let mut out = String::with_capacity(diff.len());
    for (i, line) in lines.iter().enumerate() {
        let location_less = line
            .strip_prefix("@@")
            .is_some_and(|rest| rest.trim_start().starts_with("...") && rest.trim_start() != rest);
        if location_less {
            out.push_str(NO_LOCATION);
        } else {
            out.push_str(line);
        }
        out.push('\n');
        let after_header = line.starts_with("+++ ") && i > 0 && lines[i - 1].starts_with("--- ");
        let body_follows = lines
            .get(i + 1)
            .is_some_and(|next| next.starts_with([' ', '-', '+']) && !next.starts_with("--- "));
        if after_header && body_follows {
            out.push_str(NO_LOCATION);
            out.push('\n');
        }
    }
    out
}

/// The `-` and `+` lines of a diff's hunks.
pub fn changed_line_count(patch: &str) -> usize {
    diff::parse_patches(patch).map_or(0, |patches| {
        patches
            .iter()
            .flat_map(|p| &p.hunks)
            .flat_map(|h| &h.lines)
            .filter(|l| !matches!(l, HunkLine::Context(_)))
            .count()
    })
}

/// The excerpt after `patch` (one or more file patches), and the patch's changed lines that
/// lie outside the excerpt (each `-` or `+` and the line, as the patch writes it). Hunks of other files than `path` are skipped when the patch
/// also touches `path`; a patch of a single file is taken to be the excerpt's whatever it
/// names.
///
/// Zed applies a case's patches to the whole file; here each run of changed lines of a hunk is
/// placed on its own, in order, with as much of its context as the excerpt holds (context
/// reaching past the excerpt's first or last line is dropped); a run that is not in the
/// excerpt at all is left out and its lines returned. Where a run's lines occur more than once, the
/// first run goes to the occurrence nearest `cursor` and later ones keep its offset from the
/// lines the patch states (Zed breaks such ties by the stated line, which an excerpt's lines
/// do not have).
pub fn apply_to_excerpt(
    excerpt: &str,
    path: &str,
    patch: &str,
    cursor: usize,
) -> std::result::Result<(String, Vec<String>), DiffError> {
    let patches = diff::parse_patches(patch)?;
    let touches = |p: &FilePatch| p.old_path == path || p.new_path == path;
    let own = patches.iter().any(touches);
    let mut text = excerpt.to_string();
    let mut outside = Vec::new();
    // Found line minus stated line (net of the runs already applied), once one is placed.
    let mut shift: Option<isize> = None;
    // Lines added minus lines removed by the runs applied so far.
    let mut growth: isize = 0;
    for file in patches.iter().filter(|p| !own || touches(p)) {
        for hunk in &file.hunks {
            for run in change_runs(hunk) {
                let cursor_line = excerpt[..cursor.min(excerpt.len())].matches('\n').count();
                let placed = widest_placement(&text, &run, |stated| match shift {
                    Some(shift) => stated.saturating_add_signed(shift + growth),
                    None => cursor_line,
                });
                let Some((kept, at)) = placed else {
                    outside.extend(run.lines.iter().filter_map(|line| match line {
                        HunkLine::Removed(text) => Some(format!("-{text}")),
                        HunkLine::Added(text) => Some(format!("+{text}")),
                        HunkLine::Context(_) => None,
                    }));
                    continue;
                };
                let stated = kept.old_start.saturating_sub(1) as isize;
                shift.get_or_insert(at as isize - stated - growth);
                growth += kept.new_len() as isize - kept.old_len() as isize;
                // Stated where it was found, so the hunk lands there and nowhere else.
                let hunk = Hunk {
                    old_start: at + 1,
                    ..kept
                };
                text = diff::apply(
                    &text,
                    &FilePatch {
                        hunks: vec![hunk],
                        ..file.clone()
                    },
                )?;
            }
        }
    }
    Ok((text, outside))
}

/// A hunk split into one hunk per run of changed lines, each with the context around it (the
/// context between two runs goes to both).
fn change_runs(hunk: &Hunk) -> Vec<Hunk> {
    let lines = &hunk.lines;
    let is_change = |line: &HunkLine| !matches!(line, HunkLine::Context(_));
    let mut runs = Vec::new();
    let mut at = 0;
    while let Some(offset) = lines[at..].iter().position(is_change) {
        let change_start = at + offset;
        let change_end = lines[change_start..]
            .iter()
            .position(|l| !is_change(l))
            .map_or(lines.len(), |n| change_start + n);
        // Context reaches back to the previous run's end and on to the next run's start.
        let start = lines[..change_start]
            .iter()
            .rposition(is_change)
            .map_or(0, |p| p + 1);
        let end = lines[change_end..]
            .iter()
            .position(is_change)
            .map_or(lines.len(), |n| change_end + n);
        let before = &lines[..start];
        let old_before = before
            .iter()
            .filter(|l| !matches!(l, HunkLine::Added(_)))
            .count();
        let new_before = before
            .iter()
            .filter(|l| !matches!(l, HunkLine::Removed(_)))
            .count();
        let reaches_end = end == lines.len();
        runs.push(Hunk {
            old_start: hunk.old_start + old_before,
            new_start: hunk.new_start + new_before,
            lines: lines[start..end].to_vec(),
            old_no_newline: hunk.old_no_newline && reaches_end,
            new_no_newline: hunk.new_no_newline && reaches_end,
        });
        at = change_end;
    }
    runs
}

/// The run with the most of its context whose old lines are in `text` (context dropped from
/// the ends inward), and the 0-based line where they are, the occurrence nearest
/// `expected(stated line)`; `None` when it does not place even with no context (a pure
/// insertion needs one context line to place).
fn widest_placement(
    text: &str,
    run: &Hunk,
    expected: impl Fn(usize) -> usize,
) -> Option<(Hunk, usize)> {
    let text_lines: Vec<&str> = text
        .split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l))
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let lines = &run.lines;
    let leading = lines
        .iter()
        .take_while(|l| matches!(l, HunkLine::Context(_)))
        .count();
    let trailing = lines
        .iter()
        .rev()
        .take_while(|l| matches!(l, HunkLine::Context(_)))
        .count();
    for dropped in 0..=leading + trailing {
        for front in dropped.saturating_sub(trailing)..=dropped.min(leading) {
            let back = dropped - front;
            let kept = Hunk {
                old_start: run.old_start + front,
                new_start: run.new_start + front,
                lines: lines[front..lines.len() - back].to_vec(),
                old_no_newline: run.old_no_newline && back == 0,
                new_no_newline: run.new_no_newline && back == 0,
            };
            let old: Vec<&str> = kept.old_lines().collect();
            if old.is_empty() || old.len() > text_lines.len() {
                continue;
            }
            let want = expected(kept.old_start.saturating_sub(1));
            let found = (0..=text_lines.len() - old.len())
                .filter(|&at| text_lines[at..at + old.len()] == old[..])
                .min_by_key(|&at| at.abs_diff(want));
            if let Some(at) = found {
                return Some((kept, at));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_without_a_header_get_one_as_zed_reads_them() {
        let diff = "--- a/x\n+++ b/x\n a\n-b\n+c\n--- a/y\n+++ b/y\n@@ ... @@\n-d\n";
        assert_eq!(
            with_hunk_headers(diff),
            "--- a/x\n+++ b/x\n@@ -0,0 +0,0 @@\n a\n-b\n+c\n--- a/y\n+++ b/y\n@@ -0,0 +0,0 @@\n-d\n"
        );
        let patches = diff::parse_patches(&with_hunk_headers(diff)).unwrap();
        assert_eq!(patches.len(), 2);
        assert_eq!(patches[0].hunks[0].lines.len(), 3);
        let (text, outside) =
            apply_to_excerpt("a\nb\nz", "x", &with_hunk_headers(diff), 0).unwrap();
        assert_eq!(text, "a\nc\nz");
        assert!(outside.is_empty(), "{outside:?}");
    }
}
