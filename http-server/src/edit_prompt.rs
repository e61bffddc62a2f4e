//! Next-edit prompts as clients lay them out (Zed's edit-prediction prompts, `crates/zeta_prompt`
//! and `crates/edit_prediction` in <https://github.com/zed-industries/zed>, and Inception's Mercury
//! edit API, <https://docs.inceptionlabs.ai/capabilities/next-edit>), read back into a document, a
//! cursor, an editable region and the recent edits, and the answer written in the layout the
//! client parses:
//!
//! - **Sweep** (Zed's `sweep_prompt.rs`, a model name containing `sweep-next-edit`):
//!   `<|file_sep|>path` blocks: related files, up to three `{path}.diff` blocks with
//!   `original:`/`updated:` sections, `original/{path}` and `current/{path}` (a window of about
//!   ten lines either side of the cursor), then an open `<|file_sep|>updated/{path}` header
//!   (the layout the engine writes for a Sweep checkpoint, [`redraft_prompts::sweep`]). The
//!   answer is the updated window. The prompt carries no cursor: it is put where the current
//!   window last differs from the original one, or else at the end of the window's middle line
//!   (Zed centres the window on the cursor's line).
//! - **Zeta 2 with merge markers** (Zed's `zeta_prompt.rs`, `prompt_format` `zeta2`): the
//!   region between `<<<<<<< CURRENT` and `=======` with a `<|user_cursor|>` marker, the code
//!   around it in Qwen FIM tokens (`<|fim_prefix|>before<|fim_suffix|>after<|fim_middle|>`) or in
//!   Seed-Coder's suffix-first tokens (`<[fim-suffix]>after<[fim-prefix]>...<[fim-middle]>`),
//!   the edit history as unified diffs under an `edit history` file. The answer is the new region
//!   ended by `>>>>>>> UPDATED`.
//! - **Mercury's edit message** (Inception's `/v1/edit/completions`, as Zed's `mercury.rs`
//!   builds it): `<|recently_viewed_code_snippets|>`, `<|current_file_content|>` (starting with
//!   `current_file_path:`, the region inside `<|code_to_edit|>` with a `<|cursor|>` tag) and
//!   `<|edit_diff_history|>` (unified diffs), every section closed by `<|/...|>`. The region may
//!   also come as its own block after the file (the order of Inception's OpenAPI example). The
//!   answer is the rewritten region without tags.

use std::ops::Range;

use redraft_context::edit::{parse_patches, HistoryEdit};
use redraft_prompts::markers::{FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX};
use redraft_prompts::sweep;

/// A next-edit request read from a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditPrompt {
    pub layout: Layout,
    /// The code the prompt shows of the current file (an excerpt).
    pub document: String,
    /// Byte offset of the cursor in `document`.
    pub cursor: usize,
    /// The region the client will diff the answer against, in `document`.
    pub region: Range<usize>,
    pub path: String,
    /// Recent edits, oldest first.
    pub history: Vec<HistoryEdit>,
}

/// Which layout the prompt came in, and so how to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Sweep,
    Zeta,
    Mercury,
}

impl Layout {
    /// The answer for a region rewritten as `new_region`, as the client parses it.
    pub fn answer(self, new_region: &str) -> String {
        match self {
            Layout::Sweep | Layout::Mercury => new_region.to_string(),
            Layout::Zeta => {
                let mut answer = new_region.to_string();
                if !answer.is_empty() && !answer.ends_with('\n') {
                    answer.push('\n');
                }
                answer.push_str(ZETA_END);
                answer
            }
        }
    }
}

const ZETA_START: &str = "<<<<<<< CURRENT\n";
const ZETA_SEPARATOR: &str = "=======\n";
const ZETA_END: &str = ">>>>>>> UPDATED\n";
const ZETA_CURSOR: &str = "<|user_cursor|>";
const SEED_SUFFIX: &str = "<[fim-suffix]>";
const SEED_PREFIX: &str = "<[fim-prefix]>";
const SEED_MIDDLE: &str = "<[fim-middle]>";
const SEED_FILE: &str = "<filename>";

