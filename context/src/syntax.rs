//! The questions the context layer asks a tree-sitter tree: does an item or statement start or
//! end here, and is the cursor inside an empty body.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use tree_sitter::{Node, ParseOptions, Parser, Tree};

/// Documents larger than this are parsed only around the cursor when the caller has no tree.
const WHOLE_PARSE_LIMIT: usize = 1 << 20;
const AROUND_BEFORE: usize = 256 << 10;
const AROUND_AFTER: usize = 64 << 10;
/// How long a parse for want of a caller's tree may take, whole and then around the cursor:
/// tree-sitter parses a megabyte in about this (230 ms on the 2-core machine; a 320 KB region
/// in 73 ms), but its error recovery over a large file in some half-typed states takes
/// seconds, and a request does better without a tree (its windows then cut at lines) than
/// waiting for one.
const PARSE_BUDGET: Duration = Duration::from_millis(250);

/// Nodes whose children are items, statements, arms, fields or variants: a line that starts
/// (or ends) one of their children is a clean place to cut a window.
const CONTAINERS: &[&str] = &[
    "source_file",
    "declaration_list",
    "block",
    "match_block",
    "field_declaration_list",
    "enum_variant_list",
];

/// Bodies that, when empty, call for a block-sized canvas.
const BODIES: &[(&str, &str)] = &[
    ("block", "block"),
    ("declaration_list", "impl/trait/mod body"),
    ("match_block", "match with no arms"),
    ("field_declaration_list", "struct body"),
    ("enum_variant_list", "enum body"),
];

/// Parses Rust source; `None` only if tree-sitter gives up (it recovers from syntax errors).
pub fn parse_rust(text: &str) -> Option<Tree> {
    parse_rust_within(text, None)
}

/// [`parse_rust`], `None` also when `budget` runs out first.
fn parse_rust_within(text: &str, budget: Option<Duration>) -> Option<Tree> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_rust::LANGUAGE.into())
        .expect("the bundled tree-sitter-rust grammar matches the tree-sitter ABI");
    let deadline = budget.map(|budget| Instant::now() + budget);
    let mut in_time = |_: &_| match deadline {
        Some(deadline) if Instant::now() >= deadline => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    };
    let bytes = text.as_bytes();
    parser.parse_with_options(
        &mut |at: usize, _| bytes.get(at..).unwrap_or_default(),
        None,
        Some(ParseOptions::new().progress_callback(&mut in_time)),
    )
}

/// Parses `text`, or only the region around `cursor` when the document is large or its whole
/// parse outlasts [`PARSE_BUDGET`]; returns the tree and the byte offset its positions are
/// relative to. `None` when the region's parse outlasts it too.
pub(crate) fn parse_around(text: &str, cursor: usize) -> Option<(Tree, usize)> {
    parse_around_within(text, cursor, [PARSE_BUDGET; 2])
}

/// [`parse_around`] with the whole parse's budget and the region's.
fn parse_around_within(
    text: &str,
    cursor: usize,
    [whole_budget, region_budget]: [Duration; 2],
) -> Option<(Tree, usize)> {
    let around = AROUND_BEFORE + AROUND_AFTER;
    if text.len() <= WHOLE_PARSE_LIMIT {
        let whole = parse_rust_within(text, Some(whole_budget)).map(|tree| (tree, 0));
        if whole.is_some() || text.len() <= around {
            return whole;
        }
    }
    let mut start = cursor.saturating_sub(AROUND_BEFORE);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    // Start on a line so the first item is not cut in half.
    start = text[start..cursor]
        .find('\n')
        .map_or(start, |newline| start + newline + 1);
    let mut end = (cursor + AROUND_AFTER).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    parse_rust_within(&text[start..end], Some(region_budget)).map(|tree| (tree, start))
}

/// A tree whose byte positions are `base` bytes into the document.
#[derive(Clone, Copy)]
pub(crate) struct View<'t> {
    root: Node<'t>,
    base: usize,
}

impl<'t> View<'t> {
    pub(crate) fn new(tree: &'t Tree, base: usize) -> View<'t> {
        View {
            root: tree.root_node(),
            base,
        }
    }

    fn local(&self, offset: usize) -> Option<usize> {
        let local = offset.checked_sub(self.base)?;
        (local <= self.root.end_byte()).then_some(local)
    }

    /// Whether a node that is a direct child of a container starts at `offset`.
    pub(crate) fn starts_unit(&self, offset: usize) -> bool {
        self.local(offset).is_some_and(|local| {
            let node = self.root.descendant_for_byte_range(local, local);
            is_unit_edge(node, |node| node.start_byte() == local)
        })
    }

    /// Whether a node that is a direct child of a container ends at `offset` (exclusive).
    pub(crate) fn ends_unit(&self, offset: usize) -> bool {
        self.local(offset).is_some_and(|local| {
            // The smallest node containing the last byte before `offset`.
            let node = local
                .checked_sub(1)
                .and_then(|last| self.root.descendant_for_byte_range(last, local));
            is_unit_edge(node, |node| node.end_byte() == local)
        })
    }

    /// If the cursor sits inside a body with nothing in it but whitespace, what kind of body.
    pub(crate) fn empty_body_at(&self, text: &str, cursor: usize) -> Option<&'static str> {
        let local = self.local(cursor)?;
        let mut node = self.root.descendant_for_byte_range(local, local)?;
        loop {
            if let Some(&(_, what)) = BODIES.iter().find(|(kind, _)| *kind == node.kind()) {
                let start = node.start_byte() + self.base;
                let end = node.end_byte() + self.base;
                // A tree of more than `text` (a caller's, of the whole document) may end past it.
                let body = text.get(start..end);
                return (start < cursor && cursor < end && body.is_some_and(is_empty_braces))
                    .then_some(what);
            }
            node = node.parent()?;
        }
    }
}

