//! The next-edit typing replay's recording: refactorings a programmer carries through a real
//! Rust file site by site, found in its text with tree-sitter, so the same file always gives
//! the same recording and nothing in it is picked by hand.
//!
//! - [`Kind::Rename`]: a local or parameter renamed at its declaration, then at each use in
//!   file order (a word appended to short names, put before long ones: `len` -> `len_total`).
//! - [`Kind::Signature`]: a parameter appended to a fn's signature, then an argument added at
//!   each call site in the file (the fn's own parameter in a call from inside it).
//! - [`Kind::Unwrap`]: the `?`s of a fn returning `Result` or `Option` written as `.unwrap()`
//!   in the starting text (so the end state is the code as its author wrote it), then turned
//!   back into `?` one by one.
//!
//! The rules follow `redraft_train::edits::synthetic`, which makes next-edit training cases of
//! the same kinds: a rename only where the name is bound once in the fn and never spelled in a
//! format string or a shorthand field; a parameter only on fns that are not a trait's; each
//! refactoring owns the fns it edits and no two share one, so their sites never collide.
//!
//! Every site is one edit group, typed as an editor sends it: an inserted name part, parameter
//! or argument a character at a time; a `.unwrap()` selected and replaced by `?` in one change.

use std::ops::Range;

use tree_sitter::{Node, Parser, Tree};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Rename,
    Signature,
    Unwrap,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Rename, Kind::Signature, Kind::Unwrap];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Rename => "rename",
            Kind::Signature => "signature",
            Kind::Unwrap => "unwrap",
        }
    }
}

/// One change as an editor sends it: bytes `at..at + delete` of the document as it is then
/// replaced by `insert`.
#[derive(Debug, Clone, PartialEq)]
pub struct Keystroke {
    pub at: usize,
    pub delete: usize,
    pub insert: String,
}

impl Keystroke {
    pub fn apply(&self, text: &mut String) {
        text.replace_range(self.at..self.at + self.delete, &self.insert);
    }

    /// Where the cursor is after it.
    pub fn cursor(&self) -> usize {
        self.at + self.insert.len()
    }
}

/// A refactoring: its sites in the order they are edited, each an edit group of keystrokes.
#[derive(Debug, Clone)]
pub struct Refactoring {
    pub kind: Kind,
    /// What it does, for the report (`rename `n` -> `n_count` in fn `advance``).
    pub what: String,
    pub groups: Vec<Vec<Keystroke>>,
}

#[derive(Debug, Clone)]
pub struct Recording {
    /// The document when typing starts: the file, with the unwrap refactorings' `?`s written
    /// as `.unwrap()`.
    pub start: String,
    /// In the order they are typed (the kinds taking turns).
    pub refactorings: Vec<Refactoring>,
}

/// How much to take from a file.
pub struct Limits {
    /// Refactorings of each kind, at most (spread over the file's candidates).
    pub per_kind: usize,
    /// Sites of one refactoring, at most (the first ones in editing order).
    pub max_sites: usize,
}

/// A site in the starting text: `range` becomes `text`, typed a character at a time when
/// `typed`, else as one replacement.
#[derive(Debug, Clone)]
struct Site {
    range: Range<usize>,
    text: String,
    typed: bool,
}

/// A candidate: what it does, the fns it edits (their byte ranges) and its sites in order.
struct Candidate {
    kind: Kind,
    what: String,
    owns: Vec<Range<usize>>,
    sites: Vec<Site>,
}

