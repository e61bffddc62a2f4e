//! Synthetic next edits, made from the corpus's code with tree-sitter: the edits a programmer
//! makes in a run, with the first ones done and the next one to predict.
//!
//! Two ways of making them, so the end state is always code someone wrote or code one edit
//! away from it:
//! - forward, from the real file: [`EditKind::Rename`] (a local or parameter renamed where it
//!   is declared; its other uses in reach are the target), [`EditKind::AddParameter`] (a
//!   parameter appended to a fn; the next call site gets an argument), [`EditKind::AddField`] (a
//!   field appended to a struct; the next initialiser gets a value);
//! - backward, undoing what the file already has: [`EditKind::UnwrapToTry`] (the `?`s of a fn
//!   returning `Result` written as `.unwrap()`; converting them back one by one),
//!   [`EditKind::RepeatPattern`] (a run of similar lines that share a marker such as `pub ` or
//!   `.clone()`, with the marker taken out; putting it back line by line),
//!   [`EditKind::EnumVariant`] (an enum variant and its match arms taken out; adding the
//!   variant, then the arms).
//!
//! Every case is checked to have its target where the editable region will be
//! ([`in_reach`]); a share of them ([`SyntheticOptions::no_edit_fraction`]) is also written
//! fully applied, with no target. A file's cases depend only on its text, its key and the seed.

use std::collections::BTreeMap;
use std::ops::Range;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use redraft_context::edit::cut::{case_from_edits, in_reach, CutOptions, EditCase};
use redraft_context::edit::TextEdit;
use tree_sitter::{Node, Parser, Tree};

use super::EditKind;

/// How many cases to make.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticOptions {
    pub seed: u64,
    /// Cases per kind per file, at most (picked at random among the file's opportunities).
    pub per_file: usize,
    /// Chance that a case is also written fully applied, with no target.
    pub no_edit_fraction: f64,
    /// Files larger than this are not parsed (bytes).
    pub max_file_bytes: usize,
}

impl Default for SyntheticOptions {
    fn default() -> SyntheticOptions {
        SyntheticOptions {
            seed: 0,
            per_file: 2,
            no_edit_fraction: 0.2,
            max_file_bytes: 100 * 1024,
        }
    }
}

/// A file's synthetic cases.
#[derive(Debug, Default)]
pub struct Synthetic {
    pub cases: Vec<(EditKind, EditCase)>,
    /// Opportunities not made into cases, by `kind/reason`.
    pub dropped: BTreeMap<String, usize>,
}

/// The synthetic cases of `text` (the file at `path`); `key` (crate and path) seeds the picks.
pub fn cases(
    path: &str,
    text: &str,
    key: &str,
    options: &SyntheticOptions,
    cut: &CutOptions,
) -> Synthetic {
    let mut out = Synthetic::default();
    if text.len() > options.max_file_bytes || options.per_file == 0 {
        return out;
    }
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_rust::LANGUAGE.into())
        .expect("the Rust grammar loads");
    let Some(tree) = parser.parse(text, None) else {
        return out;
    };
    let file = File { text, tree: &tree };
    let makers: [(EditKind, Maker); 6] = [
        (EditKind::Rename, rename),
        (EditKind::AddParameter, add_parameter),
        (EditKind::AddField, add_field),
        (EditKind::UnwrapToTry, unwrap_to_try),
        (EditKind::RepeatPattern, repeat_pattern),
        (EditKind::EnumVariant, enum_variant),
    ];
    for (index, (kind, make)) in makers.into_iter().enumerate() {
        let mut plans = make(&file, cut);
        if plans.is_empty() {
            continue;
        }
        let mut rng = StdRng::seed_from_u64(
            fnv1a(key.as_bytes())
                ^ options.seed.rotate_left(17)
                ^ ((index as u64 + 1) * 0x9e37_79b9),
        );
        plans.shuffle(&mut rng);
        let mut made = 0;
        for plan in plans {
            if made == options.per_file {
                break;
            }
            let (base, history, target) = plan.materialise(text);
            let complete = plan.complete;
            let case = case_from_edits(path, &base, &history, Some(target.clone()));
            let useless = case
                .target
                .as_ref()
                .is_none_or(|t| t.range.is_empty() && t.new_text.is_empty());
            if useless || case.history.is_empty() {
                *out.dropped
                    .entry(format!("{}/no_change", kind_name(kind)))
                    .or_default() += 1;
                continue;
            }
            if !in_reach(&case, cut) {
                *out.dropped
                    .entry(format!("{}/out_of_reach", kind_name(kind)))
                    .or_default() += 1;
                continue;
            }
            made += 1;
            out.cases.push((kind, case));
            if complete && rng.random_bool(options.no_edit_fraction.clamp(0.0, 1.0)) {
                let mut all = history;
                all.push(target);
                out.cases
                    .push((kind, case_from_edits(path, &base, &all, None)));
            }
        }
    }
    out
}

