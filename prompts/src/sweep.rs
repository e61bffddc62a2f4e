//! Sweep Next-Edit's prompt, for autoregressive checkpoints of the Qwen2.5-Coder family: the
//! files of the request as Qwen2.5-Coder's repository-level pretraining writes them, one
//! `<|file_sep|>` block each, and the model writes the updated window after an open header.
//!
//! ```text
//! <|file_sep|>{path}\n{before}{region}{after}\n            the file around the region
//! <|file_sep|>{path}.diff\noriginal:\n…\nupdated:\n…\n      one block per recent edit, oldest first
//! <|file_sep|>original/{path}\n{original}\n               the region before the latest edit in it
//! <|file_sep|>current/{path}\n{region}\n                  the region now
//! <|file_sep|>updated/{path}\n [canvas]                   the rewrite, ended by `<|file_sep|>`
//! ```
//!
//! The history blocks, the windows and their headers are Zed's `sweep_prompt.rs` (what Zed
//! sends a Sweep model over its OpenAI-compatible provider); the first block, the file around
//! the region, stands where Zed puts related files. A `\n` ends every block that does not end
//! in one.
//!
//! Written here ([`Prompt`], [`history_block`]) and read back here ([`parse`]): the engine
//! tokenizes a [`Prompt`]'s pieces and fits them to the model's positions, the context layer
//! writes the history blocks, and the HTTP server reads Zed's prompt with [`parse`].

use crate::markers::FILE_SEP;

/// Recent edits a Sweep prompt shows at most.
pub const MAX_HISTORY: usize = 3;

/// Lines of either side of a history block at most (Zed's `sweep_prompt.rs`: a longer side
/// keeps its first half and its last lines around a `...` line).
pub const HISTORY_SIDE_LINES: usize = 40;

/// A Sweep prompt in text pieces, before they are fitted to a model's positions: the engine
/// keeps the headers, the region and the windows whole, and gives up the oldest history blocks
/// and the code furthest from the region when room is short. [`Prompt::text`] is every piece
/// in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt<'a> {
    /// The file block's name line, `{path}\n` (after a `<|file_sep|>`).
    pub file_header: String,
    pub before: &'a str,
    /// The region inside the file block.
    pub region: &'a str,
    pub after: &'a str,
    /// `\n` when the file block would not end in one, else empty.
    pub file_end: &'static str,
    /// One block per recent edit, oldest first: the text after its `<|file_sep|>`, ending in
    /// `\n`.
    pub history: Vec<String>,
    /// The original window's name line, `original/{path}\n` (after a `<|file_sep|>`), and its
    /// body: the region before the user's latest edit in it.
    pub original_header: String,
    pub original: String,
    /// The current window's name line, `current/{path}\n` (after a `<|file_sep|>`); its body is
    /// [`Prompt::draft`].
    pub current_header: String,
    /// The open header the rewrite follows, `updated/{path}\n` (after a `<|file_sep|>`).
    pub updated_header: String,
    /// The current window (the region, ending in `\n`): the body of its block, and the draft
    /// of the canvas the model rewrites it on.
    pub draft: String,
}

impl<'a> Prompt<'a> {
    /// The prompt for rewriting `region`, which lies between `before` and `after` in the file
    /// `path` and read `original` before the user's latest edit in it; `history` holds
    /// [`history_block`]s, oldest first (empty ones are left out).
    pub fn new(
        path: &str,
        before: &'a str,
        region: &'a str,
        after: &'a str,
        original: &str,
        history: &[String],
    ) -> Prompt<'a> {
        let file_ends_in_newline = [after, region, before]
            .iter()
            .find(|part| !part.is_empty())
            .is_none_or(|last| last.ends_with('\n'));
        Prompt {
            file_header: format!("{path}\n"),
            before,
            region,
            after,
            file_end: if file_ends_in_newline { "" } else { "\n" },
            history: history
                .iter()
                .filter(|block| !block.is_empty())
                .map(|block| ended(block))
                .collect(),
            original_header: format!("original/{path}\n"),
            original: ended(original),
            current_header: format!("current/{path}\n"),
            updated_header: format!("updated/{path}\n"),
            draft: ended(region),
        }
    }

    /// The whole prompt as text, `<|file_sep|>` written out: what a client sends a Sweep model.
    pub fn text(&self) -> String {
        let mut text = format!("{FILE_SEP}{}", self.file_header);
        text.extend([self.before, self.region, self.after, self.file_end]);
        for block in &self.history {
            text.push_str(FILE_SEP);
            text.push_str(block);
        }
        text.extend([FILE_SEP, &self.original_header, &self.original]);
        text.extend([FILE_SEP, &self.current_header, &self.draft]);
        text.extend([FILE_SEP, &self.updated_header]);
        text
    }
}

