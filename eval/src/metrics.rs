//! Text-match metrics for a completion against the true middle: exact match and edit
//! similarity, both on the texts with surrounding whitespace trimmed (indentation and the final
//! newline are the editor's business, not the model's), except that an empty text is not
//! trimmed into a match: an empty completion (no suggestion) matches only an empty middle, and
//! a whitespace-only middle (a blank line or an indentation to type, 37 of the 1,640 middles of
//! HumanEval-RandomSpanInfilling) is not "matched" by suggesting nothing.
//!
//! Edit similarity is `1 - levenshtein / max(len)` over characters: not the `fuzz.ratio` that
//! RepoCoder and CrossCodeEval report as "ES", so the two are not comparable.

/// Exact match of the trimmed texts; an empty text matches only an empty text.
pub fn exact_match(completion: &str, truth: &str) -> bool {
    if completion.is_empty() || truth.is_empty() {
        return completion.is_empty() && truth.is_empty();
    }
    completion.trim() == truth.trim()
}

/// `1 - levenshtein / max(len)` over characters of the trimmed texts; 1.0 when both are empty,
/// 0.0 when only one is (before trimming: no suggestion is nothing like a blank line to type).
pub fn edit_similarity(completion: &str, truth: &str) -> f64 {
    if completion.is_empty() != truth.is_empty() {
        return 0.0;
    }
    let a: Vec<char> = completion.trim().chars().collect();
    let b: Vec<char> = truth.trim().chars().collect();
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 1.0;
    }
    1.0 - levenshtein(&a, &b) as f64 / longest as f64
}

fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_match_ignores_only_surrounding_whitespace() {
        assert!(exact_match("  x += 1;\n", "x += 1;"));
        assert!(!exact_match("x += 1 ;", "x += 1;"));
    }

    /// No suggestion is not the blank line or indentation a middle asks for (HumanEval's
    /// whitespace-only middles: an empty completion fails there with an IndentationError),
    /// and a suggestion is not the nothing an empty middle asks for.
    #[test]
    fn an_empty_text_matches_only_an_empty_text() {
        for blank in ["\n", "    ", "\n    \n"] {
            assert!(!exact_match("", blank), "{blank:?}");
            assert_eq!(edit_similarity("", blank), 0.0, "{blank:?}");
            assert!(!exact_match(blank, ""), "{blank:?}");
            assert_eq!(edit_similarity(blank, ""), 0.0, "{blank:?}");
        }
        assert!(exact_match("", ""));
        // Two non-empty texts are still compared trimmed: the newline is the editor's.
        assert!(exact_match("\n", "    \n"));
        assert_eq!(edit_similarity("\n", "    \n"), 1.0);
    }

    #[test]
    fn edit_similarity_is_normalised_levenshtein() {
        assert_eq!(edit_similarity("", ""), 1.0);
        assert_eq!(edit_similarity("abc", "abc"), 1.0);
        assert_eq!(edit_similarity("", "abcd"), 0.0);
        // kitten -> sitting: 3 edits over 7 characters.
        assert!((edit_similarity("kitten", "sitting") - (1.0 - 3.0 / 7.0)).abs() < 1e-12);
        // Characters, not bytes.
        assert_eq!(edit_similarity("é", "e"), 0.0);
    }
}
