//! FIM tasks cut from any tree of Rust sources at syntax boundaries found with tree-sitter, to
//! measure on code no model trained on. No tests: scored by exact match and edit similarity.
//!
//! Cuts ([`CutKind`]): a whole line that is one syntax node (with its indentation and newline),
//! the body of a block (whole lines), an expression inside a statement, the inside of an
//! argument list, a statement that shares its line or spans several. Each file gets its own
//! seeded sample, so adding a file changes no other file's tasks.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser, Tree};

use crate::error::{Error, Result};
use crate::rng::SplitMix64;
use crate::task::{Task, TaskLanguage};

/// Files larger than this are skipped (generated tables, bundled data).
const MAX_FILE_BYTES: u64 = 512 * 1024;
/// Longest middle cut, in bytes and lines.
const MAX_MIDDLE_BYTES: usize = 600;
const MAX_MIDDLE_LINES: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CutKind {
    Line,
    Block,
    Expression,
    Arguments,
    Statement,
}

impl CutKind {
    fn name(self) -> &'static str {
        match self {
            CutKind::Line => "Line",
            CutKind::Block => "Block",
            CutKind::Expression => "Expression",
            CutKind::Arguments => "Arguments",
            CutKind::Statement => "Statement",
        }
    }
}

/// How many tasks to cut and how much context to keep.
#[derive(Debug, Clone, Copy)]
pub struct FromDirOptions {
    pub seed: u64,
    /// Tasks sampled per file.
    pub per_file: usize,
    /// Overall cap (a seeded sample of the per-file tasks, in file order).
    pub max_tasks: Option<usize>,
    /// Prefix and suffix kept around the middle, in bytes (cut at line boundaries): far more
    /// than any model here reads, far less than whole files repeated per task.
    pub context_bytes: usize,
}

impl Default for FromDirOptions {
    fn default() -> FromDirOptions {
        FromDirOptions {
            seed: 0,
            per_file: 8,
            max_tasks: None,
            context_bytes: 8192,
        }
    }
}

/// A cut: where the middle is and what kind of syntax it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub range: Range<usize>,
    pub kind: CutKind,
}

impl Cut {
    fn key(&self) -> (usize, usize, CutKind) {
        (self.range.start, self.range.end, self.kind)
    }
}

/// Cuts tasks from every `.rs` file under `root` (hidden directories and `target/` skipped),
/// in path order; ids are `FromDir/<path>/<Kind>/<start>-<end>` (byte offsets in the file).
pub fn build(root: &Path, options: &FromDirOptions) -> Result<Vec<Task>> {
    let mut files = Vec::new();
    collect_rust_files(root, &mut files)?;
    if files.is_empty() {
        return Err(Error::Invalid(format!(
            "no .rs files under {}",
            root.display()
        )));
    }
    files.sort();
    let mut parser = rust_parser();
    let mut tasks = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        let relative = relative.to_string_lossy().replace('\\', "/");
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // not UTF-8: not source we can cut
        };
        if text.lines().take(5).any(|l| l.contains("@generated")) {
            continue;
        }
        let Some(tree) = parser.parse(&text, None) else {
            continue;
        };
        let mut cuts = cuts(&text, &tree);
        SplitMix64::for_name(options.seed, &relative).shuffle(&mut cuts);
        cuts.truncate(options.per_file);
        cuts.sort_by_key(Cut::key);
        for cut in cuts {
            tasks.push(task(&relative, &text, &cut, options.context_bytes));
        }
    }
    // An empty task set is no benchmark (`eval` refuses it): not written over the file asked for.
    if tasks.is_empty() {
        return Err(Error::Invalid(format!(
            "no task could be cut from the .rs files under {}: each is too short, generated or not UTF-8",
            root.display()
        )));
    }
    if let Some(max) = options.max_tasks {
        if tasks.len() > max {
            let mut rng = SplitMix64::new(options.seed);
            let mut order: Vec<usize> = (0..tasks.len()).collect();
            rng.shuffle(&mut order);
            let mut keep = order[..max].to_vec();
            keep.sort_unstable();
            tasks = keep.into_iter().map(|i| tasks[i].clone()).collect();
        }
    }
    Ok(tasks)
}

