//! Refactorings found in a Rust file with tree-sitter, site by site: a local or parameter
//! renamed ([`renames`]), a parameter appended to a fn and an argument to each call
//! ([`added_parameters`]), the `?`s of a fn written as `.unwrap()` ([`unwraps_to_try`]).
//!
//! One search serves two users: the synthetic next-edit generator (`synthetic`), which cuts
//! each refactoring into history and target, and the next-edit typing replay (lsp-server's
//! `benches/next_edit_typing.rs`), which types them into the server. Where the two ask for
//! different rules, [`Rules`] says which; the rest is shared. A refactoring depends only on
//! the file's text and the rules.

use std::ops::Range;

use redraft_context::edit::TextEdit;
use tree_sitter::{Node, Tree};

use crate::edits::EditKind;

/// A refactoring of a file, as a neutral list of edits.
#[derive(Debug, Clone, PartialEq)]
pub struct Refactoring {
    /// [`EditKind::Rename`], [`EditKind::AddParameter`] or [`EditKind::UnwrapToTry`].
    pub kind: EditKind,
    /// What it does, for a report (``rename `n` -> `n_count` in fn `advance` (2 uses)``).
    pub what: String,
    /// Edits of the file's text, none overlapping another. A forward refactoring's (rename,
    /// added parameter) are the refactoring itself in editing order: the definition, then the
    /// uses in file order; a rename's replace the whole name at each site. A backward one's
    /// (unwrap to `?`) take it out of the file: each `?` written `.unwrap()`, in file order;
    /// the refactoring is putting them back one by one.
    pub edits: Vec<TextEdit>,
    /// The byte ranges of the fns it edits, so that refactorings chosen together never touch
    /// the same fn.
    pub owns: Vec<Range<usize>>,
}

impl Refactoring {
    /// The edits as a programmer types them: a rename's new word inserted after a short name
    /// or before a long one (where the new name has it); every other edit as it is.
    pub fn typed_edits(&self) -> Vec<TextEdit> {
        self.edits
            .iter()
            .map(|edit| {
                if self.kind != EditKind::Rename {
                    return edit.clone();
                }
                let old = edit.range.len();
                if appends_word(old) {
                    TextEdit {
                        range: edit.range.end..edit.range.end,
                        new_text: edit.new_text[old..].to_string(),
                    }
                } else {
                    TextEdit {
                        range: edit.range.start..edit.range.start,
                        new_text: edit.new_text[..edit.new_text.len() - old].to_string(),
                    }
                }
            })
            .collect()
    }
}

/// The rules the two users differ in (`false` everywhere is the synthetic generator's: its
/// data was made so).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Renames: identifiers in a closure inside the fn are the fn's (bound, used and renamed
    /// with it); otherwise a closure's are left out, as a nested fn's always are.
    pub closures: bool,
    /// Renames: a name in a shorthand field pattern (`Point { x, .. }`) is not renamed, as one
    /// in a shorthand field initialiser (`Point { x }`) never is.
    pub shorthand_patterns: bool,
    /// Renames: an identifier right after a `.` (a field in a macro's token tree: `x.name`)
    /// is not a use.
    pub skip_after_dot: bool,
    /// Added parameters: a fn whose name another fn in the file has too (another impl's
    /// method) is skipped, its calls being ambiguous.
    pub unique_names: bool,
    /// Unwraps: a fn returning `Option` counts, not only one returning `Result`.
    pub option_returns: bool,
}

/// A parsed file.
pub struct File<'a> {
    pub(super) text: &'a str,
    pub(super) tree: &'a Tree,
}

