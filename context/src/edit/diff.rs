//! Unified diffs: parsing concatenated `git diff` output (and the looser hand-written kind
//! found in edit-prediction datasets), applying a file's hunks to a text whose line numbers may
//! not match the hunks', and writing a diff between two texts.
//!
//! Line endings are not part of a parsed diff: hunk lines carry no `\n` or `\r\n`, a parsed CRLF
//! diff reads like an LF one, and [`apply`] writes added lines with the text's own line ending.
//! A written diff is for `git apply` and `patch` as much as for [`parse_patches`], so
//! [`unified_diff`] compares and writes each line with its exact bytes: a CRLF line keeps its
//! `\r` before the `\n`, and a line whose ending changed is a changed line. A missing newline at
//! the end of the file is the `\ No newline at end of file` marker either way; a last line that
//! ends in a lone `\r` is written with it before the `\n` and read back with it (unless the
//! diff's own lines, the marker's too, end in `\r\n`).

use std::fmt;

use similar::{capture_diff_slices, group_diff_ops, Algorithm, DiffTag};

/// The changes to one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilePatch {
    /// The path after `--- `, without git's `a/` prefix (and without a tab-separated
    /// timestamp); empty for hunks that came without a file header.
    pub old_path: String,
    /// The path after `+++ `, without git's `b/` prefix.
    pub new_path: String,
    pub hunks: Vec<Hunk>,
}

/// One `@@` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hunk {
    /// 1-based line of the old text where the hunk starts, as written (for a hunk with no old
    /// lines: the line after which it inserts, 0 at the top).
    pub old_start: usize,
    /// 1-based line of the new text, as written.
    pub new_start: usize,
    pub lines: Vec<HunkLine>,
    /// The hunk's last old line is the end of a file without a final newline.
    pub old_no_newline: bool,
    /// The hunk's last new line is the end of a file without a final newline.
    pub new_no_newline: bool,
}

/// A line of a hunk, without its line ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Removed(String),
    Added(String),
}

impl HunkLine {
    pub fn text(&self) -> &str {
        match self {
            HunkLine::Context(text) | HunkLine::Removed(text) | HunkLine::Added(text) => text,
        }
    }
}

impl Hunk {
    /// The lines the hunk expects in the old text: context and removed, in order.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> + '_ {
        self.lines.iter().filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Removed(text) => Some(text.as_str()),
            HunkLine::Added(_) => None,
        })
    }

    /// The lines the hunk leaves in the new text: context and added, in order.
    pub fn new_lines(&self) -> impl Iterator<Item = &str> + '_ {
        self.lines.iter().filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Added(text) => Some(text.as_str()),
            HunkLine::Removed(_) => None,
        })
    }

    pub fn old_len(&self) -> usize {
        self.old_lines().count()
    }

    pub fn new_len(&self) -> usize {
        self.new_lines().count()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    #[error(
        "line {line}: bad hunk header {header:?}: expected `@@ -start[,count] +start[,count] @@`"
    )]
    BadHunkHeader { line: usize, header: String },
    #[error(
        "hunk {hunk} of {path:?} (`@@ -{old_start}`): its context and removed lines are not in \
         the text; make the diff against this text"
    )]
    HunkNotFound {
        /// 1-based position of the hunk in its file patch.
        hunk: usize,
        old_start: usize,
        path: String,
    },
}

