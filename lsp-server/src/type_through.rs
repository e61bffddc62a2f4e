//! Typing through a shown suggestion: while the user types the characters the last suggestion
//! predicted, the rest of it is the answer, and the model does not run (Tabby, llama.vim and
//! Zed do the same).
//!
//! The suggestion is remembered at its anchor (the cursor it was computed at) with a little of
//! the text on both sides. A later request on the same document is answered from it when the
//! text around the anchor is unchanged and everything between the anchor and the new cursor is
//! the start of a remembered suggestion, in which case the answer is that suggestion's rest.
//! An explicit request for more candidates than the remembered answer was computed with (the
//! "suggest now" key over an automatic suggestion) runs the model; a request for fewer (an
//! automatic one, or the menu's, after "suggest now") gets the best of them.
//!
//! A request made with the client's suggest widget open on an item (VS Code's
//! `selectedCompletionInfo`) is computed on the document with the item applied, and its answer
//! is remembered on that text, next to (not over) the last answer on the document's own text,
//! which the user may still type through once the widget closes. Once the document holds the
//! item's text (the user accepted it), a request there is answered from it, as if the user had
//! typed the item's characters; and a request with the same item selected again (VS Code asks
//! at each keystroke while the widget stays open) is looked up on the text with the item
//! applied, so it is answered only where that text is the one remembered.

use std::collections::HashMap;

use ropey::Rope;

use super::document_key::DocumentKey;

/// How much text on each side of the anchor must be unchanged for the old answer to stand.
const GUARD_BYTES: usize = 256;

/// Which text a suggestion was computed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The document's own.
    Document,
    /// The document with the item selected in the client's suggest widget applied.
    Item,
}

struct Shown {
    basis: Basis,
    anchor: usize,
    before: Vec<u8>,
    after: Vec<u8>,
    texts: Vec<String>,
    /// How many candidates the request that computed `texts` asked for.
    asked: usize,
}

/// The last model answer per document and [`Basis`], the latest first.
#[derive(Default)]
pub struct TypeThrough {
    shown: HashMap<DocumentKey, Vec<Shown>>,
    /// Bumped by `clear`: an answer computed before a model switch must not be remembered
    /// when it arrives after it.
    generation: u64,
}

/// Which model's answers a request will bring: see [`TypeThrough::generation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(u64);

impl TypeThrough {
    /// Taken before a job is submitted and handed back to `remember` with its answer.
    pub fn generation(&self) -> Generation {
        Generation(self.generation)
    }

    /// Forgets every suggestion (the model changed: its suggestions are not the new model's),
    /// including those of requests still running.
    pub fn clear(&mut self) {
        self.shown.clear();
        self.generation += 1;
    }

    /// Remembers the model's `texts` (best first) computed on `basis` at byte offset `anchor`
    /// of `rope` (the text the model was asked about) for a request that `asked` for that many
    /// candidates, in place of the last answer on the same basis, unless the cache was cleared
    /// since `generation` was taken.
    pub fn remember(
        &mut self,
        key: &DocumentKey,
        (basis, rope, anchor): (Basis, &Rope, usize),
        (texts, asked): (&[String], usize),
        generation: Generation,
    ) {
        if generation != self.generation() {
            return;
        }
        let shown = self.shown.entry(key.clone()).or_default();
        shown.retain(|shown| shown.basis != basis);
        if !texts.is_empty() {
            let start = anchor.saturating_sub(GUARD_BYTES);
            let end = (anchor + GUARD_BYTES).min(rope.len_bytes());
            shown.insert(
                0,
                Shown {
                    basis,
                    anchor,
                    before: rope.bytes_at(start).take(anchor - start).collect(),
                    after: rope.bytes_at(anchor).take(end - anchor).collect(),
                    texts: texts.to_vec(),
                    asked,
                },
            );
        }
        if shown.is_empty() {
            self.shown.remove(key);
        }
    }

    /// The rest of each remembered suggestion the user is typing through at `cursor` of `rope`
    /// (the text the request asks about: with its selected item applied, if it has one), best
    /// first and at most `asked` of them, for a request that asks for `asked` candidates; from
    /// the latest answer that applies, whatever text it was computed on; `None` when the model
    /// has to run (also when the remembered ones were computed for fewer candidates).
    pub fn answer(
        &self,
        key: &DocumentKey,
        rope: &Rope,
        cursor: usize,
        asked: usize,
    ) -> Option<Vec<String>> {
        let mut rests = self
            .shown
            .get(key)?
            .iter()
            .filter(|shown| shown.asked >= asked)
            .find_map(|shown| shown.rests(rope, cursor))?;
        // An automatic request after an invoked one (or a menu request, which asks for one)
        // gets what it asked for, not every candidate the invoked one computed.
        rests.truncate(asked);
        Some(rests)
    }

