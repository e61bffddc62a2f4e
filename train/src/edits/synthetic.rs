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
//! The rename, added-parameter and unwrap sites are found by [`refactorings`], the search the
//! next-edit typing replay (lsp-server's `benches/next_edit_typing.rs`) shares, under this
//! data's [`Rules`] (`RULES`); this module cuts them into history and target.
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
use tree_sitter::Node;

use self::refactorings::{
    added_parameters, append_item, contains_word, fnv1a, pick, renames, unwraps_to_try, File, Rules,
};
use super::EditKind;

pub mod refactorings;

/// The rename, added-parameter and unwrap rules this data was made with (see [`Rules`]).
const RULES: Rules = Rules {
    closures: false,
    shorthand_patterns: false,
    skip_after_dot: false,
    unique_names: false,
    option_returns: false,
};

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
    let Some(tree) = redraft_context::parse_rust(text) else {
        return out;
    };
    let file = File::new(text, &tree);
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
                    .entry(format!("{}/no_change", kind.name()))
                    .or_default() += 1;
                continue;
            }
            if !in_reach(&case, cut) {
                *out.dropped
                    .entry(format!("{}/out_of_reach", kind.name()))
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

/// Finds a kind's opportunities in a file.
type Maker = fn(&File<'_>, &CutOptions) -> Vec<Plan>;

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
    for refactoring in unwraps_to_try(file, &RULES) {
        let sites = &refactoring.edits;
        let lines: Vec<usize> = sites.iter().map(|s| file.line_of(s.range.start)).collect();
        for (first, t) in chains(&lines, cut.group_lines, 1, 3) {
            plans.push(Plan {
                undo: sites[first..]
                    .iter()
                    .map(|site| (site.range.clone(), site.new_text.clone()))
                    .collect(),
                history: (0..t - first).map(Step::Redo).collect(),
                target: Step::Redo(t - first),
                complete: t + 1 == sites.len(),
            });
        }
    }
    plans
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

fn rename(file: &File<'_>, cut: &CutOptions) -> Vec<Plan> {
    let mut plans = Vec::new();
    for refactoring in renames(file, &RULES) {
        // The declaration, then the uses, each its whole name replaced by the new one.
        let (declaration, uses) = refactoring
            .edits
            .split_first()
            .expect("a rename has its declaration");
        let new_name = &declaration.new_text;
        // History: the declaration (and, when there are several uses, the first of them);
        // target: every other use in reach of the last one renamed, as one edit.
        for done in 0..uses.len().min(2) {
            let mut history = vec![declaration.clone()];
            history.extend(uses[..done].iter().cloned());
            let last_line = file.line_of(history.last().expect("not empty").range.end);
            let pending: Vec<&Range<usize>> = uses[done..]
                .iter()
                .map(|u| &u.range)
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
                new_text.push_str(new_name);
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
    plans
}

// --- forward: a parameter or a field, then its uses --------------------------------------------

/// Fields appended to a struct: name, type, and the value initialisers give.
const FIELDS: &[(&str, &str, &str)] = &[
    ("enabled", "bool", "true"),
    ("count", "usize", "0"),
    ("label", "String", "String::new()"),
    ("limit", "Option<usize>", "None"),
    ("id", "u64", "0"),
    ("tags", "Vec<String>", "Vec::new()"),
];

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
    let mut plans = Vec::new();
    for refactoring in added_parameters(file, &RULES) {
        let mut edits = refactoring.edits.into_iter();
        let signature = edits.next().expect("an added parameter has its signature");
        definition_then_uses(signature, edits.collect(), &mut plans);
    }
    plans
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

#[cfg(test)]
mod tests;
