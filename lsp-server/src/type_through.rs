//! Typing through a shown suggestion: while the user types the characters the last suggestion
//! predicted, the rest of it is the answer, and the model does not run (Tabby, llama.vim and
//! Zed do the same).
//!
//! The suggestion is remembered at its anchor (the cursor it was computed at) with a little of
//! the text on both sides. A later request on the same document is answered from it when the
//! text around the anchor is unchanged and everything between the anchor and the new cursor is
//! the start of a remembered suggestion, in which case the answer is that suggestion's rest.
//! An explicit request for more candidates than the remembered answer was computed with (the
//! "suggest now" key over an automatic suggestion) runs the model.

use std::collections::HashMap;

use ropey::Rope;

use super::document_key::DocumentKey;

/// How much text on each side of the anchor must be unchanged for the old answer to stand.
const GUARD_BYTES: usize = 256;

struct Shown {
    anchor: usize,
    before: Vec<u8>,
    after: Vec<u8>,
    texts: Vec<String>,
    /// How many candidates the request that computed `texts` asked for.
    asked: usize,
}

/// The last model answer per document.
#[derive(Default)]
pub struct TypeThrough {
    shown: HashMap<DocumentKey, Shown>,
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

    /// Remembers the model's `texts` (best first) computed at byte offset `anchor` of `rope`
    /// for a request that `asked` for that many candidates, unless the cache was cleared since
    /// `generation` was taken.
    pub fn remember(
        &mut self,
        key: &DocumentKey,
        rope: &Rope,
        anchor: usize,
        (texts, asked): (&[String], usize),
        generation: Generation,
    ) {
        if generation != self.generation() {
            return;
        }
        if texts.is_empty() {
            self.shown.remove(key);
            return;
        }
        let start = anchor.saturating_sub(GUARD_BYTES);
        let end = (anchor + GUARD_BYTES).min(rope.len_bytes());
        self.shown.insert(
            key.clone(),
            Shown {
                anchor,
                before: rope.bytes_at(start).take(anchor - start).collect(),
                after: rope.bytes_at(anchor).take(end - anchor).collect(),
                texts: texts.to_vec(),
                asked,
            },
        );
    }

    /// The rest of each remembered suggestion the user is typing through at `cursor`, best
    /// first, for a request that asks for `asked` candidates; `None` when the model has to run
    /// (also when the remembered ones were computed for fewer candidates).
    pub fn answer(
        &self,
        key: &DocumentKey,
        rope: &Rope,
        cursor: usize,
        asked: usize,
    ) -> Option<Vec<String>> {
        let shown = self.shown.get(key).filter(|shown| shown.asked >= asked)?;
        let longest = shown.texts.iter().map(String::len).max()?;
        if cursor < shown.anchor || cursor - shown.anchor >= longest || cursor > rope.len_bytes() {
            return None;
        }
        let start = shown.anchor.checked_sub(shown.before.len())?;
        if !rope
            .bytes_at(start)
            .take(shown.before.len())
            .eq(shown.before.iter().copied())
        {
            return None;
        }
        let typed: Vec<u8> = rope
            .bytes_at(shown.anchor)
            .take(cursor - shown.anchor)
            .collect();
        // What followed the anchor must still follow the cursor (only typing happened), up to
        // the end of the document if the guard reached it.
        let left = rope.len_bytes() - cursor;
        let reached_end = shown.after.len() < GUARD_BYTES;
        if left < shown.after.len() || (reached_end && left != shown.after.len()) {
            return None;
        }
        if !rope
            .bytes_at(cursor)
            .take(shown.after.len())
            .eq(shown.after.iter().copied())
        {
            return None;
        }
        let rests: Vec<String> = shown
            .texts
            .iter()
            .filter(|text| text.as_bytes().starts_with(&typed) && text.len() > typed.len())
            .filter_map(|text| text.get(typed.len()..))
            .filter(|rest| !rest.trim().is_empty())
            .map(str::to_string)
            .collect();
        (!rests.is_empty()).then_some(rests)
    }

    pub fn forget(&mut self, key: &DocumentKey) {
        self.shown.remove(key);
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
        cache.remember(&key(), &rope, cursor, (&texts, 1), generation);
        cache
    }

    fn check(cache: &TypeThrough, text: &str, expect: Option<&[&str]>) {
        let (rope, cursor) = at(text);
        let got = cache.answer(&key(), &rope, cursor, 1);
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
        cache.remember(&key(), &rope, cursor, (&[], 1), generation);
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
            &rope,
            cursor,
            (&["old();".into()], 1),
            before_switch,
        );
        check(&cache, text, None);
        let generation = cache.generation();
        cache.remember(&key(), &rope, cursor, (&["new();".into()], 1), generation);
        check(&cache, text, Some(&["new();"]));
    }

    #[test]
    fn a_request_for_more_candidates_than_were_computed_runs_the_model() {
        let text = "fn f() {\n    let x = $0\n}\n";
        let (rope, cursor) = at(text);
        let cache = remembered(text, &["vec![];"]);
        assert_eq!(cache.answer(&key(), &rope, cursor, 3), None);
        let mut cache = cache;
        let generation = cache.generation();
        let texts = ["vec![];".to_string(), "Vec::new();".to_string()];
        cache.remember(&key(), &rope, cursor, (&texts, 3), generation);
        assert_eq!(cache.answer(&key(), &rope, cursor, 3).unwrap(), texts);
        assert_eq!(cache.answer(&key(), &rope, cursor, 1).unwrap(), texts);
    }
}