/// `text` with a `\n` at its end if it has none, as Zed writes a block.
pub fn ended(text: &str) -> String {
    if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

/// One recent edit of `path` as a history block, without its `<|file_sep|>` nor the `\n` that
/// ends it: `{path}.diff`, then `original:` and `updated:`, each followed by the lines (at most
/// [`HISTORY_SIDE_LINES`] of them); empty if the edit changes nothing.
pub fn history_block(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let original = side(old);
    let newline = if original.ends_with('\n') { "" } else { "\n" };
    format!(
        "{path}.diff\noriginal:\n{original}{newline}updated:\n{}",
        side(new)
    )
}

/// `text`'s lines joined by `\n` (no final one), at most [`HISTORY_SIDE_LINES`] of them.
fn side(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= HISTORY_SIDE_LINES {
        return lines.join("\n");
    }
    let head = HISTORY_SIDE_LINES / 2;
    let tail = HISTORY_SIDE_LINES - head - 1;
    let mut kept = lines[..head].to_vec();
    kept.push("...");
    kept.extend_from_slice(&lines[lines.len() - tail..]);
    kept.join("\n")
}

/// The `<|file_sep|>{name}\n{body}` blocks of `text`, in order (Qwen2.5-Coder's repository
/// layout, which Sweep's prompt and Zeta's related files both use); text before the first
/// separator is not a block.
pub fn file_blocks(text: &str) -> Vec<(&str, &str)> {
    text.split(FILE_SEP)
        .skip(1)
        .map(|block| block.split_once('\n').unwrap_or((block, "")))
        .collect()
}

/// A Sweep prompt read back: what [`Prompt::text`] wrote, or what Zed sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The path of the file being edited (the open `updated/` header's).
    pub path: &'a str,
    /// The window before the user's latest edit in it (the current one when the prompt has no
    /// `original/` block).
    pub original: &'a str,
    /// The window now.
    pub current: &'a str,
    /// The history blocks, oldest first.
    pub history: Vec<HistoryBlock<'a>>,
}

/// One history block read back: the lines of either side as written (no final `\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryBlock<'a> {
    pub path: &'a str,
    pub old: &'a str,
    pub new: &'a str,
}