fn kind_name(kind: EditKind) -> &'static str {
    match kind {
        EditKind::Versions => "versions",
        EditKind::Rename => "rename",
        EditKind::AddParameter => "add_parameter",
        EditKind::AddField => "add_field",
        EditKind::UnwrapToTry => "unwrap_to_try",
        EditKind::RepeatPattern => "repeat_pattern",
        EditKind::EnumVariant => "enum_variant",
    }
}

/// Finds a kind's opportunities in a file.
type Maker = fn(&File<'_>, &CutOptions) -> Vec<Plan>;

/// A parsed file.
struct File<'a> {
    text: &'a str,
    tree: &'a Tree,
}

impl<'a> File<'a> {
    fn text_of(&self, node: Node<'_>) -> &'a str {
        &self.text[node.byte_range()]
    }

    /// Every node of `kind` under `root` (`root` included), in document order.
    fn all<'t>(&self, root: Node<'t>, kind: &str) -> Vec<Node<'t>> {
        let mut found = Vec::new();
        let mut cursor = root.walk();
        loop {
            let node = cursor.node();
            if node.kind() == kind {
                found.push(node);
            }
            if cursor.goto_first_child() {
                continue;
            }
            loop {
                if cursor.node() == root {
                    return found;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return found;
                }
            }
        }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count()
    }

    fn line_start(&self, offset: usize) -> usize {
        self.text[..offset].rfind('\n').map_or(0, |at| at + 1)
    }

    /// The indentation of the line holding `offset`.
    fn indent_at(&self, offset: usize) -> &'a str {
        let start = self.line_start(offset);
        let line = &self.text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    /// `node` and what follows it on its line (a comma), as a site of whole lines: from the
    /// newline before its first line to the end of its last line's text. `None` unless it
    /// starts its line and only a comma (or nothing) follows it there.
    fn whole_lines(&self, start: usize, end: usize) -> Option<Range<usize>> {
        let line_start = self.line_start(start);
        if line_start == 0 || !self.text[line_start..start].trim().is_empty() {
            return None;
        }
        let rest = &self.text[end..];
        let line_end = end + rest.find('\n').unwrap_or(rest.len());
        let tail = self.text[end..line_end].trim();
        if !(tail.is_empty() || tail == ",") {
            return None;
        }
        Some(line_start - 1..line_end)
    }
}

/// One edit of a plan.
#[derive(Debug, Clone)]
enum Step {
    /// Put back what [`Plan::undo`]'s site `i` took out.
    Redo(usize),
    /// A new edit of the real text (which must not overlap an undone site).
    New(TextEdit),
}

/// A synthetic edit sequence: how the base differs from the real text, the history, the target.
#[derive(Debug, Clone)]
struct Plan {
    /// Sites of the real text and what the base has there instead; sorted, not overlapping.
    undo: Vec<(Range<usize>, String)>,
    history: Vec<Step>,
    target: Step,
    /// Nothing is left to do after the target (so history + target is a no-edit case).
    complete: bool,
}

impl Plan {
    fn forward(history: Vec<TextEdit>, target: TextEdit, complete: bool) -> Plan {
        Plan {
            undo: Vec::new(),
            history: history.into_iter().map(Step::New).collect(),
            target: Step::New(target),
            complete,
        }
    }