impl<'a> File<'a> {
    /// `tree` is `text` parsed ([`redraft_context::parse_rust`]).
    pub fn new(text: &'a str, tree: &'a Tree) -> File<'a> {
        File { text, tree }
    }

    pub(super) fn text_of(&self, node: Node<'_>) -> &'a str {
        &self.text[node.byte_range()]
    }

    /// Every node of `kind` under `root` (`root` included), in document order.
    pub(super) fn all<'t>(&self, root: Node<'t>, kind: &str) -> Vec<Node<'t>> {
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

    pub(super) fn line_of(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count()
    }

    pub(super) fn line_start(&self, offset: usize) -> usize {
        self.text[..offset].rfind('\n').map_or(0, |at| at + 1)
    }

    /// The indentation of the line holding `offset`.
    pub(super) fn indent_at(&self, offset: usize) -> &'a str {
        let start = self.line_start(offset);
        let line = &self.text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
    }

    /// `node` and what follows it on its line (a comma), as a site of whole lines: from the
    /// newline before its first line to the end of its last line's text. `None` unless it
    /// starts its line and only a comma (or nothing) follows it there.
    pub(super) fn whole_lines(&self, start: usize, end: usize) -> Option<Range<usize>> {
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

fn fn_name<'a>(file: &File<'a>, function: Node<'_>) -> &'a str {
    function
        .child_by_field_name("name")
        .map_or("?", |n| file.text_of(n))
}

// --- `?` written as `.unwrap()` ----------------------------------------------------------------

/// Every fn returning `Result` (or `Option`, as `rules` says) with a `?` of its own: the `?`s
/// written as `.unwrap()`, in file order.
pub fn unwraps_to_try(file: &File<'_>, rules: &Rules) -> Vec<Refactoring> {
    let mut out = Vec::new();
    for function in file.all(file.tree.root_node(), "function_item") {
        let returns = function
            .child_by_field_name("return_type")
            .map_or("", |ty| file.text_of(ty));
        let Some(body) = function.child_by_field_name("body") else {
            continue;
        };
        if !(returns.contains("Result") || (rules.option_returns && returns.contains("Option"))) {
            continue;
        }
        // The `?`s that return from this fn, not from a closure or async block inside it.
        let mut sites: Vec<Range<usize>> = file
            .all(body, "try_expression")
            .into_iter()
            .filter(|node| owner(*node) == Some(function))
            .filter_map(|node| node.child(node.child_count().checked_sub(1)?))
            .filter(|mark| mark.kind() == "?")
            .map(|mark| mark.byte_range())
            .collect();
        if sites.is_empty() {
            continue;
        }
        // Preorder visits `a()?.b()?`'s outer `?` first.
        sites.sort_by_key(|site| site.start);
        out.push(Refactoring {
            kind: EditKind::UnwrapToTry,
            what: format!(
                "`.unwrap()` -> `?` in fn `{}` ({} sites)",
                fn_name(file, function),
                sites.len()
            ),
            edits: sites
                .into_iter()
                .map(|range| TextEdit {
                    range,
                    new_text: ".unwrap()".to_string(),
                })
                .collect(),
            owns: vec![function.byte_range()],
        });
    }
    out
}

/// The fn, closure or async block whose body `node` is in (what a `?` there returns from).
pub(super) fn owner(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_item" | "closure_expression" | "async_block" | "try_block" => return Some(n),
            _ => current = n.parent(),
        }
    }
    None
}

// --- a rename carried to each use --------------------------------------------------------------

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

/// Whether a name of `len` bytes gets its new word appended (`len` -> `len_total`) rather than
/// put before it (`position` -> `total_position`).
fn appends_word(len: usize) -> bool {
    len <= 8
}

/// Every local or parameter bound once in its fn (by a `let` or as a parameter), used after its
/// declaration, never spelled in a format string or a shorthand field, and whose new name is
/// not in the fn already: renamed at the declaration, then at each use in file order. In file
/// order of the fns, then of the declarations.
pub fn renames(file: &File<'_>, rules: &Rules) -> Vec<Refactoring> {
    let mut out = Vec::new();
    for function in file.all(file.tree.root_node(), "function_item") {
        let Some(body) = function.child_by_field_name("body") else {
            continue;
        };
        // Nested fns' identifiers are not this fn's; closures' are as `rules` says.
        let identifiers: Vec<Node<'_>> = file
            .all(function, "identifier")
            .into_iter()
            .filter(|node| {
                let owner = if rules.closures {
                    enclosing_fn(*node)
                } else {
                    owner_fn(*node)
                };
                owner == Some(function)
            })
            .collect();
        let strings: Vec<&str> = file
            .all(body, "string_literal")
            .into_iter()
            .map(|s| file.text_of(s))
            .collect();
        let shorthand_kinds: &[&str] = if rules.shorthand_patterns {
            &["shorthand_field_initializer", "field_pattern"]
        } else {
            &["shorthand_field_initializer"]
        };
        let shorthand: Vec<&str> = shorthand_kinds
            .iter()
            .flat_map(|kind| file.all(body, kind))
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
                .filter(|n| !(rules.skip_after_dot && file.text[..n.start_byte()].ends_with('.')))
                .map(|n| n.byte_range())
                .collect();
            if uses.is_empty() {
                continue;
            }
            let word = NAME_WORDS[(fnv1a(name.as_bytes()) % NAME_WORDS.len() as u64) as usize];
            let new_name = if appends_word(name.len()) {
                format!("{name}_{word}")
            } else {
                format!("{word}_{name}")
            };
            if contains_word(function_text, &new_name) {
                continue;
            }
            let what = format!(
                "rename `{name}` -> `{new_name}` in fn `{}` ({} uses)",
                fn_name(file, function),
                uses.len()
            );
            let edits = std::iter::once(declaration.byte_range())
                .chain(uses)
                .map(|range| TextEdit {
                    range,
                    new_text: new_name.clone(),
                })
                .collect();
            out.push(Refactoring {
                kind: EditKind::Rename,
                what,
                edits,
                owns: vec![function.byte_range()],
            });
        }
    }
    out
}

