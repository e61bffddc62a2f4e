//! Text-match metrics for a completion against the true middle: exact match and edit
//! similarity, both on the texts with surrounding whitespace trimmed (indentation and the final
//! newline are the editor's business, not the model's).

/// Exact match of the trimmed texts.
pub fn exact_match(completion: &str, truth: &str) -> bool {
    completion.trim() == truth.trim()
}

/// `1 - levenshtein / max(len)` over characters of the trimmed texts; 1.0 when both are empty.
pub fn edit_similarity(completion: &str, truth: &str) -> f64 {
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