/// One of Zed's next-edit layouts (Sweep or Zeta 2), if `prompt` is in one.
pub fn zed(prompt: &str) -> Option<EditPrompt> {
    sweep(prompt).or_else(|| zeta(prompt))
}

/// Zed's Sweep prompt ([`sweep::parse`] reads the layout, which the engine writes too).
fn sweep(prompt: &str) -> Option<EditPrompt> {
    let parsed = sweep::parse(prompt)?;
    let (path, original, current) = (parsed.path, parsed.original, parsed.current);
    let mut history: Vec<HistoryEdit> = parsed
        .history
        .iter()
        .map(|block| HistoryEdit {
            path: block.path.to_string(),
            old: whole_lines(block.old),
            new: whole_lines(block.new),
        })
        .collect();
    if history.is_empty() && original != current {
        history.push(HistoryEdit {
            path: path.to_string(),
            old: whole_lines(original),
            new: whole_lines(current),
        });
    }
    Some(EditPrompt {
        layout: Layout::Sweep,
        document: current.to_string(),
        cursor: sweep_cursor(original, current),
        region: 0..current.len(),
        path: path.to_string(),
        history,
    })
}

/// Where the user last typed: the end of what differs between the windows, else the end of the
/// window's middle line.
fn sweep_cursor(original: &str, current: &str) -> usize {
    if original != current {
        let common_prefix = common_prefix_len(original, current);
        let common_suffix = original
            .bytes()
            .rev()
            .zip(current.bytes().rev())
            .take_while(|(a, b)| a == b)
            .count()
            .min(current.len() - common_prefix)
            .min(original.len() - common_prefix);
        return floor_boundary(current, current.len() - common_suffix);
    }
    let lines: Vec<usize> = std::iter::once(0)
        .chain(current.match_indices('\n').map(|(at, _)| at + 1))
        .filter(|&at| at < current.len())
        .collect();
    let middle = lines.len().saturating_sub(1) / 2;
    let start = lines.get(middle).copied().unwrap_or(0);
    current[start..]
        .find('\n')
        .map_or(current.len(), |at| start + at)
}

fn common_prefix_len(a: &str, b: &str) -> usize {
    let bytes = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    floor_boundary(a, bytes)
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn zeta(prompt: &str) -> Option<EditPrompt> {
    let start = prompt.rfind(ZETA_START)?;
    let region_start = start + ZETA_START.len();
    let separator = region_start + prompt[region_start..].rfind(ZETA_SEPARATOR)?;
    let tail = prompt[separator + ZETA_SEPARATOR.len()..].trim();
    if !(tail.is_empty() || tail == SEED_MIDDLE) {
        return None;
    }
    let marked = &prompt[region_start..separator];
    let (region, cursor_in_region) = match marked.find(ZETA_CURSOR) {
        Some(at) => (marked.replacen(ZETA_CURSOR, "", 1), at),
        None => (marked.to_string(), 0),
    };
    let head = &prompt[..start];
    let (before, after, path, history) = if let Some(s) = head.find(SEED_SUFFIX) {
        // Seed-Coder, suffix first: <[fim-suffix]>after<[fim-prefix]><filename>...
        let p = s + head[s..].find(SEED_PREFIX)?;
        let after = &head[s + SEED_SUFFIX.len()..p];
        let files: Vec<(&str, &str)> = head[p + SEED_PREFIX.len()..]
            .split(SEED_FILE)
            .skip(1)
            .map(|block| block.split_once('\n').unwrap_or((block, "")))
            .collect();
        let (current, others) = files.split_last()?;
        (current.1, after, current.0, history_block(others))
    } else {
        // Qwen tokens: <|file_sep|>path\n<|fim_prefix|>before<|fim_suffix|>after\n<|fim_middle|>
        let m = head.rfind(FIM_MIDDLE)?;
        let p = head[..m].rfind(FIM_PREFIX)?;
        let s = p + head[p..m].find(FIM_SUFFIX)?;
        let blocks = sweep::file_blocks(&head[..p]);
        let (current, others) = blocks.split_last()?;
        (
            &head[p + FIM_PREFIX.len()..s],
            &head[s + FIM_SUFFIX.len()..m],
            current.0,
            history_block(others),
        )
    };
    let document = format!("{before}{region}{after}");
    Some(EditPrompt {
        layout: Layout::Zeta,
        cursor: before.len() + cursor_in_region,
        region: before.len()..before.len() + region.len(),
        document,
        path: path.trim().to_string(),
        history,
    })
}

/// The edits of the `edit history` pseudo-file among `blocks`.
fn history_block(blocks: &[(&str, &str)]) -> Vec<HistoryEdit> {
    blocks
        .iter()
        .filter(|(name, _)| matches!(name.trim(), "edit history" | "edit_history"))
        .flat_map(|(_, diffs)| history_from_diffs(diffs))
        .collect()
}

/// Unified diffs as history; a history that does not parse is dropped (it only helps).
pub fn history_from_diffs(diffs: &str) -> Vec<HistoryEdit> {
    parse_patches(diffs)
        .map(|patches| patches.iter().flat_map(HistoryEdit::from_patch).collect())
        .unwrap_or_default()
}

/// `\n`-terminated lines.
fn whole_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
    }
    out
}