/// `prompt` read as a Sweep prompt, if it is one: its last block is an open `updated/{path}`
/// header with nothing after it, and a `current/{path}` block comes before it.
pub fn parse(prompt: &str) -> Option<Parsed<'_>> {
    let blocks = file_blocks(prompt);
    let (last, rest) = blocks.split_last()?;
    let path = last.0.strip_prefix("updated/")?;
    if !last.1.trim().is_empty() {
        return None;
    }
    let find = |name: String| rest.iter().rev().find(|(p, _)| *p == name).map(|b| b.1);
    let current = find(format!("current/{path}"))?;
    let original = find(format!("original/{path}")).unwrap_or(current);
    let history = rest
        .iter()
        .filter_map(|(name, body)| {
            let path = name.strip_suffix(".diff")?;
            let body = body.strip_prefix("original:\n")?;
            let (old, new) = match body.split_once("\nupdated:\n") {
                Some(parts) => parts,
                None => ("", body.strip_prefix("updated:\n")?),
            };
            Some(HistoryBlock { path, old, new })
        })
        .collect();
    Some(Parsed {
        path,
        original,
        current,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_prompt_reads_back() {
        let history = [
            history_block("src/util.rs", "fn a() {}\n", "fn alpha() {}\n"),
            String::new(),
            history_block("src/lib.rs", "let w = 3;\n", "let width = 3;\n"),
        ];
        let prompt = Prompt::new(
            "src/lib.rs",
            "fn main() {\n",
            "    let width = 3;\n    let h = w;\n",
            "}",
            "    let w = 3;\n    let h = w;\n",
            &history,
        );
        let text = prompt.text();
        assert_eq!(
            text,
            "<|file_sep|>src/lib.rs\nfn main() {\n    let width = 3;\n    let h = w;\n}\n\
             <|file_sep|>src/util.rs.diff\noriginal:\nfn a() {}\nupdated:\nfn alpha() {}\n\
             <|file_sep|>src/lib.rs.diff\noriginal:\nlet w = 3;\nupdated:\nlet width = 3;\n\
             <|file_sep|>original/src/lib.rs\n    let w = 3;\n    let h = w;\n\
             <|file_sep|>current/src/lib.rs\n    let width = 3;\n    let h = w;\n\
             <|file_sep|>updated/src/lib.rs\n"
        );
        let parsed = parse(&text).expect("a Sweep prompt");
        assert_eq!(parsed.path, "src/lib.rs");
        assert_eq!(parsed.original, "    let w = 3;\n    let h = w;\n");
        assert_eq!(parsed.current, "    let width = 3;\n    let h = w;\n");
        assert_eq!(parsed.current, prompt.draft);
        assert_eq!(
            parsed.history,
            [
                HistoryBlock {
                    path: "src/util.rs",
                    old: "fn a() {}",
                    new: "fn alpha() {}\n"
                },
                HistoryBlock {
                    path: "src/lib.rs",
                    old: "let w = 3;",
                    new: "let width = 3;\n"
                },
            ]
        );
    }

    #[test]
    fn a_file_ending_in_a_newline_gets_none_added() {
        let ends = Prompt::new("a.rs", "x\n", "y\n", "", "y\n", &[]);
        assert_eq!(ends.file_end, "");
        let open = Prompt::new("a.rs", "x\n", "y", "", "y", &[]);
        assert_eq!(open.file_end, "\n");
        assert_eq!(open.draft, "y\n");
        assert_eq!(Prompt::new("a.rs", "", "", "", "", &[]).file_end, "");
    }

    #[test]
    fn an_unchanged_edit_writes_no_block_and_a_long_side_is_cut() {
        assert_eq!(history_block("a.rs", "x\n", "x\n"), "");
        let long: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let block = history_block("a.rs", &long, "y\n");
        let original = block
            .strip_prefix("a.rs.diff\noriginal:\n")
            .and_then(|rest| rest.split_once("\nupdated:\n"))
            .map(|(old, _)| old)
            .unwrap();
        let lines: Vec<&str> = original.lines().collect();
        assert_eq!(lines.len(), HISTORY_SIDE_LINES);
        assert_eq!(lines[..2], ["line 0", "line 1"]);
        assert_eq!(lines[HISTORY_SIDE_LINES / 2], "...");
        assert_eq!(lines.last(), Some(&"line 49"));
    }

    #[test]
    fn an_added_file_has_an_empty_original_side() {
        let text = "<|file_sep|>new.rs.diff\noriginal:\nupdated:\nfn x() {}\n\
                    <|file_sep|>current/a.rs\nx\n<|file_sep|>updated/a.rs\n";
        let parsed = parse(text).unwrap();
        assert_eq!(
            parsed.history,
            [HistoryBlock {
                path: "new.rs",
                old: "",
                new: "fn x() {}\n"
            }]
        );
        assert_eq!(parsed.original, "x\n");
        // As written for an added file: an empty original side.
        let written = Prompt::new(
            "a.rs",
            "",
            "x\n",
            "",
            "x\n",
            &[history_block("new.rs", "", "fn x() {}\n")],
        );
        assert_eq!(parse(&written.text()).unwrap().history, parsed.history);
    }

    #[test]
    fn other_prompts_are_not_sweep() {
        assert_eq!(parse("plain text"), None);
        assert_eq!(parse("<|file_sep|>current/a.rs\nx\n"), None);
        assert_eq!(parse("<|file_sep|>updated/a.rs\nalready answered\n"), None);
        assert_eq!(
            parse("<|file_sep|>current/b.rs\nx\n<|file_sep|>updated/a.rs\n"),
            None
        );
    }
}