/// The innermost fn item holding `node`.
fn enclosing_fn(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind() == "function_item" {
            return Some(n);
        }
        current = n.parent();
    }
    None
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

/// Whether `word` stands in `text` as a whole word.
pub(super) fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

// --- a parameter, then an argument at each call ------------------------------------------------

/// Parameters appended to a fn: name, type, and the argument callers pass.
const PARAMETERS: &[(&str, &str, &str)] = &[
    ("verbose", "bool", "false"),
    ("strict", "bool", "true"),
    ("limit", "usize", "usize::MAX"),
    ("offset", "usize", "0"),
    ("label", "&str", "\"\""),
    ("depth", "u32", "0"),
];

/// Every fn, not a trait's method, called in the file (by name, `Self::name` or, for a
/// method, `self.name`): a parameter appended to its signature (one of `PARAMETERS` its
/// text does not have, picked by its name), then an argument at each call in file order (the
/// parameter itself in a call from inside the fn).
pub fn added_parameters(file: &File<'_>, rules: &Rules) -> Vec<Refactoring> {
    let root = file.tree.root_node();
    let calls = file.all(root, "call_expression");
    let functions = file.all(root, "function_item");
    let mut out = Vec::new();
    for &function in &functions {
        let (Some(name), Some(parameters)) = (
            function.child_by_field_name("name"),
            function.child_by_field_name("parameters"),
        ) else {
            continue;
        };
        let name = file.text_of(name);
        let defined_again = rules.unique_names
            && functions
                .iter()
                .filter(|f| fn_name(file, **f) == name)
                .count()
                > 1;
        if in_trait_impl(function) || defined_again {
            continue;
        }
        let is_method = !file.all(parameters, "self_parameter").is_empty();
        let function_text = file.text_of(function);
        let Some(&(parameter, ty, argument)) =
            pick(PARAMETERS, name, |(p, ..)| !contains_word(function_text, p))
        else {
            continue;
        };
        let mut owns = vec![function.byte_range()];
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
            if let Some(edit) = append_item(file, arguments, value) {
                uses.push(edit);
                owns.extend(enclosing_fn(*call).map(|f| f.byte_range()));
            }
        }
        if uses.is_empty() {
            continue;
        }
        let Some(signature) = append_item(file, parameters, &format!("{parameter}: {ty}")) else {
            continue;
        };
        uses.sort_by_key(|u| u.range.start);
        out.push(Refactoring {
            kind: EditKind::AddParameter,
            what: format!(
                "parameter `{parameter}: {ty}` on fn `{name}`, then {} call site(s)",
                uses.len()
            ),
            edits: std::iter::once(signature).chain(uses).collect(),
            owns,
        });
    }
    out
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

/// The edit appending `item` to a delimited list (`(..)`, `{..}`): after the last element, on a
/// line of its own when the list has one element per line.
pub(super) fn append_item(file: &File<'_>, list: Node<'_>, item: &str) -> Option<TextEdit> {
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

/// The first choice that fits, starting at one that `name` picks.
pub(super) fn pick<'c, T>(
    choices: &'c [T],
    name: &str,
    fits: impl Fn(&T) -> bool,
) -> Option<&'c T> {
    let start = (fnv1a(name.as_bytes()) % choices.len() as u64) as usize;
    (0..choices.len())
        .map(|i| &choices[(start + i) % choices.len()])
        .find(|choice| fits(choice))
}

pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    //! The search under both rule sets: each of [`Rules`]' switches changes what it says, and a
    //! rename's typed edits put its new word on the side the name gets it.

    use super::*;

    /// The synthetic generator's rules.
    const NONE: Rules = Rules {
        closures: false,
        shorthand_patterns: false,
        skip_after_dot: false,
        unique_names: false,
        option_returns: false,
    };

    type Finder = fn(&File<'_>, &Rules) -> Vec<Refactoring>;

    /// What each refactoring `find` makes of `source` under `rules` says it does.
    fn found(source: &str, find: Finder, rules: Rules) -> Vec<String> {
        let tree = redraft_context::parse_rust(source).unwrap();
        find(&File::new(source, &tree), &rules)
            .into_iter()
            .map(|refactoring| refactoring.what)
            .collect()
    }

    #[test]
    fn a_closure_s_uses_are_the_fn_s_only_with_closures() {
        let source = "\
fn f(items: &[u32]) -> u32 {
    let total = 1;
    items.iter().map(|x| x + total).sum::<u32>() + total
}
";
        let items = "rename `items` -> `items_index` in fn `f` (1 uses)";
        assert_eq!(
            found(source, renames, NONE),
            [items, "rename `total` -> `total_count` in fn `f` (1 uses)"]
        );
        let closures = Rules {
            closures: true,
            ..NONE
        };
        assert_eq!(
            found(source, renames, closures),
            [items, "rename `total` -> `total_count` in fn `f` (2 uses)"]
        );
    }

    #[test]
    fn a_name_in_a_shorthand_pattern_is_kept_only_with_shorthand_patterns() {
        // The pattern's `y` is not an identifier node, so it does not count as a binding.
        let source = "\
fn m(p: Point) -> u32 {
    let y = 1;
    let Point { y, .. } = p;
    y + y
}
";
        assert_eq!(
            found(source, renames, NONE),
            ["rename `y` -> `y_item` in fn `m` (2 uses)"]
        );
        let shorthand = Rules {
            shorthand_patterns: true,
            ..NONE
        };
        assert_eq!(found(source, renames, shorthand), Vec::<String>::new());
    }

    #[test]
    fn a_field_in_a_macro_is_a_use_unless_skip_after_dot() {
        let source = "\
fn n(s: S, v: u32) -> u32 {
    let w = v;
    println!(\"{}\", s.w);
    w + w
}
";
        let w = |rules| found(source, renames, rules).pop().unwrap();
        assert_eq!(w(NONE), "rename `w` -> `w_total` in fn `n` (3 uses)");
        let skip = Rules {
            skip_after_dot: true,
            ..NONE
        };
        assert_eq!(w(skip), "rename `w` -> `w_total` in fn `n` (2 uses)");
    }

    #[test]
    fn a_name_two_fns_have_is_skipped_only_with_unique_names() {
        let source = "\
impl A {
    fn size(&self) -> usize {
        1
    }

    fn twice(&self) -> usize {
        self.size() * 2
    }
}

impl B {
    fn size(&self) -> usize {
        2
    }
}
";
        // Both `size`s take `self.size()` for theirs.
        let size = "parameter `label: &str` on fn `size`, then 1 call site(s)";
        assert_eq!(found(source, added_parameters, NONE), [size, size]);
        let unique = Rules {
            unique_names: true,
            ..NONE
        };
        assert_eq!(
            found(source, added_parameters, unique),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_fn_returning_option_counts_only_with_option_returns() {
        let source = "\
fn g() -> Option<u32> {
    let a = h()?;
    Some(a.checked_add(1)?)
}

fn r() -> Result<u32, E> {
    Ok(h()?)
}
";
        let r = "`.unwrap()` -> `?` in fn `r` (1 sites)";
        assert_eq!(found(source, unwraps_to_try, NONE), [r]);
        let options = Rules {
            option_returns: true,
            ..NONE
        };
        assert_eq!(
            found(source, unwraps_to_try, options),
            ["`.unwrap()` -> `?` in fn `g` (2 sites)", r]
        );
    }

    #[test]
    fn a_rename_is_typed_after_a_short_name_and_before_a_long_one() {
        // Each new name also starts and ends with the old one: only the name's length says
        // where its word goes.
        let rename = |old: &str, new: &str| Refactoring {
            kind: EditKind::Rename,
            what: String::new(),
            edits: vec![TextEdit {
                range: 4..4 + old.len(),
                new_text: new.to_string(),
            }],
            owns: Vec::new(),
        };
        assert_eq!(
            rename("len", "len_len").typed_edits(),
            [TextEdit {
                range: 7..7,
                new_text: "_len".into()
            }]
        );
        assert_eq!(
            rename("len_len_len", "len_len_len_len").typed_edits(),
            [TextEdit {
                range: 4..4,
                new_text: "len_".into()
            }]
        );
    }
}