pub fn rust_parser() -> Parser {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_rust::LANGUAGE.into())
        .expect("the bundled tree-sitter-rust grammar matches the tree-sitter version");
    parser
}

fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            if !name.starts_with('.') && name != "target" {
                collect_rust_files(&path, out)?;
            }
        } else if kind.is_file()
            && name.ends_with(".rs")
            && entry.metadata().is_ok_and(|m| m.len() <= MAX_FILE_BYTES)
        {
            out.push(path);
        }
    }
    Ok(())
}

fn task(relative: &str, text: &str, cut: &Cut, context_bytes: usize) -> Task {
    let Range { start, end } = cut.range.clone();
    // Whole lines of context, at most `context_bytes` on each side.
    let mut from = start.saturating_sub(context_bytes);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    if from > 0 {
        from = text[from..start].find('\n').map_or(start, |i| from + i + 1);
    }
    let mut to = (end + context_bytes).min(text.len());
    while !text.is_char_boundary(to) {
        to -= 1;
    }
    if to < text.len() {
        to = text[end..to].rfind('\n').map_or(end, |i| end + i + 1);
    }
    Task {
        task_id: format!("FromDir/{relative}/{}/{start}-{end}", cut.kind.name()),
        prompt: text[from..start].to_string(),
        suffix: text[end..to].to_string(),
        canonical_solution: text[start..end].to_string(),
        test: String::new(),
        entry_point: String::new(),
        language: Some(TaskLanguage::Rust),
    }
}

/// Every cut of `text` at a syntax boundary, deduplicated by range, in offset order.
pub fn cuts(text: &str, tree: &Tree) -> Vec<Cut> {
    let mut cuts = Vec::new();
    line_cuts(text, tree, &mut cuts);
    let mut cursor = tree.walk();
    loop {
        node_cuts(text, cursor.node(), &mut cuts);
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                cuts.retain(|c| fits(text, &c.range));
                cuts.sort_by_key(Cut::key);
                cuts.dedup_by(|a, b| a.range == b.range);
                return cuts;
            }
        }
    }
}

fn fits(text: &str, range: &Range<usize>) -> bool {
    let middle = &text[range.clone()];
    middle.trim().len() >= 2
        && middle.len() <= MAX_MIDDLE_BYTES
        && middle.trim_end().lines().count() <= MAX_MIDDLE_LINES
}

/// Lines whose code is exactly one node (a statement, a field, a match arm...), not a comment.
fn line_cuts(text: &str, tree: &Tree, cuts: &mut Vec<Cut>) {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let range = start..start + line.len();
        start = range.end;
        let code = line.trim();
        if code.is_empty() || code.chars().all(|c| "{}()[];,".contains(c)) {
            continue;
        }
        let from = range.start + (line.len() - line.trim_start().len());
        let to = from + code.len();
        let Some(node) = tree.root_node().descendant_for_byte_range(from, to) else {
            continue;
        };
        if node.start_byte() == from
            && node.end_byte() == to
            && !node.kind().contains("comment")
            && !node.has_error()
        {
            cuts.push(Cut {
                range,
                kind: CutKind::Line,
            });
        }
    }
}

const EXPRESSIONS: [&str; 12] = [
    "call_expression",
    "binary_expression",
    "field_expression",
    "macro_invocation",
    "reference_expression",
    "index_expression",
    "struct_expression",
    "closure_expression",
    "unary_expression",
    "try_expression",
    "await_expression",
    "range_expression",
];