/// Climbs from `node` while `at_edge` holds; true once an item or statement (a named direct
/// child of a container; the container's own braces belong to the container) is reached.
fn is_unit_edge(node: Option<Node<'_>>, at_edge: impl Fn(&Node<'_>) -> bool) -> bool {
    let mut node = node;
    while let Some(current) = node.filter(|n| at_edge(n)) {
        let Some(parent) = current.parent() else {
            return false;
        };
        if CONTAINERS.contains(&parent.kind()) && current.is_named() {
            return true;
        }
        node = Some(parent);
    }
    false
}

/// `{`, whitespace, `}`. (A body still being typed, with no closer, is not a `block` node at
/// all; the indentation heuristic in `canvas` covers it.)
fn is_empty_braces(body: &str) -> bool {
    body.strip_prefix('{')
        .and_then(|inner| inner.strip_suffix('}'))
        .is_some_and(|inner| inner.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a caller's tree, a text is parsed whole within its budget, else around the
    /// cursor within its own, else not at all: a request never waits on a slow parse.
    #[test]
    fn a_parse_for_want_of_a_tree_keeps_to_its_budgets() {
        let unit = "fn f(x: u32) -> u32 { x + 1 }\n";
        let text = unit.repeat(20_000);
        assert!(text.len() > AROUND_BEFORE + AROUND_AFTER && text.len() <= WHOLE_PARSE_LIMIT);
        let cursor = text.len() / 2;
        let plenty = Duration::from_secs(600);
        let (_, base) = parse_around_within(&text, cursor, [plenty, plenty]).unwrap();
        assert_eq!(base, 0, "whole");
        let (tree, base) = parse_around_within(&text, cursor, [Duration::ZERO, plenty]).unwrap();
        assert!(base > 0 && base < cursor, "around the cursor: {base}");
        assert!(tree.root_node().end_byte() <= AROUND_BEFORE + AROUND_AFTER);
        assert!(parse_around_within(&text, cursor, [Duration::ZERO; 2]).is_none());
        // A text no larger than the region is not parsed twice over: cut whole, it goes without.
        let small = unit.repeat(10);
        assert!(parse_around_within(&small, 5, [Duration::ZERO, plenty]).is_none());
        assert_eq!(
            parse_around_within(&small, 5, [plenty, Duration::ZERO])
                .unwrap()
                .1,
            0
        );
    }

    fn view(text: &str) -> (Tree, usize) {
        (parse_rust(text).unwrap(), 0)
    }

    #[test]
    fn items_and_statements_start_and_end_units() {
        let text = "fn a() {\n    let x = f(\n        1,\n    );\n    x\n}\n";
        let (tree, base) = view(text);
        let view = View::new(&tree, base);
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(view.starts_unit(0), "fn item");
        assert!(view.starts_unit(at("let")), "statement");
        assert!(!view.starts_unit(at("1,")), "argument inside a call");
        assert!(view.ends_unit(at(");") + 2), "end of the let statement");
        assert!(!view.ends_unit(at("1,") + 2), "end of an argument");
        assert!(view.ends_unit(text.len() - 1), "end of the fn");
        assert!(
            !view.ends_unit(at("{") + 1),
            "an opening brace ends nothing"
        );
        assert!(
            !view.starts_unit(text.len() - 2),
            "a closing brace starts nothing"
        );
    }

    #[test]
    fn empty_bodies_are_recognised() {
        for (text, what) in [
            ("fn f() {\n    \n}\n", Some("block")),
            (
                "fn f(x: u8) {\n    match x {\n        \n    }\n}\n",
                Some("match with no arms"),
            ),
            ("impl S {\n    \n}\n", Some("impl/trait/mod body")),
            ("fn f() {\n    g();\n    \n}\n", None),
        ] {
            let cursor = text
                .find("\n    \n")
                .map_or_else(|| text.find("        \n").unwrap() + 8, |at| at + 5);
            let (tree, base) = view(text);
            assert_eq!(
                View::new(&tree, base).empty_body_at(text, cursor),
                what,
                "{text:?}"
            );
        }
    }

    #[test]
    fn large_documents_are_parsed_around_the_cursor() {
        let item = "fn f() { let x = 1; }\n";
        let text = item.repeat(3 * WHOLE_PARSE_LIMIT / item.len());
        let cursor = text.len() / 2 / item.len() * item.len();
        let plenty = Duration::from_secs(600);
        let (tree, base) = parse_around_within(&text, cursor, [plenty; 2]).unwrap();
        assert!(base > 0 && tree.root_node().end_byte() < text.len());
        let view = View::new(&tree, base);
        assert!(view.starts_unit(cursor));
        assert!(!view.starts_unit(cursor + 3));
        assert!(!view.starts_unit(0), "outside the parsed region");
    }
}