const M_FILE: (&str, &str) = ("<|current_file_content|>\n", "<|/current_file_content|>");
const M_EDIT: (&str, &str) = ("<|code_to_edit|>\n", "<|/code_to_edit|>");
const M_HISTORY: (&str, &str) = ("<|edit_diff_history|>\n", "<|/edit_diff_history|>");
const M_CURSOR: &str = "<|cursor|>";
const M_PATH: &str = "current_file_path: ";

/// The body of `tags` in `text`: after the opening tag, before `\n` + closing tag (each section
/// is closed on a line of its own), and where the section ends in `text`.
fn section<'a>(text: &'a str, tags: (&str, &str)) -> Option<(Range<usize>, &'a str)> {
    let open = text.find(tags.0)?;
    let body_start = open + tags.0.len();
    let close = body_start + text[body_start..].find(tags.1)?;
    let body_end = if text[..close].ends_with('\n') && close > body_start {
        close - 1
    } else {
        close
    };
    Some((open..close + tags.1.len(), &text[body_start..body_end]))
}

/// Mercury's tagged edit message, or why it is not one.
pub fn mercury(message: &str) -> Result<EditPrompt, String> {
    let (_, file) = section(message, M_FILE).ok_or(
        "the message has no <|current_file_content|> ... <|/current_file_content|> section",
    )?;
    let (path, content) = match file.strip_prefix(M_PATH) {
        Some(rest) => rest.split_once('\n').unwrap_or((rest, "")),
        None => ("", file),
    };
    let history = section(message, M_HISTORY)
        .map(|(_, diffs)| history_from_diffs(diffs))
        .unwrap_or_default();
    let (document, region, marked) = if let Some((range, marked)) = section(content, M_EDIT) {
        // Nested: before <|code_to_edit|>\nregion\n<|/code_to_edit|>\n after.
        let after_tag = &content[range.end..];
        let after = after_tag.strip_prefix('\n').unwrap_or(after_tag);
        let region = marked.replace(M_CURSOR, "");
        let before = &content[..range.start];
        (
            format!("{before}{region}{after}"),
            before.len()..before.len() + region.len(),
            marked,
        )
    } else {
        // A block of its own after the file: find its text in the file.
        let (_, marked) = section(message, M_EDIT)
            .ok_or("the message has no <|code_to_edit|> ... <|/code_to_edit|> region to rewrite")?;
        let region = marked.replace(M_CURSOR, "");
        let at = content.find(&region).ok_or(
            "the <|code_to_edit|> region is not part of the <|current_file_content|> text",
        )?;
        (content.to_string(), at..at + region.len(), marked)
    };
    let cursor_in_region = marked.find(M_CURSOR).unwrap_or(0);
    Ok(EditPrompt {
        layout: Layout::Mercury,
        cursor: region.start + cursor_in_region,
        region,
        document,
        path: path.trim().to_string(),
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "use std::fmt;\n\n";
    const REGION: &str = "fn area(w: u32, h: u32) -> u32 {\n    w * h\n}\n";
    const AFTER: &str = "\nfn main() {}\n";
    const DIFF: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n use std::fmt;\n-fn area(width: u32) {}\n+fn area(w: u32) {}\n";

    fn marked(cursor: usize, tag: &str) -> String {
        format!("{}{tag}{}", &REGION[..cursor], &REGION[cursor..])
    }

    #[track_caller]
    fn check_region(prompt: &EditPrompt, cursor: usize) {
        assert_eq!(prompt.document, format!("{BEFORE}{REGION}{AFTER}"));
        assert_eq!(&prompt.document[prompt.region.clone()], REGION);
        assert_eq!(prompt.cursor, BEFORE.len() + cursor);
        assert_eq!(prompt.path, "src/lib.rs");
    }

    /// Zed's `v0120_git_merge_markers` layout, as `write_cursor_excerpt_section` writes it.
    #[test]
    fn zeta_with_qwen_tokens() {
        let prompt = format!(
            "<|file_sep|>src/util.rs\npub fn one() {{}}\n<|file_sep|>edit history\n{DIFF}<|file_sep|>src/lib.rs\n<|fim_prefix|>{BEFORE}<|fim_suffix|>{AFTER}<|fim_middle|>{ZETA_START}{}{ZETA_SEPARATOR}",
            marked(20, ZETA_CURSOR)
        );
        let parsed = zed(&prompt).unwrap();
        assert_eq!(parsed.layout, Layout::Zeta);
        check_region(&parsed, 20);
        assert_eq!(parsed.history.len(), 1);
        assert_eq!(parsed.history[0].new, "use std::fmt;\nfn area(w: u32) {}\n");
        assert_eq!(
            Layout::Zeta.answer("fn f() {}\n"),
            "fn f() {}\n>>>>>>> UPDATED\n"
        );
    }

    /// Zeta 2's Seed-Coder layout (Zed's `crates/zeta_prompt/src/zeta_prompt.rs`): suffix first.
    #[test]
    fn zeta_with_seed_coder_tokens() {
        let prompt = format!(
            "{SEED_SUFFIX}{AFTER}{SEED_PREFIX}{SEED_FILE}src/util.rs\npub fn one() {{}}\n{SEED_FILE}edit_history\n{DIFF}{SEED_FILE}src/lib.rs\n{BEFORE}{ZETA_START}{}{ZETA_SEPARATOR}{SEED_MIDDLE}",
            marked(0, ZETA_CURSOR)
        );
        let parsed = zed(&prompt).unwrap();
        assert_eq!(parsed.layout, Layout::Zeta);
        check_region(&parsed, 0);
        assert_eq!(parsed.history.len(), 1);
    }

    /// Zed's `sweep_prompt::build_prompt`, with a recent change and an edited window.
    #[test]
    fn sweep_windows_and_recent_changes() {
        let original = "fn a() {}\nfn b() {}\nfn c() {}\n";
        let current = "fn a() {}\nfn bee() {}\nfn c() {}\n";
        let prompt = format!(
            "<|file_sep|>src/util.rs\npub fn one() {{}}\n<|file_sep|>src/lib.rs.diff\noriginal:\nfn b() {{}}\nupdated:\nfn bee() {{}}\n<|file_sep|>original/src/lib.rs\n{original}<|file_sep|>current/src/lib.rs\n{current}<|file_sep|>updated/src/lib.rs\n"
        );
        let parsed = zed(&prompt).unwrap();
        assert_eq!(parsed.layout, Layout::Sweep);
        assert_eq!(parsed.document, current);
        assert_eq!(parsed.region, 0..current.len());
        assert_eq!(parsed.path, "src/lib.rs");
        // The cursor where the user typed: after "bee".
        assert_eq!(&current[..parsed.cursor], "fn a() {}\nfn bee");
        assert_eq!(
            parsed.history,
            vec![HistoryEdit {
                path: "src/lib.rs".into(),
                old: "fn b() {}\n".into(),
                new: "fn bee() {}\n".into()
            }]
        );
        // No change: the middle line's end.
        let unchanged = sweep_cursor(original, original);
        assert_eq!(&original[..unchanged], "fn a() {}\nfn b() {}");
    }

    #[test]
    fn other_prompts_are_no_zed_layout() {
        assert_eq!(zed("<|fim_prefix|>fn a<|fim_suffix|>}<|fim_middle|>"), None);
        assert_eq!(zed("<|file_sep|>current/a.rs\nx\n"), None);
        assert_eq!(zed("let conflict = \"<<<<<<< CURRENT\n=======\n\";"), None);
        assert_eq!(zed(""), None);
    }

    /// Zed's `mercury::build_prompt` (every section via `push_delimited`).
    #[test]
    fn mercury_nested_region() {
        let message = format!(
            "<|recently_viewed_code_snippets|>\n<|recently_viewed_code_snippet|>\ncode_snippet_file_path: src/util.rs\npub fn one() {{}}\n\n<|/recently_viewed_code_snippet|>\n\n<|/recently_viewed_code_snippets|>\n<|current_file_content|>\ncurrent_file_path: src/lib.rs\n{BEFORE}<|code_to_edit|>\n{}\n<|/code_to_edit|>\n{AFTER}\n<|/current_file_content|>\n<|edit_diff_history|>\n{DIFF}\n<|/edit_diff_history|>\n",
            marked(33, M_CURSOR)
        );
        let parsed = mercury(&message).unwrap();
        assert_eq!(parsed.layout, Layout::Mercury);
        check_region(&parsed, 33);
        assert_eq!(parsed.history.len(), 1);
    }

    /// A second `<|cursor|>` (a client that marks a selection's both ends, a stray copy) is
    /// no part of the region in either layout; the first is the cursor.
    #[test]
    fn mercury_every_cursor_tag_leaves_the_region() {
        let twice = |at: usize| {
            let once = marked(at, M_CURSOR);
            let second = once.len() - 3;
            format!("{}{M_CURSOR}{}", &once[..second], &once[second..])
        };
        let nested = format!(
            "<|current_file_content|>\ncurrent_file_path: src/lib.rs\n{BEFORE}<|code_to_edit|>\n{}\n<|/code_to_edit|>\n{AFTER}\n<|/current_file_content|>\n",
            twice(12)
        );
        check_region(&mercury(&nested).unwrap(), 12);
        let separate = format!(
            "<|current_file_content|>\ncurrent_file_path: src/lib.rs\n{BEFORE}{REGION}{AFTER}\n<|/current_file_content|>\n<|code_to_edit|>\n{}\n<|/code_to_edit|>\n",
            twice(7)
        );
        check_region(&mercury(&separate).unwrap(), 7);
    }

    /// Inception's OpenAPI example order: history before the file, the region a block of its
    /// own.
    #[test]
    fn mercury_separate_region_block() {
        let message = format!(
            "<|edit_diff_history|>\n{DIFF}\n<|/edit_diff_history|>\n<|current_file_content|>\ncurrent_file_path: src/lib.rs\n{BEFORE}{REGION}{AFTER}\n<|/current_file_content|>\n<|code_to_edit|>\n{}\n<|/code_to_edit|>\n",
            marked(5, M_CURSOR)
        );
        let parsed = mercury(&message).unwrap();
        check_region(&parsed, 5);
        assert!(mercury("just a question").is_err());
        let stray = "<|current_file_content|>\nfn a() {}\n<|/current_file_content|>\n<|code_to_edit|>\nfn b() {}\n<|/code_to_edit|>\n";
        assert!(mercury(stray).unwrap_err().contains("not part of"));
    }
}