fn node_cuts(text: &str, node: Node<'_>, cuts: &mut Vec<Cut>) {
    if node.has_error() {
        return;
    }
    let range = node.start_byte()..node.end_byte();
    let kind = node.kind();
    if kind == "block" {
        if let Some(inner) = block_body(text, &range) {
            if node.named_child_count() > 0 {
                cuts.push(Cut {
                    range: inner,
                    kind: CutKind::Block,
                });
            }
        }
    } else if kind == "arguments" && range.len() > 2 {
        let inner = trim_range(text, range.start + 1..range.end - 1);
        if !inner.is_empty() && !text[inner.clone()].contains('\n') {
            cuts.push(Cut {
                range: inner,
                kind: CutKind::Arguments,
            });
        }
    } else if matches!(kind, "let_declaration" | "expression_statement") {
        // A statement alone on its line is already a line cut.
        if !alone_on_line(text, &range) {
            cuts.push(Cut {
                range,
                kind: CutKind::Statement,
            });
        }
    } else if EXPRESSIONS.contains(&kind)
        && !text[range.clone()].contains('\n')
        && node
            .parent()
            .is_some_and(|p| p.kind() != "expression_statement")
    {
        cuts.push(Cut {
            range,
            kind: CutKind::Expression,
        });
    }
}

/// The inside of a `{ ... }`: whole lines when the braces sit at the ends of their lines,
/// else the trimmed text between them.
fn block_body(text: &str, range: &Range<usize>) -> Option<Range<usize>> {
    let open = range.start;
    let close = range.end.checked_sub(1)?;
    if text.as_bytes().get(open) != Some(&b'{') || text.as_bytes().get(close) != Some(&b'}') {
        return None;
    }
    let inner = open + 1..close;
    let after_open = &text[inner.clone()];
    match (after_open.find('\n'), after_open.rfind('\n')) {
        (Some(first), Some(last))
            if first != last
                && after_open[..first].trim().is_empty()
                && after_open[last..].trim().is_empty() =>
        {
            Some(inner.start + first + 1..inner.start + last + 1)
        }
        _ => {
            let trimmed = trim_range(text, inner);
            (!trimmed.is_empty() && !text[trimmed.clone()].contains('\n')).then_some(trimmed)
        }
    }
}

fn trim_range(text: &str, range: Range<usize>) -> Range<usize> {
    let slice = &text[range.clone()];
    let start = range.start + (slice.len() - slice.trim_start().len());
    let end = range.end - (slice.len() - slice.trim_end().len());
    start..end.max(start)
}

fn alone_on_line(text: &str, range: &Range<usize>) -> bool {
    let line_start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[range.end..]
        .find('\n')
        .map_or(text.len(), |i| range.end + i);
    text[line_start..range.start].trim().is_empty() && text[range.end..line_end].trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "fn main() {\n    let v = vec![1, 2, 3];\n    let total: i32 = v.iter().sum();\n    if total > 3 {\n        println!(\"{}\", total);\n    }\n}\n";

    fn all_cuts() -> Vec<(CutKind, String)> {
        let tree = rust_parser().parse(SOURCE, None).unwrap();
        cuts(SOURCE, &tree)
            .into_iter()
            .map(|c| (c.kind, SOURCE[c.range].to_string()))
            .collect()
    }

    #[test]
    fn cuts_fall_on_syntax_nodes() {
        let cuts = all_cuts();
        let has = |kind, text: &str| cuts.iter().any(|(k, t)| *k == kind && t == text);
        assert!(
            has(CutKind::Line, "    let v = vec![1, 2, 3];\n"),
            "{cuts:#?}"
        );
        let body = &SOURCE["fn main() {\n".len()..SOURCE.len() - "}\n".len()];
        assert!(has(CutKind::Block, body));
        // The `if` body is one line: cut once (as a line), not twice.
        let inner = "        println!(\"{}\", total);\n";
        assert_eq!(cuts.iter().filter(|(_, t)| t == inner).count(), 1);
        assert!(has(CutKind::Expression, "v.iter().sum()"));
        assert!(has(CutKind::Expression, "total > 3"));
        // `if total > 3 {` opens a block: not a syntax unit on its own.
        assert!(!cuts.iter().any(|(_, t)| t.starts_with("    if total")));
        // A closing brace line is never a middle.
        assert!(!cuts.iter().any(|(_, t)| t.trim() == "}"));
    }
}