/// Reads every file patch in `text`: `--- `/`+++ ` headers (git's `a/` and `b/` stripped) and
/// their `@@` hunks. What is between patches (`diff --git`, `index` lines, prose, markers) is
/// skipped. Hunk bodies are read up to the first line that cannot be a hunk line; a blank line
/// inside a body is an empty context line (hand-written diffs drop the space), and blank lines
/// that end a body past its stated counts are dropped. A hunk before any file header starts a
/// patch with empty paths. CRLF input reads like LF. A combined diff's hunks (`@@@`, what
/// `git diff` shows of a file with merge conflicts) are skipped with their bodies: they say how
/// a merge's result differs from each parent, which is no one edit.
pub fn parse_patches(text: &str) -> Result<Vec<FilePatch>, DiffError> {
    let lines: Vec<&str> = text.lines().collect();
    // Whether each line ended in `\r\n` (`lines` drops the `\r`); `None`: the text's last
    // line, with no line break.
    let crlf: Vec<Option<bool>> = text
        .split_inclusive('\n')
        .map(|line| line.ends_with('\n').then(|| line.ends_with("\r\n")))
        .collect();
    let mut patches: Vec<FilePatch> = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        if let Some((old_path, new_path)) = file_header(&lines, at) {
            patches.push(FilePatch {
                old_path,
                new_path,
                hunks: Vec::new(),
            });
            at += 2;
        } else if lines[at].starts_with("@@@") {
            at += 1;
        } else if lines[at].starts_with("@@") {
            let header = HunkHeader::parse(lines[at]).ok_or_else(|| DiffError::BadHunkHeader {
                line: at + 1,
                header: lines[at].to_string(),
            })?;
            let (hunk, next) = read_hunk(&lines, &crlf, at + 1, &header);
            if patches.is_empty() {
                patches.push(FilePatch::default());
            }
            patches
                .last_mut()
                .expect("a patch was pushed")
                .hunks
                .push(hunk);
            at = next;
        } else {
            at += 1;
        }
    }
    Ok(patches)
}

/// `--- old` directly followed by `+++ new`.
fn file_header(lines: &[&str], at: usize) -> Option<(String, String)> {
    let old = lines.get(at)?.strip_prefix("--- ")?;
    let new = lines.get(at + 1)?.strip_prefix("+++ ")?;
    Some((header_path(old, "a/"), header_path(new, "b/")))
}

/// The path of a `---`/`+++` field: a name git quoted (`"a/x\ty"`, [`quoted_name`]) read back,
/// else the field up to a tab (a timestamp follows it); without `prefix` either way.
fn header_path(field: &str, prefix: &str) -> String {
    let path = match unquoted_name(field) {
        Some(name) => name,
        None => field
            .split('\t')
            .next()
            .unwrap_or(field)
            .trim_end()
            .to_string(),
    };
    match path.strip_prefix(prefix) {
        Some(rest) => rest.to_string(),
        None => path,
    }
}

/// The escapes of a quoted name other than octal ones: the character after the `\` and the
/// byte it stands for.
const NAME_ESCAPES: [(u8, u8); 9] = [
    (b'a', 0x07),
    (b'b', 0x08),
    (b't', b'\t'),
    (b'n', b'\n'),
    (b'v', 0x0b),
    (b'f', 0x0c),
    (b'r', b'\r'),
    (b'"', b'"'),
    (b'\\', b'\\'),
];

/// `name` as a diff header writes it. A name holding a byte that would break the header line or
/// be misread (a control character such as a newline or a tab, a `"`, a `\`) is written as git
/// writes it: in double quotes, each such byte escaped C-style (`\n`, `\t`, `\"`, `\\` and
/// the like, any other control byte as three octal digits: `\033`), as is a name that ends in
/// whitespace (a header's trailing whitespace is not read as the name's). Other names, spaces
/// and non-ASCII letters included, are written as they are.
fn quoted_name(name: &str) -> std::borrow::Cow<'_, str> {
    let plain = |b: u8| !(b.is_ascii_control() || b == b'"' || b == b'\\');
    // A name ending in whitespace is quoted too: a header field's trailing whitespace is not
    // read as part of the name.
    if name.bytes().all(plain) && !name.ends_with(|c: char| c.is_whitespace()) {
        return name.into();
    }
    let mut quoted = String::with_capacity(name.len() + 2);
    quoted.push('"');
    for c in name.chars() {
        match u8::try_from(c).ok().filter(|&b| !plain(b)) {
            None => quoted.push(c),
            Some(b) => match NAME_ESCAPES.iter().find(|(_, byte)| *byte == b) {
                Some((letter, _)) => {
                    quoted.push('\\');
                    quoted.push(char::from(*letter));
                }
                None => quoted.push_str(&format!("\\{b:03o}")),
            },
        }
    }
    quoted.push('"');
    quoted.into()
}