    /// The base text, and the history and target as edits of it.
    fn materialise(&self, real: &str) -> (String, Vec<TextEdit>, TextEdit) {
        debug_assert!(self.undo.windows(2).all(|w| w[0].0.end <= w[1].0.start));
        let mut base = String::with_capacity(real.len());
        let mut at = 0;
        for (range, replacement) in &self.undo {
            base.push_str(&real[at..range.start]);
            base.push_str(replacement);
            at = range.end;
        }
        base.push_str(&real[at..]);
        // Real offset -> base offset: shifted by the undone sites before it.
        let map = |offset: usize| {
            let mut shift: isize = 0;
            for (range, replacement) in &self.undo {
                if range.end <= offset {
                    shift += replacement.len() as isize - range.len() as isize;
                }
            }
            (offset as isize + shift) as usize
        };
        let edit = |step: &Step| match step {
            Step::Redo(i) => {
                let (range, replacement) = &self.undo[*i];
                let start = map(range.start);
                TextEdit {
                    range: start..start + replacement.len(),
                    new_text: real[range.clone()].to_string(),
                }
            }
            Step::New(edit) => TextEdit {
                range: map(edit.range.start)..map(edit.range.end),
                new_text: edit.new_text.clone(),
            },
        };
        let history = self.history.iter().map(edit).collect();
        (base, history, edit(&self.target))
    }
}

/// Sequences over sites in document order: for each target site `t`, the history is the run of
/// sites before it whose gaps are at most `max_gap` lines, at most `max_history` of them and at
/// least `min_history`. Returns `(first history site, target)` pairs.
fn chains(
    lines: &[usize],
    max_gap: usize,
    min_history: usize,
    max_history: usize,
) -> Vec<(usize, usize)> {
    let mut chains = Vec::new();
    for t in 1..lines.len() {
        let mut first = t;
        while first > 0 && t - first < max_history && lines[first] - lines[first - 1] <= max_gap {
            first -= 1;
        }
        if t - first >= min_history.max(1) {
            chains.push((first, t));
        }
    }
    chains
}

// --- backward: `.unwrap()` -> `?` -------------------------------------------------------------

fn unwrap_to_try(file: &File<'_>, cut: &CutOptions) -> Vec<Plan> {
    let mut plans = Vec::new();
    for function in file.all(file.tree.root_node(), "function_item") {
        let returns_result = function
            .child_by_field_name("return_type")
            .is_some_and(|ty| file.text_of(ty).contains("Result"));
        let Some(body) = function.child_by_field_name("body") else {
            continue;
        };
        if !returns_result {
            continue;
        }
        // The `?`s that return from this fn, not from a closure or async block inside it.
        // Preorder visits `a()?.b()?`'s outer `?` first: sort by position.
        let mut sites: Vec<Range<usize>> = file
            .all(body, "try_expression")
            .into_iter()
            .filter(|node| owner(*node) == Some(function))
            .filter_map(|node| node.child(node.child_count().checked_sub(1)?))
            .filter(|mark| mark.kind() == "?")
            .map(|mark| mark.byte_range())
            .collect();
        sites.sort_by_key(|site| site.start);
        let lines: Vec<usize> = sites.iter().map(|s| file.line_of(s.start)).collect();
        for (first, t) in chains(&lines, cut.group_lines, 1, 3) {
            plans.push(Plan {
                undo: sites[first..]
                    .iter()
                    .map(|site| (site.clone(), ".unwrap()".to_string()))
                    .collect(),
                history: (0..t - first).map(Step::Redo).collect(),
                target: Step::Redo(t - first),
                complete: t + 1 == sites.len(),
            });
        }
    }
    plans
}

/// The fn, closure or async block whose body `node` is in.
fn owner(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_item" | "closure_expression" | "async_block" | "try_block" => return Some(n),
            _ => current = n.parent(),
        }
    }
    None
}

// --- backward: a repeated change ---------------------------------------------------------------

/// What a run of similar lines shares, taken out and put back one line at a time.
const MARKERS: &[&str] = &[
    "pub(crate) ",
    "pub ",
    ".clone()",
    ".to_string()",
    ".to_owned()",
    ".into()",
    ".as_ref()",
    "self.",
    "mut ",
];