impl Recording {
    pub fn from_source(source: &str, limits: &Limits) -> Recording {
        // The unwrap refactorings are chosen on the real file, whose `?`s they undo; the others
        // on the starting text.
        let real = parse(source);
        let file = File {
            text: source,
            tree: &real,
        };
        let unwraps = pick(unwrap_candidates(&file), limits.per_kind, &[]);
        let mut undo: Vec<Range<usize>> = unwraps
            .iter()
            .flat_map(|c| c.sites.iter().map(|s| s.range.clone()))
            .collect();
        undo.sort_by_key(|r| r.start);
        let mut start = String::with_capacity(source.len() + 8 * undo.len());
        let mut at = 0;
        for question in &undo {
            start.push_str(&source[at..question.start]);
            start.push_str(".unwrap()");
            at = question.end;
        }
        start.push_str(&source[at..]);
        // Real offset -> starting text offset.
        let shift = |offset: usize| {
            offset + undo.iter().filter(|q| q.end <= offset).count() * (".unwrap()".len() - 1)
        };
        let unwraps: Vec<Candidate> = unwraps
            .into_iter()
            .map(|c| Candidate {
                owns: c
                    .owns
                    .iter()
                    .map(|r| shift(r.start)..shift(r.end))
                    .collect(),
                sites: c
                    .sites
                    .iter()
                    .map(|s| {
                        let at = shift(s.range.start);
                        Site {
                            range: at..at + ".unwrap()".len(),
                            text: "?".into(),
                            typed: false,
                        }
                    })
                    .collect(),
                ..c
            })
            .collect();

        let tree = parse(&start);
        let file = File {
            text: &start,
            tree: &tree,
        };
        let taken: Vec<Range<usize>> = unwraps.iter().flat_map(|c| c.owns.clone()).collect();
        let renames = pick(rename_candidates(&file), limits.per_kind, &taken);
        let taken: Vec<Range<usize>> = taken
            .into_iter()
            .chain(renames.iter().flat_map(|c| c.owns.clone()))
            .collect();
        let signatures = pick(signature_candidates(&file), limits.per_kind, &taken);

        let mut by_kind = [renames, signatures, unwraps].map(|c| c.into_iter());
        let mut chosen = Vec::new();
        loop {
            let before = chosen.len();
            for kind in &mut by_kind {
                chosen.extend(kind.next());
            }
            if chosen.len() == before {
                break;
            }
        }
        let refactorings = keystrokes(&start, chosen, limits.max_sites);
        Recording {
            start,
            refactorings,
        }
    }

    /// The document after each edit group, in order, and the refactoring each group is in.
    pub fn after_groups(&self) -> Vec<(usize, String)> {
        let mut text = self.start.clone();
        let mut out = Vec::new();
        for (r, refactoring) in self.refactorings.iter().enumerate() {
            for group in &refactoring.groups {
                for key in group {
                    key.apply(&mut text);
                }
                out.push((r, text.clone()));
            }
        }
        out
    }
}

/// The chosen candidates' sites as keystrokes, in typing order: each site's offsets moved by
/// the edits typed before it.
fn keystrokes(start: &str, chosen: Vec<Candidate>, max_sites: usize) -> Vec<Refactoring> {
    // Edits typed so far: (position in the starting text, bytes added there).
    let mut done: Vec<(usize, isize)> = Vec::new();
    let now = |done: &[(usize, isize)], at: usize| -> usize {
        let shift: isize = done.iter().filter(|(p, _)| *p < at).map(|(_, d)| d).sum();
        (at as isize + shift) as usize
    };
    let mut out = Vec::new();
    for candidate in chosen {
        let mut groups = Vec::new();
        for site in candidate.sites.iter().take(max_sites) {
            let at = now(&done, site.range.start);
            debug_assert!(start.is_char_boundary(site.range.start));
            let group = if site.typed {
                debug_assert!(site.range.is_empty());
                let mut cursor = at;
                site.text
                    .chars()
                    .map(|c| {
                        let key = Keystroke {
                            at: cursor,
                            delete: 0,
                            insert: c.to_string(),
                        };
                        cursor += c.len_utf8();
                        key
                    })
                    .collect()
            } else {
                vec![Keystroke {
                    at,
                    delete: site.range.len(),
                    insert: site.text.clone(),
                }]
            };
            groups.push(group);
            done.push((
                site.range.start,
                site.text.len() as isize - site.range.len() as isize,
            ));
        }
        out.push(Refactoring {
            kind: candidate.kind,
            what: candidate.what,
            groups,
        });
    }
    out
}