/// A name [`quoted_name`] (or git) quoted, read back; `None` when `field` does not start with a
/// quoted name (then it is the name as it is).
fn unquoted_name(field: &str) -> Option<String> {
    let mut bytes = field.strip_prefix('"')?.bytes();
    let mut name = Vec::new();
    loop {
        match bytes.next()? {
            b'"' => break,
            b'\\' => {
                let escaped = bytes.next()?;
                if let Some((_, byte)) = NAME_ESCAPES.iter().find(|(letter, _)| *letter == escaped)
                {
                    name.push(*byte);
                    continue;
                }
                let mut value = u32::from(escaped.checked_sub(b'0').filter(|d| *d < 8)?);
                for _ in 0..2 {
                    let digit = bytes.next()?.checked_sub(b'0').filter(|d| *d < 8)?;
                    value = value * 8 + u32::from(digit);
                }
                name.push(u8::try_from(value).ok()?);
            }
            byte => name.push(byte),
        }
    }
    Some(String::from_utf8_lossy(&name).into_owned())
}

struct HunkHeader {
    old_start: usize,
    old_count: usize,
    new_start: usize,
    new_count: usize,
}

impl HunkHeader {
    /// `@@ -a[,b] +c[,d] @@ section`; an omitted count is 1, as in GNU diff.
    fn parse(line: &str) -> Option<HunkHeader> {
        let rest = line.strip_prefix("@@")?.trim_start();
        let (ranges, _section) = rest.split_once("@@")?;
        let mut fields = ranges.split_whitespace();
        let (old_start, old_count) = range(fields.next()?.strip_prefix('-')?)?;
        let (new_start, new_count) = range(fields.next()?.strip_prefix('+')?)?;
        fields.next().is_none().then_some(HunkHeader {
            old_start,
            old_count,
            new_start,
            new_count,
        })
    }
}

fn range(field: &str) -> Option<(usize, usize)> {
    match field.split_once(',') {
        Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
        None => Some((field.parse().ok()?, 1)),
    }
}

/// Reads a hunk body from `lines[start..]`; returns the hunk and the index of the first line
/// after it.
/// `crlf[i]`: whether `lines[i]` ended in `\r\n` (`None`: in no line break).
fn read_hunk(
    lines: &[&str],
    crlf: &[Option<bool>],
    start: usize,
    header: &HunkHeader,
) -> (Hunk, usize) {
    let mut hunk = Hunk {
        old_start: header.old_start,
        new_start: header.new_start,
        ..Hunk::default()
    };
    // Whether each line was a bare blank line (read as context), for trimming the tail.
    let mut bare = Vec::new();
    let (mut old_seen, mut new_seen) = (0, 0);
    let mut at = start;
    while let Some(&line) = lines.get(at) {
        let counts_due = old_seen < header.old_count || new_seen < header.new_count;
        // A `--- x` / `+++ y` pair inside a body the counts say is unfinished is a removed
        // `-- x` and an added `++ y`.
        if line.starts_with("@@") || (!counts_due && file_header(lines, at).is_some()) {
            break;
        }
        let (kind, text) = match line.as_bytes().first() {
            None => (b' ', ""),
            Some(&first @ (b' ' | b'-' | b'+')) => (first, &line[1..]),
            Some(b'\\') => {
                // The line before the marker is the file's last, which has no newline: a `\r`
                // before the diff's `\n` is the file's last byte (a lone `\r`), unless the
                // diff's own lines end in `\r\n` (the marker's does too; a marker that ends the
                // diff with no break of its own goes by the hunk's header).
                let diff_crlf = crlf[at].unwrap_or(crlf[start - 1] == Some(true));
                if at > start
                    && crlf[at - 1] == Some(true)
                    && !diff_crlf
                    && !lines[at - 1].starts_with('\\')
                {
                    if let Some(
                        HunkLine::Removed(text) | HunkLine::Added(text) | HunkLine::Context(text),
                    ) = hunk.lines.last_mut()
                    {
                        text.push('\r');
                    }
                }
                match hunk.lines.last() {
                    Some(HunkLine::Removed(_)) => hunk.old_no_newline = true,
                    Some(HunkLine::Added(_)) => hunk.new_no_newline = true,
                    Some(HunkLine::Context(_)) => {
                        hunk.old_no_newline = true;
                        hunk.new_no_newline = true;
                    }
                    None => {}
                }
                at += 1;
                continue;
            }
            Some(_) => break,
        };
        let text = text.to_string();
        hunk.lines.push(match kind {
            b'-' => HunkLine::Removed(text),
            b'+' => HunkLine::Added(text),
            _ => HunkLine::Context(text),
        });
        bare.push(line.is_empty());
        if kind != b'+' {
            old_seen += 1;
        }
        if kind != b'-' {
            new_seen += 1;
        }
        at += 1;
    }
    while bare.last() == Some(&true) && (old_seen > header.old_count || new_seen > header.new_count)
    {
        bare.pop();
        hunk.lines.pop();
        old_seen -= 1;
        new_seen -= 1;
    }
    (hunk, at)
}