fn repeat_pattern(file: &File<'_>, _cut: &CutOptions) -> Vec<Plan> {
    let mut lines = Vec::new();
    let mut at = 0;
    for line in file.text.split_inclusive('\n') {
        lines.push((at, line.trim_end_matches(['\n', '\r'])));
        at += line.len();
    }
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut plans = Vec::new();
    for marker in MARKERS {
        let eligible = |line: &str| {
            let code = line.trim_start();
            !code.starts_with("//")
                && line.matches(marker).count() == 1
                // `pub ` is not the marker inside `pub(crate) `.
                && !(marker.starts_with("pub ") && line.contains("pub("))
        };
        let mut i = 0;
        while i < lines.len() {
            let mut j = i;
            while j < lines.len()
                && eligible(lines[j].1)
                && indent(lines[j].1) == indent(lines[i].1)
                && j - i < 8
            {
                j += 1;
            }
            if j - i >= 3 {
                let sites: Vec<Range<usize>> = (i..j)
                    .map(|k| {
                        let (start, line) = lines[k];
                        let found = start + line.find(marker).expect("eligible lines hold it");
                        found..found + marker.len()
                    })
                    .collect();
                // Two lines done at least, so the pattern is there to see.
                for t in 2..sites.len() {
                    let first = t.saturating_sub(4);
                    plans.push(Plan {
                        undo: sites[first..]
                            .iter()
                            .map(|site| (site.clone(), String::new()))
                            .collect(),
                        history: (0..t - first).map(Step::Redo).collect(),
                        target: Step::Redo(t - first),
                        complete: t + 1 == sites.len(),
                    });
                }
            }
            i = j.max(i + 1);
        }
    }
    plans
}

// --- backward: a new enum variant and its match arms -------------------------------------------

fn enum_variant(file: &File<'_>, cut: &CutOptions) -> Vec<Plan> {
    let root = file.tree.root_node();
    let arms = file.all(root, "match_arm");
    let mut plans = Vec::new();
    for item in file.all(root, "enum_item") {
        let (Some(name), Some(body)) = (
            item.child_by_field_name("name"),
            item.child_by_field_name("body"),
        ) else {
            continue;
        };
        let enum_name = file.text_of(name);
        let variants = file.all(body, "enum_variant");
        if variants.len() < 2 {
            continue;
        }
        for variant in variants {
            let Some(variant_name) = variant.child_by_field_name("name").map(|n| file.text_of(n))
            else {
                continue;
            };
            // Its doc comments and attributes go with it.
            let mut start = variant.start_byte();
            let mut previous = variant.prev_sibling();
            while let Some(p) = previous {
                let adjacent = file.line_of(p.end_byte()) + 1 >= file.line_of(start);
                if matches!(p.kind(), "attribute_item" | "line_comment") && adjacent {
                    start = p.start_byte();
                    previous = p.prev_sibling();
                } else {
                    break;
                }
            }
            let Some(variant_site) = file.whole_lines(start, variant.end_byte()) else {
                continue;
            };
            let mut sites: Vec<Range<usize>> = arms
                .iter()
                .filter(|arm| names_variant(file, **arm, enum_name, variant_name))
                .filter_map(|arm| file.whole_lines(arm.start_byte(), arm.end_byte()))
                .collect();
            if sites.is_empty() {
                continue;
            }
            sites.sort_by_key(|s| s.start);
            // The variant first, then the arms in file order; the next arm is the target. Arms
            // before the last one done stay in the text (done earlier), the rest are taken out.
            for t in 0..sites.len() {
                if t > 0
                    && file.line_of(sites[t].start) - file.line_of(sites[t - 1].start)
                        > cut.lines_below + cut.group_lines
                {
                    continue;
                }
                let mut undo: Vec<(Range<usize>, String)> = sites[t.saturating_sub(1)..]
                    .iter()
                    .chain([&variant_site])
                    .map(|s| (s.clone(), String::new()))
                    .collect();
                undo.sort_by_key(|(s, _)| s.start);
                if undo.windows(2).any(|w| w[0].0.end > w[1].0.start) {
                    continue;
                }
                let index_of = |site: &Range<usize>| {
                    undo.iter()
                        .position(|(s, _)| s == site)
                        .expect("every site is undone")
                };
                let mut history = vec![Step::Redo(index_of(&variant_site))];
                history.extend(
                    sites[t.saturating_sub(1)..t]
                        .iter()
                        .map(|s| Step::Redo(index_of(s))),
                );
                let target = Step::Redo(index_of(&sites[t]));
                plans.push(Plan {
                    undo,
                    history,
                    target,
                    complete: t + 1 == sites.len(),
                });
            }
        }
    }
    plans
}

/// Whether `arm`'s pattern is exactly `Enum::Variant` (or `Self::Variant`), possibly with its
/// fields, and nothing else.
fn names_variant(file: &File<'_>, arm: Node<'_>, enum_name: &str, variant: &str) -> bool {
    let Some(pattern) = arm.child_by_field_name("pattern") else {
        return false;
    };
    let text = file.text_of(pattern);
    if text.contains('|') {
        return false;
    }
    [enum_name, "Self"].iter().any(|prefix| {
        text.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("::"))
            .and_then(|rest| rest.strip_prefix(variant))
            .is_some_and(|rest| {
                let rest = rest.trim_start();
                rest.is_empty()
                    || rest.starts_with('(')
                    || rest.starts_with('{')
                    || rest.starts_with("if ")
            })
    })
}

