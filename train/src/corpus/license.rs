//! SPDX licence expressions from `Cargo.toml`: does a crate let the corpus use it under MIT or
//! Apache-2.0 alone?
//!
//! A small recursive-descent evaluator, not a full SPDX implementation: `OR` (and the legacy `/`)
//! needs one accepted side, `AND` needs both, and `X WITH exception` counts as `X` because SPDX
//! exceptions only ever grant extra permissions.

/// Licences that qualify a crate on their own. Anything else (BSD, Zlib, Unicode-3.0, MPL, GPL,
/// ...) only counts when an `OR` offers one of these instead: the issue asks for MIT / Apache-2.0
/// code, and a single pair keeps the attribution story simple.
const ACCEPTED: &[&str] = &["MIT", "Apache-2.0"];

/// Whether `expression` (a crate's `license` field) allows using the crate under MIT or
/// Apache-2.0. Unparseable expressions are rejected.
pub fn allows_mit_or_apache(expression: &str) -> bool {
    let tokens = tokenize(expression);
    let mut parser = Parser { tokens, pos: 0 };
    match parser.or_expr() {
        Some(accepted) if parser.pos == parser.tokens.len() => accepted,
        _ => false,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    /// `OR`, or the `/` that pre-SPDX crates use (`MIT/Apache-2.0`).
    Or,
    And,
    With,
    Id(String),
}

fn tokenize(expression: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, tokens: &mut Vec<Token>| {
        if word.is_empty() {
            return;
        }
        // Operators are upper case in SPDX, but old crates write `MIT or Apache-2.0`.
        let token = match word.to_ascii_uppercase().as_str() {
            "OR" => Token::Or,
            "AND" => Token::And,
            "WITH" => Token::With,
            _ => Token::Id(std::mem::take(word)),
        };
        word.clear();
        tokens.push(token);
    };
    for c in expression.chars() {
        match c {
            '(' | ')' | '/' => {
                flush(&mut word, &mut tokens);
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    _ => Token::Or,
                });
            }
            c if c.is_whitespace() => flush(&mut word, &mut tokens),
            c => word.push(c),
        }
    }
    flush(&mut word, &mut tokens);
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn eat(&mut self, token: &Token) -> bool {
        let hit = self.peek() == Some(token);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn or_expr(&mut self) -> Option<bool> {
        let mut accepted = self.and_expr()?;
        while self.eat(&Token::Or) {
            accepted |= self.and_expr()?;
        }
        Some(accepted)
    }

    fn and_expr(&mut self) -> Option<bool> {
        let mut accepted = self.with_expr()?;
        while self.eat(&Token::And) {
            accepted &= self.with_expr()?;
        }
        Some(accepted)
    }

    fn with_expr(&mut self) -> Option<bool> {
        let accepted = self.primary()?;
        if self.eat(&Token::With) {
            match self.peek() {
                Some(Token::Id(_)) => self.pos += 1,
                _ => return None,
            }
        }
        Some(accepted)
    }

    fn primary(&mut self) -> Option<bool> {
        match self.peek()?.clone() {
            Token::Open => {
                self.pos += 1;
                let accepted = self.or_expr()?;
                self.eat(&Token::Close).then_some(accepted)
            }
            Token::Id(id) => {
                self.pos += 1;
                // SPDX identifiers are case-insensitive; `+` means "or any later version".
                let id = id.trim_end_matches('+');
                Some(ACCEPTED.iter().any(|a| a.eq_ignore_ascii_case(id)))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::allows_mit_or_apache;

    fn check(expression: &str, expected: bool) {
        assert_eq!(
            allows_mit_or_apache(expression),
            expected,
            "licence expression {expression:?}"
        );
    }

    #[test]
    fn accepts_expressions_with_an_mit_or_apache_alternative() {
        check("MIT", true);
        check("Apache-2.0", true);
        check("MIT OR Apache-2.0", true);
        check("Apache-2.0 OR MIT", true);
        check("MIT/Apache-2.0", true);
        check("Apache-2.0 / MIT", true);
        check("Apache-2.0 WITH LLVM-exception", true);
        check("Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT", true);
        check("Unlicense OR MIT", true);
        check("Zlib OR Apache-2.0 OR MIT", true);
        check("BSD-2-Clause OR Apache-2.0 OR MIT", true);
        check("Apache-2.0 OR BSL-1.0", true);
        check("mit or apache-2.0", true);
        check("(MIT OR Apache-2.0)", true);
        check("MIT AND Apache-2.0", true);
    }

    #[test]
    fn rejects_expressions_without_one() {
        check("MPL-2.0", false);
        check("GPL-3.0-or-later", false);
        check("Zlib", false);
        check("Unicode-3.0", false);
        check("BSD-3-Clause", false);
        check("CC0-1.0 OR MIT-0", false);
        // Every `AND` operand must be met, and Unicode-3.0 is not MIT or Apache-2.0.
        check("(MIT OR Apache-2.0) AND Unicode-3.0", false);
        check("MIT AND GPL-2.0", false);
        check("GPL-2.0 WITH Classpath-exception-2.0", false);
    }

    #[test]
    fn rejects_malformed_expressions() {
        check("", false);
        check("MIT OR", false);
        check("(MIT", false);
        check("MIT Apache-2.0", false);
        check("Apache-2.0 WITH", false);
        check("OR MIT", false);
    }
}