/// Up to `n` candidates spread evenly over `all` (file order), skipping any that edits a fn
/// `taken` or an earlier pick holds.
fn pick(all: Vec<Candidate>, n: usize, taken: &[Range<usize>]) -> Vec<Candidate> {
    let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
    let mut held: Vec<Range<usize>> = taken.to_vec();
    let mut chosen = Vec::new();
    let mut all: Vec<Option<Candidate>> = all.into_iter().map(Some).collect();
    for i in 0..n.min(all.len()) {
        let from = i * all.len() / n.min(all.len());
        for slot in all[from..].iter_mut() {
            let fits = slot
                .as_ref()
                .is_some_and(|c| !c.owns.iter().any(|o| held.iter().any(|h| overlaps(o, h))));
            if fits {
                let candidate = slot.take().expect("checked");
                held.extend(candidate.owns.iter().cloned());
                chosen.push(candidate);
                break;
            }
        }
    }
    chosen
}

fn parse(text: &str) -> Tree {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_rust::LANGUAGE.into())
        .expect("the Rust grammar loads");
    parser.parse(text, None).expect("tree-sitter parses")
}

struct File<'a> {
    text: &'a str,
    tree: &'a Tree,
}

impl<'a> File<'a> {
    fn text_of(&self, node: Node<'_>) -> &'a str {
        &self.text[node.byte_range()]
    }

    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset].matches('\n').count()
    }

    /// The indentation of the line holding `offset`.
    fn indent_at(&self, offset: usize) -> &'a str {
        let start = self.text[..offset].rfind('\n').map_or(0, |at| at + 1);
        let line = &self.text[start..];
        &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
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

/// The fn, closure or async block a `?` returns from.
fn returns_from(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_item" | "closure_expression" | "async_block" | "try_block" => return Some(n),
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

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The first of `choices` that fits, starting at the one `name` hashes to.
fn choose<'c, T>(choices: &'c [T], name: &str, fits: impl Fn(&T) -> bool) -> Option<&'c T> {
    let start = (fnv1a(name.as_bytes()) % choices.len() as u64) as usize;
    (0..choices.len())
        .map(|i| &choices[(start + i) % choices.len()])
        .find(|choice| fits(choice))
}

fn fn_name<'a>(file: &File<'a>, function: Node<'_>) -> &'a str {
    function
        .child_by_field_name("name")
        .map_or("?", |n| file.text_of(n))
}

// --- `?` written as `.unwrap()`, turned back ---------------------------------------------------

fn unwrap_candidates(file: &File<'_>) -> Vec<Candidate> {
    let mut out = Vec::new();
    for function in file.all(file.tree.root_node(), "function_item") {
        let returns = function
            .child_by_field_name("return_type")
            .map_or("", |ty| file.text_of(ty));
        let Some(body) = function.child_by_field_name("body") else {
            continue;
        };
        if !(returns.contains("Result") || returns.contains("Option")) {
            continue;
        }
        let mut sites: Vec<Site> = file
            .all(body, "try_expression")
            .into_iter()
            .filter(|node| returns_from(*node) == Some(function))
            .filter_map(|node| node.child(node.child_count().checked_sub(1)?))
            .filter(|mark| mark.kind() == "?")
            .map(|mark| Site {
                range: mark.byte_range(),
                text: "?".into(),
                typed: false,
            })
            .collect();
        // Preorder visits `a()?.b()?`'s outer `?` first.
        sites.sort_by_key(|s| s.range.start);
        if sites.len() >= 2 {
            out.push(Candidate {
                kind: Kind::Unwrap,
                what: format!(
                    "`.unwrap()` -> `?` in fn `{}` ({} sites)",
                    fn_name(file, function),
                    sites.len()
                ),
                owns: vec![function.byte_range()],
                sites,
            });
        }
    }
    out
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

fn rename_candidates(file: &File<'_>) -> Vec<Candidate> {
    let mut out = Vec::new();
    for function in file.all(file.tree.root_node(), "function_item") {
        let Some(body) = function.child_by_field_name("body") else {
            continue;
        };
        // Closures included (a use inside one is renamed too), nested fns not.
        let identifiers: Vec<Node<'_>> = file
            .all(function, "identifier")
            .into_iter()
            .filter(|node| enclosing_fn(*node) == Some(function))
            .collect();
        let strings: Vec<&str> = file
            .all(body, "string_literal")
            .into_iter()
            .map(|s| file.text_of(s))
            .collect();
        let shorthand: Vec<&str> = ["shorthand_field_initializer", "field_pattern"]
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
            let uses: Vec<Node<'_>> = identifiers
                .iter()
                .copied()
                .filter(|n| n.start_byte() > declaration.end_byte() && file.text_of(*n) == name)
                .filter(|n| {
                    n.parent().is_none_or(|p| {
                        !matches!(p.kind(), "scoped_identifier" | "macro_invocation")
                    })
                })
                // A field name inside a macro's token tree (`x.name`) is not a use.
                .filter(|n| !file.text[..n.start_byte()].ends_with('.'))
                .collect();
            if uses.len() < 2 {
                continue;
            }
            let word = NAME_WORDS[(fnv1a(name.as_bytes()) % NAME_WORDS.len() as u64) as usize];
            let (new_name, appended) = if name.len() <= 8 {
                (format!("{name}_{word}"), format!("_{word}"))
            } else {
                (format!("{word}_{name}"), format!("{word}_"))
            };
            if contains_word(function_text, &new_name) {
                continue;
            }
            let site = |node: &Node<'_>| {
                let at = if name.len() <= 8 {
                    node.end_byte()
                } else {
                    node.start_byte()
                };
                Site {
                    range: at..at,
                    text: appended.clone(),
                    typed: true,
                }
            };
            let sites = std::iter::once(declaration)
                .chain(uses.iter())
                .map(site)
                .collect();
            out.push(Candidate {
                kind: Kind::Rename,
                what: format!(
                    "rename `{name}` -> `{new_name}` in fn `{}` ({} uses)",
                    fn_name(file, function),
                    uses.len()
                ),
                owns: vec![function.byte_range()],
                sites,
            });
        }
    }
    out
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