// --- forward: a rename carried to the other uses ---------------------------------------------

/// Parents of an identifier that make it a binding, not a use.
const BINDING_PARENTS: &[&str] = &[
    "let_declaration",
    "parameter",
    "closure_parameters",
    "tuple_pattern",
    "tuple_struct_pattern",
    "field_pattern",
    "match_pattern",
    "or_pattern",
    "ref_pattern",
    "mut_pattern",
    "captured_pattern",
    "for_expression",
    "let_condition",
    "slice_pattern",
    "reference_pattern",
    "struct_pattern",
];

/// Words added to a name.
const NAME_WORDS: &[&str] = &[
    "value", "count", "len", "index", "item", "next", "total", "buf", "result", "current", "input",
    "out",
];

fn rename(file: &File<'_>, cut: &CutOptions) -> Vec<Plan> {
    let mut plans = Vec::new();
    for function in file.all(file.tree.root_node(), "function_item") {
        let Some(body) = function.child_by_field_name("body") else {
            continue;
        };
        let identifiers: Vec<Node<'_>> = file
            .all(function, "identifier")
            .into_iter()
            .filter(|node| owner_fn(*node) == Some(function))
            .collect();
        let strings: Vec<&str> = file
            .all(body, "string_literal")
            .into_iter()
            .map(|s| file.text_of(s))
            .collect();
        let shorthand: Vec<&str> = file
            .all(body, "shorthand_field_initializer")
            .into_iter()
            .map(|s| file.text_of(s).trim())
            .collect();
        let function_text = file.text_of(function);
        let declarations = identifiers.iter().filter(|node| {
            node.parent().is_some_and(|p| {
                matches!(p.kind(), "let_declaration" | "parameter")
                    && p.child_by_field_name("pattern") == Some(**node)
            })
        });
        for declaration in declarations {
            let name = file.text_of(*declaration);
            if name.starts_with('_') || name == "self" {
                continue;
            }
            let bindings = identifiers
                .iter()
                .filter(|n| file.text_of(**n) == name)
                .filter(|n| {
                    n.parent()
                        .is_some_and(|p| BINDING_PARENTS.contains(&p.kind()))
                })
                .count();
            let in_strings = strings
                .iter()
                .any(|s| s.contains(&format!("{{{name}}}")) || s.contains(&format!("{{{name}:")));
            if bindings != 1 || in_strings || shorthand.contains(&name) {
                continue;
            }
            let uses: Vec<Range<usize>> = identifiers
                .iter()
                .filter(|n| n.start_byte() > declaration.end_byte() && file.text_of(**n) == name)
                .filter(|n| {
                    n.parent().is_none_or(|p| {
                        !matches!(p.kind(), "scoped_identifier" | "macro_invocation")
                    })
                })
                .map(|n| n.byte_range())
                .collect();
            if uses.is_empty() {
                continue;
            }
            let word = NAME_WORDS[(fnv1a(name.as_bytes()) % NAME_WORDS.len() as u64) as usize];
            let new_name = if name.len() <= 8 {
                format!("{name}_{word}")
            } else {
                format!("{word}_{name}")
            };
            if contains_word(function_text, &new_name) {
                continue;
            }
            let rename_at = |range: &Range<usize>| TextEdit {
                range: range.clone(),
                new_text: new_name.clone(),
            };
            // History: the declaration (and, when there are several uses, the first of them);
            // target: every other use in reach of the last one renamed, as one edit.
            for done in 0..uses.len().min(2) {
                let mut history = vec![rename_at(&declaration.byte_range())];
                history.extend(uses[..done].iter().map(rename_at));
                let last_line = file.line_of(history.last().expect("not empty").range.end);
                let pending: Vec<&Range<usize>> = uses[done..]
                    .iter()
                    .filter(|u| file.line_of(u.end) <= last_line + cut.lines_below)
                    .collect();
                let (Some(first), Some(last)) = (pending.first(), pending.last()) else {
                    continue;
                };
                let span = first.start..last.end;
                let mut new_text = String::new();
                let mut at = span.start;
                for site in &pending {
                    new_text.push_str(&file.text[at..site.start]);
                    new_text.push_str(&new_name);
                    at = site.end;
                }
                new_text.push_str(&file.text[at..span.end]);
                plans.push(Plan::forward(
                    history,
                    TextEdit {
                        range: span,
                        new_text,
                    },
                    true,
                ));
            }
        }
    }
    plans
}