    pub fn forget(&mut self, key: &DocumentKey) {
        self.shown.remove(key);
    }
}

impl Shown {
    /// See [`TypeThrough::answer`].
    fn rests(&self, rope: &Rope, cursor: usize) -> Option<Vec<String>> {
        let longest = self.texts.iter().map(String::len).max()?;
        if cursor < self.anchor || cursor - self.anchor >= longest || cursor > rope.len_bytes() {
            return None;
        }
        let start = self.anchor.checked_sub(self.before.len())?;
        if !rope
            .bytes_at(start)
            .take(self.before.len())
            .eq(self.before.iter().copied())
        {
            return None;
        }
        let typed: Vec<u8> = rope
            .bytes_at(self.anchor)
            .take(cursor - self.anchor)
            .collect();
        // What followed the anchor must still follow the cursor (only typing happened), up to
        // the end of the document if the guard reached it.
        let left = rope.len_bytes() - cursor;
        let reached_end = self.after.len() < GUARD_BYTES;
        if left < self.after.len() || (reached_end && left != self.after.len()) {
            return None;
        }
        if !rope
            .bytes_at(cursor)
            .take(self.after.len())
            .eq(self.after.iter().copied())
        {
            return None;
        }
        let rests: Vec<String> = self
            .texts
            .iter()
            .filter(|text| text.as_bytes().starts_with(&typed) && text.len() > typed.len())
            .filter_map(|text| text.get(typed.len()..))
            .filter(|rest| !rest.trim().is_empty())
            .map(str::to_string)
            .collect();
        (!rests.is_empty()).then_some(rests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> DocumentKey {
        DocumentKey::parse("file:///t/a.rs")
    }

    /// `$0` marks the cursor.
    fn at(text: &str) -> (Rope, usize) {
        let cursor = text.find("$0").unwrap();
        (Rope::from_str(&text.replace("$0", "")), cursor)
    }

    fn remembered(text: &str, suggestions: &[&str]) -> TypeThrough {
        let (rope, cursor) = at(text);
        let mut cache = TypeThrough::default();
        let texts: Vec<String> = suggestions.iter().map(|s| s.to_string()).collect();
        let generation = cache.generation();
        cache.remember(
            &key(),
            (Basis::Document, &rope, cursor),
            (&texts, CANDIDATES),
            generation,
        );
        cache
    }

    /// What the remembered answers and the checks ask for: room for every suggestion a test
    /// remembers.
    const CANDIDATES: usize = 3;

    fn check(cache: &TypeThrough, text: &str, expect: Option<&[&str]>) {
        let (rope, cursor) = at(text);
        let got = cache.answer(&key(), &rope, cursor, CANDIDATES);
        let expect = expect.map(|e| e.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(got, expect, "at {text:?}");
    }

    #[test]
    fn typing_through_answers_the_rest() {
        let cache = remembered(
            "fn f() {\n    let x = $0\n}\n",
            &["vec![1, 2];", "Vec::new();"],
        );
        check(
            &cache,
            "fn f() {\n    let x = $0\n}\n",
            Some(&["vec![1, 2];", "Vec::new();"]),
        );
        check(
            &cache,
            "fn f() {\n    let x = v$0\n}\n",
            Some(&["ec![1, 2];"]),
        );
        check(
            &cache,
            "fn f() {\n    let x = V$0\n}\n",
            Some(&["ec::new();"]),
        );
        check(
            &cache,
            "fn f() {\n    let x = vec![1$0\n}\n",
            Some(&[", 2];"]),
        );
        // Typed all of it, or something else: the model runs.
        check(&cache, "fn f() {\n    let x = vec![1, 2];$0\n}\n", None);
        check(&cache, "fn f() {\n    let x = w$0\n}\n", None);
        // Text changed before the anchor, or after the cursor.
        check(&cache, "fn g() {\n    let x = v$0\n}\n", None);
        check(&cache, "fn f() {\n    let x = v$0\n}\n// more\n", None);
        check(&cache, "fn f() {\n    let x = v$0\n", None);
        // Cursor moved before the anchor.
        check(&cache, "fn f() {\n    let x =$0 \n}\n", None);
    }

    #[test]
    fn multi_line_suggestions_survive_newlines_and_whitespace_rests_are_dropped() {
        let cache = remembered("fn f() {\n    $0\n}", &["a();\n    b();", "a();\n    "]);
        check(&cache, "fn f() {\n    a();\n    $0\n}", Some(&["b();"]));
        let mut cache = cache;
        cache.forget(&key());
        check(&cache, "fn f() {\n    a();\n    $0\n}", None);
    }

    #[test]
    fn empty_answers_are_not_remembered() {
        let (rope, cursor) = at("x$0");
        let mut cache = remembered("x$0", &["y"]);
        let generation = cache.generation();
        cache.remember(
            &key(),
            (Basis::Document, &rope, cursor),
            (&[], CANDIDATES),
            generation,
        );
        check(&cache, "x$0", None);
    }

    #[test]
    fn a_model_switch_forgets_every_suggestion_and_those_still_being_computed() {
        let text = "fn f() {\n    let x = $0\n}\n";
        let mut cache = remembered(text, &["vec![];"]);
        let (rope, cursor) = at(text);
        let before_switch = cache.generation();
        cache.clear();
        check(&cache, text, None);
        // A request that started before the switch answers after it: not remembered.
        cache.remember(
            &key(),
            (Basis::Document, &rope, cursor),
            (&["old();".into()], CANDIDATES),
            before_switch,
        );
        check(&cache, text, None);
        let generation = cache.generation();
        cache.remember(
            &key(),
            (Basis::Document, &rope, cursor),
            (&["new();".into()], CANDIDATES),
            generation,
        );
        check(&cache, text, Some(&["new();"]));
    }

    #[test]
    fn a_request_for_more_candidates_than_were_computed_runs_the_model() {
        let text = "fn f() {\n    let x = $0\n}\n";
        let (rope, cursor) = at(text);
        let mut cache = TypeThrough::default();
        let generation = cache.generation();
        cache.remember(
            &key(),
            (Basis::Document, &rope, cursor),
            (&["vec![];".into()], 1),
            generation,
        );
        assert_eq!(cache.answer(&key(), &rope, cursor, 3), None);
        let generation = cache.generation();
        let texts = ["vec![];".to_string(), "Vec::new();".to_string()];
        cache.remember(
            &key(),
            (Basis::Document, &rope, cursor),
            (&texts, 3),
            generation,
        );
        assert_eq!(cache.answer(&key(), &rope, cursor, 3).unwrap(), texts);
        // Fewer asked (an automatic request after an invoked one): the best ones, no more.
        assert_eq!(cache.answer(&key(), &rope, cursor, 1).unwrap(), texts[..1]);
        // Typed through past where the best one parts: the best of those that still apply.
        let (typed, cursor) = at("fn f() {\n    let x = V$0\n}\n");
        assert_eq!(
            cache.answer(&key(), &typed, cursor, 1).unwrap(),
            ["ec::new();"]
        );
    }

    /// An answer computed with the suggest widget's item applied stands next to the one on the
    /// document's own text: each answers where the text is its own, the latest first.
    #[test]
    fn an_answer_with_the_item_applied_stands_next_to_the_documents_own() {
        let with_item = "fn f() {\n    let x = drop_in_place$0\n}\n";
        let mut cache = remembered("fn f() {\n    let x = dr$0\n}\n", &["op(a);"]);
        let generation = cache.generation();
        let remember = |cache: &mut TypeThrough, basis, text, texts: &[String]| {
            let (rope, cursor) = at(text);
            cache.remember(
                &key(),
                (basis, &rope, cursor),
                (texts, CANDIDATES),
                generation,
            );
        };
        remember(&mut cache, Basis::Item, with_item, &["(p);".into()]);
        // The item accepted, and typed through.
        check(&cache, with_item, Some(&["(p);"]));
        check(
            &cache,
            "fn f() {\n    let x = drop_in_place($0\n}\n",
            Some(&["p);"]),
        );
        // Another item, or the same one inserted before the rest of a word: not its text.
        check(&cache, "fn f() {\n    let x = drop_in$0\n}\n", None);
        check(&cache, "fn f() {\n    let x = drop_in_place$0op\n}\n", None);
        // The document's own answer is still there for the user typing on without the item.
        check(&cache, "fn f() {\n    let x = dro$0\n}\n", Some(&["p(a);"]));
        // Where both apply, the latest answers.
        let own = "fn f() {\n    let x = drop$0\n}\n";
        remember(&mut cache, Basis::Document, own, &["_in_place(c);".into()]);
        check(&cache, with_item, Some(&["(c);"]));
        remember(&mut cache, Basis::Item, with_item, &["(a, b);".into()]);
        check(&cache, with_item, Some(&["(a, b);"]));
        // An item that gets no suggestion forgets only the item's answer.
        remember(&mut cache, Basis::Item, with_item, &[]);
        check(&cache, with_item, Some(&["(c);"]));
    }
}