/// Where `item` goes at the end of a delimited list (`(..)`): after the last element (on a
/// line of its own when the list has one element per line), or inside an empty one.
fn append_item(file: &File<'_>, list: Node<'_>, item: &str) -> Option<Site> {
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
    let insert = |at: usize, text: String| {
        Some(Site {
            range: at..at,
            text,
            typed: true,
        })
    };
    let Some(last) = elements.last() else {
        return insert(open.end_byte(), item.to_string());
    };
    if file.line_of(last.start_byte()) > file.line_of(open.start_byte()) {
        let indent = file.indent_at(last.start_byte());
        let after = &file.text[last.end_byte()..list.end_byte()];
        if after.trim_start().starts_with(',') {
            let at = last.end_byte() + after.find(',').expect("a comma follows") + 1;
            insert(at, format!("\n{indent}{item},"))
        } else {
            insert(last.end_byte(), format!(",\n{indent}{item}"))
        }
    } else {
        insert(last.end_byte(), format!(", {item}"))
    }
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

fn signature_candidates(file: &File<'_>) -> Vec<Candidate> {
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
        // Another fn of the same name (another impl's method) would make its calls ambiguous.
        let defined = functions
            .iter()
            .filter(|f| fn_name(file, **f) == name)
            .count();
        if in_trait_impl(function) || defined > 1 {
            continue;
        }
        let is_method = !file.all(parameters, "self_parameter").is_empty();
        let function_text = file.text_of(function);
        let Some(&(parameter, ty, argument)) =
            choose(PARAMETERS, name, |(p, ..)| !contains_word(function_text, p))
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
            let inside = function.byte_range().contains(&call.start_byte());
            let value = if inside { parameter } else { argument };
            if let Some(site) = append_item(file, arguments, value) {
                uses.push(site);
                owns.extend(enclosing_fn(*call).map(|f| f.byte_range()));
            }
        }
        if uses.is_empty() {
            continue;
        }
        let Some(signature) = append_item(file, parameters, &format!("{parameter}: {ty}")) else {
            continue;
        };
        uses.sort_by_key(|s| s.range.start);
        let what = format!(
            "parameter `{parameter}: {ty}` on fn `{name}`, then {} call site(s)",
            uses.len()
        );
        out.push(Candidate {
            kind: Kind::Signature,
            what,
            owns,
            sites: std::iter::once(signature).chain(uses).collect(),
        });
    }
    out
}