/// A line of a text: its content and its ending (`"\n"`, `"\r\n"` or `""` at the end).
#[derive(Clone, Copy)]
struct Line<'a> {
    content: &'a str,
    ending: &'a str,
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    text.split_inclusive('\n')
        .map(|line| {
            let content = line
                .strip_suffix("\r\n")
                .or_else(|| line.strip_suffix('\n'))
                .unwrap_or(line);
            Line {
                content,
                ending: &line[content.len()..],
            }
        })
        .collect()
}

/// The text's line ending: its first line's, else `\n`.
pub(crate) fn line_ending(text: &str) -> &'static str {
    match text.find('\n') {
        Some(at) if at > 0 && text.as_bytes()[at - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

/// Applies `patch`'s hunks to `text`, in order. Each hunk's old lines (context and removed)
/// are looked for nearest the line the hunk states, shifted by how far the previous hunk was
/// found from its own stated line (an excerpt's line numbers differ from the file's by a
/// constant), then anywhere after the previous hunk. Added lines take the text's line ending.
pub fn apply(text: &str, patch: &FilePatch) -> Result<String, DiffError> {
    let lines = split_lines(text);
    let eol = line_ending(text);
    let mut out = String::with_capacity(text.len());
    // Lines before `done` are written (or replaced).
    let mut done = 0;
    // Found line minus stated line, from the previous hunk.
    let mut shift: isize = 0;
    for (number, hunk) in patch.hunks.iter().enumerate() {
        let old: Vec<&str> = hunk.old_lines().collect();
        // For a hunk with no old lines the stated line is the one it inserts after.
        let stated = if old.is_empty() {
            hunk.old_start
        } else {
            hunk.old_start.saturating_sub(1)
        };
        let expected = stated.saturating_add_signed(shift);
        let found =
            find_lines(&lines, &old, done, expected).ok_or_else(|| DiffError::HunkNotFound {
                hunk: number + 1,
                old_start: hunk.old_start,
                path: patch.old_path.clone(),
            })?;
        shift = found as isize - stated as isize;
        let new_len = hunk.new_len();
        for line in &lines[done..found] {
            out.push_str(line.content);
            // Only the text's last line lacks an ending; lines inserted after it need one.
            out.push_str(if line.ending.is_empty() && new_len > 0 {
                eol
            } else {
                line.ending
            });
        }
        let end = found + old.len();
        // How the text ends when the hunk reaches its end: as the hunk says, else as it did.
        let final_ending = if hunk.new_no_newline {
            ""
        } else if hunk.old_no_newline {
            eol
        } else {
            lines.last().map_or(eol, |line| line.ending)
        };
        let mut old_at = found;
        let mut written = 0;
        for line in &hunk.lines {
            let ending = match line {
                HunkLine::Removed(_) => {
                    old_at += 1;
                    continue;
                }
                HunkLine::Context(_) => {
                    old_at += 1;
                    lines[old_at - 1].ending
                }
                HunkLine::Added(_) => eol,
            };
            written += 1;
            out.push_str(line.text());
            out.push_str(if written == new_len && end == lines.len() {
                final_ending
            } else if ending.is_empty() {
                eol
            } else {
                ending
            });
        }
        done = end;
    }
    for line in &lines[done..] {
        out.push_str(line.content);
        out.push_str(line.ending);
    }
    Ok(out)
}

/// The index, at or after `from`, where `lines` holds `wanted`, nearest `expected`.
fn find_lines(lines: &[Line<'_>], wanted: &[&str], from: usize, expected: usize) -> Option<usize> {
    let last = lines.len().checked_sub(wanted.len())?;
    if from > last {
        return None;
    }
    let expected = expected.clamp(from, last);
    let matches = |at: usize| {
        lines[at..at + wanted.len()]
            .iter()
            .zip(wanted)
            .all(|(line, want)| line.content == *want)
    };
    (0..=last - from).find_map(|distance| {
        let after = expected + distance;
        if after <= last && matches(after) {
            return Some(after);
        }
        let before = expected.checked_sub(distance).filter(|&at| at >= from)?;
        (distance > 0 && matches(before)).then_some(before)
    })
}

/// The diff from `old` to `new` as `git diff` writes it (`--- a/path`, `+++ b/path`, hunks
/// with `context_lines` lines of context); empty when the texts are the same. Each line is
/// compared and written with its exact bytes (a CRLF line's `\r` too), so `git apply` and
/// `patch` take the diff for a CRLF or mixed-ending file; [`parse_patches`] reads it back
/// without the `\r`s.
pub fn unified_diff(path: &str, old: &str, new: &str, context_lines: usize) -> String {
    let patch = exact_patch(path, old, new, context_lines);
    if patch.hunks.is_empty() {
        String::new()
    } else {
        patch.to_string()
    }
}

/// The diff from `old` to `new` as a [`FilePatch`] (paths both `path`) whose hunk lines keep
/// everything but their `\n`: a CRLF line's `\r` stays, so the patch written is the texts'
/// bytes. (A parsed patch has no `\r`s; this one is only for writing.)
fn exact_patch(path: &str, old: &str, new: &str, context_lines: usize) -> FilePatch {
    // Whole lines, `\n` included: a last line without one, or a line whose `\r\n` became `\n`,
    // differs from the same text with the other ending.
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let written = |line: &str| line.strip_suffix('\n').unwrap_or(line).to_string();
    let ops = capture_diff_slices(Algorithm::Myers, &old_lines, &new_lines);
    let mut hunks = Vec::new();
    for group in group_diff_ops(ops, context_lines) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        let mut hunk = Hunk {
            old_start: old_range.start + usize::from(!old_range.is_empty()),
            new_start: new_range.start + usize::from(!new_range.is_empty()),
            ..Hunk::default()
        };
        for op in &group {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            if tag == DiffTag::Equal {
                for line in &old_lines[old_range] {
                    hunk.lines.push(HunkLine::Context(written(line)));
                }
                continue;
            }
            for line in &old_lines[old_range] {
                hunk.lines.push(HunkLine::Removed(written(line)));
            }
            for line in &new_lines[new_range] {
                hunk.lines.push(HunkLine::Added(written(line)));
            }
        }
        hunk.old_no_newline =
            old_range.end == old_lines.len() && !old.is_empty() && !old.ends_with('\n');
        hunk.new_no_newline =
            new_range.end == new_lines.len() && !new.is_empty() && !new.ends_with('\n');
        hunks.push(hunk);
    }
    FilePatch {
        old_path: path.to_string(),
        new_path: path.to_string(),
        hunks,
    }
}

/// The patch as a unified diff (`--- a/old`, `+++ b/new`, a name with special characters
/// quoted as git quotes it, hunks with their counts; a count of one is left out, as git does).
/// [`parse_patches`] reads it back.
impl fmt::Display for FilePatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "--- {}", quoted_name(&format!("a/{}", self.old_path)))?;
        writeln!(f, "+++ {}", quoted_name(&format!("b/{}", self.new_path)))?;
        for hunk in &self.hunks {
            write!(f, "{hunk}")?;
        }
        Ok(())
    }
}

/// The hunk's `@@` header and lines, each ending in `\n`.
impl fmt::Display for Hunk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let range = |start: usize, count: usize| {
            if count == 1 {
                start.to_string()
            } else {
                format!("{start},{count}")
            }
        };
        writeln!(
            f,
            "@@ -{} +{} @@",
            range(self.old_start, self.old_len()),
            range(self.new_start, self.new_len())
        )?;
        // The marker follows the last old line and the last new line it applies to.
        let last_old = self
            .lines
            .iter()
            .rposition(|l| !matches!(l, HunkLine::Added(_)));
        let last_new = self
            .lines
            .iter()
            .rposition(|l| !matches!(l, HunkLine::Removed(_)));
        for (at, line) in self.lines.iter().enumerate() {
            let (sign, text) = match line {
                HunkLine::Context(text) => (' ', text),
                HunkLine::Removed(text) => ('-', text),
                HunkLine::Added(text) => ('+', text),
            };
            writeln!(f, "{sign}{text}")?;
            if (self.old_no_newline && last_old == Some(at))
                || (self.new_no_newline && last_new == Some(at))
            {
                writeln!(f, "\\ No newline at end of file")?;
            }
        }
        Ok(())
    }
}