/// The fn item whose body (or signature) holds `node`; `None` inside a closure.
fn owner_fn(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_item" => return Some(n),
            "closure_expression" => return None,
            _ => current = n.parent(),
        }
    }
    None
}

fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

// --- forward: a parameter or a field, then its uses --------------------------------------------

/// Parameters appended to a fn: name, type, and the argument callers pass.
const PARAMETERS: &[(&str, &str, &str)] = &[
    ("verbose", "bool", "false"),
    ("strict", "bool", "true"),
    ("limit", "usize", "usize::MAX"),
    ("offset", "usize", "0"),
    ("label", "&str", "\"\""),
    ("depth", "u32", "0"),
];

/// Fields appended to a struct: name, type, and the value initialisers give.
const FIELDS: &[(&str, &str, &str)] = &[
    ("enabled", "bool", "true"),
    ("count", "usize", "0"),
    ("label", "String", "String::new()"),
    ("limit", "Option<usize>", "None"),
    ("id", "u64", "0"),
    ("tags", "Vec<String>", "Vec::new()"),
];

/// The edit appending `item` to a delimited list (`(..)`, `{..}`): after the last element, on a
/// line of its own when the list has one element per line.
fn append_item(file: &File<'_>, list: Node<'_>, item: &str) -> Option<TextEdit> {
    let mut cursor = list.walk();
    let children: Vec<Node<'_>> = list.children(&mut cursor).collect();
    let open = children.first()?;
    let elements: Vec<&Node<'_>> = children
        .iter()
        .filter(|c| {
            c.is_named()
                && !matches!(
                    c.kind(),
                    "line_comment" | "block_comment" | "attribute_item"
                )
        })
        .collect();
    let Some(last) = elements.last() else {
        let at = open.end_byte();
        let padding = if open.kind() == "{" { " " } else { "" };
        return Some(TextEdit {
            range: at..at,
            new_text: format!("{padding}{item}{padding}"),
        });
    };
    let multi_line = file.line_of(last.start_byte()) > file.line_of(open.start_byte());
    let after = &file.text[last.end_byte()..list.end_byte()];
    if multi_line {
        let indent = file.indent_at(last.start_byte());
        Some(if after.trim_start().starts_with(',') {
            let at = last.end_byte() + after.find(',').expect("a comma follows") + 1;
            TextEdit {
                range: at..at,
                new_text: format!("\n{indent}{item},"),
            }
        } else {
            let at = last.end_byte();
            TextEdit {
                range: at..at,
                new_text: format!(",\n{indent}{item}"),
            }
        })
    } else {
        let at = last.end_byte();
        Some(TextEdit {
            range: at..at,
            new_text: format!(", {item}"),
        })
    }
}

/// Plans for "change the definition, then its uses": the definition and the uses before the
/// target (in file order, at most four) are the history, the next use is the target.
fn definition_then_uses(definition: TextEdit, uses: Vec<TextEdit>, plans: &mut Vec<Plan>) {
    let mut uses = uses;
    uses.sort_by_key(|u| u.range.start);
    for t in 0..uses.len().min(5) {
        let mut history = vec![definition.clone()];
        history.extend(uses[..t].iter().cloned());
        plans.push(Plan::forward(history, uses[t].clone(), t + 1 == uses.len()));
    }
}

