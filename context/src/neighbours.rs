//! Snippets from other open documents: the most recently edited first, each represented by its
//! chunk most similar (shared identifiers) to the code around the cursor.

use std::collections::HashSet;

use crate::{Language, Neighbour, TokenCounter};

const CHUNK_LINES: usize = 24;
const CHUNK_STRIDE: usize = 12;
/// Lines around the cursor that stand for "what the user is working on".
const AROUND_BEFORE: usize = 30;
const AROUND_AFTER: usize = 10;
/// A chunk sharing fewer identifiers than this (Jaccard) is noise.
const MIN_SIMILARITY: f64 = 0.08;
/// Documents looked at, most recent first; and how much of each is scanned.
const MAX_DOCUMENTS: usize = 16;
const MAX_SCANNED_BYTES: usize = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct Snippets {
    pub(crate) text: String,
    pub(crate) tokens: usize,
}

pub(crate) fn choose(
    window: &str,
    cursor: usize,
    neighbours: &[Neighbour],
    budget: usize,
    counter: &dyn TokenCounter,
    language: Language,
) -> Snippets {
    if budget == 0 || neighbours.is_empty() {
        return Snippets::default();
    }
    let before: Vec<&str> = window[..cursor].lines().rev().take(AROUND_BEFORE).collect();
    let after = window[cursor..].lines().take(AROUND_AFTER);
    let here = identifiers(before.into_iter().chain(after));
    if here.is_empty() {
        return Snippets::default();
    }
    let mut order: Vec<&Neighbour> = neighbours.iter().collect();
    order.sort_by_key(|neighbour| std::cmp::Reverse(neighbour.edited_at));
    let mut picked = Vec::new();
    let mut tokens = 0;
    for neighbour in order.into_iter().take(MAX_DOCUMENTS) {
        let Some(chunk) = best_chunk(&neighbour.text, &here) else {
            continue;
        };
        let snippet = format!(
            "{} {}\n{}\n",
            language.line_comment(),
            neighbour.path,
            chunk.trim_end()
        );
        let cost = counter.count_within(&snippet, budget - tokens);
        if tokens + cost > budget {
            continue;
        }
        tokens += cost;
        picked.push(snippet);
    }
    // The most recent document ends up nearest the code it helps.
    picked.reverse();
    Snippets {
        text: picked.concat(),
        tokens,
    }
}

fn best_chunk<'t>(text: &'t str, here: &HashSet<&str>) -> Option<&'t str> {
    let mut end = MAX_SCANNED_BYTES.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(at, _)| at + 1))
        .filter(|&at| at < text.len())
        .collect();
    let mut best: Option<(f64, &str)> = None;
    for first in (0..starts.len()).step_by(CHUNK_STRIDE) {
        let last = (first + CHUNK_LINES).min(starts.len());
        let end = starts.get(last).copied().unwrap_or(text.len());
        let chunk = &text[starts[first]..end];
        let score = jaccard(&identifiers(chunk.lines()), here);
        if score >= MIN_SIMILARITY && best.is_none_or(|(top, _)| score > top) {
            best = Some((score, chunk));
        }
        if last == starts.len() {
            break;
        }
    }
    best.map(|(_, chunk)| chunk)
}

fn identifiers<'t>(lines: impl Iterator<Item = &'t str>) -> HashSet<&'t str> {
    let mut set = HashSet::new();
    for line in lines {
        for word in line.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            let starts_like_ident = word.chars().next().is_some_and(|c| !c.is_ascii_digit());
            if word.len() >= 3 && starts_like_ident && !KEYWORDS.contains(&word) {
                set.insert(word);
            }
        }
    }
    set
}

fn jaccard(a: &HashSet<&str>, b: &HashSet<&str>) -> f64 {
    let shared = a.intersection(b).count();
    let union = a.len() + b.len() - shared;
    if union == 0 {
        0.0
    } else {
        shared as f64 / union as f64
    }
}

/// Words every file shares; they say nothing about relevance.
const KEYWORDS: &[&str] = &[
    "let", "mut", "pub", "impl", "for", "while", "loop", "match", "return", "self", "Self",
    "struct", "enum", "trait", "use", "mod", "crate", "super", "where", "async", "await", "move",
    "const", "static", "type", "else", "true", "false", "def", "class", "import", "from", "None",
    "not", "and", "elif", "pass", "with", "lambda", "yield", "Some", "Ok", "Err", "String", "Vec",
    "Option", "Result", "usize", "u32", "u64", "i32", "i64", "f32", "f64", "bool", "str",
];