fn add_parameter(file: &File<'_>, _cut: &CutOptions) -> Vec<Plan> {
    let root = file.tree.root_node();
    let calls = file.all(root, "call_expression");
    let mut plans = Vec::new();
    for function in file.all(root, "function_item") {
        let (Some(name), Some(parameters)) = (
            function.child_by_field_name("name"),
            function.child_by_field_name("parameters"),
        ) else {
            continue;
        };
        if in_trait_impl(function) {
            continue;
        }
        let name = file.text_of(name);
        let is_method = !file.all(parameters, "self_parameter").is_empty();
        let function_text = file.text_of(function);
        let Some(&(parameter, ty, argument)) =
            pick(PARAMETERS, name, |(p, ..)| !contains_word(function_text, p))
        else {
            continue;
        };
        let mut uses = Vec::new();
        for call in &calls {
            let (Some(callee), Some(arguments)) = (
                call.child_by_field_name("function"),
                call.child_by_field_name("arguments"),
            ) else {
                continue;
            };
            let calls_it = match callee.kind() {
                "identifier" => !is_method && file.text_of(callee) == name,
                "scoped_identifier" => {
                    !is_method
                        && callee
                            .child_by_field_name("path")
                            .is_some_and(|p| file.text_of(p) == "Self")
                        && callee
                            .child_by_field_name("name")
                            .is_some_and(|n| file.text_of(n) == name)
                }
                "field_expression" => {
                    is_method
                        && callee
                            .child_by_field_name("value")
                            .is_some_and(|v| file.text_of(v) == "self")
                        && callee
                            .child_by_field_name("field")
                            .is_some_and(|f| file.text_of(f) == name)
                }
                _ => false,
            };
            if !calls_it {
                continue;
            }
            // A call from inside the fn passes its own parameter on.
            let inside = function.byte_range().contains(&call.start_byte());
            let value = if inside { parameter } else { argument };
            uses.extend(append_item(file, arguments, value));
        }
        if uses.is_empty() {
            continue;
        }
        let Some(signature) = append_item(file, parameters, &format!("{parameter}: {ty}")) else {
            continue;
        };
        definition_then_uses(signature, uses, &mut plans);
    }
    plans
}

/// Whether `function` implements a trait's method (its signature is the trait's to change).
fn in_trait_impl(function: Node<'_>) -> bool {
    function
        .parent()
        .filter(|p| p.kind() == "declaration_list")
        .and_then(|p| p.parent())
        .is_some_and(|item| {
            item.kind() == "impl_item" && item.child_by_field_name("trait").is_some()
        })
}

fn add_field(file: &File<'_>, _cut: &CutOptions) -> Vec<Plan> {
    let root = file.tree.root_node();
    let literals = file.all(root, "struct_expression");
    let mut plans = Vec::new();
    for item in file.all(root, "struct_item") {
        let (Some(name), Some(body)) = (
            item.child_by_field_name("name"),
            item.child_by_field_name("body"),
        ) else {
            continue;
        };
        if body.kind() != "field_declaration_list" {
            continue;
        }
        let struct_name = file.text_of(name);
        let fields = file.all(body, "field_declaration");
        let Some(last) = fields.last() else {
            continue;
        };
        let body_text = file.text_of(body);
        let Some(&(field, ty, value)) =
            pick(FIELDS, struct_name, |(f, ..)| !contains_word(body_text, f))
        else {
            continue;
        };
        let visibility = file
            .all(*last, "visibility_modifier")
            .first()
            .map_or(String::new(), |v| format!("{} ", file.text_of(*v)));
        let mut uses = Vec::new();
        for literal in &literals {
            let (Some(literal_name), Some(initialisers)) = (
                literal.child_by_field_name("name"),
                literal.child_by_field_name("body"),
            ) else {
                continue;
            };
            let named = file.text_of(literal_name);
            let is_it = named == struct_name
                || (named == "Self" && enclosing_impl_type(file, *literal) == Some(struct_name));
            if !is_it || !file.all(initialisers, "base_field_initializer").is_empty() {
                continue;
            }
            uses.extend(append_item(
                file,
                initialisers,
                &format!("{field}: {value}"),
            ));
        }
        if uses.is_empty() {
            continue;
        }
        let Some(declaration) = append_item(file, body, &format!("{visibility}{field}: {ty}"))
        else {
            continue;
        };
        definition_then_uses(declaration, uses, &mut plans);
    }
    plans
}

/// The type name (without generics) of the impl block around `node`.
fn enclosing_impl_type<'a>(file: &File<'a>, node: Node<'_>) -> Option<&'a str> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind() == "impl_item" {
            let ty = file.text_of(n.child_by_field_name("type")?);
            return Some(ty.split('<').next().unwrap_or(ty).trim());
        }
        current = n.parent();
    }
    None
}

/// The first choice that fits, starting at one that `name` picks.
fn pick<'c, T>(choices: &'c [T], name: &str, fits: impl Fn(&T) -> bool) -> Option<&'c T> {
    let start = (fnv1a(name.as_bytes()) % choices.len() as u64) as usize;
    (0..choices.len())
        .map(|i| &choices[(start + i) % choices.len()])
        .find(|choice| fits(choice))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests;
